/* sampler_mn.c — cpu mode under M:N threads: each Ruby thread's CPU clock,
 * made of its stretches on native threads (sampler_int.h).
 *
 * Where Ruby runs several Ruby threads on one native thread (RUBY_MN_THREADS=1
 * on 3.3 and later), a native thread's CPU clock holds all of theirs: read as
 * one Ruby thread's, it gave each the CPU of every thread that shared its
 * native thread (eight threads reported 7.9 times the CPU the process used).
 * Here a native thread's CPU belongs to the Ruby thread that holds it: from
 * the moment that thread takes the GVL there (RUBY_INTERNAL_THREAD_EVENT_RESUMED,
 * which runs on that native thread, naming the Ruby thread) to the moment it
 * lets it go (SUSPENDED, the same), and through the time without the GVL
 * after which it takes the GVL back on the same native thread: a C call
 * without the GVL (a thread cannot leave its native thread inside one), a
 * wait for the GVL. When another Ruby thread takes the GVL there next, the
 * native thread's CPU in between was Ruby's switching from one thread to the
 * other, and belongs to neither (the profile has it in [native threads]):
 * counted for the first, it gave eight threads that sleep 150 times each
 * 3.9 % more CPU than they used (test/mn_threads_test.rb). A Ruby thread's
 * clock is the sum of its closed stretches and its open one: read through the
 * native clock it runs on, now or at a tick the worker read.
 *
 * Data: a record per Ruby thread (Ruby's thread-specific slot), a table of
 * the native threads seen (their clocks, whose stretch each holds and whose
 * ended there last), all under one mutex: the hook runs without the GVL, on
 * any native thread; the job and the thread hooks read with it. A record goes
 * at its thread's end.
 */
#include "sampler_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ruby/thread.h>

#include "cpu_events.h"

#if defined(HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK) && defined(HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET)
#define HK_MN 1
#endif

#ifdef HK_MN
#define NATIVE_THREADS 256 /* past that, a native thread's CPU is in no Ruby thread's clock */

typedef struct mn_record {
    int64_t acc;   /* CPU of its closed stretches (ns) */
    int nt;        /* the native thread of its open stretch (index in nts), -1: none */
    int64_t start; /* that native thread's clock where the stretch began */
} mn_record;

static struct {
    int tid;           /* 0: a free entry */
    clockid_t clock;   /* its CPU clock, readable from any thread while it lives */
    int64_t first;     /* that clock when the entry was made: where its CPU begins to count */
    mn_record *owner;  /* whose stretch it holds, or NULL */
    mn_record *left;   /* the record whose stretch ended here last (SUSPENDED), or NULL */
    int64_t left_at;   /* the clock then */
} nts[NATIVE_THREADS];
static int nnts;
static _Thread_local int my_nt = -1; /* this native thread's entry */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rb_internal_thread_specific_key_t key;
static int key_made;
static rb_internal_thread_event_hook_t *hook;
/* the worker's view of the native threads (hk_mn_others_cpu): each entry's clock at its
 * previous look, and the sum of their CPU */
static struct {
    clockid_t seen[NATIVE_THREADS];
    int64_t last[NATIVE_THREADS];
    int64_t total;
} looked;
/* looked's readings at the latest tick, for its jobs: written by the worker under a sequence
 * lock (odd while it writes), read by the job; n 0 when that tick's look took none */
static struct {
    _Alignas(64) volatile uint32_t seq;
    int n;
    clockid_t clock[NATIVE_THREADS];
    int64_t value[NATIVE_THREADS];
} at_tick;

/* The table empties at start and stop. Native threads keep their entry's
 * index in a thread-local from one profile to the next: the entry's tid,
 * cleared here, tells them it is no longer theirs. */
static void forget_native_threads(void)
{
    memset(nts, 0, sizeof(nts));
    memset(&looked, 0, sizeof(looked));
    at_tick.n = 0;
    nnts = 0;
    my_nt = -1;
}

/* a native thread's clock now, or -1 when it ended */
static int64_t nt_clock(int i) { return hk_clock_ns(nts[i].clock); }

/* The calling native thread's entry, registered at its first use: a free
 * entry, or one of a native thread that ended (its clock reads no more).
 * -1 when the table is full. Under the lock. */
static int this_nt(void)
{
    if (my_nt >= 0 && nts[my_nt].tid == hk_gettid()) return my_nt;
    int tid = hk_gettid(), at = -1;
    for (int i = 0; i < nnts && at < 0; i++)
        if (!nts[i].tid || (!nts[i].owner && nt_clock(i) < 0)) at = i;
    if (at < 0 && nnts < NATIVE_THREADS) at = nnts++;
    if (at < 0) return -1;
    nts[at].tid = tid;
    nts[at].clock = hk_thread_cpu_clock(tid);
    nts[at].first = hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    nts[at].owner = NULL;
    nts[at].left = NULL;
    return my_nt = at;
}

