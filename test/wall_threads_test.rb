# frozen_string_literal: true

require_relative "test_helper"
require "weakref"

# Wall mode and threads that are not running. A thread blocked in a call (sleep, join, a queue)
# or waiting for the GVL spends its time where it waits; at each tick the thread running the
# job samples the others' stacks, which cannot change while it holds the GVL (sampler.c
# sample_waiting_threads). Ruby 3.1 has no GVL hooks to say when a thread blocks.
class WallThreadsTest < Minitest::Test
  include ProfileHelpers

  def teardown
    Hakari.stop if Hakari.running?
  end

  def other_threads_readable? = !ENV.key?("HAKARI_STACK_WALK") && LAYOUT_KNOWN

  def per_thread(data) = data[:samples].group_by { |s| s[3] }.transform_values { |rows| rows.sum { |r| r[1] } }

  def park(depth, queue) = depth.zero? ? queue.pop : park(depth - 1, queue)

  # The joined thread's 200 ms were given to the spin that followed: the job had been flagged
  # on the sleeper, so the main thread's first sample after the join came inside the spin.
  def test_a_join_keeps_its_wait_and_the_work_after_it_keeps_its_own
    return unless other_threads_readable?

    joined = spun = slept = lived = nil # each measured where it ran: a loaded machine wakes a sleep late
    data = Hakari.start(mode: :wall) do
      born = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      joined = Workloads.elapsed_ns do
        Thread.new do
          slept = Workloads.elapsed_ns { sleep 0.2 }
          lived = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - born
        end.join
      end
      spun = Workloads.elapsed_ns { Workloads.spin(0.05) }
    end
    assert_in_delta joined, cumulative(data, "Thread#join"), 15_000_000
    assert_in_delta spun, cumulative(data, "Workloads.spin"), 15_000_000
    # the sleep, and at most the thread's life: a new thread's wait for its first turn on the
    # GVL is a [GVL wait] under its first stack, the sleep's (33 ms on a loaded sanitizer run)
    asleep = cumulative(data, "Kernel#sleep")
    assert_operator asleep, :>=, slept - 15_000_000, "slept #{slept} ns, lived #{lived} ns"
    assert_operator asleep, :<=, lived + 15_000_000, "slept #{slept} ns, lived #{lived} ns"
  end

  # On 3.1 a tick asks the thread that last took the GVL to run the job. Here that is a thread
  # that took it only to block in Queue#pop, while the others wait too: no job ran until the
  # spin, which got the join's 200 ms (and the sleeper's were nowhere). Each tick with no job
  # since the previous one now asks every thread; the sleeper, waking first, runs it.
  def test_a_thread_that_took_the_gvl_last_and_blocks_again_holds_up_no_sample
    return unless other_threads_readable?

    queue = Queue.new
    joined = spun = slept = nil # each measured where it ran: a loaded machine wakes a sleep late
    data = Hakari.start(mode: :wall) do
      sleeper = Thread.new { slept = Workloads.elapsed_ns { sleep 0.2 } }
      Thread.pass until sleeper.status == "sleep"
      Thread.new { queue.pop } # takes the GVL when the main thread joins, and blocks at once
      joined = Workloads.elapsed_ns { sleeper.join }
      spun = Workloads.elapsed_ns { Workloads.spin(0.05) }
    end
    queue << :done
    assert_in_delta joined, cumulative(data, "Thread#join"), 15_000_000
    assert_in_delta slept, cumulative(data, "Kernel#sleep"), 15_000_000
    assert_in_delta spun, cumulative(data, "Workloads.spin"), 15_000_000
  end

  # Threads parked before start and all through it: each gets the session's length, in samples
  # at the asked rate, at exactly the stack Thread#backtrace_locations reads for it (lines
  # included), while the GC runs and compacts the heap under the samples that wait.
  def test_threads_waiting_all_session_long_get_its_length_where_they_wait
    return unless other_threads_readable?

    queue = Queue.new
    parked = Array.new(3) { |i| Thread.new { park(5 + i, queue) } }
    Thread.pass until parked.all? { |t| t.status == "sleep" }
    # leaf first, like the samples' frames. Where Queue#pop is a C method (3.1), backtraces show
    # it at its caller's line and the samples as "<cfunc>", left out below; where it is Ruby
    # (<internal:thread_sync>, 3.3 on), both show it at its own line.
    expected = parked.map do |t|
      t.backtrace_locations.drop_while { |l| l.label.end_with?("pop") && !l.path.start_with?("<internal:") }
    end
    data = Hakari.start(mode: :wall) do
      5.times do
        Workloads.spin(0.03)
        GC.start
        GC.compact if GC.respond_to?(:compact)
      end
    end
    queue.close
    parked.each(&:join)
    totals = per_thread(data)
    mine = data[:samples].find { |frames, *| frames.any? { |f| f[0] == "Workloads.spin" } }[3]
    assert_in_delta data[:duration_ns], totals[mine], 3_000_000, "the main thread: #{totals} #{data.counters}"
    # minitest's own threads may be waiting too: the parked ones are those in #park
    waits = data[:samples].select { |frames, *| frames.any? { |f| f[0] == "WallThreadsTest#park" } }.group_by { |s| s[3] }
    assert_equal 3, waits.size, "one stack for each parked thread"
    waits.each do |seq, rows|
      assert_equal 1, rows.size, "thread #{seq} stayed in one stack"
      assert_in_delta data[:duration_ns], totals[seq], 3_000_000, "thread #{seq}"
      frames, _, count = rows.first
      assert_operator count, :>=, 100, "about one sample per tick (150 ms at 1000 Hz)"
      # off the GVL all along: its time is [GVL blocked], under the call it blocked in
      assert_equal ["[GVL blocked]", "Thread::Queue#pop"], frames.first(2).map(&:first)
      sampled = frames.drop(1).reject { |f| f[1] == "<cfunc>" }.map { |_, path, line| [path, line] }
      assert_includes expected.map { |locs| locs.map { |l| [l.path, l.lineno] } }, sampled
    end
  end

  # Threads that end while sampled, each way a thread can end: returning, raising, killed while
  # blocked. Ruby clears an ended thread's stack; one read after that would crash the program.
  def test_threads_ending_every_way_while_others_are_sampled
    data = Hakari.start(mode: :wall, frequency: 5000) do
      40.times do |i|
        sleeper = Thread.new { sleep }
        failing = Thread.new { sleep 0.001; raise "ends by raising" }
        failing.report_on_exception = false
        quick = Thread.new { Workloads.spin(0.0005) }
        Workloads.spin(0.001)
        sleeper.kill
        [sleeper, failing, quick].each { |t| t.join rescue nil } # rubocop:disable Style/RescueModifier
        GC.start if (i % 8).zero?
      end
    end
    # a job that runs on a thread with no Ruby frame yet, or none left, loses its sample: at
    # most one at each of the 120 threads' start and end (5000 Hz; under the sanitizers, 24)
    assert_operator data[:dropped_count], :<=, 240
    lived = per_thread(data)
    mine = data[:samples].find { |frames, *| frames.any? { |f| f[0] == "Hakari.start" } }[3]
    assert_in_delta data[:duration_ns], lived[mine], 1_000_000, "the main thread's time is whole: #{lived} #{data.counters}"
    lived.each { |seq, ns| assert_operator ns, :<=, data[:duration_ns], "thread #{seq}" }
  end

  # A thread that ends leaves the sampler's tables: a program that starts thread after thread
  # must not have every Thread it ever ran (with its thread-local variables) kept alive by the
  # profile until stop. Threads still alive at stop keep their time, and the ended ones theirs.
  def test_ended_threads_are_not_kept_alive_by_the_profile
    require "objspace"
    %i[wall cpu].each do |mode|
      refs = []
      ended = nil
      data = Hakari.start(mode: mode) do
        50.times { Array.new(4) { Thread.new { Thread.current[:big] = "x" * 100_000; Workloads.spin(0.0005) } }.each { |t| refs << WeakRef.new(t); t.join } }
        GC.start
        GC.start
        ended = refs.count(&:weakref_alive?)
        Workloads.spin(0.01)
      end
      assert_operator ended, :<, 20, "#{mode}: of 200 ended threads, #{ended} still alive inside the profile"
      assert_operator data[:thread_count], :>=, 150, "#{mode}: the ended threads were sampled"
    end
  end

  # cpu mode: a waiting thread uses no CPU and gets no sample where it waits. What it used after
  # start (its status says "sleep" a few µs before it is asleep) is its [unsampled] time at stop.
  def test_cpu_mode_gives_waiting_threads_nothing
    queue = Queue.new
    parked = Thread.new { park(3, queue) }
    Thread.pass until parked.status == "sleep"
    data = Hakari.start(mode: :cpu) { Workloads.spin(0.05) }
    queue.close
    parked.join
    others = data[:samples].reject { |s| s[3] == 1 || s[3].zero? } # 0: [native threads]
    assert_equal [["[unsampled]"]], others.map { |frames, *| frames.map(&:first) }.uniq unless others.empty?
    assert_operator others.sum { _2 }, :<, 200_000, "the parked thread's CPU after start"
    assert_equal 0, cumulative(data, "Thread::Queue#pop")
  end
end
