/* sampler_threads.c — the sampler's threads: their records and baseline
 * clocks, the hook that follows threads as they begin and end, and cpu mode's
 * opt-in per-thread CPU counters (HAKARI_CPU_CLOCK=perf, cpu_events.h), which
 * fall back to the paced worker (cpu_pacer.c) when they cannot be had.
 * See sampler_threads.h; all of it runs with the GVL.
 */
#include "sampler_threads.h"

#include <stdlib.h>
#include <sys/resource.h>

#include "buf.h"
#include "cpu_events.h"
#include "cpu_pacer.h"
#include "timer.h"

#define S hk_the_sampler

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
    t->event_fd = -1;
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

/* cpu mode: this thread's CPU time drives its samples (cpu_events.h) */
static void close_event(hk_thread *t)
{
    if (t->event_fd >= 0) S.open_events--;
    hk_cpu_event_close(t->event_fd);
    t->event_fd = -1;
}

/* A descriptor per live thread must never starve the program of descriptors:
 * past a quarter of its limit (or when a counter cannot be had), every counter
 * closes and the default paced worker takes over. */
static void fall_back_to_pacer(void)
{
    char err[128];
    for (size_t i = 0; i < S.nthreads; i++) close_event(&S.threads[i]);
    S.use_events = 0;
    hk_timer_stop();
    S.replaced_timer_cpu_ns += (uint64_t)hk_timer_cpu_ns();
    if (hk_cpu_pacer_start(err, sizeof(err)) < 0) S.dropped_count++; /* no clock: no samples */
}

static void open_event(hk_thread *t)
{
    if (!S.use_events || t->event_fd >= 0 || t->tid <= 0) return;
    if (S.open_events >= S.max_events) { fall_back_to_pacer(); return; }
    t->event_fd = hk_cpu_event_open(t->tid, S.period_ns, hk_timer_signal(), hk_timer_worker_tid());
    if (t->event_fd < 0) { fall_back_to_pacer(); return; }
    S.open_events++;
    if (t->event_fd < HK_EVENT_FDS) S.fd_clock[t->event_fd] = hk_thread_cpu_clock(t->tid);
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
        if (t) close_event(t); /* a counter per live thread, not per thread ever seen */
        return;
    }
    int64_t now = hk_clock_ns(hk_sampler_mode_clock());
    if (t) t->prev_clock = now;
    else t = hk_sampler_thread_add(th, now);
    if (t) {
        t->tid = hk_gettid();
        open_event(t);
    }
}

void hk_sampler_events_close(void)
{
    for (size_t i = 0; i < S.nthreads; i++) close_event(&S.threads[i]);
}

int hk_sampler_events_start(hk_timer_fire_fn fire, char *err, size_t errlen)
{
    S.fd_clock = calloc(HK_EVENT_FDS, sizeof(*S.fd_clock));
    struct rlimit lim;
    S.max_events = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? (int)(lim.rlim_cur / 4) : 256;
    if (S.max_events > HK_EVENT_FDS / 2) S.max_events = HK_EVENT_FDS / 2;
    if (!S.fd_clock || S.nthreads > (size_t)S.max_events || hk_timer_start(0, fire, err, errlen) < 0) return -1;
    if (hk_timer_signal() && hk_timer_worker_tid()) {
        /* a probe on this thread first: where perf events are refused, the paced worker from the start */
        int probe = hk_cpu_event_open(0, S.period_ns, hk_timer_signal(), hk_timer_worker_tid());
        if (probe >= 0) {
            hk_cpu_event_close(probe);
            S.use_events = 1;
            for (size_t i = 0; i < S.nthreads && S.use_events; i++) open_event(&S.threads[i]);
            return 0; /* events, or the paced worker that open_event fell back to */
        }
    }
    hk_timer_stop();
    S.replaced_timer_cpu_ns += (uint64_t)hk_timer_cpu_ns();
    return -1;
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
