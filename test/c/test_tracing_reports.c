/* test_tracing_reports.c — the flat and graph reports and the callgrind and
 * dot encoders, against their headers, on tracing_fixture.h's profiles:
 * exact rows and numbers, ranking, recursion marks, "called/total", the
 * callgrind text (exact, and self-consistent totals), DOT escaping and the
 * small-method cut, odd input (no sample types, empty, stackless samples,
 * bad ids, extreme values) and every allocation failing in turn. The real
 * tools (callgrind_annotate, dot) are run by tools_check.sh. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "callgrind_encode.h"
#include "check.h"
#include "dot_encode.h"
#include "fixture.h"
#include "flat_report.h"
#include "graph_report.h"
#include "tracing_fixture.h"

enum { FLAT, GRAPH, CALLGRIND, DOT, NOUTPUTS };
static const char *const output_names[] = {"flat", "graph", "callgrind", "dot"};

static int produce(int which, const hk_profile *p, size_t top_n, hk_buf *b)
{
    switch (which) {
    case FLAT: return hk_flat_report(p, top_n, b);
    case GRAPH: return hk_graph_report(p, top_n, b);
    case CALLGRIND: return hk_callgrind_encode(p, b);
    default: return hk_dot_encode(p, b);
    }
}

/* the output as a NUL-terminated string (free it), or NULL when it failed */
static char *render(int which, const hk_profile *p, size_t top_n)
{
    hk_buf b;
    hk_buf_init(&b);
    int rc = produce(which, p, top_n, &b);
    hk_buf_putc(&b, '\0');
    if (rc != 0 || !hk_buf_ok(&b)) {
        hk_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

/* index of the first line containing needle, at or after line `from`; -1 if none */
static int line_of(const char *text, const char *needle, int from)
{
    int n = 0;
    for (const char *l = text; *l; n++) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        const char *hit = strstr(l, needle);
        if (n >= from && hit && hit + strlen(needle) <= l + len) return n;
        l += len + (nl != NULL);
    }
    return -1;
}

static void test_flat_fib(void)
{
    hk_profile *p = tf_fib();
    char *t = render(FLAT, p, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "Measure: wall (ms)\nThreads: 1\nTotal:      60.000 (self      57.000, wait       3.000)\n"
                      "Calls: 18\n");
    int h = line_of(t, "helper  lib/helper.rb:21", 0), f = line_of(t, "*fib  app.rb:11", 0),
        m = line_of(t, "main  app.rb:1", 0);
    CHECK(h > 0 && h < f && f < m); /* by self: 30, 17, 10 ms */
    CHECK_CONTAINS(t, "  50.00      32.000      30.000       2.000       0.000          10   helper  lib/helper.rb:21\n");
    CHECK_CONTAINS(t, "  28.33      41.000      17.000       1.000      23.000           7  *fib  app.rb:11\n");
    CHECK_CONTAINS(t, "  16.67      60.000      10.000       0.000      50.000           1   main  app.rb:1\n");
    CHECK_CONTAINS(t, "\n* recursively called method");
    free(t);
    t = render(FLAT, p, 1);
    CHECK(t);
    CHECK(line_of(t, "helper", 0) > 0 && line_of(t, "main  app.rb", 0) < 0);
    CHECK_CONTAINS(t, "(2 more methods not shown)");
    free(t);
    hk_profile_free(p);
}

static void test_flat_sampling_and_counts(void)
{
    hk_profile *p = tf_sampling();
    char *t = render(FLAT, p, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "Measure: cpu (ms)\nThreads: 1\nTotal:      15.000\nSamples: 15\n");
    CHECK_CONTAINS(t, "     samples   name");
    CHECK_CONTAINS(t, "  33.33       9.000       5.000       0.000       4.000           9  *fib  app.rb:11\n");
    free(t);
    hk_profile_free(p);
    /* a count measure prints plain numbers */
    tf tr = tf_new("allocations", "count", tf_names, 3);
    tf_node(&tr, 1, "0", 1, 0, 0);
    tr.p->values[1] = 250; /* the node's self, in objects rather than ms */
    t = render(FLAT, tr.p, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "Measure: allocations (count)\n");
    CHECK_CONTAINS(t, " 100.00         250         250           0           0           1   main  app.rb:1\n");
    free(t);
    hk_profile_free(tr.p);
}

static void test_graph_fib(void)
{
    hk_profile *p = tf_fib();
    char *t = render(GRAPH, p, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "Sort by: total\n");
    /* blocks by total: main 60, fib 41, helper 32 */
    int m = line_of(t, "   main  app.rb:1", 0), f = line_of(t, "  *fib  app.rb:11", 0),
        h = line_of(t, "   helper  lib/helper.rb:21", 0);
    CHECK(m > 0 && m < f && f < h);
    CHECK(line_of(t, "      60.000      10.000       0.000      50.000             1/1       [root]", 0) == m - 1);
    /* fib's block: callers, its line, callees */
    CHECK(line_of(t, "      41.000       5.000       1.000      35.000             1/7       main", 0) == f - 2);
    CHECK(line_of(t, "       0.000       0.000       0.000       0.000             6/7      *fib", 0) == f - 1);
    CHECK(line_of(t, "  68.33%   28.33%      41.000      17.000       1.000      23.000               7  *fib", 0) == f);
    CHECK(line_of(t, "      23.000      21.000       2.000       0.000            7/10       helper", f) == f + 1);
    CHECK(line_of(t, "6/7      *fib", f) == f + 2);
    CHECK(line_of(t, "-----", f) == f + 3);
    CHECK_CONTAINS(t, "  *              recursive method");
    free(t);
    hk_profile_free(p);
}

static void test_graph_threads_and_top_n(void)
{
    hk_profile *p = tf_threads();
    char *t = render(GRAPH, p, 2);
    CHECK(t);
    CHECK_CONTAINS(t, "Threads: 2\n");
    int h = line_of(t, "   helper  lib/helper.rb:21", 0);
    CHECK(h > 0);
    CHECK(line_of(t, "      84.000      79.000       5.000       0.000            6/13       main", 0) == h - 2);
    CHECK(line_of(t, "7/13      *fib", 0) == h - 1);
    CHECK(line_of(t, "  *fib  app.rb:11", 0) < 0);
    CHECK_CONTAINS(t, "(1 more methods not shown)");
    free(t);
    hk_profile_free(p);
}

static const char fib_callgrind[] =
    "# callgrind format\n"
    "# hakari: tracing profile, 1 thread(s) merged; self cost excludes wait\n"
    "version: 1\ncreator: hakari\npositions: line\n"
    "events: Wall_ns Wait_ns\n"
    "summary: 57000000 3000000\n\n"
    "fl=(1) app.rb\nfn=(1) main\n2 10000000 0\n"
    "cfl=(1)\ncfn=(2) fib\ncalls=1 11\n2 38000000 3000000\n"
    "cfl=(2) lib/helper.rb\ncfn=(3) helper\ncalls=3 21\n2 9000000 0\n\n"
    "fl=(1)\nfn=(2)\n12 17000000 1000000\n"
    "cfl=(1)\ncfn=(2)\ncalls=6 11\n12 0 0\n"
    "cfl=(2)\ncfn=(3)\ncalls=7 21\n12 21000000 2000000\n\n"
    "fl=(2)\nfn=(3)\n22 30000000 2000000\n\n"
    "totals: 57000000 3000000\n";

/* reads callgrind text the way callgrind_annotate does: the cost line after
 * calls= is a call's inclusive cost, any other is self cost; the self costs
 * must add up to totals: and summary:. Returns 0 or -1 with why. */
static int callgrind_consistent(const char *t, char *why, size_t n)
{
    long long self[2] = {0, 0}, totals[2] = {-1, -1}, summary[2] = {-1, -1};
    int after_calls = 0;
    for (const char *l = t, *next; *l; l = next) {
        next = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l);
        long long line, a = 0, b = 0;
        if (sscanf(l, "totals: %lld %lld", &totals[0], &totals[1]) >= 1) continue;
        if (sscanf(l, "summary: %lld %lld", &summary[0], &summary[1]) >= 1) continue;
        if (strncmp(l, "calls=", 6) == 0) after_calls = 1;
        else if (*l >= '0' && *l <= '9' && sscanf(l, "%lld %lld %lld", &line, &a, &b) >= 2) {
            if (!after_calls) self[0] += a, self[1] += b;
            after_calls = 0;
        } else if (*l != '\n' && *l != '#' && !strchr(l, ':') && !strchr(l, '='))
            return snprintf(why, n, "odd line: %.40s", l), -1;
    }
    if (self[0] != totals[0] || self[0] != summary[0] || (totals[1] >= 0 && self[1] != totals[1]))
        return snprintf(why, n, "self %lld %lld, totals %lld %lld", self[0], self[1], totals[0], totals[1]), -1;
    return 0;
}

