/* cpu_events.c — see cpu_events.h. Without Linux perf events every open fails
 * and the sampler polls the CPU clocks instead. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_SETSIG, F_SETOWN_EX */
#endif
#include "cpu_events.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

int hk_cpu_event_open(int tid, int64_t period_ns, int signo, int owner_tid)
{
    if (signo <= 0 || owner_tid <= 0) return -1;
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof(a);
    a.config = PERF_COUNT_SW_TASK_CLOCK; /* counts the thread's CPU time in ns */
    a.sample_period = (uint64_t)period_ns;
    a.disabled = 1;
    a.wakeup_events = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return -1;
    struct f_owner_ex owner = {F_OWNER_TID, owner_tid};
    if (fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0 || fcntl(fd, F_SETSIG, signo) != 0 ||
        fcntl(fd, F_SETOWN_EX, &owner) != 0 ||
        /* enable for 2^30 overflows, each one signalled (no ring buffer needed) */
        ioctl(fd, PERF_EVENT_IOC_REFRESH, 1 << 30) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int hk_gettid(void) { return (int)syscall(SYS_gettid); }

/* what glibc's pthread_getcpuclockid computes: CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD of ~tid */
clockid_t hk_thread_cpu_clock(int tid) { return (clockid_t)(((unsigned int)~tid << 3) | 6); }

int hk_thread_cpu_clock_runnable(clockid_t c)
{
    if (c >= 0 || (c & 7) != 6) return -1; /* not a thread's scheduler clock */
    int tid = ~(int)((unsigned int)c >> 3 | 0xe0000000u);
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    /* "tid (comm) S ...": the name may hold spaces and parentheses, the state follows the last ')' */
    const char *end = strrchr(buf, ')');
    if (!end || end[1] != ' ' || !end[2]) return -1;
    return end[2] == 'R';
}
#else
int hk_cpu_event_open(int tid, int64_t period_ns, int signo, int owner_tid)
{
    (void)tid, (void)period_ns, (void)signo, (void)owner_tid;
    return -1;
}
int hk_gettid(void) { return 0; }
clockid_t hk_thread_cpu_clock(int tid) { (void)tid; return CLOCK_THREAD_CPUTIME_ID; }
int hk_thread_cpu_clock_runnable(clockid_t c) { (void)c; return -1; }
#endif

void hk_cpu_event_close(int fd)
{
    if (fd >= 0) close(fd);
}
