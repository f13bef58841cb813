# frozen_string_literal: true

# Object and retained modes (README, "Where objects are allocated"): are they true, and what do
# they cost?
#
# Part 1, ground truth: methods that allocate known numbers of objects of known classes (on the
# main thread and on two others), profiled in object mode at interval 1 and at the default
# interval, and at the default interval with watch windows (WATCH). Each (method, class) count
# is compared with the truth: exact at interval 1, within 2 % at the default. stackprof's object
# mode at the same intervals beside it (by method; it records no class). Then phases of a few
# thousand objects, where watch windows blur neighbours (short_phases). The bytes (each object's heap slot) against the slot ObjectSpace.dump reports
# for an object of each kind (3.2+; on 3.1 every slot is GC::INTERNAL_CONSTANTS[:RVALUE_SIZE]).
#
# Part 2, overhead: kramdown on a 200-section document (it allocates about a million objects a
# second), unprofiled and under each setup once per round in a shuffled order, in one process:
# the slowdown of each against the unprofiled run of the same round (median, IQR and the
# median's 95 % CI). Target: within 5 % at the default interval: not met by the hook on all the
# time (watch 1, the default), nor with watch windows (WATCH), which about halve the cost.
#
# Part 3, retained mode: methods that keep a known share of what they allocate (a quarter of
# 200 000 arrays, a third of 90 000 hashes, none of 300 000 strings) under retained mode at
# interval 1 and 10, each (method, class) count against the truth and the bytes against
# ObjectSpace.memsize_of of the kept objects; and kramdown's slowdown under it (as part 2).
#
# Part 4, watch windows run after run: three long phases (300 000 strings, 200 000 arrays,
# 100 000 hashes) profiled with watch windows again and again (HAKARI_BENCH_WATCH_RUNS), each
# phase's error per run summed up as its mean, standard deviation and largest; and the runs
# whose profile counts objects of stretches read late (objects_read_late), with the most. A
# stretch ends at its read, the worker's or (3.2+) the first GC step's past its end: a late read
# on a busy or virtual machine puts a phase's objects with the next one's.
#
#   ruby bench/objects.rb                  (any lane: script/lane 3.4 ruby bench/objects.rb)
# Env: HAKARI_BENCH_ROUNDS (default 41), HAKARI_BENCH_PARTS (default 1,2,3,4),
#      HAKARI_BENCH_WATCH_RUNS (default 100)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require "kramdown"
require "stackprof"
require "objspace"
require_relative "paired_stats"
include PairedStats

ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "41"))
WATCH_RUNS = Integer(ENV.fetch("HAKARI_BENCH_WATCH_RUNS", "100"))
WATCH = 0.2 # watch windows: the NEWOBJ hook on for a fifth of the objects (README, "Watch windows")
PARTS = ENV.fetch("HAKARI_BENCH_PARTS", "1,2,3,4").split(",").map { Integer(_1) }
LANE = "Ruby #{RUBY_DESCRIPTION[/\A\S+ \S+/]}#{defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ' +YJIT' : ''}"

# Each makes exactly n objects of one class (kept in a local: an unused literal is never built).
module Allocs
  module_function

  def strings(n) = (i = 0; (s = String.new("x"); i += 1) while i < n; s)
  def arrays(n) = (i = 0; (a = [i, i]; i += 1) while i < n; a)
  def hashes(n) = (i = 0; (h = { a: i }; i += 1) while i < n; h)
  def plain(n) = (i = 0; (o = Object.new; i += 1) while i < n; o)
  def threaded(n) = 2.times.map { Thread.new { arrays(n) } }.each(&:join)
end

WORK = -> { Allocs.strings(300_000); Allocs.arrays(200_000); Allocs.hashes(100_000); Allocs.plain(50_000); Allocs.threaded(25_000) }
# (method, class) => objects, the threads' arrays included under Allocs.arrays
TRUTH = { %w[Allocs.strings String] => 300_000, %w[Allocs.arrays Array] => 250_000, %w[Allocs.hashes Hash] => 100_000,
          %w[Allocs.plain Object] => 50_000 }.freeze

# (method, class) => [objects, bytes], from a hakari profile: samples whose stack holds the method
def hakari_counts(profile)
  sets = profile[:label_sets]
  TRUTH.keys.to_h do |(method, klass)|
    rows = profile[:samples].select { |row| row[0].any? { _1[0] == method } && sets[row.last][:class] == klass }
    [[method, klass], [rows.sum { _1[1] }, rows.sum { _1[4] }]]
  end
end

# class => the heap slot of an object like those the methods make, as Ruby reports it
SLOT = { "String" => String.new("x"), "Array" => [1, 1], "Hash" => { a: 1 }, "Object" => Object.new }.transform_values do |o|
  RUBY_VERSION < "3.2" ? GC::INTERNAL_CONSTANTS[:RVALUE_SIZE] : Integer(ObjectSpace.dump(o)[/"slot_size":(\d+)/, 1])
end

