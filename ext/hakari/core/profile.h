/* profile.h — the profile model every collector produces and every encoder reads.
 *
 * Deliberately close to pprof's profile.proto: a string table (index 0 is ""),
 * sample types with units, functions (name, file, first line) and locations
 * (function + executing line), ids 1-based; samples hold location ids leaf
 * first, one int64 per sample type, and labels. Functions and locations are
 * interned, so equal inputs give one id. Samples are stored in pools:
 * sample i's values are values[i * nvalues … + nvalues). Stacks are a trie:
 * a stack is its leaf location under its caller's stack, so a trace's million
 * call paths, each one deeper than its parent, share every prefix instead of
 * holding a copy of it (readers ask for a sample's locations into a buffer).
 * A failed allocation sets `oom`; builders check hk_profile_ok once at the end.
 * ctx: core (plain C, no ruby.h); one owner at a time.
 */
#ifndef HK_PROFILE_H
#define HK_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "intern_table.h"
#include "strtab.h"
#include "u64_map.h"

#define HK_MAX_SAMPLE_TYPES 8

typedef struct hk_value_type { uint32_t type, unit; } hk_value_type;

typedef struct hk_function {
    uint32_t name, system_name, filename;
    int64_t start_line;
} hk_function;

typedef struct hk_location {
    uint32_t function_id;
    int64_t line;
} hk_location;

/* a label has either str (string index, non-zero) or num (+ optional num_unit) */
typedef struct hk_label {
    uint32_t key, str, num_unit;
    int64_t num;
} hk_label;

/* one stack: its leaf location under its caller's stack (1-based, 0: none) */
typedef struct hk_stack_node { uint32_t parent, loc; } hk_stack_node;

/* a reader's room for one stack's locations, grown as needed and reused from sample to
 * sample; free with hk_locbuf_free */
typedef struct hk_locbuf { uint32_t *items; size_t cap; int oom; } hk_locbuf;
void hk_locbuf_free(hk_locbuf *b);

typedef struct hk_sample {
    uint32_t stack, nloc;        /* its stack (1-based, 0: no locations) and the stack's depth */
    uint32_t label_off, nlabel;  /* into label_pool */
} hk_sample;

typedef struct hk_profile {
    hk_strtab strings;
    hk_value_type sample_types[HK_MAX_SAMPLE_TYPES];
    size_t nvalues;
    uint32_t default_sample_type; /* string index of a sample type's type, 0 = last */

    hk_function *functions; size_t nfunctions, functions_cap;
    hk_location *locations; size_t nlocations, locations_cap;
    hk_intern_table function_index, location_index;

    hk_sample *samples; size_t nsamples, samples_cap;
    /* each distinct stack once, as (caller's stack, leaf): a million raw samples of fifty
     * thousand stacks hold fifty thousand entries, and a stack one call deeper than a
     * known one costs one entry */
    hk_stack_node *stacks; size_t nstacks, stacks_cap;
    hk_u64_map stack_index;              /* caller's stack << 32 | leaf -> 1-based stack */
    int64_t *values; size_t values_cap; /* nsamples * nvalues used */
    hk_label *label_pool; size_t label_len, label_cap; /* each distinct label set once */
    hk_intern_table label_index;                       /* label sets, as 5 words a label */
    uint32_t *label_set_off; size_t label_sets_cap;    /* by label set: its offset in label_pool */

    int64_t time_nanos, duration_nanos;
    hk_value_type period_type;
    int64_t period;
    uint32_t *comments; size_t ncomments, comments_cap;
    /* a trace past its call-path budget: its folded calls per (caller, callee), see below */
    struct hk_fold_edge *fold_edges; size_t nfold_edges, fold_edges_cap;

    int oom;
} hk_profile;

hk_profile *hk_profile_new(void);
void hk_profile_free(hk_profile *p);
static inline int hk_profile_ok(const hk_profile *p) { return !p->oom; }

/* string index; 0 ("") on failure, with oom set */
uint32_t hk_profile_string(hk_profile *p, const char *s);
uint32_t hk_profile_string_n(hk_profile *p, const char *s, size_t len);
const char *hk_profile_str(const hk_profile *p, uint32_t idx);

/* 0, or -1 when HK_MAX_SAMPLE_TYPES are set already or samples exist */
int hk_profile_add_sample_type(hk_profile *p, const char *type, const char *unit);
/* interned, 1-based ids; 0 on failure (oom set) */
uint32_t hk_profile_function(hk_profile *p, uint32_t name, uint32_t system_name,
                             uint32_t filename, int64_t start_line);
uint32_t hk_profile_location(hk_profile *p, uint32_t function_id, int64_t line);
/* values has nvalues entries; 0 or -1 (oom set). Samples of one stack share its location
 * list, and samples of one label set share its labels. */
int hk_profile_add_sample(hk_profile *p, const uint32_t *locs, uint32_t nloc,
                          const int64_t *values, const hk_label *labels, uint32_t nlabel);
