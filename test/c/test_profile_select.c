/* test_profile_select.c — a report's selection of samples (profile_select.h):
 * --focus keeps the samples with a matching frame, --ignore drops them,
 * --thread keeps one thread's, --lines makes each executing line a function;
 * what is kept is copied whole (values, labels, the profile's header); a bad
 * expression is a message naming it; a failed allocation leaves nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "check.h"
#include "fixture.h"
#include "profile_select.h"

/* thread 1: main > work > helper (50 ms), main > work (30 ms at line 11, 20 ms at line 12);
 * thread 2: main > idle (40 ms). Thread 1's samples carry a route label: "/a" but the last,
 * "/b". A comment, a period and a duration to carry over. */
static hk_profile *setup(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    p->default_sample_type = hk_profile_string(p, "cpu");
    p->period_type = (hk_value_type){hk_profile_string(p, "cpu"), hk_profile_string(p, "nanoseconds")};
    p->period = 1000000;
    p->duration_nanos = 140000000;
    hk_profile_add_comment(p, "mode=cpu");
    static const char *const names[] = {"main", "work", "helper", "idle"};
    uint32_t f[4];
    for (int i = 0; i < 4; i++) f[i] = hk_profile_function(p, hk_profile_string(p, names[i]), 0, hk_profile_string(p, "app.rb"), 1);
    uint32_t main = hk_profile_location(p, f[0], 5), work11 = hk_profile_location(p, f[1], 11),
             work12 = hk_profile_location(p, f[1], 12), helper = hk_profile_location(p, f[2], 20),
             idle = hk_profile_location(p, f[3], 30);
    hk_label t1[] = {{hk_profile_string(p, "thread"), 0, 0, 1}, {hk_profile_string(p, "route"), hk_profile_string(p, "/a"), 0, 0}},
             t1b[] = {{hk_profile_string(p, "thread"), 0, 0, 1}, {hk_profile_string(p, "route"), hk_profile_string(p, "/b"), 0, 0}},
             t2 = {hk_profile_string(p, "thread"), 0, 0, 2};
    uint32_t s1[] = {helper, work11, main}, s2[] = {work11, main}, s3[] = {work12, main}, s4[] = {idle, main};
    int64_t v1[] = {50, 50000000}, v2[] = {30, 30000000}, v3[] = {20, 20000000}, v4[] = {40, 40000000};
    hk_profile_add_sample(p, s1, 3, v1, t1, 2);
    hk_profile_add_sample(p, s2, 2, v2, t1, 2);
    hk_profile_add_sample(p, s3, 2, v3, t1b, 2);
    hk_profile_add_sample(p, s4, 2, v4, &t2, 1);
    return p;
}

static hk_profile *select_tagged(const hk_profile *p, const char *focus, const char *ignore, int64_t thread,
                                 const char *tag, int lines)
{
    hk_select sel = {focus, ignore, thread, tag, lines};
    char err[256];
    hk_profile *q = hk_profile_select(p, &sel, err, sizeof(err));
    if (!q) fprintf(stdout, "        select failed: %s\n", err);
    return q;
}

static hk_profile *select_from(const hk_profile *p, const char *focus, const char *ignore, int64_t thread, int lines)
{
    return select_tagged(p, focus, ignore, thread, NULL, lines);
}

/* the leaf's name of each sample of q, joined by spaces */
static void leaves(const hk_profile *q, char *out, size_t n)
{
    out[0] = '\0';
    for (size_t i = 0; i < q->nsamples; i++) {
        const char *name = hk_profile_str(q, hk_profile_func(q, hk_profile_loc(q, fixture_locs(q, i)[0])->function_id)->name);
        strncat(out, i ? " " : "", n - strlen(out) - 1);
        strncat(out, name, n - strlen(out) - 1);
    }
}

static void test_everything_is_kept_without_a_filter(void)
{
    hk_profile *p = setup(), *q = select_from(p, NULL, NULL, -1, 0);
    CHECK(q);
    char got[256];
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "helper work work idle");
    CHECK_INT(hk_profile_total(q, 1), 140000000);
    CHECK_INT(q->period, 1000000);
    CHECK_INT(q->duration_nanos, 140000000);
    CHECK_INT(q->ncomments, 1);
    CHECK_STR(hk_profile_str(q, q->comments[0]), "mode=cpu");
    CHECK_STR(hk_profile_str(q, q->default_sample_type), "cpu");
    CHECK_INT(q->samples[3].nlabel, 1);
    CHECK_INT(hk_profile_sample_labels(q, 3)[0].num, 2);
    hk_profile_free(q);
    hk_profile_free(p);
}

