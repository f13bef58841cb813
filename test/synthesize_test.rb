# frozen_string_literal: true

require_relative "test_helper"

# Frames for the methods the VM runs through specialized instructions (String#=~ as
# opt_regexpmatch2, Hash#[] as opt_aref ...), which push no frame of their own.
class SynthesizeTest < Minitest::Test
  RE = /([a-z]+)(\d)\s/
  TALK_STR = "abc123" * 1000
  KEYS = Array.new(200) { |i| format("%0200d", i) }
  HASH = KEYS.to_h { |k| [k, k.size] }
  LONG = "y" * 4000

  # the talk's example: the regexp match is nearly all the time, the addition next to none
  def talk(n)
    a = 0
    str = TALK_STR
    n.times do
      a += 1
      str =~ RE
    end
    a
  end

  # one kind of specialized send each, in a while loop (whose i < n and i += 1 are two more)
  def op_hash_aref(n) = (h = HASH; k = KEYS[7].dup; i = 0; (h[k]; i += 1) while i < n; i)
  def op_array_aref(n) = (a = KEYS; i = 0; (a[i & 127]; i += 1) while i < n; i)
  def op_string_eq(n) = (l = LONG; r = "y" * LONG.size; i = 0; (l == r; i += 1) while i < n; i)
  def op_float_mul(n) = (f = 1.5; i = 0; (f * f; i += 1) while i < n; i)
  def op_string_size(n) = (s = LONG; i = 0; (s.size; i += 1) while i < n; i)
  def op_regexp(n) = (s = TALK_STR[0, 600]; i = 0; (s =~ RE; i += 1) while i < n; i)

  # what each op_ method may show as a synthesized leaf: its own instruction, and the loop's
  OPS = {
    op_hash_aref: "[]", op_array_aref: "[] &", op_string_eq: "==", op_float_mul: "*",
    op_string_size: "size", op_regexp: "=~",
  }.freeze
  LOOP = %w[< +].freeze

  def yjit? = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?

  def self_shares(profile, under)
    times = Hash.new(0)
    total = 0
    profile[:samples].each do |frames, weight, _count, _thread|
      next unless frames.any? { |f| f[0] == under }

      total += weight
      times[frames[0][0]] += weight
    end
    times.transform_values { |t| t.fdiv(total) }
  end

  def test_the_talks_example_shows_the_regexp_match_and_not_the_addition
    talk(200)
    profile = Hakari.start(mode: :cpu) { talk(3000) }
    shares = self_shares(profile, "SynthesizeTest#talk")
    # under YJIT, which keeps no current pc, YJIT's own call of String#=~ has a real frame
    assert_operator shares["String#=~"], :>, 0.9, shares.inspect
    assert_operator shares.fetch("Integer#+", 0), :<, 0.05, shares.inspect
    if yjit?
      assert_equal 0, profile[:synthesized_count]
      assert_match(/\Aoff under YJIT/, profile[:synthesized])
    else
      assert_equal "on", profile[:synthesized]
      assert_operator profile[:synthesized_count], :>, profile[:sample_count] / 2
    end
  end

  def test_synthesize_false_adds_no_frame
    talk(200)
    profile = Hakari.start(mode: :wall, synthesize: false) { talk(1000) }
    assert_equal 0, profile[:synthesized_count]
    assert_equal "off (synthesize: false)", profile[:synthesized]
    shares = self_shares(profile, "SynthesizeTest#talk")
    assert_nil shares["String#=~"] unless yjit?
  end

  # Every synthesized frame names the instruction that was running in that method: its own
  # operation or the loop's. The class it names comes from the receiver's slot, read while the
  # instruction runs, a vote per instruction; an instruction too short to be found running
  # (Float#*, Array#[] by index) gets its usual class, so only long ones are checked for it.
  LONG_OPS = { op_hash_aref: "Hash#[]", op_string_eq: "String#==", op_regexp: "String#=~" }.freeze

  def test_every_synthesized_frame_is_an_instruction_of_its_method
    OPS.each_key { |m| send(m, 20_000) }
    profile = Hakari.start(mode: :cpu) { OPS.each_key { |m| send(m, 1_000_000) } }
    skip_yjit_checked(profile) and return
    OPS.each do |m, mids|
      shares = self_shares(profile, "SynthesizeTest##{m}")
      shares.each_key do |label|
        next if label == "SynthesizeTest##{m}" || !label.include?("#")

        assert_includes [*mids.split, *LOOP], label.split("#", 2)[1], "#{m}: #{shares.inspect}"
      end
      next unless (expected = LONG_OPS[m])

      own = shares.select { |label, _| label.end_with?(expected[/#.*/]) }.values.sum
      # 3.1's interpreter updates the frame's pc after String#=='s comparison: none is seen there
      next if own < 0.1 && expected == "String#==" && RUBY_VERSION < "3.3"

      assert_operator own, :>, 0.3, "#{m}: #{shares.inspect}"
      assert_operator shares.fetch(expected, 0), :>=, 0.9 * own, "#{m}: #{shares.inspect}"
    end
  end

  def test_bad_synthesize_values_are_refused
    e = assert_raises(ArgumentError) { Hakari.start(mode: :cpu, synthesize: 1) }
    assert_equal "invalid synthesize: 1 (expected true or false)", e.message
    e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, synthesize: false) }
    assert_match(/synthesize: applies to mode: :cpu and :wall/, e.message)
    refute Hakari.running?
  end

  private

  # under YJIT nothing is synthesized, and the profile says so; true when that was checked
  def skip_yjit_checked(profile)
    return false unless yjit?

    assert_equal 0, profile[:synthesized_count]
    assert_match(/\Aoff under YJIT/, profile[:synthesized])
    true
  end
end
