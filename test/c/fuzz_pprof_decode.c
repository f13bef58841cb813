/* fuzz_pprof_decode.c — libFuzzer entry for the pprof decoder and the report
 * path behind `hakari report` and `diff` (`make fuzz`). Any input must decode
 * to NULL with a message, or to a profile that keeps the model's invariants,
 * survives its own encode -> decode round trip, and goes through every format,
 * a selection, a diff and the differential page without a sanitizer report. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixture.h"
#include "pprof_decode.h"
#include "diff_report.h"
#include "formats.h"
#include "html_encode.h"
#include "pprof_encode.h"
#include "profile_select.h"

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
    /* the report path of `hakari report` and `diff` on what a user may download: every
     * format, a selection, and the profile against its own round trip */
    for (size_t f = 0; f < hk_nformats; f++) {
        hk_buf b;
        hk_buf_init(&b);
        hk_formats[f].encode(p, &b);
        hk_buf_free(&b);
    }
    hk_select tagged = {NULL, NULL, -1, "thread=1", 0};
    hk_profile_free(hk_profile_select(p, &tagged, err, sizeof(err)));
    hk_select sel = {"[a-m]", "z$", -1, NULL, 1};
    hk_profile *s = hk_profile_select(p, &sel, err, sizeof(err));
    if (s && p->nvalues && q->nvalues) {
        hk_buf b;
        hk_buf_init(&b);
        double growth;
        hk_diff_options o = {hk_profile_default_value(s), hk_profile_default_value(q), 0, 20};
        hk_diff_report(s, q, &o, &b, &growth);
        hk_html_diff_encode(s, q, &b);
        hk_buf_free(&b);
    }
    hk_profile_free(s);
    hk_profile_free(q);
    hk_buf_free(&again);
    hk_profile_free(p);
    return 0;
}
