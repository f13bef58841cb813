/* dot_encode.h — a profile -> a Graphviz digraph of its methods.
 *
 * One node per method, labelled with its name, file:line, total and self
 * (value and share of the whole profile), its font size and colour (blue to
 * red) growing with its total share; one edge per caller -> callee pair,
 * labelled with the inclusive time and the calls (samples for a sampling
 * profile), its pen width growing with its share. Times follow the call
 * tree's recursion rule (calltree.h): a recursive method's self-edge carries
 * calls and no time. Methods under HK_DOT_MIN_SHARE of the total are left
 * out, and the graph's label says how many. Names are escaped for a quoted
 * DOT string; control bytes and invalid UTF-8 become '?'. ctx: core, pure.
 */
#ifndef HK_DOT_ENCODE_H
#define HK_DOT_ENCODE_H

#include "buf.h"
#include "profile.h"

#define HK_DOT_MIN_SHARE 0.005

/* 0, or -1 when the profile has no sample types, a bad id, or out of memory */
int hk_dot_encode(const hk_profile *p, hk_buf *out);

#endif
