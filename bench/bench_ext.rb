# frozen_string_literal: true

require "fileutils"
require "rbconfig"

# The benches' C helpers (bench/ext/NAME: cwork, hookfloor, threadcpu), built for the Ruby that runs the
# bench, out of the source tree (tmp/bench-ext/X.Y/NAME), so that every Ruby lane keeps its own
# build beside the others: `BenchExt.load("cwork")` builds it when it is missing or older than
# its source, then requires it. Building needs that Ruby's headers (ruby-dev for Debian's).
module BenchExt
  ROOT = File.expand_path("..", __dir__)

  module_function

  def dir(name) = File.join(ROOT, "tmp", "bench-ext", RUBY_VERSION[/\A\d+\.\d+/], name)

  def build(name)
    src = File.join(ROOT, "bench", "ext", name)
    out = dir(name)
    so = File.join(out, "#{name}.#{RbConfig::CONFIG['DLEXT']}")
    newest = Dir[File.join(src, "*")].map { |f| File.mtime(f) }.max
    return out if File.exist?(so) && File.mtime(so) >= newest

    FileUtils.mkdir_p(out)
    ok = Dir.chdir(out) do
      system(RbConfig.ruby, File.join(src, "extconf.rb"), out: File::NULL) && system("make", "-s", "V=0", out: File::NULL)
    end
    abort "bench: building #{src} for Ruby #{RUBY_VERSION} failed (see #{out}/mkmf.log)" unless ok
    out
  end

  def load(name)
    $LOAD_PATH.unshift(build(name)) unless $LOAD_PATH.include?(dir(name))
    require name
  end

  # a peer profiler's gem, loaded if it installs on this Ruby (rperf needs 3.4's APIs)
  def peer?(name)
    require name
    true
  rescue LoadError
    false
  end
end