static void test_focus_ignore_and_thread(void)
{
    hk_profile *p = setup();
    char got[256];
    hk_profile *q = select_from(p, "^help", NULL, -1, 0);
    CHECK(q);
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "helper");
    hk_profile_free(q);
    q = select_from(p, "work", "helper|idle", -1, 0); /* a frame anywhere in the stack counts */
    CHECK(q);
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "work work");
    hk_profile_free(q);
    q = select_from(p, NULL, NULL, 2, 0);
    CHECK(q);
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "idle");
    hk_profile_free(q);
    q = select_from(p, "nothing matches this", NULL, -1, 0); /* an empty profile, not an error */
    CHECK(q);
    CHECK_INT(q->nsamples, 0);
    CHECK_INT(q->nvalues, 2);
    hk_profile_free(q);
    hk_profile_free(p);
}

static void test_lines_become_functions(void)
{
    hk_profile *p = setup(), *q = select_from(p, NULL, NULL, -1, 1);
    CHECK(q);
    char got[256];
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "helper:20 work:11 work:12 idle:30");
    /* work at line 11 is one function in two samples, at line 12 another */
    CHECK_INT(q->nfunctions, 5);
    hk_profile_free(q);
    hk_profile_free(p);
}

/* a string label by its value, a numeric one by its number; a key or value that no sample has
 * leaves an empty profile */
static void test_tag_selects_by_label(void)
{
    hk_profile *p = setup(), *q = select_tagged(p, NULL, NULL, -1, "route=/b", 0);
    char got[256];
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "work");
    CHECK(hk_profile_sample_values(q, 0)[1] == 20000000);
    hk_profile_free(q);
    q = select_tagged(p, "work", NULL, -1, "route=/a", 0);
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "helper work");
    hk_profile_free(q);
    q = select_tagged(p, NULL, NULL, -1, "thread=2", 0);
    leaves(q, got, sizeof(got));
    CHECK_STR(got, "idle");
    hk_profile_free(q);
    static const char *const none[] = {"route=/c", "route=", "rout=/a", "thread=02"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        q = select_tagged(p, NULL, NULL, -1, none[i], 0);
        CHECK_MSG(q && q->nsamples == 0, "%s: %zu samples", none[i], q ? q->nsamples : 0);
        hk_profile_free(q);
    }
    hk_profile_free(p);
}

static void test_a_bad_expression_is_named(void)
{
    hk_profile *p = setup();
    hk_select sel = {"(unclosed", NULL, -1, NULL, 0};
    char err[256] = "";
    CHECK(hk_profile_select(p, &sel, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "--focus") && strstr(err, "(unclosed"), "message: %s", err);
    sel = (hk_select){NULL, "[", -1, NULL, 0};
    CHECK(hk_profile_select(p, &sel, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "--ignore") && strstr(err, "\"[\""), "message: %s", err);
    static const char *const bad_tags[] = {"route", "=/a", ""};
    for (size_t i = 0; i < sizeof(bad_tags) / sizeof(bad_tags[0]); i++) {
        sel = (hk_select){NULL, NULL, -1, bad_tags[i], 0};
        err[0] = '\0';
        CHECK(hk_profile_select(p, &sel, err, sizeof(err)) == NULL);
        CHECK_MSG(strstr(err, "--tag") && strstr(err, "KEY=VALUE"), "tag \"%s\": %s", bad_tags[i], err);
    }
    hk_profile_free(p);
}

static void test_under_failed_allocation(void)
{
    hk_profile *p = setup();
    for (long nth = 0;; nth++) {
        long live = alloc_live();
        hk_select sel = {"work", NULL, 1, "route=/a", 1};
        char err[256] = "";
        alloc_fail_at(nth);
        hk_profile *q = hk_profile_select(p, &sel, err, sizeof(err));
        int failed = alloc_fail_done();
        if (!failed) {
            CHECK(q && q->nsamples == 2);
            hk_profile_free(q);
            break;
        }
        CHECK_MSG(!q && strcmp(err, "out of memory") == 0, "allocation %ld failed: %p, \"%s\"", nth, (void *)q, err);
        CHECK_MSG(alloc_live() == live, "allocation %ld: %ld blocks leaked", nth, alloc_live() - live);
    }
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_everything_is_kept_without_a_filter);
    RUN(test_focus_ignore_and_thread);
    RUN(test_lines_become_functions);
    RUN(test_tag_selects_by_label);
    RUN(test_a_bad_expression_is_named);
    RUN(test_under_failed_allocation);
    return check_done();
}
