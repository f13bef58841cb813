/* test_pair_map.c — the (uint64, uint32) -> uint32 map behind the sampler's
 * (frame, line) -> location lookup: both halves of the key matter, growth keeps
 * every entry, prefetch is harmless on an empty map. */
#include <stdint.h>

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

int main(void)
{
    RUN(test_empty_and_prefetch);
    RUN(test_both_halves_of_the_key);
    RUN(test_growth_keeps_everything);
    return check_done();
}
