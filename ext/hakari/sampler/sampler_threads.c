/* sampler_threads.c — the sampler's threads: their records, the baseline
 * clocks of those alive at start, and the threads cpu mode's clock follows.
 * All of it runs with the GVL (sampler_int.h); the hook that sees threads
 * begin and end is sampler.c's.
 */
#include "sampler_int.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ruby/thread.h>

#include "buf.h"
#include "cpu_clock.h"
#include "cpu_events.h"

hk_thread *hk_sampler_thread_find(VALUE th)
{
    uint32_t i;
    return hk_u64_map_get(&S.thread_ids, (uint64_t)th, &i) ? &S.threads[i] : NULL;
}

hk_thread *hk_sampler_thread_add(VALUE th, int64_t prev_clock)
{
    if (hk_array_grow((void **)&S.threads, &S.threads_cap, S.nthreads + 1, sizeof(*S.threads)) < 0 ||
        hk_u64_map_put(&S.thread_ids, (uint64_t)th, (uint32_t)S.nthreads) < 0)
        return NULL;
    hk_thread *t = &S.threads[S.nthreads++];
    t->thread = th;
    t->seq = 0; /* numbered at its first sample, so sequence numbers say "first seen" order */
    t->prev_clock = prev_clock;
    t->clock = CLOCK_MONOTONIC;
    t->has_clock = 0;
    t->tid = 0;
    t->vm_thread = hk_stack_walk_thread_of(th);
    t->spot_valid = 0;
    t->own = 0;
    if (t->vm_thread) hk_sampler_thread_flaggable(t);
    return t;
}

void hk_sampler_thread_flaggable(const hk_thread *t)
{
    uint32_t n = S.nflag;
    if (n >= HK_FLAG_THREADS) return; /* the rest wait for a job that some thread runs */
    S.flag_threads[n] = t->vm_thread;
    __atomic_store_n(&S.nflag, n + 1, __ATOMIC_RELEASE); /* the entry first: the worker reads up to nflag */
}

/* the worker no longer flags the thread's VM struct (vm_thread; NULL: none). The worker may be
 * reading the array meanwhile: the last entry moves into the place, then the count drops. */
static void unflag(const void *vm_thread)
{
    uint32_t n = S.nflag;
    for (uint32_t i = 0; vm_thread && i < n; i++)
        if (S.flag_threads[i] == vm_thread) {
            __atomic_store_n(&S.flag_threads[i], S.flag_threads[n - 1], __ATOMIC_RELAXED);
            __atomic_store_n(&S.nflag, n - 1, __ATOMIC_RELEASE);
            return;
        }
}

/* Drops the retired threads whose grace has passed; returns the tick count. */
static uint64_t drop_expired_retired(void)
{
    uint64_t now = __atomic_load_n(&S.trigger_count, __ATOMIC_RELAXED);
    size_t kept = 0;
    for (size_t i = 0; i < S.nretired; i++)
        if (S.retired[i].until > now) S.retired[kept++] = S.retired[i];
    S.nretired = kept;
    return now;
}

/* A flagging of the worker's (wall mode's flag_threads, or the GVL holder's)
 * that began before the thread left the array ends before the worker's next
 * tick but one (ticks are counted before each flagging), so its Thread
 * object, and the VM struct the worker writes into, stay marked until then.
 * 0, or -1 when out of memory. */
static int keep_for_the_worker(VALUE thread)
{
    uint64_t now = drop_expired_retired();
    if (hk_array_grow((void **)&S.retired, &S.retired_cap, S.nretired + 1, sizeof(*S.retired)) < 0) return -1;
    S.retired[S.nretired++] = (struct hk_retired){thread, now + 2};
    return 0;
}

void hk_sampler_holder_thread_end(VALUE th)
{
    hk_sampler_holder_ended(hk_stack_walk_thread_of(th));
    /* out of memory it is not kept: a flag the worker began before this end could then land in a
     * struct the GC frees, within two of its steps; the time modes' retire keeps the record instead */
    keep_for_the_worker(th);
}

/* A thread that ended (its tail taken) leaves the threads the sampler walks
 * at every tick and the GC marks. A program that starts thread after thread
 * kept every Thread object it ever profiled alive until stop, with its
 * thread-local variables, and paid for it in GC marking: 20 000 threads of a
 * 10 KB thread-local each cost 387 MB more RSS and 3.4 times the run time.
 * Its sequence number stays with the samples already taken. */
