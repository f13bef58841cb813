/* test_collapsed.c — collapsed stacks, against collapsed_encode.h: one line per
 * function path "root;…;leaf value", root first, summed over samples for the
 * chosen value, line numbers merged, first-seen order, zero samples left out,
 * ';' '\n' '\r' in names replaced by '_', -1 for a bad value index. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "check.h"
#include "collapsed_encode.h"

typedef struct fx {
    hk_profile *p;
    uint32_t main_, foo, bar, bar2, weird; /* location ids */
} fx;

/* main (app.rb) -> foo -> bar, bar at two lines, and a function with a hostile name */
static fx setup(void)
{
    fx f;
    f.p = hk_profile_new();
    hk_profile *p = f.p;
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    uint32_t file = hk_profile_string(p, "app.rb");
    uint32_t fmain = hk_profile_function(p, hk_profile_string(p, "main"), 0, file, 1);
    uint32_t ffoo = hk_profile_function(p, hk_profile_string(p, "Foo#foo"), 0, file, 10);
    uint32_t fbar = hk_profile_function(p, hk_profile_string(p, "Bar.bar"), 0, file, 20);
    uint32_t fweird = hk_profile_function(p, hk_profile_string(p, "a;b\nc\rd"), 0, file, 30);
    f.main_ = hk_profile_location(p, fmain, 3);
    f.foo = hk_profile_location(p, ffoo, 12);
    f.bar = hk_profile_location(p, fbar, 21);
    f.bar2 = hk_profile_location(p, fbar, 25);
    f.weird = hk_profile_location(p, fweird, 31);
    return f;
}

static void add(hk_profile *p, const uint32_t *locs, uint32_t n, int64_t samples, int64_t cpu)
{
    int64_t v[2] = {samples, cpu};
    hk_profile_add_sample(p, locs, n, v, NULL, 0);
}

/* the collapsed text of value vi, NUL-terminated; rc receives the return code */
static char *collapsed(const hk_profile *p, size_t vi, int *rc)
{
    hk_buf b;
    hk_buf_init(&b);
    *rc = hk_collapsed_encode(p, vi, &b);
    hk_buf_putc(&b, '\0');
    return (char *)b.data;
}

static void test_paths_merge_and_order(void)
{
    fx f = setup();
    uint32_t s1[] = {f.bar, f.foo, f.main_}, s2[] = {f.foo, f.main_}, s3[] = {f.bar2, f.foo, f.main_},
             s4[] = {f.main_};
    add(f.p, s1, 3, 1, 100);
    add(f.p, s2, 2, 2, 50);
    add(f.p, s3, 3, 1, 25); /* bar at another line: the same function path as s1 */
    add(f.p, s4, 1, 3, 0);  /* no cpu: left out of the cpu output */
    int rc;
    char *cpu = collapsed(f.p, 1, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(cpu, "main;Foo#foo;Bar.bar 125\nmain;Foo#foo 50\n");
    free(cpu);
    char *samples = collapsed(f.p, 0, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(samples, "main;Foo#foo;Bar.bar 2\nmain;Foo#foo 2\nmain 3\n");
    free(samples);
    hk_profile_free(f.p);
}

static void test_first_seen_order(void)
{
    fx f = setup();
    uint32_t x[] = {f.bar, f.main_}, y[] = {f.foo, f.main_};
    add(f.p, y, 2, 1, 3);
    add(f.p, x, 2, 1, 5);
    add(f.p, y, 2, 1, 1);
    int rc;
    char *out = collapsed(f.p, 1, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(out, "main;Foo#foo 4\nmain;Bar.bar 5\n");
    free(out);
    hk_profile_free(f.p);
}

static void test_hostile_names_and_recursion(void)
{
    fx f = setup();
    uint32_t s[] = {f.weird, f.foo, f.foo, f.main_};
    add(f.p, s, 4, 1, 7);
    int rc;
    char *out = collapsed(f.p, 1, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(out, "main;Foo#foo;Foo#foo;a_b_c_d 7\n");
    free(out);
    hk_profile_free(f.p);
}

static void test_large_values(void)
{
    fx f = setup();
    uint32_t s[] = {f.main_};
    add(f.p, s, 1, 1, 1000000000000000LL);
    add(f.p, s, 1, 1, 1000000000000000LL);
    int rc;
    char *out = collapsed(f.p, 1, &rc);
    CHECK_INT(rc, 0);
    CHECK_STR(out, "main 2000000000000000\n");
    free(out);
    hk_profile_free(f.p);
}

static void test_bad_value_index_and_empty(void)
{
    fx f = setup();
    int rc;
    char *out = collapsed(f.p, 1, &rc); /* sample types, no samples: nothing to say */
    CHECK_INT(rc, 0);
    CHECK_STR(out, "");
    free(out);
    out = collapsed(f.p, 2, &rc);
    CHECK_INT(rc, -1);
    free(out);
    out = collapsed(f.p, (size_t)-1, &rc);
    CHECK_INT(rc, -1);
    free(out);
    hk_profile_free(f.p);
    hk_profile *p = hk_profile_new(); /* no sample types at all */
    out = collapsed(p, 0, &rc);
    CHECK_INT(rc, -1);
    free(out);
    hk_profile_free(p);
}

/* n distinct paths: main;fN;fN for N < n, each with value N + 1 */
static hk_profile *many_paths(uint32_t n)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    uint32_t m = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "main"), 0, 0, 0), 1);
    char name[32];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "f%u", i);
        uint32_t l = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, name), 0, 0, 0), 1);
        uint32_t s[] = {l, l, m};
        int64_t v = i + 1;
        hk_profile_add_sample(p, s, 3, &v, NULL, 0);
    }
    return p;
}

