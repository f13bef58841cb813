/* test_text_report.c — the text report, against text_report.h. The header fixes
 * the content, not the layout, so these tests check content and order: the
 * header's total (in ms for nanoseconds), sample count and frequency; the Flat
 * section ranks by self value (the leaf), the Cumulative one by value anywhere
 * in the stack, counted once per sample; rows read "<value> <percent>  <name>
 * (<file>)"; top_n limits both; a bad value index gives -1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "check.h"
#include "text_report.h"

/* main -> work -> helper, main -> rec -> rec -> rec (recursion), main -> idle;
 * cpu in ns: work 80 ms self, helper 50, rec 40, idle 30; total 200 ms.
 * "samples" totals 4242 over 4 samples; period 4 ms of cpu = 250 Hz. */
static hk_profile *setup(int with_samples_type)
{
    hk_profile *p = hk_profile_new();
    if (with_samples_type) hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    p->period_type.type = hk_profile_string(p, "cpu");
    p->period_type.unit = hk_profile_string(p, "nanoseconds");
    p->period = 4000000;
    static const char *const names[] = {"main", "work", "helper", "rec", "idle"};
    static const char *const files[] = {"app.rb", "lib/work.rb", "lib/helper.rb", "lib/rec.rb", "app.rb"};
    uint32_t loc[5];
    for (int i = 0; i < 5; i++) {
        uint32_t f = hk_profile_function(p, hk_profile_string(p, names[i]), 0, hk_profile_string(p, files[i]), 1);
        loc[i] = hk_profile_location(p, f, 10 + i);
    }
    uint32_t rec2 = hk_profile_location(p, hk_profile_loc(p, loc[3])->function_id, 99);
    uint32_t s1[] = {loc[1], loc[0]}, s2[] = {loc[2], loc[1], loc[0]}, s3[] = {loc[3], rec2, loc[3], loc[0]},
             s4[] = {loc[4], loc[0]};
    const uint32_t *stacks[] = {s1, s2, s3, s4};
    const uint32_t depth[] = {2, 3, 4, 2};
    const int64_t cpu_ms[] = {80, 50, 40, 30}, samples[] = {1000, 2000, 1000, 242};
    for (int i = 0; i < 4; i++) {
        int64_t v[2] = {samples[i], cpu_ms[i] * 1000000};
        hk_profile_add_sample(p, stacks[i], depth[i], with_samples_type ? v : v + 1, NULL, 0);
    }
    return p;
}

typedef struct report {
    char *text;
    char *lines[256];
    int n, flat, cum; /* index of the Flat and Cumulative headings */
} report;

static int report_of(const hk_profile *p, size_t vi, size_t top_n, report *r)
{
    hk_buf b;
    hk_buf_init(&b);
    int rc = hk_text_report(p, vi, top_n, &b);
    hk_buf_putc(&b, '\0');
    memset(r, 0, sizeof(*r));
    r->text = (char *)b.data;
    r->flat = r->cum = -1;
    for (char *l = r->text; *l && r->n < 256;) {
        char *nl = strchr(l, '\n');
        if (nl) *nl = '\0';
        if (r->flat < 0 && strstr(l, "Flat")) r->flat = r->n;
        if (r->cum < 0 && strstr(l, "Cumulative")) r->cum = r->n;
        r->lines[r->n++] = l;
        l = nl ? nl + 1 : l + strlen(l);
    }
    return rc;
}

/* the line in [from, to) that names function `name` of `file`; -1 if none */
static int row(const report *r, int from, int to, const char *name, const char *file)
{
    char want[128];
    snprintf(want, sizeof(want), "  %s (%s)", name, file);
    for (int i = from; i < to && i < r->n; i++) {
        const char *at = strstr(r->lines[i], want);
        if (at && at[strlen(want)] == '\0') return i;
    }
    return -1;
}

/* the header: the lines before the Flat section */
static int header_has(const report *r, const char *s)
{
    for (int i = 0; i < r->flat; i++)
        if (strstr(r->lines[i], s)) return 1;
    return 0;
}