void hk_sampler_thread_retire(hk_thread *t)
{
    size_t i = (size_t)(t - S.threads), last = S.nthreads - 1;
    /* object and retained modes have no ticks and flag no thread: nothing to wait for (their
     * tick count never moves, so the grace would last to stop, and retained mode would count
     * the ended threads' objects as alive) */
    if (t->vm_thread && !HK_MODE_COUNTS_OBJECTS(S.cfg.mode)) {
        if (keep_for_the_worker(t->thread) < 0) return; /* out of memory: it stays, as if alive */
        unflag(t->vm_thread);
    }
    hk_u64_map_del(&S.thread_ids, (uint64_t)t->thread);
    if (i != last) {
        /* the map has room for the key it just lost: this put does not grow it */
        S.threads[i] = S.threads[last];
        hk_u64_map_put(&S.thread_ids, (uint64_t)S.threads[i].thread, (uint32_t)i);
    }
    S.nthreads--;
    S.last_thread = (size_t)-1;
}

/* The retired threads whose grace has passed are forgotten here too, not only
 * when the next thread retires: the last ones a program ends would otherwise
 * stay marked until stop. */
void hk_sampler_threads_mark(void)
{
    for (size_t i = 0; i < S.nthreads; i++) rb_gc_mark(S.threads[i].thread);
    drop_expired_retired();
    for (size_t i = 0; i < S.nretired; i++) rb_gc_mark(S.retired[i].thread);
}

/* Thread#native_thread_id (Ruby 3.1+), or 0 */
static int native_tid(VALUE th)
{
    static ID id_native;
    if (!id_native) id_native = rb_intern("native_thread_id");
    if (!rb_respond_to(th, id_native)) return 0;
    VALUE tid = rb_funcall(th, id_native, 0);
    return FIXNUM_P(tid) ? FIX2INT(tid) : 0;
}

/* another thread's CPU time, through the clock Linux derives from its tid */
static int other_thread_cpu_ns(int tid, int64_t *out)
{
    int64_t v = tid > 0 ? hk_clock_ns(hk_thread_cpu_clock(tid)) : -1;
    if (v < 0) return -1;
    *out = v;
    return 0;
}

/* Threads alive at start get a baseline clock now, so their first sample
 * weighs only time spent since start. */
static void register_existing_threads(void)
{
    VALUE cur = rb_thread_current();
    VALUE list = rb_funcall(rb_cThread, rb_intern("list"), 0);
    /* In wall mode every thread's time begins where the session's does, this one's too: read
     * here, its baseline would leave out a preemption during start's work since (4-9 ms on a
     * loaded sanitizer run, one of the OS's time slices) */
    int64_t from = S.cfg.mode == HK_MODE_WALL ? S.start_mono_ns
                   : S.mn                     ? hk_mn_cpu_now(cur)
                                              : hk_clock_ns(hk_sampler_mode_clock());
    hk_thread *t = hk_sampler_thread_add(cur, from);
    if (t) t->tid = hk_gettid();
    for (long i = 0; i < RARRAY_LEN(list); i++) {
        VALUE th = RARRAY_AREF(list, i);
        if (th == cur) continue;
        int64_t prev = S.start_mono_ns;
        int tid = native_tid(th);
        if (S.cfg.mode == HK_MODE_CPU && S.mn)
            prev = hk_mn_cpu_now(th); /* 0: its clock begins at its first stretch since start */
        else if (S.cfg.mode == HK_MODE_CPU && other_thread_cpu_ns(tid, &prev) < 0)
            prev = -1; /* unknown: the first sample will weigh one nominal interval */
        t = hk_sampler_thread_add(th, prev);
        if (t) t->tid = tid;
    }
}

/* ---- native threads' CPU clocks (cpu mode) ---------------------------------

 * A native thread's CPU clock starts at 0 when it is created, but Ruby may run
 * one Ruby thread after another on it (3.1's cache), and a thread's own setup
 * runs before RUBY_EVENT_THREAD_BEGIN. So each native thread keeps where its
 * clock was last accounted: at start for those alive then, at the end of each
 * Ruby thread it ran. A Ruby thread that begins on it takes its time from
 * there (from 0 on a native thread created since start), so its setup and its
 * predecessor's teardown are in its first sample, not lost. */

static hk_u64_map native_index; /* tid -> index in native_clock */
static int64_t *native_clock;
static size_t nnative, native_cap;

static void native_forget(void)
{
    hk_u64_map_clear(&native_index);
    nnative = 0;
}

static void native_set(int tid, int64_t clock)
{
    uint32_t i;
    if (tid <= 0 || clock < 0) return;
    if (!hk_u64_map_get(&native_index, (uint64_t)tid, &i)) {
        if (hk_array_grow((void **)&native_clock, &native_cap, nnative + 1, sizeof(*native_clock)) < 0 ||
            hk_u64_map_put(&native_index, (uint64_t)tid, (uint32_t)nnative) < 0)
            return; /* out of memory: this thread's baseline will be its clock at its start */
        i = (uint32_t)nnative++;
    }
    native_clock[i] = clock;
}

