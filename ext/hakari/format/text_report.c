/* text_report.c — see text_report.h.
 * Self and cumulative values are accumulated per function id; a per-function
 * "last sample seen" stamp makes cumulative count each sample once, which is
 * what keeps recursive functions at or below 100%.
 */
#include "text_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row { uint32_t func; int64_t value; } row;

static int by_value_desc(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->value != y->value) return x->value < y->value ? 1 : -1;
    return x->func < y->func ? -1 : x->func > y->func;
}

static int is_ns(const hk_profile *p, size_t vi)
{
    return strcmp(hk_profile_str(p, p->sample_types[vi].unit), "nanoseconds") == 0;
}

static void put_value(hk_buf *out, const hk_profile *p, size_t vi, int64_t v)
{
    if (is_ns(p, vi))
        hk_buf_printf(out, "%12.1f ms", (double)v / 1e6);
    else
        hk_buf_printf(out, "%12" PRId64 " %s", v, hk_profile_str(p, p->sample_types[vi].unit));
}

static void table(hk_buf *out, const hk_profile *p, size_t vi, const char *title, row *rows,
                  size_t n, size_t top_n, int64_t total)
{
    qsort(rows, n, sizeof(*rows), by_value_desc);
    hk_buf_printf(out, "\n%s:\n", title);
    for (size_t i = 0; i < n && i < top_n; i++) {
        if (rows[i].value == 0) break;
        const hk_function *f = hk_profile_func(p, rows[i].func);
        put_value(out, p, vi, rows[i].value);
        hk_buf_printf(out, " %5.1f%%  %s (%s)\n", total ? 100.0 * (double)rows[i].value / (double)total : 0.0,
                      hk_profile_str(p, f->name), hk_profile_str(p, f->filename));
    }
}

static int by_num(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* distinct values of the samples' "thread" label but 0 (no thread: the sampler's [native threads]
 * sample): 0 when none has one, -1 when out of memory */
static long thread_count(const hk_profile *p)
{
    int64_t *seen = malloc((p->nsamples + 1) * sizeof(*seen));
    if (!seen) return -1;
    size_t n = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const hk_label *l = hk_profile_sample_labels(p, i);
        for (uint32_t j = 0; j < p->samples[i].nlabel; j++)
            if (!l[j].str && strcmp(hk_profile_str(p, l[j].key), "thread") == 0) {
                if (l[j].num) seen[n++] = l[j].num;
                break;
            }
    }
    qsort(seen, n, sizeof(*seen), by_num);
    long distinct = 0;
    for (size_t i = 0; i < n; i++) distinct += i == 0 || seen[i] != seen[i - 1];
    free(seen);
    return distinct;
}

/* sample i's string label named key, or NULL when it has none */
static const char *str_label(const hk_profile *p, size_t i, const char *key)
{
    const hk_label *l = hk_profile_sample_labels(p, i);
    for (uint32_t j = 0; j < p->samples[i].nlabel; j++)
        if (l[j].str && strcmp(hk_profile_str(p, l[j].key), key) == 0) return hk_profile_str(p, l[j].str);
    return NULL;
}

/* the states a sampler's profile tells apart (its `state` label), and what each means */
static const char *const states[][2] = {
    {"running", "running Ruby or C code"},
    {"blocked", "off the GVL: I/O, sleep, a lock, a C call that released it"},
    {"wait", "waiting to take the GVL back"},
    {"gc_marking", "GC marking"},
    {"gc_sweeping", "GC sweeping"},
};
#define NSTATES (sizeof(states) / sizeof(states[0]))

/* Where the time went by state, when the samples carry a `state` label and
 * some time was not running; then the calls that blocked and the places that
 * waited for the GVL: the frames just above the [GVL blocked] and [GVL wait]
 * leaves. 0, or -1 when out of memory. */
