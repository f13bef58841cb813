/* profile_api.c — Hakari::Profile: a profile model (profile.h) with the counters of the run that
 * made it, and what Ruby reads of it: samples, label sets and values, the methods table, and the
 * encoders and reports. Native (hakari.c) makes them at stop, snapshot and read.
 */
#include <ruby.h>

#include "bindings.h"
#include "buf.h"
#include "alloc_sites.h"
#include "calltree.h"
#include "formats.h"
#include "line_table.h"
#include "profile_api.h"
#include "profile_select.h"
#include "text_report.h"

static VALUE cProfile;
static ID id_cpu, id_wall, id_object, id_retained, id_trace;

typedef struct profile_obj {
    hk_profile *p;
    int traced;          /* which of the two stats below applies */
    int read;            /* read from a file (Native.read): neither applies */
    hk_sampler_stats st;
    hk_tracer_stats ts;
} profile_obj;

static void profile_free(void *ptr)
{
    profile_obj *o = ptr;
    hk_profile_free(o->p);
    xfree(o);
}

static size_t profile_memsize(const void *ptr)
{
    const profile_obj *o = ptr;
    return sizeof(*o) + (o->p ? hk_profile_memsize(o->p) : 0);
}

static const rb_data_type_t profile_type = {
    "Hakari::Profile", {NULL, profile_free, profile_memsize, NULL, {0}}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

static VALUE profile_wrap(hk_profile *p, const hk_sampler_stats *st, const hk_tracer_stats *ts)
{
    profile_obj *o;
    VALUE obj = TypedData_Make_Struct(cProfile, profile_obj, &profile_type, o);
    o->p = p;
    if (st) o->st = *st;
    if (ts) { o->ts = *ts; o->traced = 1; }
    o->read = !st && !ts;
    return obj;
}

VALUE hk_profile_api_wrap(hk_profile *p, const hk_sampler_stats *st, const hk_tracer_stats *ts)
{
    return profile_wrap(p, st, ts);
}

static profile_obj *profile_get(VALUE self)
{
    profile_obj *o = rb_check_typeddata(self, &profile_type);
    if (!o->p) rb_raise(rb_eRuntimeError, "uninitialized Hakari::Profile");
    return o;
}

const hk_profile *hk_profile_api_get(VALUE profile) { return profile_get(profile)->p; }

/* ", :pprof, :collapsed ..." for an error message, from the list of formats */
static VALUE format_names(void)
{
    VALUE s = rb_str_new_cstr("");
    for (size_t i = 0; i < hk_nformats; i++)
        rb_str_catf(s, "%s:%s", i == 0 ? "" : i + 1 == hk_nformats ? " or " : ", ", hk_formats[i].name);
    return s;
}

/* Profile#encode(format) -> String; format is one of Hakari::FORMATS (formats.h) */
static VALUE profile_encode(VALUE self, VALUE format)
{
    profile_obj *o = profile_get(self);
    const hk_format *f = SYMBOL_P(format) ? hk_format_named(rb_id2name(SYM2ID(format))) : NULL;
    if (!f) rb_raise(rb_eArgError, "unknown format %+" PRIsVALUE " (expected %" PRIsVALUE ")", format, format_names());
    hk_buf b;
    hk_buf_init(&b);
    if (f->encode(o->p, &b) < 0) {
        hk_buf_free(&b);
        rb_raise(rb_eNoMemError, "hakari: out of memory while encoding the profile");
    }
    VALUE s = f->text ? rb_utf8_str_new((const char *)b.data, (long)b.len) : rb_str_new((const char *)b.data, (long)b.len);
    hk_buf_free(&b);
    return s;
}

static VALUE pstr(const hk_profile *p, uint32_t idx);

/* Profile#line_table -> [[file, line, self, cum], ...]: the default value per source line
 * (line_table.h), for `hakari annotate` */
static VALUE profile_line_table(VALUE self)
{
    profile_obj *o = profile_get(self);
    size_t n;
    hk_line_row *rows;
    if (hk_line_table(o->p, hk_profile_default_value(o->p), &rows, &n) < 0)
        rb_raise(rb_eNoMemError, "hakari: out of memory while summing the lines");
    VALUE out = rb_ary_new_capa((long)n);
    for (size_t i = 0; i < n; i++)
        rb_ary_push(out, rb_ary_new_from_args(4, pstr(o->p, rows[i].file), LL2NUM(rows[i].line), LL2NUM(rows[i].self),
                                              LL2NUM(rows[i].cum)));
    free(rows);
    return out;
}

/* Profile#text_report(top_n) -> String: the text format with top_n rows per table */
static VALUE profile_text_report(VALUE self, VALUE top_n)
{
    profile_obj *o = profile_get(self);
    long n;
    if (!hk_int_in(top_n, 1, INT32_MAX, &n)) rb_raise(rb_eArgError, "invalid top %+" PRIsVALUE " (expected 1 or more)", top_n);
    hk_buf b;
    hk_buf_init(&b);
    if (o->p->nvalues && hk_text_report(o->p, hk_profile_default_value(o->p), (size_t)n, &b) < 0) {
        hk_buf_free(&b);
        rb_raise(rb_eNoMemError, "hakari: out of memory while writing the report");
    }
    VALUE s = rb_utf8_str_new((const char *)b.data, (long)b.len);
    hk_buf_free(&b);
    return s;
}

/* Profile#methods -> Array of Hash, one per method: name, file, line, calls, self, wait, child,
 * total (recursion-safe), recursive, callers/callees ({name => calls}); by total, descending */
/* A trace's allocations (allocations: true) by method: function id -> [{class:, file:, line:,
 * count:, bytes:}], most objects first; nil when the profile holds none by site. */
static VALUE method_allocations(const hk_profile *p)
{
    if (!hk_alloc_sites_present(p)) return Qnil;
    hk_alloc_sites s;
    if (hk_alloc_sites_collect(p, &s) < 0) rb_raise(rb_eNoMemError, "hakari: out of memory while reading the allocations");
    VALUE by_func = rb_hash_new();
    for (size_t i = 0; i < s.n; i++) {
        const hk_alloc_site *a = &s.sites[i];
        VALUE list = rb_hash_lookup(by_func, UINT2NUM(a->func));
        if (NIL_P(list)) rb_hash_aset(by_func, UINT2NUM(a->func), list = rb_ary_new());
        VALUE h = rb_hash_new();
        SET(h, "class", pstr(p, a->klass));
        SET(h, "file", pstr(p, a->file));
        SET(h, "line", LL2NUM(a->line));
        SET(h, "count", LL2NUM(a->objects));
        SET(h, "bytes", LL2NUM(a->bytes));
        rb_ary_push(list, h);
    }
    hk_alloc_sites_free(&s);
    return by_func;
}

static VALUE profile_methods(VALUE self)
{
    profile_obj *o = profile_get(self);
    char err[256];
    VALUE allocations = method_allocations(o->p);
    hk_calltree *ct = hk_calltree_build(o->p, err, sizeof(err));
    if (!ct) rb_raise(rb_eRuntimeError, "hakari: %s", err);
    VALUE out = rb_ary_new();
    for (size_t i = 0; i < ct->nmethods; i++) {
        const hk_ct_method *m = &ct->methods[i];
        if (!m->nnodes) continue;
        const hk_function *fn = hk_profile_func(o->p, m->func);
        VALUE h = rb_hash_new();
        SET(h, "name", pstr(o->p, fn->name));
        SET(h, "file", pstr(o->p, fn->filename));
        SET(h, "line", LL2NUM(fn->start_line));
        SET(h, "calls", LL2NUM(m->calls));
        SET(h, "self", LL2NUM(m->self));
        SET(h, "wait", LL2NUM(m->wait));
        SET(h, "child", LL2NUM(m->child));
        SET(h, "total", LL2NUM(m->total));
        SET(h, "recursive", m->recursive ? Qtrue : Qfalse);
        VALUE callers = rb_hash_new(), callees = rb_hash_new();
        for (uint32_t j = 0; j < m->ncallers; j++) {
            const hk_ct_edge *e = &ct->edges[ct->caller_edges[m->callers_off + j]];
            VALUE name = e->caller ? pstr(o->p, hk_profile_func(o->p, e->caller)->name) : rb_str_new_cstr("[root]");
            rb_hash_aset(callers, name, LL2NUM(e->calls));
        }
        for (uint32_t j = 0; j < m->ncallees; j++) {
            const hk_ct_edge *e = &ct->edges[ct->callee_edges[m->callees_off + j]];
            rb_hash_aset(callees, pstr(o->p, hk_profile_func(o->p, e->callee)->name), LL2NUM(e->calls));
        }
        SET(h, "callers", callers);
        SET(h, "callees", callees);
        if (!NIL_P(allocations)) {
            VALUE list = rb_hash_lookup(allocations, UINT2NUM(m->func));
            SET(h, "allocations", NIL_P(list) ? rb_ary_new() : list);
        }
        rb_ary_push(out, h);
    }
    hk_calltree_free(ct);
    return out;
}

static VALUE pstr(const hk_profile *p, uint32_t idx) { return rb_utf8_str_new_cstr(hk_profile_str(p, idx)); }

/* frames of location ids, leaf first: [[label, path, line], ...]; frame arrays shared per
 * location through `cache` (an Array by location id); Qundef when out of memory */
static VALUE frames_of(const hk_profile *p, size_t i, VALUE cache, hk_locbuf *stack)
{
    const uint32_t *locs = hk_profile_sample_locs(p, i, stack);
    if (!locs) return Qundef;
    uint32_t n = p->samples[i].nloc;
    VALUE frames = rb_ary_new_capa(n);
    for (uint32_t j = 0; j < n; j++) {
        VALUE fr = rb_ary_entry(cache, locs[j]);
        if (NIL_P(fr)) {
            const hk_location *l = hk_profile_loc(p, locs[j]);
            const hk_function *fn = hk_profile_func(p, l->function_id);
            fr = rb_ary_new_from_args(3, pstr(p, fn->name), pstr(p, fn->filename), LL2NUM(l->line));
            rb_obj_freeze(fr);
            rb_ary_store(cache, locs[j], fr);
        }
        rb_ary_push(frames, fr);
    }
    return frames;
}

static int64_t label_num(const hk_profile *p, size_t i, const char *key)
{
    const hk_label *l = hk_profile_sample_labels(p, i);
    for (uint32_t j = 0; j < p->samples[i].nlabel; j++)
        if (strcmp(hk_profile_str(p, l[j].key), key) == 0) return l[j].num;
    return 0;
}

/* The label set of sample i, the string labels a user gave (every one but `state`), as its
 * index in `sets` (1-based, in order of first use; 0: none), which interns them as sequences
 * of string ids, key then value. -1: out of memory. */
static int64_t label_set_index(const hk_profile *p, size_t i, hk_intern_table *sets, uint32_t state_key)
{
    const hk_label *l = hk_profile_sample_labels(p, i);
    uint32_t seq[2 * 64], n = 0;
    for (uint32_t j = 0; j < p->samples[i].nlabel && n + 2 <= sizeof(seq) / sizeof(*seq); j++)
        if (l[j].str && l[j].key != state_key) {
            seq[n++] = l[j].key;
            seq[n++] = l[j].str;
        }
    if (!n) return 0;
    int64_t id = hk_intern_seq(sets, seq, n);
    return id < 0 ? -1 : id + 1;
}

/* the string index of `state`, or UINT32_MAX when the profile has none */
static uint32_t state_key_of(const hk_profile *p)
{
    for (size_t i = 0; i < p->strings.count; i++)
        if (strcmp(hk_profile_str(p, (uint32_t)i), "state") == 0) return (uint32_t)i;
    return UINT32_MAX;
}

/* Profile#label_sets -> [{}, {endpoint: "GET /users/:id", ...}, ...]: the label sets the
 * samples carry, by the index Profile#samples gives each sample (0: no labels) */
static VALUE profile_label_sets(VALUE self)
{
    profile_obj *o = profile_get(self);
    const hk_profile *p = o->p;
    hk_intern_table sets;
    hk_intern_init(&sets);
    uint32_t state_key = state_key_of(p);
    for (size_t i = 0; i < p->nsamples; i++)
        if (label_set_index(p, i, &sets, state_key) < 0) {
            hk_intern_free(&sets);
            rb_raise(rb_eNoMemError, "hakari: out of memory while reading the label sets");
        }
    VALUE out = rb_ary_new_from_args(1, rb_hash_new());
    for (size_t id = 0; id < hk_intern_count(&sets); id++) {
        uint32_t n;
        const uint32_t *seq = hk_intern_get(&sets, (uint32_t)id, &n);
        VALUE h = rb_hash_new();
        for (uint32_t j = 0; j + 1 < n; j += 2) rb_hash_aset(h, ID2SYM(rb_intern(hk_profile_str(p, seq[j]))), pstr(p, seq[j + 1]));
        rb_ary_push(out, h);
    }
    hk_intern_free(&sets);
    return out;
}

/* Profile#label_values(key) -> {value => weight}: the default value summed by the samples'
 * string label `key`; the samples without it under nil (when there are any) */
static VALUE profile_label_values(VALUE self, VALUE key)
{
    profile_obj *o = profile_get(self);
    const hk_profile *p = o->p;
    const char *k = StringValueCStr(key);
    size_t vi = hk_profile_default_value(p);
    VALUE by_index = rb_hash_new(); /* string index -> weight */
    int64_t none = 0;
    int any_none = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        int64_t w = p->nvalues ? hk_profile_sample_values(p, i)[vi] : 0;
        const hk_label *l = hk_profile_sample_labels(p, i);
        uint32_t j = 0;
        while (j < p->samples[i].nlabel && !(l[j].str && strcmp(hk_profile_str(p, l[j].key), k) == 0)) j++;
        if (j == p->samples[i].nlabel) {
            none += w;
            any_none = 1;
            continue;
        }
        VALUE v = UINT2NUM(l[j].str), sum = rb_hash_aref(by_index, v);
        rb_hash_aset(by_index, v, LL2NUM((NIL_P(sum) ? 0 : NUM2LL(sum)) + w));
    }
    VALUE out = rb_hash_new(), idx = rb_funcall(by_index, rb_intern("keys"), 0);
    for (long i = 0; i < RARRAY_LEN(idx); i++) {
        VALUE v = RARRAY_AREF(idx, i);
        rb_hash_aset(out, pstr(p, NUM2UINT(v)), rb_hash_aref(by_index, v));
    }
    if (any_none) rb_hash_aset(out, Qnil, LL2NUM(none));
    return out;
}

