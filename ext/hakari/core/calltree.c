/* calltree.c — see calltree.h.
 * Build order: (1) insert every sample's path into the trie, children found
 * through a (parent, location) map — except for the root-side part shared
 * with the previous sample's path, whose nodes are kept — the values landing
 * on the path's last node; (2) link children and sum subtrees backwards
 * (parents have lower indexes); (3) one iterative depth-first walk with a
 * per-function "on the path" counter marks outer nodes and recursive methods
 * — iterative because paths can be thousands deep; (4) per-method and
 * per-edge sums; (5) the edge lists of each method as index arrays. Step (1)
 * is linear in the total path length, the others in the nodes.
 */
#include "buf.h"
#include "calltree.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intern_table.h"
#include "u64_map.h"

typedef struct builder {
    const hk_profile *p;
    hk_calltree *ct;
    size_t nodes_cap, roots_cap, edges_cap;
    hk_u64_map children;   /* (parent << 32 | location) -> node */
    hk_intern_table threads; /* {kind, lo, hi} of the thread label -> thread */
    uint32_t thread_key;   /* string index of "thread", 0 if none */
    /* the previous sample's path: its root, locations and node at each depth */
    uint32_t prev_root, prev_nloc;
    const uint32_t *prev_locs;
    hk_locbuf locbufs[2]; int cur; /* this sample's locations and the previous one's */
    uint32_t *path; size_t path_cap;
} builder;

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int64_t new_node(builder *b, uint32_t parent, uint32_t loc, uint32_t func, uint32_t thread)
{
    hk_calltree *ct = b->ct;
    if (ct->nnodes >= HK_CT_NONE - 1) return -1;
    if (hk_array_grow((void **)&ct->nodes, &b->nodes_cap, ct->nnodes + 1, sizeof(*ct->nodes)) < 0) return -1;
    hk_ct_node *n = &ct->nodes[ct->nnodes];
    memset(n, 0, sizeof(*n));
    n->parent = parent;
    n->loc = loc;
    n->func = func;
    n->thread = thread;
    n->first_child = n->next_sibling = HK_CT_NONE;
    return (int64_t)ct->nnodes++;
}

/* root node of sample i's thread; a sample without a thread label is thread "none" */
static int64_t root_of(builder *b, size_t i)
{
    uint32_t key[3] = {0, 0, 0}, nlabel = b->p->samples[i].nlabel;
    /* the accessors are only called on non-empty runs: an empty pool is NULL */
    const hk_label *l = nlabel ? hk_profile_sample_labels(b->p, i) : NULL;
    for (uint32_t j = 0; b->thread_key && j < nlabel; j++) {
        if (l[j].key != b->thread_key) continue;
        key[0] = l[j].str ? 2 : 1;
        key[1] = l[j].str ? l[j].str : (uint32_t)l[j].num;
        key[2] = l[j].str ? 0 : (uint32_t)((uint64_t)l[j].num >> 32);
        break;
    }
    int64_t t = hk_intern_seq(&b->threads, key, 3);
    if (t < 0) return -1;
    hk_calltree *ct = b->ct;
    if ((size_t)t < ct->nthreads) return ct->roots[t];
    if (hk_array_grow((void **)&ct->roots, &b->roots_cap, ct->nthreads + 1, sizeof(*ct->roots)) < 0) return -1;
    int64_t r = new_node(b, HK_CT_NONE, 0, 0, (uint32_t)t);
    if (r < 0) return -1;
    ct->roots[ct->nthreads++] = (uint32_t)r;
    return r;
}

static int64_t value(const hk_profile *p, size_t i, int vi)
{
    return vi < 0 ? 0 : hk_profile_sample_values(p, i)[vi];
}

