/* u64_map.c — see u64_map.h. */
#include "u64_map.h"
#include "hot.h"

#include <stdlib.h>
#include <string.h>

void hk_u64_map_init(hk_u64_map *m) { memset(m, 0, sizeof(*m)); }

void hk_u64_map_free(hk_u64_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

void hk_u64_map_clear(hk_u64_map *m)
{
    if (m->keys) memset(m->keys, 0, m->cap * sizeof(*m->keys));
    m->count = 0;
}

static size_t slot_of(const uint64_t *keys, size_t cap, uint64_t key)
{
    size_t mask = cap - 1, i = (size_t)hk_mix64(key) & mask;
    while (keys[i] != 0 && keys[i] != key) i = (i + 1) & mask;
    return i;
}

static int rehash(hk_u64_map *m, size_t cap)
{
    uint64_t *keys = calloc(cap, sizeof(*keys));
    uint32_t *vals = malloc(cap * sizeof(*vals));
    if (!keys || !vals) { free(keys); free(vals); return -1; }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == 0) continue;
        size_t s = slot_of(keys, cap, m->keys[i]);
        keys[s] = m->keys[i];
        vals[s] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int hk_u64_map_reserve(hk_u64_map *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 64;
    while (cap < n * 2) cap *= 2;
    return cap == m->cap ? 0 : rehash(m, cap);
}

HK_HOT int hk_u64_map_get(const hk_u64_map *m, uint64_t key, uint32_t *out)
{
    if (m->cap == 0) return 0;
    size_t s = slot_of(m->keys, m->cap, key);
    if (m->keys[s] == 0) return 0;
    *out = m->vals[s];
    return 1;
}

int hk_u64_map_put(hk_u64_map *m, uint64_t key, uint32_t val)
{
    if ((m->count + 1) * 2 > m->cap && hk_u64_map_reserve(m, m->count + 1) < 0) return -1;
    size_t s = slot_of(m->keys, m->cap, key);
    if (m->keys[s] == 0) m->count++;
    m->keys[s] = key;
    m->vals[s] = val;
    return 0;
}

size_t hk_u64_map_memsize(const hk_u64_map *m)
{
    return m->cap * (sizeof(*m->keys) + sizeof(*m->vals));
}

int hk_u64_map_del(hk_u64_map *m, uint64_t key)
{
    if (m->cap == 0) return 0;
    size_t mask = m->cap - 1, i = slot_of(m->keys, m->cap, key);
    if (m->keys[i] == 0) return 0;
    /* shift later members of the chain back into the hole, unless their home
     * slot lies cyclically after the hole (they would become unreachable) */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (m->keys[j] == 0) break;
        size_t home = (size_t)hk_mix64(m->keys[j]) & mask;
        int between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (between) continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->keys[i] = 0;
    m->count--;
    return 1;
}
