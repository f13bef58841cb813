/* sampler_resolve.c — the resolver (see sampler_int.h): turns
 * the job's captures into locations, stacks and aggregated weights, on the
 * timer's worker between its ticks, or at stop and snapshot on the caller's
 * thread; always under the resolve lock, which the GC's mark takes too. It
 * reads no Ruby heap object (stack_walk.h), except at stop (the tail sample,
 * with the GVL). */
#include "buf.h"
#include "sampler_int.h"

#include <string.h>
#include <time.h>

#include <ruby/debug.h>

#include "hot.h"
#include "stack_walk.h"

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
int hk_sampler_grow_rows(size_t need)
{
    size_t old = S.agg_cap;
    if (hk_array_grow((void **)&S.agg_rows, &S.agg_cap, need, sizeof(*S.agg_rows)) < 0) return -1;
    memset(S.agg_rows + old, 0, (S.agg_cap - old) * sizeof(*S.agg_rows));
    return 0;
}

/* A stack id is its aggregation row: the thread is part of the stack's key
 * (intern_current_stack), so a sample adds to one row it reaches by index. */
HK_HOT static int record(uint32_t stack, int64_t weight, int64_t time_ns, uint32_t bytes)
{
    if (!S.cfg.aggregate) {
        if (hk_array_grow((void **)&S.raw, &S.raw_cap, S.nraw + 1, sizeof(*S.raw)) < 0) return -1;
        S.raw[S.nraw++] = (hk_raw_sample){stack, bytes, weight, time_ns};
        return 0;
    }
    if (stack >= S.agg_cap && hk_sampler_grow_rows((size_t)stack + 1) < 0) return -1;
    S.agg_rows[stack].weight += weight;
    S.agg_rows[stack].count++;
    S.agg_rows[stack].bytes += (int64_t)bytes * weight;
    return 0;
}

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
 * them, from the root, are the previous sample's (hk_stack_walk_resolve), whose
 * location ids are still in their key positions: only the others are looked
 * up, and an identical stack with the same skip and thread reuses its stack
 * id. The hash tables, whose lines the program evicts from the cache between
 * samples, are touched only for what changed. */
