/* protobuf.h — the few protobuf wire-format primitives pprof needs.
 *
 * Writer: varints, tags, packed repeated varints and length-delimited fields
 * appended to an hk_buf. Reader: a cursor over bytes that never reads past
 * its end; every read returns 0 on success, -1 on truncated or malformed input.
 * Wire types used: 0 (varint) and 2 (length-delimited).
 * ctx: core.
 */
#ifndef HK_PROTOBUF_H
#define HK_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum { HK_PB_VARINT = 0, HK_PB_I64 = 1, HK_PB_LEN = 2, HK_PB_I32 = 5 };

void hk_pb_varint(hk_buf *b, uint64_t v);
void hk_pb_tag(hk_buf *b, uint32_t field, int wire);
/* varint field, omitted when v == 0 (proto3 default) */
void hk_pb_uint(hk_buf *b, uint32_t field, uint64_t v);
void hk_pb_int(hk_buf *b, uint32_t field, int64_t v);
/* length-delimited field holding n bytes */
void hk_pb_bytes(hk_buf *b, uint32_t field, const void *data, size_t n);
/* packed repeated varints; nothing written when n == 0 */
void hk_pb_packed_u32(hk_buf *b, uint32_t field, const uint32_t *v, size_t n);
void hk_pb_packed_i64(hk_buf *b, uint32_t field, const int64_t *v, size_t n);

typedef struct hk_pb_reader {
    const uint8_t *p, *end;
} hk_pb_reader;

int hk_pb_read_varint(hk_pb_reader *r, uint64_t *v);
/* reads a key; *field and *wire receive its parts */
int hk_pb_read_key(hk_pb_reader *r, uint32_t *field, int *wire);
/* reads a length-delimited payload into *sub (a view into r's bytes) */
int hk_pb_read_len(hk_pb_reader *r, hk_pb_reader *sub);
/* skips a value of the given wire type */
int hk_pb_skip(hk_pb_reader *r, int wire);

#endif
