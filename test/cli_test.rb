# frozen_string_literal: true

# End-to-end tests of the `hakari` command: each runs the real exe/hakari in a child process
# against a small Ruby script written to a temporary directory, and checks what a user
# would see: exit status, stdout/stderr, and the files left behind (read back with an
# independent reader where there is one: `go tool pprof`).
#
#   ruby -Ilib -Itest test/cli_test.rb
#
# Workloads are ~0.2 s so the whole file stays well under a minute.

require "minitest/autorun"
require "open3"
require "tmpdir"
require "fileutils"
require "zlib"
require_relative "../lib/hakari/version"

class CLITest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)
  EXE = File.join(ROOT, "exe", "hakari")
  # where the commands find hakari: lib/, or script/test's sanitizer build first (test_helper.rb)
  ENGINE_LIB = ENV.fetch("HAKARI_TEST_LIB", File.join(ROOT, "lib"))

  # Burns CPU in one Ruby method (no block, no frame below it but a clock read), so
  # `burn` owns the flat profile in both modes.
  BURN = <<~RUBY
    def burn(sec)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + sec
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        i = 0
        i += 1 while i < 20_000
      end
    end
  RUBY

  def setup
    @dir = Dir.mktmpdir("hakari-cli-test-")
  end

  def teardown
    FileUtils.remove_entry(@dir)
  end

  # --- helpers --------------------------------------------------------------------

  def script(name, body)
    File.write(File.join(@dir, name), body)
    name
  end

  def burn_script(seconds = 0.2, name: "burn.rb", extra: "")
    script(name, "#{BURN}#{extra}\nburn(#{seconds})\nputs 'script done'\n")
  end

  # Runs `ruby exe/hakari ARGS` in @dir. The caller's RUBYOPT and any HAKARI_* are
  # removed so the test sees only what the CLI itself sets up.
  def hakari(*args, env: {})
    base = { "RUBYLIB" => ENGINE_LIB, "RUBYOPT" => nil }
    %w[SESSION MODE FREQUENCY OUTPUT FORMAT VERBOSE REPORT CLAIMED].each { |k| base["HAKARI_#{k}"] = nil }
    Open3.capture3(base.merge(env), RbConfig.ruby, EXE, *args, chdir: @dir)
  end

  def path(name) = File.join(@dir, name)

  def assert_one_line(err)
    assert_equal 1, err.lines.size, "expected exactly one line on stderr, got:\n#{err}"
  end

  # The flat table's rows of a text report: [[ms, name], ...] in the order printed.
  def flat_rows(report)
    flat = report[/^Flat:\n(.*?)(?:\n\n|\z)/m, 1] or flunk("no Flat: table in\n#{report}")
    flat.lines.map { |l| l =~ /([\d.]+) ms\s+[\d.]+%\s+(.*)/ ? [$1.to_f, $2] : flunk("bad row #{l.inspect}") }
  end

  # --- record -----------------------------------------------------------------------

  def test_record_writes_pprof_that_go_pprof_reads
    burn_script
    out, err, st = hakari("record", "ruby", "burn.rb")
    assert_equal 0, st.exitstatus, err
    assert_equal "script done\n", out
    assert_equal "", err
    data = File.binread(path("hakari.pb.gz")) # the default output, in the current directory
    assert_equal "\x1f\x8b".b, data[0, 2], "pprof output is gzip-compressed"
    refute_empty Zlib.gunzip(data)

    top, perr, pst = Open3.capture3("go", "tool", "pprof", "-top", path("hakari.pb.gz"))
    assert pst.success?, perr
    rows = top.lines.drop_while { |l| !l.include?("flat%") }.drop(1)
    refute_empty rows, top
    assert_match(/Object#burn$/, rows.first.strip, "hot method must top the flat list:\n#{top}")
    assert_match(/Type: cpu/, top)
  end

  def test_record_options_reach_the_profile
    burn_script
    _, err, st = hakari("record", "-m", "wall", "-f", "500", "-o", "w.txt", "-v", "ruby", "burn.rb")
    assert_equal 0, st.exitstatus, err
    size = File.size(path("w.txt"))
    assert_match(/^hakari: wrote #{Regexp.escape(File.join(File.realpath(@dir), "w.txt"))} \(text, \d+ samples, #{size} bytes\); stop \d+\.\d ms, write \d+\.\d ms$/, err)
    assert_match(/^\[hakari\] stop: \d+\.\d ms \(the profile built\)$/, err)
    report = File.read(path("w.txt"))
    assert_match(/\(wall\)/, report)
    assert_match(/Frequency: 500 Hz/, report)
  end

  def test_record_print_puts_the_text_report_on_stdout_and_writes_no_file
    burn_script
    out, err, st = hakari("record", "-p", "ruby", "burn.rb")
    assert_equal 0, st.exitstatus, err
    assert out.start_with?("script done\n"), "the report follows the program's own output:\n#{out}"
    assert_equal "Object#burn (burn.rb)", flat_rows(out).first[1]
    assert_match(/^Cumulative:/, out)
    assert_empty Dir.children(@dir) - ["burn.rb"], "-p alone writes no file"
  end

  # without -o the file is named for --format, so that its name says what it holds again
  def test_format_without_output_names_the_file
    burn_script
    assert_equal 0, hakari("record", "--format", "collapsed", "ruby", "burn.rb")[2].exitstatus
    assert_match(/;Object#burn \d+$/, File.read(path("hakari.collapsed")))
    out, err, st = hakari("record", "-p", "--format", "callgrind", "ruby", "burn.rb")
    assert_equal 0, st.exitstatus, err
    assert_match(/^Flat:/, out)
    assert_match(/^events: /, File.read(path("callgrind.out.hakari")))
    assert_equal %w[burn.rb callgrind.out.hakari hakari.collapsed], Dir.children(@dir).sort
  end

  # standalone (RUBYOPT=-rhakari/autorun) a bad setting is one line before the program runs,
  # naming the variable or value, and the program runs unprofiled
  def test_autorun_names_a_bad_setting_at_once
    [["HAKARI_FREQUENCY", "abc", /invalid HAKARI_FREQUENCY "abc" \(expected an integer from 1 to 10000\)/],
     ["HAKARI_FREQUENCY", " 100", /invalid HAKARI_FREQUENCY " 100"/],
     ["HAKARI_FORMAT", "xml", /unknown format "xml" \(expected one of/]].each do |var, value, message|
      env = { "RUBYLIB" => ENGINE_LIB, "RUBYOPT" => "-rhakari/autorun", var => value }
      out, err, st = Open3.capture3(env, RbConfig.ruby, "-e", "puts :ran", chdir: @dir)
      assert_equal [0, "ran\n"], [st.exitstatus, out], err
      assert_equal 1, err.lines.size, err
      assert_match(/\Ahakari: could not start profiling: /, err)
      assert_match message, err
      assert_empty Dir.children(@dir), var
    end
  end

  def test_record_print_with_output_does_both
    burn_script
    out, err, st = hakari("record", "-p", "-o", "both.collapsed", "ruby", "burn.rb")
    assert_equal 0, st.exitstatus, err
    assert_match(/^Flat:/, out)
    assert_match(/Object#burn \d+$/, File.read(path("both.collapsed")))
  end

  def test_collapsed_and_text_outputs
    burn_script
    assert_equal 0, hakari("record", "-o", "p.collapsed", "ruby", "burn.rb")[2].exitstatus
    lines = File.read(path("p.collapsed")).lines
    refute_empty lines
    lines.each { |l| assert_match(/\A\S.*? \d+\n\z/, l, "collapsed line: root;...;leaf WEIGHT") }
    hot = lines.max_by { |l| l.split.last.to_i }
    assert_match(/;Object#burn \d+$/, hot)
    # the stop-time tail ([unsampled]) comes at exit, in Hakari::Autorun's at_exit block: none
    # of hakari's own frames may show, there or anywhere
    # (at exit the main script has returned: 3.1 still shows <main> at the root, later Rubies nothing)
    assert lines.any? { |l| l.match?(/\A(<main>;)?\[unsampled\] /) }, lines.join
    lines.each { |l| refute_match(/Hakari/, l) }

    assert_equal 0, hakari("record", "-o", "p.txt", "ruby", "burn.rb")[2].exitstatus
    assert_equal "Object#burn (burn.rb)", flat_rows(File.read(path("p.txt"))).first[1]

    # --format wins over the extension
    assert_equal 0, hakari("record", "--format", "text", "-o", "p.dat", "ruby", "burn.rb")[2].exitstatus
    assert_match(/^Flat:/, File.read(path("p.dat")))
  end

  # Trace mode counts every call, so it shows whatever hakari's own start and finish do around
  # the program: the rest of the require that loads it, at_exit, GC.stat, Process.pid. None of
  # it may appear; a require the program makes is the program's.
  def test_trace_mode_profile_holds_only_the_program
    script = "def f = 1 + 1\nf\n"
    assert_equal 0, hakari("record", "-m", "trace", "-o", "t.collapsed", "ruby", "-e", script)[2].exitstatus
    assert_equal ["Module#method_added", "Object#f", "Object#f;Integer#+"],
                 File.read(path("t.collapsed")).lines.map { |l| l.split(" ").first }.sort
    assert_equal 0, hakari("record", "-m", "trace", "-o", "r.collapsed", "ruby", "-e", "require 'json'\n#{script}")[2].exitstatus
    assert_match(/^Kernel#require /, File.read(path("r.collapsed")))
  end

  def test_options_stop_at_the_command
    script("w.rb", "p $VERBOSE\n")
    # -w is ruby's (hakari has no -w: parsing it would be an error), so is -e after "--"
    out, err, st = hakari("record", "-o", "w.txt", "ruby", "-w", "w.rb")
    assert_equal 0, st.exitstatus, err
    assert_equal "true\n", out
    out, err, st = hakari("record", "-o", "w.txt", "--", "ruby", "-e", "p 42")
    assert_equal [0, "42\n"], [st.exitstatus, out], err
  end

  # --- exit status -----------------------------------------------------------------

  def test_exit_status_passes_through
    burn_script(0.05, extra: "\nat_exit { exit 3 }")
    _, err, st = hakari("record", "-o", "e.txt", "ruby", "burn.rb")
    assert_equal 3, st.exitstatus, err
    assert File.exist?(path("e.txt")), "a failing command is still profiled"

    _, err, st = hakari("record", "-o", "r.txt", "ruby", "-e", "raise 'boom'")
    assert_equal 1, st.exitstatus
    assert_match(/boom \(RuntimeError\)/, err)
    assert File.exist?(path("r.txt"))
  end

  def test_signal_death_is_128_plus_signo
    # TERM runs at_exit, so the profile is still written
    _, err, st = hakari("record", "-o", "t.txt", "ruby", "-e", "Process.kill(:TERM, $$); sleep 1")
    assert_equal 128 + Signal.list["TERM"], st.exitstatus, err
    assert File.exist?(path("t.txt"))
    # KILL does not: the status passes through and hakari says why there is no profile
    _, err, st = hakari("record", "-o", "k.txt", "ruby", "-e", "Process.kill(:KILL, $$); sleep 1")
    assert_equal 128 + Signal.list["KILL"], st.exitstatus
    assert_one_line err
    assert_match(/exited without finishing its profile/, err)
    refute File.exist?(path("k.txt"))
  end

  def test_command_not_found_and_not_ruby
    _, err, st = hakari("record", "no-such-command-hakari")
    assert_equal 127, st.exitstatus
    assert_equal "hakari: command not found: no-such-command-hakari\n", err

    # record of a command with no Ruby in it cannot produce a profile: say so, fail
    _, err, st = hakari("record", "-o", "n.pb.gz", "true")
    assert_equal 1, st.exitstatus
    assert_one_line err
    assert_match(/no Ruby process was profiled/, err)
    refute File.exist?(path("n.pb.gz"))
  end

  # --- which process profiles ---------------------------------------------------------

  def test_forked_and_spawned_rubies_do_not_write
    script("tree.rb", <<~RUBY)
      #{BURN}
      def child_work = burn(0.1)
      # neither the profile nor the result the CLI reads may exist before this process exits
      wrote = -> { File.exist?(ENV.fetch("OUT")) || File.exist?(File.join(ENV.fetch("HAKARI_SESSION"), "result")) }
      Process.wait(fork { child_work })   # a forked child runs at_exit too
      puts(wrote.call ? "fork wrote" : "fork did not write")
      system("ruby", "-e", "sleep 0.01")  # loads autorun through RUBYOPT, finds the claim taken
      puts(wrote.call ? "spawn wrote" : "spawn did not write")
      burn(0.1)
    RUBY
    out, err, st = hakari("record", "-o", "tree.txt", "ruby", "tree.rb", env: { "OUT" => path("tree.txt") })
    assert_equal 0, st.exitstatus, err
    assert_equal "fork did not write\nspawn did not write\n", out
    report = File.read(path("tree.txt"))
    assert_match(/Object#burn/, report)
    refute_match(/child_work/, report, "only the first Ruby process is profiled")
  end

  def test_a_ruby_that_execs_ruby_keeps_the_claim
    burn_script
    _, err, st = hakari("record", "-o", "x.txt", "ruby", "-e", "exec 'ruby', 'burn.rb'")
    assert_equal 0, st.exitstatus, err
    assert_equal "Object#burn (burn.rb)", flat_rows(File.read(path("x.txt"))).first[1]
  end

  def test_ruby_under_sh_c
    burn_script
    out, err, st = hakari("record", "-o", "sh.txt", "sh", "-c", "ruby burn.rb; exit 5")
    assert_equal 5, st.exitstatus, err
    assert_equal "script done\n", out
    assert_equal "Object#burn (burn.rb)", flat_rows(File.read(path("sh.txt"))).first[1]
  end

  # --- stat / exec ------------------------------------------------------------------

  STAT_SCRIPT = <<~RUBY
    #{BURN}
    def make_strings = 200_000.times.map { |i| "s\#{i}" }
    make_strings
    GC.start
    burn(0.15)
    sleep 0.05
  RUBY

  # wall mode's stat: where every thread's time went, and the calls that blocked most
  def test_stat_breaks_wall_time_down_by_state
    script("states.rb", "t = Thread.new { sleep 0.2 }\n#{BURN}\nburn(0.1)\nt.join\nGC.start\n")
    _, err, st = hakari("stat", "ruby", "states.rb") # wall mode, stat's default
    assert_equal 0, st.exitstatus, err
    assert_match(/Where the time went \(wall time of every thread, added\)/, err)
    assert_match(/^\s+[\d.]+ ms\s+[\d.]+ %  CPU execution$/, err)
    blocked = err[/^\s+([\d.]+) ms\s+[\d.]+ %  GVL blocked/, 1].to_f
    assert_operator blocked, :>, 150, err # the sleeper's 200 ms, and the main thread's join
    assert_match(/GC marking/, err) if Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2") # the GC is timed
    assert_match(/Top blocking calls.*\n.*(Kernel#sleep|Thread#join)/m, err)
  end

  def test_stat_prints_each_figure
    script("stat.rb", STAT_SCRIPT)
    # a stale HAKARI_OUTPUT in the user's environment must not make stat write a file
    out, err, st = hakari("stat", "ruby", "stat.rb", env: { "HAKARI_OUTPUT" => path("stale.pb.gz") })
    assert_equal 0, st.exitstatus, err
    assert_equal "", out, "stat writes only to stderr"
    assert_match(/Performance stats for 'ruby stat.rb' \(wall mode, 1000 Hz\)/, err)
    num = ->(label) { err[/^\s*([\d.,]+) \S*\s+#{label}/, 1]&.delete(",")&.to_f or flunk("no #{label} line:\n#{err}") }
    assert_operator num["real"], :>=, 200, "real covers the 0.2 s of work"
    assert_operator num["user"], :>, 50
    num["sys"]
    assert_operator num["CPU share"], :>, 0
    assert_match(/ms\s+GC time \([\d,]+ GCs: [\d,]+ minor, [1-9][\d,]* major\)/, err, "GC.start is a major GC")
    assert_operator num["allocated objects"], :>=, 200_000
    assert_operator num["freed objects"], :>, 0
    assert_operator num["peak RSS"], :>, 1
    # counts past 999 carry thousands separators (1,740 context switches on a loaded machine)
    assert_match(/\d\s+context switches \([\d,]+ voluntary, [\d,]+ involuntary\)/, err)
    assert_match(/\d\s+disk I\/O blocks \([\d,]+ in, [\d,]+ out\)/, err)
    assert_match(/\d\s+samples \/ [\d,]+ triggers \([\d,]+ dropped\)/, err)
    assert_operator num["samples"], :>, 0
    assert_operator num["profiler overhead"], :<, 10
    refute_match(/^Flat:/, err, "no tables without --report")
    assert_empty Dir.children(@dir) - ["stat.rb"]
  end

  def test_stat_report_and_exec_print_the_tables
    burn_script
    out, err, st = hakari("exec", "ruby", "burn.rb")
    assert_equal [0, "script done\n"], [st.exitstatus, out], err
    assert_match(/Performance stats for/, err)
    assert_equal "Object#burn (burn.rb)", flat_rows(err).first[1]
    assert_match(/^Cumulative:/, err)

    _, err, st = hakari("stat", "--report", "-m", "cpu", "-o", "s.pb.gz", "ruby", "burn.rb")
    assert_equal 0, st.exitstatus, err
    assert_match(/\(cpu mode, 1000 Hz\)/, err)
    assert_match(/^Flat:/, err)
    assert File.exist?(path("s.pb.gz")), "stat -o also saves the profile"
  end

  def test_stat_works_for_a_command_without_ruby
    _, err, st = hakari("stat", "sh", "-c", "exit 4")
    assert_equal 4, st.exitstatus
    assert_match(/real/, err)
    assert_match(/^hakari: note: no Ruby process ran, so there are no Ruby figures$/, err)
  end

  # --- help / version ---------------------------------------------------------------

  def test_help_and_version
    out, _, st = hakari("--version")
    assert_equal [0, "hakari #{Hakari::VERSION}\n"], [st.exitstatus, out]
    assert_equal out, hakari("-V")[0]

    short, _, st = hakari("--help")
    assert_equal 0, st.exitstatus
    assert_equal short, hakari("-h")[0]
    %w[record stat exec help --version].each { |w| assert_includes short, w }

    full, _, st = hakari("help")
    assert_equal 0, st.exitstatus
    %w[--mode --frequency --output --format --print --verbose --report --max-paths HAKARI_MAX_PATHS
       pprof collapsed text Hakari.start Hakari.stop Hakari.save encode
       HAKARI_MODE HAKARI_FREQUENCY HAKARI_OUTPUT HAKARI_FORMAT HAKARI_VERBOSE
       RUBYOPT EXIT].each { |w| assert_includes full, w }

    out, _, st = hakari("record", "-h")
    assert_equal 0, st.exitstatus
    assert_match(/\Ahakari record/, out)
    assert_equal [out, 0], hakari("help", "record").then { |o, _, s| [o, s.exitstatus] }

    _, err, st = hakari # no arguments at all is a usage error
    assert_equal 2, st.exitstatus
    assert_match(/Usage:/, err)
  end

  # --- bad input: one line, exit 2, nothing run, nothing written ------------------

  BAD = {
    %w[record -m bogus] => /unknown mode "bogus" \(expected cpu, wall, object, retained or trace\)/,
    %w[stat --mode=bogus] => /unknown mode "bogus"/,
    %w[record -f 0] => /invalid frequency "0" \(expected an integer from 1 to 10000 Hz\)/,
    %w[record -f -1] => /invalid frequency "-1"/,
    %w[record -f 100000] => /invalid frequency "100000"/,
    %w[exec -f x] => /invalid frequency "x"/,
    ["record", "-f", " 100"] => /invalid frequency " 100"/,
    %w[record -m object -i 0] => /invalid interval "0" \(expected an integer from 1 to 1000000000 objects\)/,
    %w[record -i 10] => /-i applies to -m object and -m retained \(mode is cpu\)/,
    %w[record -m object --watch 0] => /invalid watch "0" \(expected a share of the objects from 0.001 to 1, e.g. 0.2\)/,
    %w[record -m object --watch 1.5] => /invalid watch "1.5"/,
    %w[record -m object --watch x] => /invalid watch "x"/,
    %w[record -m retained --watch 0.5] => /--watch applies to -m object \(mode is retained\)/,
    %w[record --watch 0.5] => /--watch applies to -m object \(mode is cpu\)/,
    %w[record -m object -f 10] => /-f applies to -m cpu and -m wall \(mode is object; -m object takes -i\)/,
    %w[record --format bogus] => /unknown format "bogus" \(expected pprof, collapsed, text, flat, graph, callgrind, dot, html or speedscope\)/,
    %w[record --bogus] => /unknown option "--bogus"/,
    %w[stat -p] => /unknown option "-p" for stat/,
    %w[record -o /nonexistent-hakari/x.pb.gz] => %r{cannot write profile to "/nonexistent-hakari/x.pb.gz": directory /nonexistent-hakari does not exist},
    %w[record -o .] => /cannot write profile to ".": it is a directory/,
    # /proc says it is writable to root, yet takes no new file: tried, not guessed
    %w[record -o /proc/hakari-x.pb.gz] => %r{cannot write profile to "/proc/hakari-x.pb.gz": no file can be created in /proc},
    %w[frobnicate] => /unknown command "frobnicate" \(expected record, stat, exec, report, diff, annotate or help\)/,
    %w[help bogus] => /no help for "bogus" \(expected record, stat, exec, report, annotate, diff, or nothing for all\)/,
  }.freeze

  def test_bad_input_is_one_line_exit_2_and_runs_nothing
    probe = ["ruby", "-e", "File.write('ran', '')"]
    BAD.each do |args, message|
      _, err, st = hakari(*args, *probe)
      assert_equal 2, st.exitstatus, "#{args.inspect}: #{err}"
      assert_one_line err
      assert_match(/\Ahakari: /, err)
      assert_match message, err, args.inspect
      assert_empty Dir.children(@dir), "#{args.inspect} ran the command or wrote a file"
    end
  end

  def test_missing_command_or_value
    [%w[record], %w[stat -m cpu], %w[exec --], %w[record -o]].each do |args|
      _, err, st = hakari(*args)
      assert_equal 2, st.exitstatus, args.inspect
      assert_one_line err
      assert_match(/needs a (command|value)/, err)
    end
    assert_empty Dir.children(@dir)
  end

  # -o follows a symbolic link to its target and leaves the link; a FIFO (like /dev/stdout, a
  # device) is written in place, not renamed over
  def test_output_through_a_link_and_into_a_fifo
    burn_script
    File.symlink("target.collapsed", path("link.collapsed"))
    assert_equal 0, hakari("record", "-o", "link.collapsed", "ruby", "burn.rb")[2].exitstatus
    assert File.symlink?(path("link.collapsed")), "the link was replaced"
    assert_match(/;Object#burn \d+$/, File.read(path("target.collapsed")))

    File.mkfifo(path("fifo"))
    reader = Thread.new { File.binread(path("fifo")) }
    _, err, st = hakari("record", "--format", "collapsed", "-o", "fifo", "ruby", "burn.rb")
    assert_equal 0, st.exitstatus, err
    assert_match(/;Object#burn \d+$/, reader.value)
    assert File.pipe?(path("fifo")), "the FIFO was replaced"
    assert_equal %w[burn.rb fifo link.collapsed target.collapsed], Dir.children(@dir).sort
  end

  def test_profile_that_cannot_be_written_at_exit
    FileUtils.mkdir(path("out"))
    # the program takes the output's name for a directory of its own after hakari checked it
    _, err, st = hakari("record", "-o", "out/p.pb.gz", "ruby", "-e", "Dir.mkdir('out/p.pb.gz')")
    assert_equal 1, st.exitstatus
    assert_one_line err
    assert_match(%r{\Ahakari: cannot write profile to ".*out/p.pb.gz"}, err)
    assert_equal ["p.pb.gz"], Dir.children(path("out")), "no temporary file left behind"
    assert File.directory?(path("out/p.pb.gz"))
  end
end