/* r's open stretch ends where its native thread's clock reads now. Under the lock. */
static void close_stretch(mn_record *r, int64_t now)
{
    if (r->nt < 0) return;
    if (now > r->start) r->acc += now - r->start;
    if (nts[r->nt].owner == r) nts[r->nt].owner = NULL;
    r->nt = -1;
}

/* r's stretch on the calling native thread begins now (ending the one it held elsewhere, and
 * the stretch of the thread that last ran here). When r's previous stretch ended here and no
 * other began since, the time between is r's too. Under the lock. */
static void open_stretch(mn_record *r)
{
    int me = this_nt();
    if (r->nt >= 0 && r->nt != me) close_stretch(r, nt_clock(r->nt));
    if (me < 0 || r->nt == me) return;
    int64_t now = hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (nts[me].owner) close_stretch(nts[me].owner, now);
    r->nt = me;
    r->start = nts[me].left == r && nts[me].left_at <= now ? nts[me].left_at : now;
    nts[me].left = NULL;
    nts[me].owner = r;
}

/* r lets the GVL go on the calling native thread: its stretch there ends now. Under the lock. */
static void end_stretch(mn_record *r)
{
    int me = this_nt();
    if (me < 0 || r->nt != me) return;
    int64_t now = hk_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    close_stretch(r, now);
    nts[me].left = r;
    nts[me].left_at = now;
}

/* th's record, made when missing (NULL: out of memory). Under the lock. */
static mn_record *record_of(VALUE th)
{
    mn_record *r = rb_internal_thread_specific_get(th, key);
    if (r || !(r = calloc(1, sizeof(*r)))) return r;
    r->nt = -1;
    rb_internal_thread_specific_set(th, key, r);
    return r;
}

/* ctx: the native thread that runs the Ruby thread now taking (RESUMED) or letting go
 * (SUSPENDED) the GVL, without it */
static void on_event(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *user)
{
    (void)user;
    if (!data) return;
    pthread_mutex_lock(&lock);
    mn_record *r = record_of(data->thread);
    if (r && (ev & RUBY_INTERNAL_THREAD_EVENT_RESUMED)) open_stretch(r);
    else if (r) end_stretch(r);
    pthread_mutex_unlock(&lock);
}

/* th's clock now, under the lock */
static int64_t clock_now(const mn_record *r)
{
    int64_t open = 0;
    if (r->nt >= 0) {
        int64_t v = nt_clock(r->nt);
        if (v > r->start) open = v - r->start;
    }
    return r->acc + open;
}
#endif

int hk_mn_start(void)
{
#ifdef HK_MN
    const char *mn = getenv("RUBY_MN_THREADS"); /* read by Ruby at boot, the same way */
    if (S.cfg.mode != HK_MODE_CPU || !mn || atoi(mn) <= 0) return 0;
    if (!key_made) { /* one of Ruby's 8 slots, at the first such start */
        key = rb_internal_thread_specific_key_create();
        key_made = 1;
    }
    forget_native_threads();
    hook = rb_internal_thread_add_event_hook(
        on_event, RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED, NULL);
    /* the calling thread holds the GVL: its stretch begins now */
    pthread_mutex_lock(&lock);
    mn_record *r = record_of(rb_thread_current());
    if (r) open_stretch(r);
    pthread_mutex_unlock(&lock);
    return hook != NULL;
#else
    return 0;
#endif
}

void hk_mn_stop(void)
{
#ifdef HK_MN
    if (!hook) return;
    rb_internal_thread_remove_event_hook(hook); /* no hook runs once it returns */
    hook = NULL;
    for (size_t i = 0; i < S.nthreads; i++) hk_mn_thread_end(S.threads[i].thread);
    /* threads the sampler never saw keep a record each: found through the live threads */
    VALUE list = rb_funcall(rb_cThread, rb_intern("list"), 0);
    for (long i = 0; i < RARRAY_LEN(list); i++) hk_mn_thread_end(RARRAY_AREF(list, i));
    forget_native_threads();
#endif
}

void hk_mn_forget(void)
{
#ifdef HK_MN
    if (hook) rb_internal_thread_remove_event_hook(hook);
    hook = NULL;
    forget_native_threads();
    pthread_mutex_init(&lock, NULL); /* another thread may have held it at the fork */
#endif
}

int64_t hk_mn_cpu_now(VALUE th)
{
#ifdef HK_MN
    pthread_mutex_lock(&lock);
    const mn_record *r = rb_internal_thread_specific_get(th, key);
    int64_t v = r ? clock_now(r) : 0; /* no record: it has not run since start */
    pthread_mutex_unlock(&lock);
    return v;
#else
    (void)th;
    return -1;
#endif
}

