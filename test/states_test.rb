# frozen_string_literal: true

require_relative "test_helper"
require "zlib"

# Where a thread's time went besides running: [GVL blocked], [GVL wait], [GC marking] and
# [GC sweeping] leaves under the stack where it happened, and a state label on every sample.
class StatesTest < Minitest::Test
  include ProfileHelpers

  # Rubies whose thread event hooks name the thread (3.3+): waiting for the GVL told apart
  GVL_EVENTS = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3")
  # Rubies whose GC hooks leave allocation alone (3.2+): the GC is timed there
  GC_EVENTS = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2")
  STATES = ["[GVL blocked]", "[GVL wait]", "[GC marking]", "[GC sweeping]"].freeze

  def teardown
    Hakari.stop if Hakari.running?
  end

  # weight by leaf state ("running" for any other leaf), per thread when asked
  def by_state(data, thread: nil)
    data[:samples].each_with_object(Hash.new(0)) do |(frames, weight, _, seq), h|
      next if thread && seq != thread

      h[STATES.include?(frames.first[0]) ? frames.first[0] : "running"] += weight
    end
  end

  def test_a_thread_off_the_gvl_is_blocked_in_the_call_that_blocked
    reader, writer = IO.pipe
    slept = [] # each sleep's own length: a loaded machine wakes a sleep late
    data = Hakari.start(mode: :wall) do
      sleeper = Thread.new { slept << Workloads.elapsed_ns { sleep 0.2 } }
      pipe = Thread.new { reader.read(1) }
      slept << Workloads.elapsed_ns { sleep 0.25 }
      writer.write("x")
      [sleeper, pipe].each(&:join)
    end
    blocked = data[:samples].select { |frames, *| frames.first[0] == "[GVL blocked]" }
    under = blocked.group_by { |frames, *| frames[1][0] }.transform_values { |rows| rows.sum { _2 } }
    # each blocking call keeps its time, under its own frame (on 3.1, without GVL events, the
    # stretch a thread's own sample ends as it wakes is its time off CPU)
    assert_operator under["IO#read"].to_i, :>, 200_000_000, "it blocks until the write, at 250 ms: #{under}"
    assert_operator under["Kernel#sleep"].to_i, :>, 400_000_000, "the sleeper's 200 ms and the main thread's 250: #{under}"
    assert_operator under["Kernel#sleep"].to_i, :<=, slept.sum + 5_000_000, "the sleeps took #{slept}: #{under}"
    # nothing of it is counted as running
    assert_operator by_state(data)["running"], :<, 50_000_000
  ensure
    [reader, writer].each(&:close)
  end

  # A thread that wakes from a block and ends before any job runs on it: its time since it was
  # last sampled waiting (by the main thread's job, every 100 ms at 10 Hz) is its end's to
  # split, and was blocked in the read, not running unsampled.
  def test_a_thread_that_ends_as_it_wakes_keeps_its_block_blocked
    reader, writer = IO.pipe
    read_ns = ran_ns = ended = joined = nil
    data = Hakari.start(mode: :wall, frequency: 10) do
      pipe = Thread.new do
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
        reader.read(1)
        read_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0
        ran_ns = Workloads.on_cpu_or_ready_ns
        ended = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      end
      Workloads.spin(0.25)
      writer.write("x")
      pipe.join
      joined = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    end
    reader_seq = data[:samples].find { |frames, *| frames.any? { |f| f[0] == "IO#read" } }[3]
    mine = data[:samples].select { |_, _, _, seq| seq == reader_seq }
    leaf = mine.each_with_object(Hash.new(0)) { |(frames, w), h| h[frames.first[0]] += w }
    assert_in_delta read_ns, leaf["[GVL blocked]"], 5_000_000, "the read's #{read_ns} ns: #{leaf}"
    # What it ran, and what a block under a millisecond is taken to be (preemption): at most its
    # CPU and its waits for a core (its start and its end after the read: up to 4.5 ms on a loaded
    # sanitizer run), its end after they were read, and that millisecond
    ran = ran_ns + (joined - ended)
    assert_operator leaf["[unsampled]"], :<=, ran + 1_000_000, "it ran #{ran} ns: #{leaf}"
  ensure
    [reader, writer].each(&:close)
  end

  # A thread that runs on past its last tick and then blocks has its next sample taken while it
  # waits, by another thread's job (here the sleeper's, as it ends). What it ran after that tick
  # (at 10 Hz up to 100 ms) is running time, not the block's: where Ruby has no GVL events
  # (3.1), read on the thread's CPU clock when that sample is taken.
  def test_a_run_up_to_a_block_is_running_when_the_wait_is_sampled
    cpu = spun = joined = nil
    data = Hakari.start(mode: :wall, frequency: 10) do
      sleeper = Thread.new { sleep 0.6 }
      spun = Workloads.elapsed_ns do
        cpu0 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
        Workloads.spin(0.25)
        cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - cpu0
      end
      joined = Workloads.elapsed_ns { sleeper.join }
    end
    main = data[:samples].find { |frames, *| frames.any? { |f| f[0] == "Workloads.spin" } }[3]
    running = by_state(data, thread: main)["running"]
    in_join = data[:samples].sum do |frames, weight, _, seq|
      seq == main && frames[0][0] == "[GVL blocked]" && frames[1][0] == "Thread#join" ? weight : 0
    end
    # the spin's time off CPU (the OS's or a hypervisor's preemption) may be taken to be blocked
    off_cpu = [spun - cpu, 0].max
    assert_operator running, :>=, cpu - 3_000_000, "the spin used #{cpu} ns of CPU in #{spun}: #{by_state(data, thread: main)}"
    assert_operator in_join, :<=, joined + off_cpu + 3_000_000, "the join took #{joined} ns"
  end

  # One of the two workers holds the GVL all along the span the main thread joins them: that
  # span is their running time (not their CPU clocks' 300 ms, which leave out what the OS or
  # the hypervisor took from them), and each waits while the other runs. 3.1 tells a thread's
  # running time by its CPU clock and its time ready for a core: a hypervisor's steal, in
  # neither, is off the GVL there (a loaded CI run: 322 ms of 394).
  def test_two_busy_threads_wait_for_each_other
    span = nil
    ready = Queue.new # each worker's CPU and run delay over its spin
    data = Hakari.start(mode: :wall) do
      span = Workloads.elapsed_ns do
        Array.new(2) do
          Thread.new do
            before = Workloads.on_cpu_or_ready_ns
            Workloads.spin(0.15)
            ready << Workloads.on_cpu_or_ready_ns - before
          end
        end.each(&:join)
      end
    end
    states = by_state(data)
    ran = Array.new(2) { ready.pop }.sum
    truth = GVL_EVENTS ? span : ran
    assert_in_delta truth, states["running"], 30_000_000, "#{span} ns joined, #{ran} ns on a core or ready: #{states}"
    off_gvl = states["[GVL wait]"] + states["[GVL blocked]"]
    # the workers' waits for each other (about half the span each) and the join (the span)
    assert_operator off_gvl, :>, 1.25 * span, "#{span} ns joined: #{states}"
    if GVL_EVENTS
      assert_operator states["[GVL wait]"], :>, span / 3, "waits for the GVL told apart: #{span} ns joined: #{states}"
    else
      assert_equal 0, states["[GVL wait]"], "3.1 cannot tell a wait for the GVL from a block"
    end
  end

  # cpu mode: the CPU a thread uses letting the GVL go and taking it back (waking the next
  # thread, its own wake-up) is its blocking call's. Three threads that each spin 1.5 ms and
  # sleep 1 ms: without the GVL's hooks that CPU went to each thread's next sample, in the spin
  # (3-5 % of it under Kernel#sleep); 3.3+ measures it as the thread lets the GVL go and takes
  # it back, and a sample in the call takes it once it reaches a period (86-97 % here).
  def test_cpu_mode_gives_a_blocking_call_the_cpu_of_letting_the_gvl_go_and_taking_it_back
    cpu = Process::CLOCK_THREAD_CPUTIME_ID
    in_sleep = 0
    lock = Mutex.new
    data = Hakari.start(mode: :cpu) do
      Array.new(3) do
        Thread.new do
          200.times do
            Workloads.spin(0.0015)
            c = Process.clock_gettime(cpu, :nanosecond)
            sleep 0.001
            used = Process.clock_gettime(cpu, :nanosecond) - c
            lock.synchronize { in_sleep += used }
          end
        end
      end.each(&:join)
    end
    sleeping = data[:samples].sum { |frames, weight| frames.any? { |f| f[0] == "Kernel#sleep" } ? weight : 0 }
    counted = data.counters[:off_gvl_count]
    if GVL_EVENTS
      assert_operator counted, :>, 0
      assert_operator sleeping, :>=, 0.6 * in_sleep, "#{in_sleep} ns of CPU measured around the sleeps; #{counted} samples off the GVL"
      assert_operator sleeping, :<=, 1.5 * in_sleep + 2_000_000, "#{in_sleep} ns of CPU measured around the sleeps"
    else
      assert_equal 0, counted, "3.1 has no thread event hooks"
    end
  end

  def test_gc_time_is_under_the_stack_that_collected_in_both_modes
    %i[wall cpu].each do |mode|
      # the truth in each mode's own time: GC.start's length, or its CPU (less on a loaded machine)
      clock = mode == :cpu ? Process::CLOCK_THREAD_CPUTIME_ID : Process::CLOCK_MONOTONIC
      gc_time = 0
      data = Hakari.start(mode: mode) do
        20.times do
          Array.new(20_000) { "x" * 10 }
          t0 = Process.clock_gettime(clock, :nanosecond)
          GC.start
          gc_time += Process.clock_gettime(clock, :nanosecond) - t0
        end
      end
      states = by_state(data)
      gc = states["[GC marking]"] + states["[GC sweeping]"]
      unless GC_EVENTS
        assert_equal 0, gc, "#{mode}: the GC is not timed on this Ruby"
        assert_match(/gc:off/, data[:states])
        next
      end
      assert_operator states["[GC marking]"], :>, 0, "#{mode}: #{states}"
      # the GC time of the GC.start calls (and of the few GCs the allocations caused)
      assert_operator gc, :>, 0.6 * gc_time, "#{mode}: #{states}, #{gc_time} ns in GC.start"
      assert_operator gc, :<, 1.5 * gc_time + 20_000_000, "#{mode}: #{states}, #{gc_time} ns in GC.start"
      under = data[:samples].select { |frames, *| frames.first[0].start_with?("[GC") }.map { |frames, *| frames[1][0] }.uniq
      assert_includes under, "GC.start", mode
    end
  end

  # HAKARI_STATE_HOOKS=off (what the overhead bench compares against): no GVL or GC hook, the
  # states told as on a Ruby without them, and the profile says so
  def test_state_hooks_off_tells_the_states_as_without_hooks
    script = <<~'RUBY'
      d = Hakari.start(mode: :wall) { Array.new(2) { Thread.new { x = 0; 2_000_000.times { x += 1 } } }.each(&:join); 3.times { GC.start } }
      leaves = d[:samples].map { |fr, *| fr.first[0] }.uniq.grep(/\A\[/)
      print Marshal.dump([leaves, d[:states]])
    RUBY
    out = IO.popen({ "HAKARI_STATE_HOOKS" => "off" }, [RbConfig.ruby, "-I", ENGINE_LIB, "-rhakari", "-e", script], &:read)
    leaves, how = Marshal.load(out) # rubocop:disable Security/MarshalLoad
    assert_equal "gvl:off-gvl-counts-as-blocked gc:off(HAKARI_STATE_HOOKS=off)", how
    assert_includes leaves, "[GVL blocked]" # the main thread's join, and each worker's waits
    ["[GVL wait]", "[GC marking]", "[GC sweeping]"].each { |leaf| refute_includes leaves, leaf }
  end

  def test_every_sample_has_a_state_label_in_pprof
    data = Hakari.start(mode: :wall) { Thread.new { sleep 0.05 }.join; GC.start }
    raw = Zlib.gunzip(data.encode(:pprof))
    %w[state running blocked].each { |s| assert_includes raw, s }
    assert_includes raw, "gc_marking" if GC_EVENTS
    assert_match(/states=gvl:/, raw)
  end
end
