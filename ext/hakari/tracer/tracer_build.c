/* tracer_build.c — the tracer's call tree as a profile model, at stop.
 *
 * Each call-tree node becomes one sample: its locations are the path from the
 * node up to its root (leaf first), its values [calls, self, wait] in the
 * measure's unit, and its `thread` label the root's sequence number. Methods
 * are named once here ("Klass#meth", "Mod.meth"), with the file and first line
 * of their definition (Ruby methods) or "<cfunc>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tracer_int.h"

static VALUE attached_object(VALUE singleton)
{
#ifdef HAVE_RB_CLASS_ATTACHED_OBJECT
    return rb_class_attached_object(singleton);
#else
    return rb_attr_get(singleton, rb_intern("__attached__"));
#endif
}

VALUE hk_trace_method_label(VALUE klass, ID mid)
{
    VALUE name = mid ? rb_id2str(mid) : Qnil;
    if (NIL_P(name)) name = rb_str_new_cstr("?");
    if (!klass || NIL_P(klass)) return rb_sprintf("?#%" PRIsVALUE, name);
    if (RB_TYPE_P(klass, T_ICLASS)) klass = RBASIC(klass)->klass;
    if (FL_TEST(klass, FL_SINGLETON)) {
        VALUE obj = attached_object(klass);
        if (RB_TYPE_P(obj, T_CLASS) || RB_TYPE_P(obj, T_MODULE))
            return rb_sprintf("%" PRIsVALUE ".%" PRIsVALUE, rb_class_name(obj), name);
        return rb_sprintf("#<Class:%" PRIsVALUE " instance>#%" PRIsVALUE, rb_class_name(rb_obj_class(obj)), name);
    }
    return rb_sprintf("%" PRIsVALUE "#%" PRIsVALUE, rb_class_name(klass), name);
}

static VALUE source_location_body(VALUE args)
{
    VALUE um = rb_funcall(RARRAY_AREF(args, 0), rb_intern("instance_method"), 1, RARRAY_AREF(args, 1));
    return rb_funcall(um, rb_intern("source_location"), 0);
}

/* file and line where the method is defined; "<cfunc>", 0 for C methods or when unknown */
static void source_location(VALUE klass, ID mid, VALUE *file, long *line)
{
    *file = Qnil;
    *line = 0;
    if (!klass || NIL_P(klass) || !mid) return;
    if (RB_TYPE_P(klass, T_ICLASS)) klass = RBASIC(klass)->klass;
    int state = 0;
    VALUE loc = rb_protect(source_location_body, rb_ary_new_from_args(2, klass, ID2SYM(mid)), &state);
    if (state) { rb_set_errinfo(Qnil); return; }
    if (RB_TYPE_P(loc, T_ARRAY) && RARRAY_LEN(loc) == 2 && RB_TYPE_P(RARRAY_AREF(loc, 0), T_STRING)) {
        *file = RARRAY_AREF(loc, 0);
        *line = FIXNUM_P(RARRAY_AREF(loc, 1)) ? FIX2LONG(RARRAY_AREF(loc, 1)) : 0;
    }
}

static uint32_t rstr(hk_profile *p, VALUE s, const char *fallback)
{
    if (!RB_TYPE_P(s, T_STRING)) return hk_profile_string(p, fallback);
    return hk_profile_string_n(p, RSTRING_PTR(s), (size_t)RSTRING_LEN(s));
}

static void add_comments(hk_profile *p, const hk_tracer_stats *st)
{
    char line[512];
    hk_profile_add_comment(p, "hakari " HK_VERSION);
    snprintf(line, sizeof(line), "mode=trace measure=%s", hk_measure_name(st->measure));
    hk_profile_add_comment(p, line);
    VALUE desc = rb_const_get(rb_cObject, rb_intern("RUBY_DESCRIPTION"));
    snprintf(line, sizeof(line), "ruby=%s", StringValueCStr(desc));
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "events=%llu calls=%llu nodes=%llu methods=%llu contexts=%llu unmatched_returns=%llu",
             (unsigned long long)st->event_count, (unsigned long long)st->call_count,
             (unsigned long long)st->node_count, (unsigned long long)st->method_count,
             (unsigned long long)st->context_count, (unsigned long long)st->unmatched_returns);
    hk_profile_add_comment(p, line);
    snprintf(line, sizeof(line), "max_paths=%llu folded_calls=%llu folded_%s=%lld dropped_calls=%llu",
             (unsigned long long)st->max_paths, (unsigned long long)st->folded_calls,
             st->measure == HK_MEASURE_ALLOCATIONS ? "objects" : "ns",
             (long long)((double)st->folded_measure * st->scale), (unsigned long long)st->dropped_calls);
    hk_profile_add_comment(p, line);
    if (st->allocations) {
        snprintf(line, sizeof(line), "allocations=%llu sites=%llu unseen=%llu",
                 (unsigned long long)st->allocation_count, (unsigned long long)st->allocation_sites,
                 (unsigned long long)st->allocations_unseen);
        hk_profile_add_comment(p, line);
    }
}

