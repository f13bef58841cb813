# frozen_string_literal: true

# Builds HookFloor, the do-nothing event hooks bench/trace_overhead.rb uses to
# measure what the VM itself charges a tracer before any profiler work.
# Built in place, on demand, by bench/trace_overhead.rb.
require "mkmf"

$CFLAGS << " -O2 -std=c11 -Wall -Wextra -Wno-unused-parameter"
have_header("ruby/debug.h") or abort "hookfloor needs ruby/debug.h"
create_makefile("hookfloor")
