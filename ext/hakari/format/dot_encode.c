/* dot_encode.c — see dot_encode.h.
 * Nodes are named f<function id>, so no user text is ever an identifier; all
 * user text goes through put_quoted. Shares are clamped to 0..1 before they
 * become sizes or colours, so odd values (negative, overflowing) still give
 * a graph dot accepts.
 */
#include "dot_encode.h"

#include <inttypes.h>
#include <stdlib.h>

#include "calltree.h"

/* length of the valid UTF-8 sequence at s, or 0 (overlong, surrogate, > U+10FFFF, cut) */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (n == 0 || c > 0xf4) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[1] < 0xa0) return 0;
    if (c == 0xed && s[1] >= 0xa0) return 0;
    if (c == 0xf0 && s[1] < 0x90) return 0;
    if (c == 0xf4 && s[1] >= 0x90) return 0;
    return n;
}

/* the inside of a "…" DOT string: dot reads \" and \\, and would take \n,
 * \l, \N … of the name itself as escapes, hence every backslash doubled */
static void put_quoted(hk_buf *out, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        size_t n = utf8_len(u);
        if (n == 0 || *u < 0x20 || *u == 0x7f) {
            hk_buf_putc(out, '?');
            u++;
        } else if (*u == '"' || *u == '\\') {
            hk_buf_putc(out, '\\');
            hk_buf_putc(out, *u++);
        } else {
            hk_buf_append(out, u, n);
            u += n;
        }
    }
}

static double share(int64_t v, int64_t total)
{
    if (total <= 0 || v <= 0) return 0.0;
    double s = (double)v / (double)total;
    return s > 1.0 ? 1.0 : s;
}

static void put_value(hk_buf *out, const hk_calltree *ct, int64_t v)
{
    if (ct->ns) hk_buf_printf(out, "%.3f ms", (double)v / 1e6);
    else hk_buf_printf(out, "%" PRId64, v);
}

static void node(hk_buf *out, const hk_calltree *ct, const hk_ct_method *m)
{
    const hk_function *f = hk_profile_func(ct->profile, m->func);
    double s = share(m->total, ct->total);
    hk_buf_printf(out, "  f%" PRIu32 " [label=\"", m->func);
    put_quoted(out, hk_profile_str(ct->profile, f->name));
    const char *file = hk_profile_str(ct->profile, f->filename);
    if (*file) {
        hk_buf_puts(out, "\\n");
        put_quoted(out, file);
        if (f->start_line > 0) hk_buf_printf(out, ":%" PRId64, f->start_line);
    }
    hk_buf_puts(out, "\\ntotal ");
    put_value(out, ct, m->total);
    hk_buf_printf(out, " (%.1f%%)\\nself ", 100.0 * s);
    put_value(out, ct, m->self);
    hk_buf_printf(out, " (%.1f%%)", 100.0 * share(m->self, ct->total));
    if (m->recursive) hk_buf_puts(out, "\\n(recursive)");
    hk_buf_printf(out, "\", fontsize=%.1f, fillcolor=\"%.3f %.3f 1.000\"];\n", 9.0 + 15.0 * s,
                  0.6 * (1.0 - s), 0.15 + 0.6 * s);
}

static void edge(hk_buf *out, const hk_calltree *ct, const hk_ct_edge *e)
{
    hk_buf_printf(out, "  f%" PRIu32 " -> f%" PRIu32 " [label=\"", e->caller, e->callee);
    put_value(out, ct, e->total);
    const char *what = ct->sampling ? "sample" : "call";
    hk_buf_printf(out, "\\n%" PRId64 " %s%s\", penwidth=%.2f];\n", e->calls, what, e->calls == 1 ? "" : "s",
                  0.5 + 4.5 * share(e->total, ct->total));
}

static void graph_label(hk_buf *out, const hk_calltree *ct, size_t dropped)
{
    hk_buf_puts(out, "  graph [labelloc=\"t\", fontname=\"Helvetica\", label=\"hakari: ");
    put_quoted(out, hk_calltree_measure(ct));
    hk_buf_puts(out, ", total ");
    put_value(out, ct, ct->total);
    hk_buf_printf(out, ", %zu thread%s", ct->nthreads, ct->nthreads == 1 ? "" : "s");
    if (dropped)
        hk_buf_printf(out, "\\n%zu method%s under %.1f%% of the total not shown", dropped, dropped == 1 ? "" : "s",
                      100.0 * HK_DOT_MIN_SHARE);
    hk_buf_puts(out, "\"];\n");
}

int hk_dot_encode(const hk_profile *p, hk_buf *out)
{
    hk_calltree *ct = hk_calltree_build(p, NULL, 0);
    if (!ct) return -1;
    char *keep = calloc(ct->nmethods + 1, 1); /* by function id */
    if (!keep) goto fail;
    size_t dropped = 0;
    for (size_t f = 0; f < ct->nmethods; f++) {
        const hk_ct_method *m = &ct->methods[f];
        if (!m->nnodes) continue;
        /* with a total of 0 or less no share means anything: keep them all */
        if (ct->total > 0 && share(m->total, ct->total) < HK_DOT_MIN_SHARE) dropped++;
        else keep[m->func] = 1;
    }

    hk_buf_puts(out, "digraph hakari {\n");
    graph_label(out, ct, dropped);
    hk_buf_puts(out, "  node [shape=box, style=\"filled,rounded\", fontname=\"Helvetica\"];\n"
                     "  edge [fontname=\"Helvetica\", fontsize=9, arrowsize=0.7];\n");
    for (size_t f = 0; f < ct->nmethods; f++)
        if (keep[f + 1]) node(out, ct, &ct->methods[f]);
    for (size_t e = 0; e < ct->nedges; e++)
        if (keep[ct->edges[e].caller] && keep[ct->edges[e].callee]) edge(out, ct, &ct->edges[e]);
    hk_buf_puts(out, "}\n");
    free(keep);
    hk_calltree_free(ct);
    return hk_buf_ok(out) ? 0 : -1;
fail:
    hk_calltree_free(ct);
    return -1;
}
