/* diff_report.h — what changed between two profiles, per function (`hakari diff`).
 *
 * Functions are matched by name and file. For each, its self value (the
 * function is the leaf) and cumulative value (anywhere in the stack, once per
 * sample) in each profile, as shares of that profile's total (two runs of
 * different lengths compare), or as absolute values with `absolute`. Two
 * tables, self and cumulative, each sorted by the size of the change, largest
 * first, top_n rows:
 *
 *   "<change> <base> -> <new>  <name> (<file>)"
 *
 * change in percentage points of the total (or the value's unit, ms for
 * nanoseconds). Functions in one profile only show with 0 in the other.
 * *growth is the largest rise of any function's self share, in points (a
 * regression gate compares it with a bound). ctx: core, pure.
 */
#ifndef HK_DIFF_REPORT_H
#define HK_DIFF_REPORT_H

#include <stddef.h>

#include "buf.h"
#include "profile.h"

typedef struct hk_diff_options {
    size_t base_vi, new_vi; /* the value compared in each (hk_profile_default_value) */
    int absolute;
    size_t top_n;
} hk_diff_options;

/* 0, or -1 when out of memory or a value index is out of range */
int hk_diff_report(const hk_profile *base, const hk_profile *new, const hk_diff_options *o, hk_buf *out,
                   double *growth);

#endif
