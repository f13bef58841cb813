/* sampler_ractors.c — cpu and wall modes' samples of the threads of Ractors other than the main
 * one (Ruby 3.3 and later, Linux, the control-frame walker's layout known).
 *
 * The main sampler (sampler.c) keeps its job in the main Ractor: its ring, thread table and
 * states have one writer, which the main Ractor's GVL makes it. Another Ractor's thread runs
 * beside it, under its own Ractor's GVL, so its samples take another way, with a lock of their
 * own:
 *   - a thread event hook (global to the VM) sees each of those threads take and leave its
 *     Ractor's GVL, on the thread itself: it keeps the thread's record (the native thread it
 *     runs on, and its time by state since its latest sample, read on its own clocks);
 *   - a ticker thread, while one of them holds its GVL, signals it once a period (the threads
 *     spread over the period); the handler asks Ruby for this file's postponed job, which Ruby
 *     runs on that thread at its next safepoint, as it runs the main job on a main thread;
 *   - the job reads the stack with rb_profile_frames (the control-frame walker keeps one
 *     thread's state) and writes the sample into RS.ring, under the lock, for the resolver.
 * Ruby's job bits are the VM's: a thread that runs the jobs runs every pending one. A main
 * thread may so run this job (it does nothing there) and a Ractor's thread the main one (which
 * does nothing there either, sampler.c): the sample is lost, and its time goes to the thread's
 * next one. Spreading the signals over the period keeps that rare.
 *
 * Time: cpu mode reads each thread's CPU clock as it takes its GVL and lets it go, and at its
 * samples: a sample holds the CPU its thread used while holding its GVL since the previous one,
 * whatever native thread it ran on (Ractors' threads are M:N). Wall mode holds its running time
 * the same way, and its time off the GVL (blocked, or waiting for it) under the stack of its
 * next sample with that state's leaf. A thread's time after its last sample (at its end, or at
 * stop) is in no sample: in cpu mode, it stays in [native threads].
 */
#include "sampler_int.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ruby/debug.h>
#include <ruby/ractor.h>
#include <ruby/thread.h>

#include "stack_walk.h"

#if defined(HAVE_RB_POSTPONED_JOB_PREREGISTER) && defined(HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK) && \
    defined(HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET) && defined(__linux__) && defined(HK_VM_LAYOUT)
#define HK_RACTOR_SAMPLING 1
#endif

#define RACTOR_RING_WORDS (1 << 16) /* 512 KB, made at the first Ractor's thread */
/* the deepest stack a sample keeps: a quarter of the ring at most (a [truncated] root below) */
#define RACTOR_MAX_DEPTH ((RACTOR_RING_WORDS / 4 - (int)HK_RACTOR_HEAD_WORDS) / 2 - 1)

#ifdef HK_RACTOR_SAMPLING

/* A thread of another Ractor. Its fields but `thread` and `tid` are written by the thread
 * itself (its hook and its job, one after the other); the ticker reads `tid` and `running`. */
typedef struct rthread {
    VALUE thread;    /* its Thread object; Qfalse once it ended (the slot may take another) */
    int tid;         /* the native thread it holds its Ractor's GVL on; 0 while it does not */
    int state;       /* HK_STATE_RUNNING while it holds the GVL, else HK_STATE_BLOCKED or _WAIT */
    int64_t since;   /* its clock where that state began (cpu mode: the native thread's CPU) */
    int64_t parts[HK_NSTATES]; /* its time by state since its latest sample */
    int64_t off_at;  /* wall mode: where it last let the GVL go */
    int64_t before;  /* its running time up to its first release of the GVL since its latest sample */
    int released;    /* it let the GVL go since its latest sample */
    uint32_t seq;    /* 0 until its first sample */
    uint32_t id;
    VALUE ractor;
} rthread;

static struct {
    pthread_mutex_t lock; /* the ring's producers, and the records' table as it grows */
    rb_postponed_job_handle_t job;
    rb_internal_thread_event_hook_t *hook;
    int on;               /* between start and stop (the job and the handler check it) */
    int wall;             /* the profile's mode is wall (else cpu) */
    int signo;            /* the ticker's signal, once installed (kept for the process's life) */
    int layout_ok;        /* a Ractor's struct begins with its object and number (checked at start) */
    int depth;            /* the profile's max_depth */
    int *lines;           /* rb_profile_frames' lines, under the lock */
    int64_t period_ns;
    pthread_t ticker;
    int ticking, stop;
    pthread_mutex_t wait_lock; /* the ticker's waits, which stop cuts short */
    pthread_cond_t wake;
    int64_t ticker_cpu;   /* the ticker's CPU, read as it stopped */
    uint64_t dropped;     /* samples lost: no room in the ring, or in the table */
    uint64_t sampled;     /* threads sampled */
    uint64_t jobs, job_ns; /* the jobs that took a sample, and their time (monotonic ns) */
    uint32_t n;           /* records in use (stored with release) */
    rthread threads[HK_RACTOR_THREADS];
} R = {.lock = PTHREAD_MUTEX_INITIALIZER, .wait_lock = PTHREAD_MUTEX_INITIALIZER};