#ifdef HK_MN
/* r's clock when native clock c read v, if r's open stretch is on that native thread and began
 * before; else -1. Under the lock. */
static int64_t clock_at(const mn_record *r, clockid_t c, int64_t v)
{
    return r && r->nt >= 0 && nts[r->nt].clock == c && v >= r->start ? r->acc + v - r->start : -1;
}
#endif

int64_t hk_mn_cpu_at(VALUE th, clockid_t c, int64_t v)
{
#ifdef HK_MN
    pthread_mutex_lock(&lock);
    int64_t at = clock_at(rb_internal_thread_specific_get(th, key), c, v);
    pthread_mutex_unlock(&lock);
    return at;
#else
    (void)th, (void)c, (void)v;
    return -1;
#endif
}

/* The paced worker learns that Ruby code runs elsewhere than on the native thread it watches
 * from this sum: a Ruby thread that blocks without the GVL keeps its native thread (sleeping)
 * while the others run on native threads no thread's begin named, whose CPU was seen only through
 * the process clock, late, or not at all (a bench of three threads calling C sleeps that release
 * the GVL had a third of its ticks). */
int64_t hk_mn_others_cpu(clockid_t watched)
{
#ifdef HK_MN
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nnts; i++) {
        clockid_t c = nts[i].tid ? nts[i].clock : 0;
        int64_t v = c ? hk_clock_ns(c) : -1;
        if (v < 0) {
            looked.seen[i] = 0;
            continue;
        }
        if (looked.seen[i] != c) { /* an entry new since the previous look: from its making */
            looked.seen[i] = c;
            looked.last[i] = nts[i].first >= 0 && nts[i].first <= v ? nts[i].first : v;
        }
        if (c != watched && v > looked.last[i]) looked.total += v - looked.last[i];
        looked.last[i] = v;
    }
    int64_t total = looked.total;
    pthread_mutex_unlock(&lock);
    return total;
#else
    (void)watched;
    return 0;
#endif
}

void hk_mn_others_at_tick(int fresh)
{
#ifdef HK_MN
    __atomic_add_fetch(&at_tick.seq, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    int n = 0;
    for (int i = 0; fresh && i < NATIVE_THREADS; i++)
        if (looked.seen[i]) {
            at_tick.clock[n] = looked.seen[i];
            at_tick.value[n++] = looked.last[i];
        }
    at_tick.n = n;
    __atomic_add_fetch(&at_tick.seq, 1, __ATOMIC_RELEASE);
#else
    (void)fresh;
#endif
}

#ifdef HK_MN
/* the tick's reading of clock c, or -1 */
static int64_t reading_at_tick(clockid_t c)
{
    for (;;) {
        uint32_t s1 = __atomic_load_n(&at_tick.seq, __ATOMIC_ACQUIRE);
        int64_t v = -1;
        for (int i = 0; i < at_tick.n && i < NATIVE_THREADS && v < 0; i++)
            if (at_tick.clock[i] == c) v = at_tick.value[i];
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(s1 & 1) && s1 == __atomic_load_n(&at_tick.seq, __ATOMIC_RELAXED)) return v;
    }
}
#endif

int64_t hk_mn_cpu_at_tick(VALUE th, int64_t *native)
{
#ifdef HK_MN
    pthread_mutex_lock(&lock);
    const mn_record *r = rb_internal_thread_specific_get(th, key);
    int64_t v = r && r->nt >= 0 ? reading_at_tick(nts[r->nt].clock) : -1;
    int64_t at = v >= 0 ? clock_at(r, nts[r->nt].clock, v) : -1;
    pthread_mutex_unlock(&lock);
    if (at >= 0) *native = v;
    return at;
#else
    (void)th, (void)native;
    return -1;
#endif
}

clockid_t hk_mn_native_clock(VALUE th)
{
#ifdef HK_MN
    pthread_mutex_lock(&lock);
    const mn_record *r = rb_internal_thread_specific_get(th, key);
    clockid_t c = r && r->nt >= 0 ? nts[r->nt].clock : 0;
    pthread_mutex_unlock(&lock);
    return c;
#else
    (void)th;
    return 0;
#endif
}

void hk_mn_thread_end(VALUE th)
{
#ifdef HK_MN
    pthread_mutex_lock(&lock);
    mn_record *r = key_made ? rb_internal_thread_specific_get(th, key) : NULL;
    if (r) {
        if (r->nt >= 0 && nts[r->nt].owner == r) nts[r->nt].owner = NULL;
        for (int i = 0; i < nnts; i++)
            if (nts[i].left == r) nts[i].left = NULL;
        rb_internal_thread_specific_set(th, key, NULL);
        free(r);
    }
    pthread_mutex_unlock(&lock);
#else
    (void)th;
#endif
}