/* every native thread of the process, with its CPU clock now */
static void native_scan(void)
{
    native_forget();
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        int tid = atoi(e->d_name);
        if (tid > 0) native_set(tid, hk_clock_ns(hk_thread_cpu_clock(tid)));
    }
    closedir(d);
}

int64_t hk_sampler_native_baseline(int tid, int64_t now)
{
    uint32_t i;
    if (tid <= 0) return now;
    if (hk_u64_map_get(&native_index, (uint64_t)tid, &i)) return native_clock[i] <= now ? native_clock[i] : now;
    return nnative ? 0 : now; /* created since start (if the scan at start saw any thread) */
}

void hk_sampler_native_accounted(int tid, int64_t clock) { native_set(tid, clock); }

/* ---- a thread's teardown (cpu mode) -----------------------------------------

 * After RUBY_EVENT_THREAD_END, where its tail is taken, a thread still wakes
 * its joiners, frees its stacks and hands the GVL on, on its own CPU: some
 * 20 µs on 3.3, so a program of short threads lost a tenth of its CPU. Where
 * Ruby has thread event hooks, RUBY_INTERNAL_THREAD_EVENT_EXITED comes on the
 * exiting native thread after most of it, without the GVL: the CPU since its
 * end goes to a list, which the next thread event holding the GVL (or stop)
 * empties into tails of the threads it names. The thread's end and its
 * EXITED run on one native thread with no other Ruby thread between them
 * (it holds the GVL until it is dead), so a thread-local carries the one to
 * the other. */

#define EXITS 256 /* teardowns waiting for a thread event; past that, counted as lost */

typedef struct exit_cpu { uint32_t seq; int64_t ns; } exit_cpu;
static exit_cpu exits[EXITS];
static size_t nexits;
static uint64_t exits_lost;
static pthread_mutex_t exits_lock = PTHREAD_MUTEX_INITIALIZER;
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
static _Thread_local struct { uint32_t seq; int64_t cpu; } exiting;
static rb_internal_thread_event_hook_t *exit_hook;

/* ctx: the exiting thread, without the GVL */
static void on_exited(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *user)
{
    (void)ev, (void)data, (void)user;
    if (!exiting.seq) return;
    int64_t ns = hk_clock_ns(CLOCK_THREAD_CPUTIME_ID) - exiting.cpu;
    pthread_mutex_lock(&exits_lock);
    if (ns > 0 && nexits < EXITS) exits[nexits++] = (exit_cpu){exiting.seq, ns};
    else if (ns > 0) exits_lost++;
    pthread_mutex_unlock(&exits_lock);
    exiting.seq = 0;
}
#endif

void hk_sampler_exits_start(void)
{
    nexits = 0;
    exits_lost = 0;
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
    if (S.cfg.mode == HK_MODE_CPU)
        exit_hook = rb_internal_thread_add_event_hook(on_exited, RUBY_INTERNAL_THREAD_EVENT_EXITED, NULL);
#endif
}

void hk_sampler_exits_stop(void)
{
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
    /* once removed, no hook runs (Ruby removes it under the lock its calls take) */
    if (exit_hook) rb_internal_thread_remove_event_hook(exit_hook);
    exit_hook = NULL;
#endif
}

void hk_sampler_exits_forget(void)
{
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
    if (exit_hook) rb_internal_thread_remove_event_hook(exit_hook);
    exit_hook = NULL;
#endif
    pthread_mutex_init(&exits_lock, NULL); /* another thread may have held it at the fork */
}

void hk_sampler_thread_exiting(uint32_t seq, int64_t cpu)
{
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
    if (!exit_hook) return;
    exiting.seq = seq;
    exiting.cpu = cpu;
#else
    (void)seq, (void)cpu;
#endif
}

size_t hk_sampler_exits_take(uint32_t *seqs, int64_t *ns, size_t max, uint64_t *lost)
{
    if (!__atomic_load_n(&nexits, __ATOMIC_RELAXED) && !exits_lost) return 0; /* most calls: no lock */
    pthread_mutex_lock(&exits_lock);
    size_t n = nexits < max ? nexits : max;
    for (size_t i = 0; i < n; i++) {
        seqs[i] = exits[i].seq;
        ns[i] = exits[i].ns;
    }
    memmove(exits, exits + n, (nexits - n) * sizeof(exits[0]));
    nexits -= n;
    *lost += exits_lost;
    exits_lost = 0;
    pthread_mutex_unlock(&exits_lock);
    return n;
}

