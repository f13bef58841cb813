/* sampler_states.c — where a thread's time went besides running its code:
 * GC marking and sweeping (both modes, every Ruby), and, in wall mode, time
 * off the GVL (blocked in a call) and waiting to take it back (sampler_int.h);
 * in cpu mode, the CPU a thread uses without the GVL (below, "cpu mode").
 *
 * A sample's weight covers its thread's time since its previous sample. The
 * parts of it spent in another state are split off (hk_states_take) and go
 * under the same stack with a synthetic leaf, [GC marking], [GC sweeping],
 * [GVL blocked] or [GVL wait], so the frame that triggered a GC or made a
 * blocking call stays visible above it, and no time is counted twice.
 *
 * GC: internal GC events (a TracePoint with no Ruby-level events) run on the
 * thread that collects, holding the GVL; they add each step's time (on the
 * monotonic clock, which stands for the CPU clock in cpu mode) to that
 * thread's record. GVL: where Ruby has thread event
 * hooks with the thread in their data (3.3+), each thread's record notes when
 * it released the GVL, asked for it back and took it; the hooks run outside
 * the GVL, the thread itself being the one writer of its record (a sequence
 * lock), the job its reader. Where Ruby has no such hooks (3.1), a thread
 * sampled while another holds the GVL is off it, and that time counts as
 * blocked: waiting for the GVL is not told apart (the profile's comments say so).
 */
#include "sampler_int.h"

#include "cpu_events.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>
#include <ruby/thread.h>

#include <ruby/version.h>
/* Before 3.2, a hook on any of the GC's internal events sent every allocation down the GC's
 * slow path (gc.c's has_hook; 3.2 narrowed it to NEWOBJ hooks): kramdown ran 6-7 % slower
 * with it on 3.1. There the GC is not timed. A behaviour of the GC, not an API: extconf.rb
 * has nothing to probe, so the version says it. */
#if RUBY_API_VERSION_MAJOR > 3 || (RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR >= 2)
#define HK_GC_EVENTS 1
#endif

#if defined(HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK) && defined(HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET)
#define HK_GVL_EVENTS 1 /* 3.3+: the hooks' data names the thread; a slot per thread for its record */
#endif

/* ---- GC ------------------------------------------------------------------ */

enum { GC_NONE, GC_MARKING, GC_SWEEPING };

static struct {
    VALUE tracepoint;      /* made once, enabled from start to stop */
    int phase;             /* GC_MARKING from GC_START to END_MARK, GC_SWEEPING then to END_SWEEP */
    clockid_t clock;       /* the profile's: CPU time of the collecting thread in cpu mode, else monotonic */
    int64_t entered;       /* that clock where the current step's time began, -1: none */
    hk_thread *thread;     /* the collecting thread's record (the GVL's: the job cannot run meanwhile) */
} G = {.entered = -1};

/* the time since `entered` goes to the phase's total of the collecting thread */
static void gc_account(int64_t now)
{
    hk_thread *t = G.thread;
    if (!t || G.entered < 0 || now < G.entered) return;
    if (G.phase == GC_MARKING) t->gc_mark += now - G.entered;
    else t->gc_sweep += now - G.entered; /* a lazy sweep's steps, and GC's own work after END_SWEEP */
    G.entered = now;
}

/* ctx: GC (any of its events: no allocation, no Ruby call) */
static void gc_hook(VALUE tpval, void *data)
{
    (void)data;
    if (!S.running) return;
    rb_event_flag_t ev = rb_tracearg_event_flag(rb_tracearg_from_tracepoint(tpval));
    /* In cpu mode, the thread's CPU clock: its wall time in the GC also holds the time the
     * OS gave its core to others, which on a loaded machine was as much again (kramdown
     * on 3.4 beside a busy process: 273 ms of GC in a 500 ms profile, for 106 ms by
     * GC.stat). That clock is a system call (about 1 µs) where the monotonic one is not,
     * at each of a lazy sweep's steps. */
    int64_t now = hk_clock_ns(G.clock);
    switch (ev) {
    case RUBY_INTERNAL_EVENT_GC_ENTER:
        G.thread = hk_sampler_thread_find(rb_thread_current());
        G.entered = now;
        break;
    case RUBY_INTERNAL_EVENT_GC_START:
        gc_account(now);
        G.phase = GC_MARKING;
        break;
    case RUBY_INTERNAL_EVENT_GC_END_MARK:
        gc_account(now);
        G.phase = GC_SWEEPING;
        break;
    case RUBY_INTERNAL_EVENT_GC_END_SWEEP:
        gc_account(now);
        G.phase = GC_NONE;
        break;
    case RUBY_INTERNAL_EVENT_GC_EXIT:
        gc_account(now);
        G.entered = -1;
        G.thread = NULL;
        break;
    }
}