/* the ticker's condition variable, timed on the monotonic clock as its waits are */
static void init_wake(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&R.wake, &attr);
    pthread_condattr_destroy(&attr);
}

/* the calling thread's clock in the profile's mode */
static int64_t mode_clock(void) { return hk_clock_ns(R.wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID); }

static rthread *find(VALUE th)
{
    uint32_t n = __atomic_load_n(&R.n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++)
        if (__atomic_load_n(&R.threads[i].thread, __ATOMIC_ACQUIRE) == th) return &R.threads[i];
    return NULL;
}

/* ctx: the signal handler, on a thread of another Ractor: its job, at its next safepoint */
static void on_signal(int sig, siginfo_t *info, void *uc)
{
    (void)sig, (void)info, (void)uc;
    int saved = errno;
    if (__atomic_load_n(&R.on, __ATOMIC_RELAXED)) rb_postponed_job_trigger(R.job);
    errno = saved;
}

/* the first real-time signal from SIGRTMIN+12 whose disposition is the default (the wall timer
 * takes them from SIGRTMIN+8): installed once, and kept, so that a signal sent just before stop
 * never meets the default action, which ends the process */
static int install_signal(void)
{
    for (int s = SIGRTMIN + 12; s <= SIGRTMAX; s++) {
        struct sigaction cur, sa;
        if (sigaction(s, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_RESTART | SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(s, &sa, NULL) == 0) return s;
    }
    return 0;
}

/* the ticker waits ns (CLOCK_MONOTONIC), or until stop; 1 when stopping */
static int wait_ns(int64_t ns)
{
    int64_t until = hk_clock_ns(CLOCK_MONOTONIC) + ns;
    struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
    pthread_mutex_lock(&R.wait_lock);
    while (!R.stop && pthread_cond_timedwait(&R.wake, &R.wait_lock, &ts) == 0) {}
    int stop = R.stop;
    pthread_mutex_unlock(&R.wait_lock);
    return stop;
}

/* The ticker: once a period, each thread of another Ractor that holds its GVL is signalled, the
 * signals spread over the period. A thread's native thread is read just before its signal: it
 * may have let the GVL go since (its tid is then 0), or moved. */
static void *ticker(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "hakari-ractors", 0, 0, 0);
    pid_t pid = getpid();
    uint32_t slots[HK_RACTOR_THREADS];
    int stop = 0;
    while (!stop) {
        int k = 0;
        uint32_t n = __atomic_load_n(&R.n, __ATOMIC_ACQUIRE);
        for (uint32_t i = 0; i < n; i++)
            if (__atomic_load_n(&R.threads[i].tid, __ATOMIC_RELAXED)) slots[k++] = i;
        if (!k) {
            stop = wait_ns(R.period_ns);
            continue;
        }
        for (int i = 0; i < k && !stop; i++) {
            int tid = __atomic_load_n(&R.threads[slots[i]].tid, __ATOMIC_RELAXED);
            if (tid) syscall(SYS_tgkill, pid, tid, R.signo);
            stop = wait_ns(R.period_ns / k);
        }
    }
    return NULL;
}

/* under the lock: the ring, the signal and the ticker, at the first thread of another Ractor */
static int first_thread_locked(void)
{
    if (R.ticking) return 0;
    if (!RS.ring.words && hk_ring_init(&RS.ring, RACTOR_RING_WORDS) < 0) return -1;
    if (!R.signo && !(R.signo = install_signal())) return -1;
    R.stop = 0;
    /* the ticker takes none of the process's signals: it starts with all of them blocked */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&R.ticker, NULL, ticker, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) return -1;
    R.ticking = 1;
    return 0;
}

