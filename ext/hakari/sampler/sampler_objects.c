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
 * Watch windows (object mode, watch: below 1): Ruby sends every allocation down its slow path
 * while any NEWOBJ hook is on, which costs an allocation-heavy program 15-25 % however seldom
 * the hook samples. So the hook is on only in windows of WATCH_CYCLE_OBJECTS * watch objects;
 * between them it is off for about the cycle's rest. Windows are measured in objects, not time
 * (the hook slows allocation, so a window in time would see fewer objects of a fast allocator
 * than of a slow one): the hook counts a window's objects and asks a postponed job to turn it
 * off at the last one (the hook can only change with the GVL); while it is off, the worker has
 * the job read Ruby's count of allocated objects (GC.stat's total_allocated_objects) when the
 * stretch should be nearly over, at the rate objects came, and the job turns the hook on for
 * the stretch's last objects, which the hook counts, so that every stretch has its drawn length.
 * In a window the hook samples every interval * watch objects, and each sample stands for its
 * share of the window and of the stretch before it: the stretch's objects are taken to be made
 * where the window's are, as they are within a phase of the program; a phase shorter than a
 * few cycles is blurred with its neighbours, and so is a window whose job waits for a thread
 * to start or end. The counts add up to Ruby's (but for the stretch after the last window)
 * whatever the program's rate of allocation.
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
#include <ruby/ractor.h>
#include <ruby/version.h>

#include "timer.h"
#include "u64_map.h"

#define RESOLVE_PERIOD_NS 10000000L
#define WATCH_CYCLE_OBJECTS 1000 /* a window and the stretch before it, at least */
/* While the hook is off, Ruby's count is read when the stretch should be over at the rate
 * allocation ran at, within these bounds */
#define WATCH_CHECK_MIN_NS 20000L
#define WATCH_CHECK_MAX_NS 200000L
#define WATCH_WINDOW_STEP_NS 100000L
#define WATCH_APPROACH_NS 50000L  /* the hook goes on this long before a stretch's end, by the rate */

#ifdef HAVE_RB_OBJ_MEMSIZE_OF
size_t rb_obj_memsize_of(VALUE obj); /* exported by libruby, declared in none of its public headers */
#endif

static struct {
    VALUE tracepoint;
    VALUE free_tracepoint; /* retained mode's FREEOBJ hook */
    long countdown;       /* objects until the next sample */
    uint64_t allocated;   /* objects allocated while profiling */
    uint64_t random;      /* xorshift state for the countdowns */
    int in_hook;          /* a sample is being taken: an allocation within it is not counted */
    int poked;            /* the worker was woken since its last step */
    hk_u64_map index_of;  /* class VALUE -> index in S.classes */
    hk_u64_map live;      /* retained mode: a sampled object still alive -> its stack id */
    uint64_t untracked;   /* retained mode: sampled objects the table had no room for, or let go */
    int let_go;           /* retained mode: a Ractor started, objects are followed no more */
    int hooks_off;        /* Ruby 3.1 with a Ractor started: the hook stays off */
    /* watch windows (above); window is 0 when the hook watches all the time */
    long window;          /* objects the hook watches in a window */
    long window_left;     /* of them, still to come in this window (0: it is over) */
    long approach;        /* objects the hook counts before its window starts: the stretch's last */
    uint64_t over;        /* objects the hook saw after its window was over, before it went off */
    volatile int watching; /* the hook is on: the job's, with the GVL; read by the worker */
    uint64_t gc_off;      /* Ruby's count when the hook went off */
    int64_t t_off;        /* and the time then (monotonic ns) */
    double ns_per_object; /* how fast objects came while the hook was off, last measured */
    volatile int64_t check_at; /* when the worker has the job read the count next */
    long off_target;      /* objects to be made before the next window (drawn at each window's end) */
    double window_weight; /* objects each watched object stands for, in this window */
    double weight_carry;  /* the fraction the samples' integer weights left over */
    uint64_t gc_base;     /* Ruby's count of allocated objects at start */
    uint64_t gc_own;      /* of those made since, hakari's own (while building snapshots) */
    uint64_t gc_end;      /* that count at the end of the profile's time (0: still running) */
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
    long n = hk_objects_step(), spread = n >= 4 ? n / 4 : n > 1;
    if (spread == 0) return n;
    O.random ^= O.random << 13;
    O.random ^= O.random >> 7;
    O.random ^= O.random << 17;
    return n - spread + (long)(O.random % (uint64_t)(2 * spread + 1));
}

