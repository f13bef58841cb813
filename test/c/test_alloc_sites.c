/* test_alloc_sites.c — a trace's allocations by method, class and line
 * (alloc_sites.h): sums over call paths and threads, the order, the reports'
 * section (exact text, top N, none when the profile was not asked for them),
 * and every allocation failing in turn. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "alloc_sites.h"
#include "callgrind_encode.h"
#include "check.h"
#include "flat_report.h"
#include "graph_report.h"

/* functions: 1 main (app.rb:1), 2 make (app.rb:10), 3 Array#map (<cfunc>) */
typedef struct fx { hk_profile *p; uint32_t loc[4]; uint32_t k_thread, k_class, k_file, k_line; } fx;

static fx fx_new(int allocations)
{
    fx f;
    memset(&f, 0, sizeof(f));
    f.p = hk_profile_new();
    hk_profile_add_sample_type(f.p, "calls", "count");
    hk_profile_add_sample_type(f.p, "wall", "nanoseconds");
    hk_profile_add_sample_type(f.p, "wait", "nanoseconds");
    if (allocations) {
        hk_profile_add_sample_type(f.p, "alloc_objects", "count");
        hk_profile_add_sample_type(f.p, "alloc_space", "bytes");
    }
    f.p->default_sample_type = hk_profile_string(f.p, "wall");
    const char *names[] = {"", "main", "make", "Array#map"}, *files[] = {"", "app.rb", "app.rb", "<cfunc>"};
    int64_t lines[] = {0, 1, 10, 0};
    for (int i = 1; i <= 3; i++) {
        uint32_t fn = hk_profile_function(f.p, hk_profile_string(f.p, names[i]), 0, hk_profile_string(f.p, files[i]), lines[i]);
        f.loc[i] = hk_profile_location(f.p, fn, lines[i]);
    }
    f.k_thread = hk_profile_string(f.p, "thread");
    f.k_class = hk_profile_string(f.p, "class");
    f.k_file = hk_profile_string(f.p, "file");
    f.k_line = hk_profile_string(f.p, "line");
    return f;
}

/* a call-tree node's sample: path of function digits, leaf first ("21": make called by main) */
static void node(fx *f, const char *path, int thread, int64_t calls, int64_t ms)
{
    uint32_t locs[8];
    uint32_t n = 0;
    for (const char *c = path; *c; c++) locs[n++] = f->loc[*c - '0'];
    int64_t v[5] = {calls, ms * 1000000, 0, 0, 0};
    hk_label l = {.key = f->k_thread, .num = thread};
    hk_profile_add_sample(f->p, locs, n, v, &l, 1);
}

static void site(fx *f, const char *path, int thread, const char *klass, const char *file, int64_t line,
                 int64_t objects, int64_t bytes)
{
    uint32_t locs[8];
    uint32_t n = 0;
    for (const char *c = path; *c; c++) locs[n++] = f->loc[*c - '0'];
    int64_t v[5] = {0, 0, 0, objects, bytes};
    hk_label l[4] = {{.key = f->k_thread, .num = thread},
                     {.key = f->k_class, .str = hk_profile_string(f->p, klass)},
                     {.key = f->k_file, .str = hk_profile_string(f->p, file)},
                     {.key = f->k_line, .num = line}};
    hk_profile_add_sample(f->p, locs, n, v, l, 4);
}

/* main calls make (twice, on two threads) and make calls Array#map */
static hk_profile *workload(void)
{
    fx f = fx_new(1);
    node(&f, "1", 1, 1, 10);
    node(&f, "21", 1, 3, 20);
    node(&f, "321", 1, 3, 5);
    node(&f, "1", 2, 1, 1);
    node(&f, "21", 2, 1, 2);
    site(&f, "21", 1, "String", "app.rb", 11, 600, 24000);
    site(&f, "21", 2, "String", "app.rb", 11, 400, 16000); /* the same site on another thread */
    site(&f, "21", 1, "Hash", "app.rb", 12, 50, 8000);
    site(&f, "321", 1, "Array", "app.rb", 13, 300, 12000); /* a C method's: its caller's line */
    site(&f, "1", 1, "Array", "app.rb", 2, 300, 12000);
    site(&f, "", 1, "Object", "app.rb", 0, 1, 40); /* outside every method */
    return f.p;
}

