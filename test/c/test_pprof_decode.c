/* test_pprof_decode.c — the pprof reader on hand-written protobuf: arbitrary
 * ids, any field order, packed and unpacked repeats, unknown fields, duplicate
 * strings, inlined lines, address-only locations; one test per error message;
 * gzip handling; and decoding under failing allocations. Inputs are copied to
 * exact-size heap blocks so a read past the end is caught by ASan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "alloc_fail.h"
#include "check.h"
#include "fixture.h"
#include "pprof_decode.h"
#include "pprof_encode.h"
#include "protobuf.h"

static char err[256];

static hk_profile *decode(const void *data, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    strcpy(err, "(untouched)");
    hk_profile *p = hk_pprof_decode(copy, n, err, sizeof(err));
    free(copy);
    return p;
}

static hk_profile *decode_buf(const hk_buf *b) { return decode(b->data, b->len); }

/* pprof messages written by hand, with profile.proto's field numbers */
static void put_str(hk_buf *b, const char *s) { hk_pb_bytes(b, 6, s, strlen(s)); }
static void put_msg(hk_buf *b, uint32_t field, hk_buf *m)
{
    hk_pb_bytes(b, field, m->data, m->len);
    m->len = 0;
}
static void put_value_type(hk_buf *b, uint32_t field, uint64_t type, uint64_t unit)
{
    hk_buf m;
    hk_buf_init(&m);
    hk_pb_uint(&m, 1, type);
    hk_pb_uint(&m, 2, unit);
    put_msg(b, field, &m);
    hk_buf_free(&m);
}
static void put_function(hk_buf *b, uint64_t id, uint64_t name, uint64_t file, int64_t start)
{
    hk_buf m;
    hk_buf_init(&m);
    hk_pb_uint(&m, 1, id);
    hk_pb_uint(&m, 2, name);
    hk_pb_uint(&m, 4, file);
    hk_pb_int(&m, 5, start);
    put_msg(b, 5, &m);
    hk_buf_free(&m);
}
static void put_location(hk_buf *b, uint64_t id, uint64_t fn, int64_t line)
{
    hk_buf m, l;
    hk_buf_init(&m);
    hk_buf_init(&l);
    hk_pb_uint(&m, 1, id);
    hk_pb_uint(&l, 1, fn);
    hk_pb_int(&l, 2, line);
    put_msg(&m, 4, &l);
    put_msg(b, 4, &m);
    hk_buf_free(&m);
    hk_buf_free(&l);
}
/* a sample with packed location ids and values */
static void put_sample(hk_buf *b, const uint64_t *locs, size_t nloc, const int64_t *vals, size_t nval)
{
    hk_buf m, packed;
    hk_buf_init(&m);
    hk_buf_init(&packed);
    for (size_t i = 0; i < nloc; i++) hk_pb_varint(&packed, locs[i]);
    if (nloc) put_msg(&m, 1, &packed);
    hk_pb_packed_i64(&m, 2, vals, nval);
    put_msg(b, 2, &m);
    hk_buf_free(&m);
    hk_buf_free(&packed);
}

/* "" "cpu" "ns" "main" "app.rb" + one sample type, function 1, location 1 */
static void put_basics(hk_buf *b)
{
    put_str(b, "");
    put_str(b, "cpu");
    put_str(b, "nanoseconds");
    put_str(b, "main");
    put_str(b, "app.rb");
    put_value_type(b, 1, 1, 2);
    put_function(b, 1, 3, 4, 1);
    put_location(b, 1, 1, 10);
}

static void test_minimal(void)
{
    hk_buf b;
    hk_buf_init(&b);
    put_str(&b, "");
    hk_profile *p = decode_buf(&b);
    CHECK_MSG(p, "%s", err);
    CHECK_STR(err, "");
    CHECK(p->strings.count == 1 && p->nvalues == 0 && p->nsamples == 0 && p->nfunctions == 0);
    hk_profile_free(p);
    hk_buf_free(&b);
}

