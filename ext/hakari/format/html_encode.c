/* html_encode.c — see html_encode.h.
 * The tree is built by interning (parent, name) pairs in a map, children after
 * their parents; a second pass lays it out depth first, which makes most
 * parent distances 1 and keeps a 50 000-stack profile's page small.
 */
#include "html_encode.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "u64_map.h"

/* the page, from flamegraph.html (embed_html.rb writes it at build time) */
extern const char hk_flamegraph_html[];
extern const size_t hk_flamegraph_html_len;

typedef struct tree {
    uint32_t *parent, *name; /* node 0 is the root */
    int64_t *self[2];        /* self values: [0] the profile's (a diff's new one), [1] a diff's base */
    size_t n, cap;
    hk_u64_map index;        /* (parent << 32 | name) -> node */
    hk_locbuf stack;         /* a sample's locations, read into it */
} tree;

/* a new node; UINT32_MAX when out of memory */
static uint32_t node_new(tree *t, uint32_t parent, uint32_t name)
{
    size_t cap = t->cap;
    if (hk_array_grow((void **)&t->parent, &cap, t->n + 1, sizeof(*t->parent)) < 0) return UINT32_MAX;
    cap = t->cap;
    if (hk_array_grow((void **)&t->name, &cap, t->n + 1, sizeof(*t->name)) < 0) return UINT32_MAX;
    for (int k = 0; k < 2; k++) {
        cap = t->cap;
        if (hk_array_grow((void **)&t->self[k], &cap, t->n + 1, sizeof(*t->self[k])) < 0) return UINT32_MAX;
    }
    t->cap = cap;
    t->parent[t->n] = parent;
    t->name[t->n] = name;
    t->self[0][t->n] = t->self[1][t->n] = 0;
    return (uint32_t)t->n++;
}

/* the child of parent named name, made when missing; UINT32_MAX when out of memory */
static uint32_t child(tree *t, uint32_t parent, uint32_t name)
{
    uint64_t key = ((uint64_t)parent + 1) << 32 | name; /* never 0, which the map keeps for empty */
    uint32_t node;
    if (hk_u64_map_get(&t->index, key, &node)) return node;
    if ((node = node_new(t, parent, name)) == UINT32_MAX || hk_u64_map_put(&t->index, key, node) < 0)
        return UINT32_MAX;
    return node;
}

static void tree_free(tree *t)
{
    free(t->parent);
    free(t->name);
    hk_locbuf_free(&t->stack);
    free(t->self[0]);
    free(t->self[1]);
    hk_u64_map_free(&t->index);
}

/* sample i's thread label, or -1 */
static int64_t thread_of(const hk_profile *p, size_t i)
{
    const hk_label *l = hk_profile_sample_labels(p, i);
    for (uint32_t j = 0; j < p->samples[i].nlabel; j++)
        if (!l[j].str && strcmp(hk_profile_str(p, l[j].key), "thread") == 0) return l[j].num;
    return -1;
}

/* the distinct thread labels, sorted, into *threads; their number, or -1 when out of memory */
static int by_num(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
static long threads_of(const hk_profile *p, int64_t **threads)
{
    int64_t *t = malloc((p->nsamples + 1) * sizeof(*t));
    if (!t) return -1;
    size_t n = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        if ((t[n] = thread_of(p, i)) >= 0) n++;
    qsort(t, n, sizeof(*t), by_num);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || t[i] != t[k - 1]) t[k++] = t[i];
    *threads = t;
    return (long)k;
}

