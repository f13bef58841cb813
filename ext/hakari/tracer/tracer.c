/* tracer.c — call/return hook -> call tree (see tracer.h).
 *
 * One event hook on call, return, c_call and c_return (rb_add_event_hook: for
 * C methods the VM hands it the method id and class it already has; for Ruby
 * methods they are read from the current frame). Per event:
 * find the current context (one pointer compare unless the fiber changed),
 * read the measure, find the method (a cache hit), then push or pop a frame.
 * A frame's total is measured at its return; self = total - callees - wait is
 * derived when the profile is built. Totals per method are derived there too,
 * from paths, counting a subtree once at the method's outermost occurrence.
 * Contexts switched out (another thread or fiber ran) accrue wait time on the
 * frame they left on top.
 */
#include "buf.h"
#include "tracer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>

#include "allocated_count.h"
#include "stack_walk.h"
#include "tracer_int.h"

hk_tracer hk_the_tracer;
#define T hk_the_tracer

/* the allocations measure's hook on the GC (allocated_count.h) is on: kept across free_state,
 * and across a fork, whose child inherits it on */
static int counting_allocations;

/* The context current on this native thread, valid while gen matches the
 * session's and its thread is the current one: a thread's events then find
 * their context with one TLS read instead of asking the VM for the current
 * fiber. Fiber switches, which keep the native thread, update it from the
 * FIBER_SWITCH event. Under M:N threads (3.3+, RUBY_MN_THREADS=1) several
 * Ruby threads take turns on one native thread with no event between them:
 * the thread check sends such a turn to the slow path (its events had gone
 * to the other thread's call tree). */
static __thread struct { uint64_t gen; hk_tcontext *ctx; } tls __attribute__((tls_model("initial-exec")));
static uint64_t session_gen;

/* ---- measure ------------------------------------------------------------- */

static inline int64_t read_measure(const hk_tcontext *c)
{
    if (T.use_tsc) return (int64_t)hk_tsc();
    switch (T.cfg.measure) {
    case HK_MEASURE_CPU: return hk_clock_ns(c->cpu_clock);
    case HK_MEASURE_ALLOCATIONS: return (int64_t)hk_allocated_count();
    default: return hk_clock_ns(CLOCK_MONOTONIC);
    }
}

/* time stands still for a context while tracing is paused */
static inline int64_t measure_now(const hk_tcontext *c) { return T.paused ? c->paused_at : read_measure(c); }

/* ---- methods --------------------------------------------------------------- */

static int own_method(VALUE klass)
{
    if (klass == T.own_singleton || klass == T.native_singleton) return 1;
    for (size_t i = 0; i < sizeof(T.own_classes) / sizeof(T.own_classes[0]); i++)
        if (klass == T.own_classes[i]) return 1;
    return 0;
}

static int method_excluded(VALUE klass, ID mid)
{
    if (own_method(klass)) return 1; /* hakari's own API is never part of the profile */
    if (NIL_P(T.cfg.exclude) || RARRAY_LEN(T.cfg.exclude) == 0) return 0;
    VALUE label = hk_trace_method_label(klass, mid);
    for (long i = 0; i < RARRAY_LEN(T.cfg.exclude); i++) {
        VALUE pat = RARRAY_AREF(T.cfg.exclude, i);
        if (RB_TYPE_P(pat, T_STRING) ? rb_str_equal(pat, label) == Qtrue
                                     : rb_reg_match(pat, label) != Qnil)
            return 1;
    }
    return 0;
}

/* method index for (klass, mid); 0 when out of memory (counted as the root, harmlessly) */
/* A method is (owner, original id, C or Ruby): rubygems' Ruby Kernel#require
 * and the C one it keeps as gem_original_require share owner and original id. */