/* ---- the GVL (wall mode) -------------------------------------------------- */

#ifdef HK_GVL_EVENTS
/* A thread's GVL record: its state and when it began, and the time of its
 * finished stretches off the GVL and waiting for it. Stable in memory (the
 * hooks reach it through the thread's slot), freed at the thread's end or at
 * stop. */
typedef struct gvl_record {
    volatile uint32_t seq; /* odd while a hook writes (the thread's own, or one that readies it) */
    int state;             /* HK_STATE_RUNNING, _BLOCKED or _WAIT */
    int64_t since;         /* monotonic ns it entered the state */
    int64_t blocked, wait; /* finished stretches, summed */
    int64_t born;          /* a thread started while profiling: when (its wait for its first GVL counts), else -1 */
    /* cpu mode, on its own CPU clock: where its current stretch off the GVL began (-1: it holds
     * the GVL), its finished stretches summed, the last one's ends, and of the sum what no
     * sample has taken yet (written as it takes the GVL back, read by its job: both hold it) */
    int64_t off_since, off_total, last_from, last_to, off_pending;
    struct gvl_record *prev, *next;
} gvl_record;

static rb_internal_thread_specific_key_t gvl_key;
static int gvl_key_made;
static rb_internal_thread_event_hook_t *gvl_hook_handle;
/* every record, for stop to free: added with the GVL or (a thread that starts) without it */
static gvl_record *gvl_records;
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static int live_records; /* records pushed less records freed: the threads there are */

static void push_record(gvl_record *g)
{
    g->off_since = -1;
    pthread_mutex_lock(&records_lock);
    __atomic_add_fetch(&live_records, 1, __ATOMIC_RELAXED);
    g->prev = NULL;
    g->next = gvl_records;
    if (gvl_records) gvl_records->prev = g;
    gvl_records = g;
    pthread_mutex_unlock(&records_lock);
}

static void free_record(gvl_record *g)
{
    pthread_mutex_lock(&records_lock);
    __atomic_sub_fetch(&live_records, 1, __ATOMIC_RELAXED);
    if (g->prev) g->prev->next = g->next;
    else gvl_records = g->next;
    if (g->next) g->next->prev = g->prev;
    pthread_mutex_unlock(&records_lock);
    free(g);
}

/* A thread that starts while profiling waits for the GVL before its first Ruby code, which is
 * where the sampler first sees it: its record begins at its start, so that wait is counted. */
static void gvl_thread_started(VALUE thread, int64_t now)
{
    if (rb_internal_thread_specific_get(thread, gvl_key)) return;
    gvl_record *g = calloc(1, sizeof(*g));
    if (!g) return;
    g->state = HK_STATE_WAIT;
    g->since = g->born = now;
    push_record(g);
    rb_internal_thread_specific_set(thread, gvl_key, g);
}

/* ---- cpu mode: the CPU a thread uses off the GVL ---------------------------
 *
 * A thread's CPU goes to its samples, which its own job takes, holding the GVL. The CPU it uses
 * without the GVL, letting it go and taking it back (waking the next thread, its own wake-up:
 * some 20-60 µs a time on the test VM) or running C code that does not need it, was taken by its
 * next sample, wherever the thread then ran: with several threads handing the GVL on, the
 * accuracy bench's C sleep that releases it had 3 % of its CPU, the busy methods after it the
 * rest. So each thread's record sums that CPU, read on its clock as it lets the GVL go and as it
 * takes it back (two system calls, ~1 µs each here, while the process has two threads or
 * more), but for a thread the worker watched all the while (a lone thread is): the periods
 * ended on its CPU, and its ticks land in such a call as anywhere else. Once the sum reaches a
 * period, the thread runs the job as it takes the GVL back, in the call that let it go, and a
 * sample there takes the sum (sampler.c take_off_gvl_sample), which the thread's other samples
 * leave out (cpu_off_gvl, through its `ahead`). The sum is given where it reaches a period, as a
 * tick's period is: each call's share of it, on average. */
