/* stack_walk_vm.c — the control-frame walker (see stack_walk_vm.h for how it
 * works): the job's capture, the worker's resolve, verify mode and the
 * start's self-check. Its tables' lifecycle is stack_walk_vm_tables.c.
 */
#include "stack_walk.h"
#include "stack_walk_int.h"

#ifdef HK_VM_LAYOUT

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "hot.h"
#include "stack_walk_vm.h"

struct walker hk_vm_walker;

static int pin(hk_pair_map *m, VALUE **list, size_t *n, size_t *cap, VALUE v, uint32_t val)
{
    if (hk_array_grow((void **)list, cap, *n + 1, sizeof(VALUE)) < 0 || hk_pair_map_put(m, (uint64_t)v, 0, val) < 0)
        return -1;
    (*list)[(*n)++] = v;
    return 0;
}

/* check_method_entry, in the job: the method entry v is or (an svar) holds,
 * or 0. Reads the header of v, which the program's call of that method has
 * brought into the cache, and no table. */
HK_HOT static VALUE captured_method_entry(VALUE v, int can_be_svar)
{
    if (v == Qfalse || SPECIAL_CONST_P(v)) return 0;
    switch (IMEMO_TYPE(v)) {
    case IMEMO_MENT:
        return v;
    case IMEMO_SVAR: /* struct vm_svar: flags, cref_or_me, ... */
        return can_be_svar ? captured_method_entry(((const VALUE *)v)[1], 0) : 0;
    default:
        return 0;
    }
}

/* rb_vm_frame_method_entry, in the job */
HK_HOT static VALUE captured_frame_method_entry(const VALUE *ep)
{
    while (!(ep[EP_FLAGS] & ENV_FLAG_LOCAL)) {
        VALUE me = captured_method_entry(ep[EP_ME_CREF], 0);
        if (me) return me;
        ep = (const VALUE *)(ep[EP_SPECVAL] & ~(VALUE)3);
    }
    return captured_method_entry(ep[EP_ME_CREF], 1);
}

/* The method type of the entry me (an imemo ment, kept alive by its capture
 * until now, pinned from here on), whose definition the job read as def.
 * hint: the entry found at this depth in the previous result, and its type.
 * -1: out of memory. */
HK_HOT static int method_type(VALUE me, const unsigned int *def, const memo *hint, uint8_t *type)
{
    uint32_t t;
    if (hint && me == hint->me) {
        *type = hint->me_type;
        return 0;
    }
    if (hk_pair_map_get(&W.ments, (uint64_t)me, 0, &t)) {
        *type = (uint8_t)(t - 1);
        return 0;
    }
    t = *def & 0x0f; /* the definition's 4-bit type comes first */
    if (pin(&W.ments, &W.ment_list, &W.nments, &W.ments_cap, me, t + 1) < 0) return -1;
    *type = (uint8_t)t;
    return 0;
}


/* calc_lineno: the line of pc, from the cache or the line table of the iseq
 * whose body the job read */
HK_HOT static int pc_line(const void *iseq, const void *body, const VALUE *pc, int *line)
{
    uint32_t v;
    if (hk_pair_map_get(&W.lines, (uint64_t)pc, 0, &v)) {
        *line = (int)v - 1;
        return 0;
    }
    if (!hk_pair_map_get(&W.iseqs, (uint64_t)iseq, 0, &v) &&
        pin(&W.iseqs, &W.iseq_list, &W.niseqs, &W.iseqs_cap, (VALUE)iseq, 1) < 0)
        return -1;
    /* the body: type, iseq_size, iseq_encoded */
    const VALUE *encoded = *(const VALUE *const *)((const char *)body + 2 * sizeof(unsigned int));
    size_t pos = (size_t)(pc - encoded);
    if (pos) pos--; /* pc is past the instruction that runs */
    /* rb_iseq_line_no reads nothing of the iseq but its body (get_insn_info):
     * it is handed a copy of the iseq's head, not the heap object */
    const vm_iseq head = {0, 0, body};
    *line = (int)rb_iseq_line_no(&head, pos);
    return hk_pair_map_put(&W.lines, (uint64_t)pc, 0, (uint32_t)*line + 1);
}

/* The control frames are cold by the time the next sample comes: loads for
 * the frames and their environments are started PREFETCH_AHEAD frames before
 * they are read, so the misses overlap instead of queueing one behind the
 * other (a deeper window only fills the miss buffers). */
