/* pprof_decode.h — pprof protobuf (profile.proto), raw or gzipped -> profile model.
 *
 * The reader behind `hakari report`/`diff` and the encoder's round-trip tests.
 * Input is untrusted: every reference is checked (string indexes, location and
 * function ids, one value per sample type, string_table[0] == ""), and a bad
 * file gives NULL and a one-line message, never a crash or a read past the end.
 * A file's ids may be any non-zero numbers; the model renumbers functions and
 * locations 1, 2, … in file order, and equal strings, functions or locations
 * collapse into one (the model interns them). Kept from a location: its first
 * line (the innermost inlined frame); mappings are dropped, and a location with
 * no line becomes a function named after its address ("0x4005d0").
 * ctx: core.
 */
#ifndef HK_PPROF_DECODE_H
#define HK_PPROF_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "profile.h"

/* a gzipped profile larger than this once inflated is refused, not read */
#define HK_PPROF_MAX_INFLATED ((size_t)1 << 30)

/* The profile (free with hk_profile_free), or NULL with a one-line message in
 * err (err may be NULL; the message is cut to errlen - 1 bytes). */
hk_profile *hk_pprof_decode(const uint8_t *data, size_t n, char *err, size_t errlen);

/* Inflates a gzip (or zlib) stream of n bytes, appending to out; several gzip
 * members are read one after another. 0, or -1 with a message in err when the
 * stream is corrupt or truncated, or would inflate to more than max bytes;
 * out keeps its length on failure. */
int hk_gunzip(const uint8_t *data, size_t n, size_t max, hk_buf *out, char *err, size_t errlen);

#endif
