/* sampler.h — the sampling collector's contract: its configuration, the
 * counters that travel with a profile, and its lifecycle. How it works is
 * docs/architecture.md ("The sampling path"); its state and the files that
 * share it are sampler_int.h. No ruby.h: the bindings and the tests see only this.
 */
#ifndef HK_SAMPLER_H
#define HK_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

/* cpu and wall: a sample per period of the thread's clock; object: a sample every `interval`
 * objects allocated; retained: those of them still alive at stop (sampler_objects.c) */
typedef enum { HK_MODE_CPU = 0, HK_MODE_WALL = 1, HK_MODE_OBJECT = 2, HK_MODE_RETAINED = 3 } hk_mode;
#define HK_MODE_COUNTS_OBJECTS(m) ((m) >= HK_MODE_OBJECT)

/* how cpu mode's ticks are timed (cpu_clock.h): HAKARI_CPU_CLOCK=perf */
typedef enum { HK_CPU_CLOCK_PACED = 0, HK_CPU_CLOCK_PERF = 1 } hk_cpu_clock_choice;

#define HK_MIN_FREQUENCY 1
#define HK_MAX_FREQUENCY 10000
#define HK_MAX_INTERVAL 1000000000 /* object mode: objects per sample */
#define HK_WATCH_ALL 1000 /* object mode's watch, in thousandths of the time: the hook always on */
#define HK_DEFAULT_MAX_DEPTH 1024
#define HK_MAX_MAX_DEPTH 65536

typedef struct hk_sampler_config {
    hk_mode mode;
    int frequency;      /* cpu and wall */
    int interval;       /* object and retained: a sample every `interval` objects */
    int watch;          /* object mode: thousandths of the time the NEWOBJ hook is on (HK_WATCH_ALL: always) */
    int aggregate;
    int max_depth;
    hk_cpu_clock_choice cpu_clock;
    int walk; /* how stacks are read: hk_walk_choice (stack_walk.h), HAKARI_STACK_WALK */
    int no_state_hooks; /* 1: neither Ruby's GVL nor its GC hooks, as on a Ruby without them
                         * (HAKARI_STATE_HOOKS=off: what the hooks cost, for the overhead bench) */
    int synthesize;     /* frames for methods run by specialized instructions (stack_walk.h) */
} hk_sampler_config;

/* The counters a profile carries, each once: its name (as Hakari::Profile#counters
 * and the pprof comments spell it) and what it counts. They cover the same span
 * as the samples: from start, or from the last snapshot that cleared, to stop
 * or snapshot. */
#define HK_SAMPLER_COUNTERS(X)                                                                           \
    X(trigger_count, "timer fires")                                                                     \
    X(sampling_count, "sampling callbacks that ran")                                                    \
    X(sample_count, "samples recorded")                                                                 \
    X(dropped_count, "samples lost: no frames, out of memory, the worker too far behind")               \
    X(moved_count, "samples given to the stack running at the tick, not to calls made after it")        \
    X(stale_count, "cpu mode: late ticks' samples given to the previous sample's stack (pace.h)")       \
    X(off_gvl_count, "cpu mode, Ruby 3.3+: samples of the CPU threads used without the GVL, given to the calls that let it go") \
    X(synthesized_count, "samples given a frame for the method a specialized instruction ran (Integer#+)") \
    X(sampling_time_ns, "time inside the sampling callback, paid by the profiled threads")              \
    X(stack_walk_time_ns, "of which capturing stacks (stack_walk.h)")                                   \
    X(resolve_time_ns, "turning captures into the profile: on the worker, and at stop")                 \
    X(timer_cpu_ns, "CPU used by the timer's worker thread")                                            \
    X(process_cpu_ns, "cpu mode: the process's CPU up to the stop call, the worker's included")          \
    X(walk_mismatch_count, "HAKARI_STACK_WALK=verify: samples whose two walks differed")                  \
    X(object_count, "object and retained: objects allocated while profiling, by the threads of the main Ractor") \
    X(objects_watched, "object mode: of them, those made while the NEWOBJ hook was on (watch:); samples are scaled by object_count / objects_watched") \
    X(objects_after_windows, "object mode with watch windows: of object_count, those made after the last window, in no sample") \
    X(objects_read_late, "object mode with watch windows: of object_count, those made past the end of a stretch whose read came over 1 ms late (a busy or virtual machine's worker), placed where the window after it was") \
    X(retained_count, "retained: sampled objects still alive at stop, after a full GC")                       \
    X(ractors_started, "Ractors other than the main one started while profiling, or running at its start: cpu and wall modes sample their threads on Ruby 3.3+ (a `ractor` label), else not (cpu mode: their CPU is in [native threads])") \
    X(ractor_threads, "cpu and wall modes, Ruby 3.3+: threads of other Ractors first sampled in the span (their samples carry a `ractor` label)") \
    X(label_sets_dropped, "Hakari.label calls whose set could not be made (65 536 sets, 16 labels): labels kept as they were") \
    X(label_change_count, "Hakari.label calls that took their thread's time in the GC, off the GVL or waiting for it since its latest sample, under the labels it was spent in (Ruby 3.3+)")

