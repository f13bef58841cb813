/* test_calltree.c — the call tree and method table, against calltree.h, on
 * tracing_fixture.h's profiles whose numbers are worked out by hand: exact
 * per-method calls/self/wait/total/child, recursion (direct and indirect)
 * counted once per path, callers and callees, threads kept apart as nodes and
 * merged as methods, sampling profiles, odd input (no sample types, bad ids,
 * empty stacks, extreme values), paths 100 000 deep, 100 000 nodes, and every
 * allocation failing in turn. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "alloc_fail.h"
#include "calltree.h"
#include "check.h"
#include "fixture.h"
#include "pprof_decode.h"
#include "pprof_encode.h"
#include "tracing_fixture.h"

#define MS TF_MS

static const hk_ct_method *method(const hk_calltree *ct, const char *name)
{
    for (size_t f = 0; f < ct->nmethods; f++)
        if (ct->methods[f].nnodes &&
            strcmp(hk_profile_str(ct->profile, hk_profile_func(ct->profile, ct->methods[f].func)->name), name) == 0)
            return &ct->methods[f];
    return NULL;
}

static const hk_ct_edge *edge(const hk_calltree *ct, const char *from, const char *to)
{
    const hk_ct_method *a = method(ct, from), *b = method(ct, to);
    for (size_t e = 0; a && b && e < ct->nedges; e++)
        if (ct->edges[e].caller == a->func && ct->edges[e].callee == b->func) return &ct->edges[e];
    return NULL;
}

#define CHECK_METHOD(ct, name, calls_, self_, wait_, total_, rec_)                          \
    do {                                                                                   \
        const hk_ct_method *m_ = method(ct, name);                                         \
        CHECK_MSG(m_ != NULL, "no method %s", name);                                       \
        CHECK_INT(m_->calls, calls_);                                                      \
        CHECK_INT(m_->self, self_);                                                        \
        CHECK_INT(m_->wait, wait_);                                                        \
        CHECK_INT(m_->total, total_);                                                      \
        CHECK_INT(m_->child, (total_) - (self_) - (wait_));                                \
        CHECK_INT(m_->recursive, rec_);                                                    \
    } while (0)

#define CHECK_EDGE(ct, from, to, calls_, total_)                                           \
    do {                                                                                   \
        const hk_ct_edge *e_ = edge(ct, from, to);                                         \
        CHECK_MSG(e_ != NULL, "no edge %s -> %s", from, to);                               \
        CHECK_INT(e_->calls, calls_);                                                      \
        CHECK_INT(e_->total, total_);                                                      \
    } while (0)

static hk_calltree *build(const hk_profile *p)
{
    char err[128] = "";
    hk_calltree *ct = hk_calltree_build(p, err, sizeof(err));
    if (!ct) printf("        build failed: %s\n", err);
    return ct;
}

static void test_fib_methods(void)
{
    hk_profile *p = tf_fib();
    hk_calltree *ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->nthreads, 1);
    CHECK_INT(ct->nnodes, 9); /* a root and the 8 nodes */
    CHECK_INT(ct->sampling, 0);
    CHECK_STR(hk_calltree_measure(ct), "wall");
    CHECK_INT(ct->total, 60 * MS);
    CHECK_INT(ct->self, 57 * MS);
    CHECK_INT(ct->wait, 3 * MS);
    CHECK_INT(ct->calls, 18);
    CHECK_INT(ct->unattributed, 0);
    CHECK_METHOD(ct, "main", 1, 10 * MS, 0, 60 * MS, 0);
    CHECK_METHOD(ct, "fib", 7, 17 * MS, 1 * MS, 41 * MS, 1);
    CHECK_METHOD(ct, "helper", 10, 30 * MS, 2 * MS, 32 * MS, 0);
    /* node totals, and only the first fib on a path is outer */
    int outer_fibs = 0, fibs = 0;
    for (size_t i = 0; i < ct->nnodes; i++) {
        const hk_ct_node *n = &ct->nodes[i];
        if (n->func != method(ct, "fib")->func) continue;
        fibs++;
        outer_fibs += n->outer;
        if (n->outer) CHECK_INT(n->total, 41 * MS);
    }
    CHECK_INT(fibs, 3);
    CHECK_INT(outer_fibs, 1);
    hk_calltree_free(ct);
    hk_profile_free(p);
}

