/* profile.c — see profile.h. Growth of the pools is amortised doubling. */
#include "profile.h"

#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* grow *arr (elements of elem bytes) so it can hold need; sets oom on failure */
static int reserve(hk_profile *p, void **arr, size_t *cap, size_t need, size_t elem)
{
    if (hk_array_grow(arr, cap, need, elem) == 0) return 0;
    p->oom = 1;
    return -1;
}

hk_profile *hk_profile_new(void)
{
    hk_profile *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    if (hk_strtab_init(&p->strings) < 0) { free(p); return NULL; }
    hk_intern_init(&p->function_index);
    hk_intern_init(&p->location_index);
    hk_u64_map_init(&p->stack_index);
    hk_intern_init(&p->label_index);
    return p;
}

void hk_profile_free(hk_profile *p)
{
    if (!p) return;
    hk_strtab_free(&p->strings);
    hk_intern_free(&p->function_index);
    hk_intern_free(&p->location_index);
    hk_u64_map_free(&p->stack_index);
    free(p->stacks);
    hk_intern_free(&p->label_index);
    free(p->label_set_off);
    free(p->functions);
    free(p->locations);
    free(p->samples);
    free(p->values);
    free(p->label_pool);
    free(p->comments);
    free(p->fold_edges);
    free(p);
}

uint32_t hk_profile_string_n(hk_profile *p, const char *s, size_t len)
{
    int64_t i = hk_strtab_intern(&p->strings, s, len);
    if (i < 0) { p->oom = 1; return 0; }
    return (uint32_t)i;
}

uint32_t hk_profile_string(hk_profile *p, const char *s)
{
    return hk_profile_string_n(p, s ? s : "", s ? strlen(s) : 0);
}

const char *hk_profile_str(const hk_profile *p, uint32_t idx)
{
    if (idx >= p->strings.count) return "";
    return hk_strtab_get(&p->strings, idx, NULL);
}

int hk_profile_add_sample_type(hk_profile *p, const char *type, const char *unit)
{
    if (p->nvalues >= HK_MAX_SAMPLE_TYPES || p->nsamples) return -1;
    p->sample_types[p->nvalues].type = hk_profile_string(p, type);
    p->sample_types[p->nvalues].unit = hk_profile_string(p, unit);
    p->nvalues++;
    return p->oom ? -1 : 0;
}

uint32_t hk_profile_function(hk_profile *p, uint32_t name, uint32_t system_name,
                             uint32_t filename, int64_t start_line)
{
    uint32_t key[5] = {name, system_name, filename, (uint32_t)start_line,
                       (uint32_t)((uint64_t)start_line >> 32)};
    int64_t id = hk_intern_seq(&p->function_index, key, 5);
    if (id < 0) { p->oom = 1; return 0; }
    if ((size_t)id == p->nfunctions) {
        if (reserve(p, (void **)&p->functions, &p->functions_cap, p->nfunctions + 1,
                    sizeof(*p->functions)) < 0)
            return 0;
        p->functions[p->nfunctions++] = (hk_function){name, system_name, filename, start_line};
    }
    return (uint32_t)id + 1;
}

uint32_t hk_profile_location(hk_profile *p, uint32_t function_id, int64_t line)
{
    uint32_t key[3] = {function_id, (uint32_t)line, (uint32_t)((uint64_t)line >> 32)};
    int64_t id = hk_intern_seq(&p->location_index, key, 3);
    if (id < 0) { p->oom = 1; return 0; }
    if ((size_t)id == p->nlocations) {
        if (reserve(p, (void **)&p->locations, &p->locations_cap, p->nlocations + 1,
                    sizeof(*p->locations)) < 0)
            return 0;
        p->locations[p->nlocations++] = (hk_location){function_id, line};
    }
    return (uint32_t)id + 1;
}

/* the offset in label_pool of the set of labels, stored once; -1 when out of memory */
static int64_t label_set(hk_profile *p, const hk_label *labels, uint32_t nlabel)
{
    uint32_t key[5 * 16];
    if (nlabel > 16) { /* a rare set of many labels is stored as it comes */
        size_t off = p->label_len;
        if (reserve(p, (void **)&p->label_pool, &p->label_cap, p->label_len + nlabel, sizeof(*p->label_pool)) < 0)
            return -1;
        memcpy(p->label_pool + off, labels, nlabel * sizeof(*labels));
        p->label_len += nlabel;
        return (int64_t)off;
    }
    for (uint32_t j = 0; j < nlabel; j++) {
        uint64_t num = (uint64_t)labels[j].num;
        uint32_t *k = key + 5 * j;
        k[0] = labels[j].key, k[1] = labels[j].str, k[2] = labels[j].num_unit;
        k[3] = (uint32_t)num, k[4] = (uint32_t)(num >> 32);
    }
    size_t before = hk_intern_count(&p->label_index);
    int64_t id = hk_intern_seq(&p->label_index, key, 5 * nlabel);
    if (id < 0) return -1;
    if ((size_t)id < before) return p->label_set_off[id];
    if (reserve(p, (void **)&p->label_set_off, &p->label_sets_cap, (size_t)id + 1, sizeof(*p->label_set_off)) < 0 ||
        reserve(p, (void **)&p->label_pool, &p->label_cap, p->label_len + nlabel, sizeof(*p->label_pool)) < 0)
        return -1;
    memcpy(p->label_pool + p->label_len, labels, nlabel * sizeof(*labels));
    p->label_set_off[id] = (uint32_t)p->label_len;
    p->label_len += nlabel;
    return p->label_set_off[id];
}

