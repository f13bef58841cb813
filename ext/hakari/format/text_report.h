/* text_report.h — profile -> a human-readable report:
 *
 *   header: total of value vi in its unit (ms for nanoseconds), sample count
 *           (the "samples" value when the profile has one), frequency from period,
 *           and the number of threads when the samples' "thread" labels name several;
 *   Flat: top_n functions by self value (the function is the leaf);
 *   Cumulative: top_n functions by cumulative value (the function is anywhere in
 *           the stack, counted once per sample, so recursion never exceeds 100%).
 * Rows: "<value> <percent>  <name> (<file>)". ctx: core, pure.
 */
#ifndef HK_TEXT_REPORT_H
#define HK_TEXT_REPORT_H

#include "buf.h"
#include "profile.h"

/* 0, or -1 when out of memory or vi is not a value index */
int hk_text_report(const hk_profile *p, size_t vi, size_t top_n, hk_buf *out);

#endif