/* the nodes depth first: order[k] is the k-th node; 0, or -1 when out of memory */
static int depth_first(const tree *t, uint32_t *order)
{
    uint32_t *first = malloc((t->n + 1) * sizeof(*first)), *next = malloc((t->n + 1) * sizeof(*next));
    uint32_t *stack = malloc((t->n + 1) * sizeof(*stack));
    if (!first || !next || !stack) {
        free(first);
        free(next);
        free(stack);
        return -1;
    }
    for (size_t i = 0; i < t->n; i++) first[i] = UINT32_MAX;
    for (size_t i = t->n; i-- > 1;) { /* children linked in the order they were made */
        next[i] = first[t->parent[i]];
        first[t->parent[i]] = (uint32_t)i;
    }
    size_t top = 0, k = 0;
    stack[top++] = 0;
    while (top) {
        uint32_t i = stack[--top];
        order[k++] = i;
        /* pushed in reverse so that the first child comes out first */
        size_t mark = top;
        for (uint32_t c = first[i]; c != UINT32_MAX; c = next[c]) stack[top++] = c;
        for (size_t a = mark, b = top; b > a + 1; a++, b--) {
            uint32_t x = stack[a];
            stack[a] = stack[b - 1];
            stack[b - 1] = x;
        }
    }
    free(first);
    free(next);
    free(stack);
    return 0;
}

/* The page's DATA: p's header (its default value's type and unit, duration,
 * frequency, comments), the names of np's functions (with "thread N" after
 * them for the threads given), their files, and the tree; with diff, each
 * node's base self value too. */
static void write_data(hk_buf *out, const hk_profile *p, const hk_profile *np, const tree *t, const uint32_t *order,
                       uint32_t *pos, const int64_t *threads, long nthreads, int micro, int diff)
{
    size_t vi = hk_profile_default_value(p);
    hk_buf_puts(out, "{\"type\":");
    hk_json_str(out, hk_profile_str(p, p->sample_types[vi].type));
    hk_buf_puts(out, ",\"unit\":");
    hk_json_str(out, micro ? "microseconds" : hk_profile_str(p, p->sample_types[vi].unit));
    hk_buf_printf(out, ",\"duration_ns\":%" PRId64 ",\"frequency\":%" PRId64, p->duration_nanos,
                  p->period > 0 && strcmp(hk_profile_str(p, p->period_type.unit), "nanoseconds") == 0
                      ? (int64_t)(1000000000 / p->period)
                      : 0);
    hk_buf_puts(out, ",\"comments\":[");
    for (size_t c = 0; c < p->ncomments; c++) {
        if (c) hk_buf_putc(out, ',');
        hk_json_str(out, hk_profile_str(p, p->comments[c]));
    }
    size_t nf = np->nfunctions;
    hk_buf_puts(out, "],\"names\":[");
    for (size_t f = 0; f < nf; f++) {
        if (f) hk_buf_putc(out, ',');
        hk_json_str(out, hk_profile_str(np, np->functions[f].name));
    }
    for (long k = 0; k < nthreads; k++) hk_buf_printf(out, "%s\"thread %" PRId64 "\"", nf || k ? "," : "", threads[k]);
    hk_buf_puts(out, nf || nthreads ? ",\"[smaller frames]\"" : "\"[smaller frames]\""); /* prune's */
    hk_buf_puts(out, "],\"files\":[");
    for (size_t f = 0; f < nf; f++) {
        if (f) hk_buf_putc(out, ',');
        /* "file:line": two blocks of one name in one file are told apart */
        hk_buf_putc(out, '"');
        hk_json_chars(out, hk_profile_str(np, np->functions[f].filename));
        if (np->functions[f].start_line > 0) hk_buf_printf(out, ":%" PRId64, np->functions[f].start_line);
        hk_buf_putc(out, '"');
    }
    for (long k = 0; k <= nthreads; k++) hk_buf_puts(out, nf || k ? ",\"\"" : "\"\"");
    hk_buf_puts(out, "],\"kinds\":[");
    for (size_t f = 0; f <= nf + (size_t)nthreads; f++) {
        if (f) hk_buf_putc(out, ',');
        hk_buf_putc(out, f < nf ? '0' : f < nf + (size_t)nthreads ? '2' : '1'); /* 2: a thread; 1: folded frames */
    }
    for (size_t k = 0; k < t->n; k++) pos[order[k]] = (uint32_t)k;
    for (int which = 0; which < 1 + diff; which++) {
        hk_buf_puts(out, which ? "],\"base\":[" : "],\"nodes\":[");
        for (size_t k = 0; k < t->n; k++) {
            uint32_t i = order[k];
            int64_t v = micro ? (t->self[which][i] + 500) / 1000 : t->self[which][i];
            if (which) hk_buf_printf(out, "%s%" PRId64, k ? "," : "", v);
            else hk_buf_printf(out, "%s%u,%u,%" PRId64, k ? "," : "", k ? (uint32_t)k - pos[t->parent[i]] : 0u, t->name[i], v);
        }
    }
    hk_buf_puts(out, "]}");
}