/* under the lock: a slot for a new record, an ended thread's or the next one; NULL: none */
static rthread *free_slot_locked(void)
{
    for (uint32_t i = 0; i < R.n; i++)
        if (__atomic_load_n(&R.threads[i].thread, __ATOMIC_ACQUIRE) == Qfalse) return &R.threads[i];
    return R.n < HK_RACTOR_THREADS ? &R.threads[R.n] : NULL;
}

/* a record for th, in its first stretch holding its Ractor's GVL; NULL when there is no room
 * (a stretch lost: counted) */
static rthread *add(VALUE th, const void *vm_thread, int64_t now)
{
    pthread_mutex_lock(&R.lock);
    rthread *t = R.on && first_thread_locked() == 0 ? free_slot_locked() : NULL;
    if (t) {
        /* readers find a record by its thread, written last: until then this is no one's */
        memset(t, 0, sizeof(*t));
        t->thread = Qfalse;
        t->since = now;
        t->state = HK_STATE_RUNNING;
        t->ractor = Qnil;
        const void *r = R.layout_ok ? hk_stack_walk_ractor_of(vm_thread) : NULL;
        if (r) {
            t->ractor = *(const VALUE *)r;
            t->id = *(const uint32_t *)((const char *)r + sizeof(VALUE));
        }
        __atomic_store_n(&t->thread, th, __ATOMIC_RELEASE);
        if (t == &R.threads[R.n]) __atomic_store_n(&R.n, R.n + 1, __ATOMIC_RELEASE);
    } else if (R.on) {
        R.dropped++;
    }
    pthread_mutex_unlock(&R.lock);
    return t;
}

/* ctx: the thread event hook, on the thread itself, with or without its GVL: its state's time
 * so far goes to its parts, and the new state begins */
static void on_event(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *user)
{
    (void)user;
    if (!data || !__atomic_load_n(&R.on, __ATOMIC_ACQUIRE)) return;
    const void *vm_thread = hk_stack_walk_thread_of(data->thread);
    if (!vm_thread || hk_stack_walk_main_ractor(vm_thread)) return;
    rthread *t = find(data->thread);
    if (ev & RUBY_INTERNAL_THREAD_EVENT_EXITED) {
        if (t) {
            __atomic_store_n(&t->tid, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&t->thread, Qfalse, __ATOMIC_RELEASE);
        }
        return;
    }
    /* cpu mode counts only the stretches holding the GVL, read on the native thread's clock as
     * they begin and end; READY may come from another thread, and holds no CPU of this one */
    if (!R.wall && (ev & RUBY_INTERNAL_THREAD_EVENT_READY)) return;
    int64_t now = mode_clock();
    if (!t) {
        if ((ev & RUBY_INTERNAL_THREAD_EVENT_RESUMED) && (t = add(data->thread, vm_thread, now)))
            __atomic_store_n(&t->tid, (int)syscall(SYS_gettid), __ATOMIC_RELAXED);
        return;
    }
    if (R.wall || t->state == HK_STATE_RUNNING) t->parts[t->state] += now - t->since;
    t->since = now;
    /* its first wait since its latest sample: what it ran up to it goes to that sample's stack */
    if (t->state == HK_STATE_RUNNING && !(ev & RUBY_INTERNAL_THREAD_EVENT_RESUMED) && !t->released) {
        t->before = t->parts[HK_STATE_RUNNING];
        t->parts[HK_STATE_RUNNING] = 0;
        t->released = 1;
    }
    if (ev & RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
        /* wall mode: a wait of a period or more is sampled where it went on, in the call that
         * waited, rather than wherever the next tick finds the thread */
        if (R.wall && t->state != HK_STATE_RUNNING && now - t->off_at >= R.period_ns) {
            rb_postponed_job_trigger(R.job);
            /* Ruby's trigger flags the native thread's current context, which under M:N may not
             * be this thread's yet as it resumes */
            hk_stack_walk_flag_jobs(vm_thread);
        }
        t->state = HK_STATE_RUNNING;
        __atomic_store_n(&t->tid, (int)syscall(SYS_gettid), __ATOMIC_RELAXED);
    } else {
        if (t->state == HK_STATE_RUNNING) t->off_at = now;
        t->state = ev & RUBY_INTERNAL_THREAD_EVENT_READY ? HK_STATE_WAIT : HK_STATE_BLOCKED;
        __atomic_store_n(&t->tid, 0, __ATOMIC_RELAXED);
    }
}

/* ctx: a thread of another Ractor, holding its GVL (the postponed job); on a main thread, or
 * after stop, nothing */