/* Ruby's count of the objects it has allocated (every Ractor's) */
static uint64_t gc_allocated(void)
{
    static VALUE key;
    if (!key) key = ID2SYM(rb_intern("total_allocated_objects")); /* an interned Symbol: never freed */
    return (uint64_t)rb_gc_stat(key);
}

/* The current Ractor is the main one: another's thread would turn its own Ractor's hook. */
static int in_main_ractor(void) { return rb_ractor_stdout() == rb_stdout; }

static void watch_job(void *arg);
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
static rb_postponed_job_handle_t watch_handle;
#endif

/* ctx: any thread (the hook, the worker): the job is to run at the next interrupt check */
static void trigger_watch_job(void)
{
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    rb_postponed_job_trigger(watch_handle);
#else
    rb_postponed_job_register_one(0, watch_job, NULL);
#endif
}

/* ctx: the worker. Ruby flags a context of its choosing, which may be a thread asleep in a
 * join while another runs (3.3+): the thread that holds the GVL is flagged too, as at ticks. */
static void trigger_from_worker(void)
{
    trigger_watch_job();
    const void *holder = __atomic_load_n(&S.holder, __ATOMIC_RELAXED);
    if (holder) hk_stack_walk_flag_jobs(holder);
}

static uint64_t next_random(void)
{
    O.random ^= O.random << 13;
    O.random ^= O.random >> 7;
    O.random ^= O.random << 17;
    return O.random;
}

/* ctx: GVL. The worker is to have the count read again when `left` more objects should have
 * been made, at the last measured rate. */
static void schedule_check(int64_t now, uint64_t left, double ns_per_object)
{
    double eta = ns_per_object > 0 ? ns_per_object * (double)left : (double)WATCH_CHECK_MIN_NS;
    long wait = eta < WATCH_CHECK_MIN_NS ? WATCH_CHECK_MIN_NS : eta > WATCH_CHECK_MAX_NS ? WATCH_CHECK_MAX_NS : (long)eta;
    O.check_at = now + wait;
    hk_timer_poke();
}

/* ctx: GVL (postponed job). A window that is over ends; a stretch long enough ends. */
static void watch_job(void *arg)
{
    (void)arg;
    if (!S.running || S.ended || !O.window || O.hooks_off || !O.tracepoint) return;
    if (S.ractors_started && !in_main_ractor()) return; /* another Ractor's thread would turn its own hook */
    if (O.watching) {
        if (O.window_left > 0 || O.approach > 0) return;
        rb_tracepoint_disable(O.tracepoint);
        O.watching = 0;
        O.gc_off = gc_allocated();
        /* the stretch: the cycle's rest, give or take a quarter, so that windows fall at no
         * fixed place in a program's own repeated work */
        long rest = WATCH_CYCLE_OBJECTS - O.window, spread = rest / 4;
        O.off_target = spread > 0 ? rest - spread + (long)(next_random() % (uint64_t)(2 * spread + 1)) : rest;
        O.t_off = hk_clock_ns(CLOCK_MONOTONIC);
        schedule_check(O.t_off, (uint64_t)O.off_target, O.ns_per_object);
        return;
    }
    uint64_t made = gc_allocated() - O.gc_off + O.over;
    int64_t now = hk_clock_ns(CLOCK_MONOTONIC);
    /* the rate: the faster of this stretch's so far and the last one's, so that a pause (a GC,
     * a thread starting) does not put the next read off while allocation resumes at speed */
    double rate = made > 0 && now > O.t_off ? (double)(now - O.t_off) / (double)made : 0;
    double ns_per_object = rate > 0 && (rate < O.ns_per_object || O.ns_per_object == 0) ? rate : O.ns_per_object;
    uint64_t target = (uint64_t)O.off_target;
    /* Objects likely made before another read could come: a stretch ends at its count exactly
     * (its last ones counted by the hook, turned on before them) unless it has overrun already.
     * Stretches of a fast allocator would otherwise overrun more than a slow one's, and a phase
     * of the program after a fast one would be given more of that one's objects than it gives
     * the phase after it. */
    uint64_t soon = ns_per_object > 0 ? (uint64_t)((double)WATCH_APPROACH_NS / ns_per_object) : target;
    if (made + soon < target) {
        schedule_check(now, target - made, ns_per_object);
        return;
    }
    if (made >= target) {
        if (rate > 0) O.ns_per_object = rate;
        O.approach = 0;
    } else {
        O.approach = (long)(target - made); /* the hook counts the stretch's last objects */
        made = target;
    }
    /* each object this window watches stands for itself and its share of the stretch */
    O.window_weight = (double)(made + (uint64_t)O.window) / (double)O.window;
    O.over = 0;
    O.window_left = O.approach ? 0 : O.window;
    O.watching = 1;
    rb_tracepoint_enable(O.tracepoint);
}

