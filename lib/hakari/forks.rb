# frozen_string_literal: true

module Hakari
  # What a forked child does with the profile running in its parent (Hakari.start's fork:).
  # :stop, the default: the child does not profile (it may start its own). :inherit: the child
  # starts a profile of its own with the parent's settings at once, as it is forked (puma's
  # cluster workers, forked after boot), and writes it at its exit to the parent's output path
  # with its pid before the extensions (out.pb.gz -> out.12345.pb.gz).
  module Forks
    CHOICES = %i[stop inherit].freeze

    module_function

    def check(value)
      return value if CHOICES.include?(value)

      raise ArgumentError, "invalid fork: #{value.inspect} (expected :stop or :inherit)"
    end

    # path with pid before its extensions; after the name for callgrind's callgrind.out.NAME
    def child_path(path, pid)
      dir, base = File.split(path)
      return "#{path}.#{pid}" if base.start_with?("callgrind.out")

      name, dot, ext = base.partition(".")
      File.join(dir, dot.empty? ? "#{name}.#{pid}" : "#{name}.#{pid}.#{ext}")
    end
  end

  # Process._fork (Ruby 3.1+) is what fork, Process.fork and Kernel#fork all call
  module ForkHook
    def _fork
      pid = super
      Hakari.send(:forked_child) if pid.zero?
      pid
    end
  end
end

Process.singleton_class.prepend(Hakari::ForkHook) if Process.respond_to?(:_fork)