/* p's samples into the tree, their default value into t->self[which]; name_of[f] is the
 * name of p's function f (NULL: f itself); with threads, each under its thread's node,
 * named first_thread + its place among them. 0, or -1 when out of memory. */
static int add_samples(tree *t, const hk_profile *p, const uint32_t *name_of, const int64_t *threads, long nthreads,
                       uint32_t first_thread, int which)
{
    size_t vi = hk_profile_default_value(p);
    for (size_t i = 0; i < p->nsamples && p->nvalues; i++) {
        uint32_t node = 0;
        if (nthreads > 1) {
            int64_t th = thread_of(p, i);
            const int64_t *at = th >= 0 ? bsearch(&th, threads, (size_t)nthreads, sizeof(*threads), by_num) : NULL;
            if (at && (node = child(t, 0, first_thread + (uint32_t)(at - threads))) == UINT32_MAX) return -1;
        }
        const uint32_t *locs = hk_profile_sample_locs(p, i, &t->stack);
        if (!locs) return -1;
        for (uint32_t j = p->samples[i].nloc; j-- > 0;) {
            uint32_t f = hk_profile_loc(p, locs[j])->function_id - 1;
            if ((node = child(t, node, name_of ? name_of[f] : f)) == UINT32_MAX) return -1;
        }
        t->self[which][node] = hk_add_sat(t->self[which][node], hk_profile_sample_values(p, i)[vi]);
    }
    return 0;
}

/* A page holds at most this many nodes: about 1.5 MB, drawn in well under a second. */
#define NODE_BUDGET 100000

