# frozen_string_literal: true

# What counting allocations adds to a trace: kramdown converting a large document, unprofiled,
# traced, and traced with allocations counted — hakari (`allocations: true`) beside ruby-prof
# (`track_allocations: true`), all in the same rounds.
#
# Every run is a fresh `ruby` process. Rounds run every variant once in a rotating order; a
# variant's slowdown is the median over rounds of its time / that round's unprofiled time, with
# its 95 % confidence interval (bench/paired_stats.rb). Reported too: what counting allocations
# adds to each profiler's own trace (the same rounds' ratio of the two), the objects each counted
# (the program's allocations, read from GC.stat, beside them), and the two profilers' counts per
# (class, file, line): the two give a C method's objects to different methods (hakari to the C
# method, as its time; ruby-prof to the Ruby method that called it), but at the same line.
#
#   ruby bench/trace_allocations.rb      (builds hakari if needed)
# Env: HAKARI_TRACE_RUNS (rounds, default 11, at least 5)

require "json"
require "rbconfig"
require_relative "markdown_doc"
require_relative "paired_stats"

ROOT = File.expand_path("..", __dir__)
RUNS = Integer(ENV.fetch("HAKARI_TRACE_RUNS", "11"))
VARIANTS = %w[unprofiled hakari hakari_alloc ruby_prof ruby_prof_alloc].freeze
LABELS = { "unprofiled" => "unprofiled", "hakari" => "hakari trace (wall)",
           "hakari_alloc" => "hakari trace + allocations", "ruby_prof" => "ruby-prof (wall)",
           "ruby_prof_alloc" => "ruby-prof + track_allocations" }.freeze
SECTIONS = 350

# ---- child: one variant, one JSON line ----

def workload
  require "kramdown"
  convert = ->(doc) { Kramdown::Document.new(doc, syntax_highlighter: nil).to_html }
  convert.call(MarkdownDoc.document(5)) # warm-up: lazy requires, regexps, caches
  doc = MarkdownDoc.document(SECTIONS)
  -> { convert.call(doc) }
end

def run_variant(variant, work)
  case variant
  when "unprofiled" then work.call
  when "hakari" then Hakari.start(mode: :trace) { work.call }
  when "hakari_alloc" then Hakari.start(mode: :trace, allocations: true) { work.call }
  when "ruby_prof" then RubyProf::Profile.new.profile { work.call }
  when "ruby_prof_alloc" then RubyProf::Profile.new(track_allocations: true).profile { work.call }
  end
end

# objects counted, sites, and the objects per "class file:line"; read after the timed part
def counted(variant, result)
  by_line = Hash.new(0)
  case variant
  when "hakari_alloc"
    sites = result.methods_table.flat_map { |m| m[:allocations] }
    sites.each { |s| by_line["#{s[:class]} #{s[:file]}:#{s[:line]}"] += s[:count] }
    { objects: sites.sum { |s| s[:count] }, sites: result.counters[:allocation_sites], by_line: by_line }
  when "ruby_prof_alloc"
    all = result.threads.flat_map { |t| t.methods.flat_map(&:allocations) }
    all.each { |a| by_line["#{a.klass_name} #{a.source_file}:#{a.line}"] += a.count }
    { objects: all.sum(&:count), sites: all.size, by_line: by_line }
  else {}
  end
end

def child(variant)
  require "hakari" if variant.start_with?("hakari")
  require "ruby-prof" if variant.start_with?("ruby_prof")
  work = workload
  GC.start
  allocated0 = GC.stat(:total_allocated_objects)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  result = run_variant(variant, work)
  seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
  out = { seconds: seconds, allocated: GC.stat(:total_allocated_objects) - allocated0 }
  puts JSON.generate(out.merge(counted(variant, result)))
end

# ---- parent ----

def run_child(variant)
  out = IO.popen([RbConfig.ruby, "-I", File.join(ROOT, "lib"), __FILE__, "--child", variant], &:read)
  abort "trace_allocations: #{variant} failed (exit #{$?.exitstatus})" unless $?.success?
  JSON.parse(out.lines.last, symbolize_names: true)
