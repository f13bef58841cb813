/* sampler.h — the sampling collector: a timer-triggered postponed job that
 * captures the current thread's stack, aggregated as it goes on the timer's worker.
 *
 * The job captures a sample and hands it to the timer's worker through a
 * ring; the worker resolves it into the tables below while the program runs
 * (at stop and snapshot, the GVL's thread resolves what is left). Data layout
 * (the resolver's, under the resolve lock, except threads, the job's):
 *   locations   (frame VALUE, executing line) -> location id (1-based) in one
 *               probe of frame_locs; locs[id-1] keeps the pair for marking and
 *               for the names, which are resolved once per frame at build time;
 *   stacks      interned sequences: the thread's sequence number, then the
 *               location ids root first (a [truncated] root when cut), so a
 *               stack id is also its aggregation row; key_buf keeps the
 *               latest sample's key, position i (from the root) at
 *               key_buf[2 + i], where the next sample finds the ids of the
 *               frames it shares with it (sampler.c);
 *   agg_rows    by stack id: summed weight and count (count 0: cleared by a
 *               snapshot, or its sample lost to a failed allocation);
 *   raw         with aggregate: false, one record per sample instead;
 *   threads     thread VALUE -> hk_thread (previous clock, sequence number);
 *   ring        the job's captures, waiting for the resolver.
 * Memory grows with unique frames, stacks and threads, not with run length.
 */
#ifndef HK_SAMPLER_H
#define HK_SAMPLER_H

#include <ruby.h>
#include <stdint.h>

#include "clocks.h"
#include "intern_table.h"
#include "pace.h"
#include "pair_map.h"
#include "profile.h"
#include "ring.h"
#include "stack_walk.h"
#include "u64_map.h"

typedef enum { HK_MODE_CPU = 0, HK_MODE_WALL = 1 } hk_mode;

/* synthetic frames, keyed by special constants that no real frame can be */
#define HK_FRAME_TRUNCATED Qnil  /* root of a stack cut at max_depth */
#define HK_FRAME_UNSAMPLED Qtrue /* leaf of the stop-time tail (see sampler.c) */
#define HK_FRAME_SYNTHETIC_P(f) ((f) == HK_FRAME_TRUNCATED || (f) == HK_FRAME_UNSAMPLED)

#define HK_MIN_FREQUENCY 1
#define HK_MAX_FREQUENCY 10000
#define HK_DEFAULT_MAX_DEPTH 1024
#define HK_MAX_MAX_DEPTH 65536
#define HK_OWN_FRAMES 8 /* room above max_depth for hakari's own frames, left out of the stop-time tail */

typedef struct hk_sampler_config {
    hk_mode mode;
    int frequency;
    int aggregate;
    int max_depth;
} hk_sampler_config;

/* counters and metadata that travel with a profile to Ruby */
typedef struct hk_sampler_stats {
    hk_mode mode;
    int frequency, aggregate;
    /* The counters and times below cover the same span as the samples: from start,
     * or from the last snapshot that cleared them, to stop or snapshot. */
    int64_t start_time_ns;     /* CLOCK_REALTIME at start (or that snapshot) */
    int64_t duration_ns;       /* monotonic, start (or that snapshot) to stop/snapshot */
    uint64_t trigger_count;    /* timer fires */
    uint64_t sampling_count;   /* sampling callbacks that ran */
    uint64_t sample_count;     /* samples recorded */
    uint64_t dropped_count;    /* samples lost (no frames, out of memory) */
    uint64_t moved_count;      /* samples given to the stack running at the tick, not to calls made after it */
    uint64_t stale_count;      /* cpu mode: stale ticks' samples (pace.h), given to the previous sample's stack */
    uint64_t sampling_time_ns; /* time spent inside the sampling callback, on the profiled threads */
    uint64_t stack_walk_time_ns; /* of which capturing the stack (stack_walk.h) */
    uint64_t resolve_time_ns;  /* turning captures into the profile: on the worker, and at stop */
    uint64_t timer_cpu_ns;     /* CPU used by the timer's worker thread */
    uint64_t thread_count;
    uint64_t unique_frames, unique_stacks; /* set by hk_sampler_build_profile; stacks: (stack, thread) pairs sampled */
    const char *timer_kind;
    const char *stack_walker;      /* stack_walk.h: how the frames were read */
    uint64_t walk_mismatch_count;  /* HAKARI_STACK_WALK=verify: samples whose two walks differed */
} hk_sampler_stats;

