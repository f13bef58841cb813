/* diff_report.c — see diff_report.h.
 * The two profiles' functions are interned into a scratch profile by (name,
 * file), which gives each function one id across both; the sums are then
 * laid out by that id.
 */
#include "diff_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct diff_row {
    uint32_t func;           /* id in the scratch profile */
    int64_t self[2], cum[2]; /* [0] base, [1] new */
    double shown[2], change; /* what a table prints and sorts by */
} diff_row;

static int by_change_desc(const void *a, const void *b)
{
    const diff_row *x = a, *y = b;
    double dx = fabs(x->change), dy = fabs(y->change);
    if (dx != dy) return dx < dy ? 1 : -1;
    return x->func < y->func ? -1 : x->func > y->func;
}

static int is_ns(const hk_profile *p, size_t vi)
{
    return strcmp(hk_profile_str(p, p->sample_types[vi].unit), "nanoseconds") == 0;
}

/* p's per-function self and cumulative sums into rows[id - 1] (which: 0 base, 1 new). 0 or -1. */
static int add_profile(const hk_profile *p, size_t vi, hk_profile *ids, diff_row *rows, size_t cap, int which)
{
    size_t nf = p->nfunctions;
    int64_t *s = calloc(nf + 1, sizeof(*s)), *c = calloc(nf + 1, sizeof(*c));
    int rc = -1;
    if (!s || !c || hk_profile_function_sums(p, vi, s, c) < 0) goto done;
    for (size_t f = 0; f < nf; f++) {
        const hk_function *fn = &p->functions[f];
        uint32_t id = hk_profile_function(ids, hk_profile_string(ids, hk_profile_str(p, fn->name)), 0,
                                          hk_profile_string(ids, hk_profile_str(p, fn->filename)), 0);
        if (!id || id > cap) goto done;
        /* two functions of one name and file (first lines apart) add up */
        rows[id - 1].self[which] = hk_add_sat(rows[id - 1].self[which], s[f]);
        rows[id - 1].cum[which] = hk_add_sat(rows[id - 1].cum[which], c[f]);
    }
    rc = 0;
done:
    free(s);
    free(c);
    return rc;
}

/* a value as shown: a share of total in %, or the value itself (ms for nanoseconds) */
static double shown(int64_t v, int64_t total, int absolute, int ns)
{
    if (absolute) return ns ? (double)v / 1e6 : (double)v;
    return total ? 100.0 * (double)v / (double)total : 0.0;
}

static void table(hk_buf *out, const hk_profile *ids, const char *title, const char *unit, diff_row *rows, size_t n,
                  size_t top_n)
{
    qsort(rows, n, sizeof(*rows), by_change_desc);
    hk_buf_printf(out, "\n%s:\n", title);
    for (size_t i = 0; i < n && i < top_n; i++) {
        if (fabs(rows[i].change) < 0.005) break;
        const hk_function *f = hk_profile_func(ids, rows[i].func);
        hk_buf_printf(out, "%+10.2f %-3s %9.2f -> %-9.2f %s (%s)\n", rows[i].change, unit, rows[i].shown[0],
                      rows[i].shown[1], hk_profile_str(ids, f->name), hk_profile_str(ids, f->filename));
    }
}

int hk_diff_report(const hk_profile *base, const hk_profile *new, const hk_diff_options *o, hk_buf *out,
                   double *growth)
{
    if (o->base_vi >= base->nvalues || o->new_vi >= new->nvalues) return -1;
    hk_profile *ids = hk_profile_new();
    size_t cap = base->nfunctions + new->nfunctions;
    diff_row *rows = calloc(cap + 1, sizeof(*rows));
    int rc = -1;
    if (!ids || !rows || add_profile(base, o->base_vi, ids, rows, cap, 0) < 0 ||
        add_profile(new, o->new_vi, ids, rows, cap, 1) < 0 || !hk_profile_ok(ids))
        goto done;
    size_t n = ids->nfunctions;
    int64_t total[2] = {hk_profile_total(base, o->base_vi), hk_profile_total(new, o->new_vi)};
    int ns = is_ns(base, o->base_vi) && is_ns(new, o->new_vi);
    *growth = 0;
    for (size_t f = 0; f < n; f++) {
        rows[f].func = (uint32_t)f + 1;
        double rise = shown(rows[f].self[1], total[1], 0, ns) - shown(rows[f].self[0], total[0], 0, ns);
        if (rise > *growth) *growth = rise;
    }
    if (ns)
        hk_buf_printf(out, "Total: %.1f ms -> %.1f ms (%+.1f %%)\n", (double)total[0] / 1e6, (double)total[1] / 1e6,
                      total[0] ? 100.0 * (double)(total[1] - total[0]) / (double)total[0] : 0.0);
    else
        hk_buf_printf(out, "Total: %" PRId64 " -> %" PRId64 "\n", total[0], total[1]);
    hk_buf_puts(out, o->absolute ? "Changes in each function's value, largest first.\n"
                                 : "Changes in each function's share of its profile's total, in percentage points, "
                                   "largest first.\n");
    const char *unit = !o->absolute ? "pts" : ns ? "ms" : hk_profile_str(new, new->sample_types[o->new_vi].unit);
    for (int kind = 0; kind < 2; kind++) {
        for (size_t f = 0; f < n; f++) {
            diff_row *r = &rows[f];
            const int64_t *v = kind ? r->cum : r->self;
            r->shown[0] = shown(v[0], total[0], o->absolute, ns);
            r->shown[1] = shown(v[1], total[1], o->absolute, ns);
            r->change = r->shown[1] - r->shown[0];
        }
        table(out, ids, kind ? "Cumulative (the function is anywhere in the stack)" : "Self (the function is the leaf)",
              unit, rows, n, o->top_n);
    }
    rc = hk_buf_ok(out) ? 0 : -1;
done:
    hk_profile_free(ids);
    free(rows);
    return rc;
}
