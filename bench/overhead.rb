# frozen_string_literal: true

# Overhead: how much slower does a program run under hakari (cpu, 1000 Hz) than
# unprofiled, and than under stackprof (cpu, interval 1000 µs)?
#
# Part 1, steady state, interleaved: one process per workload runs every setup once per
# round, in a shuffled order, for many rounds of a 20-40 ms workload timed while the
# profiler runs (its start and stop are timed apart and printed). Runs milliseconds
# apart in one process share its memory layout, warm state and the VM's current speed,
# so a round's ratios resolve fractions of a percent where fresh processes scatter by
# ±10 % on this VM.
# Part 2, fresh processes: every run a new `ruby` process timed from profiler start to
# stop (result built), as a cross-check that includes loading and first-use costs.
# In both, slowdowns are medians of per-round ratios, and CPU time is the whole
# process's, so a profiler's own threads count too.
#
# Then the sampling callback's own cost (sampling_time_ns / sampling_count) with the
# stack 20 and 200 frames deep, in cpu and wall mode.
#
#   ruby bench/overhead.rb        (after bench/build)
# Env: HAKARI_BENCH_ROUNDS (interleaved rounds, default 301), HAKARI_BENCH_RUNS (fresh-process
# rounds, default 11), HAKARI_BENCH_PARTS (which parts to run: default "1,2,callback")

require "json"
require "rbconfig"

LIB = File.expand_path("../lib", __dir__)
require_relative "bench_ext"
require_relative "paired_stats"
RUNS = Integer(ENV.fetch("HAKARI_BENCH_RUNS", "11"))
PARTS = ENV.fetch("HAKARI_BENCH_PARTS", "1,2,callback").split(",")
ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "301"))
SETUPS = %w[unprofiled hakari stackprof].freeze
# part 1 also runs hakari at 250 Hz: stackprof's cpu mode gets only ~210 samples per CPU
# second here (ITIMER_PROF fires on the kernel's 250 Hz tick), so this is the like-for-like row;
# and no profiler but a bare C thread that sleeps 1 ms at a time (CWork.sleeper_start): what the
# wake-ups of any 1000 Hz timer thread alone cost the program, which stackprof does not pay
# and rperf (cpu mode, 1000 Hz) where it installs: Ruby 3.4+
RPERF = BenchExt.peer?("rperf")
STEADY_SETUPS = (SETUPS + %w[hakari@250 sleeper] + (RPERF ? %w[rperf] : [])).freeze
WORKLOADS = %w[fib kramdown].freeze
DEPTHS = [20, 200].freeze

# CPU time the whole machine spent, and the hypervisor stole, in seconds (/proc/stat, USER_HZ ticks)
def machine_cpu
  v = File.read("/proc/stat")[/^cpu (.*)/, 1].split.map(&:to_i)
  hz = 100.0
  { busy: (v[0] + v[1] + v[2] + v[5] + v[6]) / hz, steal: v[7] / hz }
end

# ---- child side: one workload under one setup, prints one JSON line ----

def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)

WORDS = %w[profiler sample stack frame weight clock thread ruby method call time signal buffer table string].freeze
def word(i) = WORDS[(i * 7 + i / 3) % WORDS.size]
def sentence(i, n) = Array.new(n) { |k| word(i + k) }.join(" ").capitalize + "."

# A large markdown document with the usual block and span elements, the same every time.
def markdown_doc(sections)
  out = +""
  sections.times do |s|
    out << "## Section #{s}: #{word(s)} #{word(s + 1)}\n\n"
    3.times do |p|
      out << sentence(s * 5 + p, 12 + p) << " Some *emphasis*, **strong**, `code #{s}` and a " \
             "[link](http://example.com/#{s}/#{p}).\n\n"
    end
    4.times { |k| out << "- item #{k}: #{sentence(s + k, 5)}\n" }
    out << "\n    def m#{s}(x)\n      x * #{s}\n    end\n\n| a | b | c |\n|---|---|---|\n"
    3.times { |r| out << "| #{word(r + s)} | #{r * s} | #{word(r)} |\n" }
    out << "\n> quoted #{sentence(s, 6)}\n\n"
  end
  out
end

# size: :full (about 1 s unprofiled, fresh processes) or :short (20-40 ms, interleaved)
def workload(name, size = :full)
  case name
  when "fib" then n = size == :full ? 35 : 27; -> { fib(n) }
  when "kramdown"
    require "kramdown"
    doc = markdown_doc(size == :full ? 700 : 40)
    -> { Kramdown::Document.new(doc).to_html }
  end
end

def profiled(setup, &work)
  case setup
  when "unprofiled" then work.call
  when "hakari" then Hakari.start(mode: :cpu, frequency: 1000, &work)
  when "stackprof" then StackProf.run(mode: :cpu, interval: 1000, &work)
  end
