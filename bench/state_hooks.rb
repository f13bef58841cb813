# frozen_string_literal: true

# What Ruby's GVL and GC hooks cost a profiled program: the same profile with them (the
# default) and without (HAKARI_STATE_HOOKS=off, where the states are told as on a Ruby without
# the hooks: GC not timed, a wait for the GVL counted as blocked; and other Ractors' threads,
# which the program here has none of, not followed), in wall and in cpu mode,
# run round by round in one process in a shuffled order, on two workloads:
#   kramdown   a 200-section document to HTML (one thread; allocates, so the GC hook fires);
#   threads    four threads that each convert small documents and hand a token round through
#              queues, so the GVL changes hands at every step (the thread event hook fires).
# It prints each setup's slowdown against the unprofiled run of the same round and, per mode,
# the hooks' own cost: with hooks / without, paired by round. Target: 1 %.
#
#   ruby bench/state_hooks.rb            (any lane: script/lane 3.4+yjit ruby bench/state_hooks.rb)
# Env: HAKARI_BENCH_ROUNDS (default 201)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require "kramdown"
require_relative "paired_stats"
include PairedStats

ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "201"))
SETUPS = %w[unprofiled wall wall-no-hooks cpu cpu-no-hooks].freeze

def doc(sections) = (1..sections).map { |i| "## Part #{i}\n\nSome *text*, `code` and a [link](http://x/#{i}).\n\n- a\n- b\n\n" }.join

KRAMDOWN_DOC = doc(200)
SMALL_DOC = doc(2)

def kramdown = Kramdown::Document.new(KRAMDOWN_DOC).to_html

# four threads in a ring: each takes the token from its queue, converts a small document and
# passes the token on, 20 times round
def threads
  queues = Array.new(4) { Queue.new }
  workers = Array.new(4) do |i|
    Thread.new do
      20.times do
        queues[i].pop
        Kramdown::Document.new(SMALL_DOC).to_html
        queues[(i + 1) % 4] << :token
      end
    end
  end
  queues[0] << :token
  workers.each(&:join)
end

def run(setup, work)
  GC.start
  unless setup == "unprofiled"
    ENV["HAKARI_STATE_HOOKS"] = setup.end_with?("-no-hooks") ? "off" : nil # read once, at start
    Hakari.start(mode: setup.start_with?("wall") ? :wall : :cpu)
  end
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  send(work)
  t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  Hakari.stop unless setup == "unprofiled"
  t1 - t0
end

yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? "+YJIT" : ""
puts "state_hooks: ruby #{RUBY_VERSION}#{yjit}, 1000 Hz, #{ROUNDS} rounds per workload, setups in a shuffled order"
%i[kramdown threads].each do |work|
  3.times { SETUPS.each { |s| run(s, work) } } # warm-up
  times = Hash.new { |h, k| h[k] = [] }
  order = Random.new(1)
  ROUNDS.times { SETUPS.shuffle(random: order).each { |s| times[s] << run(s, work) } }
  puts "\n#{work} (unprofiled median #{format('%.1f', 1e3 * median(times['unprofiled']))} ms)"
  puts format("  %-14s %-9s %-18s %s", "setup", "slowdown", "(95% CI, median)", "(IQR over rounds)")
  (SETUPS - ["unprofiled"]).each do |s|
    r = times[s].zip(times["unprofiled"]).map { |a, b| a / b }
    puts format("  %-14s %-9s %-18s %s", s, pct(median(r)), "(#{median_ci(r)})", "(#{iqr(r)})")
  end
  %w[wall cpu].each do |mode|
    r = times[mode].zip(times["#{mode}-no-hooks"]).map { |a, b| a / b }
    puts format("  the hooks in %-4s mode: %s (95%% CI %s), with / without, paired by round", mode, pct(median(r)), median_ci(r))
  end
end
puts "  (target: the hooks cost <= 1 %)"
