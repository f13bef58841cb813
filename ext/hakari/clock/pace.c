/* pace.c — cpu mode's pacing rule (see pace.h).
 *
 * Ticks must fall at even steps of the program's CPU time, not of wall time:
 * a wall tick during a sleep would hand the sleeping method the CPU that ran
 * before it. So a look reads the CPU clock of the thread that ran the last
 * sample, ticks when it has used a whole period since the last tick, and
 * otherwise waits for as long as the rest of the period would take at full
 * speed (a thread can use no more CPU than wall time). While that thread is
 * running, the tick lands within a few µs of the period's end; while it
 * sleeps, the worker looks every quarter period. While that thread is not
 * running all the time, the other threads' CPU since the last tick counts
 * towards the period: when another thread holds the GVL, the job then runs on
 * that thread and makes it the one watched.
 *
 * Idle: a server's processes wait for work most of the time, and a look a
 * period costs each of them a wake-up (some 60 µs of CPU on the test VM) for
 * nothing: an idle puma worker's profiler used 6-8 % of a core. So after
 * HK_PACE_QUIET_LOOKS looks in a row that find no thread has run, a pacer whose
 * worker is woken as a thread takes the GVL (3.3+'s thread hooks; cpu_clock.c
 * also checks that no thread holds it) sleeps up to 20 periods. CPU used
 * meanwhile without the GVL (a C extension's own work) is found at the next
 * look, whole; only its tick comes later. Not after a few quiet looks: on a VM
 * the woken worker can take a millisecond to run, and the first period of
 * every burst after a short wait (the accuracy bench's 1-11 ms sleeps) went to
 * the wrong stack (8 % error). */
#define _POSIX_C_SOURCE 200809L /* clockid_t under -std=c11 (the tests build this file alone) */
#include "pace.h"

hk_pacer hk_pace_new(void)
{
    return (hk_pacer){.clock = (clockid_t)-1, .base = -1, .others_base = -1, .prev_others = -1};
}

void hk_pace_watch(hk_pacer *p, clockid_t c, int64_t from)
{
    p->clock = c;
    p->base = from;
    p->others_base = -1; /* "others" now means other threads */
    p->prev_wall = 0;    /* whether it runs all the time: its first look cannot tell */
}

/* How much earlier than a running thread's period ends the worker asks to look: the lateness
 * its looks come with, so that they land at the period's end rather than after it. A look that
 * comes after the end may find the thread blocked since, and its tick then goes to the call
 * that blocked, where the job runs: a bench alternating 2 ms of Ruby and 2 ms of C sleep gave
 * the sleeps 20-50 µs of CPU a call they did not use (the average lateness on the test VM). At
 * most 1/16 period less what a look may come early by, 1/64: a look before that is not due and
 * would cost a second wake-up (pace.h). */
static int64_t lead(const hk_pacer *p, int64_t period)
{
    int64_t most = period / 16 - period / 64;
    return p->lateness < most ? p->lateness : most;
}

/* The look's lateness after the time asked, into the average (over some 8 looks); capped at a
 * quarter period, so that one stall does not move it for long. */
static void measure_lateness(hk_pacer *p, int64_t wall, int64_t period)
{
    if (p->next_look > 0) {
        int64_t late = wall - p->next_look;
        if (late < 0) late = 0;
        if (late > period / 4) late = period / 4;
        p->lateness += (late - p->lateness) / 8;
    }
    p->next_look = 0;
}

