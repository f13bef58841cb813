# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# A stopped session's tables are emptied and kept for the next session
# (sampler.c keep_tables): the next start takes nothing from the program's
# heap, and nothing of the previous session shows in the next one's profile.
class SessionReuseTest < Minitest::Test
  include ProfileHelpers

  LIB = File.expand_path("../lib", __dir__)

  def teardown
    Hakari.stop if Hakari.running?
  end

  # glibc's own count of the heap's bytes in use (malloc_stats' last total),
  # in a child process so that no other test's garbage is counted, with the
  # extension in lib/
  HEAP_IN_USE = <<~'RUBY'
    require "fiddle"
    require "tempfile"
    STATS = Fiddle::Function.new(Fiddle::Handle::DEFAULT["malloc_stats"], [], Fiddle::TYPE_VOID)
    def heap_in_use
      Tempfile.create("malloc_stats") do |f|
        saved = STDERR.dup
        STDERR.reopen(f)
        STATS.call
        STDERR.reopen(saved)
        saved.close
        Integer(File.read(f.path)[/Total \(incl\. mmap\):\s*system bytes\s*=\s*\d+\s*in use bytes\s*=\s*(\d+)/, 1])
      end
    end
    # bytes the program's heap gave to Hakari.start
    def start_takes(**opts)
      GC.disable
      before = heap_in_use
      Hakari.start(**opts)
      taken = heap_in_use - before
      GC.enable
      yield
      Hakari.stop
      taken
    end
  RUBY

  def run_child(script)
    # glibc's malloc: not libasan's, which script/test preloads for its sanitizer pass
    out, err, status = Open3.capture3({ "LD_PRELOAD" => nil }, RbConfig.ruby, "-I", LIB, "-rhakari", "-e",
                                      HEAP_IN_USE + script)
    assert status.success?, "the child failed (#{status.inspect}): #{err}"
    out.split.map { |x| Integer(x) }
  end

  def test_the_next_start_takes_nothing_from_the_heap
    first, second, third = run_child(<<~'RUBY')
      spin = -> { x = 0; 200_000.times { x += 1 } }
      puts start_takes(&spin), start_takes(&spin), start_takes(&spin)
    RUBY
    assert_operator first, :>, 1_000_000, "the first start reserves its tables (the measure must see them)"
    assert_operator second, :<, 64 * 1024, "the second start allocated #{second} bytes"
    assert_operator third, :<, 64 * 1024, "the third start allocated #{third} bytes"
  end

  # more locations than start reserves (4096): the tables grow, and stop gives them all back. Each
  # chain's leaf spins 0.1 s of CPU: at 0.02 s a slow CI machine had samples in only 3 chains of 6
  # (a sample is lost when the worker, kept off its core, leaves the ring full of 900-frame captures).
  def test_a_session_that_outgrew_its_tables_gives_them_back
    deep, after = run_child(<<~'RUBY')
      # 6 chains of 900 methods, each a location of its own
      6.times do |c|
        900.times do |i|
          body = i == 899 ? "t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + 0.1; nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < t" : "c#{c}_#{i + 1}"
          eval("def c#{c}_#{i}; #{body}; end")
        end
      end
      data = Hakari.start { 6.times { |c| send("c#{c}_0") } }
      puts data[:samples].flat_map { |frames, _| frames }.uniq.size
      puts start_takes { 1 }
    RUBY
    assert_operator deep, :>, 4096, "the session must have outgrown the reservation"
    assert_operator after, :>, 1_000_000, "a start after a session that outgrew its tables reserves them again"
  end

  def first_session_only = Workloads.spin(0.03)
  def second_session_only = Workloads.spin(0.03)

  def test_nothing_of_the_previous_session_shows_in_the_next
    first = Hakari.start(mode: :cpu) { first_session_only }
    assert_operator cumulative(first, /first_session_only/), :>, 0
    [true, false].each do |aggregate|
      data = Hakari.start(mode: :cpu, aggregate: aggregate) { second_session_only }
      labels = data[:samples].flat_map { |frames, _| frames.map(&:first) }
      refute labels.any? { |l| l.include?("first_session_only") }, "aggregate: #{aggregate}: #{labels.uniq}"
      assert_operator cumulative(data, /second_session_only/), :>, 0.5 * total(data)
    end
  end

  def test_a_session_of_another_depth_after_a_kept_one
    Hakari.start { Workloads.spin(0.01) }
    shallow = Hakari.start(max_depth: 20) { Workloads.recurse(100) { Workloads.spin(0.03) } }
    assert shallow[:samples].all? { |frames, _| frames.size <= 21 }
    assert_operator shallow[:samples].count { |frames, _| frames.last[0] == "[truncated]" }, :>, 0
    deep = Hakari.start { Workloads.recurse(100) { Workloads.spin(0.03) } }
    assert_operator deep[:samples].map { |frames, _| frames.size }.max, :>, 100
    assert deep[:samples].none? { |frames, _| frames.any? { |f| f[0] == "[truncated]" } }
  end
end
