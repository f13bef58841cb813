/* sampler_objects.c — object mode: a sample every `interval` objects Ruby allocates.
 *
 * Ruby's NEWOBJ hook runs inside each allocation, on the allocating thread, with the GVL. It
 * counts down, and when the count ends takes a sample as the postponed job does in the
 * other modes (sampler.c take_sample): the thread's stack into the ring,
 * weighed by the interval, with the object's class as an index into this file's table, which
 * travels beside the label set in the stack key (HK_OBJECT_CONTEXT) and becomes the `class`
 * label when the profile is built. Inside an allocation nothing may allocate a Ruby object,
 * raise or call Ruby: the hook, the capture and the tables use C memory only, and class names
 * are read at build time.
 *
 * The captures are resolved as in the other modes, by a worker thread, which here has no
 * clock to watch: it wakes every RESOLVE_PERIOD_NS, or when the hook finds the ring a quarter
 * full. When the ring is full the hook resolves in place, so no sample is lost at any interval.
 * Ruby's NEWOBJ hooks belong to the Ractor that enables them: other Ractors' objects are not
 * seen (nor counted).
 */
#include "buf.h"
#include "sampler_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <ruby/debug.h>

#include "timer.h"
#include "u64_map.h"

#define RESOLVE_PERIOD_NS 10000000L

static struct {
    VALUE tracepoint;
    long countdown;       /* objects until the next sample */
    uint64_t allocated;   /* objects allocated while profiling */
    uint64_t random;      /* xorshift state for the countdowns */
    int in_hook;          /* a sample is being taken: an allocation within it is not counted */
    int poked;            /* the worker was woken since its last step */
    hk_u64_map index_of;  /* class VALUE -> index in S.classes */
} O;

/* The table index of an object's class: its real class (not a singleton's, nor an included
 * module's), HK_CLASS_INTERNAL for what Ruby code never sees (instruction sequences, method
 * entries, included modules' proxies, hidden objects without a class). */
static uint32_t class_index(VALUE obj)
{
    int type = RB_BUILTIN_TYPE(obj);
    VALUE klass = type == T_IMEMO || type == T_ICLASS || type == T_NODE ? 0 : rb_class_real(RBASIC_CLASS(obj));
    if (!klass) return HK_CLASS_INTERNAL;
    uint32_t index;
    if (hk_u64_map_get(&O.index_of, (uint64_t)klass, &index)) return index;
    if (S.nclasses >= HK_CLASS_OTHERS) return HK_CLASS_OTHERS;
    if (S.nclasses < HK_CLASS_FIRST) S.nclasses = HK_CLASS_FIRST;
    if (hk_array_grow((void **)&S.classes, &S.classes_cap, S.nclasses + 1, sizeof(VALUE)) < 0 ||
        hk_u64_map_put(&O.index_of, (uint64_t)klass, (uint32_t)S.nclasses) < 0)
        return HK_CLASS_OTHERS;
    S.classes[S.nclasses] = klass;
    return (uint32_t)S.nclasses++;
}

/* Objects until the next sample: the interval on average, drawn from interval ± interval / 8.
 * A fixed count would see the same object of a loop that allocates the interval's multiple
 * each time round, and never the others; a small spread breaks that step while keeping a
 * method's count close to its truth (each sample still weighs the interval, so the counts are
 * unbiased, and exact at interval 1). */
static long next_countdown(void)
{
    long n = S.cfg.interval, spread = n >= 8 ? n / 8 : n > 1;
    if (spread == 0) return n;
    O.random ^= O.random << 13;
    O.random ^= O.random >> 7;
    O.random ^= O.random << 17;
    return n - spread + (long)(O.random % (uint64_t)(2 * spread + 1));
}

/* The allocating thread's record (made at its first sample), or NULL when out of memory. */
static hk_thread *allocating_thread(void)
{
    VALUE th = rb_thread_current();
    hk_thread *t = S.last_thread < S.nthreads && S.threads[S.last_thread].thread == th ? &S.threads[S.last_thread]
                                                                                      : hk_sampler_thread_find(th);
    if (!t && !(t = hk_sampler_thread_add(th, -1))) return NULL; /* no clock: its samples weigh objects */
    if (!t->seq) t->seq = ++S.nseq;
    S.last_thread = (size_t)(t - S.threads);
    return t;
}