long hk_pace_look(hk_pacer *p, clockid_t c, int64_t period, const hk_pace_reader *r, hk_pace_tick *tick)
{
    int64_t wall = r->wall(r->ctx);
    measure_lateness(p, wall, period);
    int64_t cpu = r->cpu(r->ctx, c);
    *tick = (hk_pace_tick){0, cpu, HK_TICK_RUNNING, 0};
    /* A new thread to watch (or its clock went back: a reused thread id): its period starts
     * now. A clock that cannot be read is a thread that ended: the period goes on, on the
     * other threads' CPU, until a job on one of them makes it the one watched. */
    if (c != p->clock || (cpu >= 0 && (p->base < 0 || cpu < p->base - period))) {
        p->clock = c;
        p->base = cpu;
        p->others_base = -1; /* "others" now means other threads */
    }
    int running = p->prev_wall > 0 && cpu >= 0 && (cpu - p->prev_cpu) * 10 >= (wall - p->prev_wall) * 9;
    /* it ran since the previous look, if not all the time: back from a block, most likely running now */
    int moved = p->prev_wall > 0 && cpu >= 0 && cpu > p->prev_cpu;
    int64_t used = cpu >= 0 ? cpu - p->base : 0;
    /* While the watched thread is not running all the time, other threads may
     * be (holding the GVL, or handing it back and forth with this one): their
     * CPU since the last tick counts towards the period too. */
    int64_t others = -1, used_all = used;
    if (!running) {
        others = r->others(r->ctx, cpu);
        if (p->others_base < 0) p->others_base = others;
        used_all += others - p->others_base;
    }
    int on_cpu = running;
    if (used_all >= period - period / 16) {
        /* On CPU right now? A second read moves only if the thread ran between
         * the two. A period that ended while the watched thread is off CPU is
         * due, but flagged: should the job land on it, that will be after the
         * block, in the call that blocked, which is not where its CPU went.
         * So is one that ends as the thread resumes, before which it used most
         * of the period and then blocked. A tick up to 1/16 period early saves
         * a second wake-up, but only while the thread runs all the time (it got
         * slightly less CPU than wall time): early after a block, the job would
         * land in the blocking call's return, with the CPU used before it.
         * before_tick comes between the two reads, and the tick is the second:
         * a frame pushed after the leaf was read there is one the period did
         * not run in (stack_walk.h). */
        r->before_tick(r->ctx);
        int64_t again = r->cpu(r->ctx, c);
        on_cpu = again > cpu;
        if (!p->prev_wall) running = on_cpu; /* the first look at this clock: on CPU now is all it knows */
        if (on_cpu) tick->at = again;
        tick->due = (on_cpu && running) || used_all >= period;
        tick->state = on_cpu && running ? HK_TICK_RUNNING : HK_TICK_BLOCKED;
        /* Off CPU now, after running past the period's end for longer than
         * the worker's usual lateness: the worker came late (it looks every
         * quarter period while the watched thread is off CPU and others run;
         * or a busy or stolen core), and the code leading to the block is no
         * longer the likely place the period ended (LATE). Given to it, a C
         * call that sleeps holding the GVL right after it is called got two
         * to three times its CPU in the accuracy bench's threads scenario.
         * More than half a period past it, the code that used the period may
         * have returned well before the block (STALE). On time, the worker
         * looks within its wake-up latency of the period's end. */
        if (!on_cpu && used_all - period > period / 16) tick->state = HK_TICK_LATE;
        if (!on_cpu && used_all - period > period / 2) tick->state = HK_TICK_STALE;
        /* Off CPU but ready to run: the OS preempted it (a busy machine), in the middle of what
         * it ran, not in a call that blocked. It resumes there, where the job will land: that
         * code is the period's (a loaded run gave 60-80 % of a long C method's time to its
         * caller, as if the method had blocked). */
        if (!on_cpu && r->runnable && r->runnable(r->ctx, c) == 1) tick->state = HK_TICK_RUNNING;
    }
    if (tick->due) {
        /* the watched thread's period moves a whole period (the rate is kept)
         * when it ran the period itself; otherwise it starts over here */
        p->base = used >= period - period / 16 && used < 2 * period ? p->base + period : cpu;
        /* the others' CPU at the tick, read now if this look did not: taken only at the next
         * look that needs it, it left out what a thread that started meanwhile had used */
        p->others_base = others >= 0 ? others : r->others(r->ctx, cpu);
        used = cpu >= 0 ? cpu - p->base : 0;
        used_all = used;
    }
    /* nothing ran since the previous look, on any thread: the watched clock and the others' sum
     * (exact: each thread's own clock, a running one's included) did not move */
    int quiet = !running && !tick->due && (cpu < 0 || cpu == p->prev_cpu) && others >= 0 && others == p->prev_others;
    p->quiet_looks = quiet ? p->quiet_looks + 1 : 0;
    p->prev_others = others;
    p->prev_cpu = cpu;
    p->prev_wall = wall;
    if (p->wakeable && p->quiet_looks >= HK_PACE_QUIET_LOOKS) {
        int64_t idle = period * HK_PACE_IDLE_PERIODS;
        tick->idle_wait = (long)(idle > HK_PACE_IDLE_MAX_NS ? (period > HK_PACE_IDLE_MAX_NS ? period : HK_PACE_IDLE_MAX_NS) : idle);
    }
    /* a running thread's period ends `wait` from here, if it keeps running: asked early by the
     * lateness. One that is back from a block too: looked at a quarter period later, as a blocked
     * one is, it could have run past the period's end and blocked again meanwhile. */
    int64_t wait = period - used_all - (on_cpu || moved ? lead(p, period) : 0);
    int64_t least = on_cpu || moved ? 20000 : period / 4;
    if (wait < least) wait = least;
    p->next_look = wall + wait;
    return (long)wait;
}