int hk_profile_reserve(hk_profile *p, size_t n)
{
    if (reserve(p, (void **)&p->samples, &p->samples_cap, n, sizeof(*p->samples)) < 0 ||
        reserve(p, (void **)&p->values, &p->values_cap, n * p->nvalues, sizeof(*p->values)) < 0)
        return -1;
    return 0;
}

uint32_t hk_profile_stack_append(hk_profile *p, uint32_t parent, uint32_t loc)
{
    if (p->oom) return 0;
    if (p->nstacks >= UINT32_MAX - 1 ||
        reserve(p, (void **)&p->stacks, &p->stacks_cap, p->nstacks + 1, sizeof(*p->stacks)) < 0) {
        p->oom = 1;
        return 0;
    }
    p->stacks[p->nstacks++] = (hk_stack_node){parent, loc};
    return (uint32_t)p->nstacks;
}

uint32_t hk_profile_stack(hk_profile *p, uint32_t parent, uint32_t loc)
{
    uint64_t key = (uint64_t)parent << 32 | loc;
    uint32_t id;
    if (hk_u64_map_get(&p->stack_index, key, &id)) return id;
    id = hk_profile_stack_append(p, parent, loc);
    if (id && hk_u64_map_put(&p->stack_index, key, id) < 0) {
        p->nstacks--;
        p->oom = 1;
        return 0;
    }
    return id;
}

int hk_profile_reserve_stacks(hk_profile *p, size_t n)
{
    return reserve(p, (void **)&p->stacks, &p->stacks_cap, p->nstacks + n, sizeof(*p->stacks));
}

const uint32_t *hk_profile_stack_locs(const hk_profile *p, uint32_t stack, uint32_t nloc, hk_locbuf *b)
{
    if (nloc >= b->cap && hk_array_grow((void **)&b->items, &b->cap, (size_t)nloc + 1, sizeof(*b->items)) < 0) {
        b->oom = 1;
        return NULL;
    }
    uint32_t n = 0;
    for (uint32_t s = stack; s && n < nloc; s = p->stacks[s - 1].parent) b->items[n++] = p->stacks[s - 1].loc;
    return b->items;
}

void hk_locbuf_free(hk_locbuf *b)
{
    free(b->items);
    b->items = NULL;
    b->cap = 0;
}

int hk_profile_add_sample(hk_profile *p, const uint32_t *locs, uint32_t nloc,
                          const int64_t *values, const hk_label *labels, uint32_t nlabel)
{
    uint32_t stack = 0;
    for (uint32_t k = nloc; k-- > 0 && !p->oom;) stack = hk_profile_stack(p, stack, locs[k]);
    if (p->oom) return -1;
    return hk_profile_add_sample_stack(p, stack, nloc, values, labels, nlabel);
}

int hk_profile_add_sample_stack(hk_profile *p, uint32_t stack, uint32_t nloc,
                                const int64_t *values, const hk_label *labels, uint32_t nlabel)
{
    if (p->oom) return -1;
    if (p->label_len + nlabel > UINT32_MAX) {
        p->oom = 1;
        return -1;
    }
    int64_t label_off = nlabel ? label_set(p, labels, nlabel) : 0;
    if (label_off < 0) {
        p->oom = 1;
        return -1;
    }
    if (reserve(p, (void **)&p->samples, &p->samples_cap, p->nsamples + 1, sizeof(*p->samples)) < 0 ||
        reserve(p, (void **)&p->values, &p->values_cap, (p->nsamples + 1) * p->nvalues,
                sizeof(*p->values)) < 0)
        return -1;
    hk_sample *s = &p->samples[p->nsamples];
    s->stack = stack;
    s->nloc = nloc;
    s->label_off = (uint32_t)label_off;
    s->nlabel = nlabel;
    if (p->nvalues) memcpy(p->values + p->nsamples * p->nvalues, values, p->nvalues * sizeof(*values));
    p->nsamples++;
    return 0;
}

int hk_profile_add_comment(hk_profile *p, const char *text)
{
    uint32_t s = hk_profile_string(p, text);
    if (reserve(p, (void **)&p->comments, &p->comments_cap, p->ncomments + 1, sizeof(*p->comments)) < 0)
        return -1;
    p->comments[p->ncomments++] = s;
    return p->oom ? -1 : 0;
}

