/* sampler_build.c — turns the sampler's tables into the profile model.
 *
 * Runs at stop/snapshot with the GVL: each unique frame is resolved to a name
 * (rb_profile_frame_full_label), a file and a first line exactly once, then
 * locations and samples are copied over by id. Values per sample:
 * [samples/count, cpu|wall/nanoseconds] (object mode: [samples/count, alloc_objects/count];
 * retained: [samples/count, retained_objects/count, retained_space/bytes]);
 * labels: thread (number), state (running, blocked, wait, gc_marking, gc_sweeping: from the
 * leaf, sampler_states.c; object mode: class, the sampled objects' class), with aggregate:
 * false, timestamp (nanoseconds since the epoch), then the sample's label set's (Hakari.label,
 * sampler_labels.c), as strings.
 */
#include "buf.h"
#include "sampler_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>


static uint32_t rstring(hk_profile *p, VALUE s, const char *fallback)
{
    if (!RB_TYPE_P(s, T_STRING)) return hk_profile_string(p, fallback);
    return hk_profile_string_n(p, RSTRING_PTR(s), (size_t)RSTRING_LEN(s));
}

/* the states' leaf frames, and their names in the `state` label (HK_STATE_*) */
static const char *const state_frame[HK_NSTATES] = {NULL, "[GVL blocked]", "[GVL wait]", "[GC marking]",
                                                    "[GC sweeping]"};
static const char *const state_label[HK_NSTATES] = {"running", "blocked", "wait", "gc_marking", "gc_sweeping"};

static uint32_t resolve_frame(hk_profile *p, VALUE f)
{
    if (HK_FRAME_SYNTHETIC_P(f)) {
        const char *name = HK_FRAME_STATE_P(f)        ? state_frame[FIX2LONG(f)]
                           : f == HK_FRAME_TRUNCATED ? "[truncated]"
                                                     : "[unsampled]";
        return hk_profile_function(p, hk_profile_string(p, name), 0, hk_profile_string(p, "<hakari>"), 0);
    }
    VALUE label = rb_profile_frame_full_label(f);
    VALUE path = rb_profile_frame_path(f);
    VALUE line = rb_profile_frame_first_lineno(f);
    uint32_t name = rstring(p, label, "(unknown)");
    uint32_t file = rstring(p, path, "<cfunc>");
    /* system_name stays empty: pprof "demangles" a name equal to its system name, eating "<main>" */
    return hk_profile_function(p, name, 0, file, FIXNUM_P(line) ? FIX2LONG(line) : 0);
}

/* a method of hakari's (Hakari.stop, Hakari::Native.stop, Hakari::Autorun.finish),
 * or a block in one (the CLI's at_exit block in Hakari::Autorun.start) */
int hk_sampler_own_label(const char *l, long len)
{
    if (len > 6 && strncmp(l, "block ", 6) == 0) {
        long i = 5;
        while (i + 4 <= len && strncmp(l + i, " in ", 4) != 0) i++;
        if (i + 4 > len) return 0;
        l += i + 4;
        len -= i + 4;
    }
    return (len > 7 && strncmp(l, "Hakari.", 7) == 0) || (len > 8 && strncmp(l, "Hakari::", 8) == 0);
}

/* object mode: a class index's name as the `class` label shows it */
static uint32_t class_name(hk_profile *p, const hk_sampler *s, uint32_t index)
{
    if (index >= HK_CLASS_FIRST && index < s->nclasses) return rstring(p, rb_class_name(s->classes[index]), "(unknown)");
    return hk_profile_string(p, index == HK_CLASS_INTERNAL ? "(internal)" : index == HK_CLASS_OTHERS ? "(other classes)" : "(unknown)");
}

/* The `ractor` label's string for each thread sequence number up to nseq (0: a main Ractor's
 * thread): the Ractor's number, and its name when it has one ("#2 worker"). NULL when there is
 * none, or out of memory (the label is left out). */