#define PREFETCH_AHEAD 12

/* Frames the capture has read carry its number in their jit_return slot,
 * which Ruby 3.1 reads only in YJIT's code and clears at every push
 * (vm_push_frame); later Rubies read it (VM_MARKS_ALLOWED). A frame still carrying a number from this run of captures
 * of the same stack has not returned since: its callers have not run since
 * the previous capture, so their results are the memo's. */
HK_HOT static int trusted_mark(const vm_frame *cfp, size_t depth, uint64_t seq)
{
    uint64_t mark = (uint64_t)(uintptr_t)cfp->jit_return;
    return W.marks && mark >= W.run_start && mark < seq && depth <= W.memo_cap;
}

static size_t vm_capture_room(void) { return vm_capture_words(W.verify); }

/* verify mode: rb_profile_frames' result after the captured frames */
static void capture_check(hk_cap_head *h)
{
    h->ncheck = hk_cap_put_profile_frames((uint64_t *)h + h->words, W.check_cap);
    h->words += (uint32_t)HK_CAP_RESOLVED_WORDS(h->ncheck);
}

/* The capture (stack_walk.h) of ec's control frames from the leaf down to the
 * first one whose mark vouches for its callers, or to the root; 0 when room
 * is short, -1 when this sample needs rb_profile_frames (no context, a frame
 * being set up: the caller falls back). flags: HK_CAP_OTHER for a thread
 * that is not the caller's. */
HK_HOT static long vm_capture_ec(uint64_t *out, size_t room, const vm_ec *ec, uint16_t flags)
{
    if (room < vm_capture_room()) return 0;
    if (!ec) return -1;
    /* Sequentially consistent with forget_memo: either this number is one the
     * resolver counts as taken before the memo was lost (and it drops such a
     * capture if it trusts a mark), or this capture sees the forget and
     * trusts no mark written before it. */
    uint64_t seq = __atomic_add_fetch(&hk_walks, 1, __ATOMIC_SEQ_CST);
    uint64_t forgets = __atomic_load_n(&W.forgets, __ATOMIC_SEQ_CST);
    if (forgets != W.forgets_seen) {
        W.forgets_seen = forgets;
        W.run_start = seq;
    }
    if (ec != W.run_ec) { /* another thread's or fiber's stack: marks start over */
        W.run_ec = ec;
        W.run_start = seq;
    }
    const vm_frame *end = vm_stack_end(ec);
    raw_frame *raw = (raw_frame *)(out + HK_CAP_HEAD_WORDS);
    uint32_t n = 0;
    int named = 0; /* a frame that can give one: a Ruby frame, or a C frame with a method entry */
    const vm_frame *cfp = ec->cfp;
    /* a leaf that vouches for its callers is all this capture reads: no window to load */
    if (!trusted_mark(cfp, (size_t)(end - cfp) - 1, seq))
        for (const vm_frame *f = cfp; f < end && f < cfp + PREFETCH_AHEAD; f++) __builtin_prefetch(f);
    for (; cfp < end; cfp++) {
        if (n == W.memo_cap) {
            /* deeper than the memo: the frames below are not read, and no
             * mark written by this capture may vouch for them */
            flags |= HK_CAP_CUT;
            W.run_start = seq + 1;
            break;
        }
        size_t depth = (size_t)(end - cfp) - 1; /* from the root */
        if (trusted_mark(cfp, depth, seq)) {
            /* the frame this capture's run saw here before: a Ruby frame has a body */
            const cap_entry *c = &W.cap_memo[depth];
            named = 1;
            raw[n++] = (raw_frame){(c->body ? (uintptr_t)cfp->pc : RAW_CFRAME) | RAW_TRUSTED,
                                   c->body ? cfp->iseq : NULL, c->me, c->body, c->def};
            break;
        }
        if (cfp + PREFETCH_AHEAD < end) __builtin_prefetch(cfp + PREFETCH_AHEAD);
        /* the environment a few frames ahead (its control frame has arrived by now) */
        if (cfp + 4 < end) __builtin_prefetch(cfp[4].ep - 2);
        const VALUE *ep = cfp->ep;
        uintptr_t cframe = (ep[EP_FLAGS] & FRAME_FLAG_CFRAME) != 0;
        /* a Ruby frame without a pc yet (being set up, or the top frame of a C
         * extension's Init): 3.1 takes its line from the iseq's type and first
         * line, which rb_profile_frames is left to do; later Rubies skip it */
        if (!cframe && (!cfp->pc || !cfp->iseq)) {
            if (!VM_SKIPS_FRAME_WITHOUT_PC) {
                W.run_start = seq + 1; /* the marks this capture wrote vouch for nothing */
                return -1;
            }
            if (depth <= W.memo_cap) W.cap_memo[depth] = (cap_entry){0, NULL, NULL};
            raw[n++] = (raw_frame){RAW_CFRAME, NULL, 0, NULL, NULL}; /* gives no frame */
            continue;
        }
        VALUE me = captured_frame_method_entry(ep);
        /* rb_callable_method_entry_t: flags, defined_class, def (the line the type check read) */
        const unsigned int *def = me ? *(const unsigned int *const *)((const char *)me + 2 * sizeof(VALUE)) : NULL;
        const void *body = cframe ? NULL : ((const vm_iseq *)cfp->iseq)->body;
        /* by depth from the root: a stack deeper than the memo keeps no entry
         * for its frames past it (the capture is cut at memo_cap frames from
         * the leaf, not from the root), and trusted_mark trusts none there */
        if (depth <= W.memo_cap) W.cap_memo[depth] = (cap_entry){me, body, def};
        named |= !cframe || me;
        raw[n++] = (raw_frame){cframe ? RAW_CFRAME : (uintptr_t)cfp->pc, cframe ? NULL : cfp->iseq, me, body, def};
        if (W.marks) ((vm_frame *)cfp)->jit_return = (void *)(uintptr_t)seq;
    }
    /* another thread with no frame to give (starting, or ending: its block has returned) has
     * nothing to sample; the caller's own stack is left to rb_profile_frames' judgement */
    if (!named && (flags & HK_CAP_OTHER)) {
        W.run_start = seq + 1;
        return -1;
    }
    hk_cap_head *h = (hk_cap_head *)out;
    *h = (hk_cap_head){.words = (uint32_t)(HK_CAP_HEAD_WORDS + RAW_WORDS * n), .kind = HK_CAP_FRAMES,
                       .flags = flags, .n = n, .number = seq, .ec = ec, .leaf = (uintptr_t)ec->cfp,
                       .end = (uintptr_t)end};
    if (W.verify && !(flags & HK_CAP_OTHER)) capture_check(h);
    W.walked_ec = ec;
    return (long)h->words;
}

