/* test_pace.c — cpu mode's pacing rule (pace.c), played against a simulated
 * thread: a timeline of running and blocked stretches gives its CPU clock at
 * any moment, the test's own clock stands for the monotonic one, and a look
 * that asks to wait w is followed by one w later (plus any lateness the test
 * injects, as a worker kept off its core would be). Each clock read takes a
 * microsecond, so a second read moves only while the thread runs. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>

#include "check.h"
#include "pace.h"

#define US 1000LL
#define MS 1000000LL
#define PERIOD MS /* 1000 Hz */
#define WATCHED ((clockid_t)7)

typedef struct span { int64_t until; int running; } span; /* running or not until `until` (ns) */

typedef struct sim {
    const span *spans; int nspans; /* the watched thread; after the last: blocked */
    int64_t others_rate_pct;       /* other threads' CPU, % of wall time */
    int64_t now;
    int before_ticks;
} sim;

static int64_t cpu_at(const sim *s, int64_t t)
{
    int64_t cpu = 0, from = 0;
    for (int i = 0; i < s->nspans && from < t; i++) {
        int64_t to = s->spans[i].until < t ? s->spans[i].until : t;
        if (s->spans[i].running && to > from) cpu += to - from;
        from = s->spans[i].until;
    }
    return cpu;
}

/* the monotonic clock: its origin lies long before the run */
static int64_t sim_wall(void *ctx) { return ((sim *)ctx)->now + 1000 * MS; }
static int64_t sim_cpu(void *ctx, clockid_t c)
{
    sim *s = ctx;
    if (c != WATCHED) return -1;
    s->now += US; /* a read takes time: the second read sees the thread move only if it runs */
    return cpu_at(s, s->now);
}
static int64_t sim_others(void *ctx, int64_t watched)
{
    (void)watched;
    sim *s = ctx;
    return s->now * s->others_rate_pct / 100;
}
static void sim_before_tick(void *ctx) { ((sim *)ctx)->before_ticks++; }

typedef struct run_result { int ticks, running, blocked, stale; int64_t first_at, last_state; } run_result;

/* Looks from `from` until `to`; a look at or after late_at (once) comes `late` later than asked. */
static run_result run(sim *s, int64_t from, int64_t to, int64_t late_at, int64_t late)
{
    hk_pacer p = hk_pace_new();
    const hk_pace_reader r = {sim_wall, sim_cpu, sim_others, sim_before_tick, s};
    run_result res = {0, 0, 0, 0, -1, -1};
    s->now = from;
    while (s->now < to) {
        hk_pace_tick tick;
        long wait = hk_pace_look(&p, WATCHED, PERIOD, &r, &tick);
        if (tick.due) {
            res.ticks++;
            if (res.first_at < 0) res.first_at = tick.at;
            res.last_state = tick.state;
            res.running += tick.state == HK_TICK_RUNNING;
            res.blocked += tick.state == HK_TICK_BLOCKED;
            res.stale += tick.state == HK_TICK_STALE;
        }
        s->now += wait;
        if (late_at >= 0 && s->now >= late_at) { s->now += late; late_at = -1; }
    }
    return res;
}

static void test_running_thread_ticks_once_per_period_of_cpu(void)
{
    const span spans[] = {{100 * MS, 1}};
    sim s = {spans, 1, 0, 0, 0};
    run_result r = run(&s, 0, 100 * MS, -1, 0);
    CHECK_MSG(r.ticks >= 98 && r.ticks <= 101, "%d ticks in 100 ms of CPU at 1000 Hz", r.ticks);
    CHECK_INT(r.running, r.ticks);
    /* the first tick at a period of CPU, at most 1/16 early */
    CHECK_MSG(r.first_at >= PERIOD - PERIOD / 16 && r.first_at <= PERIOD + 30 * US, "first tick at %lld ns of CPU",
              (long long)r.first_at);
}

static void test_no_tick_while_the_thread_sleeps(void)
{
    const span spans[] = {{MS / 2, 1}, {100 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0};
    run_result r = run(&s, 0, 100 * MS, -1, 0);
    CHECK_INT(r.ticks, 0); /* half a period of CPU, then sleep: nothing is due */
}

/* The thread runs a period and a bit, then blocks, 20 µs before the worker's
 * look (an ordinary wake-up 40 µs late) finds the period over with the thread
 * off CPU: a BLOCKED tick (the job gives it to the code leading to the block). */
static void test_block_just_after_the_period_is_blocked(void)
{
    const span spans[] = {{PERIOD + 20 * US, 1}, {50 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0};
    run_result r = run(&s, 0, 50 * MS, PERIOD / 2, 40 * US);
    CHECK_INT(r.ticks, 1);
    CHECK_INT(r.last_state, HK_TICK_BLOCKED);
    CHECK_MSG(r.first_at >= PERIOD, "tick at %lld ns of CPU", (long long)r.first_at);
}

/* The same, but the worker is kept off its core for 3 periods just before the
 * period's end: by the time it looks, the thread has run well past the period
 * and blocked, and what ran the period is no longer known. */
static void test_late_look_at_a_blocked_thread_is_stale(void)
{
    const span spans[] = {{3 * PERIOD, 1}, {50 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0};
    run_result r = run(&s, 0, 50 * MS, PERIOD / 2, 3 * PERIOD);
    CHECK_INT(r.ticks, 1);
    CHECK_INT(r.last_state, HK_TICK_STALE);
}

/* Lateness within half a period is an ordinary wake-up: still BLOCKED. */
static void test_slightly_late_look_is_still_blocked(void)
{
    const span spans[] = {{PERIOD + 50 * US, 1}, {50 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0};
    run_result r = run(&s, 0, 50 * MS, PERIOD / 2, PERIOD / 4);
    CHECK_INT(r.ticks, 1);
    CHECK_INT(r.last_state, HK_TICK_BLOCKED);
}

/* A late look at a thread that is still running ticks RUNNING: the stack seen
 * then is running, and gets the period (and the lateness). */
static void test_late_look_at_a_running_thread_is_running(void)
{
    const span spans[] = {{50 * MS, 1}};
    sim s = {spans, 1, 0, 0, 0};
    run_result r = run(&s, 0, 10 * MS, PERIOD / 2, 3 * PERIOD);
    CHECK_MSG(r.ticks >= 6, "%d ticks", r.ticks);
    CHECK_INT(r.stale, 0);
    CHECK_INT(r.blocked, 0);
}

/* While the watched thread blocks, other threads' CPU counts towards the
 * period: the job then lands on one of them. Such a tick is not stale when on
 * time. */
static void test_other_threads_cpu_completes_the_period(void)
{
    const span spans[] = {{100 * US, 1}, {50 * MS, 0}};
    sim s = {spans, 2, 50, 0, 0}; /* others use half of wall time */
    run_result r = run(&s, 0, 20 * MS, -1, 0);
    CHECK_MSG(r.ticks >= 7 && r.ticks <= 11, "%d ticks for ~10 ms of the others' CPU", r.ticks);
    CHECK_INT(r.stale, 0);
    CHECK_INT(r.blocked, r.ticks);
}

int main(void)
{
    RUN(test_running_thread_ticks_once_per_period_of_cpu);
    RUN(test_no_tick_while_the_thread_sleeps);
    RUN(test_block_just_after_the_period_is_blocked);
    RUN(test_late_look_at_a_blocked_thread_is_stale);
    RUN(test_slightly_late_look_is_still_blocked);
    RUN(test_late_look_at_a_running_thread_is_running);
    RUN(test_other_threads_cpu_completes_the_period);
    return check_done();
}
