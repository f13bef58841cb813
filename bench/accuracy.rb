# frozen_string_literal: true

# Ground-truth accuracy: how much time does each profiler give a method, against the time that
# method really took (measured around every call, on both clocks, in every thread)?
#
# Workloads (methods of Work): ruby_busy (Ruby loop), c_busy (C loop holding the GVL),
# c_sleep_hold (C sleep holding the GVL), c_sleep_release (C sleep without the GVL), and mixed
# (calls the four). The scenarios run the same deterministic schedule of calls:
#   single   on the main thread;
#   threads  on three worker threads at once, which the main thread joins: they compete for the
#            GVL, and in wall mode each thread's waits count where it waits;
#   ractors  on the main thread and two Ractors at once, in parallel (Ruby 3.x; last, as the first
#            Ractor leaves the process in multi-Ractor mode): only the schedule's Ruby methods,
#            RactorWork's ruby_busy and ruby_sleep (Kernel#sleep), since a C extension's methods
#            may not be called from a Ractor; each Ractor measures its own calls and hands its
#            truth back.
# Each runs under each profiler (hakari, stackprof, and rperf where it installs: Ruby 3.4+) in
# cpu and wall mode at 1000 Hz, in one process. A method's profiled time is its cumulative
# time: the weight of every sample whose stack contains it, each sample counted once.
# The score is the mean relative error over the methods (docs/benchmarks.md).
#
#   ruby bench/accuracy.rb                  (a lane's: script/lane 3.4+yjit ruby bench/accuracy.rb)
#   RUBY_MN_THREADS=1 script/lane 3.4 ruby bench/accuracy.rb   (M:N threads, Ruby 3.3 and later)
#
# Under M:N threads a native thread runs several Ruby threads, so its CPU clock read around a call
# holds other threads' CPU too: the CPU truth is then each Ruby thread's own stretches on native
# threads, every one measured at Ruby's thread events (bench/ext/threadcpu).
# Env: HAKARI_BENCH_ACCURACY_SECONDS  wall time per run (default 10)
#      HAKARI_BENCH_CALL_MS           call lengths in ms, comma-separated
#      HAKARI_BENCH_PROFILERS         which profilers (default hakari,stackprof,rperf)
#      HAKARI_BENCH_SCENARIOS         single,threads,ractors (default all three)
#      HAKARI_BENCH_MODES             cpu,wall (default both)
#      HAKARI_BENCH_LOAD              busy processes beside the bench: a number, or "cores" for one
#                                     per core (default 0): a loaded server, the normal case
#      HAKARI_BENCH_VERBOSE=1         every method's figures, not only the summary

require "etc"
require_relative "bench_ext"
require_relative "machine_load"
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
BenchExt.load("cwork")
MN = ENV["RUBY_MN_THREADS"] == "1" && RUBY_VERSION >= "3.3"
if MN
  BenchExt.load("threadcpu")
  ThreadCPU.start
end

$stdout.sync = true # a crash report must come after the tables it interrupted
SECONDS = Float(ENV.fetch("HAKARI_BENCH_ACCURACY_SECONDS", "10"))
HZ = 1000
CPU = Process::CLOCK_THREAD_CPUTIME_ID
WALL = Process::CLOCK_MONOTONIC
# Call lengths in ms: a spread of short and long calls, none a multiple of the 1 ms period, so
# that call boundaries fall at every phase of the timer.
DURATIONS = ENV.fetch("HAKARI_BENCH_CALL_MS", "1.3,2.9,4.7,7.1,11.3").split(",").map { Float(_1) }.freeze
METHODS = %i[ruby_busy c_busy c_sleep_hold c_sleep_release mixed].freeze
WORKERS = 3
VERBOSE = ENV["HAKARI_BENCH_VERBOSE"] == "1"
SCENARIOS = ENV.fetch("HAKARI_BENCH_SCENARIOS", "single,threads,ractors").split(",").map(&:to_sym).freeze
MODES = ENV.fetch("HAKARI_BENCH_MODES", "cpu,wall").split(",").map(&:to_sym).freeze
{"HAKARI_BENCH_SCENARIOS" => [SCENARIOS, %i[single threads ractors]], "HAKARI_BENCH_MODES" => [MODES, %i[cpu wall]]}.each do |name, (got, known)|
  bad = got - known
  abort "accuracy: #{name}=#{ENV[name].inspect}: #{bad.join(", ")} unknown; known: #{known.join(", ")}" unless bad.empty?
end
RACTOR_METHODS = %i[ruby_busy ruby_sleep].freeze
RACTORS = 2

