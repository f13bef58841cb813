/* test_pprof_roundtrip.c — encode -> decode -> compare field by field, raw and
 * gzipped: the rich fixture, empty and extreme profiles, a large one; the
 * encoding is deterministic and re-encoding a decoded profile gives the same
 * bytes; encoding under failing allocations fails cleanly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "check.h"
#include "fixture.h"
#include "pprof_decode.h"
#include "pprof_encode.h"

static char err[256], why[256];

/* p survives encode (gzip or not) + decode unchanged, and re-encodes to the same bytes */
#define CHECK_ROUNDTRIP(p, gzip)                                                          \
    do {                                                                                  \
        hk_buf e1_ = fixture_encode(p, gzip);                                             \
        hk_profile *q_ = hk_pprof_decode(e1_.data, e1_.len, err, sizeof(err));            \
        int same_ = q_ && fixture_equal(p, q_, why, sizeof(why)) == 0;                    \
        hk_buf r1_ = fixture_encode(p, 0), r2_ = fixture_encode(q_ ? q_ : p, 0);          \
        int bytes_ = r1_.len == r2_.len && memcmp(r1_.data, r2_.data, r1_.len) == 0;      \
        hk_buf_free(&e1_);                                                                \
        hk_buf_free(&r1_);                                                                \
        hk_buf_free(&r2_);                                                                \
        hk_profile_free(q_);                                                              \
        CHECK_MSG(same_, "gzip=%d: %s", gzip, q_ ? why : err);                            \
        CHECK_MSG(bytes_, "gzip=%d: re-encoding differs", gzip);                          \
    } while (0)

static void test_fixture(void)
{
    hk_profile *p = fixture_profile(1, 300);
    CHECK(p);
    CHECK_ROUNDTRIP(p, 0);
    CHECK_ROUNDTRIP(p, 1);
    hk_profile_free(p);
}

static void test_empty_profile(void)
{
    hk_profile *p = hk_profile_new();
    hk_buf raw = fixture_encode(p, 0);
    CHECK(raw.len == 2 && memcmp(raw.data, "\x32\x00", 2) == 0); /* just string_table[0] = "" */
    hk_buf_free(&raw);
    CHECK_ROUNDTRIP(p, 0);
    CHECK_ROUNDTRIP(p, 1);
    hk_profile_add_sample_type(p, "cpu", "nanoseconds"); /* types, no samples */
    CHECK_ROUNDTRIP(p, 0);
    hk_profile_free(p);
}

static void test_extremes(void)
{
    hk_profile *p = hk_profile_new();
    char t[8];
    for (int i = 0; i < HK_MAX_SAMPLE_TYPES; i++) {
        snprintf(t, sizeof(t), "v%d", i);
        hk_profile_add_sample_type(p, t, i % 2 ? "bytes" : "");
    }
    p->time_nanos = INT64_MIN;
    p->duration_nanos = -1;
    p->period = INT64_MAX;
    p->period_type.unit = hk_profile_string(p, "count"); /* a unit and no type */
    uint32_t name = hk_profile_string(p, "f"), key = hk_profile_string(p, "k");
    uint32_t f1 = hk_profile_function(p, name, name, name, INT64_MIN);
    uint32_t f2 = hk_profile_function(p, 0, 0, 0, INT64_MAX);
    uint32_t locs[] = {hk_profile_location(p, f1, INT64_MIN), hk_profile_location(p, f2, -1),
                       hk_profile_location(p, f1, INT64_MAX), hk_profile_location(p, f2, 0)};
    int64_t v[HK_MAX_SAMPLE_TYPES] = {INT64_MIN, INT64_MAX, -1, 0, 1, -128, 127, (int64_t)1 << 62};
    hk_label l[] = {{key, 0, 0, INT64_MIN}, {key, 0, key, INT64_MAX}, {0, key, 0, 0}, {0, 0, 0, 0}};
    hk_profile_add_sample(p, locs, 4, v, l, 4);
    hk_profile_add_sample(p, NULL, 0, v, NULL, 0);
    hk_profile_add_sample(p, locs, 1, v, l, 1);
    CHECK(hk_profile_ok(p));
    CHECK_ROUNDTRIP(p, 0);
    CHECK_ROUNDTRIP(p, 1);
    hk_profile_free(p);
}

static void test_large(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    char name[32];
    uint32_t locs[10000];
    for (uint32_t i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "Module%u#method_%u", i % 97, i);
        uint32_t f = hk_profile_function(p, hk_profile_string(p, name), 0, hk_profile_string(p, "big.rb"), i);
        locs[2 * i] = hk_profile_location(p, f, i);
        locs[2 * i + 1] = hk_profile_location(p, f, i + 1);
    }
    uint32_t s = 42, stack[300];
    hk_label l = {hk_profile_string(p, "thread"), hk_profile_string(p, "main"), 0, 0};
    for (uint32_t i = 0; i < 20000; i++) {
        uint32_t depth = fixture_rand(&s) % 300;
        for (uint32_t d = 0; d < depth; d++) stack[d] = locs[fixture_rand(&s) % 10000];
        int64_t v[2] = {1, (int64_t)fixture_rand(&s) * 1000};
        hk_profile_add_sample(p, stack, depth, v, &l, i == 0);
    }
    CHECK(hk_profile_ok(p));
    CHECK_ROUNDTRIP(p, 1);
    hk_profile_free(p);
}

