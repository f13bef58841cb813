/* flat_report.h — a profile -> ruby-prof-like flat table: one row per method,
 * sorted by self value (then total), with columns
 *
 *   %self  total  self  wait  child  calls  name  file:line
 *
 * where self excludes wait, child = total - self - wait, and total counts
 * each path once (a recursive method, marked "*", is timed at its outermost
 * call). The header names the measure and its unit (values in ms when it is
 * in nanoseconds, plain counts otherwise), the total, the number of threads
 * and the number of calls. A sampling profile reads the same way with a
 * "samples" column: the samples that had the method on their stack.
 * top_n limits the rows; 0 means every method. ctx: core, pure.
 */
#ifndef HK_FLAT_REPORT_H
#define HK_FLAT_REPORT_H

#include <stddef.h>

#include "buf.h"
#include "profile.h"

/* 0, or -1 when the profile has no sample types, a bad id, or out of memory */
int hk_flat_report(const hk_profile *p, size_t top_n, hk_buf *out);

#endif
