# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# cpu mode under M:N threads (RUBY_MN_THREADS=1, Ruby 3.3 and later): several Ruby threads share a
# native thread, whose CPU clock holds all of theirs. Each Ruby thread's CPU is its stretches on
# native threads (sampler_mn.c). Ruby reads the variable at boot, so each case runs in a child
# process. Where Ruby has no M:N threads (3.1) the variable changes nothing and the same must hold.
class MNThreadsTest < Minitest::Test
  # Eight threads, each looping between short sleeps (which hand their native thread to another
  # Ruby thread): the profile's total against the process's CPU less hakari's worker.
  SCRIPT = <<~'RUBY'
    require "hakari"
    def spin(n) = n.times { |i| i * i }
    work = -> { Array.new(8) { Thread.new { 12.times { spin(60_000); sleep 0.001 } } }.each(&:join) }
    work.call # the first calls (and the JIT) are not the subject
    data = Hakari.start(mode: :cpu) { work.call }
    total = data[:samples].sum { _2 }
    puts [total, data[:process_cpu_ns] - data[:timer_cpu_ns], data[:samples].map { _4 }.uniq.size].join(" ")
    puts data[:timer]
  RUBY

  def run_script(env)
    out, err, status = Open3.capture3(env, RbConfig.ruby, "-I", ENGINE_LIB, "-e", SCRIPT)
    assert status.success?, "the profiled program died (#{status.inspect}): #{err}"
    numbers, timer = out.lines
    [*numbers.split.map(&:to_i), timer.chomp]
  end

  def test_cpu_mode_counts_each_ruby_thread_once_under_mn_threads
    [{ "RUBY_MN_THREADS" => "1" }, { "RUBY_MN_THREADS" => nil }].each do |env|
      total, process, threads, timer = run_script(env)
      what = "#{env}: profile #{total} ns, process #{process} ns, #{timer}"
      # never more than the process used (each native thread's CPU was counted once per Ruby
      # thread on it: 7.9 times), and all of it, less a period per thread at most
      assert_operator total, :<=, process + 1_000_000, what
      assert_operator total, :>=, 0.9 * process, what
      assert_operator threads, :>=, 9, what
      # the profile says how it read the threads' CPU
      assert_equal !env["RUBY_MN_THREADS"].nil? && RUBY_VERSION >= "3.3", timer.include?("M:N"), what
    end
  end

  # Each Ruby thread's CPU is its own: from taking the GVL on a native thread to letting it go,
  # and on through a wait that ends on the same native thread; what a native thread used between
  # one Ruby thread letting the GVL go and another taking it there is Ruby's switching, which goes
  # to `[native threads]`. The truth: bench/ext/threadcpu, which times the same stretches from
  # the same thread events, every one, over each thread's whole life (its start and end are its
  # CPU too: about 10 us a thread) and the main thread's run of the block. Eight threads that
  # hand over their native threads 150 times each: counted for the thread that let go, the
  # switching gave the threads 3.9 % more than they used.
  OWN_CPU_SCRIPT = <<~'RUBY'
    require_relative "bench/bench_ext"
    BenchExt.load("threadcpu")
    require "hakari"
    ThreadCPU.start
    def spin(n) = n.times { |i| i * i }
    work = -> { Array.new(8) { Thread.new { 150.times { spin(3_000); sleep 0.0005 } } }.each(&:join) }
    work.call # the first calls (and the JIT) are not the subject
    truth = nil
    data = Hakari.start(mode: :cpu) { t0 = ThreadCPU.total_ns; work.call; truth = ThreadCPU.total_ns - t0 }
    native = data[:samples].select { |frames, *| frames.first.first == "[native threads]" }.sum { _2 }
    puts [data[:samples].sum { _2 } - native, truth, native].join(" ")
  RUBY

  if RUBY_VERSION >= "3.3" # M:N threads and the thread events' thread: 3.3 and later
    def test_each_thread_s_cpu_under_mn_threads_is_its_own_and_switching_is_no_thread_s
      out, err, status = Open3.capture3({ "RUBY_MN_THREADS" => "1" }, RbConfig.ruby, "-I", ENGINE_LIB, "-e", OWN_CPU_SCRIPT,
                                        chdir: File.expand_path("..", __dir__))
      assert status.success?, "the profiled program died (#{status.inspect}): #{err}"
      threads, truth, native = out.split.map(&:to_i)
      what = "threads #{threads} ns, their own CPU #{truth} ns, [native threads] #{native} ns"
      assert_in_delta truth, threads, 0.015 * truth + 1_000_000, what
      assert_operator native, :>, 0, what
    end
  end

  # Tracing under M:N threads: threads taking turns on one native thread, with no event between
  # them, each keep their own call tree and their own objects.
  TRACE_SCRIPT = <<~'RUBY'
    require "hakari"
    def a_work(n) = n.times { [1] }
    def b_work(n) = n.times { "x" + "y" }
    data = Hakari.start(mode: :trace, allocations: true) do
      Array.new(4) { |i| Thread.new { 20.times { i.even? ? a_work(100) : b_work(100); Thread.pass } } }.each(&:join)
    end
    per_thread = data[:samples].group_by { _4 }.transform_values { |rows| rows.flat_map { |r| r[0].map(&:first) }.grep(/_work/).uniq }
    puts per_thread.values.reject(&:empty?).map { |names| names.join(",") }.sort.join(" ")
    puts data.methods_table.select { |m| m[:name].start_with?("Integer#times") }.flat_map { |m| m[:allocations] }
             .map { |s| "#{s[:class]}:#{s[:count]}" }.sort.join(" ")
  RUBY

  def test_trace_keeps_each_thread_s_calls_and_objects_under_mn_threads
    [{ "RUBY_MN_THREADS" => "1" }, { "RUBY_MN_THREADS" => nil }].each do |env|
      out, err, status = Open3.capture3(env, RbConfig.ruby, "-I", ENGINE_LIB, "-e", TRACE_SCRIPT)
      assert status.success?, "the profiled program died (#{status.inspect}): #{err}"
      trees, objects = out.lines.map(&:chomp)
      assert_equal "Object#a_work Object#a_work Object#b_work Object#b_work", trees, env.inspect
      # the blocks' objects: 2 threads x 20 x 100 Arrays, and 2 String literals each time (the sum is String#+'s)
      assert_equal "Array:4000 String:8000", objects, env.inspect
    end
  end
end
