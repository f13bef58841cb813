/* u64_map.h — open-addressing hash map from a non-zero uint64 key to a uint32 value.
 *
 * Used for frame VALUE -> frame id, (frame id, line) -> location id and
 * thread VALUE -> thread slot. Key 0 marks an empty slot, so callers never
 * store key 0 (a Ruby VALUE of 0 is Qfalse, never a frame or a thread).
 * Linear probing, power-of-two capacity, grown at 50% load.
 * ctx: core; the owner serialises access (the sampler's tables live under the GVL).
 */
#ifndef HK_U64_MAP_H
#define HK_U64_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct hk_u64_map {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap;   /* power of two, or 0 before first insert */
    size_t count;
} hk_u64_map;

void hk_u64_map_init(hk_u64_map *m);
void hk_u64_map_free(hk_u64_map *m);
void hk_u64_map_clear(hk_u64_map *m);
/* reserve room for n entries without growing later; 0 or -1 (out of memory) */
int hk_u64_map_reserve(hk_u64_map *m, size_t n);
/* 1 and *out set when found, 0 when absent */
int hk_u64_map_get(const hk_u64_map *m, uint64_t key, uint32_t *out);
/* insert or overwrite; 0, or -1 when out of memory (map unchanged) */
int hk_u64_map_put(hk_u64_map *m, uint64_t key, uint32_t val);
/* removes key if present (backward-shift deletion keeps probe chains intact); 1 if removed */
int hk_u64_map_del(hk_u64_map *m, uint64_t key);
size_t hk_u64_map_memsize(const hk_u64_map *m);

static inline uint64_t hk_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

#endif
