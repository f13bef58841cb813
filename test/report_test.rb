# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "tmpdir"
require "fileutils"
require "json"

# `hakari report` and `hakari diff`, as a user runs them: the real exe/hakari in a child
# process, on profile files written by hakari, by Go's pprof, and by nobody (broken ones).
class ReportTest < Minitest::Test
  include ProfileHelpers

  EXE = File.expand_path("../exe/hakari", __dir__)

  def setup
    @dir = Dir.mktmpdir("hakari-report-test-")
  end

  def teardown
    FileUtils.remove_entry(@dir)
  end

  def path(name) = File.join(@dir, name)

  def hakari(*args, chdir: @dir)
    Open3.capture3({ "RUBYLIB" => ENGINE_LIB, "RUBYOPT" => nil }, RbConfig.ruby, EXE, *args, chdir: chdir)
  end

  # a leaf of its own, beside Workloads.fib
  def helper(n) = n < 2 ? n : helper(n - 1) + helper(n - 2)

  # the block again and again until this thread has used so many seconds of CPU since the call:
  # a rate measured once cannot size the work (under YJIT, code compiled at the start of a
  # long suite may be thrown away by the end of it, and fib ran eleven times longer)
  def for_cpu(seconds)
    clock = Process::CLOCK_THREAD_CPUTIME_ID
    stop = Process.clock_gettime(clock) + seconds
    yield while Process.clock_gettime(clock) < stop
  end

  # a cpu profile of fib on the main thread and helper on another, each for about so many
  # seconds of CPU (tens of periods: a few would be sampled by chance), saved as pprof
  def recorded(name, fib: 0.05, helper: 0.05)
    # the suite's garbage is swept before, not in the profile (a CI run's base profile of 85 ms
    # held 20 ms of an earlier test's lazy sweep, which then outranked fib in the diff)
    GC.start
    data = Hakari.start(mode: :cpu) do
      t = Thread.new { for_cpu(helper) { helper(20) } }
      for_cpu(fib) { Workloads.fib(22) }
      t.join
    end
    Hakari.save(path(name), data)
    data
  end

  def flat_names(report) = report[/^Flat:\n(.*?)(?:\n\n|\z)/m, 1].to_s.lines.map { |l| l[/%\s+(.*) \(/, 1] }

  def test_report_prints_the_tables_and_selects
    data = recorded("a.pb.gz")
    out, err, st = hakari("report", "a.pb.gz")
    assert_equal [0, ""], [st.exitstatus, err]
    assert_match(/^Total: +[\d.]+ ms \(cpu\)$/, out)
    assert_includes flat_names(out), "Workloads.fib"
    assert_in_delta total(data) / 1e6, out[/^Total: +([\d.]+)/, 1].to_f, 0.06
    # --top: rows per table
    out, = hakari("report", "a.pb.gz", "--top", "1")
    assert_equal 1, flat_names(out).size
    # --focus keeps the helper's thread's samples; --ignore drops them
    out, = hakari("report", "a.pb.gz", "--focus", "ReportTest#helper")
    assert_in_delta cumulative(data, "ReportTest#helper") / 1e6, out[/^Total: +([\d.]+)/, 1].to_f, 0.06
    out, = hakari("report", "a.pb.gz", "--ignore", "helper")
    refute_match(/ReportTest#helper/, out)
    # --thread: the main thread's samples only
    main_seq = data[:samples].find { |frames, *| frames.any? { |f| f[0] == "ReportTest#recorded" } }[3]
    out, = hakari("report", "a.pb.gz", "--thread", main_seq.to_s)
    refute_match(/ReportTest#helper/, out)
    assert_match(/Workloads.fib/, out)
    # --tag: a label's value, the thread's number as --thread, the state's string
    tagged, = hakari("report", "a.pb.gz", "--tag", "thread=#{main_seq}")
    assert_equal out, tagged
    out, = hakari("report", "a.pb.gz", "--tag", "state=running")
    running = data[:samples].sum { |frames, w| frames.first[0].match?(/\A\[(GVL|GC) /) ? 0 : w }
    assert_in_delta running / 1e6, out[/^Total: +([\d.]+)/, 1].to_f, 0.06
    out, = hakari("report", "a.pb.gz", "--tag", "state=nothing")
    assert_match(/^Total: +0.0 ms/, out)
    # --lines: each executing line ranked on its own
    out, = hakari("report", "a.pb.gz", "--lines")
    assert(flat_names(out).any? { |n| n.match?(/\AWorkloads.fib:\d+\z/) }, out)
  end

  def test_report_writes_other_formats_and_go_reads_them
    recorded("a.pb.gz")
    _, err, st = hakari("report", "a.pb.gz", "-o", "a.collapsed")
    assert_equal 0, st.exitstatus, err
    assert_match(/Workloads.fib \d+$/, File.read(path("a.collapsed")))
    _, err, st = hakari("report", "a.pb.gz", "--focus", "fib", "-o", "fib.pb.gz")
    assert_equal 0, st.exitstatus, err
    top, err, st = Open3.capture3("go", "tool", "pprof", "-top", path("fib.pb.gz"))
    assert st.success?, err
    assert_match(/Workloads.fib/, top)
    refute_match(/ReportTest#helper/, top)
  end

  def test_speedscope_holds_each_threads_samples
    data = recorded("a.pb.gz")
    _, err, st = hakari("report", "a.pb.gz", "-o", "a.speedscope.json")
    assert_equal 0, st.exitstatus, err
    doc = JSON.parse(File.read(path("a.speedscope.json")))
    assert_equal "https://www.speedscope.app/file-format-schema.json", doc["$schema"]
    frames = doc["shared"]["frames"]
    per_thread = data[:samples].group_by { _4 }.transform_values { |rows| rows.sum { _2 } }
    assert_equal per_thread.keys.sort.map { "thread #{_1}" }, doc["profiles"].map { _1["name"] }.sort
    doc["profiles"].each do |prof|
      assert_equal "nanoseconds", prof["unit"]
      assert_equal per_thread[prof["name"][/\d+/].to_i], prof["weights"].sum
      assert_equal prof["endValue"], prof["weights"].sum
      prof["samples"].each { |stack| stack.each { |f| assert_operator f, :<, frames.size } }
    end
    assert(frames.any? { |f| f["name"] == "Workloads.fib" && f["file"].end_with?("test_helper.rb") && f["line"] })
  end

  # the lines that ran, with their time, beside the source; the hottest marked
  def test_annotate_shows_the_source_with_its_time
    recorded("a.pb.gz")
    # from where the test's own paths lead to its sources (they may be relative)
    out, err, st = hakari("annotate", path("a.pb.gz"), "--method", "Workloads.fib", "--context", "0", chdir: Dir.pwd)
    assert_equal [0, ""], [st.exitstatus, err]
    assert_match(%r{test_helper.rb  \(self, cumulative, line; > the hottest\)}, out)
    fib_line = out.lines.find { |l| l.include?("def fib(n) =") }
    assert_match(/\A\s*[\d.]+ms +\d+%\s+[\d.]+ms +\d+%\s+\d+ > +def fib/, fib_line, out)
    out, err, st = hakari("annotate", path("a.pb.gz"), "--file", "report_test.rb", chdir: Dir.pwd)
    assert_equal [0, ""], [st.exitstatus, err]
    assert_match(/def helper\(n\) = n < 2/, out)
    # from elsewhere a relative path finds no source: said, and the lines still shown with their times
    out, err, st = hakari("annotate", path("a.pb.gz"), "--file", "report_test.rb", chdir: "/")
    assert_equal 0, st.exitstatus, err
    assert_match(/the source of .*report_test.rb is not here/, err) if __FILE__.start_with?(".", "test")
    assert_match(/ms +\d+%/, out)
    _, err, st = hakari("annotate", "a.pb.gz", "--method", "No#such")
    assert_equal 2, st.exitstatus
    assert_match(/no method "No#such" in the profile/, err)
  end

  # A profile Go's pprof wrote (re-encoded from ours: its own ids, its own string table) reads
  # back with the same total.
  def test_report_reads_a_file_go_wrote
    data = recorded("a.pb.gz")
    go, err, st = Open3.capture3("go", "tool", "pprof", "-proto", path("a.pb.gz"), binmode: true)
    assert st.success?, err
    File.binwrite(path("go.pb.gz"), go)
    out, err, st = hakari("report", "go.pb.gz")
    assert_equal 0, st.exitstatus, err
    assert_in_delta total(data) / 1e6, out[/^Total: +([\d.]+)/, 1].to_f, 0.06
    assert_includes flat_names(out), "Workloads.fib"
  end

  def test_bad_files_are_one_line_and_status_2
    File.binwrite(path("garbage.pb"), "this is no profile\n")
    recorded("a.pb.gz")
    File.binwrite(path("cut.pb.gz"), File.binread(path("a.pb.gz"))[0, 100])
    { "missing.pb.gz" => /cannot read .*missing.pb.gz: No such file or directory/,
      "garbage.pb" => /garbage.pb is not a profile hakari can read: /,
      "cut.pb.gz" => /cut.pb.gz is not a profile hakari can read: / }.each do |file, message|
      out, err, st = hakari("report", file)
      assert_equal 2, st.exitstatus, "#{file}: #{err}"
      assert_equal "", out
      assert_equal 1, err.lines.size, err
      assert_match message, err
    end
    _, err, st = hakari("report", "a.pb.gz", "--focus", "(")
    assert_equal [2, 1], [st.exitstatus, err.lines.size], err
    assert_match(/bad --focus expression "\(": /, err)
    _, err, st = hakari("report", "a.pb.gz", "--tag", "state")
    assert_equal [2, 1], [st.exitstatus, err.lines.size], err
    assert_match(/bad --tag "state": expected KEY=VALUE/, err)
    [%w[report], %w[report a.pb.gz a.pb.gz], %w[diff a.pb.gz], %w[report a.pb.gz --top 0],
     %w[report a.pb.gz --format nope], %w[diff a.pb.gz a.pb.gz --fail-above much]].each do |args|
      _, err, st = hakari(*args)
      assert_equal [2, 1], [st.exitstatus, err.lines.size], "#{args}: #{err}"
    end
  end

  # The helper ten times heavier in the new profile: its self share rises, the gate trips; a
  # profile against itself changes nothing and passes.
  def test_diff_ranks_the_change_and_gates_on_it
    recorded("base.pb.gz", helper: 0.01)
    recorded("new.pb.gz", helper: 0.1)
    out, err, st = hakari("diff", "base.pb.gz", "new.pb.gz")
    assert_equal [0, ""], [st.exitstatus, err]
    # the helper rose as much as fib fell: the two head the self table, largest change first
    rows = out[/^Self.*?:\n(.*?)(?:\n\n|\z)/m, 1].lines
    change = ->(name) { rows.find { |r| r.include?(name) }&.then { |r| r[/\A\s*([-+][\d.]+) pts/, 1].to_f } }
    assert_operator change["ReportTest#helper"], :>, 10, out
    assert_operator change["Workloads.fib"], :<, -10, out
    assert_equal [rows[0], rows[1]].map { |r| r[/ (\S+) \(/, 1] }.sort, %w[ReportTest#helper Workloads.fib], out
    _, err, st = hakari("diff", "base.pb.gz", "new.pb.gz", "--fail-above", "5")
    assert_equal 1, st.exitstatus, err
    assert_match(/a function's self share grew by [\d.]+ points, more than --fail-above 5 allows/, err)
    out, err, st = hakari("diff", "base.pb.gz", "base.pb.gz", "--fail-above", "0")
    assert_equal [0, ""], [st.exitstatus, err]
    refute_match(/pts/, out)
    out, = hakari("diff", "base.pb.gz", "new.pb.gz", "--absolute")
    assert_match(/ ms .*->/, out)
  end
end
