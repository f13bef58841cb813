/* sampler_watch.c — object mode's watch windows: Ruby's NEWOBJ hook on for a share of the
 * objects (`watch:`), each sample standing for the objects made while it was off too.
 *
 * Ruby sends every allocation down its slow path while any NEWOBJ hook is on, which costs an
 * allocation-heavy program 15-25 % however seldom the hook samples. So the hook is on only in
 * windows of WATCH_CYCLE_OBJECTS * watch objects; between them it is off for about the cycle's
 * rest. Windows are measured in objects, not time (the hook slows allocation, so a window in
 * time would see fewer objects of a fast allocator than of a slow one): the hook counts a
 * window's objects and asks a postponed job to turn it off at the last one (the hook can only
 * change with the GVL); while it is off, the job reads Ruby's count of allocated objects
 * (GC.stat's total_allocated_objects, exact at every allocation, less what a GC adds:
 * allocated_count.h) when the stretch should be nearly over, at the rate objects came (GCs left
 * out), asked by the worker and, on 3.2+, by the first GC step past the stretch's end, and turns
 * the hook on for the stretch's last objects, which the hook counts, so that every stretch has
 * its drawn length: a window after a fast stretch would otherwise stand for more of the phase
 * before it than one after a slow one.
 *
 * In a window the hook samples every interval * watch objects (hk_watch_step), and each sample
 * stands for its share of the window and of the stretch before it (hk_watch_weight): the
 * stretch's objects are taken to be made where the window's are, as they are within a phase of
 * the program; a phase shorter than a few cycles is blurred with its neighbours, and so is a
 * window whose job waits for a thread to start or end. The counts add up to Ruby's (but for the
 * stretch after the last window) whatever the program's rate of allocation.
 *
 * With watch 1 (HK_WATCH_ALL) there are no windows: the hook is on from start to stop and
 * counts every object, and nothing here runs but hk_watch_start and hk_watch_stop.
 */
#include "sampler_int.h"

#include <ruby/debug.h>
#include <ruby/ractor.h>

#include "allocated_count.h"
#include "timer.h"

#define WATCH_CYCLE_OBJECTS 1000 /* a window and the stretch before it, at least */
/* While the hook is off, Ruby's count is read when the stretch should be over at the rate
 * allocation ran at, within these bounds */
#define WATCH_CHECK_MIN_NS 20000L
#define WATCH_CHECK_MAX_NS 100000L
#define WATCH_WINDOW_STEP_NS 100000L /* the worker's steps while the hook is on */
#define WATCH_APPROACH_NS 25000L     /* the hook goes on this long before a stretch's end, by the rate */
#define WATCH_LATE_NS 1000000L       /* a read this long after it was due came late */

static struct {
    VALUE hook;           /* the NEWOBJ TracePoint (sampler_objects.c's, marked there) */
    const void *main_thread; /* the main thread's VM struct (stack_walk.h), or NULL */
    int stopped;          /* hk_watch_stop ran: the hook stays off */
    long window;          /* objects the hook watches in a window; 0: no windows */
    long window_left;     /* of them, still to come in this window (0: it is over) */
    long approach;        /* objects the hook counts before its window starts: the stretch's last */
    uint64_t over;        /* objects the hook saw after its window was over, before it went off */
    uint64_t stretch_made; /* the objects of the stretch before the next window, approach's included */
    int watching;         /* the hook is on: the job's, with the GVL; read by the worker */
    uint64_t gc_off;      /* program_count when the hook went off */
    int64_t t_off;        /* and the time then (monotonic ns) */
    int64_t gc_ns_off;    /* and the time spent in GCs then (allocated_count.h) */
    double ns_per_object; /* how fast objects came while the hook was off, last measured */
    int64_t check_at;     /* when the worker has the job read the count next (the job's) */
    int64_t read_due;     /* and the same, kept by the job (the worker moves check_at) */
    int64_t step_due;     /* when the worker's next step is due (the worker's) */
    long off_target;      /* objects to be made before the next window (drawn at each window's end) */
    double window_weight; /* objects each watched object stands for, in this window */
    double weight_carry;  /* the fraction the samples' integer weights left over */
    uint64_t random;      /* xorshift state for the stretches */
    uint64_t gc_base;     /* the program's count of objects (program_count) at start */
    uint64_t not_program; /* of the count since start, hakari's own (while building snapshots) */
    uint64_t gc_end;      /* program_count at the end of the profile's time (0: still running) */
    uint64_t after_end;   /* hk_watch_after_windows at the end */
    uint64_t read_late;   /* objects past the end of stretches whose read came late (hk_watch_read_late) */
    int counting;         /* a reader of allocated_count.h's count */
} W;

