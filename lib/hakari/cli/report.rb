# frozen_string_literal: true

require "optparse"

module Hakari
  class CLI
    # `hakari report FILE` and `hakari diff BASE NEW`: profiles read back from pprof files
    # (hakari's, or any other program's), selected, and printed or written in any format,
    # without Go. Decoding, selecting and comparing are the engine's (format/ in C).
    module Report
      Parsed = Struct.new(:format, :output, :top, :focus, :ignore, :thread, :tag, :lines, :absolute, :fail_above, :html,
                          :source_file, :method, :context, :group_by, keyword_init: true)

      TOP_DEFAULT = 50

      module_function

      # => exit status
      def report(argv, out:, err:)
        o, files = parse("report", argv)
        raise UsageError, "report needs one profile file (hakari report FILE), got #{files.size}" unless files.size == 1
        profile = select(read(files.first), o)
        if o.group_by
          raise UsageError, "--group-by writes the text report (it cannot go with --output or --format)" if o.output || (o.format && o.format != :text)
          out.write(grouped(profile, o.group_by, o.top))
        elsif o.output
          Hakari.save(o.output, profile, format: o.format)
          err.puts "hakari: wrote #{o.output} (#{o.format || Hakari.format_for(o.output)})"
        elsif o.format.nil? || o.format == :text
          out.write(profile.text_report(o.top))
        else
          out.write(profile.encode(o.format))
        end
        0
      end

      # The text report once per value of the label `key`, heaviest first, each under a line with
      # that value's share; then the share of the samples without the label.
      def grouped(profile, key, top)
        values = profile.label_values(key)
        total = values.values.sum
        labelled = values.reject { |v, _| v.nil? }.sort_by { |v, w| [-w, v] }
        return "no sample has a label #{key.inspect}\n" if labelled.empty?
        share = ->(w) { total.positive? ? format("%.1f%%", 100.0 * w / total) : "0%" }
        text = labelled.map do |value, weight|
          "== #{key}=#{value} (#{share.(weight)} of the profile) ==\n" +
            profile.select(nil, nil, nil, "#{key}=#{value}", false).text_report(top)
        end
        text << "== samples without the label #{key} (#{share.(values[nil])} of the profile) ==\n" if values[nil]
        text.join("\n")
      end

      # => exit status: 1 when --fail-above is given and a function's self share grew by more
      def diff(argv, out:, err:)
        o, files = parse("diff", argv)
        raise UsageError, "diff needs two profile files (hakari diff BASE NEW), got #{files.size}" unless files.size == 2
        base, new = files.map { |f| select(read(f), o) }
        text, growth = Hakari::Native.diff(base, new, o.absolute, o.top)
        out.puts "Base: #{files[0]}", "New:  #{files[1]}", text
        if o.html
          Hakari::Output.write(o.html, Hakari::Native.diff_html(base, new))
          err.puts "hakari: wrote #{o.html} (the differential flame graph)"
        end
        return 0 unless o.fail_above && growth > o.fail_above
        err.puts format("hakari: a function's self share grew by %.2f points, more than --fail-above %g allows",
                        growth, o.fail_above)
        1
      end

      # => exit status. The source of the chosen file, or of the files with the most self time,
      # each line that samples executed with its self and cumulative time; hottest marked ">".
      def annotate(argv, out:, err:)
        o, files = parse("annotate", argv)
        raise UsageError, "annotate needs one profile file (hakari annotate FILE), got #{files.size}" unless files.size == 1
        profile = select(read(files.first), o)
        rows = profile.line_table.reject { |file, line, *| line <= 0 || file.start_with?("<") }
        by_file = rows.group_by(&:first)
        total = profile.line_table.sum { _3 }
        unit = profile.counters[:sample_types]&.dig(-1, 1) || "nanoseconds"
        only = nil
        chosen = if o.source_file
                   by_file.keys.select { |f| f == o.source_file || f.end_with?("/#{o.source_file}") }
                 elsif o.method
                   file, only = method_lines(profile, o.method, by_file)
                   [file]
                 else
                   by_file.max_by(o.top.clamp(1, 3)) { |_, lines| lines.sum { _3 } }.map(&:first)
                 end
        if chosen.empty?
          raise UsageError, "no line of #{o.source_file} ran in #{files.first}" if o.source_file
          out.puts "no sample executed a line of a source file"
        end
        chosen.each { |f| annotate_file(out, err, f, by_file[f], total, unit, o.context, only) }
        0
      end

      # the file of the method named name and the span of its lines that ran: [file, range]
      def method_lines(profile, name, by_file)
        frames = profile.samples.flat_map(&:first).select { |label, *| label == name }
        raise UsageError, "no method #{name.inspect} in the profile" if frames.empty?
        file = frames.first[1]
        raise UsageError, "#{name} has no source file (#{file})" unless by_file.key?(file)
        lines = frames.map(&:last).select(&:positive?)
        [file, lines.min..lines.max]
      end

      def annotate_file(out, err, file, lines, total, unit, context, only)
        source = File.readlines(file, chomp: true) if File.file?(file)
        err.puts "hakari: the source of #{file} is not here; its lines are shown without their text" unless source
        by_line = lines.to_h { |_, line, s, c| [line, [s, c]] }
        hottest = lines.sort_by { -_3 }.first(3).select { _3.positive? }.map { _2 }
        shown = by_line.keys.select { |l| only.nil? || only.cover?(l) }
        shown = shown.flat_map { |l| ((l - context)..(l + context)).to_a }.uniq.sort.select(&:positive?)
        shown &= (1..source.size).to_a if source
        out.puts "", "#{file}  (self, cumulative, line; > the hottest)"
        prev = nil
        shown.each do |l|
          out.puts "       ..." if prev && l > prev + 1
          s, c = by_line[l]
          text = source ? source[l - 1] : ""
          values = s ? format("%10s %10s", amount(s, total, unit), amount(c, total, unit)) : " " * 21
          out.puts format("%s %6d %s %s", values, l, hottest.include?(l) ? ">" : " ", text)
          prev = l
        end
      end

      def amount(v, total, unit)
        pct = total.positive? ? 100.0 * v / total : 0
        unit == "nanoseconds" ? format("%.1fms %3.0f%%", v / 1e6, pct).sub(/ +/, " ") : format("%d %3.0f%%", v, pct)
      end

      # => [Parsed, file arguments]; raises UsageError naming the bad option or value
      def parse(name, argv)
        o = Parsed.new(top: name == "annotate" ? 3 : TOP_DEFAULT, lines: false, absolute: false, context: 2)
        files = Options.usage_errors(name, "hakari help #{name}") { parser(name, o).parse(argv) }
        o.output &&= File.expand_path(check_output(o.output))
        o.html &&= File.expand_path(check_output(o.html))
        [o, files]
      end

      def parser(name, o)
        op = OptionParser.new
        op.base.long.clear
        op.base.short.clear
        op.on("--top N") { |v| o.top = count("--top", v) }
        op.on("--focus REGEXP") { |v| o.focus = v }
        op.on("--ignore REGEXP") { |v| o.ignore = v }
        op.on("--thread N") { |v| o.thread = count("--thread", v, min: 0) }
        op.on("--tag KEY=VALUE") { |v| o.tag = v }
        op.on("--lines") { o.lines = true }
        if name == "annotate"
          op.on("--file PATH") { |v| o.source_file = v }
          op.on("--method NAME") { |v| o.method = v }
          op.on("--context N") { |v| o.context = count("--context", v, min: 0) }
        elsif name == "report"
          op.on("-o", "--output PATH") { |v| o.output = v }
          op.on("--format FORMAT") { |v| o.format = Options.choice("format", v, Hakari::FORMATS) }
          op.on("--html") { o.format = :html }
          op.on("--group-by KEY") { |v| o.group_by = v }
        else
          op.on("--absolute") { o.absolute = true }
          op.on("--html PATH") { |v| o.html = v }
          op.on("--fail-above PCT") { |v| o.fail_above = points(v) }
        end
        op.on("-h", "--help") { raise HelpRequested, name }
        op
      end

      def count(what, value, min: 1)
        n = value.match?(/\A[0-9]+\z/) ? Integer(value, 10) : nil
        return n if n && n >= min && n <= 2**31 - 1
        raise UsageError, "invalid #{what} #{value.inspect} (expected an integer, #{min} or more)"
      end

      def points(value)
        pct = Float(value, exception: false) if value.match?(/\A[0-9]+(\.[0-9]+)?\z/)
        return pct if pct
        raise UsageError, "invalid --fail-above #{value.inspect} (expected percentage points, a number 0 or more)"
      end

      def check_output(path)
        problem = Hakari::Output.problem(path)
        raise UsageError, "cannot write to #{path.inspect}: #{problem}" if problem
        path
      end

      # the profile in file path, or a CommandError (exit 2) naming the file and the problem
      def read(path)
        raise Errno::EISDIR, path if File.directory?(path)
        Hakari::Native.read_file(path)
      rescue SystemCallError => e
        raise CommandError.new("cannot read #{path}: #{e.message.sub(/ @ .*/, "").sub(/ - .*\z/, "")}", 2)
      rescue ArgumentError => e
        raise CommandError.new("#{path} is not a profile hakari can read: #{e.message}", 2)
      end

      def select(profile, o)
        return profile unless o.focus || o.ignore || o.thread || o.tag || o.lines
        profile.select(o.focus, o.ignore, o.thread, o.tag, o.lines)
      rescue ArgumentError => e
        raise UsageError, e.message
      end
    end
  end
end
