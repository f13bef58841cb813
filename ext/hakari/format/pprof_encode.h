/* pprof_encode.h — profile model -> pprof protobuf (profile.proto), optionally gzipped.
 * Pure: reads the profile, appends bytes to `out`. ctx: core.
 */
#ifndef HK_PPROF_ENCODE_H
#define HK_PPROF_ENCODE_H

#include "buf.h"
#include "profile.h"

/* 0, or -1 (out of memory, or a zlib failure); out is left as it was on failure */
int hk_pprof_encode(const hk_profile *p, hk_buf *out, int gzip);

#endif
