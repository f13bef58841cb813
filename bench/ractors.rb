# frozen_string_literal: true

# Ractors: what profiling costs a program whose main thread and two Ractors do Ruby work in
# parallel, and how much of its CPU each profiler's samples hold.
#
# One process runs every setup once per round, in a shuffled order (unprofiled; hakari cpu and
# wall at 1000 Hz; rperf cpu at 1000 Hz where it installs: Ruby 3.4+), the workload timed while
# the profiler runs (its start and stop apart). The slowdown is the median of each round's ratio
# to the round's unprofiled run, with its interquartile range and 95 % confidence interval
# (paired_stats.rb); wall time and the process's CPU time both. "seen" is the share of the
# process's CPU during the workload (less the profiler's own threads') that the samples hold
# outside [native threads], in cpu mode; "in Ractors" the part of it in the Ractors' own
# `ractor`-labelled samples (a third of the work runs on the main thread).
#
#   script/lane 3.4 ruby bench/ractors.rb
# Env: HAKARI_BENCH_ROUNDS (rounds, default 31)

$VERBOSE = nil # Ruby's "Ractor is experimental"
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require_relative "bench_ext"
require_relative "paired_stats"

ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "31"))
RPERF = BenchExt.peer?("rperf")
SETUPS = (%w[unprofiled hakari-cpu hakari-wall] + (RPERF ? %w[rperf-cpu] : [])).freeze
WORK = 2_000_000 # iterations per Ractor and on the main thread: about 100 ms each on this VM

def ractor_work(n) = n.times { |i| i * i }
def main_work(n) = n.times { |i| i * i }

def workload
  take = ->(r) { r.respond_to?(:value) ? r.value : r.take }
  rs = Array.new(2) { Ractor.new(WORK) { |n| ractor_work(n) } }
  main_work(WORK)
  rs.each(&take)
end

def clocks = [Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond),
              Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID, :nanosecond)]

# [wall ns, CPU ns, profile's CPU outside [native threads] or nil, of it the Ractors']
def run(setup)
  mode = setup.end_with?("-wall") ? :wall : :cpu
  case setup
  when "unprofiled"
    a = clocks
    workload
    b = clocks
    [b[0] - a[0], b[1] - a[1], nil, nil]
  when /\Ahakari/
    Hakari.start(mode: mode, frequency: 1000)
    a = clocks
    workload
    b = clocks
    data = Hakari.stop
    seen = data[:samples].reject { _4.zero? }.sum { _2 }
    [b[0] - a[0], b[1] - a[1] - data[:timer_cpu_ns], mode == :cpu ? seen : nil,
     data.label_values("ractor").reject { |k, _| k.nil? }.sum { _2 }]
  when "rperf-cpu"
    Rperf.start(mode: :cpu, frequency: 1000)
    a = clocks
    workload
    b = clocks
    data = Rperf.stop
    [b[0] - a[0], b[1] - a[1], data[:aggregated_samples].sum { _2 }, nil]
  end
end

puts "ractors: ruby #{RUBY_VERSION}#{defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ' +YJIT' : ''}, " \
     "main thread + 2 Ractors x #{WORK} iterations, #{ROUNDS} rounds, #{SETUPS.join('/')}"
2.times { SETUPS.each { run(_1) } } # warm-up: the first Ractors, first calls and the JIT
results = Hash.new { |h, k| h[k] = [] }
rng = Random.new(7)
ROUNDS.times { SETUPS.shuffle(random: rng).each { |s| results[s] << run(s) } }

base = results["unprofiled"]
puts format("\n  %-12s %10s %10s  %-28s %-28s %7s %10s", "setup", "wall ms", "CPU ms", "wall slowdown (IQR; 95% CI)",
            "CPU slowdown (IQR; 95% CI)", "seen", "in Ractors")
SETUPS.each do |s|
  rows = results[s]
  wall = PairedStats.median(rows.map { _1[0] }) / 1e6
  cpu = PairedStats.median(rows.map { _1[1] }) / 1e6
  slow = ->(i) do
    next "" if s == "unprofiled"

    r = rows.each_index.map { |k| rows[k][i].fdiv(base[k][i]) }
    "#{PairedStats.pct(PairedStats.median(r))} (#{PairedStats.iqr(r)}; #{PairedStats.median_ci(r)})"
  end
  seen = rows.first[2] ? format("%6.1f%%", 100.0 * PairedStats.median(rows.map { _1[2].fdiv(_1[1]) })) : ""
  ractors = rows.first[3] && rows.first[2] ? format("%9.1f%%", 100.0 * PairedStats.median(rows.map { _1[3].fdiv(_1[1]) })) : ""
  puts format("  %-12s %10.1f %10.1f  %-28s %-28s %7s %10s", s, wall, cpu, slow[0], slow[1], seen, ractors)
end
