/* tracer.h — the tracing collector: every call and return, a call tree per
 * thread/fiber, and a measure (wall time, thread CPU time or allocations).
 *
 * Data layout (all owned by the GVL: the event hook and every reader run with it):
 *   methods   (defined class, method id) -> method index, interned exactly
 *             (both words compared), with a direct-mapped cache in front;
 *             index 0 is the synthetic context root;
 *   nodes     the call tree: node = (parent node, method), a node per
 *             recursion level; children found through a (parent, method) map;
 *   contexts  one per fiber (threads have a root fiber): its frame stack, its
 *             root node, the time it was switched out.
 * Memory grows with unique call paths, methods and contexts, not run length, and the
 * call paths are a budget (max_paths): past it, a call on a new path folds into a
 * "[folded]" node under its nearest kept ancestor, with one leaf per method called
 * there, so every method's calls, self time and wait stay exact and the totals of the
 * kept paths stay whole. Leaves are made until there are 1.5 x max_paths nodes; past that a
 * call on a new path goes to the [folded] node itself (one per kept node at most), so no call
 * is ever lost and memory is bounded by the budget, not by the run. What a [folded] path no
 * longer tells (a folded call's caller, what was on the stack above it) is counted per
 * (caller, callee) method pair as the call returns: the profile's fold edges (profile.h).
 */
#ifndef HK_TRACER_H
#define HK_TRACER_H

#include <ruby.h>
#include <stdint.h>
#include <time.h>

#include "intern_table.h"
#include "profile.h"
#include "u64_map.h"

typedef enum { HK_MEASURE_WALL = 0, HK_MEASURE_CPU = 1, HK_MEASURE_ALLOCATIONS = 2 } hk_measure;

/* the measure's name, as Ruby, pprof and the reports spell it */
static inline const char *hk_measure_name(hk_measure m)
{
    return m == HK_MEASURE_CPU ? "cpu" : m == HK_MEASURE_ALLOCATIONS ? "allocations" : "wall";
}

typedef struct hk_tracer_config {
    hk_measure measure;
    VALUE exclude;          /* Array of String (exact label) / Regexp, or Qnil */
    VALUE threads;          /* Array of Thread to trace (only these), or Qnil */
    VALUE exclude_threads;  /* Array of Thread not to trace, or Qnil */
    int merge_fibers, merge_threads;
    int allocations;        /* each method's objects by class and line, beside the measure */
    uint32_t max_paths;     /* call paths kept as their own nodes; past them, calls fold */
} hk_tracer_config;

#define HK_DEFAULT_MAX_PATHS 500000u
#define HK_MAX_MAX_PATHS 1000000000u

typedef struct hk_tracer_stats {
    hk_measure measure;
    int64_t start_time_ns, duration_ns;
    uint64_t event_count, call_count, node_count, method_count, context_count;
    uint64_t unmatched_returns; /* returns with no matching call (started mid-stack) */
    uint64_t allocation_count;  /* allocations: true — the objects counted, and their sites */
    uint64_t allocation_sites;
    uint64_t allocations_unseen; /* made where no context was known yet, or the table had no room */
    uint64_t max_paths;
    uint64_t folded_calls;      /* calls made on paths past the budget, in [folded] nodes */
    int64_t folded_measure;     /* their time (or objects): the [folded] nodes' self and wait, in recorded units */
    uint64_t dropped_calls;     /* calls that found no node at all (memory, or the hard limit): their time went to the caller */
    int allocations;
    double scale;               /* measure units per recorded unit (TSC ticks -> ns), else 1 */
} hk_tracer_stats;

typedef struct hk_tnode {
    uint32_t method, parent, context_seq;
    uint32_t on_kept_path; /* a [folded] leaf: its method runs on its kept ancestor's path */
    uint64_t calls;
    int64_t total, child, wait; /* summed over completed visits */
} hk_tnode;

typedef struct hk_tframe {
    uint32_t node, method;
    int counted;   /* 0: excluded method or called while paused — time goes to the caller */
    int folded;    /* past the budget: 1 its node is a [folded] leaf, 2 the [folded] node itself */
    int64_t start; /* measure at call */
    int64_t child; /* totals of counted callees returned so far */
    int64_t wait;  /* switched-out time while this frame was on top */
    int64_t wait_below; /* the wait of its counted callees' subtrees (a folded call's figures) */
    uint64_t fold_bloom; /* a folded call: a bit per method of the folded frames up to this one */
} hk_tframe;

typedef struct hk_tcontext {
    VALUE fiber, thread;
    uint32_t seq, root;
    int ignored;
    clockid_t cpu_clock;      /* this thread's CPU clock, readable from any thread */
    hk_tframe *stack; size_t depth, cap;
    int64_t switched_out_at;  /* measure when another context took over; -1 while current */
    int64_t paused_at;
} hk_tcontext;

/* ctx: GVL. 0, or -1 with a message in err. */
int hk_tracer_start(const hk_tracer_config *cfg, char *err, size_t errlen);
/* ctx: GVL. Unwinds every open frame at the stop time and returns the profile. */
hk_profile *hk_tracer_stop(hk_tracer_stats *stats);
int hk_tracer_running(void);
/* ctx: GVL. Pause: calls made meanwhile are not counted and time stands still. 0, or -1 if not running/already. */
int hk_tracer_pause(void);
int hk_tracer_resume(void);
int hk_tracer_paused(void);
void hk_tracer_mark(void);
size_t hk_tracer_memsize(void);

/* what the running trace holds: its call paths (nodes and their index) and methods, and
 * everything in all (contexts, allocation sites) */
typedef struct hk_tracer_memory_use {
    size_t paths, methods, path_bytes, method_bytes, total_bytes;
} hk_tracer_memory_use;
/* ctx: GVL */
void hk_tracer_memory(hk_tracer_memory_use *m);
void hk_tracer_init(void);

#endif
