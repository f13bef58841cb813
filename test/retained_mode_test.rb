# frozen_string_literal: true

require_relative "test_helper"
require "objspace"
require "open3"

# mode: :retained — the sampled objects still alive at stop, after a full GC, by stack and class,
# with ObjectSpace.memsize_of's bytes. Ground truth: methods that keep a known share of what
# they allocate, through compaction and GC.stress.
class RetainedModeTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  # Each makes n objects of one class and keeps every `every`-th in KEPT.
  module Keeper
    KEPT = []
    module_function

    def arrays(n, every) = n.times { |i| a = [i, i]; KEPT << a if (i % every).zero? }
    def hashes(n, every) = n.times { |i| h = { a: i }; KEPT << h if (i % every).zero? }
    def nothing_kept(n) = n.times { |i| [i] }
  end

  def setup
    Keeper::KEPT.clear
    GC.start
  end

  def teardown
    Hakari.stop if Hakari.running?
    Keeper::KEPT.clear
  end

  # [objects, bytes] of class `klass` in samples whose stack holds a frame labelled `frame`
  def retained(profile, frame, klass)
    sets = profile[:label_sets]
    rows = profile[:samples].select { |row| row[0].any? { |f| f[0] == frame } && sets[row.last][:class] == klass }
    [rows.sum { _1[1] }, rows.sum { _1[4] }] # [frames, objects, count, thread, bytes, label_set]
  end


  def test_the_objects_alive_at_stop_with_their_bytes_through_compaction
    Keeper.arrays(10, 1) # warm
    Keeper::KEPT.clear
    profile = Hakari.start(mode: :retained) do
      Keeper.arrays(20_000, 4)
      GC.compact if GC.respond_to?(:compact) # the followed objects move
      Keeper.hashes(9_000, 3)
      # on a thread of its own: the stop's GC scans the main thread's machine stack
      # conservatively, where the hook's frames (larger under AddressSanitizer) leave values
      Thread.new { Keeper.nothing_kept(30_000) }.join
    end
    c = profile.counters
    assert_equal :retained, c[:mode]
    assert_equal 1, c[:interval]
    # every object alive: those kept, and the last one or two that the GC still finds on the
    # machine stack, which it scans conservatively (seen under YJIT and ASan); each method's
    # objects are all of one size, as ObjectSpace.memsize_of gives it
    { arrays: [[0, 0], 5_000], hashes: [{ a: 0 }, 3_000], nothing_kept: [[0], 0] }.each do |method, (like, kept)|
      objects, bytes = retained(profile, "RetainedModeTest::Keeper.#{method}", like.class.name)
      assert_includes kept..kept + 3, objects, method
      assert_equal objects * ObjectSpace.memsize_of(like), bytes, method
    end
    assert_operator c[:sampling_count], :>=, 59_000, "every object followed"
    # every retained object is in a sample, less those hakari made itself at start and stop
    left_out = c[:retained_count] - profile[:samples].sum { _1[1] }
    assert_includes 0..20, left_out
    text = profile.encode(:text)
    assert_match(/^Total:\s+\d+ count \(retained_objects\)$/, text)
    assert_match(/^Total retained_space:\s+\d+ bytes$/, text)
    assert_match(/^Flat by retained_space:\n\s+\d+ bytes\s+\d+\.\d%  /, text)
    types = Hakari::Native.read(profile.encode(:pprof)).counters[:sample_types]
    assert_equal [%w[samples count], %w[retained_objects count], %w[retained_space bytes]], types
  end

  def test_gc_stress_and_an_interval
    profile = Hakari.start(mode: :retained, interval: 7) do
      GC.stress = true
      begin
        Keeper.arrays(700, 1)
      ensure
        GC.stress = false
      end
      Keeper.hashes(70_000, 2)
    end
    objects, = retained(profile, "RetainedModeTest::Keeper.hashes", "Hash")
    assert_in_delta 35_000, objects, 35_000 * 0.05, "every 7th followed, each weighing 7"
    objects, = retained(profile, "RetainedModeTest::Keeper.arrays", "Array")
    assert_in_delta 700, objects, 350
  end

  # the stop's full GC runs even where the program disabled the GC; ended threads are not kept
  def test_a_disabled_gc_and_ended_threads_keep_nothing_alive
    GC.disable
    profile = Hakari.start(mode: :retained) do
      Thread.new { Keeper.nothing_kept(20_000) }.join # (a thread of its own: as above)
      40.times { Thread.new { Keeper.nothing_kept(10) }.join }
    end
    assert GC.disable, "the program's GC stays disabled"
    GC.enable
    assert_operator retained(profile, "RetainedModeTest::Keeper.nothing_kept", "Array")[0], :<=, 3
    threads = profile[:samples].sum { |row| profile[:label_sets][row.last][:class] == "Thread" ? row[1] : 0 }
    assert_operator threads, :<=, 3, "40 threads ended and were joined"
  ensure
    GC.enable
  end

  # Ruby runs no FREEOBJ hook of the main Ractor's for a GC another Ractor starts: a profile lets
  # the objects it follows go when a Ractor starts, and says so
  def test_a_ractor_starting_lets_the_objects_go
    profile = nil
    _, err = capture_subprocess_io do
      profile = Hakari.start(mode: :retained) do
        Keeper.arrays(1_000, 1)
        r = Ractor.new { 1 + 1 }
        r.respond_to?(:value) ? r.value : r.take
        Keeper.hashes(500, 1)
      end
    end
    assert_match(/hakari: a Ractor started: the retained-mode profile stops here and lets its objects go/, err)
    assert_equal 0, retained(profile, "RetainedModeTest::Keeper.arrays", "Array")[0]
    assert_equal 0, retained(profile, "RetainedModeTest::Keeper.hashes", "Hash")[0]
    # the arrays let go; the hashes made after not seen at all (the hooks are off)
    assert_operator profile.counters[:dropped_count], :>=, 1_000
  end

  def test_what_retained_mode_refuses
    e = assert_raises(ArgumentError) { Hakari.start(mode: :retained, aggregate: false) }
    assert_match(/aggregate: false does not apply to mode: :retained/, e.message)
    Dir.mktmpdir do |dir|
      e = assert_raises(ArgumentError) { Hakari.start(mode: :retained, every: 1, output_dir: dir) }
      assert_match(/every: does not apply to mode: :retained/, e.message)
    end
    refute Hakari.running?
    Hakari.start(mode: :retained)
    e = assert_raises(RuntimeError) { Hakari.snapshot }
    assert_match(/Hakari.snapshot does not apply to mode: :retained/, e.message)
    assert Hakari.running?
  end

  def test_the_cli_stat_prints_what_was_retained
    Dir.mktmpdir do |dir|
      script = File.join(dir, "keep.rb")
      File.write(script, "KEEP = []\n20_000.times { |i| a = [i]; KEEP << a if i.even? }\n")
      _, err, st = Open3.capture3(RbConfig.ruby, "-I#{ENGINE_LIB}", "#{ROOT}/exe/hakari", "stat", "-m", "retained",
                                  RbConfig.ruby, script)
      assert st.success?, err
      assert_match(/\(retained mode, every 1 objects followed\):/, err)
      assert_match(/^\s+1\d,\d\d\d\s+of them alive at stop, after a full GC/, err)
      assert_match(/ Most retained classes \(objects, from the samples\):\n\s+10,0\d\d\s+Array\n/, err)
    end
  end
end
