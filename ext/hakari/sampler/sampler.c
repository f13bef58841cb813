/* sampler.c — timer -> postponed job -> capture, and the sampler's lifecycle
 * (see sampler.h); the captures' aggregation is sampler_resolve.c, the time a capture does
 * not hold (state parts, waiting threads, tails) sampler_waits.c, the counters a profile
 * reports sampler_stats.c.
 *
 * At each tick the timer's worker reads the clock (in wall mode in its signal
 * handler, in cpu mode as cpu_clock.c decides), counts, and
 * triggers the postponed job. The job runs on whichever Ruby thread reaches a
 * safepoint holding the GVL; it weighs the sample by *that thread's* clock at
 * the tick minus its clock at its previous sample (CPU clock in cpu mode,
 * monotonic clock in wall mode), so no time is lost or double-counted when a
 * safepoint comes late, and the rest of a long C call goes to the next sample.
 * The job only captures the stack (stack_walk.h) and the sample's weight,
 * and hands them to the timer's worker through a ring (ring.h): it takes no
 * lock, allocates nothing and touches none of the profile's tables, whose
 * cache misses would also evict the program's own lines. The worker resolves
 * the captures into frames, lines and stacks between its ticks, holding the
 * resolve lock, which the GC's mark takes too; at stop and snapshot the
 * caller resolves what is left (sampler_resolve.c).
 */
#include "buf.h"
#include "sampler_int.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ruby/debug.h>
#include <ruby/ractor.h>
#include <ruby/thread.h>

#include "cpu_clock.h"
#include "cpu_events.h"
#include "hot.h"
#include "pace.h"
#include "stack_walk.h"
#include "timer.h"



static int tsc_usable; /* read once at load: the clocksource does not change under a running program */
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
static rb_postponed_job_handle_t job_handle;
#endif

/* A thread the worker found blocked at the tick, its clock then `cpu` at `wall`: whether it has
 * used less than half the wall time since, blocked in the call its job runs in (a C call that
 * sleeps holding the GVL, say). Its weight, used before that call, then goes as a late tick's
 * (pace.h): such calls got 2-3 times their CPU in the accuracy bench's threads scenario.
 * Cold: a job on a thread the worker did not watch, which had blocked at the tick. */
__attribute__((cold, noinline)) static int blocked_since(clockid_t c, int64_t cpu, int64_t wall)
{
    int64_t wall_since = hk_clock_ns(CLOCK_MONOTONIC) - wall, cpu_since = hk_clock_ns(c) - cpu;
    return wall_since >= S.period_ns / 8 && cpu_since >= 0 && cpu_since * 2 < wall_since;
}

/* Clock c at the latest tick, if the worker read that clock (and how its
 * thread was then, HK_TICK_*: a thread it read beside the watched one, blocked
 * then, is a late tick's); else c now (cpu mode after another thread was
 * sampled, when the worker did not read c beside the clock it watched). */
HK_HOT static int64_t clock_at_tick(clockid_t c_want, int *state, hk_leaf *leaf)
{
    uint32_t s1 = __atomic_load_n(&S.tick.seq, __ATOMIC_ACQUIRE);
    clockid_t c = S.tick.clock;
    int64_t v = S.tick.value;
    int b = S.tick.state;
    hk_leaf l = S.tick.leaf;
    int64_t wall = S.tick.wall;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t s2 = __atomic_load_n(&S.tick.seq, __ATOMIC_RELAXED);
    if (s1 == s2 && !(s1 & 1) && c == c_want && v >= 0) {
        *state = b;
        *leaf = l;
        return v;
    }
    int blocked;
    if (S.cfg.mode == HK_MODE_CPU && hk_cpu_clock_reading(c_want, &v, &blocked)) {
        if (blocked && s1 == s2 && !(s1 & 1) && blocked_since(c_want, v, wall)) *state = HK_TICK_LATE;
        return v;
    }
    return hk_clock_ns(c_want);
}

/* The native thread's clock where the latest job's weight under M:N threads ended (-1: now):
 * the period the worker watches on it begins there. ctx: GVL. */
static int64_t mn_native_at_tick;

/* Under M:N threads, the thread's own CPU clock at the latest tick, when the
 * worker read the native thread it runs on (and how it was then), else now. */
static int64_t mn_clock_at_tick(const hk_thread *t, int *state, hk_leaf *leaf)
{
    uint32_t s1 = __atomic_load_n(&S.tick.seq, __ATOMIC_ACQUIRE);
    hk_tick k = S.tick;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    int64_t at = -1;
    mn_native_at_tick = -1;
    if (s1 == __atomic_load_n(&S.tick.seq, __ATOMIC_RELAXED) && !(s1 & 1) && k.value >= 0)
        at = hk_mn_cpu_at(t->thread, k.clock, k.value);
    if (at >= 0) mn_native_at_tick = k.value;
    /* another native thread than the watched one: its reading at the tick's look, if taken */
    if (at < 0) at = hk_mn_cpu_at_tick(t->thread, &mn_native_at_tick);
    if (at < 0) return hk_mn_cpu_now(t->thread);
    *state = k.state;
    *leaf = k.leaf;
    return at;
}

