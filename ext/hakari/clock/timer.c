/* timer.c — see timer.h.
 *
 * State is one static struct: only one profiling session runs at a time.
 * Start handshake: the worker reports through `ready` whether it armed a
 * signal timer, so hk_timer_start can fall back before returning.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* timer_create with SIGEV_THREAD_ID, prctl, syscall; extconf passes it too */
#endif
#include "timer.h"

#include "clocks.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif


#if defined(HAVE_TIMER_CREATE) && defined(HAVE_CONST_SIGEV_THREAD_ID) && defined(__linux__)
#define HK_SIGNAL_TIMER 1
#include <sys/syscall.h>
#endif

static struct {
    /* immutable while running */
    long interval_ns;
    hk_timer_fire_fn fire;
    hk_timer_pace_fn pace;     /* set: the worker paces itself (paced_loop) */
    hk_timer_idle_fn idle;     /* its spare time's work, or NULL */
    int signo;                 /* 0 when the condvar loop is used */
    struct sigaction old_action;
    pthread_t thread;
    int started;
    const char *kind;
    /* shared with the worker, under lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop, ready, armed;
    int poked;                 /* hk_timer_poke: the paced worker's wait ends now */
    int worker_tid;
    long long cpu_ns;          /* the worker's CPU time, written as it exits */
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .kind = "none"};

static hk_timer_fire_fn volatile signal_fire; /* read by the handler */

/* a worker whose ticks come as signals does its idle work this often, for this long at most */
#define IDLE_EVERY_NS 5000000L
#define IDLE_BUDGET_NS 2000000L

void hk_timer_set_idle(hk_timer_idle_fn idle) { T.idle = idle; }

static void add_ns(struct timespec *ts, long ns)
{
    ts->tv_nsec += ns % 1000000000L;
    ts->tv_sec += ns / 1000000000L;
    if (ts->tv_nsec >= 1000000000L) { ts->tv_nsec -= 1000000000L; ts->tv_sec++; }
}

static void report_ready(int armed)
{
    pthread_mutex_lock(&T.lock);
    T.ready = 1;
    T.armed = armed;
    pthread_cond_broadcast(&T.cond);
    pthread_mutex_unlock(&T.lock);
}

#ifdef HK_SIGNAL_TIMER
static void on_signal(int signo, siginfo_t *info, void *ctx)
{
    (void)signo;
    (void)ctx;
    int saved = errno;
    hk_timer_fire_fn f = signal_fire;
    /* a signal queued by fasync (a perf event's overflow) says which descriptor */
    if (f) f(info && info->si_code == POLL_IN ? info->si_fd : -1);
    errno = saved;
}

/* arms a timer that signals this thread; 0 or -1 */
static int arm_signal_timer(timer_t *timer)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof(sev));
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = T.signo;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (T.interval_ns == 0) return 1; /* signals come from elsewhere: nothing to arm */
    if (timer_create(CLOCK_MONOTONIC, &sev, timer) != 0) return -1;
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    add_ns(&its.it_interval, T.interval_ns);
    its.it_value = its.it_interval;
    if (timer_settime(*timer, 0, &its, NULL) != 0) { timer_delete(*timer); return -1; }
    return 0;
}
#endif

/* with T.lock held: waits until deadline, or until asked to stop or poked */
static void wait_until(const struct timespec *deadline)
{
    int rc = 0;
    while (!T.stop && !T.poked && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&T.cond, &T.lock, deadline);
    T.poked = 0;
}

void hk_timer_poke(void)
{
    pthread_mutex_lock(&T.lock);
    T.poked = 1;
    pthread_cond_signal(&T.cond);
    pthread_mutex_unlock(&T.lock);
}

/* the fallback clock: absolute deadlines, so time spent in `fire` does not drift the rate */
static void condvar_loop(void)
{
    if (T.interval_ns == 0) T.interval_ns = 1000000000L; /* nothing else will fire: keep a slow clock */
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    pthread_mutex_lock(&T.lock);
    while (!T.stop) {
        add_ns(&deadline, T.interval_ns);
        wait_until(&deadline);
        if (T.stop) break;
        pthread_mutex_unlock(&T.lock);
        T.fire(-1);
        if (T.idle) T.idle(T.interval_ns / 2);
        pthread_mutex_lock(&T.lock);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > deadline.tv_sec + 1) deadline = now; /* after a long stall, don't burst */
    }
    pthread_mutex_unlock(&T.lock);
}

/* A wait of a few µs must not become the default 50 µs of timer slack. */
static void paced_loop(void)
{
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
#endif
    struct timespec deadline;
    pthread_mutex_lock(&T.lock);
    while (!T.stop) {
        pthread_mutex_unlock(&T.lock);
        long wait = T.pace();
        /* the next look is due `wait` after this one, whatever the idle work takes */
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        add_ns(&deadline, wait > 0 ? wait : 1);
        /* half the wait: should it overrun, the overrun is the next look's lateness */
        if (T.idle) T.idle(wait / 2);
        pthread_mutex_lock(&T.lock);
        wait_until(&deadline);
    }
    pthread_mutex_unlock(&T.lock);
}

static long long own_cpu_ns(void)
{
    int64_t v = hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    return v < 0 ? 0 : v;
}

static void *run_worker(void);

/* the worker's CPU is kept as it exits: its clock is gone once it is joined */
static void *worker(void *arg)
{
    (void)arg;
#ifdef PR_SET_NAME
    /* so it is told from the program's own threads in top -H, ps -L, perf and gdb */
    prctl(PR_SET_NAME, "hakari-worker", 0, 0, 0);
#endif
    void *r = run_worker();
    T.cpu_ns = own_cpu_ns();
    return r;
}

