/* graph_report.h — a profile -> ruby-prof-like call graph: one block per
 * method, sorted by total. In a block, the method's callers come first (the
 * time of the calls from each and "called/total", total being all calls of
 * the method), then the method's own line (%total, %self, total, self, wait,
 * child, calls), then its callees ("called/total", total being all calls of
 * the callee). Recursive methods are marked "*": a line between a method and
 * itself counts the inner calls but no time, which the outermost call holds
 * already, so a method's callers' times add up to its total ("[root]" is the
 * caller of what a thread or a stack starts with). A header like
 * the flat report's comes first, a legend last. Sampling profiles read the
 * same with samples for calls. top_n limits the blocks; 0 means every method.
 * ctx: core, pure.
 */
#ifndef HK_GRAPH_REPORT_H
#define HK_GRAPH_REPORT_H

#include <stddef.h>

#include "buf.h"
#include "profile.h"

/* 0, or -1 when the profile has no sample types, a bad id, or out of memory */
int hk_graph_report(const hk_profile *p, size_t top_n, hk_buf *out);

#endif