/* the objects allocated (every Ractor's, less what a GC added: allocated_count.h), less
 * hakari's own since start */
static uint64_t program_count(void) { return hk_allocated_count() - W.not_program; }

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
 * join while another runs: the thread that holds the GVL is flagged too, as at ticks (3.3+);
 * where Ruby does not name it (3.1, whose call from another thread flags no thread at all),
 * the main thread, which lives as long as the process. */
static void trigger_from_worker(void)
{
    trigger_watch_job();
    const void *holder = __atomic_load_n(&S.holder, __ATOMIC_RELAXED);
    if (!holder) holder = W.main_thread;
    if (holder) hk_stack_walk_flag_jobs(holder);
}

static uint64_t next_random(void)
{
    W.random ^= W.random << 13;
    W.random ^= W.random >> 7;
    W.random ^= W.random << 17;
    return W.random;
}

/* ctx: GVL. The worker is to have the count read again when `left` more objects should have
 * been made, at ns_per_object. */
static void schedule_check(int64_t now, uint64_t left, double ns_per_object)
{
    double eta = ns_per_object > 0 ? ns_per_object * (double)left : (double)WATCH_CHECK_MIN_NS;
    long wait = eta < WATCH_CHECK_MIN_NS ? WATCH_CHECK_MIN_NS : eta > WATCH_CHECK_MAX_NS ? WATCH_CHECK_MAX_NS : (long)eta;
    int64_t at = now + wait;
    W.read_due = at;
    /* the worker looks at the time again at its next step, due by `step_due`: woken (a system
     * call) only when the read is due before that */
    int64_t due = __atomic_load_n(&W.step_due, __ATOMIC_RELAXED);
    __atomic_store_n(&W.check_at, at, __ATOMIC_RELAXED);
    if (at < due) hk_timer_poke();
}

/* ctx: GVL. The window is over: the hook goes off, and the next stretch's length is drawn:
 * the cycle's rest, give or take a quarter, so that windows fall at no fixed place in a
 * program's own repeated work. */
static void end_window(void)
{
    rb_tracepoint_disable(W.hook);
    __atomic_store_n(&W.watching, 0, __ATOMIC_RELAXED);
    W.gc_off = program_count();
    long rest = WATCH_CYCLE_OBJECTS - W.window, spread = rest / 4;
    W.off_target = spread > 0 ? rest - spread + (long)(next_random() % (uint64_t)(2 * spread + 1)) : rest;
    W.t_off = hk_clock_ns(CLOCK_MONOTONIC);
    W.gc_ns_off = hk_allocated_count_gc_ns();
    schedule_check(W.t_off, (uint64_t)W.off_target, W.ns_per_object);
    /* The first GC step past the stretch's end asks for the read too (3.2+; the steps of a lazy
     * sweep come every page or so of a fast allocator's objects): the worker's wake-ups are late
     * by a millisecond and more now and then on a busy or virtual machine, while the allocating
     * thread, which keeps its CPU, goes on (a CI run: 27 000 strings counted as the arrays of the
     * method after them; 100 runs of its phases on 3.4, the largest error 18.6 % before, 2.4 %
     * after: bench/objects.rb, part 4) */
    hk_allocated_count_notify(W.gc_off + (uint64_t)W.off_target + W.not_program, trigger_watch_job);
}

