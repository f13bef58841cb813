/* callgrind_encode.h — a profile -> callgrind.out text, as read by KCachegrind
 * and callgrind_annotate.
 *
 *   events: <Measure>[_ns] [Wait[_ns]] [Alloc_objects]
 *                                        self cost without wait, then wait, then a
 *                                        trace's objects (allocations: true)
 *   fl=(n) file / fn=(n) name            names compressed: text once, then (n)
 *   LINE SELF [WAIT] [ALLOC]             per location line of the function
 *   cfl= / cfn= / calls=COUNT TARGETLINE, then "LINE INCLUSIVE…" at the
 *                                        caller's line, per call site
 *   summary: / totals:                   the sums of the self cost lines
 * Functions sharing a file and a name (Ruby blocks) get ":<first line>"
 * appended, since readers know a function by file and name.
 * Inclusive costs follow the call tree's rule (calltree.h): a call made inside
 * another call of the same method counts as a call with no cost, so inclusive
 * sums never exceed the totals. Threads are merged. Negative values (from a
 * corrupt file) are written as 0 and count as 0 in the totals; samples
 * without a stack appear as the function "[no stack]". Sampling profiles give
 * samples as call counts. ctx: core, pure.
 */
#ifndef HK_CALLGRIND_ENCODE_H
#define HK_CALLGRIND_ENCODE_H

#include "buf.h"
#include "profile.h"

/* 0, or -1 when the profile has no sample types, a bad id, or out of memory */
int hk_callgrind_encode(const hk_profile *p, hk_buf *out);

#endif