typedef struct hk_thread {
    /* the job's, at every sample of this thread (sampler.c prefetch_thread_and_tick) */
    VALUE thread;
    int64_t prev_clock;  /* this thread's clock where its previous sample's weight ended (ns) */
    const void *vm_thread; /* the VM's struct for it (hk_stack_walk_thread), NULL if unknown */
    uint32_t seq;        /* 1-based, in order of first sample; 0 = not sampled yet */
    clockid_t clock;     /* the clock its weights are read on; set at its first sample */
    int tid;             /* native thread id (cpu mode, Linux), 0 if unknown */
    int event_fd;        /* its CPU-time sampling counter (cpu_events.h), or -1 */
    uint8_t has_clock;
    uint8_t spot_valid;  /* spot is where its stack stood at its latest sample */
    uint8_t again;       /* this tick: waiting where its latest sample found it (sampler.c) */
    /* wall mode, while another thread runs: its stack at its latest sample,
     * taken by another thread's job (sampler.c sample_waiting_threads) */
    hk_stack_spot spot;
} hk_thread;

#define HK_FLAG_THREADS 256 /* threads the worker flags when the job waits (hk_sampler flag_threads) */
#define HK_EVENT_FDS 4096 /* descriptors below this map to their thread's clock for the handler */

/* A thread's leaf control frame as the worker read it at a tick (stack_walk.h):
 * where it is kept, and its value then (0: unknown). */
typedef struct hk_leaf {
    const void *slot;
    uintptr_t cfp;
} hk_leaf;

/* The clock reading taken by the timer's worker at the tick (in its signal
 * handler or its paced loop), published to the job with a sequence lock (one
 * writer: the worker). */
typedef struct hk_tick {
    volatile uint32_t seq; /* odd while being written */
    clockid_t clock;
    int64_t value;         /* ns, or -1 when the clock could not be read */
    int state;             /* HK_TICK_* (pace.h): how the watched thread was at the tick */
    hk_leaf leaf;          /* the watched thread's leaf frame, read just before the clock */
} hk_tick;

typedef struct hk_loc { VALUE frame; int line; } hk_loc;

typedef struct hk_agg_row { int64_t weight; uint64_t count; } hk_agg_row; /* one cache line access per sample */

typedef struct hk_raw_sample {
    uint32_t stack; /* its key holds the thread too */
    int64_t weight, time_ns;
} hk_raw_sample;