/* ctx: the worker. While the hook is off, the job reads Ruby's count when it is due (the job
 * sets the next time, and pokes the worker). */
static long resolve_step(void)
{
    O.poked = 0;
    if (!O.window) return RESOLVE_PERIOD_NS;
    /* counted before any flagging: a thread that ends stays marked for two steps (sampler_threads.c) */
    __atomic_add_fetch(&S.trigger_count, 1, __ATOMIC_RELAXED);
    /* in a window, short steps all the same: the worker resolves for half of each, and the
     * window's end must find it soon */
    if (O.watching) {
        /* a window over whose job has not run: the hook's trigger may have flagged a fiber that
         * ended before its next interrupt check */
        if (__atomic_load_n(&O.window_left, __ATOMIC_RELAXED) <= 0 && __atomic_load_n(&O.approach, __ATOMIC_RELAXED) <= 0)
            trigger_from_worker();
        return WATCH_WINDOW_STEP_NS;
    }
    int64_t now = hk_clock_ns(CLOCK_MONOTONIC), at = O.check_at;
    if (now < at) return (long)(at - now);
    O.check_at = now + WATCH_CHECK_MAX_NS; /* till the job says when */
    trigger_from_worker();
    /* soon again: the paced worker resolves for half the wait, which a poke does not cut short */
    return WATCH_CHECK_MIN_NS;
}

/* A sample's weight: the objects it stands for (hk_objects_step in a window), whole, the
 * fractions carried to the next one. */
static int64_t sample_weight(void)
{
    long step = hk_objects_step();
    if (!O.window) return step;
    double w = (double)step * O.window_weight + O.weight_carry;
    int64_t whole = (int64_t)w;
    O.weight_carry = w - (double)whole;
    return whole;
}

/* The allocating thread's record (made at its first sample), or NULL when out of memory. */
static hk_thread *allocating_thread(void)
{
    VALUE th = rb_thread_current();
    hk_thread *t = hk_sampler_thread_of(th);
    if (!t && !(t = hk_sampler_thread_add(th, -1))) return NULL; /* no clock: its samples weigh objects */
    if (!t->seq) t->seq = ++S.nseq;
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
    *h = (sample_head){.state = HK_TICK_RUNNING, .seq = t->seq, .weight = sample_weight(),
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
    if (O.window) { /* watch windows (above) */
        if (O.approach > 0) { /* the stretch's last objects: the window starts after them */
            if (--O.approach == 0) O.window_left = O.window;
            return;
        }
        if (O.window_left <= 0) {
            /* the window is over and its job has not run: the thread that allocates is asked */
            if ((++O.over & 255) == 0) trigger_watch_job();
            return;
        }
        if (--O.window_left == 0) trigger_watch_job();
    }
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

int hk_objects_start(char *err, size_t errlen)
{
    hk_u64_map_clear(&O.index_of);
    S.nclasses = 0;
    O.random = (uint64_t)hk_clock_ns(CLOCK_MONOTONIC) | 1;
    O.countdown = next_countdown();
    O.allocated = 0;
    O.in_hook = O.poked = 0;
    O.untracked = 0;
    O.let_go = O.hooks_off = 0;
    hk_u64_map_clear(&O.live);
    int retained = S.cfg.mode == HK_MODE_RETAINED;
    O.window = S.cfg.watch < HK_WATCH_ALL ? (long)WATCH_CYCLE_OBJECTS * S.cfg.watch / HK_WATCH_ALL : 0;
    if (O.window < 1 && S.cfg.watch < HK_WATCH_ALL) O.window = 1;
    /* the first window opens now, with no stretch before it */
    O.watching = 1;
    O.window_left = O.window;
    O.approach = 0;
    O.window_weight = 1.0;
    O.weight_carry = 0;
    O.over = 0;
    O.ns_per_object = 0;
    O.check_at = 0;
    O.gc_base = gc_allocated();
    O.gc_own = O.gc_end = 0;
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    if (O.window && !watch_handle) watch_handle = rb_postponed_job_preregister(0, watch_job, NULL);
#endif
    if (!retained && hk_timer_start_paced(resolve_step, err, errlen) < 0) return -1;
    if (!O.tracepoint) {
        O.tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, newobj_hook, NULL);
        rb_gc_register_mark_object(O.tracepoint);
        O.free_tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_FREEOBJ, freeobj_hook, NULL);
        rb_gc_register_mark_object(O.free_tracepoint);
    }
    if (retained) rb_tracepoint_enable(O.free_tracepoint);
    rb_tracepoint_enable(O.tracepoint);
    return 0;
}