end

def timed_run(setup, work)
  GC.start
  # the kernel's process clock: it keeps the CPU of threads that ended (hakari's worker is
  # joined at stop); over a 1 s run its staleness (below) is under half a percent
  w0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  profiled(setup, &work)
  { wall: Process.clock_gettime(Process::CLOCK_MONOTONIC) - w0,
    cpu: Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c0 }
end

def child_time(workload_name, setup)
  work = workload(workload_name)
  require setup unless setup == "unprofiled" # loading the profiler is not part of its overhead
  timed_run(setup, work)
end

def start_profiler(setup)
  case setup
  when "hakari" then Hakari.start(mode: :cpu, frequency: 1000)
  when "hakari@250" then Hakari.start(mode: :cpu, frequency: 250)
  when "stackprof" then StackProf.start(mode: :cpu, interval: 1000)
  when "rperf" then Rperf.start(mode: :cpu, frequency: 1000)
  when "sleeper" then CWork.sleeper_start
  end
end

def stop_profiler(setup)
  case setup
  when "hakari", "hakari@250" then Hakari.stop
  when "stackprof" then StackProf.stop.then { StackProf.results }
  when "rperf" then Rperf.stop
  when "sleeper" then CWork.sleeper_stop
  end
end

# The process's CPU time, exactly: the kernel's process clock is only as fresh as its last
# scheduler tick once a CPU timer is armed (stackprof's ITIMER_PROF arms one), which over a
# 20 ms run is off by up to a fifth. This thread's own clock is exact; the other threads'
# runtimes come from /proc (they are asleep or on the other core, so already accounted).
def process_cpu
  own = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  tid = Dir.exist?("/proc/thread-self") ? File.basename(File.realpath("/proc/thread-self")) : nil
  others = Dir.glob("/proc/self/task/*").sum do |dir|
    next 0 if File.basename(dir) == tid
    File.read("#{dir}/schedstat").split.first.to_i / 1e9
  rescue Errno::ENOENT
    0
  end
  own + others
end

# One run of part 1: the workload timed while the profiler runs; its start and its stop
# (with the result built) are timed apart, as :setup.
def steady_run(setup, work)
  mono = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
  GC.start
  s0 = mono.()
  start_profiler(setup)
  c0 = process_cpu
  t0 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  w0 = mono.()
  work.call
  w1 = mono.()
  t1 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  c1 = process_cpu
  result = stop_profiler(setup)
  setup_s = mono.() - s0 - (w1 - w0)
  { wall: w1 - w0, thread: t1 - t0, cpu: c1 - c0, setup: setup_s, samples: samples_in(setup, result) }
end

def samples_in(setup, result)
  case setup
  when "stackprof" then result[:samples]
  when "rperf" then result[:sampling_count]
  when "unprofiled", "sleeper" then 0
  else result[:sample_count]
  end
end

# every setup in one process: warm-up rounds, then `rounds` rounds in a shuffled order
def child_interleaved(workload_name, rounds)
  work = workload(workload_name, :short)
  require "hakari"
  require "stackprof"
  BenchExt.load("cwork")
  3.times { STEADY_SETUPS.each { |s| steady_run(s, work) } }
  times = Hash.new { |h, k| h[k] = [] }
  # A new order every round, from a seeded generator (the same orders every run). Rotating alone
  # keeps the cycle: every setup would always follow the same one and inherit whatever that one
  # leaves behind (its stop's garbage, its thread's exit), and always precede the same one.
  order = Random.new(1)
  rounds.times { STEADY_SETUPS.shuffle(random: order).each { |s| times[s] << steady_run(s, work) } }
  times
end

# Recurses until the stack is `depth` frames deep, then spins there for a second.
def descend(depth, seconds)
  return descend(depth, seconds) if caller_locations(0).size < depth

  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    i = 0
    i += 1 while i < 1000
  end
end

def child_callback(mode, depth)
  require "hakari"
  s0 = machine_cpu
  synthesize = ENV["HAKARI_BENCH_SYNTHESIZE"] != "0"
  p = Hakari.start(mode: mode.to_sym, frequency: 1000, synthesize: synthesize) { descend(depth, 1.0) }.to_h
  { ns: p[:sampling_time_ns].fdiv(p[:sampling_count]), walk_ns: p[:stack_walk_time_ns].fdiv(p[:sampling_count]),
    resolve_ns: p[:resolve_time_ns].fdiv(p[:sampling_count]),
    samples: p[:sampling_count], walker: p[:stack_walker], steal: machine_cpu[:steal] - s0[:steal],
    frames: p[:samples].max_by { |s| s[1] }[0].size } # depth of the heaviest stack