static uint32_t *resolve_methods(const hk_tracer *t, hk_profile *p)
{
    uint32_t *func_of = calloc(t->nmethods + 1, sizeof(*func_of));
    if (!func_of) return NULL;
    for (size_t i = 1; i < t->nmethods; i++) {
        if (i == t->fold_method) { /* the calls past the call-path budget: see tracer.h */
            func_of[i] = hk_profile_function(p, hk_profile_string(p, "[folded]"), 0, hk_profile_string(p, "<hakari>"), 0);
            continue;
        }
        VALUE file = Qnil;
        long line = 0;
        /* a C method's owner may also have a Ruby method of the same original name */
        if (!t->methods[i].cfunc) source_location(t->methods[i].klass, t->methods[i].mid, &file, &line);
        uint32_t name = rstr(p, hk_trace_method_label(t->methods[i].klass, t->methods[i].mid), "?");
        func_of[i] = hk_profile_function(p, name, 0, rstr(p, file, "<cfunc>"), line);
    }
    return func_of;
}

#define NOT_YET UINT32_MAX

/* Each node's stack in the profile (0 for a root) and its depth: a node's stack is its
 * method's location under its parent's, one entry of the profile's stack trie. No path is
 * ever copied: a trace of millions of call paths costs a few words per path here. Nodes
 * mostly come after their parents, but a caller adopted at an unmatched return (start
 * mid-stack) becomes the parent of older nodes: a node whose parent has no stack yet has
 * its chain of such parents done first. 0, or -1 when out of memory. */
static int node_stacks(const hk_tracer *t, hk_profile *p, const uint32_t *loc_of, uint32_t *stack_of, uint32_t *depth_of)
{
    uint32_t *chain = NULL;
    size_t chain_cap = 0;
    if (hk_profile_reserve_stacks(p, t->nnodes) < 0) return -1;
    for (size_t i = 0; i < t->nnodes; i++) stack_of[i] = NOT_YET;
    for (size_t i = 0; i < t->nnodes; i++) {
        size_t n = 0;
        for (uint32_t j = (uint32_t)i; stack_of[j] == NOT_YET; j = t->nodes[j].parent) {
            if (t->nodes[j].method == 0 || t->nodes[j].parent == UINT32_MAX) { /* a root */
                stack_of[j] = depth_of[j] = 0;
                break;
            }
            if (hk_array_grow((void **)&chain, &chain_cap, n + 1, sizeof(*chain)) < 0) goto fail;
            chain[n++] = j;
        }
        while (n-- > 0) {
            const hk_tnode *node = &t->nodes[chain[n]];
            uint32_t s = hk_profile_stack_append(p, stack_of[node->parent], loc_of[node->method]);
            if (!s) goto fail;
            stack_of[chain[n]] = s;
            depth_of[chain[n]] = depth_of[node->parent] + 1;
        }
    }
    free(chain);
    return 0;
fail:
    free(chain);
    return -1;
}

/* allocations: true — each site a sample under its node's path, with the values [0, 0, 0,
 * objects, bytes] and the labels thread, class, file and line */
static void add_alloc_samples(const hk_tracer *t, hk_profile *p, const uint32_t *stack_of, const uint32_t *depth_of)
{
    int64_t values[5] = {0, 0, 0, 0, 0};
    hk_label labels[4] = {{.key = hk_profile_string(p, "thread")},
                          {.key = hk_profile_string(p, "class")},
                          {.key = hk_profile_string(p, "file")},
                          {.key = hk_profile_string(p, "line")}};
    for (size_t i = 0; i < t->nallocs; i++) {
        const hk_talloc *a = &t->allocs[i];
        VALUE name = rb_class_name(a->klass);
        labels[0].num = t->nodes[a->node].context_seq;
        labels[1].str = hk_profile_string_n(p, RSTRING_PTR(name), (size_t)RSTRING_LEN(name));
        labels[2].str = RB_TYPE_P(a->file, T_STRING)
                            ? hk_profile_string_n(p, RSTRING_PTR(a->file), (size_t)RSTRING_LEN(a->file))
                            : hk_profile_string(p, "<none>");
        labels[3].num = a->line;
        values[3] = (int64_t)a->count;
        values[4] = (int64_t)a->bytes;
        hk_profile_add_sample_stack(p, stack_of[a->node], depth_of[a->node], values, labels, 4);
    }
}