static void test_arbitrary_ids_any_order(void)
{
    hk_buf b;
    hk_buf_init(&b);
    /* samples first, the string table last: readers must not assume an order */
    uint64_t s1[] = {(uint64_t)1 << 40, 7}, s2[] = {7, 7, 99};
    int64_t v1[] = {5}, v2[] = {-3};
    put_sample(&b, s1, 2, v1, 1);
    put_sample(&b, s2, 3, v2, 1);
    put_location(&b, 99, 1000, -1);
    put_location(&b, 7, 12, 20);
    put_location(&b, (uint64_t)1 << 40, 1000, INT64_MIN);
    put_function(&b, 12, 2, 3, 0);
    put_function(&b, 1000, 1, 3, -9);
    put_value_type(&b, 1, 4, 5);
    put_str(&b, "");
    put_str(&b, "outer");
    put_str(&b, "inner");
    put_str(&b, "x.rb");
    put_str(&b, "alloc");
    put_str(&b, "count");
    hk_profile *p = decode_buf(&b);
    CHECK_MSG(p, "%s", err);
    /* model ids follow file order: function 12 -> 1, 1000 -> 2; location 99 -> 1, 7 -> 2, 2^40 -> 3 */
    CHECK_INT(p->nfunctions, 2);
    CHECK_STR(hk_profile_str(p, hk_profile_func(p, 1)->name), "inner");
    CHECK_STR(hk_profile_str(p, hk_profile_func(p, 2)->name), "outer");
    CHECK_INT(hk_profile_func(p, 2)->start_line, -9);
    CHECK_INT(p->nlocations, 3);
    CHECK(hk_profile_loc(p, 1)->function_id == 2 && hk_profile_loc(p, 1)->line == -1);
    CHECK(hk_profile_loc(p, 2)->function_id == 1 && hk_profile_loc(p, 2)->line == 20);
    CHECK(hk_profile_loc(p, 3)->function_id == 2 && hk_profile_loc(p, 3)->line == INT64_MIN);
    CHECK_INT(p->nsamples, 2);
    CHECK(p->samples[0].nloc == 2 && fixture_locs(p, 0)[0] == 3 && fixture_locs(p, 0)[1] == 2);
    const uint32_t *l = fixture_locs(p, 1);
    CHECK(p->samples[1].nloc == 3 && l[0] == 2 && l[1] == 2 && l[2] == 1);
    CHECK(hk_profile_sample_values(p, 0)[0] == 5 && hk_profile_sample_values(p, 1)[0] == -3);
    CHECK_STR(hk_profile_str(p, p->sample_types[0].type), "alloc");
    hk_profile_free(p);
    hk_buf_free(&b);
}

static void test_unpacked_and_mixed_repeats(void)
{
    hk_buf b, s;
    hk_buf_init(&b);
    hk_buf_init(&s);
    put_basics(&b);
    put_value_type(&b, 1, 2, 2); /* a second sample type */
    put_location(&b, 2, 1, 11);
    /* location ids: one unpacked, then a packed run, then unpacked again */
    hk_pb_uint(&s, 1, 2);
    uint32_t run[] = {1, 2};
    hk_pb_packed_u32(&s, 1, run, 2);
    hk_pb_uint(&s, 1, 1);
    /* values unpacked, one of them negative */
    hk_pb_int(&s, 2, -42);
    hk_pb_int(&s, 2, INT64_MAX);
    put_msg(&b, 2, &s);
    /* comments: one unpacked, then two packed */
    hk_pb_uint(&b, 13, 3);
    uint32_t comments[] = {4, 0};
    hk_pb_packed_u32(&b, 13, comments, 2);
    hk_profile *p = decode_buf(&b);
    CHECK_MSG(p, "%s", err);
    CHECK_INT(p->nsamples, 1);
    const uint32_t *l = fixture_locs(p, 0);
    CHECK(p->samples[0].nloc == 4 && l[0] == 2 && l[1] == 1 && l[2] == 2 && l[3] == 1);
    CHECK(hk_profile_sample_values(p, 0)[0] == -42 && hk_profile_sample_values(p, 0)[1] == INT64_MAX);
    CHECK_INT(p->ncomments, 3);
    CHECK_STR(hk_profile_str(p, p->comments[0]), "main");
    CHECK_STR(hk_profile_str(p, p->comments[1]), "app.rb");
    CHECK_STR(hk_profile_str(p, p->comments[2]), "");
    hk_profile_free(p);
    hk_buf_free(&b);
    hk_buf_free(&s);
}

