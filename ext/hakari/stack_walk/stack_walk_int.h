/* stack_walk_int.h — what the walker's two files share: stack_walk.c
 * (walk numbers, the rb_profile_frames walker) and stack_walk_vm.c (the
 * control-frame walker, which falls back on the other).
 */
#ifndef HK_STACK_WALK_INTERNAL_H
#define HK_STACK_WALK_INTERNAL_H

#include <ruby.h>
#include <stdint.h>

/* the number of the latest walk, by either walker: never 0, never reused */
extern uint64_t hk_walks;
/* what hk_stack_walk_kind reports */
extern const char *hk_walk_kind;
/* what hk_stack_walk_mismatches reports */
extern uint64_t hk_walk_mismatches;

/* A capture (stack_walk.h) starts with this header; its words follow. */
typedef struct hk_cap_head {
    uint32_t words;    /* the whole capture, this header included */
    uint16_t kind;     /* HK_CAP_* */
    uint16_t flags;    /* HK_CAP_CUT, HK_CAP_OTHER */
    uint32_t n;        /* control frames captured (HK_CAP_FRAMES), or frames (HK_CAP_RESOLVED) */
    uint32_t ncheck;   /* verify mode: rb_profile_frames' frames after them, or 0 */
    uint64_t number;   /* the capture's number (hk_walks when it was taken) */
    const void *ec;    /* the execution context read (only compared), or NULL */
    uintptr_t leaf;    /* its leaf control frame then */
    uintptr_t end;     /* where its control frames end (the root's is just below) */
} hk_cap_head;
#define HK_CAP_HEAD_WORDS (sizeof(hk_cap_head) / sizeof(uint64_t))
_Static_assert(sizeof(hk_cap_head) % sizeof(uint64_t) == 0, "a capture's body starts on a word");
enum { HK_CAP_FRAMES = 1, HK_CAP_RESOLVED = 2 };
#define HK_CAP_CUT 1   /* the stack goes on below what was captured */
#define HK_CAP_OTHER 2 /* another thread's stack (hk_stack_walk_capture_thread): verify mode has nothing to check it by */

/* words for n frames and n lines, as a resolved capture and verify mode keep them */
#define HK_CAP_RESOLVED_WORDS(n) ((size_t)(n) + ((size_t)(n) + 1) / 2)

/* rbframes.c: rb_profile_frames, keeping its latest result to tell the next
 * walk how much of it is unchanged: sized for limit frames (0, or -1 when out
 * of memory), freed, captured and resolved (as hk_stack_walk_capture and _resolve) */
int hk_rbframes_start(int limit);
void hk_rbframes_stop(void);
long hk_rbframes_capture(uint64_t *out, size_t room);
size_t hk_rbframes_room(void);
int hk_rbframes_resolve(const hk_cap_head *h, VALUE *frames, int *lines, int limit, uint64_t known, int *same);
void hk_rbframes_mark_capture(const hk_cap_head *h);
size_t hk_rbframes_memsize(void);

/* rb_profile_frames(0, limit) written at `at` as frames, then their lines
 * packed after them (HK_CAP_RESOLVED_WORDS(n) words, room for limit);
 * returns n. ctx: GVL (the job). */
uint32_t hk_cap_put_profile_frames(uint64_t *at, int limit);
/* ctx: GC mark phase. Pins the n frames kept at word `at` of a capture. */
void hk_cap_mark_frames(const hk_cap_head *h, size_t at, uint32_t n);

/* the frames and lines kept in a capture from its word `at` on (n of each) */
static inline const VALUE *hk_cap_frames(const hk_cap_head *h, size_t at) { return (const VALUE *)h + at; }
static inline const int *hk_cap_lines(const hk_cap_head *h, size_t at, uint32_t n)
{
    return (const int *)((const VALUE *)h + at + n);
}

/* how many root-side frames of frames/lines (n) equal those of f/l (m) */
int hk_same_from_root(const VALUE *frames, const int *lines, int n, const VALUE *f, const int *l, int m);

#endif