# The peers that load on this Ruby (rperf needs 3.4's APIs)
PROFILERS = ENV.fetch("HAKARI_BENCH_PROFILERS", "hakari,stackprof,rperf").split(",").map(&:to_sym).select do |p|
  next true if p == :hakari

  require(p.to_s)
  true
rescue LoadError => e
  warn "accuracy: #{p} left out on Ruby #{RUBY_VERSION} (#{e.message})"
  false
end.freeze

# What sampling alone leaves uncertain in a method's time: a call of length L (ns) holds
# floor(L / p) or one more of the ticks that come every period p, at the phase it starts at; its
# sampled time is off by p times the share of a tick it missed or gained, whose variance is
# p^2 f (1 - f), f the fraction of a period in L. Summed over the calls (their phases are as good
# as independent: the schedule is shuffled), it is the variance of the method's sampled time
# that no profiler can avoid at this frequency, however exact its weights.
PERIOD_NS = 1e9 / HZ

def sampling_variance(len_ns)
  f = (len_ns / PERIOD_NS) % 1
  PERIOD_NS * PERIOD_NS * f * (1 - f)
end

# Real cost of each method, summed over its calls in every thread (nested calls count for both
# methods, as cumulative time does), and the variance sampling leaves in it (cpu_var, wall_var).
module Truth
  @cpu = Hash.new(0)
  @wall = Hash.new(0)
  @cpu_var = Hash.new(0)
  @wall_var = Hash.new(0)
  @lock = Mutex.new
  class << self
    attr_reader :cpu, :wall, :cpu_var, :wall_var

    def reset = [@cpu, @wall, @cpu_var, @wall_var].each(&:clear)
    # the truths the Ractors measured ([cpu, wall, cpu_var, wall_var] hashes)
    def merge(truths)
      truths.each { |parts| [@cpu, @wall, @cpu_var, @wall_var].zip(parts) { |to, from| from.each { to[_1] += _2 } } }
    end
    # this Ruby thread's CPU: its native thread's clock, or under M:N its own stretches
    def cpu_ns = MN ? ThreadCPU.now_ns : Process.clock_gettime(CPU, :nanosecond)
    def now = [cpu_ns, Process.clock_gettime(WALL, :nanosecond)]

    def add(name, start)
      cpu = cpu_ns - start[0]
      wall = Process.clock_gettime(WALL, :nanosecond) - start[1]
      @lock.synchronize do
        @cpu[name] += cpu
        @wall[name] += wall
        @cpu_var[name] += sampling_variance(cpu)
        @wall_var[name] += sampling_variance(wall)
      end
    end
  end
end

class Work
  def ruby_busy(ms)
    t = Truth.now
    deadline = t[0] + (ms * 1e6).to_i
    while Truth.cpu_ns < deadline
      i = 0
      i += 1 while i < 200 # plain VM instructions between clock reads
    end
    Truth.add(:ruby_busy, t)
  end

  def c_busy(ms)
    t = Truth.now
    CWork.busy(ms)
    Truth.add(:c_busy, t)
  end

  def c_sleep_hold(ms)
    t = Truth.now
    CWork.sleep_hold(ms)
    Truth.add(:c_sleep_hold, t)
  end

  def c_sleep_release(ms)
    t = Truth.now
    CWork.sleep_release(ms)
    Truth.add(:c_sleep_release, t)
  end

  def mixed(ms)
    t = Truth.now
    ruby_busy(ms * 0.3)
    c_busy(ms * 0.3)
    c_sleep_hold(ms * 0.2)
    c_sleep_release(ms * 0.2)
    Truth.add(:mixed, t)
  end

  # Every method at every length once per round, in an order shuffled by a fixed seed, so each
  # method is preceded by all the others across the run.
  def run(rounds, seed = 42)
    rng = Random.new(seed)
    calls = METHODS.product(DURATIONS)
    rounds.times { calls.shuffle(random: rng).each { |m, ms| send(m, ms) } }
  end
end