static uint32_t *ractor_labels(uint32_t nseq, hk_profile *p)
{
    uint32_t n = __atomic_load_n(&RS.nthreads, __ATOMIC_ACQUIRE);
    uint32_t *of = n ? calloc((size_t)nseq + 1, sizeof(*of)) : NULL;
    if (!of) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        const hk_ractor_thread *r = &RS.threads[i];
        if (r->seq > nseq) continue;
        VALUE name = NIL_P(r->ractor) ? Qnil : rb_funcall(r->ractor, rb_intern("name"), 0);
        char text[160];
        if (RB_TYPE_P(name, T_STRING))
            snprintf(text, sizeof(text), "#%u %.*s", r->id, (int)(RSTRING_LEN(name) < 120 ? RSTRING_LEN(name) : 120), RSTRING_PTR(name));
        else if (r->id)
            snprintf(text, sizeof(text), "#%u", r->id);
        else
            snprintf(text, sizeof(text), "(another Ractor)");
        of[r->seq] = hk_profile_string(p, text);
    }
    return of;
}

/* location id in p for each of the sampler's locations (index id - 1). The
 * sampler keeps (frame, line) pairs only: each frame is resolved to a function
 * here, once, however many lines it was seen at. NULL when out of memory. */
static uint32_t *resolve_locations(const hk_sampler *s, hk_profile *p, hk_sampler_stats *st)
{
    uint32_t *loc_of = calloc(s->nlocs + 1, sizeof(*loc_of));
    hk_u64_map func_of; /* frame VALUE -> function id */
    hk_u64_map_init(&func_of);
    if (!loc_of) return NULL;
    st->unique_frames = 0;
    for (size_t i = 0; i < s->nlocs; i++) {
        VALUE f = s->locs[i].frame;
        uint32_t func;
        if (!hk_u64_map_get(&func_of, (uint64_t)f, &func)) {
            func = resolve_frame(p, f);
            if (hk_u64_map_put(&func_of, (uint64_t)f, func) < 0) {
                free(loc_of);
                loc_of = NULL;
                break;
            }
            if (!HK_FRAME_SYNTHETIC_P(f)) st->unique_frames++;
        }
        loc_of[i] = hk_profile_location(p, func, s->locs[i].line);
    }
    hk_u64_map_free(&func_of);
    return loc_of;
}

static void add_comments(hk_profile *p, const hk_sampler_stats *st)
{
    /* room for every counter at its widest (15 of them, 20 digits each, with their names), so
     * the counters' line is never cut */
    char line[2048];
    hk_profile_add_comment(p, "hakari " HK_VERSION);
    if (st->mode == HK_MODE_OBJECT)
        snprintf(line, sizeof(line), "mode=object interval=%d watch=%d.%03d aggregate=%s", st->interval,
                 st->watch / HK_WATCH_ALL, st->watch % HK_WATCH_ALL, st->aggregate ? "true" : "false");
    else if (st->mode == HK_MODE_RETAINED)
        snprintf(line, sizeof(line), "mode=retained interval=%d aggregate=%s", st->interval, st->aggregate ? "true" : "false");
    else
        snprintf(line, sizeof(line), "mode=%s frequency=%dHz aggregate=%s", st->mode == HK_MODE_CPU ? "cpu" : "wall",
                 st->frequency, st->aggregate ? "true" : "false");
    hk_profile_add_comment(p, line);
    VALUE desc = rb_const_get(rb_cObject, rb_intern("RUBY_DESCRIPTION"));
    snprintf(line, sizeof(line), "ruby=%s", StringValueCStr(desc));
    hk_profile_add_comment(p, line);
    /* the counters, as Hakari::Profile#counters names them (sampler.h) */
    size_t at = 0;
#define COMMENT(name, what)                                                                                  \
    if (at < sizeof(line))                                                                                   \
        at += (size_t)snprintf(line + at, sizeof(line) - at, "%s" #name "=%llu", at ? " " : "",              \
                               (unsigned long long)st->name);
    HK_SAMPLER_COUNTERS(COMMENT)
#undef COMMENT
    if (at < sizeof(line)) snprintf(line + at, sizeof(line) - at, " thread_count=%llu", (unsigned long long)st->thread_count);
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "timer=%s", st->timer_kind);
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "stack_walk=%s", st->stack_walker ? st->stack_walker : "none");
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "states=%s", st->states ? st->states : "none");
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "synthesized=%s", st->synthesized ? st->synthesized : "off");
    hk_profile_add_comment(p, line);
}

