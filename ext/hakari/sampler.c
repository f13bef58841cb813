/* sampler.c — timer -> postponed job -> stack walk -> aggregation (see sampler.h).
 *
 * At each tick the timer's worker reads the clock (in wall mode in its signal
 * handler, in cpu mode in its own paced loop: see cpu_pacer.c), counts, and
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
 * caller resolves what is left. The tables use malloc (never the Ruby heap);
 * they grow only when a new frame/stack appears.
 */
#include "buf.h"
#include "sampler.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ruby/debug.h>
#include <ruby/thread.h>

#include "cpu_events.h"
#include "cpu_pacer.h"
#include "hot.h"
#include "sampler_threads.h"
#include "stack_walk.h"
#include "timer.h"

hk_sampler hk_the_sampler;
#define S hk_the_sampler

static int tsc_usable; /* read once at load: the clocksource does not change under a running program */
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
static rb_postponed_job_handle_t job_handle;
#endif

/* ---- locations, samples ----------------------------------------------- */

/* location id of (frame, executing line): one probe of frame_locs when seen
 * before. A new one only appends the pair: which locations share a frame is
 * worked out when the profile is built, off the sampling path. 0: out of memory. */
HK_HOT static uint32_t frame_location(VALUE frame, int line)
{
    uint32_t lid;
    uint32_t l = (uint32_t)(line < 0 ? 0 : line);
    if (hk_pair_map_get(&S.frame_locs, (uint64_t)frame, l, &lid)) return lid;
    if (S.nlocs >= UINT32_MAX - 1 || hk_array_grow((void **)&S.locs, &S.locs_cap, S.nlocs + 1, sizeof(*S.locs)) < 0)
        return 0;
    lid = (uint32_t)S.nlocs + 1;
    if (hk_pair_map_put(&S.frame_locs, (uint64_t)frame, l, lid) < 0) return 0;
    S.locs[S.nlocs++] = (hk_loc){frame, (int)l};
    return lid;
}

/* room for rows [0, need), the new ones zero (a row never sampled has count 0) */
static int grow_agg_rows(size_t need)
{
    size_t old = S.agg_cap;
    if (hk_array_grow((void **)&S.agg_rows, &S.agg_cap, need, sizeof(*S.agg_rows)) < 0) return -1;
    memset(S.agg_rows + old, 0, (S.agg_cap - old) * sizeof(*S.agg_rows));
    return 0;
}

/* A stack id is its aggregation row: the thread is part of the stack's key
 * (intern_current_stack), so a sample adds to one row it reaches by index. */
HK_HOT static int record(uint32_t stack, int64_t weight, int64_t time_ns)
{
    if (!S.cfg.aggregate) {
        if (hk_array_grow((void **)&S.raw, &S.raw_cap, S.nraw + 1, sizeof(*S.raw)) < 0) return -1;
        S.raw[S.nraw++] = (hk_raw_sample){stack, weight, time_ns};
        return 0;
    }
    if (stack >= S.agg_cap && grow_agg_rows((size_t)stack + 1) < 0) return -1;
    S.agg_rows[stack].weight += weight;
    S.agg_rows[stack].count++;
    return 0;
}

/* The key buffer's head: room for the thread and the [truncated] root in
 * front of position 0 (sampler.h) */
#define KEY_HEAD 2
/* Position i of the key buffer: the location id of the frame i places from
 * the root of the current sample (sampler.h) */
#define KEY_POS(i) (S.key_buf[KEY_HEAD + (i)])

/* Location ids of frames [0, to) of the current sample (n frames) into their
 * key positions; 0 or -1 (out of memory). The program evicts our tables from
 * the cache between samples: start every frame's load first, so the misses
 * overlap instead of queueing one by one. */
HK_HOT static int resolve_locations(int to, int n)
{
    for (int i = 0; i < to; i++)
        hk_pair_map_prefetch(&S.frame_locs, (uint64_t)S.frame_buf[i], (uint32_t)(S.line_buf[i] < 0 ? 0 : S.line_buf[i]));
    for (int i = 0; i < to; i++) {
        uint32_t lid = frame_location(S.frame_buf[i], S.line_buf[i]);
        if (!lid) return -1;
        KEY_POS(n - 1 - i) = lid;
    }
    return 0;
}

