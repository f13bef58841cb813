# frozen_string_literal: true

# What labels cost (README, "Labels and servers"), in two parts, each setup once per round in a
# shuffled order, in one run:
#
# 1. A label block in a loop: nanoseconds per call above the same loop's empty body, while a
#    cpu profile runs (1000 Hz) and while none does, beside a Ruby method that only yields (what
#    any block-taking wrapper costs), with keywords (`Hakari.label(endpoint: "GET /users/:id")`:
#    Ruby makes a Hash of them at every call) and with a frozen Hash made once
#    (`Hakari.label(LABELS)`, also while a wall profile runs). Per-round differences: median and
#    95 % CI.
# 2. A real puma (test/fixtures/puma: cluster mode, two workers, one thread each) serving a small
#    endpoint on 127.0.0.1, restarted each round without hakari and with hakari recording every
#    worker (fork: :inherit, Hakari::Rack labelling each request) in cpu mode at 1000 Hz and at
#    100 Hz: requests per second of a bounded loopback load (REQUESTS requests over CONNECTIONS
#    keep-alive connections), the ratio to the unprofiled run of the same round, median and 95 % CI.
#
#   script/lane 3.4 ruby bench/labels.rb
# Env: HAKARI_BENCH_ROUNDS (default 31 for part 1, a third of it for part 2),
#      HAKARI_BENCH_REQUESTS (default 3000), HAKARI_BENCH_PARTS ("1,2")

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require "net/http"
require "tmpdir"
require_relative "paired_stats"
require_relative "../test/support/servers"
include PairedStats

ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "31"))
PARTS = ENV.fetch("HAKARI_BENCH_PARTS", "1,2").split(",")
CALLS = 200_000
LABELS = { endpoint: "GET /users/:id" }.freeze

def yield_only = yield

def clock = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

# ns per iteration of loop `kind`
def per_call(kind)
  i = 0
  t0 = clock
  case kind
  when :empty then (i += 1 while i < CALLS)
  when :yield then (yield_only { i += 1 } while i < CALLS)
  when :label then (Hakari.label(endpoint: "GET /users/:id") { i += 1 } while i < CALLS)
  when :label_hash then (Hakari.label(LABELS) { i += 1 } while i < CALLS)
  end
  (clock - t0).fdiv(CALLS)
end

# median and 95 % CI of differences, in ns
def ns_summary(diffs)
  s = diffs.sort
  half = 0.98 * Math.sqrt(s.size)
  lo = s[[(s.size / 2.0 - half).floor, 0].max]
  hi = s[[(s.size / 2.0 + half).ceil, s.size - 1].min]
  format("%7.1f ns  (95%% CI %.1f..%.1f)", median(s), lo, hi)
end

def part1
  # [loop, the mode profiling (nil: none)]
  setups = { yield: [:yield, nil], kw_off: [:label, nil], kw_on: [:label, :cpu],
             hash_off: [:label_hash, nil], hash_on: [:label_hash, :cpu], hash_wall: [:label_hash, :wall] }
  diffs = setups.transform_values { [] }
  3.times { %i[label label_hash yield empty].each { per_call(_1) } } # warm (and compiled, under YJIT)
  ROUNDS.times do
    setups.to_a.shuffle.each do |name, (kind, profiling)|
      Hakari.start(mode: profiling) if profiling
      diffs[name] << per_call(kind) - per_call(:empty)
      Hakari.stop if profiling
    end
  end
  puts "1. a label block, ns per call above an empty loop body (#{ROUNDS} rounds of #{CALLS} calls)"
  puts "   a method that only yields:                  #{ns_summary(diffs[:yield])}"
  puts "   Hakari.label(endpoint: ...), not profiling: #{ns_summary(diffs[:kw_off])}"
  puts "   Hakari.label(endpoint: ...), profiling:     #{ns_summary(diffs[:kw_on])}"
  puts "   Hakari.label(LABELS), not profiling:        #{ns_summary(diffs[:hash_off])}"
  puts "   Hakari.label(LABELS), profiling:            #{ns_summary(diffs[:hash_on])}"
  puts "   Hakari.label(LABELS), profiling (wall mode): #{ns_summary(diffs[:hash_wall])}"
end

FIXTURE = File.expand_path("../test/fixtures/puma", __dir__)
REQUESTS = Integer(ENV.fetch("HAKARI_BENCH_REQUESTS", "3000"))
CONNECTIONS = 4

# requests per second of the load against a fresh puma, profiled at hz (nil: not profiled)
def puma_rps(hz, dir)
  port = Servers.free_port
  log = File.join(dir, "puma.log")
  env = { "HAKARI_TEST_PORT" => port.to_s }
  env.merge!("HAKARI_TEST_OUTPUT" => File.join(dir, "out.pb.gz"), "HAKARI_TEST_FREQUENCY" => hz.to_s) if hz
  pid = spawn(env, RbConfig.ruby, "-I#{File.expand_path('../lib', __dir__)}", "-e", 'load Gem.bin_path("puma", "puma")', "--",
              "-C", File.join(FIXTURE, "puma.rb"), out: log, err: [:child, :out])
  Servers.wait_for_port(port, log)
  load_for(port, 200) # both workers up and warm
  t0 = clock
  load_for(port, REQUESTS)
  REQUESTS / ((clock - t0) / 1e9)
ensure
  Servers.stop(pid) if pid
  Dir.glob(File.join(dir, "out.*")).each { File.unlink(_1) }
end

def load_for(port, requests)
  left = Queue.new
  requests.times { left << 1 }
  left.close
  CONNECTIONS.times.map do
    Thread.new do
      Net::HTTP.start("127.0.0.1", port) do |http|
        while left.pop
          res = http.get("/")
          raise "status #{res.code}" unless res.code == "200"
        end
      end
    end
  end.each(&:join)
end

def part2
  rounds = [ROUNDS / 3, 3].max
  setups = [nil, 1000, 100] # not profiled, cpu mode at 1000 Hz and at 100 Hz
  rps = setups.to_h { [_1, []] }
  Dir.mktmpdir do |dir|
    rounds.times { setups.shuffle.each { |hz| rps[hz] << puma_rps(hz, dir) } }
  end
  puts "2. puma, 2 workers, a small endpoint, #{REQUESTS} requests over #{CONNECTIONS} keep-alive connections (#{rounds} rounds)"
  puts format("   without hakari: %.0f req/s (median)", median(rps[nil]))
  [1000, 100].each do |hz|
    ratios = rps[hz].zip(rps[nil]).map { _1 / _2 }
    puts format("   every worker profiled, cpu mode at %4d Hz: %.0f req/s; with / without, per round: %s (IQR %s, 95%% CI %s)",
                hz, median(rps[hz]), pct(median(ratios)), iqr(ratios), median_ci(ratios))
  end
end

puts "#{RUBY_DESCRIPTION}, #{`nproc`.strip} cores"
part1 if PARTS.include?("1")
part2 if PARTS.include?("2")
