# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Hakari.label: per-fiber label sets that every sample carries, into the returned data,
# pprof (read by `go tool pprof`) and `hakari report --group-by`.
class LabelsTest < Minitest::Test
  include ProfileHelpers
  ROOT = File.expand_path("..", __dir__)

  def teardown
    Hakari.stop if Hakari.running?
  end

  # the weight of the samples whose label set has key => value
  def labelled(profile, key, value)
    sets = profile[:label_sets]
    profile[:samples].sum { |row| sets[row.last][key] == value ? row[1] : 0 }
  end

  # aggregate: false: the running part ([frames, weight, 1, thread, timestamp_ns, label_set], no
  # [GVL ...] leaf) of the first sample of the labelled thread after its last sample with the label
  def running_part_of_next_sample(profile, key, value)
    sets = profile[:label_sets]
    rows = profile[:samples].sort_by { |row| row[4] }
    last = rows.rindex { |row| sets[row.last][key] == value }
    thread = rows[last][3]
    later = rows[(last + 1)..].select { |row| row[3] == thread }
    return 0 if later.empty?

    first = later.first[4]
    later.select { |row| row[4] - first < 1_000_000 && !row[0][0][0].start_with?("[GVL ") }.sum { |row| row[1] }
  end

  def test_a_block_scopes_its_labels_and_restores_them_also_after_an_exception
    Hakari.start(mode: :cpu)
    assert_equal({}, Hakari.labels)
    Hakari.label(endpoint: "GET /a", method: "GET") do
      assert_equal({endpoint: "GET /a", method: "GET"}, Hakari.labels)
      Hakari.label(method: nil, "request" => :r1) do
        assert_equal({endpoint: "GET /a", request: "r1"}, Hakari.labels)
      end
      assert_raises(RuntimeError) { Hakari.label(endpoint: "GET /b") { raise "boom" } }
      assert_equal({endpoint: "GET /a", method: "GET"}, Hakari.labels)
    end
    assert_equal({}, Hakari.labels)
    assert_equal 42, Hakari.label(x: "1") { 42 }
    assert_nil Hakari.label(tenant: "t1") # no block: stays on this fiber until changed
    assert_equal({tenant: "t1"}, Hakari.labels)
    assert_equal({}, Thread.new { Hakari.labels }.value, "a new thread starts with none")
    assert_equal({}, Fiber.new { Hakari.labels }.resume, "a new fiber starts with none")
    Fiber.new { Hakari.label(in_fiber: "yes") }.resume
    assert_equal({tenant: "t1"}, Hakari.labels, "a fiber's labels stay in it")
    Hakari.label(tenant: nil)
    assert_equal({}, Hakari.labels)
  end

  def test_a_frozen_hash_of_labels_is_checked_once_and_merged_right_every_time
    labels = { endpoint: "GET /a" }.freeze
    Hakari.start(mode: :cpu)
    3.times { Hakari.label(labels) { assert_equal({ endpoint: "GET /a" }, Hakari.labels) } }
    Hakari.label(tenant: "t") do
      Hakari.label(labels) { assert_equal({ endpoint: "GET /a", tenant: "t" }, Hakari.labels) }
    end
    Hakari.label(labels) { assert_equal({ endpoint: "GET /a" }, Hakari.labels) }
    Hakari.stop
    Hakari.start(mode: :cpu) # a new profile: its own sets
    Hakari.label(labels) { assert_equal({ endpoint: "GET /a" }, Hakari.labels) }
    value = +"v1"
    mutable = { k: value }.freeze # frozen, but its value is not: read at every call
    Hakari.label(mutable) { assert_equal({ k: "v1" }, Hakari.labels) }
    value.replace("v2")
    Hakari.label(mutable) { assert_equal({ k: "v2" }, Hakari.labels) }
  end

  def test_without_a_profile_a_label_is_a_no_op_that_still_checks_its_input
    refute Hakari.running?
    assert_equal :done, Hakari.label(endpoint: "GET /a") { :done }
    assert_equal({}, Hakari.labels)
    assert_nil Hakari.label(endpoint: "GET /a")
    assert_equal({}, Hakari.labels)
    e = assert_raises(ArgumentError) { Hakari.label(endpoint: 42) { flunk "not run" } }
    assert_match(/invalid label value 42 for :endpoint \(expected a String, a Symbol, or nil/, e.message)
  end

  def test_bad_labels_name_the_value_and_what_is_accepted
    Hakari.start(mode: :cpu)
    {
      -> { Hakari.label(1 => "x") } => /invalid label key 1 \(expected a Symbol or a String\)/,
      -> { Hakari.label(k: 1.5) } => /invalid label value 1.5 for :k/,
      -> { Hakari.label(k: ["a"]) } => /invalid label value \["a"\] for :k/,
      -> { Hakari.label("" => "x") } => /invalid label key "" \(expected 1 to 64 bytes\)/,
      -> { Hakari.label(("k" * 65).to_sym => "x") } => /invalid label key :k{65} \(expected 1 to 64 bytes\)/,
      -> { Hakari.label(k: "v" * 513) } => /invalid label value for :k \(513 bytes; expected at most 512\)/,
      -> { Hakari.label((1..17).to_h { |i| [:"k#{i}", "v"] }) } => /too many labels \(expected at most 16 in one call\)/,
      -> { Hakari.label(thread: "1") } => /invalid label key :thread \(thread, state, timestamp and class are hakari's own labels\)/,
      -> { Hakari.label(class: "Foo") } => /invalid label key :class \(thread, state, timestamp and class are hakari's own labels\)/,
      -> { Hakari.label("endpoint") } => /invalid labels "endpoint" \(expected a Hash or keywords\)/,
    }.each do |call, message|
      e = assert_raises(ArgumentError) { call.call }
      assert_match message, e.message
    end
    assert_equal({}, Hakari.labels, "nothing changed")
  end

  def test_samples_carry_the_labels_of_their_fiber_split_as_the_work
    profile = Hakari.start(mode: :cpu) do
      # spins on the thread's CPU clock: as much CPU on any machine, busy or not
      Hakari.label(endpoint: "GET /heavy") { Workloads.spin(0.15) }
      Hakari.label(endpoint: "GET /light") { Workloads.spin(0.05) }
      Workloads.spin(0.05)
    end
    heavy = labelled(profile, :endpoint, "GET /heavy")
    light = labelled(profile, :endpoint, "GET /light")
    assert_in_delta 3.0, heavy.fdiv(light), 0.6, "heavy #{heavy} light #{light}"
    assert_in_delta 0.8, (heavy + light).fdiv(total(profile)), 0.08
    assert_equal [{}, {endpoint: "GET /heavy"}, {endpoint: "GET /light"}].sort_by(&:to_s),
                 profile[:label_sets].sort_by(&:to_s)
    assert_equal 0, profile[:label_sets_dropped]
    assert_equal profile.label_values("endpoint").keys.sort_by(&:to_s), ["GET /heavy", "GET /light", nil].sort_by(&:to_s)
  end

  def test_wall_mode_gives_a_waiting_thread_the_labels_of_its_fiber
    spun = spun_cpu = slept = until_spun = lived = nil
    # the session's clock begins inside Hakari.start, before the block: the spinner's first sample
    # may hold start's own setting up (a sanitizer run on 3.3: some 11 ms)
    called = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    profile = Hakari.start(mode: :wall, aggregate: false) do
      began = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      t = Thread.new do
        Hakari.label(job: "Sleeper") { slept = Workloads.elapsed_ns { sleep 0.2 } }
        lived = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - began
      end
      # measured inside the label: the label's own setting up and restoring are outside it (a
      # loaded run found the labelled time 18 us short of a length measured around the call)
      Hakari.label(job: "Spinner") do
        cpu0 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
        spun = Workloads.elapsed_ns { Workloads.spin(0.1) }
        spun_cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - cpu0
      end
      until_spun = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - called
      t.join
    end
    sets = profile[:label_sets]
    asleep = profile[:samples].sum do |frames, weight, *, set|
      frames.any? { |f| f[0] == "Kernel#sleep" } && frames[0][0] == "[GVL blocked]" ? weight : 0
    end
    sleeping_labelled = profile[:samples].sum do |frames, weight, *, set|
      frames.any? { |f| f[0] == "Kernel#sleep" } && frames[0][0] == "[GVL blocked]" && sets[set][:job] == "Sleeper" ? weight : 0
    end
    # the sleep is blocked time: at least what was asked, at most the sleep's measured length
    # (which also holds its wait for the GVL after it woke, and is late on a loaded machine). 3.1
    # tells a thread's waits by its own samples only: a new thread's wait for its first GVL (up to
    # the spinner's 100 ms time slice) goes to the sleep there, so the bound is the thread's life.
    gvl_events = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3")
    assert_operator asleep, :>=, 195e6
    assert_operator asleep, :<=, (gvl_events ? slept : lived) + 2e6, "the sleep took #{slept} ns, the thread lived #{lived}"
    assert_equal asleep, sleeping_labelled, "all of it under the sleeping thread's label"
    # the spinner's block, but for its end after its last sample: that goes to the thread's next
    # sample, taken after the block (its running part; 7 ms on a loaded CI run, where ticks came
    # late), and at most the block's wall time (more than its CPU on a busy
    # machine) and the time before it that its first sample holds: since the thread's previous
    # sample, at most since the session began (starting the sleeper, and on 3.1 a wait for the
    # GVL it took: a loaded CI run, 9 ms), plus a period or a few when a loaded machine delays a tick
    spinner = labelled(profile, :job, "Spinner")
    after = running_part_of_next_sample(profile, :job, "Spinner")
    assert_operator after, :<, 50e6, "one sample's running part after the block"
    # On 3.1 (no GVL events) the part of that end the thread was preempted (a hypervisor's steal is
    # in neither its CPU clock nor its run delay) is taken to be blocked: there the block's CPU
    # is the bound (a loaded sanitizer run: 37 us of 100 ms short of its wall time). Where the
    # thread's next sample is not its own but the one the sleeper's job takes of it waiting in
    # the join (no tick came between the block's end and the join), 3.1 reads the end it ran on
    # its CPU clock then (a loaded CI run found 5.6 ms of it after a late tick, when that
    # sample was all blocked)
    least = gvl_events ? spun : [spun, spun_cpu].min
    assert_operator spinner + after, :>=, least, "the block took #{spun} ns (#{spun_cpu} ns of CPU); #{after} ns of it after its last sample"
    assert_operator spinner, :<=, until_spun + 5e6, "the block took #{spun} ns, #{until_spun} ns from the call to start"
  end

  # A thread's time in another state than running is not sampled but taken by its next sample:
  # a block that ends before the next tick leaves it to whatever runs then. Hakari.label takes
  # it as the labels change, under the block's labels (at 10 Hz no tick comes in the block).
  def test_a_short_block_keeps_its_time_off_the_gvl_and_in_the_gc
    gvl_events = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3")
    slept = at = nil
    wall = Hakari.start(mode: :wall, frequency: 10) do
      at = __LINE__ + 1
      Hakari.label(job: "sleeps") { slept = Workloads.elapsed_ns { sleep 0.02 } }
      Workloads.spin(0.15)
    end
    blocked = ->(row) { row[0][0][0] == "[GVL blocked]" }
    all_blocked = wall[:samples].select(&blocked).sum { |row| row[1] }
    assert_operator all_blocked, :>=, 20e6, "every lane: the sleep is blocked time"
    if gvl_events
      sets = wall[:label_sets]
      labelled = wall[:samples].select { |row| blocked.(row) && sets[row.last][:job] == "sleeps" }
      assert_operator labelled.sum { |row| row[1] }, :>=, 20e6, "under the block's labels"
      assert_operator labelled.sum { |row| row[1] }, :<=, slept + 2e6
      # where the labels changed: the test's block, under the state's leaf, not Hakari.label
      assert_equal [["LabelsTest##{__method__}", __FILE__, at]], labelled.map { |row| row[0][1] }.uniq
    end
    cpu = Hakari.start(mode: :cpu, frequency: 10) do
      Hakari.label(job: "collects") { GC.start }
      Workloads.spin(0.15)
    end
    gc = cpu[:samples].select { |row| row[0][0][0].start_with?("[GC ") }
    # the GC is timed from 3.2 (3.1's GC hooks slow every allocation): no such frame on 3.1
    if Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2")
      refute_empty gc
      assert_equal ["collects"], gc.map { |row| cpu[:label_sets][row.last][:job] }.uniq
    else
      assert_empty gc
    end
  end

  # the time a change of labels takes is the block's; what the thread does after the block, here
  # a long wait sampled by the other thread's ticks, keeps its own stack and no label
  def test_a_wait_after_a_label_block_is_not_the_block_s
    q = Queue.new
    took = nil
    profile = Hakari.start(mode: :wall) do
      t = Thread.new do
        # the sleep, then a wait for the GVL the spinning thread holds (up to its time slice)
        took = Workloads.elapsed_ns { Hakari.label(job: "short") { sleep 0.005 } }
        q.pop
      end
      Workloads.spin(0.3)
      q << 1
      t.join
    end
    sets = profile[:label_sets]
    short = profile[:samples].select { |row| sets[row.last][:job] == "short" }
    assert_operator short.sum { |row| row[1] }, :>=, 5e6
    assert_operator short.sum { |row| row[1] }, :<=, took + 2e6, "the block's time, not the wait after it"
    popped = profile[:samples].select { |row| row[0].any? { |f| f[0] == "Thread::Queue#pop" } }
    assert_operator popped.sum { |row| row[1] }, :>, 200e6
    assert_equal [nil], popped.map { |row| sets[row.last][:job] }.uniq
    # the sleep is under the label, blocked, where Ruby tells the GVL's events: taken as the labels
    # change back, or by a tick whose job ran on the thread first, after it took the GVL back (an
    # ASan run on 3.4: no change of labels had any time left to take), under the stack it ran at;
    # most of the 5 ms (the sleep's clock starts before the thread lets the GVL go: 4.85 ms seen).
    # Without the events no change of labels takes any.
    if Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3")
      assert_operator short.sum { |row| row[0][0][0] == "[GVL blocked]" ? row[1] : 0 }, :>=, 4e6, "the sleep, blocked"
    else
      assert_equal 0, profile[:label_change_count]
    end
  end

  def test_a_fiber_switching_inside_a_block_keeps_each_fiber_s_labels
    profile = Hakari.start(mode: :cpu) do
      f = Fiber.new do
        Hakari.label(request: "fiber") do
          Workloads.spin(0.05)
          Fiber.yield
          Workloads.spin(0.05)
        end
      end
      Hakari.label(request: "root") do
        f.resume
        Workloads.spin(0.1)
        f.resume
      end
    end
    assert_in_delta 1.0, labelled(profile, :request, "fiber").fdiv(labelled(profile, :request, "root")), 0.3
  end

  def test_a_full_table_keeps_the_labels_around_and_counts
    profile = Hakari.start(mode: :cpu) do
      Hakari.label(endpoint: "GET /a") do
        65_535.times { |i| Hakari.label(request: i.to_s) { nil } } # with the outer set: 65 536, the most a profile holds
        Hakari.label(request: "one too many") do
          assert_equal({endpoint: "GET /a"}, Hakari.labels)
          Workloads.fib_for(0.03)
        end
      end
    end
    assert_equal 1, profile[:label_sets_dropped]
    assert_operator labelled(profile, :endpoint, "GET /a"), :>, 0
    assert_equal 0, labelled(profile, :request, "one too many")
  end

  def test_labels_set_in_an_earlier_profile_do_not_reach_a_later_one
    Hakari.start(mode: :cpu)
    Hakari.label(tenant: "old")
    Hakari.stop
    profile = Hakari.start(mode: :cpu) do
      assert_equal({}, Hakari.labels)
      Workloads.fib_for(0.03)
    end
    assert_equal [{}], profile[:label_sets]
    Hakari.label(tenant: nil)
  end

  def test_go_pprof_focuses_and_lists_by_label_and_report_groups_by_it
    Dir.mktmpdir do |dir|
      path = File.join(dir, "labels.pb.gz")
      profile = Hakari.start(mode: :cpu, output: path) do
        # CPU spent by the clock, not a count of calls sized by a measured rate (a loaded
        # sanitizer run's rate made the second block the longer one)
        Hakari.label(endpoint: "GET /users/:id") { Workloads.spin(0.1) }
        Hakari.label(endpoint: "POST /orders") { Workloads.spin(0.05) }
      end
      tags, err, st = Open3.capture3("go", "tool", "pprof", "-tags", path)
      assert st.success?, err
      # go's shares of the label's total are the returned data's, largest first
      by = profile.label_values("endpoint").reject { |v, _| v.nil? }
      assert_operator by["GET /users/:id"], :>, by["POST /orders"]
      pct = by.transform_values { |w| format("%.2f%%", 100.0 * w / by.values.sum) }
      assert_match(%r{endpoint: Total .*\n\s+[\d.]+m?s \(\s*#{pct["GET /users/:id"]}\): GET /users/:id\n\s+[\d.]+m?s \(\s*#{pct["POST /orders"]}\): POST /orders}, tags)
      top, err, st = Open3.capture3("go", "tool", "pprof", "-top", "-tagfocus=endpoint=POST /orders", path)
      assert st.success?, err
      assert_match(/Workloads\.spin/, top)
      out, err, st = Open3.capture3(RbConfig.ruby, "-I#{ENGINE_LIB}", "#{ROOT}/exe/hakari", "report", "--group-by", "endpoint",
                                    "--top", "3", path)
      assert st.success?, err
      first = out.index("== endpoint=GET /users/:id (")
      second = out.index("== endpoint=POST /orders (")
      assert first && second && first < second, out
      assert_match(/== samples without the label endpoint \(\d\.\d%/, out)
    end
  end

  def test_tracing_records_no_labels_and_says_so_by_ignoring_them
    profile = Hakari.start(mode: :trace) do
      Hakari.label(endpoint: "GET /a") { assert_equal({}, Hakari.labels) }
    end
    assert_equal [{}], profile[:label_sets]
  end
end
