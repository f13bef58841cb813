/* label_api.c — the bindings of Hakari.label and Hakari.labels (the sets
 * themselves: sampler/sampler_labels.c).
 *
 * A fiber's labels live in its fiber-local slot (Thread#[] HK_LABELS_FIBER_KEY)
 * as a set id packed with the profile's generation, so a new thread or fiber
 * starts with none. Labels are checked at every call, profiling or not, so
 * that turning the profiler on never makes a call raise that did not before;
 * when no sampling profile runs, a call does nothing else.
 */
#include <ruby.h>

#include "label_api.h"
#include "sampler.h"

static ID id_slot;

typedef struct label_args {
    hk_label_kv kv[HK_MAX_LABELS];
    size_t n;
    int frozen; /* every key and value is frozen (a Symbol, or a frozen String) */
} label_args;

/* A frozen Hash of frozen labels cannot change: the last one checked is kept (a GC root) and
 * needs no second check, and the set its last merge made is kept with what it was merged into
 * (the fiber slot's value before, and the profile it belongs to). `Hakari.label(LABELS) { }`
 * with a constant then costs a few loads. */
static VALUE checked_hash = Qnil;
static VALUE merged_from = Qundef, merged_to = Qundef;
static long merged_profile;

/* a key's or value's bytes: a String, or a Symbol's name */
static VALUE label_string(VALUE v, const char *what, VALUE key)
{
    if (SYMBOL_P(v)) return rb_sym2str(v);
    if (RB_TYPE_P(v, T_STRING)) return v;
    if (NIL_P(key))
        rb_raise(rb_eArgError, "invalid label key %+" PRIsVALUE " (expected a Symbol or a String)", v);
    rb_raise(rb_eArgError, "invalid label %s %+" PRIsVALUE " for %+" PRIsVALUE " (expected a String, a Symbol, or nil to remove it)",
             what, v, key);
}

static int collect_label(VALUE key, VALUE val, VALUE arg)
{
    label_args *a = (label_args *)arg;
    VALUE k = label_string(key, "key", Qnil);
    a->frozen &= SYMBOL_P(key) || OBJ_FROZEN(key);
    long klen = RSTRING_LEN(k);
    if (klen == 0 || klen > HK_MAX_LABEL_KEY)
        rb_raise(rb_eArgError, "invalid label key %+" PRIsVALUE " (expected 1 to %d bytes)", key, HK_MAX_LABEL_KEY);
    static const char *const own[] = {"thread", "state", "timestamp", "class"};
    for (size_t i = 0; i < sizeof(own) / sizeof(*own); i++)
        if ((size_t)klen == strlen(own[i]) && memcmp(RSTRING_PTR(k), own[i], (size_t)klen) == 0)
            rb_raise(rb_eArgError, "invalid label key %+" PRIsVALUE " (thread, state, timestamp and class are hakari's own labels)", key);
    if (a->n >= HK_MAX_LABELS) rb_raise(rb_eArgError, "too many labels (expected at most %d in one call)", HK_MAX_LABELS);
    hk_label_kv *kv = &a->kv[a->n++];
    kv->key = RSTRING_PTR(k);
    kv->klen = (size_t)klen;
    kv->val = NULL;
    kv->vlen = 0;
    if (NIL_P(val)) return ST_CONTINUE;
    VALUE v = label_string(val, "value", key);
    a->frozen &= SYMBOL_P(val) || OBJ_FROZEN(val);
    if (RSTRING_LEN(v) > HK_MAX_LABEL_VALUE)
        rb_raise(rb_eArgError, "invalid label value for %+" PRIsVALUE " (%ld bytes; expected at most %d)", key,
                 RSTRING_LEN(v), HK_MAX_LABEL_VALUE);
    kv->val = RSTRING_PTR(v);
    kv->vlen = (size_t)RSTRING_LEN(v);
    return ST_CONTINUE;
}

/* the labels of the positional Hash, then the keywords', checked (raises naming a bad one) */
static void collect(label_args *a, VALUE pos, VALUE kw)
{
    a->n = 0;
    a->frozen = 1;
    if (!NIL_P(pos)) rb_hash_foreach(pos, collect_label, (VALUE)a);
    if (!NIL_P(kw)) rb_hash_foreach(kw, collect_label, (VALUE)a);
}

static VALUE restore_slot(VALUE prev)
{
    VALUE th = rb_thread_current();
    hk_sampler_labels_changing(th);
    rb_thread_local_aset(th, id_slot, prev);
    return Qnil;
}

