/* cpu_events.h — CPU-time sampling clocks: a perf_event task-clock counter per
 * thread whose every period of that thread's CPU time sends a signal to the
 * sampler's worker (Linux). The kernel times these with high-resolution
 * timers, unlike setitimer/POSIX CPU timers, which only fire on the scheduler
 * tick (250 Hz on Debian's kernels).
 * ctx: GVL for open/close; hk_thread_cpu_clock anywhere.
 */
#ifndef HK_CPU_EVENTS_H
#define HK_CPU_EVENTS_H

#include <stdint.h>
#include <time.h>

/* fd of a counter on thread tid (0: the calling thread) that signals signo to
 * owner_tid every period_ns of the thread's CPU time; -1 when unavailable */
int hk_cpu_event_open(int tid, int64_t period_ns, int signo, int owner_tid);
void hk_cpu_event_close(int fd);
/* the calling thread's id */
int hk_gettid(void);
/* the CPU-time clock of thread tid, readable from any thread of the process */
clockid_t hk_thread_cpu_clock(int tid);
/* Whether the thread whose CPU clock is c (hk_thread_cpu_clock's, or
 * pthread_getcpuclockid's) is ready to run but waiting for a core (the OS
 * preempted it): 1, 0 when it runs or sleeps, -1 when that cannot be read
 * (another kind of clock, no /proc). Reads /proc: a few microseconds. */
int hk_thread_cpu_clock_runnable(clockid_t c);

#endif
