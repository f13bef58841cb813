/* callgrind_encode.c — see callgrind_encode.h.
 * Layout while encoding: `cost[loc]` sums the self and wait of every node at
 * a location (threads merged); `calls` holds one record per (caller location,
 * callee function), found through a map keyed (loc << 32 | callee). Both are
 * sorted by function and line, then written function by function. Totals are
 * summed from the very numbers written, so the file is consistent with
 * itself even when the profile holds negative or overflowing values.
 */
#include "callgrind_encode.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "intern_table.h"
#include "u64_map.h"

typedef struct cost { int64_t self, wait, alloc; int used; } cost;
typedef struct site { uint32_t func, loc; int64_t line; } site; /* a used location */
typedef struct call {
    uint32_t caller_func, caller_loc, callee;
    int64_t caller_line, calls, self, wait, alloc;
} call;

typedef struct enc {
    const hk_calltree *ct;
    const hk_profile *p;
    hk_buf *out;
    uint32_t *file_ids, *fn_ids; /* compressed ids by string index / function id, 0 = unused yet */
    uint32_t nfile, nfn;
    uint8_t *shared;             /* by function id: another function has its name and file */
    cost *cost;                  /* by location id */
    site *sites; size_t nsites;
    call *calls; size_t ncalls, calls_cap;
} enc;

static int by_site(const void *a, const void *b)
{
    const site *x = a, *y = b;
    if (x->func != y->func) return x->func < y->func ? -1 : 1;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    return x->loc < y->loc ? -1 : x->loc > y->loc;
}

static int by_call(const void *a, const void *b)
{
    const call *x = a, *y = b;
    if (x->caller_func != y->caller_func) return x->caller_func < y->caller_func ? -1 : 1;
    if (x->caller_line != y->caller_line) return x->caller_line < y->caller_line ? -1 : 1;
    if (x->caller_loc != y->caller_loc) return x->caller_loc < y->caller_loc ? -1 : 1;
    return x->callee < y->callee ? -1 : x->callee > y->callee;
}

static int64_t clamp(int64_t v) { return v < 0 ? 0 : v; }
static int64_t line_of(int64_t line) { return line < 0 ? 0 : line; }

