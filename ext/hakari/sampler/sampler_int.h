/* sampler_int.h — the sampler's state and what its files share; only they
 * include it (the contract is sampler.h). The files:
 *   sampler.c          the postponed job's capture, the ticks, start, stop, snapshot, the GC mark;
 *   sampler_resolve.c  captures into locations, stacks and summed weights, on the worker;
 *   sampler_threads.c  the threads' records and baseline clocks;
 *   sampler_states.c   GC phases and GVL states: a sample's time split by where it went;
 *   sampler_labels.c   the label sets samples carry (Hakari.label);
 *   sampler_objects.c  object mode: a sample every N allocated objects, with their classes;
 *   sampler_build.c    the tables into the profile model, at stop and snapshot.
 *
 * Data layout (the resolver's, under the resolve lock, except threads, the job's):
 *   locations   (frame VALUE, executing line) -> location id (1-based) in one
 *               probe of frame_locs; locs[id-1] keeps the pair for marking and
 *               for the names, which are resolved once per frame at build time;
 *   stacks      interned sequences: the thread's sequence number, its label
 *               set (sampler_labels.c, 0: none), then the location ids root first (a [truncated] root when cut), so a
 *               stack id is also its aggregation row; key_buf keeps the
 *               latest sample's key, position i (from the root) at
 *               key_buf[KEY_HEAD + i], where the next sample finds the ids of
 *               the frames it shares with it (sampler_resolve.c);
 *   agg_rows    by stack id: summed weight, count and (object modes) bytes (count 0: cleared by a
 *               snapshot, or its sample lost to a failed allocation);
 *   raw         with aggregate: false, one record per sample instead;
 *   threads     thread VALUE -> hk_thread (previous clock, sequence number);
 *   ring        the job's captures, waiting for the resolver.
 * Memory grows with unique frames, stacks and threads, not with run length.
 */
#ifndef HK_SAMPLER_INT_H
#define HK_SAMPLER_INT_H

#include <ruby.h>
#include <ruby/debug.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "clocks.h"
#include "intern_table.h"
#include "pace.h"
#include "pair_map.h"
#include "profile.h"
#include "ring.h"
#include "sampler.h"
#include "stack_walk.h"
#include "u64_map.h"

/* synthetic frames, keyed by special constants that no real frame can be */
#define HK_FRAME_TRUNCATED Qnil  /* root of a stack cut at max_depth */
#define HK_FRAME_UNSAMPLED Qtrue /* leaf of a thread's time after its last sample (sampler_resolve.c) */
/* where a thread's time went besides running (sampler_states.c); the others' leaf frames are
 * Fixnums, which no real frame can be either */
enum { HK_STATE_RUNNING = 0, HK_STATE_BLOCKED = 1, HK_STATE_WAIT = 2, HK_STATE_GC_MARK = 3, HK_STATE_GC_SWEEP = 4,
       HK_NSTATES = 5 };
#define HK_FRAME_STATE(s) INT2FIX(s)
#define HK_FRAME_STATE_P(f) (FIXNUM_P(f) && FIX2LONG(f) > HK_STATE_RUNNING && FIX2LONG(f) < HK_NSTATES)
#define HK_FRAME_SYNTHETIC_P(f) ((f) == HK_FRAME_TRUNCATED || (f) == HK_FRAME_UNSAMPLED || HK_FRAME_STATE_P(f))

#define HK_OWN_FRAMES 8     /* room above max_depth for hakari's own frames, left out of the stop-time tail */
#define HK_FLAG_THREADS 256 /* threads the worker asks to run the job when none ran (sampler.c flag_threads) */

typedef struct hk_thread {
    /* the job's, at every sample of this thread (sampler.c prefetch_thread_and_tick) */
    VALUE thread;
    int64_t prev_clock;    /* this thread's clock where its previous sample's weight ended (ns) */
    const void *vm_thread; /* the VM's struct for it (hk_stack_walk_thread), NULL if unknown */
    uint32_t seq;          /* 1-based, in order of first sample; 0 = not sampled yet */
    clockid_t clock;       /* the clock its weights are read on; set at its first sample */
    int tid;               /* native thread id (cpu mode, Linux), 0 if unknown */
    uint8_t has_clock;
    uint8_t spot_valid;    /* spot is where its stack stood at its latest sample */
    uint8_t again;         /* this tick: waiting where its latest sample found it (sampler.c) */
    uint8_t own;           /* hakari's own (the snapshot thread): never sampled (hk_sampler_own_thread) */
    /* wall mode, while another thread runs: its stack at its latest sample,
     * taken by another thread's job (sampler_waits.c hk_sampler_sample_waiting_threads) */
    hk_stack_spot spot;
    /* its time in other states than running, not yet given to a sample (sampler_states.c) */
    int64_t gc_mark, gc_sweep; /* on the profile's clock, added by the GC's events */
    void *gvl;                 /* its GVL record (wall mode, Rubies with thread event hooks), or NULL */
    int64_t gvl_blocked, gvl_wait; /* that record's totals at its latest sample */
    /* its time in other states already taken at a change of its labels (hk_states_take_ahead),
     * which the weight of its next sample or samples also holds: left out of them */
    int64_t ahead;
    /* cpu mode: its CPU off the GVL (sampler_states.c) up to its latest sample */
    int64_t off_mark;
    /* wall mode without GVL events: at its own latest sample, its CPU clock (-1: unknown) and
     * its time runnable but kept off a core (hk_thread_run_delay_ns; -1: unknown) */
    int64_t cpu_mark, delay_mark;
} hk_thread;

