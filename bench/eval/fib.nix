# Workload: naive doubly-recursive Fibonacci of 27 (about 630,000 calls).
# Measures: function application, thunk creation/forcing, integer arithmetic
# and comparison, and call-stack handling. Result: 196418.
let
  fib = n: if n < 2 then n else fib (n - 1) + fib (n - 2);
in
fib 27