typedef struct hk_sampler {
    /* immutable after start */
    hk_sampler_config cfg;
    int64_t start_mono_ns, start_real_ns;
    int64_t stop_mono_ns; /* set as stop begins: the duration ends there, not after stop's own work */
    int cost_tsc;       /* cost_clock's units are TSC ticks (sampler.c) */
    uint64_t start_tsc;
    size_t capture_room; /* the most words one sample takes in the ring */
    /* the allocations below, kept from one session to the next (sampler.c keep_tables) */
    int kept;           /* they are a stopped session's, emptied */
    int buf_depth;      /* the max_depth frame_buf, line_buf, key_buf and the ring are sized for */
    size_t reserved_size; /* the reserved tables' bytes after start (hk_sampler_tables_size) */
    int building;       /* a snapshot is reading the tables (set under the resolve lock; read by the
                           worker, so kept off the lines the job writes) */
    /* the job's, and the GVL's */
    _Alignas(64) int running;
    hk_u64_map thread_ids;
    hk_thread *threads; size_t nthreads, threads_cap;
    uint32_t nseq;      /* threads that have been sampled */
    size_t last_thread; /* index of the previous sample's thread (checked before use) */
    uint64_t sampling_count, dropped_count;
    uint64_t sampling_time, capture_time; /* in cost_clock units: TSC ticks or ns (sampler.c) */
    uint64_t replaced_timer_cpu_ns; /* CPU of a worker that perf clocks' fallback replaced */
    int open_events, max_events; /* counters open now; the most the descriptor limit allows */
    /* the job's captures (stack_walk.h), each after its sample's head, for the
     * resolver; the GC marks what they hold until they are resolved */
    hk_ring ring;
    /* The resolver's: the worker's, or the GVL's at stop and snapshot, always
     * under the resolve lock (sampler.c), which the GC mark takes too. */
    _Alignas(64) VALUE *frame_buf; /* max_depth + 1 + HK_OWN_FRAMES entries, reused by every sample */
    int *line_buf;
    /* the latest sample's key (see stacks above), for the next one */
    uint32_t *key_buf;  /* 2 + max_depth + 1 + HK_OWN_FRAMES entries */
    uint64_t key_walk;  /* the capture it is from (hk_stack_walk_capture_number) */
    int key_n;          /* its frames; 0: none, or not to be trusted */
    int key_truncated;
    uint32_t key_seq;   /* its thread */
    int key_skip;       /* top frames left out of its stack: called after its tick */
    int64_t key_stack;  /* the stack interned for it (its sample's, unless stale: sampler.c), or -1 */
    hk_pair_map frame_locs; /* (frame VALUE, line) -> location id: the per-sample lookup */
    hk_loc *locs; size_t nlocs, locs_cap;
    hk_intern_table stacks;
    hk_agg_row *agg_rows; size_t agg_cap; /* by stack id; zeroed as they are allocated */
    hk_raw_sample *raw; size_t nraw, raw_cap;
    uint32_t *tick_stacks; size_t tick_stacks_cap; /* by thread sequence number: 1 + the stack its
                                                      latest sample saw, where its next period began; 0: none */
    uint64_t sample_count, unresolved_count, moved_count, stale_count;
    uint64_t resolve_time; /* in cost_clock units */
    hk_sampler_stats cleared; /* the session's totals at the last snapshot that cleared (zero: none) */
    /* read by the timer's worker at every tick, written only at start, stop or
     * (tick_target) when the sampled thread changes: a line of their own, away
     * from the counters the job writes every sample, which would otherwise be
     * pulled back and forth between the two cores */
    _Alignas(64) int64_t period_ns;
    int use_events;           /* cpu mode driven by per-thread perf counters (else the paced worker) */
    clockid_t *fd_clock;      /* HK_EVENT_FDS entries: event fd -> thread CPU clock, read by the handler */
    clockid_t tick_target;    /* the clock the worker reads: the last sampled thread's (cpu), or monotonic */
    const void *leaf_slot;    /* where the last sampled context keeps its leaf frame (hk_sampler_leaf_now) */
    /* written by the timer's worker, every tick: a cache
     * line of their own, so the profiled thread's reads of the fields above do
     * not bounce between cores (false sharing cost more than the stack walk) */
    _Alignas(64) volatile uint64_t trigger_count;
    hk_tick tick;
    uint32_t job_ran;         /* wall mode: the job ran since the last tick (set by the job, taken by the
                                 worker; not sampling_count, whose line the worker would pull from the job) */
    /* owned by the worker (cpu mode's default clock), written at every look: a
     * line of its own, so it does not pull away the tick the job reads */
    _Alignas(64) hk_pacer pacer;
    /* Wall mode: the threads the worker asks to run the job when none ran
     * since the previous tick (sampler.c flag_threads). Appended with the GVL
     * (hk_sampler_thread_add), read by the worker: a fixed array, never moved. */
    _Alignas(64) uint32_t nflag;
    const void *flag_threads[HK_FLAG_THREADS]; /* VM threads (stack_walk.h), their Thread objects marked */
    _Alignas(64) char end_of_handler_fields;
} hk_sampler;

extern hk_sampler hk_the_sampler;

/* ctx: GVL. 0, or -1 with a message in err (already running, timer failure). */
int hk_sampler_start(const hk_sampler_config *cfg, char *err, size_t errlen);
/* ctx: the timer's worker. The last sampled thread's leaf frame now: read it
 * before the clock reading the tick publishes. */
hk_leaf hk_sampler_leaf_now(void);
/* ctx: the timer's worker (signal handler or paced loop). Publishes a tick's
 * clock reading to the job (seqlock) and triggers the job; state: how the
 * thread was at the tick (HK_TICK_*, pace.h). */
void hk_sampler_trigger(clockid_t c, int64_t value, int state, hk_leaf leaf);
/* ctx: GVL. Stops and returns the profile (NULL when not running or out of memory). */
hk_profile *hk_sampler_stop(hk_sampler_stats *stats);
/* ctx: GVL. The profile so far; with clear, samples start over (frames are kept). */
hk_profile *hk_sampler_snapshot(int clear, hk_sampler_stats *stats);
int hk_sampler_running(void);
/* ctx: GVL, GC mark phase. Marks (pins) every frame and thread VALUE held. */
void hk_sampler_mark(void);
size_t hk_sampler_memsize(void);
/* ctx: GVL, once at load. */
void hk_sampler_init(void);

/* profile_build.c — ctx: GVL (allocates Ruby strings while resolving names) */
hk_profile *hk_sampler_build_profile(const hk_sampler *s, hk_sampler_stats *stats);

#endif