/* A thread's leaf control frame as the worker read it at a tick (stack_walk.h):
 * where it is kept, and its value then (0: unknown). */
typedef struct hk_leaf {
    const void *slot;
    uintptr_t cfp;
    uintptr_t iseq; /* the leaf Ruby frame's iseq, when synth is set */
    uint32_t synth; /* the method its specialized instruction ran (hk_synth_read), or 0 */
} hk_leaf;

/* The clock reading taken by the timer's worker at the tick, published to the
 * job with a sequence lock (one writer: the worker). */
typedef struct hk_tick {
    volatile uint32_t seq; /* odd while being written */
    clockid_t clock;
    int64_t value;         /* ns, or -1 when the clock could not be read */
    int state;             /* HK_TICK_* (pace.h): how the watched thread was at the tick */
    hk_leaf leaf;          /* the watched thread's leaf frame, read just before the clock */
    int64_t wall;          /* the monotonic clock as the tick was made (ns) */
} hk_tick;

typedef struct hk_loc { VALUE frame; int line; } hk_loc;

/* one cache line access per sample; bytes: object modes' (alloc_space, retained_space) */
typedef struct hk_agg_row { int64_t weight; uint64_t count; int64_t bytes; } hk_agg_row;

typedef struct hk_raw_sample {
    uint32_t stack; /* its key holds the thread too */
    uint32_t bytes; /* object mode: the object's slot (times the weight: its alloc_space) */
    int64_t weight, time_ns;
} hk_raw_sample;

