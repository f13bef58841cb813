# frozen_string_literal: true

module Hakari
  VERSION = "0.1.0"
end
