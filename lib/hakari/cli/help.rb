# frozen_string_literal: true

module Hakari
  class CLI
    # The text of `hakari --help` (short) and `hakari help` (the full reference). Kept as
    # plain text, apart from the code, so it reads like the man page it stands in for.
    module Help
      USAGE = <<~TEXT
        Usage: hakari record [options] [--] COMMAND [ARGS...]   profile a Ruby command into a file
               hakari stat   [options] [--] COMMAND [ARGS...]   run a command, print time, GC, memory and sampling stats
               hakari exec   [options] [--] COMMAND [ARGS...]   stat plus the flat and cumulative tables
               hakari report [options] FILE                    print a profile file, or write it in another format
               hakari diff   [options] BASE NEW                what changed from one profile to another
               hakari annotate [options] FILE                  source lines with their time
               hakari help                                     full reference: commands, options, formats, API, env
               hakari --version
      TEXT

      # Indented to sit under each command's own options (interpolation would not be dedented).
      COMMON = <<~TEXT.gsub(/^/, "  ")
          -m, --mode MODE       cpu (per-thread CPU time), wall (elapsed time, sleeping and I/O included),
                                object (allocated objects, by method, line and class), retained
                                (those of them still alive at stop, after a full GC: objects and bytes)
                                or trace (every call counted: call tree, callers/callees, exact counts)
          --measure MEASURE     with -m trace: wall (default), cpu or allocations
          --allocations         with -m trace: each method's objects by class and source line, counted
                                beside the measure (the flat and graph reports' allocation table)
          --max-paths N         with -m trace: call paths kept apart (default 500000); calls on newer
                                paths fold into a [folded] frame under their nearest kept caller,
                                each method's calls and self time still exact (memory stays bounded)
          -f, --frequency HZ    cpu and wall: samples per second, an integer from 1 to 10000 (default 1000)
          -i, --interval N      object: a sample every N allocated objects on average, 1 for every
                                one (default 100); retained: every N-th object followed (default 1)
          --watch SHARE         object: Ruby's NEWOBJ hook on for this share of the objects, in windows
                                (0.001 to 1, default 1: every object): 0.2 about halves object mode's
                                cost, each sample also standing for the objects made while it was off
          --format FORMAT       pprof, collapsed, text, flat, graph, callgrind, dot, html or speedscope
                                (default: from the -o extension)
          -v, --verbose         print sampling statistics to stderr
          --no-synthesize       sampling modes: no frames for methods the VM runs without one
                                (Integer#+, String#=~, Hash#[] ...; on by default, off under YJIT)
          --fork MODE           stop (default): a forked child runs unprofiled; inherit (cpu, wall):
                                each forked child profiles into its own file, the output's name with
                                its pid before the ending (out.12345.pb.gz), e.g. puma's workers
          -h, --help            this command's help
      TEXT

      COMMANDS = {
        "record" => <<~TEXT +
          hakari record [options] [--] COMMAND [ARGS...]
            Runs COMMAND and writes the profile of its Ruby process to a file.
            -o, --output PATH     where to write (default hakari.pb.gz, or hakari.collapsed etc. after
                                  --format); the name's ending picks the format: *.collapsed, *.txt,
                                  *.flat.txt, *.graph.txt, *.dot, *.html, *.speedscope.json,
                                  callgrind.out.*, otherwise pprof.
                                  A link is followed; a device or FIFO (/dev/stdout) is written in place
            -p, --print           print the text report to stdout when the command ends; no file is
                                  written unless -o or --format is given too (then both)
            --every DURATION      cpu and wall: continuous snapshots: every DURATION (60s, 500ms, 5m, or
                                  seconds) the profile of that period goes to a file of its own in the
                                  directory -o names (made when missing): hakari-PID-SEQ-TIME.pb.gz, each
                                  whole; the last period's at exit; the newest 100 kept
        TEXT
          COMMON + "  Default mode: cpu.\n",
        "stat" => <<~TEXT +
          hakari stat [options] [--] COMMAND [ARGS...]
            Runs COMMAND and prints to stderr: user, sys and real time and CPU share; peak RSS,
            context switches and disk I/O blocks of the whole command; and for its profiled Ruby
            process: GC time and count (minor/major), allocated and freed objects, samples against
            timer triggers (and drops), and the profiler's own overhead (time spent sampling as a
            share of the profiled time). Works on any command; the Ruby lines need a Ruby process.
            -o, --output PATH     also write the profile to PATH (default: no file)
            --report              add the flat and cumulative tables (the text report)
        TEXT
          COMMON + "  Default mode: wall.\n",
        "exec" => <<~TEXT +
          hakari exec [options] [--] COMMAND [ARGS...]
            The same as `hakari stat --report`: the stats and the flat and cumulative tables, on stderr.
            -o, --output PATH     also write the profile to PATH (default: no file)
            --report              accepted, and implied
        TEXT
          COMMON + "  Default mode: wall.\n",
        "report" => <<~TEXT,
          hakari report [options] FILE
            Reads FILE, a pprof profile (gzipped or not) from hakari or any other program, and prints
            its text report (the flat and cumulative tables, the time by state and by each string
            label), or writes it in another format. No Go.
            -o, --output PATH     write to PATH instead, in the format its name picks (as for record)
            --format FORMAT       pprof, collapsed, text, flat, graph, callgrind, dot, html or speedscope
            --html                the same as --format html: the flame graph page (-o out.html)
            --top N               rows per table of the text report (default 50)
            --focus REGEXP        only the samples with a frame whose name matches (POSIX extended)
            --ignore REGEXP       leave out the samples with a frame whose name matches
            --thread N            only thread N's samples (the `thread` label, Profile#samples' thread_seq)
            --tag KEY=VALUE       only the samples with that label (state=blocked, endpoint=GET /users/:id)
            --lines               each executing line on its own ("Foo#bar:12"), to rank lines
            --group-by KEY        the text report once per value of the label KEY (Hakari.label,
                                  Hakari::Rack's endpoint, Hakari::Sidekiq's job), heaviest first
            -h, --help            this command's help
            A file that is not a profile is one line naming it and what is wrong, and exit status 2.
        TEXT
        "annotate" => <<~TEXT,
          hakari annotate [options] FILE
            Prints source lines with the time spent on each (self: the line was executing in the
            leaf frame; cumulative: in any frame), for the files with the most time, or one file or
            method; the hottest lines are marked ">". A source file that is not here is said, and its
            lines are shown without their text.
            --file PATH           the file whose path is PATH or ends with /PATH
            --method NAME         the method's lines only (its name as reports show it: Foo#bar)
            --context N           lines shown around each line with time (default 2)
            --top N               how many files when neither is given (at most 3; default 3)
            --focus, --ignore, --thread, --tag   applied first, as for report
            -h, --help            this command's help
        TEXT
        "diff" => <<~TEXT,
          hakari diff [options] BASE NEW
            Compares two profiles function by function: each one's self and cumulative share of its
            profile's total, base and new, sorted by the change (in percentage points).
            --absolute            the values themselves (ms of CPU or wall time) rather than shares
            --fail-above PCT      exit 1 when a function's self share grew by more than PCT points:
                                  a regression gate for CI (the report is printed either way)
            --html PATH           also write the differential flame graph: the new profile's, each
                                  frame coloured by the change of its share (red grew, blue shrank)
            --top N               rows per table (default 50)
            --focus, --ignore, --thread, --tag, --lines   applied to both profiles, as for report
            -h, --help            this command's help
        TEXT
      }.freeze

      TEXT = <<~TEXT
        hakari #{VERSION} — a Ruby profiler with a C engine. It samples with a timer, weighs each
        sample by the clock time it stands for, and keeps the executing line numbers.

        #{USAGE}
        COMMANDS

        #{COMMANDS.values.join("\n").gsub(/^(?=.)/, "  ")}
        Options end at the first argument that is not one, which starts COMMAND:
        `hakari record ruby -w app.rb` passes -w to ruby. `--` ends them explicitly.
        COMMAND is run directly, not through a shell; use `sh -c "..."` for pipelines and the like.

        WHICH PROCESS IS PROFILED
          hakari puts its lib directory first in RUBYLIB and -rhakari/autorun first in RUBYOPT, so
          every Ruby process the command starts loads hakari/autorun. The first of them to start
          profiles, from when it loads until its at_exit handlers have run; the others (sub-shells'
          rubies, spawned or forked children) run unprofiled, but with --fork inherit its forked
          children profile too, each into a file of its own. A process that exec's another Ruby
          program keeps the claim (`bundle exec` works). Nothing is written for a process that dies
          by SIGKILL or calls exit!. The profiled program must not call Hakari.start itself.

        EXIT STATUS
          The command's own status; 128+N if signal N killed it. 2: bad usage (nothing was run).
          127: command not found, 126: not executable. 1: the command succeeded but its profile
          could not be written (or, for record, no Ruby process was profiled).

        OUTPUT FORMATS
          pprof      gzip-compressed profile.proto (*.pb.gz, the default). Read it with
                     `go tool pprof -top hakari.pb.gz`, `-traces`, or `-http=:8080`.
          collapsed  one line per unique stack, "root;...;leaf WEIGHT_NS", for flamegraph.pl and speedscope.
          text       the total, then flat (self) and cumulative (total) time per method.
          flat       per method: %self, total, self, wait, child, calls (*.flat.txt); * marks recursion.
          graph      per method, its callers and callees with called/total counts (*.graph.txt).
          callgrind  for KCachegrind / callgrind_annotate (callgrind.out.*).
          dot        a Graphviz call graph (*.dot): `dot -Tsvg out.dot > out.svg`.
          html       one self-contained page (*.html): flame graph and icicle, zoom, search, a sortable
                     table, a thread selector; it makes no network request.
          speedscope speedscope's JSON file format (*.speedscope.json), a profile per thread.
          flat, graph, callgrind and dot are made for traces (-m trace) and work on samples too.
          Each sample weighs the nanoseconds of clock time it stands for (CPU time in cpu mode,
          elapsed time in wall mode), and dropped samples are counted in the profile.
          The profile is written to a temporary name and renamed: never half a file (a device or
          FIFO, such as /dev/stdout, is written in place).

        RUBY API
          require "hakari"
          Hakari.start(mode: :cpu, frequency: 1000, output: nil, format: nil, aggregate: true,
                       verbose: false, max_depth: 1024, synthesize: true, fork: :stop) { work }   # block form: returns the profile
          Hakari.start(mode: :object, interval: 100) { work }  # allocations: weights are objects, a class label
          Hakari.start(mode: :retained) { work }   # the objects still alive at stop: objects and bytes
          Hakari.start(mode: :wall, every: 60, output_dir: "tmp/profiles", keep: 100, signal: "USR2")
                                # continuous snapshots: a file per period, written whole; Hakari.stop writes the last
          Hakari.label(endpoint: "GET /users/:id") { work }   # every sample in the block carries the labels
          Hakari.labels         # the current fiber's labels
          require "hakari/rack"; use Hakari::Rack              # endpoint and method labels per request
          require "hakari/sidekiq"   # chain.add Hakari::Sidekiq: job and queue labels per job
          require "hakari/active_job"  # include Hakari::ActiveJob in ApplicationJob: the same
          Hakari.start(mode: :wall); work; profile = Hakari.stop    # Hakari.stop => Hakari::Profile or nil
          profile.to_h          # mode, frequency, start_time_ns, duration_ns, trigger_count, sampling_count,
                                # sample_count, dropped_count, moved_count, stale_count, off_gvl_count, synthesized_count, synthesized,
                                # sampling_time_ns, stack_walk_time_ns, resolve_time_ns, timer_cpu_ns, thread_count,
                                # unique_frames, unique_stacks, timer, stack_walker, walk_mismatch_count,
                                # ractors_started, ractor_threads, label_sets_dropped, label_change_count, samples: [[frames, weight_ns, count, thread_seq, label_set], ...],
                                # label_sets: [{}, {endpoint: "GET /users/:id"}, ...] (by a sample's label_set)
          profile[:sample_count]            # == profile.to_h[:sample_count]
          profile.each_sample { |row| }     # the samples' rows one at a time, none kept (Enumerator without a block)
          profile.encode(:pprof | :collapsed | :text)   # => String
          Hakari.save("out.pb.gz", profile)             # format from the name's ending (as -o), or format: :text
          Hakari.start(mode: :trace, measure: :wall, exclude: ["Integer#times", /Kernel#/],
                       threads: nil, exclude_threads: nil, merge_fibers: false, merge_threads: false,
                       allocations: false, max_paths: 500_000) { work }   # past max_paths, new paths fold
          Hakari.pause / Hakari.resume / Hakari.paused?   # tracing: the paused span is in no total
          profile.methods_table  # tracing: [{name:, calls:, self:, wait:, child:, total:, recursive:, callers:, callees:}]
                                 # with allocations: true also allocations: [{class:, file:, line:, count:, bytes:}, ...]
          Hakari::MODES    # [:cpu, :wall, :object, :retained, :trace]
          Hakari::FORMATS  # [:pprof, :collapsed, :text, :flat, :graph, :callgrind, :dot]
          Bad values raise ArgumentError; starting twice raises RuntimeError.

        ENVIRONMENT
          Read by hakari/autorun; the CLI sets them (and clears any it does not use).
          To profile without the CLI: RUBYOPT=-rhakari/autorun HAKARI_OUTPUT=out.pb.gz ruby app.rb
            HAKARI_MODE        cpu, wall, object, retained or trace (default cpu)
            HAKARI_MEASURE     with trace: wall, cpu or allocations
            HAKARI_ALLOCATIONS with trace: 1 counts each method's objects by class and line (--allocations)
            HAKARI_MAX_PATHS   with trace: call paths kept apart (--max-paths)
            HAKARI_FREQUENCY   Hz (default 1000)
            HAKARI_INTERVAL    object and retained: objects per sample (default 100; retained 1)
            HAKARI_OUTPUT      profile path (standalone default hakari.pb.gz, or named for HAKARI_FORMAT)
            HAKARI_FORMAT      pprof, collapsed, text, flat, graph, callgrind, dot, html or speedscope (from the
                               output's name)
            HAKARI_VERBOSE     1: sampling statistics on stderr
            HAKARI_FORK        inherit: forked children profile too (--fork)
            HAKARI_EVERY       seconds: continuous snapshots into the directory HAKARI_OUTPUT (--every)
            HAKARI_CPU_CLOCK   perf: cpu mode ticks on a perf_event task-clock per thread instead of
                               the worker reading CPU clocks (as accurate; costlier in VMs)
            HAKARI_STACK_WALK  ruby: read stacks with rb_profile_frames instead of the VM's control
                               frames (Ruby 3.1); verify: both, counting samples where they differ
          Internal to the CLI: HAKARI_SESSION (its temporary directory: claim and result files),
          HAKARI_REPORT (leave the text report there), HAKARI_CLAIMED (standalone: the pid that profiles).
      TEXT

      def self.command(name)
        COMMANDS.fetch(name)
      end
    end
  end
end