HK_HOT static long vm_capture(uint64_t *out, size_t room) { return vm_capture_ec(out, room, vm_current_ec(), 0); }

/* One captured control frame's result (frame 0: skipped), through its memo
 * entry m (NULL past the memo's end); *kept: the result is the memo's (frame
 * and line). -1: out of memory. */
HK_HOT static int walk_frame(const raw_frame *rf, memo *m, VALUE *frame_out, int *line_out, int *kept)
{
    *kept = 0;
    uint8_t cframe = (rf->pc_bits & RAW_CFRAME) != 0;
    const VALUE *pc = RAW_PC(rf);
    VALUE me = rf->me;
    uint8_t type = NO_ME_TYPE;
    if (me && method_type(me, rf->def, m && m->me ? m : NULL, &type) < 0) return -1;
    if (m && m->me == me && m->cframe == cframe && (cframe || m->pc == pc)) {
        *frame_out = m->frame;
        *line_out = m->line;
        *kept = 1;
        return 0;
    }
    VALUE frame = 0;
    int line = 0;
    if (!cframe) {
        frame = me && type == METHOD_TYPE_ISEQ ? me : (VALUE)rf->iseq;
        if (pc_line(rf->iseq, rf->body, pc, &line) < 0) return -1;
    } else if (me && type == METHOD_TYPE_CFUNC) {
        frame = me;
    }
    if (m) {
        *kept = m->frame == frame && m->line == line;
        *m = (memo){cframe ? NULL : pc, me, frame, line, cframe, type, OUT_UNKNOWN};
    }
    *frame_out = frame;
    *line_out = line;
    return 0;
}

/* memo[from..to]: how many frames the walk gives from the root up to each
 * depth; below: how many it gives under `from` */