typedef struct hk_sampler {
    /* immutable after start */
    hk_sampler_config cfg;
    int64_t start_mono_ns, start_real_ns;
    int64_t stop_mono_ns; /* set as stop begins: the duration ends there, not after stop's own work */
    int64_t start_process_cpu, process_cpu; /* cpu mode: the process's CPU clock at start, and at the
                                               stop call or the latest snapshot */
    int cost_tsc;         /* cost_clock's units are TSC ticks (below) */
    int synth;            /* frames are synthesized for specialized instructions (hk_synth_start) */
    const char *synth_how; /* whether, or why not */
    uint64_t start_tsc;
    size_t capture_room;  /* the most words one sample takes in the ring */
    /* the allocations below, kept from one profile to the next (sampler.c keep_tables) */
    int kept;             /* they are a stopped profile's, emptied */
    int buf_depth;        /* the max_depth frame_buf, line_buf, key_buf and the ring are sized for */
    size_t reserved_size; /* the reserved tables' bytes after start (hk_sampler_tables_size) */
    int building;         /* a snapshot is reading the tables (set under the resolve lock; read by the
                             worker, so kept off the lines the job writes) */
    /* the job's, and the GVL's */
    _Alignas(64) int running;
    int ended;            /* hk_sampler_end ran: the profile's time is over, stop builds it */
    hk_u64_map thread_ids;
    hk_thread *threads; size_t nthreads, threads_cap;
    uint32_t nseq;        /* threads that have been sampled */
    int mn;               /* cpu mode under M:N threads: threads' CPU clocks from sampler_mn.c */
    int any_own;          /* a thread is hakari's own (hk_thread.own) */
    /* Ractors other than the main one started since start (or running then): from the first,
     * the job checks that it runs in the main Ractor, whose GVL serializes the job's writes */
    uint64_t ractors_started;
    /* Thread objects of threads that ended, marked until the worker can no longer be
     * flagging them (sampler_threads.c hk_sampler_thread_retire): until trigger_count reaches `until` */
    struct hk_retired { VALUE thread; uint64_t until; } *retired; size_t nretired, retired_cap;
    size_t last_thread;   /* index of the previous sample's thread (checked before use) */
    uint64_t sampling_count, dropped_count;
    uint64_t label_change_count; /* hk_sampler_labels_changing's samples */
    uint64_t sampling_time, capture_time; /* in cost_clock units: TSC ticks or ns */
    int64_t parts[HK_NSTATES]; /* scratch: a sample's time by state (sampler_states.c) */
    /* the job's captures (stack_walk.h), each after its sample's head, for the
     * resolver; the GC marks what they hold until they are resolved */
    hk_ring ring;
    /* The resolver's: the worker's, or the GVL's at stop and snapshot, always
     * under the resolve lock, which the GC's mark takes too. */
    _Alignas(64) VALUE *frame_buf; /* max_depth + 1 + HK_OWN_FRAMES entries, reused by every sample */
    int *line_buf;
    /* the latest sample's key (see stacks above), for the next one */
    uint32_t *key_buf;  /* KEY_HEAD + max_depth + 1 + HK_OWN_FRAMES entries */
    uint64_t key_walk;  /* the capture it is from (hk_stack_walk_capture_number) */
    int key_n;          /* its frames; 0: none, or not to be trusted */
    int key_truncated;
    uint32_t key_seq;   /* its thread */
    uint32_t key_labels; /* its label set */
    int key_skip;       /* top frames left out of its stack: called after its tick */
    int64_t key_stack;  /* the stack interned for it (its sample's, unless stale), or -1 */
    hk_pair_map frame_locs; /* (frame VALUE, line) -> location id: the per-sample lookup */
    hk_loc *locs; size_t nlocs, locs_cap;
    hk_intern_table stacks;
    hk_agg_row *agg_rows; size_t agg_cap; /* by stack id; zeroed as they are allocated */
    hk_raw_sample *raw; size_t nraw, raw_cap;
    uint32_t *tick_stacks; size_t tick_stacks_cap; /* by thread sequence number: 1 + the stack its
                                                      latest sample saw, where its next period began; 0: none */
    uint32_t *state_stacks; size_t state_stacks_cap; /* by seq * HK_NSTATES + state: 1 + that stack with
                                                        the state's leaf (slot 0: the stack it is for) */
    uint64_t sample_count, unresolved_count, moved_count, stale_count, synthesized_count, off_gvl_count;
    /* object mode: the sampled objects' classes, by the index their samples carry
     * (sampler_objects.c; HK_CLASS_* below the first), written by the hook, read at build */
    VALUE *classes; size_t nclasses, classes_cap;
    int64_t resolved_stack; /* the stack of the sample resolved last (-1: none); retained mode's */
    uint64_t resolve_time; /* in cost_clock units */
    hk_sampler_stats cleared; /* the totals at the last snapshot that cleared (zero: none) */
    /* read by the timer's worker at every tick, written only at start and stop
     * or (leaf_slot) when the sampled context changes: a line of their own,
     * away from the counters the job writes every sample, which would
     * otherwise be pulled back and forth between the two cores */
    _Alignas(64) int64_t period_ns;
    const void *leaf_slot; /* where the last sampled context keeps its leaf frame (hk_sampler_leaf_now) */
    /* written by the timer's worker, every tick: a cache line of their own,
     * so the profiled thread's reads of the fields above do not bounce
     * between cores (false sharing cost more than the stack walk) */
    _Alignas(64) volatile uint64_t trigger_count;
    hk_tick tick;
    uint32_t job_ran;      /* wall mode: the job ran since the last tick (set by the job, taken by the
                              worker; not sampling_count, whose line the worker would pull from the job) */
    int off_gvl_due;       /* cpu mode: a thread's CPU off the GVL reached a period (sampler_states.c) */
    const void *watched_vm; /* cpu mode: the VM thread whose clock the worker watches (the job's;
                               read by the thread event hooks, sampler_states.c) */
    uint32_t job_tick_seq; /* the tick's seq as the latest job that took a tick's sample began (the job's) */
    hk_leaf worker_leaf;   /* cpu mode: the leaf the worker read just before its tick (the worker's alone) */
    /* Wall mode: the threads the worker asks to run the job when none ran
     * since the previous tick (sampler.c flag_threads). Appended with the GVL
     * (hk_sampler_thread_add), read by the worker: a fixed array, never moved. */
    _Alignas(64) uint32_t nflag;
    const void *holder; /* the VM thread that took the GVL last (sampler_threads.c), or NULL */
    const void *flag_threads[HK_FLAG_THREADS]; /* VM threads (stack_walk.h), their Thread objects marked */
    /* A thread of another Ractor ran the postponed jobs while the tick's job was pending (Ruby's
     * job bits are the VM's): the job did nothing there, and the main thread that takes the GVL
     * next asks for it again (sampler_threads.c), so that a thread waking from a wait is sampled
     * in the call it waited in. The job's handle, where Ruby has one (3.3+: has_job_handle). */
    int job_stolen;
    int has_job_handle;
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    rb_postponed_job_handle_t job_handle;
#endif
} hk_sampler;

extern hk_sampler hk_the_sampler;
#define S hk_the_sampler

/* a thread's sequence number, at its first sample: Ractors' jobs take them too (sampler_ractors.c) */
static inline uint32_t hk_sampler_next_seq(void) { return __atomic_add_fetch(&S.nseq, 1, __ATOMIC_RELAXED); }