/* the thread's weight up to the tick (the worker's reading, when it read this thread's clock) */
HK_HOT static int64_t tick_weight(hk_thread *t, int *state, hk_leaf *leaf)
{
    if (S.mn) return hk_sampler_weight_until(t, mn_clock_at_tick(t, state, leaf));
    return hk_sampler_weight_until(t, clock_at_tick(t->clock, state, leaf));
}

/* The job's first loads: the thread it most likely runs on and the worker's
 * tick, started before the capture so that they arrive during it. */
HK_HOT static void prefetch_thread_and_tick(void)
{
    if (S.last_thread < S.nthreads) {
        /* the fields the job reads, up to the spot: at most two lines (asserted below) */
        __builtin_prefetch(&S.threads[S.last_thread]);
        __builtin_prefetch((const char *)&S.threads[S.last_thread] + offsetof(hk_thread, spot) - 1);
    }
    __builtin_prefetch((const void *)&S.tick);
}

_Static_assert(offsetof(hk_thread, spot) <= 64, "prefetch_thread_and_tick loads the job's fields as two lines");

/* The sampled thread: the previous sample's when the walk read a stack of the
 * same VM thread, else looked up by Thread.current. NULL: out of memory. */
HK_HOT static hk_thread *current_thread(void)
{
    const void *vm_thread = hk_stack_walk_thread();
    if (vm_thread && S.last_thread < S.nthreads && S.threads[S.last_thread].vm_thread == vm_thread)
        return &S.threads[S.last_thread];
    VALUE th = rb_thread_current();
    hk_thread *t = hk_sampler_thread_of(th);
    /* a thread first seen by a job on it, before RUBY_EVENT_THREAD_BEGIN: its time began at its
     * start in wall mode when that is known, where its native thread was last accounted in cpu
     * mode; else its first sample weighs one nominal period */
    if (!t) {
        /* under M:N its clock began at its first stretch since start (sampler_mn.c) */
        int64_t from = S.cfg.mode == HK_MODE_WALL ? hk_states_born(th)
                       : S.mn                     ? 0
                                                  : hk_sampler_native_baseline(hk_gettid(), hk_clock_ns(CLOCK_THREAD_CPUTIME_ID));
        if ((t = hk_sampler_thread_add(th, from))) hk_states_thread(t, 1);
    }
    if (!t) return NULL;
    if (vm_thread && !t->vm_thread) {
        t->vm_thread = vm_thread;
        hk_sampler_thread_flaggable(t);
    }
    if (!t->seq) t->seq = hk_sampler_next_seq();
    if (!t->has_clock) {
        t->clock = CLOCK_MONOTONIC;
        if (S.cfg.mode == HK_MODE_CPU) t->clock = hk_thread_cpu_clock(t->tid ? t->tid : (t->tid = hk_gettid()));
        t->has_clock = 1;
    }
    S.last_thread = (size_t)(t - S.threads);
    return t;
}

/* The job's part of a sample: its capture, the thread it ran on and its
 * weight, handed to the worker. Returns that thread (NULL: none was sampled). */
HK_HOT static hk_thread *take_sample(void)
{
    prefetch_thread_and_tick();
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + S.capture_room);
    /* the worker is behind: no capture, no mark, and the weight goes to the next sample */
    if (!at) {
        S.dropped_count++;
        return NULL;
    }
    uint64_t w0 = cost_clock();
    long words = hk_stack_walk_capture(at + HEAD_WORDS, S.capture_room);
    S.capture_time += cost_clock() - w0;
    /* no room is a sample lost; no Ruby frame on the stack (the main script being
     * compiled, a thread starting or ending) is none to take: either way the
     * thread's time goes to its next sample */
    if (words <= 0) {
        if (words == 0) S.dropped_count++;
        return NULL;
    }
    sample_head *h = (sample_head *)at;
    *h = (sample_head){.state = HK_TICK_RUNNING};
    hk_thread *t = current_thread();
    if (t) {
        /* Weigh the sample up to the tick, not up to now: the time between the
         * tick and this safepoint (the rest of a long C call) belongs with the
         * next sample, which is how each tick's period goes to the stack seen
         * at it. Read after the capture: the worker wrote the tick on its own
         * core, and the line's trip here (prefetched at the start) overlaps with it. */
        int state = HK_TICK_RUNNING;
        int64_t weight = tick_weight(t, &state, &h->leaf); /* before reading prev_clock: the tick's */
        h->weight = hk_states_take(t, weight, t->prev_clock, HK_SPLIT_OWN, S.parts);
        h->state = state;
        h->seq = t->seq;
        h->labels = hk_labels_of(t->thread);
        t->spot_valid = 0; /* it ran: its next wait starts a new stack */
        if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
        /* cpu mode: the worker watches the clock of the thread most likely to run the next job */
        if (S.cfg.mode == HK_MODE_CPU) {
            if (S.mn) hk_cpu_clock_watch(hk_mn_native_clock(t->thread), mn_native_at_tick); /* -1: from the next look */
            else {
                hk_cpu_clock_watch(t->clock, t->prev_clock);
                if (S.watched_vm != t->vm_thread) __atomic_store_n(&S.watched_vm, t->vm_thread, __ATOMIC_RELAXED);
            }
        }
        const void *slot = hk_stack_walk_leaf_slot();
        if (__atomic_load_n(&S.leaf_slot, __ATOMIC_RELAXED) != slot)
            __atomic_store_n(&S.leaf_slot, slot, __ATOMIC_RELAXED);
    }
    hk_ring_commit(&S.ring, HEAD_WORDS + (size_t)words);
    if (t) hk_sampler_take_parts(t, S.parts);
    return t;
}