HK_HOT static void count_frames(size_t from, size_t to, unsigned below)
{
    for (size_t d = from; d <= to && d < W.depth_cap; d++) {
        if (below != OUT_UNKNOWN && W.memo[d].frame) below++; /* reaching OUT_UNKNOWN: too deep to count */
        W.memo[d].out = (uint16_t)below;
    }
}

/* How many frames the walk gives from the root below depth `changed`: all
 * equal to the previous walk's (vm_resolve) */
static unsigned kept_from_root(size_t changed, size_t prev_leaf)
{
    if (!changed || prev_leaf == NO_DEPTH) return 0;
    unsigned out = W.memo[changed - 1].out;
    return out == OUT_UNKNOWN ? 0 : out;
}

/* A result (n frames, its leaf at leaf_pc) that is whole, not cut at limit:
 * the memo holds it up to the leaf for the next capture to compare with, and
 * kept of it is unchanged. */
static void walk_whole(const VALUE *leaf_pc, size_t leaf_depth, const VALUE *frames, const int *lines, int n,
                       unsigned kept, int *same)
{
    if (leaf_depth < W.depth_cap) W.last_leaf = leaf_depth;
    *same = (int)kept;
    W.leaf_pc = leaf_pc;
    W.result_n = n;
    if (n > 0) {
        W.first_frame = frames[0];
        W.first_line = lines[0];
    }
}

/* The frames of a capture of control frames. -1: out of memory. known and
 * *same: hk_stack_walk_resolve; unless copy_all, the frames it counts in
 * *same may be left unwritten. Every captured frame is resolved, also past
 * limit, so the memo holds the whole capture for the marks that vouch for it. */
HK_HOT static int vm_resolve(const hk_cap_head *h, VALUE *frames, int *lines, int limit, uint64_t known, int copy_all,
                             int *same)
{
    *same = 0;
    const raw_frame *raw = (const raw_frame *)((const uint64_t *)h + HK_CAP_HEAD_WORDS);
    uint64_t seq = h->number;
    /* the memo holds the previous result, by depth, up to its leaf */
    size_t prev_leaf = known && known == seq - 1 && h->ec == W.res_ec ? W.last_leaf : NO_DEPTH;
    W.last_leaf = NO_DEPTH; /* until this result is whole in the memo */
    W.res_ec = h->ec;
    size_t leaf_depth = (h->end - h->leaf) / sizeof(vm_frame) - 1;
    const VALUE *leaf_pc = h->n ? RAW_PC(&raw[0]) : NULL;
    /* the lowest depth whose result is not the previous walk's */
    size_t changed = prev_leaf == NO_DEPTH ? 0 : (leaf_depth < prev_leaf ? leaf_depth : prev_leaf) + 1;
    /* The previous result's leaf control frame (the same depth of the same
     * stack), not pushed again since (its mark) and at the same pc: the thread
     * is where it was, its callers have not run, the result is the previous
     * one, which the caller holds. This reads none of the memo. */
    if (!copy_all && prev_leaf == leaf_depth && h->n == 1 && (raw[0].pc_bits & RAW_TRUSTED) &&
        leaf_pc == W.leaf_pc && W.result_n > 0 && W.result_n < limit) {
        frames[0] = W.first_frame;
        lines[0] = W.first_line;
        W.last_leaf = leaf_depth;
        *same = W.result_n;
        return W.result_n;
    }
    int n = 0;
    size_t total = 0; /* frames given, also past limit */
    for (uint32_t i = 0; i < h->n; i++) {
        size_t depth = leaf_depth - i; /* from the root */
        if (depth >= PREFETCH_AHEAD && depth - PREFETCH_AHEAD < W.depth_cap)
            __builtin_prefetch(&W.memo[depth - PREFETCH_AHEAD]);
        VALUE frame;
        int line, kept;
        if (walk_frame(&raw[i], depth < W.depth_cap ? &W.memo[depth] : NULL, &frame, &line, &kept) < 0) return -1;
        if (!kept || depth > prev_leaf) changed = depth;
        if (frame) {
            if (n < limit) {
                frames[n] = frame;
                lines[n++] = line;
            }
            total++;
        }
        if (raw[i].pc_bits & RAW_TRUSTED) {
            /* this frame may have run since (its pc was read), its callers have
             * not: their results are the memo's, and the previous walk's */
            unsigned below = depth ? W.memo[depth - 1].out : 0;
            count_frames(depth, leaf_depth, below);
            unsigned kept_root = kept_from_root(changed, prev_leaf);
            int whole = below != OUT_UNKNOWN && total + below < (size_t)limit;
            if (!copy_all && n > 0 && kept_root >= below && whole) {
                walk_whole(leaf_pc, leaf_depth, frames, lines, n + (int)below, kept_root, same);
                return n + (int)below;
            }
            for (size_t d = depth; d-- > 0 && n < limit;) {
                if (d >= PREFETCH_AHEAD) __builtin_prefetch(&W.memo[d - PREFETCH_AHEAD]);
                if (W.memo[d].frame) {
                    frames[n] = W.memo[d].frame;
                    lines[n++] = W.memo[d].line;
                }
            }
            if (whole) walk_whole(leaf_pc, leaf_depth, frames, lines, n, kept_root, same);
            return n;
        }
    }
    if (h->flags & HK_CAP_CUT) return n; /* the memo below was not read: nothing whole, nothing counted */
    count_frames(0, leaf_depth, 0);
    if (total < (size_t)limit) walk_whole(leaf_pc, leaf_depth, frames, lines, n, kept_from_root(changed, prev_leaf), same);
    return n;
}

