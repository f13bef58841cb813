/* hakari.c — the Ruby bindings: Hakari::Native (engine control) and
 * Hakari::Profile (a profile model with its counters, encoders and #to_h);
 * Hakari.label and Hakari.labels are label_api.c's.
 *
 * These two are the only files that define Ruby methods and raise. Arguments are
 * checked here, before any C state changes, and every error names the bad
 * value and what is accepted.
 */
#include <ruby.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "buf.h"
#include "calltree.h"
#include "diff_report.h"
#include "formats.h"
#include "html_encode.h"
#include "label_api.h"
#include "line_table.h"
#include "pprof_decode.h"
#include "profile.h"
#include "profile_select.h"
#include "sampler.h"
#include "stack_walk.h"
#include "text_report.h"
#include "tracer.h"

static VALUE mHakari, mNative, cProfile;

#define SET(h, k, v) rb_hash_aset(h, ID2SYM(rb_intern(k)), v)
static ID id_cpu, id_wall, id_object, id_retained, id_allocations, id_trace;

/* ---- Hakari::Profile ----------------------------------------------------- */

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
    return obj;
}

static profile_obj *profile_get(VALUE self)
{
    profile_obj *o = rb_check_typeddata(self, &profile_type);
    if (!o->p) rb_raise(rb_eRuntimeError, "uninitialized Hakari::Profile");
    return o;
}

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
static int int_in(VALUE v, long lo, long hi, long *out);

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
    if (!int_in(top_n, 1, INT32_MAX, &n)) rb_raise(rb_eArgError, "invalid top %+" PRIsVALUE " (expected 1 or more)", top_n);
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
static VALUE profile_methods(VALUE self)
{
    profile_obj *o = profile_get(self);
    char err[256];
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
        rb_ary_push(out, h);
    }
    hk_calltree_free(ct);
    return out;
}

static VALUE pstr(const hk_profile *p, uint32_t idx) { return rb_utf8_str_new_cstr(hk_profile_str(p, idx)); }