HK_HOT static int64_t intern_current_stack(int n, int same, int truncated, uint32_t seq, uint32_t labels, int skip)
{
    if (resolve_locations(n - same, n) < 0) return -1;
    int64_t stack;
    if (same == n && n == S.key_n && !truncated && !S.key_truncated && seq == S.key_seq && labels == S.key_labels &&
        skip == S.key_skip && S.key_stack >= 0) {
        stack = S.key_stack;
    } else {
        /* the key's head: the thread, its label set, then the [truncated] root (sampler.h) */
        if (truncated && !(S.key_buf[KEY_HEAD - 1] = frame_location(HK_FRAME_TRUNCATED, 0))) return -1;
        uint32_t *key = S.key_buf + KEY_HEAD - 2 - truncated;
        key[0] = seq;
        key[1] = labels;
        stack = hk_intern_seq(&S.stacks, key, (uint32_t)(2 + truncated + n - skip));
        if (stack < 0) return -1;
    }
    S.key_n = n;
    S.key_truncated = truncated;
    S.key_seq = seq;
    S.key_labels = labels;
    S.key_skip = skip;
    S.key_stack = stack;
    return stack;
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


/* How many of the current sample's n frames (S.frame_buf, leaf first) but its
 * leaf, from the root, are the frames of stack `base` (its methods, whatever
 * their lines): the methods that ran from this thread's previous tick to now
 * without returning. 0 when base is not found. */
static int frames_in_common(uint32_t base, int n)
{
    uint32_t kn = 0;
    const uint32_t *key = hk_intern_get(&S.stacks, base, &kn);
    if (!key || kn < 2) return 0;
    key += 2, kn -= 2; /* the thread and its labels */
    int i = 0;
    for (; i < n - 1 && (uint32_t)i < kn; i++) {
        uint32_t lid = key[i];
        if (!lid || lid > S.nlocs || S.locs[lid - 1].frame != S.frame_buf[n - 1 - i]) break;
    }
    return i;
}

/* A tick the worker took with this thread off CPU, or back on it after a
 * block (pace.h), whose job runs in the C method (line 0) that blocked: that
 * method used next to no CPU. Returns how many frames to leave out of the
 * sample's stack: for a blocked tick (the period ended shortly before the
 * thread blocked, in the code leading to the blocking call) 1, its caller
 * gets it; for a late one (ended earlier, anywhere since the thread's previous
 * tick) the frames this stack does not share with the previous sample's, never
 * the leaf C method; given to the caller, a method that blocks right after it
 * is called (the accuracy bench's c_sleep_hold: a C call that sleeps holding
 * the GVL) got the CPU its callers had used before it. Or sets *stale_to for a
 * stale tick: the code that used its period may have returned long before the
 * block, so nothing seen now is known to have used it; the one stack known to
 * have run in it is where it began, seen by this thread's previous sample.
 * Rare, so kept off the sampling path's lines. */
__attribute__((cold, noinline)) static int off_cpu_tick(uint32_t tick_stack, int state, int n, int truncated, int64_t *stale_to)
{
    if (n <= 1 || S.line_buf[0] != 0) return 0; /* not in a C method: the thread was preempted or resumed */
    if (state == HK_TICK_STALE && tick_stack) {
        *stale_to = (int64_t)tick_stack - 1;
        return 0;
    }
    if (state != HK_TICK_LATE || !tick_stack || truncated) return 1; /* the caller's */
    int common = frames_in_common(tick_stack - 1, n);
    return common > 0 ? n - common : n - 1;
}


pthread_mutex_t hk_resolve_lock = PTHREAD_MUTEX_INITIALIZER;


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

/* The stack `stack` (the current sample's n frames less the top `skip`,
 * whose ids are in the key buffer) with the frame of the method the tick's
 * leaf frame was running through a specialized instruction on top, when that
 * frame is the stack's leaf; else `stack`. The key buffer is left as it was,
 * for the next sample. -1: out of memory. */
static int64_t synthesized(int64_t stack, int n, int skip, const sample_head *h, const uint64_t *cap)
{
    if (skip >= n || !hk_stack_walk_ran_at(cap, h->leaf.slot, h->leaf.cfp, h->leaf.iseq)) return stack;
    uint32_t lid = frame_location(hk_synth_frame(h->leaf.synth), 0);
    if (!lid) return -1;
    /* the key as intern_current_stack left it: [thread, labels, [truncated], frames from the root] */
    int truncated = S.key_truncated;
    uint32_t *key = S.key_buf + KEY_HEAD - 2 - truncated;
    uint32_t saved = KEY_POS(n - skip);
    KEY_POS(n - skip) = lid;
    int64_t with = hk_intern_seq(&S.stacks, key, (uint32_t)(2 + truncated + n - skip + 1));
    KEY_POS(n - skip) = saved;
    if (with >= 0) S.synthesized_count++;
    return with;
}

static int64_t state_stack(uint32_t seq, uint32_t base, int state);

/* A change of labels' sample (HK_HEAD_LABELS_CHANGE): its thread's time in each other state than
 * running, under its stack with that state's leaf. ctx: the resolve lock. */
static void resolve_label_change_parts(const sample_head *h, uint32_t stack, const int64_t *parts)
{
    for (int s = HK_STATE_RUNNING + 1; s < HK_NSTATES; s++) {
        if (parts[s] <= 0) continue;
        int64_t with = state_stack(h->seq, stack, s);
        if (with < 0 || record((uint32_t)with, parts[s], h->time_ns, 0) < 0) {
            S.unresolved_count++;
            continue;
        }
        S.sample_count++;
    }
}

/* One sample: its capture's frames, interned as its stack, its weight added
 * to that stack's row. ctx: the resolve lock. */
HK_HOT static void resolve_sample(const sample_head *h, const uint64_t *cap, const uint64_t *end)
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
    if (HK_HEAD_TICK(h) != HK_TICK_RUNNING && !late) late = off_cpu_tick(*tick_stack, HK_HEAD_TICK(h), n, truncated, &stale_to);
    /* the sample goes to its stack without the frames called after the tick;
     * only that stack is interned; the ids of all n stay in the key buffer for the next sample */
    int skip = late > 0 && late < n ? late : 0;
    int64_t stack = intern_current_stack(n, same, truncated, h->seq, h->labels, skip);
    if (stack < 0) goto drop;
    S.key_walk = hk_stack_walk_capture_number(cap);
    verify_key(n, same);
    /* this thread's next period begins here (not at a change of labels: restored below) */
    uint32_t before = *tick_stack;
    *tick_stack = (uint32_t)stack + 1;
    if (stale_to >= 0) {
        stack = stale_to;
        S.stale_count++;
    } else if (skip) {
        S.moved_count++;
    }
    /* not for a stale tick, whose sample goes to an earlier stack; a tick that found the thread
     * off its CPU (a busy machine preempted it) in a specialized instruction was still in it */
    if (h->leaf.synth && stale_to < 0) stack = synthesized(stack, n, skip, h, cap);
    if (stack < 0) goto drop;
    S.resolved_stack = stack; /* retained mode's followed object's stack */
    if (h->state & HK_HEAD_OFF_GVL) {
        *tick_stack = before; /* not a tick: the thread's period began where it was */
        S.off_gvl_count++;
    }
    if (h->state & HK_HEAD_LABELS_CHANGE) {
        *tick_stack = before;
        resolve_label_change_parts(h, (uint32_t)stack, (const int64_t *)(end - HK_NSTATES));
        return;
    }
    if (h->state & HK_HEAD_STACK_ONLY) return; /* its time is in the state parts that follow */
    if (record((uint32_t)stack, h->weight, h->time_ns, h->bytes) < 0) goto drop;
    S.sample_count++;
    return;
drop:
    S.key_n = 0; /* the key may be half-updated */
    *tick_stack = 0;
    S.unresolved_count++;
}