static void cpu_gvl_event(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, gvl_record *g)
{
    if (ev == RUBY_INTERNAL_THREAD_EVENT_SUSPENDED) {
        g->off_since = __atomic_load_n(&live_records, __ATOMIC_RELAXED) > 1 ? hk_clock_ns(CLOCK_THREAD_CPUTIME_ID) : -1;
        return;
    }
    if (ev != RUBY_INTERNAL_THREAD_EVENT_RESUMED || g->off_since < 0) return;
    /* Still the thread the worker watches (no other thread's job ran meanwhile, which would have
     * made that one watched): the periods ended on its CPU all along, and its ticks landed in
     * the stretch as anywhere else, its CPU there sampled as the rest of it (counted here as
     * well, a lone thread's C sleep that releases the GVL was given its CPU twice). */
    if (hk_stack_walk_thread_of(data->thread) == __atomic_load_n(&S.watched_vm, __ATOMIC_RELAXED)) {
        g->off_since = -1;
        return;
    }
    int64_t now = hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t used = now - g->off_since;
    if (used > 0) {
        g->off_total += used;
        g->last_from = g->off_since;
        g->last_to = now;
    }
    g->off_since = -1;
    /* the thread holds the GVL: the job that takes the sum (sampler.c) runs on it, with the GVL
     * too, asked for here through the job's handle (3.3+, as these hooks) and the thread's flag */
    if (used > 0 && (g->off_pending += used) >= S.period_ns) {
        __atomic_store_n(&S.off_gvl_due, 1, __ATOMIC_RELAXED);
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
        if (S.has_job_handle) rb_postponed_job_trigger(S.job_handle);
#endif
        const void *vm_thread = hk_stack_walk_thread_of(data->thread);
        if (vm_thread) hk_stack_walk_flag_jobs(vm_thread);
    }
}

/* The thread's CPU off the GVL up to its CPU clock's reading v (a tick's, before the stretch it
 * was in then had ended: its part after v left out). */
static int64_t off_total_at(const gvl_record *g, int64_t v)
{
    if (v >= g->last_to) return g->off_total;
    return g->off_total - (g->last_to - (v > g->last_from ? v : g->last_from));
}

/* A sample's weight (left, up to the thread's clock at `to`) less the thread's CPU off the GVL
 * since its previous sample, which its off samples take (carried as `ahead` when the weight is
 * short of it); a tail, at the thread's end or at stop, takes what none of them took. */
static int64_t cpu_off_gvl(hk_thread *t, int64_t left, int64_t to, int whose)
{
    gvl_record *g = t->gvl;
    int64_t at = off_total_at(g, to);
    if (at > t->off_mark) {
        t->ahead += at - t->off_mark;
        t->off_mark = at;
    }
    if (whose != HK_SPLIT_OWN) {
        left += g->off_pending;
        g->off_pending = 0;
    }
    return left;
}

int64_t hk_states_take_off_gvl(hk_thread *t)
{
    gvl_record *g = t->gvl;
    if (!g || S.cfg.mode != HK_MODE_CPU || g->off_pending < S.period_ns) return 0;
    int64_t off = g->off_pending;
    g->off_pending = 0;
    return off;
}

