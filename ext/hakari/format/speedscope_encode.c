/* speedscope_encode.c — see speedscope_encode.h.
 * A sample's thread is found once, then each thread's samples are written
 * in one pass over the profile per thread: profiles have few threads. */
#include "speedscope_encode.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static int64_t thread_of(const hk_profile *p, size_t i)
{
    const hk_label *l = hk_profile_sample_labels(p, i);
    for (uint32_t j = 0; j < p->samples[i].nlabel; j++)
        if (!l[j].str && strcmp(hk_profile_str(p, l[j].key), "thread") == 0) return l[j].num;
    return -1;
}

/* speedscope's name for a unit: its own where it has one, else "none" */
static const char *unit_of(const char *u)
{
    static const char *const known[] = {"nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(u, known[i]) == 0) return u;
    return "none";
}

static int by_num(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int hk_speedscope_encode(const hk_profile *p, hk_buf *out)
{
    size_t vi = hk_profile_default_value(p);
    int64_t *thread = malloc((p->nsamples + 1) * sizeof(*thread)), *distinct = malloc((p->nsamples + 1) * sizeof(*distinct));
    if (!thread || !distinct) {
        free(thread);
        free(distinct);
        return -1;
    }
    hk_locbuf stack = {0};
    size_t nthreads = 0;
    for (size_t i = 0; i < p->nsamples; i++) distinct[nthreads++] = thread[i] = thread_of(p, i);
    qsort(distinct, nthreads, sizeof(*distinct), by_num);
    size_t k = 0;
    for (size_t i = 0; i < nthreads; i++)
        if (k == 0 || distinct[i] != distinct[k - 1]) distinct[k++] = distinct[i];
    nthreads = k;

    hk_buf_puts(out, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"hakari\","
                     "\"name\":\"hakari profile\",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
    for (size_t f = 0; f < p->nfunctions; f++) {
        const hk_function *fn = &p->functions[f];
        hk_buf_puts(out, f ? ",{\"name\":" : "{\"name\":");
        hk_json_str(out, hk_profile_str(p, fn->name));
        hk_buf_puts(out, ",\"file\":");
        hk_json_str(out, hk_profile_str(p, fn->filename));
        if (fn->start_line > 0) hk_buf_printf(out, ",\"line\":%" PRId64, fn->start_line);
        hk_buf_putc(out, '}');
    }
    hk_buf_puts(out, "]},\"profiles\":[");
    const char *unit = p->nvalues ? unit_of(hk_profile_str(p, p->sample_types[vi].unit)) : "none";
    for (size_t t = 0; t < nthreads; t++) {
        int64_t total = 0;
        for (size_t i = 0; i < p->nsamples; i++)
            if (thread[i] == distinct[t]) total = hk_add_sat(total, hk_profile_sample_values(p, i)[vi]);
        if (distinct[t] >= 0) hk_buf_printf(out, "%s{\"type\":\"sampled\",\"name\":\"thread %" PRId64 "\"", t ? "," : "", distinct[t]);
        else hk_buf_printf(out, "%s{\"type\":\"sampled\",\"name\":\"all\"", t ? "," : "");
        hk_buf_printf(out, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRId64 ",\"samples\":[", unit, total);
        int first = 1;
        for (size_t i = 0; i < p->nsamples; i++) {
            if (thread[i] != distinct[t]) continue;
            const uint32_t *locs = hk_profile_sample_locs(p, i, &stack);
            if (!locs) {
                out->oom = 1;
                break;
            }
            hk_buf_puts(out, first ? "[" : ",[");
            for (uint32_t j = p->samples[i].nloc; j-- > 0;)
                hk_buf_printf(out, "%s%u", j + 1 == p->samples[i].nloc ? "" : ",", hk_profile_loc(p, locs[j])->function_id - 1);
            hk_buf_putc(out, ']');
            first = 0;
        }
        hk_buf_puts(out, "],\"weights\":[");
        first = 1;
        for (size_t i = 0; i < p->nsamples; i++) {
            if (thread[i] != distinct[t]) continue;
            hk_buf_printf(out, "%s%" PRId64, first ? "" : ",", hk_profile_sample_values(p, i)[vi]);
            first = 0;
        }
        hk_buf_puts(out, "]}");
    }
    hk_buf_puts(out, "]}\n");
    free(thread);
    free(distinct);
    hk_locbuf_free(&stack);
    return hk_buf_ok(out) ? 0 : -1;
}