# method => objects from stackprof's raw stacks (no class: all the method's objects)
def stackprof_counts(result, interval)
  names = result[:frames].transform_values { _1[:name] }
  counts = Hash.new(0)
  raw = result[:raw]
  i = 0
  while i < raw.size
    len = raw[i]
    frames = raw[i + 1, len].map { names[_1] }
    n = raw[i + 1 + len]
    TRUTH.each_key { |(m, _)| counts[m] += n * interval if frames.include?(m) }
    i += len + 2
  end
  counts
end

def error(got, truth) = format("%+.2f%%", 100.0 * (got - truth) / truth)

def part1
  puts "\n1. ground truth: #{TRUTH.values.sum + 50_000} objects in 4 methods (#{LANE})"
  WORK.call
  [[1, 1], [Hakari::DEFAULT_INTERVAL, 1], [Hakari::DEFAULT_INTERVAL, WATCH]].each do |interval, watch|
    profile = Hakari.start(mode: :object, interval: interval, watch: watch) { WORK.call }
    got = hakari_counts(profile)
    puts format("  interval %-4d watch %-4s hakari: %s; dropped %d", interval, watch,
                TRUTH.map { |(m, k), t| "#{m} #{k} #{got[[m, k]][0]} (#{error(got[[m, k]][0], t)})" }.join(", "),
                profile.counters[:dropped_count])
    puts format("  %-13s bytes:  %s", "", TRUTH.map { |(m, k), t|
      "#{m} #{got[[m, k]][1]} (#{error(got[[m, k]][1], t * SLOT[k])}, #{SLOT[k]} a slot)"
    }.join(", "))
    next unless watch == 1

    sp = StackProf.run(mode: :object, interval: interval, raw: true) { WORK.call }
    sp_got = stackprof_counts(sp, interval)
    puts format("  %-13s stackprof: %s", "", TRUTH.map { |(m, _), t| "#{m} #{sp_got[m]} (#{error(sp_got[m], t)})" }.join(", "))
  end
  short_phases
end

# Watch windows blur phases shorter than a few windows' cycles (about a thousand objects each)
# with their neighbours: ten rounds of phases of 3 000 to 30 000 objects, a thread's and a
# fiber's among them, at watch 1 and WATCH, three runs each.
SHORT = -> { 10.times { Allocs.strings(30_000); Allocs.arrays(20_000); Allocs.hashes(10_000); Allocs.threaded(2_000); Fiber.new { Allocs.hashes(3_000) }.resume } }
SHORT_TRUTH = { %w[Allocs.strings String] => 300_000, %w[Allocs.arrays Array] => 240_000, %w[Allocs.hashes Hash] => 130_000 }.freeze

def short_phases
  SHORT.call
  [1, WATCH].each do |watch|
    runs = 3.times.map do
      profile = Hakari.start(mode: :object, watch: watch) { SHORT.call }
      sets = profile[:label_sets]
      SHORT_TRUTH.to_h do |(method, klass), truth|
        rows = profile[:samples].select { |row| row[0].any? { _1[0] == method } && sets[row.last][:class] == klass }
        [method, error(rows.sum { _1[1] }, truth)]
      end
    end
    puts format("  short phases, watch %-4s %s", watch,
                SHORT_TRUTH.keys.map { |(m, k)| "#{m} #{k} #{runs.map { _1[m] }.join(' ')}" }.join(", "))
  end
end

DOC = (1..200).map { |i| "## Part #{i}\n\nSome *text*, `code` and a [link](http://x/#{i}).\n\n- a\n- b\n\n" }.join
SETUPS = {
  "unprofiled" => nil,
  "hakari object, interval #{Hakari::DEFAULT_INTERVAL}" => -> { Hakari.start(mode: :object) },
  "hakari object, interval #{Hakari::DEFAULT_INTERVAL}, watch #{WATCH}" => -> { Hakari.start(mode: :object, watch: WATCH) },
  "hakari object, interval 1" => -> { Hakari.start(mode: :object, interval: 1) },
  "stackprof object, interval #{Hakari::DEFAULT_INTERVAL}" => -> { StackProf.start(mode: :object, interval: Hakari::DEFAULT_INTERVAL, raw: true) },
  "stackprof object, interval 1" => -> { StackProf.start(mode: :object, interval: 1, raw: true) },
}.freeze

def kramdown = Kramdown::Document.new(DOC).to_html

# [wall s, objects per second]
def run(setup)
  GC.start
  SETUPS[setup]&.call
  a0 = GC.stat(:total_allocated_objects)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  kramdown
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
  a = GC.stat(:total_allocated_objects) - a0
  if setup.start_with?("hakari") then Hakari.stop
  elsif setup.start_with?("stackprof") then StackProf.stop
  end
  [t, a / t]
end

