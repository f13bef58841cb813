# frozen_string_literal: true

require_relative "test_helper"

# Tracing mode (mode: :trace): exact call counts, call-tree shape, recursion-safe totals,
# wait time, pause/resume, exceptions, allocations, filters and bad input.
class TraceTest < Minitest::Test
  MS = 1_000_000

  # per-method figures from the samples (one per call-tree node): calls, self, wait and
  # total counted once per path, so a recursive method's total is its outermost calls' time
  def methods_of(data)
    rows = Hash.new { |h, k| h[k] = { calls: 0, self: 0, wait: 0, total: 0 } }
    data[:samples].each do |frames, self_v, calls, _seq, wait|
      leaf = frames.first[0]
      rows[leaf][:calls] += calls
      rows[leaf][:self] += self_v
      rows[leaf][:wait] += wait
      frames.map(&:first).uniq.each { |name| rows[name][:total] += self_v + wait }
    end
    {}.merge(rows) # no default: a method that was never called reads as nil
  end

  def paths_of(data, name) = data[:samples].select { |fr, *| fr.first[0] == name }.map { |fr, *| fr.map(&:first) }

  def teardown
    Hakari.stop if Hakari.running?
  end

  def test_fib_20_is_called_21891_times_and_the_vm_calls_are_counted
    data = Hakari.start(mode: :trace) { Workloads.fib(20) }
    m = methods_of(data)
    assert_equal 21_891, m["Workloads.fib"][:calls]
    assert_equal 21_891, m["Integer#<"][:calls], "the C calls behind n < 2"
    assert_equal 21_890, m["Integer#-"][:calls]
    assert_equal 10_945, m["Integer#+"][:calls]
    assert_equal :trace, data[:mode]
    assert_equal :wall, data[:measure]
    assert_equal 0, data[:unmatched_returns], "the start's own frames are not counted"
  end

  class Twice
    def shared = 1
    def a = shared
    def b = shared
  end

  def test_a_method_called_from_two_sites_has_two_nodes_and_one_entry
    data = Hakari.start(mode: :trace) do
      t = Twice.new
      3.times { t.a }
      2.times { t.b }
    end
    paths = paths_of(data, "TraceTest::Twice#shared")
    assert_equal 2, paths.size
    assert_equal %w[TraceTest::Twice#a TraceTest::Twice#b], paths.map { _1[1] }.sort
    assert_equal 5, methods_of(data)["TraceTest::Twice#shared"][:calls]
  end

  class Sleeper
    def self.klass_sleep = sleep(0.2)
    def inst_sleep = sleep(0.1)
  end

  module SleepMod
    def self.mod_sleep = sleep(0.3)
  end

  # Threads the test runner created but that have not run yet (minitest's
  # executor) take their first turn at the first sleep that frees the GVL: the
  # sleeping frame would then be switched out, its time wait (README). Let them
  # reach the point where they block first.
  def settle_other_threads
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 2
    while Thread.list.any? { |t| t != Thread.current && t.status == "run" }
      break if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.001
    end
  end

  # The truth is each call's own length, measured around it: a loaded machine wakes a sleep late
  # (a CI run: 116 ms for sleep 0.1).
  def test_sleeping_methods_of_every_kind
    obj = Object.new
    def obj.single_sleep = sleep(0.1)
    sleeper = Sleeper.new
    clock = Process::CLOCK_MONOTONIC
    took = []
    settle_other_threads
    data = Hakari.start(mode: :trace) do
      [-> { sleeper.inst_sleep }, -> { Sleeper.klass_sleep }, -> { SleepMod.mod_sleep }, -> { obj.single_sleep }].each do |call|
        t0 = Process.clock_gettime(clock, :nanosecond)
        call.call
        took << Process.clock_gettime(clock, :nanosecond) - t0
      end
    end
    m = methods_of(data)
    single = m.keys.grep(/single_sleep/).first
    assert_match(/\A#<Class:Object instance>#single_sleep\z/, single)
    ["TraceTest::Sleeper#inst_sleep", "TraceTest::Sleeper.klass_sleep", "TraceTest::SleepMod.mod_sleep", single]
      .zip(took, [100, 200, 300, 100]) do |name, ns, asked|
      assert_operator ns, :>=, asked * MS
      assert_in_delta ns, m[name][:total], 2 * MS, name
    end
    # its time: slept (self), and on a busy machine some waiting for the GVL after a sleep (wait)
    assert_in_delta took.sum, m["Kernel#sleep"][:self] + m["Kernel#sleep"][:wait], 4 * MS, m["Kernel#sleep"].inspect
    assert_operator m["TraceTest::Sleeper#inst_sleep"][:self], :<, 2 * MS, "the sleep is Kernel#sleep's self"
  end

  def nap(level)
    sleep 0.05
    nap(level - 1) if level > 1
  end

  def test_recursive_total_is_the_outermost_elapsed_time
    took = nil # the outermost call's own length: a loaded machine wakes each sleep late
    data = Hakari.start(mode: :trace) { took = Workloads.elapsed_ns { nap(3) } }
    m = methods_of(data)
    assert_equal 3, m["TraceTest#nap"][:calls]
    assert_operator took, :>=, 150 * MS
    assert_in_delta took, m["TraceTest#nap"][:total], 2 * MS, "not the sum of the three levels' totals"
    assert_equal 3, paths_of(data, "TraceTest#nap").map { _1.count("TraceTest#nap") }.max, "a node per recursion level"
  end

  def test_joined_thread_time_is_wait_not_self
    data = Hakari.start(mode: :trace) do
      t = Thread.new { sleep 0.2 }
      t.join
    end
    join = methods_of(data)["Thread#join"]
    assert_operator join[:wait] + join[:self], :>, 150 * MS
    assert_operator join[:wait], :>, 150 * MS, "the main thread was switched out while joining"
    assert_operator join[:self], :<, 20 * MS
    assert_operator data[:thread_count], :>=, 2 # minitest may run threads of its own
  end

  def test_pause_resume_excludes_the_paused_span
    slept = 0
    data = Hakari.start(mode: :trace) do
      slept += Workloads.elapsed_ns { sleep 0.05 }
      assert Hakari.pause
      assert Hakari.paused?
      refute Hakari.pause, "already paused"
      sleep 0.2
      Twice.new.a
      assert Hakari.resume
      slept += Workloads.elapsed_ns { sleep 0.05 }
    end
    m = methods_of(data)
    assert_equal 2, m["Kernel#sleep"][:calls], "the call made while paused is not counted"
    assert_nil m["TraceTest::Twice#a"]
    # judged against the two sleeps' own lengths: the full suite once saw them take 127 ms
    assert_in_delta slept, m["Kernel#sleep"][:total], 15 * MS
    main = data[:samples].select { |s| s[3] == 1 } # minitest's own threads may be traced too
    assert_operator main.sum { _2 + _5 }, :<, 150 * MS, -> { data[:samples].map { |f, *r| [f.map(&:first), r] }.inspect }
  end

  def deep(n) = n.zero? ? raise(ArgumentError, "deep") : deep(n - 1)
  def rescuer = deep(4)
  def catcher
    rescuer
  rescue ArgumentError
    :rescued
  end

  def test_exception_unwinding_leaves_the_stack_consistent
    data = Hakari.start(mode: :trace) do
      catcher
      Twice.new.a
    end
    assert_equal ["TraceTest::Twice#a"], paths_of(data, "TraceTest::Twice#a").first.first(1)
    a_path = paths_of(data, "TraceTest::Twice#a").first
    refute_includes a_path, "TraceTest#deep", "after the rescue, calls are no longer under the raise"
    assert_equal 5, methods_of(data)["TraceTest#deep"][:calls]
  end

  def make(n_arrays, n_hashes, n_strings)
    n_arrays.times { [] }
    n_hashes.times { {} }
    n_strings.times { +"s" }
  end

  def test_allocations_measure_counts_objects
    # The first call at a call site fills its inline cache, itself an object, and the first
    # trace of Integer#times on 3.3 allocates 2 objects in it (its instructions turned into their
    # traced form): both once, in a traced warm-up, as earlier tests of the suite would
    Hakari.start(mode: :trace, measure: :allocations) { make(1, 1, 1) }
    data = Hakari.start(mode: :trace, measure: :allocations) { make(30, 20, 10) }
    assert_equal :allocations, data[:measure]
    m = methods_of(data)
    # YJIT, recompiling the code the trace invalidated, may allocate a few objects of its own in
    # the traced block; without it the counts are exact
    slack = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? 8 : 0
    assert_in_delta 60, m["TraceTest#make"][:total], slack
    # blocks are not frames: the arrays and hashes are made in Integer#times' blocks, the strings by String#+@
    assert_in_delta 50, m["Integer#times"][:self], slack
    assert_in_delta 10, m["String#+@"][:self], slack
    assert_in_delta 0, m["TraceTest#make"][:self], slack
  end

  def test_cpu_measure_ignores_sleep
    data = Hakari.start(mode: :trace, measure: :cpu) { sleep 0.1; Workloads.spin(0.05) }
    m = methods_of(data)
    assert_operator m["Kernel#sleep"][:total], :<, 5 * MS
    assert_in_delta 50 * MS, m["Workloads.spin"][:total], 10 * MS
  end

  def naps = 3.times { sleep 0.02 }

  def test_exclude_moves_time_to_the_caller
    data = Hakari.start(mode: :trace, exclude: ["Integer#times", /\AKernel#/]) { naps }
    m = methods_of(data)
    assert_nil m["Integer#times"]
    assert_nil m["Kernel#sleep"]
    # A thread that runs while one sleeps (minitest's workers start lazily, sometimes right
    # here) turns the rest of that sleep into the sleeper's wait (README: tracing, wait):
    # either way the excluded methods' time stays with the caller.
    naps = m["TraceTest#naps"]
    assert_operator naps[:self] + naps[:wait], :>, 55 * MS, "their time is the caller's own"
  end

  def test_threads_filter
    data = Hakari.start(mode: :trace, threads: [Thread.current]) do
      Thread.new { Twice.new.a }.join
      Twice.new.b
    end
    m = methods_of(data)
    assert_nil m["TraceTest::Twice#a"], "the other thread is not traced"
    assert_equal 1, m["TraceTest::Twice#b"][:calls]
  end

  def test_merge_threads_merges_same_root_calls
    data = Hakari.start(mode: :trace, merge_threads: true) do
      2.times.map { Thread.new { Twice.new.a } }.each(&:join)
    end
    assert_equal 1, paths_of(data, "TraceTest::Twice#a").size
    assert_equal 2, methods_of(data)["TraceTest::Twice#a"][:calls]
  end

  def test_fibers_are_separate_contexts
    data = Hakari.start(mode: :trace) do
      f = Fiber.new { Twice.new.a; Fiber.yield; Twice.new.b }
      f.resume
      Twice.new.a
      f.resume
    end
    m = methods_of(data)
    assert_equal 2, m["TraceTest::Twice#a"][:calls]
    assert_equal 1, m["TraceTest::Twice#b"][:calls]
    assert_equal 0, data[:unmatched_returns]
  end

  def test_started_mid_stack_and_stopped_with_frames_open
    slept = 0 # the two sleeps' own lengths: a loaded machine wakes a sleep late
    outer = lambda do
      Hakari.start(mode: :trace)
      slept += Workloads.elapsed_ns { sleep 0.05 }
    end
    runner = Object.new
    def runner.run(outer, &after) = outer.call.then(&after)
    runner.run(outer) { slept += Workloads.elapsed_ns { sleep 0.05 } }
    data = Hakari.stop
    m = methods_of(data)
    assert_equal 2, m["Kernel#sleep"][:calls]
    single = m.keys.grep(/#run\z/).first
    refute_nil single, "the method that was running at start is adopted at its return"
    assert_in_delta slept, m[single][:total], 5 * MS
  end

  # The first trace session of a process makes Ruby rewrite every loaded method for tracing
  # (milliseconds, more in a large app): start's own time, in no frame's total, not even the
  # frames open at start. A fresh process, so that this trace is its first.
  def test_enabling_the_hooks_is_in_no_total
    script = <<~'RUBY'
      def now = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      def starter = Hakari.start(mode: :trace)
      t0 = now
      starter
      start_ns = now - t0
      total = Hakari.stop.methods_table.find { |m| m[:name] == "Object#starter" }[:total]
      print start_ns, " ", total
    RUBY
    out = IO.popen([RbConfig.ruby, "-I#{ENGINE_LIB}", "-rminitest", "-rhakari", "-e", script], &:read)
    start_ns, total = out.split.map(&:to_i)
    assert_operator start_ns, :>, 0, out
    assert_operator total, :<, start_ns / 4, "Object#starter, which called Hakari.start, got start's time"
  end

  def test_bad_input
    e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, measure: :bogus) }
    assert_match(/unknown measure :bogus \(expected :wall, :cpu or :allocations\)/, e.message)
    e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, exclude: [42]) }
    assert_match(/invalid exclude: 42 \(expected a String or a Regexp/, e.message)
    e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, threads: ["main"]) }
    assert_match(/invalid threads: "main"/, e.message)
    e = assert_raises(ArgumentError) { Hakari.start(mode: :cpu, measure: :wall) }
    assert_match(/measure: only apply to mode: :trace/, e.message)
    refute Hakari.running?
    Hakari.start(mode: :trace)
    assert_raises(RuntimeError) { Hakari.start(mode: :trace) }
    assert_raises(RuntimeError) { Hakari.start(mode: :cpu) }
    assert Hakari.stop
    refute Hakari.pause, "pause without tracing"
  end

  def test_a_program_that_raises_forks_and_makes_many_threads_completes
    script = <<~RUBY
      Hakari.start(mode: :trace)
      begin
        raise "boom"
      rescue RuntimeError
      end
      pid = fork { [1, 2].sum; exit!(0) }
      Process.wait(pid)
      1000.times.map { Thread.new { [1].sum } }.each(&:join)
      d = Hakari.stop
      threads = d[:thread_count]
      sums = d[:samples].select { |fr, *| fr[0][0] == "Array#sum" }.sum { _3 }
      print [$?.exitstatus, threads, sums].join(",")
    RUBY
    out = IO.popen([RbConfig.ruby, "-I#{ENGINE_LIB}", "-rhakari", "-e", script], &:read)
    assert_equal "0,1001,1000", out
  end

  def test_pprof_of_a_trace_reads_in_go_pprof
    data = Hakari.start(mode: :trace) { Workloads.fib(15) }
    Dir.mktmpdir do |dir|
      path = Hakari.save(File.join(dir, "t.pb.gz"), data)
      top = IO.popen(["go", "tool", "pprof", "-top", path], err: File::NULL, &:read)
      assert_match(/^Type: wall$/, top)
      row = top.lines.find { |l| l.end_with?(" Workloads.fib\n") }
      assert_operator row.split[4].to_f, :<=, 100.0
      calls = IO.popen(["go", "tool", "pprof", "-top", "-sample_index=calls", path], err: File::NULL, &:read)
      assert_match(/^\s+1973\s.*Workloads\.fib$/, calls)
    end
  end

  def test_methods_table_has_callers_callees_and_recursion
    data = Hakari.start(mode: :trace) { Workloads.fib(10); TraceTest::Twice.new.tap { _1.a; _1.b } }
    rows = data.methods_table.to_h { [_1[:name], _1] }
    fib = rows.fetch("Workloads.fib")
    assert_equal 177, fib[:calls]
    assert fib[:recursive]
    assert_equal({ "[root]" => 1, "Workloads.fib" => 176 }, fib[:callers])
    shared = rows.fetch("TraceTest::Twice#shared")
    assert_equal({ "TraceTest::Twice#a" => 1, "TraceTest::Twice#b" => 1 }, shared[:callers])
    refute shared[:recursive]
    assert_equal fib[:total], fib[:self] + fib[:wait] + fib[:child]
  end

  def test_callgrind_and_dot_outputs_load_in_real_readers
    data = Hakari.start(mode: :trace) { Workloads.fib(12) }
    Dir.mktmpdir do |dir|
      cg = Hakari.save(File.join(dir, "callgrind.out.test"), data)
      out = IO.popen(["callgrind_annotate", cg], err: %i[child out], &:read)
      assert $?.success?, out
      assert_match(/Workloads\.fib/, out)
      total = out[/^([\d,]+) .*PROGRAM TOTALS/, 1].delete(",").to_i
      assert_equal data[:samples].sum { _2 }, total, "callgrind's total is the profile's self time"
      dot = Hakari.save(File.join(dir, "t.dot"), data)
      svg = IO.popen(["dot", "-Tsvg", dot], err: %i[child out], &:read)
      assert $?.success?, svg
      assert_match(/<svg/, svg)
      assert_match(/Workloads\.fib/, svg)
      %w[flat graph].each do |kind|
        text = File.read(Hakari.save(File.join(dir, "t.#{kind}.txt"), data))
        assert_match(/Workloads\.fib/, text, kind)
      end
    end
  end

  # A Ruby method that replaces a C one it keeps under an alias (as rubygems' Kernel#require
  # keeps the C one as gem_original_require): same owner, same original name, two methods.
  def test_a_ruby_method_and_its_c_alias_stay_apart
    Kernel.module_eval do
      alias_method :hakari_test_c_sprintf, :sprintf
      define_method(:sprintf) { |*args| hakari_test_c_sprintf(*args) }
    end
    data = Hakari.start(mode: :trace) { sprintf("%d", 1) }
    both = data.methods_table.select { _1[:name] == "Kernel#sprintf" }
    assert_equal 2, both.size, data.methods_table.map { _1[:name] }.inspect
    c_one, ruby_one = both.partition { _1[:file] == "<cfunc>" }.map(&:first)
    assert_equal __FILE__, ruby_one[:file]
    assert_equal({ "Kernel#sprintf" => 1 }, c_one[:callers], "the Ruby one calls the C one")
    both.each { |m| assert_equal 1, m[:calls]; refute m[:recursive] }
  ensure
    Kernel.module_eval do
      alias_method :sprintf, :hakari_test_c_sprintf
      remove_method :hakari_test_c_sprintf
    end
  end
end