/* The stack of location loc (a valid, non-zero id) called from stack parent (0: loc is the
 * root), made if new: 1-based, or 0 when out of memory (oom set). A builder that walks a
 * tree gives each node's stack from its parent's with one call. */
uint32_t hk_profile_stack(hk_profile *p, uint32_t parent, uint32_t loc);
/* The same, always a new entry and never looked up later: for a builder whose stacks are
 * distinct by construction (a call tree's nodes), which then needs no index over millions
 * of them. hk_profile_stack would not find such a stack again (it would make an equal one). */
uint32_t hk_profile_stack_append(hk_profile *p, uint32_t parent, uint32_t loc);
/* room for n more stacks, taken at once (0, or -1 with oom set) */
int hk_profile_reserve_stacks(hk_profile *p, size_t n);
/* as hk_profile_add_sample, with a stack from hk_profile_stack and its depth */
int hk_profile_add_sample_stack(hk_profile *p, uint32_t stack, uint32_t nloc,
                                const int64_t *values, const hk_label *labels, uint32_t nlabel);
/* room for n samples in all, taken at once (0, or -1 with oom set) */
int hk_profile_reserve(hk_profile *p, size_t n);
int hk_profile_add_comment(hk_profile *p, const char *text);

/* Pools stay NULL until something non-empty is stored; NULL + 0 is undefined
 * behaviour in C, so the accessors return NULL for an empty pool. */
static inline const int64_t *hk_profile_sample_values(const hk_profile *p, size_t i)
{
    return p->values ? p->values + i * p->nvalues : NULL;
}
/* the nloc locations of stack (leaf first) in b's room; NULL when that room cannot be had
 * (b->oom set). Valid until b is used again. */
const uint32_t *hk_profile_stack_locs(const hk_profile *p, uint32_t stack, uint32_t nloc, hk_locbuf *b);
static inline const uint32_t *hk_profile_sample_locs(const hk_profile *p, size_t i, hk_locbuf *b)
{
    return hk_profile_stack_locs(p, p->samples[i].stack, p->samples[i].nloc, b);
}
static inline const hk_label *hk_profile_sample_labels(const hk_profile *p, size_t i)
{
    return p->label_pool ? p->label_pool + p->samples[i].label_off : NULL;
}
/* a + b, clamped to the int64 range: sums of values read from a file must not overflow */
static inline int64_t hk_add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}
static inline const hk_location *hk_profile_loc(const hk_profile *p, uint32_t id)
{
    return &p->locations[id - 1];
}
static inline const hk_function *hk_profile_func(const hk_profile *p, uint32_t id)
{
    return &p->functions[id - 1];
}
/* index of the value reports use by default: default_sample_type if set, else the last */
size_t hk_profile_default_value(const hk_profile *p);
/* index of the sample type named `type`, or -1 */
int hk_profile_find_value(const hk_profile *p, const char *type);
/* sum over samples of value index vi */
int64_t hk_profile_total(const hk_profile *p, size_t vi);
/* Per function (index function id - 1), the sums of value vi over the samples
 * where it is the leaf (self) and where it is anywhere in the stack, counted
 * once per sample (cum: recursion never exceeds the total); both arrays hold
 * nfunctions entries, zeroed here. 0, or -1 when out of memory. */
int hk_profile_function_sums(const hk_profile *p, size_t vi, int64_t *self, int64_t *cum);
size_t hk_profile_memsize(const hk_profile *p);

/* A trace past its call-path budget says so in a comment ("max_paths=M folded_calls=N
 * folded_ns=T" or folded_objects): 1 and *f filled when p has one with folded calls, else 0 */
typedef struct hk_folded {
    unsigned long long max_paths, calls;
    long long measure;
    char unit[16]; /* "ns" or "objects" */
} hk_folded;
int hk_profile_folded(const hk_profile *p, hk_folded *f);

/* A trace's folded calls share one [folded] path under their nearest kept caller, which no
 * longer says who called them nor what was on the stack above them. Their figures travel
 * beside the paths, one entry per (caller, callee) method pair: calls, self and wait of every
 * such call, and the count, total, self, own wait and subtree's wait of those whose callee was
 * not on the stack already (as calltree.h counts outer nodes, so recursion counts once). With
 * them a per-method table is what it would be with every path kept. Methods are named by their
 * location (a trace has one per method); caller 0 is a thread's root. In a pprof file each is a
 * message of hakari's own field (pprof_fields.h), which other readers skip. */
typedef struct hk_fold_edge {
    uint32_t caller, callee;
    int64_t calls, self, wait;
    int64_t outer_calls, total, outer_self, outer_wait, outer_wait_total;
} hk_fold_edge;
/* 0, or -1 (oom set) */
int hk_profile_add_fold_edge(hk_profile *p, const hk_fold_edge *e);
/* whether e's locations are p's (a callee, and a caller or 0): readers skip one that is not */
static inline int hk_fold_edge_ok(const hk_profile *p, const hk_fold_edge *e)
{
    return e->callee != 0 && e->callee <= p->nlocations && e->caller <= p->nlocations;
}

#endif
