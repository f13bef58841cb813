/* pace.h — cpu mode's pacing rule: when a tick is due on the CPU time of the
 * watched thread, and what the job should make of it. The rule is kept apart
 * from the clocks (cpu_pacer.c reads them on the timer's worker) so that the
 * tests can play it any sequence of readings. No ruby.h.
 */
#ifndef HK_PACE_H
#define HK_PACE_H

#include <stdint.h>
#include <time.h>

/* How the watched thread was at a tick (the job reads it with the tick):
 *   RUNNING  on CPU all along: the period went to the code running now;
 *   BLOCKED  off CPU, or back on CPU after being off, soon after the period's
 *            end (within 1/16 period of its CPU, the worker's usual lateness):
 *            it ended in the code leading to the block, and when the job
 *            runs after the block, in the C method that blocked, it gives the
 *            sample to that method's caller;
 *   LATE     off CPU, after running longer past the period's end, up to half
 *            a period: the period ended somewhere between the thread's
 *            previous tick and the block, and such a job gives the sample to
 *            the methods the stack it finds shares with the previous sample's
 *            (they ran through all of that code);
 *   STALE    off CPU, after running more than half a period past the period's
 *            end (the worker was kept off its core): the code that used the
 *            period may have returned long before the block, so such a job
 *            gives the sample to the stack of the thread's previous sample,
 *            where the period began. */
enum { HK_TICK_RUNNING = 0, HK_TICK_BLOCKED = 1, HK_TICK_STALE = 2, HK_TICK_LATE = 3 };

/* the pacer's state: the clock it watches and where its period began */
typedef struct hk_pacer {
    clockid_t clock;          /* the watched thread's CPU clock */
    int64_t base;             /* that clock at the start of the current period, or -1 */
    int64_t others_base;      /* the other threads' CPU at the last tick, or -1 */
    int64_t prev_cpu, prev_wall; /* the watched clock and the monotonic clock at the previous look */
    int64_t prev_others;      /* the other threads' CPU at the previous look, or -1 */
    int quiet_looks;          /* looks in a row at which no thread had run since the one before */
    int64_t next_look;        /* the monotonic time the next look was asked for (0: not known; the
                                 worker clears it when it waits otherwise, an idle wait) */
    int64_t lateness;         /* how late looks come after the time asked, averaged (ns) */
    int wakeable;             /* the worker is woken when a thread takes the GVL (hk_pace_tick.idle) */
} hk_pacer;

/* Looks in a row that find nothing run before the worker sleeps long (pace.c, "idle"): some
 * 50 ms at 1000 Hz, longer than the short waits of busy code (a sleep, a read), after which the
 * first look may come late (a woken VM's core can take a millisecond) */
#define HK_PACE_QUIET_LOOKS 50
/* How long it then sleeps, in periods, and at most (ns) */
#define HK_PACE_IDLE_PERIODS 20
#define HK_PACE_IDLE_MAX_NS 50000000LL

/* The readings a look takes, in this order: monotonic time, the watched
 * clock; the other threads' CPU only while the thread is not running all the
 * time; near the period's end, before_tick (cpu_pacer.c reads the thread's
 * leaf frame there) and a second read of the watched clock. A clock that
 * cannot be read gives -1. */
typedef struct hk_pace_reader {
    int64_t (*wall)(void *ctx);
    int64_t (*cpu)(void *ctx, clockid_t c);
    int64_t (*others)(void *ctx, int64_t watched);
    void (*before_tick)(void *ctx);
    void *ctx;
    /* optional: 1 when the thread of clock c is ready to run but waits for a core, 0 when
     * not, -1 unknown; asked only at a tick that finds it off CPU */
    int (*runnable)(void *ctx, clockid_t c);
} hk_pace_reader;

typedef struct hk_pace_tick {
    int due;       /* trigger the job */
    int64_t at;    /* the watched clock at the tick */
    int state;     /* HK_TICK_* */
    long idle_wait; /* the process is idle: a wakeable pacer's worker may wait this long instead
                       (ns; 0: not idle), when it is woken as soon as a thread takes the GVL */
} hk_pace_tick;

/* A fresh pacer: no clock watched yet. */
hk_pacer hk_pace_new(void);
/* From now on the pacer watches clock c, its period beginning where c read
 * from (-1: at the next look). The job's sample on a thread makes that thread
 * the one watched: its period began at that sample, not at the worker's next
 * look, which may come most of a period later (a tick lost at every switch of
 * the GVL between threads, and the next one landing in whatever comes after). */
void hk_pace_watch(hk_pacer *p, clockid_t c, int64_t from);
/* One look at the watched clock c with a period of period_ns; fills tick and
 * returns how long to wait before the next look (ns). */
long hk_pace_look(hk_pacer *p, clockid_t c, int64_t period_ns, const hk_pace_reader *r, hk_pace_tick *tick);

#endif
