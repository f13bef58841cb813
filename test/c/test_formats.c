/* test_formats.c — the list of output formats (formats.c): names are unique and
 * found by name, each format's default file name selects it again, paths pick
 * formats as the README says, and every encoder writes something for a profile. */
#include <stdlib.h>

#include "check.h"
#include "fixture.h"
#include "formats.h"

static void test_names_are_unique_and_found(void)
{
    CHECK(hk_nformats >= 7);
    CHECK_STR(hk_formats[0].name, "pprof"); /* the default comes first */
    for (size_t i = 0; i < hk_nformats; i++) {
        CHECK(hk_format_named(hk_formats[i].name) == &hk_formats[i]);
        for (size_t j = i + 1; j < hk_nformats; j++) CHECK(strcmp(hk_formats[i].name, hk_formats[j].name) != 0);
    }
    CHECK(hk_format_named("svg") == NULL);
    CHECK(hk_format_named("") == NULL);
}

static void test_default_file_selects_its_format(void)
{
    for (size_t i = 0; i < hk_nformats; i++)
        CHECK_MSG(hk_format_for_path(hk_formats[i].default_file) == &hk_formats[i], "%s -> %s",
                  hk_formats[i].default_file, hk_format_for_path(hk_formats[i].default_file)->name);
}

static void test_paths(void)
{
    static const char *const cases[][2] = {
        {"out.pb.gz", "pprof"},          {"out", "pprof"},
        {"a/b.collapsed", "collapsed"},  {"x.txt", "text"},
        {"x.flat.txt", "flat"},          {"dir/x.graph.txt", "graph"},
        {"callgrind.out.app", "callgrind"}, {"/tmp/callgrind.out", "callgrind"},
        {"my.callgrind.out", "pprof"},   {"callgrind.out.d/x.dot", "dot"},
        {"x.dot", "dot"},                {"x.txt.gz", "pprof"},
        {"", "pprof"},                   {"dir/", "pprof"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_MSG(strcmp(hk_format_for_path(cases[i][0])->name, cases[i][1]) == 0, "%s -> %s, expected %s",
                  cases[i][0], hk_format_for_path(cases[i][0])->name, cases[i][1]);
}

static void test_every_encoder_writes(void)
{
    hk_profile *p = fixture_profile(7, 50);
    CHECK(p);
    for (size_t i = 0; i < hk_nformats; i++) {
        hk_buf b;
        hk_buf_init(&b);
        int rc = hk_formats[i].encode(p, &b);
        size_t len = b.len;
        /* a text format writes no NUL byte */
        int nul = hk_formats[i].text && memchr(b.data, 0, b.len) != NULL;
        hk_buf_free(&b);
        CHECK_MSG(rc == 0 && len > 0, "%s: rc %d, %zu bytes", hk_formats[i].name, rc, len);
        CHECK_MSG(!nul, "%s wrote a NUL byte", hk_formats[i].name);
    }
    hk_profile_free(p);
}

int main(void)
{
    RUN(test_names_are_unique_and_found);
    RUN(test_default_file_selects_its_format);
    RUN(test_paths);
    RUN(test_every_encoder_writes);
    return check_done();
}
