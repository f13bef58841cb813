# frozen_string_literal: true

require "tmpdir"
require_relative "session"

module Hakari
  class CLI
    # The command could not be started at all (not found, not executable).
    class CommandError < StandardError
      attr_reader :exit_code

      def initialize(message, exit_code)
        super(message)
        @exit_code = exit_code
      end
    end

    # Runs the command with autorun injected and collects what it left behind. No
    # profiling happens here: this process only sets the environment, spawns, waits and reads.
    class Runner
      LIB_DIR = File.expand_path("../..", __dir__) # the dir holding hakari.rb and hakari/

      # exit_code: the command's, a signal death as 128+signo. claimed_pid: the Ruby process
      # that took the claim, or nil if none loaded autorun. result: Session.read_result.
      Outcome = Struct.new(:exit_code, :real_ns, :rusage, :claimed_pid, :result, :report,
                           keyword_init: true)

      def initialize(options)
        @o = options
      end

      def run
        Dir.mktmpdir("hakari-") do |dir|
          before = Hakari::Native.children_rusage
          t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
          status = wait_for(spawn(child_env(dir)))
          real_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0
          after = Hakari::Native.children_rusage
          Outcome.new(exit_code: status.exited? ? status.exitstatus : 128 + status.termsig,
                      real_ns: real_ns, rusage: rusage_delta(before, after),
                      claimed_pid: read_if_exists(dir, Session::CLAIM_FILE)&.to_i,
                      result: Session.read_result(dir),
                      report: read_if_exists(dir, Session::REPORT_FILE))
        end
      end

      # Every HAKARI_* variable is set or explicitly removed, so a stale one in the user's
      # environment cannot change what this run does.
      def child_env(dir)
        env = Session::ALL_ENV.to_h { |k| [k, nil] }
        env[Session::ENV_DIR] = dir
        env[Session::ENV_MODE] = @o.mode.to_s
        env[Session::ENV_MEASURE] = @o.measure.to_s if @o.measure
        env[Session::ENV_ALLOCATIONS] = "1" if @o.allocations
        env[Session::ENV_MAX_PATHS] = @o.max_paths.to_s if @o.max_paths
        env[Session::ENV_FREQUENCY] = @o.frequency.to_s if @o.frequency
        env[Session::ENV_INTERVAL] = @o.interval.to_s if @o.interval
        env[Session::ENV_WATCH] = @o.watch.to_s if @o.watch
        env[Session::ENV_OUTPUT] = @o.output if @o.output
        env[Session::ENV_FORMAT] = @o.format.to_s if @o.format
        env[Session::ENV_VERBOSE] = "1" if @o.verbose
        env[Session::ENV_SYNTHESIZE] = "0" if @o.no_synthesize
        env[Session::ENV_REPORT] = "1" if @o.print || @o.report
        env[Session::ENV_FORK] = @o.fork.to_s if @o.fork
        env[Session::ENV_EVERY] = @o.every.to_s if @o.every
        env["RUBYLIB"] = [LIB_DIR, ENV["RUBYLIB"]].compact.reject(&:empty?).join(File::PATH_SEPARATOR)
        env["RUBYOPT"] = ["-rhakari/autorun", ENV["RUBYOPT"]].compact.reject(&:empty?).join(" ")
        env
      end

      private

      def spawn(env)
        # [cmd, argv0] form: always exec directly, never through a shell, whatever the
        # command looks like (`hakari record "ruby x.rb"` is a command named "ruby x.rb").
        Process.spawn(env, [@o.argv[0], @o.argv[0]], *@o.argv[1..])
      rescue Errno::ENOENT
        raise CommandError.new("command not found: #{@o.argv[0]}", 127)
      rescue SystemCallError => e
        raise CommandError.new("cannot run #{@o.argv[0]}: #{e.message.sub(/ - .*\z/m, "")}", 126)
      end

      # Like time(1): Ctrl-C and Ctrl-\ reach the child through the terminal, so this process
      # just outlives it to report; TERM and HUP sent to us alone are passed on.
      def wait_for(pid)
        old = {}
        %w[INT QUIT].each { |sig| old[sig] = trap(sig) {} }
        %w[TERM HUP].each do |sig|
          old[sig] = trap(sig) { Process.kill(sig, pid) rescue nil } # rubocop:disable Style/RescueModifier
        end
        Process.wait2(pid)[1]
      ensure
        old.each { |sig, handler| trap(sig, handler || "DEFAULT") }
      end

      # maxrss is a high-water mark, not a counter: it is taken as is.
      def rusage_delta(before, after)
        after.to_h { |k, v| [k, k == :maxrss_kb ? v : v - before.fetch(k, 0)] }
      end

      def read_if_exists(dir, name)
        path = File.join(dir, name)
        File.file?(path) ? File.read(path) : nil
      end
    end
  end
end