static void test_sections_and_order(void)
{
    hk_profile *p = setup(1);
    report r;
    CHECK_INT(report_of(p, 1, 10, &r), 0);
    CHECK_MSG(r.flat >= 0 && r.cum > r.flat, "no Flat then Cumulative section in:\n%s", r.text);
    int end = r.n;
    int w = row(&r, r.flat, r.cum, "work", "lib/work.rb"), h = row(&r, r.flat, r.cum, "helper", "lib/helper.rb"),
        rc = row(&r, r.flat, r.cum, "rec", "lib/rec.rb"), i = row(&r, r.flat, r.cum, "idle", "app.rb");
    CHECK_MSG(w > 0 && w < h && h < rc && rc < i, "flat order work %d, helper %d, rec %d, idle %d", w, h, rc, i);
    CHECK_CONTAINS(r.lines[w], "40");
    CHECK_CONTAINS(r.lines[h], "25");
    int m = row(&r, r.cum, end, "main", "app.rb"), cw = row(&r, r.cum, end, "work", "lib/work.rb"),
        ch = row(&r, r.cum, end, "helper", "lib/helper.rb"), cr = row(&r, r.cum, end, "rec", "lib/rec.rb"),
        ci = row(&r, r.cum, end, "idle", "app.rb");
    CHECK_MSG(m > r.cum && m < cw && cw < ch && ch < cr && cr < ci, "cumulative order %d %d %d %d %d", m, cw, ch,
              cr, ci);
    CHECK_CONTAINS(r.lines[m], "100");
    CHECK_CONTAINS(r.lines[cw], "65");
    /* rec is on its stack three times and counted once: 40 ms, 20%, not 120 ms, 60% */
    CHECK_CONTAINS(r.lines[cr], "20");
    CHECK_MSG(!strstr(r.lines[cr], "60") && !strstr(r.lines[cr], "120"), "recursion counted twice: %s", r.lines[cr]);
    free(r.text);
    hk_profile_free(p);
}

static void test_header(void)
{
    hk_profile *p = setup(1);
    report r;
    CHECK_INT(report_of(p, 1, 10, &r), 0);
    CHECK(r.flat > 0);
    CHECK_MSG(header_has(&r, "200") && header_has(&r, "ms"), "total 200 ms missing from:\n%s", r.text);
    CHECK_MSG(header_has(&r, "4242"), "the \"samples\" total missing from:\n%s", r.text);
    CHECK_MSG(header_has(&r, "250"), "250 Hz missing from:\n%s", r.text);
    free(r.text);
    hk_profile_free(p);

    p = setup(0); /* no "samples" value: the count is the number of samples */
    CHECK_INT(report_of(p, 0, 10, &r), 0);
    CHECK(r.flat > 0);
    CHECK_MSG(!header_has(&r, "4242") && header_has(&r, "4"), "sample count wrong in:\n%s", r.text);
    free(r.text);
    hk_profile_free(p);
}

static void test_top_n(void)
{
    hk_profile *p = setup(1);
    report r;
    CHECK_INT(report_of(p, 1, 2, &r), 0);
    int end = r.n;
    CHECK(row(&r, r.flat, r.cum, "work", "lib/work.rb") > 0 && row(&r, r.flat, r.cum, "helper", "lib/helper.rb") > 0);
    CHECK(row(&r, r.flat, r.cum, "rec", "lib/rec.rb") < 0 && row(&r, r.flat, r.cum, "idle", "app.rb") < 0);
    CHECK(row(&r, r.cum, end, "main", "app.rb") > 0 && row(&r, r.cum, end, "work", "lib/work.rb") > 0);
    CHECK(row(&r, r.cum, end, "helper", "lib/helper.rb") < 0);
    free(r.text);
    hk_profile_free(p);
}

