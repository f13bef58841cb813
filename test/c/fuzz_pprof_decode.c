/* fuzz_pprof_decode.c — libFuzzer entry for the pprof decoder (`make fuzz`).
 * Any input must decode to NULL with a message, or to a profile that keeps the
 * model's invariants and survives its own encode -> decode round trip. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixture.h"
#include "pprof_decode.h"
#include "pprof_encode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char err[256], why[256];
    err[0] = '\0';
    hk_profile *p = hk_pprof_decode(data, n, err, sizeof(err));
    if (!p) {
        if (err[0] == '\0') abort(); /* a rejection always says why */
        return 0;
    }
    if (fixture_valid(p, why, sizeof(why)) < 0) {
        fprintf(stderr, "decoded profile is invalid: %s\n", why);
        abort();
    }
    hk_buf again = fixture_encode(p, 0);
    hk_profile *q = hk_pprof_decode(again.data, again.len, err, sizeof(err));
    if (!q || fixture_equal(p, q, why, sizeof(why)) < 0) {
        fprintf(stderr, "round trip of a decoded profile failed: %s\n", q ? why : err);
        abort();
    }
    hk_profile_free(q);
    hk_buf_free(&again);
    hk_profile_free(p);
    return 0;
}
