/* cpu_clock.c — cpu mode's clock (see cpu_clock.h). The paced worker's rule
 * is pace.c's; this file reads the clocks it asks for, owns the perf
 * counters and falls back from them. Clock reads are system calls, made on
 * the worker, not on the profiled threads.
 *
 * State: one static struct. `watched` is written by the job when the sampled
 * thread changes and read by the worker at every look: it sits on a line of
 * its own, away from the perf counters' table (written at thread begin and end).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clockid_t and the CPU clocks under -std=c11 (extconf passes it too) */
#endif
#include "cpu_clock.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "clocks.h"
#include "cpu_events.h"
#include "pace.h"
#include "u64_map.h"

#define EVENT_FDS 4096 /* descriptors below this map to their thread's clock for the signal handler */

/* Threads whose CPU clocks the paced worker reads one by one while the
 * watched thread is not running: the process clock would do, but Linux brings
 * a running thread's share of it up to date only at its scheduler tick, so a
 * switch of the GVL to another thread would be seen milliseconds late (and
 * its ticks missed). Past this many live threads, the process clock it is. */
#define FOLLOWED 16

static struct {
    _Alignas(64) clockid_t watched; /* the paced worker's clock */
    int idle;                       /* the paced worker sleeps an idle wait (hk_cpu_clock_poke ends it) */
    int64_t watched_from;           /* where its period begins on it (-1: at the worker's next look) */
    int64_t period_ns;
    hk_tick_hooks hooks;
    hk_pacer pacer;                 /* the paced worker's own */
    /* perf counters: with the GVL, but fd_clock, which the handler reads */
    _Alignas(64) int perf;          /* counters are running (else the paced worker) */
    int failed;                     /* fell back, and the paced worker did not start */
    clockid_t *fd_clock;            /* EVENT_FDS entries: counter fd -> its thread's CPU clock */
    hk_u64_map tid_fd;              /* thread id -> 1 + its counter's fd */
    int open, max_open;             /* counters open now; the most the descriptor limit allows */
    uint64_t replaced_cpu_ns;       /* CPU of a worker the fallback replaced */
    const char *kind;
    /* written with the GVL as threads begin and end, read by the worker */
    _Alignas(64) clockid_t followed[FOLLOWED]; /* CPU clocks of live threads; 0: a free slot */
    int64_t followed_from[FOLLOWED];  /* where each one's CPU begins to count (-1: at the first look) */
    int unfollowed;                 /* live threads without a slot: the process clock instead */
} C = {.kind = "none"};

/* the paced worker's own view of the followed clocks */
static struct {
    clockid_t seen[FOLLOWED];       /* the clock each slot held at the previous look */
    int64_t last[FOLLOWED];         /* its value then */
    uint8_t moved[FOLLOWED];        /* it moved since the look before */
    int64_t by_process;             /* the process clock's figure at the previous look */
    int64_t total;                  /* the other threads' CPU, summed over the looks */
    int read;                       /* this look read them */
    int others_read;                /* this look called hooks.others */
} F;

/* The followed clocks as the look that made the latest tick read them, for a
 * job that runs on another thread than the watched one (the GVL went to it):
 * its weight ends at the tick, as the watched thread's does, not at the job,
 * which may come only after a long C call that holds the GVL. Without this,
 * the job at the end of such a call gave the call the thread's CPU since its
 * previous sample, the code before the call's included. Written by the worker
 * under a sequence lock, read by the job. */
static struct {
    _Alignas(64) volatile uint32_t seq; /* odd while the worker writes */
    int n;
    clockid_t clock[FOLLOWED];
    int64_t value[FOLLOWED];
    uint8_t blocked[FOLLOWED];
} R;

/* ---- the paced worker ---------------------------------------------------- */

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

/* CPU used by the process's threads other than the watched one and this
 * worker, summed over the looks (the pacer takes differences). Each followed
 * thread's clock is read (a slot that changed clock starts from its value
 * now); the watched one is read only to keep its baseline. With threads past
 * the slots, the process clock less the watched thread and this worker: the
 * watched thread's share of it is up to date (its clock was just read),
 * other running threads' shares as of the scheduler's last tick. */