end

if ARGV[0] == "--child"
  result = case ARGV[1]
           when "callback" then child_callback(ARGV[2], Integer(ARGV[3]))
           when "interleaved" then child_interleaved(ARGV[2], Integer(ARGV[3]))
           else child_time(ARGV[1], ARGV[2])
           end
  puts JSON.generate(result)
  exit 0
end

# ---- parent side ----

def child(*args, env: {})
  out = IO.popen(env, [RbConfig.ruby, "-I", LIB, __FILE__, "--child", *args], &:read)
  raise "child #{args.join(' ')} failed: #{out}" unless $?.success?

  JSON.parse(out.lines.last, symbolize_names: true)
end

include PairedStats

def ratios(times, w, a, b, clock) = times[[w, a]].zip(times[[w, b]]).map { |x, y| x[clock] / y[clock] }

# wall: the slowdown the target is about. thread CPU: the profiled thread's own CPU time,
# which leaves out the time the hypervisor took the core away (steal), so it scatters less
# (it leaves out the profiler's other threads too: those are in the process CPU column).
def print_table(times, rounds, setups = SETUPS)
  thread = times.values.first.first.key?(:thread)
  WORKLOADS.each do |w|
    puts "\n#{w}"
    puts format("  %-11s %8s %17s   %-8s %-17s %-17s %-8s %-17s %s", "setup", "wall s", "wall min..max", "slowdown",
                "(IQR over rounds)", "(95% CI, median)", "thread", "(95% CI, median)", "process CPU")
    setups.each do |s|
      walls = times[[w, s]].map { |t| t[:wall] }
      wr = ratios(times, w, s, "unprofiled", :wall)
      tr = thread ? ratios(times, w, s, "unprofiled", :thread) : nil
      cr = ratios(times, w, s, "unprofiled", :cpu)
      puts format("  %-11s %8.4f %8.4f..%.4f   %-8s %-17s %-17s %-8s %-17s %s", s, median(walls), walls.min, walls.max,
                  pct(median(wr)), "(#{iqr(wr)})", "(#{median_ci(wr)})",
                  tr ? pct(median(tr)) : "-", tr ? "(#{median_ci(tr)})" : "", pct(median(cr)))
    end
    print_per_sample(times, w, setups) if thread && times[[w, "hakari"]].first.key?(:samples)
    hs = ratios(times, w, "hakari", "stackprof", :wall)
    puts format("  hakari vs stackprof (wall): %s (IQR %s, 95%% CI %s), %d rounds", pct(median(hs)), iqr(hs),
                median_ci(hs), rounds)
    if thread
      ht = ratios(times, w, "hakari", "stackprof", :thread)
      puts format("  hakari vs stackprof (thread CPU): %s (95%% CI %s)", pct(median(ht)), median_ci(ht))
    end
    next unless setups.include?("rperf")

    hr = ratios(times, w, "hakari", "rperf", :wall)
    puts format("  hakari vs rperf (wall): %s (IQR %s, 95%% CI %s)", pct(median(hr)), iqr(hr), median_ci(hr))
  end
  puts "  (target: hakari slowdown <= 1% and no more than stackprof's)"
end

# A profiler that takes more samples does more work: how many each took, and an estimate of
# what each sample cost the profiled thread: the median thread-CPU slowdown times the median
# unprofiled thread CPU, over the median sample count (medians of different rounds), and
# samples per second of unprofiled thread CPU. stackprof's cpu mode gets only the kernel's
# ticks, so its samples are fewer and dearer.
def print_per_sample(times, w, setups)
  base = median(times[[w, "unprofiled"]].map { |t| t[:thread] })
  parts = (setups - %w[unprofiled sleeper]).map do |s|
    samples = median(times[[w, s]].map { |t| t[:samples] })
    added = (median(ratios(times, w, s, "unprofiled", :thread)) - 1) * base
    format("%s %d (%.0f per CPU-second), %s", s, samples, samples / base,
           samples.positive? ? format("%+.1f us", added / samples * 1e6) : "-")
  end
  puts "  samples per run (median) and the thread's added CPU per sample: #{parts.join('; ')}"
end

# Other processes running at the same time take cores and caches from the runs: say so.
def load_note(m0, m1, elapsed, ours)
  others = (m1[:busy] - m0[:busy] - ours) / elapsed
  steal = (m1[:steal] - m0[:steal]) / elapsed
  format("  other load while this ran: %.2f cores busy with other processes, %.2f stolen by the " \
         "hypervisor%s", others, steal, others + steal > 0.1 ? " -- NOISY: rerun on an idle machine" : "")
end

def own_cpu = Process.times.then { |t| t.utime + t.stime + t.cutime + t.cstime }