/* 0, -1 out of memory, -2 bad id (reason in err) */
static int insert(builder *b, size_t i, char *err, size_t errlen)
{
    const hk_profile *p = b->p;
    hk_calltree *ct = b->ct;
    int64_t root = root_of(b, i), at = root;
    if (root < 0) return -1;
    uint32_t nloc = p->samples[i].nloc;
    const uint32_t *locs = hk_profile_sample_locs(p, i, &b->locbufs[b->cur]);
    if (!locs) return -1;
    if (hk_array_grow((void **)&b->path, &b->path_cap, (size_t)nloc + 1, sizeof(*b->path)) < 0) return -1;
    /* the root-side part this path shares with the previous one is in the
     * trie already (and checked): a tracer writes nodes in tree order, so it
     * is most of the path, and comparing is far cheaper than looking up */
    uint32_t d = 0;
    if (root == b->prev_root)
        while (d < nloc && d < b->prev_nloc && locs[nloc - 1 - d] == b->prev_locs[b->prev_nloc - 1 - d])
            at = b->path[d++];
    for (uint32_t j = nloc - d; j-- > 0; d++) {
        uint32_t loc = locs[j], f;
        if (loc == 0 || loc > p->nlocations) {
            set_err(err, errlen, "sample %zu: location id %" PRIu32 " out of range 1..%zu", i, loc,
                    p->nlocations);
            return -2;
        }
        f = hk_profile_loc(p, loc)->function_id;
        if (f == 0 || f > p->nfunctions) {
            set_err(err, errlen, "location %" PRIu32 ": function id %" PRIu32 " out of range 1..%zu", loc, f,
                    p->nfunctions);
            return -2;
        }
        uint64_t key = (uint64_t)at << 32 | loc;
        uint32_t child;
        if (!hk_u64_map_get(&b->children, key, &child)) {
            int64_t n = new_node(b, (uint32_t)at, loc, f, ct->nodes[at].thread);
            if (n < 0 || hk_u64_map_put(&b->children, key, (uint32_t)n) < 0) return -1;
            child = (uint32_t)n;
        }
        b->path[d] = (uint32_t)(at = child);
    }
    b->prev_root = (uint32_t)root;
    b->prev_locs = locs;
    b->prev_nloc = nloc;
    b->cur ^= 1;
    hk_ct_node *n = &ct->nodes[at];
    n->calls = hk_add_sat(n->calls, value(p, i, ct->calls_vi));
    n->self = hk_add_sat(n->self, value(p, i, ct->self_vi));
    n->wait = hk_add_sat(n->wait, value(p, i, ct->wait_vi));
    n->alloc = hk_add_sat(n->alloc, value(p, i, ct->alloc_vi));
    return 0;
}

static void sum_subtrees(hk_calltree *ct)
{
    hk_ct_node *nd = ct->nodes;
    for (size_t i = 0; i < ct->nnodes; i++) {
        nd[i].total = hk_add_sat(nd[i].self, nd[i].wait);
        nd[i].wait_total = nd[i].wait;
        nd[i].alloc_total = nd[i].alloc;
    }
    /* backwards, so each child list comes out in creation order */
    for (size_t i = ct->nnodes; i-- > 0;) {
        uint32_t up = nd[i].parent;
        if (up == HK_CT_NONE) continue;
        nd[i].next_sibling = nd[up].first_child;
        nd[up].first_child = (uint32_t)i;
        nd[up].total = hk_add_sat(nd[up].total, nd[i].total);
        nd[up].wait_total = hk_add_sat(nd[up].wait_total, nd[i].wait_total);
        nd[up].alloc_total = hk_add_sat(nd[up].alloc_total, nd[i].alloc_total);
        if (ct->sampling) nd[up].calls = hk_add_sat(nd[up].calls, nd[i].calls);
    }
}

/* outer flags and recursive methods: a depth-first walk counting, per
 * function, how many nodes of the current path belong to it */
static int mark_outer(hk_calltree *ct)
{
    hk_ct_node *nd = ct->nodes;
    uint32_t *on_path = calloc(ct->nmethods + 1, sizeof(*on_path));
    uint32_t *next = malloc((ct->nnodes + 1) * sizeof(*next));
    uint32_t *stack = malloc((ct->nnodes + 1) * sizeof(*stack));
    if (!on_path || !next || !stack) goto fail;
    for (size_t i = 0; i < ct->nnodes; i++) next[i] = nd[i].first_child;
    for (size_t r = 0; r < ct->nthreads; r++) {
        size_t sp = 0;
        stack[sp++] = ct->roots[r];
        while (sp) {
            uint32_t n = stack[sp - 1], c = next[n];
            if (c == HK_CT_NONE) {
                if (nd[n].func) on_path[nd[n].func]--;
                sp--;
                continue;
            }
            next[n] = nd[c].next_sibling;
            nd[c].outer = on_path[nd[c].func] == 0;
            if (!nd[c].outer) ct->methods[nd[c].func - 1].recursive = 1;
            on_path[nd[c].func]++;
            stack[sp++] = c;
        }
    }
    free(on_path);
    free(next);
    free(stack);
    return 0;
fail:
    free(on_path);
    free(next);
    free(stack);
    return -1;
}