/* the folded calls' figures per (caller, callee), in the measure's unit (profile.h); none at
 * all when one pair found no room, as then they would not add up */
static void add_fold_edges(const hk_tracer *t, hk_profile *p, const uint32_t *loc_of, double scale)
{
    if (t->folds_lost) return;
    for (size_t i = 0; i < t->nfolds; i++) {
        const hk_tfold *f = &t->folds[i];
#define SCALED(v) ((int64_t)((double)(v) * scale))
        hk_fold_edge e = {f->caller ? loc_of[f->caller] : 0, loc_of[f->callee],
                          (int64_t)f->calls, SCALED(f->self), SCALED(f->wait),
                          (int64_t)f->outer_calls, SCALED(f->total), SCALED(f->outer_self),
                          SCALED(f->outer_wait), SCALED(f->outer_wait_total)};
#undef SCALED
        hk_profile_add_fold_edge(p, &e);
    }
}

hk_profile *hk_tracer_build_profile(const hk_tracer *t, const hk_tracer_stats *st)
{
    hk_profile *p = hk_profile_new();
    uint32_t *func_of = NULL, *loc_of = NULL, *stack_of = NULL, *depth_of = NULL;
    if (!p) return NULL;
    const char *measure = hk_measure_name(st->measure);
    const char *unit = st->measure == HK_MEASURE_ALLOCATIONS ? "count" : "nanoseconds";
    hk_profile_add_sample_type(p, "calls", "count");
    hk_profile_add_sample_type(p, measure, unit);
    hk_profile_add_sample_type(p, "wait", unit);
    if (st->allocations) {
        hk_profile_add_sample_type(p, "alloc_objects", "count");
        hk_profile_add_sample_type(p, "alloc_space", "bytes");
    }
    p->default_sample_type = hk_profile_string(p, measure);
    p->period_type = (hk_value_type){hk_profile_string(p, measure), hk_profile_string(p, unit)};
    p->period = 0; /* not sampled: every call is in the profile */
    p->time_nanos = st->start_time_ns;
    p->duration_nanos = st->duration_ns;
    add_comments(p, st);

    func_of = resolve_methods(t, p);
    loc_of = calloc(t->nmethods + 1, sizeof(*loc_of));
    if (!func_of || !loc_of) goto fail;
    for (size_t i = 1; i < t->nmethods; i++)
        loc_of[i] = hk_profile_location(p, func_of[i], hk_profile_func(p, func_of[i])->start_line);

    stack_of = malloc((t->nnodes + 1) * sizeof(*stack_of));
    depth_of = malloc((t->nnodes + 1) * sizeof(*depth_of));
    if (!stack_of || !depth_of || node_stacks(t, p, loc_of, stack_of, depth_of) < 0 ||
        hk_profile_reserve(p, t->nnodes + t->nallocs) < 0)
        goto fail;
    hk_label label = {.key = hk_profile_string(p, "thread")};
    for (size_t i = 0; i < t->nnodes; i++) {
        const hk_tnode *n = &t->nodes[i];
        if (n->method == 0 || n->calls == 0) continue; /* roots; nodes of never-counted calls */
        int64_t self = n->total - n->child - n->wait;
        int64_t values[5] = {(int64_t)n->calls, (int64_t)((double)(self < 0 ? 0 : self) * st->scale),
                             (int64_t)((double)n->wait * st->scale), 0, 0};
        label.num = n->context_seq;
        hk_profile_add_sample_stack(p, stack_of[i], depth_of[i], values, &label, 1);
    }
    if (st->allocations) add_alloc_samples(t, p, stack_of, depth_of);
    add_fold_edges(t, p, loc_of, st->scale);
    if (!hk_profile_ok(p)) goto fail;
    free(func_of);
    free(loc_of);
    free(stack_of);
    free(depth_of);
    return p;
fail:
    free(func_of);
    free(loc_of);
    free(stack_of);
    free(depth_of);
    hk_profile_free(p);
    return NULL;
}