puts "overhead: ruby #{RUBY_VERSION}; cpu mode, 1000 Hz (stackprof: cpu, interval 1000 us)"

# ---- part 1: interleaved in one process per workload ----
if PARTS.include?("1")
  m0 = machine_cpu
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  c0 = own_cpu
  times = {}
  WORKLOADS.each do |w|
    child("interleaved", w, ROUNDS.to_s).each { |s, runs| times[[w, s.to_s]] = runs }
  end
  note = load_note(m0, machine_cpu, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, own_cpu - c0)
  puts "\n1. steady state, interleaved: #{ROUNDS} rounds in one process per workload, every setup once per " \
       "round in a shuffled order;\n   fib(27), kramdown on a 40-section document, timed while the profiler runs"
  print_table(times, ROUNDS, STEADY_SETUPS)
  WORKLOADS.each do |w|
    puts format("  %-9s start + stop (result built), median: hakari %.2f ms, stackprof %.2f ms", w,
                1e3 * median(times[[w, "hakari"]].map { |t| t[:setup] }), 1e3 * median(times[[w, "stackprof"]].map { |t| t[:setup] }))
  end
  puts note
end

# ---- part 2: a fresh process per run ----
if PARTS.include?("2")
  times = Hash.new { |h, k| h[k] = [] }
  m0 = machine_cpu
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  c0 = own_cpu
  RUNS.times do |r|
    WORKLOADS.each do |w|
      SETUPS.rotate(r).each { |s| times[[w, s]] << child(w, s) }
    end
    $stderr.print "\roverhead: round #{r + 1}/#{RUNS}" if $stderr.tty?
  end
  $stderr.puts if $stderr.tty?
  note = load_note(m0, machine_cpu, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, own_cpu - c0)
  puts "\n2. fresh processes: #{RUNS} rounds, each running every setup once in a new process; " \
       "fib(35), kramdown on a 700-section document (~1 s each)"
  print_table(times, RUNS)
  puts note
end

if PARTS.include?("callback")
  # Reading a thread CPU clock is a system call in many VMs: print its price. In cpu mode
  # hakari's worker makes it, not the profiled thread (unless the job lands on a thread
  # other than the one the worker watched).
  BenchExt.load("cwork")
  puts format("\ntimer-thread floor: a bare C thread that only sleeps 1 ms at a time spends %.1f us of CPU per " \
              "wake-up here,\n  %.1f %% of a core at 1000 Hz, whatever it sleeps on; hakari's worker pays that on the other core",
              w = CWork.wake_cost_us(2000), w / 10)
  # The walker reads the VM's control frames where it knows their layout; the second row of
  # each group turns off synthesized frames (read by the worker at the tick, not in the
  # callback: the two should match), the third forces rb_profile_frames; the rows run
  # alternately so that all see the same spells of the VM's noise.
  puts "\nsampling callback cost (1000 Hz, 1 s spinning at the bottom of the stack; median of 5 runs;"
  puts "  each group of rows run alternately, so all see the same noise; 'steal' is the CPU time the hypervisor took)"
  puts format("  (one clock_gettime here: CLOCK_THREAD_CPUTIME_ID %.0f ns, CLOCK_MONOTONIC %.0f ns)",
              CWork.clock_cost_ns(Process::CLOCK_THREAD_CPUTIME_ID), CWork.clock_cost_ns(Process::CLOCK_MONOTONIC))
  WALKERS = { "default" => {}, "no synthesis" => { "HAKARI_BENCH_SYNTHESIZE" => "0" },
              "ruby" => { "HAKARI_STACK_WALK" => "ruby" } }.freeze
  %w[cpu wall].each do |mode|
    DEPTHS.each do |d|
      runs = Hash.new { |h, k| h[k] = [] }
      5.times { WALKERS.each { |name, env| runs[name] << child("callback", mode, d.to_s, env: env) } }
      WALKERS.each_key do |name|
        rs = runs[name]
        c = rs.sort_by { |x| x[:ns] }[2]
        label = name == "no synthesis" ? "synthesize: false" : c[:walker][0, 26]
        puts format("  %-4s depth %3d (%3d frames), %-26s %5.0f ns per sample over %d samples (runs: %s ns; steal %.2f s)",
                    mode, d, c[:frames], label + ":", c[:ns], c[:samples], rs.map { |x| x[:ns].round }.join(", "),
                    rs.sum { |x| x[:steal] })
        puts format("%31s of which reading the stack %.0f ns, hakari's own work %.0f ns; then, off the profiled " \
                    "thread, resolving %.0f ns", "", c[:walk_ns], c[:ns] - c[:walk_ns], c[:resolve_ns])
      end
    end
  end
  puts "  (target: <= 1000 ns at depth 20)"
end