end

def parent
  abort "HAKARI_TRACE_RUNS must be at least 5" if RUNS < 5
  system(File.join(ROOT, "script", "build"), exception: true)
  require "ruby-prof"
  require "kramdown"
  puts "trace allocations: #{RUBY_DESCRIPTION}; ruby-prof #{RubyProf::VERSION}; kramdown #{Kramdown::VERSION}"
  puts "  #{RUNS} rounds, fresh process per run, rotating order; #{`nproc`.strip} cores; load average " \
       "#{File.read('/proc/loadavg').split.first(3).join(' ')}; #{SECTIONS} sections, " \
       "#{MarkdownDoc.document(SECTIONS).bytesize} bytes"
  runs = VARIANTS.to_h { |v| [v, []] }
  RUNS.times { |round| VARIANTS.rotate(round).each { |v| runs[v] << run_child(v) } }
  ratios = ->(a, b) { runs[a].zip(runs[b]).map { |x, y| x[:seconds] / y[:seconds] } }
  puts format("  %-30s %9s %9s  %-28s", "variant", "median s", "vs unprof", "95% CI (IQR)")
  VARIANTS.each do |v|
    r = ratios.(v, "unprofiled")
    puts format("  %-30s %9.4f %9s  %s (%s)", LABELS[v], PairedStats.median(runs[v].map { |x| x[:seconds] }),
                PairedStats.pct(PairedStats.median(r)), PairedStats.median_ci(r), PairedStats.iqr(r))
  end
  added = ->(v) { PairedStats.median(ratios.(v, "unprofiled")) - 1 }
  puts format("  counting allocations adds to the trace: hakari %s (CI %s), ruby-prof %s (CI %s)",
              PairedStats.pct(PairedStats.median(ratios.("hakari_alloc", "hakari"))),
              PairedStats.median_ci(ratios.("hakari_alloc", "hakari")),
              PairedStats.pct(PairedStats.median(ratios.("ruby_prof_alloc", "ruby_prof"))),
              PairedStats.median_ci(ratios.("ruby_prof_alloc", "ruby_prof")))
  share = added.("hakari_alloc") / added.("ruby_prof_alloc")
  puts format("  hakari + allocations' added time / ruby-prof + track_allocations': %.2f (target ≤ 1: %s)",
              share, share <= 1 ? "met" : "NOT met")
  %w[hakari_alloc ruby_prof_alloc].each do |v|
    last = runs[v].last
    puts format("  %-30s counted %d objects at %d sites; the program allocated %d (GC.stat, the profiler's own included)",
                LABELS[v], last[:objects], last[:sites], last[:allocated])
  end
  puts "  unprofiled run allocated #{runs['unprofiled'].last[:allocated]} objects"
  compare_lines(runs["hakari_alloc"].last[:by_line], runs["ruby_prof_alloc"].last[:by_line])
end

# ruby-prof names Ruby's objects without a class "[global]"; hakari does not count them
def compare_lines(hakari, ruby_prof)
  h = Hash.new(0).merge(hakari)
  r = Hash.new(0).merge(ruby_prof)
  keys = h.keys | r.keys
  differ = keys.reject { |k| h[k] == r[k] }
  classless = differ.select { |k| k.to_s.start_with?("[global] ") }
  rest = differ - classless
  puts format("  per (class, file, line), last round: %d of %d sites identical; ruby-prof's classless objects " \
              "(\"[global]\", not counted by hakari) at %d sites, %d objects; the other %d sites differ by %d objects:",
              keys.size - differ.size, keys.size, classless.size, classless.sum { |k| r[k] }, rest.size,
              rest.sum { |k| (h[k] - r[k]).abs })
  rest.sort_by { |k| -(h[k] - r[k]).abs }.first(8).each do |k|
    puts format("    %-80s hakari %7d  ruby-prof %7d", k.to_s.sub(%r{\S*/gems/}, ""), h[k], r[k])
  end
end

ARGV[0] == "--child" ? child(ARGV[1]) : parent
