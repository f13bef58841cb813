/* alloc_fail.h — allocation-failure injection and block counting for the core.
 *
 * The Makefile renames malloc/calloc/realloc/free in the core's object files
 * (and only there) to hk_test_*, defined in alloc_fail.c: they pass through to
 * libc, count live blocks, and when a test has armed a failure make exactly
 * that one call return NULL. A test sweeps nth = 0, 1, 2 … until a run
 * completes with no failure injected, checking after each that the code
 * failed cleanly and that alloc_live() is back where it was (no leak), with
 * ASan catching use-after-free. zlib allocates on its own and is not covered.
 */
#ifndef HK_ALLOC_FAIL_H
#define HK_ALLOC_FAIL_H

/* from now on, the core's allocation number nth (0-based) fails; -1 = none */
void alloc_fail_at(long nth);
/* whether the armed failure happened since alloc_fail_at; disarms */
int alloc_fail_done(void);
/* allocations the core made since the last alloc_fail_at */
long alloc_fail_count(void);
/* blocks the core holds right now (allocated by it and not freed) */
long alloc_live(void);

#endif
