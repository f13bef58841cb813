/* sampler_objects.c — object mode: a sample every `interval` objects Ruby allocates; retained
 * mode: those of them still alive at stop.
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
 *
 * With watch: below 1 the hook is on only in windows, a share of the objects (sampler_watch.c):
 * it asks hk_watch_object whether each object is watched, and a sample's weight is
 * hk_watch_weight's.
 *
 * Retained mode follows each sampled object: its stack is resolved at once, in the hook (no
 * worker), as a stack with no weight, and the object goes into a table, object -> stack id,
 * which Ruby's FREEOBJ hook (inside the GC's sweep) takes it out of. The objects are never
 * marked, or they would never be freed; when compaction moves them, the table follows
 * (hk_objects_compact). At stop a full GC runs, then each object left adds one sample (the
 * interval, in objects) and its bytes (ObjectSpace.memsize_of's) to its stack's row.
 */
#include "buf.h"
#include "sampler_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>
#include <ruby/version.h>

#include "timer.h"
#include "u64_map.h"

#define RESOLVE_PERIOD_NS 10000000L

#ifdef HAVE_RB_OBJ_MEMSIZE_OF
size_t rb_obj_memsize_of(VALUE obj); /* exported by libruby, declared in none of its public headers */
#endif

static struct {
    VALUE tracepoint;
    VALUE free_tracepoint; /* retained mode's FREEOBJ hook */
    long countdown;       /* objects until the next sample */
    uint64_t allocated;   /* objects the hook watched while profiling (all of them at watch 1) */
    uint64_t random;      /* xorshift state for the countdowns */
    int in_hook;          /* a sample is being taken: an allocation within it is not counted */
    int poked;            /* the worker was woken since its last step */
    hk_u64_map index_of;  /* class VALUE -> index in S.classes */
    hk_u64_map live;      /* retained mode: a sampled object still alive -> its stack id */
    uint64_t untracked;   /* retained mode: sampled objects the table had no room for, or let go */
    int let_go;           /* retained mode: a Ractor started, objects are followed no more */
} O;

/* The table index of an object's class: its real class (not a singleton's, nor an included
 * module's), HK_CLASS_INTERNAL for what Ruby code never sees (instruction sequences, method
 * entries, included modules' proxies, hidden objects without a class). */
static uint32_t class_index(VALUE obj)
{
    VALUE klass = hk_new_object_class(obj);
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

/* Objects until the next sample: the interval on average, drawn from interval ± interval / 4.
 * A fixed count would see the same object of a loop that allocates the interval's multiple
 * each time round, and never the others; the spread moves the next sample's place in such a
 * loop by about a seventh of the interval, so that after a few dozen samples it has seen every
 * place, while a method's count stays within about 0.15 / sqrt(its samples) of its truth (each
 * sample weighs the interval: counts are unbiased, and exact at interval 1). */
static long next_countdown(void)
{
    long n = hk_watch_step(), spread = n >= 4 ? n / 4 : n > 1;
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
    hk_thread *t = hk_sampler_thread_of(th);
    if (!t && !(t = hk_sampler_thread_add(th, -1))) return NULL; /* no clock: its samples weigh objects */
    if (!t->seq) t->seq = hk_sampler_next_seq();
    S.last_thread = (size_t)(t - S.threads);
    return t;
}

/* A sample of the object just made: the allocating thread's stack into the ring, weighed by the
 * interval, with the object's class index and its slot's bytes (0 in retained mode, which
 * measures the objects left at stop instead). */
static void take_object_sample(uint32_t klass, uint32_t bytes)
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
    *h = (sample_head){.state = HK_TICK_RUNNING, .seq = t->seq, .weight = hk_watch_weight(hk_watch_step()),
                       .labels = HK_OBJECT_CONTEXT(hk_labels_of(t->thread), klass), .bytes = bytes};
    if (S.synth) {
        /* Made inside a specialized instruction's method (String#+ as opt_plus, which pushes
         * no frame): the leaf Ruby frame is running it, and the sample gets that method's
         * frame, as in the time modes. Read here, directly: the frame is this thread's own. */
        const void *slot = hk_stack_walk_leaf_slot();
        h->leaf.slot = slot;
        h->leaf.cfp = slot ? *(const uintptr_t *)slot : 0;
        h->leaf.synth = hk_synth_read_here(h->leaf.cfp, &h->leaf.iseq);
    }
    if (!S.cfg.aggregate) h->time_ns = hk_clock_ns(CLOCK_REALTIME);
    if (S.cfg.mode == HK_MODE_RETAINED) h->state |= HK_HEAD_STACK_ONLY; /* its weight comes at stop */
    hk_ring_commit(&S.ring, HEAD_WORDS + (size_t)words);
    S.sampling_count++;
    S.sampling_time += cost_clock() - t0;
}

