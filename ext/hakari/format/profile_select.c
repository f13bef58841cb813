/* profile_select.c — see profile_select.h.
 * Each function is matched against the expressions once, then each sample
 * looks its frames up in that table: a profile of 50 000 stacks is filtered
 * in one pass over its locations.
 */
#include "profile_select.h"

#include "buf.h"

#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 per function whose name matches re (index function id - 1); NULL when out of memory */
static uint8_t *match_functions(const hk_profile *p, const regex_t *re)
{
    uint8_t *m = calloc(p->nfunctions + 1, 1);
    for (size_t f = 0; m && f < p->nfunctions; f++)
        m[f] = regexec(re, hk_profile_str(p, p->functions[f].name), 0, NULL, 0) == 0;
    return m;
}

/* whether a frame of sample i has a function marked in m */
static int any_frame(const hk_profile *p, size_t i, const uint8_t *m)
{
    uint32_t n = 0;
    for (uint32_t s = p->samples[i].stack; s && n < p->samples[i].nloc; s = p->stacks[s - 1].parent, n++)
        if (m[hk_profile_loc(p, p->stacks[s - 1].loc)->function_id - 1]) return 1;
    return 0;
}

static int thread_of(const hk_profile *p, size_t i, int64_t *out)
{
    const hk_label *l = hk_profile_sample_labels(p, i);
    for (uint32_t j = 0; j < p->samples[i].nlabel; j++)
        if (!l[j].str && strcmp(hk_profile_str(p, l[j].key), "thread") == 0) {
            *out = l[j].num;
            return 1;
        }
    return 0;
}

/* whether sample i has the label key=value (a string, or a number written in decimal) */
static int has_tag(const hk_profile *p, size_t i, const char *key, size_t key_len, const char *value)
{
    const hk_label *l = hk_profile_sample_labels(p, i);
    for (uint32_t j = 0; j < p->samples[i].nlabel; j++) {
        const char *k = hk_profile_str(p, l[j].key);
        if (strncmp(k, key, key_len) != 0 || k[key_len]) continue;
        if (l[j].str && strcmp(hk_profile_str(p, l[j].str), value) == 0) return 1;
        char num[24];
        snprintf(num, sizeof(num), "%" PRId64, l[j].num);
        if (!l[j].str && strcmp(num, value) == 0) return 1;
    }
    return 0;
}

/* location id in q for location id loc of p (per line when lines); 0 when out of memory */
static uint32_t copy_location(const hk_profile *p, hk_profile *q, uint32_t loc, int lines)
{
    const hk_location *l = hk_profile_loc(p, loc);
    const hk_function *f = hk_profile_func(p, l->function_id);
    uint32_t name;
    if (lines) {
        char buf[64];
        snprintf(buf, sizeof(buf), ":%" PRId64, l->line);
        const char *base = hk_profile_str(p, f->name);
        size_t n = strlen(base), k = strlen(buf);
        char *s = malloc(n + k + 1);
        if (!s) return 0;
        memcpy(s, base, n);
        memcpy(s + n, buf, k + 1);
        name = hk_profile_string(q, s);
        free(s);
    } else {
        name = hk_profile_string(q, hk_profile_str(p, f->name));
    }
    uint32_t func = hk_profile_function(q, name, hk_profile_string(q, hk_profile_str(p, f->system_name)),
                                        hk_profile_string(q, hk_profile_str(p, f->filename)), f->start_line);
    return func ? hk_profile_location(q, func, l->line) : 0;
}

/* compiles expr into re, or says why not in err; 0 or -1 */
static int compile(regex_t *re, const char *expr, const char *what, char *err, size_t errlen)
{
    int rc = regcomp(re, expr, REG_EXTENDED | REG_NOSUB);
    if (rc == 0) return 0;
    char why[128];
    regerror(rc, re, why, sizeof(why));
    if (err) snprintf(err, errlen, "bad %s expression \"%s\": %s", what, expr, why);
    return -1;
}

