/* line_table.h — a profile's value per source line (`hakari annotate`): for
 * each (file, line) that a sample's frame executed, the value of the samples
 * where it was the leaf's line (self) and of those where it was any frame's
 * line, counted once per sample (cum). Rows in no order; the file is a string
 * index of the profile. ctx: core, pure.
 */
#ifndef HK_LINE_TABLE_H
#define HK_LINE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

typedef struct hk_line_row {
    uint32_t file;
    int64_t line, self, cum;
} hk_line_row;

/* The rows into *rows (free with free(); NULL when there is none) and their
 * number into *n: 0, or -1 when out of memory (then nothing is left to free). */
int hk_line_table(const hk_profile *p, size_t vi, hk_line_row **rows, size_t *n);

#endif
