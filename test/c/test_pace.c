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
    int reads;          /* of the watched clock */
    int reads_at_leaf;  /* reads done when before_tick came */
    int64_t ended_at;   /* the watched thread ended then: its clock reads -1 (0: never) */
    int ready;          /* off CPU, it waits for a core (preempted), not in a call that blocked */
    int ready_asks;     /* how often the pacer asked */
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
    s->reads++;
    if (s->ended_at && s->now >= s->ended_at) return -1;
    return cpu_at(s, s->now);
}
static int64_t sim_others(void *ctx, int64_t watched)
{
    (void)watched;
    sim *s = ctx;
    return s->now * s->others_rate_pct / 100;
}
static int sim_runnable(void *ctx, clockid_t c)
{
    sim *s = ctx;
    s->ready_asks++;
    return c == WATCHED ? s->ready : -1;
}
static void sim_before_tick(void *ctx)
{
    sim *s = ctx;
    s->reads_at_leaf = s->reads;
}

/* misordered: ticks whose leaf was not read between the look's two reads of the watched clock */
typedef struct run_result { int ticks, running, blocked, stale, misordered; int64_t first_at, last_state; } run_result;

/* Looks from `from` until `to`; a look at or after late_at (once) comes `late` later than asked. */
static run_result run(sim *s, int64_t from, int64_t to, int64_t late_at, int64_t late)
{
    hk_pacer p = hk_pace_new();
    const hk_pace_reader r = {sim_wall, sim_cpu, sim_others, sim_before_tick, s, sim_runnable};
    run_result res = {0, 0, 0, 0, 0, -1, -1};
    s->now = from;
    while (s->now < to) {
        hk_pace_tick tick;
        int reads = s->reads;
        s->reads_at_leaf = -1;
        long wait = hk_pace_look(&p, WATCHED, PERIOD, &r, &tick);
        if (tick.due) {
            res.ticks++;
            res.misordered += !(s->reads_at_leaf == reads + 1 && s->reads == reads + 2);
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
    sim s = {spans, 1, 0, 0, 0, 0, 0, 0, 0};
    run_result r = run(&s, 0, 100 * MS, -1, 0);
    CHECK_MSG(r.ticks >= 98 && r.ticks <= 101, "%d ticks in 100 ms of CPU at 1000 Hz", r.ticks);
    CHECK_INT(r.running, r.ticks);
    CHECK_INT(r.misordered, 0);
    /* the first tick at a period of CPU, at most 1/16 early */
    CHECK_MSG(r.first_at >= PERIOD - PERIOD / 16 && r.first_at <= PERIOD + 30 * US, "first tick at %lld ns of CPU",
              (long long)r.first_at);
}

static void test_no_tick_while_the_thread_sleeps(void)
{
    const span spans[] = {{MS / 2, 1}, {100 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0, 0, 0, 0, 0};
    run_result r = run(&s, 0, 100 * MS, -1, 0);
    CHECK_INT(r.ticks, 0); /* half a period of CPU, then sleep: nothing is due */
}

/* The thread runs for run_for, then blocks for good; the worker's look that
 * comes after half a period is `late` late. The state of the one tick, or -1. */
static int state_after_off_cpu(int64_t run_for, int64_t late, int ready, int *misordered)
{
    const span spans[] = {{run_for, 1}, {50 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0, 0, 0, ready, 0};
    run_result r = run(&s, 0, 50 * MS, PERIOD / 2, late);
    *misordered = r.misordered;
    return r.ticks == 1 && r.first_at >= PERIOD ? (int)r.last_state : -1;
}

/* A tick that finds the thread blocked after its period: BLOCKED when the
 * thread ran at most 1/16 period past the period's end (the code leading to
 * the block used the period, however late the worker looks); LATE when it ran
 * on up to half a period (the period ended somewhere since the previous
 * tick); STALE when it ran on longer (the worker was kept off its core and
 * what used the period may have returned long before the block). */
static void test_state_of_a_tick_after_a_block(void)
{
    static const struct { const char *what; int64_t run_for, late; int state; } cases[] = {
        {"blocks 20 us past the period, look 40 us late (an ordinary wake-up)", PERIOD + 20 * US, 40 * US,
         HK_TICK_BLOCKED},
        {"blocks 20 us past the period, look 3 periods late", PERIOD + 20 * US, 3 * PERIOD, HK_TICK_BLOCKED},
        {"blocks just under 1/16 period past it, look 3 periods late", PERIOD + PERIOD / 16 - 10 * US, 3 * PERIOD,
         HK_TICK_BLOCKED},
        {"blocks just over 1/16 period past it, look 100 us late", PERIOD + PERIOD / 16 + 10 * US, 100 * US,
         HK_TICK_LATE},
        {"blocks just under half a period past it, look 3 periods late", PERIOD + PERIOD / 2 - 10 * US, 3 * PERIOD,
         HK_TICK_LATE},
        {"runs 2 periods past it, look 3 periods late", 3 * PERIOD, 3 * PERIOD, HK_TICK_STALE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int misordered;
        int state = state_after_off_cpu(cases[i].run_for, cases[i].late, 0, &misordered);
        CHECK_MSG(state == cases[i].state, "%s: state %d, expected %d", cases[i].what, state, cases[i].state);
        CHECK_MSG(misordered == 0, "%s: the leaf was not read between the two clock reads", cases[i].what);
    }
}

/* A tick that finds the thread off CPU but ready to run (a busy machine's OS
 * preempted it): RUNNING, however late the look, since the thread resumes in
 * the code that used the period and the job lands there. Asked only at ticks. */
static void test_a_preempted_thread_s_tick_is_running(void)
{
    static const int64_t run_for[] = {PERIOD + 20 * US, PERIOD + PERIOD / 2 - 10 * US, 3 * PERIOD};
    for (size_t i = 0; i < sizeof(run_for) / sizeof(run_for[0]); i++) {
        int misordered;
        int state = state_after_off_cpu(run_for[i], 3 * PERIOD, 1, &misordered);
        CHECK_MSG(state == HK_TICK_RUNNING, "off CPU after %lld us, ready: state %d", (long long)(run_for[i] / US), state);
        CHECK_INT(misordered, 0);
    }
    const span spans[] = {{20 * MS, 1}};
    sim s = {spans, 1, 0, 0, 0, 0, 0, 1, 0};
    run_result r = run(&s, 0, 20 * MS, -1, 0);
    CHECK_INT(s.ready_asks, 0); /* on CPU at every tick: never read */
    CHECK(r.ticks >= 19);
}

/* A late look at a thread that ran on, blocked, and is back on CPU: the stack
 * seen then is running again; BLOCKED (the job gives a C method it finds
 * itself in to its caller), never STALE. */
static void test_late_look_after_the_thread_resumed_is_blocked(void)
{
    const span spans[] = {{3 * PERIOD, 1}, {4 * PERIOD, 0}, {50 * MS, 1}};
    sim s = {spans, 3, 0, 0, 0, 0, 0, 0, 0};
    run_result r = run(&s, 0, 5 * PERIOD + 100 * US, PERIOD / 2, 4 * PERIOD); /* up to the late look */
    CHECK_INT(r.ticks, 1);
    CHECK_INT(r.last_state, HK_TICK_BLOCKED);
}

/* A late look at a thread that is still running ticks RUNNING: the stack seen
 * then is running, and gets the period (and the lateness). */
static void test_late_look_at_a_running_thread_is_running(void)
{
    const span spans[] = {{50 * MS, 1}};
    sim s = {spans, 1, 0, 0, 0, 0, 0, 0, 0};
    run_result r = run(&s, 0, 20 * MS, PERIOD / 2, 3 * PERIOD);
    /* 20 ms of CPU, of which the lateness folds 3 periods into one tick */
    CHECK_MSG(r.ticks >= 15 && r.ticks <= 18, "%d ticks", r.ticks);
    CHECK_INT(r.running, r.ticks);
}

/* whether the sim's thread runs at time t */
static int running_at(const sim *s, int64_t t)
{
    for (int i = 0; i < s->nspans; i++)
        if (t < s->spans[i].until) return s->spans[i].running;
    return 0;
}

/* A running thread's ticks, when every look comes 40 us after the time it asked for (a worker's
 * wake-up on a VM): the pacer learns the lateness and asks that much earlier, so that its ticks
 * land at the periods' ends. A tick that comes after the end may find the thread blocked since,
 * and its job then runs in the call that blocked, which used next to none of the period. */
static void test_looks_come_early_by_their_lateness(void)
{
    const span spans[] = {{100 * MS, 1}};
    sim s = {spans, 1, 0, 0, 0, 0, 0, 0, 0};
    hk_pacer p = hk_pace_new();
    const hk_pace_reader r = {sim_wall, sim_cpu, sim_others, sim_before_tick, &s, sim_runnable};
    int ticks = 0, off = 0;
    int64_t worst = 0;
    while (s.now < 100 * MS) {
        hk_pace_tick tick;
        long wait = hk_pace_look(&p, WATCHED, PERIOD, &r, &tick);
        if (tick.due && ++ticks > 30) { /* once the lateness is learnt (an average over some 8 looks) */
            int64_t from_end = tick.at % PERIOD;
            if (from_end > PERIOD / 2) from_end -= PERIOD; /* early: negative */
            if (from_end > worst) worst = from_end;
            off += from_end < -PERIOD / 16;
        }
        s.now += wait + 40 * US;
    }
    CHECK_MSG(worst <= 10 * US, "a tick %lld us after its period's end", (long long)(worst / US));
    CHECK_INT(off, 0); /* none earlier than 1/16 period */
    CHECK_MSG(ticks >= 98 && ticks <= 101, "%d ticks in 100 ms of CPU", ticks);
}

/* A thread back from a block is most likely running: looked at a quarter period later, as a
 * blocked one is, it may have run past its period's end and blocked again. Runs just over a
 * period long, each followed by a block of about the same, every look 40 us late: 14 of 206
 * ticks found the thread blocked before the pacer took a thread that ran since its previous
 * look for a running one, 8 with that but without the early looks. */
static void test_a_thread_back_from_a_block_is_looked_at_as_a_running_one(void)
{
    enum { CYCLES = 200 };
    static span spans[2 * CYCLES];
    int64_t t = 0;
    uint32_t x = 12345; /* a fixed LCG: runs and blocks of 1.000-1.065 ms */
    for (int i = 0; i < CYCLES; i++) {
        x = x * 1103515245u + 12345u;
        spans[2 * i] = (span){t += MS + (int64_t)(x >> 16), 1};
        x = x * 1103515245u + 12345u;
        spans[2 * i + 1] = (span){t += MS + (int64_t)(x >> 16), 0};
    }
    sim s = {spans, 2 * CYCLES, 0, 0, 0, 0, 0, 0, 0};
    hk_pacer p = hk_pace_new();
    const hk_pace_reader r = {sim_wall, sim_cpu, sim_others, sim_before_tick, &s, sim_runnable};
    int ticks = 0, blocked = 0;
    while (s.now < t) {
        hk_pace_tick tick;
        long wait = hk_pace_look(&p, WATCHED, PERIOD, &r, &tick);
        ticks += tick.due;
        blocked += tick.due && !running_at(&s, s.now);
        s.now += wait + 40 * US;
    }
    CHECK_MSG(blocked <= 2, "%d of %d ticks found the thread blocked", blocked, ticks);
    CHECK_MSG(ticks >= 200 && ticks <= 208, "%d ticks for %lld ms of CPU", ticks, (long long)(cpu_at(&s, t) / MS));
}

/* The first look at a thread (a new one to watch) starts its period there,
 * whatever CPU it used before: nothing is due, let alone stale. */
static void test_first_look_starts_the_period(void)
{
    const span spans[] = {{10 * MS, 1}, {50 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0, 0, 0, 0, 0};
    run_result r = run(&s, 20 * MS, 50 * MS, -1, 0);
    CHECK_INT(r.ticks, 0);
}

/* While the watched thread blocks, other threads' CPU counts towards the
 * period: the job then lands on one of them. Such a tick is not stale when on
 * time. */
static void test_other_threads_cpu_completes_the_period(void)
{
    const span spans[] = {{100 * US, 1}, {50 * MS, 0}};
    sim s = {spans, 2, 50, 0, 0, 0, 0, 0, 0}; /* others use half of wall time */
    run_result r = run(&s, 0, 20 * MS, -1, 0);
    CHECK_MSG(r.ticks >= 7 && r.ticks <= 11, "%d ticks for ~10 ms of the others' CPU", r.ticks);
    CHECK_INT(r.stale, 0);
    CHECK_INT(r.blocked, r.ticks);
}

/* The watched thread ends: its clock can no longer be read, and until a job
 * on another thread makes that one watched, the others' CPU keeps ticking. */
static void test_other_threads_cpu_counts_after_the_watched_thread_ends(void)
{
    const span spans[] = {{5 * MS, 1}};
    sim s = {spans, 1, 50, 0, 0, 0, 5 * MS, 0, 0}; /* others use half of wall time */
    run_result r = run(&s, 0, 25 * MS, -1, 0);
    /* about 5 ticks on the watched thread's 5 ms, and 10 on the others' 10 ms after it ended */
    CHECK_MSG(r.ticks >= 13 && r.ticks <= 16, "%d ticks for 5 + 10 ms of CPU", r.ticks);
}

/* A thread made the one watched by the job's sample on it: its period began
 * at that sample, not at the worker's next look. Here the sample came 0.8 of a
 * period before the look: the tick is due 0.2 of a period later, not a whole
 * one (at every switch of the GVL, a tick was lost and the next one landed in
 * whatever the thread did after its first period). */
static void test_a_watched_thread_begins_its_period_at_its_sample(void)
{
    const span spans[] = {{50 * MS, 1}};
    sim s = {spans, 1, 0, 10 * MS, 0, 0, 0, 0, 0};
    const hk_pace_reader r = {sim_wall, sim_cpu, sim_others, sim_before_tick, &s, sim_runnable};
    hk_pacer p = hk_pace_new();
    hk_pace_watch(&p, WATCHED, cpu_at(&s, s.now) - PERIOD * 8 / 10);
    int64_t first_tick = -1;
    while (s.now < 20 * MS && first_tick < 0) {
        hk_pace_tick tick;
        long wait = hk_pace_look(&p, WATCHED, PERIOD, &r, &tick);
        if (tick.due) first_tick = s.now;
        s.now += wait;
    }
    CHECK_MSG(first_tick >= 10 * MS + PERIOD / 10 && first_tick <= 10 * MS + PERIOD * 3 / 10,
              "first tick %lld us after the look, expected about 200", (long long)(first_tick - 10 * MS) / 1000);
}

/* Looks of a wakeable pacer from 0 to `to` on the sim: how many, and how many asked for an idle wait */
static void count_looks(sim *s, int wakeable, int64_t to, int *looks, int *idle)
{
    hk_pacer p = hk_pace_new();
    p.wakeable = wakeable;
    const hk_pace_reader r = {sim_wall, sim_cpu, sim_others, sim_before_tick, s, sim_runnable};
    *looks = *idle = 0;
    s->now = 0;
    while (s->now < to) {
        hk_pace_tick tick;
        long wait = hk_pace_look(&p, WATCHED, PERIOD, &r, &tick);
        (*looks)++;
        *idle += tick.idle_wait > 0;
        if (tick.idle_wait) CHECK_INT(tick.idle_wait, HK_PACE_IDLE_PERIODS * PERIOD);
        s->now += tick.idle_wait ? tick.idle_wait : wait; /* as the worker does while no thread holds the GVL */
    }
}

/* An idle process (nothing runs) is looked at HK_PACE_IDLE_PERIODS periods apart once a few
 * looks found nothing, where something wakes the worker; every period otherwise; and never
 * while another thread uses CPU. */
static void test_an_idle_process_is_looked_at_rarely_when_the_gvl_wakes_the_worker(void)
{
    const span spans[] = {{MS / 2, 1}, {200 * MS, 0}};
    sim s = {spans, 2, 0, 0, 0, 0, 0, 0, 0};
    int looks, idle;
    count_looks(&s, 1, 200 * MS, &looks, &idle);
    /* a look a period until HK_PACE_QUIET_LOOKS in a row found nothing, then one every HK_PACE_IDLE_PERIODS */
    int quiet_ms = HK_PACE_QUIET_LOOKS + 1, idle_looks = (200 - quiet_ms) / HK_PACE_IDLE_PERIODS;
    CHECK_MSG(looks <= quiet_ms + idle_looks + 2, "%d looks in 200 ms idle, wakeable", looks);
    CHECK_MSG(idle >= idle_looks - 1, "%d idle waits", idle);
    count_looks(&s, 0, 200 * MS, &looks, &idle);
    CHECK_INT(idle, 0);
    CHECK_MSG(looks >= 190, "%d looks in 200 ms idle, not wakeable: one a period", looks);
    sim busy = {spans, 2, 30, 0, 0, 0, 0, 0, 0}; /* others use 30 % of a core */
    count_looks(&busy, 1, 200 * MS, &looks, &idle);
    CHECK_INT(idle, 0);
}

int main(void)
{
    RUN(test_running_thread_ticks_once_per_period_of_cpu);
    RUN(test_no_tick_while_the_thread_sleeps);
    RUN(test_state_of_a_tick_after_a_block);
    RUN(test_late_look_after_the_thread_resumed_is_blocked);
    RUN(test_a_preempted_thread_s_tick_is_running);
    RUN(test_late_look_at_a_running_thread_is_running);
    RUN(test_looks_come_early_by_their_lateness);
    RUN(test_a_thread_back_from_a_block_is_looked_at_as_a_running_one);
    RUN(test_first_look_starts_the_period);
    RUN(test_other_threads_cpu_completes_the_period);
    RUN(test_other_threads_cpu_counts_after_the_watched_thread_ends);
    RUN(test_a_watched_thread_begins_its_period_at_its_sample);
    RUN(test_an_idle_process_is_looked_at_rarely_when_the_gvl_wakes_the_worker);
    return check_done();
}