static uint32_t method_index(VALUE klass, ID mid, int cfunc)
{
    size_t slot = (size_t)(((uint64_t)klass >> 3) ^ (uint64_t)mid ^ ((uint64_t)mid >> 10) ^ (uint64_t)cfunc) &
                  (HK_METHOD_CACHE - 1);
    hk_method_cache_entry *e = &T.method_cache[slot];
    if (e->klass == klass && e->mid == mid && e->cfunc == cfunc && e->index) return e->index;
    uint32_t key[5] = {(uint32_t)klass, (uint32_t)((uint64_t)klass >> 32), (uint32_t)mid,
                       (uint32_t)((uint64_t)mid >> 32), (uint32_t)cfunc};
    int64_t found = hk_intern_find(&T.method_index, key, 5);
    uint32_t index;
    if (found >= 0) {
        index = (uint32_t)found;
    } else {
        /* decide exclusion before inserting: it may allocate, and a GC must see consistent tables */
        int excluded = method_excluded(klass, mid);
        if (hk_array_grow((void **)&T.methods, &T.methods_cap, T.nmethods + 1, sizeof(*T.methods)) < 0) return 0;
        int64_t id = hk_intern_seq(&T.method_index, key, 5);
        if (id < 0) return 0;
        index = (uint32_t)id;
        T.methods[index] = (hk_tmethod){klass, mid, excluded, own_method(klass), cfunc};
        T.nmethods = index + 1;
    }
    *e = (hk_method_cache_entry){klass, mid, index, cfunc};
    return index;
}

/* ---- nodes ----------------------------------------------------------------- */

static uint32_t new_node(uint32_t parent, uint32_t method, uint32_t seq)
{
    if (hk_array_grow((void **)&T.nodes, &T.nodes_cap, T.nnodes + 1, sizeof(*T.nodes)) < 0) return UINT32_MAX;
    T.nodes[T.nnodes] = (hk_tnode){method, parent, seq, 0, 0, 0, 0, 0};
    return (uint32_t)T.nnodes++;
}

#define NO_NODE UINT32_MAX /* out of memory, or no room left under the budget */

/* the (parent, method) node; a new one only while the tracer has fewer than `room` nodes */
static uint32_t child_node(hk_troot *r, uint32_t parent, uint32_t method, size_t room)
{
    hk_child_cache_entry *e = &T.child_cache[(parent * 0x9e3779b1u ^ method) & (HK_CHILD_CACHE - 1)];
    if (e->parent == parent && e->method == method && e->node) return e->node;
    uint64_t key = ((uint64_t)parent << 32) | method;
    uint32_t id;
    if (hk_u64_map_get(&T.children, key, &id)) {
        *e = (hk_child_cache_entry){parent, method, id};
        return id;
    }
    if (T.nnodes >= room) return NO_NODE;
    id = new_node(parent, method, r->seq);
    if (id == UINT32_MAX || hk_u64_map_put(&T.children, key, id) < 0) return NO_NODE;
    *e = (hk_child_cache_entry){parent, method, id};
    if (parent == r->node &&
        hk_array_grow((void **)&r->top, &r->top_cap, r->ntop + 1, sizeof(*r->top)) == 0)
        r->top[r->ntop++] = id;
    return id;
}

/* whether node n is a method's leaf under a [folded] node (only once T.folding) */
static inline int fold_leaf_p(const hk_tnode *n)
{
    return n->parent != UINT32_MAX && T.nodes[n->parent].method == T.fold_method;
}

/* The [folded] pseudo-method, made when the budget is first reached: interned under a key no
 * real method has (a C/Ruby flag of 2), so method ids stay dense. 0 when out of memory. */
static uint32_t fold_method(void)
{
    if (T.fold_method) return T.fold_method;
    uint32_t key[5] = {0, 0, 0, 0, 2};
    if (hk_array_grow((void **)&T.methods, &T.methods_cap, T.nmethods + 1, sizeof(*T.methods)) < 0) return 0;
    int64_t id = hk_intern_seq(&T.method_index, key, 5);
    if (id < 0) return 0;
    T.methods[id] = (hk_tmethod){Qnil, 0, 0, 0, 0};
    T.nmethods = (size_t)id + 1;
    return T.fold_method = (uint32_t)id;
}

/* The leaf of method m under the [folded] node g; past the hard limit (or out of memory), g
 * itself, whose path then holds the call's time and the fold edges its method's figures */
static uint32_t fold_leaf(hk_troot *r, uint32_t g, uint32_t m)
{
    size_t before = T.nnodes;
    uint32_t n = child_node(r, g, m, T.hard_limit);
    if (n == NO_NODE) return g;
    if (T.nnodes > before) /* new: whether m is on the kept path, for fold_count, once */
        for (uint32_t k = T.nodes[g].parent; k != UINT32_MAX && !T.nodes[n].on_kept_path; k = T.nodes[k].parent)
            T.nodes[n].on_kept_path = T.nodes[k].method == m;
    return n;
}

/* The node of a call of m made from the node parent. Until the budget is reached, the
 * (parent, m) node, made when new. Past it, a new path folds: the call's node is m's leaf
 * under the [folded] node of its nearest kept ancestor (made when new, whatever the count:
 * one per kept node at most), and so is every call made below it, whatever its depth: the
 * ancestor's subtree keeps its whole time. NO_NODE when none can be had. */