static void test_callgrind(void)
{
    hk_profile *p = tf_fib();
    char *t = render(CALLGRIND, p, 0), why[128] = "";
    CHECK(t);
    CHECK_STR(t, fib_callgrind);
    free(t);
    hk_profile_free(p);
    hk_profile *ps[] = {tf_threads(), tf_sampling(), tf_hostile()};
    for (int i = 0; i < 3; i++) {
        t = render(CALLGRIND, ps[i], 0);
        CHECK(t);
        CHECK_MSG(callgrind_consistent(t, why, sizeof(why)) == 0, "profile %d: %s", i, why);
        if (i == 1) CHECK_CONTAINS(t, "events: Cpu_ns\n");
        if (i == 2) CHECK_CONTAINS(t, "\ncfn=(3) two lines \n"); /* a newline in a name ends nothing */
        free(t);
        hk_profile_free(ps[i]);
    }
    /* two blocks of one name in one file stay two functions: their line is added */
    p = hk_profile_new();
    hk_profile_add_sample_type(p, "calls", "count");
    hk_profile_add_sample_type(p, "wall", "nanoseconds");
    uint32_t name = hk_profile_string(p, "block in each"), file = hk_profile_string(p, "app.rb");
    uint32_t blocks[2] = {hk_profile_location(p, hk_profile_function(p, name, 0, file, 5), 6),
                          hk_profile_location(p, hk_profile_function(p, name, 0, file, 9), 10)};
    int64_t one[2] = {1, 1};
    hk_profile_add_sample(p, &blocks[0], 1, one, NULL, 0);
    hk_profile_add_sample(p, &blocks[1], 1, one, NULL, 0);
    t = render(CALLGRIND, p, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "fn=(1) block in each:5\n");
    CHECK_CONTAINS(t, "fn=(2) block in each:9\n");
    free(t);
    hk_profile_free(p);
    /* a stackless sample: in the totals, under "[no stack]" */
    p = tf_fib();
    int64_t v[3] = {1, 3 * TF_MS, 0};
    hk_profile_add_sample(p, NULL, 0, v, NULL, 0);
    t = render(CALLGRIND, p, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "fn=(4) [no stack]\n0 3000000 0\n");
    CHECK_CONTAINS(t, "totals: 60000000 3000000\n");
    CHECK(callgrind_consistent(t, why, sizeof(why)) == 0);
    free(t);
    hk_profile_free(p);
}