static int64_t read_others(void *ctx, int64_t watched)
{
    (void)ctx;
    if (C.hooks.others) { /* M:N threads: the native threads' clocks, not the process clock */
        F.others_read = 1;
        return C.hooks.others(__atomic_load_n(&C.watched, __ATOMIC_RELAXED));
    }
    int64_t by_process =
        hk_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - (watched > 0 ? watched : 0) - hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t process_delta = F.by_process && by_process > F.by_process ? by_process - F.by_process : 0;
    F.by_process = by_process;
    if (__atomic_load_n(&C.unfollowed, __ATOMIC_RELAXED) > 0) return F.total += process_delta;
    F.read = 1;
    clockid_t watched_clock = __atomic_load_n(&C.watched, __ATOMIC_RELAXED);
    for (int i = 0; i < FOLLOWED; i++) {
        clockid_t c = __atomic_load_n(&C.followed[i], __ATOMIC_RELAXED);
        if (!c) {
            F.seen[i] = 0;
            continue;
        }
        int64_t v = hk_clock_ns(c);
        if (v < 0) {
            F.seen[i] = 0;
            continue;
        }
        F.moved[i] = c == F.seen[i] && v > F.last[i];
        if (c != F.seen[i]) {
            /* a thread new to the slot: its CPU counts from where its time began (a short thread
             * that started between two looks had half its run uncounted, and no tick at all) */
            int64_t from = __atomic_load_n(&C.followed_from[i], __ATOMIC_RELAXED);
            F.seen[i] = c;
            F.last[i] = from >= 0 && from <= v ? from : v;
        }
        if (c != watched_clock && v > F.last[i]) F.total += v - F.last[i];
        F.last[i] = v;
    }
    return F.total;
}

static int read_runnable(void *ctx, clockid_t c)
{
    (void)ctx;
    return hk_thread_cpu_clock_runnable(c);
}

static void before_tick(void *ctx)
{
    (void)ctx;
    C.hooks.before();
}

/* The followed clocks this look read (none when it did not), for the tick it
 * makes, and which threads had blocked then: ran since the look before, did
 * not run between the two reads, and are not ready to run (a loaded machine's
 * OS preempts a thread in the middle of its work: as blocked, a C loop's
 * ticks went to its callers, 470 ms of 2 s in the accuracy bench's threads
 * scenario beside two busy processes). Those that did not run since the look
 * before are not known to have blocked (a long wait for a core looks the
 * same), and read again only when they moved: a /proc read each, on the
 * worker, at ticks only. A job on a blocked thread, in a call it has blocked in
 * since, is taken as a late tick's (sampler.c blocked_since). */
static void publish_readings(void)
{
    __atomic_add_fetch(&R.seq, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    int n = 0;
    for (int i = 0; F.read && i < FOLLOWED; i++)
        if (F.seen[i] && F.last[i] >= 0) {
            R.clock[n] = F.seen[i];
            R.value[n] = F.last[i];
            R.blocked[n++] = F.moved[i] && hk_clock_ns(F.seen[i]) == F.last[i] && hk_thread_cpu_clock_runnable(F.seen[i]) == 0;
        }
    R.n = n;
    __atomic_add_fetch(&R.seq, 1, __ATOMIC_RELEASE);
}

/* one look of the paced worker (timer.h hk_timer_pace_fn) */
static long pace_step(void)
{
    const hk_pace_reader reader = {read_wall, read_cpu, read_others, before_tick, NULL, read_runnable};
    clockid_t c = __atomic_load_n(&C.watched, __ATOMIC_ACQUIRE);
    if (c != C.pacer.clock) hk_pace_watch(&C.pacer, c, __atomic_load_n(&C.watched_from, __ATOMIC_RELAXED));
    hk_pace_tick tick;
    F.read = 0;
    F.others_read = 0;
    long wait = hk_pace_look(&C.pacer, c, C.period_ns, &reader, &tick);
    if (tick.idle_wait) {
        /* the flag first, then the GVL: a thread that takes the GVL after this read pokes (the
         * poke may come before the wait begins: it ends the wait at once, timer.c). Held, the
         * GVL may be running code soon (a C call that slept holding it): the usual wait. */
        __atomic_store_n(&C.idle, 1, __ATOMIC_SEQ_CST);
        if (C.hooks.gvl_free()) {
            wait = tick.idle_wait;
            C.pacer.next_look = 0; /* not the wait the pacer asked for: no lateness to measure */
        } else __atomic_store_n(&C.idle, 0, __ATOMIC_RELAXED);
    } else if (__atomic_load_n(&C.idle, __ATOMIC_RELAXED)) {
        __atomic_store_n(&C.idle, 0, __ATOMIC_RELAXED);
    }
    if (tick.due) {
        publish_readings();
        if (C.hooks.others_at_tick) C.hooks.others_at_tick(F.others_read);
        C.hooks.tick(c, tick.at, tick.state);
    }
    return wait;
}

int hk_cpu_clock_reading(clockid_t c, int64_t *value, int *blocked)
{
    for (;;) {
        uint32_t s1 = __atomic_load_n(&R.seq, __ATOMIC_ACQUIRE);
        int found = 0, n = R.n;
        for (int i = 0; i < n && i < FOLLOWED && !found; i++)
            if (R.clock[i] == c) {
                *value = R.value[i];
                *blocked = R.blocked[i];
                found = 1;
            }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(s1 & 1) && s1 == __atomic_load_n(&R.seq, __ATOMIC_RELAXED)) return found;
    }
}