static uint32_t call_node(hk_troot *r, uint32_t parent, int parent_folded, uint32_t m)
{
    if (parent_folded == 2) return fold_leaf(r, parent, m);                /* below a call kept in g itself */
    if (parent_folded == 1) return fold_leaf(r, T.nodes[parent].parent, m); /* below a folded call */
    uint32_t node = child_node(r, parent, m, T.max_paths);
    if (node != NO_NODE || T.nnodes < T.max_paths) return node; /* found, made, or out of memory */
    uint32_t f = fold_method();
    if (!f) return NO_NODE;
    T.folding = 1;
    uint32_t g = child_node(r, parent, f, SIZE_MAX);
    return g == NO_NODE ? NO_NODE : fold_leaf(r, g, m);
}

/* method m's bit in a frame's fold_bloom */
static inline uint64_t method_bit(uint32_t m) { return (uint64_t)1 << ((m * 0x9e3779b1u) >> 26); }

/* what a call with node n is for fold_count: 0 kept, 1 a [folded] leaf, 2 the [folded] node */
static inline int folded_kind(uint32_t n)
{
    if (!T.folding) return 0;
    return T.nodes[n].method == T.fold_method ? 2 : fold_leaf_p(&T.nodes[n]) ? 1 : 0;
}

/* the (caller, callee) entry of the fold edges, made when new; NULL when out of memory */
static hk_tfold *fold_entry(uint32_t caller, uint32_t callee)
{
    uint32_t *slot = &T.fold_cache[(caller * 0x9e3779b1u ^ callee) & (HK_FOLD_CACHE - 1)];
    if (*slot && T.folds[*slot - 1].caller == caller && T.folds[*slot - 1].callee == callee) return &T.folds[*slot - 1];
    uint64_t key = ((uint64_t)caller << 32) | callee;
    uint32_t i;
    if (hk_u64_map_get(&T.fold_index, key, &i)) {
        *slot = i + 1;
        return &T.folds[i];
    }
    if (hk_array_grow((void **)&T.folds, &T.folds_cap, T.nfolds + 1, sizeof(*T.folds)) < 0 ||
        hk_u64_map_put(&T.fold_index, key, (uint32_t)T.nfolds) < 0)
        return NULL;
    *slot = (uint32_t)T.nfolds + 1;
    hk_tfold *e = &T.folds[T.nfolds++];
    memset(e, 0, sizeof(*e));
    e->caller = caller;
    e->callee = callee;
    return e;
}

/* A folded call returns (frame f, just popped from c): what its [folded] path loses goes to
 * its fold edge. Its caller is the nearest counted frame below it (as a kept node's parent
 * is), 0 at the root; it is outer when no counted frame below runs its method. Below the
 * folded frames on top of the stack lie the kept ones, its kept ancestor's path, which a leaf
 * has looked at once (on_kept_path): only the folded frames are walked, until the method is
 * found, and not even those when the caller's fold_bloom says the method is not among them.
 * A call kept in a [folded] node itself (past the hard limit) walks them all. */
static void fold_count(const hk_tcontext *c, const hk_tframe *f, int64_t total, int64_t wait_total)
{
    const hk_tnode *leaf = f->folded == 1 ? &T.nodes[f->node] : NULL;
    uint32_t caller = 0;
    int outer = 1, found = 0;
    size_t top = c->depth;
    while (top > 0 && !c->stack[top - 1].counted) top--;
    if (leaf && (top == 0 || !(c->stack[top - 1].fold_bloom & method_bit(f->method)))) {
        caller = top ? c->stack[top - 1].method : 0;
        outer = !leaf->on_kept_path;
        top = 0; /* nothing to walk */
        found = 1;
    }
    for (size_t j = top; j-- > 0;) {
        const hk_tframe *b = &c->stack[j];
        if (!b->counted) continue;
        if (!found) {
            caller = b->method;
            found = 1;
        }
        if (leaf && !b->folded) {
            outer = !leaf->on_kept_path;
            break;
        }
        if (b->method == f->method) {
            outer = 0;
            break;
        }
    }
    hk_tfold *e = fold_entry(caller, f->method);
    if (!e) {
        T.folds_lost++;
        return;
    }
    int64_t self = total - f->child - f->wait;
    e->calls++;
    e->self += self;
    e->wait += f->wait;
    if (!outer) return;
    e->outer_calls++;
    e->total += total;
    e->outer_self += self;
    e->outer_wait += f->wait;
    e->outer_wait_total += wait_total;
}

