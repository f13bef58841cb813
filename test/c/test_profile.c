/* test_profile.c — the profile model: strings, sample types, interned functions
 * and locations (64-bit lines), samples in pools, comments, defaults, totals,
 * growth, and building under failing allocations. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "check.h"
#include "fixture.h"
#include "profile.h"

static void test_new_profile(void)
{
    hk_profile *p = hk_profile_new();
    CHECK(p);
    CHECK(hk_profile_ok(p));
    CHECK_INT(p->strings.count, 1);
    CHECK_STR(hk_profile_str(p, 0), "");
    CHECK_STR(hk_profile_str(p, 12345), ""); /* out of range reads as "" */
    CHECK_INT(p->nvalues, 0);
    CHECK_INT(hk_profile_default_value(p), 0);
    CHECK_INT(hk_profile_find_value(p, "cpu"), -1);
    CHECK_INT(hk_profile_total(p, 0), 0);
    CHECK(hk_profile_memsize(p) >= sizeof(*p));
    hk_profile_free(p);
    hk_profile_free(NULL);
}

static void test_strings(void)
{
    hk_profile *p = hk_profile_new();
    uint32_t a = hk_profile_string(p, "main");
    CHECK(a != 0);
    CHECK_INT(hk_profile_string(p, "main"), a);
    CHECK_INT(hk_profile_string(p, NULL), 0);
    CHECK_INT(hk_profile_string(p, ""), 0);
    uint32_t b = hk_profile_string_n(p, "main\0x", 6);
    CHECK(b != a && b != 0);
    CHECK_STR(hk_profile_str(p, a), "main");
    hk_profile_free(p);
}

static void test_sample_types(void)
{
    hk_profile *p = hk_profile_new();
    char name[16];
    for (int i = 0; i < HK_MAX_SAMPLE_TYPES; i++) {
        snprintf(name, sizeof(name), "t%d", i);
        CHECK_INT(hk_profile_add_sample_type(p, name, "count"), 0);
    }
    CHECK_INT(hk_profile_add_sample_type(p, "one_more", "count"), -1);
    CHECK_INT(p->nvalues, HK_MAX_SAMPLE_TYPES);
    CHECK_INT(hk_profile_find_value(p, "t3"), 3);
    CHECK_INT(hk_profile_find_value(p, "t"), -1);
    CHECK_STR(hk_profile_str(p, p->sample_types[7].type), "t7");
    CHECK_STR(hk_profile_str(p, p->sample_types[7].unit), "count");
    CHECK_INT(hk_profile_default_value(p), 7); /* no default: the last */
    p->default_sample_type = hk_profile_string(p, "t2");
    CHECK_INT(hk_profile_default_value(p), 2);
    p->default_sample_type = hk_profile_string(p, "nope");
    CHECK_INT(hk_profile_default_value(p), 7);
    hk_profile_free(p);

    p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    int64_t v = 1;
    CHECK_INT(hk_profile_add_sample(p, NULL, 0, &v, NULL, 0), 0);
    CHECK_INT(hk_profile_add_sample_type(p, "late", "count"), -1); /* samples exist */
    CHECK_INT(p->nvalues, 1);
    hk_profile_free(p);
}

static void test_function_interning(void)
{
    hk_profile *p = hk_profile_new();
    uint32_t n = hk_profile_string(p, "foo"), f = hk_profile_string(p, "a.rb"), s = hk_profile_string(p, "sys");
    uint32_t a = hk_profile_function(p, n, 0, f, 10);
    CHECK_INT(a, 1);
    CHECK_INT(hk_profile_function(p, n, 0, f, 10), 1);
    CHECK_INT(hk_profile_function(p, n, s, f, 10), 2);
    CHECK_INT(hk_profile_function(p, n, 0, f, 11), 3);
    CHECK_INT(hk_profile_function(p, n, 0, f, -10), 4);
    /* start lines that differ only in their high 32 bits are different functions */
    CHECK_INT(hk_profile_function(p, n, 0, f, 10 + ((int64_t)1 << 32)), 5);
    CHECK_INT(hk_profile_function(p, n, 0, f, INT64_MIN), 6);
    CHECK_INT(hk_profile_function(p, n, 0, f, INT64_MAX), 7);
    CHECK_INT(hk_profile_function(p, 0, 0, 0, 0), 8);
    CHECK_INT(p->nfunctions, 8);
    CHECK_INT(hk_profile_func(p, 5)->start_line, 10 + ((int64_t)1 << 32));
    CHECK_INT(hk_profile_func(p, 6)->start_line, INT64_MIN);
    CHECK(hk_profile_func(p, 2)->system_name == s && hk_profile_func(p, 2)->filename == f);
    hk_profile_free(p);
}

