/* stack_walk_internal.h — what the walker's two files share: stack_walk.c
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

/* rb_profile_frames, keeping its latest result to tell the next walk how much
 * of it is unchanged: sized for limit frames (0, or -1 when out of memory),
 * freed, walked (as hk_stack_walk_since) */
int hk_profile_frames_start(int limit);
void hk_profile_frames_stop(void);
int hk_profile_frames_walk(VALUE *frames, int *lines, int limit, uint64_t known, int *same);
size_t hk_profile_frames_memsize(void);

/* how many root-side frames of frames/lines (n) equal those of f/l (m) */
int hk_same_from_root(const VALUE *frames, const int *lines, int n, const VALUE *f, const int *l, int m);

#endif
