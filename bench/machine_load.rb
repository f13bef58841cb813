# frozen_string_literal: true

require "etc"

# A loaded machine for a bench: HAKARI_BENCH_LOAD busy processes (`sh -c 'while :; do :; done'`)
# beside it, a number or "cores" for one per core, killed at exit. A loaded server is the normal
# case in production, and what a profiler's clocks must survive.
module MachineLoad
  module_function

  def count
    spec = ENV.fetch("HAKARI_BENCH_LOAD", "0")
    return Etc.nprocessors if spec == "cores"

    Integer(spec)
  rescue ArgumentError
    abort "HAKARI_BENCH_LOAD=#{spec.inspect}: expected a number of busy processes or \"cores\""
  end

  # Starts them; returns how many run.
  def start
    @pids = Array.new(count) { Process.spawn("sh", "-c", "while :; do :; done", pgroup: true) }
    at_exit { stop }
    @pids.size
  end

  def stop
    @pids.each { |pid| Process.kill(:KILL, -pid) rescue nil } # rubocop:disable Style/RescueModifier
    @pids.clear
  end

  def describe(n) = n.zero? ? "quiet machine" : "#{n} busy processes beside it (#{Etc.nprocessors} cores)"
end
