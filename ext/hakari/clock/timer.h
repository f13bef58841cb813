/* timer.h — the sampling clock: a worker thread that calls `fire` every
 * interval, or one that paces itself.
 *
 * Interval (hk_timer_start). Linux: the worker owns a POSIX timer
 * (timer_create + SIGEV_THREAD_ID) whose real-time signal is delivered to the
 * worker alone, so Ruby threads' blocking syscalls are never interrupted;
 * `fire` runs inside that signal handler. Elsewhere (or if timer_create
 * fails): the worker sleeps on a condition variable with absolute deadlines
 * and calls `fire` itself. Either way `fire` must be async-signal-safe.
 * Paced (hk_timer_start_paced): the worker calls its step on its own thread
 * and waits as long as each call asks; no signal is involved.
 * Either way the worker blocks every signal but its own, and spends its spare
 * time on the idle work it is given (hk_timer_set_idle).
 */
#ifndef HK_TIMER_H
#define HK_TIMER_H

#include <stddef.h>

/* fd: the file descriptor whose signal this is (a perf event's), or -1 for the timer */
typedef void (*hk_timer_fire_fn)(int fd);
/* a paced worker's step: does its work and returns how long to wait before the next step (ns) */
typedef long (*hk_timer_pace_fn)(void);
/* Work the worker does between ticks, on its own thread (not in a signal
 * handler), for at most about budget_ns: in paced and condvar loops after each
 * step, waiting for signals every few milliseconds. */
typedef void (*hk_timer_idle_fn)(long budget_ns);

/* ctx: GVL. Starts the worker; 0, or -1 with a message in err. With interval_ns
 * 0 no timer is armed: the worker only receives the signal others direct at it
 * (hk_timer_signal / hk_timer_worker_tid), e.g. perf events' overflows. */
int hk_timer_start(long interval_ns, hk_timer_fire_fn fire, char *err, size_t errlen);
/* ctx: GVL. Starts a worker that runs `pace` on its own thread (not in a signal
 * handler) and waits as long as each call asks, on a condition variable whose
 * timer slack is cut to 1 µs; 0, or -1 with a message in err. */
int hk_timer_start_paced(hk_timer_pace_fn pace, char *err, size_t errlen);
/* ctx: any thread but the worker. A paced worker's current wait ends now (one that has not
 * begun yet ends at once). */
void hk_timer_poke(void);
/* ctx: GVL, before a start. The work for the next worker's spare time, or NULL. */
void hk_timer_set_idle(hk_timer_idle_fn idle);
/* the real-time signal the worker handles, or 0 (condvar fallback) */
int hk_timer_signal(void);
/* the worker's thread id, for signals directed at it (Linux), or 0 */
int hk_timer_worker_tid(void);
/* ctx: GVL. Stops and joins the worker; no `fire` runs after it returns. */
void hk_timer_stop(void);
/* ctx: GVL. CPU time the worker thread has used, running or (after stop) in all;
 * 0 where a thread's CPU clock cannot be read. */
long long hk_timer_cpu_ns(void);
/* ctx: any. Which mechanism the running (or last) timer used, for the profile's comments. */
const char *hk_timer_kind(void);
/* ctx: fork child. The worker does not exist in a forked child: forget it without joining. */
void hk_timer_forget(void);

#endif
