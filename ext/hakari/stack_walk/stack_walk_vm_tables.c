/* stack_walk_vm_tables.c — the control-frame walker's tables for a session
 * (stack_walk_vm.h): allocated at start, emptied and kept at the session's
 * end for the next one (sampler.c keep_tables says why), freed when they
 * outgrew what start reserved; marked for the GC meanwhile.
 */
#include "stack_walk.h"
#include "stack_walk_int.h"

#ifdef HK_VM_LAYOUT

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "stack_walk_vm.h"

/* rb_profile_frames for every sample: 0, or -1 (out of memory) with everything freed */
static int start_generic_or_stop(int limit)
{
    if (hk_rbframes_start(limit) == 0) return 0;
    hk_stack_walk_stop();
    return -1;
}

static size_t tables_size(void)
{
    return hk_pair_map_memsize(&W.ments) + hk_pair_map_memsize(&W.iseqs) + hk_pair_map_memsize(&W.lines) +
           (W.ments_cap + W.iseqs_cap) * sizeof(VALUE);
}

/* The memos, buffers and tables for limit: 0, or -1 (out of memory) */
static int alloc_tables(int limit)
{
    W.memo_cap = (size_t)limit * 2 + 64;
    W.check_cap = limit;
    W.depth_cap = W.memo_cap;
    W.cap_memo = calloc(W.memo_cap + 1, sizeof(*W.cap_memo));
    W.memo = calloc(W.memo_cap, sizeof(*W.memo));
    W.check_frames = malloc((size_t)limit * sizeof(VALUE));
    W.check_lines = malloc((size_t)limit * sizeof(int));
    W.last_frames = malloc((size_t)limit * sizeof(VALUE));
    W.last_lines = malloc((size_t)limit * sizeof(int));
    /* room for a program's worth of methods and lines before the job has to
     * grow a table (a realloc in the program's heap can take 100 µs: sampler.c) */
    if (!W.memo || !W.cap_memo || !W.check_frames || !W.check_lines || !W.last_frames || !W.last_lines ||
        hk_pair_map_reserve(&W.ments, 2048) < 0 ||
        hk_pair_map_reserve(&W.iseqs, 2048) < 0 || hk_pair_map_reserve(&W.lines, 8192) < 0 ||
        hk_array_grow((void **)&W.ment_list, &W.ments_cap, 2048, sizeof(VALUE)) < 0 ||
        hk_array_grow((void **)&W.iseq_list, &W.iseqs_cap, 2048, sizeof(VALUE)) < 0)
        return -1;
    hk_touch_pages(W.cap_memo, (W.memo_cap + 1) * sizeof(*W.cap_memo)); /* the job writes it */
    W.reserved_size = tables_size();
    return 0;
}

int hk_stack_walk_start(int limit, hk_walk_choice how)
{
    int generic = how == HK_WALK_RUBY;
    /* the previous run's tables, emptied at its end, when they fit */
    if (!W.kept || W.check_cap != limit || generic) hk_stack_walk_stop();
    W.kept = 0;
    hk_walk_mismatches = 0;
    if (generic) { /* the walker's tables are not needed */
        hk_walk_kind = "rb_profile_frames (HAKARI_STACK_WALK=ruby)";
        return start_generic_or_stop(limit);
    }
    W.verify = how == HK_WALK_VERIFY;
    W.verify_res = W.verify;
    if (!W.memo && alloc_tables(limit) < 0) {
        hk_stack_walk_stop();
        return -1;
    }
    /* rb_profile_frames for a sample the walker cannot read */
    if (hk_rbframes_start(limit) < 0 || hk_vm_self_check(limit) < 0) {
        hk_stack_walk_stop();
        return -1;
    }
    return 0;
}

void hk_stack_walk_stop(void)
{
    hk_pair_map_free(&W.ments);
    hk_pair_map_free(&W.iseqs);
    hk_pair_map_free(&W.lines);
    free(W.ment_list);
    free(W.iseq_list);
    free(W.memo);
    free(W.cap_memo);
    free(W.check_frames);
    free(W.check_lines);
    free(W.last_frames);
    free(W.last_lines);
    free(W.self_check_cap);
    memset(&W, 0, sizeof(W));
    hk_rbframes_stop();
}

void hk_stack_walk_end(void)
{
    if (!W.memo || tables_size() > W.reserved_size) {
        hk_stack_walk_stop();
        return;
    }
    struct walker old = W;
    memset(&W, 0, sizeof(W));
    W.kept = 1;
    W.reserved_size = old.reserved_size;
    W.memo_cap = old.memo_cap;
    W.depth_cap = old.depth_cap;
    W.check_cap = old.check_cap;
    W.memo = old.memo;
    memset(W.memo, 0, W.memo_cap * sizeof(*W.memo));
    W.cap_memo = old.cap_memo;
    memset(W.cap_memo, 0, (W.memo_cap + 1) * sizeof(*W.cap_memo));
    W.lines = old.lines;
    hk_pair_map_clear(&W.lines);
    W.ments = old.ments;
    hk_pair_map_clear(&W.ments);
    W.iseqs = old.iseqs;
    hk_pair_map_clear(&W.iseqs);
    W.ment_list = old.ment_list; /* nments, niseqs: 0, so nothing stays pinned */
    W.ments_cap = old.ments_cap;
    W.iseq_list = old.iseq_list;
    W.iseqs_cap = old.iseqs_cap;
    W.check_frames = old.check_frames;
    W.check_lines = old.check_lines;
    W.last_frames = old.last_frames;
    W.last_lines = old.last_lines;
    W.self_check_cap = old.self_check_cap;
}

void hk_stack_walk_mark(void)
{
    for (size_t i = 0; i < W.nments; i++) rb_gc_mark(W.ment_list[i]);
    for (size_t i = 0; i < W.niseqs; i++) rb_gc_mark(W.iseq_list[i]);
}

size_t hk_stack_walk_memsize(void)
{
    return tables_size() + W.memo_cap * (sizeof(memo) + sizeof(cap_entry)) +
           (size_t)W.check_cap * 2 * (sizeof(VALUE) + sizeof(int)) +
           (W.self_check_cap ? vm_capture_words(1) * sizeof(uint64_t) : 0) + hk_rbframes_memsize();
}

#endif
