/* sampler_threads.h — the sampler's threads and cpu mode's per-thread
 * counters, shared by sampler.c (the job, the lifecycle) and
 * sampler_threads.c. Not a public contract: only these two files include it.
 * All of it runs with the GVL, on hk_the_sampler's thread fields.
 */
#ifndef HK_SAMPLER_THREADS_H
#define HK_SAMPLER_THREADS_H

#include "sampler.h"
#include "timer.h"

/* the calling thread's clock in the session's mode (CPU or monotonic) */
static inline clockid_t hk_sampler_mode_clock(void)
{
    return hk_the_sampler.cfg.mode == HK_MODE_CPU ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
}

/* the thread's record, or NULL if it has none yet */
hk_thread *hk_sampler_thread_find(VALUE th);
/* a new record with prev_clock as its baseline (-1: unknown); NULL when out of memory */
hk_thread *hk_sampler_thread_add(VALUE th, int64_t prev_clock);
/* the thread's VM struct is known (t->vm_thread): the worker may flag it (sampler.c flag_threads) */
void hk_sampler_thread_flaggable(const hk_thread *t);
/* at start: a record (and a baseline clock) for every live thread, and the
 * thread begin/end hook that keeps them as threads come and go */
void hk_sampler_threads_start(void);
/* at stop: the hook goes (the records are freed with the tables) */
void hk_sampler_threads_stop(void);

/* HAKARI_CPU_CLOCK=perf: a worker that only receives the per-thread counters'
 * signals, which call `fire`. 0: a clock is running, the counters or (when one
 * could not be opened) the paced worker they fell back to; -1: none is, and the
 * caller starts the paced worker. */
int hk_sampler_events_start(hk_timer_fire_fn fire, char *err, size_t errlen);
/* every counter closed: none may signal after the worker is gone */
void hk_sampler_events_close(void);

#endif
