# frozen_string_literal: true

# Profiles the whole Ruby process that requires it: `hakari record|stat|exec` load it into
# the command through RUBYOPT=-rhakari/autorun, and it can be used by hand:
#
#   RUBYOPT=-rhakari/autorun HAKARI_OUTPUT=out.pb.gz ruby app.rb
#
# Only one Ruby process of a command tree profiles. Under the CLI (HAKARI_SESSION set) the
# first process to create the session's claim file with O_EXCL wins, which also covers
# siblings such as `sh -c "ruby a.rb; ruby b.rb"`; standalone, the winner's pid is put in
# ENV so its descendants step aside. A process that exec'd itself keeps its pid and its
# claim: the image that claimed never reached at_exit, so the new image takes over.
# A forked child inherits the running profiler but must not write: at_exit compares pids.
#
# A profiler must never take its program down: every failure here is one warning line
# (and, under the CLI, a status in the result file); the program's exit status is untouched.

require_relative "cli/session"
require_relative "output"

module Hakari
  module Autorun
    S = CLI::Session

    module_function

    def claim(env = ENV)
      dir = env[S::ENV_DIR]
      return standalone_claim(env) if dir.nil? || dir.empty?
      path = File.join(dir, S::CLAIM_FILE)
      begin
        File.open(path, File::WRONLY | File::CREAT | File::EXCL, 0o600) { |f| f.write(Process.pid.to_s) }
        true
      rescue Errno::EEXIST
        File.read(path).strip == Process.pid.to_s
      rescue SystemCallError
        false # the CLI already cleaned up its session: nobody is waiting for us
      end
    end

    def standalone_claim(env)
      owner = env[S::ENV_CLAIMED]
      return owner == Process.pid.to_s if owner && !owner.empty?
      env[S::ENV_CLAIMED] = Process.pid.to_s
      true
    end

    # Settings as Hakari.start keywords; bad values raise ArgumentError from Hakari.start.
    def start_options(env = ENV)
      opts = {}
      opts[:mode] = env[S::ENV_MODE].to_sym if env[S::ENV_MODE]
      opts[:measure] = env[S::ENV_MEASURE].to_sym if env[S::ENV_MEASURE]
      opts[:allocations] = flag(S::ENV_ALLOCATIONS, env[S::ENV_ALLOCATIONS]) if env[S::ENV_ALLOCATIONS]
      opts[:max_paths] = max_paths(env[S::ENV_MAX_PATHS]) if env[S::ENV_MAX_PATHS]
      opts[:frequency] = frequency(env[S::ENV_FREQUENCY]) if env[S::ENV_FREQUENCY]
      opts[:interval] = interval(env[S::ENV_INTERVAL]) if env[S::ENV_INTERVAL]
      opts[:watch] = watch(env[S::ENV_WATCH]) if env[S::ENV_WATCH]
      opts[:verbose] = true if env[S::ENV_VERBOSE] == "1"
      opts[:synthesize] = synthesize(env[S::ENV_SYNTHESIZE]) if env[S::ENV_SYNTHESIZE]
      opts[:fork] = env[S::ENV_FORK].to_sym if env[S::ENV_FORK]
      if env[S::ENV_EVERY]
        opts[:every] = Float(env[S::ENV_EVERY])
        opts[:output_dir] = env[S::ENV_OUTPUT]
      end
      opts
    end

    # true or false, or ArgumentError naming the variable, its value and what is accepted
    def synthesize(value) = flag(S::ENV_SYNTHESIZE, value)

    def flag(name, value)
      return value == "1" if %w[0 1].include?(value)

      raise ArgumentError, "invalid #{name} #{value.inspect} (expected 0 or 1)"
    end

    # an integer, or ArgumentError naming the variable, its value and the range; the range
    # itself is checked by Hakari.start
    def frequency(value)
      return Integer(value, 10) if value.match?(/\A[0-9]+\z/) # not " 100", "1_0" or "+10", as -f

      raise ArgumentError, "invalid #{S::ENV_FREQUENCY} #{value.inspect} (expected an integer from " \
                           "#{Hakari::Native::MIN_FREQUENCY} to #{Hakari::Native::MAX_FREQUENCY})"
    end

    # an integer, or ArgumentError naming the variable and its value; Hakari.start checks the range
    def max_paths(value)
      return Integer(value, 10) if value.match?(/\A[0-9]+\z/)

      raise ArgumentError, "invalid #{S::ENV_MAX_PATHS} #{value.inspect} (expected an integer from 1 to #{Hakari::Native::MAX_MAX_PATHS})"
    end

    # an integer, or ArgumentError naming the variable and its value; Hakari.start checks the range
    def interval(value)
      return Integer(value, 10) if value.match?(/\A[0-9]+\z/)

      raise ArgumentError, "invalid #{S::ENV_INTERVAL} #{value.inspect} (expected an integer from 1 to #{Hakari::Native::MAX_INTERVAL})"
    end

    # a share of the objects, or ArgumentError naming the variable and its value; Hakari.start checks the range
    def watch(value)
      return Float(value) if value.match?(/\A[0-9]*\.?[0-9]+\z/)

      raise ArgumentError, "invalid #{S::ENV_WATCH} #{value.inspect} (expected a share of the objects from 0.001 to 1)"
    end

    def start(env = ENV)
      @dir = env[S::ENV_DIR]
      @dir = nil if @dir&.empty?
      # Standalone there is nobody to print a report, so a file is the only output.
      @format = env[S::ENV_FORMAT]&.to_sym
      @output = env[S::ENV_OUTPUT] || (@dir ? nil : Output.default_path(@format))
      @snapshots = env[S::ENV_EVERY] ? @output : nil # a directory: Hakari.stop writes the last file there
      @output = nil if @snapshots
      @report = env[S::ENV_REPORT] == "1"
      @pid = Process.pid
      require "hakari"
      Hakari.send(:check_format, env[S::ENV_FORMAT]) # now: a bad format must not cost the whole run
      @gc_before = GC.stat # before start: the profiler's own setup is not the program's GC
      @gc_after = {} # made now: an allocation in finish, before stop, could run a GC step there
      at_exit { finish } # before start, or trace mode would count the call
      Hakari.start(**start_options(env))
      @started = true
      if Hakari.pause # trace mode
        resume_at_the_first_script
      elsif @output
        Hakari.send(:fork_output, @output) # fork: :inherit names the children's files from it
      end
      # The profile's time ends in an exit hook registered now, which runs before the one
      # above (the last registered runs first) and after the program's own: no frame of
      # finish's can be sampled, however late a tick's job lands, and a trace counts none of it.
      Hakari::Native.end_at_exit(@gc_after)
    rescue StandardError, ScriptError => e
      fail_with("could not start profiling: #{e.message}")
    end

    # Trace mode (the one mode that pauses): this file is loaded by a require, whose rest
    # (rubygems' bookkeeping, ~50 calls) is hakari's loading, not the program. Counting starts
    # when the first script is compiled: the main one, or a library required before it.
    def resume_at_the_first_script
      tp = TracePoint.new(:script_compiled) do
        tp.disable
        Hakari.resume
      end
      tp.enable
    end

    def finish
      return unless @started
      # trace mode: the calls below are not the program's (pause does nothing in the other modes)
      Hakari.pause
      return unless Process.pid == @pid # a forked child: the parent writes
      # read by the engine as the program's time ends: building the profile is the profiler's
      # cost, not the program's, and a GC.stat called here could be sampled under this method
      data = Hakari.stop(gc_stat_into: @gc_after)
      return fail_with("profiling was stopped by the program before exit (Hakari.stop)") unless data
      result = { "status" => "ok", "pid" => @pid, "stop_ns" => Hakari::Native.last_stop_ns }
      data.counters.each { |k, v| result[k.to_s] = v }
      gc_deltas(@gc_before, @gc_after).each { |k, v| result[k] = v }
      case data[:mode]
      when :object, :retained
        result["top_classes"] = top_classes(data)
        result["object_bytes"] = data[:samples].sum { |row| row[-2] } # the row's bytes, before its label set
      when :trace then nil
      else states(data).each { |k, v| result[k] = v }
      end
      S.write_atomic(File.join(@dir, S::REPORT_FILE), data.encode(:text)) if @dir && @report
      result["output"] = @snapshots if @snapshots
      if @output
        begin
          began = now_ns
          Hakari.save(@output, data, format: @format)
          result["write_ns"] = now_ns - began
          result["output_bytes"] = File.size(@output) if File.file?(@output)
          result["output"] = @output
        rescue StandardError => e
          result["status"] = "error"
          result["error"] = save_error(e)
          warn "hakari: #{result["error"]}" unless @dir # under the CLI, the parent says it
        end
      end
      S.write_result(@dir, result) if @dir
    rescue StandardError => e
      fail_with("could not finish profiling: #{e.message}")
    end

    def now_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

    STATE_FRAMES = { "[GVL blocked]" => "blocked", "[GVL wait]" => "wait", "[GC marking]" => "gc_marking",
                     "[GC sweeping]" => "gc_sweeping" }.freeze

    # For `hakari stat`: the time by state (the samples' leaves), and the calls that blocked
    # most (the frame above [GVL blocked]), as "name=ns" pairs, largest first.
    def states(data)
      time = Hash.new(0)
      blocking = Hash.new(0)
      data[:samples].each do |frames, weight|
        state = STATE_FRAMES.fetch(frames.first[0], "running")
        time[state] += weight
        blocking[frames[1][0]] += weight if state == "blocked" && frames[1]
      end
      out = %w[running blocked wait gc_marking gc_sweeping].to_h { |s| ["state_#{s}_ns", time[s]] }
      out["blocking_calls"] = blocking.max_by(5) { _2 }.map { |name, ns| "#{name}=#{ns}" }.join(" ")
      out
    end

    # For `hakari stat` in object mode: the classes with the most objects, as "name=count" pairs
    def top_classes(data)
      data.label_values("class").reject { |name, _| name.nil? }.max_by(5) { _2 }.map { |name, n| "#{name.tr(' =', '_')}=#{n}" }.join(" ")
    end

    # one line: the path and why (the system's words for a failed write)
    def save_error(error)
      why = error.is_a?(SystemCallError) ? Output.reason(error) : error.message
      return why if why.include?(@output)
      "cannot write profile to #{@output.inspect}: #{why}"
    end

    def gc_deltas(before, after)
      {
        "gc_count" => after[:count] - before[:count],
        "gc_minor" => after[:minor_gc_count] - before[:minor_gc_count],
        "gc_major" => after[:major_gc_count] - before[:major_gc_count],
        "gc_time_ms" => after.fetch(:time, 0) - before.fetch(:time, 0), # :time is 3.1+, in ms
        "allocated_objects" => after[:total_allocated_objects] - before[:total_allocated_objects],
        "freed_objects" => after[:total_freed_objects] - before[:total_freed_objects],
      }
    end

    def fail_with(message)
      if @dir
        S.write_result(@dir, { "status" => "error", "pid" => Process.pid, "error" => message })
      else
        warn "hakari: #{message}"
      end
    rescue StandardError
      warn "hakari: #{message}"
    end
  end
end

Hakari::Autorun.start if Hakari::Autorun.claim
