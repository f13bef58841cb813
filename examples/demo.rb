# frozen_string_literal: true

# The quick start's example program: a little of everything a profile should tell apart —
# a recursive CPU-bound method, allocation-heavy string work, and a sleep.

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

def render_rows(count)
  (1..count).map { |i| "row #{i}: #{'*' * (i % 40)}" }.join("\n")
end

def wait_for_io
  sleep 0.05
end

3.times do
  fib(24)
  render_rows(20_000)
  wait_for_io
end
puts "demo done"
