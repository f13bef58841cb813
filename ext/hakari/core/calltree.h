/* calltree.h — a profile's call tree and its per-method table, the common
 * ground of the flat, graph, callgrind and dot outputs.
 *
 * Input: a tracing profile (sample types calls/count, the measure's self value
 * as default_sample_type, optional wait) where each sample is one call-tree
 * node, or a sampling profile (samples/count, a time or count value) where
 * each sample is a stack. Locations are leaf first; a numeric (or string)
 * "thread" label picks the root, so equal paths of different threads stay
 * distinct nodes (samples with equal path and thread add up) while methods
 * merge threads.
 * Layout: `nodes` is a trie over location ids with one root per thread (no
 * location, function 0); a parent's index is always below its children's,
 * so one backward pass sums subtrees. `methods` is indexed by function id
 * - 1; `edges` are (caller, callee) function pairs, listed per method in the
 * caller_edges/callee_edges index arrays. Recursion: a node is `outer` when
 * its function does not occur above it; totals, edge times and (for
 * sampling) counts add outer nodes only, so nothing is counted twice;
 * tracing call counts add every node. A trace past its call-path budget
 * (profile.h's fold edges): its [folded] nodes and the leaves under them stay
 * in the tree, for paths, but add nothing to methods and edges; the fold
 * edges give those their folded calls' figures instead, exactly.
 * ctx: core (plain C, no ruby.h), pure; the tree is a snapshot of the profile.
 */
#ifndef HK_CALLTREE_H
#define HK_CALLTREE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "profile.h"

#define HK_CT_NONE UINT32_MAX

typedef struct hk_ct_node {
    uint32_t parent;                   /* HK_CT_NONE for a thread root */
    uint32_t loc, func;                /* 0 for a thread root */
    uint32_t thread;                   /* index into the thread roots */
    uint32_t first_child, next_sibling; /* HK_CT_NONE terminated */
    int outer;                         /* first occurrence of func on its path */
    int64_t calls;                     /* sampling: samples in the subtree */
    int64_t self, wait;
    int64_t total;                     /* self + wait + children's totals */
    int64_t wait_total;                /* wait in the subtree */
    int64_t alloc, alloc_total;        /* a trace's objects counted here, and in the subtree (alloc_vi) */
} hk_ct_node;

typedef struct hk_ct_method {
    uint32_t func;
    uint32_t nnodes;                   /* 0: the function never appears */
    int recursive;                     /* occurs more than once on some path */
    int64_t calls, self, wait, total, child;
    uint32_t callers_off, ncallers;    /* into caller_edges */
    uint32_t callees_off, ncallees;    /* into callee_edges */
} hk_ct_method;

/* calls from caller to callee; times are those of the callee's outer nodes,
 * so the edges into a method add up to its total. Caller 0 stands for the
 * thread roots: such an edge is among the callee's callers and in no callees. */
typedef struct hk_ct_edge {
    uint32_t caller, callee;           /* function ids */
    int64_t calls, total, self, wait, child;
} hk_ct_edge;

typedef struct hk_calltree {
    const hk_profile *profile;
    int calls_vi, self_vi, wait_vi;    /* value indexes, -1 when absent */
    int alloc_vi;                      /* a trace's alloc_objects (allocations: true), else -1 */
    int sampling;                      /* counts are samples, not calls */
    int ns;                            /* the measure is in nanoseconds */
    uint32_t fold_func;                /* the [folded] function when the profile has fold edges, else 0 */
    hk_ct_node *nodes; size_t nnodes;
    uint32_t *roots; size_t nthreads;  /* root node of each thread */
    hk_ct_method *methods; size_t nmethods; /* = profile->nfunctions */
    hk_ct_edge *edges; size_t nedges;
    uint32_t *caller_edges, *callee_edges;
    /* whole profile: total = self + wait; `unattributed` is the self + wait of
     * samples without locations, in the totals but in no method */
    int64_t total, self, wait, calls, unattributed;
} hk_calltree;

/* the tree, or NULL with a one-line reason in err (a profile without sample
 * types, a location or function id out of range, out of memory) */
hk_calltree *hk_calltree_build(const hk_profile *p, char *err, size_t errlen);
void hk_calltree_free(hk_calltree *ct);

/* whether node n is a [folded] node or one under it, whose figures the fold edges hold */
static inline int hk_ct_folded(const hk_calltree *ct, const hk_ct_node *n)
{
    return ct->fold_func && (n->func == ct->fold_func ||
                             (n->parent != HK_CT_NONE && ct->nodes[n->parent].func == ct->fold_func));
}

/* name of the measure (the self value's sample type), e.g. "wall" */
const char *hk_calltree_measure(const hk_calltree *ct);

/* a - b clamped to the int64 range, the partner of profile.h's hk_add_sat:
 * values come from decoded files and may be anything */
static inline int64_t hk_calltree_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* report helpers shared by the flat and graph reports: a value as a 12-wide
 * column (ms with 3 decimals for nanoseconds, else a count), a percentage, and
 * a name with control characters replaced by '?' so a row stays one line */
void hk_ct_put_column(hk_buf *out, const hk_calltree *ct, int64_t v);
double hk_ct_pct(int64_t v, int64_t total);
void hk_ct_put_clean(hk_buf *out, const char *s);
/* the reports' common header: measure and unit, threads, total (self, wait), calls or samples */
void hk_ct_put_summary(hk_buf *out, const hk_calltree *ct);

#endif
