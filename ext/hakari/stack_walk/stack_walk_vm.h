/* stack_walk_vm.h — what the control-frame walker's two files share: the
 * Ruby version's layouts, the capture's and the memo's records and the walker's state.
 * stack_walk_vm.c walks (the job's capture, the worker's resolve, verify mode
 * and the start's self-check); stack_walk_vm_tables.c allocates, keeps and
 * frees the tables a session uses. The walker, as stack_walk.h offers it:
 *
 * The job captures: from the leaf down, each control frame's pc, iseq, whether
 * it is a C frame and the method entry its environment holds, up to the first
 * frame whose mark says its callers have not run since the previous capture.
 * That reads what the program itself keeps warm (its control frames and
 * environments, the entries' headers) and, of ours, only the capture's memo
 * by depth. Resolving a capture later, on the timer's worker, gives the frames:
 *
 * The control-frame walker reproduces rb_profile_frames (vm_backtrace.c):
 * walking from the leaf to the root, a Ruby frame gives its method entry when
 * that is an iseq method, else its iseq, and the line its pc is at; a C frame
 * gives its method entry when that is a C function, and line 0; any other
 * frame is skipped. It differs only in what it reads to get there:
 *  - a method entry is known by its address once seen: the entries it has seen
 *    are pinned (marked, never moved or freed), so an address it knows cannot
 *    have come to mean another object;
 *  - a line is looked up by pc: the iseqs it has read lines of are pinned, so
 *    the instruction buffers their pcs point into stay alive and unique;
 *  - a frame whose iseq, pc, kind and method entry equal those of the frame at
 *    the same distance from the root in the previous sample takes that frame's
 *    result without a lookup;
 *  - the frames below one that has not returned since the previous walk are
 *    that walk's, and the caller, who has kept them, is told how many there
 *    are instead of being handed them again (hk_stack_walk_resolve).
 * A private layout cannot be probed the way a function can: there is one per
 * Ruby version (vm_layout_31.h, vm_layout_33.h, vm_layout_34.h: rb_control_frame_t,
 * the leading fields of rb_execution_context_t and rb_thread_t), compiled
 * only for that API version (extconf.rb), and checked against
 * rb_profile_frames at every start.
 * Tables use malloc and grow only on a new method, iseq or pc. Captures are
 * resolved in the order they were taken, each once, so the memo by depth that
 * a mark vouches for is the one the previous capture's resolution left.
 */
#ifndef HK_STACK_WALK_VM_H
#define HK_STACK_WALK_VM_H

#include <stddef.h>
#include <stdint.h>

#include <ruby/debug.h>

#include "pair_map.h"
#include "stack_walk_int.h"

/* one layout per Ruby version, the one extconf.rb found (HK_VM_LAYOUT) */
#if HK_VM_LAYOUT == 31
#include "vm_layout_31.h"
#elif HK_VM_LAYOUT == 33
#include "vm_layout_33.h"
#elif HK_VM_LAYOUT == 34
#include "vm_layout_34.h"
#else
#error "no control-frame layout for this HK_VM_LAYOUT"
#endif

unsigned int rb_iseq_line_no(const void *iseq, size_t pos); /* iseq.c; exported */

/* where a context's control frames end for the walk: below its root frame,
 * or (VM_SKIPS_ROOT_FRAME) just above it */
static inline const vm_frame *vm_stack_end(const vm_ec *ec)
{
    return (const vm_frame *)(ec->vm_stack + ec->vm_stack_size) - VM_SKIPS_ROOT_FRAME;
}

#define VM_POSTPONED_JOB_INTERRUPT 0x04 /* POSTPONED_JOB_INTERRUPT_MASK (vm_core.h) */

/* env data around ep (vm_core.h) */
#define EP_ME_CREF (-2)
#define EP_SPECVAL (-1)
#define EP_FLAGS 0
#define FRAME_FLAG_CFRAME 0x0080
#define ENV_FLAG_LOCAL 0x0002
/* imemo types (internal/imemo.h) and method types (method.h) */
#define IMEMO_TYPE(v) ((RBASIC(v)->flags >> RUBY_FL_USHIFT) & 0x0f)
#define IMEMO_SVAR 2
#define IMEMO_MENT 6
#define METHOD_TYPE_ISEQ 0
#define METHOD_TYPE_CFUNC 1
#define NO_ME_TYPE 0xff

/* rb_iseq_struct: flags, wrapper, body */
typedef struct vm_iseq {
    VALUE flags, wrapper;
    const void *body;
} vm_iseq;

/* the result for one control frame, and what it was computed from: 32 bytes,
 * two to a cache line. A pc points into the instruction buffer of one live
 * (pinned) iseq, so the pc stands for the iseq too; C frames have none. */
typedef struct memo {
    const VALUE *pc;
    VALUE me;          /* resolved method entry (pinned), or 0 */
    VALUE frame;       /* 0: skipped */
    int line;
    uint8_t cframe;    /* a C frame */
    uint8_t me_type;   /* the method type of me, or NO_ME_TYPE */
    uint16_t out;      /* frames the walk gives from the root up to this depth, or OUT_UNKNOWN */
} memo;
_Static_assert(sizeof(memo) == 32, "two memo entries to a cache line");
#define OUT_UNKNOWN 0xffff
#define NO_DEPTH ((size_t)-1)

