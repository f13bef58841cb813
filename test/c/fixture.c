/* fixture.c — see fixture.h. */
#include "fixture.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_encode.h"

uint32_t fixture_rand(uint32_t *s)
{
    uint32_t x = *s ? *s : 0x9e3779b9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

hk_profile *fixture_profile(uint32_t seed, size_t nsamples)
{
    static const char *const names[] = {"Object#main", "Foo#bar", "Foo.baz", "block in Foo#each",
                                        "Integer#times", "<main>", "\xe6\x97\xa5\xe6\x9c\xac#\xe8\xaa\x9e", ""};
    static const char *const files[] = {"app.rb", "lib/foo.rb", "<internal:kernel>", ""};
    static const int64_t lines[] = {1, 2, 10, 99, 0, -1, INT64_MIN, INT64_MAX, 123456789012LL};
    static const int64_t extremes[] = {0, 1, -1, INT64_MAX, INT64_MIN, 1000000, -1000000};
    hk_profile *p = hk_profile_new();
    if (!p) return NULL;
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    hk_profile_add_sample_type(p, "wall", "nanoseconds");
    p->default_sample_type = hk_profile_string(p, "cpu");
    p->period_type.type = hk_profile_string(p, "cpu");
    p->period_type.unit = hk_profile_string(p, "nanoseconds");
    p->period = 10000000;
    p->time_nanos = 1700000000123456789LL;
    p->duration_nanos = 2500000000LL;
    hk_profile_add_comment(p, "mode=cpu");
    hk_profile_add_comment(p, "dropped=3");
    hk_profile_add_comment(p, "mode=cpu");

    uint32_t nul_name = hk_profile_string_n(p, "weird\0name", 10);
    uint32_t sys = hk_profile_string(p, "rb_foo_bar");
    uint32_t fids[32];
    size_t nf = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        for (size_t j = 0; j < 2; j++) {
            /* interned one per statement: argument order is unspecified, and the
             * string table must come out the same with every compiler */
            uint32_t name = hk_profile_string(p, names[i]);
            uint32_t file = hk_profile_string(p, files[(i + j) % 4]);
            fids[nf++] = hk_profile_function(p, name, j ? sys : 0, file, lines[(i + j) % 9]);
        }
    fids[nf++] = hk_profile_function(p, nul_name, 0, 0, -5);
    uint32_t lids[128];
    size_t nl = 0;
    for (size_t i = 0; i < nf; i++)
        for (size_t j = 0; j < 3; j++) lids[nl++] = hk_profile_location(p, fids[i], lines[(i * 3 + j) % 9]);

    uint32_t key_thread = hk_profile_string(p, "thread"), key_req = hk_profile_string(p, "request_id");
    uint32_t unit = hk_profile_string(p, "id"), main_thread = hk_profile_string(p, "main");
    uint32_t s = seed;
    for (size_t i = 0; i < nsamples; i++) {
        uint32_t stack[40];
        uint32_t depth = i % 7 == 3 ? 0 : fixture_rand(&s) % 40;
        for (uint32_t d = 0; d < depth; d++) stack[d] = lids[fixture_rand(&s) % nl];
        int64_t v[3]; /* one call per statement: initialiser order is unspecified in C */
        v[0] = 1 + fixture_rand(&s) % 5;
        v[1] = (int64_t)(fixture_rand(&s) % 100000000);
        v[2] = i % 11 == 5 ? extremes[fixture_rand(&s) % 7] : v[1] * 2;
        hk_label labels[3];
        uint32_t nlab = 0;
        if (i % 2) labels[nlab++] = (hk_label){key_thread, main_thread, 0, 0};
        if (i % 3 == 1) labels[nlab++] = (hk_label){key_req, 0, unit, (int64_t)fixture_rand(&s) - (1LL << 31)};
        if (i % 5 == 2) labels[nlab++] = (hk_label){key_req, 0, 0, INT64_MIN};
        hk_profile_add_sample(p, stack, depth, v, labels, nlab);
    }
    if (!hk_profile_ok(p)) {
        hk_profile_free(p);
        return NULL;
    }
    return p;
}

__attribute__((format(printf, 3, 4)))
static int why_not(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

#define NEED(cond, ...) do { if (!(cond)) return why_not(why, n, __VA_ARGS__); } while (0)

int fixture_valid(const hk_profile *p, char *why, size_t n)
{
    size_t ns = p->strings.count, len;
    NEED(ns >= 1, "no strings");
    NEED(hk_strtab_get(&p->strings, 0, &len) && len == 0, "string 0 is not empty");
    NEED(p->nvalues <= HK_MAX_SAMPLE_TYPES, "%zu sample types", p->nvalues);
    for (size_t i = 0; i < p->nvalues; i++)
        NEED(p->sample_types[i].type < ns && p->sample_types[i].unit < ns, "sample type %zu", i);
    NEED(p->period_type.type < ns && p->period_type.unit < ns, "period type");
    NEED(p->default_sample_type < ns, "default sample type");
    for (size_t i = 0; i < p->ncomments; i++) NEED(p->comments[i] < ns, "comment %zu", i);
    for (size_t i = 0; i < p->nfunctions; i++) {
        const hk_function *f = &p->functions[i];
        NEED(f->name < ns && f->system_name < ns && f->filename < ns, "function %zu", i + 1);
    }
    for (size_t i = 0; i < p->nlocations; i++) {
        uint32_t f = p->locations[i].function_id;
        NEED(f >= 1 && f <= p->nfunctions, "location %zu has function %u", i + 1, f);
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        for (uint32_t j = 0; j < p->samples[i].nloc; j++) {
            uint32_t loc = fixture_locs(p, i)[j];
            NEED(loc >= 1 && loc <= p->nlocations, "sample %zu has location %u", i, loc);
        }
        for (uint32_t j = 0; j < p->samples[i].nlabel; j++) {
            const hk_label *l = &hk_profile_sample_labels(p, i)[j];
            NEED(l->key < ns && l->str < ns && l->num_unit < ns, "sample %zu label %u", i, j);
        }
    }
    return 0;
}

/* string i of a equals string j of b, bytes and length */
static int same_str(const hk_profile *a, uint32_t i, const hk_profile *b, uint32_t j)
{
    size_t la, lb;
    const char *sa = hk_strtab_get(&a->strings, i, &la), *sb = hk_strtab_get(&b->strings, j, &lb);
    return la == lb && memcmp(sa, sb, la) == 0;
}

int fixture_equal(const hk_profile *a, const hk_profile *b, char *why, size_t n)
{
    NEED(a->strings.count == b->strings.count, "%zu vs %zu strings", a->strings.count, b->strings.count);
    for (uint32_t i = 0; i < a->strings.count; i++) NEED(same_str(a, i, b, i), "string %u differs", i);
    NEED(a->nvalues == b->nvalues, "%zu vs %zu sample types", a->nvalues, b->nvalues);
    for (size_t i = 0; i < a->nvalues; i++)
        NEED(same_str(a, a->sample_types[i].type, b, b->sample_types[i].type) &&
                 same_str(a, a->sample_types[i].unit, b, b->sample_types[i].unit),
             "sample type %zu differs", i);
    NEED(same_str(a, a->default_sample_type, b, b->default_sample_type), "default sample type differs");
    NEED(same_str(a, a->period_type.type, b, b->period_type.type) &&
             same_str(a, a->period_type.unit, b, b->period_type.unit), "period type differs");
    NEED(a->period == b->period, "period %lld vs %lld", (long long)a->period, (long long)b->period);
    NEED(a->time_nanos == b->time_nanos && a->duration_nanos == b->duration_nanos, "times differ");
    NEED(a->ncomments == b->ncomments, "%zu vs %zu comments", a->ncomments, b->ncomments);
    for (size_t i = 0; i < a->ncomments; i++)
        NEED(same_str(a, a->comments[i], b, b->comments[i]), "comment %zu differs", i);
    NEED(a->nfunctions == b->nfunctions, "%zu vs %zu functions", a->nfunctions, b->nfunctions);
    for (size_t i = 0; i < a->nfunctions; i++) {
        const hk_function *x = &a->functions[i], *y = &b->functions[i];
        NEED(same_str(a, x->name, b, y->name) && same_str(a, x->system_name, b, y->system_name) &&
                 same_str(a, x->filename, b, y->filename) && x->start_line == y->start_line,
             "function %zu differs", i + 1);
    }
    NEED(a->nlocations == b->nlocations, "%zu vs %zu locations", a->nlocations, b->nlocations);
    for (size_t i = 0; i < a->nlocations; i++)
        NEED(a->locations[i].function_id == b->locations[i].function_id &&
                 a->locations[i].line == b->locations[i].line, "location %zu differs", i + 1);
    NEED(a->nsamples == b->nsamples, "%zu vs %zu samples", a->nsamples, b->nsamples);
    for (size_t i = 0; i < a->nsamples; i++) {
        const hk_sample *x = &a->samples[i], *y = &b->samples[i];
        NEED(x->nloc == y->nloc && x->nlabel == y->nlabel, "sample %zu has other sizes", i);
        NEED(x->nloc == 0 || memcmp(fixture_locs(a, i), fixture_locs(b, i),
                                    x->nloc * sizeof(uint32_t)) == 0, "sample %zu stack differs", i);
        NEED(a->nvalues == 0 || memcmp(hk_profile_sample_values(a, i), hk_profile_sample_values(b, i),
                                       a->nvalues * sizeof(int64_t)) == 0, "sample %zu values differ", i);
        for (uint32_t j = 0; j < x->nlabel; j++) {
            const hk_label *la = &hk_profile_sample_labels(a, i)[j], *lb = &hk_profile_sample_labels(b, i)[j];
            NEED(same_str(a, la->key, b, lb->key) && same_str(a, la->str, b, lb->str) &&
                     same_str(a, la->num_unit, b, lb->num_unit) && la->num == lb->num,
                 "sample %zu label %u differs", i, j);
        }
    }
    return 0;
}

hk_buf fixture_encode(const hk_profile *p, int gzip)
{
    hk_buf b;
    hk_buf_init(&b);
    if (hk_pprof_encode(p, &b, gzip) < 0) {
        fprintf(stderr, "fixture_encode: hk_pprof_encode failed\n");
        abort();
    }
    return b;
}

const uint32_t *fixture_locs(const hk_profile *p, size_t i)
{
    static hk_locbuf bufs[4];
    static unsigned next;
    const uint32_t *locs = hk_profile_sample_locs(p, i, &bufs[next++ % 4]);
    if (!locs) abort();
    return locs;
}
