# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# hakari's pprof read by an independent reader, `go tool pprof` (Debian golang-go).
class PprofTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)
  FIB = File.join(ROOT, "bench", "fib.rb")

  def pprof(*args)
    out, err, st = Open3.capture3("go", "tool", "pprof", *args)
    assert st.success?, "go tool pprof #{args.join(' ')} failed: #{err}"
    out
  end

  def record(dir, *cmd)
    out = File.join(dir, "out.pb.gz")
    _, err, st = Open3.capture3(RbConfig.ruby, "-I#{ROOT}/lib", "#{ROOT}/exe/hakari", "record", "-o", out, *cmd)
    assert st.success?, err
    out
  end

  # fib's lines that can be executing: the `return n if n < 2` line and the recursive call line
  def fib_lines = File.readlines(FIB).each_index.select { |i| File.readlines(FIB)[i] =~ /return n|fib\(n - 1\)/ }.map { _1 + 1 }

  def test_record_fib_top_shows_fib_with_the_large_majority
    Dir.mktmpdir do |dir|
      out = record(dir, RbConfig.ruby, FIB, "32") # long enough for the startup to be a small share under YJIT
      top = pprof("-top", out)
      assert_match(/^Type: cpu$/, top)
      row = top.lines.find { |l| l.end_with?(" Object#fib\n") }
      refute_nil row, top
      # fib's own time, with the Integer operators it runs through specialized instructions where
      # those are shown as frames of their own (17 % of it on a loaded sanitizer run)
      ops = top.lines.select { |l| l =~ / Integer#[<+-]$/ }
      flat_pct = row.split[1].to_f + ops.sum { |l| l.split[1].to_f }
      assert_operator flat_pct, :>=, 85.0, top
      first = top.lines.find { |l| l =~ /^\s*[\d.]+(?:[nuµm]?s|mins|hrs)\s/ } # pprof scales ns to ns/us/ms/s
      assert_match(/Object#fib$/, first.to_s, "fib is the first row:\n#{top}")
    end
  end

  def test_raw_shows_executing_line_numbers_and_metadata
    Dir.mktmpdir do |dir|
      out = record(dir, RbConfig.ruby, FIB, "28")
      raw = pprof("-raw", out)
      fib_locs = raw.lines.grep(/ Object#fib /)
      refute_empty fib_locs
      lines = fib_locs.map { |l| l[/fib\.rb:(\d+)/, 1].to_i }.uniq.sort
      assert_operator lines, :-, fib_lines, :empty?
      refute_empty lines
      assert_includes raw, "PeriodType: cpu nanoseconds"
      assert_includes raw, "Period: 1000000"
      assert_match(/^samples\/count cpu\/nanoseconds\[dflt\]$/, raw)
      assert_match(/Comment: hakari \d+\.\d+\.\d+/, raw)
      assert_match(/Comment: ruby=ruby 3\./, raw)
      assert_match(/Comment: trigger_count=\d+ sampling_count=\d+ sample_count=\d+ dropped_count=0 /, raw)
      assert_match(/thread:\[1\]/, raw)
      assert_match(/^Duration: /, raw)
    end
  end

  def test_values_round_trip_exactly
    data = Hakari.start(mode: :wall) { Workloads.spin(0.05) }
    Dir.mktmpdir do |dir|
      path = Hakari.save(File.join(dir, "p.pb.gz"), data)
      raw = pprof("-raw", path)
      # every sample row: "count weight: loc ids"
      rows = raw.lines.grep(/^\s+\d+\s+\d+: /).map { |l| l.split(":").first.split.map(&:to_i) }
      assert_equal data[:samples].map { |s| [s[2], s[1]] }.sort, rows.sort
      assert_match(/^Type: wall$/, pprof("-top", path))
    end
  end

  def test_thread_labels_group_and_filter
    data = Hakari.start(mode: :cpu) do
      t = Thread.new { Workloads.spin(0.08) }
      Workloads.spin(0.08)
      t.join
    end
    Dir.mktmpdir do |dir|
      path = Hakari.save(File.join(dir, "t.pb.gz"), data)
      all = pprof("-top", path)[/Total samples = ([\d.]+)ms/, 1].to_f
      # the header's total stays the whole profile; the filtered share is on the "Showing" line
      one = pprof("-top", "-tagfocus=thread=2", path)[/Showing nodes accounting for ([\d.]+)ms/, 1].to_f
      assert_operator one, :>, 0.3 * all
      assert_operator one, :<, 0.7 * all
    end
  end

  def test_cumulative_is_recursion_safe
    data = Hakari.start { Workloads.fib_for(0.05) } # recursive, and long enough under YJIT
    Dir.mktmpdir do |dir|
      top = pprof("-top", Hakari.save(File.join(dir, "f.pb.gz"), data))
      row = top.lines.find { |l| l.end_with?(" Workloads.fib\n") }
      assert_operator row.split[4].to_f, :<=, 100.0, "cum% never exceeds 100 for a recursive method"
    end
  end
end
