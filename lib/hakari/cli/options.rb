# frozen_string_literal: true

require "optparse"
require_relative "../output"

module Hakari
  class CLI
    # Bad command-line input. The dispatcher prints "hakari: MESSAGE" and exits 2, before
    # anything is run or written.
    class UsageError < StandardError; end

    # Parses and validates the options of record / stat / exec. Everything is checked here,
    # up front, so a bad value never gets as far as running the command.
    module Options

      Parsed = Struct.new(:mode, :measure, :allocations, :max_paths, :frequency, :interval, :watch, :output, :format, :print,
                          :verbose, :report, :no_synthesize, :fork, :every, :argv, keyword_init: true)

      module_function

      # => Parsed. argv is not modified. Raises UsageError.
      def parse(name, argv)
        o = Parsed.new(mode: name == "record" ? :cpu : :wall, print: false, verbose: false,
                       report: name == "exec")
        # order: stop at the command, so its own flags stay its own
        rest = usage_errors(name, "hakari help") { parser(name, o).order(argv) }
        raise UsageError, "#{name} needs a command to run (e.g. hakari #{name} ruby app.rb)" if rest.empty?
        if o.measure && o.mode != :trace
          raise UsageError, "--measure applies to -m trace (mode is #{o.mode})"
        end
        if o.allocations && o.mode != :trace
          raise UsageError, "--allocations applies to -m trace (mode is #{o.mode}; -m object samples allocations)"
        end
        if o.max_paths && o.mode != :trace
          raise UsageError, "--max-paths applies to -m trace (mode is #{o.mode})"
        end
        if o.no_synthesize && o.mode == :trace
          raise UsageError, "--no-synthesize applies to the sampling modes (tracing sees every call)"
        end
        check_rate(o)
        if o.fork == :inherit && o.mode == :trace
          raise UsageError, "--fork inherit applies to -m cpu and -m wall"
        end
        check_every(o) if o.every
        o.argv = rest
        # record always writes a file, unless -p alone asked for the report on stdout instead;
        # with --format, the file is named for it (hakari.collapsed, ...), even beside -p
        o.output ||= Hakari::Output.default_path(o.format) if name == "record" && (!o.print || o.format)
        o.output &&= check_output(o.output) unless o.every
        o
      end

      # -f is for the modes that sample by time, -i for object mode
      def check_rate(o)
        raise UsageError, "-f applies to -m cpu and -m wall (mode is #{o.mode}; -m #{o.mode} takes -i)" if o.frequency && %i[object retained].include?(o.mode)
        raise UsageError, "-f applies to -m cpu and -m wall (mode is #{o.mode})" if o.frequency && o.mode == :trace
        raise UsageError, "-i applies to -m object and -m retained (mode is #{o.mode})" if o.interval && !%i[object retained].include?(o.mode)
        raise UsageError, "--watch applies to -m object (mode is #{o.mode})" if o.watch && o.mode != :object
      end

      # --every: -o names the directory the snapshots go to (made when missing)
      def check_every(o)
        raise UsageError, "--every applies to -m cpu, -m wall and -m object" if %i[trace retained].include?(o.mode)
        raise UsageError, "--every needs -o DIR, the directory the snapshots go to" unless o.output
        raise UsageError, "--every writes files, not the report (-p)" if o.print
        Hakari::Snapshots.check_dir(o.output)
        o.output = File.expand_path(o.output)
      rescue ArgumentError => e
        raise UsageError, e.message
      end

      # "60s", "500ms", "2m" or a number of seconds: seconds, above 0
      def parse_every(value)
        m = value.match(/\A([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?\z/)
        seconds = m && Float(m[1]) * { "ms" => 0.001, "s" => 1, "m" => 60, "h" => 3600, nil => 1 }.fetch(m[2])
        return seconds if seconds&.positive?
        raise UsageError, "invalid --every #{value.inspect} (expected a duration above 0: 60s, 500ms, 5m or seconds)"
      end

      # The block's value; OptionParser's errors become a UsageError naming the option, and
      # `help` the page that lists the accepted ones.
      def usage_errors(name, help)
        yield
      rescue OptionParser::InvalidOption => e
        raise UsageError, "unknown option #{e.args.first.inspect} for #{name} (see #{help})"
      rescue OptionParser::AmbiguousOption => e
        raise UsageError, "ambiguous option #{e.args.first.inspect} for #{name} (see #{help})"
      rescue OptionParser::MissingArgument => e
        raise UsageError, "option #{e.args.first} needs a value"
      rescue OptionParser::NeedlessArgument => e
        raise UsageError, "option #{e.args.first.sub(/=.*/m, "")} takes no value"
      rescue OptionParser::ParseError => e
        raise UsageError, e.message
      end

      def parser(name, o)
        op = OptionParser.new
        # Drop OptionParser's built-in --help/--version, which would print its own text
        # and exit from inside the parser.
        op.base.long.clear
        op.base.short.clear
        op.on("-m", "--mode MODE") { |v| o.mode = choice("mode", v, Hakari::MODES) }
        op.on("--measure MEASURE") { |v| o.measure = choice("measure", v, Hakari::MEASURES) }
        op.on("--allocations") { o.allocations = true }
        op.on("--max-paths N") { |v| o.max_paths = parse_max_paths(v) }
        op.on("-f", "--frequency HZ") { |v| o.frequency = parse_frequency(v) }
        op.on("-i", "--interval N") { |v| o.interval = parse_interval(v) }
        op.on("--watch SHARE") { |v| o.watch = parse_watch(v) }
        op.on("-o", "--output PATH") { |v| o.output = v }
        op.on("--format FORMAT") { |v| o.format = choice("format", v, Hakari::FORMATS) }
        op.on("-v", "--verbose") { o.verbose = true }
        op.on("--no-synthesize") { o.no_synthesize = true }
        op.on("--fork MODE") { |v| o.fork = choice("--fork", v, Hakari::Forks::CHOICES) }
        op.on("-p", "--print") { o.print = true } if name == "record"
        op.on("--every DURATION") { |v| o.every = parse_every(v) } if name == "record"
        op.on("--report") { o.report = true } if name != "record" # exec implies it; accepted anyway
        op.on("-h", "--help") { raise HelpRequested, name }
        op
      end

      # value as one of the accepted symbols, or a UsageError naming it and them
      def choice(what, value, accepted)
        sym = value.to_sym
        return sym if accepted.include?(sym)
        raise UsageError, "unknown #{what} #{value.inspect} (expected #{either(accepted)})"
      end

      # The engine's range, checked here too so a bad value fails before the command runs.
      def parse_frequency(value)
        lo, hi = Hakari::Native::MIN_FREQUENCY, Hakari::Native::MAX_FREQUENCY
        # digits only: Integer() would also take " 100", "1_0" and "+10"
        hz = value.match?(/\A[0-9]+\z/) ? Integer(value, 10) : nil
        return hz if hz&.between?(lo, hi)
        raise UsageError, "invalid frequency #{value.inspect} (expected an integer from #{lo} to #{hi} Hz)"
      end

      # objects per sample in object mode: the engine's range
      def parse_max_paths(value)
        n = value.match?(/\A[0-9]+\z/) ? Integer(value, 10) : nil
        return n if n&.between?(1, Hakari::Native::MAX_MAX_PATHS)
        raise UsageError, "invalid max-paths #{value.inspect} (expected an integer from 1 to #{Hakari::Native::MAX_MAX_PATHS} call paths)"
      end

      def parse_interval(value)
        n = value.match?(/\A[0-9]+\z/) ? Integer(value, 10) : nil
        return n if n&.between?(1, Hakari::Native::MAX_INTERVAL)
        raise UsageError, "invalid interval #{value.inspect} (expected an integer from 1 to #{Hakari::Native::MAX_INTERVAL} objects)"
      end

      # object mode: the share of the objects Ruby's NEWOBJ hook watches, 0.001 to 1
      def parse_watch(value)
        share = value.match?(/\A(?:0|1)(?:\.[0-9]+)?\z|\A\.[0-9]+\z/) ? Float(value) : nil
        return share if share&.between?(0.001, 1)
        raise UsageError, "invalid watch #{value.inspect} (expected a share of the objects from 0.001 to 1, e.g. 0.2)"
      end

      # Checked before the command runs: finding out after a long run that the profile
      # cannot be written would waste the run. Returns the absolute path, because the
      # profiled program may chdir.
      def check_output(path)
        problem = Hakari::Output.problem(path)
        raise UsageError, "cannot write profile to #{path.inspect}: #{problem}" if problem
        File.expand_path(path)
      end

      def either(list)
        names = list.map(&:to_s)
        names.size == 1 ? names.first : "#{names[0..-2].join(", ")} or #{names.last}"
      end
    end

    # `hakari record -h`: not an error, but parsing stops there all the same.
    class HelpRequested < StandardError; end
  end
end
