# frozen_string_literal: true

require "hakari"

module Hakari
  # Sidekiq server middleware: every job's samples carry `job` (the worker class, or for an
  # ActiveJob the job class it wraps) and `queue` labels.
  #
  #   Sidekiq.configure_server do |config|
  #     config.server_middleware { |chain| chain.add Hakari::Sidekiq }
  #   end
  #
  # A label is a no-op while no profile runs: the middleware can stay in the chain for good.
  class Sidekiq
    # Sidekiq 7's middleware API (the module gives config access; not needed here)
    include ::Sidekiq::ServerMiddleware if defined?(::Sidekiq::ServerMiddleware)

    def call(job_instance, job_hash, queue, &block)
      name = job_hash["wrapped"] || job_hash["class"] || job_instance.class.name
      Hakari.label(job: name.to_s, queue: queue.to_s, &block)
    end
  end
end
