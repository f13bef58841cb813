# frozen_string_literal: true

require_relative "lib/hakari/version"

Gem::Specification.new do |s|
  s.name = "hakari"
  s.version = Hakari::VERSION
  s.summary = "A Ruby profiler with a C engine: time-weighted sampling, pprof/collapsed/text, a perf-style CLI"
  s.description = "hakari samples Ruby programs with samples weighted by real clock deltas, " \
                  "keeps executing line numbers, and writes pprof, collapsed stacks and text reports."
  s.authors = ["hakari developers"]
  s.license = "MIT"
  s.required_ruby_version = ">= 3.1"
  s.files = Dir["lib/**/*.rb", "ext/hakari/**/*.{c,h,rb,html}", "exe/*", "examples/*.rb", "README.md", "LICENSE"]
  s.bindir = "exe"
  s.executables = ["hakari"]
  s.extensions = ["ext/hakari/extconf.rb"]
  s.require_paths = ["lib"]
end
