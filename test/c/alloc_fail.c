/* alloc_fail.c — see alloc_fail.h. */
#include "alloc_fail.h"

#include <stdlib.h>

static long fail_at = -1, count, live;
static int failed;

void alloc_fail_at(long nth)
{
    fail_at = nth;
    count = 0;
    failed = 0;
}

int alloc_fail_done(void)
{
    int f = failed;
    fail_at = -1;
    failed = 0;
    return f;
}

long alloc_fail_count(void) { return count; }

long alloc_live(void) { return live; }

static int should_fail(void)
{
    if (count++ != fail_at) return 0;
    failed = 1;
    return 1;
}

/* the renamed allocators; declared here only, the core calls them as malloc & co */
void *hk_test_malloc(size_t n);
void *hk_test_calloc(size_t k, size_t n);
void *hk_test_realloc(void *p, size_t n);
void hk_test_free(void *p);

void *hk_test_malloc(size_t n)
{
    void *q = should_fail() ? NULL : malloc(n);
    live += q != NULL;
    return q;
}

void *hk_test_calloc(size_t k, size_t n)
{
    void *q = should_fail() ? NULL : calloc(k, n);
    live += q != NULL;
    return q;
}

void *hk_test_realloc(void *p, size_t n)
{
    void *q = should_fail() ? NULL : realloc(p, n);
    live += p == NULL && q != NULL;
    return q;
}

void hk_test_free(void *p)
{
    live -= p != NULL;
    free(p);
}
