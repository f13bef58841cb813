/* clocks.h — the clocks the collectors read: POSIX clocks in ns, and the TSC
 * where the kernel trusts it (a few cycles to read, scaled to ns by the caller
 * against the monotonic clock over a whole session). */
#ifndef HK_CLOCKS_H
#define HK_CLOCKS_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ns on clock c, or -1 when it cannot be read (the CPU clock of a thread that ended) */
static inline int64_t hk_clock_ns(clockid_t c)
{
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A thread's time spent runnable but not running (waiting on a run queue, as when the OS or the
 * hypervisor gives its core to another), in ns: the second field of Linux's schedstat file for
 * it, `path` (/proc/thread-self/schedstat: the calling thread's). -1 where it cannot be read.
 * ctx: any; three system calls. */
static inline int64_t hk_run_delay_ns_at(const char *path)
{
    char buf[96];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    unsigned long long on_cpu, delay;
    return sscanf(buf, "%llu %llu", &on_cpu, &delay) == 2 ? (int64_t)delay : -1;
}

static inline int64_t hk_thread_run_delay_ns(void) { return hk_run_delay_ns_at("/proc/thread-self/schedstat"); }

/* the same of another thread of this process, by its native id */
static inline int64_t hk_task_run_delay_ns(int tid)
{
    char path[48];
    snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
    return hk_run_delay_ns_at(path);
}

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t hk_tsc(void) { return __rdtsc(); }
#else
static inline uint64_t hk_tsc(void) { return 0; }
#endif

/* The TSC counts time only where the kernel trusts it as its clocksource
 * (constant rate, synchronized across cores). ctx: any; reads a sysfs file. */
static inline int hk_tsc_usable(void)
{
#if defined(__x86_64__) || defined(__i386__)
    char name[64] = {0};
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f) return 0;
    int ok = fgets(name, sizeof(name), f) && strncmp(name, "tsc", 3) == 0;
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

#endif
