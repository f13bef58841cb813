# frozen_string_literal: true

# Wall mode with threads that wait: at every tick the job also samples each thread that is not
# running (sampler.c sample_waiting_threads). This prints what that costs the running thread,
# with 0, 16 and 64 threads parked in Queue#pop: the job's mean time, and the time a fixed piece
# of work (fib) takes profiled against unprofiled (medians of ROUNDS runs each, alternated,
# timed inside the session).
#
#   ruby bench/wall_threads.rb
# Env: HAKARI_BENCH_ROUNDS (default 15)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"

ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "15"))

def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)
def now_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
def median(xs) = xs.sort[xs.size / 2]

def timed
  t0 = now_ns
  yield
  now_ns - t0
end

puts "wall mode, 1000 Hz, fib(30) on the main thread; idle threads parked in Queue#pop"
puts format("%-6s %12s %12s %10s %14s", "idle", "plain ms", "hakari ms", "slowdown", "job ns (mean)")
[0, 16, 64].each do |idle|
  queue = Queue.new
  parked = Array.new(idle) { Thread.new { queue.pop } }
  Thread.pass until parked.all? { |t| t.status == "sleep" }
  plain = []
  profiled = []
  jobs = []
  ROUNDS.times do
    plain << timed { fib(30) }
    # timed inside the session: start and stop (about 1 ms) are not the steady state
    data = Hakari.start(mode: :wall) { profiled << timed { fib(30) } }
    c = data.counters
    jobs << c[:sampling_time_ns].fdiv([c[:sampling_count], 1].max)
  end
  queue.close
  parked.each(&:join)
  p, h = median(plain), median(profiled)
  puts format("%-6d %12.1f %12.1f %9.2f%% %14.0f", idle, p / 1e6, h / 1e6, (h - p) * 100.0 / p, median(jobs))
end