/* the (caller, callee) edge, made when new; NULL when out of memory */
static hk_ct_edge *edge_of(builder *b, hk_u64_map *index, uint32_t caller, uint32_t callee)
{
    hk_calltree *ct = b->ct;
    uint64_t key = (uint64_t)caller << 32 | callee;
    uint32_t e;
    if (!hk_u64_map_get(index, key, &e)) {
        if (hk_array_grow((void **)&ct->edges, &b->edges_cap, ct->nedges + 1, sizeof(*ct->edges)) < 0 ||
            hk_u64_map_put(index, key, (uint32_t)ct->nedges) < 0)
            return NULL;
        e = (uint32_t)ct->nedges++;
        memset(&ct->edges[e], 0, sizeof(ct->edges[e]));
        ct->edges[e].caller = caller;
        ct->edges[e].callee = callee;
    }
    return &ct->edges[e];
}

/* a trace's folded calls, by the fold edges: their methods' calls, self, wait and total,
 * and their real callers (a location out of range is left out: the decoder checks ids) */
static int add_fold_edges(builder *b, hk_u64_map *index)
{
    hk_calltree *ct = b->ct;
    const hk_profile *p = b->p;
    for (size_t i = 0; ct->fold_func && i < p->nfold_edges; i++) {
        const hk_fold_edge *fe = &p->fold_edges[i];
        if (!hk_fold_edge_ok(p, fe)) continue;
        uint32_t callee = hk_profile_loc(p, fe->callee)->function_id;
        uint32_t caller = fe->caller ? hk_profile_loc(p, fe->caller)->function_id : 0;
        hk_ct_method *m = &ct->methods[callee - 1];
        m->nnodes++;
        m->calls = hk_add_sat(m->calls, fe->calls);
        m->self = hk_add_sat(m->self, fe->self);
        m->wait = hk_add_sat(m->wait, fe->wait);
        m->total = hk_add_sat(m->total, fe->total);
        if (fe->outer_calls < fe->calls) m->recursive = 1;
        hk_ct_edge *ed = edge_of(b, index, caller, callee);
        if (!ed) return -1;
        ed->calls = hk_add_sat(ed->calls, fe->calls);
        ed->total = hk_add_sat(ed->total, fe->total);
        ed->self = hk_add_sat(ed->self, fe->outer_self);
        ed->wait = hk_add_sat(ed->wait, fe->outer_wait);
    }
    return 0;
}

static int sum_methods_and_edges(builder *b)
{
    hk_calltree *ct = b->ct;
    hk_u64_map index; /* (caller << 32 | callee) -> edge */
    hk_u64_map_init(&index);
    for (size_t i = 0; i < ct->nnodes; i++) {
        const hk_ct_node *n = &ct->nodes[i];
        ct->self = hk_add_sat(ct->self, n->self);
        ct->wait = hk_add_sat(ct->wait, n->wait);
        if (n->parent == HK_CT_NONE) {
            ct->total = hk_add_sat(ct->total, n->total);
            ct->unattributed = hk_add_sat(ct->unattributed, hk_add_sat(n->self, n->wait));
            if (ct->sampling) ct->calls = hk_add_sat(ct->calls, n->calls);
            continue;
        }
        if (!ct->sampling) ct->calls = hk_add_sat(ct->calls, n->calls);
        if (hk_ct_folded(ct, n)) continue; /* add_fold_edges counts them */
        int64_t calls = ct->sampling && !n->outer ? 0 : n->calls;
        hk_ct_method *m = &ct->methods[n->func - 1];
        m->nnodes++;
        m->calls = hk_add_sat(m->calls, calls);
        m->self = hk_add_sat(m->self, n->self);
        m->wait = hk_add_sat(m->wait, n->wait);
        if (n->outer) m->total = hk_add_sat(m->total, n->total);

        /* caller 0: called from a thread root */
        hk_ct_edge *ed = edge_of(b, &index, ct->nodes[n->parent].func, n->func);
        if (!ed) goto fail;
        ed->calls = hk_add_sat(ed->calls, calls);
        if (!n->outer) continue;
        ed->total = hk_add_sat(ed->total, n->total);
        ed->self = hk_add_sat(ed->self, n->self);
        ed->wait = hk_add_sat(ed->wait, n->wait);
    }
    if (add_fold_edges(b, &index) < 0) goto fail;
    for (size_t f = 0; f < ct->nmethods; f++) {
        hk_ct_method *m = &ct->methods[f];
        m->child = hk_calltree_sub(hk_calltree_sub(m->total, m->self), m->wait);
    }
    for (size_t e = 0; e < ct->nedges; e++) {
        hk_ct_edge *ed = &ct->edges[e];
        ed->child = hk_calltree_sub(hk_calltree_sub(ed->total, ed->self), ed->wait);
    }
    hk_u64_map_free(&index);
    return 0;
fail:
    hk_u64_map_free(&index);
    return -1;
}

