/* test_intern_table.c — hk_intern_table: dense ids, empty and prefix sequences,
 * growth to many sequences, find without allocating, clear, failed growth. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "check.h"
#include "intern_table.h"

static void test_find_on_empty_table(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    uint32_t a[] = {1, 2};
    CHECK_INT(hk_intern_find(&t, a, 2), -1);
    CHECK_INT(hk_intern_find(&t, NULL, 0), -1);
    CHECK_INT(hk_intern_count(&t), 0);
    hk_intern_free(&t);
}

static void test_dense_ids_and_prefixes(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    uint32_t a[] = {1, 2, 3}, b[] = {1, 2}, c[] = {1, 2, 0}, d[] = {3, 2, 1};
    CHECK_INT(hk_intern_seq(&t, a, 3), 0);
    CHECK_INT(hk_intern_seq(&t, b, 2), 1);
    CHECK_INT(hk_intern_seq(&t, c, 3), 2);
    CHECK_INT(hk_intern_seq(&t, d, 3), 3);
    CHECK_INT(hk_intern_seq(&t, NULL, 0), 4); /* the empty sequence is a sequence too */
    CHECK_INT(hk_intern_seq(&t, a, 3), 0);
    CHECK_INT(hk_intern_seq(&t, b, 2), 1);
    CHECK_INT(hk_intern_seq(&t, NULL, 0), 4);
    CHECK_INT(hk_intern_count(&t), 5);
    CHECK_INT(hk_intern_find(&t, c, 3), 2);
    CHECK_INT(hk_intern_find(&t, c, 1), -1); /* {1} */
    uint32_t n;
    const uint32_t *got = hk_intern_get(&t, 2, &n);
    CHECK(n == 3 && got[0] == 1 && got[1] == 2 && got[2] == 0);
    hk_intern_get(&t, 4, &n);
    CHECK_INT(n, 0);
    hk_intern_free(&t);
}

static void test_extreme_items(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    uint32_t a[] = {UINT32_MAX, 0, UINT32_MAX}, b[] = {UINT32_MAX, 0, UINT32_MAX - 1};
    CHECK_INT(hk_intern_seq(&t, a, 3), 0);
    CHECK_INT(hk_intern_seq(&t, b, 3), 1);
    CHECK_INT(hk_intern_find(&t, a, 3), 0);
    hk_intern_free(&t);
}

/* sequence i: length i % 37, items derived from i, all distinct */
static uint32_t make_seq(uint32_t i, uint32_t *out)
{
    uint32_t n = i % 37 + 1;
    out[0] = i;
    for (uint32_t j = 1; j < n; j++) out[j] = i * 2654435761u + j;
    return n;
}

static void test_growth(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    uint32_t s[40], n;
    const uint32_t count = 50000;
    for (uint32_t i = 0; i < count; i++) {
        n = make_seq(i, s);
        CHECK_INT(hk_intern_seq(&t, s, n), i);
    }
    CHECK_INT(hk_intern_count(&t), count);
    for (uint32_t i = 0; i < count; i += 7) {
        n = make_seq(i, s);
        CHECK_INT(hk_intern_seq(&t, s, n), i); /* seen again: same id, nothing added */
        uint32_t m;
        const uint32_t *got = hk_intern_get(&t, i, &m);
        CHECK(m == n && memcmp(got, s, n * sizeof(*s)) == 0);
    }
    CHECK_INT(hk_intern_count(&t), count);
    CHECK(hk_intern_memsize(&t) > count * sizeof(uint32_t));
    hk_intern_free(&t);
}

static void test_many_similar_sequences(void)
{
    /* stacks that differ only in one deep frame: equal prefixes must not confuse */
    hk_intern_table t;
    hk_intern_init(&t);
    uint32_t s[100];
    for (uint32_t j = 0; j < 100; j++) s[j] = 7;
    for (uint32_t i = 0; i < 5000; i++) {
        s[99] = i;
        CHECK_INT(hk_intern_seq(&t, s, 100), i);
    }
    for (uint32_t len = 0; len < 99; len++) CHECK_INT(hk_intern_find(&t, s, len), -1);
    hk_intern_free(&t);
}

static void test_failed_allocation_leaves_table(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    uint32_t s[40], n;
    for (long nth = 0;; nth++) {
        /* each round adds sequences until the armed allocation fails */
        alloc_fail_at(nth);
        uint32_t before = (uint32_t)hk_intern_count(&t), i = before;
        int64_t id = 0;
        for (; i < before + 300 && id >= 0; i++) {
            n = make_seq(i, s);
            id = hk_intern_seq(&t, s, n);
        }
        int failed = alloc_fail_done();
        if (!failed) break;
        CHECK_INT(id, -1);
        CHECK_INT(hk_intern_count(&t), i - 1); /* the failed one was not added */
        CHECK(nth < 100);
    }
    uint32_t count = (uint32_t)hk_intern_count(&t);
    for (uint32_t i = 0; i < count; i++) {
        n = make_seq(i, s);
        CHECK_INT(hk_intern_find(&t, s, n), i);
    }
    hk_intern_free(&t);
}

