# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Code in Ractors other than the main one is not sampled (README, Known limits): the sampling job
# writes the profile's tables as their only writer, which the main Ractor's GVL makes it. What a
# profile must do beside Ractors: hold none of their frames, count them (ractors_started), keep
# their CPU in cpu mode's [native threads] (so the total is still the process's CPU), and never
# crash. Each case runs in a child process: a Ractor leaves its process in multi-Ractor mode.
class RactorsTest < Minitest::Test
  THREAD_CPU = "Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)"
  SCRIPT = <<~RUBY
    $VERBOSE = nil # Ruby's "Ractor is experimental" warning
    require "hakari"
    def ractor_work(n) = n.times { |i| i * i }
    def main_work(n) = n.times { |i| i * i }
    take = ->(r) { r.respond_to?(:value) ? r.value : r.take }
    mode = ARGV[0].to_sym
    main_cpu = nil
    c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond)
    data = Hakari.start(mode: mode) do
      rs = Array.new(2) { Ractor.new { ractor_work(1_500_000) } }
      t0 = #{THREAD_CPU}
      main_work(1_500_000)
      main_cpu = #{THREAD_CPU} - t0
      rs.each(&take)
    end
    process = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond) - c0
    frames = ->(name) { data[:samples].select { |s| s[0].any? { |f| f[0] == name } }.sum { _2 } }
    native = data[:samples].select { _4.zero? }.sum { _2 }
    puts [frames["Object#ractor_work"], frames["Object#main_work"], main_cpu, native, data[:samples].sum { _2 },
          process - data[:timer_cpu_ns], data[:ractors_started]].join(" ")
  RUBY

  # The child's output; a child that hangs is killed after a minute, and the test fails then
  # rather than the suite waiting for ever.
  def run_child(*args, script: SCRIPT)
    Open3.popen3({ "RUBYOPT" => nil }, RbConfig.ruby, "-I", ENGINE_LIB, "-e", script, *args) do |i, o, e, wait|
      i.close
      out = Thread.new { o.read }
      err = Thread.new { e.read }
      unless wait.join(60)
        Process.kill(:KILL, wait.pid)
        flunk "the profiled program (#{args.join(" ")}) hung for 60 s: #{err.value}"
      end
      assert wait.value.success?, "the profiled program died (#{wait.value.inspect}): #{err.value}"
      out.value
    end
  end

  def test_cpu_mode_keeps_the_ractors_cpu_in_native_threads
    in_ractors, in_main, main_cpu, native, total, process, started = run_child("cpu").split.map(&:to_i)
    what = "profile #{total} ns (native #{native}), process #{process} ns, main thread #{main_cpu} ns"
    assert_equal 2, started
    assert_equal 0, in_ractors, "no frame of another Ractor's: #{what}"
    assert_in_delta main_cpu, in_main, [main_cpu * 0.1, 10_000_000].max, what
    # the two Ractors' CPU, about twice the main thread's, is in [native threads]: the total is
    # the process's, never more (each Ractor runs on a native thread of its own)
    assert_operator native, :>=, main_cpu, what
    assert_operator total, :<=, process + 2_000_000, what
    assert_operator total, :>=, 0.9 * process, what
  end

  def test_wall_mode_samples_the_main_ractor_only
    in_ractors, in_main, main_cpu, _, _, _, started = run_child("wall").split.map(&:to_i)
    assert_equal 2, started
    assert_equal 0, in_ractors
    # on a loaded machine the main thread may wait for a core: its wall time is at least its CPU
    assert_operator in_main, :>=, 0.8 * main_cpu, "main_work #{in_main} ns for #{main_cpu} ns of CPU"
  end

  # Many Ractors starting and ending at a high rate, in each sampling mode: the program ends as it
  # would unprofiled, every Ractor counted. No other thread of the main Ractor's runs beside them:
  # with two threads looping over short sleeps, Ruby itself hangs, unprofiled: 3.3.8 in 2 of 10
  # runs, 3.4.5 once in 39 (and once in 39 under wall mode). A GC's barrier waits for a Ractor that ends,
  # which waits for the main Ractor's scheduler lock, held by a thread waking from its sleep that
  # waits for the barrier: Ruby's own race (no frame of hakari's in the hung threads).
  STORM = <<~'RUBY'
    $VERBOSE = nil
    require "hakari"
    def work(n) = n.times.map { |i| "x" * (i % 50) }.size
    take = ->(r) { r.respond_to?(:value) ? r.value : r.take }
    mode = ARGV[0].to_sym
    data = Hakari.start(mode: mode, **(mode == :object ? { interval: 7 } : { frequency: 5000 })) do
      sum = 10.times.sum { Array.new(4) { |i| Ractor.new(i) { |k| work(5_000 + k) } }.sum(&take) }
      raise "wrong sum #{sum}" unless sum == 10 * (4 * 5_000 + 6)
    end
    puts [data[:ractors_started], data[:samples].size].join(" ")
  RUBY

  def test_ractors_starting_and_ending_while_sampling
    # Ruby 3.1's object mode stops as the first Ractor starts (its NEWOBJ hook crashes a new Ractor)
    %w[cpu wall object].each do |mode|
      started, rows = run_child(mode, script: STORM).split.map(&:to_i)
      assert_equal 40, started, mode
      assert_operator rows, :>, 0, mode
    end
  end

  def test_stat_says_the_ractors_code_is_not_sampled
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "r.rb"), "$VERBOSE = nil\nRactor.new { 200_000.times { |i| i * i } }.then { |r| r.respond_to?(:value) ? r.value : r.take }\n")
      _, err, st = Open3.capture3({ "RUBYLIB" => ENGINE_LIB, "RUBYOPT" => nil }, RbConfig.ruby,
                                  File.expand_path("../exe/hakari", __dir__), "stat", "-m", "cpu", "ruby", "r.rb", chdir: dir)
      assert_equal 0, st.exitstatus, err
      assert_match(/^\s+1\s+Ractors besides the main one ran: their code is not sampled \(their CPU is in \[native threads\]\)$/, err)
    end
  end
end