static void test_location_interning(void)
{
    hk_profile *p = hk_profile_new();
    uint32_t fn = hk_profile_function(p, hk_profile_string(p, "foo"), 0, 0, 0);
    uint32_t fn2 = hk_profile_function(p, hk_profile_string(p, "bar"), 0, 0, 0);
    CHECK_INT(hk_profile_location(p, fn, 5), 1);
    CHECK_INT(hk_profile_location(p, fn, 5), 1);
    CHECK_INT(hk_profile_location(p, fn2, 5), 2);
    CHECK_INT(hk_profile_location(p, fn, -5), 3);
    CHECK_INT(hk_profile_location(p, fn, 5 + ((int64_t)1 << 32)), 4);
    CHECK_INT(hk_profile_location(p, fn, INT64_MIN), 5);
    CHECK_INT(hk_profile_location(p, fn, 0), 6);
    CHECK_INT(p->nlocations, 6);
    CHECK(hk_profile_loc(p, 3)->function_id == fn && hk_profile_loc(p, 3)->line == -5);
    CHECK_INT(hk_profile_loc(p, 5)->line, INT64_MIN);
    hk_profile_free(p);
}

static void test_samples(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    uint32_t locs[] = {3, 2, 1};
    int64_t v1[] = {1, 1000}, v2[] = {2, -7}, v3[] = {0, INT64_MAX - 993};
    hk_label labels[] = {{hk_profile_string(p, "thread"), hk_profile_string(p, "main"), 0, 0},
                         {hk_profile_string(p, "bytes"), 0, hk_profile_string(p, "bytes"), -1}};
    CHECK_INT(hk_profile_add_sample(p, locs, 3, v1, labels, 2), 0);
    CHECK_INT(hk_profile_add_sample(p, locs + 1, 2, v2, NULL, 0), 0);
    CHECK_INT(hk_profile_add_sample(p, NULL, 0, v3, labels + 1, 1), 0); /* empty stack */
    CHECK_INT(p->nsamples, 3);
    CHECK(p->samples[0].nloc == 3 && fixture_locs(p, 0)[2] == 1);
    CHECK(p->samples[1].nloc == 2 && fixture_locs(p, 1)[0] == 2);
    CHECK_INT(p->samples[2].nloc, 0);
    CHECK(hk_profile_sample_values(p, 1)[1] == -7 && hk_profile_sample_values(p, 2)[1] == INT64_MAX - 993);
    CHECK(p->samples[0].nlabel == 2 && hk_profile_sample_labels(p, 0)[1].num == -1);
    CHECK(p->samples[2].nlabel == 1 && hk_profile_sample_labels(p, 2)[0].num_unit == labels[1].num_unit);
    CHECK_INT(hk_profile_total(p, 0), 3);
    CHECK_INT(hk_profile_total(p, 1), INT64_MAX); /* 1000 - 7 + (INT64_MAX - 993) */
    CHECK_INT(hk_profile_total(p, 2), 0);                              /* not a value index */
    hk_profile_free(p);
}

static void test_no_sample_types(void)
{
    hk_profile *p = hk_profile_new();
    uint32_t loc = 1;
    CHECK_INT(hk_profile_add_sample(p, &loc, 1, NULL, NULL, 0), 0);
    CHECK_INT(p->nsamples, 1);
    CHECK_INT(hk_profile_total(p, 0), 0);
    hk_profile_free(p);
}

