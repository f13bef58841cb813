/* intern_table.h — interns sequences of uint32 (the sampler's stacks: location
 * ids, then the thread's sequence number; the tracer's paths) into dense ids 0,1,2…
 *
 * Layout: every distinct sequence is stored once, back to back, in `pool`;
 * `entries[id]` gives its offset, length and hash; `index` is an open-addressing
 * table of (id + 1), 0 meaning empty. Memory grows with the number of distinct
 * sequences, never with how often one is seen — that is what bounds a long
 * sampling run.
 * ctx: core; the owner serialises access.
 */
#ifndef HK_INTERN_TABLE_H
#define HK_INTERN_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct hk_intern_entry {
    uint32_t off, len;
    uint64_t hash;
} hk_intern_entry;

typedef struct hk_intern_table {
    uint32_t *pool;
    size_t pool_len, pool_cap;
    hk_intern_entry *entries;
    size_t count, entries_cap;
    uint32_t *index;
    size_t index_cap; /* power of two */
} hk_intern_table;

void hk_intern_init(hk_intern_table *t);
void hk_intern_free(hk_intern_table *t);
/* empties the table and keeps its room: ids start again at 0 */
void hk_intern_clear(hk_intern_table *t);
/* Room for seqs sequences of items items in all, so that interning up to that
 * much allocates nothing: for callers that must not call malloc at a bad time
 * (the sampler's job: in a heap the program has fragmented, one realloc that
 * consolidates glibc's free lists costs 50-250 µs). 0, or -1 when out of memory
 * (the table stays usable, with whatever room it had). */
int hk_intern_reserve(hk_intern_table *t, size_t seqs, size_t items);
/* id of the sequence (existing or new), or -1 when out of memory / too large */
int64_t hk_intern_seq(hk_intern_table *t, const uint32_t *items, uint32_t n);
/* id if present, else -1; never allocates */
int64_t hk_intern_find(const hk_intern_table *t, const uint32_t *items, uint32_t n);
/* items of id (id < count); *n receives the length */
const uint32_t *hk_intern_get(const hk_intern_table *t, uint32_t id, uint32_t *n);
static inline size_t hk_intern_count(const hk_intern_table *t) { return t->count; }
size_t hk_intern_memsize(const hk_intern_table *t);
uint64_t hk_intern_hash(const uint32_t *items, uint32_t n);

#endif
