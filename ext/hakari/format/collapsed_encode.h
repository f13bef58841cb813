/* collapsed_encode.h — profile -> collapsed stacks, one line per distinct
 * function path: "root;…;leaf <value>\n", value summed over samples of value
 * index vi (stacks that differ only in line numbers merge). Lines come in
 * first-seen order; samples whose value is 0, or that have no location, are omitted. Characters that
 * would break the format in a name (';', '\n', '\r') are replaced by '_'.
 * ctx: core, pure.
 */
#ifndef HK_COLLAPSED_ENCODE_H
#define HK_COLLAPSED_ENCODE_H

#include "buf.h"
#include "profile.h"

/* 0, or -1 when out of memory or vi is not a value index */
int hk_collapsed_encode(const hk_profile *p, size_t vi, hk_buf *out);

#endif