/* ctx: any thread, without the GVL (but RESUMED): the thread's own transition */
static void gvl_hook(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *user)
{
    (void)user;
    if (!data || !S.running) return;
    if (S.cfg.mode == HK_MODE_CPU) {
        gvl_record *g = rb_internal_thread_specific_get(data->thread, gvl_key);
        if (g) cpu_gvl_event(ev, data, g);
        return;
    }
    int64_t now = hk_clock_ns(CLOCK_MONOTONIC);
    if (ev == RUBY_INTERNAL_THREAD_EVENT_STARTED) {
        gvl_thread_started(data->thread, now);
        return;
    }
    gvl_record *g = rb_internal_thread_specific_get(data->thread, gvl_key);
    if (!g) return;
    int next = ev == RUBY_INTERNAL_THREAD_EVENT_SUSPENDED ? HK_STATE_BLOCKED
               : ev == RUBY_INTERNAL_THREAD_EVENT_READY   ? HK_STATE_WAIT
                                                          : HK_STATE_RUNNING;
    __atomic_add_fetch(&g->seq, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if (now > g->since) {
        if (g->state == HK_STATE_BLOCKED) g->blocked += now - g->since;
        else if (g->state == HK_STATE_WAIT) g->wait += now - g->since;
    }
    g->state = next;
    g->since = now;
    __atomic_add_fetch(&g->seq, 1, __ATOMIC_RELEASE);
}

/* the thread's time off the GVL and waiting for it, up to `at`: a consistent
 * reading of its record (the hook may be writing on another core) */
static void gvl_totals(const gvl_record *g, int64_t at, int64_t *blocked, int64_t *wait)
{
    for (;;) {
        uint32_t s1 = __atomic_load_n(&g->seq, __ATOMIC_ACQUIRE);
        int state = g->state;
        int64_t since = g->since, b = g->blocked, w = g->wait;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(s1 & 1) && s1 == __atomic_load_n(&g->seq, __ATOMIC_RELAXED)) {
            int64_t open = at > since ? at - since : 0;
            *blocked = b + (state == HK_STATE_BLOCKED ? open : 0);
            *wait = w + (state == HK_STATE_WAIT ? open : 0);
            return;
        }
    }
}
#endif

/* the thread's state now, as its GVL record says (HK_STATE_RUNNING without one) */
int hk_states_gvl_state(const hk_thread *t)
{
#ifdef HK_GVL_EVENTS
    const gvl_record *g = t->gvl;
    if (g) return __atomic_load_n(&g->state, __ATOMIC_RELAXED);
#else
    (void)t;
#endif
    return HK_STATE_RUNNING;
}

/* Where Ruby tells nothing of the GVL: thread t's CPU clock and run delay (cpu and delay, read
 * now), as the marks its next own time off CPU is measured from. Returns its time off CPU since
 * the previous marks that it was not kept off a core while runnable (0 when they were unknown). */
static int64_t move_cpu_marks(hk_thread *t, int64_t cpu, int64_t delay)
{
    int64_t used = t->cpu_mark >= 0 && cpu >= 0 ? cpu - t->cpu_mark : -1;
    int64_t kept = t->delay_mark >= 0 && delay >= 0 ? delay - t->delay_mark : 0;
    t->cpu_mark = cpu;
    t->delay_mark = delay;
    return used < 0 ? -1 : used + kept;
}

/* the same for t the calling thread */
static int64_t mark_cpu(hk_thread *t)
{
    return move_cpu_marks(t, hk_clock_ns(CLOCK_THREAD_CPUTIME_ID), hk_thread_run_delay_ns());
}

int64_t hk_states_ran_before_waiting(hk_thread *t, int64_t weight)
{
    if (t->gvl || S.cfg.mode != HK_MODE_WALL || t->tid <= 0) return 0;
    /* its CPU alone: between two of its own reads its marks move on by its samples' weights
     * (hk_states_take), not its run delay, whose count since its last read its earlier samples
     * held already (with it, the accuracy bench's threads scenario got 1.1-1.3 % for 0.3-0.7 %) */
    int64_t cpu = hk_clock_ns(hk_thread_cpu_clock(t->tid));
    int64_t on = t->cpu_mark >= 0 && cpu >= 0 ? cpu - t->cpu_mark : 0;
    move_cpu_marks(t, cpu, hk_task_run_delay_ns(t->tid));
    return on <= 0 ? 0 : on > weight ? weight : on;
}

