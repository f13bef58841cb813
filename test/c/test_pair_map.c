/* test_pair_map.c — the (uint64, uint32) -> uint32 map behind the sampler's
 * (frame, line) -> location lookup: both halves of the key matter, growth keeps
 * every entry, prefetch is harmless on an empty map. */
#include <stdint.h>

#include "alloc_fail.h"
#include "check.h"
#include "pair_map.h"

static void test_empty_and_prefetch(void)
{
    hk_pair_map m;
    hk_pair_map_init(&m);
    uint32_t v;
    hk_pair_map_prefetch(&m, 1, 2); /* no slots yet: must not touch memory */
    CHECK(!hk_pair_map_get(&m, 1, 2, &v));
    CHECK(hk_pair_map_memsize(&m) == 0);
    hk_pair_map_free(&m);
}

static void test_both_halves_of_the_key(void)
{
    hk_pair_map m;
    hk_pair_map_init(&m);
    CHECK_INT(hk_pair_map_put(&m, 0x1000, 7, 1), 0);
    CHECK_INT(hk_pair_map_put(&m, 0x1000, 8, 2), 0);
    CHECK_INT(hk_pair_map_put(&m, 0x2000, 7, 3), 0);
    CHECK_INT(hk_pair_map_put(&m, 0x1000, 7, 4), 0); /* overwrite */
    uint32_t v;
    CHECK(hk_pair_map_get(&m, 0x1000, 7, &v) && v == 4);
    CHECK(hk_pair_map_get(&m, 0x1000, 8, &v) && v == 2);
    CHECK(hk_pair_map_get(&m, 0x2000, 7, &v) && v == 3);
    CHECK(!hk_pair_map_get(&m, 0x2000, 8, &v));
    CHECK(m.count == 3);
    hk_pair_map_free(&m);
}

static void test_growth_keeps_everything(void)
{
    hk_pair_map m;
    hk_pair_map_init(&m);
    enum { N = 50000 };
    for (uint32_t i = 0; i < N; i++) {
        hk_pair_map_prefetch(&m, 0x10000 + (uint64_t)(i / 7) * 40, i % 7);
        CHECK_INT(hk_pair_map_put(&m, 0x10000 + (uint64_t)(i / 7) * 40, i % 7, i + 1), 0);
    }
    CHECK(m.count == N && m.cap >= 2 * N);
    uint32_t v;
    for (uint32_t i = 0; i < N; i++)
        CHECK_MSG(hk_pair_map_get(&m, 0x10000 + (uint64_t)(i / 7) * 40, i % 7, &v) && v == i + 1, "entry %u", i);
    CHECK(hk_pair_map_memsize(&m) == m.cap * sizeof(hk_pair_entry));
    hk_pair_map_free(&m);
}

/* the sampler empties its tables at stop and keeps them for the next session */
static void test_clear_keeps_the_room_and_forgets_every_entry(void)
{
    hk_pair_map m;
    hk_pair_map_init(&m);
    hk_pair_map_clear(&m); /* an empty map, never allocated */
    CHECK(m.count == 0 && m.cap == 0);
    CHECK_INT(hk_pair_map_reserve(&m, 1000), 0);
    for (uint32_t i = 0; i < 1000; i++) CHECK_INT(hk_pair_map_put(&m, 0x5000 + (uint64_t)i * 8, i % 3, i + 1), 0);
    size_t cap = m.cap;
    hk_pair_entry *slots = m.slots;
    hk_pair_map_clear(&m);
    CHECK(m.count == 0 && m.cap == cap && m.slots == slots);
    uint32_t v;
    for (uint32_t i = 0; i < 1000; i++)
        CHECK_MSG(!hk_pair_map_get(&m, 0x5000 + (uint64_t)i * 8, i % 3, &v), "entry %u survived", i);
    alloc_fail_at(0); /* refilling the kept room allocates nothing */
    for (uint32_t i = 0; i < 1000; i++) CHECK_INT(hk_pair_map_put(&m, 0x9000 + (uint64_t)i * 8, 1, i + 7), 0);
    CHECK_INT(alloc_fail_count(), 0);
    alloc_fail_done();
    for (uint32_t i = 0; i < 1000; i++) CHECK(hk_pair_map_get(&m, 0x9000 + (uint64_t)i * 8, 1, &v) && v == i + 7);
    CHECK(m.count == 1000);
    hk_pair_map_free(&m);
}

int main(void)
{
    RUN(test_empty_and_prefetch);
    RUN(test_both_halves_of_the_key);
    RUN(test_growth_keeps_everything);
    RUN(test_clear_keeps_the_room_and_forgets_every_entry);
    return check_done();
}
