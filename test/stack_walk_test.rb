# frozen_string_literal: true

require_relative "test_helper"
require "json"
require "open3"
require "rbconfig"
require "zlib"

# The control-frame walker (stack_walk_vm.c) must give exactly what
# rb_profile_frames gives. HAKARI_STACK_WALK=verify walks both ways at every
# sample and counts the samples on which they differ.
class StackWalkTest < Minitest::Test
  WORKLOAD = File.expand_path("fixtures/walk_workload.rb", __dir__)

  def run_workload(env, mode)
    out, err, status = Open3.capture3({ "WALK_MODE" => mode }.merge(env), RbConfig.ruby, "-I", ENGINE_LIB, WORKLOAD)
    assert status.success?, "workload failed: #{err}"
    [JSON.parse(out.lines.last, symbolize_names: true), err]
  end

  def layout_known? = LAYOUT_KNOWN

  def test_both_walks_agree_on_every_sample
    %w[wall cpu].each do |mode|
      counters, err = run_workload({ "HAKARI_STACK_WALK" => "verify" }, mode)
      if layout_known?
        assert_equal "vm control frames", counters[:stack_walker], "#{mode}: the walker passed its self-check"
      end
      assert_operator counters[:sample_count], :>, 1000, "#{mode}: enough samples to compare"
      assert_equal 0, counters[:walk_mismatch_count], "#{mode}: #{err}"
      refute_match(/walks differ/, err)
    end
  end

  def test_both_walks_agree_when_stacks_cross_max_depth
    counters, err = run_workload({ "HAKARI_STACK_WALK" => "verify", "WALK_SCENARIO" => "excursions" }, "wall")
    assert_operator counters[:sample_count], :>, 3000
    assert_equal 0, counters[:walk_mismatch_count], err
  end

  def test_both_walks_agree_when_continuations_put_frames_back
    %w[wall cpu].each do |mode|
      counters, err = run_workload({ "HAKARI_STACK_WALK" => "verify", "WALK_SCENARIO" => "callcc" }, mode)
      assert_operator counters[:sample_count], :>, 1500, mode
      assert_equal 0, counters[:walk_mismatch_count], "#{mode}: #{err}"
    end
  end

  # A thread's own sample as it wakes counts its frames unchanged from the sample another
  # thread's job took of it while it waited: the check must hold it to that one.
  def test_both_walks_agree_when_threads_wake_where_they_were_sampled_waiting
    counters, err = run_workload({ "HAKARI_STACK_WALK" => "verify", "WALK_SCENARIO" => "waits" }, "wall")
    assert_operator counters[:sample_count], :>, 500
    assert_equal 0, counters[:walk_mismatch_count], err
  end

  def test_ruby_walk_can_be_forced
    counters, = run_workload({ "HAKARI_STACK_WALK" => "ruby" }, "wall")
    assert_equal "rb_profile_frames (HAKARI_STACK_WALK=ruby)", counters[:stack_walker]
    assert_equal 0, counters[:walk_mismatch_count]
  end

  def test_the_walker_is_named_in_counters_and_pprof_comments
    skip_env = ENV.key?("HAKARI_STACK_WALK") # the suite may run under a forced walker
    data = Hakari.start(mode: :wall) { Workloads.spin(0.01) }
    walker = data[:stack_walker]
    assert_equal(layout_known? ? "vm control frames" : "rb_profile_frames", walker) unless skip_env
    pprof = Zlib.gunzip(data.encode(:pprof))
    assert_includes pprof, "stack_walk=#{walker}"
  end

  # The job runs at the thread's first safepoint after the tick, often inside a call made after
  # it (here Process.clock_gettime, called in a loop): the worker reads the leaf frame at the
  # tick, and such samples go to the frames that were running then (moved_count).
  def test_samples_go_to_the_stack_running_at_the_tick
    return unless layout_known? && !ENV.key?("HAKARI_STACK_WALK")

    data = Hakari.start(mode: :cpu) { Workloads.spin(0.3) }
    assert_operator data[:moved_count], :>, 0, "no sample was moved off a call made after its tick"
    assert_operator data[:moved_count], :<, data[:sample_count]
    # Every sample is the spin's but, at most, the one whose job ran after the spin returned (its
    # tick came in the spin's last period, its job at the block's end): that one goes to the
    # block, the frame running when it ran, which the tick's leaf cannot move it from.
    outside = data.samples.reject { |frames, _| frames.first[0] == "[unsampled]" || frames.any? { _1[0] == "Workloads.spin" } }
    assert_operator outside.sum { _2 }, :<=, 2_000_000, outside.inspect
  end
end