/* cpu mode: the process's CPU that no Ruby thread's samples hold (its CPU up
 * to the stop call, less the worker's and the samples' total), as one sample
 * of a [native threads] frame under no thread (its thread label 0): the CPU
 * of native threads that run no Ruby code (an extension's own), and of Ruby
 * threads' last steps after they end, which no hook measured. Under a
 * period, it is the clocks' rounding and left out. */
static void add_native_cpu(hk_profile *p, hk_sampler_stats *st, int64_t total, hk_label *labels, size_t nlabels)
{
    int64_t other = (int64_t)st->process_cpu_ns - (int64_t)st->timer_cpu_ns - total;
    st->native_cpu_ns = 0;
    if (other < 1000000000LL / st->frequency) return;
    st->native_cpu_ns = (uint64_t)other;
    uint32_t func = hk_profile_function(p, hk_profile_string(p, "[native threads]"), 0,
                                        hk_profile_string(p, "<hakari>"), 0);
    uint32_t loc = hk_profile_location(p, func, 0);
    int64_t values[2] = {0, other};
    labels[0].num = 0;
    labels[1].str = hk_profile_string(p, state_label[HK_STATE_RUNNING]);
    labels[2].num = 0;
    hk_profile_add_sample(p, &loc, 1, values, labels, nlabels);
    char line[64];
    snprintf(line, sizeof(line), "native_cpu_ns=%lld", (long long)other);
    hk_profile_add_comment(p, line);
}