/* ---- samples of other Ractors' threads (sampler_ractors.c) ---------------------------------

 * What sampler_ractors.c shares with the resolver and the build: not S's, which is emptied at
 * every stop, but kept from start to the next start (sampler_state.c defines it). */
#define HK_RACTOR_THREADS 256 /* threads of other Ractors one profile samples */
typedef struct hk_ractor_thread {
    uint32_t seq;  /* the thread's sequence number */
    uint32_t id;   /* its Ractor's number (Ractor#inspect's #N; 0: unknown) */
    VALUE ractor;  /* its Ractor, marked (Qnil: unknown), for its name at build */
} hk_ractor_thread;
typedef struct hk_ractor_samples {
    /* the samples, each a hk_ractor_sample and its frames: written by the Ractors' jobs one at a
     * time (under sampler_ractors.c's lock), read by the resolver under the resolve lock */
    hk_ring ring;
    uint32_t nthreads; /* entries of threads[] written (stored with release) */
    hk_ractor_thread threads[HK_RACTOR_THREADS];
} hk_ractor_samples;
extern hk_ractor_samples hk_the_ractor_samples;
#define RS hk_the_ractor_samples
/* A sample in RS.ring: this head, then n frame VALUEs (leaf first, as rb_profile_frames gives
 * them), then their n lines, a word each. parts: the thread's time since its previous sample by
 * state (cpu mode: its CPU, running only; wall mode: also its time off its Ractor's GVL);
 * before: of its running time, what it ran up to the first time it let the GVL go since then,
 * which goes to its previous sample's stack (the wait began in a call made after it, where
 * that time was not spent). */
typedef struct hk_ractor_sample {
    uint32_t seq, n;
    uint32_t truncated, pad; /* truncated: the stack went on below the n frames */
    int64_t time_ns;         /* CLOCK_REALTIME at the job (aggregate: false) */
    int64_t before;
    int64_t parts[HK_NSTATES];
} hk_ractor_sample;
#define HK_RACTOR_HEAD_WORDS (sizeof(hk_ractor_sample) / sizeof(uint64_t))
_Static_assert(sizeof(hk_ractor_sample) % sizeof(uint64_t) == 0, "frames start on a word");

/* ---- samples in the ring -------------------------------------------------- */

/* A sample in the ring: its head, then its capture (stack_walk.h). */
typedef struct sample_head {
    uint32_t seq;    /* its thread's sequence number; 0: the sample is lost, its capture is
                        resolved all the same (the next ones may build on it) */
    int32_t state;   /* HK_TICK_*: how the thread was at the tick; or HK_SAMPLE_AGAIN */
    int64_t weight;
    int64_t time_ns; /* CLOCK_REALTIME at the job (aggregate: false) */
    hk_leaf leaf;    /* the thread's leaf frame at the tick */
    uint32_t labels; /* the label set its fiber was in (sampler_labels.c), 0: none; in object
                        mode with its object's class above it (HK_OBJECT_CONTEXT) */
    uint32_t bytes;  /* object mode: the sampled object's slot in Ruby's heap */
} sample_head;
#define HEAD_WORDS (sizeof(sample_head) / sizeof(uint64_t))
/* in a sample head's state, beside the HK_TICK_* value (the low byte): the sample only tells
 * where its thread is; its time is all in the state parts that follow it */
#define HK_HEAD_STACK_ONLY 0x100
/* in a sample head's state: a sample taken as its thread's labels changed (sampler.c
 * hk_sampler_labels_changing). Its record's last HK_NSTATES words, after the capture, are the
 * thread's time by state, which goes under the capture's stack; the thread's latest stack stays
 * its latest tick's, for the samples that build on it (HK_SAMPLE_AGAIN, tails, late ticks). */
#define HK_HEAD_LABELS_CHANGE 0x200
/* in a sample head's state: not a tick's sample but the CPU its thread used off the GVL
 * (sampler_states.c), taken in the call that let it go: its thread's next period does not
 * begin at its stack */
#define HK_HEAD_OFF_GVL 0x400
#define HK_HEAD_TICK(h) ((h)->state & 0xff)
/* A record of samples with no capture, of threads whose stacks have not
 * changed since their previous samples (sampler_waits.c): its
 * head's seq is their number, n; n pairs of words follow, a thread's sequence
 * number and its weight, which adds to that thread's previous stack. */
#define HK_SAMPLE_AGAIN 16
#define HK_AGAIN_MAX 256 /* pairs in one record */
/* A record with no capture of a thread's time since its latest sample, taken
 * as it ends or at stop (its head's seq and weight): it goes under that
 * sample's stack with an [unsampled] leaf, or alone when there was none. */
#define HK_SAMPLE_TAIL 17
/* In a record of HK_SAMPLE_AGAIN pairs, a pair's first word: the thread's sequence number, and
 * the state its weight was spent in above bit 32 (HK_STATE_RUNNING: the stack itself) */
