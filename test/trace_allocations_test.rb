# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require_relative "fixtures/allocations_workload"

# Tracing with allocations: true — each method's objects by class and source line, counted
# exactly, beside its time; in methods_table, the reports, pprof and the CLI.
class TraceAllocationsTest < Minitest::Test
  include CompactionHelpers
  WORKLOAD = File.expand_path("fixtures/allocations_workload.rb", __dir__)

  def teardown
    Hakari.stop if Hakari.running?
    GC.stress = false
  end

  def run_workload(allocations: true, **options)
    w = AllocationsWorkload.new
    list = [1, 2, 3]
    Hakari.start(mode: :trace, allocations: allocations, **options) do
      w.strings(1000)
      w.arrays(2000)
      w.in_block(500)
      w.mapped(list, 400)
      w.in_thread(700)
      w.in_fiber(300)
    end
  end

  def site(klass, name, count) = { class: klass, file: WORKLOAD, line: AllocationsWorkload.line_of(name), count: count }

  def sites_of(profile, method) = profile.methods_table.find { |m| m[:name] == method }&.dig(:allocations)

  def test_every_method_gets_exactly_the_objects_it_made_at_their_lines
    [:wall, :cpu].each do |measure|
      profile = run_workload(measure: measure)
      expected = {
        "AllocationsWorkload#strings" => [site("String", "strings", 1300)], # 1000 here, 300 in a fiber
        "AllocationsWorkload#arrays" => [site("Array", "arrays", 2000)],
        "AllocationsWorkload#hashes" => [site("Hash", "hashes", 700)],       # in a thread
        "Integer#times" => [site("Array", "in_block", 500)],                 # the block's
        "Array#map" => [site("Array", "mapped", 400)],                       # its result
      }
      # where Array#map is written in Ruby (3.4 with YJIT), its result is made on its own line
      if Array.instance_method(:map).source_location
        got = sites_of(profile, "Array#map")
        assert_equal [["Array", 400]], got.map { |s| [s[:class], s[:count]] }
        assert_match(/\A<internal:/, got[0][:file])
        expected.delete("Array#map")
      end
      expected.each do |method, want|
        got = sites_of(profile, method)
        refute_nil got, "#{method} is in the methods table (#{measure})"
        assert_equal want, got.map { |s| s.except(:bytes) }, "#{method}'s allocations (#{measure})"
        got.each do |s|
          # each object is counted with its heap slot: a whole number of slots of 40 bytes or more
          assert_operator s[:bytes], :>=, 40 * s[:count]
          assert_equal 0, s[:bytes] % 40, "#{method}: #{s}"
        end
      end
      # a method that made nothing has an empty list, and time is measured as ever
      assert_equal [], sites_of(profile, "AllocationsWorkload#in_fiber").reject { |s| s[:class] == "Fiber" }
      assert_operator profile.methods_table.find { |m| m[:name] == "AllocationsWorkload#arrays" }[:self], :>, 0
    end
  end

  def test_the_same_calls_and_tree_as_without_allocations
    plain = run_workload(allocations: false)
    with = run_workload
    assert_nil plain.methods_table.first[:allocations], "no allocations key unless asked"
    refute_match(/^Allocations/, plain.encode(:flat))
    # the workload's own calls (other threads of the test process may call some of their own)
    calls = lambda do |p|
      p.methods_table.select { |m| m[:name].start_with?("AllocationsWorkload#", "Array#map", "Integer#times") }
       .to_h { |m| [m[:name], [m[:calls], m[:callers], m[:callees].reject { |k, _| k.start_with?("Thread") }]] }
    end
    assert_equal calls.(plain), calls.(with)
  end

  def test_objects_made_by_hakari_itself_are_not_counted
    profile = Hakari.start(mode: :trace, allocations: true) { AllocationsWorkload.new.strings(10) }
    files = profile.methods_table.flat_map { |m| m[:allocations].map { |s| s[:file] } }.uniq
    assert_equal [WORKLOAD], files - [__FILE__]
    counts = profile.methods_table.flat_map { |m| m[:allocations] }.select { |s| s[:file] == __FILE__ }
    assert_equal ["AllocationsWorkload"], counts.map { |s| s[:class] }.uniq, "only the block's own object: #{counts}"
    # nor are hakari's own calls (Hakari.stop's, before the engine stops)
    assert_equal %w[AllocationsWorkload#strings Class#new Integer#+ Integer#<],
                 profile.methods_table.map { |m| m[:name] }.reject { |n| n.start_with?("BasicObject#initialize") }.sort
  end

  def test_a_process_s_first_trace_counts_none_of_the_measure_s_own_objects
    # measure: :allocations reads GC.stat, whose first call interns its keys (Strings): hakari's
    code = "require 'hakari'; p = Hakari.start(mode: :trace, measure: :allocations, allocations: true) { [1] * 3 }; " \
           "print p.counters.values_at(:allocation_count, :allocations_unseen).join(' ')"
    out, err, st = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, "-e", code)
    assert st.success?, err
    assert_equal "2 0", out # the literal [1] and Array#*'s result
  end

  def test_safe_under_gc_compact_and_gc_stress
    w = AllocationsWorkload.new
    profile = Hakari.start(mode: :trace, allocations: true) do
      w.arrays(300)
      GC.compact
      GC.stress = true
      w.strings(50)
      GC.stress = false
      GC.compact
      w.hashes(200)
    end
    { "AllocationsWorkload#arrays" => [site("Array", "arrays", 300)],
      "AllocationsWorkload#strings" => [site("String", "strings", 50)],
      "AllocationsWorkload#hashes" => [site("Hash", "hashes", 200)] }.each do |method, want|
      assert_equal want, sites_of(profile, method).map { |s| s.except(:bytes) }, method
    end
  end

  # Ruby 3.4 counts each object a compaction moves as allocated: measure: :allocations leaves out
  # what Ruby's count grows by inside a GC, or GC.compact was charged ~100 000 objects here
  def test_the_allocations_measure_charges_no_moved_objects_to_a_compaction
    w = AllocationsWorkload.new
    profile = with_objects_to_move do
      Hakari.start(mode: :trace, measure: :allocations) do
        w.arrays(300)
        GC.compact
        w.arrays(300)
      end
    end
    rows = profile.methods_table.to_h { [_1[:name], _1] }
    assert_operator rows["GC.compact"][:self], :<, 100
    # and the arrays theirs (a first call at a call site may add its inline cache: docs/limits.md)
    assert_in_delta 600, rows["AllocationsWorkload#arrays"][:self], 2
  end

  def test_reports_and_pprof_show_them
    profile = run_workload
    flat = profile.encode(:flat)
    assert_match(/^Allocations: \d+ objects, \d+ bytes of heap slots, at \d+ sites/, flat)
    row = flat.lines.find { |l| l.include?("AllocationsWorkload#arrays") && l.include?(":#{AllocationsWorkload.line_of('arrays')}") }
    assert_match(/^\s+2000\s+\d+\s+[\d.]+%\s+Array\s+AllocationsWorkload#arrays\s/, row)
    assert_includes profile.encode(:graph), "Allocations: "
    Dir.mktmpdir do |dir|
      path = Hakari.save(File.join(dir, "t.pb.gz"), profile)
      top, err, st = Open3.capture3("go", "tool", "pprof", "-sample_index=alloc_objects", "-top", path)
      assert st.success?, err
      assert_match(/^Type: alloc_objects$/, top)
      assert_match(/^\s+2000\s+[\d.]+%\s+[\d.]+%\s+2000\s+[\d.]+%\s+AllocationsWorkload#arrays$/, top)
      tags, err, st = Open3.capture3("go", "tool", "pprof", "-sample_index=alloc_objects", "-tags", "-tagfocus=class=Hash", path)
      assert st.success?, err
      # the Hashes of AllocationsWorkload#hashes, at its line (Thread.new may make one of its own)
      assert_match(/^\s+700\.0 \([\s\d.]+%\): #{AllocationsWorkload.line_of('hashes')}$/, tags)
      # and hakari's own reader: the report of the file holds the same table
      out, err, st = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, File.expand_path("../exe/hakari", __dir__),
                                    "report", "--format", "flat", path)
      assert st.success?, err
      assert_includes out, row
    end
  end

  def test_callgrind_carries_them_as_a_third_event
    w = AllocationsWorkload.new
    profile = Hakari.start(mode: :trace, allocations: true) do
      w.arrays(2000)
      w.strings(1000)
    end
    Dir.mktmpdir do |dir|
      path = Hakari.save(File.join(dir, "callgrind.out.t"), profile)
      out, err, st = Open3.capture3("callgrind_annotate", "--inclusive=yes", path)
      assert st.success?, err
      assert_match(/^Events recorded:\s+Wall_ns Wait_ns Alloc_objects$/, out)
      assert_match(/^\s*[\d,]+ \(100\.0%\)\s+0\s+3,000 \(100\.0%\)\s+PROGRAM TOTALS$/, out)
      assert_match(/^\s*[\d,]+ \([\s\d.]+%\)\s+0\s+2,000 \(66\.67%\)\s+\S+:AllocationsWorkload#arrays$/, out)
    end
  end

  def test_the_cli_counts_them_and_refuses_them_outside_trace
    Dir.mktmpdir do |dir|
      script = File.join(dir, "prog.rb")
      # frozen literals: the String is String#+@'s copy alone
      File.write(script, "# frozen_string_literal: true\ndef make = 2500.times { +\"x\" }\nmake\n")
      out = File.join(dir, "out.flat.txt")
      exe = File.expand_path("../exe/hakari", __dir__)
      _o, err, st = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, exe, "record", "-m", "trace", "--allocations",
                                   "-o", out, RbConfig.ruby, script)
      assert st.success?, err
      text = File.read(out)
      assert_match(/^Allocations: 2500 objects, \d+ bytes of heap slots, at 1 sites$/, text)
      assert_match(%r{^\s+2500\s+\d+\s+100\.00%\s+String\s+String#\+@\s+#{Regexp.escape(script)}:2$}, text)
      _o, err, st = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, exe, "record", "-m", "cpu", "--allocations",
                                   "-o", out, RbConfig.ruby, script)
      refute st.success?
      assert_includes err, "--allocations applies to -m trace (mode is cpu"
    end
  end

  def test_bad_values_are_refused_by_name
    e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, allocations: 1) }
    assert_includes e.message, "invalid allocations: 1 (expected true or false)"
    e = assert_raises(ArgumentError) { Hakari.start(mode: :cpu, allocations: true) }
    assert_includes e.message, "allocations: only apply to mode: :trace"
    refute Hakari.running?
  end
end