/* ---- contexts -------------------------------------------------------------- */

static int thread_listed(VALUE list, VALUE th)
{
    if (NIL_P(list)) return 0;
    for (long i = 0; i < RARRAY_LEN(list); i++)
        if (RARRAY_AREF(list, i) == th) return 1;
    return 0;
}

static hk_troot *root_for(VALUE thread)
{
    if (T.cfg.merge_threads && T.nroots) return &T.roots[0];
    if (T.cfg.merge_fibers)
        for (size_t i = 0; i < T.nroots; i++)
            if (T.roots[i].thread == thread) return &T.roots[i];
    if (hk_array_grow((void **)&T.roots, &T.roots_cap, T.nroots + 1, sizeof(*T.roots)) < 0) return NULL;
    uint32_t node = new_node(UINT32_MAX, 0, (uint32_t)T.nroots + 1);
    if (node == UINT32_MAX) return NULL;
    hk_troot *r = &T.roots[T.nroots];
    memset(r, 0, sizeof(*r));
    r->node = node;
    r->seq = (uint32_t)++T.nroots;
    r->thread = thread;
    return r;
}

static hk_tcontext *new_context(VALUE fiber)
{
    VALUE th = rb_thread_current();
    if (hk_array_grow((void **)&T.contexts, &T.contexts_cap, T.ncontexts + 1, sizeof(*T.contexts)) < 0) return NULL;
    hk_tcontext *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->fiber = fiber;
    c->thread = th;
    c->ignored = (!NIL_P(T.cfg.threads) && !thread_listed(T.cfg.threads, th)) ||
                 thread_listed(T.cfg.exclude_threads, th);
    if (pthread_getcpuclockid(pthread_self(), &c->cpu_clock) != 0) c->cpu_clock = CLOCK_THREAD_CPUTIME_ID;
    c->switched_out_at = -1;
    hk_troot *r = c->ignored ? NULL : root_for(th);
    if (!c->ignored && !r) { free(c); return NULL; }
    c->root = r ? (uint32_t)(r - T.roots) : 0;
    c->seq = r ? r->seq : 0;
    c->paused_at = read_measure(c);
    if (r && !r->started) { r->started = 1; r->started_at = c->paused_at; }
    if (hk_u64_map_put(&T.context_ids, (uint64_t)fiber, (uint32_t)T.ncontexts) < 0) { free(c); return NULL; }
    T.contexts[T.ncontexts++] = c;
    return c;
}

static hk_tcontext *context_of(VALUE fiber)
{
    uint32_t i;
    int known = hk_u64_map_get(&T.context_ids, (uint64_t)fiber, &i);
    hk_tcontext *c = known ? T.contexts[i] : new_context(fiber);
    if (c) {
        tls.ctx = c;
        tls.gen = session_gen;
        /* for the NEWOBJ hook, which cannot ask for the current fiber (that may allocate) */
        hk_u64_map_put(&T.thread_context, (uint64_t)c->thread, known ? i : (uint32_t)T.ncontexts - 1);
    }
    return c;
}

/* this native thread's context when it is the current thread's, else NULL */
static inline hk_tcontext *cached_context(void)
{
    hk_tcontext *c = tls.gen == session_gen ? tls.ctx : NULL;
    return c && c->thread == rb_thread_current() ? c : NULL;
}

/* Another context than the last event's: the old one is switched out, the
 * new one (if it was) gets the time it spent out as wait on its top frame. */
static void switch_context(hk_tcontext *c)
{
    if (T.cur) T.cur->switched_out_at = T.paused ? T.cur->paused_at : read_measure(T.cur);
    if (c->switched_out_at >= 0) {
        int64_t waited = (T.paused ? c->paused_at : read_measure(c)) - c->switched_out_at;
        if (c->depth) c->stack[c->depth - 1].wait += waited;
        else if (!c->ignored) T.roots[c->root].wait += waited;
        c->switched_out_at = -1;
    }
    T.cur = c;
}

/* ---- frames ---------------------------------------------------------------- */

