/* collapsed_encode.c — see collapsed_encode.h.
 * Stacks are re-keyed by function ids (root first) in an intern table, so
 * samples that differ only in line numbers or thread collapse into one line.
 */
#include "collapsed_encode.h"

#include <inttypes.h>
#include <stdlib.h>

#include "intern_table.h"

static void put_name(hk_buf *out, const char *s)
{
    for (; *s; s++) hk_buf_putc(out, (*s == ';' || *s == '\n' || *s == '\r') ? '_' : (uint8_t)*s);
}

int hk_collapsed_encode(const hk_profile *p, size_t vi, hk_buf *out)
{
    if (vi >= p->nvalues) return -1;
    int rc = -1;
    hk_intern_table paths;
    hk_intern_init(&paths);
    int64_t *sums = NULL;
    size_t sums_cap = 0;
    uint32_t *funcs = NULL;
    size_t funcs_cap = 0;
    hk_locbuf stack = {0};

    for (size_t i = 0; i < p->nsamples; i++) {
        int64_t v = hk_profile_sample_values(p, i)[vi];
        uint32_t n = p->samples[i].nloc;
        if (v == 0 || n == 0) continue; /* a stackless line (" 140") is no stack for a flame graph */
        const uint32_t *locs = hk_profile_sample_locs(p, i, &stack);
        if (!locs) goto fail;
        if (n > funcs_cap) {
            uint32_t *f = realloc(funcs, n * sizeof(*f));
            if (!f) goto fail;
            funcs = f;
            funcs_cap = n;
        }
        for (uint32_t j = 0; j < n; j++) funcs[j] = hk_profile_loc(p, locs[n - 1 - j])->function_id;
        int64_t id = hk_intern_seq(&paths, funcs, n);
        if (id < 0) goto fail;
        if ((size_t)id >= sums_cap) {
            size_t cap = sums_cap ? sums_cap * 2 : 256;
            int64_t *s = realloc(sums, cap * sizeof(*s));
            if (!s) goto fail;
            for (size_t k = sums_cap; k < cap; k++) s[k] = 0;
            sums = s;
            sums_cap = cap;
        }
        sums[id] = hk_add_sat(sums[id], v);
    }
    for (size_t id = 0; id < hk_intern_count(&paths); id++) {
        uint32_t n;
        const uint32_t *f = hk_intern_get(&paths, (uint32_t)id, &n);
        for (uint32_t j = 0; j < n; j++) {
            if (j) hk_buf_putc(out, ';');
            put_name(out, hk_profile_str(p, hk_profile_func(p, f[j])->name));
        }
        hk_buf_printf(out, " %" PRId64 "\n", sums[id]);
    }
    rc = hk_buf_ok(out) ? 0 : -1;
fail:
    hk_intern_free(&paths);
    free(sums);
    free(funcs);
    hk_locbuf_free(&stack);
    return rc;
}
