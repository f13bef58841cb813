/* ring.h — a ring of variable-length records of 64-bit words, one producer
 * and one consumer, each on its own thread, neither ever waiting for the
 * other (core: no ruby.h).
 *
 * The sampling job (producer) must not block, allocate or take a lock; the
 * worker (consumer) turns its records into the profile on another core. Each
 * record is contiguous in memory, so either side reads it in place: before it
 * goes a word with its length, and a length of 0 marks the rest of the lap
 * as unused. The producer sees space freed only when it runs short, so it
 * reads the consumer's line rarely.
 *
 * Iterating (hk_ring_first / hk_ring_next) walks the records not yet
 * released; it is for a caller that has stopped both sides (a GC mark).
 */
#ifndef HK_RING_H
#define HK_RING_H

#include <stddef.h>
#include <stdint.h>

typedef struct hk_ring {
    uint64_t *words;
    size_t cap;               /* words; immutable while in use */
    /* the producer's */
    _Alignas(64) uint64_t prod; /* words written, wrap marks included (stored with release) */
    uint64_t cons_seen;       /* the consumer's count as the producer last read it */
    size_t reserved_at;       /* where the reserved record's length word goes */
    /* the consumer's */
    _Alignas(64) uint64_t cons; /* words released (stored with release) */
} hk_ring;

/* 0, or -1 when out of memory. Writes every page of the ring first: the
 * producer then never takes a page fault on a lap's first touch. */
int hk_ring_init(hk_ring *r, size_t cap);
void hk_ring_free(hk_ring *r);
/* ctx: neither side running. Empties the ring and keeps its (already mapped) words. */
void hk_ring_clear(hk_ring *r);

/* producer: room for a record of up to max words, contiguous; NULL when the
 * consumer has not yet released enough (nothing is changed then). */
uint64_t *hk_ring_reserve(hk_ring *r, size_t max);
/* producer: the reserved record holds n words (1 <= n <= its max): publish it */
void hk_ring_commit(hk_ring *r, size_t n);

/* consumer: the oldest record and its length, or NULL when there is none */
const uint64_t *hk_ring_peek(hk_ring *r, size_t *n);
/* consumer: done with the record hk_ring_peek gave */
void hk_ring_release(hk_ring *r);

/* both sides stopped: the records not yet released, oldest first */
const uint64_t *hk_ring_first(const hk_ring *r, uint64_t *cursor, size_t *n);
const uint64_t *hk_ring_next(const hk_ring *r, uint64_t *cursor, size_t *n);

/* words in records written and not yet released (either side may ask; a moment's view) */
size_t hk_ring_used(const hk_ring *r);

#endif