static void ractor_job(void *arg)
{
    (void)arg;
    if (!__atomic_load_n(&R.on, __ATOMIC_ACQUIRE)) return;
    rthread *t = find(rb_thread_current());
    if (!t || t->state != HK_STATE_RUNNING) return;
    int64_t now = mode_clock(), w0 = hk_clock_ns(CLOCK_MONOTONIC);
    t->parts[HK_STATE_RUNNING] += now - t->since;
    t->since = now;
    pthread_mutex_lock(&R.lock);
    size_t most = HK_RACTOR_HEAD_WORDS + 2 * ((size_t)R.depth + 1);
    uint64_t *at = R.on ? hk_ring_reserve(&RS.ring, most) : NULL;
    if (!at) { /* the resolver is behind: the time goes to the next sample */
        if (R.on) R.dropped++;
        pthread_mutex_unlock(&R.lock);
        return;
    }
    VALUE *frames = (VALUE *)(at + HK_RACTOR_HEAD_WORDS);
    int n = rb_profile_frames(0, R.depth + 1, frames, R.lines);
    if (n <= 0) { /* no frame yet (a thread starting): its time goes to its next sample */
        pthread_mutex_unlock(&R.lock);
        return;
    }
    if (!t->seq) {
        t->seq = hk_sampler_next_seq();
        R.sampled++;
        uint32_t k = RS.nthreads; /* its `ractor` label: the first HK_RACTOR_THREADS threads' */
        if (k < HK_RACTOR_THREADS) {
            RS.threads[k] = (hk_ractor_thread){t->seq, t->id, t->ractor};
            __atomic_store_n(&RS.nthreads, k + 1, __ATOMIC_RELEASE);
        }
    }
    hk_ractor_sample *h = (hk_ractor_sample *)at;
    /* cut at max_depth like any sample: the root's frames go, a [truncated] root stands for them */
    int keep = n > R.depth ? R.depth - 1 : n;
    *h = (hk_ractor_sample){.seq = t->seq, .n = (uint32_t)keep, .truncated = n > R.depth};
    if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
    memcpy(h->parts, t->parts, sizeof(h->parts));
    memset(t->parts, 0, sizeof(t->parts));
    h->before = t->before;
    t->before = 0;
    t->released = 0;
    uint64_t *lines = at + HK_RACTOR_HEAD_WORDS + keep; /* after the frames kept (leaf first) */
    for (int i = 0; i < keep; i++) lines[i] = (uint64_t)(R.lines[i] < 0 ? 0 : R.lines[i]);
    hk_ring_commit(&RS.ring, HK_RACTOR_HEAD_WORDS + 2 * (size_t)keep);
    R.jobs++;
    R.job_ns += (uint64_t)(hk_clock_ns(CLOCK_MONOTONIC) - w0);
    pthread_mutex_unlock(&R.lock);
}

/* A Ractor's struct begins with its object, then its number (Ruby's rb_ractor_pub): checked on
 * the main one, which is Ractor.current here, numbered 1. */
static int check_layout(void)
{
    const void *vm_thread = hk_stack_walk_thread_of(rb_thread_current());
    const void *r = vm_thread ? hk_stack_walk_ractor_of(vm_thread) : NULL;
    if (!r) return 0;
    VALUE cur = rb_funcall(rb_cRactor, rb_intern("current"), 0);
    return *(const VALUE *)r == cur && *(const uint32_t *)((const char *)r + sizeof(VALUE)) == 1;
}

/* what a profile counts and keeps of other Ractors' threads, emptied (no thread of theirs runs
 * a job: stopped, or in a forked child) */
static void reset(void)
{
    R.dropped = R.sampled = R.jobs = R.job_ns = 0;
    R.ticker_cpu = 0;
    R.n = 0;
    RS.nthreads = 0;
    if (RS.ring.words) hk_ring_clear(&RS.ring);
}

void hk_ractors_reset(void)
{
    pthread_mutex_lock(&R.lock);
    reset();
    pthread_mutex_unlock(&R.lock);
}