hk_profile *hk_profile_select(const hk_profile *p, const hk_select *sel, char *err, size_t errlen)
{
    regex_t focus_re, ignore_re;
    int has_focus = 0, has_ignore = 0;
    uint8_t *focus = NULL, *ignore = NULL;
    uint32_t *locs = NULL, *loc_map = NULL;
    hk_locbuf stack = {0};
    hk_label *labels = NULL;
    hk_profile *q = NULL;
    const char *tag_value = sel->tag ? strchr(sel->tag, '=') : NULL;
    if (sel->tag && (!tag_value || tag_value == sel->tag)) {
        if (err) snprintf(err, errlen, "bad --tag \"%s\": expected KEY=VALUE", sel->tag);
        return NULL;
    }
    size_t tag_key_len = tag_value ? (size_t)(tag_value++ - sel->tag) : 0;
    if (sel->focus) {
        if (compile(&focus_re, sel->focus, "--focus", err, errlen) < 0) return NULL;
        has_focus = 1;
    }
    if (sel->ignore) {
        if (compile(&ignore_re, sel->ignore, "--ignore", err, errlen) < 0) goto fail;
        has_ignore = 1;
    }
    if ((has_focus && !(focus = match_functions(p, &focus_re))) ||
        (has_ignore && !(ignore = match_functions(p, &ignore_re))))
        goto oom;
    /* each of p's locations' id in q, made on first use (0: not yet) */
    loc_map = calloc(p->nlocations + 1, sizeof(*loc_map));
    if (!loc_map || !(q = hk_profile_new())) goto oom;
    for (size_t v = 0; v < p->nvalues; v++)
        hk_profile_add_sample_type(q, hk_profile_str(p, p->sample_types[v].type),
                                   hk_profile_str(p, p->sample_types[v].unit));
    q->default_sample_type = hk_profile_string(q, hk_profile_str(p, p->default_sample_type));
    q->period_type = (hk_value_type){hk_profile_string(q, hk_profile_str(p, p->period_type.type)),
                                     hk_profile_string(q, hk_profile_str(p, p->period_type.unit))};
    q->period = p->period;
    q->time_nanos = p->time_nanos;
    q->duration_nanos = p->duration_nanos;
    for (size_t c = 0; c < p->ncomments; c++) hk_profile_add_comment(q, hk_profile_str(p, p->comments[c]));
    size_t locs_cap = 0, labels_cap = 0;
    for (size_t i = 0; i < p->nsamples && hk_profile_ok(q); i++) {
        int64_t thread;
        if (sel->thread >= 0 && (!thread_of(p, i, &thread) || thread != sel->thread)) continue;
        if (tag_value && !has_tag(p, i, sel->tag, tag_key_len, tag_value)) continue;
        if (focus && !any_frame(p, i, focus)) continue;
        if (ignore && any_frame(p, i, ignore)) continue;
        uint32_t n = p->samples[i].nloc, nl = p->samples[i].nlabel;
        if (hk_array_grow((void **)&locs, &locs_cap, n, sizeof(*locs)) < 0 ||
            hk_array_grow((void **)&labels, &labels_cap, nl, sizeof(*labels)) < 0)
            goto oom;
        const uint32_t *from = hk_profile_sample_locs(p, i, &stack);
        if (!from) goto oom;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t *to = &loc_map[from[j]];
            if (!*to && !(*to = copy_location(p, q, from[j], sel->lines))) goto oom;
            locs[j] = *to;
        }
        const hk_label *l = hk_profile_sample_labels(p, i);
        for (uint32_t j = 0; j < nl; j++)
            labels[j] = (hk_label){hk_profile_string(q, hk_profile_str(p, l[j].key)),
                                   l[j].str ? hk_profile_string(q, hk_profile_str(p, l[j].str)) : 0,
                                   l[j].num_unit ? hk_profile_string(q, hk_profile_str(p, l[j].num_unit)) : 0,
                                   l[j].num};
        hk_profile_add_sample(q, locs, n, hk_profile_sample_values(p, i), labels, nl);
    }
    if (!hk_profile_ok(q)) goto oom;
    goto done;
oom:
    if (err) snprintf(err, errlen, "out of memory");
    hk_profile_free(q);
    q = NULL;
done:
fail:
    if (has_focus) regfree(&focus_re);
    if (has_ignore) regfree(&ignore_re);
    free(focus);
    free(ignore);
    free(loc_map);
    free(locs);
    hk_locbuf_free(&stack);
    free(labels);
    return q;
}