static void test_fib_edges(void)
{
    hk_profile *p = tf_fib();
    hk_calltree *ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->nedges, 5); /* with [root] > main */
    CHECK_EDGE(ct, "main", "fib", 1, 41 * MS);
    CHECK_EDGE(ct, "fib", "fib", 6, 0); /* inner calls counted, their time is in the outer call */
    CHECK_EDGE(ct, "fib", "helper", 7, 23 * MS);
    CHECK_EDGE(ct, "main", "helper", 3, 9 * MS);
    const hk_ct_edge *e = edge(ct, "main", "fib");
    CHECK_INT(e->self, 5 * MS);
    CHECK_INT(e->wait, 1 * MS);
    CHECK_INT(e->child, 35 * MS);
    /* a method's callers add up to its total, and the lists hold the right edges */
    for (size_t f = 0; f < ct->nmethods; f++) {
        const hk_ct_method *m = &ct->methods[f];
        int64_t in = 0;
        for (uint32_t i = 0; i < m->ncallers; i++) {
            const hk_ct_edge *c = &ct->edges[ct->caller_edges[m->callers_off + i]];
            CHECK_INT(c->callee, m->func);
            in += c->total;
        }
        for (uint32_t i = 0; i < m->ncallees; i++)
            CHECK_INT(ct->edges[ct->callee_edges[m->callees_off + i]].caller, m->func);
        if (m->nnodes) CHECK_INT(in, m->total);
    }
    CHECK_INT(method(ct, "fib")->ncallers, 2);
    CHECK_INT(method(ct, "fib")->ncallees, 2);
    CHECK_INT(method(ct, "main")->ncallers, 1);
    const hk_ct_edge *root = &ct->edges[ct->caller_edges[method(ct, "main")->callers_off]];
    CHECK(root->caller == 0 && root->calls == 1 && root->total == 60 * MS);
    hk_calltree_free(ct);
    hk_profile_free(p);
}

/* tf_fib past a call-path budget of three paths, as the tracer writes it: every call below
 * main > fib folds into a [folded] node there, one leaf per method, and the fold edges hold
 * what those paths lose (fib's 6 inner calls, called by fib and inside fib: no outer call;
 * helper's 7 calls, by fib: all outer, 23 ms with 2 ms of wait) */
static hk_profile *fib_folded(void)
{
    static const char *const names[] = {"main", "fib", "helper", "[folded]"};
    tf t = tf_new("wall", "nanoseconds", names, 4);
    tf_node(&t, 1, "0", 1, 10, 0);
    tf_node(&t, 1, "10", 1, 5, 1);
    tf_node(&t, 1, "20", 3, 9, 0);
    tf_node(&t, 1, "1310", 6, 12, 0);
    tf_node(&t, 1, "2310", 7, 21, 2);
    hk_fold_edge fib = {t.loc[1], t.loc[1], 6, 12 * MS, 0, 0, 0, 0, 0, 0};
    hk_fold_edge helper = {t.loc[1], t.loc[2], 7, 21 * MS, 2 * MS, 7, 23 * MS, 21 * MS, 2 * MS, 2 * MS};
    hk_profile_add_fold_edge(t.p, &fib);
    hk_profile_add_fold_edge(t.p, &helper);
    return t.p;
}