/* A sample of the object just made: the allocating thread's stack into the ring, weighed by the
 * interval, with the object's class index. */
static void take_object_sample(uint32_t klass)
{
    uint64_t t0 = cost_clock();
    uint64_t *at = hk_ring_reserve(&S.ring, HEAD_WORDS + S.capture_room);
    if (!at) { /* the worker is behind: its work done here, so that no sample is lost */
        pthread_mutex_lock(&hk_resolve_lock);
        hk_resolve_rest_locked();
        pthread_mutex_unlock(&hk_resolve_lock);
        if (!(at = hk_ring_reserve(&S.ring, HEAD_WORDS + S.capture_room))) {
            S.dropped_count++;
            return;
        }
    }
    uint64_t w0 = cost_clock();
    long words = hk_stack_walk_capture(at + HEAD_WORDS, S.capture_room);
    S.capture_time += cost_clock() - w0;
    hk_thread *t = words > 0 ? allocating_thread() : NULL;
    /* an object made with no Ruby frame on the stack (while the VM boots a thread) is in no sample */
    if (!t) {
        S.dropped_count++;
        return;
    }
    if (t->own) return; /* hakari's snapshot writer's objects are not the program's */
    sample_head *h = (sample_head *)at;
    *h = (sample_head){.state = HK_TICK_RUNNING, .seq = t->seq, .weight = S.cfg.interval,
                       .labels = HK_OBJECT_CONTEXT(hk_labels_of(t->thread), klass)};
    if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
    hk_ring_commit(&S.ring, HEAD_WORDS + (size_t)words);
    S.sampling_count++;
    S.sampling_time += cost_clock() - t0;
}

/* RUBY_INTERNAL_EVENT_NEWOBJ, inside the allocation */
static void newobj_hook(VALUE tpval, void *data)
{
    (void)data;
    /* a snapshot's own allocations (S.building) are hakari's, not the program's */
    if (!S.running || S.building || O.in_hook) return;
    O.allocated++;
    if (--O.countdown > 0) return;
    O.countdown = next_countdown();
    O.in_hook = 1;
    take_object_sample(class_index(rb_tracearg_object(rb_tracearg_from_tracepoint(tpval))));
    /* a quarter of the ring waits: the worker starts on it now rather than at its next step */
    if (!O.poked && hk_ring_used(&S.ring) > S.ring.cap / 4) {
        O.poked = 1;
        hk_timer_poke();
    }
    O.in_hook = 0;
}

static long resolve_step(void)
{
    O.poked = 0;
    return RESOLVE_PERIOD_NS;
}

int hk_objects_start(char *err, size_t errlen)
{
    hk_u64_map_clear(&O.index_of);
    S.nclasses = 0;
    O.random = (uint64_t)hk_clock_ns(CLOCK_MONOTONIC) | 1;
    O.countdown = next_countdown();
    O.allocated = 0;
    O.in_hook = O.poked = 0;
    if (hk_timer_start_paced(resolve_step, err, errlen) < 0) return -1;
    if (!O.tracepoint) {
        O.tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, newobj_hook, NULL);
        rb_gc_register_mark_object(O.tracepoint);
    }
    rb_tracepoint_enable(O.tracepoint);
    return 0;
}

void hk_objects_stop(void)
{
    if (O.tracepoint) rb_tracepoint_disable(O.tracepoint);
    hk_timer_stop();
}

void hk_objects_forget(void)
{
    if (O.tracepoint) rb_tracepoint_disable(O.tracepoint);
    hk_timer_forget();
}

uint64_t hk_objects_allocated(void) { return O.allocated; }

void hk_objects_mark(void)
{
    /* pinned: they are the table's keys */
    for (size_t i = HK_CLASS_FIRST; i < S.nclasses; i++) rb_gc_mark(S.classes[i]);
}

size_t hk_objects_memsize(void) { return hk_u64_map_memsize(&O.index_of) + S.classes_cap * sizeof(VALUE); }
