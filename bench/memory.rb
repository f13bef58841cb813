# frozen_string_literal: true

# Memory: hakari must stay bounded by the number of unique stacks, not by run length.
# A workload that cycles through a fixed set of 64 call paths runs for a minute under hakari
# (cpu mode, 1000 Hz); RSS is read from /proc/self/status after the first second and at
# the end (before stop). The same workload then runs unprofiled for as long, to show
# that the workload itself does not grow.
#
#   ruby bench/memory.rb          (after bench/build)
# Env: HAKARI_BENCH_SECONDS (run length, default 60), HAKARI_BENCH_MODE (cpu or wall)

require "rbconfig"

LIB = File.expand_path("../lib", __dir__)
SECONDS = Float(ENV.fetch("HAKARI_BENCH_SECONDS", "60"))
MODE = ENV.fetch("HAKARI_BENCH_MODE", "cpu").to_sym

def rss_kb = File.read("/proc/self/status")[/^VmRSS:\s+(\d+)/, 1].to_i
def now_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

# Stack i (0...64) is (i % 16) + 1 levels deep; the method at each level is chosen from
# m0..m7 by i and the level, so the 64 stacks differ. Nothing here allocates.
class Stacks
  8.times do |k|
    class_eval <<~RUBY, __FILE__, __LINE__ + 1
      def m#{k}(i, level) = descend(i, level + 1)
    RUBY
  end

  def descend(i, level)
    return spin if level > i % 16

    case (i / 16 + level) % 8
    when 0 then m0(i, level) when 1 then m1(i, level) when 2 then m2(i, level)
    when 3 then m3(i, level) when 4 then m4(i, level) when 5 then m5(i, level)
    when 6 then m6(i, level) else m7(i, level)
    end
  end

  def spin
    j = 0
    j += 1 while j < 20_000 # about 0.3 ms: several samples land on each stack visit
  end

  # Cycles through the stacks until `seconds` have passed; returns RSS (kB) at 1 s and at the end.
  def run(seconds)
    start = now_ns
    deadline = start + (seconds * 1e9).to_i
    first = nil
    i = 0
    while (t = now_ns) < deadline
      first ||= rss_kb if t - start >= 1_000_000_000
      descend(i % 64, 0)
      i += 1
    end
    [first, rss_kb]
  end
end

if ARGV[0] == "--child"
  if ARGV[1] == "hakari"
    require "hakari"
    Hakari.start(mode: MODE, frequency: 1000)
    first, last = Stacks.new.run(SECONDS)
    p = Hakari.stop.to_h
    stats = p.slice(:trigger_count, :sample_count, :dropped_count, :unique_frames, :unique_stacks)
  else
    first, last = Stacks.new.run(SECONDS)
    stats = {}
  end
  puts [first, last, rss_kb, stats.map { |k, v| "#{k}=#{v}" }.join(" ")].join("\t")
  exit 0
end

puts "memory: ruby #{RUBY_VERSION}, #{SECONDS} s, hakari #{MODE} mode at 1000 Hz, 64 call paths " \
     "(then the same unprofiled)"
# One after the other: side by side on 2 cores they fight with hakari's timer thread.
%w[hakari unprofiled].each do |who|
  out = IO.popen([RbConfig.ruby, "-I", LIB, __FILE__, "--child", who], &:read)
  status = $?
  first, last, after_stop, stats = out.chomp.split("\t")
  raise "#{who} child failed: #{out}" unless status.success? && last

  first, last, after_stop = [first, last, after_stop].map { _1.to_i / 1024.0 }
  puts format("  %-10s RSS at 1 s %6.1f MB, at end %6.1f MB: growth %+6.2f MB", who, first, last, last - first)
  puts format("  %-10s (after stop %.1f MB; %s)", "", after_stop, stats) if stats

end
puts "  (target: hakari's growth < 5 MB; the unprofiled growth is the workload's own)"