hk_profile *hk_sampler_build_profile(const hk_sampler *s, hk_sampler_stats *st)
{
    hk_profile *p = hk_profile_new();
    uint32_t *loc_of = NULL, *locs = NULL;
    size_t locs_cap = 0;
    uint8_t *seen = NULL; /* raw samples: stack ids met */
    uint32_t *ractor_of = NULL; /* by thread sequence number: its `ractor` label, 0 for none */
    if (!p) return NULL;
    int objects = HK_MODE_COUNTS_OBJECTS(st->mode), retained = st->mode == HK_MODE_RETAINED;
    const char *type = retained ? "retained_objects" : objects ? "alloc_objects" : st->mode == HK_MODE_CPU ? "cpu" : "wall";
    const char *unit = objects ? "count" : "nanoseconds";
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, type, unit);
    if (objects) hk_profile_add_sample_type(p, retained ? "retained_space" : "alloc_space", "bytes");
    p->default_sample_type = hk_profile_string(p, type);
    p->period_type = (hk_value_type){hk_profile_string(p, type), hk_profile_string(p, unit)};
    p->period = objects ? st->interval : 1000000000LL / st->frequency;
    p->time_nanos = st->start_time_ns;
    p->duration_nanos = st->duration_ns;
    add_comments(p, st);

    loc_of = resolve_locations(s, p, st);
    if (!s->cfg.aggregate) seen = calloc(hk_intern_count(&s->stacks) + 1, 1);
    if (!loc_of || (!s->cfg.aggregate && !seen)) goto fail;

    /* labels: the thread, the state its time was spent in (object mode: the objects' class),
     * (aggregate: false) the sample's time, then its label set's */
    hk_label labels[3 + HK_MAX_LABELS] = {{.key = hk_profile_string(p, "thread")},
                                          {.key = hk_profile_string(p, objects ? "class" : "state")},
                                          {.key = hk_profile_string(p, "timestamp"),
                                           .num_unit = hk_profile_string(p, "nanoseconds")}};
    const size_t fixed = s->cfg.aggregate ? 2 : 3;
    /* Ractors' jobs may number more threads meanwhile (a snapshot): theirs have no sample here */
    const uint32_t nseq = __atomic_load_n(&s->nseq, __ATOMIC_RELAXED);
    ractor_of = objects ? NULL : ractor_labels(nseq, p);
    uint32_t ractor_key = ractor_of ? hk_profile_string(p, "ractor") : 0;
    hk_label_kv kv[HK_MAX_LABELS];
    uint32_t state_str[HK_NSTATES];
    for (int i = 0; i < HK_NSTATES; i++) state_str[i] = hk_profile_string(p, state_label[i]);
    /* with aggregate, a stack id is its row (sampler.h); rows never sampled are left out */
    size_t n = s->cfg.aggregate ? hk_intern_count(&s->stacks) : s->nraw;
    st->unique_stacks = 0;
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t stack, nkey;
        int64_t values[3] = {0, 0, 0};
        if (s->cfg.aggregate) {
            if (i >= s->agg_cap || s->agg_rows[i].count == 0) continue;
            stack = (uint32_t)i;
            values[0] = (int64_t)s->agg_rows[i].count;
            values[1] = s->agg_rows[i].weight;
            values[2] = s->agg_rows[i].bytes;
            st->unique_stacks++;
        } else {
            stack = s->raw[i].stack;
            values[0] = 1;
            values[1] = s->raw[i].weight;
            values[2] = (int64_t)s->raw[i].bytes * s->raw[i].weight;
            labels[2].num = s->raw[i].time_ns;
            if (!seen[stack]) st->unique_stacks++;
            seen[stack] = 1;
        }
        /* the key: the thread's sequence number, its label set, then location ids root first (sampler_int.h) */
        const uint32_t *key = hk_intern_get(&s->stacks, stack, &nkey);
        uint32_t nloc = nkey - 2, seq = key[0];
        size_t nuser = hk_labels_get(objects ? HK_CONTEXT_LABELS(key[1]) : key[1], kv, HK_MAX_LABELS);
        for (size_t j = 0; j < nuser; j++)
            labels[fixed + j] = (hk_label){.key = hk_profile_string_n(p, kv[j].key, kv[j].klen),
                                           .str = hk_profile_string_n(p, kv[j].val, kv[j].vlen)};
        /* another Ractor's thread: which Ractor (its samples carry no label set) */
        if (ractor_of && seq <= nseq && ractor_of[seq] && nuser < HK_MAX_LABELS)
            labels[fixed + nuser++] = (hk_label){.key = ractor_key, .str = ractor_of[seq]};
        if (hk_array_grow((void **)&locs, &locs_cap, nloc, sizeof(*locs)) < 0) goto fail;
        for (uint32_t j = 0; j < nloc; j++) locs[j] = loc_of[key[nkey - 1 - j] - 1]; /* leaf first */
        /* Ruby 3.1 reports the top-level script twice: "<main>" at its line, then a
         * line-0 frame of the same function beneath it. Keep one. */
        if (nloc >= 2 && p->locations[locs[nloc - 1] - 1].line == 0 &&
            p->locations[locs[nloc - 1] - 1].function_id == p->locations[locs[nloc - 2] - 1].function_id)
            nloc--;
        /* A job whose tick came in the program's last period may run in hakari's own exit
         * work (Hakari::Autorun.finish, Hakari.stop): that time is the program's, and goes to
         * the frame that called hakari, as the stop-time tail's does. So does a thread's time in
         * another state taken as Hakari.label changes its labels (sampler.c
         * hk_sampler_labels_changing): its state's leaf stays on top. */
        VALUE leaf = nkey > 2 ? s->locs[key[nkey - 1] - 1].frame : Qnil;
        uint32_t first = HK_FRAME_STATE_P(leaf) ? 1 : 0, own = 0;
        while (first + own + 1 < nloc) {
            const char *name =
                hk_profile_str(p, hk_profile_func(p, p->locations[locs[first + own] - 1].function_id)->name);
            if (!hk_sampler_own_label(name, (long)strlen(name))) break;
            own++;
        }
        /* in object mode, the objects hakari made itself (starting, stopping) are not the program's */
        if (own && objects) continue;
        if (own) {
            memmove(locs + first, locs + first + own, (nloc - first - own) * sizeof(*locs));
            nloc -= own;
        }
        labels[0].num = seq;
        labels[1].str = objects ? class_name(p, s, HK_CONTEXT_CLASS(key[1]))
                                : state_str[HK_FRAME_STATE_P(leaf) ? FIX2LONG(leaf) : HK_STATE_RUNNING];
        hk_profile_add_sample(p, locs, nloc, values, labels, fixed + nuser);
        total += values[1];
    }
    if (st->mode == HK_MODE_CPU) add_native_cpu(p, st, total, labels, fixed);
    if (!hk_profile_ok(p)) goto fail;
    free(loc_of);
    free(locs);
    free(seen);
    free(ractor_of);
    return p;
fail:
    free(loc_of);
    free(locs);
    free(seen);
    free(ractor_of);
    hk_profile_free(p);
    return NULL;
}
