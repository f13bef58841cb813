/* formats.c — the list of output formats (see formats.h). The encoders take
 * different arguments (a value index, a top N, gzip); the adapters below give
 * each the one signature the list holds. */
#include "formats.h"

#include <string.h>

#include "callgrind_encode.h"
#include "collapsed_encode.h"
#include "dot_encode.h"
#include "flat_report.h"
#include "graph_report.h"
#include "html_encode.h"
#include "pprof_encode.h"
#include "speedscope_encode.h"
#include "text_report.h"

/* the text report's rows: enough for a terminal, as pprof -top's default is */
#define TEXT_TOP_N 50

static int pprof(const hk_profile *p, hk_buf *out) { return hk_pprof_encode(p, out, 1); }
static int collapsed(const hk_profile *p, hk_buf *out) { return hk_collapsed_encode(p, hk_profile_default_value(p), out); }
static int text(const hk_profile *p, hk_buf *out) { return hk_text_report(p, hk_profile_default_value(p), TEXT_TOP_N, out); }
static int flat(const hk_profile *p, hk_buf *out) { return hk_flat_report(p, 0, out); }
static int graph(const hk_profile *p, hk_buf *out) { return hk_graph_report(p, 0, out); }

const hk_format hk_formats[] = {
    {"pprof", pprof, "hakari.pb.gz", NULL, NULL, 0},
    {"collapsed", collapsed, "hakari.collapsed", ".collapsed", NULL, 1},
    {"text", text, "hakari.txt", ".txt", NULL, 1},
    {"flat", flat, "hakari.flat.txt", ".flat.txt", NULL, 1},
    {"graph", graph, "hakari.graph.txt", ".graph.txt", NULL, 1},
    {"callgrind", hk_callgrind_encode, "callgrind.out.hakari", NULL, "callgrind.out", 1},
    {"dot", hk_dot_encode, "hakari.dot", ".dot", NULL, 1},
    {"html", hk_html_encode, "hakari.html", ".html", NULL, 1},
    {"speedscope", hk_speedscope_encode, "hakari.speedscope.json", ".speedscope.json", NULL, 1},
};
const size_t hk_nformats = sizeof(hk_formats) / sizeof(hk_formats[0]);

const hk_format *hk_format_named(const char *name)
{
    for (size_t i = 0; i < hk_nformats; i++)
        if (strcmp(hk_formats[i].name, name) == 0) return &hk_formats[i];
    return NULL;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

const hk_format *hk_format_for_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    size_t n = strlen(path);
    const hk_format *best = &hk_formats[0];
    size_t best_len = 0;
    for (size_t i = 0; i < hk_nformats; i++) {
        const hk_format *f = &hk_formats[i];
        if (f->prefix && strncmp(file, f->prefix, strlen(f->prefix)) == 0) return f;
        if (f->suffix && ends_with(path, n, f->suffix) && strlen(f->suffix) > best_len) {
            best = f;
            best_len = strlen(f->suffix);
        }
    }
    return best;
}