/* One control frame as the job captured it: five words. The resolver runs
 * on the worker, while the program (and its GC) runs: it must never read a
 * Ruby heap object, whose page GC.compact may have protected (its read
 * barrier) or whose fields a compaction may be rewriting. So the job also
 * copies the two pointers the resolver needs out of the heap objects; what
 * they point to is malloc'd and lives as long as its object, which the
 * capture keeps alive. */
typedef struct raw_frame {
    uintptr_t pc_bits;  /* its pc (NULL for a C frame) | RAW_CFRAME | RAW_TRUSTED */
    const void *iseq;   /* a Ruby frame's iseq; NULL for a C frame (compared and marked, never read) */
    VALUE me;           /* the method entry its environment holds (an imemo ment), or 0 (the same) */
    const void *body;   /* the iseq's body (rb_iseq_constant_body), or NULL */
    const unsigned int *def; /* the method entry's definition (its type in the first 4 bits), or NULL */
} raw_frame;
/* What the capture read out of a frame's heap objects, by depth: a frame whose
 * mark vouches for it is the one captured there before, and these are read
 * again from here instead of from its method entry and iseq, which the
 * program has long stopped touching. */
typedef struct cap_entry {
    VALUE me;
    const void *body;
    const unsigned int *def;
} cap_entry;

#define RAW_CFRAME 1
#define RAW_TRUSTED 2 /* its mark vouches for its callers: the capture ends with it */
#define RAW_PC(r) ((const VALUE *)((r)->pc_bits & ~(uintptr_t)3))
#define RAW_WORDS (sizeof(raw_frame) / sizeof(uint64_t))
struct walker {
    /* the job's capture reads and writes these: one cache line, which the job
     * starts loading first (hk_stack_walk_prefetch) */
    _Alignas(64) uint8_t enabled; /* (an alignment applies to every name declared with it) */
    uint8_t verify;
    uint8_t marks;       /* frames are marked (not under YJIT, nor with continuations) */
    uint8_t thread_ptr_ok; /* ec->thread_ptr was checked against Thread.current at start */
    uint8_t threads_ok;  /* and vm_thread_head against it: other threads' stacks can be read */
    const vm_ec *run_ec; /* the stack of the previous capture */
    const vm_ec *walked_ec; /* the context the last capture read, NULL when it fell back */
    uint64_t run_start;  /* marks at or after this were written in the current run */
    size_t memo_cap;     /* control frames a capture keeps at most; the memo's depth */
    /* The resolver, on another thread, counts up `forgets` when the memo is
     * lost (forget_memo): the next capture then starts a new run. Written
     * rarely, so its line stays in both caches. */
    uint64_t forgets;
    uint64_t forgets_seen; /* the capture's view of it */
    cap_entry *cap_memo; /* memo_cap + 1 entries, by distance from the root */
    /* the resolver's: what resolving a capture reads */
    _Alignas(64) int checked_n; /* verify mode: frames in check_frames from the latest resolve, or -1 */
    size_t last_leaf;    /* depth of the previous result's leaf when it is whole in the memo, else NO_DEPTH */
    const void *res_ec;  /* the context of the previous capture resolved */
    uint64_t broken_upto; /* captures up to this number may trust a memo that was lost: not resolved */
    memo *memo;          /* by distance from the root */
    size_t depth_cap;    /* memo_cap and verify, for the resolver: it does not read the capture's line, */
    int verify_res;      /* which the job writes at every sample */
    const void *main_ractor; /* the rb_ractor_t of the thread that started the walker */
    /* The previous result's leaf and first frame, when whole (last_leaf): a
     * stack that has not changed since is answered from these alone. */
    const VALUE *leaf_pc; /* its leaf's pc (the leaf is at depth last_leaf of res_ec) */
    VALUE first_frame;   /* its frames[0] and lines[0] */
    int first_line;
    int result_n;        /* its frame count */
    hk_pair_map lines;   /* pc -> line + 1 */
    hk_pair_map ments;   /* method entry VALUE -> method type + 1 */
    VALUE *ment_list; size_t nments, ments_cap;
    hk_pair_map iseqs;   /* pinned iseq -> 1 */
    VALUE *iseq_list; size_t niseqs, iseqs_cap;
    VALUE *check_frames; int *check_lines; int check_cap; /* verify mode: rb_profile_frames' frames at the capture */
    VALUE *last_frames; int *last_lines; int last_n;     /* verify mode: the previous result */
    uint64_t *self_check_cap; /* the start's self-check's capture (vm_capture_words(1): verify mode may be on or off) */
    int kept;             /* the tables are a stopped session's, emptied (hk_stack_walk_end) */
    size_t reserved_size; /* the tables' bytes after start reserved them */
};
extern struct walker hk_vm_walker;
#define W hk_vm_walker
_Static_assert(offsetof(struct walker, forgets_seen) < 64, "what a capture reads: one cache line");

/* a capture's most words: its frames, and in verify mode rb_profile_frames' after them */
static inline size_t vm_capture_words(int verify)
{
    return HK_CAP_HEAD_WORDS + RAW_WORDS * W.memo_cap + (verify ? HK_CAP_RESOLVED_WORDS(W.check_cap) : 0);
}

/* ctx: GVL, at start, with the tables allocated. Walks this very stack both
 * ways and sets W.enabled to whether they agree (and the marks, the thread
 * check and hk_walk_kind): 0, or -1 when out of memory. */
int hk_vm_self_check(int limit);

#endif