/* RUBY_EVENT_THREAD_BEGIN, in the new thread: its baseline is its clock now
 * (a native thread may be reused from Ruby's cache, so its CPU clock is not 0),
 * and in cpu mode its own counter. RUBY_EVENT_THREAD_END, in the thread that
 * ends: its time since its latest sample, and the counter goes. ctx: GVL. */
static int thread_hook_added;

static void thread_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
    (void)data, (void)self, (void)mid, (void)klass;
    if (!S.running) return;
    if (HK_MODE_COUNTS_OBJECTS(S.cfg.mode)) { /* no time to account: an ended thread's record goes */
        if ((ev & RUBY_EVENT_THREAD_END) && S.cfg.watch < HK_WATCH_ALL) hk_sampler_holder_thread_end(rb_thread_current());
        hk_thread *ended = ev & RUBY_EVENT_THREAD_END ? hk_sampler_thread_find(rb_thread_current()) : NULL;
        if (ended) hk_sampler_thread_retire(ended);
        return;
    }
    if (S.cfg.mode == HK_MODE_CPU) hk_sampler_take_exits();
    VALUE th = rb_thread_current();
    hk_thread *t = hk_sampler_thread_find(th);
    int64_t native = hk_clock_ns(hk_sampler_mode_clock());
    int64_t now = S.mn ? hk_mn_cpu_now(th) : native;
    if (ev & RUBY_EVENT_THREAD_END) {
        hk_sampler_holder_ended(hk_stack_walk_thread_of(th));
        if (!t) return;
        hk_sampler_take_thread_tail(t, now, 1);
        if (S.cfg.mode == HK_MODE_CPU && !t->own) { /* hakari's own thread: none of its time */
            hk_sampler_native_accounted(hk_gettid(), native);
            if (!t->seq) t->seq = hk_sampler_next_seq();
            hk_sampler_thread_exiting(t->seq, native);
            hk_mn_thread_end(th);
        }
        hk_cpu_clock_thread_end(t->tid);
        /* its time is all taken: its native thread (and so its CPU clock) may go on to run another */
        t->prev_clock = -1;
        t->tid = 0;
        hk_states_thread_end(t);
        hk_sampler_thread_retire(t);
        return;
    }
    int tid = hk_gettid();
    /* under M:N its clock began at its first stretch since start (sampler_mn.c) */
    if (S.cfg.mode == HK_MODE_CPU) now = S.mn ? 0 : hk_sampler_native_baseline(tid, now);
    /* wall mode: its time began at its start, before its first wait for the GVL */
    int64_t born = S.cfg.mode == HK_MODE_WALL ? hk_states_born(th) : -1;
    if (born >= 0 && born < now) now = born;
    /* a record made at start (Thread.list) begins here; one a job made has its baseline already */
    if (t && !t->seq) t->prev_clock = now;
    else if (!t && (t = hk_sampler_thread_add(th, now))) hk_states_thread(t, 1);
    if (t) {
        t->tid = tid;
        /* under M:N its clock is its own, not its native thread's, which the worker reads */
        hk_cpu_clock_thread_begin(t->tid, S.mn ? -1 : t->prev_clock);
    }
}

/* wall mode: the tick's clock reading (the monotonic clock), or now */
static int64_t wall_tick_time(void)
{
    int state;
    hk_leaf leaf;
    return clock_at_tick(CLOCK_MONOTONIC, &state, &leaf);
}

/* the job runs on hakari's own thread (hk_sampler_own_thread) */
__attribute__((cold, noinline)) static int on_own_thread(void)
{
    const hk_thread *t = hk_sampler_thread_find(rb_thread_current());
    return t && t->own;
}

int hk_sampler_own_thread(uintptr_t thread)
{
    if (!S.running) return -1;
    VALUE th = (VALUE)thread;
    hk_thread *t = hk_sampler_thread_find(th);
    /* a thread just made has no record until it first runs (its RUBY_EVENT_THREAD_BEGIN): made
     * here, so that none of its wait for its first GVL is sampled (it keeps the flag then) */
    if (!t && (t = hk_sampler_thread_add(th, hk_clock_ns(hk_sampler_mode_clock())))) hk_states_thread(t, 0);
    if (!t) return -1;
    t->own = 1;
    S.any_own = 1;
    return 0;
}