/* The leaf alone, under thread seq in label set `labels`: the time of a thread
 * that had no sample (its end, or stop, came first). -1: out of memory. */
static int64_t leaf_alone(uint32_t seq, uint32_t labels, VALUE leaf_frame)
{
    uint32_t key[3] = {seq, labels, frame_location(leaf_frame, 0)};
    return key[2] ? hk_intern_seq(&S.stacks, key, 3) : -1;
}

/* The stack `base` with a synthetic leaf on top, built in the key buffer (the
 * next sample resolves in full). -1: out of memory. */
static int64_t leaf_on(uint32_t base, VALUE leaf_frame)
{
    uint32_t leaf = frame_location(leaf_frame, 0), n = 0;
    const uint32_t *key = hk_intern_get(&S.stacks, base, &n);
    if (!leaf || !key) return -1;
    uint32_t *buf = S.key_buf;
    S.key_n = 0; /* the key buffer no longer holds the latest sample's key */
    memmove(buf, key, n * sizeof(*buf));
    buf[n++] = leaf;
    return hk_intern_seq(&S.stacks, buf, n);
}

/* The stack `base` of thread seq with the leaf of `state` on top: interned
 * once for each (thread, base, state), then found by index. -1: out of memory. */
static int64_t state_stack(uint32_t seq, uint32_t base, int state)
{
    size_t row = (size_t)seq * HK_NSTATES;
    if (row + HK_NSTATES > S.state_stacks_cap) {
        size_t old = S.state_stacks_cap;
        if (hk_array_grow((void **)&S.state_stacks, &S.state_stacks_cap, row + HK_NSTATES, sizeof(uint32_t)) < 0)
            return -1;
        memset(S.state_stacks + old, 0, (S.state_stacks_cap - old) * sizeof(uint32_t));
    }
    uint32_t *cache = S.state_stacks + row; /* [0]: 1 + the base the others are for */
    if (cache[0] != base + 1) {
        memset(cache, 0, HK_NSTATES * sizeof(uint32_t));
        cache[0] = base + 1;
    }
    if (cache[state]) return cache[state] - 1;
    int64_t stack = leaf_on(base, HK_FRAME_STATE(state));
    if (stack >= 0) cache[state] = (uint32_t)stack + 1;
    return stack;
}