# The Ractors' work: Ractor-safe, its truth its own (a Ractor may not touch Truth's hashes).
class RactorWork
  def initialize = (@cpu = Hash.new(0); @wall = Hash.new(0); @cpu_var = Hash.new(0); @wall_var = Hash.new(0))
  def now = [Process.clock_gettime(CPU, :nanosecond), Process.clock_gettime(WALL, :nanosecond)]

  def add(name, t)
    cpu = Process.clock_gettime(CPU, :nanosecond) - t[0]
    wall = Process.clock_gettime(WALL, :nanosecond) - t[1]
    @cpu[name] += cpu
    @wall[name] += wall
    @cpu_var[name] += sampling_variance(cpu)
    @wall_var[name] += sampling_variance(wall)
  end

  def ruby_busy(ms)
    t = now
    deadline = t[0] + (ms * 1e6).to_i
    while Process.clock_gettime(CPU, :nanosecond) < deadline
      i = 0
      i += 1 while i < 200
    end
    add(:ruby_busy, t)
  end

  # A Ractor's thread may come back from a sleep on another native thread (Ractors' threads are
  # M:N), whose CPU clock is another: the sleep's CPU cannot be read around it there, and is
  # taken as none (the main Ractor's thread, 1:1, reads a few µs per call).
  def ruby_sleep(ms)
    t = now
    sleep(ms / 1000.0)
    add(:ruby_sleep, t)
    @cpu[:ruby_sleep] = @cpu_var[:ruby_sleep] = 0 if Ractor.current != Ractor.main
  end

  # the schedule's Ruby calls, shuffled by seed as Work#run does; returns [cpu, wall] truths
  def run(rounds, durations, seed)
    rng = Random.new(seed)
    calls = RACTOR_METHODS.product(durations)
    rounds.times { calls.shuffle(random: rng).each { |m, ms| send(m, ms) } }
    [@cpu, @wall, @cpu_var, @wall_var]
  end
end

ROUND_MS = DURATIONS.sum * METHODS.size
ROUNDS = [(SECONDS * 1000 / ROUND_MS).round, 1].max

# The scenario's work, about SECONDS of wall time either way: the threads share the rounds.
def scenario_work(scenario)
  work = Work.new
  case scenario
  when :single then -> { work.run(ROUNDS) }
  when :threads
    rounds = [(ROUNDS * 1.5 / WORKERS).round, 1].max # they overlap: more rounds in the same time
    -> { Array.new(WORKERS) { |i| Thread.new { work.run(rounds, 42 + i) } }.each(&:join) }
  when :ractors
    # the same wall time as single: each of the three runs the Ruby calls' rounds
    rounds = [(ROUNDS * METHODS.size / RACTOR_METHODS.size.to_f).round, 1].max
    lambda do
      take = ->(r) { r.respond_to?(:value) ? r.value : r.take }
      rs = Array.new(RACTORS) { |i| Ractor.new(rounds, DURATIONS, 43 + i) { |n, d, seed| RactorWork.new.run(n, d, seed) } }
      Truth.merge([RactorWork.new.run(rounds, DURATIONS, 42), *rs.map(&take)])
    end
  end
end

def methods_of(scenario) = scenario == :ractors ? RACTOR_METHODS : METHODS
def label_of(name, scenario) = scenario == :ractors ? "RactorWork##{name}" : "Work##{name}"

# Cumulative ns per method, from stacks given as label lists with their weights
def totals_of(stacks, scenario)
  totals = Hash.new(0)
  stacks.each do |labels, weight|
    methods_of(scenario).each { |m| totals[m] += weight if labels.include?(label_of(m, scenario)) }
    totals[:__all] += weight
  end
  totals
end

# hakari's samples: [[frames leaf-first, weight_ns, count, thread], ...]
def hakari_times(profile, scenario)
  totals_of(profile[:samples].map { |frames, weight| [frames.map(&:first).uniq, weight] }, scenario)
end

# rperf's aggregated samples: [[frames [[path, label], ...], weight_ns, thread, label set], ...]
def rperf_times(data, scenario)
  totals_of(data[:aggregated_samples].map { |frames, weight| [frames.map(&:last).uniq, weight] }, scenario)
end

# stackprof's raw stacks: [len, frame ids…, count, len, …], each sample an interval's µs
def stackprof_times(result, scenario)
  names = result[:frames].transform_values { |f| f[:name] }
  raw = result[:raw]
  stacks = []
  i = 0
  while i < raw.size
    len = raw[i]
    stacks << [raw[i + 1, len].map { |id| names[id] }.uniq, raw[i + 1 + len] * result[:interval] * 1000]
    i += len + 2
  end
  totals_of(stacks, scenario)
end

# CPU the hypervisor took from this VM (all cores), in ms: /proc/stat's steal column, in clock
# ticks of 1/100 s. A run during which a profiler's timer thread was kept off its core takes
# its ticks late: its error says so.
def steal_ms = File.read("/proc/stat")[/^cpu (.*)/, 1].split[7].to_i * 10

