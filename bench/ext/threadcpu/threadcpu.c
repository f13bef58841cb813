/*
 * ThreadCPU: the CPU each Ruby thread used itself, for bench/accuracy.rb's truth under M:N
 * threads (RUBY_MN_THREADS=1, Ruby 3.3+).
 *
 *   ThreadCPU.available?   false before Ruby 3.3 (no thread-specific slots)
 *   ThreadCPU.start        from here on, follows every thread's stretches on native threads
 *   ThreadCPU.now_ns       the calling thread's own CPU since it was first followed
 *   ThreadCPU.total_ns     the CPU of every thread followed, the ended ones whole, the calling
 *                          one until now (others still running: until their last stretch ended)
 *
 * Under M:N threads one native thread runs several Ruby threads, one after another, so its CPU
 * clock read around a call holds the CPU of the threads that ran between the two reads. Here a
 * Ruby thread's CPU is the sum of its stretches: from the moment it takes the GVL on a native
 * thread (RUBY_INTERNAL_THREAD_EVENT_RESUMED, which runs there) to the moment it lets it go there
 * (SUSPENDED), each read on that native thread's clock; and the time between letting it go and
 * taking it back on the same native thread with no other Ruby thread taking it there meanwhile
 * (a C call without the GVL, a wait for the GVL: the thread held its native thread all along).
 * The time between one thread letting the GVL go and another taking it on the same native
 * thread is Ruby's switching, no thread's. Every stretch is counted, none sampled: a truth for
 * a sampler to be measured against.
 *
 * Each thread's record is written only by that thread's own events and calls, so it needs no
 * lock; total_ns reads the others' finished stretches as they stand. Records are never freed
 * (a bench makes a few dozen threads): a list of them, added to under a mutex, serves total_ns.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <ruby.h>
#include <ruby/thread.h>

#ifdef HAVE_RB_INTERNAL_THREAD_SPECIFIC_GET
typedef struct stretches {
    int64_t closed; /* ns of the finished stretches */
    int64_t since;  /* the native clock where the open one began; -1: none open */
    struct stretches *next; /* every record made, newest first */
} stretches;

static stretches *records;
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;

static rb_internal_thread_specific_key_t key;
static rb_internal_thread_event_hook_t *hook;

static int64_t native_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static stretches *record_of(VALUE thread)
{
    stretches *s = rb_internal_thread_specific_get(thread, key);
    if (s) return s;
    s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->since = -1;
    rb_internal_thread_specific_set(thread, key, s);
    pthread_mutex_lock(&records_lock);
    s->next = records;
    __atomic_store_n(&records, s, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&records_lock);
    return s;
}

/* the events run on the native thread they are about: the record whose stretch ended on this
 * native thread last, and where */
static _Thread_local stretches *left;
static _Thread_local int64_t left_at;

static void on_event(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *user)
{
    stretches *s = record_of(data->thread);
    if (!s) return;
    int64_t now = native_cpu_ns();
    if (ev & RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
        s->since = left == s && left_at <= now ? left_at : now;
        left = NULL;
    } else if (s->since >= 0) {
        __atomic_store_n(&s->closed, s->closed + now - s->since, __ATOMIC_RELAXED);
        s->since = -1;
        left = s;
        left_at = now;
    }
}

static VALUE start(VALUE mod)
{
    if (hook) return Qnil;
    key = rb_internal_thread_specific_key_create();
    hook = rb_internal_thread_add_event_hook(on_event, RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED, NULL);
    return Qnil;
}

/* The calling thread runs: its stretch is open (a thread first seen here opens it now). */
static VALUE now_ns(VALUE mod)
{
    stretches *s = hook ? record_of(rb_thread_current()) : NULL;
    if (!s) rb_raise(rb_eRuntimeError, "ThreadCPU.start first (or out of memory)");
    int64_t now = native_cpu_ns();
    if (s->since < 0) s->since = now;
    return LL2NUM(s->closed + now - s->since);
}

static VALUE total_ns(VALUE mod)
{
    int64_t sum = NUM2LL(now_ns(mod)) - record_of(rb_thread_current())->closed;
    for (stretches *s = __atomic_load_n(&records, __ATOMIC_ACQUIRE); s; s = s->next)
        sum += __atomic_load_n(&s->closed, __ATOMIC_RELAXED);
    return LL2NUM(sum);
}

static VALUE available(VALUE mod) { return Qtrue; }
#else
static VALUE total_ns(VALUE mod) { rb_raise(rb_eNotImpError, "ThreadCPU needs Ruby 3.3 or later"); }
static VALUE start(VALUE mod) { rb_raise(rb_eNotImpError, "ThreadCPU needs Ruby 3.3 or later"); }
static VALUE now_ns(VALUE mod) { rb_raise(rb_eNotImpError, "ThreadCPU needs Ruby 3.3 or later"); }
static VALUE available(VALUE mod) { return Qfalse; }
#endif

void Init_threadcpu(void)
{
    VALUE m = rb_define_module("ThreadCPU");
    rb_define_module_function(m, "available?", available, 0);
    rb_define_module_function(m, "start", start, 0);
    rb_define_module_function(m, "now_ns", now_ns, 0);
    rb_define_module_function(m, "total_ns", total_ns, 0);
}
