/* test_protobuf.c — wire primitives: exact bytes written for varints, tags,
 * fields and packed runs; the reader on valid, truncated and malformed input.
 * Inputs to the reader are copied to exact-size heap blocks, so any read past
 * the end is caught by ASan. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "protobuf.h"

/* b holds exactly the n bytes of want */
static int bytes_are(const hk_buf *b, const char *want, size_t n)
{
    return b->len == n && memcmp(b->data, want, n) == 0;
}

static void test_varint_bytes(void)
{
    static const struct { uint64_t v; const char *bytes; size_t n; } cases[] = {
        {0, "\x00", 1},
        {1, "\x01", 1},
        {127, "\x7f", 1},
        {128, "\x80\x01", 2},
        {300, "\xac\x02", 2},
        {16383, "\xff\x7f", 2},
        {16384, "\x80\x80\x01", 3},
        {UINT32_MAX, "\xff\xff\xff\xff\x0f", 5},
        {UINT64_MAX, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hk_buf b;
        hk_buf_init(&b);
        hk_pb_varint(&b, cases[i].v);
        CHECK_MSG(bytes_are(&b, cases[i].bytes, cases[i].n), "varint %llu", (unsigned long long)cases[i].v);
        hk_buf_free(&b);
    }
}

static void test_fields(void)
{
    hk_buf b;
    hk_buf_init(&b);
    hk_pb_tag(&b, 1, HK_PB_VARINT);
    hk_pb_tag(&b, 16, HK_PB_LEN); /* field 16 needs a two-byte key */
    CHECK(bytes_are(&b, "\x08\x82\x01", 3));
    b.len = 0;
    hk_pb_uint(&b, 3, 0); /* proto3 default: omitted */
    hk_pb_int(&b, 3, 0);
    CHECK_INT(b.len, 0);
    hk_pb_uint(&b, 3, 150);
    CHECK(bytes_are(&b, "\x18\x96\x01", 3));
    b.len = 0;
    hk_pb_int(&b, 2, -1); /* int64, not zigzag: ten bytes */
    CHECK(bytes_are(&b, "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11));
    b.len = 0;
    hk_pb_int(&b, 2, INT64_MIN);
    CHECK(bytes_are(&b, "\x10\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11));
    b.len = 0;
    hk_pb_bytes(&b, 6, "hi", 2);
    hk_pb_bytes(&b, 6, "", 0);
    CHECK(bytes_are(&b, "\x32\x02hi\x32\x00", 6));
    hk_buf_free(&b);
}

static void test_packed(void)
{
    hk_buf b;
    hk_buf_init(&b);
    hk_pb_packed_u32(&b, 1, NULL, 0);
    hk_pb_packed_i64(&b, 2, NULL, 0);
    CHECK_INT(b.len, 0);
    uint32_t u[] = {1, 300, 0};
    hk_pb_packed_u32(&b, 1, u, 3);
    CHECK(bytes_are(&b, "\x0a\x04\x01\xac\x02\x00", 6));
    b.len = 0;
    int64_t v[] = {-1, 2};
    hk_pb_packed_i64(&b, 2, v, 2);
    CHECK(bytes_are(&b, "\x12\x0b\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x02", 13));
    hk_buf_free(&b);
}

/* a reader over an exact-size heap copy of n bytes (freed by the caller via *mem) */
static hk_pb_reader reader(const void *bytes, size_t n, uint8_t **mem)
{
    *mem = malloc(n ? n : 1);
    if (n) memcpy(*mem, bytes, n);
    hk_pb_reader r = {*mem, *mem + n};
    return r;
}

static void test_read_varints(void)
{
    hk_buf b;
    hk_buf_init(&b);
    uint64_t vals[200];
    size_t n = 0;
    for (int k = 0; k < 64; k++) { /* each power of two, and one less */
        vals[n++] = (uint64_t)1 << k;
        vals[n++] = ((uint64_t)1 << k) - 1;
    }
    vals[n++] = UINT64_MAX;
    vals[n++] = (uint64_t)INT64_MIN;
    for (size_t i = 0; i < n; i++) hk_pb_varint(&b, vals[i]);
    uint8_t *mem;
    hk_pb_reader r = reader(b.data, b.len, &mem);
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        CHECK_INT(hk_pb_read_varint(&r, &v), 0);
        CHECK_MSG(v == vals[i], "value %zu", i);
    }
    CHECK(r.p == r.end);
    uint64_t v;
    CHECK_INT(hk_pb_read_varint(&r, &v), -1); /* at the end */
    free(mem);
    hk_buf_free(&b);
}

static void test_read_malformed_varints(void)
{
    uint8_t *mem;
    uint64_t v = 12345;
    hk_pb_reader r = reader("\x80\x80", 2, &mem); /* continuation bit, then nothing */
    CHECK_INT(hk_pb_read_varint(&r, &v), -1);
    free(mem);
    r = reader("", 0, &mem);
    CHECK_INT(hk_pb_read_varint(&r, &v), -1);
    free(mem);
    r = reader("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11, &mem); /* 11 bytes */
    CHECK_INT(hk_pb_read_varint(&r, &v), -1);
    free(mem);
    r = reader("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10, &mem); /* bit 64 set */
    CHECK_INT(hk_pb_read_varint(&r, &v), -1);
    free(mem);
    r = reader("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 10, &mem); /* overlong zero: accepted */
    CHECK_INT(hk_pb_read_varint(&r, &v), 0);
    CHECK_INT(v, 0);
    free(mem);
}

static void test_read_key_len_skip(void)
{
    uint8_t *mem;
    uint32_t field;
    int wire;
    hk_pb_reader r = reader("\x82\x01", 2, &mem);
    CHECK_INT(hk_pb_read_key(&r, &field, &wire), 0);
    CHECK(field == 16 && wire == HK_PB_LEN);
    free(mem);
    r = reader("\x02", 1, &mem); /* field 0 does not exist */
    CHECK_INT(hk_pb_read_key(&r, &field, &wire), -1);
    free(mem);

    hk_pb_reader sub;
    r = reader("\x03" "abc" "\x05" "ab", 6, &mem);
    CHECK_INT(hk_pb_read_len(&r, &sub), 0);
    CHECK(sub.end - sub.p == 3 && memcmp(sub.p, "abc", 3) == 0);
    CHECK_INT(hk_pb_read_len(&r, &sub), -1); /* says 5, has 2 */
    free(mem);
    r = reader("\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 9, &mem); /* a length near 2^63 */
    CHECK_INT(hk_pb_read_len(&r, &sub), -1);
    free(mem);

    r = reader("\x96\x01" "\x02zz" "12345678" "1234", 17, &mem);
    CHECK_INT(hk_pb_skip(&r, HK_PB_VARINT), 0);
    CHECK_INT(hk_pb_skip(&r, HK_PB_LEN), 0);
    CHECK_INT(hk_pb_skip(&r, HK_PB_I64), 0);
    CHECK_INT(hk_pb_skip(&r, HK_PB_I32), 0);
    CHECK(r.p == r.end);
    CHECK_INT(hk_pb_skip(&r, HK_PB_I32), -1);
    free(mem);
    r = reader("1234567", 7, &mem);
    CHECK_INT(hk_pb_skip(&r, HK_PB_I64), -1);
    CHECK_INT(hk_pb_skip(&r, 3), -1); /* groups are not supported */
    CHECK_INT(hk_pb_skip(&r, 4), -1);
    CHECK_INT(hk_pb_skip(&r, 6), -1);
    CHECK_INT(hk_pb_skip(&r, 7), -1);
    free(mem);
}

static void test_truncated_everywhere(void)
{
    /* a message cut at every length: every read fails or stays inside */
    hk_buf b;
    hk_buf_init(&b);
    hk_pb_uint(&b, 1, UINT64_MAX);
    hk_pb_bytes(&b, 2, "hello", 5);
    hk_pb_tag(&b, 3, HK_PB_I64);
    hk_buf_append(&b, "12345678", 8);
    for (size_t cut = 0; cut <= b.len; cut++) {
        uint8_t *mem;
        hk_pb_reader r = reader(b.data, cut, &mem);
        uint32_t field;
        int wire;
        int fields = 0;
        while (r.p < r.end && hk_pb_read_key(&r, &field, &wire) == 0 && hk_pb_skip(&r, wire) == 0) fields++;
        CHECK(r.p <= r.end);
        CHECK(fields <= 3);
        if (cut == b.len) CHECK_INT(fields, 3);
        free(mem);
    }
    hk_buf_free(&b);
}

static void test_writer_after_oom(void)
{
    hk_buf b;
    hk_buf_init(&b);
    b.oom = 1;
    hk_pb_uint(&b, 1, 5);
    hk_pb_bytes(&b, 2, "x", 1);
    uint32_t u = 1;
    hk_pb_packed_u32(&b, 3, &u, 1);
    CHECK(b.len == 0 && b.data == NULL);
    hk_buf_free(&b);
}

int main(void)
{
    RUN(test_varint_bytes);
    RUN(test_fields);
    RUN(test_packed);
    RUN(test_read_varints);
    RUN(test_read_malformed_varints);
    RUN(test_read_key_len_skip);
    RUN(test_truncated_everywhere);
    RUN(test_writer_after_oom);
    return check_done();
}
