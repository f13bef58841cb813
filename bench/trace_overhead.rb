# frozen_string_literal: true

# Tracing overhead: how much slower do a recursive fib(27) and kramdown converting
# a large document run under hakari's trace mode than unprofiled, and than under
# ruby-prof — and how much of that is the VM's own cost of calling an event hook?
#
# Variants: unprofiled; the floors from bench/ext/hookfloor — an empty hook on
# call/return/c_call/c_return (what the VM charges any such tracer before it does
# any work), the same hook reading clock_gettime, and one reading the TSC (the
# clock hakari's wall measure reads where the kernel trusts it); hakari trace
# (measure: :wall); ruby-prof (RubyProf::Profile.new.profile, its default wall measure).
#
# Every run is a fresh `ruby` process, so no variant inherits another's heap,
# caches or hooks. Rounds run every variant once, in a rotating order, so machine
# noise (2 shared cores) spreads over all of them; a variant's slowdown is the
# median over rounds of its time / that round's unprofiled time, so a slow spell
# that hits a whole round cancels out. A run times start → workload → stop
# in-process, so a profiler's start, stop and result building count: users pay
# for them. Reported: medians, ratio to unprofiled, added time (ratio − 1),
# hakari's added time as a share of ruby-prof's (target ≤ 0.5), and hakari's
# distance above each floor. It also checks that hakari and ruby-prof count
# the same calls.
#
#   ruby bench/trace_overhead.rb      (builds hakari and the hook floor if needed)
# Env: HAKARI_TRACE_RUNS (rounds, default 15, at least 5)

require "json"
require "rbconfig"

ROOT = File.expand_path("..", __dir__)
require_relative "bench_ext"
require_relative "ruby_prof_names"
FLOOR_DIR = BenchExt.dir("hookfloor")
RUNS = Integer(ENV.fetch("HAKARI_TRACE_RUNS", "15"))
VARIANTS = %w[unprofiled empty_hook clock_hook tsc_hook hakari ruby_prof].freeze
FLOORS = %w[empty_hook clock_hook tsc_hook].freeze
WORKLOADS = %w[fib kramdown].freeze
FIB_N = 27
SECTIONS = 350 # ≈ 300 KB of markdown, ≈ 0.4 s unprofiled here
TOP = 20       # methods (by calls) whose counts must agree

# ---- child side: one workload under one variant, prints one JSON line ----

def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)

require_relative "markdown_doc"
def markdown_document(sections) = MarkdownDoc.document(sections)

# Returns the timed work. Warm-up runs first, untraced, so lazy requires, regexp
# compilation and inline caches are not charged to whichever variant meets them.
# No syntax highlighter: rouge is only a Recommends of ruby-kramdown, and the
# workload must be the same whether it is installed or not.
def workload(name)
  case name
  when "fib"
    fib(15)
    -> { fib(FIB_N) }
  when "kramdown"
    require "kramdown"
    convert = ->(doc) { Kramdown::Document.new(doc, syntax_highlighter: nil).to_html }
    convert.call(markdown_document(5))
    doc = markdown_document(SECTIONS)
    -> { convert.call(doc) }
  end
end

def run_variant(variant, work)
  case variant
  when "unprofiled" then work.call
  when *FLOORS
    HookFloor.public_send(variant.sub(/\A(\w+)_hook\z/, 'start_\1'))
    begin
      work.call
    ensure
      HookFloor.stop
    end
  when "hakari" then Hakari.start(mode: :trace, measure: :wall) { work.call }
  when "ruby_prof" then RubyProf::Profile.new.profile { work.call } # RubyProf.profile is gone from ruby-prof 2
  end
end

# {full name => calls}
def call_counts(variant, result)
  if variant == "hakari"
    counts = Hash.new(0)
    result[:samples].each { |frames, _self, calls| counts[frames[0][0]] += calls }
    return counts
  end
  # ruby-prof's root, and the method it finds already running when it starts (the caller of
  # its profile method): neither is a call the workload made
  RubyProfNames.counts(result, skip: ["[global]#", "Object#run_variant"])
end