/* Samples without a capture (sampler_int.h): of threads whose stacks have not
 * changed since their previous ones, or the parts of a sample just resolved
 * spent in other states than running. Each weight goes where that thread's
 * latest sample went, with its state's leaf. ctx: the resolve lock. */
static void resolve_again(const sample_head *h, const uint64_t *pair)
{
    for (uint32_t k = 0; k < h->seq; k++) {
        uint32_t seq = (uint32_t)pair[2 * k];
        int state = (int)(pair[2 * k] >> 32);
        uint32_t *tick_stack = tick_stack_of(seq);
        int64_t stack = !tick_stack || state < 0 || state >= HK_NSTATES ? -1
                        : !*tick_stack ? (state == HK_STATE_RUNNING ? -1 : leaf_alone(seq, 0, HK_FRAME_STATE(state)))
                        : state == HK_STATE_RUNNING ? (int64_t)*tick_stack - 1
                                                    : state_stack(seq, *tick_stack - 1, state);
        if (stack < 0 || record((uint32_t)stack, (int64_t)pair[2 * k + 1], h->time_ns, 0) < 0) {
            S.unresolved_count++;
            continue;
        }
        S.sample_count++;
    }
}

/* A thread's time after its latest sample (HK_SAMPLE_TAIL): under that
 * sample's stack with an [unsampled] leaf, or alone when it had none. The
 * key buffer is used to build the stack: the next sample resolves in full.
 * ctx: the resolve lock. */
static void resolve_tail(const sample_head *h)
{
    uint32_t *tick_stack = tick_stack_of(h->seq);
    int64_t stack = !tick_stack   ? -1
                    : *tick_stack ? leaf_on(*tick_stack - 1, HK_FRAME_UNSAMPLED)
                                  : leaf_alone(h->seq, h->labels, HK_FRAME_UNSAMPLED);
    if (stack < 0 || record((uint32_t)stack, h->weight, h->time_ns, 0) < 0) {
        S.unresolved_count++;
        return;
    }
    S.sample_count++;
}

/* A sample of another Ractor's thread (sampler_ractors.c): its running time under its frames,
 * and each other state's time under them with that state's leaf; its running time before its
 * first wait under its previous sample's stack (or its frames, at its first). The key buffer is
 * used to build the stack: the next sample resolves in full. ctx: the resolve lock. */
static void resolve_ractor_sample(const hk_ractor_sample *h, const uint64_t *words)
{
    const VALUE *frames = (const VALUE *)words;
    const uint64_t *lines = words + h->n;
    uint32_t *key = S.key_buf;
    if (h->n > (uint32_t)S.cfg.max_depth) goto lost; /* never: the key buffer is sized for max_depth */
    S.key_n = 0;
    uint32_t m = 0;
    key[m++] = h->seq;
    key[m++] = 0; /* no label set: Hakari.label is the main Ractor's */
    if (h->truncated && !(key[m++] = frame_location(HK_FRAME_TRUNCATED, 0))) goto lost;
    for (uint32_t i = h->n; i-- > 0;)
        if (!(key[m++] = frame_location(frames[i], (int)lines[i]))) goto lost;
    uint32_t *prev = tick_stack_of(h->seq);
    int64_t here = hk_intern_seq(&S.stacks, key, m);
    if (!prev || here < 0) goto lost;
    int64_t running = h->parts[HK_STATE_RUNNING];
    if (h->before > 0 && *prev) {
        if (record(*prev - 1, h->before, h->time_ns, 0) < 0) goto lost;
    } else {
        running += h->before;
    }
    *prev = (uint32_t)here + 1;
    for (int s = HK_STATE_RUNNING; s < HK_NSTATES; s++) {
        int64_t weight = s == HK_STATE_RUNNING ? running : h->parts[s];
        if (weight <= 0) continue;
        if (s != HK_STATE_RUNNING && !(key[m] = frame_location(HK_FRAME_STATE(s), 0))) goto lost;
        int64_t stack = s == HK_STATE_RUNNING ? here : hk_intern_seq(&S.stacks, key, m + 1);
        if (stack < 0 || record((uint32_t)stack, weight, h->time_ns, 0) < 0) goto lost;
        S.sample_count++;
    }
    return;
lost:
    S.unresolved_count++;
}

