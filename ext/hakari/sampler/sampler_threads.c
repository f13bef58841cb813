/* sampler_threads.c — the sampler's threads: their records and baseline
 * clocks, and the hook that follows threads as they begin and end (and tells
 * cpu mode's clock, whose per-thread counters follow them too). All of it
 * runs with the GVL (sampler_int.h).
 */
#include "sampler_int.h"

#include "buf.h"
#include "cpu_clock.h"
#include "cpu_events.h"

static int hook_installed;

hk_thread *hk_sampler_thread_find(VALUE th)
{
    uint32_t i;
    return hk_u64_map_get(&S.thread_ids, (uint64_t)th, &i) ? &S.threads[i] : NULL;
}

hk_thread *hk_sampler_thread_add(VALUE th, int64_t prev_clock)
{
    if (hk_array_grow((void **)&S.threads, &S.threads_cap, S.nthreads + 1, sizeof(*S.threads)) < 0 ||
        hk_u64_map_put(&S.thread_ids, (uint64_t)th, (uint32_t)S.nthreads) < 0)
        return NULL;
    hk_thread *t = &S.threads[S.nthreads++];
    t->thread = th;
    t->seq = 0; /* numbered at its first sample, so sequence numbers say "first seen" order */
    t->prev_clock = prev_clock;
    t->clock = CLOCK_MONOTONIC;
    t->has_clock = 0;
    t->tid = 0;
    t->vm_thread = hk_stack_walk_thread_of(th);
    t->spot_valid = 0;
    if (t->vm_thread) hk_sampler_thread_flaggable(t);
    return t;
}

void hk_sampler_thread_flaggable(const hk_thread *t)
{
    uint32_t n = S.nflag;
    if (n >= HK_FLAG_THREADS) return; /* the rest wait for a job that some thread runs */
    S.flag_threads[n] = t->vm_thread;
    __atomic_store_n(&S.nflag, n + 1, __ATOMIC_RELEASE); /* the entry first: the worker reads up to nflag */
}

/* Thread#native_thread_id (Ruby 3.1+), or 0 */
static int native_tid(VALUE th)
{
    static ID id_native;
    if (!id_native) id_native = rb_intern("native_thread_id");
    if (!rb_respond_to(th, id_native)) return 0;
    VALUE tid = rb_funcall(th, id_native, 0);
    return FIXNUM_P(tid) ? FIX2INT(tid) : 0;
}

/* another thread's CPU time, through the clock Linux derives from its tid */
static int other_thread_cpu_ns(int tid, int64_t *out)
{
    int64_t v = tid > 0 ? hk_clock_ns(hk_thread_cpu_clock(tid)) : -1;
    if (v < 0) return -1;
    *out = v;
    return 0;
}

/* Threads alive at start get a baseline clock now, so their first sample
 * weighs only time spent since start. */
static void register_existing_threads(void)
{
    VALUE cur = rb_thread_current();
    VALUE list = rb_funcall(rb_cThread, rb_intern("list"), 0);
    hk_thread *t = hk_sampler_thread_add(cur, hk_clock_ns(hk_sampler_mode_clock()));
    if (t) t->tid = hk_gettid();
    for (long i = 0; i < RARRAY_LEN(list); i++) {
        VALUE th = RARRAY_AREF(list, i);
        if (th == cur) continue;
        int64_t prev = S.start_mono_ns;
        int tid = native_tid(th);
        if (S.cfg.mode == HK_MODE_CPU && other_thread_cpu_ns(tid, &prev) < 0)
            prev = -1; /* unknown: the first sample will weigh one nominal interval */
        t = hk_sampler_thread_add(th, prev);
        if (t) t->tid = tid;
    }
}

/* RUBY_EVENT_THREAD_BEGIN, in the new thread: its baseline is its clock now
 * (a native thread may be reused from Ruby's cache, so its CPU clock is not 0),
 * and in cpu mode its own counter. RUBY_EVENT_THREAD_END: the counter goes. */
static void thread_begin_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
    if (!S.running) return;
    VALUE th = rb_thread_current();
    hk_thread *t = hk_sampler_thread_find(th);
    if (ev & RUBY_EVENT_THREAD_END) {
        if (t) hk_cpu_clock_thread_end(t->tid);
        return;
    }
    int64_t now = hk_clock_ns(hk_sampler_mode_clock());
    if (t) t->prev_clock = now;
    else t = hk_sampler_thread_add(th, now);
    if (t) {
        t->tid = hk_gettid();
        hk_cpu_clock_thread_begin(t->tid);
    }
}

void hk_sampler_threads_clock(void)
{
    for (size_t i = 0; i < S.nthreads; i++) hk_cpu_clock_thread_begin(S.threads[i].tid);
}

void hk_sampler_threads_start(void)
{
    register_existing_threads();
    if (!hook_installed) {
        rb_add_event_hook(thread_begin_hook, RUBY_EVENT_THREAD_BEGIN | RUBY_EVENT_THREAD_END, Qnil);
        hook_installed = 1;
    }
}

void hk_sampler_threads_stop(void)
{
    if (hook_installed) {
        rb_remove_event_hook(thread_begin_hook);
        hook_installed = 0;
    }
}
