/* stack_walk.h — the current thread's frames and executing lines, as
 * rb_profile_frames(0, limit, frames, lines) gives them, read in the way that
 * costs the profiled thread least.
 *
 * Between two samples the program (and, in a VM, its neighbours) evicts from
 * the cache everything rb_profile_frames touches: a method entry, its
 * definition, the iseq, its body and its line table for every frame, one
 * dependent miss after another. Where this Ruby's control-frame layout is
 * known (stack_walk_vm.c), the walker reads the control frames itself and
 * resolves a frame only when it differs from the frame at the same depth in
 * the previous sample; line numbers come from a cache keyed by the program
 * counter. Elsewhere, or when its start-up self-check fails, it is
 * rb_profile_frames. HAKARI_STACK_WALK=ruby forces rb_profile_frames;
 * HAKARI_STACK_WALK=verify walks both ways every sample and counts the samples
 * on which they differ, or on which frames reported unchanged were not (tests).
 */
#ifndef HK_STACK_WALK_H
#define HK_STACK_WALK_H

#include <ruby.h>
#include <stdint.h>

/* ctx: GVL, at sampler start. Chooses the walker (environment, self-check) and
 * sizes its tables for stacks up to limit frames; 0, or -1 when out of memory. */
int hk_stack_walk_start(int limit);
/* ctx: GVL (the sampling job). Like rb_profile_frames(0, limit, frames, lines),
 * but what the caller already has is not copied again. known: the number
 * (hk_stack_walk_number) of the walk whose frames the caller still holds, at
 * their distances from the root; 0 for none. *same receives a number of
 * frames, counted from the root, that are equal (frame and line) to that
 * walk's at the same distance from the root (not always all such frames); it
 * is 0 unless known was the walk just before this one, and 0 when the result
 * was cut at limit. Only frames [0, n - *same) and
 * frame 0 (the leaf) are sure to be written. Consecutive samples share most
 * of their stack, so at any depth a sample costs what changed. */
int hk_stack_walk_since(VALUE *frames, int *lines, int limit, uint64_t known, int *same);
/* ctx: GVL. Starts loading what the next walk reads first, so that it arrives
 * together with the caller's own state rather than after it. */
void hk_stack_walk_prefetch(void);
/* ctx: GVL. The number of the latest walk: never 0, never reused. */
uint64_t hk_stack_walk_number(void);
/* ctx: GVL, after hk_stack_walk_since. HAKARI_STACK_WALK=verify: the frames
 * rb_profile_frames gave at the latest walk, all written, leaf first, so the
 * caller can check what it kept of the previous sample; -1 when not verifying. */
int hk_stack_walk_checked(const VALUE **frames, const int **lines);
/* ctx: GVL. Counts a sample on which the two ways differed (the first is printed). */
void hk_stack_walk_report_mismatch(const char *what, int n, int m, int same);
/* Where a sample's time belongs. A tick's period ends on the worker; the job
 * runs at the thread's next safepoint, which may be inside a call made after
 * the tick: typically the blocking call (sleep, read) that ends a stretch of
 * work, whose safepoint on entry would otherwise collect the work before it.
 * The worker reads the thread's leaf control frame pointer at the tick; the
 * job drops the frames pushed since, which were not running at the tick. */

/* ctx: GVL, after hk_stack_walk_since. The address where the execution context
 * it read (the running thread's or fiber's) keeps its leaf control frame
 * pointer, for the worker to read at a tick; NULL when the walk was not the
 * control-frame walker's. */
const void *hk_stack_walk_leaf_slot(void);
/* ctx: GVL, after hk_stack_walk_since. The VM's own struct of the thread whose
 * stack it read (what Thread.current wraps), so the caller can tell the
 * thread without another thread-local read; NULL when unknown. */
const void *hk_stack_walk_thread(void);
/* ctx: any thread, the worker's signal handler too. The pointer kept at slot,
 * read by a system call so that a slot freed since (a thread or fiber
 * collected) cannot fault; 0 when it cannot be read. */
uintptr_t hk_stack_walk_read_leaf(const void *slot);
/* ctx: GVL, right after hk_stack_walk_since. How many of the frames it returned,
 * from the top, sit in control frames pushed since slot held leaf; 0 when
 * slot is not the walked context's or leaf is not in its stack. */
int hk_stack_walk_pushed_since(const void *slot, uintptr_t leaf);

/* ctx: GVL, at stop. Frees the tables; unpins what they held. */
void hk_stack_walk_stop(void);
/* ctx: GC mark phase. Pins the iseqs and method entries the caches are keyed on. */
void hk_stack_walk_mark(void);
size_t hk_stack_walk_memsize(void);
/* "vm control frames", "rb_profile_frames", or why the fast walker is not used */
const char *hk_stack_walk_kind(void);
/* HAKARI_STACK_WALK=verify: samples whose two walks differed */
uint64_t hk_stack_walk_mismatches(void);

#endif