def child(workload_name, variant)
  case variant
  when *FLOORS then require "hookfloor"
  when "hakari" then require "hakari"
  when "ruby_prof" then require "ruby-prof"
  end
  work = workload(workload_name)
  GC.start
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  result = run_variant(variant, work)
  out = { seconds: Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0,
          cpu_seconds: Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c0 }
  if %w[hakari ruby_prof].include?(variant)
    # Reading the counts out is reporting, like a printer: timed apart, not charged.
    t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    out[:counts] = call_counts(variant, result)
    out[:by_definition] = RubyProfNames.by_definition(out[:counts]) if variant == "ruby_prof"
    out[:read_seconds] = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t1
    out[:unmatched_returns] = result.counters[:unmatched_returns] if variant == "hakari"
  end
  puts JSON.generate(out)
end

# ---- parent side: build, run the rounds, report ----

def build
  system(File.join(ROOT, "script", "build"), exception: true)
  BenchExt.build("hookfloor")
end

def run_child(workload_name, variant)
  cmd = [RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-I", FLOOR_DIR, __FILE__, "--child", workload_name, variant]
  out = IO.popen(cmd, &:read)
  abort "trace_overhead: #{workload_name}/#{variant} failed (exit #{$?.exitstatus})" unless $?.success?
  JSON.parse(out.lines.last, symbolize_names: true)
end

def median(xs) = xs.sort.then { |s| s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0 }

LABELS = { "unprofiled" => "unprofiled", "empty_hook" => "empty hook (floor)",
           "clock_hook" => "clock_gettime hook (floor)", "tsc_hook" => "rdtsc hook (floor)",
           "hakari" => "hakari trace (wall)", "ruby_prof" => "ruby-prof (wall)" }.freeze

# median over rounds of a run's time / the same round's unprofiled time
def slowdowns(runs, key)
  VARIANTS.to_h { |v| [v, median(runs[v].zip(runs["unprofiled"]).map { |r, u| r[key] / u[key] })] }
end

def report_times(title, runs)
  ratio = slowdowns(runs, :seconds)
  cpu = slowdowns(runs, :cpu_seconds)
  puts title
  puts format("  %-27s %9s %9s %9s %9s %8s", "variant", "median s", "min s", "max s", "× unprof", "added")
  VARIANTS.each do |v|
    secs = runs[v].map { |r| r[:seconds] }
    puts format("  %-27s %9.4f %9.4f %9.4f %8.2f× %7.2f×", LABELS[v], median(secs), secs.min, secs.max,
                ratio[v], ratio[v] - 1)
  end
  share = (ratio["hakari"] - 1) / (ratio["ruby_prof"] - 1)
  puts format("  hakari's added time / ruby-prof's: %.2f (target ≤ 0.50: %s); on process CPU time: %.2f",
              share, share <= 0.5 ? "met" : "NOT met", (cpu["hakari"] - 1) / (cpu["ruby_prof"] - 1))
  FLOORS.each do |floor|
    above = ratio["hakari"] - ratio[floor]
    puts format("  hakari above the %-27s %+.2f× (%+.0f%% of that floor's own added time)",
                "#{LABELS[floor].sub(' (floor)', '')}:", above, 100 * above / (ratio[floor] - 1))
  end
  read = ->(v) { median(runs[v].map { |r| r[:read_seconds] }) * 1000 }
  puts format("  not timed: reading the counts out afterwards took hakari %.1f ms, ruby-prof %.1f ms",
              read.call("hakari"), read.call("ruby_prof"))
end

def print_diff(title, h, r)
  all = (h.keys | r.keys).sort
  diff = all.reject { |k| h[k] == r[k] }
  puts "  #{title}: #{all.size - diff.size} of #{all.size} methods identical#{diff.empty? ? '' : '; the others:'}"
  diff.each { |k| puts format("    %-50s hakari %8s  ruby-prof %8s", k, h.fetch(k, "-"), r.fetch(k, "-")) }
end

# {method => the count most runs gave}. Counts can differ between processes
# without any profiler at fault: Ruby seeds its hash function per process, and
# small hashes keep a one-byte hint of each key's hash, so whether a lookup in a
# Regexp-keyed hash (kramdown's span pattern cache) meets a colliding hint and
# calls Regexp#eql? changes from run to run. Such differences are listed.
def modal_counts(runs, key)
  all = runs.map { |x| x[key].transform_keys(&:to_s) }
  all.flat_map(&:keys).uniq.to_h { |k| [k, all.map { |c| c.fetch(k, 0) }.tally.max_by { |_, n| n }.first] }
end

def report_counts(name, runs)
  h = modal_counts(runs["hakari"], :counts)
  r = modal_counts(runs["ruby_prof"], :counts)
  top = (r.sort_by { |k, c| [-c, k] }.first(TOP) + h.sort_by { |k, c| [-c, k] }.first(TOP)).map(&:first).uniq
  top = %w[Object#fib Integer#- Integer#+ Integer#<] | top if name == "fib"
  bad = top.reject { |k| h[k] == r[k] }
  puts "  call counts (each method's count in most runs), hakari vs ruby-prof, the top #{TOP} by calls of each " \
       "(#{top.size} methods): #{bad.empty? ? 'identical' : "#{bad.size} DIFFER"}"
  (bad + top.first(name == "fib" ? 4 : 5)).uniq.each do |k|
    puts format("    %-50s hakari %8s  ruby-prof %8s%s", k, h.fetch(k, "-"), r.fetch(k, "-"),
                h[k] == r[k] ? "" : "  DIFFERS")
  end
  print_diff("all methods, by name", h, r)
  print_diff("all methods, ruby-prof's aliases folded into their original names",
             h, modal_counts(runs["ruby_prof"], :by_definition))
  varied = %w[hakari ruby_prof].flat_map do |v|
    all = runs[v].map { |x| x[:counts].transform_keys(&:to_s) }
    all.flat_map(&:keys).uniq.filter_map do |k|
      per_run = all.map { |c| c.fetch(k, 0) }
      "    #{v} counted #{k} differently across runs: #{per_run.join(' ')}" if per_run.uniq.size > 1
    end
  end
  puts "  the same counts in every run: " \
       "#{varied.empty? ? 'yes' : 'no (per-process hash seeds change how many eql? calls hash lookups make)'}", *varied
  unmatched = runs["hakari"].map { |x| x[:unmatched_returns] }.max
  puts "  hakari unmatched returns: #{unmatched}" if unmatched.to_i.positive?
end

def parent
  abort "HAKARI_TRACE_RUNS must be at least 5" if RUNS < 5
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  build
  require "ruby-prof"
  require "kramdown"
  puts "trace overhead: #{RUBY_DESCRIPTION}; ruby-prof #{RubyProf::VERSION}; kramdown #{Kramdown::VERSION}"
  puts "  #{RUNS} rounds, fresh process per run, rotating order; #{`nproc`.strip} cores; " \
       "load average #{File.read('/proc/loadavg').split.first(3).join(' ')}"
  clocksource = File.read("/sys/devices/system/clocksource/clocksource0/current_clocksource").strip rescue "?"
  puts "  kramdown document: #{SECTIONS} sections, #{markdown_document(SECTIONS).bytesize} bytes; " \
       "kernel clocksource #{clocksource} (hakari's wall measure reads the TSC when it is tsc)"
  $stdout.flush
  runs = WORKLOADS.to_h { |w| [w, VARIANTS.to_h { |v| [v, []] }] }
  RUNS.times do |round|
    WORKLOADS.each do |w|
      VARIANTS.rotate(round).each { |v| runs[w][v] << run_child(w, v) }
    end
  end
  # every run's numbers, for a second look (tmp/ is not committed)
  raw = File.join(ROOT, "tmp", "trace_overhead.json")
  Dir.mkdir(File.dirname(raw)) unless Dir.exist?(File.dirname(raw))
  File.write(raw, JSON.generate(runs))
  WORKLOADS.each do |w|
    puts
    report_times(w == "fib" ? "fib(#{FIB_N})" : "kramdown to_html", runs[w])
    report_counts(w, runs[w])
  end
  puts
  puts format("load average at the end %s; whole bench took %.0f s; every run's numbers in %s",
              File.read("/proc/loadavg").split.first(3).join(" "), Process.clock_gettime(Process::CLOCK_MONOTONIC) - started,
              raw.delete_prefix("#{ROOT}/"))
end

if ARGV[0] == "--child"
  child(ARGV[1], ARGV[2])
else
  parent
end