static void test_dot(void)
{
    hk_profile *p = tf_fib();
    char *t = render(DOT, p, 0);
    CHECK(t);
    CHECK(strncmp(t, "digraph hakari {\n", 17) == 0);
    CHECK_CONTAINS(t, "label=\"hakari: wall, total 60.000 ms, 1 thread\"");
    CHECK_CONTAINS(t, "  f2 [label=\"fib\\napp.rb:11\\ntotal 41.000 ms (68.3%)\\nself 17.000 ms (28.3%)\\n(recursive)\"");
    CHECK_CONTAINS(t, "  f1 -> f2 [label=\"41.000 ms\\n1 call\"");
    CHECK_CONTAINS(t, "  f2 -> f2 [label=\"0.000 ms\\n6 calls\"");
    CHECK_CONTAINS(t, "  f2 -> f3 [label=\"23.000 ms\\n7 calls\"");
    CHECK(strcmp(t + strlen(t) - 2, "}\n") == 0);
    free(t);
    hk_profile_free(p);

    p = tf_hostile();
    t = render(DOT, p, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "label=\"Foo#\\\"quoted\\\"\\n");
    CHECK_CONTAINS(t, "label=\"Bar\\\\back\\\\slash {x|y}\\n");
    CHECK_CONTAINS(t, "label=\"two?lines?\\n");
    CHECK_CONTAINS(t, "label=\"bad utf8 ?? ??\\n");
    CHECK_CONTAINS(t, "label=\"caf\xc3\xa9#na\xc3\xafve\\n");
    CHECK_CONTAINS(t, "label=\"block in <class:X>\\n");
    free(t);
    hk_profile_free(p);

    /* a method under 0.5% of the total is left out, with its edges, and said so */
    p = tf_fib();
    tf t2 = {p, {fixture_locs(p, 0)[0]}, hk_profile_string(p, "thread")}; /* sample 0 is main alone */
    t2.loc[3] = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "tiny"), 0, 0, 0), 5);
    tf_node(&t2, 1, "30", 1, 0, 0);
    p->values[p->nsamples * p->nvalues - 2] = 100000; /* 0.1 ms of 60.1 */
    t = render(DOT, p, 0);
    CHECK(t);
    CHECK(!strstr(t, "tiny"));
    CHECK(!strstr(t, "-> f4 "));
    CHECK_CONTAINS(t, "\\n1 method under 0.5% of the total not shown\"");
    free(t);
    hk_profile_free(p);
}

