/* cpu_pacer.c — cpu mode's default clock: a worker that paces itself on CPU
 * time (see cpu_pacer.h). The rule is pace.c's; this file reads its clocks.
 * The reads are system calls, made on the worker, not on the profiled thread. */
#include "cpu_pacer.h"

#include <time.h>

#include "pace.h"
#include "sampler.h"
#include "timer.h"

#define S hk_the_sampler

static int64_t read_wall(void *ctx)
{
    (void)ctx;
    return hk_clock_ns(CLOCK_MONOTONIC);
}

static int64_t read_cpu(void *ctx, clockid_t c)
{
    (void)ctx;
    return hk_clock_ns(c);
}

/* CPU used by the process's threads other than the watched one and this worker.
 * The watched thread's clock was just read, which brings its share of the
 * process clock up to date; other running threads' shares are as of the
 * scheduler's last tick. */
static int64_t read_others(void *ctx, int64_t watched)
{
    (void)ctx;
    return hk_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - (watched > 0 ? watched : 0) - hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* the thread's leaf frame, read just before the tick's clock reading (sampler.h) */
static void read_leaf(void *ctx) { *(hk_leaf *)ctx = hk_sampler_leaf_now(); }

static long cpu_pace(void)
{
    hk_leaf leaf = {NULL, 0};
    const hk_pace_reader reader = {read_wall, read_cpu, read_others, read_leaf, &leaf};
    clockid_t c = __atomic_load_n(&S.tick_target, __ATOMIC_RELAXED);
    hk_pace_tick tick;
    long wait = hk_pace_look(&S.pacer, c, S.period_ns, &reader, &tick);
    if (tick.due) hk_sampler_trigger(c, tick.at, tick.state, leaf);
    return wait;
}

int hk_cpu_pacer_start(char *err, size_t errlen)
{
    S.pacer = hk_pace_new();
    return hk_timer_start_paced(cpu_pace, err, errlen);
}
