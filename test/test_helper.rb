# frozen_string_literal: true

require "minitest/autorun"
require "tmpdir"
require "hakari"

# The load path of the Ruby processes the engine's tests start: lib/, or in script/test's
# sanitizer pass that pass's build first (a path list, as -I takes it)
ENGINE_LIB = ENV.fetch("HAKARI_TEST_LIB", File.expand_path("../lib", __dir__))

# The Rubies whose control-frame layout the engine knows (ext/hakari/stack_walk/vm_layout_*.h):
# there it reads other threads' stacks and corrects a late job's sample. On any other Ruby
# (4.0, say) the tests that need it say so and check the rb_profile_frames path instead.
LAYOUT_KNOWN = %w[3.1 3.3 3.4].include?(RUBY_VERSION[/\A\d+\.\d+/])

# Workloads shared by the Ruby tests. Each one is deterministic and short.
module Workloads
  module_function

  def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)

  # fib(22) again and again for about `seconds` of this thread's CPU, as many calls on a fast
  # Ruby (YJIT) as on a slow one. The count comes from a rate measured once, at load: a loop
  # that reads its own CPU clock between calls, as cpu mode's worker reads that same clock, draws
  # the ticks to those reads on a busy machine: 2.4 % of the samples there for 0.4 % of the
  # time, measured on 3.4 + YJIT.
  def fib_for(seconds)
    (seconds * FIB_PER_CPU_SECOND).ceil.times { fib(22) }
  end

  # calls of fib(22) per second of this thread's CPU (after a first call, which YJIT compiles)
  def fib_rate
    clock = Process::CLOCK_THREAD_CPUTIME_ID
    fib(22)
    t0 = Process.clock_gettime(clock)
    calls = 0
    calls += 1 while fib(22) && Process.clock_gettime(clock) - t0 < 0.03
    calls / (Process.clock_gettime(clock) - t0)
  end
  FIB_PER_CPU_SECOND = fib_rate

  # spins on this thread's CPU clock for `seconds`
  def spin(seconds)
    stop = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + seconds
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < stop
    x
  end

  def recurse(depth, &block) = depth.zero? ? block.call : recurse(depth - 1, &block)

  # the calling thread's CPU time plus its time ready to run but waiting for a core (Linux's
  # schedstat run delay), in ns
  def on_cpu_or_ready_ns
    delay = File.read("/proc/thread-self/schedstat").split[1].to_i
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) + delay
  end

  # how long the block took on the monotonic clock, in ns
  def elapsed_ns
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    yield
    Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0
  end
end

module ProfileHelpers
  # cumulative weight of frames whose label matches, counting each sample once
  def cumulative(data, label)
    data[:samples].sum { |frames, weight| frames.any? { |f| label === f[0] } ? weight : 0 }
  end

  def total(data) = data[:samples].sum { |_, weight| weight }
end

# Ruby 3.4 counts each object a compaction moves as allocated: the block's profile is taken with
# 50 000 objects and more to move (kept with holes between them), and the compaction in the
# block is checked to have moved them
module CompactionHelpers
  def with_objects_to_move
    kept = Array.new(100_000) { |i| [Object.new, "s" * (i % 90), { a: i }] }.flatten.each_slice(2).map(&:first)
    GC.start
    profile = yield
    moved = GC.latest_compact_info[:moved].values.sum
    assert_operator moved, :>, 50_000, "the compaction moved #{moved} of #{kept.size} kept objects"
    profile
  end
end