/* the oldest sample of another Ractor's thread; 0 when there was none. ctx: the resolve lock. */
static int resolve_ractor_one(void)
{
    size_t words;
    const uint64_t *rec = RS.ring.words ? hk_ring_peek(&RS.ring, &words) : NULL;
    if (!rec) return 0;
    resolve_ractor_sample((const hk_ractor_sample *)rec, rec + HK_RACTOR_HEAD_WORDS);
    hk_ring_release(&RS.ring);
    return 1;
}

/* Resolves the ring's oldest sample; 0 when there was none. ctx: the resolve lock. */
HK_HOT static int resolve_one(void)
{
    size_t words;
    const uint64_t *rec = hk_ring_peek(&S.ring, &words);
    if (!rec) return 0;
    const sample_head *h = (const sample_head *)rec;
    if (HK_HEAD_TICK(h) == HK_SAMPLE_AGAIN)
        resolve_again(h, rec + HEAD_WORDS);
    else if (HK_HEAD_TICK(h) == HK_SAMPLE_TAIL)
        resolve_tail(h);
    else
        resolve_sample(h, rec + HEAD_WORDS, rec + words);
    hk_ring_release(&S.ring);
    return 1;
}

/* ctx: the timer's worker, between ticks (timer.h), for about budget_ns.
 * The lock is taken for one sample at a time, so that a GC's mark never
 * waits longer than one sample takes; and never waited for: whoever holds it
 * is marking, or resolving at stop or snapshot. */
void hk_resolve_on_worker(long budget_ns)
{
    if (!hk_ring_used(&S.ring) && !hk_ring_used(&RS.ring)) return; /* most wake-ups: no clock read */
    int64_t until = hk_clock_ns(CLOCK_MONOTONIC) + (budget_ns > 0 ? budget_ns : 1);
    while ((hk_ring_used(&S.ring) || hk_ring_used(&RS.ring)) && pthread_mutex_trylock(&hk_resolve_lock) == 0) {
        uint64_t t0 = cost_clock();
        int done = !S.building && (resolve_one() + resolve_ractor_one()) > 0;
        S.resolve_time += cost_clock() - t0;
        pthread_mutex_unlock(&hk_resolve_lock);
        if (!done || hk_clock_ns(CLOCK_MONOTONIC) >= until) return;
    }
}


/* Room for a session of a few thousand stacks before the resolver has to
 * grow a table. The tables live in the program's malloc heap, full of small
 * freed blocks: there, a realloc of a few kilobytes can consolidate glibc's
 * free lists and take 50-250 µs (measured on kramdown), holding the heap's
 * lock against the program's own mallocs and the resolve lock against the
 * GC's mark, at every doubling of every table. Reserved here instead, at
 * start: about 0.6 MB, mostly untouched (and so not resident) until used. */
#define RESERVED_STACKS 4096
#define RESERVED_STACK_ITEMS (RESERVED_STACKS * 24)
#define RESERVED_LOCATIONS 4096

int hk_sampler_reserve_tables(void)
{
    if (hk_pair_map_reserve(&S.frame_locs, RESERVED_LOCATIONS) < 0 ||
        hk_array_grow((void **)&S.locs, &S.locs_cap, RESERVED_LOCATIONS, sizeof(*S.locs)) < 0 ||
        hk_intern_reserve(&S.stacks, RESERVED_STACKS, RESERVED_STACK_ITEMS) < 0)
        return -1;
    if (!S.cfg.aggregate) return hk_array_grow((void **)&S.raw, &S.raw_cap, RESERVED_STACKS, sizeof(*S.raw));
    return hk_sampler_grow_rows(RESERVED_STACKS);
}