/* ctx: GVL (postponed job). A window that is over ends; a stretch near its end ends. */
static void watch_job(void *arg)
{
    (void)arg;
    if (!S.running || S.ended || !W.window || W.stopped) return;
    if (S.ractors_started && !in_main_ractor()) return; /* another Ractor's thread would turn its own hook */
    if (W.watching) {
        if (W.window_left <= 0 && W.approach <= 0) end_window();
        return;
    }
    uint64_t made = program_count() - W.gc_off + W.over;
    int64_t now = hk_clock_ns(CLOCK_MONOTONIC);
    /* the rate, its GCs left out: the faster of this stretch's so far and the one kept, as
     * the thread may have been stopped a while (a thread switch, a busy or virtual machine's
     * host: 100-500 µs with no object made, a few times a run) and allocation resumes at speed.
     * The rate kept follows a faster one at once and a slower one by a quarter a read at most. */
    int64_t running = now - W.t_off - (hk_allocated_count_gc_ns() - W.gc_ns_off);
    double rate = made > 0 && running > 0 ? (double)running / (double)made : 0;
    double ns_per_object = rate > 0 && (rate < W.ns_per_object || W.ns_per_object == 0) ? rate : W.ns_per_object;
    if (rate > 0) W.ns_per_object = ns_per_object == rate || rate < W.ns_per_object * 1.25 ? rate : W.ns_per_object * 1.25;
    uint64_t target = (uint64_t)W.off_target;
    /* the objects likely made before another read could come: the hook goes on for them and
     * counts them, so that the stretch ends at its length, unless it has overrun already */
    uint64_t soon = ns_per_object > 0 ? (uint64_t)((double)WATCH_APPROACH_NS / ns_per_object) : target;
    if (made + soon < target) {
        schedule_check(now, target - made, ns_per_object);
        return;
    }
    if (made >= target) {
        if (now - W.read_due > WATCH_LATE_NS) W.read_late += made - target;
        W.approach = 0;
    } else {
        W.approach = (long)(target - made);
        made = target;
    }
    W.stretch_made = made;
    /* each object this window watches stands for itself and its share of the stretch */
    W.window_weight = (double)(made + (uint64_t)W.window) / (double)W.window;
    W.over = 0;
    W.window_left = W.approach ? 0 : W.window;
    __atomic_store_n(&W.watching, 1, __ATOMIC_RELAXED);
    rb_tracepoint_enable(W.hook);
}

void hk_watch_start(VALUE hook)
{
    W.hook = hook;
    W.stopped = 0;
    W.main_thread = hk_stack_walk_thread_of(rb_thread_main());
    int windows = S.cfg.mode == HK_MODE_OBJECT && S.cfg.watch < HK_WATCH_ALL;
    W.window = windows ? (long)WATCH_CYCLE_OBJECTS * S.cfg.watch / HK_WATCH_ALL : 0;
    if (windows && W.window < 1) W.window = 1;
    /* the first window opens now (the caller enables the hook), with no stretch before it */
    W.watching = 1;
    W.window_left = W.window;
    W.approach = 0;
    W.window_weight = 1.0;
    W.weight_carry = 0;
    W.over = 0;
    W.ns_per_object = 0;
    W.check_at = W.step_due = 0;
    W.random = (uint64_t)hk_clock_ns(CLOCK_MONOTONIC) | 1;
    W.not_program = W.gc_end = W.after_end = W.stretch_made = W.read_late = 0;
    W.gc_base = program_count();
    hk_allocated_count_read(&W.counting, W.window > 0);
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
    if (W.window && !watch_handle) watch_handle = rb_postponed_job_preregister(0, watch_job, NULL);
#endif
}

/* ctx: GVL. Objects that no sample stands for (a window's samples stand for it and for the
 * stretch before it): while the hook is off, the stretch so far; while it counts the stretch's
 * last objects, those counted; inside a window, the share of the stretch its objects still to
 * come would have stood for; after a window whose job has not run, what the hook saw since. */
