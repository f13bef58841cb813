# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Continuous snapshots: Hakari.start(every:, output_dir:, keep:, signal:) in a program that
# runs on, checked from outside as a user would: the files, their order, sizes and totals.
class SnapshotsTest < Minitest::Test
  WORKLOAD = File.expand_path("fixtures/snapshots_workload.rb", __dir__)

  def run_workload(*args)
    out, err, st = Open3.capture3(RbConfig.ruby, "-I#{ENGINE_LIB}", WORKLOAD, *args.map(&:to_s))
    assert st.success?, err
    out.lines.map(&:strip)
  end

  def files(dir) = Dir.children(dir).sort.map { |f| File.join(dir, f) }

  def test_a_ten_second_run_is_in_its_files_each_whole_and_together_the_run
    Dir.mktmpdir do |dir|
      _, started, stopped = run_workload(dir, 1, 10)
      paths = files(dir)
      assert_equal (1..paths.size).to_a, paths.map { |p| Integer(File.basename(p).split("-")[2], 10) }
      assert_includes 10..12, paths.size, paths.inspect
      assert(paths.all? { |p| p.end_with?(".pb.gz") && File.size(p) > 200 }, paths.map { |p| [p, File.size(p)] }.inspect)
      profiles = paths.map { |p| Hakari::Native.read_file(p) }
      spans = profiles.map { |p| [p.counters[:start_time_ns], p.counters[:duration_ns]] }
      # each period begins where the one before it ended, the first at start, the last at stop
      spans.each_cons(2) { |(s1, d1), (s2, _)| assert_in_delta s1 + d1, s2, 2_000_000 }
      run = Integer(stopped) - Integer(started)
      assert_in_delta run, spans.sum { _2 }, 50_000_000, "the files' durations add up to the run"
      # wall mode, one thread: each file's samples hold its whole period (hakari's writer thread is not sampled)
      profiles.zip(spans) do |p, (_, duration)|
        assert_in_delta duration, p.label_values("state").values.sum, 0.02 * duration + 2_000_000
      end
    end
  end

  def test_keep_leaves_the_newest_files
    Dir.mktmpdir do |dir|
      run_workload(dir, 0.2, 1.5, 3)
      seqs = files(dir).map { |p| Integer(File.basename(p).split("-")[2], 10) }
      assert_equal 3, seqs.size
      assert_operator seqs.first, :>=, 5, seqs.inspect
      assert_equal seqs.first.step(by: 1).first(3), seqs
    end
  end

  def test_a_kill_in_the_middle_leaves_only_whole_files
    Dir.mktmpdir do |dir|
      r, w = IO.pipe
      pid = spawn(RbConfig.ruby, "-I#{ENGINE_LIB}", WORKLOAD, dir, "0.1", "30", out: w)
      w.close
      assert_equal "started\n", r.gets
      sleep 1.5
      Process.kill(:KILL, pid)
      Process.wait(pid)
      r.close
      profiles = files(dir).reject { |p| p.end_with?(".tmp") }
      assert_operator profiles.size, :>=, 5
      profiles.each { |p| assert_operator Hakari::Native.read_file(p).counters[:duration_ns], :>, 0, p }
    end
  end

  def test_the_signal_writes_a_snapshot_at_once
    Dir.mktmpdir do |dir|
      r, w = IO.pipe
      pid = spawn(RbConfig.ruby, "-I#{ENGINE_LIB}", WORKLOAD, dir, "600", "4", "-", "USR2", out: w)
      w.close
      assert_equal "started\n", r.gets
      sleep 0.5
      Process.kill(:USR2, pid)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 2
      sleep 0.05 until !Dir.empty?(dir) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      assert_equal 1, Dir.children(dir).size, "one file, written at the signal"
      Process.wait(pid)
      r.close
      assert_equal 2, Dir.children(dir).size, "and the last period's at stop"
    end
  end

  def test_record_every_writes_snapshots_into_the_directory
    Dir.mktmpdir do |dir|
      snaps = File.join(dir, "snaps") # made by record
      cmd = [RbConfig.ruby, "-I#{ENGINE_LIB}", File.expand_path("../exe/hakari", __dir__), "record"]
      # a 1.2 s loop that prints the CPU it used and the process's at its end (less than 1.2 s on
      # a loaded machine)
      loop = "c = Process::CLOCK_THREAD_CPUTIME_ID; c0 = Process.clock_gettime(c, :nanosecond); " \
             "t = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1.2; nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < t; " \
             "print Process.clock_gettime(c, :nanosecond) - c0, ' ', Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond)"
      out, err, st = Open3.capture3(*cmd, "--every", "250ms", "-o", snaps, RbConfig.ruby, "-e", loop)
      assert st.success?, err
      names = Dir.children(snaps).sort
      assert_includes 4..7, names.size, names.inspect
      total = names.sum { |n| Hakari::Native.read_file(File.join(snaps, n)).label_values("state").values.sum }
      looped, process = out.split.map(&:to_i)
      # cpu mode: the files hold the loop's CPU, and no more than the process used
      assert_operator total, :>=, looped - 0.05e9, out
      assert_operator total, :<=, process + 0.02e9, out # and what ran after the print, up to the stop
      {
        %w[--every 0s] => /invalid --every "0s" \(expected a duration above 0/,
        %w[--every soon] => /invalid --every "soon"/,
        %w[--every 1m] => /--every needs -o DIR/,
        %w[--every 1m -o /proc/hakari-x] => %r{cannot write snapshots to "/proc/hakari-x"},
        %w[--every 1m -m trace -o x] => /--every applies to -m cpu, -m wall and -m object/,
      }.each do |args, message|
        _, err, st = Open3.capture3(*cmd, *args, "ruby", "-e", "1")
        assert_equal 2, st.exitstatus, args.inspect
        assert_match message, err
      end
    end
  end

  def test_bad_settings_are_refused_before_anything_starts
    {
      { every: 0, output_dir: "x" } => /invalid every: 0 \(expected a number of seconds above 0\)/,
      { every: -1, output_dir: "x" } => /invalid every: -1/,
      { every: "60", output_dir: "x" } => /invalid every: "60"/,
      { every: Float::INFINITY, output_dir: "x" } => /invalid every: Infinity/,
      { every: 60 } => /invalid output_dir: nil \(expected the path of a directory\)/,
      { every: 60, output_dir: "x", keep: 0 } => /invalid keep: 0 \(expected an Integer, 1 or more\)/,
      { every: 60, output_dir: "x", signal: "NOPE" } => /invalid signal: "NOPE"/,
      { every: 60, output_dir: "x", output: "o.pb.gz" } => /every: writes to output_dir:, not output:/,
      { output_dir: "x" } => /output_dir: only apply with every:/,
      { every: 60, output_dir: "/proc/hakari-snapshots" } => %r{cannot write snapshots to "/proc/hakari-snapshots": },
      { mode: :trace, every: 60, output_dir: "x" } => /every: applies to mode: :cpu and :wall/,
    }.each do |opts, message|
      Dir.mktmpdir do |dir|
        Dir.chdir(dir) do
          e = assert_raises(ArgumentError, opts.inspect) { Hakari.start(**opts) }
          assert_match message, e.message
          refute Hakari.running?
        end
      end
    end
  end
end