/* Ruby runs the postponed jobs on whichever thread's flag it finds, and its bits are shared by
 * every Ractor: another profiler's trigger in a Ractor's thread runs hakari's job there too. The
 * job writes the ring, the thread table and the counters as their only writer, which the main
 * Ractor's GVL makes it; a job in another Ractor would run beside it. Such a thread's stdout is
 * its Ractor's own IO, not the main Ractor's $stdout (a public API on every Ruby). */
__attribute__((cold, noinline)) static int in_main_ractor(void) { return rb_ractor_stdout() == rb_stdout; }

/* cpu mode: the calling thread's CPU off the GVL, when it reached a period (sampler_states.c),
 * as a sample of its own at the stack it is at: in the call that let the GVL go, as the job runs
 * when the thread takes it back. Not a tick's: the thread's period goes on. 1 when taken. */
__attribute__((noinline)) static int take_off_gvl_sample(void)
{
    __atomic_store_n(&S.off_gvl_due, 0, __ATOMIC_RELAXED);
    hk_thread *t = hk_sampler_thread_find(rb_thread_current());
    if (!t || t->own || !t->gvl) return 0;
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + S.capture_room);
    if (!at) return 0; /* the CPU stays in the thread's next samples */
    uint64_t w0 = cost_clock();
    long words = hk_stack_walk_capture(at + HEAD_WORDS, S.capture_room);
    S.capture_time += cost_clock() - w0;
    int64_t off = words > 0 ? hk_states_take_off_gvl(t) : 0;
    if (off <= 0) return 0;
    if (!t->seq) t->seq = hk_sampler_next_seq();
    sample_head *h = (sample_head *)at;
    *h = (sample_head){
        .state = HK_TICK_RUNNING | HK_HEAD_OFF_GVL, .seq = t->seq, .weight = off, .labels = hk_labels_of(t->thread)};
    if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
    hk_ring_commit(&S.ring, HEAD_WORDS + (size_t)words);
    return 1;
}

/* ctx: GVL (postponed job) */
HK_HOT static void sample_job(void *arg)
{
    (void)arg;
    /* the job's fields and the walker's left the cache since the last
     * sample: start loading them at once, but not the ring's consumer line,
     * which the worker writes and the job reads only when short of room */
    for (size_t off = 0; off < offsetof(hk_sampler, ring.cons); off += 64) __builtin_prefetch((const char *)&S + off);
    hk_stack_walk_prefetch();
    /* A job a time profile's worker asked for may run in the next profile: Ruby runs a job at the
     * next interrupt check of a thread it flagged, and when the flagged thread waited past stop,
     * whenever any thread next checks for jobs. In object mode, whose samples its NEWOBJ hook
     * takes, such a job once weighed the main thread's time since start as 24.5 million objects
     * of no class. */
    if (!S.running || S.building || HK_MODE_COUNTS_OBJECTS(S.cfg.mode)) return;
    if (S.ractors_started) {
        if (!in_main_ractor()) {
            /* Asked for again at once, for the main Ractor's thread that holds its GVL: the
             * holder's next take of the GVL (sampler_threads.c) may be long in coming. A Ractor's
             * ticker (sampler_ractors.c) can wake with hakari's worker, its thread then running
             * every tick's job first: a main thread that ran 45 ms had none, and its CPU went to
             * the call it blocked in next (the Ractors test, 1 run in 10). Ruby's trigger flags
             * this thread too, which would run the job again at once: its flag is cleared. */
            __atomic_store_n(&S.job_stolen, 1, __ATOMIC_RELAXED);
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
            const void *holder = __atomic_load_n(&S.holder, __ATOMIC_RELAXED);
            /* (where this thread's flag cannot be cleared, the holder waits for its next take) */
            if (holder && S.has_job_handle && hk_stack_walk_jobs_flaggable()) {
                rb_postponed_job_trigger(S.job_handle);
                hk_stack_walk_unflag_own_jobs();
                hk_stack_walk_flag_jobs(holder);
            }
#endif
            return;
        }
        /* the job ran here after all: no main thread need ask for it again */
        if (__atomic_load_n(&S.job_stolen, __ATOMIC_RELAXED)) __atomic_store_n(&S.job_stolen, 0, __ATOMIC_RELAXED);
    }
    if (S.cfg.mode == HK_MODE_WALL) __atomic_store_n(&S.job_ran, 1, __ATOMIC_RELAXED);
    if (S.any_own && on_own_thread()) return;
    uint64_t t0 = cost_clock();
    /* a job asked for by the CPU off the GVL alone (no tick since the previous job's) takes only that */
    if (__atomic_load_n(&S.off_gvl_due, __ATOMIC_RELAXED) && take_off_gvl_sample() &&
        __atomic_load_n(&S.tick.seq, __ATOMIC_ACQUIRE) == S.job_tick_seq) {
        S.sampling_time += cost_clock() - t0;
        return;
    }
    S.job_tick_seq = __atomic_load_n(&S.tick.seq, __ATOMIC_ACQUIRE);
    const hk_thread *t = take_sample();
    /* not when this thread's sample failed (the ring is full, or it has no frame) */
    if (t && S.cfg.mode == HK_MODE_WALL && S.nthreads > 1) hk_sampler_sample_waiting_threads(t, wall_tick_time());
    S.sampling_count++;
    S.sampling_time += cost_clock() - t0;
}