/* frames of location ids, leaf first: [[label, path, line], ...]; frame arrays shared per location */
static VALUE frames_of(const hk_profile *p, size_t i, VALUE *loc_cache)
{
    const uint32_t *locs = hk_profile_sample_locs(p, i);
    uint32_t n = p->samples[i].nloc;
    VALUE frames = rb_ary_new_capa(n);
    for (uint32_t j = 0; j < n; j++) {
        VALUE fr = loc_cache[locs[j]];
        if (NIL_P(fr)) {
            const hk_location *l = hk_profile_loc(p, locs[j]);
            const hk_function *fn = hk_profile_func(p, l->function_id);
            fr = rb_ary_new_from_args(3, pstr(p, fn->name), pstr(p, fn->filename), LL2NUM(l->line));
            rb_obj_freeze(fr);
            loc_cache[locs[j]] = fr;
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

static VALUE samples_ary(const hk_profile *p, int aggregate)
{
    VALUE cache_holder = rb_ary_new_capa((long)p->nlocations + 1);
    for (size_t i = 0; i <= p->nlocations; i++) rb_ary_push(cache_holder, Qnil);
    VALUE *cache = RARRAY_PTR(cache_holder); /* the array keeps every cached frame alive */
    int ci = hk_profile_find_value(p, "samples");
    if (ci < 0) ci = hk_profile_find_value(p, "calls");
    int wti = hk_profile_find_value(p, "wait");
    int bi = hk_profile_find_value(p, "retained_space"); /* object modes: the objects' bytes */
    if (bi < 0) bi = hk_profile_find_value(p, "alloc_space");
    size_t wi = hk_profile_default_value(p);
    VALUE out = rb_ary_new_capa((long)p->nsamples);
    hk_intern_table sets; /* freed below: nothing between raises */
    hk_intern_init(&sets);
    uint32_t state_key = state_key_of(p);
    for (size_t i = 0; i < p->nsamples; i++) {
        const int64_t *v = hk_profile_sample_values(p, i);
        VALUE row = rb_ary_new_capa(6);
        rb_ary_push(row, frames_of(p, i, cache));
        rb_ary_push(row, LL2NUM(v[wi]));
        rb_ary_push(row, LL2NUM(ci >= 0 ? v[ci] : 1));
        rb_ary_push(row, LL2NUM(label_num(p, i, "thread")));
        if (wti >= 0) rb_ary_push(row, LL2NUM(v[wti]));
        if (!aggregate && wti < 0) rb_ary_push(row, LL2NUM(label_num(p, i, "timestamp")));
        if (bi >= 0) rb_ary_push(row, LL2NUM(v[bi]));
        int64_t set = label_set_index(p, i, &sets, state_key);
        rb_ary_push(row, LL2NUM(set < 0 ? 0 : set));
        rb_ary_push(out, row);
    }
    hk_intern_free(&sets);
    RB_GC_GUARD(cache_holder);
    return out;
}


/* Profile#samples -> Array (shape documented in the README) */
static VALUE profile_samples(VALUE self)
{
    profile_obj *o = profile_get(self);
    return samples_ary(o->p, o->traced || o->read || o->st.aggregate);
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
    if (!NIL_P(thread) && !int_in(thread, 0, INT32_MAX, &t))
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

/* ---- Hakari::Native ------------------------------------------------------- */

static int int_in(VALUE v, long lo, long hi, long *out)
{
    if (!RB_INTEGER_TYPE_P(v) || !FIXNUM_P(v)) return 0;
    long x = FIX2LONG(v);
    if (x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

/* a Symbol's or a String's ID, or 0 when it is neither or names nothing known (no ID is made) */
static ID option_id(VALUE v)
{
    return SYMBOL_P(v) || RB_TYPE_P(v, T_STRING) ? rb_check_id(&v) : 0;
}

/* true or false, or ArgumentError naming the keyword and the value: "no" is not false */
static int boolean_option(const char *what, VALUE v)
{
    if (v != Qtrue && v != Qfalse) rb_raise(rb_eArgError, "invalid %s: %+" PRIsVALUE " (expected true or false)", what, v);
    return v == Qtrue;
}

/* An environment knob's value: index in `accepted` (0 for unset or empty), or
 * ArgumentError naming the variable, the value and what is accepted. Read at
 * each start, here only, into the configuration. */
static int env_choice(const char *var, const char *const *accepted, int n)
{
    const char *v = getenv(var);
    if (!v || !*v) return 0;
    for (int i = 1; i < n; i++)
        if (strcmp(v, accepted[i]) == 0) return i;
    VALUE list = rb_str_new_cstr("");
    for (int i = 1; i < n; i++) rb_str_catf(list, "%s%s", i == 1 ? "" : " or ", accepted[i]);
    rb_raise(rb_eArgError, "invalid %s=%s (expected %" PRIsVALUE ", or unset)", var, v, list);
}

/* Native.start(mode, frequency, aggregate, max_depth, synthesize, interval) -> true; object mode
 * takes interval (objects per sample) and no frequency, the others a frequency and no interval */
static VALUE native_start(VALUE mod, VALUE mode, VALUE frequency, VALUE aggregate, VALUE max_depth, VALUE synthesize,
                          VALUE interval)
{
    hk_sampler_config cfg;
    long x;
    ID m = option_id(mode);
    if (m == id_cpu) cfg.mode = HK_MODE_CPU;
    else if (m == id_wall) cfg.mode = HK_MODE_WALL;
    else if (m == id_object) cfg.mode = HK_MODE_OBJECT;
    else if (m == id_retained) cfg.mode = HK_MODE_RETAINED;
    else rb_raise(rb_eArgError, "unknown mode %+" PRIsVALUE " (expected :cpu, :wall, :object, :retained or :trace)", mode);
    cfg.frequency = cfg.interval = 0;
    if (HK_MODE_COUNTS_OBJECTS(cfg.mode)) {
        if (!NIL_P(frequency))
            rb_raise(rb_eArgError, "frequency: applies to mode: :cpu and :wall (mode: :%s takes interval:)", rb_id2name(m));
        if (!int_in(interval, 1, HK_MAX_INTERVAL, &x))
            rb_raise(rb_eArgError, "invalid interval %+" PRIsVALUE " (expected an Integer from 1 to %d objects)", interval,
                     HK_MAX_INTERVAL);
        cfg.interval = (int)x;
    } else {
        if (!NIL_P(interval))
            rb_raise(rb_eArgError, "interval: applies to mode: :object and :retained (mode: :%s takes frequency:)", rb_id2name(m));
        if (!int_in(frequency, HK_MIN_FREQUENCY, HK_MAX_FREQUENCY, &x))
            rb_raise(rb_eArgError, "invalid frequency %+" PRIsVALUE " (expected an Integer from %d to %d Hz)", frequency,
                     HK_MIN_FREQUENCY, HK_MAX_FREQUENCY);
        cfg.frequency = (int)x;
    }
    if (!int_in(max_depth, 1, HK_MAX_MAX_DEPTH, &x))
        rb_raise(rb_eArgError, "invalid max_depth %+" PRIsVALUE " (expected an Integer from 1 to %d)", max_depth,
                 HK_MAX_MAX_DEPTH);
    cfg.max_depth = (int)x;
    cfg.aggregate = boolean_option("aggregate", aggregate);
    if (cfg.mode == HK_MODE_RETAINED && !cfg.aggregate)
        rb_raise(rb_eArgError, "aggregate: false does not apply to mode: :retained (its samples are the objects alive at stop)");
    cfg.synthesize = boolean_option("synthesize", synthesize);
    static const char *const clocks[] = {"", "perf"}, *const walks[] = {"", "ruby", "verify"}, *const offs[] = {"", "off"};
    cfg.cpu_clock = (hk_cpu_clock_choice)env_choice("HAKARI_CPU_CLOCK", clocks, 2);
    cfg.walk = env_choice("HAKARI_STACK_WALK", walks, 3);
    cfg.no_state_hooks = env_choice("HAKARI_STATE_HOOKS", offs, 2);
    char err[256];
    if (hk_tracer_running()) rb_raise(rb_eRuntimeError, "hakari: hakari is already running");
    if (hk_sampler_start(&cfg, err, sizeof(err)) < 0) rb_raise(rb_eRuntimeError, "hakari: %s", err);
    return Qtrue;
}

/* Native.ractor_starting(starting) -> nil, :let_go (retained mode no longer follows objects) or
 * :hooks_off (Ruby 3.1: object sampling stopped); called by Hakari::RactorHook before a Ractor
 * starts (true), and at start when Ractors run already (false) */
static VALUE native_ractor_starting(VALUE mod, VALUE starting)
{
    switch (hk_sampler_ractor_starting(RTEST(starting))) {
    case HK_RACTOR_LET_GO: return ID2SYM(rb_intern("let_go"));
    case HK_RACTOR_HOOKS_OFF: return ID2SYM(rb_intern("hooks_off"));
    default: return Qnil;
    }
}

/* Native.write_file(path, bytes, drop) -> true: bytes into path whole (a temporary file beside it,
 * then a rename), then the file drop (a String, or nil) removed. All with the GVL held: the
 * thread that writes continuous snapshots would otherwise wait for the GVL after each system call,
 * up to a time slice (100 ms) each while the program runs, and fall behind its schedule. The
 * files are small; the encoding before took the GVL longer. Raises SystemCallError naming the path. */
static VALUE native_write_file(VALUE mod, VALUE path, VALUE bytes, VALUE drop)
{
    const char *dst = StringValueCStr(path);
    StringValue(bytes);
    VALUE tmp = rb_sprintf("%s.%ld.tmp", dst, (long)getpid());
    const char *t = StringValueCStr(tmp);
    int fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) rb_sys_fail(t);
    const char *p = RSTRING_PTR(bytes);
    size_t left = (size_t)RSTRING_LEN(bytes);
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            unlink(t);
            errno = e;
            rb_sys_fail(dst);
        }
        p += n;
        left -= (size_t)n;
    }
    if (close(fd) != 0 || rename(t, dst) != 0) {
        int e = errno;
        unlink(t);
        errno = e;
        rb_sys_fail(dst);
    }
    if (!NIL_P(drop) && unlink(StringValueCStr(drop)) != 0 && errno != ENOENT) rb_sys_fail(StringValueCStr(drop));
    RB_GC_GUARD(tmp);
    return Qtrue;
}

/* Native.own_thread(thread) -> true, or false when not sampling: the thread is hakari's own
 * (Hakari::Snapshots' writer), never sampled */
static VALUE native_own_thread(VALUE mod, VALUE thread)
{
    if (!rb_obj_is_kind_of(thread, rb_cThread)) rb_raise(rb_eTypeError, "expected a Thread, got %+" PRIsVALUE, thread);
    return hk_sampler_own_thread((uintptr_t)thread) == 0 ? Qtrue : Qfalse;
}

/* fills the Hash arg with GC.stat (rb_gc_stat) */
static void gc_stat_into(void *arg) { rb_gc_stat(*(VALUE *)arg); }

/* Native.stop(gc = nil): the profile, or nil when not running. A Hash gc is filled with GC.stat
 * as the sampler's time ends, before the profile is built: the program's GC figures, read where
 * no sample can land (a tick in a GC.stat called before stop put hakari's at_exit frames in the
 * profile) and before the build's allocations. A trace, paused by then, fills it first. */
static VALUE native_stop(int argc, VALUE *argv, VALUE mod)
{
    VALUE gc = argc > 0 ? argv[0] : Qnil;
    if (argc > 1) rb_error_arity(argc, 0, 1);
    if (!NIL_P(gc)) Check_Type(gc, T_HASH);
    hk_sampler_stats st;
    hk_tracer_stats ts;
    hk_profile *p;
    if (hk_tracer_running()) {
        if (!NIL_P(gc)) rb_gc_stat(gc);
        p = hk_tracer_stop(&ts);
        if (!p) rb_raise(rb_eNoMemError, "hakari: out of memory while building the profile");
        return profile_wrap(p, NULL, &ts);
    }
    if (!hk_sampler_running()) return Qnil;
    p = hk_sampler_stop(&st, NIL_P(gc) ? NULL : gc_stat_into, &gc);
    if (!p) rb_raise(rb_eNoMemError, "hakari: out of memory while building the profile");
    return profile_wrap(p, &st, NULL);
}

/* optional Array of String/Regexp (a single one is accepted too); raises naming the bad element */
static VALUE check_patterns(VALUE v)
{
    if (NIL_P(v)) return Qnil;
    if (!RB_TYPE_P(v, T_ARRAY)) v = rb_ary_new_from_args(1, v);
    for (long i = 0; i < RARRAY_LEN(v); i++) {
        VALUE e = RARRAY_AREF(v, i);
        if (!RB_TYPE_P(e, T_STRING) && !RB_TYPE_P(e, T_REGEXP))
            rb_raise(rb_eArgError, "invalid exclude: %+" PRIsVALUE " (expected a String or a Regexp, or an Array of them)", e);
    }
    return rb_obj_freeze(rb_ary_dup(v));
}

static VALUE check_threads(const char *what, VALUE v)
{
    if (NIL_P(v)) return Qnil;
    if (!RB_TYPE_P(v, T_ARRAY)) v = rb_ary_new_from_args(1, v);
    for (long i = 0; i < RARRAY_LEN(v); i++)
        if (!rb_obj_is_kind_of(RARRAY_AREF(v, i), rb_cThread))
            rb_raise(rb_eArgError, "invalid %s: %+" PRIsVALUE " (expected a Thread or an Array of Threads)", what,
                     RARRAY_AREF(v, i));
    return rb_obj_freeze(rb_ary_dup(v));
}

/* Native.trace_start(measure, exclude, threads, exclude_threads, merge_fibers, merge_threads) -> true */
static VALUE native_trace_start(VALUE mod, VALUE measure, VALUE exclude, VALUE threads, VALUE exclude_threads,
                                VALUE merge_fibers, VALUE merge_threads)
{
    hk_tracer_config cfg;
    ID m = option_id(measure);
    if (m == id_wall) cfg.measure = HK_MEASURE_WALL;
    else if (m == id_cpu) cfg.measure = HK_MEASURE_CPU;
    else if (m == id_allocations) cfg.measure = HK_MEASURE_ALLOCATIONS;
    else rb_raise(rb_eArgError, "unknown measure %+" PRIsVALUE " (expected :wall, :cpu or :allocations)", measure);
    cfg.exclude = check_patterns(exclude);
    cfg.threads = check_threads("threads", threads);
    cfg.exclude_threads = check_threads("exclude_threads", exclude_threads);
    cfg.merge_fibers = boolean_option("merge_fibers", merge_fibers);
    cfg.merge_threads = boolean_option("merge_threads", merge_threads);
    if (hk_sampler_running()) rb_raise(rb_eRuntimeError, "hakari: hakari is already running");
    char err[256];
    if (hk_tracer_start(&cfg, err, sizeof(err)) < 0) rb_raise(rb_eRuntimeError, "hakari: %s", err);
    return Qtrue;
}

static VALUE native_pause(VALUE mod) { return hk_tracer_pause() == 0 ? Qtrue : Qfalse; }
static VALUE native_resume(VALUE mod) { return hk_tracer_resume() == 0 ? Qtrue : Qfalse; }
static VALUE native_paused_p(VALUE mod) { return hk_tracer_paused() ? Qtrue : Qfalse; }

static VALUE native_snapshot(VALUE mod, VALUE clear)
{
    hk_sampler_stats st;
    if (!hk_sampler_running() || hk_sampler_ended()) return Qnil;
    hk_profile *p = hk_sampler_snapshot(RTEST(clear), &st);
    if (!p) rb_raise(rb_eNoMemError, "hakari: out of memory while building the profile");
    return profile_wrap(p, &st, NULL);
}

/* The exit hook's: the Hash that gets GC.stat as the profile's time ends, and the process
 * whose hook it is (a forked child inherits the hook, not the profile). */
static VALUE end_gc_hash = Qnil;
static rb_pid_t end_pid;

static void end_at_exit(VALUE unused)
{
    (void)unused;
    if (getpid() != end_pid || !hk_sampler_running() || hk_sampler_ended()) return;
    hk_sampler_end(NIL_P(end_gc_hash) ? NULL : gc_stat_into, &end_gc_hash);
}

/* Native.end_at_exit(gc = nil) -> true: at exit, the sampling profile's time ends before any
 * exit hook registered earlier runs (Ruby runs them last first), and a Hash gc gets GC.stat
 * there; the next Native.stop builds the profile. The CLI's hook (lib/hakari/autorun.rb),
 * registered before start, then runs no Ruby frame of hakari's inside the profile's time. */
static VALUE native_end_at_exit(int argc, VALUE *argv, VALUE mod)
{
    VALUE gc = argc > 0 ? argv[0] : Qnil;
    if (argc > 1) rb_error_arity(argc, 0, 1);
    if (!NIL_P(gc)) Check_Type(gc, T_HASH);
    if (!hk_sampler_running() || hk_sampler_ended())
        rb_raise(rb_eRuntimeError, "hakari: end_at_exit needs a running cpu or wall profile");
    end_gc_hash = gc;
    end_pid = getpid();
    rb_set_end_proc(end_at_exit, Qnil);
    return Qtrue;
}

static VALUE native_running_p(VALUE mod) { return hk_sampler_running() || hk_tracer_running() ? Qtrue : Qfalse; }

/* Native.formats -> [[name, default_file, text?], ...]: the list of formats (formats.h) */
static VALUE native_formats(VALUE mod)
{
    VALUE out = rb_ary_new_capa((long)hk_nformats);
    for (size_t i = 0; i < hk_nformats; i++) {
        const hk_format *f = &hk_formats[i];
        VALUE row = rb_ary_new_from_args(3, ID2SYM(rb_intern(f->name)), rb_str_freeze(rb_str_new_cstr(f->default_file)),
                                         f->text ? Qtrue : Qfalse);
        rb_ary_push(out, rb_obj_freeze(row));
    }
    return rb_obj_freeze(out);
}

/* Native.format_for(path) -> Symbol: the format the path's name selects (formats.h) */
static VALUE native_format_for(VALUE mod, VALUE path)
{
    return ID2SYM(rb_intern(hk_format_for_path(StringValueCStr(path))->name));
}

/* Native.read(bytes) -> Profile: a pprof profile, gzipped or not, from any program; a
 * file that is not one raises ArgumentError saying what is wrong with it */
static VALUE native_read(VALUE mod, VALUE bytes)
{
    StringValue(bytes);
    char err[256];
    hk_profile *p = hk_pprof_decode((const uint8_t *)RSTRING_PTR(bytes), (size_t)RSTRING_LEN(bytes), err, sizeof(err));
    RB_GC_GUARD(bytes);
    if (!p) rb_raise(rb_eArgError, "%s", err);
    VALUE obj = profile_wrap(p, NULL, NULL);
    ((profile_obj *)DATA_PTR(obj))->read = 1;
    return obj;
}

/* Native.read_file(path) -> Profile: the file's pprof profile (Native.read). Read here rather
 * than from a Ruby String: a gzipped file is inflated and its compressed bytes freed before the
 * decoding, which keeps a big profile's reading near twice the inflated size in memory. */
static VALUE native_read_file(VALUE mod, VALUE path)
{
    FilePathValue(path);
    const char *name = StringValueCStr(path);
    FILE *f = fopen(name, "rb");
    if (!f) rb_sys_fail_str(path);
    hk_buf raw, inflated;
    hk_buf_init(&raw);
    hk_buf_init(&inflated);
    uint8_t chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) hk_buf_append(&raw, chunk, got);
    int read_error = ferror(f);
    fclose(f);
    if (read_error) {
        hk_buf_free(&raw);
        rb_sys_fail_str(path);
    }
    char err[256] = "out of memory";
    const hk_buf *bytes = &raw;
    int ok = hk_buf_ok(&raw);
    if (ok && raw.len >= 2 && raw.data[0] == 0x1f && raw.data[1] == 0x8b) {
        ok = hk_gunzip(raw.data, raw.len, HK_PPROF_MAX_INFLATED, &inflated, err, sizeof(err)) == 0;
        hk_buf_free(&raw);
        bytes = &inflated;
    }
    hk_profile *p = ok ? hk_pprof_decode(bytes->data, bytes->len, err, sizeof(err)) : NULL;
    hk_buf_free(&raw);
    hk_buf_free(&inflated);
    if (!p) rb_raise(rb_eArgError, "%s", err);
    VALUE obj = profile_wrap(p, NULL, NULL);
    ((profile_obj *)DATA_PTR(obj))->read = 1;
    return obj;
}

/* Native.diff_html(base, new) -> String: the differential flame graph (html_encode.h) */
static VALUE native_diff_html(VALUE mod, VALUE base, VALUE new)
{
    profile_obj *a = profile_get(base), *b = profile_get(new);
    hk_buf out;
    hk_buf_init(&out);
    if (hk_html_diff_encode(a->p, b->p, &out) < 0) {
        hk_buf_free(&out);
        rb_raise(rb_eNoMemError, "hakari: out of memory while comparing the profiles");
    }
    VALUE html = rb_utf8_str_new((const char *)out.data, (long)out.len);
    hk_buf_free(&out);
    return html;
}

/* Native.diff(base, new, absolute, top_n) -> [String, Float]: the report of what changed
 * between two profiles (diff_report.h) and the largest rise of a self share, in points */
static VALUE native_diff(VALUE mod, VALUE base, VALUE new, VALUE absolute, VALUE top_n)
{
    profile_obj *a = profile_get(base), *b = profile_get(new);
    long n;
    if (!int_in(top_n, 1, INT32_MAX, &n)) rb_raise(rb_eArgError, "invalid top %+" PRIsVALUE " (expected 1 or more)", top_n);
    hk_diff_options o = {hk_profile_default_value(a->p), hk_profile_default_value(b->p), RTEST(absolute), (size_t)n};
    if (!a->p->nvalues || !b->p->nvalues) rb_raise(rb_eArgError, "a profile without sample types has nothing to compare");
    hk_buf out;
    hk_buf_init(&out);
    double growth = 0;
    if (hk_diff_report(a->p, b->p, &o, &out, &growth) < 0) {
        hk_buf_free(&out);
        rb_raise(rb_eNoMemError, "hakari: out of memory while comparing the profiles");
    }
    VALUE text = rb_utf8_str_new((const char *)out.data, (long)out.len);
    hk_buf_free(&out);
    return rb_ary_new_from_args(2, text, DBL2NUM(growth));
}

static VALUE tv_ns(struct timeval tv) { return LL2NUM((long long)tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL); }

/* Native.children_rusage -> Hash: getrusage(RUSAGE_CHILDREN), for `hakari stat` */
static VALUE native_children_rusage(VALUE mod)
{
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) != 0) rb_sys_fail("getrusage");
    VALUE h = rb_hash_new();
    SET(h, "utime_ns", tv_ns(ru.ru_utime));
    SET(h, "stime_ns", tv_ns(ru.ru_stime));
    SET(h, "maxrss_kb", LONG2NUM(ru.ru_maxrss));
    SET(h, "nvcsw", LONG2NUM(ru.ru_nvcsw));
    SET(h, "nivcsw", LONG2NUM(ru.ru_nivcsw));
    SET(h, "inblock", LONG2NUM(ru.ru_inblock));
    SET(h, "oublock", LONG2NUM(ru.ru_oublock));
    return h;
}