/* names run to the end of the line: control bytes would end or corrupt it */
static void put_text(hk_buf *out, const char *s)
{
    if (!*s) s = "???";
    for (; *s; s++) hk_buf_putc(out, (unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : (uint8_t)*s);
}

static void put_file(enc *e, const char *key, uint32_t str)
{
    if (e->file_ids[str]) {
        hk_buf_printf(e->out, "%s=(%" PRIu32 ")\n", key, e->file_ids[str]);
        return;
    }
    e->file_ids[str] = ++e->nfile;
    hk_buf_printf(e->out, "%s=(%" PRIu32 ") ", key, e->nfile);
    put_text(e->out, hk_profile_str(e->p, str));
    hk_buf_putc(e->out, '\n');
}

static void put_fn(enc *e, const char *key, uint32_t func)
{
    if (e->fn_ids[func]) {
        hk_buf_printf(e->out, "%s=(%" PRIu32 ")\n", key, e->fn_ids[func]);
        return;
    }
    e->fn_ids[func] = ++e->nfn;
    hk_buf_printf(e->out, "%s=(%" PRIu32 ") ", key, e->nfn);
    const hk_function *f = func ? hk_profile_func(e->p, func) : NULL;
    put_text(e->out, f ? hk_profile_str(e->p, f->name) : "[no stack]");
    if (f && e->shared[func] && f->start_line > 0) hk_buf_printf(e->out, ":%" PRId64, f->start_line);
    hk_buf_putc(e->out, '\n');
}

/* readers know a function by file and name, and Ruby has many "block in x"
 * in one file: those get their first line appended, or they would merge */
static int mark_shared_names(enc *e)
{
    const hk_profile *p = e->p;
    hk_intern_table seen;
    hk_intern_init(&seen);
    uint32_t *first = malloc((p->nfunctions + 1) * sizeof(*first));
    if (!first) return -1;
    for (uint32_t f = 1; f <= p->nfunctions; f++) {
        uint32_t key[2] = {hk_profile_func(p, f)->name, hk_profile_func(p, f)->filename};
        size_t known = hk_intern_count(&seen);
        int64_t id = hk_intern_seq(&seen, key, 2);
        if (id < 0) {
            free(first);
            hk_intern_free(&seen);
            return -1;
        }
        if ((size_t)id == known) first[id] = f;
        else e->shared[f] = e->shared[first[id]] = 1;
    }
    free(first);
    hk_intern_free(&seen);
    return 0;
}

static void put_cost(enc *e, int64_t line, int64_t self, int64_t wait, int64_t alloc)
{
    hk_buf_printf(e->out, "%" PRId64 " %" PRId64, line_of(line), clamp(self));
    if (e->ct->wait_vi >= 0) hk_buf_printf(e->out, " %" PRId64, clamp(wait));
    if (e->ct->alloc_vi >= 0) hk_buf_printf(e->out, " %" PRId64, clamp(alloc));
    hk_buf_putc(e->out, '\n');
}

/* "Wall_ns" from "wall"/nanoseconds: event names must be one word */
static void put_event(hk_buf *out, const char *type, int ns)
{
    if (!*type) type = "Cost";
    for (const char *c = type; *c; c++) {
        int ok = isalnum((unsigned char)*c) && !((unsigned char)*c & 0x80);
        hk_buf_putc(out, !ok ? '_' : c == type ? (uint8_t)toupper((unsigned char)*c) : (uint8_t)*c);
    }
    if (ns) hk_buf_puts(out, "_ns");
}

static void header(enc *e, int64_t self, int64_t wait, int64_t alloc)
{
    const hk_calltree *ct = e->ct;
    hk_buf *out = e->out;
    hk_buf_printf(out, "# callgrind format\n# hakari: %s profile, %zu thread(s) merged; self cost excludes wait\n"
                       "version: 1\ncreator: hakari\npositions: line\nevents: ",
                  ct->sampling ? "sampling" : "tracing", ct->nthreads);
    put_event(out, hk_calltree_measure(ct), ct->ns);
    if (ct->wait_vi >= 0) {
        hk_buf_putc(out, ' ');
        put_event(out, "wait", ct->ns);
    }
    if (ct->alloc_vi >= 0) hk_buf_puts(out, " Alloc_objects");
    hk_buf_printf(out, "\nsummary: %" PRId64, self);
    if (ct->wait_vi >= 0) hk_buf_printf(out, " %" PRId64, wait);
    if (ct->alloc_vi >= 0) hk_buf_printf(out, " %" PRId64, alloc);
    hk_buf_puts(out, "\n\n");
}

static void body(enc *e)
{
    const hk_profile *p = e->p;
    size_t c = 0;
    for (size_t s = 0; s < e->nsites;) {
        uint32_t f = e->sites[s].func;
        put_file(e, "fl", hk_profile_func(p, f)->filename);
        put_fn(e, "fn", f);
        for (; s < e->nsites && e->sites[s].func == f; s++) {
            const cost *k = &e->cost[e->sites[s].loc];
            put_cost(e, e->sites[s].line, k->self, k->wait, k->alloc);
        }
        for (; c < e->ncalls && e->calls[c].caller_func == f; c++) {
            const call *k = &e->calls[c];
            const hk_function *to = hk_profile_func(p, k->callee);
            put_file(e, "cfl", to->filename);
            put_fn(e, "cfn", k->callee);
            /* a count of 0 would make the reader take the cost line for self cost */
            hk_buf_printf(e->out, "calls=%" PRId64 " %" PRId64 "\n", k->calls > 0 ? k->calls : 1,
                          line_of(to->start_line));
            put_cost(e, k->caller_line, k->self, k->wait, k->alloc);
        }
        hk_buf_putc(e->out, '\n');
    }
}

/* the record of calls from location caller_loc to function callee, made when new; NULL when
 * out of memory */
static call *call_record(enc *e, hk_u64_map *index, uint32_t caller_loc, uint32_t callee)
{
    uint64_t key = (uint64_t)caller_loc << 32 | callee;
    uint32_t i;
    if (!hk_u64_map_get(index, key, &i)) {
        if (e->ncalls == e->calls_cap) {
            size_t cap = e->calls_cap ? e->calls_cap * 2 : 64;
            call *q = realloc(e->calls, cap * sizeof(*q));
            if (!q) return NULL;
            e->calls = q;
            e->calls_cap = cap;
        }
        if (hk_u64_map_put(index, key, (uint32_t)e->ncalls) < 0) return NULL;
        i = (uint32_t)e->ncalls++;
        const hk_location *l = hk_profile_loc(e->p, caller_loc);
        e->calls[i] = (call){l->function_id, caller_loc, callee, l->line, 0, 0, 0, 0};
    }
    return &e->calls[i];
}

/* one record per (caller location, callee); calls with neither calls nor cost are left out */
static int collect_call(enc *e, hk_u64_map *index, const hk_ct_node *n)
{
    const hk_calltree *ct = e->ct;
    const hk_ct_node *up = &ct->nodes[n->parent];
    int64_t calls = ct->sampling && !n->outer ? 0 : n->calls;
    int64_t self = n->outer ? hk_calltree_sub(n->total, n->wait_total) : 0;
    int64_t wait = n->outer ? n->wait_total : 0;
    int64_t alloc = n->outer ? n->alloc_total : 0;
    if (calls <= 0 && self <= 0 && wait <= 0 && alloc <= 0) return 0;
    call *k = call_record(e, index, up->loc, n->func);
    if (!k) return -1;
    k->calls = hk_add_sat(k->calls, calls);
    k->self = hk_add_sat(k->self, self);
    k->wait = hk_add_sat(k->wait, wait);
    k->alloc = hk_add_sat(k->alloc, alloc);
    return 0;
}

/* the cost of location loc, listed as a site on first use */
static cost *site_cost(enc *e, uint32_t loc)
{
    cost *k = &e->cost[loc];
    if (!k->used) {
        k->used = 1;
        const hk_location *l = hk_profile_loc(e->p, loc);
        e->sites[e->nsites++] = (site){l->function_id, loc, l->line};
    }
    return k;
}

/* a trace's folded calls (profile.h's fold edges), in place of its [folded] nodes: each
 * callee's self and wait at its location, each (caller, callee) pair a call record with the
 * calls' inclusive cost (their objects made below them are not known: 0) */
static int collect_fold_edges(enc *e, hk_u64_map *index)
{
    const hk_profile *p = e->p;
    for (size_t i = 0; e->ct->fold_func && i < p->nfold_edges; i++) {
        const hk_fold_edge *fe = &p->fold_edges[i];
        if (!hk_fold_edge_ok(p, fe)) continue;
        cost *k = site_cost(e, fe->callee);
        k->self = hk_add_sat(k->self, fe->self);
        k->wait = hk_add_sat(k->wait, fe->wait);
        if (!fe->caller) continue; /* called from a thread's root: no caller to list it under */
        call *c = call_record(e, index, fe->caller, hk_profile_loc(p, fe->callee)->function_id);
        if (!c) return -1;
        c->calls = hk_add_sat(c->calls, fe->calls);
        c->self = hk_add_sat(c->self, hk_calltree_sub(fe->total, fe->outer_wait_total));
        c->wait = hk_add_sat(c->wait, fe->outer_wait_total);
    }
    return 0;
}

static int collect(enc *e, cost *nostack)
{
    const hk_calltree *ct = e->ct;
    hk_u64_map index;
    hk_u64_map_init(&index);
    for (size_t i = 0; i < ct->nnodes; i++) {
        const hk_ct_node *n = &ct->nodes[i];
        if (n->parent != HK_CT_NONE && hk_ct_folded(ct, n)) { /* collect_fold_edges has its time */
            if (n->alloc) site_cost(e, n->loc)->alloc = hk_add_sat(e->cost[n->loc].alloc, n->alloc);
            continue;
        }
        cost *k = n->parent == HK_CT_NONE ? nostack : site_cost(e, n->loc);
        k->self = hk_add_sat(k->self, n->self);
        k->wait = hk_add_sat(k->wait, n->wait);
        k->alloc = hk_add_sat(k->alloc, n->alloc);
        if (n->parent == HK_CT_NONE) continue;
        if (ct->nodes[n->parent].parent != HK_CT_NONE && collect_call(e, &index, n) < 0) goto fail;
    }
    if (collect_fold_edges(e, &index) < 0) goto fail;
    hk_u64_map_free(&index);
    qsort(e->sites, e->nsites, sizeof(*e->sites), by_site);
    if (e->ncalls) qsort(e->calls, e->ncalls, sizeof(*e->calls), by_call);
    return 0;
fail:
    hk_u64_map_free(&index);
    return -1;
}

int hk_callgrind_encode(const hk_profile *p, hk_buf *out)
{
    int rc = -1;
    enc e;
    memset(&e, 0, sizeof(e));
    e.p = p;
    e.out = out;
    e.ct = hk_calltree_build(p, NULL, 0);
    if (!e.ct) return -1;
    e.file_ids = calloc(p->strings.count + 1, sizeof(*e.file_ids));
    e.fn_ids = calloc(p->nfunctions + 1, sizeof(*e.fn_ids));
    e.shared = calloc(p->nfunctions + 1, 1);
    e.cost = calloc(p->nlocations + 1, sizeof(*e.cost));
    e.sites = malloc((p->nlocations + 1) * sizeof(*e.sites));
    cost nostack = {0, 0, 0, 0};
    if (!e.file_ids || !e.fn_ids || !e.shared || !e.cost || !e.sites || mark_shared_names(&e) < 0 ||
        collect(&e, &nostack) < 0)
        goto fail;

    int64_t self = clamp(nostack.self), wait = clamp(nostack.wait), alloc = clamp(nostack.alloc);
    for (size_t s = 0; s < e.nsites; s++) {
        self = hk_add_sat(self, clamp(e.cost[e.sites[s].loc].self));
        wait = hk_add_sat(wait, clamp(e.cost[e.sites[s].loc].wait));
        alloc = hk_add_sat(alloc, clamp(e.cost[e.sites[s].loc].alloc));
    }
    header(&e, self, wait, alloc);
    body(&e);
    if (nostack.self > 0 || nostack.wait > 0 || nostack.alloc > 0) {
        hk_buf_printf(out, "fl=(%" PRIu32 ") ???\n", ++e.nfile);
        put_fn(&e, "fn", 0);
        put_cost(&e, 0, nostack.self, nostack.wait, nostack.alloc);
        hk_buf_putc(out, '\n');
    }
    hk_buf_printf(out, "totals: %" PRId64, self);
    if (e.ct->wait_vi >= 0) hk_buf_printf(out, " %" PRId64, wait);
    if (e.ct->alloc_vi >= 0) hk_buf_printf(out, " %" PRId64, alloc);
    hk_buf_putc(out, '\n');
    rc = hk_buf_ok(out) ? 0 : -1;
fail:
    hk_calltree_free((hk_calltree *)e.ct);
    free(e.file_ids);
    free(e.fn_ids);
    free(e.shared);
    free(e.cost);
    free(e.sites);
    free(e.calls);
    return rc;
}