/* The stack id of the current sample's n frames without the top `skip` (the
 * ones called after its tick), or -1 when out of memory. same: how many of
 * them, from the root, are the previous sample's (hk_stack_walk_since), whose
 * location ids are still in their key positions: only the others are looked
 * up, and an identical stack with the same skip and thread reuses its stack
 * id. The hash tables, whose lines the program evicts from the cache between
 * samples, are touched only for what changed. */
HK_HOT static int64_t intern_current_stack(int n, int same, int truncated, uint32_t seq, int skip)
{
    if (resolve_locations(n - same, n) < 0) return -1;
    int64_t stack;
    if (same == n && n == S.key_n && !truncated && !S.key_truncated && seq == S.key_seq && skip == S.key_skip &&
        S.key_stack >= 0) {
        stack = S.key_stack;
    } else {
        /* the key's head: the thread, then the [truncated] root (sampler.h) */
        if (truncated && !(S.key_buf[KEY_HEAD - 1] = frame_location(HK_FRAME_TRUNCATED, 0))) return -1;
        uint32_t *key = S.key_buf + KEY_HEAD - 1 - truncated;
        key[0] = seq;
        stack = hk_intern_seq(&S.stacks, key, (uint32_t)(1 + truncated + n - skip));
        if (stack < 0) return -1;
    }
    S.key_n = n;
    S.key_truncated = truncated;
    S.key_seq = seq;
    S.key_skip = skip;
    S.key_stack = stack;
    return stack;
}

/* The thread's clock at the latest tick, if the worker read this thread's
 * clock (and how it was then, HK_TICK_*); else its clock now (cpu mode after
 * another thread was sampled). */
HK_HOT static int64_t clock_at_tick(hk_thread *t, int *state, hk_leaf *leaf)
{
    uint32_t s1 = __atomic_load_n(&S.tick.seq, __ATOMIC_ACQUIRE);
    clockid_t c = S.tick.clock;
    int64_t v = S.tick.value;
    int b = S.tick.state;
    hk_leaf l = S.tick.leaf;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t s2 = __atomic_load_n(&S.tick.seq, __ATOMIC_RELAXED);
    if (s1 == s2 && !(s1 & 1) && c == t->clock && v >= 0) {
        *state = b;
        *leaf = l;
        return v;
    }
    return hk_clock_ns(t->clock);
}

/* this thread's clock at the tick (the worker's reading when it read this thread's clock) */
HK_HOT static int64_t tick_weight(hk_thread *t, int *state, hk_leaf *leaf)
{
    int64_t now = clock_at_tick(t, state, leaf);
    int64_t weight = t->prev_clock < 0 ? S.period_ns : now - t->prev_clock;
    if (weight < 0) return 0;
    t->prev_clock = now;
    return weight;
}

/* The job's first loads: the thread it most likely runs on and the worker's
 * tick, started before the capture so that they arrive during it. */
HK_HOT static void prefetch_thread_and_tick(void)
{
    if (S.last_thread < S.nthreads) {
        /* 48 bytes (asserted below): every other one spans two lines */
        __builtin_prefetch(&S.threads[S.last_thread]);
        __builtin_prefetch((const char *)&S.threads[S.last_thread + 1] - 1);
    }
    __builtin_prefetch((const void *)&S.tick);
}

_Static_assert(sizeof(hk_thread) == 48, "prefetch_thread_and_tick loads a thread's record as two lines");

/* The callback's cost is counted on the TSC where the kernel trusts it: four
 * reads per sample at a few cycles each, against ~25 ns for clock_gettime, in
 * a callback that should cost under a microsecond. Scaled to ns in fill_stats. */
static inline uint64_t cost_clock(void) { return S.cost_tsc ? hk_tsc() : (uint64_t)hk_clock_ns(CLOCK_MONOTONIC); }

/* The sampled thread: the previous sample's when the walk read a stack of the
 * same VM thread, else looked up by Thread.current. NULL: out of memory. */
