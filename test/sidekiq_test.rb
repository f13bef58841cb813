# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/servers"

# Hakari::Sidekiq in a real Sidekiq server, with a real redis-server started here on
# 127.0.0.1 (Debian's redis-server): jobs of known cost, and the `job` label splits the
# profile's time as their costs say. (Sidekiq's ActiveJob adapter needs Rails itself:
# Hakari::ActiveJob is tested on ActiveJob's async adapter, test/active_job_test.rb.)
class SidekiqTest < Minitest::Test
  APP = File.expand_path("fixtures/sidekiq/app.rb", __dir__)
  COSTS_MS = { "HeavyJob" => 6, "LightJob" => 2, "ReportJob" => 4 }.freeze
  QUEUES = { "HeavyJob" => "default", "LightJob" => "low", "ReportJob" => "reports" }.freeze
  JOBS_EACH = 60

  def setup
    @dir = Dir.mktmpdir
    @redis_port = Servers.free_port
    @redis = spawn("redis-server", "--port", @redis_port.to_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--dir", @dir, out: File.join(@dir, "redis.log"), err: [:child, :out])
    Servers.wait_for_port(@redis_port, File.join(@dir, "redis.log"))
  end

  def teardown
    Servers.stop(@sidekiq) if @sidekiq
    Servers.stop(@redis) if @redis
    FileUtils.rm_rf(@dir)
  end

  def redis_url = "redis://127.0.0.1:#{@redis_port}/0"

  # runs Ruby code with the app loaded as a Sidekiq client; its stdout
  def client(code)
    out = IO.popen({ "REDIS_URL" => redis_url }, [RbConfig.ruby, "-I#{ENGINE_LIB}", "-r#{APP}", "-e", code], err: [:child, :out], &:read)
    assert $?.success?, out
    out
  end

  def test_the_job_label_splits_the_time_as_the_jobs_cost
    client(<<~RUBY)
      #{JOBS_EACH}.times do
        HeavyJob.perform_async
        LightJob.perform_async
        ReportJob.perform_async(4)
      end
    RUBY
    out = File.join(@dir, "sidekiq.pb.gz")
    log = File.join(@dir, "sidekiq.log")
    @sidekiq = spawn({ "REDIS_URL" => redis_url, "HAKARI_TEST_OUTPUT" => out },
                     RbConfig.ruby, "-I#{ENGINE_LIB}", "-e", 'load Gem.bin_path("sidekiq", "sidekiq")', "--",
                     "-r", APP, "-c", "2", "-q", "default", "-q", "low", "-q", "reports", out: log, err: [:child, :out])
    done = 3 * JOBS_EACH
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
    processed = 0
    until processed >= done
      flunk "#{processed} of #{done} jobs after 60 s:\n#{File.read(log)}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.2
      processed = Integer(client("require %q(sidekiq/api); print Sidekiq::Stats.new.processed").lines.last)
    end
    status = Servers.stop(@sidekiq)
    @sidekiq = nil
    assert status&.success?, "sidekiq exits 0 on TERM: #{status.inspect}\n#{File.read(log)}"
    profile = Hakari::Native.read_file(out)
    by_job = profile.label_values("job").reject { |v, _| v.nil? }
    assert_equal COSTS_MS.keys.sort, by_job.keys.sort
    assert_equal QUEUES.values.sort, profile.label_values("queue").keys.compact.sort
    labelled = by_job.values.sum
    COSTS_MS.each do |job, ms|
      expected = ms.fdiv(COSTS_MS.values.sum)
      assert_in_delta expected, by_job[job].fdiv(labelled), 0.04, "#{job}: #{by_job.transform_values { |w| (w / 1e6).round(1) }} ms"
    end
    assert_in_delta JOBS_EACH * COSTS_MS.values.sum * 1e6, labelled, 0.25 * JOBS_EACH * COSTS_MS.values.sum * 1e6
    # each job's samples carry its own queue
    QUEUES.each do |job, queue|
      assert_equal [queue], profile.select(nil, nil, nil, "job=#{job}", false).label_values("queue").keys, job
    end
  end
end