/* Retained mode: the object just sampled, followed from now on under the stack its sample
 * resolves to here (there is no worker: the ring holds this sample alone). */
static void follow(VALUE obj)
{
    uint64_t t0 = cost_clock();
    S.resolved_stack = -1;
    pthread_mutex_lock(&hk_resolve_lock);
    hk_resolve_rest_locked();
    pthread_mutex_unlock(&hk_resolve_lock);
    /* a stack that could not be resolved is counted there (unresolved_count) */
    if (S.resolved_stack >= 0 && (O.let_go || hk_u64_map_put(&O.live, (uint64_t)obj, (uint32_t)S.resolved_stack) < 0))
        O.untracked++;
    S.sampling_time += cost_clock() - t0;
}

/* RUBY_INTERNAL_EVENT_FREEOBJ, inside the GC's sweep: a followed object is gone */
static void freeobj_hook(VALUE tpval, void *data)
{
    (void)data;
    if (O.live.count) hk_u64_map_del(&O.live, (uint64_t)rb_tracearg_object(rb_tracearg_from_tracepoint(tpval)));
}

/* RUBY_INTERNAL_EVENT_NEWOBJ, inside the allocation */
static void newobj_hook(VALUE tpval, void *data)
{
    (void)data;
    /* a snapshot's own allocations (S.building) are hakari's, not the program's */
    if (!S.running || S.building || O.in_hook) return;
    if (!hk_watch_object()) return; /* made while its window waits to start or to end */
    O.allocated++;
    if (--O.countdown > 0) return;
    O.countdown = next_countdown();
    O.in_hook = 1;
    VALUE obj = rb_tracearg_object(rb_tracearg_from_tracepoint(tpval));
    uint64_t sampled = S.sampling_count;
    take_object_sample(class_index(obj), S.cfg.mode == HK_MODE_RETAINED ? 0 : hk_heap_slot_bytes(obj));
    if (S.cfg.mode == HK_MODE_RETAINED) {
        if (S.sampling_count != sampled) follow(obj);
    } else if (!O.poked && hk_ring_used(&S.ring) > S.ring.cap / 4) {
        /* a quarter of the ring waits: the worker starts on it now rather than at its next step */
        O.poked = 1;
        hk_timer_poke();
    }
    O.in_hook = 0;
}

/* ctx: the worker: its step while watch windows turn, else a rest till the next poke */
static long resolve_step(void)
{
    O.poked = 0;
    long wait = hk_watch_worker_step();
    return wait >= 0 ? wait : RESOLVE_PERIOD_NS;
}

int hk_objects_start(char *err, size_t errlen)
{
    hk_u64_map_clear(&O.index_of);
    S.nclasses = 0;
    if (!O.tracepoint) {
        O.tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, newobj_hook, NULL);
        rb_gc_register_mark_object(O.tracepoint);
        O.free_tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_FREEOBJ, freeobj_hook, NULL);
        rb_gc_register_mark_object(O.free_tracepoint);
    }
    /* the windows first: the countdown and the worker's first step follow them */
    hk_watch_start(O.tracepoint);
    O.random = (uint64_t)hk_clock_ns(CLOCK_MONOTONIC) | 1;
    O.countdown = next_countdown();
    O.allocated = 0;
    O.in_hook = O.poked = 0;
    O.untracked = 0;
    O.let_go = 0;
    hk_u64_map_clear(&O.live);
    int retained = S.cfg.mode == HK_MODE_RETAINED;
    if (!retained && hk_timer_start_paced(resolve_step, err, errlen) < 0) return -1;
    if (retained) rb_tracepoint_enable(O.free_tracepoint);
    rb_tracepoint_enable(O.tracepoint);
    return 0;
}

void hk_objects_stop(void)
{
    hk_watch_stop();
    if (S.cfg.mode != HK_MODE_RETAINED) hk_timer_stop();
}

void hk_objects_forget(void)
{
    hk_watch_forget();
    if (O.free_tracepoint) rb_tracepoint_disable(O.free_tracepoint);
    hk_u64_map_clear(&O.live);
    if (S.cfg.mode != HK_MODE_RETAINED) hk_timer_forget();
}