static void test_collect_sums_and_orders(void)
{
    hk_profile *p = workload();
    CHECK(hk_alloc_sites_present(p));
    hk_alloc_sites s;
    CHECK_INT(hk_alloc_sites_collect(p, &s), 0);
    CHECK_INT(s.n, 5);
    CHECK_INT(s.objects, 1651);
    CHECK_INT(s.bytes, 72040);
    const char *want[][3] = {{"make", "String", "11"}, {"main", "Array", "2"}, {"Array#map", "Array", "13"},
                             {"make", "Hash", "12"}, {"", "Object", "0"}};
    int64_t counts[] = {1000, 300, 300, 50, 1};
    for (size_t i = 0; i < s.n && i < 5; i++) {
        const hk_alloc_site *a = &s.sites[i];
        const char *fn = a->func ? hk_profile_str(p, hk_profile_func(p, a->func)->name) : "";
        char line[24];
        snprintf(line, sizeof(line), "%" PRId64, a->line);
        CHECK_STR(fn, want[i][0]);
        CHECK_STR(hk_profile_str(p, a->klass), want[i][1]);
        CHECK_STR(line, want[i][2]);
        CHECK_STR(hk_profile_str(p, a->file), "app.rb");
        CHECK_INT(a->objects, counts[i]);
    }
    CHECK_INT(s.sites[0].bytes, 40000);
    hk_alloc_sites_free(&s);
    hk_profile_free(p);
}

static char *report(const hk_profile *p, int graph, size_t top_n)
{
    hk_buf b;
    hk_buf_init(&b);
    int rc = graph ? hk_graph_report(p, top_n, &b) : hk_flat_report(p, top_n, &b);
    hk_buf_putc(&b, '\0');
    if (rc != 0 || !hk_buf_ok(&b)) {
        hk_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

static void test_reports_show_the_section(void)
{
    hk_profile *p = workload();
    char *t = report(p, 0, 0);
    CHECK(t);
    CHECK_CONTAINS(t, "\nAllocations: 1651 objects, 72040 bytes of heap slots, at 5 sites\n\n"
                      "     objects        bytes  %objects  class  method  file:line\n"
                      "        1000        40000    60.57%  String  make  app.rb:11\n"
                      "         300        12000    18.17%  Array  main  app.rb:2\n"
                      "         300        12000    18.17%  Array  Array#map  app.rb:13\n"
                      "          50         8000     3.03%  Hash  make  app.rb:12\n"
                      "           1           40     0.06%  Object  [outside every method]  app.rb\n");
    /* the method table's numbers are the calls' own: the sites' samples add nothing to them */
    CHECK_CONTAINS(t, "Calls: 9\n");
    free(t);
    t = report(p, 1, 2);
    CHECK(t);
    CHECK_CONTAINS(t, "\nAllocations: 1651 objects, 72040 bytes of heap slots, at 5 sites (the top 2)\n");
    CHECK_CONTAINS(t, "%  Array  main  app.rb:2\n");
    CHECK(!strstr(t, "Array#map  app.rb:13"));
    free(t);
    hk_profile_free(p);

    fx f = fx_new(0); /* a trace not asked for allocations */
    node(&f, "1", 1, 1, 10);
    CHECK(!hk_alloc_sites_present(f.p));
    t = report(f.p, 0, 0);
    CHECK(t && !strstr(t, "Allocations"));
    free(t);
    hk_profile_free(f.p);
}

/* callgrind's third event: each method's own objects, and each call's inclusive ones */
static void test_callgrind_column(void)
{
    hk_profile *p = workload();
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_callgrind_encode(p, &b), 0);
    hk_buf_putc(&b, '\0');
    const char *t = (const char *)b.data;
    CHECK_CONTAINS(t, "events: Wall_ns Wait_ns Alloc_objects\nsummary: 38000000 0 1651\n");
    /* make: 1050 of its own at its line 10; main -> make (4 calls on two threads): 1350 inclusive */
    CHECK_CONTAINS(t, "fn=(1) main\n1 11000000 0 300\ncfl=(1)\ncfn=(2) make\ncalls=4 10\n1 27000000 0 1350\n");
    CHECK_CONTAINS(t, "fn=(2)\n10 22000000 0 1050\ncfl=(2) <cfunc>\ncfn=(3) Array#map\ncalls=3 0\n10 5000000 0 300\n");
    CHECK_CONTAINS(t, "fn=(4) [no stack]\n0 0 0 1\n");
    CHECK_CONTAINS(t, "totals: 38000000 0 1651\n");
    hk_buf_free(&b);
    hk_profile_free(p);
}

static void test_under_failed_allocation(void)
{
    hk_profile *p = workload();
    char *ref = report(p, 0, 0);
    CHECK(ref);
    for (long nth = 0;; nth++) {
        long live = alloc_live();
        hk_buf b;
        hk_buf_init(&b);
        alloc_fail_at(nth);
        int rc = hk_flat_report(p, 0, &b);
        int failed = alloc_fail_done();
        hk_buf_putc(&b, '\0');
        if (!failed) {
            CHECK(rc == 0 && strcmp((char *)b.data, ref) == 0);
            hk_buf_free(&b);
            break;
        }
        hk_buf_free(&b);
        CHECK_MSG(rc == -1, "allocation %ld failed, but it said %d", nth, rc);
        CHECK_MSG(alloc_live() == live, "allocation %ld: %ld blocks leaked", nth, alloc_live() - live);
    }
    free(ref);
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_collect_sums_and_orders);
    RUN(test_reports_show_the_section);
    RUN(test_callgrind_column);
    RUN(test_under_failed_allocation);
    return check_done();
}
