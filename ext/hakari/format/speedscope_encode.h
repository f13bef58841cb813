/* speedscope_encode.h — a profile in speedscope's file format (its published
 * JSON schema): one "sampled" profile per thread (by the samples' "thread"
 * label; one for all when there is none), each stack root first with its
 * weight in the default value's unit; frames are the profile's functions
 * (name, file, first line). ctx: core, pure.
 */
#ifndef HK_SPEEDSCOPE_ENCODE_H
#define HK_SPEEDSCOPE_ENCODE_H

#include "buf.h"
#include "profile.h"

/* 0, or -1 when out of memory */
int hk_speedscope_encode(const hk_profile *p, hk_buf *out);

#endif
