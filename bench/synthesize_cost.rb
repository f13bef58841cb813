# frozen_string_literal: true

# What synthesized frames cost (README, "Invisible methods made visible"): the same cpu-mode
# profile at 1000 Hz with them (the default) and with synthesize: false, beside an unprofiled
# run, every setup once per round in a shuffled order, in one process, on two workloads:
#   kramdown   a 200-section document to HTML (mostly method calls: few ticks land in a
#              specialized instruction);
#   loop       a while loop of Integer and Hash operations (nearly every tick does, and the
#              worker reads the receiver's class at each).
# The reads are made by hakari's worker thread, not the program's: the program's wall time
# should not move, the worker's CPU does. It prints each setup's slowdown (wall time, and the
# process's CPU time, the worker's included) against the unprofiled run of the same round, the
# cost of synthesis (on / off, paired by round, median and 95 % CI), and the worker's CPU per
# tick with and without.
#
#   ruby bench/synthesize_cost.rb          (any lane: script/lane 3.4 ruby bench/synthesize_cost.rb)
# Env: HAKARI_BENCH_ROUNDS (default 101)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require "kramdown"
require_relative "paired_stats"
include PairedStats

ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "101"))
SETUPS = %w[unprofiled synthesize no-synthesize].freeze
DOC = (1..200).map { |i| "## Part #{i}\n\nSome *text*, `code` and a [link](http://x/#{i}).\n\n- a\n- b\n\n" }.join
TABLE = (0...64).to_h { |i| ["key#{i}", i] }
KEYS = TABLE.keys.freeze

def kramdown = Kramdown::Document.new(DOC).to_html

def loop_work
  i = 0
  sum = 0
  while i < 400_000
    sum += TABLE[KEYS[i & 63]] * 3
    i += 1
  end
  sum
end

WORKLOADS = { "kramdown" => :kramdown, "loop" => :loop_work }.freeze
CPU = Process::CLOCK_PROCESS_CPUTIME_ID
MONO = Process::CLOCK_MONOTONIC

# [wall s, process CPU s, worker ns per tick or nil]
def run(setup, work)
  GC.start
  Hakari.start(mode: :cpu, synthesize: setup == "synthesize") unless setup == "unprofiled"
  w0 = Process.clock_gettime(MONO)
  c0 = Process.clock_gettime(CPU)
  send(work)
  c1 = Process.clock_gettime(CPU)
  w1 = Process.clock_gettime(MONO)
  per_tick = nil
  unless setup == "unprofiled"
    p = Hakari.stop
    per_tick = p[:timer_cpu_ns].fdiv([p[:trigger_count], 1].max)
  end
  [w1 - w0, c1 - c0, per_tick]
end

puts "# synthesized frames' cost: Ruby #{RUBY_DESCRIPTION[/\A\S+ \S+/]}#{defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ' +YJIT' : ''}, " \
     "cpu mode 1000 Hz, #{ROUNDS} rounds"
WORKLOADS.each do |name, work|
  3.times { SETUPS.each { |s| run(s, work) } } # warm up
  res = Hash.new { |h, k| h[k] = [] }
  ROUNDS.times { SETUPS.shuffle.each { |s| res[s] << run(s, work) } }
  puts "\n#{name}:"
  %w[synthesize no-synthesize].each do |s|
    wall = res[s].zip(res["unprofiled"]).map { |a, b| a[0] / b[0] }
    cpu = res[s].zip(res["unprofiled"]).map { |a, b| a[1] / b[1] }
    puts format("  %-14s wall %s (IQR %s), process CPU %s (IQR %s), worker %.1f us per tick", s, pct(median(wall)),
                iqr(wall), pct(median(cpu)), iqr(cpu), median(res[s].map { _1[2] }) / 1000.0)
  end
  wall = res["synthesize"].zip(res["no-synthesize"]).map { |a, b| a[0] / b[0] }
  cpu = res["synthesize"].zip(res["no-synthesize"]).map { |a, b| a[1] / b[1] }
  puts format("  synthesis itself (on / off, paired): wall %s (95%% CI %s), process CPU %s (95%% CI %s)",
              pct(median(wall)), median_ci(wall), pct(median(cpu)), median_ci(cpu))
end
