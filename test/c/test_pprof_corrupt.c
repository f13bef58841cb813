/* test_pprof_corrupt.c — the decoder on damaged input: a real encoded profile
 * truncated at every byte, with every byte deleted, every byte set to edge
 * values, random bit flips, and random bytes. Each decode must return NULL
 * with a message, or a profile that satisfies the model's invariants and
 * survives its own round trip. ASan/UBSan watch every read. Set HK_TEST_QUICK
 * (valgrind does) to run a tenth of the random cases. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "fixture.h"
#include "pprof_decode.h"
#include "pprof_encode.h"

static char err[200], why[256];
static long accepted, rejected;

/* decode n bytes (an exact-size copy); 0 if the outcome is acceptable */
static int try_decode(const uint8_t *data, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    err[0] = '\0';
    hk_profile *p = hk_pprof_decode(copy, n, err, sizeof(err));
    free(copy);
    if (!p) {
        rejected++;
        if (err[0] == '\0' || strchr(err, '\n')) {
            snprintf(why, sizeof(why), "rejected without a one-line message");
            return -1;
        }
        return 0;
    }
    accepted++;
    int rc = fixture_valid(p, why, sizeof(why));
    if (rc == 0) {
        hk_buf again = fixture_encode(p, 0);
        hk_profile *q = hk_pprof_decode(again.data, again.len, err, sizeof(err));
        rc = q ? fixture_equal(p, q, why, sizeof(why)) : -1;
        if (!q) snprintf(why, sizeof(why), "own re-encoding rejected: %s", err);
        hk_profile_free(q);
        hk_buf_free(&again);
    }
    hk_profile_free(p);
    return rc;
}

static int quick(void) { return getenv("HK_TEST_QUICK") != NULL; }

static hk_buf encoded(int gzip)
{
    hk_profile *p = fixture_profile(9, 25);
    hk_buf b = fixture_encode(p, gzip);
    hk_profile_free(p);
    return b;
}

static void test_truncations(void)
{
    for (int gzip = 0; gzip < 2; gzip++) {
        hk_buf b = encoded(gzip);
        for (size_t cut = 0; cut < b.len; cut++) {
            long before = accepted;
            CHECK_MSG(try_decode(b.data, cut) == 0, "gzip=%d cut at %zu: %s", gzip, cut, why);
            /* a cut gzip stream never inflates completely */
            if (gzip) CHECK_MSG(accepted == before, "gzip cut at %zu accepted", cut);
        }
        accepted = 0;
        CHECK(try_decode(b.data, b.len) == 0 && accepted == 1);
        hk_buf_free(&b);
    }
}

static void test_deletions_and_edge_bytes(void)
{
    static const uint8_t edges[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    hk_buf b = encoded(0);
    uint8_t *m = malloc(b.len);
    for (size_t i = 0; i < b.len; i++) {
        memcpy(m, b.data, i); /* without byte i */
        memcpy(m + i, b.data + i + 1, b.len - i - 1);
        CHECK_MSG(try_decode(m, b.len - 1) == 0, "byte %zu deleted: %s", i, why);
    }
    memcpy(m, b.data, b.len);
    for (size_t i = 0; i < b.len; i++) {
        for (size_t e = 0; e < sizeof(edges); e++) {
            m[i] = edges[e];
            CHECK_MSG(try_decode(m, b.len) == 0, "byte %zu set to %#x: %s", i, edges[e], why);
        }
        m[i] = b.data[i];
    }
    free(m);
    hk_buf_free(&b);
}

static void test_bit_flips(void)
{
    uint32_t s = 12345;
    for (int gzip = 0; gzip < 2; gzip++) {
        hk_buf b = encoded(gzip);
        uint8_t *m = malloc(b.len);
        long rounds = (gzip ? 3000 : 20000) / (quick() ? 10 : 1);
        for (long r = 0; r < rounds; r++) {
            memcpy(m, b.data, b.len);
            int flips = 1 + (int)(fixture_rand(&s) % 4);
            /* the gzip magic is left alone now and then, to get past it into inflate */
            for (int f = 0; f < flips; f++) {
                size_t at = fixture_rand(&s) % b.len;
                if (gzip && at < 2) at = 2;
                m[at] ^= (uint8_t)(1u << (fixture_rand(&s) % 8));
            }
            CHECK_MSG(try_decode(m, b.len) == 0, "gzip=%d round %ld: %s", gzip, r, why);
        }
        free(m);
        hk_buf_free(&b);
    }
}

static void test_random_bytes(void)
{
    uint32_t s = 777;
    uint8_t m[400];
    hk_buf b = encoded(0);
    long rounds = 20000 / (quick() ? 10 : 1);
    for (long r = 0; r < rounds; r++) {
        size_t n = fixture_rand(&s) % sizeof(m), keep = 0;
        if (r % 2) keep = n < 40 ? n : 40; /* half start like a real profile */
        memcpy(m, b.data, keep);
        for (size_t i = keep; i < n; i++) m[i] = (uint8_t)fixture_rand(&s);
        if (r % 5 == 0 && n >= 2) { m[0] = 0x1f; m[1] = 0x8b; }
        CHECK_MSG(try_decode(m, n) == 0, "round %ld: %s", r, why);
    }
    hk_buf_free(&b);
    /* both outcomes must have been exercised, or this test tests little */
    CHECK(accepted > 0 && rejected > 0);
}

int main(void)
{
    RUN(test_truncations);
    RUN(test_deletions_and_edge_bytes);
    RUN(test_bit_flips);
    RUN(test_random_bytes);
    printf("  (%ld damaged inputs accepted as valid profiles, %ld rejected)\n", accepted, rejected);
    return check_done();
}