/* the figures of tf_fib's table, exactly, with no [folded] row */
static void check_fib_table(const hk_calltree *ct)
{
    CHECK_INT(ct->total, 60 * MS);
    CHECK_INT(ct->calls, 18);
    CHECK_METHOD(ct, "main", 1, 10 * MS, 0, 60 * MS, 0);
    CHECK_METHOD(ct, "fib", 7, 17 * MS, 1 * MS, 41 * MS, 1);
    CHECK_METHOD(ct, "helper", 10, 30 * MS, 2 * MS, 32 * MS, 0);
    CHECK(method(ct, "[folded]") == NULL);
    CHECK_INT(ct->nedges, 5);
    CHECK_EDGE(ct, "main", "fib", 1, 41 * MS);
    CHECK_EDGE(ct, "fib", "fib", 6, 0);
    CHECK_EDGE(ct, "fib", "helper", 7, 23 * MS);
    CHECK_EDGE(ct, "main", "helper", 3, 9 * MS);
    const hk_ct_edge *e = edge(ct, "fib", "helper");
    CHECK(e && e->self == 21 * MS && e->wait == 2 * MS && e->child == 0);
}

static void test_fold_edges_make_the_table_whole(void)
{
    hk_profile *p = fib_folded();
    hk_calltree *ct = build(p);
    CHECK(ct);
    check_fib_table(ct);
    hk_calltree_free(ct);
    /* through a pprof file: the edges are in hakari's own field, with the file's location ids */
    hk_buf out;
    hk_buf_init(&out);
    CHECK_INT(hk_pprof_encode(p, &out, 1), 0);
    char err[200] = "";
    hk_profile *q = hk_pprof_decode(out.data, out.len, err, sizeof(err));
    CHECK_MSG(q != NULL, "decode: %s", err);
    CHECK_INT(q->nfold_edges, 2);
    CHECK_INT(q->ncomments, 0);
    ct = build(q);
    CHECK(ct);
    check_fib_table(ct);
    hk_calltree_free(ct);
    hk_profile_free(q);
    /* without them (a selection of the profile, a file of another tool) the [folded] row stays */
    p->nfold_edges = 0;
    ct = build(p);
    CHECK(ct && method(ct, "[folded]") != NULL && method(ct, "fib")->total == 5 * MS + 1 * MS + 35 * MS);
    hk_calltree_free(ct);
    hk_buf_free(&out);
    hk_profile_free(p);
}

static void test_bad_fold_edges_are_refused(void)
{
    static const struct { uint32_t caller, callee; const char *err; } bad[] = {
        {1, 0, "has no callee location"},
        {9999, 1, "names location 9999, which does not exist"},
        {1, 4000000000u, "names location 4000000000, which does not exist"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hk_profile *p = tf_fib();
        hk_fold_edge e = {bad[i].caller, bad[i].callee, 1, 1, 0, 1, 1, 1, 0, 0};
        hk_profile_add_fold_edge(p, &e);
        hk_buf out;
        hk_buf_init(&out);
        CHECK_INT(hk_pprof_encode(p, &out, 0), 0);
        char err[300] = "";
        hk_profile *q = hk_pprof_decode(out.data, out.len, err, sizeof(err));
        CHECK_MSG(q == NULL && strstr(err, bad[i].err) != NULL, "edge %u:%u: %s", bad[i].caller, bad[i].callee, err);
        hk_profile_free(q);
        hk_buf_free(&out);
        hk_profile_free(p);
    }
}

static void test_threads(void)
{
    hk_profile *p = tf_threads();
    hk_calltree *ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->nthreads, 2);
    CHECK_INT(ct->nnodes, 2 + 8 + 3); /* equal paths of two threads are two nodes */
    CHECK_INT(ct->total, 235 * MS);
    CHECK_METHOD(ct, "main", 2, 110 * MS, 0, 235 * MS, 0);
    CHECK_METHOD(ct, "helper", 13, 100 * MS, 7 * MS, 107 * MS, 0);
    CHECK_METHOD(ct, "fib", 7, 17 * MS, 1 * MS, 41 * MS, 1);
    CHECK_EDGE(ct, "main", "helper", 6, 84 * MS); /* two threads, two lines: one edge */
    hk_calltree_free(ct);
    hk_profile_free(p);
}