int hk_ractors_start(int64_t period_ns)
{
    /* no walker to tell Ractors apart, or no job of its own (Ruby's table of them is full) */
    if (!hk_stack_walk_thread_of(rb_thread_current()) || R.job == POSTPONED_JOB_HANDLE_INVALID) return 0;
    int depth = S.cfg.max_depth < RACTOR_MAX_DEPTH ? S.cfg.max_depth : RACTOR_MAX_DEPTH;
    pthread_mutex_lock(&R.lock);
    R.wall = S.cfg.mode == HK_MODE_WALL;
    R.period_ns = period_ns;
    if (R.depth != depth || !R.lines) {
        free(R.lines);
        R.lines = malloc(((size_t)depth + 1) * sizeof(int));
        R.depth = depth;
    }
    pthread_mutex_unlock(&R.lock);
    if (!R.lines) return -1;
    R.layout_ok = check_layout();
    R.hook = rb_internal_thread_add_event_hook(on_event,
                                               RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED |
                                                   RUBY_INTERNAL_THREAD_EVENT_READY | RUBY_INTERNAL_THREAD_EVENT_EXITED,
                                               NULL);
    if (!R.hook) return -1;
    __atomic_store_n(&R.on, 1, __ATOMIC_RELEASE);
    return 1;
}

void hk_ractors_stop(void)
{
    if (!R.hook) return;
    /* once removed, no hook runs (Ruby removes it under the lock its calls take) */
    rb_internal_thread_remove_event_hook(R.hook);
    R.hook = NULL;
    pthread_mutex_lock(&R.lock); /* no job is writing the ring when this returns, and none will */
    __atomic_store_n(&R.on, 0, __ATOMIC_RELEASE);
    int ticking = R.ticking;
    R.ticking = 0;
    pthread_mutex_unlock(&R.lock);
    if (!ticking) return;
    clockid_t c;
    if (pthread_getcpuclockid(R.ticker, &c) == 0) R.ticker_cpu = hk_clock_ns(c);
    pthread_mutex_lock(&R.wait_lock);
    R.stop = 1;
    pthread_cond_signal(&R.wake);
    pthread_mutex_unlock(&R.wait_lock);
    pthread_join(R.ticker, NULL);
}

void hk_ractors_forget(void)
{
    /* the ticker did not survive the fork; the lock may have been held by a thread that did not */
    pthread_mutex_init(&R.lock, NULL);
    pthread_mutex_init(&R.wait_lock, NULL);
    init_wake();
    R.on = 0;
    R.ticking = 0;
    if (R.hook) rb_internal_thread_remove_event_hook(R.hook);
    R.hook = NULL;
    reset(); /* the parent's samples are the parent's */
}

uint64_t hk_ractors_dropped(void) { return R.dropped; }
uint64_t hk_ractors_threads(void) { return R.sampled; }
void hk_ractors_jobs(uint64_t *count, uint64_t *ns)
{
    *count = R.jobs;
    *ns = R.job_ns;
}

uint64_t hk_ractors_ticker_cpu_ns(void)
{
    clockid_t c;
    if (R.ticking && pthread_getcpuclockid(R.ticker, &c) == 0) return (uint64_t)hk_clock_ns(c);
    return (uint64_t)R.ticker_cpu;
}

void hk_ractors_init(void)
{
    init_wake();
    R.job = rb_postponed_job_preregister(0, ractor_job, NULL);
}

#else /* Ractors' threads are not sampled on this Ruby */

int hk_ractors_start(int64_t period_ns)
{
    (void)period_ns;
    return 0;
}
void hk_ractors_reset(void) { RS.nthreads = 0; }
void hk_ractors_stop(void) {}
void hk_ractors_forget(void) {}
uint64_t hk_ractors_dropped(void) { return 0; }
uint64_t hk_ractors_threads(void) { return 0; }
void hk_ractors_jobs(uint64_t *count, uint64_t *ns) { *count = *ns = 0; }
uint64_t hk_ractors_ticker_cpu_ns(void) { return 0; }
void hk_ractors_init(void) {}

#endif

/* ctx: GC mark phase (the resolve lock held): the Ractors named in the samples, and the frames
 * of the samples not yet resolved */
void hk_ractors_mark(void)
{
    uint32_t n = __atomic_load_n(&RS.nthreads, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++)
        if (!SPECIAL_CONST_P(RS.threads[i].ractor)) rb_gc_mark(RS.threads[i].ractor);
    if (!RS.ring.words) return;
    uint64_t cursor;
    size_t words;
    for (const uint64_t *rec = hk_ring_first(&RS.ring, &cursor, &words); rec; rec = hk_ring_next(&RS.ring, &cursor, &words)) {
        const hk_ractor_sample *h = (const hk_ractor_sample *)rec;
        const VALUE *frames = (const VALUE *)(rec + HK_RACTOR_HEAD_WORDS);
        for (uint32_t i = 0; i < h->n; i++)
            if (!SPECIAL_CONST_P(frames[i])) rb_gc_mark(frames[i]);
    }
}
