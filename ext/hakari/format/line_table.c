/* line_table.c — see line_table.h.
 * Locations map to rows through a (file, line) map, once per location; a
 * per-row stamp of the last sample that counted it keeps cum from counting a
 * line twice in one stack (recursion through one line). */
#include "line_table.h"

#include <stdlib.h>

#include "buf.h"
#include "pair_map.h"

int hk_line_table(const hk_profile *p, size_t vi, hk_line_row **out, size_t *n)
{
    hk_pair_map index;
    hk_pair_map_init(&index);
    hk_line_row *rows = NULL;
    size_t cap = 0, count = 0;
    uint32_t *row_of = malloc((p->nlocations + 1) * sizeof(*row_of)); /* by location id - 1 */
    size_t *stamp = NULL;
    hk_locbuf stack = {0};
    *out = NULL;
    *n = 0;
    if (!row_of) return -1;
    for (size_t l = 0; l < p->nlocations; l++) {
        const hk_location *loc = &p->locations[l];
        uint32_t file = hk_profile_func(p, loc->function_id)->filename, row;
        /* the file's string index + 1 keeps the key non-zero; lines are cut to 32 bits */
        if (!hk_pair_map_get(&index, (uint64_t)file + 1, (uint32_t)loc->line, &row)) {
            if (hk_array_grow((void **)&rows, &cap, count + 1, sizeof(*rows)) < 0 ||
                hk_pair_map_put(&index, (uint64_t)file + 1, (uint32_t)loc->line, (uint32_t)count) < 0)
                goto fail;
            rows[count] = (hk_line_row){file, loc->line, 0, 0};
            row = (uint32_t)count++;
        }
        row_of[l] = row;
    }
    if (!(stamp = calloc(count + 1, sizeof(*stamp)))) goto fail;
    for (size_t i = 0; i < p->nsamples && vi < p->nvalues; i++) {
        int64_t v = hk_profile_sample_values(p, i)[vi];
        const uint32_t *locs = hk_profile_sample_locs(p, i, &stack);
        if (!locs) goto fail;
        for (uint32_t j = 0; j < p->samples[i].nloc; j++) {
            hk_line_row *r = &rows[row_of[locs[j] - 1]];
            if (j == 0) r->self = hk_add_sat(r->self, v);
            if (stamp[r - rows] == i + 1) continue;
            stamp[r - rows] = i + 1;
            r->cum = hk_add_sat(r->cum, v);
        }
    }
    free(stamp);
    free(row_of);
    hk_locbuf_free(&stack);
    hk_pair_map_free(&index);
    *out = rows;
    *n = count;
    return 0;
fail:
    free(rows);
    free(row_of);
    free(stamp);
    hk_locbuf_free(&stack);
    hk_pair_map_free(&index);
    return -1;
}