/* ---- the thread that holds the GVL -------------------------------------------

 * A tick's job runs on the thread whose interrupt flag Ruby's trigger sets:
 * the main Ractor's "running" context. From 3.3 on, a new native thread makes
 * its Ruby thread the running one as it starts, before it has the GVL
 * (thread_pthread.c ruby_thread_set_native): the trigger then flagged a
 * thread that waited for the GVL while another ran on with it, unsampled,
 * for up to its whole time slice. The 50 ms of a loop that ran beside a
 * thread it had just started had no sample at all. Where Ruby's thread
 * hooks name the thread, RUBY_INTERNAL_THREAD_EVENT_RESUMED says which one
 * took the GVL, and the worker flags it as well (hk_sampler_gvl_holder). */

#if defined(HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK) && defined(HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET)
static rb_internal_thread_event_hook_t *holder_hook;

/* No thread holds the GVL: every Ruby thread waits (set as one lets it go, cleared as one takes
 * it). Only then may cpu mode's worker sleep long in an idle process: a C call that holds the
 * GVL while it sleeps is followed by Ruby code that takes it from nobody. */
static int gvl_free;

/* ctx: the thread that just took the GVL (RESUMED), or is letting it go (SUSPENDED) */
static void on_gvl_event(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *user)
{
    (void)user;
    /* another Ractor's thread takes and leaves its own Ractor's GVL; it runs no job (sampler.c) */
    const void *vm_thread = data ? hk_stack_walk_thread_of(data->thread) : NULL;
    if (vm_thread && !hk_stack_walk_main_ractor(vm_thread)) return;
    if (ev & RUBY_INTERNAL_THREAD_EVENT_SUSPENDED) {
        __atomic_store_n(&gvl_free, 1, __ATOMIC_SEQ_CST);
        return;
    }
    if (data) __atomic_store_n(&S.holder, vm_thread, __ATOMIC_RELAXED);
    /* the tick's job went to another Ractor's thread: this one runs it, where it went on */
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    if (__atomic_load_n(&S.job_stolen, __ATOMIC_RELAXED) && S.has_job_handle && vm_thread &&
        __atomic_exchange_n(&S.job_stolen, 0, __ATOMIC_RELAXED)) {
        rb_postponed_job_trigger(S.job_handle);
        hk_stack_walk_flag_jobs(vm_thread); /* under M:N Ruby's trigger may flag another context */
    }
#endif
    /* cleared before the worker's flag is read, as the worker sets its flag before reading this
     * (cpu_clock.c): one of the two sees the other, so no idle sleep outlasts this take */
    __atomic_store_n(&gvl_free, 0, __ATOMIC_SEQ_CST);
    if (S.cfg.mode == HK_MODE_CPU) hk_cpu_clock_poke(); /* an idle worker's sleep ends: work may begin */
}

static int gvl_is_free(void) { return __atomic_load_n(&gvl_free, __ATOMIC_SEQ_CST); }
#endif

int (*hk_sampler_gvl_free_fn(void))(void)
{
#if defined(HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK) && defined(HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET)
    return gvl_is_free;
#else
    return NULL;
#endif
}

void hk_sampler_holder_start(void)
{
#if defined(HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK) && defined(HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET)
    /* the calling thread holds the GVL now */
    __atomic_store_n(&S.holder, hk_stack_walk_thread_of(rb_thread_current()), __ATOMIC_RELAXED);
    __atomic_store_n(&gvl_free, 0, __ATOMIC_SEQ_CST);
    holder_hook = rb_internal_thread_add_event_hook(
        on_gvl_event, RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED, NULL);
#endif
}

void hk_sampler_holder_stop(void)
{
#if defined(HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK) && defined(HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET)
    /* once removed, no hook runs (Ruby removes it under the lock its calls take) */
    if (holder_hook) rb_internal_thread_remove_event_hook(holder_hook);
    holder_hook = NULL;
#endif
    __atomic_store_n(&S.holder, NULL, __ATOMIC_RELAXED);
}

void hk_sampler_holder_ended(const void *vm_thread)
{
    const void *was = vm_thread;
    if (vm_thread) __atomic_compare_exchange_n(&S.holder, &was, NULL, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void hk_sampler_threads_clock(void)
{
    for (size_t i = 0; i < S.nthreads; i++) hk_cpu_clock_thread_begin(S.threads[i].tid, S.mn ? -1 : S.threads[i].prev_clock);
}

void hk_sampler_threads_start(void)
{
    if (S.cfg.mode == HK_MODE_CPU) native_scan();
    else native_forget();
    register_existing_threads();
}