/* After a reserve, interning up to the reserved amount allocates nothing; past
 * it the table grows as usual. A reserve that fails leaves the table usable. */
static void test_reserve(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    uint32_t s[40], n, items = 0;
    for (uint32_t i = 0; i < 1000; i++) items += make_seq(i, s);
    CHECK_INT(hk_intern_reserve(&t, 1000, items), 0);
    alloc_fail_at(0);
    for (uint32_t i = 0; i < 1000; i++) {
        n = make_seq(i, s);
        CHECK_INT(hk_intern_seq(&t, s, n), i);
    }
    CHECK_INT(alloc_fail_count(), 0);
    alloc_fail_done();
    n = make_seq(1000, s);
    CHECK_INT(hk_intern_seq(&t, s, n), 1000);
    CHECK_INT(hk_intern_reserve(&t, 10, 10), 0); /* smaller than it has: nothing changes */
    for (long nth = 0;; nth++) {
        alloc_fail_at(nth);
        int rc = hk_intern_reserve(&t, 50000, 1000000);
        if (!alloc_fail_done()) {
            CHECK_INT(rc, 0);
            break;
        }
        CHECK_INT(rc, -1);
        CHECK(nth < 10);
    }
    for (uint32_t i = 0; i <= 1000; i++) {
        n = make_seq(i, s);
        CHECK_INT(hk_intern_find(&t, s, n), i);
    }
    hk_intern_free(&t);
}

/* the sampler empties its stacks at stop and keeps the room for the next session */
static void test_clear_keeps_the_room_and_restarts_the_ids(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    hk_intern_clear(&t); /* never allocated */
    uint32_t s[40], n, items = 0;
    for (uint32_t i = 0; i < 500; i++) items += make_seq(i, s);
    CHECK_INT(hk_intern_reserve(&t, 500, items), 0);
    for (uint32_t i = 0; i < 500; i++) {
        n = make_seq(i, s);
        CHECK_INT(hk_intern_seq(&t, s, n), i);
    }
    size_t index_cap = t.index_cap, pool_cap = t.pool_cap;
    hk_intern_clear(&t);
    CHECK_INT(hk_intern_count(&t), 0);
    CHECK(t.index_cap == index_cap && t.pool_cap == pool_cap);
    for (uint32_t i = 0; i < 500; i++) {
        n = make_seq(i, s);
        CHECK_MSG(hk_intern_find(&t, s, n) == -1, "sequence %u survived", i);
    }
    alloc_fail_at(0); /* the same amount again allocates nothing, and ids start at 0 */
    for (uint32_t i = 0; i < 500; i++) {
        n = make_seq(499 - i, s);
        CHECK_INT(hk_intern_seq(&t, s, n), i);
    }
    CHECK_INT(alloc_fail_count(), 0);
    alloc_fail_done();
    for (uint32_t i = 0; i < 500; i++) {
        uint32_t got_n;
        const uint32_t *got = hk_intern_get(&t, i, &got_n);
        n = make_seq(499 - i, s);
        CHECK_MSG(got_n == n && memcmp(got, s, n * sizeof(*s)) == 0, "id %u", i);
    }
    hk_intern_free(&t);
}

/* With only empty sequences interned the pool is still NULL: hk_intern_get
 * must not compute NULL + 0 (undefined behaviour; clang's UBSan aborts on it). (collapsed_encode reaches it for a profile whose
 * only non-zero samples have empty stacks.) */
static void test_get_empty_sequence_null_pool(void)
{
    hk_intern_table t;
    hk_intern_init(&t);
    CHECK_INT(hk_intern_seq(&t, NULL, 0), 0);
    uint32_t n = 99;
    hk_intern_get(&t, 0, &n);
    CHECK_INT(n, 0);
    hk_intern_free(&t);
}

int main(void)
{
    RUN(test_find_on_empty_table);
    RUN(test_dense_ids_and_prefixes);
    RUN(test_extreme_items);
    RUN(test_growth);
    RUN(test_many_similar_sequences);
    RUN(test_failed_allocation_leaves_table);
    RUN(test_get_empty_sequence_null_pool);
    RUN(test_reserve);
    RUN(test_clear_keeps_the_room_and_restarts_the_ids);
    return check_done();
}
