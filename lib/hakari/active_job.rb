# frozen_string_literal: true

require "hakari"

module Hakari
  # ActiveJob: every job's samples carry `job` (its class) and `queue` labels, whichever
  # adapter runs it.
  #
  #   class ApplicationJob < ActiveJob::Base
  #     include Hakari::ActiveJob
  #   end
  #
  # With Hakari::Sidekiq also in Sidekiq's chain, the inner labels are these: the same job
  # and queue names.
  module ActiveJob
    def self.included(base)
      base.around_perform do |job, block|
        Hakari.label(job: job.class.name.to_s, queue: job.queue_name.to_s) { block.call }
      end
    end
  end
end
