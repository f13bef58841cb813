/* sampler_labels.c — the label sets samples carry (Hakari.label).
 *
 * A label set is a list of (key, value) strings sorted by key, interned once
 * per profile: its id (1-based; 0 is no labels) is what a fiber holds, in its
 * fiber-local slot HK_LABELS_FIBER_KEY (Thread#[]), packed with the profile's
 * generation, and what the job copies into a sample's head. A set is stored as
 * the sequence of its strings' indexes in `strings` (key, value, key, value...).
 * The job only reads the slot (when some set was made this profile); the sets
 * are made by Hakari.label and read at build, both with the GVL. The worker
 * never touches them.
 */
#include "sampler_int.h"

#include <string.h>

#include "hot.h"
#include "intern_table.h"
#include "strtab.h"

static hk_strtab strings;
static hk_intern_table sets;
static int tables_ready;
static uint32_t generation; /* the profile's: a slot packed by another profile is no set */
static int used;            /* a set was made in this profile: the job reads the fiber slots */
static uint64_t dropped;    /* merges refused because the table was full */
static ID id_slot;

/* a slot's packing: the generation above HK_LABELS_ID_BITS, the id below */
#define HK_LABELS_ID_BITS 24

void hk_labels_init(void) { id_slot = rb_intern(HK_LABELS_FIBER_KEY); }

void hk_labels_start(void)
{
    if (tables_ready) {
        hk_strtab_free(&strings);
        hk_intern_free(&sets);
    }
    tables_ready = hk_strtab_init(&strings) == 0;
    hk_intern_init(&sets);
    generation = (generation + 1) & 0xffffff;
    used = 0;
    dropped = 0;
}

long hk_labels_pack(uint32_t id) { return id ? (long)((uint64_t)generation << HK_LABELS_ID_BITS | id) : 0; }

uint32_t hk_labels_unpack(long packed)
{
    if (packed <= 0 || !tables_ready || (uint64_t)packed >> HK_LABELS_ID_BITS != generation) return 0;
    uint32_t id = (uint32_t)(packed & ((1L << HK_LABELS_ID_BITS) - 1));
    return id <= hk_intern_count(&sets) ? id : 0;
}

HK_HOT uint32_t hk_labels_of(VALUE thread)
{
    if (!used) return 0;
    VALUE v = rb_thread_local_aref(thread, id_slot);
    return FIXNUM_P(v) ? hk_labels_unpack(FIX2LONG(v)) : 0;
}

uint32_t hk_labels_current(void) { return hk_labels_of(rb_thread_current()); }

uint64_t hk_labels_dropped(void) { return dropped; }

/* key order: bytes, then length */
static int key_cmp(uint32_t a, uint32_t b)
{
    size_t la, lb;
    const char *sa = hk_strtab_get(&strings, a, &la), *sb = hk_strtab_get(&strings, b, &lb);
    int c = memcmp(sa, sb, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

int64_t hk_labels_merge(uint32_t base, const hk_label_kv *kv, size_t n)
{
    if (!tables_ready) return HK_LABELS_NO_MEMORY;
    uint32_t pairs[2 * (HK_MAX_LABELS + 1)];
    uint32_t m = 0;
    if (base) {
        const uint32_t *seq = hk_intern_get(&sets, base - 1, &m);
        memcpy(pairs, seq, m * sizeof(*pairs));
    }
    for (size_t i = 0; i < n; i++) {
        int64_t k = hk_strtab_intern(&strings, kv[i].key, kv[i].klen);
        if (k < 0) return HK_LABELS_NO_MEMORY;
        uint32_t at = 0;
        while (at < m && key_cmp(pairs[at], (uint32_t)k) < 0) at += 2;
        int found = at < m && pairs[at] == (uint32_t)k;
        if (!kv[i].val) { /* nil removes the key */
            if (found) {
                memmove(pairs + at, pairs + at + 2, (m - at - 2) * sizeof(*pairs));
                m -= 2;
            }
            continue;
        }
        int64_t v = hk_strtab_intern(&strings, kv[i].val, kv[i].vlen);
        if (v < 0) return HK_LABELS_NO_MEMORY;
        if (!found) {
            if (m / 2 >= HK_MAX_LABELS) {
                dropped++;
                return HK_LABELS_TOO_MANY;
            }
            memmove(pairs + at + 2, pairs + at, (m - at) * sizeof(*pairs));
            pairs[at] = (uint32_t)k;
            m += 2;
        }
        pairs[at + 1] = (uint32_t)v;
    }
    if (!m) return 0;
    int64_t id = hk_intern_find(&sets, pairs, m);
    if (id < 0) {
        if (hk_intern_count(&sets) >= HK_MAX_LABEL_SETS) {
            dropped++;
            return HK_LABELS_FULL;
        }
        if ((id = hk_intern_seq(&sets, pairs, m)) < 0) return HK_LABELS_NO_MEMORY;
    }
    used = 1;
    return id + 1;
}

size_t hk_labels_get(uint32_t id, hk_label_kv *out, size_t cap)
{
    if (!id || !tables_ready || id > hk_intern_count(&sets)) return 0;
    uint32_t m;
    const uint32_t *seq = hk_intern_get(&sets, id - 1, &m);
    size_t n = 0;
    for (uint32_t i = 0; i + 1 < m && n < cap; i += 2, n++) {
        out[n].key = hk_strtab_get(&strings, seq[i], &out[n].klen);
        out[n].val = hk_strtab_get(&strings, seq[i + 1], &out[n].vlen);
    }
    return n;
}

size_t hk_labels_memsize(void) { return tables_ready ? hk_strtab_memsize(&strings) + hk_intern_memsize(&sets) : 0; }
