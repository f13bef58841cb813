# frozen_string_literal: true

require_relative "test_helper"
require "active_job"
require "hakari/active_job"

# Hakari::ActiveJob on ActiveJob's own async adapter (a real thread pool): jobs of known cost
# carry `job` and `queue` labels, which split the profile's time as the costs say.
class ActiveJobTest < Minitest::Test
  # each job's CPU, measured inside Hakari::ActiveJob's labelled span (its around_perform is the
  # outer one): the truth the labels are compared with, ActiveJob's own work in a job included
  CPU = Hash.new(0)
  LOCK = Mutex.new
  module MeasuredCPU
    def self.included(job)
      job.around_perform do |j, block|
        t0 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
        block.call
        spent = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - t0
        LOCK.synchronize { CPU[j.class.name] += spent }
      end
    end
  end

  class ReportJob < ActiveJob::Base
    include Hakari::ActiveJob
    include MeasuredCPU
    queue_as :reports
    def perform(ms) = Workloads.spin(ms / 1000.0)
  end

  class ExportJob < ActiveJob::Base
    include Hakari::ActiveJob
    include MeasuredCPU
    def perform(ms) = Workloads.spin(ms / 1000.0)
  end

  def test_the_job_label_splits_the_time_as_the_jobs_cost
    ActiveJob::Base.logger = Logger.new(nil)
    adapter = ActiveJob::QueueAdapters::AsyncAdapter.new(min_threads: 2, max_threads: 2)
    [ReportJob, ExportJob].each { |job| job.queue_adapter = adapter }
    CPU.clear
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
    truth = CPU["ActiveJobTest::ReportJob"].fdiv(CPU.values.sum) # 6 : 2 ms of spins, and ActiveJob's own
    assert_in_delta truth, share, 0.05, "#{by_job} for #{CPU}"
    assert_in_delta CPU.values.sum, by_job.values.sum, CPU.values.sum * 0.15, "#{by_job} for #{CPU}"
    reports = profile.select(nil, nil, nil, "job=ActiveJobTest::ReportJob", false)
    assert_equal ["reports"], reports.label_values("queue").keys
    exports = profile.select(nil, nil, nil, "job=ActiveJobTest::ExportJob", false)
    assert_equal ["default"], exports.label_values("queue").keys
  end
end
