/* tracer_int.h — the tracer's state, shared by tracer.c (events) and
 * tracer_build.c (the profile at stop). Not a public contract: only these two
 * files include it. All of it is owned by the GVL.
 */
#ifndef HK_TRACER_INT_H
#define HK_TRACER_INT_H

#include "clocks.h"
#include "tracer.h"

#define HK_METHOD_CACHE 1024 /* direct-mapped, power of two */
#define HK_CHILD_CACHE 4096  /* (parent, method) -> node, direct-mapped in front of the map */
#define HK_FOLD_CACHE 1024   /* (caller, callee) -> 1 + fold edge, direct-mapped in front of its map */

typedef struct hk_child_cache_entry { uint32_t parent, method, node; } hk_child_cache_entry;

typedef struct hk_tmethod {
    VALUE klass;
    ID mid;
    int excluded;
    int own;   /* hakari's own API: what it allocates is not the program's */
    int cfunc; /* seen through c_call/c_return */
} hk_tmethod;

typedef struct hk_method_cache_entry {
    VALUE klass;
    ID mid;
    uint32_t index;
    int cfunc;
} hk_method_cache_entry;

/* one allocation site: the objects of one class made at one source line while one call-tree
 * node was the innermost counted call (a root's node: outside every method) */
typedef struct hk_talloc {
    uint32_t node;
    int32_t line;       /* the innermost Ruby frame's line; 0 when there is none */
    VALUE klass, file;  /* the objects' real class; that frame's path (Qnil: none) */
    uint64_t count, bytes;
} hk_talloc;

/* the folded calls from one method to another, as profile.h's hk_fold_edge counts them */
typedef struct hk_tfold {
    uint32_t caller, callee; /* method indexes; caller 0: a root */
    uint64_t calls, outer_calls;
    int64_t self, wait, total, outer_self, outer_wait, outer_wait_total;
} hk_tfold;

#define HK_ALLOC_CACHE 4096 /* direct-mapped, power of two: the sites a program revisits, in front of the table */

/* the root of one call tree: a thread's or fiber's, or a shared one when merged */
typedef struct hk_troot {
    uint32_t node, seq;
    VALUE thread;
    int started;
    int64_t started_at; /* measure when the root's first context appeared */
    int64_t wait;       /* switched-out time while no frame was open */
    uint32_t *top; size_t ntop, top_cap; /* nodes directly under the root */
} hk_troot;

typedef struct hk_tracer {
    /* immutable after start */
    hk_tracer_config cfg;
    VALUE own_singleton, native_singleton;
    VALUE own_classes[4];             /* more of hakari's own: Autorun's singleton, Profile */
    int64_t start_real_ns, start_mono_ns;
    /* owned by the GVL */
    int running, paused, forked;
    hk_tmethod *methods; size_t nmethods, methods_cap;
    hk_intern_table method_index;
    hk_method_cache_entry method_cache[HK_METHOD_CACHE];
    hk_tnode *nodes; size_t nnodes, nodes_cap;
    hk_u64_map children;              /* (parent << 32 | method) -> node */
    hk_child_cache_entry child_cache[HK_CHILD_CACHE];
    int use_tsc;                      /* wall measure read from the TSC, scaled at stop */
    uint64_t start_tsc;
    hk_troot *roots; size_t nroots, roots_cap;
    hk_tcontext **contexts; size_t ncontexts, contexts_cap;
    hk_u64_map context_ids;           /* fiber VALUE -> context index */
    hk_u64_map thread_context;        /* thread VALUE -> index of the context its events ran in last */
    hk_tcontext *cur;                 /* the context of the last event */
    uint64_t events, calls, dropped, unmatched_returns;
    /* the call-path budget: nodes made past max_paths are [folded] ones and their leaves, up
     * to hard_limit, then only the leaves under each thread's root [folded] node */
    size_t max_paths, hard_limit;
    int folding;                      /* the budget was reached: [folded] nodes may exist */
    uint32_t fold_method;             /* the [folded] pseudo-method's index, 0 until folding */
    hk_tfold *folds; size_t nfolds, folds_cap;
    hk_u64_map fold_index;            /* (caller << 32 | callee) -> index in folds */
    uint32_t fold_cache[HK_FOLD_CACHE];
    uint64_t folds_lost;              /* folded calls with no room for their pair: in no fold edge */
    /* allocations: true (tracer_allocs.c) */
    int in_event;                     /* the event hook runs: what it allocates is hakari's */
    hk_talloc *allocs; size_t nallocs, allocs_cap;
    hk_intern_table alloc_index;      /* (node, line, class, file) -> index in allocs */
    uint32_t alloc_cache[HK_ALLOC_CACHE]; /* 1 + index, 0: empty */
    uint64_t allocs_unseen;           /* objects made where no context was known yet, or no room */
} hk_tracer;

extern hk_tracer hk_the_tracer;

/* tracer_allocs.c — ctx: GVL. The entry of a site, made on first sight (with malloc, never a
 * Ruby object: the NEWOBJ hook calls it); NULL when out of memory. */
hk_talloc *hk_tracer_alloc_site(hk_tracer *t, uint32_t node, int32_t line, VALUE klass, VALUE file);
void hk_tracer_allocs_free(hk_tracer *t);
void hk_tracer_allocs_mark(const hk_tracer *t);
size_t hk_tracer_allocs_memsize(const hk_tracer *t);

/* tracer_build.c — ctx: GVL, may allocate */
VALUE hk_trace_method_label(VALUE klass, ID mid);
hk_profile *hk_tracer_build_profile(const hk_tracer *t, const hk_tracer_stats *st);

#endif