/* One pass over the samples as Ruby rows, into an Array or to a block: the C tables it keeps
 * (label sets, a stack buffer) are freed by rb_ensure whatever the rows' consumer does. */
typedef struct sample_rows {
    VALUE profile;  /* the Profile, whose model this reads */
    const hk_profile *p;
    int aggregate, ci, wti, bi;
    size_t wi;
    uint32_t state_key;
    VALUE cache;    /* frame Arrays by location id */
    VALUE out;      /* the Array filled, or Qnil: each row goes to the block */
    hk_intern_table sets;
    hk_locbuf stack;
} sample_rows;

static VALUE sample_row(sample_rows *w, size_t i)
{
    const hk_profile *p = w->p;
    const int64_t *v = hk_profile_sample_values(p, i);
    VALUE frames = frames_of(p, i, w->cache, &w->stack);
    if (frames == Qundef) rb_raise(rb_eNoMemError, "hakari: out of memory reading the samples' frames");
    VALUE row = rb_ary_new_capa(7);
    rb_ary_push(row, frames);
    rb_ary_push(row, LL2NUM(v[w->wi]));
    rb_ary_push(row, LL2NUM(w->ci >= 0 ? v[w->ci] : 1));
    rb_ary_push(row, LL2NUM(label_num(p, i, "thread")));
    if (w->wti >= 0) rb_ary_push(row, LL2NUM(v[w->wti]));
    if (!w->aggregate && w->wti < 0) rb_ary_push(row, LL2NUM(label_num(p, i, "timestamp")));
    if (w->bi >= 0) rb_ary_push(row, LL2NUM(v[w->bi]));
    int64_t set = label_set_index(p, i, &w->sets, w->state_key);
    rb_ary_push(row, LL2NUM(set < 0 ? 0 : set));
    return row;
}