static int by_value_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* Past the budget, the smallest subtrees (by the profile's totals) fold into one node per
 * parent named `small`, holding their totals (a diff's base too): their frames would be
 * under a pixel wide, and a profile of many thousand stacks would make a page of tens of
 * megabytes that a browser takes seconds to open. 0, or -1 when out of memory. */
static int prune(tree *t, uint32_t small)
{
    if (t->n <= NODE_BUDGET) return 0;
    int rc = -1;
    int64_t *total[2] = {malloc(t->n * sizeof(int64_t)), malloc(t->n * sizeof(int64_t))}, *sorted = NULL;
    uint32_t *to = malloc(t->n * sizeof(*to));
    tree u = {0};
    hk_u64_map_init(&u.index);
    if (!total[0] || !total[1] || !to || !(sorted = malloc(t->n * sizeof(*sorted)))) goto done;
    for (int k = 0; k < 2; k++) memcpy(total[k], t->self[k], t->n * sizeof(int64_t));
    for (size_t i = t->n; i-- > 1;) /* children come after their parents */
        for (int k = 0; k < 2; k++) total[k][t->parent[i]] = hk_add_sat(total[k][t->parent[i]], total[k][i]);
    memcpy(sorted, total[0], t->n * sizeof(int64_t));
    qsort(sorted, t->n, sizeof(*sorted), by_value_desc);
    int64_t least = sorted[NODE_BUDGET - 1];
    if (node_new(&u, 0, 0) != 0) goto done;
    to[0] = 0;
    for (size_t i = 1; i < t->n; i++) {
        uint32_t up = to[t->parent[i]];
        if (up == UINT32_MAX) { /* a folded subtree: counted with its root */
            to[i] = UINT32_MAX;
            continue;
        }
        int keep = total[0][i] > least || (total[0][i] == least && i < NODE_BUDGET);
        uint32_t node = child(&u, up, keep ? t->name[i] : small);
        if (node == UINT32_MAX) goto done;
        for (int k = 0; k < 2; k++)
            u.self[k][node] = hk_add_sat(u.self[k][node], keep ? t->self[k][i] : total[k][i]);
        to[i] = keep ? node : UINT32_MAX;
    }
    tree_free(t);
    *t = u;
    u = (tree){0};
    rc = 0;
done:
    tree_free(&u);
    free(total[0]);
    free(total[1]);
    free(sorted);
    free(to);
    return rc;
}

/* the page around the data: flamegraph.html with DATA filled in */
static int write_page(hk_buf *out, const hk_profile *p, const hk_profile *np, tree *t, const int64_t *threads,
                      long nthreads, int diff)
{
    if (prune(t, (uint32_t)(np->nfunctions + (size_t)nthreads)) < 0) return -1;
    uint32_t *order = malloc((t->n + 1) * sizeof(*order)), *pos = malloc((t->n + 1) * sizeof(*pos));
    int rc = -1;
    if (order && pos && depth_first(t, order) == 0) {
        size_t vi = hk_profile_default_value(p);
        int micro = p->nvalues && strcmp(hk_profile_str(p, p->sample_types[vi].unit), "nanoseconds") == 0;
        const char *at = strstr(hk_flamegraph_html, "/*HAKARI_DATA*/");
        size_t head = (size_t)(at - hk_flamegraph_html), mark = strlen("/*HAKARI_DATA*/");
        hk_buf_append(out, hk_flamegraph_html, head);
        write_data(out, p, np, t, order, pos, threads, nthreads, micro, diff);
        hk_buf_append(out, hk_flamegraph_html + head + mark, hk_flamegraph_html_len - head - mark);
        rc = hk_buf_ok(out) ? 0 : -1;
    }
    free(order);
    free(pos);
    return rc;
}

int hk_html_encode(const hk_profile *p, hk_buf *out)
{
    tree t = {0};
    hk_u64_map_init(&t.index);
    int64_t *threads = NULL;
    int rc = -1;
    long nthreads = threads_of(p, &threads);
    if (nthreads < 0 || node_new(&t, 0, 0) != 0) goto done; /* the root: node 0, in no path */
    if (nthreads < 2) nthreads = 0;
    if (add_samples(&t, p, NULL, threads, nthreads, (uint32_t)p->nfunctions, 0) < 0) goto done;
    rc = write_page(out, p, p, &t, threads, nthreads, 0);
done:
    tree_free(&t);
    free(threads);
    return rc;
}

/* each of p's functions' id in ids (interned by name, file and first line) less 1; NULL when out of memory */
static uint32_t *unified_names(const hk_profile *p, hk_profile *ids)
{
    uint32_t *name_of = malloc((p->nfunctions + 1) * sizeof(*name_of));
    for (size_t f = 0; name_of && f < p->nfunctions; f++) {
        const hk_function *fn = &p->functions[f];
        uint32_t id = hk_profile_function(ids, hk_profile_string(ids, hk_profile_str(p, fn->name)), 0,
                                          hk_profile_string(ids, hk_profile_str(p, fn->filename)), fn->start_line);
        name_of[f] = id ? id - 1 : 0;
    }
    return name_of;
}

int hk_html_diff_encode(const hk_profile *base, const hk_profile *new, hk_buf *out)
{
    tree t = {0};
    hk_u64_map_init(&t.index);
    hk_profile *ids = hk_profile_new();
    uint32_t *base_names = ids ? unified_names(base, ids) : NULL, *new_names = ids ? unified_names(new, ids) : NULL;
    int rc = -1;
    /* one tree of both, threads merged (a thread of one run is not one of the other) */
    if (!base_names || !new_names || !hk_profile_ok(ids) || node_new(&t, 0, 0) != 0 ||
        add_samples(&t, new, new_names, NULL, 0, 0, 0) < 0 || add_samples(&t, base, base_names, NULL, 0, 0, 1) < 0)
        goto done;
    rc = write_page(out, new, ids, &t, NULL, 0, 1);
done:
    tree_free(&t);
    hk_profile_free(ids);
    free(base_names);
    free(new_names);
    return rc;
}