static void test_bad_value_index(void)
{
    hk_profile *p = setup(1);
    report r;
    CHECK_INT(report_of(p, 2, 10, &r), -1);
    free(r.text);
    CHECK_INT(report_of(p, (size_t)-1, 10, &r), -1);
    free(r.text);
    hk_profile_free(p);
}

static void test_no_samples(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    report r;
    CHECK_INT(report_of(p, 0, 10, &r), 0); /* nothing to rank, and no division by zero */
    free(r.text);
    hk_profile_free(p);
}

static void test_under_failed_allocation(void)
{
    hk_profile *p = setup(1);
    hk_buf ref;
    hk_buf_init(&ref);
    CHECK_INT(hk_text_report(p, 1, 10, &ref), 0);
    for (long nth = 0;; nth++) {
        hk_buf b;
        hk_buf_init(&b);
        long live = alloc_live();
        alloc_fail_at(nth);
        int rc = hk_text_report(p, 1, 10, &b);
        int failed = alloc_fail_done();
        if (!failed) {
            CHECK(rc == 0 && b.len == ref.len && memcmp(b.data, ref.data, b.len) == 0);
            hk_buf_free(&b);
            break;
        }
        hk_buf_free(&b);
        CHECK_MSG(rc == -1, "allocation %ld failed, but the report said %d", nth, rc);
        CHECK_MSG(alloc_live() == live, "allocation %ld: %ld blocks leaked", nth, alloc_live() - live);
    }
    hk_buf_free(&ref);
    hk_profile_free(p);
}

/* the total and the per-function sums are int64 additions without
 * overflow checks (undefined behaviour, UBSan aborts) for values a decoded
 * file can hold. */
static void test_sum_overflow(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    uint32_t loc = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "f"), 0, 0, 0), 1);
    int64_t v = INT64_MAX;
    hk_profile_add_sample(p, &loc, 1, &v, NULL, 0);
    hk_profile_add_sample(p, &loc, 1, &v, NULL, 0);
    report r;
    CHECK_INT(report_of(p, 0, 10, &r), 0);
    free(r.text);
    hk_profile_free(p);
}

/* samples carrying a numeric "thread" label: the header counts the distinct
 * threads when there are several (their times add up in the total), and says
 * nothing for one, nor for a profile without the label (setup's) */
static int has_line(const report *r, const char *prefix)
{
    for (int i = 0; i < r->n; i++)
        if (strncmp(r->lines[i], prefix, strlen(prefix)) == 0) return 1;
    return 0;
}

/* the first line from `from` on that contains s; -1 if none */
static int line_with(const report *r, int from, const char *s)
{
    for (int i = from < 0 ? 0 : from; i < r->n; i++)
        if (strstr(r->lines[i], s)) return i;
    return -1;
}

static void test_thread_count(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "wall", "nanoseconds");
    uint32_t loc = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "f"), 0, 0, 0), 1);
    const int64_t threads[] = {3, 1, 3, 7, 1};
    report r;
    for (int i = 0; i < 5; i++) {
        hk_label l = {.key = hk_profile_string(p, "thread"), .num = threads[i]};
        int64_t v = 1000000;
        hk_profile_add_sample(p, &loc, 1, &v, &l, 1);
        if (i == 0) {
            CHECK_INT(report_of(p, 0, 10, &r), 0);
            CHECK(!has_line(&r, "Threads"));
            free(r.text);
        }
    }
    CHECK_INT(report_of(p, 0, 10, &r), 0);
    CHECK(has_line(&r, "Threads: 3 (the total is their times added)"));
    CHECK_INT(r.flat, 4); /* after the total, samples and threads lines and a blank one */
    free(r.text);
    hk_profile_free(p);
    p = setup(1);
    CHECK_INT(report_of(p, 1, 10, &r), 0);
    CHECK(!has_line(&r, "Threads"));
    free(r.text);
    hk_profile_free(p);
}

/* Samples with a state label: a States section with each state's total, then the
 * calls that blocked and the places that waited (the frame above the state's
 * leaf), by time; none when every sample is running. */
