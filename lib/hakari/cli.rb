# frozen_string_literal: true

require_relative "version"
require_relative "cli/options"
require_relative "cli/runner"
require_relative "cli/stat_printer"
require_relative "cli/help"
require_relative "cli/report"

module Hakari
  # The `hakari` command: parses arguments, runs the command with lib/hakari/autorun.rb
  # injected through RUBYOPT, and prints what the profiled process left in the session
  # directory. No profiling logic lives here (see DESIGN.md, "Layers").
  #
  # Exit status: the command's own (128+signo if a signal killed it); 2 for bad usage,
  # before anything runs; 127/126 if the command cannot be started; 1 if the command
  # succeeded but its profile could not be made or written.
  class CLI
    def self.start(argv)
      new.run(argv)
    end

    def initialize(out: $stdout, err: $stderr)
      @out = out
      @err = err
    end

    # => Integer exit status
    def run(argv)
      case argv.first
      when nil then @err.puts Help::USAGE; 2
      when "-h", "--help" then @out.puts Help::USAGE; 0
      when "-V", "--version" then @out.puts "hakari #{VERSION}"; 0
      when "help" then help(argv[1])
      when "record", "stat", "exec" then run_command(argv.first, argv.drop(1))
      when "report", "diff", "annotate"
        load_engine
        Report.public_send(argv.first, argv.drop(1), out: @out, err: @err)
      else raise UsageError, "unknown command #{argv.first.inspect} (expected record, stat, exec, report, diff, annotate or help)"
      end
    rescue UsageError, CommandError => e
      @err.puts "hakari: #{e.message}"
      e.respond_to?(:exit_code) ? e.exit_code : 2
    rescue HelpRequested => e
      @out.puts Help.command(e.message)
      0
    end

    private

    # `hakari help`: the full reference; `hakari help record`: that command's options
    def help(topic)
      return @out.puts(Help::TEXT) || 0 if topic.nil?
      unless Help::COMMANDS.key?(topic)
        raise UsageError, "no help for #{topic.inspect} (expected #{Help::COMMANDS.keys.join(", ")}, or nothing for all)"
      end
      @out.puts Help.command(topic)
      0
    end

    def run_command(name, argv)
      load_engine
      o = Options.parse(name, argv)
      outcome = Runner.new(o).run
      name == "record" ? record(o, outcome) : stat(o, outcome)
    end

    # The parent needs the extension only for its constants and children_rusage; a
    # broken build is reported, not a backtrace.
    def load_engine
      require "hakari"
    rescue LoadError => e
      raise CommandError.new("cannot load the hakari extension (#{e.message}); run script/build", 1)
    end

    def record(o, outcome)
      ok = check_profile(outcome, required: true)
      begin
        @out.write(outcome.report) if ok && o.print && outcome.report
      rescue Errno::EPIPE
        # `hakari record -p … | head`: the reader has what it wanted
      end
      if ok && o.verbose && o.every
        @err.puts "hakari: wrote snapshots every #{o.every} s to #{o.output}"
      elsif ok && o.verbose && o.output
        @err.puts "hakari: #{wrote_line(o, outcome.result)}"
      end
      exit_status(outcome, ok)
    end

    # stat is useful as time(1) for any command, so a command without Ruby is not an error.
    def stat(o, outcome)
      @err.puts StatPrinter.new(o, outcome).lines
      @err.write(outcome.report) if o.report && outcome.report
      exit_status(outcome, check_profile(outcome, required: false))
    end

    # Says on one line what went wrong with the profile; => false if it did.
    def check_profile(outcome, required:)
      res = outcome.result
      if res.nil? && outcome.claimed_pid
        @err.puts "hakari: Ruby process #{outcome.claimed_pid} exited without finishing its profile " \
                  "(killed by a signal, or it called exit!)"
        return false
      elsif res.nil?
        # for stat, a command without Ruby is normal use (as time(1)): a note, not an error
        @err.puts(required ? "hakari: no Ruby process was profiled: the command never loaded hakari/autorun " \
                             "(is it a Ruby program? RUBYOPT must reach it)"
                           : "hakari: note: no Ruby process ran, so there are no Ruby figures")
        return !required
      elsif res["status"] != "ok"
        @err.puts "hakari: #{res["error"]}"
        return false
      end
      dropped = res["dropped_count"].to_i
      if dropped.positive? && %w[object retained].include?(res["mode"])
        # objects a thread made with no Ruby frame on its stack (Ruby compiling the script, say)
        @err.puts "hakari: note: #{dropped} objects are in no sample (made with no Ruby frame running, " \
                  "as while Ruby compiles a script, or their stack could not be read)"
      elsif dropped.positive?
        @err.puts "hakari: note: #{dropped} of #{res["trigger_count"]} samples were dropped"
      end
      true
    end

    # The command's failure wins; hakari's own failure only turns a success into 1.
    # -v: what was written, and what stopping and writing cost (the profiler's time after the program's)
    def wrote_line(o, r)
      what = r["mode"].to_s == "trace" ? "#{r["call_count"]} calls, #{r["node_count"]} call paths" : "#{r["sample_count"]} samples"
      size = r["output_bytes"] ? ", #{r["output_bytes"]} bytes" : ""
      line = "wrote #{o.output} (#{o.format || Hakari.format_for(o.output)}, #{what}#{size})"
      line += format("; stop %.1f ms, write %.1f ms", r["stop_ns"].to_f / 1e6, r["write_ns"].to_f / 1e6) if r["stop_ns"] && r["write_ns"]
      line
    end

    def exit_status(outcome, ok)
      return outcome.exit_code unless outcome.exit_code.zero?
      ok ? 0 : 1
    end
  end
end