static int start_paced(char *err, size_t errlen)
{
    C.pacer = hk_pace_new();
    C.pacer.wakeable = C.hooks.gvl_free != NULL;
    C.idle = 0;
    int rc = hk_timer_start_paced(pace_step, err, errlen);
    C.kind = hk_timer_kind();
    return rc;
}

/* ---- perf counters ---------------------------------------------------------- */

/* ctx: signal (the worker's handler): a thread's counter overflowed, so that
 * thread's clock is the one to read */
static void on_counter(int fd)
{
    clockid_t c = fd >= 0 && fd < EVENT_FDS && C.fd_clock[fd] ? C.fd_clock[fd] : __atomic_load_n(&C.watched, __ATOMIC_RELAXED);
    C.hooks.before();
    C.hooks.tick(c, hk_clock_ns(c), HK_TICK_RUNNING);
}

static void close_counter(int fd)
{
    if (fd < 0) return;
    if (fd < EVENT_FDS) C.fd_clock[fd] = 0;
    hk_cpu_event_close(fd);
    C.open--;
}

static void close_counters(void)
{
    for (size_t i = 0; i < C.tid_fd.cap; i++)
        if (C.tid_fd.keys[i]) close_counter((int)C.tid_fd.vals[i] - 1);
    hk_u64_map_clear(&C.tid_fd);
    C.open = 0;
}

/* A descriptor per live thread must never starve the program of descriptors:
 * past a quarter of its limit (or when a counter cannot be had), every counter
 * closes and the paced worker takes over. */
static void fall_back_to_pacer(void)
{
    char err[128];
    close_counters();
    C.perf = 0;
    hk_timer_stop();
    C.replaced_cpu_ns += (uint64_t)hk_timer_cpu_ns();
    if (start_paced(err, sizeof(err)) < 0) C.failed = 1; /* no clock: no samples */
}

/* the paced worker reads the thread's clock while the watched one does not run */
static void follow(int tid, int64_t from)
{
    clockid_t c = hk_thread_cpu_clock(tid);
    for (int i = 0; i < FOLLOWED; i++)
        if (C.followed[i] == c) return;
    for (int i = 0; i < FOLLOWED; i++)
        if (!C.followed[i]) {
            __atomic_store_n(&C.followed_from[i], from, __ATOMIC_RELAXED);
            __atomic_store_n(&C.followed[i], c, __ATOMIC_RELEASE); /* after where it counts from */
            return;
        }
    __atomic_add_fetch(&C.unfollowed, 1, __ATOMIC_RELAXED);
}

static void unfollow(int tid)
{
    clockid_t c = hk_thread_cpu_clock(tid);
    for (int i = 0; i < FOLLOWED; i++)
        if (C.followed[i] == c) {
            __atomic_store_n(&C.followed[i], 0, __ATOMIC_RELAXED);
            return;
        }
    if (C.unfollowed > 0) __atomic_sub_fetch(&C.unfollowed, 1, __ATOMIC_RELAXED);
}

