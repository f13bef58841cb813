/* test_u64_map.c — hk_u64_map: put/get, overwrite, growth, probe collisions
 * and wrap-around, clear, reserve, failed growth. */
#include <stdint.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "check.h"
#include "u64_map.h"

static void test_empty(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    uint32_t v = 7;
    CHECK_INT(hk_u64_map_get(&m, 1, &v), 0);
    CHECK_INT(v, 7);
    CHECK_INT(hk_u64_map_memsize(&m), 0);
    hk_u64_map_free(&m);
}

static void test_put_get_overwrite(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    uint32_t v;
    CHECK_INT(hk_u64_map_put(&m, 42, 1), 0);
    CHECK_INT(hk_u64_map_put(&m, UINT64_MAX, UINT32_MAX), 0);
    CHECK_INT(hk_u64_map_put(&m, 42, 2), 0);
    CHECK_INT(m.count, 2);
    CHECK(hk_u64_map_get(&m, 42, &v) && v == 2);
    CHECK(hk_u64_map_get(&m, UINT64_MAX, &v) && v == UINT32_MAX);
    CHECK(!hk_u64_map_get(&m, 43, &v));
    CHECK(!hk_u64_map_get(&m, 0, &v)); /* key 0 is the empty marker, never found */
    CHECK(hk_u64_map_memsize(&m) > 0);
    hk_u64_map_free(&m);
}

static void test_growth(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    const uint32_t n = 200000;
    for (uint32_t i = 1; i <= n; i++) CHECK_INT(hk_u64_map_put(&m, (uint64_t)i * 0x10001, i), 0);
    CHECK_INT(m.count, n);
    CHECK((m.cap & (m.cap - 1)) == 0); /* power of two */
    CHECK(m.count * 2 <= m.cap);       /* load stays at most 50% */
    uint32_t v;
    for (uint32_t i = 1; i <= n; i++) CHECK(hk_u64_map_get(&m, (uint64_t)i * 0x10001, &v) && v == i);
    for (uint32_t i = 1; i <= 1000; i++) CHECK(!hk_u64_map_get(&m, (uint64_t)i * 0x10001 + 1, &v));
    hk_u64_map_free(&m);
}

/* keys whose home slot in a 64-slot table is `slot` */
static size_t keys_for_slot(size_t slot, uint64_t *out, size_t want)
{
    size_t n = 0;
    for (uint64_t k = 1; n < want; k++)
        if ((hk_mix64(k) & 63) == slot) out[n++] = k;
    return n;
}

static void test_collisions_and_wrap(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    CHECK_INT(hk_u64_map_reserve(&m, 20), 0);
    CHECK_INT(m.cap, 64);
    /* ten keys that all want the last slot: their probes wrap to the front */
    uint64_t keys[10];
    keys_for_slot(63, keys, 10);
    for (uint32_t i = 0; i < 10; i++) CHECK_INT(hk_u64_map_put(&m, keys[i], i + 100), 0);
    CHECK_INT(m.cap, 64);
    uint32_t v;
    for (uint32_t i = 0; i < 10; i++) CHECK(hk_u64_map_get(&m, keys[i], &v) && v == i + 100);
    CHECK(m.keys[63] == keys[0] && m.keys[0] == keys[1]);
    uint64_t absent = 0; /* a key of the same chain that was never put */
    for (uint64_t k = keys[9] + 1; !absent; k++)
        if ((hk_mix64(k) & 63) == 63) absent = k;
    CHECK(!hk_u64_map_get(&m, absent, &v));
    /* growth rehashes the colliding keys correctly */
    for (uint32_t i = 0; i < 100; i++) CHECK_INT(hk_u64_map_put(&m, 1000000 + i, i), 0);
    for (uint32_t i = 0; i < 10; i++) CHECK(hk_u64_map_get(&m, keys[i], &v) && v == i + 100);
    hk_u64_map_free(&m);
}

static void test_clear_and_reuse(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    for (uint32_t i = 1; i <= 100; i++) hk_u64_map_put(&m, i, i);
    size_t cap = m.cap;
    hk_u64_map_clear(&m);
    CHECK_INT(m.count, 0);
    CHECK_INT(m.cap, cap);
    uint32_t v;
    for (uint32_t i = 1; i <= 100; i++) CHECK(!hk_u64_map_get(&m, i, &v));
    CHECK_INT(hk_u64_map_put(&m, 5, 55), 0);
    CHECK(hk_u64_map_get(&m, 5, &v) && v == 55);
    hk_u64_map_clear(&m);
    hk_u64_map_free(&m);
    hk_u64_map_clear(&m); /* clearing an empty map is fine */
}

static void test_reserve_avoids_growth(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    CHECK_INT(hk_u64_map_reserve(&m, 1000), 0);
    size_t cap = m.cap;
    CHECK(cap >= 2000);
    for (uint32_t i = 1; i <= 1000; i++) hk_u64_map_put(&m, i, i);
    CHECK_INT(m.cap, cap);
    CHECK_INT(hk_u64_map_reserve(&m, 10), 0); /* never shrinks */
    CHECK_INT(m.cap, cap);
    hk_u64_map_free(&m);
}

static void test_failed_growth_leaves_map(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    for (uint32_t i = 1; i <= 32; i++) hk_u64_map_put(&m, i, i); /* 64 slots, full at 50% */
    CHECK_INT(m.cap, 64);
    for (long nth = 0; nth < 2; nth++) { /* the keys or the values allocation fails */
        alloc_fail_at(nth);
        CHECK_INT(hk_u64_map_put(&m, 33, 33), -1);
        CHECK(alloc_fail_done());
        CHECK(m.count == 32 && m.cap == 64);
    }
    uint32_t v;
    for (uint32_t i = 1; i <= 32; i++) CHECK(hk_u64_map_get(&m, i, &v) && v == i);
    CHECK(!hk_u64_map_get(&m, 33, &v));
    CHECK_INT(hk_u64_map_put(&m, 33, 33), 0);
    hk_u64_map_free(&m);
}

/* Deleting from the middle of probe chains (backward shift) keeps every other
 * key reachable; deleting an absent key is a no-op. */
static void test_delete(void)
{
    hk_u64_map m;
    hk_u64_map_init(&m);
    enum { N = 20000 };
    for (uint64_t k = 1; k <= N; k++) CHECK_INT(hk_u64_map_put(&m, k * 7919, (uint32_t)k), 0);
    CHECK(!hk_u64_map_del(&m, 7));
    for (uint64_t k = 1; k <= N; k += 2) CHECK(hk_u64_map_del(&m, k * 7919));
    CHECK(m.count == N / 2);
    uint32_t v;
    for (uint64_t k = 1; k <= N; k++) {
        int found = hk_u64_map_get(&m, k * 7919, &v);
        CHECK_MSG(found == (k % 2 == 0) && (!found || v == k), "key %llu", (unsigned long long)k);
    }
    for (uint64_t k = 1; k <= N; k += 2) CHECK_INT(hk_u64_map_put(&m, k * 7919, 1), 0);
    CHECK(m.count == N);
    hk_u64_map_free(&m);
    hk_u64_map_init(&m);
    CHECK(!hk_u64_map_del(&m, 1)); /* empty map */
    hk_u64_map_free(&m);
}

int main(void)
{
    RUN(test_delete);
    RUN(test_empty);
    RUN(test_put_get_overwrite);
    RUN(test_growth);
    RUN(test_collisions_and_wrap);
    RUN(test_clear_and_reuse);
    RUN(test_reserve_avoids_growth);
    RUN(test_failed_growth_leaves_map);
    return check_done();
}