/* ---- GC root for the sampler's frame and thread VALUEs -------------------- */

static void root_mark(void *ptr)
{
    hk_sampler_mark();
    hk_tracer_mark();
}
static void root_compact(void *ptr) { hk_sampler_compact(); }
static size_t root_memsize(const void *ptr) { return hk_sampler_memsize() + hk_tracer_memsize(); }
static const rb_data_type_t root_type = {
    "Hakari::SamplerRoot", {root_mark, NULL, root_memsize, root_compact, {0}}, NULL, NULL, 0};

RUBY_FUNC_EXPORTED void Init_hakari(void)
{
    id_cpu = rb_intern("cpu");
    id_wall = rb_intern("wall");
    id_allocations = rb_intern("allocations");
    id_trace = rb_intern("trace");
    id_object = rb_intern("object");
    id_retained = rb_intern("retained");

    mHakari = rb_define_module("Hakari");
    mNative = rb_define_module_under(mHakari, "Native");
    rb_define_module_function(mNative, "start", native_start, 6);
    rb_define_module_function(mNative, "stop", native_stop, -1);
    rb_define_module_function(mNative, "snapshot", native_snapshot, 1);
    rb_define_module_function(mNative, "running?", native_running_p, 0);
    rb_define_module_function(mNative, "own_thread", native_own_thread, 1);
    rb_define_module_function(mNative, "write_file", native_write_file, 3);
    rb_define_module_function(mNative, "end_at_exit", native_end_at_exit, -1);
    rb_gc_register_address(&end_gc_hash);
    rb_define_module_function(mNative, "trace_start", native_trace_start, 6);
    rb_define_module_function(mNative, "pause", native_pause, 0);
    rb_define_module_function(mNative, "resume", native_resume, 0);
    rb_define_module_function(mNative, "paused?", native_paused_p, 0);
    rb_define_module_function(mNative, "children_rusage", native_children_rusage, 0);
    rb_define_module_function(mNative, "formats", native_formats, 0);
    rb_define_module_function(mNative, "format_for", native_format_for, 1);
    rb_define_module_function(mNative, "read", native_read, 1);
    rb_define_module_function(mNative, "ractor_starting", native_ractor_starting, 1);
    rb_define_module_function(mNative, "read_file", native_read_file, 1);
    rb_define_module_function(mNative, "diff", native_diff, 4);
    rb_define_module_function(mNative, "diff_html", native_diff_html, 2);
    rb_define_const(mNative, "MIN_FREQUENCY", INT2NUM(HK_MIN_FREQUENCY));
    rb_define_const(mNative, "MAX_FREQUENCY", INT2NUM(HK_MAX_FREQUENCY));
    rb_define_const(mNative, "MAX_INTERVAL", INT2NUM(HK_MAX_INTERVAL));

    cProfile = rb_define_class_under(mHakari, "Profile", rb_cObject);
    rb_undef_alloc_func(cProfile);
    rb_define_method(cProfile, "encode", profile_encode, 1);
    rb_define_method(cProfile, "counters", profile_counters, 0);
    rb_define_method(cProfile, "samples", profile_samples, 0);
    rb_define_method(cProfile, "label_sets", profile_label_sets, 0);
    rb_define_method(cProfile, "label_values", profile_label_values, 1);
    rb_define_method(cProfile, "methods_table", profile_methods, 0);
    rb_define_method(cProfile, "select", profile_select, 5);
    rb_define_method(cProfile, "text_report", profile_text_report, 1);
    rb_define_method(cProfile, "line_table", profile_line_table, 0);

    /* the GC calls dmark only when the data pointer is non-NULL: point it at anything */
    static int root_data;
    VALUE root = TypedData_Wrap_Struct(rb_cObject, &root_type, &root_data);
    rb_gc_register_mark_object(root);
    hk_label_api_init(mHakari);
    hk_sampler_init();
    hk_tracer_init();
}