static void on_call(hk_tcontext *c, uint32_t m, int64_t now)
{
    if (c->depth == c->cap && hk_array_grow((void **)&c->stack, &c->cap, c->depth + 1, sizeof(*c->stack)) < 0) {
        T.dropped++;
        return;
    }
    hk_troot *r = &T.roots[c->root];
    const hk_tframe *up = c->depth ? &c->stack[c->depth - 1] : NULL;
    uint32_t parent = up ? up->node : r->node;
    int parent_folded = up ? up->folded : 0; /* an excluded frame carries its caller's node and kind */
    hk_tframe *f = &c->stack[c->depth++];
    uint64_t bloom = up ? up->fold_bloom : 0;
    *f = (hk_tframe){parent, m, 0, parent_folded, now, 0, 0, 0, bloom};
    if (T.paused || T.methods[m].excluded) return; /* transparent: its time stays with the caller */
    uint32_t node = call_node(r, parent, parent_folded, m);
    if (node == NO_NODE) { T.dropped++; return; }
    T.nodes[node].calls++;
    T.calls++;
    f->node = node;
    f->counted = 1;
    f->folded = parent_folded || node >= T.max_paths ? folded_kind(node) : 0;
    if (f->folded) f->fold_bloom = bloom | method_bit(m);
}

static void pop_frame(hk_tcontext *c, int64_t now)
{
    hk_tframe f = c->stack[--c->depth];
    hk_tframe *parent = c->depth ? &c->stack[c->depth - 1] : NULL;
    if (f.counted) {
        int64_t total = now - f.start, wait_total = f.wait + f.wait_below;
        hk_tnode *n = &T.nodes[f.node];
        n->total += total;
        n->child += f.child;
        n->wait += f.wait;
        if (parent) {
            parent->child += total;
            parent->wait_below += wait_total;
        }
        if (f.folded) fold_count(c, &f, total, wait_total);
    } else if (parent) {
        parent->child += f.child;
        parent->wait += f.wait;
        parent->wait_below += f.wait_below;
    }
}

/* A return with nothing on the stack: the method was called before tracing
 * started. It becomes the parent of everything recorded at the root so far,
 * with the time since the root started as its total. */
static void adopt_caller(hk_tcontext *c, uint32_t m, int64_t now)
{
    if (own_method(T.methods[m].klass)) return; /* the start's own frames */
    T.unmatched_returns++;
    if (T.paused || T.methods[m].excluded) return;
    hk_troot *r = &T.roots[c->root];
    uint32_t x = new_node(r->node, m, r->seq);
    if (x == UINT32_MAX) return;
    int64_t child = 0;
    memset(T.child_cache, 0, sizeof(T.child_cache)); /* entries under the root move */
    for (size_t i = 0; i < r->ntop; i++) {
        hk_tnode *n = &T.nodes[r->top[i]];
        hk_u64_map_del(&T.children, ((uint64_t)r->node << 32) | n->method);
        hk_u64_map_put(&T.children, ((uint64_t)x << 32) | n->method, r->top[i]);
        n->parent = x;
        child += n->total;
    }
    hk_tnode *xn = &T.nodes[x];
    xn->calls = 1;
    xn->total = now - r->started_at;
    xn->child = child;
    xn->wait = r->wait;
    r->wait = 0;
    r->ntop = 0;
    hk_u64_map_put(&T.children, ((uint64_t)r->node << 32) | m, x);
    if (hk_array_grow((void **)&r->top, &r->top_cap, 1, sizeof(*r->top)) == 0) r->top[r->ntop++] = x;
}

static void on_return(hk_tcontext *c, uint32_t m, int64_t now)
{
    if (c->depth == 0) { adopt_caller(c, m, now); return; }
    if (c->stack[c->depth - 1].method != m) {
        /* a frame was left without its return event: unwind to the matching one */
        size_t i = c->depth - 1;
        while (i > 0 && c->stack[i - 1].method != m) i--;
        if (i == 0) { T.unmatched_returns++; return; }
        while (c->depth > i) pop_frame(c, now);
    }
    pop_frame(c, now);
}

/* ---- allocations: true ------------------------------------------------------ */

/* Installed only for a trace that asks for it: a NEWOBJ hook costs every allocation. */
static VALUE tracepoint;

/* The object goes to the innermost counted call of the context whose events run on this
 * native thread, as that call's time would (tracer_allocs.c says more). */