static void test_same_node_twice_adds(void)
{
    tf t = tf_new("cpu", "nanoseconds", tf_names, 3);
    tf_node(&t, -1, "0", 1, 1, 0);
    tf_node(&t, -1, "10", 2, 3, 0);
    tf_node(&t, -1, "10", 5, 7, 1);
    hk_calltree *ct = build(t.p);
    CHECK(ct);
    CHECK_INT(ct->nthreads, 1); /* no thread label: one unnamed thread */
    CHECK_INT(ct->nnodes, 3);
    CHECK_METHOD(ct, "fib", 7, 10 * MS, 1 * MS, 11 * MS, 0);
    hk_calltree_free(ct);
    hk_profile_free(t.p);
}

/* the build reuses the previous path's nodes: any order of the same nodes,
 * including a path right after a longer one it is a prefix of, is one tree */
static void test_sample_order(void)
{
    static const char *const paths[] = {"21110", "1110", "110", "10", "0", "2110", "210", "20"};
    static const int64_t calls[] = {4, 4, 2, 1, 1, 2, 1, 3}, self[] = {12, 8, 4, 5, 10, 6, 3, 9},
                         wait[] = {2, 0, 0, 1, 0, 0, 0, 0};
    tf t = tf_new("wall", "nanoseconds", tf_names, 3);
    for (int i = 0; i < 8; i++) tf_node(&t, 1, paths[i], calls[i], self[i], wait[i]);
    hk_profile *p = tf_fib();
    hk_calltree *a = build(t.p), *b = build(p);
    CHECK(a && b);
    CHECK_INT(a->nnodes, b->nnodes);
    CHECK_INT(a->nedges, b->nedges);
    for (size_t f = 0; f < b->nmethods; f++) {
        const char *name = hk_profile_str(p, hk_profile_func(p, b->methods[f].func)->name);
        const hk_ct_method *x = method(a, name), *y = &b->methods[f];
        CHECK(x);
        CHECK(x->calls == y->calls && x->self == y->self && x->wait == y->wait && x->total == y->total &&
              x->recursive == y->recursive && x->ncallers == y->ncallers && x->ncallees == y->ncallees);
    }
    hk_calltree_free(a);
    hk_calltree_free(b);
    hk_profile_free(t.p);
    hk_profile_free(p);
}

static void test_indirect_recursion(void)
{
    /* main > fib > helper > fib > helper: both recursive, each timed once */
    tf t = tf_new("wall", "nanoseconds", tf_names, 3);
    tf_node(&t, 1, "0", 1, 1, 0);
    tf_node(&t, 1, "10", 1, 2, 0);
    tf_node(&t, 1, "210", 1, 3, 0);
    tf_node(&t, 1, "1210", 1, 4, 0);
    tf_node(&t, 1, "21210", 1, 5, 0);
    hk_calltree *ct = build(t.p);
    CHECK(ct);
    CHECK_METHOD(ct, "fib", 2, 6 * MS, 0, 14 * MS, 1);
    CHECK_METHOD(ct, "helper", 2, 8 * MS, 0, 12 * MS, 1);
    CHECK_EDGE(ct, "fib", "helper", 2, 12 * MS);
    CHECK_EDGE(ct, "helper", "fib", 1, 0);
    hk_calltree_free(ct);
    hk_profile_free(t.p);
}

static void test_sampling(void)
{
    hk_profile *p = tf_sampling();
    hk_calltree *ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->sampling, 1);
    CHECK_INT(ct->wait_vi, -1);
    CHECK_STR(hk_calltree_measure(ct), "cpu");
    CHECK_INT(ct->calls, 15);
    CHECK_INT(ct->total, 15 * MS);
    /* samples: those with the method on the stack, once per stack */
    CHECK_METHOD(ct, "main", 15, 1 * MS, 0, 15 * MS, 0);
    CHECK_METHOD(ct, "fib", 9, 5 * MS, 0, 9 * MS, 1);
    CHECK_METHOD(ct, "helper", 9, 9 * MS, 0, 9 * MS, 0);
    CHECK_EDGE(ct, "fib", "helper", 4, 4 * MS);
    CHECK_EDGE(ct, "main", "fib", 9, 9 * MS);
    CHECK_EDGE(ct, "fib", "fib", 0, 0);
    hk_calltree_free(ct);
    hk_profile_free(p);
}

