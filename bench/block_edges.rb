# frozen_string_literal: true

# CPU at the edges of blocks: a cpu-mode profiler ticks when a period of the thread's CPU ends,
# but looks a little later (a timer's, a thread's wake-up); a thread that blocked meanwhile has
# the period's sample taken in the call that blocked, which used next to none of it. This bench
# loops over a busy method and a blocking one, each measured around every call on the thread's
# CPU clock, and prints what each profiler gives the blocking call beyond its own CPU, per call,
# and the busy method's error.
#
#   ruby bench/block_edges.rb               (a lane's: script/lane 3.4 ruby bench/block_edges.rb)
#
# Pairs: ruby_busy (a Ruby loop) or c_busy (a C loop holding the GVL), 2 ms of CPU, then a 2 ms
# C sleep that holds the GVL (sleep_hold) or releases it (sleep_release); 500 of each, 1000 Hz.
# Env: HAKARI_BENCH_PROFILERS (default hakari,stackprof,rperf), HAKARI_BENCH_ROUNDS (500)

require_relative "bench_ext"
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
BenchExt.load("cwork")

CPU = Process::CLOCK_THREAD_CPUTIME_ID
ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "500"))
PROFILERS = ENV.fetch("HAKARI_BENCH_PROFILERS", "hakari,stackprof,rperf").split(",").select do |p|
  p == "hakari" || BenchExt.peer?(p)
end

# The pairs' methods, each adding its CPU to TRUTH around every call.
module Edges
  TRUTH = Hash.new(0)

  module_function

  def timed(name)
    t = Process.clock_gettime(CPU, :nanosecond)
    yield
    TRUTH[name] += Process.clock_gettime(CPU, :nanosecond) - t
  end

  def ruby_busy(ms)
    timed(:ruby_busy) do
      deadline = Process.clock_gettime(CPU, :nanosecond) + (ms * 1e6).to_i
      while Process.clock_gettime(CPU, :nanosecond) < deadline
        i = 0
        i += 1 while i < 200
      end
    end
  end

  def c_busy(ms) = timed(:c_busy) { CWork.busy(ms) }
  def sleep_hold(ms) = timed(:sleep_hold) { CWork.sleep_hold(ms) }
  def sleep_release(ms) = timed(:sleep_release) { CWork.sleep_release(ms) }
end

# CPU ns per method name from [[method names, weight ns], ...]
def totals(stacks)
  stacks.each_with_object(Hash.new(0)) do |(names, weight), t|
    %i[ruby_busy c_busy sleep_hold sleep_release].each { |m| t[m] += weight if names.any? { _1.end_with?(".#{m}", "##{m}") } }
  end
end

def profile(profiler, &work)
  case profiler
  when "hakari"
    data = Hakari.start(mode: :cpu, frequency: 1000, &work)
    totals(data[:samples].map { |frames, weight| [frames.map(&:first), weight] })
  when "stackprof"
    r = StackProf.run(mode: :cpu, interval: 1000, raw: true, &work)
    names = r[:frames].transform_values { _1[:name] }
    stacks = []
    i = 0
    while i < r[:raw].size
      len = r[:raw][i]
      stacks << [r[:raw][i + 1, len].map { names[_1] }, r[:raw][i + 1 + len] * 1_000_000]
      i += len + 2
    end
    totals(stacks)
  when "rperf"
    Rperf.start(mode: :cpu, frequency: 1000)
    begin
      work.call
    ensure
      data = Rperf.stop
    end
    totals(data[:aggregated_samples].map { |frames, weight| [frames.map(&:last), weight] })
  end
end

puts "block_edges: ruby #{RUBY_VERSION}#{defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ' +YJIT' : ''}, " \
     "#{ROUNDS} rounds of 2 ms busy + 2 ms C sleep, cpu mode at 1000 Hz"
puts format("%-10s %-28s %12s %22s", "profiler", "pair", "busy error", "sleep's extra / call")
PROFILERS.each do |profiler|
  %i[ruby_busy c_busy].product(%i[sleep_hold sleep_release]).each do |busy, blocking|
    Edges::TRUTH.clear
    GC.start
    got = profile(profiler) { ROUNDS.times { Edges.send(busy, 2); Edges.send(blocking, 2) } }
    truth = Edges::TRUTH
    error = 100.0 * (got[busy] - truth[busy]) / truth[busy]
    extra_us = (got[blocking] - truth[blocking]) / 1e3 / ROUNDS
    puts format("%-10s %-28s %+11.2f%% %19.1f µs", profiler, "#{busy} + #{blocking}", error, extra_us)
  end
end