/* ctx: GVL — RUBY_INTERNAL_EVENT_NEWOBJ, inside the allocation */
static void newobj_hook(VALUE tpval, void *data)
{
    (void)data;
    if (!T.running || T.paused || T.in_event) return;
    hk_tcontext *c = cached_context();
    uint32_t i;
    if (!c && hk_u64_map_get(&T.thread_context, (uint64_t)rb_thread_current(), &i)) c = T.contexts[i];
    if (!c) { /* a thread before its first event: its context cannot be made here (that may allocate) */
        T.allocs_unseen++;
        return;
    }
    if (c->ignored || (c->depth && T.methods[c->stack[c->depth - 1].method].own)) return;
    rb_trace_arg_t *ta = rb_tracearg_from_tracepoint(tpval);
    VALUE obj = rb_tracearg_object(ta);
    VALUE klass = hk_new_object_class(obj);
    if (!klass) return;
    VALUE file = rb_tracearg_path(ta);
    int32_t line = NIL_P(file) ? 0 : (int32_t)FIX2INT(rb_tracearg_lineno(ta));
    uint32_t node = c->depth ? c->stack[c->depth - 1].node : T.roots[c->root].node;
    hk_talloc *a = hk_tracer_alloc_site(&T, node, line, klass, file);
    if (!a) {
        T.allocs_unseen++;
        return;
    }
    a->count++;
    a->bytes += hk_heap_slot_bytes(obj);
}

static void newobj_start(void)
{
    if (!tracepoint) {
        tracepoint = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, newobj_hook, NULL);
        rb_gc_register_mark_object(tracepoint);
    }
    rb_tracepoint_enable(tracepoint);
}

static void newobj_stop(void)
{
    if (tracepoint) rb_tracepoint_disable(tracepoint);
}

/* ctx: GVL — RUBY_EVENT_FIBER_SWITCH in the fiber switched to, and
 * RUBY_EVENT_THREAD_BEGIN in a new thread (whose native thread may be a reused
 * one, with a stale TLS context) */
static void fiber_switch_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
    if (!T.running) return;
    T.in_event = 1;
    context_of(rb_fiber_current());
    T.in_event = 0;
}

/* ctx: GVL — the event hook */
static void trace_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
    (void)data;
    (void)self;
    if (!T.running) {
        if (T.forked) {
            rb_remove_event_hook(trace_hook);
            rb_remove_event_hook(fiber_switch_hook);
            newobj_stop();
            T.forked = 0;
        }
        return;
    }
    /* what the hook allocates (an excluded method's label) is hakari's, not the program's */
    T.in_event = 1;
    hk_tcontext *c = cached_context();
    if (!c) c = context_of(rb_fiber_current());
    if (c && c != T.cur) switch_context(c);
    if (c && !c->ignored) {
        T.events++;
        int64_t now = measure_now(c);
        /* the VM passes id and class with C events only; a Ruby method's are in its frame */
        if (!mid) rb_frame_method_id_and_class(&mid, &klass);
        uint32_t m = method_index(klass, mid, (ev & (RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN)) != 0);
        if (ev & (RUBY_EVENT_CALL | RUBY_EVENT_C_CALL)) on_call(c, m, now);
        else on_return(c, m, now);
    }
    T.in_event = 0;
}

/* ---- lifecycle ------------------------------------------------------------- */

static void count_allocations(int on) { hk_allocated_count_read(&counting_allocations, on); }

static void free_state(void)
{
    for (size_t i = 0; i < T.ncontexts; i++) {
        free(T.contexts[i]->stack);
        free(T.contexts[i]);
    }
    for (size_t i = 0; i < T.nroots; i++) free(T.roots[i].top);
    free(T.contexts);
    free(T.roots);
    free(T.nodes);
    free(T.methods);
    hk_intern_free(&T.method_index);
    hk_u64_map_free(&T.children);
    free(T.folds);
    hk_u64_map_free(&T.fold_index);
    hk_u64_map_free(&T.context_ids);
    hk_u64_map_free(&T.thread_context);
    hk_tracer_allocs_free(&T);
    int forked = T.forked;
    memset(&T, 0, sizeof(T));
    T.cfg.exclude = T.cfg.threads = T.cfg.exclude_threads = Qnil;
    T.forked = forked;
}

