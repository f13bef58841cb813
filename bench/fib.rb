# frozen_string_literal: true

# A recursive fib: the hot method of the pprof acceptance test and the overhead bench.
def fib(n)
  return n if n < 2

  fib(n - 1) + fib(n - 2)
end

puts fib(Integer(ARGV[0] || 30))
