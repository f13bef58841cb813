/* report_driver.c — writes one tracing report of one profile to stdout, for
 * tools_check.sh to feed to callgrind_annotate and dot.
 *
 *   report_driver FORMAT PROFILE
 *     FORMAT   flat | graph | callgrind | dot | totals
 *              ("totals" prints "<self> <wait> <total>" as the call tree sums them)
 *     PROFILE  fib | threads | sampling | hostile (tracing_fixture.h),
 *              random (fixture.c's every-corner profile), deep (a path
 *              20000 calls deep), empty (sample types, no samples),
 *              stackless (one sample without locations), or the path of
 *              a pprof file (.pb or .pb.gz)
 * Exit status 0, 1 when the encoder failed, 2 on bad arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callgrind_encode.h"
#include "calltree.h"
#include "dot_encode.h"
#include "fixture.h"
#include "flat_report.h"
#include "graph_report.h"
#include "pprof_decode.h"
#include "tracing_fixture.h"

/* main > a > b > a > b … 20000 deep, each level one node */
static hk_profile *deep(void)
{
    static const char *const names[] = {"main", "Deep#a", "Deep#b"};
    tf t = tf_new("wall", "nanoseconds", names, 3);
    enum { DEPTH = 20000 };
    uint32_t *path = malloc(DEPTH * sizeof(*path));
    if (!path) return t.p;
    for (uint32_t d = 0; d < DEPTH; d++) path[DEPTH - 1 - d] = t.loc[d == 0 ? 0 : 1 + d % 2];
    int64_t v[3] = {1, 1000, 10};
    /* the node at depth d is the path's last d + 1 entries */
    for (uint32_t d = 0; d < DEPTH; d += 97) hk_profile_add_sample(t.p, path + DEPTH - 1 - d, d + 1, v, NULL, 0);
    hk_profile_add_sample(t.p, path, DEPTH, v, NULL, 0);
    free(path);
    return t.p;
}

static hk_profile *read_pprof(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    hk_buf b;
    hk_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) hk_buf_append(&b, chunk, n);
    fclose(f);
    char err[256] = "";
    hk_profile *p = hk_buf_ok(&b) ? hk_pprof_decode(b.data, b.len, err, sizeof(err)) : NULL;
    if (!p) fprintf(stderr, "report_driver: %s: %s\n", path, err);
    hk_buf_free(&b);
    return p;
}

static hk_profile *profile_named(const char *name)
{
    if (strcmp(name, "fib") == 0) return tf_fib();
    if (strcmp(name, "threads") == 0) return tf_threads();
    if (strcmp(name, "sampling") == 0) return tf_sampling();
    if (strcmp(name, "hostile") == 0) return tf_hostile();
    if (strcmp(name, "random") == 0) return fixture_profile(7, 300);
    if (strcmp(name, "deep") == 0) return deep();
    if (strcmp(name, "empty") == 0 || strcmp(name, "stackless") == 0) {
        tf t = tf_new("wall", "nanoseconds", tf_names, 0);
        if (name[0] == 's') tf_node(&t, 1, "", 1, 4, 1);
        return t.p;
    }
    return read_pprof(name);
}

static int totals(const hk_profile *p, hk_buf *out)
{
    char err[256] = "";
    hk_calltree *ct = hk_calltree_build(p, err, sizeof(err));
    if (!ct) {
        fprintf(stderr, "report_driver: %s\n", err);
        return -1;
    }
    hk_buf_printf(out, "%lld %lld %lld\n", (long long)ct->self, (long long)ct->wait, (long long)ct->total);
    hk_calltree_free(ct);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: report_driver flat|graph|callgrind|dot|totals PROFILE\n");
        return 2;
    }
    const char *fmt = argv[1];
    hk_profile *p = profile_named(argv[2]);
    if (!p) {
        fprintf(stderr, "report_driver: no profile %s\n", argv[2]);
        return 2;
    }
    hk_buf out;
    hk_buf_init(&out);
    int rc;
    if (strcmp(fmt, "flat") == 0) rc = hk_flat_report(p, 0, &out);
    else if (strcmp(fmt, "graph") == 0) rc = hk_graph_report(p, 0, &out);
    else if (strcmp(fmt, "callgrind") == 0) rc = hk_callgrind_encode(p, &out);
    else if (strcmp(fmt, "dot") == 0) rc = hk_dot_encode(p, &out);
    else if (strcmp(fmt, "totals") == 0) rc = totals(p, &out);
    else {
        fprintf(stderr, "report_driver: unknown format %s\n", fmt);
        rc = -2;
    }
    if (rc == 0) fwrite(out.data, 1, out.len, stdout);
    else if (rc == -1) fprintf(stderr, "report_driver: %s failed\n", fmt);
    hk_buf_free(&out);
    hk_profile_free(p);
    return rc == 0 ? 0 : rc == -1 ? 1 : 2;
}