size_t hk_sampler_tables_size(void)
{
    return hk_pair_map_memsize(&S.frame_locs) + S.locs_cap * sizeof(*S.locs) + hk_intern_memsize(&S.stacks) +
           S.agg_cap * sizeof(*S.agg_rows) + S.raw_cap * sizeof(*S.raw);
}


/* hakari's own frames on top of the stack at stop: Hakari::Native.stop, Hakari.stop,
 * Hakari.start, and under the CLI Hakari::Autorun.finish and its at_exit block */
static int own_frames_on_top(int n)
{
    int skip = 0;
    for (; skip < n; skip++) {
        VALUE label = rb_profile_frame_full_label(S.frame_buf[skip]);
        if (!RB_TYPE_P(label, T_STRING) || !hk_sampler_own_label(RSTRING_PTR(label), RSTRING_LEN(label))) break;
    }
    return skip;
}

/* At stop, the calling thread's time since its last sample has no sample to
 * carry it: if a sleep ended just before stop, that is the whole sleep (on
 * Ruby 3.1 the timer's job may have been flagged on another, sleeping thread).
 * Its running part goes under the caller's stack with an "[unsampled]" leaf,
 * so totals stay whole without pretending to know which callee spent it, and
 * each other state's part (parts, from hk_states_take) under that stack with
 * its state's leaf. */
void hk_sampler_take_tail_sample(int64_t running, const int64_t parts[HK_NSTATES])
{
    hk_thread *t = hk_sampler_thread_find(rb_thread_current());
    if (!t) return;
    int max = S.cfg.max_depth;
    /* room for hakari's own frames on top, which are left out (on Ruby 3.1
     * rb_profile_frames' `start` does not skip frames, so they are fetched) */
    int n = rb_profile_frames(0, max + 1 + HK_OWN_FRAMES, S.frame_buf, S.line_buf);
    int skip = own_frames_on_top(n);
    /* the key, root first (sampler.h): the thread, its label set, the [truncated]
     * root when cut at max_depth like any sample, the frames, then the leaf */
    int count = n - skip < max - 1 ? n - skip : max - 1;
    uint32_t *key = S.key_buf;
    S.key_n = 0; /* the key buffer no longer holds the previous sample's */
    int m = 0;
    if (!t->seq) t->seq = hk_sampler_next_seq();
    key[m++] = t->seq;
    key[m++] = hk_labels_of(t->thread);
    if (n - skip + 1 > max && !(key[m++] = frame_location(HK_FRAME_TRUNCATED, 0))) return;
    for (int i = skip + count - 1; i >= skip; i--)
        if (!(key[m++] = frame_location(S.frame_buf[i], S.line_buf[i]))) return;
    for (int s = HK_STATE_RUNNING; s < HK_NSTATES; s++) {
        int64_t weight = s == HK_STATE_RUNNING ? running : parts[s];
        if (weight <= 0) continue;
        if (!(key[m] = frame_location(s == HK_STATE_RUNNING ? HK_FRAME_UNSAMPLED : HK_FRAME_STATE(s), 0))) return;
        int64_t stack = hk_intern_seq(&S.stacks, key, (uint32_t)m + 1);
        if (stack >= 0 && record((uint32_t)stack, weight, hk_clock_ns(CLOCK_REALTIME), 0) == 0) S.sample_count++;
    }
}

/* ctx: GVL, the resolve lock. What the worker left in the ring. */
void hk_resolve_rest_locked(void)
{
    uint64_t t0 = cost_clock();
    while (resolve_one()) {}
    while (resolve_ractor_one()) {}
    S.resolve_time += cost_clock() - t0;
}

void hk_resolve_rest(void)
{
    pthread_mutex_lock(&hk_resolve_lock);
    hk_resolve_rest_locked();
    pthread_mutex_unlock(&hk_resolve_lock);
}