HK_HOT static hk_thread *current_thread(void)
{
    const void *vm_thread = hk_stack_walk_thread();
    if (vm_thread && S.last_thread < S.nthreads && S.threads[S.last_thread].vm_thread == vm_thread)
        return &S.threads[S.last_thread];
    VALUE th = rb_thread_current();
    hk_thread *t = S.last_thread < S.nthreads && S.threads[S.last_thread].thread == th ? &S.threads[S.last_thread]
                                                                                      : hk_sampler_thread_find(th);
    if (!t) t = hk_sampler_thread_add(th, -1);
    if (!t) return NULL;
    t->vm_thread = vm_thread;
    if (!t->seq) t->seq = ++S.nseq;
    if (!t->has_clock) {
        t->clock = CLOCK_MONOTONIC;
        if (S.cfg.mode == HK_MODE_CPU) t->clock = hk_thread_cpu_clock(t->tid ? t->tid : (t->tid = hk_gettid()));
        t->has_clock = 1;
    }
    S.last_thread = (size_t)(t - S.threads);
    return t;
}

/* HAKARI_STACK_WALK=verify: the key positions of the stack just interned (n
 * frames, same of them kept from the previous sample) against the locations
 * of rb_profile_frames' frames. A difference is counted with the walker's. */
static void verify_key(int n, int same)
{
    const VALUE *frames;
    const int *lines;
    if (hk_stack_walk_checked(&frames, &lines) < n) return;
    for (int i = 0; i < n; i++) {
        uint32_t lid = frame_location(frames[n - 1 - i], lines[n - 1 - i]);
        if (lid && lid != KEY_POS(i)) {
            hk_stack_walk_report_mismatch("a location kept from the previous sample was not", n, n, same);
            S.key_n = 0;
            return;
        }
    }
}

/* A tick the worker took with this thread off CPU (pace.h), whose job runs
 * after the block, in the C method (line 0) that blocked: that method used
 * next to no CPU. Returns how many frames to leave out of the sample's stack
 * (1: the period ended shortly, the worker's wake-up latency, before the
 * thread blocked, in the code leading to the blocking call: its caller gets
 * it), or sets *stale_to for a stale tick: the code that used its period may
 * have returned long before the block, so nothing seen now is known to have
 * used it; the one stack known to have run in it is where it began, seen by
 * this thread's previous sample. Rare, so kept off the sampling path's lines. */
__attribute__((cold, noinline)) static int off_cpu_tick(uint32_t tick_stack, int state, int n, int64_t *stale_to)
{
    if (n <= 1 || S.line_buf[0] != 0) return 0; /* not in a C method: the thread was preempted or resumed */
    if (state == HK_TICK_STALE && tick_stack) {
        *stale_to = (int64_t)tick_stack - 1;
        return 0;
    }
    return 1;
}

/* A sample in the ring: its head, then its capture (stack_walk.h). */
typedef struct sample_head {
    uint32_t seq;     /* its thread's sequence number; 0: the sample is lost, its capture is
                         resolved all the same (the next ones may build on it) */
    int32_t state;    /* HK_TICK_*: how the thread was at the tick */
    int64_t weight;
    int64_t time_ns;  /* CLOCK_REALTIME at the job (aggregate: false) */
    hk_leaf leaf;     /* the thread's leaf frame at the tick */
} sample_head;
#define HEAD_WORDS (sizeof(sample_head) / sizeof(uint64_t))
_Static_assert(sizeof(sample_head) % sizeof(uint64_t) == 0, "a capture starts on a word");

/* Held by whoever resolves (the worker, or the GVL's thread at stop and
 * snapshot) and by the GC's mark: the tables and the ring's unresolved
 * records are never read while they change. The job never takes it. */
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

/* this thread's stack where its next period began (1 + stack id), by sequence number */
static uint32_t *tick_stack_of(uint32_t seq)
{
    if (seq >= S.tick_stacks_cap) {
        size_t old = S.tick_stacks_cap;
        if (hk_array_grow((void **)&S.tick_stacks, &S.tick_stacks_cap, (size_t)seq + 1, sizeof(uint32_t)) < 0)
            return NULL;
        memset(S.tick_stacks + old, 0, (S.tick_stacks_cap - old) * sizeof(uint32_t));
    }
    return &S.tick_stacks[seq];
}

