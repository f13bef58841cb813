/* html_encode.h — a profile as one self-contained HTML page: a flame graph and
 * an icicle, click to zoom, a search that highlights and sums its matches, a
 * sortable table of functions, a thread selector, the GVL and GC frames in
 * colours of their own, and the profile's header (flamegraph.html, embedded
 * at build time). The page makes no request of any kind.
 *
 * Data: the profile's call tree, merged over its samples (one node per path,
 * under a node per thread when several threads' samples carry a "thread"
 * label), in depth-first order, each node its distance to its parent, its
 * name's index and its self value (microseconds where the unit is
 * nanoseconds); the names, their files, and whether each is a thread. Past
 * 100 000 nodes the smallest subtrees fold into a "[smaller frames]" node per
 * parent, which keeps a page of many thousand stacks near 1.5 MB.
 * ctx: core, pure.
 */
#ifndef HK_HTML_ENCODE_H
#define HK_HTML_ENCODE_H

#include "buf.h"
#include "profile.h"

/* 0, or -1 when out of memory */
int hk_html_encode(const hk_profile *p, hk_buf *out);
/* The differential page: new's call tree with base's beside it, functions matched by
 * name, file and first line, threads merged; each frame coloured by how its share of its
 * profile's total changed (red: grew). 0, or -1 when out of memory. */
int hk_html_diff_encode(const hk_profile *base, const hk_profile *new, hk_buf *out);

#endif