void hk_states_thread(hk_thread *t, int running)
{
    t->gc_mark = t->gc_sweep = 0;
    t->gvl = NULL;
    t->gvl_blocked = t->gvl_wait = 0;
    t->ahead = 0;
    t->cpu_mark = t->delay_mark = -1;
#ifdef HK_GVL_EVENTS
    if (!gvl_hook_handle) {
        if (running && S.cfg.mode == HK_MODE_WALL) mark_cpu(t);
        return;
    }
    gvl_record *g = rb_internal_thread_specific_get(t->thread, gvl_key);
    if (!g) {
        if (!(g = calloc(1, sizeof(*g)))) return; /* its time will all be running */
        g->born = -1;
        push_record(g);
        /* The thread we run on holds the GVL. Another is off it or waits for it: blocked until its
         * hook says otherwise, since where its time begins (its baseline, the start), so that a
         * thread parked all along has no running time at all. */
        g->state = running ? HK_STATE_RUNNING : HK_STATE_BLOCKED;
        g->since = !running && t->prev_clock >= 0 ? t->prev_clock : hk_clock_ns(CLOCK_MONOTONIC);
        rb_internal_thread_specific_set(t->thread, gvl_key, g);
    }
    t->gvl = g;
    t->off_mark = g->off_total;
    /* its time begins at its birth (all of its record counts) or where its baseline is */
    if (g->born < 0)
        gvl_totals(g, t->prev_clock >= 0 ? t->prev_clock : hk_clock_ns(CLOCK_MONOTONIC), &t->gvl_blocked,
                   &t->gvl_wait);
#else
    if (running && S.cfg.mode == HK_MODE_WALL) mark_cpu(t);
#endif
}

/* A thread's hooks after its end run on itself, or on a thread that readies
 * it while it waits (never while it runs this): once its slot is clear, none
 * finds the record. */
void hk_states_thread_end(hk_thread *t)
{
#ifdef HK_GVL_EVENTS
    gvl_record *g = t->gvl;
    t->gvl = NULL;
    if (!g || !gvl_hook_handle) return;
    rb_internal_thread_specific_set(t->thread, gvl_key, NULL);
    free_record(g);
#else
    (void)t;
#endif
}

int64_t hk_states_born(VALUE thread)
{
#ifdef HK_GVL_EVENTS
    const gvl_record *g = gvl_hook_handle ? rb_internal_thread_specific_get(thread, gvl_key) : NULL;
    if (g) return g->born;
#else
    (void)thread;
#endif
    return -1;
}

/* ---- a sample's parts ---------------------------------------------------- */

