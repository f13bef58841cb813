/* cpu_pacer.c — cpu mode's default clock: a worker that paces itself on CPU
 * time (see cpu_pacer.h).
 *
 * Ticks must fall at even steps of the program's CPU time, not of wall time:
 * a wall tick during a sleep would hand the sleeping method the CPU that ran
 * before it. So the worker reads the CPU clock of the thread that ran the last
 * sample, triggers when it has used a whole period since the last tick, and
 * otherwise waits for as long as the rest of the period would take at full
 * speed (a thread can use no more CPU than wall time). While that thread is
 * running, the tick lands within a few µs of the period's end; while it
 * sleeps, the worker looks every quarter period. While that thread is not
 * running all the time, the other threads' CPU since the last tick counts
 * towards the period: when another thread holds the GVL, the job then runs on
 * that thread and makes it the one watched. The reads are system calls, made
 * on the worker, not on the profiled thread. */
#include "cpu_pacer.h"

#include <time.h>

#include "sampler.h"
#include "timer.h"

#define S hk_the_sampler

/* CPU used by the process's threads other than the watched one and this worker.
 * The watched thread's clock was just read, which brings its share of the
 * process clock up to date; other running threads' shares are as of the
 * scheduler's last tick. */
static int64_t others_cpu(int64_t watched)
{
    return hk_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - (watched > 0 ? watched : 0) - hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static long cpu_pace(void)
{
    hk_pacer *p = &S.pacer;
    clockid_t c = __atomic_load_n(&S.tick_target, __ATOMIC_RELAXED);
    int64_t wall = hk_clock_ns(CLOCK_MONOTONIC);
    int64_t cpu = hk_clock_ns(c);
    /* a new thread to watch (or its clock went back: a reused thread id): its period starts now */
    if (c != p->clock || cpu < 0 || p->base < 0 || cpu < p->base - S.period_ns) {
        p->clock = c;
        p->base = cpu;
        p->others_base = -1; /* "others" now means other threads */
    }
    int running = p->prev_wall > 0 && cpu >= 0 && (cpu - p->prev_cpu) * 10 >= (wall - p->prev_wall) * 9;
    int64_t used = cpu >= 0 ? cpu - p->base : 0;
    /* While the watched thread is not running all the time, other threads may
     * be (holding the GVL, or handing it back and forth with this one): their
     * CPU since the last tick counts towards the period too. */
    int64_t others = -1, used_all = used;
    if (!running) {
        others = others_cpu(cpu);
        if (p->others_base < 0) p->others_base = others;
        used_all += others - p->others_base;
    }
    int due = 0, blocked = 0, on_cpu = running;
    int64_t at_tick = cpu;
    hk_leaf leaf = {NULL, 0};
    if (used_all >= S.period_ns - S.period_ns / 16) {
        /* On CPU right now? A second read moves only if the thread ran between
         * the two. A period that ended while the watched thread is off CPU is
         * due, but flagged: should the job land on it, that will be after the
         * block, in the call that blocked, which is not where its CPU went.
         * So is one that ends as the thread resumes, before which it used most
         * of the period and then blocked. A tick up to 1/16 period early saves
         * a second wake-up, but only while the thread runs all the time (it got
         * slightly less CPU than wall time): early after a block, the job would
         * land in the blocking call's return, with the CPU used before it. The
         * thread's leaf frame is read between the two reads, and the tick is
         * the second: a frame pushed after the leaf was read is one the period
         * did not run in (stack_walk.h). */
        leaf = hk_sampler_leaf_now();
        int64_t again = hk_clock_ns(c);
        on_cpu = again > cpu;
        if (on_cpu) at_tick = again;
        due = (on_cpu && running) || used_all >= S.period_ns;
        blocked = !on_cpu || !running;
    }
    if (due) {
        hk_sampler_trigger(c, at_tick, blocked, leaf);
        /* the watched thread's period moves a whole period (the rate is kept)
         * when it ran the period itself; otherwise it starts over here */
        p->base = used >= S.period_ns - S.period_ns / 16 && used < 2 * S.period_ns ? p->base + S.period_ns : cpu;
        p->others_base = others; /* -1 when not read: taken at the next look that needs it */
        used = cpu >= 0 ? cpu - p->base : 0;
        used_all = used;
    }
    p->prev_cpu = cpu;
    p->prev_wall = wall;
    int64_t wait = S.period_ns - used_all;
    int64_t least = on_cpu ? 20000 : S.period_ns / 4;
    return (long)(wait < least ? least : wait);
}

int hk_cpu_pacer_start(char *err, size_t errlen)
{
    S.pacer = (hk_pacer){.clock = (clockid_t)-1, .base = -1, .others_base = -1};
    return hk_timer_start_paced(cpu_pace, err, errlen);
}