def profile_run(profiler, mode, scenario)
  run = scenario_work(scenario)
  Truth.reset
  GC.start # so a GC owed by the previous run does not land in this one
  s0 = steal_ms
  case profiler
  when :hakari
    data = Hakari.start(mode: mode, frequency: HZ) { run.call }
    [hakari_times(data, scenario), data.to_h.slice(:sample_count, :dropped_count, :stale_count).merge(steal_ms: steal_ms - s0)]
  when :stackprof
    result = StackProf.run(mode: mode, interval: 1_000_000 / HZ, raw: true) { run.call }
    [stackprof_times(result, scenario), result.slice(:samples, :missed_samples).merge(steal_ms: steal_ms - s0)]
  when :rperf
    Rperf.start(mode: mode, frequency: HZ)
    begin
      run.call
    ensure
      data = Rperf.stop
    end
    [rperf_times(data, scenario), { samples: data[:sampling_count], steal_ms: steal_ms - s0 }]
  end
end

def ms(ns) = format("%9.1f", ns / 1e6)

# The mean relative error over the methods that take time on the mode's clock (a sleep in cpu
# mode is judged by how much it was wrongly given, against the total), and the mean that sampling
# alone gives (each method's error a normal variable of the sampling variance: its absolute
# value's mean is sqrt(2/pi) standard deviations), printing the methods' figures when VERBOSE.
def score(profiler, mode, scenario, got, extra)
  truth = mode == :cpu ? Truth.cpu : Truth.wall
  var = mode == :cpu ? Truth.cpu_var : Truth.wall_var
  total = truth.values_at(*(methods_of(scenario) - %i[mixed])).sum
  if VERBOSE
    puts "\n#{profiler} #{mode} #{scenario} (#{extra.map { |k, v| "#{k}=#{v}" }.join(' ')})"
    puts format("  %-16s %9s %9s %9s  %-8s %s", "method", "truth ms", "prof. ms", "diff ms", "error", "sampling alone (1 sd)")
  end
  rel = []
  noise = []
  methods_of(scenario).each do |m|
    t = truth[m]
    g = got[m]
    if t < 0.05 * Truth.wall[m]
      err = format("abs %.1f ms = %.2f%% of total (truth ~0)", (g - t) / 1e6, 100.0 * (g - t).abs / total)
    else
      rel << (g - t).abs.fdiv(t)
      noise << Math.sqrt(var[m]) / t
      err = format("%+.2f%%   ±%.2f%%", 100.0 * (g - t) / t, 100 * noise.last)
    end
    puts format("  %-16s %s %s %s  %s", m, ms(t), ms(g), ms(g - t), err) if VERBOSE
  end
  [rel.sum / rel.size, Math.sqrt(2 / Math::PI) * noise.sum / noise.size]
end

load = MachineLoad.start
yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? "+YJIT" : ""
mn = MN ? " (M:N threads: CPU truth from each thread's stretches)" : ""
puts "accuracy: ruby #{RUBY_VERSION}#{yjit}#{mn}, #{HZ} Hz, #{PROFILERS.join('/')}, call lengths #{DURATIONS.join('/')} ms, " \
     "#{ROUNDS} rounds of #{ROUND_MS.round} ms per single run, #{WORKERS} workers in threads, " \
     "#{MachineLoad.describe(load)}"

# warm-up: first calls, inline caches and the JIT are not the subject
Work.new.run(1)
summary = []
SCENARIOS.each do |scenario|
  PROFILERS.each do |profiler|
    # stackprof is not Ractor-safe: its handler's postponed job corrupted the heap with Ractors
    # running (glibc: "realloc(): invalid next size")
    next puts("accuracy: stackprof left out of the ractors scenario (not Ractor-safe)") if scenario == :ractors && profiler == :stackprof

    MODES.each do |mode|
      got, extra = profile_run(profiler, mode, scenario)
      summary << [scenario, profiler, mode, *score(profiler, mode, scenario, got, extra), extra[:steal_ms]]
    end
  end
end
MachineLoad.stop

target = load.zero? ? 1 : 2
puts "\nmean relative error per method (target: hakari <= #{target} % in both modes, every scenario; " \
     "sampling alone: the mean error a profiler with exact weights would expect at #{HZ} Hz in this run)"
summary.each do |scenario, profiler, mode, err, noise, steal|
  puts format("  %-8s %-10s %-5s %6.2f %%   (sampling alone %.2f %%; %d ms stolen)", scenario, profiler, mode, 100 * err, 100 * noise, steal)
end
