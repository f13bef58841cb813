/* ring.c — see ring.h. Positions are counts of words ever written (prod) or
 * released (cons); a word's place is its count modulo cap. */
#include "ring.h"

#include "buf.h"

#include <stdlib.h>
#include <string.h>

int hk_ring_init(hk_ring *r, size_t cap)
{
    memset(r, 0, sizeof(*r));
    if (cap < 2) return -1;
    r->words = malloc(cap * sizeof(uint64_t));
    if (!r->words) return -1;
    hk_touch_pages(r->words, cap * sizeof(uint64_t)); /* the producer is the sampling job: it must not fault */
    r->cap = cap;
    return 0;
}

void hk_ring_free(hk_ring *r)
{
    free(r->words);
    memset(r, 0, sizeof(*r));
}

void hk_ring_clear(hk_ring *r)
{
    r->prod = r->cons = r->cons_seen = 0;
    r->reserved_at = 0;
}

static int room_for(hk_ring *r, uint64_t need)
{
    if (r->cap - (r->prod - r->cons_seen) >= need) return 1;
    r->cons_seen = __atomic_load_n(&r->cons, __ATOMIC_ACQUIRE);
    return r->cap - (r->prod - r->cons_seen) >= need;
}

uint64_t *hk_ring_reserve(hk_ring *r, size_t max)
{
    if (max + 1 > r->cap) return NULL;
    size_t at = (size_t)(r->prod % r->cap);
    size_t to_end = r->cap - at;
    if (to_end < max + 1) {
        /* the record must not straddle the end: the rest of this lap is skipped */
        if (!room_for(r, to_end + max + 1)) return NULL;
        r->words[at] = 0;
        __atomic_store_n(&r->prod, r->prod + to_end, __ATOMIC_RELEASE);
        at = 0;
    } else if (!room_for(r, max + 1)) {
        return NULL;
    }
    r->reserved_at = at;
    return r->words + at + 1;
}

void hk_ring_commit(hk_ring *r, size_t n)
{
    r->words[r->reserved_at] = n;
    __atomic_store_n(&r->prod, r->prod + n + 1, __ATOMIC_RELEASE);
}

/* the record at count c (before prod), skipping wrap marks; NULL at prod */
static const uint64_t *record_at(const hk_ring *r, uint64_t *c, uint64_t prod, size_t *n)
{
    while (*c < prod) {
        size_t at = (size_t)(*c % r->cap);
        uint64_t len = r->words[at];
        if (len) {
            *n = (size_t)len;
            return r->words + at + 1;
        }
        *c += r->cap - at;
    }
    return NULL;
}

const uint64_t *hk_ring_peek(hk_ring *r, size_t *n)
{
    uint64_t prod = __atomic_load_n(&r->prod, __ATOMIC_ACQUIRE);
    uint64_t c = r->cons;
    const uint64_t *rec = record_at(r, &c, prod, n);
    if (c != r->cons) __atomic_store_n(&r->cons, c, __ATOMIC_RELEASE); /* past wrap marks */
    return rec;
}

void hk_ring_release(hk_ring *r)
{
    size_t at = (size_t)(r->cons % r->cap);
    __atomic_store_n(&r->cons, r->cons + r->words[at] + 1, __ATOMIC_RELEASE);
}

const uint64_t *hk_ring_first(const hk_ring *r, uint64_t *cursor, size_t *n)
{
    *cursor = r->cons;
    return record_at(r, cursor, r->prod, n);
}

const uint64_t *hk_ring_next(const hk_ring *r, uint64_t *cursor, size_t *n)
{
    *cursor += *n + 1;
    return record_at(r, cursor, r->prod, n);
}

size_t hk_ring_used(const hk_ring *r)
{
    return (size_t)(__atomic_load_n(&r->prod, __ATOMIC_ACQUIRE) - __atomic_load_n(&r->cons, __ATOMIC_ACQUIRE));
}