static void test_value_types(void)
{
    /* default_sample_type unset: the measure is still the time, not wait */
    hk_profile *p = tf_fib();
    p->default_sample_type = 0;
    hk_calltree *ct = build(p);
    CHECK(ct);
    CHECK_STR(hk_calltree_measure(ct), "wall");
    CHECK_INT(ct->ns, 1);
    hk_calltree_free(ct);
    hk_profile_free(p);
    /* a lone count: it is both the measure and the samples */
    p = hk_profile_new();
    hk_profile_add_sample_type(p, "allocations", "count");
    uint32_t loc = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "f"), 0, 0, 0), 1);
    int64_t v = 42;
    hk_profile_add_sample(p, &loc, 1, &v, NULL, 0);
    ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->ns, 0);
    CHECK_INT(ct->calls_vi, -1);
    CHECK_METHOD(ct, "f", 0, 42, 0, 42, 0);
    hk_calltree_free(ct);
    hk_profile_free(p);
}

static void test_odd_input(void)
{
    char err[128] = "";
    hk_profile *p = hk_profile_new();
    CHECK(hk_calltree_build(p, err, sizeof(err)) == NULL);
    CHECK_CONTAINS(err, "no sample types");
    CHECK(hk_calltree_build(NULL, NULL, 0) == NULL);
    /* types but no samples: an empty tree */
    hk_profile_add_sample_type(p, "calls", "count");
    hk_profile_add_sample_type(p, "wall", "nanoseconds");
    hk_calltree *ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->nnodes + ct->nedges + ct->nthreads + ct->total, 0);
    hk_calltree_free(ct);
    /* a sample without locations is in the total, in no method */
    int64_t v[2] = {1, 5 * MS};
    hk_profile_add_sample(p, NULL, 0, v, NULL, 0);
    ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->total, 5 * MS);
    CHECK_INT(ct->unattributed, 5 * MS);
    CHECK_INT(ct->nmethods, 0);
    hk_calltree_free(ct);
    /* ids out of range are refused with the id named */
    uint32_t loc = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "f"), 0, 0, 0), 1);
    hk_profile_add_sample(p, &loc, 1, v, NULL, 0);
    p->stacks[p->nstacks - 1].loc = 99; /* the last stack's leaf, as stored */
    CHECK(hk_calltree_build(p, err, sizeof(err)) == NULL);
    CHECK_CONTAINS(err, "location id 99");
    p->stacks[p->nstacks - 1].loc = loc;
    p->locations[0].function_id = 7;
    CHECK(hk_calltree_build(p, err, sizeof(err)) == NULL);
    CHECK_CONTAINS(err, "function id 7");
    hk_profile_free(p);
}