/* bytes of a live object as ObjectSpace.memsize_of counts them, or 0 where Ruby does not say */
static int64_t memsize_of(VALUE obj)
{
#ifdef HAVE_RB_OBJ_MEMSIZE_OF
    return (int64_t)rb_obj_memsize_of(obj);
#else
    (void)obj;
    return 0;
#endif
}

/* A Ractor other than the main one is starting (n: 1), or n run already as the profile starts.
 * Every mode counts them (the job then checks where it runs: sampler.c). Retained mode: Ruby
 * runs a FREEOBJ hook only for the Ractor that enabled it, and a GC another Ractor's thread
 * runs frees the main Ractor's objects too, so the table could keep addresses of freed objects,
 * whose slots may be reused or returned: every object followed is let go (counted as dropped).
 * And Ruby's allocation hooks
 * are not safe beside Ractors: 3.1 crashes in a new Ractor's first allocation while a NEWOBJ hook
 * is on, and 3.4 now and then marks a half-made object in a GC a Ractor's thread runs (40
 * Ractors allocating strings: 3 runs in 100 under hakari's object mode, 2 in 100 under Ruby's own
 * ObjectSpace.trace_object_allocations, none without a hook). So both modes stop sampling, their
 * hooks off for the rest of the profile, as the first Ractor starts or at start when one runs. */
int hk_sampler_ractor_starting(long n)
{
    if (S.running && n > 0) S.ractors_started += (uint64_t)n;
    if (!HK_MODE_COUNTS_OBJECTS(S.cfg.mode) || !S.running || O.let_go || n <= 0) return HK_RACTOR_NOTHING;
    O.let_go = 1;
    if (S.cfg.mode == HK_MODE_RETAINED) {
        O.untracked += O.live.count;
        hk_u64_map_clear(&O.live);
    }
    hk_watch_stop();
    rb_tracepoint_disable(O.free_tracepoint);
    return S.cfg.mode == HK_MODE_RETAINED ? HK_RACTOR_LET_GO : HK_RACTOR_HOOKS_OFF;
}

void hk_objects_retained_tally(void)
{
    /* the objects freed by this GC leave the table through the FREEOBJ hook, still enabled;
     * a program that disabled the GC gets it for this one collection (Ruby skips a requested
     * one while disabled, and every dead object would count as retained) */
    VALUE disabled = rb_gc_enable();
    rb_gc_start();
    if (RTEST(disabled)) rb_gc_disable();
    rb_tracepoint_disable(O.free_tracepoint);
    size_t rows = hk_intern_count(&S.stacks);
    if (hk_sampler_grow_rows(rows) < 0) {
        S.dropped_count += O.live.count;
        hk_u64_map_clear(&O.live);
        return;
    }
    /* the rows hold nothing yet (retained samples carry no weight): each object left adds its
     * count, its weight in objects and its bytes; nothing here can run the GC */
    for (size_t i = 0; i < O.live.cap; i++) {
        if (!O.live.keys[i]) continue;
        uint32_t stack = O.live.vals[i];
        if (stack >= S.agg_cap || stack >= rows) continue;
        S.agg_rows[stack].count++;
        S.agg_rows[stack].weight += S.cfg.interval;
        S.agg_rows[stack].bytes += memsize_of((VALUE)O.live.keys[i]) * S.cfg.interval;
        S.sample_count++;
    }
    S.dropped_count += O.untracked;
    hk_u64_map_clear(&O.live);
}

void hk_objects_compact(void)
{
    if (!O.live.count) return;
    hk_u64_map moved;
    hk_u64_map_init(&moved);
    if (hk_u64_map_reserve(&moved, O.live.count) < 0) {
        /* out of memory: the old addresses must not stay, their slots will be reused or freed */
        O.untracked += O.live.count;
        hk_u64_map_clear(&O.live);
        return;
    }
    for (size_t i = 0; i < O.live.cap; i++)
        if (O.live.keys[i]) hk_u64_map_put(&moved, (uint64_t)rb_gc_location((VALUE)O.live.keys[i]), O.live.vals[i]);
    hk_u64_map_free(&O.live);
    O.live = moved;
}

uint64_t hk_objects_allocated(void) { return hk_watch_made(O.allocated); }

uint64_t hk_objects_watched(void) { return O.allocated; }

void hk_objects_mark(void)
{
    /* pinned: they are the table's keys */
    for (size_t i = HK_CLASS_FIRST; i < S.nclasses; i++) rb_gc_mark(S.classes[i]);
}

size_t hk_objects_memsize(void)
{
    return hk_u64_map_memsize(&O.index_of) + hk_u64_map_memsize(&O.live) + S.classes_cap * sizeof(VALUE);
}
