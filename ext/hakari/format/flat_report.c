/* flat_report.c — see flat_report.h.
 * The numbers all come from the call tree's method table (calltree.h); this
 * file only ranks and formats. Names are printed with control bytes replaced,
 * so a hostile function name cannot forge rows.
 */
#include "flat_report.h"

#include <inttypes.h>
#include <stdlib.h>

#include "alloc_sites.h"
#include "calltree.h"

static int by_self_desc(const void *a, const void *b)
{
    const hk_ct_method *x = *(const hk_ct_method *const *)a, *y = *(const hk_ct_method *const *)b;
    if (x->self != y->self) return x->self < y->self ? 1 : -1;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    return x->func < y->func ? -1 : x->func > y->func;
}


static void put_method(hk_buf *out, const hk_profile *p, const hk_ct_method *m)
{
    const hk_function *f = hk_profile_func(p, m->func);
    hk_buf_puts(out, m->recursive ? "  *" : "   ");
    hk_ct_put_clean(out, hk_profile_str(p, f->name));
    const char *file = hk_profile_str(p, f->filename);
    if (!*file) return;
    hk_buf_puts(out, "  ");
    hk_ct_put_clean(out, file);
    if (f->start_line > 0) hk_buf_printf(out, ":%" PRId64, f->start_line);
}

static void header(hk_buf *out, const hk_calltree *ct)
{
    hk_ct_put_summary(out, ct);
    hk_buf_puts(out, "Sort by: self\n\n");
}

int hk_flat_report(const hk_profile *p, size_t top_n, hk_buf *out)
{
    hk_calltree *ct = hk_calltree_build(p, NULL, 0);
    if (!ct) return -1;
    const hk_ct_method **rows = malloc((ct->nmethods + 1) * sizeof(*rows));
    if (!rows) goto fail;
    size_t n = 0;
    int any_recursive = 0;
    for (size_t f = 0; f < ct->nmethods; f++) {
        if (!ct->methods[f].nnodes) continue;
        rows[n++] = &ct->methods[f];
        any_recursive |= ct->methods[f].recursive;
    }
    qsort(rows, n, sizeof(*rows), by_self_desc);

    header(out, ct);
    hk_buf_printf(out, "  %%self       total        self        wait       child %11s   name  location\n",
                  ct->sampling ? "samples" : "calls");
    for (size_t i = 0; i < n && (top_n == 0 || i < top_n); i++) {
        const hk_ct_method *m = rows[i];
        hk_buf_printf(out, "%7.2f", hk_ct_pct(m->self, ct->total));
        hk_ct_put_column(out, ct, m->total);
        hk_ct_put_column(out, ct, m->self);
        hk_ct_put_column(out, ct, m->wait);
        hk_ct_put_column(out, ct, m->child);
        hk_buf_printf(out, " %11" PRId64, m->calls);
        put_method(out, p, m);
        hk_buf_putc(out, '\n');
    }
    if (top_n && n > top_n) hk_buf_printf(out, "(%zu more methods not shown)\n", n - top_n);
    if (ct->unattributed) {
        hk_buf_puts(out, "\nNot in any method (samples without a stack):");
        hk_ct_put_column(out, ct, ct->unattributed);
        hk_buf_putc(out, '\n');
    }
    if (any_recursive)
        hk_buf_puts(out, "\n* recursively called method: its total counts each path once, "
                         "from its outermost call, so it never exceeds the time spent\n");
    /* a trace's allocations by site: the top ones, however many methods were asked for */
    if (hk_alloc_sites_report(p, top_n ? top_n : HK_ALLOC_SITES_TOP, out) < 0) goto fail;
    free(rows);
    hk_calltree_free(ct);
    return hk_buf_ok(out) ? 0 : -1;
fail:
    free(rows);
    hk_calltree_free(ct);
    return -1;
}
