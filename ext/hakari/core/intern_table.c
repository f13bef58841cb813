/* intern_table.c — see intern_table.h. */
#include "buf.h"
#include "intern_table.h"
#include "hot.h"

#include <stdlib.h>
#include <string.h>

#include "u64_map.h"

void hk_intern_init(hk_intern_table *t) { memset(t, 0, sizeof(*t)); }

void hk_intern_free(hk_intern_table *t)
{
    free(t->pool);
    free(t->entries);
    free(t->index);
    memset(t, 0, sizeof(*t));
}

void hk_intern_clear(hk_intern_table *t)
{
    if (t->count) memset(t->index, 0, t->index_cap * sizeof(*t->index));
    t->count = 0;
    t->pool_len = 0;
}

uint64_t hk_intern_hash(const uint32_t *items, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ items[i]) * 0x100000001b3ULL + (h >> 29);
    return hk_mix64(h);
}

static int same(const hk_intern_table *t, const hk_intern_entry *e, uint64_t h,
                const uint32_t *items, uint32_t n)
{
    return e->hash == h && e->len == n &&
           (n == 0 || memcmp(t->pool + e->off, items, n * sizeof(*items)) == 0);
}

/* slot holding the sequence, or the empty slot where it would go */
static size_t probe(const hk_intern_table *t, uint64_t h, const uint32_t *items, uint32_t n)
{
    size_t mask = t->index_cap - 1, i = (size_t)h & mask;
    while (t->index[i] != 0 && !same(t, &t->entries[t->index[i] - 1], h, items, n))
        i = (i + 1) & mask;
    return i;
}

int64_t hk_intern_find(const hk_intern_table *t, const uint32_t *items, uint32_t n)
{
    if (t->index_cap == 0) return -1;
    uint64_t h = hk_intern_hash(items, n);
    size_t s = probe(t, h, items, n);
    return t->index[s] ? (int64_t)t->index[s] - 1 : -1;
}

/* a new index of cap slots (a power of two) holding every id */
static int rehash(hk_intern_table *t, size_t cap)
{
    uint32_t *index = calloc(cap, sizeof(*index));
    if (!index) return -1;
    for (size_t id = 0; id < t->count; id++) {
        size_t i = (size_t)t->entries[id].hash & (cap - 1);
        while (index[i] != 0) i = (i + 1) & (cap - 1);
        index[i] = (uint32_t)id + 1;
    }
    free(t->index);
    t->index = index;
    t->index_cap = cap;
    return 0;
}

static int grow_index(hk_intern_table *t) { return rehash(t, t->index_cap ? t->index_cap * 2 : 256); }

int hk_intern_reserve(hk_intern_table *t, size_t seqs, size_t items)
{
    size_t cap = t->index_cap ? t->index_cap : 256;
    while (cap < seqs * 2) {
        if (cap > SIZE_MAX / 4) return -1;
        cap *= 2;
    }
    if (cap != t->index_cap && rehash(t, cap) < 0) return -1;
    if (hk_array_grow((void **)&t->entries, &t->entries_cap, seqs, sizeof(*t->entries)) < 0) return -1;
    return hk_array_grow((void **)&t->pool, &t->pool_cap, items, sizeof(*t->pool));
}

HK_HOT int64_t hk_intern_seq(hk_intern_table *t, const uint32_t *items, uint32_t n)
{
    if ((t->count + 1) * 2 > t->index_cap && grow_index(t) < 0) return -1;
    uint64_t h = hk_intern_hash(items, n);
    size_t s = probe(t, h, items, n);
    if (t->index[s]) return (int64_t)t->index[s] - 1;
    if (t->count >= UINT32_MAX - 1 || t->pool_len + n > UINT32_MAX) return -1;
    if (hk_array_grow((void **)&t->pool, &t->pool_cap, t->pool_len + n, sizeof(*t->pool)) < 0 ||
        hk_array_grow((void **)&t->entries, &t->entries_cap, t->count + 1, sizeof(*t->entries)) < 0)
        return -1;
    if (n) memcpy(t->pool + t->pool_len, items, n * sizeof(*items));
    hk_intern_entry *e = &t->entries[t->count];
    e->off = (uint32_t)t->pool_len;
    e->len = n;
    e->hash = h;
    t->pool_len += n;
    t->index[s] = (uint32_t)t->count + 1;
    return (int64_t)t->count++;
}

const uint32_t *hk_intern_get(const hk_intern_table *t, uint32_t id, uint32_t *n)
{
    const hk_intern_entry *e = &t->entries[id];
    *n = e->len;
    return t->pool ? t->pool + e->off : NULL; /* only empty sequences stored: no pool yet */
}

size_t hk_intern_memsize(const hk_intern_table *t)
{
    return t->pool_cap * sizeof(*t->pool) + t->entries_cap * sizeof(*t->entries) +
           t->index_cap * sizeof(*t->index);
}
