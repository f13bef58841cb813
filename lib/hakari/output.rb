# frozen_string_literal: true

require_relative "engine" # the list of formats (Hakari::Native.formats)

module Hakari
  # Where a profile goes, and how it gets there without harm:
  # - a symbolic link is followed: the profile goes to its target, and the link stays;
  # - a device or FIFO that exists (/dev/stdout, /dev/null, a named pipe) is written in place;
  # - anything else is written to a temporary file beside it, then renamed over it, so that
  #   a failed write leaves neither a partial profile nor a lost old one.
  # Checked before profiling starts (Hakari.start output:, the CLI's -o), so that a long run
  # is not wasted on a path that was never writable.
  module Output
    module_function

    # The absolute path the profile will be written to: path with its symbolic links followed,
    # dangling ones too (their target is created).
    def target(path)
      abs = File.expand_path(path)
      # a directory, device or FIFO, found through any links (stat follows them, including
      # /proc's, such as /dev/stdout's, whose text is no path): written in place or refused
      return abs if File.exist?(abs) && !File.file?(abs)
      40.times do # the kernel's own limit on a chain of links
        break unless File.symlink?(abs)
        abs = File.expand_path(File.readlink(abs), File.dirname(abs))
      end
      abs
    end

    # The file written when no path is given, named so that the format is known from the name
    # again (Hakari.format_for): hakari.pb.gz, hakari.collapsed, callgrind.out.hakari, ...
    def default_path(format)
      formats = Native.formats
      (formats.assoc(format&.to_sym) || formats.first)[1]
    end

    # Why nothing can be written to path, as a phrase, or nil when it can.
    def problem(path)
      return "the path is empty" if path.empty?
      abs = target(path)
      return "it is a directory" if File.directory?(abs)
      return (File.writable?(abs) ? nil : "#{abs} is not writable") if in_place?(abs)
      dir = File.dirname(abs)
      return "directory #{dir} does not exist" unless File.directory?(dir)
      return "directory #{dir} is not writable" unless File.writable?(dir)
      return "the file is not writable" if File.exist?(abs) && !File.writable?(abs)
      try_create(dir)
    end

    # Writes bytes to path as described above. Raises SystemCallError.
    def write(path, bytes)
      abs = target(path)
      return File.open(abs, File::WRONLY | File::BINARY) { |f| f.write(bytes) } if in_place?(abs)
      tmp = "#{abs}.#{Process.pid}.tmp"
      begin
        File.binwrite(tmp, bytes)
        File.rename(tmp, abs)
      ensure
        File.unlink(tmp) if File.exist?(tmp)
      end
    end

    # an existing file that is neither regular nor a directory: a device, FIFO or socket
    def in_place?(abs) = File.exist?(abs) && !File.file?(abs) && !File.directory?(abs)

    # A directory can say it is writable and still take no new file (/proc, a read-only
    # mount seen by root): create one to know.
    def try_create(dir)
      probe = File.join(dir, ".hakari-probe-#{Process.pid}-#{rand(1 << 32)}")
      File.open(probe, File::WRONLY | File::CREAT | File::EXCL, 0o600) {}
      File.unlink(probe)
      nil
    rescue SystemCallError => e
      "no file can be created in #{dir} (#{reason(e)})"
    end

    # the system's words for the error, without Ruby's " @ function - path" suffix
    def reason(error) = SystemCallError.new(nil, error.errno).message
  end
end
