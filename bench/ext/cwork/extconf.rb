# frozen_string_literal: true

# Builds CWork, the C workloads the accuracy bench needs (busy and sleeping C calls
# whose true cost is known). Built in place by bench/build.
require "mkmf"

$CFLAGS << " -O2 -std=c11 -Wall -Wextra -Wno-unused-parameter"
have_header("ruby/thread.h") or abort "cwork needs ruby/thread.h"
create_makefile("cwork")