def part2
  3.times { SETUPS.each_key { run(_1) } }
  res = Hash.new { |h, k| h[k] = [] }
  ROUNDS.times { SETUPS.keys.shuffle.each { |s| res[s] << run(s) } }
  puts "\n2. overhead on kramdown (#{LANE}, #{ROUNDS} rounds, " \
       "#{(median(res['unprofiled'].map { _1[1] }) / 1e6).round(2)} M objects/s unprofiled)"
  SETUPS.each_key do |s|
    next if s == "unprofiled"

    r = res[s].zip(res["unprofiled"]).map { |a, b| a[0] / b[0] }
    puts format("  %-32s wall %s (IQR %s, 95%% CI %s)", s, pct(median(r)), iqr(r), median_ci(r))
  end
end

# Each keeps every `every`-th object it makes in KEPT.
module Keeper
  KEPT = []
  module_function

  def arrays(n, every) = n.times { |i| a = [i, i]; KEPT << a if (i % every).zero? }
  def hashes(n, every) = n.times { |i| h = { a: i }; KEPT << h if (i % every).zero? }
  def strings(n) = n.times { String.new("x") }
end

KEEP_WORK = -> { Keeper.arrays(200_000, 4); Keeper.hashes(90_000, 3); Keeper.strings(300_000) }
KEPT_TRUTH = { %w[Keeper.arrays Array] => 50_000, %w[Keeper.hashes Hash] => 30_000, %w[Keeper.strings String] => 0 }.freeze

# (method, class) => [objects, bytes] from a retained profile
def retained_counts(profile)
  sets = profile[:label_sets]
  KEPT_TRUTH.keys.to_h do |(method, klass)|
    rows = profile[:samples].select { |row| row[0].any? { _1[0] == method } && sets[row.last][:class] == klass }
    [[method, klass], [rows.sum { _1[1] }, rows.sum { _1[4] }]]
  end
end

def part3
  puts "\n3. retained mode: 80 000 of 590 000 objects kept (#{LANE})"
  [1, 10].each do |interval|
    Keeper::KEPT.clear
    GC.start
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    profile = Hakari.start(mode: :retained, interval: interval) { KEEP_WORK.call }
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    got = retained_counts(profile)
    bytes = { "Array" => Keeper::KEPT.grep(Array).sum { ObjectSpace.memsize_of(_1) },
              "Hash" => Keeper::KEPT.grep(Hash).sum { ObjectSpace.memsize_of(_1) }, "String" => 0 }
    puts format("  interval %-3d %s; %.2f s with the stop's GC", interval,
                KEPT_TRUTH.map { |(m, k), n|
                  o, b = got[[m, k]]
                  "#{m} #{k} #{o} of #{n}, #{b} of #{bytes[k]} bytes"
                }.join("; "), t)
  end
  Keeper::KEPT.clear
  setups = { "unprofiled" => nil, "retained, interval 1" => 1, "retained, interval 100" => 100 }
  run = lambda do |s|
    GC.start
    Hakari.start(mode: :retained, interval: setups[s]) if setups[s]
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    kramdown
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    Hakari.stop if setups[s]
    t
  end
  2.times { setups.each_key { run.call(_1) } }
  res = Hash.new { |h, k| h[k] = [] }
  ROUNDS.times { setups.keys.shuffle.each { |s| res[s] << run.call(s) } }
  puts "  kramdown, #{ROUNDS} rounds (the stop's GC not timed):"
  %w[retained,\ interval\ 1 retained,\ interval\ 100].each do |s|
    r = res[s].zip(res["unprofiled"]).map { |a, b| a / b }
    puts format("  %-32s wall %s (IQR %s, 95%% CI %s)", s, pct(median(r)), iqr(r), median_ci(r))
  end
end

LONG = -> { Allocs.strings(300_000); Allocs.arrays(200_000); Allocs.hashes(100_000) }
LONG_TRUTH = { %w[Allocs.strings String] => 300_000, %w[Allocs.arrays Array] => 200_000, %w[Allocs.hashes Hash] => 100_000 }.freeze

def part4
  puts "\n4. watch #{WATCH}, #{WATCH_RUNS} runs of three long phases (#{LANE})"
  LONG.call
  late = []
  errors = Hash.new { |h, k| h[k] = [] }
  WATCH_RUNS.times do
    profile = Hakari.start(mode: :object, watch: WATCH) { LONG.call }
    got = hakari_counts(profile)
    LONG_TRUTH.each { |key, truth| errors[key] << 100.0 * (got[key][0] - truth) / truth }
    late << profile.counters[:objects_read_late]
  end
  LONG_TRUTH.each_key do |(method, klass)|
    e = errors[[method, klass]]
    mean = e.sum / e.size
    sd = Math.sqrt(e.sum { (_1 - mean)**2 } / e.size)
    puts format("  %-28s mean %+.2f%%, sd %.2f%%, largest %+.2f%%", "#{method} #{klass}", mean, sd, e.max_by(&:abs))
  end
  puts format("  runs with objects read late: %d of %d (at most %d objects)", late.count(&:positive?), late.size, late.max)
end

puts "# object and retained modes: truth and cost"
part1 if PARTS.include?(1)
part2 if PARTS.include?(2)
part3 if PARTS.include?(3)
part4 if PARTS.include?(4)
