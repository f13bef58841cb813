/* test_diff_report.c — two profiles compared per function (diff_report.h):
 * shares of each profile's total, or absolute values; functions matched by
 * name and file across profiles whose ids differ; sorted by the size of the
 * change; the largest rise of a self share for a regression gate. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc_fail.h"
#include "check.h"
#include "diff_report.h"

/* main > leaf for each (leaf, ms) pair; functions made in the order given */
static hk_profile *make(const char *const *leaves, const int64_t *ms, int n)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    uint32_t main = hk_profile_location(
        p, hk_profile_function(p, hk_profile_string(p, "main"), 0, hk_profile_string(p, "app.rb"), 1), 1);
    for (int i = 0; i < n; i++) {
        uint32_t f = hk_profile_function(p, hk_profile_string(p, leaves[i]), 0, hk_profile_string(p, "app.rb"), 1);
        uint32_t stack[] = {hk_profile_location(p, f, 2), main};
        int64_t v = ms[i] * 1000000;
        hk_profile_add_sample(p, stack, 2, &v, NULL, 0);
    }
    return p;
}

static const char *const base_leaves[] = {"work", "idle"};
static const int64_t base_ms[] = {60, 40};
static const char *const new_leaves[] = {"fresh", "idle", "work"}; /* other ids, one new function */
static const int64_t new_ms[] = {100, 20, 80};                    /* total 200: work 40 %, idle 10 %, fresh 50 % */

static char *report(const hk_profile *a, const hk_profile *b, int absolute, double *growth, hk_buf *out)
{
    hk_buf_init(out);
    hk_diff_options o = {0, 0, absolute, 10};
    if (hk_diff_report(a, b, &o, out, growth) < 0) return NULL;
    hk_buf_putc(out, '\0');
    return (char *)out->data;
}

static void test_shares_and_their_order(void)
{
    hk_profile *a = make(base_leaves, base_ms, 2), *b = make(new_leaves, new_ms, 3);
    hk_buf out;
    double growth = -1;
    char *r = report(a, b, 0, &growth, &out);
    CHECK(r);
    CHECK_MSG(strstr(r, "Total: 100.0 ms -> 200.0 ms (+100.0 %)"), "%s", r);
    /* self: fresh +50 points, idle -30, work -20, in that order */
    const char *fresh = strstr(r, "+50.00 pts      0.00 -> 50.00     fresh (app.rb)");
    const char *idle = strstr(r, "-30.00 pts     40.00 -> 10.00     idle (app.rb)");
    const char *work = strstr(r, "-20.00 pts     60.00 -> 40.00     work (app.rb)");
    CHECK_MSG(fresh && idle && work && fresh < idle && idle < work, "%s", r);
    /* main is 100 % of both totals: no cumulative change for it */
    CHECK_MSG(!strstr(r, "main (app.rb)"), "%s", r);
    CHECK_MSG(fabs(growth - 50.0) < 1e-9, "growth %f", growth);
    hk_buf_free(&out);
    hk_profile_free(a);
    hk_profile_free(b);
}

static void test_absolute_values(void)
{
    hk_profile *a = make(base_leaves, base_ms, 2), *b = make(new_leaves, new_ms, 3);
    hk_buf out;
    double growth;
    char *r = report(a, b, 1, &growth, &out);
    CHECK(r);
    CHECK_MSG(strstr(r, "+100.00 ms       0.00 -> 100.00    fresh (app.rb)"), "%s", r);
    CHECK_MSG(strstr(r, "+20.00 ms      60.00 -> 80.00     work (app.rb)"), "%s", r);
    CHECK_MSG(strstr(r, "+100.00 ms     100.00 -> 200.00    main (app.rb)"), "%s", r);
    CHECK_MSG(fabs(growth - 50.0) < 1e-9, "the gate reads shares whatever is shown: %f", growth);
    hk_buf_free(&out);
    hk_profile_free(a);
    hk_profile_free(b);
}

static void test_identical_profiles_show_no_change(void)
{
    hk_profile *a = make(base_leaves, base_ms, 2), *b = make(base_leaves, base_ms, 2);
    hk_buf out;
    double growth = -1;
    char *r = report(a, b, 0, &growth, &out);
    CHECK(r);
    CHECK_MSG(!strstr(r, "pts"), "%s", r);
    CHECK_MSG(growth == 0, "growth %f", growth);
    hk_buf_free(&out);
    hk_profile_free(a);
    hk_profile_free(b);
}

static void test_bad_value_index_and_failed_allocation(void)
{
    hk_profile *a = make(base_leaves, base_ms, 2), *b = make(new_leaves, new_ms, 3);
    hk_buf out;
    hk_buf_init(&out);
    double growth;
    hk_diff_options bad = {1, 0, 0, 10};
    CHECK_INT(hk_diff_report(a, b, &bad, &out, &growth), -1);
    for (long nth = 0;; nth++) {
        hk_buf o;
        hk_buf_init(&o);
        long live = alloc_live();
        alloc_fail_at(nth);
        hk_diff_options opt = {0, 0, 0, 10};
        int rc = hk_diff_report(a, b, &opt, &o, &growth);
        int failed = alloc_fail_done();
        hk_buf_free(&o);
        if (!failed) {
            CHECK_INT(rc, 0);
            break;
        }
        CHECK_MSG(rc == -1, "allocation %ld failed, the report said %d", nth, rc);
        CHECK_MSG(alloc_live() == live, "allocation %ld: %ld blocks leaked", nth, alloc_live() - live);
    }
    hk_buf_free(&out);
    hk_profile_free(a);
    hk_profile_free(b);
}

int main(void)
{
    RUN(test_shares_and_their_order);
    RUN(test_absolute_values);
    RUN(test_identical_profiles_show_no_change);
    RUN(test_bad_value_index_and_failed_allocation);
    return check_done();
}
