/* sampler_internal.h — what the sampler's two files share: sampler.c (the
 * job's capture, the lifecycle, the GC mark) and sampler_resolve.c (turning
 * captures into the profile's tables, on the timer's worker or at stop). */
#ifndef HK_SAMPLER_INTERNAL_H
#define HK_SAMPLER_INTERNAL_H

#include <pthread.h>

#include "clocks.h"
#include "sampler.h"

#define S hk_the_sampler

/* A sample in the ring: its head, then its capture (stack_walk.h). */
typedef struct sample_head {
    uint32_t seq;     /* its thread's sequence number; 0: the sample is lost, its capture is
                         resolved all the same (the next ones may build on it) */
    int32_t state;    /* HK_TICK_*: how the thread was at the tick; or HK_SAMPLE_AGAIN */
    int64_t weight;
    int64_t time_ns;  /* CLOCK_REALTIME at the job (aggregate: false) */
    hk_leaf leaf;     /* the thread's leaf frame at the tick */
} sample_head;
#define HEAD_WORDS (sizeof(sample_head) / sizeof(uint64_t))
/* A record of samples with no capture, of threads whose stacks have not
 * changed since their previous samples (sampler.c sample_waiting_threads): its
 * head's seq is their number, n; n pairs of words follow, a thread's sequence
 * number and its weight, which adds to that thread's previous stack. */
#define HK_SAMPLE_AGAIN 16
#define HK_AGAIN_MAX 256 /* pairs in one record */
_Static_assert(sizeof(sample_head) % sizeof(uint64_t) == 0, "a capture starts on a word");

/* The key buffer's head: room for the thread and the [truncated] root in
 * front of position 0 (sampler.h) */
#define KEY_HEAD 2

/* The callback's cost is counted on the TSC where the kernel trusts it: four
 * reads per sample at a few cycles each, against ~25 ns for clock_gettime, in
 * a callback that should cost under a microsecond. Scaled to ns in fill_stats. */
static inline uint64_t cost_clock(void) { return S.cost_tsc ? hk_tsc() : (uint64_t)hk_clock_ns(CLOCK_MONOTONIC); }

/* Held by whoever resolves (the worker, or the GVL's thread at stop and
 * snapshot) and by the GC's mark: the tables and the ring's unresolved
 * records are never read while they change. The job never takes it. */
extern pthread_mutex_t hk_resolve_lock;

/* ctx: GVL, at start. Reserves the tables' first few thousand entries (0, or -1). */
int hk_sampler_reserve_tables(void);
/* The bytes of the tables hk_sampler_reserve_tables reserves, as they are now. */
size_t hk_sampler_tables_size(void);
/* ctx: the timer's worker, between ticks (timer.h): resolves for about budget_ns. */
void hk_resolve_on_worker(long budget_ns);
/* ctx: GVL, with (_locked) or without the resolve lock: resolves what the ring holds. */
void hk_resolve_rest_locked(void);
void hk_resolve_rest(void);
/* ctx: GVL, as stop begins: the calling thread's time since its last sample (0: none),
 * read before stop's own work so that it is in no total. */
int64_t hk_sampler_tail_weight(void);
/* ctx: GVL, at stop, after the last sample is resolved: records that weight (hk_sampler_tail_weight). */
void hk_sampler_take_tail_sample(int64_t weight);

#endif