typedef struct hk_sampler_stats {
    hk_mode mode;
    int frequency, interval, watch, aggregate;
    int64_t start_time_ns; /* CLOCK_REALTIME at start (or the last clearing snapshot) */
    int64_t duration_ns;   /* monotonic, from there to stop or snapshot */
#define HK_COUNTER_FIELD(name, what) uint64_t name;
    HK_SAMPLER_COUNTERS(HK_COUNTER_FIELD)
#undef HK_COUNTER_FIELD
    uint64_t thread_count;
    uint64_t unique_frames, unique_stacks; /* set as the profile is built; stacks: (stack, thread) pairs */
    /* cpu mode, set as the profile is built: the process's CPU that no Ruby thread's samples
     * hold (process_cpu_ns less the worker's and the samples'), the [native threads] sample */
    uint64_t native_cpu_ns;
    const char *timer_kind;
    const char *stack_walker; /* stack_walk.h: how the frames were read */
    const char *states;       /* how the states were told apart (sampler_states.c) */
    const char *synthesized;  /* whether frames were synthesized for specialized instructions, and why not */
} hk_sampler_stats;

/* ctx: GVL. 0, or -1 with a message in err (already running, timer failure). */
int hk_sampler_start(const hk_sampler_config *cfg, char *err, size_t errlen);
/* ctx: GVL. Ends the profile's time here, as stop does first (at_end as for stop), and leaves
 * the profile to the next stop, which builds it: for an exit hook to end the time before any
 * of the profiler's own Ruby code runs. -1 when not running (or ended already). */
int hk_sampler_end(void (*at_end)(void *), void *arg);
/* ctx: any. hk_sampler_end ran and no stop yet (hk_sampler_running stays true till then). */
int hk_sampler_ended(void);
/* ctx: GVL, Hakari.label: the labels of the calling fiber (of thread, the calling thread) are
 * about to change (sampler.c) */
void hk_sampler_labels_changing(VALUE thread);
/* ctx: GVL. Stops and returns the profile (NULL when not running or out of memory). at_end
 * (or NULL) is called with arg once the program's time has ended and no sample can come, before
 * the profile is built: what the caller reads there is neither sampled nor the build's. */
hk_profile *hk_sampler_stop(hk_sampler_stats *stats, void (*at_end)(void *), void *arg);
/* ctx: GVL. The profile so far; with clear, samples and counters start over (frames are kept). */
hk_profile *hk_sampler_snapshot(int clear, hk_sampler_stats *stats);
/* ctx: any. */
int hk_sampler_running(void);
/* ctx: GVL. The Thread object `thread` (a VALUE) is hakari's own (the one that writes
 * continuous snapshots), from now on: none of its time is sampled, waiting or running; in cpu
 * mode its CPU is in the [native threads] sample. Best called by the thread that made it, before
 * it first runs. -1 when not running or out of memory. */
int hk_sampler_own_thread(uintptr_t thread);
/* ctx: GVL, GC mark phase. Marks (pins) every frame and thread VALUE held. */
void hk_sampler_mark(void);
/* ctx: GVL, GC compaction. The objects retained mode follows (never marked) may have moved. */
void hk_sampler_compact(void);
/* ctx: GVL, as a Ractor starts (n: 1), or at start with the n Ractors that run already
 * (sampler_objects.c): counted in ractors_started; object and retained modes stop sampling
 * (Ruby's allocation hooks are not safe beside Ractors), and retained mode lets the objects it
 * followed go (counted as dropped). What it did: */
enum { HK_RACTOR_NOTHING = 0, HK_RACTOR_LET_GO = 1, HK_RACTOR_HOOKS_OFF = 2 };
int hk_sampler_ractor_starting(long n);
/* ctx: GVL. */
size_t hk_sampler_memsize(void);
/* ctx: GVL, once at load. */
void hk_sampler_init(void);

/* ---- labels (sampler_labels.c): the label sets samples carry ------------------- */

#define HK_MAX_LABELS 16        /* in one set */
#define HK_MAX_LABEL_KEY 64     /* bytes */
#define HK_MAX_LABEL_VALUE 512  /* bytes */
#define HK_MAX_LABEL_SETS 65536 /* distinct sets in one profile */
/* the fiber-local (Thread#[]) slot where a fiber keeps its set, packed (hk_labels_pack) */
#define HK_LABELS_FIBER_KEY "__hakari_labels"

/* a label; in a merge, val NULL removes the key */
typedef struct hk_label_kv { const char *key; size_t klen; const char *val; size_t vlen; } hk_label_kv;

enum { HK_LABELS_NO_MEMORY = -1, HK_LABELS_TOO_MANY = -2, HK_LABELS_FULL = -3 };
/* ctx: GVL, while the sampler runs. The set `base` (0: none) with kv applied in order: its id,
 * 0 when it is empty, or HK_LABELS_*: out of memory, more than HK_MAX_LABELS in the set, or
 * HK_MAX_LABEL_SETS sets made already (the last two counted in label_sets_dropped). */
int64_t hk_labels_merge(uint32_t base, const hk_label_kv *kv, size_t n);
/* ctx: GVL. A set's labels, sorted by key, up to cap; 0 for none or an unknown id. */
size_t hk_labels_get(uint32_t id, hk_label_kv *out, size_t cap);
/* ctx: GVL. A set id as the fiber slot keeps it (0 for none), and back: 0 for a slot of
 * another profile's, or none. */
long hk_labels_pack(uint32_t id);
uint32_t hk_labels_unpack(long packed);
/* ctx: GVL. The set the current fiber is in (0: none), as a sample would take it. */
uint32_t hk_labels_current(void);

#endif
