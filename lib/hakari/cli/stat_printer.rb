# frozen_string_literal: true

require "shellwords"

module Hakari
  class CLI
    # Formats `hakari stat`: OS figures for the whole command tree (from getrusage of the
    # children, taken after the command exits), then what the profiled Ruby process
    # reported about itself. Each line is "value unit  what", so it reads like time(1)
    # and greps easily.
    class StatPrinter
      def initialize(options, outcome)
        @o = options
        @out = outcome
        @r = outcome.rusage
        @p = outcome.result || {}
      end

      def lines
        ruby = ruby_lines + verbose_lines
        [header, "", *command_lines, "", *ruby, *("" unless ruby.empty?)]
      end

      private

      def header
        how = case @o.mode
              when :trace then "#{@o.measure || :wall} measure"
              when :object then object_rate
              when :retained then "every #{@o.interval || Hakari::DEFAULT_RETAINED_INTERVAL} objects followed"
              else "#{@o.frequency || Hakari::DEFAULT_FREQUENCY} Hz"
              end
        " Performance stats for '#{Shellwords.join(@o.argv)}' (#{@o.mode} mode, #{how}):"
      end

      def object_rate
        interval = @o.interval || Hakari::DEFAULT_INTERVAL
        watch = @o.watch || Hakari::DEFAULT_WATCH
        "a sample every #{interval} objects#{", the hook watching #{(watch * 100).round(1)} % of them" if watch < 1}"
      end

      def command_lines
        user, sys, real = @r[:utime_ns], @r[:stime_ns], @out.real_ns
        [
          row(ms(user), "ms", "user"),
          row(ms(sys), "ms", "sys"),
          row(ms(real), "ms", "real"),
          row(pct(user + sys, real), "%", "CPU share ((user + sys) / real)"),
          row(format("%.1f", @r[:maxrss_kb] / 1024.0), "MB", "peak RSS (largest process)"),
          row(int(@r[:nvcsw] + @r[:nivcsw]), "",
              "context switches (#{int(@r[:nvcsw])} voluntary, #{int(@r[:nivcsw])} involuntary)"),
          row(int(@r[:inblock] + @r[:oublock]), "",
              "disk I/O blocks (#{int(@r[:inblock])} in, #{int(@r[:oublock])} out)"),
        ]
      end

      # GC and allocation counts only exist inside the Ruby process that profiled.
      def ruby_lines
        return [] unless @p["status"] == "ok"
        n = ->(key) { @p.fetch(key, "0").to_i }
        [
          " Ruby process #{@p["pid"]}:",
          row(format("%.1f", n["gc_time_ms"]), "ms",
              "GC time (#{int(n["gc_count"])} GCs: #{int(n["gc_minor"])} minor, #{int(n["gc_major"])} major)"),
          row(int(n["allocated_objects"]), "", "allocated objects"),
          row(int(n["freed_objects"]), "", "freed objects"),
          *case @p["mode"]
           when "trace" then trace_lines(n)
           when "object" then object_lines(n)
           when "retained" then retained_lines(n)
           else sampling_lines(n) + state_lines(n)
           end,
          *ractor_lines(n),
        ]
      end

      # what the profile does not hold: code run by other Ractors than the main one
      def ractor_lines(n)
        return [] if n["ractors_started"].zero?

        if n["ractor_threads"].positive?
          return [row(int(n["ractors_started"]), "", "Ractors besides the main one ran: " \
                                                      "#{int(n["ractor_threads"])} of their threads sampled (label ractor)")]
        end

        where = @p["mode"] == "cpu" ? " (their CPU is in [native threads])" : ""
        [row(int(n["ractors_started"]), "", "Ractors besides the main one ran: their code is not sampled#{where}")]
      end

      STATES = [["running", "CPU execution"], ["blocked", "GVL blocked (I/O, sleep, locks, C calls without the GVL)"],
                ["wait", "GVL wait (ready, waiting for another thread to release it)"],
                ["gc_marking", "GC marking"], ["gc_sweeping", "GC sweeping"]].freeze

      # Where the profile's time went, by state, as rperf's stat shows it; and which calls
      # blocked most. In wall mode the times are every thread's wall time added up.
      def state_lines(n)
        total = STATES.sum { |s, _| n["state_#{s}_ns"] }
        return [] if total.zero?
        what = @p["mode"] == "wall" ? "wall time of every thread, added" : "CPU time"
        lines = ["", " Where the time went (#{what}):"]
        STATES.each do |state, label|
          ns = n["state_#{state}_ns"]
          next if ns.zero? && state != "running"
          lines << format("%14s ms %5s %%  %s", ms(ns), pct(ns, total), label)
        end
        if @p["states"].to_s.include?("off-gvl-counts-as-blocked")
          lines << "   (no GVL events: a wait for the GVL counts as blocked, and a new"
          lines << "    thread's wait for its first GVL is not seen)"
        end
        calls = @p["blocking_calls"].to_s.split.map { |pair| pair.split("=", 2) }.reject { |_, ns| ns.to_i < 50_000 }
        unless calls.empty?
          lines << " Top blocking calls (the frame above [GVL blocked]):"
          calls.each { |name, ns| lines << format("%14s ms  %s", ms(ns.to_i), name) }
        end
        lines
      end

      def sampling_lines(n)
        [row(int(n["sample_count"]), "",
             "samples / #{int(n["trigger_count"])} triggers (#{int(n["dropped_count"])} dropped)"),
         row(pct(n["sampling_time_ns"], n["duration_ns"]), "%",
             "profiler overhead (#{ms(n["sampling_time_ns"])} ms sampling in #{ms(n["duration_ns"])} ms)"),
         row(ms(n["timer_cpu_ns"]), "ms", "CPU of hakari's timer thread (on another core)")]
      end

      # object mode: what the hook saw and the classes most allocated (the profile's samples)
      def object_lines(n)
        seen = watched_line(n).empty? ? "objects seen by the sampler (the main Ractor's threads)" : "objects Ruby made while profiling (GC.stat)"
        lines = [row(int(n["object_count"]), "", seen),
                 *watched_line(n),
                 row(int(n["sample_count"]), "",
                     "samples, one every #{int(n["interval"])} objects on average (#{int(n["dropped_count"])} dropped)"),
                 row(int(n["object_bytes"]), "", "bytes of heap slots, from the samples (a string's or array's own buffer not counted)"),
                 row(pct(n["sampling_time_ns"], n["duration_ns"]), "%",
                     "profiler overhead in the hook's samples (#{ms(n["sampling_time_ns"])} ms in #{ms(n["duration_ns"])} ms)")]
        lines + class_lines("allocated")
      end

      # --watch: how many of the objects the hook saw, the samples standing for the rest too
      def watched_line(n)
        watched, all = n["objects_watched"].to_i, n["object_count"].to_i
        return [] if watched.zero? || watched >= all

        [row(int(watched), "", "of them made while the NEWOBJ hook was on (#{pct(watched, all)} %, --watch)"),
         row(int(n["objects_after_windows"]), "", "of them made after the last window, in no sample")] + read_late_line(n)
      end

      # stretches between windows whose read came late: their objects went where the next window was
      def read_late_line(n)
        late = n["objects_read_late"].to_i
        return [] if late.zero?

        [row(int(late), "", "of them past a stretch whose read came late (a busy machine), placed by the window after it")]
      end

      # retained mode: what was followed and what was still alive at stop, after a full GC
      def retained_lines(n)
        lines = [row(int(n["object_count"]), "", "objects seen by the sampler (the main Ractor's threads)"),
                 row(int(n["sampling_count"]), "", "objects followed (one every #{int(n["interval"])})"),
                 row(int(n["retained_count"]), "", "of them alive at stop, after a full GC"),
                 row(int(n["object_bytes"]), "", "bytes they hold (ObjectSpace.memsize_of)")]
        lines + class_lines("retained")
      end

      # the classes with the most objects in the profile (autorun's top_classes), under a title
      def class_lines(what)
        classes = @p["top_classes"].to_s.split.map { |pair| pair.split("=", 2) }
        return [] if classes.empty?

        ["", " Most #{what} classes (objects, from the samples):",
         *classes.map { |name, c| format("%14s     %s", int(c.to_i), name) }]
      end

      def trace_lines(n)
        [row(int(n["call_count"]), "", "calls traced (#{int(n["event_count"])} events, #{@p["measure"]} measure)"),
         row(int(n["method_count"]), "", "methods in #{int(n["node_count"])} call paths")]
      end

      def verbose_lines
        return [] unless @o.verbose && @p["status"] == "ok" && @p["mode"] != "trace"
        n = ->(key) { @p.fetch(key, "0").to_i }
        calls = n["sampling_count"]
        avg_us = calls.zero? ? 0.0 : n["sampling_time_ns"] / 1000.0 / calls
        [
          row(int(calls), "", format("sampling callbacks (%.1f us each on average)", avg_us)),
          row(int(n["thread_count"]), "", "threads sampled"),
          row(int(n["unique_stacks"]), "", "unique stacks (#{int(n["unique_frames"])} unique frames)"),
        ]
      end

      def row(value, unit, what)
        format("%14s %-3s %s", value, unit, what)
      end

      def ms(ns)
        format("%.1f", ns / 1e6)
      end

      def pct(part, whole)
        format("%.1f", whole.zero? ? 0.0 : 100.0 * part / whole)
      end

      def int(n)
        n.to_i.to_s.reverse.scan(/\d{1,3}/).join(",").reverse.then { |s| n.to_i.negative? ? "-#{s}" : s }
      end
    end
  end
end