static ID id_continuation; /* interned at start: the job must not allocate */

/* Marks go in a slot only YJIT reads, so not under YJIT; and a continuation
 * (callcc) puts back frames, marks included, from the past. */
static int frames_may_be_marked(void)
{
    id_continuation = rb_intern("Continuation");
    if (rb_const_defined(rb_cObject, id_continuation)) return 0;
    if (!rb_const_defined(rb_cObject, rb_intern("RubyVM"))) return 1;
    VALUE vm = rb_const_get(rb_cObject, rb_intern("RubyVM"));
    if (!rb_const_defined_at(vm, rb_intern("YJIT"))) return 1;
    VALUE yjit = rb_const_get_at(vm, rb_intern("YJIT"));
    return rb_respond_to(yjit, rb_intern("enabled?")) && !RTEST(rb_funcall(yjit, rb_intern("enabled?"), 0));
}

static int same_walk(const VALUE *f1, const int *l1, int n1, const VALUE *f2, const int *l2, int n2)
{
    if (n1 != n2) return 0;
    for (int i = 0; i < n1; i++)
        if (f1[i] != f2[i] || l1[i] != l2[i]) return 0;
    return 1;
}

int hk_vm_self_check(int limit)
{
    /* Its buffers stay with the tables (stack_walk_vm_tables.c): in a heap the
     * program has fragmented, one malloc of this size made glibc consolidate
     * its free lists and took 0.2-1 ms, at every start (measured on kramdown). */
    if (!W.self_check_cap && !(W.self_check_cap = malloc(vm_capture_words(1) * sizeof(uint64_t)))) return -1;
    uint64_t *cap = W.self_check_cap;
    VALUE *f = W.last_frames; /* verify mode's previous result: none before the first sample */
    int *l = W.last_lines;
    W.marks = VM_MARKS_ALLOWED && frames_may_be_marked();
    W.run_ec = NULL;
    W.run_start = hk_walks + 1;
    W.last_leaf = NO_DEPTH;
    int same, n1 = -1;
    if (vm_capture(cap, vm_capture_room()) > 0) n1 = vm_resolve((const hk_cap_head *)cap, f, l, limit, 0, 1, &same);
    int n2 = rb_profile_frames(0, limit, W.check_frames, W.check_lines);
    W.enabled = n1 > 0 && same_walk(f, l, n1, W.check_frames, W.check_lines, n2);
    VALUE th = rb_thread_current();
    const vm_ec *ec = vm_current_ec();
    W.thread_ptr_ok = W.enabled && RB_TYPE_P(th, T_DATA) && RTYPEDDATA_P(th) && ec &&
                      ec->thread_ptr == RTYPEDDATA_DATA(th);
    const vm_thread_head *t = W.thread_ptr_ok ? ec->thread_ptr : NULL;
    W.threads_ok = t && t->self == th && t->ec == ec;
    W.main_ractor = W.threads_ok ? t->ractor : NULL;
    hk_walk_kind = !W.enabled          ? "rb_profile_frames (the control-frame walker failed its self-check)"
           : W.thread_ptr_ok ? "vm control frames"
                             : "vm control frames (its thread check failed: threads found by Thread.current)";
    return 0;
}