/* a field of every wire type pprof does not use, numbered `field` */
static void put_unknowns(hk_buf *b, uint32_t field)
{
    hk_pb_uint(b, field, 12345);
    hk_pb_bytes(b, field, "\xff\xff\x00junk", 7);
    hk_pb_tag(b, field, HK_PB_I64);
    hk_buf_append(b, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    hk_pb_tag(b, field, HK_PB_I32);
    hk_buf_append(b, "\x01\x02\x03\x04", 4);
}

static void test_unknown_fields_skipped(void)
{
    hk_buf b, m, sub;
    hk_buf_init(&b);
    hk_buf_init(&m);
    hk_buf_init(&sub);
    put_unknowns(&b, 100);
    put_str(&b, "");
    put_str(&b, "f");
    put_unknowns(&b, 3);  /* mapping */
    put_unknowns(&b, 15); /* doc_url */
    hk_pb_uint(&b, 7, 1); /* drop_frames */
    /* a sample type, function, location, sample and label, each with extra fields */
    hk_pb_uint(&m, 1, 1);
    put_unknowns(&m, 9);
    put_msg(&b, 1, &m);
    hk_pb_uint(&m, 1, 5);
    hk_pb_uint(&m, 2, 1);
    put_unknowns(&m, 6);
    put_msg(&b, 5, &m);
    hk_pb_uint(&m, 1, 6);
    hk_pb_uint(&m, 2, 77); /* mapping_id */
    hk_pb_uint(&m, 3, 0x1234); /* address */
    hk_pb_uint(&sub, 1, 5);
    hk_pb_uint(&sub, 2, 3);
    hk_pb_uint(&sub, 3, 8); /* column */
    put_unknowns(&sub, 20);
    put_msg(&m, 4, &sub);
    hk_pb_uint(&m, 5, 1); /* is_folded */
    put_unknowns(&m, 21);
    put_msg(&b, 4, &m);
    hk_pb_uint(&m, 1, 6);
    hk_pb_int(&m, 2, 9);
    hk_pb_uint(&sub, 1, 1);
    hk_pb_uint(&sub, 3, 4);
    put_unknowns(&sub, 5);
    put_msg(&m, 3, &sub);
    put_unknowns(&m, 4);
    put_msg(&b, 2, &m);
    hk_profile *p = decode_buf(&b);
    CHECK_MSG(p, "%s", err);
    CHECK(p->nvalues == 1 && p->nfunctions == 1 && p->nlocations == 1 && p->nsamples == 1);
    CHECK_INT(hk_profile_loc(p, 1)->line, 3);
    CHECK_INT(hk_profile_sample_values(p, 0)[0], 9);
    CHECK(p->samples[0].nlabel == 1 && hk_profile_sample_labels(p, 0)[0].num == 4);
    hk_profile_free(p);
    hk_buf_free(&b);
    hk_buf_free(&m);
    hk_buf_free(&sub);
}

static void test_duplicate_strings_and_functions(void)
{
    hk_buf b;
    hk_buf_init(&b);
    put_str(&b, "");
    put_str(&b, "a");
    put_str(&b, "a");
    put_str(&b, "");
    put_function(&b, 1, 1, 0, 0);
    put_function(&b, 2, 2, 3, 0); /* same content as function 1 */
    put_location(&b, 1, 1, 5);
    put_location(&b, 2, 2, 5); /* and so the same location */
    put_value_type(&b, 1, 1, 1);
    uint64_t locs[] = {1, 2};
    int64_t one = 1;
    put_sample(&b, locs, 2, &one, 1);
    hk_profile *p = decode_buf(&b);
    CHECK_MSG(p, "%s", err);
    CHECK_INT(p->strings.count, 2);
    CHECK_INT(p->nfunctions, 1);
    CHECK_INT(p->nlocations, 1);
    const uint32_t *l = fixture_locs(p, 0);
    CHECK(l[0] == 1 && l[1] == 1);
    hk_profile_free(p);
    hk_buf_free(&b);
}

static void test_inlined_lines_and_bare_addresses(void)
{
    hk_buf b, m, line;
    hk_buf_init(&b);
    hk_buf_init(&m);
    hk_buf_init(&line);
    put_str(&b, "");
    put_str(&b, "inlined");
    put_str(&b, "caller");
    put_function(&b, 1, 1, 0, 0);
    put_function(&b, 2, 2, 0, 0);
    hk_pb_uint(&m, 1, 1);
    hk_pb_uint(&line, 1, 1);
    hk_pb_int(&line, 2, 7);
    put_msg(&m, 4, &line);
    hk_pb_uint(&line, 1, 2);
    hk_pb_int(&line, 2, 70);
    put_msg(&m, 4, &line);
    put_msg(&b, 4, &m);
    hk_pb_uint(&m, 1, 2); /* no line at all, only an address */
    hk_pb_uint(&m, 3, 0x4005d0);
    put_msg(&b, 4, &m);
    hk_pb_uint(&m, 1, 3); /* neither */
    put_msg(&b, 4, &m);
    hk_profile *p = decode_buf(&b);
    CHECK_MSG(p, "%s", err);
    CHECK_INT(p->nlocations, 3);
    CHECK(hk_profile_loc(p, 1)->function_id == 1 && hk_profile_loc(p, 1)->line == 7);
    const hk_function *f = hk_profile_func(p, hk_profile_loc(p, 2)->function_id);
    CHECK_STR(hk_profile_str(p, f->name), "0x4005d0");
    f = hk_profile_func(p, hk_profile_loc(p, 3)->function_id);
    CHECK_STR(hk_profile_str(p, f->name), "0x0");
    hk_profile_free(p);
    hk_buf_free(&b);
    hk_buf_free(&m);
    hk_buf_free(&line);
}

static void test_labels_and_profile_fields(void)
{
    hk_buf b, s, l;
    hk_buf_init(&b);
    hk_buf_init(&s);
    hk_buf_init(&l);
    put_basics(&b); /* strings 1 cpu, 2 nanoseconds, 3 main, 4 app.rb */
    hk_pb_uint(&l, 1, 3);
    hk_pb_uint(&l, 2, 4);
    hk_pb_int(&l, 3, 99); /* both str and num: the model keeps str */
    put_msg(&s, 3, &l);
    hk_pb_uint(&l, 1, 4);
    hk_pb_int(&l, 3, -5);
    hk_pb_uint(&l, 4, 2);
    put_msg(&s, 3, &l);
    hk_pb_uint(&l, 1, 3); /* key only: the number 0 */
    put_msg(&s, 3, &l);
    hk_pb_int(&s, 2, 1);
    put_msg(&b, 2, &s);
    hk_pb_int(&b, 9, -1000);             /* time_nanos */
    hk_pb_int(&b, 10, INT64_MAX);        /* duration_nanos */
    put_value_type(&b, 11, 1, 2);        /* period_type */
    hk_pb_int(&b, 12, 1000000);          /* period */
    hk_pb_uint(&b, 14, 1);               /* default_sample_type */
    hk_profile *p = decode_buf(&b);
    CHECK_MSG(p, "%s", err);
    CHECK(p->nsamples == 1 && p->samples[0].nlabel == 3);
    const hk_label *lab = hk_profile_sample_labels(p, 0);
    CHECK_STR(hk_profile_str(p, lab[0].key), "main");
    CHECK_STR(hk_profile_str(p, lab[0].str), "app.rb");
    CHECK(lab[0].num == 0 && lab[0].num_unit == 0);
    CHECK(lab[1].str == 0 && lab[1].num == -5);
    CHECK_STR(hk_profile_str(p, lab[1].num_unit), "nanoseconds");
    CHECK(lab[2].str == 0 && lab[2].num == 0 && lab[2].num_unit == 0);
    CHECK(p->time_nanos == -1000 && p->duration_nanos == INT64_MAX && p->period == 1000000);
    CHECK_STR(hk_profile_str(p, p->period_type.type), "cpu");
    CHECK_STR(hk_profile_str(p, p->period_type.unit), "nanoseconds");
    CHECK_STR(hk_profile_str(p, p->default_sample_type), "cpu");
    hk_profile_free(p);
    hk_buf_free(&b);
    hk_buf_free(&s);
    hk_buf_free(&l);
}

/* decoding b fails with exactly the message want */
#define CHECK_REJECTS(b, want)                                    \
    do {                                                          \
        hk_profile *p_ = decode_buf(b);                           \
        hk_profile_free(p_);                                      \
        CHECK_MSG(p_ == NULL, "accepted, expected \"%s\"", want); \
        CHECK_STR(err, want);                                     \
    } while (0)

static void test_reference_errors(void)
{
    hk_buf b;
    hk_buf_init(&b);
    int64_t one = 1;
    uint64_t loc99 = 99, loc1 = 1;

    put_basics(&b);
    put_sample(&b, &loc1, 1, &one, 1);
    put_sample(&b, &loc99, 1, &one, 1);
    CHECK_REJECTS(&b, "sample 1 refers to location 99, which does not exist");
    b.len = 0;
    put_basics(&b);
    uint64_t loc0 = 0;
    put_sample(&b, &loc0, 1, &one, 1);
    CHECK_REJECTS(&b, "sample 0 refers to location 0, which does not exist");
    b.len = 0;
    put_basics(&b);
    int64_t two[] = {1, 2};
    put_sample(&b, &loc1, 1, two, 2);
    CHECK_REJECTS(&b, "sample 0 has 2 values, but the profile has 1 sample types");
    b.len = 0;
    put_basics(&b);
    put_sample(&b, &loc1, 1, NULL, 0);
    CHECK_REJECTS(&b, "sample 0 has 0 values, but the profile has 1 sample types");
    /* found by the fuzzer: a string table entry and one empty sample, no sample type */
    static const unsigned char no_type[] = {0x32, 0x00, 0x12, 0x00};
    b.len = 0;
    hk_buf_append(&b, no_type, sizeof(no_type));
    CHECK_REJECTS(&b, "sample 0, but the profile has no sample type");
    b.len = 0;
    put_basics(&b);
    put_location(&b, 5, 7, 1);
    CHECK_REJECTS(&b, "location 5 refers to function 7, which does not exist");
    b.len = 0;
    put_basics(&b);
    put_location(&b, 1, 1, 11);
    CHECK_REJECTS(&b, "location id 1 appears twice");
    b.len = 0;
    put_basics(&b);
    put_function(&b, 1, 0, 0, 0);
    CHECK_REJECTS(&b, "function id 1 appears twice");
    b.len = 0;
    put_basics(&b);
    put_function(&b, 0, 1, 0, 0);
    CHECK_REJECTS(&b, "function at byte 60 has id 0 (ids start at 1)");
    b.len = 0;
    put_basics(&b);
    put_location(&b, 0, 1, 0);
    CHECK_REJECTS(&b, "location at byte 60 has id 0 (ids start at 1)");
    hk_buf_free(&b);
}

static void test_string_index_errors(void)
{
    hk_buf b, s, l;
    hk_buf_init(&b);
    hk_buf_init(&s);
    hk_buf_init(&l);
    put_str(&b, "");
    put_str(&b, "x");
    put_function(&b, 3, 99, 0, 0);
    CHECK_REJECTS(&b, "function 3: name refers to string 99, but the string table has 2 entries");
    b.len = 0;
    put_str(&b, "");
    put_function(&b, 3, 0, 2, 0);
    CHECK_REJECTS(&b, "function 3: filename refers to string 2, but the string table has 1 entries");
    b.len = 0;
    put_str(&b, "");
    put_value_type(&b, 1, 0, 0);
    put_value_type(&b, 1, 0, 5);
    CHECK_REJECTS(&b, "sample type 1: unit refers to string 5, but the string table has 1 entries");
    b.len = 0;
    put_str(&b, "");
    put_value_type(&b, 11, 3, 0);
    CHECK_REJECTS(&b, "period_type.type refers to string 3, but the string table has 1 entries");
    b.len = 0;
    put_str(&b, "");
    uint32_t comments[] = {0, 1};
    hk_pb_packed_u32(&b, 13, comments, 2);
    CHECK_REJECTS(&b, "comment 1: text refers to string 1, but the string table has 1 entries");
    b.len = 0;
    put_str(&b, "");
    hk_pb_uint(&b, 14, 1);
    CHECK_REJECTS(&b, "default_sample_type refers to string 1, but the string table has 1 entries");
    b.len = 0;
    put_str(&b, "");
    hk_pb_uint(&l, 1, 0);
    hk_pb_uint(&l, 2, 7);
    put_msg(&s, 3, &l);
    put_msg(&b, 2, &s);
    CHECK_REJECTS(&b, "sample 0: label str refers to string 7, but the string table has 1 entries");
    b.len = 0;
    put_str(&b, "");
    hk_pb_int(&l, 1, -1); /* negative index: a huge unsigned one */
    put_msg(&s, 3, &l);
    put_msg(&b, 2, &s);
    CHECK_REJECTS(&b, "sample 0: label key refers to string 18446744073709551615, but the string table has 1 entries");
    hk_buf_free(&b);
    hk_buf_free(&s);
    hk_buf_free(&l);
}

static void test_string_table_errors(void)
{
    hk_buf b;
    hk_buf_init(&b);
    hk_pb_int(&b, 9, 5);
    CHECK_REJECTS(&b, "string_table is missing (it must start with \"\")");
    b.len = 0;
    put_str(&b, "x");
    put_str(&b, "");
    CHECK_REJECTS(&b, "string_table[0] must be \"\", but is 1 bytes long");
    CHECK_REJECTS(&(hk_buf){0}, "empty input: not a pprof profile");
    b.len = 0;
    put_str(&b, "");
    for (int i = 0; i < HK_MAX_SAMPLE_TYPES + 1; i++) put_value_type(&b, 1, 0, 0);
    CHECK_REJECTS(&b, "more than 8 sample types (hakari reads at most 8)");
    hk_buf_free(&b);
}

static void test_wire_errors(void)
{
    /* each input: "" in the string table (bytes 0-1), then something wrong at byte 2 */
    static const struct { const char *bytes; size_t n; const char *err; } cases[] = {
        {"\x32\x00\x48\x80\x80", 5, "truncated varint at byte 3"},
        {"\x32\x00\x48", 3, "truncated varint at byte 3"},
        {"\x32\x00\x80", 3, "truncated varint at byte 2"},
        {"\x32\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 13, "malformed varint at byte 2"},
        {"\x32\x00\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 13, "malformed varint at byte 3"},
        {"\x32\x00\x32\x05" "a", 5, "field 6 at byte 2 is 5 bytes long, but only 1 remain"},
        {"\x32\x00\x3b", 3, "unsupported wire type 3 at byte 2"},
        {"\x32\x00\x3f", 3, "unsupported wire type 7 at byte 2"},
        {"\x32\x00\x00", 3, "invalid field number 0 at byte 2"},
        {"\x32\x00\x49" "1234567", 10, "truncated fixed-width value at byte 3"},
        {"\x32\x00\x4a\x00", 4, "time_nanos at byte 2 has wire type 2, expected 0"},
        {"\x32\x00\x30\x00", 4, "string_table entry at byte 2 has wire type 0, expected 2"},
        {"\x32\x00\x10\x01", 4, "sample at byte 2 has wire type 0, expected 2"},
        {"\x32\x00\x12\x02\x08\x80", 6, "truncated varint at byte 5"},        /* inside a sample */
        {"\x32\x00\x12\x03\x0a\x01\x80", 7, "truncated varint at byte 6"},    /* inside a packed run */
        {"\x32\x00\x12\x02\x0a\x05", 6, "field 1 at byte 4 is 5 bytes long, but only 0 remain"},
        {"\x32\x00\x2a\x02\x12\x00", 6, "function field at byte 4 has wire type 2, expected 0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hk_profile *p = decode(cases[i].bytes, cases[i].n);
        hk_profile_free(p);
        CHECK_MSG(p == NULL, "case %zu accepted", i);
        CHECK_MSG(strcmp(err, cases[i].err) == 0, "case %zu: \"%s\", expected \"%s\"", i, err, cases[i].err);
    }
}

static void test_err_buffer_handling(void)
{
    static const uint8_t bad[] = {0x32, 0x00, 0x48, 0x80};
    hk_profile *p = hk_pprof_decode(bad, sizeof(bad), NULL, 0);
    CHECK(p == NULL);
    char small[8];
    memset(small, 'z', sizeof(small));
    p = hk_pprof_decode(bad, sizeof(bad), small, sizeof(small));
    CHECK(p == NULL);
    CHECK_STR(small, "truncat"); /* cut, and terminated */
    p = hk_pprof_decode(bad, sizeof(bad), small, 0);
    CHECK(p == NULL && small[0] == 't');
}

/* a gzip member of data, made with zlib itself rather than hakari's encoder */
static hk_buf gzip_of(const void *data, size_t n)
{
    hk_buf out;
    hk_buf_init(&out);
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
    size_t bound = deflateBound(&z, (uLong)n);
    if (hk_buf_reserve(&out, bound) < 0) abort();
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)n;
    z.next_out = out.data;
    z.avail_out = (uInt)bound;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
    out.len = z.total_out;
    deflateEnd(&z);
    return out;
}

static void test_gzip_input(void)
{
    hk_profile *ref = fixture_profile(11, 40);
    hk_buf raw = fixture_encode(ref, 0), gz = fixture_encode(ref, 1);
    char why[200];
    hk_profile *p = decode_buf(&gz);
    CHECK_MSG(p, "%s", err);
    CHECK_MSG(fixture_equal(ref, p, why, sizeof(why)) == 0, "%s", why);
    hk_profile_free(p);

    /* two gzip members make one file: split the protobuf anywhere */
    hk_buf a = gzip_of(raw.data, raw.len / 3), c = gzip_of(raw.data + raw.len / 3, raw.len - raw.len / 3);
    hk_buf_append(&a, c.data, c.len);
    p = decode_buf(&a);
    CHECK_MSG(p, "%s", err);
    CHECK_MSG(fixture_equal(ref, p, why, sizeof(why)) == 0, "%s", why);
    hk_profile_free(p);

    hk_buf_append(&gz, "x", 1);
    CHECK_REJECTS(&gz, "gzip: unexpected bytes after the compressed data");
    gz.len -= 9; /* cut into the trailer */
    CHECK_REJECTS(&gz, "gzip: compressed data is truncated");
    gz.len = 2;
    CHECK_REJECTS(&gz, "gzip: compressed data is truncated");
    hk_buf bad;
    hk_buf_init(&bad);
    hk_buf_append(&bad, "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff", 14);
    p = decode_buf(&bad);
    CHECK(p == NULL);
    CHECK(strncmp(err, "gzip: ", 6) == 0);
    hk_buf_free(&bad);
    hk_buf_free(&a);
    hk_buf_free(&c);
    hk_buf_free(&raw);
    hk_buf_free(&gz);
    hk_profile_free(ref);
}

static void test_gunzip_limit(void)
{
    uint8_t data[1000];
    for (size_t i = 0; i < sizeof(data); i++) data[i] = (uint8_t)(i % 7);
    hk_buf z = gzip_of(data, sizeof(data)), out;
    hk_buf_init(&out);
    hk_buf_puts(&out, "keep");
    CHECK_INT(hk_gunzip(z.data, z.len, 999, &out, err, sizeof(err)), -1);
    CHECK_STR(err, "gzip: inflates to more than 999 bytes");
    CHECK(out.len == 4 && memcmp(out.data, "keep", 4) == 0);
    CHECK_INT(hk_gunzip(z.data, z.len, 0, &out, err, sizeof(err)), -1);
    CHECK_INT(hk_gunzip(z.data, z.len, 1000, &out, err, sizeof(err)), 0);
    CHECK(out.len == 1004 && memcmp(out.data + 4, data, sizeof(data)) == 0);
    hk_buf_free(&z);
    hk_buf_free(&out);

    /* a large, very compressible stream: 200 MB of zeros stop at a 1 MB limit */
    size_t big = 200u << 20;
    uint8_t *zeros = calloc(1, 1 << 20);
    hk_buf zz;
    hk_buf_init(&zz);
    {
        /* build the member from 1 MB of zeros repeated, without a 200 MB buffer */
        hk_buf one = gzip_of(zeros, 1 << 20);
        for (size_t i = 0; i < big >> 20; i++) hk_buf_append(&zz, one.data, one.len);
        hk_buf_free(&one);
    }
    hk_buf_init(&out);
    CHECK_INT(hk_gunzip(zz.data, zz.len, 1 << 20, &out, err, sizeof(err)), -1);
    CHECK_STR(err, "gzip: inflates to more than 1048576 bytes");
    CHECK_INT(out.len, 0);
    CHECK(out.cap <= (2u << 20)); /* it stopped, rather than inflating everything first */
    hk_buf_free(&out);
    hk_buf_free(&zz);
    free(zeros);
}

static void test_zlib_stream_accepted(void)
{
    /* windowBits 15 + 32 also takes a zlib header; hk_pprof_decode only routes
     * gzip magic there, hk_gunzip itself takes both */
    static const uint8_t zlib_hello[] = {0x78, 0x9c, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x06, 0x2c, 0x02, 0x15};
    hk_buf out;
    hk_buf_init(&out);
    CHECK_INT(hk_gunzip(zlib_hello, sizeof(zlib_hello), 100, &out, err, sizeof(err)), 0);
    CHECK(out.len == 5 && memcmp(out.data, "hello", 5) == 0);
    hk_buf_free(&out);
}

/* Decodes with allocation nth failing: NULL and "out of memory", no block
 * kept; or, past the last allocation, the same profile. */
static void sweep(const hk_buf *input, const hk_profile *ref)
{
    alloc_fail_at(-1);
    hk_profile *p = decode_buf(input);
    long total = alloc_fail_count();
    hk_profile_free(p);
    long live = alloc_live();
    char why[200];
    for (long nth = 0; nth <= total; nth++) {
        alloc_fail_at(nth);
        p = decode_buf(input);
        int failed = alloc_fail_done();
        CHECK_MSG(failed == (nth < total), "allocation %ld of %ld", nth, total);
        if (failed) {
            CHECK_MSG(p == NULL, "allocation %ld failed, but a profile came back", nth);
            CHECK_MSG(strstr(err, "out of memory"), "allocation %ld: \"%s\"", nth, err);
        } else {
            CHECK_MSG(p && fixture_equal(ref, p, why, sizeof(why)) == 0, "%s", p ? why : err);
        }
        hk_profile_free(p);
        CHECK_MSG(alloc_live() == live, "allocation %ld failed: %ld blocks leaked", nth, alloc_live() - live);
    }
}

static void test_decode_under_failed_allocation(void)
{
    hk_profile *ref = fixture_profile(5, 30);
    hk_buf raw = fixture_encode(ref, 0), gz = fixture_encode(ref, 1);
    sweep(&raw, ref);
    sweep(&gz, ref);
    hk_buf_free(&raw);
    hk_buf_free(&gz);
    hk_profile_free(ref);
}

int main(void)
{
    RUN(test_minimal);
    RUN(test_arbitrary_ids_any_order);
    RUN(test_unpacked_and_mixed_repeats);
    RUN(test_unknown_fields_skipped);
    RUN(test_duplicate_strings_and_functions);
    RUN(test_inlined_lines_and_bare_addresses);
    RUN(test_labels_and_profile_fields);
    RUN(test_reference_errors);
    RUN(test_string_index_errors);
    RUN(test_string_table_errors);
    RUN(test_wire_errors);
    RUN(test_err_buffer_handling);
    RUN(test_gzip_input);
    RUN(test_gunzip_limit);
    RUN(test_zlib_stream_accepted);
    RUN(test_decode_under_failed_allocation);
    return check_done();
}