static void test_states(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "wall", "nanoseconds");
    static const char *const names[] = {"main", "Kernel#sleep", "IO#read", "[GVL blocked]", "[GVL wait]", "spin"};
    uint32_t loc[6];
    for (int i = 0; i < 6; i++)
        loc[i] = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, names[i]), 0, 0, 0), 0);
    uint32_t running[] = {loc[5], loc[0]}, slept[] = {loc[3], loc[1], loc[0]}, read[] = {loc[3], loc[2], loc[0]},
             waited[] = {loc[4], loc[5], loc[0]};
    const uint32_t *stacks[] = {running, slept, read, waited};
    const char *const state[] = {"running", "blocked", "blocked", "wait"};
    const int64_t ms[] = {40, 30, 20, 10};
    report r;
    for (int i = 0; i < 4; i++) {
        hk_label l = {.key = hk_profile_string(p, "state"), .str = hk_profile_string(p, state[i])};
        int64_t v = ms[i] * 1000000;
        hk_profile_add_sample(p, stacks[i], i == 0 ? 2 : 3, &v, &l, 1);
        if (i == 0) { /* only running: no section */
            CHECK_INT(report_of(p, 0, 10, &r), 0);
            CHECK(!has_line(&r, "States:"));
            free(r.text);
        }
    }
    CHECK_INT(report_of(p, 0, 10, &r), 0);
    int states = line_with(&r, 0, "States:"), blocking = line_with(&r, 0, "Blocking calls"),
        waits = line_with(&r, 0, "Waits for the GVL");
    CHECK(states >= 0 && blocking > states && waits > blocking);
    CHECK(line_with(&r, states, "40.0 ms  40.0%  running") == states + 1);
    CHECK(line_with(&r, states, "50.0 ms  50.0%  blocked") == states + 2);
    CHECK(line_with(&r, states, "10.0 ms  10.0%  wait") == states + 3);
    CHECK_INT(line_with(&r, blocking, "Kernel#sleep"), blocking + 1); /* 30 ms, before 20 */
    CHECK_INT(line_with(&r, blocking, "IO#read"), blocking + 2);
    CHECK_INT(line_with(&r, waits, "spin"), waits + 1);
    free(r.text);
    hk_profile_free(p);
}

/* a string label other than state gets a table of its values, largest first, top_n of them;
 * numeric labels (thread) and state do not */
static void test_labels(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    uint32_t loc = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "work"), 0, 0, 0), 0);
    static const char *const route[] = {"/a", "/b", "/c", "/b"};
    const int64_t ms[] = {10, 30, 5, 25};
    for (int i = 0; i < 4; i++) {
        hk_label l[] = {{.key = hk_profile_string(p, "thread"), .num = 1},
                        {.key = hk_profile_string(p, "route"), .str = hk_profile_string(p, route[i])},
                        {.key = hk_profile_string(p, "state"), .str = hk_profile_string(p, "running")}};
        int64_t v = ms[i] * 1000000;
        hk_profile_add_sample(p, &loc, 1, &v, l, 3);
    }
    report r;
    CHECK_INT(report_of(p, 0, 2, &r), 0);
    int at = line_with(&r, 0, "Label route:");
    CHECK(at >= 0);
    CHECK_INT(line_with(&r, at, "55.0 ms  78.6%  /b"), at + 1);
    CHECK_INT(line_with(&r, at, "10.0 ms  14.3%  /a"), at + 2);
    CHECK(!has_line(&r, "/c"));      /* past top_n */
    CHECK(!has_line(&r, "Label state:") && !has_line(&r, "Label thread:"));
    free(r.text);
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_sections_and_order);
    RUN(test_header);
    RUN(test_top_n);
    RUN(test_bad_value_index);
    RUN(test_no_samples);
    RUN(test_under_failed_allocation);
    RUN(test_sum_overflow);
    RUN(test_thread_count);
    RUN(test_states);
    RUN(test_labels);
    return check_done();
}
