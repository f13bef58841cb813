# frozen_string_literal: true

require "fileutils"

module Hakari
  # Continuous snapshots (Hakari.start's every:, output_dir:, keep:, signal:): a long-running
  # process writes the profile of each period to a file of its own without stopping, on a
  # thread of hakari's (never sampled: its CPU, in cpu mode, is in the [native threads] sample).
  #
  #   Hakari.start(mode: :wall, every: 60, output_dir: "tmp/profiles", keep: 100)
  #
  # Files are hakari-PID-SEQ-TIME.pb.gz (or the format's own ending), SEQ counting from 1, TIME
  # the period's end in UTC; each is written whole (a temporary name, then a rename), and past
  # `keep` files of this process the oldest go. Stop writes the last period's file. With
  # signal: "USR2", that signal writes a file at once (the period starts over there).
  class Snapshots
    DEFAULT_KEEP = 100

    # ArgumentError naming the bad value, before anything starts; nil when every: is not given
    def self.check(every:, output_dir:, keep:, signal:, output:)
      if every.nil?
        given = { output_dir: output_dir, keep: keep, signal: signal }.compact.keys
        raise ArgumentError, "#{given.map { |k| "#{k}:" }.join(', ')} only apply with every: (snapshots)" if given.any?

        return nil
      end
      unless every.is_a?(Numeric) && every.real? && every.positive? && every.finite?
        raise ArgumentError, "invalid every: #{every.inspect} (expected a number of seconds above 0)"
      end
      raise ArgumentError, "every: writes to output_dir:, not output: (#{output.inspect})" if output
      unless output_dir.is_a?(String) && !output_dir.empty?
        raise ArgumentError, "invalid output_dir: #{output_dir.inspect} (expected the path of a directory)"
      end
      keep = DEFAULT_KEEP if keep.nil?
      raise ArgumentError, "invalid keep: #{keep.inspect} (expected an Integer, 1 or more)" unless keep.is_a?(Integer) && keep >= 1
      check_signal(signal)
      check_dir(output_dir)
      { every: every.to_f, dir: File.expand_path(output_dir), keep: keep, signal: signal }
    end

    def self.check_signal(signal)
      return if signal.nil?
      name = signal.to_s.delete_prefix("SIG")
      return if Signal.list.key?(name) && !%w[KILL STOP VTALRM SEGV BUS ILL FPE EXIT].include?(name)

      raise ArgumentError, "invalid signal: #{signal.inspect} (expected a signal name such as \"USR2\")"
    end

    # made when missing; a problem is an ArgumentError naming the directory and why
    def self.check_dir(dir)
      FileUtils.mkdir_p(dir)
      problem = Output.problem(File.join(dir, "hakari-check.pb.gz"))
      raise ArgumentError, "cannot write snapshots to #{dir.inspect}: #{problem}" if problem
    rescue SystemCallError => e
      raise ArgumentError, "cannot write snapshots to #{dir.inspect}: #{Output.reason(e)}"
    end

    attr_reader :written

    def initialize(settings, format)
      @every = settings[:every]
      @dir = settings[:dir]
      @keep = settings[:keep]
      @signal = settings[:signal]&.to_s&.delete_prefix("SIG")
      @format = format || :pprof
      @seq = 0
      @written = []
      @stopping = false
      @flush = false
    end

    # the writer thread, and the signal's handler
    def start
      @pid = Process.pid
      @thread = Thread.new { run }
      # before it first runs: its wait for the GVL, which the program holds, is not sampled either
      Native.own_thread(@thread)
      @thread.name = "hakari-snapshots"
      @old_trap = Signal.trap(@signal) { request_flush } if @signal
      self
    end

    # the writer ends (after the engine's stop: a snapshot then finds nothing running)
    def halt
      @stopping = true
      begin
        @thread&.wakeup
      rescue ThreadError
        nil # it has ended
      end
      @thread&.join
      Signal.trap(@signal, @old_trap || "DEFAULT") if @signal && Process.pid == @pid
    end

    # the last period's profile, from stop, to its own file
    def write_last(profile) = write(profile)

    private

    def request_flush
      @flush = true
      @thread&.wakeup
    rescue ThreadError
      nil # the writer has ended
    end

    def run
      due = now + @every
      until @stopping
        left = due - now
        sleep(left) if left.positive? && !@flush
        next if @stopping
        next unless @flush || now >= due

        # the next period ends a period after this one should have: late wake-ups (the GVL
        # is another thread's) do not add up; a flush starts the count over
        due = @flush || now - due > @every ? now + @every : due + @every
        @flush = false
        profile = Native.snapshot(true)
        write(profile) if profile
      end
    rescue StandardError => e
      warn "hakari: snapshots stopped: #{e.message}"
    end

    def write(profile)
      @seq += 1
      name = file_name(Time.now.utc)
      # this process's files past keep go, oldest first, as the new one comes
      drop = @written.size >= @keep ? File.join(@dir, @written.shift) : nil
      Native.write_file(File.join(@dir, name), profile.encode(@format), drop)
      @written << name
    rescue SystemCallError, IOError => e
      why = e.is_a?(SystemCallError) ? Output.reason(e) : e.message
      warn "hakari: cannot write snapshot #{name} in #{@dir}: #{why}" # the program runs on
    end

    def file_name(time)
      stem = format("hakari-%d-%06d-%s", Process.pid, @seq, time.strftime("%Y%m%dT%H%M%S.%LZ"))
      Output.default_path(@format).sub("hakari", stem) # hakari.pb.gz, callgrind.out.hakari, ...
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
