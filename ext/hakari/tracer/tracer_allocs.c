/* tracer_allocs.c — trace mode's `allocations: true`: the table of sites
 * where the program made its objects (tracer_int.h, hk_talloc). tracer.c's
 * NEWOBJ hook fills it, tracer_build.c makes each site a sample.
 *
 * A site is an object's class, the source line that made it and the call it
 * was made in: the innermost counted call of the context whose events run on
 * the allocating native thread, as that call's time would be. So a block's
 * objects go to the method that yielded to it when that method is counted
 * (Integer#times for `n.times { ... }`), an excluded method's to its caller;
 * hakari's own API's are not counted. The line is the innermost Ruby frame's,
 * so a C method's objects carry the line that called it. Objects without a
 * class (Ruby's internal ones: instruction sequences, hidden buffers) are not
 * counted: no Ruby code can see them.
 *
 * The table grows with malloc when a new (node, line, class, file) appears,
 * never with a Ruby object (the hook runs inside an allocation): memory grows
 * with distinct sites, not with objects. The classes and paths it keeps are
 * marked, and so pinned against GC.compact, until the profile is built.
 */
#include "tracer_int.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"

static uint32_t cache_slot(const uint32_t *key)
{
    uint32_t h = key[0] * 0x9e3779b1u ^ key[1] * 0x85ebca6bu ^ key[2] ^ key[3] ^ key[4] ^ key[5];
    return (h ^ h >> 15) & (HK_ALLOC_CACHE - 1);
}

hk_talloc *hk_tracer_alloc_site(hk_tracer *t, uint32_t node, int32_t line, VALUE klass, VALUE file)
{
    uint32_t key[6] = {node, (uint32_t)line, (uint32_t)klass, (uint32_t)((uint64_t)klass >> 32),
                       (uint32_t)file, (uint32_t)((uint64_t)file >> 32)};
    uint32_t *slot = &t->alloc_cache[cache_slot(key)];
    if (*slot) {
        hk_talloc *a = &t->allocs[*slot - 1];
        if (a->node == node && a->line == line && a->klass == klass && a->file == file) return a;
    }
    int64_t id = hk_intern_find(&t->alloc_index, key, 6);
    if (id < 0) {
        if (hk_array_grow((void **)&t->allocs, &t->allocs_cap, t->nallocs + 1, sizeof(*t->allocs)) < 0) return NULL;
        id = hk_intern_seq(&t->alloc_index, key, 6);
        if (id < 0) return NULL;
        t->allocs[id] = (hk_talloc){node, line, klass, file, 0, 0};
        t->nallocs = (size_t)id + 1;
    }
    *slot = (uint32_t)id + 1;
    return &t->allocs[id];
}

void hk_tracer_allocs_free(hk_tracer *t)
{
    free(t->allocs);
    hk_intern_free(&t->alloc_index);
}

void hk_tracer_allocs_mark(const hk_tracer *t)
{
    for (size_t i = 0; i < t->nallocs; i++) {
        rb_gc_mark(t->allocs[i].klass);
        rb_gc_mark(t->allocs[i].file);
    }
}

size_t hk_tracer_allocs_memsize(const hk_tracer *t)
{
    return t->allocs_cap * sizeof(hk_talloc) + hk_intern_memsize(&t->alloc_index);
}
