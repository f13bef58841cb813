/* sampler_tables.c — the sampler's buffers, tables, walker and ring: made at
 * start, emptied and kept at stop for the next start, freed when they outgrew
 * what start reserved. All of it runs with the GVL, the worker not resolving
 * (sampler_int.h).
 */
#include "sampler_int.h"

#include <stdlib.h>
#include <string.h>

#include "stack_walk.h"

void hk_sampler_tables_free(void)
{
    hk_stack_walk_stop();
    hk_pair_map_free(&S.frame_locs);
    hk_u64_map_free(&S.thread_ids);
    hk_intern_free(&S.stacks);
    free(S.locs);
    free(S.agg_rows);
    free(S.raw);
    free(S.threads);
    free(S.retired);
    free(S.frame_buf);
    free(S.line_buf);
    free(S.key_buf);
    free(S.tick_stacks);
    free(S.state_stacks);
    free(S.classes);
    hk_ring_free(&S.ring);
    memset(&S, 0, sizeof(S));
}

/* At stop, the session's tables stay for the next session, emptied. Freeing
 * them gave the program's heap about 1.8 MB back at every stop and took it
 * again at every start, a churn glibc may answer by trimming the heap's top:
 * the program's own next allocations then land on fresh pages, each a page
 * fault. Kept, the next start takes about 1 KB
 * from the heap (test/session_reuse_test.rb), which matters to a program that
 * profiles many short sessions (a request, a job). What stays is bounded by
 * what start reserves: a session whose tables outgrew that gives everything back. */
void hk_sampler_tables_keep(void)
{
    if (hk_sampler_tables_size() > S.reserved_size) {
        hk_sampler_tables_free();
        return;
    }
    hk_stack_walk_end();
    hk_sampler old = S;
    memset(&S, 0, sizeof(S));
    S.kept = 1;
    S.buf_depth = old.buf_depth;
    S.reserved_size = old.reserved_size;
    S.capture_room = old.capture_room;
    S.ring = old.ring;
    hk_ring_clear(&S.ring);
    S.frame_buf = old.frame_buf;
    S.line_buf = old.line_buf;
    S.key_buf = old.key_buf;
    S.threads = old.threads;
    S.threads_cap = old.threads_cap;
    S.retired = old.retired; /* the worker is gone: none is flagged any more */
    S.retired_cap = old.retired_cap;
    S.thread_ids = old.thread_ids;
    hk_u64_map_clear(&S.thread_ids);
    S.frame_locs = old.frame_locs;
    hk_pair_map_clear(&S.frame_locs);
    S.locs = old.locs;
    S.locs_cap = old.locs_cap;
    /* rows are zero as allocated (grow_agg_rows): only the used ones are written */
    S.agg_rows = old.agg_rows;
    S.agg_cap = old.agg_cap;
    size_t used = hk_intern_count(&old.stacks) < old.agg_cap ? hk_intern_count(&old.stacks) : old.agg_cap;
    if (used) memset(S.agg_rows, 0, used * sizeof(*S.agg_rows));
    S.stacks = old.stacks;
    hk_intern_clear(&S.stacks);
    S.raw = old.raw;
    S.raw_cap = old.raw_cap;
    S.tick_stacks = old.tick_stacks;
    S.tick_stacks_cap = old.tick_stacks_cap;
    if (S.tick_stacks) memset(S.tick_stacks, 0, S.tick_stacks_cap * sizeof(*S.tick_stacks));
    S.state_stacks = old.state_stacks;
    S.state_stacks_cap = old.state_stacks_cap;
    if (S.state_stacks) memset(S.state_stacks, 0, S.state_stacks_cap * sizeof(*S.state_stacks));
    S.classes = old.classes; /* none in use: nclasses is 0 */
    S.classes_cap = old.classes_cap;
}

#define RING_WORDS 16384

/* The session's buffers, tables, walker and ring for cfg's max_depth, or the
 * previous session's when kept for the same depth: 0, or -1 when out of
 * memory (the caller frees what was allocated). */
int hk_sampler_tables_alloc(const hk_sampler_config *cfg)
{
    S.key_stack = -1;
    if (hk_stack_walk_start(cfg->max_depth + 1, cfg->walk) < 0) return -1;
    if (!S.frame_buf) {
        size_t depth = (size_t)cfg->max_depth + 1 + HK_OWN_FRAMES;
        S.buf_depth = cfg->max_depth;
        S.frame_buf = malloc(depth * sizeof(VALUE));
        S.line_buf = malloc(depth * sizeof(int));
        S.key_buf = malloc((KEY_HEAD + depth) * sizeof(uint32_t));
        if (!S.frame_buf || !S.line_buf || !S.key_buf) return -1;
    }
    if (hk_sampler_reserve_tables() < 0) return -1;
    S.reserved_size = hk_sampler_tables_size();
    if (S.ring.words) return 0;
    /* Room for two of the deepest stacks, and for a few hundred ordinary ones
     * (about 40 words each) while the worker is kept off its core. Its pages
     * are all written here (hk_ring_init): the job must not fault on them. */
    S.capture_room = hk_stack_walk_capture_room();
    return hk_ring_init(&S.ring, 2 * (HEAD_WORDS + S.capture_room + 1) + RING_WORDS);
}