int hk_tracer_start(const hk_tracer_config *cfg, char *err, size_t errlen)
{
    if (T.running) {
        snprintf(err, errlen, "hakari is already running");
        return -1;
    }
    free_state();
    T.cfg = *cfg;
    T.max_paths = cfg->max_paths ? cfg->max_paths : HK_DEFAULT_MAX_PATHS;
    T.hard_limit = T.max_paths + T.max_paths / 2;
    VALUE mod = rb_const_get(rb_cObject, rb_intern("Hakari"));
    T.own_singleton = rb_singleton_class(mod);
    T.native_singleton = rb_singleton_class(rb_const_get(mod, rb_intern("Native")));
    for (size_t i = 0; i < sizeof(T.own_classes) / sizeof(T.own_classes[0]); i++) T.own_classes[i] = Qundef;
    T.own_classes[0] = rb_const_get(mod, rb_intern("Profile"));
    if (rb_const_defined(mod, rb_intern("Autorun")))
        T.own_classes[1] = rb_singleton_class(rb_const_get(mod, rb_intern("Autorun")));
    /* method 0 is the context root; node ids come from new_node */
    if (hk_array_grow((void **)&T.methods, &T.methods_cap, 1, sizeof(*T.methods)) < 0) goto oom;
    uint32_t none[5] = {0, 0, 0, 0, 0};
    if (hk_intern_seq(&T.method_index, none, 5) != 0) goto oom;
    T.methods[0] = (hk_tmethod){Qnil, 0, 0, 0, 0};
    T.nmethods = 1;
    /* The hooks before the clocks: adding the first call/return hook makes Ruby
     * rewrite every method's instructions for tracing (1.6 ms in a bare `ruby -e`,
     * far more in a large app). That is hakari's time, and read after it the
     * clocks leave it out of the frames open at start. The hooks do nothing
     * until T.running. */
    if (T.forked) T.forked = 0; /* a hook left by a fork is still installed: reuse it */
    else {
        rb_add_event_hook(trace_hook, RUBY_EVENT_CALL | RUBY_EVENT_RETURN | RUBY_EVENT_C_CALL | RUBY_EVENT_C_RETURN, Qnil);
        rb_add_event_hook(fiber_switch_hook, RUBY_EVENT_FIBER_SWITCH | RUBY_EVENT_THREAD_BEGIN, Qnil);
    }
    if (cfg->allocations) newobj_start();
    else newobj_stop(); /* one a fork's child inherited enabled */
    count_allocations(cfg->measure == HK_MEASURE_ALLOCATIONS);
    T.start_real_ns = hk_clock_ns(CLOCK_REALTIME);
    T.start_mono_ns = hk_clock_ns(CLOCK_MONOTONIC);
    T.use_tsc = cfg->measure == HK_MEASURE_WALL && hk_tsc_usable();
    T.start_tsc = hk_tsc();
    session_gen++;
    T.running = 1;
    T.in_event = 1; /* the measure's first read may make objects (GC.stat's keys, once): hakari's */
    hk_tcontext *c = context_of(rb_fiber_current());
    T.in_event = 0;
    if (!c) {
        T.running = 0;
        rb_remove_event_hook(trace_hook);
        rb_remove_event_hook(fiber_switch_hook);
        newobj_stop();
        count_allocations(0);
        goto oom;
    }
    switch_context(c);
    return 0;
oom:
    free_state();
    snprintf(err, errlen, "out of memory");
    return -1;
}

static void fill_stats(hk_tracer_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->measure = T.cfg.measure;
    st->start_time_ns = T.start_real_ns;
    st->duration_ns = hk_clock_ns(CLOCK_MONOTONIC) - T.start_mono_ns;
    st->event_count = T.events;
    st->call_count = T.calls;
    st->node_count = T.nnodes - T.nroots;
    st->method_count = T.nmethods - 1 - (T.fold_method != 0);
    st->max_paths = T.max_paths;
    st->dropped_calls = T.dropped;
    for (size_t i = 0; T.folding && i < T.nnodes; i++) {
        const hk_tnode *n = &T.nodes[i];
        if (n->method != T.fold_method && !fold_leaf_p(n)) continue;
        st->folded_calls += n->calls;
        st->folded_measure += n->total - n->child; /* self + wait */
    }
    st->context_count = T.ncontexts;
    st->unmatched_returns = T.unmatched_returns;
    for (size_t i = 0; i < T.nallocs; i++) st->allocation_count += T.allocs[i].count;
    st->allocation_sites = T.nallocs;
    st->allocations_unseen = T.allocs_unseen;
    st->allocations = T.cfg.allocations;
    /* TSC ticks -> ns, calibrated against the monotonic clock over the whole session */
    st->scale = 1.0;
    if (T.use_tsc) {
        uint64_t ticks = hk_tsc() - T.start_tsc;
        if (ticks > 0) st->scale = (double)st->duration_ns / (double)ticks;
    }
}