static void test_odd_input(void)
{
    for (int w = 0; w < NOUTPUTS; w++) {
        hk_profile *p = hk_profile_new();
        hk_buf b;
        hk_buf_init(&b);
        CHECK_MSG(produce(w, p, 0, &b) == -1, "%s accepted a profile without sample types", output_names[w]);
        hk_buf_free(&b);
        hk_profile_add_sample_type(p, "calls", "count");
        hk_profile_add_sample_type(p, "wall", "nanoseconds");
        char *t = render(w, p, 0);
        CHECK_MSG(t != NULL, "%s failed on an empty profile", output_names[w]);
        free(t);
        int64_t v[2] = {1, 1000};
        hk_profile_add_sample(p, NULL, 0, v, NULL, 0);
        t = render(w, p, 0);
        CHECK_MSG(t != NULL, "%s failed on a stackless sample", output_names[w]);
        free(t);
        uint32_t loc = 1;
        hk_profile_add_sample(p, &loc, 1, v, NULL, 0); /* location 1 does not exist */
        hk_buf_init(&b);
        CHECK_MSG(produce(w, p, 0, &b) == -1, "%s accepted a bad location id", output_names[w]);
        hk_buf_free(&b);
        hk_profile_free(p);
        for (uint32_t seed = 1; seed <= 3; seed++) {
            p = fixture_profile(seed, 300);
            t = render(w, p, 5);
            CHECK_MSG(t != NULL, "%s failed on fixture_profile(%u)", output_names[w], seed);
            free(t);
            hk_profile_free(p);
        }
    }
}

static void test_under_failed_allocation(void)
{
    hk_profile *p = tf_threads();
    for (int w = 0; w < NOUTPUTS; w++) {
        char *ref = render(w, p, 0);
        CHECK(ref);
        long live = alloc_live();
        for (long nth = 0;; nth++) {
            hk_buf b;
            hk_buf_init(&b);
            alloc_fail_at(nth);
            int rc = produce(w, p, 0, &b);
            int failed = alloc_fail_done();
            if (!failed) {
                CHECK_MSG(rc == 0 && b.len == strlen(ref) && memcmp(b.data, ref, b.len) == 0,
                          "%s: output differs", output_names[w]);
                hk_buf_free(&b);
                break;
            }
            hk_buf_free(&b);
            CHECK_MSG(rc == -1, "%s: allocation %ld failed, but it said %d", output_names[w], nth, rc);
            CHECK_MSG(alloc_live() == live, "%s: allocation %ld: %ld blocks leaked", output_names[w], nth,
                      alloc_live() - live);
        }
        free(ref);
    }
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_flat_fib);
    RUN(test_flat_sampling_and_counts);
    RUN(test_graph_fib);
    RUN(test_graph_threads_and_top_n);
    RUN(test_callgrind);
    RUN(test_dot);
    RUN(test_odd_input);
    RUN(test_under_failed_allocation);
    return check_done();
}
