# frozen_string_literal: true

require_relative "test_helper"
require "active_job"
require "hakari/active_job"

# Hakari::ActiveJob on ActiveJob's own async adapter (a real thread pool): jobs of known cost
# carry `job` and `queue` labels, which split the profile's time as the costs say.
class ActiveJobTest < Minitest::Test
  class ReportJob < ActiveJob::Base
    include Hakari::ActiveJob
    queue_as :reports
    def perform(ms) = Workloads.spin(ms / 1000.0)
  end

  class ExportJob < ActiveJob::Base
    include Hakari::ActiveJob
    def perform(ms) = Workloads.spin(ms / 1000.0)
  end

  def test_the_job_label_splits_the_time_as_the_jobs_cost
    ActiveJob::Base.logger = Logger.new(nil)
    adapter = ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 2, max_threads: 2)
    [ReportJob, ExportJob].each { |job| job.queue_adapter = adapter }
    profile = Hakari.start(mode: :cpu) do
      40.times do
        ReportJob.perform_later(6)
        ExportJob.perform_later(2)
      end
      adapter.shutdown(wait: true) # every job done
    end
    by_job = profile.label_values("job").reject { |v, _| v.nil? }
    assert_equal %w[ActiveJobTest::ExportJob ActiveJobTest::ReportJob], by_job.keys.sort
    share = by_job["ActiveJobTest::ReportJob"].fdiv(by_job.values.sum)
    assert_in_delta 0.75, share, 0.05, by_job.inspect
    assert_in_delta 320e6, by_job.values.sum, 80e6
    reports = profile.select(nil, nil, nil, "job=ActiveJobTest::ReportJob", false)
    assert_equal ["reports"], reports.label_values("queue").keys
    exports = profile.select(nil, nil, nil, "job=ActiveJobTest::ExportJob", false)
    assert_equal ["default"], exports.label_values("queue").keys
  end
end
