# frozen_string_literal: true

require_relative "hakari/version"
require_relative "hakari/output"
require_relative "hakari/engine"
require_relative "hakari/forks"
require_relative "hakari/ractors"
require_relative "hakari/snapshots"

# hakari — a Ruby profiler with a C engine. See the README for the returned data's shape.
module Hakari
  MODES = %i[cpu wall object retained trace].freeze
  MEASURES = %i[wall cpu allocations].freeze
  # the output formats, from the engine's one list of them (ext/hakari/format/formats.c)
  FORMATS = Native.formats.map(&:first).freeze
  DEFAULT_FREQUENCY = 1000
  # objects per sample: mode: :object's, and mode: :retained's (every object)
  DEFAULT_INTERVAL = 100
  DEFAULT_RETAINED_INTERVAL = 1
  # mode: :object's share of the objects Ruby's NEWOBJ hook watches: every one (watch windows, below 1,
  # are asked for: they blur short phases of the program)
  DEFAULT_WATCH = 1
  DEFAULT_MAX_DEPTH = 1024

  # A finished (or snapshot) profile: the C model with its counters.
  # #counters is cheap; #to_h (and #[] for :samples) builds Ruby objects for every sample, once.
  class Profile
    def [](key) = %i[samples label_sets].include?(key) ? to_h[key] : counters_memo[key]

    def to_h = (@to_h ||= counters_memo.merge(samples: samples, label_sets: label_sets).freeze)

    def counters_memo = (@counters ||= counters.freeze)
    private :counters_memo

    # counters only: a trace's samples are its call paths, maybe millions
    def inspect
      h = counters_memo
      count = h[:mode] == :trace ? "calls=#{h[:call_count]} paths=#{h[:node_count]}" : "samples=#{h[:sample_count]}"
      "#<Hakari::Profile mode=#{h[:mode]} #{count} duration=#{h[:duration_ns].to_i / 1_000_000}ms>"
    end
  end

  class << self
    # Starts profiling. With a block: profiles it, writes output: if given, returns the Profile.
    # mode: :cpu / :wall sample by time (frequency:), mode: :object every interval: allocated
    # objects, mode: :retained those still alive at stop; mode: :trace records every call
    # (measure:, exclude:, threads:, …).
    # fork: :stop (a forked child does not profile) or :inherit (each child profiles into its own
    # file: Hakari::Forks). every:, output_dir:, keep:, signal: continuous snapshots (Hakari::Snapshots).
    def start(mode: :cpu, frequency: nil, interval: nil, watch: nil, output: nil, format: nil, aggregate: true,
              verbose: false, max_depth: DEFAULT_MAX_DEPTH, synthesize: nil, fork: :stop,
              every: nil, output_dir: nil, keep: nil, signal: nil, **trace_options, &block)
      fmt = output ? resolve_format(output, format) : check_format(format)
      check_output(output) if output
      raise ArgumentError, "invalid verbose: #{verbose.inspect} (expected true or false)" unless [true, false].include?(verbose)
      Forks.check(fork)
      snapshots = Snapshots.check(every: every, output_dir: output_dir, keep: keep, signal: signal, output: output)
      raise "hakari is already running (call Hakari.stop first)" if running?

      work = block # Ruby 3.1 makes the block's Proc at its first use: now, before any profile starts

      if mode == :trace || mode == "trace"
        raise ArgumentError, "synthesize: applies to the sampling modes (tracing sees every call)" unless synthesize.nil?
        raise ArgumentError, "frequency:, interval: and watch: apply to sampling modes (tracing sees every call)" if frequency || interval || watch
        raise ArgumentError, "fork: :inherit applies to mode: :cpu and :wall" if fork == :inherit
        raise ArgumentError, "every: applies to mode: :cpu and :wall (a trace is built once, at stop)" if snapshots
        # the session is made before the trace starts: its Hash is hakari's, not the program's
        @session = { output: output, base_output: output, format: fmt, verbose: verbose, fork: fork }
        begin
          start_trace(**trace_options)
        rescue Exception # any failure, an interrupt included, leaves no session behind
          @session = nil
          raise
        end
      else
        reject_trace_options(mode, trace_options)
        sampler = sampler_settings(mode, frequency, interval, watch, aggregate, max_depth, synthesize)
        raise ArgumentError, "every: does not apply to mode: :retained (its profile is taken at stop)" if snapshots && sampler[0].to_s == "retained"
        Native.start(*sampler)
        RactorHook.check_running
        @session = { output: output, base_output: output, format: fmt, verbose: verbose, fork: fork, sampler: sampler,
                     snapshot_settings: snapshots, snapshots: snapshots && Snapshots.new(snapshots, fmt).start }
      end
      return true unless work

      begin
        work.call
      ensure
        data = stop
      end
      data
    end

    # Stops profiling; returns the Profile, or nil when not running. Writes output: given to start.
    # gc_stat_into: a Hash that gets GC.stat as the profile's time ends, before the profile is
    # built: the program's GC figures, without the build's allocations.
    def stop(gc_stat_into: nil)
      # the engine checks gc_stat_into: a check here would be calls a trace counts as the program's
      data = Native.stop(gc_stat_into)
      # the snapshot writer ends after the profile's time (its join is hakari's, not the
      # program's); a snapshot it takes meanwhile finds nothing running, and one it took before
      # is written before the last period's
      writer = @session&.dig(:snapshots)
      writer&.halt
      return nil unless data

      session = @session || {}
      @session = nil
      report_verbose(data, Native.last_stop_ns) if session[:verbose]
      if session[:output]
        began = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
        save(session[:output], data, format: session[:format])
        written_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - began
        warn format("[hakari] wrote %s: %d bytes in %.1f ms", session[:output], File.size(session[:output]), written_ns / 1e6) if session[:verbose]
      end
      writer&.write_last(data)
      data
    end

    def running? = Native.running?

    # Tracing only: calls made while paused are not counted and the paused span is in no total.
    # true when it paused (resumed); false when not tracing or already paused (running).
    def pause = Native.pause
    def resume = Native.resume
    def paused? = Native.paused?

    # The profile so far without stopping; clear: true starts the counts over. nil when not running.
    def snapshot(clear: false)
      raise "Hakari.snapshot does not apply to mode: :retained (its profile is taken at stop, after a full GC)" if @session&.dig(:sampler, 0).to_s == "retained"

      Native.snapshot(clear)
    end

    # Writes data to path: a new file atomically (temporary file + rename), through a symbolic
    # link to its target, into a device or FIFO in place (Hakari::Output). Format from format:
    # or the extension. A write that fails raises the SystemCallError, with the path.
    def save(path, data, format: nil)
      raise ArgumentError, "Hakari.save needs a Hakari::Profile, got #{data.class}" unless data.is_a?(Profile)

      fmt = resolve_format(path, format)
      check_output(path)
      bytes = data.encode(fmt)
      begin
        Output.write(path, bytes)
      rescue SystemCallError => e
        raise e.class, "cannot write profile to #{path.inspect}"
      end
      path
    end

    # The format a path's name selects: callgrind.out.* :callgrind, .dot :dot, .flat.txt :flat,
    # .graph.txt :graph, .collapsed :collapsed, .txt :text, anything else (.pb.gz) :pprof.
    def format_for(path) = Native.format_for(path.to_s)

    private

    # Autorun writes its profile itself, at exit: the path a forked child's file is named from.
    def fork_output(path)
      @session[:base_output] ||= path if @session
    end

    # In a forked child (Hakari::ForkHook), where the engine has stopped: with fork: :inherit, a
    # profile of the child's own, written at its exit. A failure is one warning: the child runs on.
    def forked_child
      session = @session
      return unless session&.dig(:fork) == :inherit && !Native.running?

      Native.start(*session[:sampler])
      out = session[:base_output] && Forks.child_path(session[:base_output], Process.pid)
      settings = session[:snapshot_settings]
      @session = session.merge(output: out, snapshots: settings && Snapshots.new(settings, session[:format]).start)
      pid = Process.pid
      at_exit { stop if Process.pid == pid && running? }
    rescue StandardError => e
      @session = nil
      warn "hakari: the forked child #{Process.pid} could not profile: #{e.message}"
    end

    # Native.start's arguments: each mode's default for what it takes; what it does not take is
    # passed on as given, for the engine to refuse by name
    def sampler_settings(mode, frequency, interval, watch, aggregate, max_depth, synthesize)
      synthesize = true if synthesize.nil?
      case mode.to_s
      when "object"
        [mode, frequency, aggregate, max_depth, synthesize, interval || DEFAULT_INTERVAL, watch || DEFAULT_WATCH]
      when "retained"
        [mode, frequency, aggregate, max_depth, synthesize, interval || DEFAULT_RETAINED_INTERVAL, watch]
      else
        [mode, frequency || DEFAULT_FREQUENCY, aggregate, max_depth, synthesize, interval, watch]
      end
    end

    TRACE_OPTIONS = %i[measure exclude threads exclude_threads merge_fibers merge_threads allocations max_paths].freeze

    def start_trace(measure: :wall, exclude: nil, threads: nil, exclude_threads: nil, merge_fibers: false,
                    merge_threads: false, allocations: false, max_paths: nil, **unknown)
      raise ArgumentError, "unknown keyword#{'s' if unknown.size > 1}: #{unknown.keys.map(&:inspect).join(', ')}" if unknown.any?

      Native.trace_start(measure, exclude, threads, exclude_threads, merge_fibers, merge_threads, allocations, max_paths)
    end

    def reject_trace_options(mode, options)
      return if options.empty?

      known, unknown = options.keys.partition { |k| TRACE_OPTIONS.include?(k) }
      raise ArgumentError, "unknown keyword#{'s' if unknown.size > 1}: #{unknown.map(&:inspect).join(', ')}" if unknown.any?
      raise ArgumentError, "#{known.map { |k| "#{k}:" }.join(', ')} only apply to mode: :trace (mode is #{mode.inspect})"
    end

    def resolve_format(path, format)
      format.nil? ? format_for(path) : check_format(format)
    end

    def check_format(format)
      return nil if format.nil?

      sym = format.respond_to?(:to_sym) ? format.to_sym : format
      return sym if FORMATS.include?(sym)

      raise ArgumentError, "unknown format #{format.inspect} (expected one of #{FORMATS.map(&:inspect).join(', ')})"
    end

    def check_output(path)
      unless path.is_a?(String) && !path.empty?
        raise ArgumentError, "invalid output path #{path.inspect} (expected a non-empty String)"
      end

      problem = Output.problem(path)
      raise ArgumentError, "cannot write profile to #{path.inspect}: #{problem}" if problem
    end

    # counters only (to_h would build every sample's frames: millions of Ruby objects for a trace)
    def report_verbose(data, stop_ns)
      h = data.counters
      return report_verbose_trace(h, stop_ns) if h[:mode] == :trace

      per_call = h[:sampling_count].zero? ? 0 : h[:sampling_time_ns] / h[:sampling_count] / 1000.0
      rate = h[:interval] ? "interval=#{h[:interval]}" : "frequency=#{h[:frequency]}Hz"
      warn format("[hakari] mode=%s %s timer=%s", h[:mode], rate, h[:timer])
      warn format("[hakari] sampling: %d callbacks, %.2f ms total, %.2f us/call avg", h[:sampling_count],
                  h[:sampling_time_ns] / 1e6, per_call)
      warn format("[hakari] samples: %d recorded, %d dropped, %d triggers, %d threads", h[:sample_count],
                  h[:dropped_count], h[:trigger_count], h[:thread_count])
      warn format("[hakari] stop: %.1f ms (the profile built)", stop_ns / 1e6)
    end

    def report_verbose_trace(h, stop_ns)
      warn format("[hakari] mode=trace measure=%s", h[:measure])
      warn format("[hakari] calls: %d, call paths: %d, methods: %d, threads and fibers: %d", h[:call_count],
                  h[:node_count], h[:method_count], h[:thread_count])
      warn format("[hakari] stop: %.1f ms (the profile built)", stop_ns / 1e6)
    end
  end
end
