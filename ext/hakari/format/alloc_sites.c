/* alloc_sites.c — see alloc_sites.h. */
#include "alloc_sites.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "intern_table.h"

/* the string id of a label key, or UINT32_MAX when the profile has no such string */
static uint32_t key_id(const hk_profile *p, const char *name)
{
    for (size_t i = 0; i < p->strings.count; i++)
        if (strcmp(hk_profile_str(p, (uint32_t)i), name) == 0) return (uint32_t)i;
    return UINT32_MAX;
}

int hk_alloc_sites_present(const hk_profile *p)
{
    return hk_profile_find_value(p, "alloc_objects") >= 0 && key_id(p, "class") != UINT32_MAX;
}

static int by_objects_desc(const void *a, const void *b)
{
    const hk_alloc_site *x = a, *y = b;
    if (x->objects != y->objects) return x->objects < y->objects ? 1 : -1;
    if (x->func != y->func) return x->func < y->func ? -1 : 1;
    if (x->klass != y->klass) return x->klass < y->klass ? -1 : 1;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

int hk_alloc_sites_collect(const hk_profile *p, hk_alloc_sites *out)
{
    memset(out, 0, sizeof(*out));
    int vo = hk_profile_find_value(p, "alloc_objects"), vb = hk_profile_find_value(p, "alloc_space");
    uint32_t kclass = key_id(p, "class"), kfile = key_id(p, "file"), kline = key_id(p, "line");
    if (vo < 0 || kclass == UINT32_MAX) return 0;
    hk_intern_table index;
    hk_intern_init(&index);
    size_t cap = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const hk_label *l = hk_profile_sample_labels(p, i);
        uint32_t klass = UINT32_MAX, file = 0;
        int64_t line = 0;
        for (uint32_t j = 0; j < p->samples[i].nlabel; j++) {
            if (l[j].key == kclass) klass = l[j].str;
            else if (l[j].key == kfile) file = l[j].str;
            else if (l[j].key == kline) line = l[j].num;
        }
        if (klass == UINT32_MAX) continue; /* a call's sample, not a site's */
        const int64_t *v = hk_profile_sample_values(p, i);
        uint32_t func = 0;
        if (p->samples[i].nloc) {
            uint32_t loc = p->stacks[p->samples[i].stack - 1].loc;
            if (loc >= 1 && loc <= p->nlocations) func = hk_profile_loc(p, loc)->function_id;
        }
        uint32_t key[5] = {func, klass, file, (uint32_t)line, (uint32_t)((uint64_t)line >> 32)};
        int64_t id = hk_intern_seq(&index, key, 5);
        if (id < 0 || ((size_t)id == out->n && hk_array_grow((void **)&out->sites, &cap, out->n + 1, sizeof(*out->sites)) < 0))
            goto oom;
        if ((size_t)id == out->n) out->sites[out->n++] = (hk_alloc_site){func, klass, file, line, 0, 0};
        hk_alloc_site *s = &out->sites[id];
        s->objects = hk_add_sat(s->objects, v[vo]);
        out->objects = hk_add_sat(out->objects, v[vo]);
        if (vb >= 0) {
            s->bytes = hk_add_sat(s->bytes, v[vb]);
            out->bytes = hk_add_sat(out->bytes, v[vb]);
        }
    }
    hk_intern_free(&index);
    if (out->n) qsort(out->sites, out->n, sizeof(*out->sites), by_objects_desc);
    return 0;
oom:
    hk_intern_free(&index);
    hk_alloc_sites_free(out);
    return -1;
}

void hk_alloc_sites_free(hk_alloc_sites *s)
{
    free(s->sites);
    memset(s, 0, sizeof(*s));
}

int hk_alloc_sites_report(const hk_profile *p, size_t top_n, hk_buf *out)
{
    if (!hk_alloc_sites_present(p)) return 0;
    hk_alloc_sites s;
    if (hk_alloc_sites_collect(p, &s) < 0) return -1;
    hk_buf_printf(out, "\nAllocations: %" PRId64 " objects, %" PRId64 " bytes of heap slots, at %zu sites",
                  s.objects, s.bytes, s.n);
    if (top_n && s.n > top_n) hk_buf_printf(out, " (the top %zu)", top_n);
    hk_buf_puts(out, "\n\n     objects        bytes  %objects  class  method  file:line\n");
    for (size_t i = 0; i < s.n && (top_n == 0 || i < top_n); i++) {
        const hk_alloc_site *a = &s.sites[i];
        hk_buf_printf(out, "%12" PRId64 " %12" PRId64 " %8.2f%%  ", a->objects, a->bytes, hk_ct_pct(a->objects, s.objects));
        hk_ct_put_clean(out, hk_profile_str(p, a->klass));
        hk_buf_puts(out, "  ");
        hk_ct_put_clean(out, a->func ? hk_profile_str(p, hk_profile_func(p, a->func)->name) : "[outside every method]");
        hk_buf_puts(out, "  ");
        hk_ct_put_clean(out, hk_profile_str(p, a->file));
        if (a->line > 0) hk_buf_printf(out, ":%" PRId64, a->line);
        hk_buf_putc(out, '\n');
    }
    hk_alloc_sites_free(&s);
    return hk_buf_ok(out) ? 0 : -1;
}
