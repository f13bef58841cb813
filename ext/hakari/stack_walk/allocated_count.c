/* allocated_count.c — Ruby's count of allocated objects, less what a GC adds to it
 * (allocated_count.h). */
#include "allocated_count.h"

#include "clocks.h"

#include <ruby/ruby.h>
#include <ruby/debug.h>
#include <ruby/version.h>

/* A behaviour of the GC, not an API: the version says it (sampler_states.c does the same). */
#if RUBY_API_VERSION_MAJOR > 3 || (RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR >= 2)
#define HK_COUNT_GC_HOOK 1
#endif

static struct {
    VALUE key;           /* :total_allocated_objects, an interned Symbol: never freed */
    int readers;         /* readers begun less readers ended */
    uint64_t in_gc;      /* what Ruby's count grew by inside GCs while the hook was on */
    uint64_t entered;    /* Ruby's count as the current GC began; 0: not in one */
    int64_t gc_ns;       /* time inside GCs while the hook was on */
    int64_t entered_at;  /* the time the current GC began */
    uint64_t notify_at;  /* hk_allocated_count_notify's count, and what it calls */
    void (*reached)(void);
#ifdef HK_COUNT_GC_HOOK
    VALUE hook;          /* the TracePoint on the GC's entry and exit, marked by Ruby */
#endif
} C;

static uint64_t ruby_count(void)
{
    if (!C.key) C.key = ID2SYM(rb_intern("total_allocated_objects"));
    return (uint64_t)rb_gc_stat(C.key);
}

#ifdef HK_COUNT_GC_HOOK
/* ctx: GVL, inside the GC: nothing may be allocated, and reading the count allocates nothing
 * (its Symbol was made by the reader's begin) */
static void gc_hook(VALUE tpval, void *data)
{
    (void)data;
    if (rb_tracearg_event_flag(rb_tracearg_from_tracepoint(tpval)) == RUBY_INTERNAL_EVENT_GC_ENTER) {
        C.entered = ruby_count();
        C.entered_at = hk_clock_ns(CLOCK_MONOTONIC);
        if (C.reached && C.entered - C.in_gc >= C.notify_at) {
            void (*reached)(void) = C.reached;
            C.reached = NULL;
            reached();
        }
    } else if (C.entered) {
        uint64_t now = ruby_count();
        if (now > C.entered) C.in_gc += now - C.entered;
        int64_t t = hk_clock_ns(CLOCK_MONOTONIC);
        if (t > C.entered_at) C.gc_ns += t - C.entered_at;
        C.entered = 0;
    }
}
#endif

static void begin_reading(void)
{
    (void)ruby_count(); /* the Symbol and the GC's stat names made now, outside any GC */
    if (C.readers++ > 0) return;
    C.entered = 0;
#ifdef HK_COUNT_GC_HOOK
    if (!C.hook) {
        C.hook = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_GC_ENTER | RUBY_INTERNAL_EVENT_GC_EXIT, gc_hook, NULL);
        rb_gc_register_mark_object(C.hook);
    }
    rb_tracepoint_enable(C.hook);
#endif
}

static void end_reading(void)
{
    if (C.readers <= 0 || --C.readers > 0) return;
    C.reached = NULL;
#ifdef HK_COUNT_GC_HOOK
    if (C.hook) rb_tracepoint_disable(C.hook);
#endif
    C.entered = 0;
}

void hk_allocated_count_read(int *reading, int on)
{
    if (on == *reading) return;
    *reading = on;
    (on ? begin_reading : end_reading)();
}

uint64_t hk_allocated_count(void) { return ruby_count() - C.in_gc; }

int64_t hk_allocated_count_gc_ns(void) { return C.gc_ns; }

void hk_allocated_count_notify(uint64_t at, void (*reached)(void))
{
    C.notify_at = at;
    C.reached = reached;
}
