# frozen_string_literal: true

# Loads hakari's C extension: the one a checkout built for this Ruby (lib/hakari/X.Y/hakari.so,
# script/build; several Rubies' builds live side by side), else the installed gem's
# (hakari/hakari.so).
begin
  require "hakari/#{RUBY_VERSION[/\A\d+\.\d+/]}/hakari"
rescue LoadError
  require "hakari/hakari"
end
