# frozen_string_literal: true

require "socket"
require "timeout"

# Real servers started by the integration tests on 127.0.0.1, each on a free port, bounded in
# time, and stopped (then killed if need be) whatever the test's outcome.
module Servers
  module_function

  def free_port
    s = TCPServer.new("127.0.0.1", 0)
    s.addr[1]
  ensure
    s&.close
  end

  # waits until something accepts on port, or raises with the server's log
  def wait_for_port(port, log, seconds: 30)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    loop do
      TCPSocket.new("127.0.0.1", port).close
      return
    rescue SystemCallError
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        raise "nothing listens on 127.0.0.1:#{port} after #{seconds} s:\n#{File.exist?(log) ? File.read(log) : '(no log)'}"
      end
      sleep 0.05
    end
  end

  # TERM, then KILL after `grace` seconds; returns the exit status
  def stop(pid, grace: 20)
    Process.kill(:TERM, pid)
    Timeout.timeout(grace) { Process.wait2(pid)[1] }
  rescue Timeout::Error
    Process.kill(:KILL, pid)
    Process.wait2(pid)[1]
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  # a program from an installed gem (puma, sidekiq), run by this Ruby
  def gem_command(gem, exe) = [RbConfig.ruby, "-e", "load Gem.bin_path(#{gem.inspect}, #{exe.inspect})", "--"]
end