int64_t hk_states_take(hk_thread *t, int64_t weight, int64_t to, int whose, int64_t parts[HK_NSTATES])
{
    memset(parts, 0, HK_NSTATES * sizeof(*parts));
    int64_t left = weight > 0 ? weight : 0;
    /* Without GVL events (3.1), the job's own sample of a thread that just woke covers the
     * stretch it was blocked in, which no other thread's sample saw, and so does a thread's
     * time up to its end: its time since its previous own sample that it neither ran nor
     * waited for a core (the OS's or the hypervisor's preemption of a busy thread, which holds
     * the GVL all along) is taken to be blocked. A stretch under a quarter period, at most a
     * millisecond, is left running: where the run delay cannot be read, it stands for it. */
    if (whose != HK_SPLIT_WAITING && !t->gvl && S.cfg.mode == HK_MODE_WALL) {
        /* the clocks are system calls (~1 µs and ~3 µs here): at a tick, read only when the
         * sample covers more than a period and a half, the thread may then have blocked; else
         * it ran the period, its CPU mark moves on by it. At its end, once, they are read. */
        if (whose == HK_SPLIT_OWN && left <= S.period_ns + S.period_ns / 2 && t->cpu_mark >= 0) {
            t->cpu_mark += left;
        } else {
            int64_t on = mark_cpu(t);
            int64_t off = on >= 0 ? left - on : 0;
            if (off > (S.period_ns < 4000000 ? S.period_ns / 4 : 1000000)) {
                parts[HK_STATE_BLOCKED] = off > left ? left : off;
                left -= parts[HK_STATE_BLOCKED];
            }
        }
    }
#ifdef HK_GVL_EVENTS
    if (t->gvl && S.cfg.mode == HK_MODE_CPU) left = cpu_off_gvl(t, left, to, whose);
#endif
    /* What a change of its labels took already (hk_states_take_ahead) is in no sample twice.
     * After the CPU reading above: that time (a GC's, where Ruby has GC but no GVL events, 3.2)
     * was on the thread's CPU too, and so not blocked. */
    if (t->ahead > 0) {
        int64_t a = t->ahead > left ? left : t->ahead;
        t->ahead -= a;
        left -= a;
    }
#ifdef HK_GVL_EVENTS
    if (t->gvl && S.cfg.mode == HK_MODE_WALL) {
        int64_t b, w;
        gvl_totals(t->gvl, to, &b, &w);
        /* the marks only go forward: a change of labels may have taken the totals up to a later
         * time than this sample's tick */
        int64_t db = b - t->gvl_blocked, dw = w - t->gvl_wait;
        if (db > 0) t->gvl_blocked = b;
        if (dw > 0) t->gvl_wait = w;
        parts[HK_STATE_BLOCKED] = db > left ? left : db > 0 ? db : 0;
        left -= parts[HK_STATE_BLOCKED];
        parts[HK_STATE_WAIT] = dw > left ? left : dw > 0 ? dw : 0;
        left -= parts[HK_STATE_WAIT];
    }
#else
    (void)to;
#endif
    /* GC time past this sample's weight (a GC after its tick) stays for the next one */
    int64_t m = t->gc_mark > left ? left : t->gc_mark;
    t->gc_mark -= m;
    left -= m;
    int64_t s = t->gc_sweep > left ? left : t->gc_sweep;
    t->gc_sweep -= s;
    left -= s;
    parts[HK_STATE_GC_MARK] = m;
    parts[HK_STATE_GC_SWEEP] = s;
    return left;
}

/* The labels a thread's time goes under are those of its fiber at the sample that takes it. Its
 * running time is sampled: a tick's period goes to what ran at the tick. Its time in other
 * states since its latest sample is not: a wait for the GVL inside a labelled block, or a short
 * blocking call, would go under the labels of wherever its next tick found the thread, after
 * the block, another request's or none. So where the labels change, that time is taken then. */
int hk_states_pending(const hk_thread *t)
{
    if (t->gc_mark > 0 || t->gc_sweep > 0) return 1;
#ifdef HK_GVL_EVENTS
    /* the calling thread runs: its record's finished stretches are all its time off the GVL,
     * and no hook writes them meanwhile (this is on every label call: no clock read) */
    const gvl_record *g = t->gvl;
    if (g && S.cfg.mode == HK_MODE_WALL) return g->blocked > t->gvl_blocked || g->wait > t->gvl_wait;
#endif
    return 0;
}

void hk_states_take_ahead(hk_thread *t, int64_t parts[HK_NSTATES])
{
    memset(parts, 0, HK_NSTATES * sizeof(*parts));
#ifdef HK_GVL_EVENTS
    if (t->gvl && S.cfg.mode == HK_MODE_WALL) {
        int64_t b, w;
        gvl_totals(t->gvl, hk_clock_ns(CLOCK_MONOTONIC), &b, &w);
        if (b > t->gvl_blocked) parts[HK_STATE_BLOCKED] = b - t->gvl_blocked, t->gvl_blocked = b;
        if (w > t->gvl_wait) parts[HK_STATE_WAIT] = w - t->gvl_wait, t->gvl_wait = w;
    }
#endif
    parts[HK_STATE_GC_MARK] = t->gc_mark > 0 ? t->gc_mark : 0;
    parts[HK_STATE_GC_SWEEP] = t->gc_sweep > 0 ? t->gc_sweep : 0;
    t->gc_mark = t->gc_sweep = 0;
    for (int s = HK_STATE_RUNNING + 1; s < HK_NSTATES; s++) t->ahead += parts[s];
}

/* ---- lifecycle --------------------------------------------------------------- */

