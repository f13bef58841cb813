/* test_timer.c — the timer's worker thread: the paced loop honours the waits
 * its step asks for, stops promptly even in a long wait, and runs no step
 * after hk_timer_stop returns; the interval timer fires at about its rate.
 * Built without extconf's HAVE_* macros, so the interval timer here is the
 * condition-variable fallback (the signal timer is covered by the Ruby tests). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "timer.h"

static atomic_long steps, fires;
static atomic_long wait_ns;

static long count_step(void)
{
    atomic_fetch_add(&steps, 1);
    return atomic_load(&wait_ns);
}

static void count_fire(int fd)
{
    (void)fd;
    atomic_fetch_add(&fires, 1);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

static void test_paced_worker_waits_as_asked_and_stops_clean(void)
{
    char err[128] = "";
    atomic_store(&steps, 0);
    atomic_store(&wait_ns, 2000000); /* 2 ms */
    int64_t t0 = mono_ns();
    CHECK_MSG(hk_timer_start_paced(count_step, err, sizeof(err)) == 0, "start: %s", err);
    CHECK(strcmp(hk_timer_kind(), "cpu-paced thread") == 0);
    CHECK_INT(hk_timer_signal(), 0); /* no signal: the step runs on the worker itself */
    sleep_ms(60);
    hk_timer_stop();
    long n = atomic_load(&steps);
    double ms = (double)(mono_ns() - t0) / 1e6;
    /* never more often than asked (one step per 2 ms, plus the first); at least a few on a busy machine */
    CHECK_MSG(n >= 3 && n <= ms / 2 + 1, "%ld steps in %.1f ms with 2 ms waits", n, ms);
    sleep_ms(10);
    CHECK_INT(atomic_load(&steps), n); /* none after stop returned */
}

/* Linux: the worker is named, in /proc/self/task/<tid>/comm as in top -H */
static int threads_named(const char *name)
{
    int found = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof(comm), f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        found += strcmp(comm, name) == 0;
    }
    closedir(d);
    return found;
}

static void test_the_worker_is_named(void)
{
#ifdef __linux__
    char err[128] = "";
    atomic_store(&wait_ns, 2000000);
    CHECK_INT(threads_named("hakari-worker"), 0);
    CHECK_MSG(hk_timer_start_paced(count_step, err, sizeof(err)) == 0, "start: %s", err);
    CHECK_INT(threads_named("hakari-worker"), 1);
    hk_timer_stop();
    CHECK_INT(threads_named("hakari-worker"), 0);
#endif
}

static void test_stop_interrupts_a_long_wait(void)
{
    char err[128] = "";
    atomic_store(&steps, 0);
    atomic_store(&wait_ns, 10L * 1000000000L); /* 10 s */
    CHECK_MSG(hk_timer_start_paced(count_step, err, sizeof(err)) == 0, "start: %s", err);
    sleep_ms(20);
    int64_t t0 = mono_ns();
    hk_timer_stop();
    CHECK_MSG(mono_ns() - t0 < 1000000000LL, "stop took %lld ns", (long long)(mono_ns() - t0));
    CHECK_INT(atomic_load(&steps), 1);
}

static void test_interval_timer_fires_at_about_its_rate(void)
{
    char err[128] = "";
    atomic_store(&fires, 0);
    int64_t t0 = mono_ns();
    CHECK_MSG(hk_timer_start(5000000, count_fire, err, sizeof(err)) == 0, "start: %s", err); /* 200 Hz */
    sleep_ms(100);
    hk_timer_stop();
    long n = atomic_load(&fires);
    double ms = (double)(mono_ns() - t0) / 1e6;
    CHECK_MSG(n >= 5 && n <= ms / 5 + 1, "%ld fires in %.1f ms at 5 ms", n, ms);
    sleep_ms(10);
    CHECK_INT(atomic_load(&fires), n);
}

/* idle work that takes its whole budget (up to a few ms) */
static atomic_long idles, budget_min, budget_max;
static void busy_idle(long budget_ns)
{
    atomic_fetch_add(&idles, 1);
    if (budget_ns < atomic_load(&budget_min)) atomic_store(&budget_min, budget_ns);
    if (budget_ns > atomic_load(&budget_max)) atomic_store(&budget_max, budget_ns);
    int64_t until = mono_ns() + (budget_ns < 3000000 ? budget_ns : 3000000);
    while (mono_ns() < until) {}
}

/* a step that also keeps when it ran (the first 256) */
enum { MAX_STAMPS = 256 };
static int64_t stamps[MAX_STAMPS];
static long stamped_step(void)
{
    long i = atomic_load(&steps);
    if (i < MAX_STAMPS) stamps[i] = mono_ns();
    return count_step();
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The worker's spare time goes to idle work (the sampler resolves samples
 * there): half of each wait, and the next step still comes when it was due. */
static void test_idle_work_takes_half_the_wait_and_delays_no_step(void)
{
    char err[128] = "";
    atomic_store(&steps, 0);
    atomic_store(&idles, 0);
    atomic_store(&budget_min, 1L << 40);
    atomic_store(&budget_max, 0);
    atomic_store(&wait_ns, 2000000); /* 2 ms */
    hk_timer_set_idle(busy_idle);
    CHECK_MSG(hk_timer_start_paced(stamped_step, err, sizeof(err)) == 0, "start: %s", err);
    sleep_ms(100);
    hk_timer_stop();
    hk_timer_set_idle(NULL);
    long n = atomic_load(&steps);
    CHECK_INT(atomic_load(&budget_min), 1000000);
    CHECK_INT(atomic_load(&budget_max), 1000000);
    CHECK_MSG(atomic_load(&idles) >= n - 1 && atomic_load(&idles) <= n, "%ld idle calls for %ld steps",
              atomic_load(&idles), n);
    /* 1 ms of idle work per 2 ms step, which would make every step 3 ms after the one before if
     * the wait began after it. The bound is the midpoint, on the median gap: on this shared
     * machine a few steps come late (the mean over 100 ms failed 2 runs in 10), but a wait that
     * began after the idle work would make every gap late. */
    long m = n < MAX_STAMPS ? n : MAX_STAMPS;
    CHECK_MSG(m >= 10, "%ld steps in 100 ms with 2 ms waits", n);
    if (m < 10) return;
    int64_t gaps[MAX_STAMPS];
    for (long i = 1; i < m; i++) gaps[i - 1] = stamps[i] - stamps[i - 1];
    qsort(gaps, (size_t)(m - 1), sizeof(*gaps), cmp_i64);
    double median_ms = (double)gaps[(m - 1) / 2] / 1e6;
    CHECK_MSG(median_ms <= 2.5, "median gap %.2f ms between steps with 2 ms waits and 1 ms of idle work each",
              median_ms);
}

int main(void)
{
    RUN(test_paced_worker_waits_as_asked_and_stops_clean);
    RUN(test_stop_interrupts_a_long_wait);
    RUN(test_the_worker_is_named);
    RUN(test_interval_timer_fires_at_about_its_rate);
    RUN(test_idle_work_takes_half_the_wait_and_delays_no_step);
    return check_done();
}
