# frozen_string_literal: true

# How fast `hakari report` reads a big profile, and how big and fast its HTML page is. A
# profile of 1 000 000 raw samples over 50 000 unique stacks (frames from 2 000 functions,
# 10-40 deep, with a thread label each) is written as pprof by a small encoder of this bench's
# own (profile.proto's field numbers), then:
#   - `hakari report FILE` (the text tables): wall time and peak RSS of the process, beside the
#     inflated file's size (targets: 1 s, and 2 times the inflated size);
#   - `hakari report FILE -o out.html`: its time and the page's size (target: 2 MB);
#   - the page in headless Chromium, from file://: the time from navigation to the end of its
#     script (target: 1 s).
#
#   ruby bench/report.rb          (any lane: script/lane 3.4 ruby bench/report.rb)
# Env: HAKARI_BENCH_SAMPLES (default 1000000), HAKARI_BENCH_STACKS (default 50000),
#      HAKARI_BENCH_KEEP (a path: the generated profile is kept there)

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "hakari"
require "zlib"
require "tmpdir"
require "fileutils"
require "open3"
require_relative "../test/support/chromium"

SAMPLES = Integer(ENV.fetch("HAKARI_BENCH_SAMPLES", "1000000"))
STACKS = Integer(ENV.fetch("HAKARI_BENCH_STACKS", "50000"))
FUNCTIONS = 2000
EXE = File.expand_path("../exe/hakari", __dir__)

# protobuf: varints, length-delimited fields, packed repeated varints
def varint(n)
  out = +"".b
  loop do
    byte = n & 0x7f
    n >>= 7
    return out << (n.zero? ? byte : byte | 0x80).chr if n.zero?

    out << (byte | 0x80).chr
  end
end

def field_varint(num, value) = varint(num << 3) + varint(value)
def field_bytes(num, bytes) = varint((num << 3) | 2) + varint(bytes.bytesize) + bytes
def packed(num, values) = field_bytes(num, values.map { varint(_1) }.join.b)

def build_profile
  rng = Random.new(7)
  strings = ["", "samples", "count", "cpu", "nanoseconds", "thread", "bench.rb"]
  index = strings.each_with_index.to_h
  str = ->(s) { index[s] ||= (strings << s).size - 1 }
  body = +"".b
  body << field_bytes(1, field_varint(1, str["samples"]) + field_varint(2, str["count"]))
  body << field_bytes(1, field_varint(1, str["cpu"]) + field_varint(2, str["nanoseconds"]))
  FUNCTIONS.times do |f|
    body << field_bytes(5, field_varint(1, f + 1) + field_varint(2, str["Module#{f % 97}::Class#{f}#method_#{f}"]) +
                           field_varint(4, str["lib/module_#{f % 97}.rb"]) + field_varint(5, 10 * f + 1))
    body << field_bytes(4, field_varint(1, f + 1) + field_bytes(4, field_varint(1, f + 1) + field_varint(2, 10 * f + 3)))
  end
  # stacks that share prefixes, as a program's do: each extends a random earlier one or starts anew
  stacks = []
  STACKS.times do
    base = stacks.empty? || rng.rand < 0.1 ? [1 + rng.rand(10)] : stacks[rng.rand(stacks.size)].first(10 + rng.rand(20))
    stack = base + Array.new(1 + rng.rand(10)) { 1 + rng.rand(FUNCTIONS) }
    stacks << stack.first(40)
  end
  SAMPLES.times do |i|
    stack = stacks[i < STACKS ? i : rng.rand(STACKS)]
    label = field_bytes(3, field_varint(1, str["thread"]) + field_varint(3, 1 + (i % 8)))
    body << field_bytes(2, packed(1, stack.reverse) + packed(2, [1, 1_000_000 + rng.rand(1000)]) + label)
  end
  strings.each { |s| body << field_bytes(6, s.b) }
  body << field_varint(12, 1_000_000)
  body
end

def peak_rss_mb(pid_status_line) = pid_status_line.to_i / 1024.0

# runs the command under /usr/bin/time for its peak RSS; => [seconds, MB, stdout]
def measure(*cmd)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  out, err, st = Open3.capture3({ "RUBYLIB" => File.expand_path("../lib", __dir__) }, "/usr/bin/time", "-f", "%M", *cmd)
  dt = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
  abort "#{cmd.join(" ")} failed: #{err}" unless st.success?
  [dt, err.lines.last.to_i / 1024.0, out]
end

Dir.mktmpdir("hakari-bench-report-") do |dir|
  raw = build_profile
  file = File.join(dir, "big.pb.gz")
  File.binwrite(file, Zlib.gzip(raw, level: 6))
  FileUtils.cp(file, ENV["HAKARI_BENCH_KEEP"]) if ENV["HAKARI_BENCH_KEEP"]
  printf "report: %s, %d samples over %d stacks, %.1f MB inflated, %.1f MB gzipped\n", RUBY_DESCRIPTION, SAMPLES,
         STACKS, raw.bytesize / 1e6, File.size(file) / 1e6
  _, base_rss, = measure(RbConfig.ruby, "-e", "require 'hakari'")
  3.times do
    dt, rss, out = measure(RbConfig.ruby, EXE, "report", file)
    printf "  hakari report        %6.2f s  peak RSS %6.1f MB (%.1f MB over an idle ruby with hakari loaded: %.2f x the inflated file)  %s\n",
           dt, rss, rss - base_rss, (rss - base_rss) * 1e6 / raw.bytesize, out[/^Total:.*/]
  end
  html = File.join(dir, "big.html")
  dt, rss, = measure(RbConfig.ruby, EXE, "report", file, "-o", html)
  printf "  hakari report -o html %5.2f s  peak RSS %6.1f MB  page %.2f MB\n", dt, rss, File.size(html) / 1e6
  unless Chromium.available?
    puts "  (no chromium: the page's load time is not measured)"
    next
  end
  Chromium.open do |b|
    3.times do
      b.goto("file://#{html}")
      ms = b.eval("performance.now()") # the page's clock starts at navigation; its script has run
      ready = b.eval("document.body.dataset.ready")
      frames = b.eval("document.querySelectorAll('#graph .frame').length")
      printf "  page in chromium      %6.0f ms to the end of its script (ready=%s, %d frames drawn)\n", ms, ready, frames
    end
  end
end