/* the memo may be wrong: no frame's mark may vouch for it, and the captures
 * taken so far that trust one cannot be resolved */
static void forget_memo(void)
{
    for (size_t d = 0; d < W.depth_cap; d++) W.memo[d] = (memo){.out = OUT_UNKNOWN};
    W.last_leaf = NO_DEPTH;
    __atomic_add_fetch(&W.forgets, 1, __ATOMIC_SEQ_CST);
    W.broken_upto = __atomic_load_n(&hk_walks, __ATOMIC_SEQ_CST);
}

/* `require "continuation"` after start: from then on callcc can put back
 * marked frames. Looked for every 64 walks (a constant lookup, ~50 ns); a
 * continuation taken and resumed within those samples of the load is the
 * window this leaves. */
static void watch_for_continuations(void)
{
    if (rb_const_defined(rb_cObject, id_continuation)) {
        /* no mark is trusted from now on; the memo, compared by pc and
         * method entry, stays right */
        W.marks = 0;
    }
}

/* verify mode: the result the next one's unchanged frames are checked against;
 * whole: it reaches the root (a cut result's root side is unknown, so nothing
 * may be claimed unchanged after it) */
static void remember_result(const VALUE *frames, const int *lines, int n, int whole)
{
    memcpy(W.last_frames, frames, (size_t)n * sizeof(VALUE));
    memcpy(W.last_lines, lines, (size_t)n * sizeof(int));
    W.last_n = whole ? n : 0;
}

/* verify mode: the result (n frames, *same of them reported unchanged and
 * left unwritten) against what rb_profile_frames gave at the capture, and
 * those against the previous result. Returns the frame count to use; on a
 * difference, rb_profile_frames' result, all written, with *same 0. */
static int verify_walk(const hk_cap_head *h, VALUE *frames, int *lines, int n, int limit, int *same)
{
    size_t at = HK_CAP_HEAD_WORDS + RAW_WORDS * h->n;
    int m = (int)h->ncheck < limit ? (int)h->ncheck : limit;
    memcpy(W.check_frames, hk_cap_frames(h, at), (size_t)m * sizeof(VALUE));
    memcpy(W.check_lines, hk_cap_lines(h, at, h->ncheck), (size_t)m * sizeof(int));
    int written = n - *same > 0 ? n - *same : n > 0; /* frame 0 is always written */
    /* 3.3+'s rb_profile_frames gives line 0 for a top frame called from JIT code (its pc might be
     * stale); the job runs at an interrupt check, where the pc is the frame's own: not a difference */
    int top_line_0 = VM_TOP_JIT_FRAME_LINE_0 && n > 0 && m > 0 && W.check_lines[0] == 0 && lines[0] != 0 &&
                     frames[0] == W.check_frames[0];
    if (top_line_0) W.check_lines[0] = lines[0];
    int walks_agree = n == m && same_walk(frames, lines, written, W.check_frames, W.check_lines, written);
    int same_holds = hk_same_from_root(W.check_frames, W.check_lines, m, W.last_frames, W.last_lines, W.last_n) >= *same;
    W.checked_n = m;
    if (!walks_agree || !same_holds) {
        hk_stack_walk_report_mismatch(walks_agree ? "frames reported unchanged were not" : "the walks differ", n, m,
                                      *same);
        forget_memo(); /* one wrong result must not vouch for the next samples */
        memcpy(frames, W.check_frames, (size_t)m * sizeof(VALUE));
        memcpy(lines, W.check_lines, (size_t)m * sizeof(int));
        n = m;
        *same = 0;
    }
    remember_result(W.check_frames, W.check_lines, m, m < limit);
    return n;
}

HK_HOT void hk_stack_walk_prefetch(void)
{
    __builtin_prefetch(&W, 1);
    __builtin_prefetch(&hk_walks, 1);
}

size_t hk_stack_walk_capture_room(void)
{
    size_t generic = hk_rbframes_room();
    if (!W.enabled) return generic;
    size_t vm = vm_capture_room();
    return vm > generic ? vm : generic;
}

