# frozen_string_literal: true

# Builds ThreadCPU, each Ruby thread's own CPU under M:N threads, for bench/accuracy.rb's truth.
# Built in place, on demand, by bench/bench_ext.rb. Needs Ruby 3.3's thread-specific slots; on an
# older Ruby it builds a module whose `available?` is false.
require "mkmf"

$CFLAGS << " -O2 -std=c11 -Wall -Wextra -Wno-unused-parameter"
have_header("ruby/thread.h") or abort "threadcpu needs ruby/thread.h"
have_func("rb_internal_thread_specific_get", "ruby/thread.h")
create_makefile("threadcpu")