/* ctx: GVL, Hakari.label, just before the calling fiber's labels change. The thread's time
 * since its latest sample that it did not run (sampler_states.c hk_states_pending) goes under
 * the labels it was spent in, at the stack that changes them: one record of a capture and that
 * time by state after it (HK_HEAD_LABELS_CHANGE; its running time stays with its next tick).
 * With no room in the ring, or no stack, the time stays for the next sample. */
void hk_sampler_labels_changing(VALUE thread)
{
    if (!S.running || S.building || HK_MODE_COUNTS_OBJECTS(S.cfg.mode)) return;
    if (S.ractors_started && !in_main_ractor()) return; /* the ring's one writer is the main Ractor */
    hk_thread *t = hk_sampler_thread_of(thread);
    if (!t || t->own || !hk_states_pending(t)) return;
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + S.capture_room + HK_NSTATES);
    if (!at) return;
    uint64_t w0 = cost_clock();
    long words = hk_stack_walk_capture(at + HEAD_WORDS, S.capture_room);
    S.capture_time += cost_clock() - w0;
    if (words <= 0) return;
    int64_t *parts = (int64_t *)(at + HEAD_WORDS + words);
    hk_states_take_ahead(t, parts);
    if (!t->seq) t->seq = hk_sampler_next_seq();
    sample_head *h = (sample_head *)at;
    *h = (sample_head){.state = HK_TICK_RUNNING | HK_HEAD_LABELS_CHANGE, .seq = t->seq, .labels = hk_labels_of(t->thread)};
    if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
    hk_ring_commit(&S.ring, HEAD_WORDS + (size_t)words + HK_NSTATES);
    S.label_change_count++;
}

hk_leaf hk_sampler_leaf_now(void)
{
    const void *slot = __atomic_load_n(&S.leaf_slot, __ATOMIC_RELAXED);
    return (hk_leaf){.slot = slot, .cfp = hk_stack_walk_read_leaf(slot)};
}

/* ctx: signal (the worker). A trigger (hk_sampler_trigger) flags one context:
 * the one that last took the GVL (3.1: the ractor's running_ec). That thread may be asleep
 * again, in Queue#pop say, woken once and gone back, while every other thread
 * is blocked too: then no job runs until one of them takes the GVL and a tick
 * comes while it holds it. A thread that wakes and blocks again, or ends,
 * within a period never runs one, and a thread's first job after its wait
 * lands where it went on, not where it waited (a join's 200 ms went to the
 * spin after it). So when no job ran since the previous tick, every thread
 * is flagged: the first to wake runs the job, in the call it waited in, and
 * samples the others where they wait. */
static void flag_threads(void)
{
    uint32_t n = __atomic_load_n(&S.nflag, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) hk_stack_walk_flag_jobs(S.flag_threads[i]);
}

