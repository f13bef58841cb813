# frozen_string_literal: true

module Hakari
  # Retained mode follows objects until the main Ractor's FREEOBJ hook sees them freed; Ruby runs
  # no such hook for a GC that another Ractor's thread starts. So as a Ractor starts, a
  # retained-mode profile lets its objects go (they count as dropped) and follows no more. Ruby
  # 3.1 crashes in a new Ractor's first allocation while a NEWOBJ hook is on: there object and
  # retained modes stop sampling first.
  module RactorHook
    SAID = {
      let_go: "hakari: a Ractor started: the retained-mode profile follows no objects from here (dropped_count)",
      hooks_off: "hakari: a Ractor started: on Ruby 3.1 object sampling stops here (its NEWOBJ hook crashes a new Ractor)",
    }.freeze

    def new(*args, **kwargs, &block)
      said = SAID[Native.ractor_starting(true, 1)]
      warn said if said
      super
    end

    # at start: Ractors that run already
    def self.check_running
      return unless defined?(Ractor) && Ractor.count > 1

      said = SAID[Native.ractor_starting(false, Ractor.count - 1)]
      warn said.sub("a Ractor started", "Ractors run") if said
    end
  end
end

Ractor.singleton_class.prepend(Hakari::RactorHook) if defined?(Ractor)