/* One sample: its capture's frames, interned as its stack, its weight added
 * to that stack's row. ctx: the resolve lock. */
HK_HOT static void resolve_sample(const sample_head *h, const uint64_t *cap)
{
    int max = S.cfg.max_depth;
    int same, cut;
    int n = hk_stack_walk_resolve(cap, S.frame_buf, S.line_buf, max + 1, S.key_n ? S.key_walk : 0, &same, &cut);
    uint32_t *tick_stack = h->seq ? tick_stack_of(h->seq) : NULL;
    /* A stack that cannot be read loses no time: its weight goes to the next sample. */
    if (n <= 0 || !tick_stack) {
        S.unresolved_count++;
        return;
    }
    /* the frames called after the tick did not run in its period (stack_walk.h) */
    int late = h->leaf.cfp ? hk_stack_walk_pushed_since(cap, h->leaf.slot, h->leaf.cfp) : 0;
    int truncated = n > max || cut;
    if (n > max) n = max;
    int64_t stale_to = -1;
    if (h->state != HK_TICK_RUNNING && !late) late = off_cpu_tick(*tick_stack, h->state, n, &stale_to);
    /* the sample goes to its stack without the frames called after the tick;
     * only that stack is interned; the ids of all n stay in the key buffer for the next sample */
    int skip = late > 0 && late < n ? late : 0;
    int64_t stack = intern_current_stack(n, same, truncated, h->seq, skip);
    if (stack < 0) goto drop;
    S.key_walk = hk_stack_walk_capture_number(cap);
    verify_key(n, same);
    /* this thread's next period begins here */
    *tick_stack = (uint32_t)stack + 1;
    if (stale_to >= 0) {
        stack = stale_to;
        S.stale_count++;
    } else if (skip) {
        S.moved_count++;
    }
    if (record((uint32_t)stack, h->weight, h->time_ns) < 0) goto drop;
    S.sample_count++;
    return;
drop:
    S.key_n = 0; /* the key may be half-updated */
    *tick_stack = 0;
    S.unresolved_count++;
}

/* Resolves the ring's oldest sample; 0 when there was none. ctx: the resolve lock. */
HK_HOT static int resolve_one(void)
{
    size_t words;
    const uint64_t *rec = hk_ring_peek(&S.ring, &words);
    if (!rec) return 0;
    resolve_sample((const sample_head *)rec, rec + HEAD_WORDS);
    hk_ring_release(&S.ring);
    return 1;
}

/* ctx: the timer's worker, between ticks (timer.h), for about budget_ns.
 * The lock is taken for one sample at a time, so that a GC's mark never
 * waits longer than one sample takes; and never waited for: whoever holds it
 * is marking, or resolving at stop or snapshot. */
static void resolve_on_worker(long budget_ns)
{
    if (!hk_ring_used(&S.ring)) return; /* most wake-ups: no clock read */
    int64_t until = hk_clock_ns(CLOCK_MONOTONIC) + (budget_ns > 0 ? budget_ns : 1);
    while (hk_ring_used(&S.ring) && pthread_mutex_trylock(&resolve_lock) == 0) {
        uint64_t t0 = cost_clock();
        int done = !S.building && resolve_one();
        S.resolve_time += cost_clock() - t0;
        pthread_mutex_unlock(&resolve_lock);
        if (!done || hk_clock_ns(CLOCK_MONOTONIC) >= until) return;
    }
}

/* The job's part of a sample: its capture, the thread it ran on and its
 * weight, handed to the worker. */