void hk_sampler_trigger(clockid_t c, int64_t value, int state, hk_leaf leaf)
{
    __atomic_add_fetch(&S.trigger_count, 1, __ATOMIC_RELAXED);
    /* read here, once a tick is made, not at each of cpu mode's looks */
    if (S.synth) leaf.synth = hk_synth_read(leaf.cfp, &leaf.iseq);
    /* seqlock writer: the odd sequence must be visible before any field changes */
    __atomic_add_fetch(&S.tick.seq, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    S.tick.clock = c;
    S.tick.value = value;
    S.tick.state = state;
    S.tick.leaf = leaf;
    S.tick.wall = c == CLOCK_MONOTONIC ? value : hk_clock_ns(CLOCK_MONOTONIC);
    __atomic_add_fetch(&S.tick.seq, 1, __ATOMIC_RELEASE);
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    rb_postponed_job_trigger(job_handle);
#else
    rb_postponed_job_register_one(0, sample_job, NULL);
#endif
    /* the thread Ruby's trigger flagged may not be the one that runs (sampler_threads.c) */
    const void *holder = __atomic_load_n(&S.holder, __ATOMIC_RELAXED);
    if (holder) hk_stack_walk_flag_jobs(holder);
    if (S.cfg.mode == HK_MODE_WALL && !__atomic_exchange_n(&S.job_ran, 0, __ATOMIC_RELAXED)) flag_threads();
}

/* ctx: signal (wall mode: the timer worker's handler) — async-signal-safe only
 * (clock_gettime is). */
static void on_timer(int fd)
{
    (void)fd;
    if (!__atomic_load_n(&S.running, __ATOMIC_ACQUIRE)) return; /* start has not finished, or stop has begun */
    hk_leaf leaf = hk_sampler_leaf_now();
    hk_sampler_trigger(CLOCK_MONOTONIC, hk_clock_ns(CLOCK_MONOTONIC), HK_TICK_RUNNING, leaf);
}

/* cpu mode's ticks (cpu_clock.h), on the worker: the leaf just before the clock reading, then the tick */
static void cpu_before_tick(void) { S.worker_leaf = hk_sampler_leaf_now(); }
static void cpu_tick(clockid_t c, int64_t value, int state)
{
    /* Under M:N threads the watched clock is a native thread's, which Ruby moves its threads on
     * and off: one found idle long past the period's end does not say that the sampled thread's
     * code returned long before it blocked. Taken as stale, such ticks gave their periods to the
     * stack of the thread's previous sample (the accuracy bench's threads scenario, 10 s on
     * 3.4: 115 stale ticks, c_busy +3.2 %, ruby_busy -2.4 %; as blocked: +0.6 %, -0.2 %). Late
     * ones likewise. */
    if (S.mn && (state == HK_TICK_STALE || state == HK_TICK_LATE)) state = HK_TICK_BLOCKED;
    hk_sampler_trigger(c, value, state, S.worker_leaf);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void *nothing(void *arg) { return arg; }

/* cpu mode, as start ends: the calling thread's CPU counts from here. What start did since the
 * thread was registered (the hooks, the worker's thread made) is hakari's, not the program's: an
 * empty profile held 50-80 us of it, 130-410 us with the engine built with sanitizers. The
 * process's CPU is counted from as much later, so that none of it goes to [native threads]. */
static void cpu_baseline_caller(void)
{
    hk_thread *t = hk_sampler_thread_find(rb_thread_current());
    if (!t || t->prev_clock < 0) return;
    int64_t now = S.mn ? hk_mn_cpu_now(t->thread) : hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (now <= t->prev_clock) return;
    S.start_process_cpu += now - t->prev_clock;
    t->prev_clock = now;
}

int hk_sampler_start(const hk_sampler_config *cfg, char *err, size_t errlen)
{
    if (S.running || S.ended) {
        snprintf(err, errlen, "hakari is already running");
        return -1;
    }
    /* what a session cut short by fork left, or kept tables for another depth */
    if (!S.kept || S.buf_depth != cfg->max_depth) hk_sampler_tables_free();
    S.kept = 0;
    S.cfg = *cfg;
    S.cost_tsc = tsc_usable;
    if (hk_sampler_tables_alloc(cfg) < 0) {
        hk_sampler_tables_free();
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* Wall mode's worker starts before the session's time does: start waits
     * for it to run, several ms on a loaded machine, and that wait is hakari's
     * own, as joining it at stop is. Its ticks are dropped until S.running. */
    hk_timer_set_idle(hk_resolve_on_worker);
    if (cfg->mode == HK_MODE_WALL && hk_timer_start(1000000000L / cfg->frequency, on_timer, err, errlen) < 0) {
        hk_sampler_tables_free();
        return -1;
    }
    S.synth = hk_synth_start(cfg->synthesize, &S.synth_how);
    S.last_thread = (size_t)-1; /* none: the first sample looks its thread up (current_thread) */
    S.period_ns = HK_MODE_COUNTS_OBJECTS(cfg->mode) ? 0 : 1000000000LL / cfg->frequency;
    S.tick.clock = (clockid_t)-1; /* no tick yet */
    S.watched_vm = NULL;
    S.job_ran = 1;                /* flag_threads: from the second tick on */
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    S.job_handle = job_handle;
    S.has_job_handle = 1;
#endif
    S.start_real_ns = hk_clock_ns(CLOCK_REALTIME);
    S.start_mono_ns = hk_clock_ns(CLOCK_MONOTONIC);
    S.start_tsc = hk_tsc();
    memset(&S.cleared, 0, sizeof(S.cleared));
    int timed = !HK_MODE_COUNTS_OBJECTS(cfg->mode);
    hk_labels_start();
    hk_sampler_exits_start();
    S.start_process_cpu = hk_clock_ns(CLOCK_PROCESS_CPUTIME_ID); /* before the threads' own readings */
    /* Ruby runs the thread event hooks added last first: the M:N clocks' hook, added before the
     * holder's, reads a thread's clock after the holder's hook has woken the worker, so that
     * wake is not the resuming thread's CPU (8 threads handing over 1 200 times: 1.2 % more
     * than they used, 2 % with the engine built with sanitizers) */
    S.mn = hk_mn_start();
    /* the worker flags the GVL's holder: at ticks, and for object mode's watch windows */
    if (timed || cfg->watch < HK_WATCH_ALL) hk_sampler_holder_start();
    if (timed) hk_states_start(); /* which hooks it takes depends on S.mn */
    hk_sampler_threads_start();
    hk_ractors_reset();
    /* other Ractors' threads: sampled apart (sampler_ractors.c), through a thread event hook */
    if (timed && !cfg->no_state_hooks) hk_ractors_start(S.period_ns);
    VALUE cur = rb_thread_current();
    for (size_t i = 0; i < S.nthreads; i++) hk_states_thread(&S.threads[i], S.threads[i].thread == cur);
    if (!thread_hook_added) { /* a forked child keeps its parent's */
        rb_add_event_hook(thread_hook, RUBY_EVENT_THREAD_BEGIN | RUBY_EVENT_THREAD_END, Qnil);
        thread_hook_added = 1;
    }
    /* A timer thread's trigger flags the ractor's "running" execution context:
     * on 3.1 that is whichever thread last took the GVL, possibly one now asleep
     * in Queue#pop, whose flag no one acts on. Handing the GVL over and taking
     * it back makes this thread the running one at least for the start; the
     * stop-time tail (take_tail_sample) keeps what is still missed from being lost. */
    rb_thread_call_without_gvl(nothing, NULL, RUBY_UBF_IO, NULL);
    __atomic_store_n(&S.running, 1, __ATOMIC_RELEASE);
    int rc = 0;
    if (cfg->mode == HK_MODE_CPU) {
        const hk_tick_hooks hooks = {cpu_before_tick, cpu_tick, hk_sampler_gvl_free_fn(), S.mn ? hk_mn_others_cpu : NULL,
                                     S.mn ? hk_mn_others_at_tick : NULL};
        rc = hk_cpu_clock_start(S.period_ns, cfg->cpu_clock == HK_CPU_CLOCK_PERF,
                                hk_thread_cpu_clock(hk_gettid()), &hooks, err, errlen);
        if (rc == 0) {
            cpu_baseline_caller();
            hk_sampler_threads_clock();
        }
    } else if (cfg->mode != HK_MODE_WALL) {
        rc = hk_objects_start(err, errlen);
    }
    if (rc < 0) {
        S.running = 0;
        hk_ractors_stop();
        hk_synth_stop();
        hk_sampler_tables_free();
        return -1;
    }
    return 0;
}

/* As stop begins: the calling thread's time since its last sample, split by
 * state (hk_states_take) while the states are still kept; the running part is
 * returned. Read before stop's own work, so that it is in no total. */
static int64_t own_tail(hk_thread *t, int64_t parts[HK_NSTATES])
{
    memset(parts, 0, HK_NSTATES * sizeof(*parts));
    if (!t || t->prev_clock < 0) return 0;
    int64_t now = S.cfg.mode == HK_MODE_CPU ? hk_sampler_thread_cpu(t, t->has_clock ? t->clock : CLOCK_THREAD_CPUTIME_ID)
                                            : hk_clock_ns(CLOCK_MONOTONIC);
    if (now <= t->prev_clock) return 0;
    return hk_states_take(t, now - t->prev_clock, now, HK_SPLIT_OWN_END, parts);
}

int hk_sampler_end(void (*at_end)(void *), void *arg)
{
    if (!S.running) return -1;
    /* the program's time ends here: joining the worker and resolving are hakari's */
    hk_thread *cur = hk_sampler_thread_find(rb_thread_current());
    int64_t tail_parts[HK_NSTATES];
    int timed = !HK_MODE_COUNTS_OBJECTS(S.cfg.mode);
    if (!timed) hk_objects_stop(); /* no object of stop's own is sampled */
    int64_t tail = timed ? own_tail(cur, tail_parts) : 0;
    hk_ractors_stop(); /* other Ractors' samples end here too */
    S.stop_mono_ns = hk_clock_ns(CLOCK_MONOTONIC); /* where the duration ends, with the tail */
    S.process_cpu = hk_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    /* and the other threads' time up to here, where they wait */
    if (S.cfg.mode == HK_MODE_WALL && S.nthreads > 1) hk_sampler_sample_waiting_threads(cur, S.stop_mono_ns);
    if (timed) hk_sampler_take_other_tails(cur);
    S.running = 0;
    hk_synth_stop();
    rb_remove_event_hook(thread_hook);
    thread_hook_added = 0;
    hk_states_stop();
    hk_mn_stop();
    hk_sampler_exits_stop();
    hk_sampler_holder_stop();
    hk_sampler_take_exits();
    if (S.cfg.mode == HK_MODE_CPU) hk_cpu_clock_stop();
    else if (timed) hk_timer_stop();
    if (at_end) at_end(arg);
    /* the worker is gone: what it did not resolve is resolved here, before
     * the tail, which comes after every sample (not under the lock: naming
     * hakari's own frames allocates, and the GC's mark takes the lock) */
    hk_resolve_rest();
    if (timed) hk_sampler_take_tail_sample(tail, tail_parts);
    if (S.cfg.mode == HK_MODE_RETAINED) hk_objects_retained_tally();
    S.ended = 1;
    return 0;
}

hk_profile *hk_sampler_stop(hk_sampler_stats *stats, void (*at_end)(void *), void *arg)
{
    if (!S.ended && hk_sampler_end(at_end, arg) < 0) return NULL;
    hk_sampler_stats_fill(stats);
    hk_profile *p = hk_sampler_build_profile(&S, stats);
    hk_sampler_tables_keep();
    return p;
}

hk_profile *hk_sampler_snapshot(int clear, hk_sampler_stats *stats)
{
    if (!S.running) return NULL;
    /* building resolves names through the VM (and allocates: the GC's mark
     * takes the lock, so it is not held): neither the job nor the worker may
     * change the tables being read meanwhile */
    S.process_cpu = hk_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t made = HK_MODE_COUNTS_OBJECTS(S.cfg.mode) ? hk_watch_count_now() : 0;
    pthread_mutex_lock(&hk_resolve_lock);
    hk_resolve_rest_locked();
    S.building = 1;
    pthread_mutex_unlock(&hk_resolve_lock);
    hk_sampler_stats totals;
    hk_sampler_stats_since_clear(stats, &totals);
    hk_profile *p = hk_sampler_build_profile(&S, stats);
    if (p && clear) {
        if (S.agg_rows) memset(S.agg_rows, 0, S.agg_cap * sizeof(*S.agg_rows));
        S.nraw = 0;
        S.cleared = totals; /* the next profile's counters start here too */
    }
    pthread_mutex_lock(&hk_resolve_lock);
    S.building = 0;
    pthread_mutex_unlock(&hk_resolve_lock);
    if (made) hk_watch_not_program(made); /* the build's objects are hakari's */
    return p;
}

int hk_sampler_running(void) { return S.running || S.ended; }
int hk_sampler_ended(void) { return S.ended; }

void hk_sampler_mark(void)
{
    /* the job cannot run (the GC holds the GVL); the worker may be resolving */
    pthread_mutex_lock(&hk_resolve_lock);
    /* rb_gc_mark (not _movable): frame VALUEs are hash keys, they must not move */
    /* a frame with several lines is marked once per line: cheaper than a set */
    for (size_t i = 0; i < S.nlocs; i++)
        if (!SPECIAL_CONST_P(S.locs[i].frame)) rb_gc_mark(S.locs[i].frame);
    hk_sampler_threads_mark();
    uint64_t cursor;
    size_t words;
    for (const uint64_t *rec = hk_ring_first(&S.ring, &cursor, &words); rec;
         rec = hk_ring_next(&S.ring, &cursor, &words))
        if (hk_sample_has_capture((const sample_head *)rec)) hk_stack_walk_mark_capture(rec + HEAD_WORDS);
    hk_ractors_mark();
    hk_stack_walk_mark();
    hk_synth_mark();
    hk_objects_mark();
    pthread_mutex_unlock(&hk_resolve_lock);
}

void hk_sampler_compact(void) { hk_objects_compact(); }

size_t hk_sampler_memsize(void)
{
    return hk_pair_map_memsize(&S.frame_locs) + hk_u64_map_memsize(&S.thread_ids) + hk_intern_memsize(&S.stacks) +
           S.locs_cap * sizeof(hk_loc) + S.agg_cap * sizeof(hk_agg_row) + S.raw_cap * sizeof(hk_raw_sample) +
           S.threads_cap * sizeof(hk_thread) + S.ring.cap * sizeof(uint64_t) +
           (S.tick_stacks_cap + S.state_stacks_cap) * sizeof(uint32_t) +
           (S.frame_buf ? (size_t)(S.buf_depth + 1 + HK_OWN_FRAMES) * (sizeof(VALUE) + sizeof(int) + sizeof(uint32_t)) +
                              KEY_HEAD * sizeof(uint32_t)
                        : 0) +
           RS.ring.cap * sizeof(uint64_t) + hk_stack_walk_memsize() + hk_labels_memsize() + hk_objects_memsize();
}

/* A fork never comes while the worker is resolving: the child's copy of the
 * tables, which its GC goes on marking, is whole. */
static void atfork_prepare(void) { pthread_mutex_lock(&hk_resolve_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&hk_resolve_lock); }

/* ctx: fork child. The timer thread did not survive fork: stop quietly; the
 * child can start a fresh session. Tables are freed at that next start (not
 * kept: they hold the parent's session). */
static void atfork_child(void)
{
    pthread_mutex_unlock(&hk_resolve_lock); /* locked by this thread in atfork_prepare */
    S.ended = 0; /* the parent's profile is the parent's to build */
    if (!S.running) return;
    S.running = 0;
    hk_states_forget();
    hk_mn_forget();
    hk_ractors_forget();
    hk_sampler_exits_forget();
    hk_sampler_holder_stop();
    if (S.cfg.mode == HK_MODE_CPU) hk_cpu_clock_forget();
    else if (HK_MODE_COUNTS_OBJECTS(S.cfg.mode)) hk_objects_forget();
    else hk_timer_forget();
}

void hk_sampler_init(void)
{
    tsc_usable = hk_tsc_usable();
    hk_labels_init();
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    job_handle = rb_postponed_job_preregister(0, sample_job, NULL);
#endif
    hk_ractors_init();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