static int states_section(hk_buf *out, const hk_profile *p, size_t vi, size_t top_n, int64_t total)
{
    int64_t by_state[NSTATES] = {0};
    size_t nf = p->nfunctions;
    row *blocked = calloc(nf + 1, sizeof(*blocked)), *waiting = calloc(nf + 1, sizeof(*waiting));
    if (!blocked || !waiting) {
        free(blocked);
        free(waiting);
        return -1;
    }
    for (size_t f = 0; f < nf; f++) blocked[f].func = waiting[f].func = (uint32_t)f + 1;
    int other = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const char *label = str_label(p, i, "state");
        size_t s = 0;
        while (label && s < NSTATES && strcmp(label, states[s][0]) != 0) s++;
        if (!label) continue;
        if (s == NSTATES) continue;
        int64_t v = hk_profile_sample_values(p, i)[vi];
        by_state[s] = hk_add_sat(by_state[s], v);
        other |= s != 0 && v != 0;
        row *above = s == 1 ? blocked : s == 2 ? waiting : NULL;
        if (above && p->samples[i].nloc >= 2) {
            uint32_t caller = p->stacks[p->stacks[p->samples[i].stack - 1].parent - 1].loc;
            row *r = &above[hk_profile_loc(p, caller)->function_id - 1];
            r->value = hk_add_sat(r->value, v);
        }
    }
    if (other) {
        hk_buf_puts(out, "\nStates:\n");
        for (size_t s = 0; s < NSTATES; s++) {
            if (!by_state[s] && s != 0) continue;
            put_value(out, p, vi, by_state[s]);
            hk_buf_printf(out, " %5.1f%%  %s (%s)\n", total ? 100.0 * (double)by_state[s] / (double)total : 0.0,
                          states[s][0], states[s][1]);
        }
        if (by_state[1]) table(out, p, vi, "Blocking calls (the frame above [GVL blocked])", blocked, nf, top_n, total);
        if (by_state[2]) table(out, p, vi, "Waits for the GVL (the frame above [GVL wait])", waiting, nf, top_n, total);
    }
    free(blocked);
    free(waiting);
    return 0;
}

#define LABEL_KEYS 8 /* string labels with a table each; past that, the rest are left out */

/* Where the time went by each string label the samples carry but `state`
 * (its own section): a program's `route` or `job`, say, each label's values
 * largest first. 0, or -1 when out of memory. */
static int labels_section(hk_buf *out, const hk_profile *p, size_t vi, size_t top_n, int64_t total)
{
    uint32_t keys[LABEL_KEYS];
    size_t nkeys = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const hk_label *l = hk_profile_sample_labels(p, i);
        for (uint32_t j = 0; j < p->samples[i].nlabel; j++) {
            if (!l[j].str || strcmp(hk_profile_str(p, l[j].key), "state") == 0) continue;
            size_t k = 0;
            while (k < nkeys && keys[k] != l[j].key) k++;
            if (k == nkeys && nkeys < LABEL_KEYS) keys[nkeys++] = l[j].key;
        }
    }
    size_t nstr = p->strings.count;
    for (size_t k = 0; k < nkeys; k++) {
        row *rows = calloc(nstr + 1, sizeof(*rows));
        if (!rows) return -1;
        for (size_t v = 0; v < nstr; v++) rows[v].func = (uint32_t)v;
        for (size_t i = 0; i < p->nsamples; i++) {
            const hk_label *l = hk_profile_sample_labels(p, i);
            for (uint32_t j = 0; j < p->samples[i].nlabel; j++)
                if (l[j].key == keys[k] && l[j].str && l[j].str < nstr) {
                    rows[l[j].str].value = hk_add_sat(rows[l[j].str].value, hk_profile_sample_values(p, i)[vi]);
                    break;
                }
        }
        qsort(rows, nstr, sizeof(*rows), by_value_desc);
        hk_buf_printf(out, "\nLabel %s:\n", hk_profile_str(p, keys[k]));
        for (size_t r = 0; r < nstr && r < top_n && rows[r].value; r++) {
            put_value(out, p, vi, rows[r].value);
            hk_buf_printf(out, " %5.1f%%  %s\n", total ? 100.0 * (double)rows[r].value / (double)total : 0.0,
                          hk_profile_str(p, rows[r].func));
        }
        free(rows);
    }
    return 0;
}

/* Each other value measured in bytes (retained mode's retained_space), as its own total and flat
 * table, after the report's own: the sizes beside the counts. 0, or -1 when out of memory. */
