/* pair_map.c — see pair_map.h. */
#include "pair_map.h"
#include "hot.h"

#include <stdlib.h>
#include <string.h>

void hk_pair_map_init(hk_pair_map *m) { memset(m, 0, sizeof(*m)); }

void hk_pair_map_free(hk_pair_map *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

void hk_pair_map_clear(hk_pair_map *m)
{
    if (m->count) memset(m->slots, 0, m->cap * sizeof(*m->slots));
    m->count = 0;
}

static size_t find(const hk_pair_map *m, uint64_t a, uint32_t b)
{
    size_t mask = m->cap - 1, i = hk_pair_home(m, a, b);
    while (m->slots[i].a != 0 && (m->slots[i].a != a || m->slots[i].b != b)) i = (i + 1) & mask;
    return i;
}

int hk_pair_map_reserve(hk_pair_map *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 64;
    while (cap < n * 2) cap *= 2;
    if (cap == m->cap) return 0;
    hk_pair_map bigger = {calloc(cap, sizeof(hk_pair_entry)), cap, m->count};
    if (!bigger.slots) return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].a) bigger.slots[find(&bigger, m->slots[i].a, m->slots[i].b)] = m->slots[i];
    free(m->slots);
    *m = bigger;
    return 0;
}

HK_HOT int hk_pair_map_get(const hk_pair_map *m, uint64_t a, uint32_t b, uint32_t *out)
{
    if (m->cap == 0) return 0;
    const hk_pair_entry *e = &m->slots[find(m, a, b)];
    if (e->a == 0) return 0;
    *out = e->val;
    return 1;
}

int hk_pair_map_put(hk_pair_map *m, uint64_t a, uint32_t b, uint32_t val)
{
    if ((m->count + 1) * 2 > m->cap && hk_pair_map_reserve(m, m->count + 1) < 0) return -1;
    hk_pair_entry *e = &m->slots[find(m, a, b)];
    if (e->a == 0) m->count++;
    *e = (hk_pair_entry){a, b, val};
    return 0;
}

size_t hk_pair_map_memsize(const hk_pair_map *m) { return m->cap * sizeof(hk_pair_entry); }