HK_HOT long hk_stack_walk_capture(uint64_t *out, size_t room)
{
    W.walked_ec = NULL;
    if (!W.enabled) return hk_rbframes_capture(out, room);
    if (W.marks && !(hk_walks & 63)) watch_for_continuations();
    long words = vm_capture(out, room);
    return words > 0 ? words : hk_rbframes_capture(out, room);
}

HK_HOT int hk_stack_walk_resolve(const uint64_t *cap, VALUE *frames, int *lines, int limit, uint64_t known, int *same,
                                 int *cut)
{
    const hk_cap_head *h = (const hk_cap_head *)cap;
    *cut = (h->flags & HK_CAP_CUT) != 0;
    *same = 0;
    W.checked_n = -1;
    if (h->kind == HK_CAP_RESOLVED) {
        W.last_leaf = NO_DEPTH; /* the memo does not hold this result */
        W.last_n = 0;
        return hk_rbframes_resolve(h, frames, lines, limit, known, same);
    }
    const raw_frame *raw = (const raw_frame *)(cap + HK_CAP_HEAD_WORDS);
    /* taken before the memo was lost, trusting it: the frames below are unknown */
    if (h->number <= W.broken_upto && h->n && (raw[h->n - 1].pc_bits & RAW_TRUSTED)) {
        W.last_leaf = NO_DEPTH;
        return -1;
    }
    /* verify mode: another thread's stack, which rb_profile_frames cannot
     * read, is not checked; but the next result may count frames unchanged
     * from it (the same thread's own sample, when it runs again), and those
     * are checked against it: all its frames are written and kept */
    int verify = W.verify_res && limit <= W.check_cap, other = (h->flags & HK_CAP_OTHER) != 0;
    int n = vm_resolve(h, frames, lines, limit, known, verify && other, same);
    if (n < 0) {
        forget_memo(); /* may be half-updated */
        W.last_n = 0;
        return -1;
    }
    if (!verify) return n;
    if (!other) return verify_walk(h, frames, lines, n, limit, same);
    remember_result(frames, lines, n, n < limit && !*cut);
    return n;
}

void hk_stack_walk_mark_capture(const uint64_t *cap)
{
    const hk_cap_head *h = (const hk_cap_head *)cap;
    size_t at = HK_CAP_HEAD_WORDS;
    if (h->kind == HK_CAP_RESOLVED) {
        hk_rbframes_mark_capture(h);
        return;
    }
    const raw_frame *raw = (const raw_frame *)(cap + at);
    for (uint32_t i = 0; i < h->n; i++) {
        if (raw[i].iseq) rb_gc_mark((VALUE)raw[i].iseq);
        if (raw[i].me) rb_gc_mark(raw[i].me);
    }
    hk_cap_mark_frames(h, at + RAW_WORDS * h->n, h->ncheck);
}

int hk_stack_walk_checked(const VALUE **frames, const int **lines)
{
    *frames = W.check_frames;
    *lines = W.check_lines;
    return W.checked_n;
}

HK_HOT const void *hk_stack_walk_leaf_slot(void)
{
    return W.walked_ec ? (const void *)&W.walked_ec->cfp : NULL;
}

HK_HOT const void *hk_stack_walk_thread(void) { return W.walked_ec && W.thread_ptr_ok ? W.walked_ec->thread_ptr : NULL; }

const void *hk_stack_walk_thread_of(VALUE th)
{
    if (!W.enabled || !W.threads_ok || !RB_TYPE_P(th, T_DATA) || !RTYPEDDATA_P(th)) return NULL;
    const vm_thread_head *t = RTYPEDDATA_DATA(th);
    return t && t->self == th ? t : NULL;
}

/* The context of a thread that has a stack: set up (under the GVL) before
 * it runs, cleared (under the GVL) when it ends, however it ends. */
static const vm_ec *thread_stack(const void *vm_thread)
{
    const vm_ec *ec = ((const vm_thread_head *)vm_thread)->ec;
    if (!ec || !ec->vm_stack || !ec->vm_stack_size) return NULL;
    const vm_frame *end = vm_stack_end(ec);
    return (const VALUE *)ec->cfp >= ec->vm_stack && ec->cfp < end ? ec : NULL;
}

int hk_stack_walk_spot(const void *vm_thread, hk_stack_spot *out)
{
    const vm_ec *ec = thread_stack(vm_thread);
    if (!ec) return -1;
    const vm_frame *cfp = ec->cfp;
    *out = (hk_stack_spot){(uintptr_t)cfp, (uintptr_t)cfp->pc, W.marks ? (uint64_t)(uintptr_t)cfp->jit_return : 0};
    return 0;
}