static int bytes_sections(hk_buf *out, const hk_profile *p, size_t vi, size_t top_n, row *flat, int64_t *self_sum,
                          int64_t *cum_sum)
{
    for (size_t j = 0; j < p->nvalues; j++) {
        if (j == vi || strcmp(hk_profile_str(p, p->sample_types[j].unit), "bytes") != 0) continue;
        if (hk_profile_function_sums(p, j, self_sum, cum_sum) < 0) return -1;
        for (size_t f = 0; f < p->nfunctions; f++) flat[f] = (row){(uint32_t)f + 1, self_sum[f]};
        int64_t total = hk_profile_total(p, j);
        const char *type = hk_profile_str(p, p->sample_types[j].type);
        hk_buf_printf(out, "\nTotal %s:", type);
        put_value(out, p, j, total);
        hk_buf_putc(out, '\n');
        char title[128];
        snprintf(title, sizeof(title), "Flat by %s", type);
        table(out, p, j, title, flat, p->nfunctions, top_n, total);
    }
    return 0;
}

int hk_text_report(const hk_profile *p, size_t vi, size_t top_n, hk_buf *out)
{
    if (vi >= p->nvalues) return -1;
    size_t nf = p->nfunctions;
    row *flat = calloc(nf + 1, sizeof(*flat));
    row *cum = calloc(nf + 1, sizeof(*cum));
    int64_t *self_sum = calloc(nf + 1, sizeof(*self_sum)), *cum_sum = calloc(nf + 1, sizeof(*cum_sum));
    if (!flat || !cum || !self_sum || !cum_sum || hk_profile_function_sums(p, vi, self_sum, cum_sum) < 0) goto fail;
    for (size_t f = 0; f < nf; f++) {
        flat[f] = (row){(uint32_t)f + 1, self_sum[f]};
        cum[f] = (row){(uint32_t)f + 1, cum_sum[f]};
    }
    int64_t total = hk_profile_total(p, vi);

    const char *type = hk_profile_str(p, p->sample_types[vi].type);
    hk_buf_puts(out, "Total:");
    put_value(out, p, vi, total);
    hk_buf_printf(out, " (%s)\n", type);
    int si = hk_profile_find_value(p, "samples");
    int ci = hk_profile_find_value(p, "calls");
    if (ci >= 0 && si < 0)
        hk_buf_printf(out, "Calls: %" PRId64 ", Call paths: %zu", hk_profile_total(p, (size_t)ci), p->nsamples);
    else
        hk_buf_printf(out, "Samples: %" PRId64, si >= 0 ? hk_profile_total(p, (size_t)si) : (int64_t)p->nsamples);
    if (p->period > 0 && strcmp(hk_profile_str(p, p->period_type.unit), "nanoseconds") == 0)
        hk_buf_printf(out, ", Frequency: %.0f Hz", 1e9 / (double)p->period);
    hk_buf_putc(out, '\n');
    hk_folded f;
    if (hk_profile_folded(p, &f))
        hk_buf_printf(out, "Folded: %llu calls past max_paths=%llu, in [folded] paths (the flat and graph reports hold every method's exact figures)\n",
                      f.calls, f.max_paths);
    /* in wall mode every thread's time counts, waiting included: say so when several add up */
    long threads = thread_count(p);
    if (threads < 0) goto fail;
    if (threads > 1) hk_buf_printf(out, "Threads: %ld (the total is their times added)\n", threads);
    table(out, p, vi, "Flat", flat, nf, top_n, total);
    table(out, p, vi, "Cumulative", cum, nf, top_n, total);
    if (states_section(out, p, vi, top_n, total) < 0 || labels_section(out, p, vi, top_n, total) < 0) goto fail;
    if (bytes_sections(out, p, vi, top_n, flat, self_sum, cum_sum) < 0) goto fail;

    free(flat);
    free(cum);
    free(self_sum);
    free(cum_sum);
    return hk_buf_ok(out) ? 0 : -1;
fail:
    free(flat);
    free(cum);
    free(self_sum);
    free(cum_sum);
    return -1;
}