static void test_many_paths(void)
{
    hk_profile *p = many_paths(10000);
    int rc;
    char *out = collapsed(p, 0, &rc);
    CHECK_INT(rc, 0);
    size_t lines = 0;
    for (char *c = out; *c; c++) lines += *c == '\n';
    CHECK_INT(lines, 10000);
    CHECK(strncmp(out, "main;f0;f0 1\nmain;f1;f1 2\n", 26) == 0);
    CHECK_CONTAINS(out, "\nmain;f9999;f9999 10000\n");
    free(out);
    hk_profile_free(p);
}

static void test_under_failed_allocation(void)
{
    hk_profile *p = many_paths(300);
    int rc;
    char *ref = collapsed(p, 0, &rc);
    for (long nth = 0;; nth++) {
        hk_buf b;
        hk_buf_init(&b);
        long live = alloc_live();
        alloc_fail_at(nth);
        rc = hk_collapsed_encode(p, 0, &b);
        int failed = alloc_fail_done();
        if (!failed) {
            CHECK(rc == 0 && b.len == strlen(ref) && memcmp(b.data, ref, b.len) == 0);
            hk_buf_free(&b);
            break;
        }
        hk_buf_free(&b);
        CHECK_MSG(rc == -1, "allocation %ld failed, but the encoder said %d", nth, rc);
        CHECK_MSG(alloc_live() == live, "allocation %ld: %ld blocks leaked", nth, alloc_live() - live);
    }
    free(ref);
    hk_profile_free(p);
}

/* sums[id] += v overflows int64 (undefined behaviour, UBSan aborts)
 * when a path's values add up past INT64_MAX, as a decoded file can make them. */
static void test_sum_overflow(void)
{
    fx f = setup();
    uint32_t s[] = {f.main_};
    add(f.p, s, 1, 1, INT64_MAX);
    add(f.p, s, 1, 1, INT64_MAX);
    int rc;
    char *out = collapsed(f.p, 1, &rc);
    CHECK_INT(rc, 0);
    free(out);
    hk_profile_free(f.p);
}

int main(void)
{
    RUN(test_paths_merge_and_order);
    RUN(test_first_seen_order);
    RUN(test_hostile_names_and_recursion);
    RUN(test_large_values);
    RUN(test_bad_value_index_and_empty);
    RUN(test_many_paths);
    RUN(test_under_failed_allocation);
    RUN(test_sum_overflow);
    return check_done();
}
