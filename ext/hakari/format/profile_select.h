/* profile_select.h — a profile's samples that a report asks for, as a new
 * profile (what `hakari report` and `hakari diff` read):
 *
 *   focus   keep the samples with a frame whose function name matches this
 *           POSIX extended regular expression (pprof's -focus);
 *   ignore  drop the samples with a frame whose name matches (pprof's -ignore);
 *   thread  keep the samples whose numeric "thread" label is this (-1: all);
 *   tag     "KEY=VALUE": keep the samples with a label KEY whose string value
 *           is VALUE, or whose number is VALUE written in decimal (pprof's
 *           -tagfocus, by equality);
 *   lines   each executing line is a function of its own, "name:line", so
 *           that the tables rank lines rather than methods.
 *
 * The new profile keeps the sample types, period, time, duration, comments
 * and the samples' labels. ctx: core, pure.
 */
#ifndef HK_PROFILE_SELECT_H
#define HK_PROFILE_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

typedef struct hk_select {
    const char *focus, *ignore; /* NULL: no such filter */
    int64_t thread;             /* -1: every thread */
    const char *tag;            /* "KEY=VALUE", or NULL */
    int lines;
} hk_select;

/* The selected profile (free with hk_profile_free), or NULL with a one-line
 * message in err: a regular expression that does not compile, a tag with no
 * "=" or no key, or no memory. */
hk_profile *hk_profile_select(const hk_profile *p, const hk_select *sel, char *err, size_t errlen);

#endif
