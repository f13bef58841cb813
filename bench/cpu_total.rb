# frozen_string_literal: true

# Is every thread's CPU in a cpu-mode profile? For each scenario: the CPU the program's own
# threads used (the process's CPU clock over the run, less hakari's worker thread's CPU) beside
# the profile's weight in the Ruby threads' samples, the weight of its [native threads] sample
# (the process's CPU no Ruby thread's samples hold: a thread's last steps after it ends, native
# threads that run no Ruby), and the shares of both. The target is a profile whose Ruby threads'
# samples hold at least 95 % of that CPU (docs/benchmarks.md).
#
#   ruby bench/cpu_total.rb                 (any lane: script/lane 3.4+yjit ruby bench/cpu_total.rb)
#   RUBY_MN_THREADS=1 script/lane 3.4 ruby bench/cpu_total.rb   (M:N threads, Ruby 3.3 and later)
# Env: HAKARI_BENCH_ROUNDS (runs of each scenario, default 3)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"

ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "3"))

def loop_work(n) = n.times { |i| i * i }

SCENARIOS = {
  # 500 short threads, 25 alive at a time, each a small loop (well under a period each on a fast Ruby)
  "500 short threads" => lambda do
    20.times { Array.new(25) { Thread.new { loop_work(2_000) } }.each(&:join) }
  end,
  # the same while another thread runs GC.compact over and over
  "short threads + GC.compact thread" => lambda do
    gc = Thread.new { 40.times { GC.compact } }
    20.times { Array.new(25) { Thread.new { loop_work(2_000) } }.each(&:join) }
    gc.join
  end,
  # 30 threads that each loop long enough for many samples, competing for the GVL
  "30 competing threads" => lambda do
    Array.new(30) { Thread.new { loop_work(200_000) } }.each(&:join)
  end,
  # eight threads looping between short sleeps: under M:N threads (RUBY_MN_THREADS=1, 3.3+) they
  # share native threads, whose CPU clocks hold several Ruby threads' CPU each
  "8 threads, work and sleeps" => lambda do
    Array.new(8) { Thread.new { 10.times { loop_work(30_000); sleep 0.001 } } }.each(&:join)
  end,
  # one thread, for scale
  "one thread" => -> { loop_work(3_000_000) },
}.freeze

def measure(work)
  cpu0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond)
  data = Hakari.start(mode: :cpu, frequency: 1000) { work.call }
  used = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond) - cpu0 - data[:timer_cpu_ns]
  [used, data[:samples].sum { |_, w| w } - data[:native_cpu_ns], data[:native_cpu_ns], data[:thread_count]]
end

mn = RUBY_VERSION >= "3.3" && ENV["RUBY_MN_THREADS"].to_i.positive?
printf "%s%s, cpu mode, 1000 Hz, %d rounds each\n", RUBY_DESCRIPTION, mn ? ", M:N threads" : "", ROUNDS
printf "%-36s %12s %12s %12s %8s %8s %8s\n", "scenario", "program CPU", "in threads", "[native]", "share", "+native", "threads"
SCENARIOS.each do |name, work|
  work.call # warm up: first-call costs and the JIT are not the subject
  ROUNDS.times do
    used, in_threads, native, threads = measure(work)
    printf "%-36s %9.1f ms %9.1f ms %9.1f ms %7.1f %% %7.1f %% %8d\n", name, used / 1e6, in_threads / 1e6,
           native / 1e6, 100.0 * in_threads / used, 100.0 * (in_threads + native) / used, threads
  end
end