static void test_comments(void)
{
    hk_profile *p = hk_profile_new();
    CHECK_INT(hk_profile_add_comment(p, "first"), 0);
    CHECK_INT(hk_profile_add_comment(p, ""), 0);
    CHECK_INT(hk_profile_add_comment(p, "first"), 0);
    CHECK_INT(p->ncomments, 3);
    CHECK_STR(hk_profile_str(p, p->comments[0]), "first");
    CHECK_INT(p->comments[1], 0);
    CHECK_INT(p->comments[2], p->comments[0]);
    hk_profile_free(p);
}

static void test_growth(void)
{
    hk_profile *p = fixture_profile(7, 20000);
    CHECK(p);
    char why[200];
    CHECK_MSG(fixture_valid(p, why, sizeof(why)) == 0, "%s", why);
    CHECK_INT(p->nsamples, 20000);
    hk_profile *q = hk_profile_new();
    for (uint32_t i = 0; i < 5000; i++) { /* many distinct functions and locations */
        char name[32];
        snprintf(name, sizeof(name), "f%u", i);
        uint32_t f = hk_profile_function(q, hk_profile_string(q, name), 0, 0, i);
        CHECK_INT(f, i + 1);
        CHECK_INT(hk_profile_location(q, f, -(int64_t)i), i + 1);
        CHECK_INT(hk_profile_location(q, f, -(int64_t)i), i + 1);
    }
    CHECK(q->nfunctions == 5000 && q->nlocations == 5000);
    CHECK_STR(hk_profile_str(q, hk_profile_func(q, 4321)->name), "f4320");
    CHECK(hk_profile_memsize(q) > 5000 * (sizeof(hk_function) + sizeof(hk_location)));
    hk_profile_free(q);
    hk_profile_free(p);
}

/* how many allocations hk_profile_new makes */
static long new_allocations(void)
{
    alloc_fail_at(-1);
    hk_profile_free(hk_profile_new());
    return alloc_fail_count();
}

/* Builds the fixture with allocation nth failing: either it reports the
 * failure (NULL) and holds no memory, or nth is past its last allocation and
 * the profile is complete. */
/* Stacks are a trie: a stack one call deeper than a known one costs one entry, equal stacks
 * are one entry, and appended stacks (a tree's nodes) are read back leaf first. */
static void test_stacks_share_their_callers(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "calls", "count");
    int64_t v[] = {1};
    uint32_t abc[] = {3, 2, 1}, bc[] = {2, 1}, xbc[] = {4, 2, 1};
    CHECK_INT(hk_profile_add_sample(p, abc, 3, v, NULL, 0), 0);
    CHECK_INT(p->nstacks, 3);
    CHECK_INT(hk_profile_add_sample(p, bc, 2, v, NULL, 0), 0);  /* a prefix: no new entry */
    CHECK_INT(hk_profile_add_sample(p, xbc, 3, v, NULL, 0), 0); /* one new leaf */
    CHECK_INT(hk_profile_add_sample(p, abc, 3, v, NULL, 0), 0);
    CHECK_INT(p->nstacks, 4);
    CHECK(p->samples[0].stack == p->samples[3].stack && p->samples[1].stack != p->samples[0].stack);
    CHECK_INT(p->stacks[p->samples[2].stack - 1].parent, p->samples[1].stack);
    const uint32_t *l = fixture_locs(p, 2);
    CHECK(l[0] == 4 && l[1] == 2 && l[2] == 1);
    /* appended: a node under the stack of {2, 1}, never looked up */
    uint32_t s = hk_profile_stack_append(p, p->samples[1].stack, 5);
    CHECK_INT(hk_profile_add_sample_stack(p, s, 3, v, NULL, 0), 0);
    l = fixture_locs(p, 4);
    CHECK(p->samples[4].nloc == 3 && l[0] == 5 && l[1] == 2 && l[2] == 1);
    CHECK_INT(p->nstacks, 5);
    CHECK_INT(hk_profile_stack(p, p->samples[1].stack, 3), p->samples[0].stack);
    hk_profile_free(p);
}