int hk_profile_add_fold_edge(hk_profile *p, const hk_fold_edge *e)
{
    if (reserve(p, (void **)&p->fold_edges, &p->fold_edges_cap, p->nfold_edges + 1, sizeof(*p->fold_edges)) < 0)
        return -1;
    p->fold_edges[p->nfold_edges++] = *e;
    return 0;
}

size_t hk_profile_default_value(const hk_profile *p)
{
    for (size_t i = 0; i < p->nvalues; i++)
        if (p->default_sample_type && p->sample_types[i].type == p->default_sample_type) return i;
    return p->nvalues ? p->nvalues - 1 : 0;
}

int hk_profile_find_value(const hk_profile *p, const char *type)
{
    for (size_t i = 0; i < p->nvalues; i++)
        if (strcmp(hk_profile_str(p, p->sample_types[i].type), type) == 0) return (int)i;
    return -1;
}

int64_t hk_profile_total(const hk_profile *p, size_t vi)
{
    int64_t t = 0;
    if (vi >= p->nvalues) return 0;
    for (size_t i = 0; i < p->nsamples; i++) t = hk_add_sat(t, p->values[i * p->nvalues + vi]);
    return t;
}

int hk_profile_function_sums(const hk_profile *p, size_t vi, int64_t *self, int64_t *cum)
{
    size_t nf = p->nfunctions, nstacks = p->nstacks + 1; /* stack 0: no locations */
    size_t *stamp = calloc(nf + 1, sizeof(*stamp));            /* 1 + the last stack that counted it */
    int64_t *by_stack = calloc(nstacks, sizeof(*by_stack));     /* the samples' values summed per stack */
    uint32_t *depth = calloc(nstacks, sizeof(*depth));          /* a sampled stack's depth, else 0 */
    hk_locbuf b = {0};
    if (!stamp || !by_stack || !depth) {
        free(stamp);
        free(by_stack);
        free(depth);
        return -1;
    }
    memset(self, 0, nf * sizeof(*self));
    memset(cum, 0, nf * sizeof(*cum));
    /* per stack first: a million raw samples of fifty thousand stacks walk fifty thousand */
    for (size_t i = 0; i < p->nsamples; i++) {
        uint32_t k = p->samples[i].stack;
        by_stack[k] = hk_add_sat(by_stack[k], hk_profile_sample_values(p, i)[vi]);
        depth[k] = p->samples[i].nloc;
    }
    for (size_t k = 1; k < nstacks; k++) {
        uint32_t nloc = depth[k];
        int64_t v = by_stack[k];
        if (v == 0) continue; /* adds nothing; the trie's inner stacks are here too */
        const uint32_t *locs = hk_profile_stack_locs(p, (uint32_t)k, nloc, &b);
        if (!locs) break;
        if (nloc) {
            uint32_t f = hk_profile_loc(p, locs[0])->function_id - 1;
            self[f] = hk_add_sat(self[f], v);
        }
        for (uint32_t j = 0; j < nloc; j++) {
            uint32_t f = hk_profile_loc(p, locs[j])->function_id - 1;
            if (stamp[f] == k + 1) continue;
            stamp[f] = k + 1;
            cum[f] = hk_add_sat(cum[f], v);
        }
    }
    free(stamp);
    free(by_stack);
    free(depth);
    hk_locbuf_free(&b);
    return b.oom ? -1 : 0;
}

int hk_profile_folded(const hk_profile *p, hk_folded *f)
{
    for (size_t i = 0; i < p->ncomments; i++) {
        memset(f, 0, sizeof(*f));
        if (sscanf(hk_profile_str(p, p->comments[i]), "max_paths=%llu folded_calls=%llu folded_%15[a-z]=%lld",
                   &f->max_paths, &f->calls, f->unit, &f->measure) == 4 &&
            f->calls > 0)
            return 1;
    }
    return 0;
}

size_t hk_profile_memsize(const hk_profile *p)
{
    return sizeof(*p) + hk_strtab_memsize(&p->strings) + hk_intern_memsize(&p->function_index) +
           hk_intern_memsize(&p->location_index) + p->functions_cap * sizeof(*p->functions) +
           p->locations_cap * sizeof(*p->locations) + p->samples_cap * sizeof(*p->samples) +
           hk_u64_map_memsize(&p->stack_index) + p->stacks_cap * sizeof(*p->stacks) + p->values_cap * sizeof(*p->values) +
           p->label_cap * sizeof(*p->label_pool) + hk_intern_memsize(&p->label_index) +
           p->label_sets_cap * sizeof(*p->label_set_off) + p->comments_cap * sizeof(*p->comments) +
           p->fold_edges_cap * sizeof(*p->fold_edges);
}
