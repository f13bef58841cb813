/* hookfloor.c — the floor under any tracing profiler.
 *
 * HookFloor.start_empty installs a hook that does nothing on call, return,
 * c_call and c_return, through the same API and event set hakari's tracer uses
 * (the non-raw rb_add_event_hook). What a program loses under it is what the VM
 * charges just to dispatch those events. HookFloor.start_clock adds the one
 * thing every timing tracer must do per event, read a clock
 * (clock_gettime(CLOCK_MONOTONIC)), so the gap between it and a profiler is the
 * profiler's own bookkeeping. HookFloor.start_tsc reads the CPU's time-stamp
 * counter instead: the cheaper clock hakari's wall measure uses where the kernel
 * trusts the TSC. Off x86 it falls back to clock_gettime and HookFloor.tsc? is
 * false. HookFloor.stop removes whichever is installed.
 * ctx: GVL (the Ruby methods, and the hooks the VM calls).
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#include <ruby.h>
#include <ruby/debug.h>

#define EVENTS (RUBY_EVENT_CALL | RUBY_EVENT_RETURN | RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN)

/* volatile so the compiler cannot drop the clock read as dead code */
static volatile long sink;
static rb_event_hook_func_t installed;

static void empty_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
}

static void clock_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sink = ts.tv_nsec;
}

static void tsc_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
#if HAVE_TSC
    sink = (long)__rdtsc();
#else
    clock_hook(ev, data, self, mid, klass);
#endif
}

static VALUE start(rb_event_hook_func_t hook)
{
    if (installed) rb_raise(rb_eRuntimeError, "HookFloor: a hook is already installed; call HookFloor.stop first");
    installed = hook;
    rb_add_event_hook(hook, EVENTS, Qnil);
    return Qnil;
}

static VALUE start_empty(VALUE mod) { return start(empty_hook); }
static VALUE start_clock(VALUE mod) { return start(clock_hook); }
static VALUE start_tsc(VALUE mod) { return start(tsc_hook); }
static VALUE tsc_p(VALUE mod) { return HAVE_TSC ? Qtrue : Qfalse; }

static VALUE stop(VALUE mod)
{
    if (installed) rb_remove_event_hook(installed);
    installed = NULL;
    return Qnil;
}

void Init_hookfloor(void)
{
    VALUE m = rb_define_module("HookFloor");
    rb_define_module_function(m, "start_empty", start_empty, 0);
    rb_define_module_function(m, "start_clock", start_clock, 0);
    rb_define_module_function(m, "start_tsc", start_tsc, 0);
    rb_define_module_function(m, "tsc?", tsc_p, 0);
    rb_define_module_function(m, "stop", stop, 0);
}
