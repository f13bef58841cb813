/* cpu_clock.h — cpu mode's clock: decides when a tick is due on the CPU time
 * of the profiled threads, and tells the sampler through the hooks it was
 * started with. Two ways, chosen at start:
 *   paced   (the default) a worker reads the CPU clock of the thread it is
 *           told to watch (hk_cpu_clock_watch) and ticks at even steps of it,
 *           by pace.h's rule;
 *   perf    (HAKARI_CPU_CLOCK=perf) a perf_event task-clock counter per thread
 *           signals the worker after each period of that thread's CPU time
 *           (cpu_events.h); where a counter cannot be had, or descriptors run
 *           short, every counter closes and the paced worker takes over.
 * The module knows nothing of the sampler: it reads clocks and calls back.
 * No ruby.h.
 */
#ifndef HK_CPU_CLOCK_H
#define HK_CPU_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "timer.h"

/* What a tick calls, on the worker (in its signal handler, or its paced loop):
 * async-signal-safe. */
typedef struct hk_tick_hooks {
    /* just before the tick's clock reading (the sampler reads the watched
     * thread's leaf frame there: a frame pushed after it did not run in the period) */
    void (*before)(void);
    /* the tick: clock c read value ns; state says how its thread was (HK_TICK_*, pace.h) */
    void (*tick)(clockid_t c, int64_t value, int state);
    /* Whether no thread holds the GVL now, or NULL where that cannot be known. Given, it says so
     * with a sequentially consistent load, and hk_cpu_clock_poke is called whenever a thread takes
     * the GVL: the paced worker of an idle process may then sleep long (pace.c, "idle"). */
    int (*gvl_free)(void);
    /* The CPU used by the native threads that run Ruby code, other than the one whose clock is
     * `watched`, summed since start (the worker takes differences); NULL: the clocks of the
     * threads begun (hk_cpu_clock_thread_begin) tell it. Given under M:N threads, where Ruby
     * threads move between native threads that no thread's begin names. Called by the worker. */
    int64_t (*others)(clockid_t watched);
    /* With `others`: called as a tick is made, before `tick`; fresh says whether this look called
     * `others` (its readings are of the tick) or not. */
    void (*others_at_tick)(int fresh);
} hk_tick_hooks;

/* ctx: GVL. Starts the clock with a period of period_ns, watching clock first;
 * perf: per-thread counters (falls back to the paced worker). 0, or -1 with a
 * message in err. The hooks are copied. */
int hk_cpu_clock_start(int64_t period_ns, int perf, clockid_t first, const hk_tick_hooks *hooks, char *err,
                       size_t errlen);
/* ctx: GVL (the job). The thread most likely to run the next job: the paced
 * worker watches its clock c from now on, its period beginning where c read
 * `from` (its latest sample's reading; -1: at the worker's next look). Cheap
 * when it does not change. */
void hk_cpu_clock_watch(clockid_t c, int64_t from);
/* ctx: any thread, as it takes the GVL (a thread hook). Ends the paced worker's idle sleep,
 * if it sleeps one: a load, when it does not. */
void hk_cpu_clock_poke(void);
/* ctx: GVL (the job). Clock c's value at the latest tick where the paced worker read it
 * beside the watched one's (a thread it follows, read because the watched one was not running
 * all the time): 1, *value and *blocked (whether its thread had just blocked then), or 0. */
int hk_cpu_clock_reading(clockid_t c, int64_t *value, int *blocked);
/* ctx: GVL. Thread tid began (or lives at start), its CPU counting from where its clock reads
 * `from` (-1: from the worker's first look at it): the paced worker follows it, or with perf
 * counters it gets one; and its end. */
void hk_cpu_clock_thread_begin(int tid, int64_t from);
void hk_cpu_clock_thread_end(int tid);
/* ctx: GVL. Closes every counter and stops the worker: no hook runs after it returns. */
void hk_cpu_clock_stop(void);
/* ctx: fork child. The worker does not exist in the child: forget it and close the counters. */
void hk_cpu_clock_forget(void);
/* ctx: any. How the running (or last) clock ticked, for the profile's comments. */
const char *hk_cpu_clock_kind(void);
/* ctx: GVL. CPU used by the clock's workers (a replaced one included). */
uint64_t hk_cpu_clock_worker_cpu_ns(void);
/* ctx: GVL. 1 when the perf counters fell back and no paced worker could start: no ticks. */
int hk_cpu_clock_failed(void);

#endif
