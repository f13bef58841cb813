/* profile_build.c — turns the sampler's tables into the profile model.
 *
 * Runs at stop/snapshot with the GVL: each unique frame is resolved to a name
 * (rb_profile_frame_full_label), a file and a first line exactly once, then
 * locations and samples are copied over by id. Values per sample:
 * [samples/count, cpu|wall/nanoseconds]; labels: thread (number), and with
 * aggregate: false, timestamp (nanoseconds since the epoch).
 */
#include "sampler.h"

#include <stdio.h>
#include <stdlib.h>

#include <ruby/debug.h>


static uint32_t rstring(hk_profile *p, VALUE s, const char *fallback)
{
    if (!RB_TYPE_P(s, T_STRING)) return hk_profile_string(p, fallback);
    return hk_profile_string_n(p, RSTRING_PTR(s), (size_t)RSTRING_LEN(s));
}

/* function id for each frame id (index fid - 1) */
static uint32_t *resolve_frames(const hk_sampler *s, hk_profile *p)
{
    uint32_t *func_of = calloc(s->nframes + 1, sizeof(*func_of));
    if (!func_of) return NULL;
    static const char *synthetic[HK_SYNTHETIC_FRAMES] = {"[truncated]", "[unsampled]"};
    for (size_t i = 0; i < HK_SYNTHETIC_FRAMES && i < s->nframes; i++)
        func_of[i] = hk_profile_function(p, hk_profile_string(p, synthetic[i]), 0, hk_profile_string(p, "<hakari>"), 0);
    for (size_t i = HK_SYNTHETIC_FRAMES; i < s->nframes; i++) {
        VALUE f = s->frame_values[i];
        VALUE label = rb_profile_frame_full_label(f);
        VALUE path = rb_profile_frame_path(f);
        VALUE line = rb_profile_frame_first_lineno(f);
        uint32_t name = rstring(p, label, "(unknown)");
        uint32_t file = rstring(p, path, "<cfunc>");
        /* system_name stays empty: pprof "demangles" a name equal to its system name, eating "<main>" */
        func_of[i] = hk_profile_function(p, name, 0, file, FIXNUM_P(line) ? FIX2LONG(line) : 0);
    }
    return func_of;
}

static void add_comments(hk_profile *p, const hk_sampler_stats *st)
{
    char line[512];
    hk_profile_add_comment(p, "hakari " HK_VERSION);
    snprintf(line, sizeof(line), "mode=%s frequency=%dHz aggregate=%s", st->mode == HK_MODE_CPU ? "cpu" : "wall",
             st->frequency, st->aggregate ? "true" : "false");
    hk_profile_add_comment(p, line);
    VALUE desc = rb_const_get(rb_cObject, rb_intern("RUBY_DESCRIPTION"));
    snprintf(line, sizeof(line), "ruby=%s", StringValueCStr(desc));
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line),
             "triggers=%llu sampling_callbacks=%llu samples=%llu dropped=%llu sampling_time_ns=%llu threads=%llu",
             (unsigned long long)st->trigger_count, (unsigned long long)st->sampling_count,
             (unsigned long long)st->sample_count, (unsigned long long)st->dropped_count,
             (unsigned long long)st->sampling_time_ns, (unsigned long long)st->thread_count);
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "timer=%s", st->timer_kind);
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "stack_walk=%s", st->stack_walker ? st->stack_walker : "none");
    hk_profile_add_comment(p, line);
}

hk_profile *hk_sampler_build_profile(const hk_sampler *s, hk_sampler_stats *st)
{
    hk_profile *p = hk_profile_new();
    uint32_t *func_of = NULL, *loc_of = NULL, *locs = NULL;
    if (!p) return NULL;
    const char *mode = st->mode == HK_MODE_CPU ? "cpu" : "wall";
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, mode, "nanoseconds");
    p->default_sample_type = hk_profile_string(p, mode);
    p->period_type = (hk_value_type){hk_profile_string(p, mode), hk_profile_string(p, "nanoseconds")};
    p->period = 1000000000LL / st->frequency;
    p->time_nanos = st->start_time_ns;
    p->duration_nanos = st->duration_ns;
    add_comments(p, st);

    func_of = resolve_frames(s, p);
    loc_of = calloc(s->nlocs + 1, sizeof(*loc_of));
    locs = malloc(((size_t)s->cfg.max_depth + 1) * sizeof(*locs));
    if (!func_of || !loc_of || !locs) goto fail;
    for (size_t i = 0; i < s->nlocs; i++) {
        uint32_t fid = (uint32_t)(s->loc_keys[i] >> 32);
        loc_of[i] = hk_profile_location(p, func_of[fid - 1], (int64_t)(uint32_t)s->loc_keys[i]);
    }

    hk_label labels[2] = {{.key = hk_profile_string(p, "thread")},
                          {.key = hk_profile_string(p, "timestamp"),
                           .num_unit = hk_profile_string(p, "nanoseconds")}};
    size_t n = s->cfg.aggregate ? hk_intern_count(&s->agg) : s->nraw;
    for (size_t i = 0; i < n; i++) {
        uint32_t stack, seq, nloc;
        int64_t values[2];
        if (s->cfg.aggregate) {
            const uint32_t *key = hk_intern_get(&s->agg, (uint32_t)i, &nloc);
            stack = key[0];
            seq = key[1];
            values[0] = (int64_t)s->agg_rows[i].count;
            values[1] = s->agg_rows[i].weight;
        } else {
            stack = s->raw[i].stack;
            seq = s->raw[i].thread_seq;
            values[0] = 1;
            values[1] = s->raw[i].weight;
            labels[1].num = s->raw[i].time_ns;
        }
        const uint32_t *sl = hk_intern_get(&s->stacks, stack, &nloc);
        for (uint32_t j = 0; j < nloc; j++) locs[j] = loc_of[sl[j] - 1];
        /* Ruby 3.1 reports the top-level script twice: "<main>" at its line, then a
         * line-0 frame of the same function beneath it. Keep one. */
        if (nloc >= 2 && p->locations[locs[nloc - 1] - 1].line == 0 &&
            p->locations[locs[nloc - 1] - 1].function_id == p->locations[locs[nloc - 2] - 1].function_id)
            nloc--;
        labels[0].num = seq;
        hk_profile_add_sample(p, locs, nloc, values, labels, s->cfg.aggregate ? 1 : 2);
    }
    if (!hk_profile_ok(p)) goto fail;
    free(func_of);
    free(loc_of);
    free(locs);
    return p;
fail:
    free(func_of);
    free(loc_of);
    free(locs);
    hk_profile_free(p);
    return NULL;
}