void hk_cpu_clock_thread_begin(int tid, int64_t from)
{
    uint32_t had;
    if (tid > 0 && !C.perf) follow(tid, from);
    if (!C.perf || tid <= 0 || hk_u64_map_get(&C.tid_fd, (uint64_t)tid, &had)) return;
    if (C.open >= C.max_open) { fall_back_to_pacer(); return; }
    int fd = hk_cpu_event_open(tid, C.period_ns, hk_timer_signal(), hk_timer_worker_tid());
    if (fd < 0) { fall_back_to_pacer(); return; }
    C.open++;
    if (hk_u64_map_put(&C.tid_fd, (uint64_t)tid, (uint32_t)fd + 1) < 0) {
        close_counter(fd);
        fall_back_to_pacer();
        return;
    }
    if (fd < EVENT_FDS) C.fd_clock[fd] = hk_thread_cpu_clock(tid);
}

void hk_cpu_clock_thread_end(int tid)
{
    uint32_t fd1;
    if (tid > 0 && !C.perf) unfollow(tid);
    if (!C.perf || tid <= 0 || !hk_u64_map_get(&C.tid_fd, (uint64_t)tid, &fd1)) return;
    close_counter((int)fd1 - 1); /* a counter per live thread, not per thread ever seen */
    hk_u64_map_del(&C.tid_fd, (uint64_t)tid);
}

/* 0: the counters run (a probe on this thread opened); -1: they cannot, and no worker runs */
static int start_perf(char *err, size_t errlen)
{
    if (!C.fd_clock && !(C.fd_clock = calloc(EVENT_FDS, sizeof(*C.fd_clock)))) return -1;
    struct rlimit lim;
    C.max_open = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? (int)(lim.rlim_cur / 4) : 256;
    if (C.max_open > EVENT_FDS / 2) C.max_open = EVENT_FDS / 2;
    if (hk_timer_start(0, on_counter, err, errlen) < 0) return -1;
    if (hk_timer_signal() && hk_timer_worker_tid()) {
        /* where perf events are refused, the paced worker from the start */
        int probe = hk_cpu_event_open(0, C.period_ns, hk_timer_signal(), hk_timer_worker_tid());
        if (probe >= 0) {
            hk_cpu_event_close(probe);
            C.perf = 1;
            C.kind = "perf_event task-clock per thread";
            return 0;
        }
    }
    hk_timer_stop();
    C.replaced_cpu_ns += (uint64_t)hk_timer_cpu_ns();
    return -1;
}

/* ---- lifecycle ------------------------------------------------------------- */

int hk_cpu_clock_start(int64_t period_ns, int perf, clockid_t first, const hk_tick_hooks *hooks, char *err,
                       size_t errlen)
{
    C.watched = first;
    C.watched_from = -1;
    C.period_ns = period_ns;
    C.hooks = *hooks;
    C.perf = 0;
    C.failed = 0;
    C.open = 0;
    C.replaced_cpu_ns = 0;
    hk_u64_map_clear(&C.tid_fd);
    memset(C.followed, 0, sizeof(C.followed));
    memset(C.followed_from, 0, sizeof(C.followed_from));
    C.unfollowed = 0;
    memset(&F, 0, sizeof(F));
    R.n = 0;
    if (perf && start_perf(err, errlen) == 0) return 0;
    return start_paced(err, errlen);
}

void hk_cpu_clock_watch(clockid_t c, int64_t from)
{
    /* written only on change: the worker reads it at every look; where the
     * period begins first, so that the worker never sees the new clock with
     * an older thread's reading (it checks the reading against the clock, too) */
    if (__atomic_load_n(&C.watched, __ATOMIC_RELAXED) == c) return;
    __atomic_store_n(&C.watched_from, from, __ATOMIC_RELAXED);
    __atomic_store_n(&C.watched, c, __ATOMIC_RELEASE);
}

void hk_cpu_clock_poke(void)
{
    if (__atomic_load_n(&C.idle, __ATOMIC_RELAXED) && __atomic_exchange_n(&C.idle, 0, __ATOMIC_RELAXED)) hk_timer_poke();
}

void hk_cpu_clock_stop(void)
{
    close_counters(); /* no counter may signal after the worker is gone */
    C.perf = 0;
    hk_timer_stop();
}

void hk_cpu_clock_forget(void)
{
    close_counters(); /* the counters watch the parent's threads */
    C.perf = 0;
    hk_timer_forget();
}

const char *hk_cpu_clock_kind(void) { return C.kind; }
uint64_t hk_cpu_clock_worker_cpu_ns(void) { return C.replaced_cpu_ns + (uint64_t)hk_timer_cpu_ns(); }
int hk_cpu_clock_failed(void) { return C.failed; }
