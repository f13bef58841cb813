# frozen_string_literal: true

# Build configuration for hakari's C extension. Capabilities are detected by
# probing headers and functions, never by RUBY_VERSION, so a Ruby that back- or
# forward-ports an API gets the right code path.
require "mkmf"

abort "hakari needs zlib (Debian: zlib1g-dev)" unless have_header("zlib.h") && have_library("z", "deflateInit2_")
have_library("pthread")
have_library("rt", "timer_create")

have_func("rb_postponed_job_preregister", "ruby/debug.h")
have_func("rb_postponed_job_trigger", "ruby/debug.h")
have_func("rb_postponed_job_register_one", "ruby/debug.h")
have_func("rb_profile_frame_full_label", "ruby/debug.h")
have_func("timer_create", "time.h")
have_const("SIGEV_THREAD_ID", "signal.h")
have_func("gettid", "unistd.h")
have_func("process_vm_readv", "sys/uio.h") # the worker's fault-free read of a thread's leaf frame (stack_walk.h)
have_func("pthread_getcpuclockid", "pthread.h")
have_func("rb_class_attached_object", "ruby.h")
# retained mode's bytes (sampler/sampler_objects.c): what ObjectSpace.memsize_of calls, exported by
# libruby though declared in no public header; without it retained objects have no bytes
have_func("rb_obj_memsize_of")
# object mode's bytes: the slot an object takes in Ruby's heap (several sizes from 3.2 on),
# exported by libruby though declared in no public header; without it every slot is 40 bytes
have_func("rb_gc_obj_slot_size")
# GVL states in wall mode (sampler/sampler_states.c): thread event hooks whose data names the
# thread, and a slot per thread for its record (3.3+)
have_func("rb_internal_thread_add_event_hook", "ruby/thread.h")
have_func("rb_internal_thread_specific_get", "ruby/thread.h")

# The control-frame stack walker (stack_walk/stack_walk_vm.c) reads a Ruby
# version's private frame layout, one header per version (stack_walk/vm_layout_*.h).
# A layout has no symbol to probe, so this one check goes by the API version; the
# private symbols the walker calls must also link, and at run time it is checked
# against rb_profile_frames at every start. Any other Ruby uses rb_profile_frames.
VM_LAYOUTS = {
  [3, 1] => "extern __thread void *ruby_current_ec;\n" \
            "int main(void) { return ruby_current_ec != 0 && rb_iseq_line_no(0, 0) == 1; }",
  [3, 3] => "int main(void) { return rb_iseq_line_no(0, 0) == 1; }",
  [3, 4] => "int main(void) { return rb_iseq_line_no(0, 0) == 1; }",
}.freeze
api = RbConfig::CONFIG.values_at("MAJOR", "MINOR").map(&:to_i)
if ENV["HAKARI_STACK_WALK"] != "ruby" && (probe = VM_LAYOUTS[api])
  src = <<~C
    #include <ruby.h>
    #include <ruby/version.h>
    #if !(RUBY_API_VERSION_MAJOR == #{api[0]} && RUBY_API_VERSION_MINOR == #{api[1]})
    #error control-frame layout not known for this Ruby
    #endif
    unsigned int rb_iseq_line_no(const void *iseq, size_t pos);
    #{probe}
  C
  $defs << "-DHK_VM_LAYOUT=#{api.join}" if checking_for("Ruby #{api.join('.')}'s control frames") { try_link(src) }
end

# the gem's version, from its one source, for the profiles' comments
require_relative "../../lib/hakari/version"
$defs << %(-DHK_VERSION=\\"#{Hakari::VERSION}\\")

$CFLAGS << " -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter"
# Only Init_hakari is the library's interface. Hidden, the other functions are
# called directly, not through the PLT: on the sampling path, which runs once a
# millisecond with its code and the GOT out of the cache, each PLT call is
# another two lines to load.
$CFLAGS << " -fvisibility=hidden" if try_cflags("-fvisibility=hidden")
$CFLAGS << " -Werror" if ENV["HAKARI_WERROR"] == "1"
$CFLAGS << " #{ENV['HAKARI_EXTRA_CFLAGS']}" if ENV["HAKARI_EXTRA_CFLAGS"]
# script/test's second pass over the engine's Ruby tests (Ruby itself is not
# instrumented: the test preloads libasan)
if ENV["HAKARI_SANITIZE"] == "1"
  sanitize = " -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  $CFLAGS << sanitize
  $LDFLAGS << sanitize
end

# The sources live in one folder per layer (ext/hakari/README.md); mkmf builds from them all,
# its objects side by side in one build folder, so no two sources may share a base name.
LAYERS = %w[core format clock stack_walk sampler tracer].freeze
sources = Dir[File.join(__dir__, "*.c")] + LAYERS.flat_map { |d| Dir[File.join(__dir__, d, "*.c")] }
names = sources.map { |f| File.basename(f) }
twice = names.tally.select { |_, n| n > 1 }.keys
abort "hakari: sources share a base name, which one build folder cannot hold: #{twice.join(', ')}" if twice.any?
# the flame graph's page (format/flamegraph.html) becomes a C string at build time (rule below)
$srcs = names + ["flamegraph_html.c"]
$VPATH.concat(LAYERS.map { |d| "$(srcdir)/#{d}" })
$INCFLAGS << LAYERS.map { |d| " -I$(srcdir)/#{d}" }.join

# each object's header dependencies, so that a changed header rebuilds what includes it
$CFLAGS << " -MMD -MP"

create_makefile("hakari/hakari")
File.open("Makefile", "a") do |f|
  f.puts "-include $(OBJS:.o=.d)"
  f.puts "flamegraph_html.c: $(srcdir)/format/flamegraph.html $(srcdir)/format/embed_html.rb"
  f.puts "\t$(RUBY) $(srcdir)/format/embed_html.rb $(srcdir)/format/flamegraph.html $@"
end
