# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# fork: :inherit (and `hakari record --fork inherit`): each forked child profiles into a file of
# its own, named by its pid; fork: :stop, the default, leaves children unprofiled.
class ForksTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)
  # two children of known work and the parent's own; prints the children's pids
  PROGRAM = <<~RUBY
    def work(n) = n.times { |i| i * i }
    def child_work = work(3_000_000)
    def parent_work = work(1_000_000)
    pids = 2.times.map { fork { child_work } }
    parent_work
    pids.each { |pid| Process.wait(pid) }
    puts pids
  RUBY

  # The program's output; one that hangs is killed after two minutes and the test fails then,
  # rather than the suite waiting for ever. (Under the sanitizer pass, GCC 12's ASan allocator is
  # not fork-safe: a child whose parent forked while another thread held the allocator's lock
  # hangs in its first allocation, as the child of a plain Ruby would.)
  def ruby(*args, env: {})
    Open3.popen3(env, RbConfig.ruby, "-I#{ENGINE_LIB}", *args, pgroup: true) do |i, o, e, wait|
      i.close
      out = Thread.new { o.read }
      err = Thread.new { e.read }
      unless wait.join(120)
        Process.kill(:KILL, -wait.pid) # its forked children too
        flunk "the program (#{args.first(2).join(" ")} ...) hung for 120 s: #{err.value}"
      end
      assert wait.value.success?, err.value
      out.value
    end
  end

  # the method's share of the profile in file
  def share(file, name)
    profile = Hakari::Native.read_file(file)
    total = profile.line_table.sum { _3 } # [file, line, self, cum]
    profile.select(name, nil, nil, nil, false).line_table.sum { _3 }.fdiv(total)
  end

  def check_children(dir, pids, base = "out")
    files = pids.map { |pid| File.join(dir, "#{base}.#{pid}.pb.gz") }
    files.each do |f|
      assert File.file?(f), "#{f} written: #{Dir.children(dir)}"
      assert_operator share(f, "child_work"), :>, 0.9, "the child's file holds the child's work"
      assert_equal 0.0, share(f, "parent_work")
    end
    parent = File.join(dir, "#{base}.pb.gz")
    assert_operator share(parent, "parent_work"), :>, 0.5
    assert_equal 0.0, share(parent, "child_work"), "the parent's holds none of the children's"
  end

  def test_inherit_gives_each_child_its_own_file
    Dir.mktmpdir do |dir|
      out = File.join(dir, "out.pb.gz")
      pids = ruby("-rhakari", "-e", "Hakari.start(mode: :cpu, output: #{out.inspect}, fork: :inherit) { #{PROGRAM} }")
      check_children(dir, pids.split.map { Integer(_1) })
    end
  end

  def test_stop_leaves_children_unprofiled
    Dir.mktmpdir do |dir|
      out = File.join(dir, "out.pb.gz")
      ruby("-rhakari", "-e", "Hakari.start(mode: :cpu, output: #{out.inspect}) { #{PROGRAM} }")
      assert_equal ["out.pb.gz"], Dir.children(dir)
    end
  end

  def test_record_follows_forks_when_asked
    Dir.mktmpdir do |dir|
      script = File.join(dir, "forks.rb")
      File.write(script, PROGRAM)
      out = File.join(dir, "out.pb.gz")
      pids = ruby("#{ROOT}/exe/hakari", "record", "--fork", "inherit", "-o", out, RbConfig.ruby, script)
      check_children(dir, pids.split.map { Integer(_1) })
    end
  end

  def test_a_child_with_snapshots_writes_its_own
    Dir.mktmpdir do |dir|
      pids = ruby("-rhakari", "-e", <<~RUBY)
        Hakari.start(mode: :wall, every: 0.2, output_dir: #{dir.inspect}, fork: :inherit)
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
        pid = fork { t = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.5; nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < t }
        Process.wait(pid)
        lived = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0
        Hakari.stop
        puts Process.pid, pid, lived
      RUBY
      parent, child, lived = pids.split.map { Integer(_1) }
      by_pid = Dir.children(dir).group_by { |f| Integer(f.split("-")[1]) }
      assert_equal [child, parent].sort, by_pid.keys.sort, Dir.children(dir).inspect
      assert_operator by_pid[child].size, :>=, 2, "the child's own writer: #{by_pid[child]}"
      files = by_pid[child].sort.map { |f| Hakari::Native.read_file(File.join(dir, f)) }
      total = files.sum { |p| p.label_values("state").values.sum }
      seen = files.map { |p| [p.counters[:duration_ns] / 1e6, p.label_values("state").transform_values { _1 / 1e6 }, p.label_values("thread")] }
      # its 0.5 s loop, and at most its life from the fork to its exit
      assert_operator total, :>=, 0.5e9, seen.inspect
      assert_operator total, :<=, lived, seen.inspect
    end
  end

  def test_bad_fork_values_are_refused
    e = assert_raises(ArgumentError) { Hakari.start(mode: :cpu, fork: :follow) }
    assert_match(/invalid fork: :follow \(expected :stop or :inherit\)/, e.message)
    e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, fork: :inherit) }
    assert_match(/fork: :inherit applies to mode: :cpu and :wall/, e.message)
    refute Hakari.running?
    _, err, st = Open3.capture3(RbConfig.ruby, "-I#{ENGINE_LIB}", "#{ROOT}/exe/hakari", "record", "--fork", "all", "ruby", "-e", "1")
    assert_equal 2, st.exitstatus
    assert_match(/unknown --fork "all" \(expected stop or inherit\)/, err)
  end
end