#define HK_AGAIN_WORD(seq, state) ((uint64_t)(seq) | (uint64_t)(state) << 32)
/* a sample head followed by a capture (HK_TICK_* states), not a record of another kind */
static inline int hk_sample_has_capture(const sample_head *h) { return HK_HEAD_TICK(h) < HK_SAMPLE_AGAIN; }
_Static_assert(sizeof(sample_head) % sizeof(uint64_t) == 0, "a capture starts on a word");

/* The key buffer's head: room for the thread, the label set and the
 * [truncated] root in front of position 0 (see stacks above) */
#define KEY_HEAD 3

/* The callback's cost is counted on the TSC where the kernel trusts it: four
 * reads per sample at a few cycles each, against ~25 ns for clock_gettime, in
 * a callback that should cost under a microsecond. Scaled to ns in fill_totals. */
static inline uint64_t cost_clock(void) { return S.cost_tsc ? hk_tsc() : (uint64_t)hk_clock_ns(CLOCK_MONOTONIC); }

/* the calling thread's clock in the profile's mode (CPU or monotonic) */
static inline clockid_t hk_sampler_mode_clock(void)
{
    return S.cfg.mode == HK_MODE_CPU ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

/* The thread's weight up to `now` on its clock: since its previous sample
 * (one nominal period when that is unknown), its next one starting at now;
 * 0 when now is behind it (a sample weighed further already). */
static inline int64_t hk_sampler_weight_until(hk_thread *t, int64_t now)
{
    int64_t weight = t->prev_clock < 0 ? S.period_ns : now - t->prev_clock;
    if (weight < 0) return 0;
    t->prev_clock = now;
    return weight;
}

/* ---- sampler_waits.c (all with the GVL) ---------------------------------------- */

/* The parts of a sample just committed (from hk_states_take), other than running, as a record
 * of pairs after it: under its stack, each with its state's leaf. */
void hk_sampler_take_parts(const hk_thread *t, const int64_t parts[HK_NSTATES]);
/* Wall mode: a sample of each thread waiting while cur runs, weighed up to `now` (the tick),
 * at the stack it waits in. */
void hk_sampler_sample_waiting_threads(const hk_thread *cur, int64_t now);
/* A thread's time since its latest sample, at its end (own: the thread itself) or at stop (a
 * waiting thread), now on its clock: running as an [unsampled] tail, the other states' parts
 * after it. */
void hk_sampler_take_thread_tail(hk_thread *t, int64_t now, int own);
/* cpu mode: the teardowns of ended threads since the last call, as their tails. */
void hk_sampler_take_exits(void);
/* At stop: every thread's tail but cur's. */
void hk_sampler_take_other_tails(const hk_thread *cur);

/* ---- sampler_resolve.c ------------------------------------------------------ */

/* Held by whoever resolves (the worker, or the GVL's thread at stop and
 * snapshot) and by the GC's mark: the tables and the ring's unresolved
 * records are never read while they change. The job never takes it. */
extern pthread_mutex_t hk_resolve_lock;

/* ctx: GVL, at start: the session's buffers, tables, walker and ring for
 * cfg's max_depth, or the kept ones (0, or -1 out of memory: then free them). */
int hk_sampler_tables_alloc(const hk_sampler_config *cfg);
/* ctx: GVL, at stop: empties the tables and keeps them for the next start. */
void hk_sampler_tables_keep(void);
/* ctx: GVL: frees everything the tables hold and zeroes the sampler's state. */
void hk_sampler_tables_free(void);
/* ctx: GVL, at start. Reserves the tables' first few thousand entries (0, or -1). */
int hk_sampler_reserve_tables(void);
/* The bytes of the tables hk_sampler_reserve_tables reserves, as they are now. */
size_t hk_sampler_tables_size(void);
/* ctx: the timer's worker, between ticks (timer.h): resolves for about budget_ns. */
void hk_resolve_on_worker(long budget_ns);
/* rows for `need` stacks, the new ones zeroed (0, or -1 out of memory) */
int hk_sampler_grow_rows(size_t need);
/* ctx: GVL, with (_locked) or without the resolve lock: resolves what the ring holds. */
void hk_resolve_rest_locked(void);
void hk_resolve_rest(void);
/* ctx: GVL, at stop, after the last sample is resolved: the calling thread's time since its
 * last sample (read as stop began, so that stop's own work is in no total), its running part
 * and the parts it spent in other states (hk_states_take), under the caller's stack. */
void hk_sampler_take_tail_sample(int64_t running, const int64_t parts[HK_NSTATES]);

/* ---- sampler_threads.c (all with the GVL) ------------------------------------- */

/* the thread's record, or NULL if it has none yet */
hk_thread *hk_sampler_thread_find(VALUE th);
/* the same, the previous sample's thread looked at first (S.last_thread): most samples are its */
static inline hk_thread *hk_sampler_thread_of(VALUE th)
{
    if (S.last_thread < S.nthreads && S.threads[S.last_thread].thread == th) return &S.threads[S.last_thread];
    return hk_sampler_thread_find(th);
}
/* a new record with prev_clock as its baseline (-1: unknown); NULL when out of memory */
hk_thread *hk_sampler_thread_add(VALUE th, int64_t prev_clock);
/* the thread's VM struct is known (t->vm_thread): the worker may flag it (sampler.c flag_threads) */
void hk_sampler_thread_flaggable(const hk_thread *t);
/* at its end, its tail taken: the thread's record leaves the tables (t is then another's, or none) */
void hk_sampler_thread_retire(hk_thread *t);
/* ctx: GC mark phase. The Thread objects of ended threads the worker may still flag. */
void hk_sampler_threads_mark(void);
/* cpu mode: a thread's teardown after its end (sampler_threads.c). At start and stop the hook
 * that measures it (a no-op where Ruby has no thread event hooks; forget: in a forked child);
 * at a thread's end, on it, its sequence number and CPU clock; and, with the GVL, the
 * teardowns measured since: up to max of them into seqs and ns (lost: those the list had no
 * room for are added); returns how many. */
void hk_sampler_exits_start(void);
void hk_sampler_exits_stop(void);
void hk_sampler_exits_forget(void);
void hk_sampler_thread_exiting(uint32_t seq, int64_t cpu);
size_t hk_sampler_exits_take(uint32_t *seqs, int64_t *ns, size_t max, uint64_t *lost);
/* The thread that holds the GVL (S.holder), for the worker to flag at a tick, where Ruby's
 * thread hooks name it (3.3+; else S.holder stays NULL): from start (the calling thread) to
 * stop (or a forked child's forget); ended: a thread's end, which is no longer to be flagged. */
/* Where Ruby has thread hooks (3.3+): a function that says whether no thread holds the GVL
 * (hk_tick_hooks.gvl_free); else NULL */
int (*hk_sampler_gvl_free_fn(void))(void);
void hk_sampler_holder_start(void);
void hk_sampler_holder_stop(void);
void hk_sampler_holder_ended(const void *vm_thread);
/* object mode's watch windows, at th's end, on it: it is no longer the holder, and its Thread
 * object stays marked until the worker, which counts its steps in trigger_count, can no longer
 * be flagging it */
void hk_sampler_holder_thread_end(VALUE th);
/* at start: a record (and a baseline clock) for every live thread */
void hk_sampler_threads_start(void);
/* cpu mode, once its clock runs: each live thread's counter (HAKARI_CPU_CLOCK=perf) */
void hk_sampler_threads_clock(void);
/* cpu mode: where the CPU clock of native thread tid (now: its value) was last
 * accounted, for a Ruby thread that begins on it; and that it is accounted up to clock */
int64_t hk_sampler_native_baseline(int tid, int64_t now);
void hk_sampler_native_accounted(int tid, int64_t clock);

/* ---- sampler_mn.c: cpu mode under M:N threads (3.3+, RUBY_MN_THREADS=1) ------------------- */

/* ctx: GVL, at start (after the config): 1 when Ruby runs the main Ractor's threads M:N and
 * cpu mode therefore builds each Ruby thread's CPU clock of its stretches on native threads;
 * stop: the hook and the records go; forget: in a forked child. */
int hk_mn_start(void);
void hk_mn_stop(void);
void hk_mn_forget(void);
/* ctx: GVL. Ruby thread th's CPU clock now (ns); its clock when native clock c read v, if it
 * was running on that native thread then (else -1); the native clock it runs on (0: none). */
int64_t hk_mn_cpu_now(VALUE th);
int64_t hk_mn_cpu_at(VALUE th, clockid_t c, int64_t v);
clockid_t hk_mn_native_clock(VALUE th);
/* ctx: cpu mode's worker (hk_tick_hooks.others): the CPU of the native threads that ran Ruby
 * threads since start, less the one whose clock is `watched`, summed over the worker's looks */
int64_t hk_mn_others_cpu(clockid_t watched);
/* ctx: the worker, as it makes a tick (hk_tick_hooks.others_at_tick): the native threads' clocks
 * its look read (fresh), or none, are kept for the tick's jobs */
void hk_mn_others_at_tick(int fresh);
/* ctx: GVL (the job). th's clock at the latest tick, read through the native thread it runs on
 * when the tick's look read that one (and that reading in *native), else -1. */
int64_t hk_mn_cpu_at_tick(VALUE th, int64_t *native);
/* ctx: GVL, at th's end (and stop): its record goes. */
void hk_mn_thread_end(VALUE th);

/* cpu mode: thread t's CPU clock now: its native thread's, or under M:N its own (sampler_mn.c) */
static inline int64_t hk_sampler_thread_cpu(const hk_thread *t, clockid_t native)
{
    return S.mn ? hk_mn_cpu_now(t->thread) : hk_clock_ns(native);
}

/* ---- sampler_ractors.c: other Ractors' threads (cpu and wall modes; 3.3+) ------------------ */

/* ctx: main Ractor's GVL. At start (after the walker): 1 when their threads are sampled from now
 * on, 0 when not on this Ruby, -1 on failure (out of memory). init: once, at load. */
int hk_ractors_start(int64_t period_ns);
/* ctx: GVL, at every start (before hk_ractors_start, whatever the mode): the last profile's
 * samples, threads and counters of other Ractors go */
void hk_ractors_reset(void);
void hk_ractors_init(void);
/* ctx: GVL, at stop: no sample is written after it returns (what was is resolved later);
 * forget: in a forked child */
void hk_ractors_stop(void);
void hk_ractors_forget(void);
/* samples lost (the ring full, the table full); the CPU of the thread that signals them */
uint64_t hk_ractors_dropped(void);
/* threads of other Ractors sampled since start */
uint64_t hk_ractors_threads(void);
/* the jobs that took their samples, and the time they took in those threads (ns) */
void hk_ractors_jobs(uint64_t *count, uint64_t *ns);
uint64_t hk_ractors_ticker_cpu_ns(void);
/* ctx: GC mark phase, under the resolve lock */
void hk_ractors_mark(void);

/* ---- sampler_states.c ------------------------------------------------------------ */

/* ctx: GVL. At start (after the threads' records) and stop: the GC's events, and in wall mode
 * the thread event hooks; forget: in a forked child. */
void hk_states_start(void);
void hk_states_stop(void);
void hk_states_forget(void);
/* ctx: GVL. A new thread record: its state totals start now; running: it is the thread that
 * holds the GVL (the others are taken to be off it until their hooks say otherwise). */
void hk_states_thread(hk_thread *t, int running);
/* ctx: GVL, on the thread itself, at its end (its tail taken): its state record goes. */
void hk_states_thread_end(hk_thread *t);
/* Whose time hk_states_take splits: a thread sampled where it waits, by another thread's job;
 * the job's own thread, at a tick; a thread's own time up to its end or to stop. */
enum { HK_SPLIT_WAITING, HK_SPLIT_OWN, HK_SPLIT_OWN_END };
/* ctx: GVL. Splits a sample's weight, t's time up to `to` on the profile's clock: the parts
 * spent in other states go to parts[state]; returns the running part. Where Ruby has no GVL
 * events, a thread's own time off CPU is taken to be blocked (HK_SPLIT_OWN: read when the
 * sample is long enough to hold a block; HK_SPLIT_OWN_END: always). */
int64_t hk_states_take(hk_thread *t, int64_t weight, int64_t to, int whose, int64_t parts[HK_NSTATES]);
/* ctx: GVL, t another thread, sampled where it waits (wall mode, where Ruby has no GVL events).
 * Of its weight (its time since its previous sample, less what other states took), the part it
 * ran since its marks (its CPU, read on its native thread's clock; the marks move to now): the
 * end of a stretch it ran before it blocked, with no tick of its own after it. 0 where that
 * cannot be read or Ruby has the events. */
int64_t hk_states_ran_before_waiting(hk_thread *t, int64_t weight);
/* ctx: GVL, t the calling thread. Whether it spent time in another state than running since
 * its latest sample that no sample holds yet (a GC's steps; in wall mode, where Ruby has GVL
 * events, time off the GVL or waiting for it). */
int hk_states_pending(const hk_thread *t);
/* cpu mode, ctx: GVL, on t's own thread. The CPU t used off the GVL since that was last taken,
 * when it has reached a period (sampler_states.c), else 0. t's other samples leave it out. */
int64_t hk_states_take_off_gvl(hk_thread *t);
/* ctx: GVL, t the calling thread. That time, into parts[state], now: its next sample's weight
 * leaves it out (t->ahead). */
void hk_states_take_ahead(hk_thread *t, int64_t parts[HK_NSTATES]);
/* wall mode: when a thread that started while profiling began (monotonic ns), or -1 */
int64_t hk_states_born(VALUE thread);
/* the thread's GVL state now (HK_STATE_RUNNING where it has no record) */
int hk_states_gvl_state(const hk_thread *t);
/* for the profile's comments: how the states were told apart */
const char *hk_states_how(void);

/* ---- sampler_labels.c (with the GVL) -------------------------------------------- */

void hk_labels_init(void);
/* a new profile: the sets of the last one are gone, and the slots that hold them no longer count */
void hk_labels_start(void);
/* the set the thread's current fiber is in (0: none); cheap when no set was made */
uint32_t hk_labels_of(VALUE thread);
uint64_t hk_labels_dropped(void);
size_t hk_labels_memsize(void);

/* ---- sampler_objects.c (with the GVL) ------------------------------------------ */

/* Object mode: a stack key's label-set word holds the label set in its low HK_LABEL_SET_BITS
 * and the sampled object's class (its index in sampler_objects.c's table, 0: none) above. */
#define HK_LABEL_SET_BITS 17
_Static_assert(HK_MAX_LABEL_SETS < (1 << HK_LABEL_SET_BITS), "a label set id fits below the class");
#define HK_OBJECT_CONTEXT(labels, klass) ((labels) | (uint32_t)(klass) << HK_LABEL_SET_BITS)
#define HK_CONTEXT_LABELS(w) ((w) & ((1u << HK_LABEL_SET_BITS) - 1))
#define HK_CONTEXT_CLASS(w) ((w) >> HK_LABEL_SET_BITS)
/* class indexes with no class VALUE: none, the VM's internal objects, and the classes met
 * after the table is full */
enum { HK_CLASS_NONE = 0, HK_CLASS_INTERNAL = 1, HK_CLASS_FIRST = 2,
       HK_CLASS_OTHERS = (1u << (32 - HK_LABEL_SET_BITS)) - 1 };

/* at start and stop: the NEWOBJ hook and the worker that resolves its samples (0, or -1 with
 * a message in err) */
int hk_objects_start(char *err, size_t errlen);
void hk_objects_stop(void);
/* retained mode, at stop, after the last sample and the caller's GC.stat: a full GC, then each
 * sampled object still alive into its stack's row (count, objects, bytes) */
void hk_objects_retained_tally(void);
/* GC compaction: the followed objects' new addresses */
void hk_objects_compact(void);
/* ctx: fork child: the worker did not survive the fork */
void hk_objects_forget(void);
/* objects allocated since start: the hook's calls, or with watch windows Ruby's count less
 * hakari's own; of them, those the hook saw */
uint64_t hk_objects_allocated(void);
uint64_t hk_objects_watched(void);
/* ctx: GC mark phase. The classes sampled objects had. */
void hk_objects_mark(void);
size_t hk_objects_memsize(void);

/* ---- sampler_watch.c: object mode's watch windows (with the GVL, but where said) ------ */

/* At object and retained modes' start, before `hook` (the NEWOBJ TracePoint, kept alive by the
 * caller) is enabled: the windows for S.cfg.watch, none in retained mode or at HK_WATCH_ALL.
 * stop: the hook goes off for good (the profile's time ends, or a Ractor starts on Ruby 3.1);
 * forget: in a forked child. */
void hk_watch_start(VALUE hook);
void hk_watch_stop(void);
void hk_watch_forget(void);
/* ctx: the NEWOBJ hook. The object just made is in a window (1: it counts and may be sampled),
 * or is a stretch's (0: only counted towards the next window's weight). */
int hk_watch_object(void);
/* the watched objects between samples, on average: the interval, times watch in windows */
long hk_watch_step(void);
/* ctx: the NEWOBJ hook. A sample's weight: the `step` watched objects it stands for and their
 * share of the stretch before their window, whole (the fractions carried to the next). */
int64_t hk_watch_weight(long step);
/* ctx: the paced worker. Its step while windows turn, and how long to wait (-1: no windows). */
long hk_watch_worker_step(void);
/* Objects made since start: with windows, Ruby's count less hakari's own (no fewer than the
 * `watched`); without, `watched`. */
uint64_t hk_watch_made(uint64_t watched);
/* the program's count of allocated objects now (after the end: then): Ruby's, less what a GC
 * or a snapshot added; and: the objects made since that reading were hakari's own (a
 * snapshot's build) */
uint64_t hk_watch_count_now(void);
/* the objects made since the last window (and the stretch before it) began: in no sample yet,
 * and after the end in none at all */
uint64_t hk_watch_after_windows(void);
/* the objects made past the end of stretches whose read came more than WATCH_LATE_NS after it
 * was due (the worker woke late, and no GC step came first: 3.1 has none to be had), which the
 * window after each took, wherever they were made */
uint64_t hk_watch_read_late(void);
void hk_watch_not_program(uint64_t since);

/* ---- sampler_build.c ----------------------------------------------------------- */

/* ctx: GVL (allocates Ruby strings while resolving names). */
hk_profile *hk_sampler_build_profile(const hk_sampler *s, hk_sampler_stats *stats);

/* ---- sampler_stats.c ----------------------------------------------------------- */

/* ctx: GVL. The stats of the span since start or the last clearing snapshot; totals gets those
 * since start. */
void hk_sampler_stats_since_clear(hk_sampler_stats *st, hk_sampler_stats *totals);
/* ctx: GVL. The same, without the totals. */
void hk_sampler_stats_fill(hk_sampler_stats *st);
/* a label of hakari's own methods (Hakari.*, Hakari::*, or a block in one): left out of stacks */
int hk_sampler_own_label(const char *label, long len);

#endif
