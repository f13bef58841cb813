/* graph_report.c — see graph_report.h.
 * Methods, callers and callees all come from the call tree (calltree.h); a
 * block sorts copies of its edge pointers so the tree stays untouched. Names
 * are printed with control bytes replaced, so no name can forge a line.
 */
#include "graph_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_sites.h"
#include "calltree.h"

#define RULE "--------------------------------------------------------------------------------" \
             "----------------------------------------\n"

static int by_total_desc(const void *a, const void *b)
{
    const hk_ct_method *x = *(const hk_ct_method *const *)a, *y = *(const hk_ct_method *const *)b;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    if (x->self != y->self) return x->self < y->self ? 1 : -1;
    return x->func < y->func ? -1 : x->func > y->func;
}

static int edge_desc(const void *a, const void *b)
{
    const hk_ct_edge *x = *(const hk_ct_edge *const *)a, *y = *(const hk_ct_edge *const *)b;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    if (x->calls != y->calls) return x->calls < y->calls ? 1 : -1;
    if (x->caller != y->caller) return x->caller < y->caller ? -1 : 1;
    return x->callee < y->callee ? -1 : x->callee > y->callee;
}


/* "    *name" for callers/callees (indent 4), "*name  file:line" for the method */
static void put_name(hk_buf *out, const hk_calltree *ct, uint32_t func, int indent, int with_file)
{
    const hk_profile *p = ct->profile;
    if (func == 0) { /* the caller of what a thread (or a stack) starts with */
        hk_buf_printf(out, "%*s   [root]\n", indent, "");
        return;
    }
    const hk_function *f = hk_profile_func(p, func);
    hk_buf_printf(out, "%*s%s", indent, "", ct->methods[func - 1].recursive ? "  *" : "   ");
    hk_ct_put_clean(out, hk_profile_str(p, f->name));
    const char *file = hk_profile_str(p, f->filename);
    if (with_file && *file) {
        hk_buf_puts(out, "  ");
        hk_ct_put_clean(out, file);
        if (f->start_line > 0) hk_buf_printf(out, ":%" PRId64, f->start_line);
    }
    hk_buf_putc(out, '\n');
}

static void put_edge(hk_buf *out, const hk_calltree *ct, const hk_ct_edge *e, int64_t of, uint32_t func)
{
    hk_buf_printf(out, "%17s", "");
    hk_ct_put_column(out, ct, e->total);
    hk_ct_put_column(out, ct, e->self);
    hk_ct_put_column(out, ct, e->wait);
    hk_ct_put_column(out, ct, e->child);
    char calls[48];
    snprintf(calls, sizeof(calls), "%" PRId64 "/%" PRId64, e->calls, of);
    hk_buf_printf(out, " %15s", calls);
    put_name(out, ct, func, 4, 0);
}

/* the edges listed at idx[0..n) in sorted order, via the scratch array */
static void put_edges(hk_buf *out, const hk_calltree *ct, const uint32_t *idx, uint32_t n,
                      const hk_ct_edge **scratch, int callers, int64_t method_calls)
{
    for (uint32_t i = 0; i < n; i++) scratch[i] = &ct->edges[idx[i]];
    qsort(scratch, n, sizeof(*scratch), edge_desc);
    for (uint32_t i = 0; i < n; i++) {
        const hk_ct_edge *e = scratch[i];
        uint32_t other = callers ? e->caller : e->callee;
        put_edge(out, ct, e, callers ? method_calls : ct->methods[other - 1].calls, other);
    }
}

static void block(hk_buf *out, const hk_calltree *ct, const hk_ct_method *m, const hk_ct_edge **scratch)
{
    put_edges(out, ct, ct->caller_edges + m->callers_off, m->ncallers, scratch, 1, m->calls);
    hk_buf_printf(out, "%7.2f%% %7.2f%%", hk_ct_pct(m->total, ct->total), hk_ct_pct(m->self, ct->total));
    hk_ct_put_column(out, ct, m->total);
    hk_ct_put_column(out, ct, m->self);
    hk_ct_put_column(out, ct, m->wait);
    hk_ct_put_column(out, ct, m->child);
    hk_buf_printf(out, " %15" PRId64, m->calls);
    put_name(out, ct, m->func, 0, 1);
    put_edges(out, ct, ct->callee_edges + m->callees_off, m->ncallees, scratch, 0, 0);
    hk_buf_puts(out, RULE);
}

static void header(hk_buf *out, const hk_calltree *ct)
{
    hk_ct_put_summary(out, ct);
    hk_buf_puts(out, "Sort by: total\n\n" RULE);
    hk_buf_printf(out, "  %%total    %%self       total        self        wait       child %15s   name  location\n",
                  ct->sampling ? "samples" : "calls");
    hk_buf_puts(out, RULE);
}

static void legend(hk_buf *out, const hk_calltree *ct)
{
    const char *calls = ct->sampling ? "samples" : "calls";
    hk_buf_puts(out,
                "\nEach block is one method, blocks sorted by total. Above the method's own line\n"
                "(the one with percentages) are its callers, below it its callees; [root] is\n"
                "the start of a thread (or of a stack), so the callers' totals add up to the method's.\n"
                "  %total, %self  the method's total and self as a share of the whole profile\n"
                "  total          the method and everything it called; counted once per path\n"
                "  self           the method itself, without wait\n"
                "  wait           its thread was switched out while the method was on top\n"
                "  child          total - self - wait\n");
    hk_buf_printf(out,
                  "  %-14s on a caller line: %s from that caller / all %s of the method;\n"
                  "                 on a callee line: %s to that callee / all %s of the callee\n",
                  calls, calls, calls, calls, calls);
    hk_buf_puts(out, "  *              recursive method (calls itself, directly or not): the time of a\n"
                     "                 call made inside another call of the same method is counted in\n"
                     "                 the outermost call only, so its lines show the calls and no time\n");
    if (ct->unattributed) {
        hk_buf_puts(out, "Not in any method (samples without a stack):");
        hk_ct_put_column(out, ct, ct->unattributed);
        hk_buf_putc(out, '\n');
    }
}

int hk_graph_report(const hk_profile *p, size_t top_n, hk_buf *out)
{
    hk_calltree *ct = hk_calltree_build(p, NULL, 0);
    if (!ct) return -1;
    const hk_ct_method **rows = malloc((ct->nmethods + 1) * sizeof(*rows));
    const hk_ct_edge **scratch = malloc((ct->nedges + 1) * sizeof(*scratch));
    if (!rows || !scratch) goto fail;
    size_t n = 0;
    for (size_t f = 0; f < ct->nmethods; f++)
        if (ct->methods[f].nnodes) rows[n++] = &ct->methods[f];
    qsort(rows, n, sizeof(*rows), by_total_desc);

    header(out, ct);
    for (size_t i = 0; i < n && (top_n == 0 || i < top_n); i++) block(out, ct, rows[i], scratch);
    if (top_n && n > top_n) hk_buf_printf(out, "(%zu more methods not shown)\n", n - top_n);
    legend(out, ct);
    if (hk_alloc_sites_report(p, top_n ? top_n : HK_ALLOC_SITES_TOP, out) < 0) goto fail;
    free(rows);
    free(scratch);
    hk_calltree_free(ct);
    return hk_buf_ok(out) ? 0 : -1;
fail:
    free(rows);
    free(scratch);
    hk_calltree_free(ct);
    return -1;
}