HK_HOT static void take_sample(void)
{
    prefetch_thread_and_tick();
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + S.capture_room);
    /* the worker is behind: no capture, no mark, and the weight goes to the next sample */
    if (!at) {
        S.dropped_count++;
        return;
    }
    uint64_t w0 = cost_clock();
    long words = hk_stack_walk_capture(at + HEAD_WORDS, S.capture_room);
    S.capture_time += cost_clock() - w0;
    if (words <= 0) {
        S.dropped_count++;
        return;
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
        h->weight = tick_weight(t, &state, &h->leaf);
        h->state = state;
        h->seq = t->seq;
        if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
        /* cpu mode: the worker watches the clock of the thread most likely to run the next job */
        if (S.cfg.mode == HK_MODE_CPU && __atomic_load_n(&S.tick_target, __ATOMIC_RELAXED) != t->clock)
            __atomic_store_n(&S.tick_target, t->clock, __ATOMIC_RELAXED); /* written only on change: the worker reads it */
        const void *slot = hk_stack_walk_leaf_slot();
        if (__atomic_load_n(&S.leaf_slot, __ATOMIC_RELAXED) != slot)
            __atomic_store_n(&S.leaf_slot, slot, __ATOMIC_RELAXED);
    }
    hk_ring_commit(&S.ring, HEAD_WORDS + (size_t)words);
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
    if (!S.running || S.building) return;
    uint64_t t0 = cost_clock();
    take_sample();
    S.sampling_count++;
    S.sampling_time += cost_clock() - t0;
}

hk_leaf hk_sampler_leaf_now(void)
{
    const void *slot = __atomic_load_n(&S.leaf_slot, __ATOMIC_RELAXED);
    return (hk_leaf){slot, hk_stack_walk_read_leaf(slot)};
}

