/* protobuf.c — see protobuf.h. */
#include "protobuf.h"

void hk_pb_varint(hk_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        tmp[n++] = byte | (v ? 0x80 : 0);
    } while (v);
    hk_buf_append(b, tmp, n);
}

void hk_pb_tag(hk_buf *b, uint32_t field, int wire) { hk_pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

void hk_pb_uint(hk_buf *b, uint32_t field, uint64_t v)
{
    if (!v) return;
    hk_pb_tag(b, field, HK_PB_VARINT);
    hk_pb_varint(b, v);
}

/* int64 fields are plain (not zigzag) varints: negatives take 10 bytes */
void hk_pb_int(hk_buf *b, uint32_t field, int64_t v) { hk_pb_uint(b, field, (uint64_t)v); }

void hk_pb_bytes(hk_buf *b, uint32_t field, const void *data, size_t n)
{
    hk_pb_tag(b, field, HK_PB_LEN);
    hk_pb_varint(b, n);
    hk_buf_append(b, data, n);
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

void hk_pb_packed_u32(hk_buf *b, uint32_t field, const uint32_t *v, size_t n)
{
    if (!n) return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += varint_size(v[i]);
    hk_pb_tag(b, field, HK_PB_LEN);
    hk_pb_varint(b, len);
    for (size_t i = 0; i < n; i++) hk_pb_varint(b, v[i]);
}

void hk_pb_packed_i64(hk_buf *b, uint32_t field, const int64_t *v, size_t n)
{
    if (!n) return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += varint_size((uint64_t)v[i]);
    hk_pb_tag(b, field, HK_PB_LEN);
    hk_pb_varint(b, len);
    for (size_t i = 0; i < n; i++) hk_pb_varint(b, (uint64_t)v[i]);
}

int hk_pb_read_varint(hk_pb_reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) return -1;
        uint8_t byte = *r->p++;
        if (shift == 63 && byte > 1) return -1;
        x |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) { *v = x; return 0; }
    }
    return -1;
}

int hk_pb_read_key(hk_pb_reader *r, uint32_t *field, int *wire)
{
    uint64_t k;
    if (hk_pb_read_varint(r, &k) < 0) return -1;
    if ((k >> 3) == 0 || (k >> 3) > UINT32_MAX) return -1;
    *field = (uint32_t)(k >> 3);
    *wire = (int)(k & 7);
    return 0;
}

int hk_pb_read_len(hk_pb_reader *r, hk_pb_reader *sub)
{
    uint64_t n;
    if (hk_pb_read_varint(r, &n) < 0) return -1;
    if (n > (uint64_t)(r->end - r->p)) return -1;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return 0;
}

int hk_pb_skip(hk_pb_reader *r, int wire)
{
    uint64_t v;
    hk_pb_reader sub;
    switch (wire) {
    case HK_PB_VARINT: return hk_pb_read_varint(r, &v);
    case HK_PB_LEN: return hk_pb_read_len(r, &sub);
    case HK_PB_I64:
        if (r->end - r->p < 8) return -1;
        r->p += 8;
        return 0;
    case HK_PB_I32:
        if (r->end - r->p < 4) return -1;
        r->p += 4;
        return 0;
    default: return -1;
    }
}
