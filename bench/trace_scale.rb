# frozen_string_literal: true

# Tracing at real-program scale: RuboCop linting a copy of kramdown's lib/ (tens of millions
# of calls, millions of distinct call paths) and RDoc documenting RuboCop's Style cops (HTML), each
# unprofiled, traced by hakari (mode: :trace, its default call-path budget, written as pprof)
# and traced by ruby-prof (its default wall measure, written by its flat printer), in one run.
#
# Every run is a fresh `ruby` process; rounds run the three in a rotating order. Printed per
# program: calls, call paths kept and folded, the tracer's bytes per call path and per method,
# peak RSS (VmHWM), the traced run's wall time, stop and write times, the output's size, and
# the ratios: hakari's peak to ruby-prof's, hakari's added time to ruby-prof's. Per-method call
# counts of the 20 methods called most must be equal in both (folding keeps them exact).
#
#   script/lane 3.4 ruby bench/trace_scale.rb    (rubocop, kramdown and ruby-prof from the Gemfile)
# Env: HAKARI_BENCH_ROUNDS (default 3), HAKARI_BENCH_PROGRAMS (rubocop,rdoc),
#      HAKARI_BENCH_MAX_PATHS (hakari's max_paths:, default the engine's)

require "fileutils"
require "json"
require "open3"
require "rbconfig"
require "tmpdir"
require_relative "ruby_prof_names"

ROOT = File.expand_path("..", __dir__)
ROUNDS = Integer(ENV.fetch("HAKARI_BENCH_ROUNDS", "3"))
PROGRAMS = ENV.fetch("HAKARI_BENCH_PROGRAMS", "rubocop,rdoc").split(",")
VARIANTS = %w[unprofiled hakari ruby_prof].freeze
TOP = 20

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def peak_kb = File.read("/proc/self/status")[/^VmHWM:\s+(\d+)/, 1].to_i

# ---- child side: one program under one variant, prints one JSON line ----

# The work to time, after a warm-up that loads the program's code untraced.
def program(name, dir)
  case name
  when "rubocop"
    require "rubocop"
    lib = File.join(Gem::Specification.find_by_name("kramdown").full_gem_path, "lib")
    FileUtils.cp_r(lib, dir)
    Dir.chdir(dir)
    lint = lambda do |*paths|
      $stdout = File.open(File::NULL, "w")
      RuboCop::CLI.new.run(["--cache", "false", "--format", "quiet", *paths])
    ensure
      $stdout = STDOUT
    end
    lint.call("lib/kramdown/version.rb") # loads the cops and what they require lazily
    -> { lint.call("lib") }
  when "rdoc"
    require "rdoc"
    style = File.join(Gem::Specification.find_by_name("rubocop").full_gem_path, "lib", "rubocop", "cop", "style")
    FileUtils.cp_r(style, dir)
    Dir.chdir(dir)
    -> { RDoc::RDoc.new.document(["--quiet", "--force-output", "--op", File.join(dir, "doc"), "style"]) }
  else abort "trace_scale: unknown program #{name.inspect} (expected rubocop or rdoc)"
  end
end

def child(name, variant)
  # every variant loads both profilers: a library one of them loads is not work (a require's
  # search through the installed gems) that only the other run does
  require "hakari"
  require "ruby-prof"
  Dir.mktmpdir do |dir|
    work = program(name, dir)
    out = File.join(dir, variant == "hakari" ? "trace.pb.gz" : "trace.flat.txt")
    GC.start
    r = {}
    t0 = now
    case variant
    when "unprofiled" then work.call
    when "hakari"
      max = ENV["HAKARI_BENCH_MAX_PATHS"]
      Hakari.start(mode: :trace, **(max ? { max_paths: Integer(max) } : {}))
      work.call
      r[:memory] = Hakari::Native.trace_memory
      t1 = now
      profile = Hakari.stop
      t2 = now
      Hakari.save(out, profile)
      r[:write] = now - t2
      r[:stop] = t2 - t1
      r[:peak_kb] = peak_kb # before the comparison's methods_table below, which is reporting
      c = profile.counters
      r.merge!(calls: c[:call_count], paths: c[:node_count], folded_calls: c[:folded_calls], folded_ns: c[:folded_ns])
      r[:counts] = profile.methods_table.max_by(4 * TOP) { |m| m[:calls] }.to_h { |m| [m[:name], m[:calls]] }
    when "ruby_prof"
      prof = RubyProf::Profile.new
      prof.start
      work.call
      t1 = now
      result = prof.stop
      t2 = now
      File.open(out, "w") { |f| RubyProf::FlatPrinter.new(result).print(f) }
      r[:write] = now - t2
      r[:stop] = t2 - t1
      r[:peak_kb] = peak_kb
      counts = RubyProfNames.counts(result, skip: ["[global]#", "Object#child"])
      r[:calls] = counts.sum { |_, v| v }
      r[:counts] = RubyProfNames.by_definition(counts)
    end
    r[:seconds] = now - t0
    r[:peak_kb] ||= peak_kb
    r[:out_bytes] = File.size(out) if File.exist?(out)
    puts JSON.generate(r)
  end
