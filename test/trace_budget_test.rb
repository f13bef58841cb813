# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "json"
require "tmpdir"

# Tracing's call-path budget (max_paths:, --max-paths): past it, calls on new paths fold into
# a [folded] node under their nearest kept caller. Memory stays bounded however long the run,
# the per-method table (every figure, callers and callees) and the callgrind file stay what they
# are with every path kept, and the output says how much was folded. measure: :allocations makes
# the figures exact to compare: the objects a method made itself are the same in every run of the
# same code.
class TraceBudgetTest < Minitest::Test
  EXE = File.expand_path("../exe/hakari", __dir__)
  # Paths that keep coming: each i walks 10 levels of six methods, chosen by i's bits.
  class PathWalker
    6.times do |k|
      class_eval <<~RUBY, __FILE__, __LINE__ + 1
        def w#{k}(i, depth) = depth.zero? ? leaf(i) : step(i, depth - 1)
      RUBY
    end

    def step(i, depth)
      case (i >> (depth % 12)) % 6
      when 0 then w0(i, depth) when 1 then w1(i, depth) when 2 then w2(i, depth)
      when 3 then w3(i, depth) when 4 then w4(i, depth) else w5(i, depth)
      end
    end

    def leaf(i) = [i].pack("N")

    def run(n) = n.times { |i| w0(i, 10) }
  end

  def setup
    @walker = PathWalker.new
    @walker.run(50) # the first calls' caches are not the measured runs'
  end

  def teardown
    Hakari.stop if Hakari.running?
  end

  # GC off while tracing: a finalizer of an earlier test's object (an IO, a Tempfile) run by a
  # GC inside the trace would be calls of its own, in one of the two runs compared
  def trace(n, **opts)
    GC.start
    GC.disable
    Hakari.start(mode: :trace, measure: :allocations, **opts) { @walker.run(n) }
  ensure
    GC.enable
  end

  def by_method(profile) = profile.methods_table.to_h { |m| [m[:name], m] }

  WALKER = File.read(__FILE__)[/^  class PathWalker.*?^  end\n/m].gsub(/^  /, "")

  # Traces of run(n), one per budget (nil: the default), in a fresh process: measure:
  # :allocations reads the process's count of objects, and a thread another test left running
  # (a server's, Timeout's) that allocates while this one's frame is on top would add to that
  # frame in one run and not in the other. => [[counters, {name => method row}, callgrind,
  # {name => method row} of the profile saved and read back, [folded] paths' objects], ...]
  def traces_apart(n, *budgets)
    code = <<~RUBY
      require "hakari"
      require "json"
      require "tmpdir"
      #{WALKER}
      walker = PathWalker.new
      # a process's first trace makes objects of its own in the first frames it runs (2 in
      # Integer#times on 3.4): a trace before the compared ones
      Hakari.start(mode: :trace) { walker.run(50) }
      rows = ->(profile) { profile.methods_table.to_h { |m| [m[:name], m.except(:name, :file, :line)] } }
      out = #{budgets.inspect}.map do |max|
        GC.start
        GC.disable
        profile = Hakari.start(mode: :trace, measure: :allocations, **(max ? { max_paths: max } : {})) { walker.run(#{n}) }
        GC.enable
        read = Dir.mktmpdir do |dir|
          Hakari.save(File.join(dir, "t.pb.gz"), profile)
          Hakari::Native.read_file(File.join(dir, "t.pb.gz"))
        end
        in_folded = profile.each_sample.sum { |frames, objects| frames.any? { |f| f[0] == "[folded]" } ? objects : 0 }
        [profile.counters, rows.(profile), profile.encode(:callgrind), rows.(read), in_folded]
      end
      print JSON.generate(out)
    RUBY
    out, err, st = Open3.capture3(RbConfig.ruby, "-I", ENGINE_LIB, "-e", code)
    assert st.success?, err
    JSON.parse(out, symbolize_names: true).map do |counters, rows, callgrind, read, in_folded|
      [counters, rows.transform_keys(&:to_s), callgrind, read.transform_keys(&:to_s), in_folded]
    end
  end

  # every figure of every method, its callers and callees, as if every path had been kept
  def assert_same_table(whole, folded, what)
    assert_equal whole.keys.sort, folded.keys.sort, "#{what}: the methods (no [folded] row)"
    whole.each { |name, row| assert_equal row, folded[name], "#{what}: #{name}" }
  end

  def test_past_the_budget_every_method_keeps_its_figures_and_callers
    (whole, a, grind_a), (folded, b, grind_b, read_b, in_folded) = traces_apart(3000, nil, 500)
    assert_operator whole[:node_count], :>, 10_000, "the workload has many paths"
    assert_operator folded[:folded_calls], :>, whole[:call_count] / 2, "most calls fold"
    assert_equal whole[:call_count], folded[:call_count]
    assert_operator a.count { |_, m| m[:recursive] }, :>, 3, "the table has recursion to get right"
    assert_same_table a, b, "methods_table"
    assert_same_table a, read_b, "methods_table of the file"
    assert_equal grind_a, grind_b, "the callgrind file"
    # what was folded: its calls, and its objects, which the [folded] paths hold
    assert_equal folded[:folded_objects], in_folded
    assert_equal 0, folded[:dropped_calls]
  end

  # a budget so small that the room for leaves runs out: calls then go to the [folded] node
  # itself, still counted, still with their own objects and their callers
  def test_a_tiny_budget_loses_no_call
    (whole, a, grind_a), (tiny, b, grind_b) = traces_apart(500, nil, 3)
    assert_equal 0, tiny[:dropped_calls]
    assert_equal whole[:call_count], tiny[:call_count]
    assert_same_table a, b, "methods_table"
    assert_equal grind_a, grind_b, "the callgrind file"
    assert_operator tiny[:node_count], :<=, 3 + 1 + 4, "the kept paths, the leaves to 1.5 x 3, a [folded] node a kept one"
  end

  def test_memory_is_bounded_however_long_the_run
    short = trace(2000, max_paths: 1000)
    long = trace(8000, max_paths: 1000)
    assert_operator long[:call_count], :>, 3.9 * short[:call_count]
    assert_operator long[:node_count], :<=, 2500, "1.5 x max_paths nodes, and a [folded] node a kept one at most"
    assert_operator long[:node_count], :<=, short[:node_count] * 1.1, "four times the run, the same memory"
    unbounded = trace(8000)
    assert_operator unbounded[:node_count], :>, 3 * long[:node_count]
  end

  def test_the_default_budget_and_the_counters
    profile = trace(200)
    assert_equal Hakari::Native::DEFAULT_MAX_PATHS, profile[:max_paths]
    assert_equal 0, profile[:folded_calls]
    assert_equal 0, profile[:folded_objects]
    refute_includes profile.methods_table.map { |m| m[:name] }, "[folded]"
    refute_match(/^Folded:/, profile.encode(:flat))
    wall = Hakari.start(mode: :trace, max_paths: 100) { @walker.run(300) }
    assert_operator wall[:folded_ns], :>, 0
    refute wall.counters.key?(:folded_objects)
  end

  def test_every_output_says_what_was_folded
    profile = trace(2000, max_paths: 300)
    folded = profile[:folded_calls]
    %i[flat graph].each do |format|
      assert_match(/^Folded: #{folded} calls past max_paths=300, #{profile[:folded_objects]} objects, in \[folded\]/,
                   profile.encode(format), format)
    end
    assert_match(/^Folded: #{folded} calls past max_paths=300, in \[folded\]/, profile.encode(:text))
    Dir.mktmpdir do |dir|
      file = File.join(dir, "t.pb.gz")
      Hakari.save(file, profile)
      read = Hakari::Native.read_file(file)
      assert_match(/^Folded: #{folded} calls/, read.encode(:flat), "a file keeps it (its comments)")
      out, err, st = Open3.capture3("go", "tool", "pprof", "-top", "-sample_index=calls", file)
      assert st.success?, err
      assert_match(/max_paths=300 folded_calls=#{folded} folded_objects=\d+/, out)
      assert_match(/\[folded\]/, out)
    end
  end

  # the rows of #samples one at a time: a large trace's paths without all of them as Arrays
  def test_each_sample_gives_the_rows_one_at_a_time
    profile = trace(300, max_paths: 100)
    rows = []
    assert_same profile, profile.each_sample { |row| rows << row }
    assert_equal profile.samples, rows
    enum = profile.each_sample
    assert_equal rows.size, enum.size
    assert_equal rows.first(3), enum.first(3)
    seen = 0
    profile.each_sample { (seen += 1) == 5 and break }
    assert_equal 5, seen
    assert_equal rows, profile.each_sample.to_a, "a pass cut short leaves the next one whole"
    assert_raises(RuntimeError) { profile.each_sample { raise "stop" } }
    sampled = Hakari.start(mode: :wall, frequency: 1000) { @walker.run(300) }
    assert_equal sampled.samples, sampled.each_sample.to_a
  end

  def test_bad_budgets_are_refused_by_name
    [0, -1, "10", 1.5, 2**40, true].each do |bad|
      e = assert_raises(ArgumentError) { Hakari.start(mode: :trace, max_paths: bad) }
      assert_equal "invalid max_paths: #{bad.inspect} (expected an Integer from 1 to #{Hakari::Native::MAX_MAX_PATHS})", e.message
      refute Hakari.running?
    end
    e = assert_raises(ArgumentError) { Hakari.start(mode: :cpu, max_paths: 10) }
    assert_match(/max_paths: only apply to mode: :trace/, e.message)
  end

  def test_the_cli_takes_max_paths
    Dir.mktmpdir do |dir|
      script = File.join(dir, "walk.rb")
      File.write(script, "#{WALKER}PathWalker.new.run(2000)\n")
      env = { "RUBYLIB" => ENGINE_LIB, "RUBYOPT" => nil }
      out, err, st = Open3.capture3(env, RbConfig.ruby, EXE, "record", "-m", "trace", "--max-paths", "400", "-v",
                                    "-o", "t.flat.txt", "ruby", script, chdir: dir)
      assert st.success?, err
      assert_match(/^hakari: wrote .*t\.flat\.txt \(flat, \d+ calls, \d+ call paths, \d+ bytes\); stop \d+\.\d ms, write \d+\.\d ms$/, err)
      assert_match(/^Folded: \d+ calls past max_paths=400, /, File.read(File.join(dir, "t.flat.txt")))
      assert_empty out
      [%w[--max-paths 0], %w[--max-paths 1e3], %w[-m cpu --max-paths 10]].each do |args|
        mode = args.include?("-m") ? [] : %w[-m trace]
        _, err, st = Open3.capture3(env, RbConfig.ruby, EXE, "record", *mode, *args, "ruby", script, chdir: dir)
        assert_equal 2, st.exitstatus, err
        assert_match(/max-paths/, err)
        assert_equal 1, err.lines.size, err
      end
      # without the CLI, from the environment
      env = env.merge("RUBYOPT" => "-rhakari/autorun", "HAKARI_MODE" => "trace", "HAKARI_MAX_PATHS" => "many",
                      "HAKARI_OUTPUT" => File.join(dir, "a.pb.gz"))
      _, err, = Open3.capture3(env, RbConfig.ruby, "-e", "1", chdir: dir)
      assert_match(/invalid HAKARI_MAX_PATHS "many" \(expected an integer from 1 to #{Hakari::Native::MAX_MAX_PATHS}\)/, err)
      refute_path_exists File.join(dir, "a.pb.gz")
    end
  end
end