/* The context the thread runs now (a fiber's, or its root fiber's, which
 * lives as long as the Thread object). A fiber's context may be freed once
 * its thread has moved to another and the GC swept it: the window between
 * this read and the write is a few instructions, the one Ruby's own timer
 * accepts when it flags the ractor's running context (cont.c ec_switch). */
int hk_stack_walk_main_ractor(const void *vm_thread)
{
    return ((const vm_thread_head *)vm_thread)->ractor == W.main_ractor;
}

const void *hk_stack_walk_ractor_of(const void *vm_thread)
{
    return W.main_ractor ? ((const vm_thread_head *)vm_thread)->ractor : NULL;
}

void hk_stack_walk_flag_jobs(const void *vm_thread)
{
    vm_ec *ec = __atomic_load_n((vm_ec *const *)&((const vm_thread_head *)vm_thread)->ec, __ATOMIC_RELAXED);
    if (ec) __atomic_fetch_or(&ec->interrupt_flag, VM_POSTPONED_JOB_INTERRUPT, __ATOMIC_RELAXED);
}

int hk_stack_walk_jobs_flaggable(void) { return W.enabled && W.threads_ok; }

void hk_stack_walk_unflag_own_jobs(void)
{
    vm_ec *ec = hk_stack_walk_jobs_flaggable() ? (vm_ec *)vm_current_ec() : NULL;
    if (ec) __atomic_fetch_and(&ec->interrupt_flag, ~(uint32_t)VM_POSTPONED_JOB_INTERRUPT, __ATOMIC_RELAXED);
}

long hk_stack_walk_capture_thread(const void *vm_thread, uint64_t *out, size_t room)
{
    W.walked_ec = NULL;
    const vm_ec *ec = W.enabled ? thread_stack(vm_thread) : NULL;
    if (!ec) return -1;
    return vm_capture_ec(out, room, ec, HK_CAP_OTHER);
}

/* The frames the capture's resolution returned are in the memo, by depth:
 * those deeper than the tick's leaf were pushed after it. The leaf value may
 * be anything (read from a context since freed and reused): it is only
 * compared, never followed. */
HK_HOT int hk_stack_walk_pushed_since(const uint64_t *cap, const void *slot, uintptr_t leaf)
{
    const hk_cap_head *h = (const hk_cap_head *)cap;
    if (h->kind != HK_CAP_FRAMES || !h->ec || slot != (const void *)&((const vm_ec *)h->ec)->cfp) return 0;
    uintptr_t now = h->leaf, end = h->end;
    if (leaf <= now || leaf > end || (end - leaf) % sizeof(vm_frame)) return 0;
    size_t depth_now = (end - now) / sizeof(vm_frame) - 1, depth_tick = (end - leaf) / sizeof(vm_frame) - 1;
    if (depth_now >= W.depth_cap) return 0;
    int pushed = 0;
    for (size_t d = depth_tick + 1; d <= depth_now; d++) pushed += W.memo[d].frame != 0;
    return pushed;
}

/* The control frame at cfp (the tick's leaf) as the capture read it, by its
 * distance from the capture's leaf; checked by its iseq, since a frame popped
 * since the tick may have had another pushed at its address. */
int hk_stack_walk_ran_at(const uint64_t *cap, const void *slot, uintptr_t cfp, uintptr_t iseq)
{
    const hk_cap_head *h = (const hk_cap_head *)cap;
    if (h->kind != HK_CAP_FRAMES || !h->ec || slot != (const void *)&((const vm_ec *)h->ec)->cfp) return 0;
    uintptr_t now = h->leaf, end = h->end;
    if (cfp < now || cfp >= end || (cfp - now) % sizeof(vm_frame)) return 0;
    size_t i = (cfp - now) / sizeof(vm_frame), depth = (end - cfp) / sizeof(vm_frame) - 1;
    if (i >= h->n || depth >= W.depth_cap) return 0;
    const raw_frame *rf = (const raw_frame *)(cap + HK_CAP_HEAD_WORDS) + i;
    return !(rf->pc_bits & RAW_CFRAME) && (uintptr_t)rf->iseq == iseq && W.memo[depth].frame != 0;
}

#endif