void hk_states_start(void)
{
    G.phase = GC_NONE;
    G.entered = -1;
    G.thread = NULL;
    G.clock = hk_sampler_mode_clock();
    if (!G.tracepoint) {
        G.tracepoint = rb_tracepoint_new(0,
                                         RUBY_INTERNAL_EVENT_GC_START | RUBY_INTERNAL_EVENT_GC_END_MARK |
                                             RUBY_INTERNAL_EVENT_GC_END_SWEEP | RUBY_INTERNAL_EVENT_GC_ENTER |
                                             RUBY_INTERNAL_EVENT_GC_EXIT,
                                         gc_hook, NULL);
        rb_gc_register_mark_object(G.tracepoint);
    }
    if (S.cfg.no_state_hooks) return; /* the states are told as where Ruby has no hooks */
#ifdef HK_GC_EVENTS
    rb_tracepoint_enable(G.tracepoint);
#endif
#ifdef HK_GVL_EVENTS
    /* under M:N threads a thread's CPU is its stretches on native threads (sampler_mn.c) */
    if (S.cfg.mode != HK_MODE_WALL && (S.cfg.mode != HK_MODE_CPU || S.mn)) return;
    if (!gvl_key_made) { /* Ruby has 8 such slots: this takes one, at the first start that needs it */
        gvl_key = rb_internal_thread_specific_key_create();
        gvl_key_made = 1;
    }
    rb_event_flag_t events = RUBY_INTERNAL_THREAD_EVENT_SUSPENDED | RUBY_INTERNAL_THREAD_EVENT_RESUMED;
    if (S.cfg.mode == HK_MODE_WALL) events |= RUBY_INTERNAL_THREAD_EVENT_STARTED | RUBY_INTERNAL_THREAD_EVENT_READY;
    gvl_hook_handle = rb_internal_thread_add_event_hook(gvl_hook, events, NULL);
#endif
}

void hk_states_stop(void)
{
    if (G.tracepoint) rb_tracepoint_disable(G.tracepoint);
#ifdef HK_GVL_EVENTS
    if (!gvl_hook_handle) return;
    /* once removed, no hook runs (Ruby removes it under the lock its calls take) */
    rb_internal_thread_remove_event_hook(gvl_hook_handle);
    gvl_hook_handle = NULL;
    for (size_t i = 0; i < S.nthreads; i++) {
        if (S.threads[i].gvl) rb_internal_thread_specific_set(S.threads[i].thread, gvl_key, NULL);
        S.threads[i].gvl = NULL;
    }
    while (gvl_records) {
        gvl_record *next = gvl_records->next;
        free(gvl_records);
        gvl_records = next;
    }
    live_records = 0;
#endif
}

#ifndef HK_GVL_EVENTS
int64_t hk_states_take_off_gvl(hk_thread *t)
{
    (void)t;
    return 0;
}
#endif

void hk_states_forget(void)
{
#ifdef HK_GVL_EVENTS
    /* a forked child: its hook goes with the parent's threads, which it no longer has */
    if (gvl_hook_handle) rb_internal_thread_remove_event_hook(gvl_hook_handle);
    gvl_hook_handle = NULL;
    gvl_records = NULL; /* the parent's memory, copied: left as it is */
    live_records = 0;
    pthread_mutex_init(&records_lock, NULL); /* another thread may have held it at the fork */
#endif
}

#ifdef HK_GC_EVENTS
#define GC_HOW "gc:phases"
#else
#define GC_HOW "gc:off(this Ruby's GC hooks slow every allocation)"
#endif

const char *hk_states_how(void)
{
    if (S.cfg.no_state_hooks)
        return S.cfg.mode == HK_MODE_CPU ? "gc:off(HAKARI_STATE_HOOKS=off)"
                                         : "gvl:off-gvl-counts-as-blocked gc:off(HAKARI_STATE_HOOKS=off)";
    if (S.cfg.mode == HK_MODE_CPU) return GC_HOW;
#ifdef HK_GVL_EVENTS
    return "gvl:events " GC_HOW;
#else
    return "gvl:off-gvl-counts-as-blocked " GC_HOW;
#endif
}