static void test_deterministic_and_gzip_framing(void)
{
    hk_profile *p = fixture_profile(2, 50);
    hk_buf a = fixture_encode(p, 0), b = fixture_encode(p, 0), z = fixture_encode(p, 1);
    CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    CHECK(a.data[0] != 0x1f);
    CHECK(z.len > 18 && z.data[0] == 0x1f && z.data[1] == 0x8b && z.data[2] == 8);
    hk_buf out;
    hk_buf_init(&out);
    CHECK_INT(hk_gunzip(z.data, z.len, HK_PPROF_MAX_INFLATED, &out, err, sizeof(err)), 0);
    CHECK(out.len == a.len && memcmp(out.data, a.data, a.len) == 0);
    hk_buf_free(&out);
    hk_buf_free(&a);
    hk_buf_free(&b);
    hk_buf_free(&z);
    hk_profile_free(p);
}

static void test_encode_appends(void)
{
    hk_profile *p = fixture_profile(3, 10);
    hk_buf ref = fixture_encode(p, 0), out;
    hk_buf_init(&out);
    hk_buf_puts(&out, "prefix");
    CHECK_INT(hk_pprof_encode(p, &out, 0), 0);
    CHECK(out.len == 6 + ref.len && memcmp(out.data, "prefix", 6) == 0);
    CHECK(memcmp(out.data + 6, ref.data, ref.len) == 0);
    hk_buf_free(&out);
    hk_buf_free(&ref);
    hk_profile_free(p);
}

/* every allocation of an encode fails in turn: -1, out keeps its bytes, nothing leaks */
static void test_encode_under_failed_allocation(void)
{
    hk_profile *p = fixture_profile(4, 30);
    for (int gzip = 0; gzip < 2; gzip++) {
        hk_buf ref = fixture_encode(p, gzip), out;
        for (long nth = 0;; nth++) {
            hk_buf_init(&out);
            hk_buf_puts(&out, "abc");
            long live = alloc_live();
            alloc_fail_at(nth);
            int rc = hk_pprof_encode(p, &out, gzip);
            int failed = alloc_fail_done();
            if (!failed) {
                CHECK(rc == 0 && out.len == 3 + ref.len && memcmp(out.data + 3, ref.data, ref.len) == 0);
                hk_buf_free(&out);
                break;
            }
            CHECK_MSG(rc == -1, "gzip=%d allocation %ld failed, encode said %d", gzip, nth, rc);
            CHECK_MSG(out.len == 3 && memcmp(out.data, "abc", 3) == 0, "gzip=%d allocation %ld", gzip, nth);
            CHECK_MSG(alloc_live() == live, "gzip=%d allocation %ld: %ld blocks leaked", gzip, nth,
                      alloc_live() - live);
            hk_buf_free(&out);
        }
        hk_buf_free(&ref);
    }
    hk_profile_free(p);
}

/* pprof_encode.h: out "is left as it was on failure" — also when the failing
 * allocation is out's own growth, whose sticky oom flag must not stay set. */
static void test_failed_encode_sets_oom_on_out(void)
{
    hk_profile *p = fixture_profile(4, 30);
    for (int gzip = 0; gzip < 2; gzip++) {
        for (long nth = 0;; nth++) {
            hk_buf out;
            hk_buf_init(&out);
            hk_buf_puts(&out, "abc");
            alloc_fail_at(nth);
            int rc = hk_pprof_encode(p, &out, gzip);
            int failed = alloc_fail_done(), ok = hk_buf_ok(&out);
            hk_buf_free(&out);
            if (!failed) break;
            CHECK_MSG(rc == -1 && ok, "gzip=%d, allocation %ld failed: out is marked oom", gzip, nth);
        }
    }
    hk_profile_free(p);
}

/* A profile without labels has no label pool: encoding it must not compute
 * NULL + 0 (clang's UBSan aborts on that). */
static void test_label_free_profile(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    uint32_t loc = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "f"), 0, 0, 0), 1);
    int64_t v = 5;
    hk_profile_add_sample(p, &loc, 1, &v, NULL, 0);
    CHECK_ROUNDTRIP(p, 0);
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_fixture);
    RUN(test_empty_profile);
    RUN(test_extremes);
    RUN(test_large);
    RUN(test_deterministic_and_gzip_framing);
    RUN(test_encode_appends);
    RUN(test_encode_under_failed_allocation);
    RUN(test_failed_encode_sets_oom_on_out);
    RUN(test_label_free_profile);
    return check_done();
}