/* each method's callers and callees as runs of edge indexes */
static int list_edges(hk_calltree *ct)
{
    ct->caller_edges = malloc((ct->nedges + 1) * sizeof(uint32_t));
    ct->callee_edges = malloc((ct->nedges + 1) * sizeof(uint32_t));
    if (!ct->caller_edges || !ct->callee_edges) return -1;
    for (size_t e = 0; e < ct->nedges; e++) {
        ct->methods[ct->edges[e].callee - 1].ncallers++;
        if (ct->edges[e].caller) ct->methods[ct->edges[e].caller - 1].ncallees++;
    }
    uint32_t in = 0, out = 0;
    for (size_t f = 0; f < ct->nmethods; f++) {
        hk_ct_method *m = &ct->methods[f];
        m->callers_off = in;
        m->callees_off = out;
        in += m->ncallers;
        out += m->ncallees;
        m->ncallers = m->ncallees = 0;
    }
    for (size_t e = 0; e < ct->nedges; e++) {
        hk_ct_method *to = &ct->methods[ct->edges[e].callee - 1];
        ct->caller_edges[to->callers_off + to->ncallers++] = (uint32_t)e;
        if (!ct->edges[e].caller) continue;
        hk_ct_method *from = &ct->methods[ct->edges[e].caller - 1];
        ct->callee_edges[from->callees_off + from->ncallees++] = (uint32_t)e;
    }
    return 0;
}

static int is_type(const hk_profile *p, size_t vi, const char *name)
{
    return strcmp(hk_profile_str(p, p->sample_types[vi].type), name) == 0;
}

/* the measure: default_sample_type if it names a type, else the first type
 * that is not a count of calls, samples or wait, else the last */
static int pick_self(const hk_profile *p)
{
    for (size_t i = 0; i < p->nvalues; i++)
        if (p->default_sample_type && p->sample_types[i].type == p->default_sample_type) return (int)i;
    for (size_t i = 0; i < p->nvalues; i++)
        if (!is_type(p, i, "calls") && !is_type(p, i, "samples") && !is_type(p, i, "wait")) return (int)i;
    return (int)p->nvalues - 1;
}

static void setup(builder *b, const hk_profile *p)
{
    hk_calltree *ct = b->ct;
    ct->profile = p;
    ct->calls_vi = hk_profile_find_value(p, "calls");
    if (ct->calls_vi < 0) {
        ct->calls_vi = hk_profile_find_value(p, "samples");
        ct->sampling = ct->calls_vi >= 0;
    }
    ct->self_vi = pick_self(p);
    ct->wait_vi = hk_profile_find_value(p, "wait");
    if (ct->wait_vi == ct->self_vi) ct->wait_vi = -1;
    ct->alloc_vi = hk_profile_find_value(p, "alloc_objects");
    if (ct->sampling || ct->alloc_vi == ct->self_vi) ct->alloc_vi = -1; /* object mode's is its measure */
    ct->ns = strcmp(hk_profile_str(p, p->sample_types[ct->self_vi].unit), "nanoseconds") == 0;
    ct->nmethods = p->nfunctions;
    for (uint32_t f = 1; p->nfold_edges && f <= p->nfunctions; f++)
        if (strcmp(hk_profile_str(p, hk_profile_func(p, f)->name), "[folded]") == 0) ct->fold_func = f;
    for (uint32_t s = 1; s < p->strings.count; s++) {
        size_t len;
        const char *str = hk_strtab_get(&p->strings, s, &len);
        if (len == 6 && memcmp(str, "thread", 6) == 0) b->thread_key = s;
    }
}