/* A trace's folded-calls comment is read back; one without folded calls, or none, is not */
static void test_folded_comment(void)
{
    hk_profile *p = hk_profile_new();
    hk_folded f;
    CHECK_INT(hk_profile_folded(p, &f), 0);
    hk_profile_add_comment(p, "max_paths=500 folded_calls=0 folded_ns=0 dropped_calls=0");
    CHECK_INT(hk_profile_folded(p, &f), 0);
    hk_profile_add_comment(p, "max_paths=300 folded_calls=1234 folded_objects=99 dropped_calls=0");
    CHECK_INT(hk_profile_folded(p, &f), 1);
    CHECK(f.max_paths == 300 && f.calls == 1234 && f.measure == 99);
    CHECK_STR(f.unit, "objects");
    hk_profile_free(p);
}

static void test_build_under_failed_allocation(void)
{
    alloc_fail_at(-1);
    hk_profile *ref = fixture_profile(3, 50);
    long total = alloc_fail_count(), live = alloc_live();
    CHECK(ref && total > 10);
    char why[200];
    for (long nth = 0; nth <= total; nth++) {
        alloc_fail_at(nth);
        hk_profile *p = fixture_profile(3, 50);
        int failed = alloc_fail_done();
        CHECK_MSG(failed == (nth < total), "allocation %ld of %ld", nth, total);
        CHECK_MSG(failed ? p == NULL : p != NULL, "allocation %ld: failure not reported", nth);
        if (p) CHECK_MSG(fixture_equal(ref, p, why, sizeof(why)) == 0, "%s", why);
        hk_profile_free(p);
        CHECK_MSG(alloc_live() == live, "allocation %ld failed: %ld blocks leaked", nth, alloc_live() - live);
    }
    hk_profile_free(ref);
}

/* A failed allocation inside hk_profile_new (in hk_strtab_init) leaks nothing. */
static void test_new_leaks_on_failed_allocation(void)
{
    long n = new_allocations(), live = alloc_live();
    for (long nth = 0; nth < n; nth++) {
        alloc_fail_at(nth);
        hk_profile *p = hk_profile_new();
        CHECK(alloc_fail_done() && p == NULL);
        CHECK_MSG(alloc_live() == live, "allocation %ld failed: %ld blocks leaked", nth, alloc_live() - live);
    }
}

/* hk_profile_total adds int64 values without overflow checks; a
 * profile read from a file (values are untrusted) makes it overflow, which is
 * undefined behaviour (UBSan aborts here). */
static void test_total_overflow(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    int64_t v = INT64_MAX;
    hk_profile_add_sample(p, NULL, 0, &v, NULL, 0);
    hk_profile_add_sample(p, NULL, 0, &v, NULL, 0);
    int64_t t = hk_profile_total(p, 0);
    CHECK(t == INT64_MAX || t == -2); /* saturated or wrapped: either, as long as it is defined */
    hk_profile_free(p);
}

/* The pools (the stacks' items, values, label_pool) stay NULL until something non-empty
 * is stored: the profile.h accessors must not add an offset to NULL (undefined
 * behaviour; clang's UBSan aborts on "applying zero offset to null pointer"). */
static void test_accessors_on_empty_pools(void)
{
    hk_profile *p = hk_profile_new();
    CHECK_INT(hk_profile_add_sample(p, NULL, 0, NULL, NULL, 0), 0);
    /* UBSan is the check: nothing may be read through these, only computed */
    const void *volatile sink = fixture_locs(p, 0);
    sink = hk_profile_sample_values(p, 0);
    sink = hk_profile_sample_labels(p, 0);
    (void)sink;
    CHECK_INT(p->samples[0].nloc + p->samples[0].nlabel, 0);
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_new_profile);
    RUN(test_strings);
    RUN(test_sample_types);
    RUN(test_function_interning);
    RUN(test_location_interning);
    RUN(test_samples);
    RUN(test_stacks_share_their_callers);
    RUN(test_folded_comment);
    RUN(test_no_sample_types);
    RUN(test_comments);
    RUN(test_growth);
    RUN(test_build_under_failed_allocation);
    /* bugs that abort under UBSan last, so the others still run */
    RUN(test_new_leaks_on_failed_allocation);
    RUN(test_accessors_on_empty_pools);
    RUN(test_total_overflow);
    return check_done();
}