end

# ---- parent side ----

# the programs' own chatter (RuboCop's notes on new cops) is shown only when a run fails
def run_child(name, variant)
  cmd = [RbConfig.ruby, "-I", File.join(ROOT, "lib"), __FILE__, "--child", name, variant]
  out, err, st = Open3.capture3(*cmd)
  abort "trace_scale: #{name}/#{variant} failed (exit #{st.exitstatus}):\n#{err}" unless st.success?
  JSON.parse(out.lines.last, symbolize_names: true)
end

def median(xs) = xs.sort.then { |s| s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0 }

def mb(kb) = format("%.0f MB", kb / 1024.0)

# "X.m" and "X#m" counted as one: where a class has a singleton and an instance method of one
# name, ruby-prof 2 gives the calls of both to one of them
def one_name(counts)
  counts.each_with_object(Hash.new(0)) { |(name, calls), out| out[name.to_s.sub(/\.(?=[^.#]*\z)/, "#")] += calls }
end

def report(name, runs)
  med = ->(v, k) { median(runs[v].map { |r| r[k] }) }
  h = runs["hakari"].last
  mem = h[:memory]
  added = ->(v) { med.(v, :seconds) - med.("unprofiled", :seconds) }
  puts "#{name}: #{h[:calls]} calls, #{mem[:methods]} methods, #{h[:paths]} call paths kept; " \
       "#{h[:folded_calls]} calls (#{format('%.2f', h[:folded_ns] / 1e9)} s) folded"
  puts format("  tracer memory before stop: %.1f MB, %.0f bytes per call path (node and index), " \
              "%.0f bytes per method", mem[:total_bytes] / 1048576.0, mem[:path_bytes].fdiv(mem[:paths]),
              mem[:method_bytes].fdiv(mem[:methods]))
  puts format("  %-12s %10s %9s %9s %9s %10s", "variant", "peak RSS", "wall s", "stop s", "write s", "output")
  VARIANTS.each do |v|
    puts format("  %-12s %10s %9.2f %9s %9s %10s", v, mb(med.(v, :peak_kb)), med.(v, :seconds),
                v == "unprofiled" ? "-" : format("%.2f", med.(v, :stop)),
                v == "unprofiled" ? "-" : format("%.2f", med.(v, :write)),
                v == "unprofiled" ? "-" : format("%.1f MB", med.(v, :out_bytes) / 1048576.0))
  end
  peak = med.("hakari", :peak_kb).fdiv(med.("ruby_prof", :peak_kb))
  grown = ->(v) { med.(v, :peak_kb) - med.("unprofiled", :peak_kb) }
  share = added.("hakari") / added.("ruby_prof")
  puts format("  hakari's peak / ruby-prof's: %.2f (target on rubocop ≤ 0.33), above unprofiled: %s / %s; " \
              "added time / ruby-prof's: %.2f (target ≤ 0.50); stop + write %.2f s (target ≤ 2)", peak,
              mb(grown.("hakari")), mb(grown.("ruby_prof")), share, med.("hakari", :stop) + med.("hakari", :write))
  mine = one_name(h[:counts])
  theirs = one_name(runs["ruby_prof"].last[:counts])
  top = mine.max_by(TOP) { |_, v| v }
  diff = top.reject { |k, v| theirs[k] == v }
  puts "  the #{TOP} methods hakari saw called most: #{TOP - diff.size} with ruby-prof's count" \
       "#{diff.empty? ? '' : "; the others: #{diff.map { |k, v| "#{k} #{v} vs #{theirs[k].inspect}" }.join(', ')}"}"
end

if ARGV[0] == "--child"
  child(ARGV[1], ARGV[2])
  exit
end

system(File.join(ROOT, "script", "build"), exception: true)
puts "trace_scale: #{RUBY_DESCRIPTION}, #{ROUNDS} rounds, #{`nproc`.strip} CPUs"
PROGRAMS.each do |name|
  runs = Hash.new { |h, k| h[k] = [] }
  ROUNDS.times do |i|
    VARIANTS.rotate(i).each { |v| runs[v] << run_child(name, v) }
  end
  report(name, runs)
end
