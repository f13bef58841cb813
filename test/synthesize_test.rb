# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Frames for the methods the VM runs through specialized instructions (String#=~ as
# opt_regexpmatch2, Hash#[] as opt_aref ...), which push no frame of their own. The workloads
# run in a fresh Ruby (test/fixtures/synthesize_workload.rb): after a tracing test, 3.1 runs
# these methods as real calls, with frames.
class SynthesizeTest < Minitest::Test
  WORKLOAD = File.expand_path("fixtures/synthesize_workload.rb", __dir__)
  # what each method may show as a synthesized leaf: its own instructions, and the loop's
  OPS = {
    op_hash_aref: %w[[]], op_array_aref: %w[[] &], op_string_eq: %w[==], op_float_mul: %w[*],
    op_string_size: %w[size], op_regexp: %w[=~],
  }.freeze
  LOOP = %w[< +].freeze
  # the ones long enough for their receiver's class to be read while they run; a short one
  # (Float#*, Array#[] by index) gets its instruction's usual class
  LONG_OPS = { op_hash_aref: "Hash#[]", op_string_eq: "String#==", op_regexp: "String#=~" }.freeze

  def yjit? = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?

  # [counters, shares] of the workload's scenario, run in a fresh Ruby of this lane
  def run_workload(*args)
    out, err, status = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, WORKLOAD, *args)
    assert status.success?, "#{args.join(' ')}: #{err}"
    Marshal.load(out) # rubocop:disable Security/MarshalLoad -- our own child's output
  end

  def test_the_talks_example_shows_the_regexp_match_and_not_the_addition
    counters, shares = run_workload("talk")
    talk = shares[:talk]
    # Under YJIT, which keeps no current pc, nothing is synthesized: 3.3's and 3.4's YJIT call
    # String#=~ with a frame of its own, 3.1's does not for this one (README, Invisible methods).
    unless yjit? && RUBY_VERSION < "3.3"
      assert_operator talk.fetch("String#=~", 0), :>, 0.9, talk.inspect
      assert_operator talk.fetch("Integer#+", 0), :<, 0.05, talk.inspect
    end
    if yjit?
      assert_equal 0, counters[:synthesized_count]
      assert_match(/\Aoff under YJIT/, counters[:synthesized])
    else
      assert_equal "on", counters[:synthesized]
      assert_operator counters[:synthesized_count], :>, counters[:sample_count] / 2
    end
  end

  def test_synthesize_false_adds_no_frame
    counters, shares = run_workload("talk", "false")
    assert_equal 0, counters[:synthesized_count]
    assert_equal "off (synthesize: false)", counters[:synthesized]
    assert_nil shares[:talk]["String#=~"], shares.inspect unless yjit?
  end

  # Every synthesized frame names an instruction that was running in that method: its own
  # operation or the loop's. The class it names is read from the receiver's slot, a vote per
  # instruction: for the long ones, the class the instruction serves there gets nearly all.
  def test_every_synthesized_frame_is_an_instruction_of_its_method
    counters, shares = run_workload("ops")
    if yjit?
      assert_equal 0, counters[:synthesized_count]
      return
    end
    OPS.each do |m, mids|
      own_shares = shares.fetch(m)
      own_shares.each_key do |label|
        next if label == "SynthesizeWorkload.#{m}"

        assert_includes [*mids, *LOOP], label.split("#", 2)[1], "#{m}: #{own_shares.inspect}"
      end
      next unless (expected = LONG_OPS[m])

      own = own_shares.select { |label, _| label.end_with?(expected[/#.*/]) }.values.sum
      # 3.1's interpreter writes the frame's pc after String#=='s comparison: none is seen there
      next if own < 0.1 && expected == "String#==" && RUBY_VERSION < "3.3"

      assert_operator own, :>, 0.3, "#{m}: #{own_shares.inspect}"
      assert_operator own_shares.fetch(expected, 0), :>=, 0.9 * own, "#{m}: #{own_shares.inspect}"
    end
  end

  def test_bad_synthesize_values_are_refused
    e = assert_raises(ArgumentError) { Hakari.start(mode: :cpu, synthesize: 1) }
    assert_equal "invalid synthesize: 1 (expected true or false)", e.message
    e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, synthesize: false) }
    assert_match(/synthesize: applies to the sampling modes/, e.message)
    refute Hakari.running?
  end
end
