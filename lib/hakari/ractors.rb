# frozen_string_literal: true

module Hakari
  # Ruby's allocation hooks are not safe beside Ractors (3.1 crashes in a new Ractor's first
  # allocation while a NEWOBJ hook is on; 3.4 now and then corrupts its heap while Ractors
  # allocate), so object and retained modes stop sampling as a Ractor starts, or at start when
  # one runs. Retained mode also lets go the objects it follows (they count as dropped): Ruby runs
  # the main Ractor's FREEOBJ hook for no GC that another Ractor's thread starts.
  module RactorHook
    SAID = {
      let_go: "hakari: a Ractor started: the retained-mode profile stops here and lets its objects go (dropped_count): " \
              "Ruby's allocation hooks are not safe beside Ractors",
      hooks_off: "hakari: a Ractor started: object sampling stops here: Ruby's allocation hooks are not safe beside Ractors",
    }.freeze

    def new(*args, **kwargs, &block)
      said = SAID[Native.ractor_starting(1)]
      warn said if said
      super
    end

    # at start: Ractors that run already
    def self.check_running
      return unless defined?(Ractor) && Ractor.count > 1

      said = SAID[Native.ractor_starting(Ractor.count - 1)]
      warn said.sub("a Ractor started", "Ractors run") if said
    end
  end
end

Ractor.singleton_class.prepend(Hakari::RactorHook) if defined?(Ractor)
