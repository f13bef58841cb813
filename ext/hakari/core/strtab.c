/* strtab.c — see strtab.h. */
#include "strtab.h"

#include <stdlib.h>
#include <string.h>

#include "u64_map.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
    return hk_mix64(h ^ len);
}

int hk_strtab_init(hk_strtab *t)
{
    memset(t, 0, sizeof(*t));
    if (hk_strtab_intern(t, "", 0) == 0) return 0;
    hk_strtab_free(t); /* a partial table must not leak */
    return -1;
}

void hk_strtab_free(hk_strtab *t)
{
    free(t->bytes);
    free(t->offs);
    free(t->lens);
    free(t->hashes);
    free(t->index);
    memset(t, 0, sizeof(*t));
}

static size_t probe(const hk_strtab *t, uint64_t h, const char *s, size_t len)
{
    size_t mask = t->index_cap - 1, i = (size_t)h & mask;
    for (;;) {
        uint32_t id = t->index[i];
        if (id == 0) return i;
        id--;
        if (t->hashes[id] == h && t->lens[id] == len && memcmp(t->bytes + t->offs[id], s, len) == 0)
            return i;
        i = (i + 1) & mask;
    }
}

static int grow_index(hk_strtab *t)
{
    size_t cap = t->index_cap ? t->index_cap * 2 : 256;
    uint32_t *index = calloc(cap, sizeof(*index));
    if (!index) return -1;
    for (size_t id = 0; id < t->count; id++) {
        size_t i = (size_t)t->hashes[id] & (cap - 1);
        while (index[i]) i = (i + 1) & (cap - 1);
        index[i] = (uint32_t)id + 1;
    }
    free(t->index);
    t->index = index;
    t->index_cap = cap;
    return 0;
}

static int grow_rows(hk_strtab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    uint32_t *offs = realloc(t->offs, cap * sizeof(*offs));
    if (!offs) return -1;
    t->offs = offs;
    uint32_t *lens = realloc(t->lens, cap * sizeof(*lens));
    if (!lens) return -1;
    t->lens = lens;
    uint64_t *hashes = realloc(t->hashes, cap * sizeof(*hashes));
    if (!hashes) return -1;
    t->hashes = hashes;
    t->cap = cap;
    return 0;
}

int64_t hk_strtab_intern(hk_strtab *t, const char *s, size_t len)
{
    if (len >= UINT32_MAX) return -1;
    if ((t->count + 1) * 2 > t->index_cap && grow_index(t) < 0) return -1;
    uint64_t h = hash_bytes(s, len);
    size_t slot = probe(t, h, s, len);
    if (t->index[slot]) return (int64_t)t->index[slot] - 1;
    if (t->count == t->cap && grow_rows(t) < 0) return -1;
    if (t->bytes_len + len + 1 > t->bytes_cap) {
        size_t cap = t->bytes_cap ? t->bytes_cap : 4096;
        while (cap < t->bytes_len + len + 1) cap *= 2;
        if (cap > UINT32_MAX) return -1;
        char *b = realloc(t->bytes, cap);
        if (!b) return -1;
        t->bytes = b;
        t->bytes_cap = cap;
    }
    if (len) memcpy(t->bytes + t->bytes_len, s, len);
    t->bytes[t->bytes_len + len] = '\0';
    t->offs[t->count] = (uint32_t)t->bytes_len;
    t->lens[t->count] = (uint32_t)len;
    t->hashes[t->count] = h;
    t->bytes_len += len + 1;
    t->index[slot] = (uint32_t)t->count + 1;
    return (int64_t)t->count++;
}

const char *hk_strtab_get(const hk_strtab *t, uint32_t i, size_t *len)
{
    if (len) *len = t->lens[i];
    return t->bytes + t->offs[i];
}

size_t hk_strtab_memsize(const hk_strtab *t)
{
    return t->bytes_cap + t->cap * (2 * sizeof(uint32_t) + sizeof(uint64_t)) +
           t->index_cap * sizeof(uint32_t);
}