static VALUE yield_block(VALUE arg)
{
    (void)arg;
    return rb_yield(Qundef); /* no arguments */
}

/* The fiber slot's value with the labels of pos and kw merged into prev's set; checks them (raises
 * naming a bad one) unless pos is the frozen Hash checked last. Out of line: the caller yields to
 * Ruby code that may raise through its frame, which then holds no array (AddressSanitizer keeps
 * the guard bytes of a frame that a longjmp from Ruby skips, and took a later frame's buffer at
 * that depth for an overflow). */
__attribute__((noinline)) static VALUE merged_slot(VALUE pos, VALUE kw, int profiling, VALUE prev)
{
    label_args a;
    int constant = NIL_P(kw) && !NIL_P(pos) && OBJ_FROZEN(pos), collected = 0;
    if (!constant || pos != checked_hash) {
        collect(&a, pos, kw);
        collected = 1;
        if (constant && a.frozen) {
            checked_hash = pos;
            merged_from = Qundef;
        }
    }
    if (!profiling) return Qundef;
    long profile = hk_labels_pack(1);
    int kept = constant && pos == checked_hash; /* (nil is no Hash of labels) */
    if (kept && prev == merged_from && profile == merged_profile) return merged_to;
    if (!collected) collect(&a, pos, kw);
    uint32_t base = FIXNUM_P(prev) ? hk_labels_unpack(FIX2LONG(prev)) : 0;
    int64_t id = hk_labels_merge(base, a.kv, a.n);
    /* a set that cannot be had (the table full, too many labels once merged, no memory) leaves
     * the labels as they were: counted, never raised, so profiling changes no program's flow */
    if (id < 0) id = base;
    VALUE now = id ? LONG2FIX(hk_labels_pack((uint32_t)id)) : Qnil;
    if (kept) merged_from = prev, merged_to = now, merged_profile = profile;
    return now;
}

/* Hakari.label(labels = nil, **labels) { ... }: the block runs with these labels on the
 * current fiber's (nil removes a key), restored after it, also by an exception; without a
 * block they stay until changed. */
static VALUE hakari_label(int argc, VALUE *argv, VALUE self)
{
    (void)self;
    /* (not rb_scan_args: this call is made on every request of a server, profiled or not) */
    VALUE pos = Qnil, kw = Qnil;
    if (argc == 1 && rb_keyword_given_p()) kw = argv[0];
    else if (argc == 1) pos = argv[0];
    else if (argc == 2 && rb_keyword_given_p()) pos = argv[0], kw = argv[1];
    else if (argc != 0) rb_error_arity(argc, 0, 1);
    if (!NIL_P(pos) && !RB_TYPE_P(pos, T_HASH))
        rb_raise(rb_eArgError, "invalid labels %+" PRIsVALUE " (expected a Hash or keywords)", pos);
    int block = rb_block_given_p();
    int profiling = hk_sampler_running() && !hk_sampler_ended();
    VALUE th = profiling ? rb_thread_current() : Qnil;
    VALUE prev = profiling ? rb_thread_local_aref(th, id_slot) : Qnil;
    VALUE now = merged_slot(pos, kw, profiling, prev);
    if (!profiling) return block ? rb_yield(Qundef) : Qnil;
    hk_sampler_labels_changing(th);
    rb_thread_local_aset(th, id_slot, now);
    if (!block) return Qnil;
    return rb_ensure(yield_block, Qnil, restore_slot, prev);
}

/* Hakari.labels -> Hash: the current fiber's labels ({} when no sampling profile runs) */
static VALUE hakari_labels(VALUE self)
{
    (void)self;
    VALUE h = rb_hash_new();
    if (!hk_sampler_running()) return h;
    hk_label_kv kv[HK_MAX_LABELS];
    size_t n = hk_labels_get(hk_labels_current(), kv, HK_MAX_LABELS);
    for (size_t i = 0; i < n; i++)
        rb_hash_aset(h, ID2SYM(rb_intern2(kv[i].key, (long)kv[i].klen)), rb_utf8_str_new(kv[i].val, (long)kv[i].vlen));
    return h;
}

void hk_label_api_init(VALUE mHakari)
{
    id_slot = rb_intern(HK_LABELS_FIBER_KEY);
    rb_gc_register_address(&checked_hash);
    rb_define_module_function(mHakari, "label", hakari_label, -1);
    rb_define_module_function(mHakari, "labels", hakari_labels, 0);
    rb_define_const(mHakari, "MAX_LABELS", INT2NUM(HK_MAX_LABELS));
}