static void *run_worker(void)
{
    if (T.pace) {
        report_ready(0);
        paced_loop();
        return NULL;
    }
#ifdef HK_SIGNAL_TIMER
    T.worker_tid = (int)syscall(SYS_gettid);
    if (T.signo) {
        timer_t timer;
        int armed = arm_signal_timer(&timer);
        if (armed >= 0) {
            report_ready(1);
            /* the handler runs on this thread (it interrupts the idle work, so
             * that work never delays a tick); wait here until asked to stop */
            pthread_mutex_lock(&T.lock);
            while (!T.stop) {
                struct timespec deadline;
                clock_gettime(CLOCK_MONOTONIC, &deadline);
                add_ns(&deadline, IDLE_EVERY_NS);
                wait_until(&deadline);
                if (T.stop || !T.idle) continue;
                pthread_mutex_unlock(&T.lock);
                T.idle(IDLE_BUDGET_NS);
                pthread_mutex_lock(&T.lock);
            }
            pthread_mutex_unlock(&T.lock);
            if (armed == 0) timer_delete(timer);
            return NULL;
        }
    }
#endif
    report_ready(0);
    condvar_loop();
    return NULL;
}

#ifdef HK_SIGNAL_TIMER
/* first real-time signal from SIGRTMIN+8 whose disposition is the default, or 0 */
static int pick_signal(void)
{
    for (int s = SIGRTMIN + 8; s <= SIGRTMAX; s++) {
        struct sigaction cur;
        if (sigaction(s, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL)
            return s;
    }
    return 0;
}
#endif

static int start_worker(char *err, size_t errlen);

int hk_timer_start_paced(hk_timer_pace_fn pace, char *err, size_t errlen)
{
    T.pace = pace;
    T.fire = NULL;
    T.interval_ns = 0;
    T.signo = 0;
    if (start_worker(err, errlen) < 0) return -1;
    T.kind = "cpu-paced thread";
    return 0;
}

int hk_timer_start(long interval_ns, hk_timer_fire_fn fire, char *err, size_t errlen)
{
    T.pace = NULL;
    T.interval_ns = interval_ns;
    T.fire = fire;
    T.signo = 0;
#ifdef HK_SIGNAL_TIMER
    T.signo = pick_signal();
    if (T.signo) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_RESTART | SA_SIGINFO;
        sigfillset(&sa.sa_mask);
        signal_fire = fire;
        if (sigaction(T.signo, &sa, &T.old_action) != 0) T.signo = 0;
    }
#endif
    if (start_worker(err, errlen) < 0) return -1;
    T.kind = !T.armed ? "condvar thread" : interval_ns ? "timer_create(SIGEV_THREAD_ID)" : "signal thread";
    return 0;
}

/* creates the worker and waits for its ready report; 0 or -1 (signal handler given back) */
static int start_worker(char *err, size_t errlen)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&T.cond, &attr);
    pthread_condattr_destroy(&attr);
    T.stop = T.ready = T.armed = 0;
    T.worker_tid = 0;
    T.cpu_ns = 0;
    /* the worker must not take the process's other signals (Ruby's SIGINT etc.) */
    sigset_t all, old;
    sigfillset(&all);
#ifdef HK_SIGNAL_TIMER
    if (T.signo) sigdelset(&all, T.signo);
#endif
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&T.thread, NULL, worker, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the sampling thread: %s", strerror(rc));
#ifdef HK_SIGNAL_TIMER
        if (T.signo) sigaction(T.signo, &T.old_action, NULL);
#endif
        signal_fire = NULL;
        return -1;
    }
    pthread_mutex_lock(&T.lock);
    while (!T.ready) pthread_cond_wait(&T.cond, &T.lock);
    pthread_mutex_unlock(&T.lock);
    T.started = 1;
    return 0;
}

void hk_timer_stop(void)
{
    if (!T.started) return;
    pthread_mutex_lock(&T.lock);
    T.stop = 1;
    pthread_cond_broadcast(&T.cond);
    pthread_mutex_unlock(&T.lock);
    pthread_join(T.thread, NULL);
    T.started = 0;
    /* the timer is deleted and its thread gone: no signal can still be pending for it */
#ifdef HK_SIGNAL_TIMER
    if (T.signo) sigaction(T.signo, &T.old_action, NULL);
#endif
    signal_fire = NULL;
}

long long hk_timer_cpu_ns(void)
{
    if (!T.started) return T.cpu_ns; /* joined: what it wrote as it exited */
#ifdef HAVE_PTHREAD_GETCPUCLOCKID
    clockid_t c;
    int64_t v;
    if (pthread_getcpuclockid(T.thread, &c) == 0 && (v = hk_clock_ns(c)) >= 0) return v;
#endif
    return 0;
}

const char *hk_timer_kind(void) { return T.kind; }
int hk_timer_signal(void) { return T.started && T.armed ? T.signo : 0; }
int hk_timer_worker_tid(void) { return T.started && T.armed ? T.worker_tid : 0; }

void hk_timer_forget(void)
{
    if (!T.started) return;
    T.started = 0;
    signal_fire = NULL;
#ifdef HK_SIGNAL_TIMER
    /* timers are not inherited by fork, but our handler is: give the signal back */
    if (T.signo) sigaction(T.signo, &T.old_action, NULL);
#endif
    /* the parent's worker may have held the lock at fork time */
    pthread_mutex_init(&T.lock, NULL);
}
