/* pair_map.h — open-addressing map from a pair (non-zero uint64 a, uint32 b)
 * to a uint32 value, one 16-byte entry per slot so a lookup touches one cache
 * line. The sampler maps (frame VALUE, executing line) -> location id with it:
 * one probe per frame, and hk_pair_map_prefetch lets it start the memory loads
 * for a whole stack before resolving any of them.
 * a == 0 marks an empty slot (a frame VALUE is never 0). Grown at 50% load.
 * ctx: core; the owner serialises access.
 */
#ifndef HK_PAIR_MAP_H
#define HK_PAIR_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "u64_map.h"

typedef struct hk_pair_entry {
    uint64_t a;
    uint32_t b, val;
} hk_pair_entry;

typedef struct hk_pair_map {
    hk_pair_entry *slots;
    size_t cap, count; /* cap: power of two, or 0 */
} hk_pair_map;

void hk_pair_map_init(hk_pair_map *m);
void hk_pair_map_free(hk_pair_map *m);
/* empties the map and keeps its room */
void hk_pair_map_clear(hk_pair_map *m);
int hk_pair_map_reserve(hk_pair_map *m, size_t n);
/* 1 and *out set when found */
int hk_pair_map_get(const hk_pair_map *m, uint64_t a, uint32_t b, uint32_t *out);
/* insert or overwrite; 0, or -1 when out of memory (map unchanged) */
int hk_pair_map_put(hk_pair_map *m, uint64_t a, uint32_t b, uint32_t val);
size_t hk_pair_map_memsize(const hk_pair_map *m);

static inline size_t hk_pair_home(const hk_pair_map *m, uint64_t a, uint32_t b)
{
    return (size_t)hk_mix64(a ^ ((uint64_t)b * 0x9e3779b97f4a7c15ULL)) & (m->cap - 1);
}

/* starts loading the slot where (a, b) would be */
static inline void hk_pair_map_prefetch(const hk_pair_map *m, uint64_t a, uint32_t b)
{
    if (m->cap) __builtin_prefetch(&m->slots[hk_pair_home(m, a, b)]);
}

#endif