static void test_extreme_values(void)
{
    /* every corner of the model, values up to INT64_MAX/MIN: sums saturate */
    for (uint32_t seed = 1; seed <= 4; seed++) {
        hk_profile *p = fixture_profile(seed, 400);
        CHECK(p);
        hk_calltree *ct = build(p);
        CHECK(ct);
        CHECK(ct->nthreads >= 1);
        hk_calltree_free(ct);
        hk_profile_free(p);
    }
    tf t = tf_new("wall", "nanoseconds", tf_names, 3);
    int64_t big[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
    uint32_t path[2] = {t.loc[1], t.loc[0]};
    hk_profile_add_sample(t.p, path, 2, big, NULL, 0);
    hk_profile_add_sample(t.p, path, 1, big, NULL, 0);
    hk_calltree *ct = build(t.p);
    CHECK(ct);
    CHECK_INT(ct->total, INT64_MAX);
    CHECK_INT(method(ct, "main")->total, INT64_MAX);
    hk_calltree_free(ct);
    hk_profile_free(t.p);
}

/* CPU seconds: C11 has clock(), and -std=c11 hides clock_gettime */
static double seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

static void test_deep_and_wide(void)
{
    /* one stack 100 000 deep through two alternating methods: no recursion in
     * the walk, and linear time */
    enum { DEPTH = 100000, WIDE = 320 };
    tf t = tf_new("wall", "nanoseconds", tf_names, 3);
    uint32_t *path = malloc(DEPTH * sizeof(*path));
    CHECK(path);
    for (uint32_t d = 0; d < DEPTH; d++) path[DEPTH - 1 - d] = t.loc[d == 0 ? 0 : 1 + d % 2];
    int64_t v[3] = {1, 10, 1};
    hk_profile_add_sample(t.p, path, DEPTH, v, NULL, 0);
    hk_profile_add_sample(t.p, path + DEPTH - 1000, 1000, v, NULL, 0);
    free(path);
    double t0 = seconds();
    hk_calltree *ct = build(t.p);
    CHECK(ct);
    CHECK_INT(ct->nnodes, DEPTH + 1);
    /* main > helper > fib > helper …: the samples are the deepest helper
     * and the one at depth 999; every fib is in between, with no calls */
    CHECK_METHOD(ct, "fib", 0, 0, 0, 22, 1);
    CHECK_METHOD(ct, "helper", 2, 20, 2, 22, 1);
    CHECK_EDGE(ct, "fib", "helper", 2, 0);
    CHECK_EDGE(ct, "helper", "fib", 0, 22);
    CHECK_EDGE(ct, "main", "helper", 0, 22);
    hk_calltree_free(ct);
    hk_profile_free(t.p);

    /* main > a_i > b_j: over 100 000 nodes */
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "calls", "count");
    hk_profile_add_sample_type(p, "wall", "nanoseconds");
    uint32_t main_loc = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "main"), 0, 0, 0), 0);
    uint32_t a[WIDE], b[WIDE];
    for (int i = 0; i < WIDE; i++) {
        char name[32];
        snprintf(name, sizeof(name), "a%d", i);
        a[i] = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, name), 0, 0, 0), 0);
        snprintf(name, sizeof(name), "b%d", i);
        b[i] = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, name), 0, 0, 0), 0);
    }
    int64_t one[2] = {1, 1};
    for (int i = 0; i < WIDE; i++)
        for (int j = 0; j < WIDE; j++) {
            uint32_t s[3] = {b[j], a[i], main_loc};
            hk_profile_add_sample(p, s, 3, one, NULL, 0);
        }
    ct = build(p);
    CHECK(ct);
    CHECK_INT(ct->nnodes, 1 + 1 + WIDE + WIDE * WIDE);
    CHECK_INT(ct->nedges, 1 + WIDE + WIDE * WIDE);
    CHECK_METHOD(ct, "main", 0, 0, 0, WIDE * WIDE, 0);
    CHECK_METHOD(ct, "b7", WIDE, WIDE, 0, WIDE, 0);
    double took = seconds() - t0;
    CHECK_MSG(took < 5.0, "deep and wide trees took %.2f s", took);
    hk_calltree_free(ct);
    hk_profile_free(p);
}

static void test_build_under_failed_allocation(void)
{
    hk_profile *p = tf_threads();
    long live = alloc_live();
    for (long nth = 0;; nth++) {
        char err[128] = "";
        alloc_fail_at(nth);
        hk_calltree *ct = hk_calltree_build(p, err, sizeof(err));
        int failed = alloc_fail_done();
        if (!failed) {
            CHECK(ct && ct->total == 235 * MS);
            hk_calltree_free(ct);
            break;
        }
        CHECK_MSG(ct == NULL, "allocation %ld failed, yet a tree came back", nth);
        CHECK_CONTAINS(err, "out of memory");
        CHECK_MSG(alloc_live() == live, "allocation %ld: %ld blocks leaked", nth, alloc_live() - live);
    }
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_fib_methods);
    RUN(test_fib_edges);
    RUN(test_fold_edges_make_the_table_whole);
    RUN(test_bad_fold_edges_are_refused);
    RUN(test_threads);
    RUN(test_same_node_twice_adds);
    RUN(test_sample_order);
    RUN(test_indirect_recursion);
    RUN(test_sampling);
    RUN(test_value_types);
    RUN(test_odd_input);
    RUN(test_extreme_values);
    RUN(test_deep_and_wide);
    RUN(test_build_under_failed_allocation);
    return check_done();
}