static VALUE sample_rows_run(VALUE holder)
{
    sample_rows *w = DATA_PTR(holder);
    for (size_t i = 0; i < w->p->nsamples; i++) {
        VALUE row = sample_row(w, i);
        if (NIL_P(w->out)) rb_yield(row);
        else rb_ary_push(w->out, row);
    }
    return w->out;
}

/* ensure: the C tables go back at once (the holder itself when the GC collects it) */
static VALUE sample_rows_done(VALUE holder)
{
    sample_rows *w = DATA_PTR(holder);
    hk_intern_free(&w->sets);
    hk_locbuf_free(&w->stack);
    return Qnil;
}

static void sample_rows_mark(void *ptr)
{
    sample_rows *w = ptr;
    rb_gc_mark(w->profile);
    rb_gc_mark(w->cache);
    rb_gc_mark(w->out);
}

static void sample_rows_release(void *ptr)
{
    sample_rows *w = ptr;
    hk_intern_free(&w->sets);
    hk_locbuf_free(&w->stack);
    xfree(w);
}

static const rb_data_type_t sample_rows_type = {
    "Hakari::SampleRows", {sample_rows_mark, sample_rows_release, NULL, NULL, {0}}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

/* The pass's state lives in a hidden object, handed to rb_ensure, which keeps it alive and
 * marked; this frame holds no variable whose address is taken. A block's break or exception
 * leaves the frame by Ruby's longjmp, which the address sanitizer does not see: a frame left
 * that way with redzones (an RB_GC_GUARD'ed local, a struct) keeps them poisoned, and a later
 * frame on that stack trips over them. */
static VALUE sample_rows_each(VALUE self, int to_array)
{
    profile_obj *o = profile_get(self);
    const hk_profile *p = o->p;
    VALUE holder = rb_data_typed_object_zalloc(0, sizeof(sample_rows), &sample_rows_type);
    sample_rows *w = RTYPEDDATA_DATA(holder);
    w->profile = self;
    w->cache = rb_ary_new_capa((long)p->nlocations + 1);
    w->out = to_array ? rb_ary_new_capa((long)p->nsamples) : Qnil;
    w->p = p;
    w->aggregate = o->traced || o->read || o->st.aggregate;
    w->ci = hk_profile_find_value(p, "samples");
    if (w->ci < 0) w->ci = hk_profile_find_value(p, "calls");
    w->wti = hk_profile_find_value(p, "wait");
    w->bi = hk_profile_find_value(p, "retained_space"); /* object modes: the objects' bytes */
    if (w->bi < 0) w->bi = hk_profile_find_value(p, "alloc_space");
    w->wi = hk_profile_default_value(p);
    w->state_key = state_key_of(p);
    hk_intern_init(&w->sets);
    return rb_ensure(sample_rows_run, holder, sample_rows_done, holder);
}

/* Profile#samples -> Array (shape documented in the README) */
static VALUE profile_samples(VALUE self) { return sample_rows_each(self, 1); }

static VALUE samples_size(VALUE self, VALUE args, VALUE eobj)
{
    (void)args;
    (void)eobj;
    return SIZET2NUM(profile_get(self)->p->nsamples);
}

/* Profile#each_sample { |row| } -> self: the rows of #samples one at a time, none kept (a
 * trace's million call paths without a million Arrays at once); an Enumerator without a block */
static VALUE profile_each_sample(VALUE self)
{
    RETURN_SIZED_ENUMERATOR(self, 0, 0, samples_size);
    sample_rows_each(self, 0);
    return self;
}

/* A profile read from a file: what its header says (its counters, for a
 * file of hakari's, are in its comments). */
static VALUE read_counters(const hk_profile *p)
{
    VALUE h = rb_hash_new(), types = rb_ary_new(), comments = rb_ary_new();
    size_t vi = hk_profile_default_value(p);
    SET(h, "mode", p->nvalues ? ID2SYM(rb_intern(hk_profile_str(p, p->sample_types[vi].type))) : Qnil);
    for (size_t i = 0; i < p->nvalues; i++)
        rb_ary_push(types, rb_ary_new_from_args(2, pstr(p, p->sample_types[i].type), pstr(p, p->sample_types[i].unit)));
    SET(h, "sample_types", types);
    SET(h, "start_time_ns", LL2NUM(p->time_nanos));
    SET(h, "duration_ns", LL2NUM(p->duration_nanos));
    SET(h, "period", LL2NUM(p->period));
    SET(h, "sample_count", ULL2NUM(p->nsamples));
    for (size_t i = 0; i < p->ncomments; i++) rb_ary_push(comments, pstr(p, p->comments[i]));
    SET(h, "comments", comments);
    return h;
}

/* Profile#select(focus, ignore, thread, tag, lines) -> Profile: the samples a report asks for
 * (profile_select.h); focus and ignore are POSIX extended regular expressions or nil */
static VALUE profile_select(VALUE self, VALUE focus, VALUE ignore, VALUE thread, VALUE tag, VALUE lines)
{
    profile_obj *o = profile_get(self);
    long t = -1;
    if (!NIL_P(thread) && !hk_int_in(thread, 0, INT32_MAX, &t))
        rb_raise(rb_eArgError, "invalid thread %+" PRIsVALUE " (expected a thread number, 0 or more)", thread);
    hk_select sel = {NIL_P(focus) ? NULL : StringValueCStr(focus), NIL_P(ignore) ? NULL : StringValueCStr(ignore), t,
                     NIL_P(tag) ? NULL : StringValueCStr(tag), RTEST(lines)};
    char err[256];
    hk_profile *q = hk_profile_select(o->p, &sel, err, sizeof(err));
    if (!q) rb_raise(strcmp(err, "out of memory") == 0 ? rb_eNoMemError : rb_eArgError, "%s", err);
    VALUE obj = profile_wrap(q, o->traced ? NULL : &o->st, o->traced ? &o->ts : NULL);
    ((profile_obj *)DATA_PTR(obj))->read = o->read;
    return obj;
}

static VALUE trace_counters(const hk_tracer_stats *ts)
{
    VALUE h = rb_hash_new();
    SET(h, "mode", ID2SYM(id_trace));
    SET(h, "measure", ID2SYM(rb_intern(hk_measure_name(ts->measure))));
    SET(h, "start_time_ns", LL2NUM(ts->start_time_ns));
    SET(h, "duration_ns", LL2NUM(ts->duration_ns));
    SET(h, "event_count", ULL2NUM(ts->event_count));
    SET(h, "call_count", ULL2NUM(ts->call_count));
    SET(h, "node_count", ULL2NUM(ts->node_count));
    SET(h, "method_count", ULL2NUM(ts->method_count));
    SET(h, "thread_count", ULL2NUM(ts->context_count));
    SET(h, "unmatched_returns", ULL2NUM(ts->unmatched_returns));
    SET(h, "max_paths", ULL2NUM(ts->max_paths));
    SET(h, "folded_calls", ULL2NUM(ts->folded_calls));
    SET(h, ts->measure == HK_MEASURE_ALLOCATIONS ? "folded_objects" : "folded_ns",
        LL2NUM((int64_t)((double)ts->folded_measure * ts->scale)));
    SET(h, "dropped_calls", ULL2NUM(ts->dropped_calls));
    if (ts->allocations) {
        SET(h, "allocation_count", ULL2NUM(ts->allocation_count));
        SET(h, "allocation_sites", ULL2NUM(ts->allocation_sites));
        SET(h, "allocations_unseen", ULL2NUM(ts->allocations_unseen));
    }
    return h;
}

/* Profile#counters -> Hash of the run's metadata and counters, without samples */
static VALUE profile_counters(VALUE self)
{
    profile_obj *o = profile_get(self);
    if (o->read) return read_counters(o->p);
    if (o->traced) return trace_counters(&o->ts);
    const hk_sampler_stats *st = &o->st;
    VALUE h = rb_hash_new();
    static const ID *const mode_id[] = {&id_cpu, &id_wall, &id_object, &id_retained};
    SET(h, "mode", ID2SYM(*mode_id[st->mode]));
    if (st->mode == HK_MODE_OBJECT) SET(h, "watch", DBL2NUM((double)st->watch / HK_WATCH_ALL));
    if (HK_MODE_COUNTS_OBJECTS(st->mode)) SET(h, "interval", INT2NUM(st->interval));
    else SET(h, "frequency", INT2NUM(st->frequency));
    SET(h, "aggregate", st->aggregate ? Qtrue : Qfalse);
    SET(h, "start_time_ns", LL2NUM(st->start_time_ns));
    SET(h, "duration_ns", LL2NUM(st->duration_ns));
#define COUNTER(name, what) SET(h, #name, ULL2NUM(st->name));
    HK_SAMPLER_COUNTERS(COUNTER)
#undef COUNTER
    SET(h, "thread_count", ULL2NUM(st->thread_count));
    SET(h, "unique_frames", ULL2NUM(st->unique_frames));
    SET(h, "unique_stacks", ULL2NUM(st->unique_stacks));
    SET(h, "native_cpu_ns", ULL2NUM(st->native_cpu_ns));
    SET(h, "timer", rb_str_new_cstr(st->timer_kind ? st->timer_kind : "none"));
    SET(h, "stack_walker", rb_str_new_cstr(st->stack_walker ? st->stack_walker : "none"));
    SET(h, "states", rb_str_new_cstr(st->states ? st->states : "none"));
    SET(h, "synthesized", rb_str_new_cstr(st->synthesized ? st->synthesized : "off"));
    return h;
}

void hk_profile_api_init(VALUE mHakari)
{
    id_cpu = rb_intern("cpu");
    id_wall = rb_intern("wall");
    id_object = rb_intern("object");
    id_retained = rb_intern("retained");
    id_trace = rb_intern("trace");
    cProfile = rb_define_class_under(mHakari, "Profile", rb_cObject);
    rb_undef_alloc_func(cProfile);
    rb_define_method(cProfile, "encode", profile_encode, 1);
    rb_define_method(cProfile, "counters", profile_counters, 0);
    rb_define_method(cProfile, "samples", profile_samples, 0);
    rb_define_method(cProfile, "each_sample", profile_each_sample, 0);
    rb_define_method(cProfile, "label_sets", profile_label_sets, 0);
    rb_define_method(cProfile, "label_values", profile_label_values, 1);
    rb_define_method(cProfile, "methods_table", profile_methods, 0);
    rb_define_method(cProfile, "select", profile_select, 5);
    rb_define_method(cProfile, "text_report", profile_text_report, 1);
    rb_define_method(cProfile, "line_table", profile_line_table, 0);
}
