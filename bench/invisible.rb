# frozen_string_literal: true

# Invisible methods: the share of a loop's time that a profiler gives a method the VM runs
# through a specialized instruction (String#=~ as opt_regexpmatch2, Hash#[] as opt_aref,
# String#== as opt_eq), against that method's measured cost.
#
# Truth: each loop is timed unprofiled (thread CPU time, median of ROUNDS runs) with the
# operation and without it; the operation's share of the loop is (with - without) / with. The
# loop without it keeps the store of its result and the load of one operand (`v = k` for
# `v = h[k]`), so the difference is the instruction and one local variable's load.
# Profiled: the loop with the operation under hakari, cpu mode, 1000 Hz, with synthesized
# frames (the default) and with synthesize: false; the share is the self time of samples whose
# leaf is the method, over the loop's whole time. The error is in points of share.
#
# Scenarios: talk (the example of the "make profilers tell the truth" talk: a block that does
# `a += 1` and a heavy `str =~ re`), hash (Hash#[] with 200-character String keys in a while
# loop), string_eq (String#== of equal 4000-character strings in a while loop).
#
#   ruby bench/invisible.rb           (a lane's: script/lane 3.4 ruby bench/invisible.rb)
# Env: HAKARI_BENCH_ROUNDS   unprofiled runs per variant (default 5)
#      HAKARI_BENCH_SCALE    multiplies every loop's length (default 1.0)
#      HAKARI_BENCH_LOAD     busy processes beside the bench: a number, or "cores" for one per core
#                            (default 0). A preempted thread is off its core at some ticks: cpu
#                            mode must not take those for blocks (docs/architecture.md)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require_relative "machine_load"

$stdout.sync = true
ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "5"))
SCALE = Float(ENV.fetch("HAKARI_BENCH_SCALE", "1.0"))
CPU = Process::CLOCK_THREAD_CPUTIME_ID
TARGET_POINTS = 3.0

module Loops
  RE = /([a-z]+)(\d)\s/
  STR = "abc123" * 1000
  KEYS = Array.new(1000) { |i| format("%0200d", i) }
  HASH = KEYS.to_h { |k| [k, k.size] }
  KEY = KEYS[500].dup # not the Hash's own key object: the lookup hashes and compares it
  LEFT = "x" * 4000
  RIGHT = "x" * 4000

  module_function

  def talk(n)
    a = 0
    str = STR
    n.times do
      a += 1
      str =~ RE
    end
    a
  end

  def talk_without(n)
    a = 0
    n.times do
      a += 1
    end
    a
  end

  def hash(n)
    h = HASH
    k = KEY
    i = 0
    v = nil
    while i < n
      v = h[k]
      i += 1
    end
    v
  end

  # the same loop less the lookup and one of its operands: v = k keeps the other's load and the store
  def hash_without(n)
    k = KEY
    i = 0
    v = nil
    while i < n
      v = k
      i += 1
    end
    v
  end

  def string_eq(n)
    l = LEFT
    r = RIGHT
    i = 0
    e = nil
    while i < n
      e = l == r
      i += 1
    end
    e
  end

  def string_eq_without(n)
    r = RIGHT
    i = 0
    e = nil
    while i < n
      e = r
      i += 1
    end
    e
  end
end

# scenario => [iterations, the method whose frame is synthesized]
SCENARIOS = {
  talk: [(6_000 * SCALE).to_i, "String#=~"],
  hash: [(12_000_000 * SCALE).to_i, "Hash#[]"],
  string_eq: [(15_000_000 * SCALE).to_i, "String#=="],
}.freeze

def cpu_time
  t0 = Process.clock_gettime(CPU, :nanosecond)
  yield
  Process.clock_gettime(CPU, :nanosecond) - t0
end

def median(xs) = xs.sort[xs.size / 2]

# the operation's share of the loop, from unprofiled runs of both variants, alternated
def truth(name, n)
  with = []
  without = []
  ROUNDS.times do
    with << cpu_time { Loops.public_send(name, n) }
    without << cpu_time { Loops.public_send(:"#{name}_without", n) }
  end
  w = median(with)
  [(w - median(without)).fdiv(w), w]
end

# the method's self time over the loop's time, in one profiled run
def profiled_share(name, n, method, synthesize)
  profile = Hakari.start(mode: :cpu, frequency: 1000, synthesize: synthesize) { Loops.public_send(name, n) }
  loop_label = "Loops.#{name}"
  total = self_time = 0
  profile[:samples].each do |frames, weight, _count, _thread|
    next unless frames.any? { |f| f[0] == loop_label }

    total += weight
    self_time += weight if frames[0][0] == method
  end
  [total.zero? ? 0.0 : self_time.fdiv(total), profile[:synthesized]]
end

def pts(x) = format("%5.1f", 100.0 * x)

yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?
load = MachineLoad.start
puts "# invisible methods: Ruby #{RUBY_VERSION}#{yjit ? ' +YJIT' : ''}, #{ROUNDS} unprofiled rounds per variant, " \
     "cpu mode 1000 Hz, #{MachineLoad.describe(load)}; shares in % of the loop's CPU time, errors in points " \
     "(target <= #{TARGET_POINTS})"
puts format("%-10s %-10s %8s %8s %9s %8s %9s  %s", "scenario", "method", "loop ms", "truth", "hakari", "error",
            "no synth", "synthesized")
worst = 0.0
SCENARIOS.each do |name, (n, method)|
  Loops.public_send(name, n / 10) # warm up (and let YJIT compile, where it runs)
  share, loop_ns = truth(name, n)
  on, how = profiled_share(name, n, method, true)
  off, = profiled_share(name, n, method, false)
  err = (on - share).abs
  worst = [worst, err].max
  puts format("%-10s %-10s %8.0f %7s%% %8s%% %8s %8s%%  %s", name, method, loop_ns / 1e6, pts(share), pts(on),
              pts(err), pts(off), how)
end
MachineLoad.stop
puts format("worst error with synthesized frames: %.1f points (%s)", 100.0 * worst,
            100.0 * worst <= TARGET_POINTS ? "met" : "NOT met")