void hk_sampler_trigger(clockid_t c, int64_t value, int state, hk_leaf leaf)
{
    __atomic_add_fetch(&S.trigger_count, 1, __ATOMIC_RELAXED);
    /* seqlock writer: the odd sequence must be visible before any field changes */
    __atomic_add_fetch(&S.tick.seq, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    S.tick.clock = c;
    S.tick.value = value;
    S.tick.state = state;
    S.tick.leaf = leaf;
    __atomic_add_fetch(&S.tick.seq, 1, __ATOMIC_RELEASE);
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    rb_postponed_job_trigger(job_handle);
#else
    rb_postponed_job_register_one(0, sample_job, NULL);
#endif
}

/* ctx: signal (the timer worker's handler) — async-signal-safe only
 * (clock_gettime is). Reading a thread's CPU clock here is a system call, but
 * on the worker thread, not on the profiled one. */
static void on_timer(int fd)
{
    clockid_t c = __atomic_load_n(&S.tick_target, __ATOMIC_RELAXED);
    if (S.use_events) {
        /* a thread's counter overflowed: that thread's clock is the one to read */
        if (fd >= 0 && fd < HK_EVENT_FDS && S.fd_clock[fd]) c = S.fd_clock[fd];
    }
    hk_leaf leaf = hk_sampler_leaf_now();
    hk_sampler_trigger(c, hk_clock_ns(c), HK_TICK_RUNNING, leaf);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void free_tables(void)
{
    hk_stack_walk_stop();
    hk_pair_map_free(&S.frame_locs);
    hk_u64_map_free(&S.thread_ids);
    hk_intern_free(&S.stacks);
    free(S.locs);
    free(S.agg_rows);
    free(S.raw);
    free(S.threads);
    free(S.frame_buf);
    free(S.line_buf);
    free(S.key_buf);
    free(S.tick_stacks);
    hk_ring_free(&S.ring);
    free(S.fd_clock);
    memset(&S, 0, sizeof(S));
}

static void *nothing(void *arg) { return arg; }

/* Room for a session of a few thousand stacks before the job has to grow a
 * table. The job runs inside the program, whose malloc heap is full of small
 * freed blocks: there, a realloc of a few kilobytes can consolidate glibc's free
 * lists and take 50-250 µs (measured on kramdown), which a new session would
 * otherwise pay at every doubling of every table. Reserved here instead, at
 * start, where it costs nothing the profile counts: about 0.6 MB, mostly
 * untouched (and so not resident) until used. */
#define RESERVED_STACKS 4096
#define RESERVED_STACK_ITEMS (RESERVED_STACKS * 24)
#define RESERVED_LOCATIONS 4096
#define RING_WORDS 16384

static int reserve_tables(void)
{
    if (hk_pair_map_reserve(&S.frame_locs, RESERVED_LOCATIONS) < 0 ||
        hk_array_grow((void **)&S.locs, &S.locs_cap, RESERVED_LOCATIONS, sizeof(*S.locs)) < 0 ||
        hk_intern_reserve(&S.stacks, RESERVED_STACKS, RESERVED_STACK_ITEMS) < 0)
        return -1;
    if (!S.cfg.aggregate) return hk_array_grow((void **)&S.raw, &S.raw_cap, RESERVED_STACKS, sizeof(*S.raw));
    return grow_agg_rows(RESERVED_STACKS);
}

int hk_sampler_start(const hk_sampler_config *cfg, char *err, size_t errlen)
{
    if (S.running) {
        snprintf(err, errlen, "hakari is already running");
        return -1;
    }
    free_tables(); /* leftovers of a session cut short by fork */
    S.cfg = *cfg;
    S.cost_tsc = tsc_usable;
    size_t depth = (size_t)cfg->max_depth + 1 + HK_OWN_FRAMES;
    S.frame_buf = malloc(depth * sizeof(VALUE));
    S.line_buf = malloc(depth * sizeof(int));
    S.key_buf = malloc((KEY_HEAD + depth) * sizeof(uint32_t));
    S.key_stack = -1;
    if (!S.frame_buf || !S.line_buf || !S.key_buf ||
        reserve_tables() < 0) {
        free_tables();
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (hk_stack_walk_start(cfg->max_depth + 1) < 0) {
        free_tables();
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* Room for two of the deepest stacks, and for a few hundred ordinary ones
     * (about 40 words each) while the worker is kept off its core. Pages are
     * touched as the ring fills: it costs its size in memory only once used. */
    S.capture_room = hk_stack_walk_capture_room();
    if (hk_ring_init(&S.ring, 2 * (HEAD_WORDS + S.capture_room + 1) + RING_WORDS) < 0) {
        free_tables();
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    S.tick_target = CLOCK_MONOTONIC;
    S.period_ns = 1000000000LL / cfg->frequency;
    S.tick.clock = (clockid_t)-1; /* no tick yet */
    if (cfg->mode == HK_MODE_CPU) S.tick_target = hk_thread_cpu_clock(hk_gettid());
    S.start_real_ns = hk_clock_ns(CLOCK_REALTIME);
    S.start_mono_ns = hk_clock_ns(CLOCK_MONOTONIC);
    S.start_tsc = hk_tsc();
    hk_sampler_threads_start();
    /* A timer thread's trigger flags the ractor's "running" execution context:
     * on 3.1 that is whichever thread last took the GVL, possibly one now asleep
     * in Queue#pop, whose flag no one acts on. Handing the GVL over and taking
     * it back makes this thread the running one at least for the start; the
     * stop-time tail (take_tail_sample) keeps what is still missed from being lost. */
    rb_thread_call_without_gvl(nothing, NULL, RUBY_UBF_IO, NULL);
    S.running = 1;
    /* HAKARI_CPU_CLOCK=perf: cpu mode ticks on each thread's own CPU time (README) */
    const char *how = getenv("HAKARI_CPU_CLOCK");
    int perf = cfg->mode == HK_MODE_CPU && how && strcmp(how, "perf") == 0;
    hk_timer_set_idle(resolve_on_worker);
    if (perf && hk_sampler_events_start(on_timer, err, errlen) == 0) return 0;
    int rc = cfg->mode == HK_MODE_CPU ? hk_cpu_pacer_start(err, errlen)
                                      : hk_timer_start(1000000000L / cfg->frequency, on_timer, err, errlen);
    if (rc < 0) {
        S.running = 0;
        free_tables();
        return -1;
    }
    return 0;
}

static void fill_stats(hk_sampler_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->mode = S.cfg.mode;
    st->frequency = S.cfg.frequency;
    st->aggregate = S.cfg.aggregate;
    st->start_time_ns = S.start_real_ns;
    st->duration_ns = hk_clock_ns(CLOCK_MONOTONIC) - S.start_mono_ns;
    st->trigger_count = __atomic_load_n(&S.trigger_count, __ATOMIC_RELAXED);
    st->sampling_count = S.sampling_count;
    st->sample_count = S.sample_count;
    st->dropped_count = S.dropped_count + S.unresolved_count;
    st->moved_count = S.moved_count;
    st->stale_count = S.stale_count;
    /* TSC ticks -> ns, calibrated against the monotonic clock since start */
    double scale = 1.0;
    uint64_t ticks = hk_tsc() - S.start_tsc;
    if (S.cost_tsc && ticks > 0) scale = (double)st->duration_ns / (double)ticks;
    st->sampling_time_ns = (uint64_t)((double)S.sampling_time * scale);
    st->stack_walk_time_ns = (uint64_t)((double)S.capture_time * scale);
    st->resolve_time_ns = (uint64_t)((double)S.resolve_time * scale);
    st->thread_count = S.nseq;
    st->stack_walker = hk_stack_walk_kind();
    st->walk_mismatch_count = hk_stack_walk_mismatches();
    st->timer_kind = S.use_events ? "perf_event task-clock per thread" : hk_timer_kind();
    st->timer_cpu_ns = S.replaced_timer_cpu_ns + (uint64_t)hk_timer_cpu_ns();
}

/* hakari's own frames on top of the stack at stop: Hakari::Native.stop, Hakari.stop, Hakari.start */
static int own_frames_on_top(int n)
{
    int skip = 0;
    for (; skip < n; skip++) {
        VALUE label = rb_profile_frame_full_label(S.frame_buf[skip]);
        if (!RB_TYPE_P(label, T_STRING)) break;
        const char *l = RSTRING_PTR(label);
        if (strncmp(l, "Hakari.", 7) != 0 && strncmp(l, "Hakari::Native.", 15) != 0) break;
    }
    return skip;
}

/* At stop, the calling thread's time since its last sample has no sample to
 * carry it: if a sleep ended just before stop, that is the whole sleep (on
 * Ruby 3.1 the timer's job may have been flagged on another, sleeping thread).
 * Record it under the caller's stack with an "[unsampled]" leaf, so totals
 * stay whole without pretending to know which callee spent it. */
static void take_tail_sample(void)
{
    hk_thread *t = hk_sampler_thread_find(rb_thread_current());
    if (!t || t->prev_clock < 0) return;
    int64_t weight = hk_clock_ns(t->has_clock ? t->clock : hk_sampler_mode_clock()) - t->prev_clock;
    if (weight <= 0) return;
    int max = S.cfg.max_depth;
    /* room for hakari's own frames on top, which are left out (on Ruby 3.1
     * rb_profile_frames' `start` does not skip frames, so they are fetched) */
    int n = rb_profile_frames(0, max + 1 + HK_OWN_FRAMES, S.frame_buf, S.line_buf);
    int skip = own_frames_on_top(n);
    /* the key, root first (sampler.h): the thread, the [truncated] root when
     * cut at max_depth like any sample, the frames, the [unsampled] leaf */
    int count = n - skip < max - 1 ? n - skip : max - 1;
    uint32_t *key = S.key_buf;
    S.key_n = 0; /* the key buffer no longer holds the previous sample's */
    int m = 0;
    if (!t->seq) t->seq = ++S.nseq;
    key[m++] = t->seq;
    if (n - skip + 1 > max && !(key[m++] = frame_location(HK_FRAME_TRUNCATED, 0))) return;
    for (int i = skip + count - 1; i >= skip; i--)
        if (!(key[m++] = frame_location(S.frame_buf[i], S.line_buf[i]))) return;
    if (!(key[m++] = frame_location(HK_FRAME_UNSAMPLED, 0))) return;
    int64_t stack = hk_intern_seq(&S.stacks, key, (uint32_t)m);
    if (stack >= 0 && record((uint32_t)stack, weight, hk_clock_ns(CLOCK_REALTIME)) == 0) S.sample_count++;
}

/* ctx: GVL, the resolve lock. What the worker left in the ring. */
static void resolve_rest_locked(void)
{
    uint64_t t0 = cost_clock();
    while (resolve_one()) {}
    S.resolve_time += cost_clock() - t0;
}

static void resolve_rest(void)
{
    pthread_mutex_lock(&resolve_lock);
    resolve_rest_locked();
    pthread_mutex_unlock(&resolve_lock);
}

hk_profile *hk_sampler_stop(hk_sampler_stats *stats)
{
    if (!S.running) return NULL;
    S.running = 0;
    hk_sampler_events_close(); /* no counter may signal after the worker is gone */
    hk_timer_stop();
    /* the worker is gone: what it did not resolve is resolved here, before
     * the tail, which comes after every sample (not under the lock: naming
     * hakari's own frames allocates, and the GC's mark takes the lock) */
    resolve_rest();
    take_tail_sample();
    hk_sampler_threads_stop();
    fill_stats(stats);
    hk_profile *p = hk_sampler_build_profile(&S, stats);
    free_tables();
    return p;
}

hk_profile *hk_sampler_snapshot(int clear, hk_sampler_stats *stats)
{
    if (!S.running) return NULL;
    /* building resolves names through the VM (and allocates: the GC's mark
     * takes the lock, so it is not held): neither the job nor the worker may
     * change the tables being read meanwhile */
    pthread_mutex_lock(&resolve_lock);
    resolve_rest_locked();
    S.building = 1;
    pthread_mutex_unlock(&resolve_lock);
    fill_stats(stats);
    hk_profile *p = hk_sampler_build_profile(&S, stats);
    if (p && clear) {
        if (S.agg_rows) memset(S.agg_rows, 0, S.agg_cap * sizeof(*S.agg_rows));
        S.nraw = 0;
    }
    pthread_mutex_lock(&resolve_lock);
    S.building = 0;
    pthread_mutex_unlock(&resolve_lock);
    return p;
}

int hk_sampler_running(void) { return S.running; }

void hk_sampler_mark(void)
{
    /* the job cannot run (the GC holds the GVL); the worker may be resolving */
    pthread_mutex_lock(&resolve_lock);
    /* rb_gc_mark (not _movable): frame VALUEs are hash keys, they must not move */
    /* a frame with several lines is marked once per line: cheaper than a set */
    for (size_t i = 0; i < S.nlocs; i++)
        if (!SPECIAL_CONST_P(S.locs[i].frame)) rb_gc_mark(S.locs[i].frame);
    for (size_t i = 0; i < S.nthreads; i++) rb_gc_mark(S.threads[i].thread);
    uint64_t cursor;
    size_t words;
    for (const uint64_t *rec = hk_ring_first(&S.ring, &cursor, &words); rec;
         rec = hk_ring_next(&S.ring, &cursor, &words))
        hk_stack_walk_mark_capture(rec + HEAD_WORDS);
    hk_stack_walk_mark();
    pthread_mutex_unlock(&resolve_lock);
}

size_t hk_sampler_memsize(void)
{
    return hk_pair_map_memsize(&S.frame_locs) + hk_u64_map_memsize(&S.thread_ids) + hk_intern_memsize(&S.stacks) +
           S.locs_cap * sizeof(hk_loc) + S.agg_cap * sizeof(hk_agg_row) + S.raw_cap * sizeof(hk_raw_sample) +
           S.threads_cap * sizeof(hk_thread) + S.ring.cap * sizeof(uint64_t) +
           S.tick_stacks_cap * sizeof(uint32_t) +
           (size_t)(S.cfg.max_depth + 1 + HK_OWN_FRAMES) * (sizeof(VALUE) + sizeof(int) + sizeof(uint32_t)) +
           KEY_HEAD * sizeof(uint32_t) +
           hk_stack_walk_memsize();
}

/* A fork never comes while the worker is resolving: the child's copy of the
 * tables, which its GC goes on marking, is whole. */
static void atfork_prepare(void) { pthread_mutex_lock(&resolve_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&resolve_lock); }

/* ctx: fork child. The timer thread did not survive fork: stop quietly; the
 * child can start a fresh session. Tables are freed at that next start. */
static void atfork_child(void)
{
    pthread_mutex_unlock(&resolve_lock); /* locked by this thread in atfork_prepare */
    if (!S.running) return;
    S.running = 0;
    hk_sampler_events_close(); /* the counters watch the parent's threads */
    hk_timer_forget();
}

void hk_sampler_init(void)
{
    tsc_usable = hk_tsc_usable();
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    job_handle = rb_postponed_job_preregister(0, sample_job, NULL);
#endif
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