static uint64_t after_windows_now(void)
{
    if (!W.window) return 0;
    if (!W.watching) return program_count() - W.gc_off + W.over;
    if (W.approach > 0) return W.stretch_made - (uint64_t)W.approach;
    /* in a window, its samples so far stand for their share of the stretch before it only */
    if (W.window_left > 0) return W.stretch_made * (uint64_t)W.window_left / (uint64_t)W.window;
    return W.over;
}

uint64_t hk_watch_after_windows(void) { return W.gc_end ? W.after_end : after_windows_now(); }

uint64_t hk_watch_read_late(void) { return W.read_late; }

void hk_watch_stop(void)
{
    if (!W.stopped) {
        W.after_end = after_windows_now();
        W.gc_end = program_count();
    }
    W.stopped = 1;
    if (W.hook && W.watching) rb_tracepoint_disable(W.hook);
    W.watching = 0;
    hk_allocated_count_read(&W.counting, 0);
}

void hk_watch_forget(void)
{
    if (W.hook && W.watching) rb_tracepoint_disable(W.hook);
    W.watching = 0;
    W.stopped = 1;
    hk_allocated_count_read(&W.counting, 0);
}

int hk_watch_object(void)
{
    if (!W.window) return 1;
    if (W.approach > 0) { /* the stretch's last objects: the window starts after them */
        if (--W.approach == 0) W.window_left = W.window;
        return 0;
    }
    if (W.window_left <= 0) {
        /* the window is over and its job has not run: the thread that allocates is asked */
        if ((++W.over & 255) == 0) trigger_watch_job();
        return 0;
    }
    if (--W.window_left == 0) trigger_watch_job();
    return 1;
}

long hk_watch_step(void)
{
    if (!W.window) return S.cfg.interval;
    long step = (long)((double)S.cfg.interval * S.cfg.watch / HK_WATCH_ALL + 0.5);
    return step > 0 ? step : 1;
}

int64_t hk_watch_weight(long step)
{
    if (!W.window) return step;
    double w = (double)step * W.window_weight + W.weight_carry;
    int64_t whole = (int64_t)w;
    W.weight_carry = w - (double)whole;
    return whole;
}

/* the worker's step, in windows or not */
static long step_in_windows(void)
{
    /* counted before any flagging: a thread that ends stays marked for two steps (sampler_threads.c) */
    __atomic_add_fetch(&S.trigger_count, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&W.watching, __ATOMIC_RELAXED)) {
        /* a window over whose job has not run: the hook's trigger may have flagged a fiber that
         * ended before its next interrupt check */
        if (__atomic_load_n(&W.window_left, __ATOMIC_RELAXED) <= 0 && __atomic_load_n(&W.approach, __ATOMIC_RELAXED) <= 0)
            trigger_from_worker();
        return WATCH_WINDOW_STEP_NS; /* short all the same: the window's end must find the worker soon */
    }
    int64_t now = hk_clock_ns(CLOCK_MONOTONIC), at = __atomic_load_n(&W.check_at, __ATOMIC_RELAXED);
    if (now < at) return (long)(at - now);
    __atomic_store_n(&W.check_at, now + WATCH_CHECK_MAX_NS, __ATOMIC_RELAXED); /* till the job says when */
    trigger_from_worker();
    /* soon again: the paced worker resolves for half the wait, which a poke does not cut short */
    return WATCH_CHECK_MIN_NS;
}

long hk_watch_worker_step(void)
{
    if (!W.window) return -1;
    long wait = step_in_windows();
    __atomic_store_n(&W.step_due, hk_clock_ns(CLOCK_MONOTONIC) + wait, __ATOMIC_RELAXED);
    return wait;
}

uint64_t hk_watch_made(uint64_t watched)
{
    if (!W.window) return watched;
    uint64_t now = W.gc_end ? W.gc_end : program_count(), made = now - W.gc_base;
    return made > watched ? made : watched;
}

uint64_t hk_watch_count_now(void) { return W.gc_end ? W.gc_end : program_count(); }

void hk_watch_not_program(uint64_t since)
{
    uint64_t now = program_count();
    if (now > since) W.not_program += now - since;
}