hk_profile *hk_tracer_stop(hk_tracer_stats *stats)
{
    if (!T.running) return NULL;
    rb_remove_event_hook(trace_hook);
    rb_remove_event_hook(fiber_switch_hook);
    newobj_stop();
    if (T.paused) hk_tracer_resume();
    /* frames still open end now, each context measured on its own clock */
    for (size_t i = 0; i < T.ncontexts; i++) {
        hk_tcontext *c = T.contexts[i];
        if (c->ignored) continue;
        int64_t now = read_measure(c);
        if (now < 0) now = c->depth ? c->stack[c->depth - 1].start : 0; /* clock of a dead thread */
        if (c->switched_out_at >= 0 && c->depth) c->stack[c->depth - 1].wait += now - c->switched_out_at;
        while (c->depth) pop_frame(c, now);
    }
    count_allocations(0);
    T.running = 0;
    session_gen++;
    fill_stats(stats);
    /* the (parent, method) index is for the events only: its room goes back before the build */
    hk_u64_map_free(&T.children);
    hk_profile *p = hk_tracer_build_profile(&T, stats);
    free_state();
    return p;
}

int hk_tracer_running(void) { return T.running; }
int hk_tracer_paused(void) { return T.running && T.paused; }

int hk_tracer_pause(void)
{
    if (!T.running || T.paused) return -1;
    for (size_t i = 0; i < T.ncontexts; i++) T.contexts[i]->paused_at = read_measure(T.contexts[i]);
    T.paused = 1;
    return 0;
}

int hk_tracer_resume(void)
{
    if (!T.running || !T.paused) return -1;
    T.paused = 0;
    /* shift open frames forward by the paused span, so no total includes it */
    for (size_t i = 0; i < T.ncontexts; i++) {
        hk_tcontext *c = T.contexts[i];
        int64_t now = read_measure(c);
        if (now < 0) continue;
        int64_t span = now - c->paused_at;
        for (size_t j = 0; j < c->depth; j++) c->stack[j].start += span;
        if (c->switched_out_at >= 0) c->switched_out_at += span;
        if (!c->ignored && T.roots[c->root].started_at) T.roots[c->root].started_at += span;
    }
    return 0;
}

void hk_tracer_mark(void)
{
    for (size_t i = 1; i < T.nmethods; i++) rb_gc_mark(T.methods[i].klass);
    for (size_t i = 0; i < T.ncontexts; i++) {
        rb_gc_mark(T.contexts[i]->fiber);
        rb_gc_mark(T.contexts[i]->thread);
    }
    for (size_t i = 0; i < T.nroots; i++) rb_gc_mark(T.roots[i].thread);
    for (size_t i = 0; i < sizeof(T.own_classes) / sizeof(T.own_classes[0]); i++) rb_gc_mark(T.own_classes[i]);
    hk_tracer_allocs_mark(&T);
    rb_gc_mark(T.cfg.exclude);
    rb_gc_mark(T.cfg.threads);
    rb_gc_mark(T.cfg.exclude_threads);
}

void hk_tracer_memory(hk_tracer_memory_use *m)
{
    m->paths = T.nnodes - T.nroots;
    m->methods = T.nmethods - 1;
    m->path_bytes = T.nodes_cap * sizeof(hk_tnode) + hk_u64_map_memsize(&T.children);
    m->method_bytes = T.methods_cap * sizeof(hk_tmethod) + hk_intern_memsize(&T.method_index);
    m->total_bytes = hk_tracer_memsize();
}

size_t hk_tracer_memsize(void)
{
    size_t n = T.nodes_cap * sizeof(hk_tnode) + T.methods_cap * sizeof(hk_tmethod) +
               hk_intern_memsize(&T.method_index) + hk_u64_map_memsize(&T.children) +
               hk_u64_map_memsize(&T.context_ids) + hk_u64_map_memsize(&T.thread_context) +
               T.folds_cap * sizeof(hk_tfold) + hk_u64_map_memsize(&T.fold_index) +
               hk_tracer_allocs_memsize(&T);
    for (size_t i = 0; i < T.ncontexts; i++) n += sizeof(hk_tcontext) + T.contexts[i]->cap * sizeof(hk_tframe);
    return n;
}

/* ctx: fork child. The hook is a VM hook and survives fork: stop quietly and
 * let the next event remove it (safe there, unlike inside fork()). */
static void atfork_child(void)
{
    if (!T.running) return;
    T.running = 0;
    T.forked = 1;
}

void hk_tracer_init(void)
{
    T.cfg.exclude = T.cfg.threads = T.cfg.exclude_threads = Qnil;
    pthread_atfork(NULL, NULL, atfork_child);
}
