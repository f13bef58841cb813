# frozen_string_literal: true

# Ground truth for the states: does a wall-mode profile give [GVL blocked], [GVL wait] and the
# GC ([GC marking] + [GC sweeping]) the time they really took? Each scenario measures its own
# truth around the calls, on the monotonic clock:
#   contended  two threads that each spin 0.3 s of CPU while the main thread waits in
#              Queue#pop for the last one to finish: each worker waits for the GVL while the
#              other runs (its wall time less its CPU); the main thread is blocked until the
#              last worker pushes, then waits to take the GVL back until pop returns (a
#              worker's time waiting for a core, its schedstat run delay, is no GVL wait: on a
#              loaded machine the OS preempts the thread that holds the GVL);
#   blocked    one thread sleeps 0.3 s, one reads a pipe until the main thread, after its own
#              0.35 s sleep, writes to it;
#   gc         GC.start 30 times over a heap of 300 000 live objects (no allocation between
#              them, so no other GC): the time inside GC.start, in wall and in cpu mode;
#   alloc      40 rounds of 100 000 short-lived strings, in cpu mode: minor GCs and lazy sweeps
#              run in small steps inside the allocations. Truth is GC.total_time (Ruby's own
#              timing of each step on the process CPU clock), less the share of hakari's worker
#              thread's CPU that fell in it (its CPU is in that clock too).
# The score per category is |profiled - truth| / truth; the target is 2 % (docs/benchmarks.md).
# Where Ruby has no GVL events (3.1) waits for the GVL count as blocked: the contended
# scenario then compares blocked + wait with the truth's.
#
#   ruby bench/gvl_gc.rb                   (a lane's: script/lane 3.4+yjit ruby bench/gvl_gc.rb)
# Env: HAKARI_BENCH_ROUNDS (runs of each scenario, default 3), HAKARI_BENCH_LOAD (busy processes
# beside it: a number, or "cores" for one per core)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require_relative "machine_load"

$stdout.sync = true
ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "3"))
MONO = Process::CLOCK_MONOTONIC
CPU = Process::CLOCK_THREAD_CPUTIME_ID
STATES = { "[GVL blocked]" => :blocked, "[GVL wait]" => :wait, "[GC marking]" => :gc, "[GC sweeping]" => :gc }.freeze

def now = Process.clock_gettime(MONO, :nanosecond)
def cpu_now = Process.clock_gettime(CPU, :nanosecond)

# the calling thread's time ready to run but waiting for a core (Linux's schedstat), in ns
def run_delay = File.read("/proc/thread-self/schedstat").split[1].to_i

def spin(seconds)
  stop = cpu_now + (seconds * 1e9).to_i
  x = 0
  x += 1 while cpu_now < stop
end

# the profile's time by state
def profiled(data)
  data[:samples].each_with_object(Hash.new(0)) { |(frames, w), h| h[STATES.fetch(frames.first[0], :running)] += w }
end

def contended(mode)
  truth = Hash.new(0)
  done = Queue.new
  lock = Mutex.new
  left = 2
  pushed = nil
  data = Hakari.start(mode: mode) do
    workers = Array.new(2) do
      w0 = now # a thread waits for the GVL from its creation on
      Thread.new do
        c0 = cpu_now
        d0 = run_delay
        spin(0.3)
        lock.synchronize do
          # off its CPU with the GVL in hand (the OS ran another process on its core) is not
          # a wait for the GVL: its run delay goes too
          truth[:wait] += now - w0 - (cpu_now - c0) - (run_delay - d0)
          if (left -= 1).zero?
            pushed = now
            done << :done
          end
        end
      end
    end
    p0 = now
    done.pop
    p1 = now
    truth[:blocked] += pushed - p0
    truth[:wait] += p1 - pushed # the main thread takes the GVL back
    workers.each(&:join)
  end
  [truth, profiled(data)]
end

def blocked(mode)
  truth = Hash.new(0)
  reader, writer = IO.pipe
  lock = Mutex.new
  timed = ->(key) { t0 = now; yield; lock.synchronize { truth[key] += now - t0 } }
  data = Hakari.start(mode: mode) do
    sleeper = Thread.new { t0 = now; sleep 0.3; lock.synchronize { truth[:blocked] += now - t0 } }
    pipe = Thread.new { t0 = now; reader.read(1); lock.synchronize { truth[:blocked] += now - t0 } }
    t0 = now
    sleep 0.35
    lock.synchronize { truth[:blocked] += now - t0 }
    writer.write("x")
    [sleeper, pipe].each(&:join)
  end
  [truth, profiled(data)]
ensure
  [reader, writer].each(&:close)
end

KEEP = Array.new(300_000) { |i| [i, "x#{i}"] } # live objects for every GC to mark

def gc(mode)
  truth = Hash.new(0)
  clock = mode == :cpu ? CPU : MONO
  GC.start
  data = Hakari.start(mode: mode) do
    30.times do
      t0 = Process.clock_gettime(clock, :nanosecond)
      GC.start
      truth[:gc] += Process.clock_gettime(clock, :nanosecond) - t0
    end
  end
  [truth, profiled(data)]
end

def alloc(mode)
  GC.start
  before = GC.total_time
  data = Hakari.start(mode: mode) { 40.times { Array.new(100_000) { |i| "s#{i}" } } }
  gc_ns = GC.total_time - before
  worker = data[:timer_cpu_ns] * gc_ns / data[:duration_ns] # spread evenly over the run
  [{ gc: gc_ns - worker }, profiled(data)]
end

gvl_events = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3")
gc_events = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2") # the GC is not timed before 3.2
yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? "+YJIT" : ""
load = MachineLoad.start
puts "gvl_gc: ruby #{RUBY_VERSION}#{yjit}, wall mode (gc also in cpu mode), #{ROUNDS} rounds, #{MachineLoad.describe(load)}" \
     "#{gvl_events ? '' : ' (no GVL events: a wait for the GVL counts as blocked)'}"
puts format("  %-10s %-4s %-8s %10s %10s %8s", "scenario", "mode", "state", "truth ms", "prof. ms", "error")
worst = Hash.new(0.0)
puts "  (the GC is not timed on this Ruby: its GC hooks would slow every allocation)" unless gc_events
[[:contended, :wall], [:blocked, :wall], [:gc, :wall], [:gc, :cpu], [:alloc, :cpu]].each do |scenario, mode|
  next if %i[gc alloc].include?(scenario) && !gc_events
  ROUNDS.times do
    truth, got = send(scenario, mode)
    if !gvl_events && truth.key?(:wait)
      truth = truth.merge(blocked: truth[:blocked] + truth[:wait]).tap { _1.delete(:wait) }
      got = got.merge(blocked: got[:blocked] + got[:wait]).tap { _1.delete(:wait) }
    end
    truth.each do |state, t|
      err = (got[state] - t).abs.fdiv(t)
      worst[[scenario, mode, state]] = [worst[[scenario, mode, state]], err].max
      puts format("  %-10s %-4s %-8s %10.1f %10.1f %7.2f%%", scenario, mode, state, t / 1e6, got[state] / 1e6, 100 * err)
    end
  end
end
puts "\nworst error per state (target <= 2 %)"
worst.each { |(s, m, state), e| puts format("  %-10s %-4s %-8s %6.2f %%", s, m, state, 100 * e) }
