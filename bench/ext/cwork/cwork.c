/*
 * CWork: C workloads with a known cost, for bench/accuracy.rb.
 *
 *   CWork.busy(ms)          spins on this thread's CPU clock, holding the GVL
 *   CWork.sleep_hold(ms)    sleeps holding the GVL (no safepoint until it returns)
 *   CWork.sleep_release(ms) sleeps with the GVL released (rb_thread_call_without_gvl)
 *   CWork.clock_cost_ns(id) mean cost of one clock_gettime(id), for bench/overhead.rb
 *   CWork.wake_cost_us(n)   CPU time one thread spends per wake-up when it does nothing
 *                           but sleep 1 ms, n times (GVL released): the floor under any
 *                           timer thread's cost on this machine, for bench/overhead.rb
 *   CWork.sleeper_start / CWork.sleeper_stop
 *                           a bare thread that sleeps 1 ms at a time until stopped: a
 *                           setup of bench/overhead.rb, for what such a thread's wake-ups
 *                           alone cost the program running beside it
 *
 * None of them reaches a Ruby safepoint while it runs, so a sampler can only see them
 * through samples deferred to the moment they return: that is exactly what the bench
 * wants to measure. Sleeps use an absolute deadline so that a profiler's timer signal
 * (stackprof's SIGALRM interrupts syscalls) cannot shorten or lengthen them.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <ruby.h>
#include <ruby/thread.h>

static uint64_t
clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t
ms_to_ns(VALUE ms)
{
    double v = NUM2DBL(ms);
    if (!(v >= 0 && v < 3.6e6)) rb_raise(rb_eArgError, "ms must be in 0...3600000, got %f", v);
    return (uint64_t)(v * 1e6);
}

/* Sleeps until now + ns on CLOCK_MONOTONIC, restarting after signals. */
static void
sleep_ns(uint64_t ns)
{
    uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + ns;
    struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static VALUE
busy(VALUE self, VALUE ms)
{
    uint64_t deadline = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ms_to_ns(ms);
    volatile uint64_t sink = 0;
    while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < deadline)
        for (int i = 0; i < 1000; i++) sink += (uint64_t)i;
    return Qnil;
}

static VALUE
sleep_hold(VALUE self, VALUE ms)
{
    sleep_ns(ms_to_ns(ms));
    return Qnil;
}

static void *
sleep_nogvl(void *arg)
{
    sleep_ns(*(uint64_t *)arg);
    return NULL;
}

static VALUE
sleep_release(VALUE self, VALUE ms)
{
    uint64_t ns = ms_to_ns(ms);
    /* no unblocking function: the sleep is short and always ends by itself */
    rb_thread_call_without_gvl(sleep_nogvl, &ns, NULL, NULL);
    return Qnil;
}

static VALUE
clock_cost_ns(VALUE self, VALUE id)
{
    enum { N = 100000 };
    clockid_t c = (clockid_t)NUM2INT(id);
    struct timespec ts;
    uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++) clock_gettime(c, &ts);
    return DBL2NUM((double)(clock_ns(CLOCK_MONOTONIC) - t0) / N);
}

struct wake { int n; double us_per_wake; };

static void *
wake_loop(void *arg)
{
    struct wake *w = arg;
    struct timespec ms = { 0, 1000000 };
    uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < w->n; i++) clock_nanosleep(CLOCK_MONOTONIC, 0, &ms, NULL);
    w->us_per_wake = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e3 / w->n;
    return NULL;
}

static VALUE
wake_cost_us(VALUE self, VALUE count)
{
    struct wake w = { NUM2INT(count), 0 };
    if (w.n <= 0) rb_raise(rb_eArgError, "count must be positive, got %d", w.n);
    rb_thread_call_without_gvl(wake_loop, &w, NULL, NULL);
    return DBL2NUM(w.us_per_wake);
}

static pthread_t sleeper;
static int sleeper_on; /* read by the sleeper, written by the GVL holder */

static void *
sleeper_loop(void *arg)
{
    struct timespec ms = { 0, 1000000 };
    while (__atomic_load_n(&sleeper_on, __ATOMIC_RELAXED)) clock_nanosleep(CLOCK_MONOTONIC, 0, &ms, NULL);
    return arg;
}

static VALUE
sleeper_start(VALUE self)
{
    if (__atomic_load_n(&sleeper_on, __ATOMIC_RELAXED)) rb_raise(rb_eRuntimeError, "the sleeper is already running");
    __atomic_store_n(&sleeper_on, 1, __ATOMIC_RELAXED);
    int rc = pthread_create(&sleeper, NULL, sleeper_loop, NULL);
    if (rc) {
        __atomic_store_n(&sleeper_on, 0, __ATOMIC_RELAXED);
        rb_raise(rb_eRuntimeError, "pthread_create failed: %s", strerror(rc));
    }
    return Qnil;
}

static VALUE
sleeper_stop(VALUE self)
{
    if (!__atomic_load_n(&sleeper_on, __ATOMIC_RELAXED)) return Qnil;
    __atomic_store_n(&sleeper_on, 0, __ATOMIC_RELAXED);
    pthread_join(sleeper, NULL);
    return Qnil;
}

void
Init_cwork(void)
{
    VALUE m = rb_define_module("CWork");
    rb_define_module_function(m, "busy", busy, 1);
    rb_define_module_function(m, "sleep_hold", sleep_hold, 1);
    rb_define_module_function(m, "sleep_release", sleep_release, 1);
    rb_define_module_function(m, "clock_cost_ns", clock_cost_ns, 1);
    rb_define_module_function(m, "wake_cost_us", wake_cost_us, 1);
    rb_define_module_function(m, "sleeper_start", sleeper_start, 0);
    rb_define_module_function(m, "sleeper_stop", sleeper_stop, 0);
}