hk_calltree *hk_calltree_build(const hk_profile *p, char *err, size_t errlen)
{
    builder b;
    memset(&b, 0, sizeof(b));
    hk_u64_map_init(&b.children);
    hk_intern_init(&b.threads);
    b.prev_root = HK_CT_NONE;
    if (!p || p->nvalues == 0) {
        set_err(err, errlen, "profile has no sample types (need calls or samples, and a measure)");
        goto fail;
    }
    b.p = p;
    b.ct = calloc(1, sizeof(*b.ct));
    if (!b.ct) goto oom;
    setup(&b, p);
    b.ct->methods = calloc(p->nfunctions + 1, sizeof(*b.ct->methods));
    if (!b.ct->methods) goto oom;
    for (size_t f = 0; f < p->nfunctions; f++) b.ct->methods[f].func = (uint32_t)f + 1;
    for (size_t i = 0; i < p->nsamples; i++) {
        int rc = insert(&b, i, err, errlen);
        if (rc == -2) goto fail;
        if (rc < 0) goto oom;
    }
    hk_u64_map_free(&b.children);
    hk_intern_free(&b.threads);
    free(b.path);
    b.path = NULL;
    hk_locbuf_free(&b.locbufs[0]);
    hk_locbuf_free(&b.locbufs[1]);
    sum_subtrees(b.ct);
    if (mark_outer(b.ct) < 0 || sum_methods_and_edges(&b) < 0 || list_edges(b.ct) < 0) goto oom;
    return b.ct;
oom:
    set_err(err, errlen, "out of memory building the call tree");
fail:
    hk_u64_map_free(&b.children);
    hk_intern_free(&b.threads);
    free(b.path);
    hk_locbuf_free(&b.locbufs[0]);
    hk_locbuf_free(&b.locbufs[1]);
    hk_calltree_free(b.ct);
    return NULL;
}

void hk_calltree_free(hk_calltree *ct)
{
    if (!ct) return;
    free(ct->nodes);
    free(ct->roots);
    free(ct->methods);
    free(ct->edges);
    free(ct->caller_edges);
    free(ct->callee_edges);
    free(ct);
}

const char *hk_calltree_measure(const hk_calltree *ct)
{
    return hk_profile_str(ct->profile, ct->profile->sample_types[ct->self_vi].type);
}

void hk_ct_put_column(hk_buf *out, const hk_calltree *ct, int64_t v)
{
    if (ct->ns) hk_buf_printf(out, " %11.3f", (double)v / 1e6);
    else hk_buf_printf(out, " %11" PRId64, v);
}

double hk_ct_pct(int64_t v, int64_t total) { return total ? 100.0 * (double)v / (double)total : 0.0; }

void hk_ct_put_clean(hk_buf *out, const char *s)
{
    for (; *s; s++) hk_buf_putc(out, (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : (uint8_t)*s);
}

/* a trace past its call-path budget: where the [folded] rows come from, and what of them is exact */
static void put_folded(hk_buf *out, const hk_calltree *ct)
{
    hk_folded f;
    if (!hk_profile_folded(ct->profile, &f)) return;
    hk_buf_printf(out, "Folded: %llu calls past max_paths=%llu, ", f.calls, f.max_paths);
    if (ct->ns) hk_buf_printf(out, "%.3f ms", (double)f.measure / 1e6);
    else hk_buf_printf(out, "%lld %s", f.measure, f.unit);
    if (ct->fold_func) hk_buf_puts(out, ", in [folded] paths (every method's figures, callers and callees are exact)\n");
    else hk_buf_puts(out, ", in [folded] (their methods' calls and self are exact, their totals and callers are not)\n");
}

void hk_ct_put_summary(hk_buf *out, const hk_calltree *ct)
{
    hk_buf_printf(out, "Measure: %s (%s)\n", hk_calltree_measure(ct), ct->ns ? "ms" : "count");
    hk_buf_printf(out, "Threads: %zu\n", ct->nthreads);
    hk_buf_puts(out, "Total:");
    hk_ct_put_column(out, ct, ct->total);
    if (ct->wait_vi >= 0) {
        hk_buf_puts(out, " (self");
        hk_ct_put_column(out, ct, ct->self);
        hk_buf_puts(out, ", wait");
        hk_ct_put_column(out, ct, ct->wait);
        hk_buf_putc(out, ')');
    }
    hk_buf_printf(out, "\n%s: %" PRId64 "\n", ct->sampling ? "Samples" : "Calls", ct->calls);
    put_folded(out, ct);
}
