/* allocated_count.h — the program's count of the objects it has allocated: Ruby's own
 * (GC.stat's total_allocated_objects, exact at every allocation), less what that count grows
 * by inside a GC. Ruby 3.4 counts each object a compaction moves as allocated (GC.compact, or
 * every major GC under GC.auto_compact): a method that compacts would be charged hundreds of
 * thousands of objects it never made. 3.1 and 3.3 count no moves, and before 3.2 a hook on the
 * GC's events sends every allocation down the slow path: there the count is Ruby's.
 * Object mode's watch windows and tracing's allocations measure read it. ctx: GVL, all.
 */
#ifndef HK_ALLOCATED_COUNT_H
#define HK_ALLOCATED_COUNT_H

#include <stdint.h>

/* A reader begins (the hook on the GC's entry and exit goes on with the first) and ends (off
 * after the last): *reading is the reader's own flag, set to `on`; nothing changes when it is
 * already so. The count is comparable between readings within a reader's time only. */
void hk_allocated_count_read(int *reading, int on);

uint64_t hk_allocated_count(void);
/* The time spent inside GCs while read (monotonic ns), so that a reader can tell how fast the
 * program allocates while it runs; 0 throughout where there is no hook (before 3.2). */
int64_t hk_allocated_count_gc_ns(void);
/* ctx: GVL. At the first GC step (a GC, a step of its lazy sweep: every page or so of an
 * allocating program's objects) that finds hk_allocated_count() at `at` or past it, `reached`
 * runs, inside the GC (it may only trigger a postponed job), once; a later call replaces it, and
 * `reached` NULL cancels it. Nothing before 3.2 (no hook). */
void hk_allocated_count_notify(uint64_t at, void (*reached)(void));

#endif