void hk_objects_stop(void)
{
    O.gc_end = gc_allocated();
    if (O.tracepoint && O.watching) rb_tracepoint_disable(O.tracepoint);
    O.watching = 0;
    if (S.cfg.mode != HK_MODE_RETAINED) hk_timer_stop();
}

void hk_objects_forget(void)
{
    if (O.tracepoint && O.watching) rb_tracepoint_disable(O.tracepoint);
    O.watching = 0;
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

/* A Ractor other than the main one is starting (starting: 1), or n run already as the profile
 * starts (0). Every mode counts them (the job then checks where it runs: sampler.c). Retained mode: Ruby runs a FREEOBJ hook only for
 * the Ractor that enabled it, and a GC another Ractor's thread runs frees the main Ractor's
 * objects too, so the table could keep addresses of freed objects, whose slots may be reused or
 * returned: every object followed is let go (counted as dropped), and no more are followed.
 * Ruby 3.1 crashes in the new Ractor's first allocation while a NEWOBJ hook is on: there the
 * hooks go off for the rest of the profile (a Ractor that runs already is not affected). */
int hk_sampler_ractor_starting(int starting, long n)
{
    if (S.running && n > 0) S.ractors_started += (uint64_t)n;
    if (!HK_MODE_COUNTS_OBJECTS(S.cfg.mode) || !S.running || O.let_go) return HK_RACTOR_NOTHING;
    if (!starting && S.cfg.mode != HK_MODE_RETAINED) return HK_RACTOR_NOTHING;
    O.let_go = 1;
    if (S.cfg.mode == HK_MODE_RETAINED) {
        O.untracked += O.live.count;
        hk_u64_map_clear(&O.live);
    }
#if RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR < 2
    if (!starting) return HK_RACTOR_LET_GO;
    if (O.watching) rb_tracepoint_disable(O.tracepoint);
    O.watching = 0;
    O.hooks_off = 1;
    rb_tracepoint_disable(O.free_tracepoint);
    return HK_RACTOR_HOOKS_OFF;
#else
    return S.cfg.mode == HK_MODE_RETAINED ? HK_RACTOR_LET_GO : HK_RACTOR_NOTHING;
#endif
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

uint64_t hk_objects_allocated(void)
{
    if (!O.window) return O.allocated;
    uint64_t now = O.gc_end ? O.gc_end : gc_allocated(), made = now - O.gc_base - O.gc_own;
    return made > O.allocated ? made : O.allocated;
}

uint64_t hk_objects_watched(void) { return O.allocated; }

uint64_t hk_objects_made(void) { return O.gc_end ? O.gc_end : gc_allocated(); }

void hk_objects_not_program(uint64_t since)
{
    uint64_t now = gc_allocated();
    if (now > since) O.gc_own += now - since;
}

long hk_objects_step(void)
{
    if (!O.window) return S.cfg.interval;
    long step = (long)((double)S.cfg.interval * S.cfg.watch / HK_WATCH_ALL + 0.5);
    return step > 0 ? step : 1;
}

void hk_objects_mark(void)
{
    /* pinned: they are the table's keys */
    for (size_t i = HK_CLASS_FIRST; i < S.nclasses; i++) rb_gc_mark(S.classes[i]);
}

size_t hk_objects_memsize(void)
{
    return hk_u64_map_memsize(&O.index_of) + hk_u64_map_memsize(&O.live) + S.classes_cap * sizeof(VALUE);
}
