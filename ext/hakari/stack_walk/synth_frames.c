/* synth_frames.c — invisible methods made visible (stack_walk.h, "Synthesized
 * frames"). The VM runs Integer#+, String#=~, Hash#[] and their kin through
 * specialized instructions (opt_plus, opt_regexpmatch2, opt_aref, ...) that
 * push no control frame, so no walk of the frames sees them: their time sits
 * in their caller's frame.
 *
 * An instruction's first step is to move its frame's pc past it, and the
 * operands it works on stay on the VM stack until its last step. So while
 * one runs, the leaf Ruby frame's pc is just past its words, and its
 * receiver is on the stack below sp. The worker reads both at the tick, with
 * fault-free reads (the frame may be popped meanwhile): which instruction,
 * then which class the receiver has, pick the method. Nothing runs on the
 * profiled thread.
 *
 * What it needs to know of this Ruby is learned once, under the GVL, from
 * Ruby itself: a snippet compiled by RubyVM::InstructionSequence gives the
 * words each specialized instruction is encoded as (its handler's address
 * under direct threading) and its width and call data (#to_a); an
 * UnboundMethod of each class the instruction serves holds the method entry
 * a real call's frame would hold. Every guess is checked (the snippet's
 * words add up to its iseq's size, an entry is a method entry named and owned
 * as asked); what fails is left out, never guessed.
 *
 * Where it is off: under YJIT, compiled code writes a frame's pc only before
 * a call that needs it, so a pc can be far behind the code running; YJIT
 * itself calls some of these methods (String#=~) as C methods with frames.
 * Instructions rewritten for a TracePoint (trace_opt_plus, ...) are not
 * recognised.
 */
#include "stack_walk.h"
#include "stack_walk_int.h"

#ifdef HK_VM_LAYOUT

#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>

#include "stack_walk_vm.h"

/* One specialized instruction. */
typedef struct synth_insn {
    VALUE word;       /* how the instruction is encoded in an iseq */
    uint8_t width;    /* its words, operands included */
    uint8_t recv_at;  /* its receiver's slot below sp while it runs */
    uint8_t first, n; /* the methods it may stand for, in synth_methods */
} synth_insn;

/* A method an instruction stands for: the receiver's class, and the entry a
 * real call's frame would hold (pinned by hk_synth_mark). Its number as a
 * synthesized frame is its index + 1. */
typedef struct synth_method {
    VALUE klass, me;
} synth_method;

#define MAX_INSNS 48
#define MAX_METHODS 128
static synth_insn synth_insns[MAX_INSNS];
static synth_method synth_methods[MAX_METHODS];
static size_t ninsns, nmethods;
static int learned;            /* 0: not tried; 1: learned; -1: failed, learn_failure says why */
static const char *learn_failure;
static volatile int profile_on; /* the running profile synthesizes */
static const volatile bool *yjit_flag; /* 3.3+: rb_yjit_enabled_p, which RubyVM::YJIT.enable sets at run time */
static int yjit_at_start;       /* 3.1: YJIT can only be enabled at boot */

/* The classes whose receivers each method name is specialized for; the first
 * is the one named when the receiver could not be read, which happens with
 * the shortest calls (a long one is found running by the reads): the cheaper
 * class comes first. BasicObject: any receiver whose method is the default
 * one (==, !=, !). */
static const struct {
    const char *mid, *classes[6];
} served[] = {
    {"+", {"Integer", "Float", "String", "Array"}},
    {"-", {"Integer", "Float"}},
    {"*", {"Integer", "Float"}},
    {"/", {"Integer", "Float"}},
    {"%", {"Integer", "Float"}},
    {"==", {"Integer", "Float", "String", "Symbol", "BasicObject"}},
    {"!=", {"BasicObject"}},
    {"<", {"Integer", "Float"}},
    {"<=", {"Integer", "Float"}},
    {">", {"Integer", "Float"}},
    {">=", {"Integer", "Float"}},
    {"<<", {"Array", "String"}},
    {"&", {"Integer"}},
    {"|", {"Integer"}},
    {"[]", {"Array", "Hash"}},
    {"[]=", {"Array", "Hash"}},
    {"length", {"String", "Array", "Hash"}},
    {"size", {"String", "Array", "Hash"}},
    {"empty?", {"String", "Array", "Hash"}},
    {"succ", {"Integer", "String"}},
    {"!", {"BasicObject"}},
    {"=~", {"String", "Regexp"}},
};

/* Compiled, never run: one of each specialized send, the statements' values discarded. */
static const char snippet[] = "a = b = c = nil\n"
                              "a + b; a - b; a * b; a / b; a % b\n"
                              "a == b; a != b; a < b; a <= b; a > b; a >= b\n"
                              "a << b; a & b; a | b\n"
                              "a[b]; a[b] = c; a['k']; a['k'] = c\n"
                              "a.length; a.size; a.empty?; a.succ; !a; a =~ b\n";

/* rb_iseq_constant_body's head, the same in every layout the walker knows */
typedef struct vm_body_head {
    int type;
    unsigned int iseq_size;
    const VALUE *iseq_encoded;
} vm_body_head;

const void *rb_iseqw_to_iseq(VALUE iseqw); /* iseq.c; exported */

/* the method entry an UnboundMethod holds (struct METHOD, proc.c), if it is
 * one named mid and owned by klass; else 0 */
static VALUE entry_of(VALUE um, VALUE klass, ID mid)
{
    if (!RB_TYPE_P(um, T_DATA) || !RTYPEDDATA_P(um)) return 0;
#if HK_VM_LAYOUT >= 33
    const VALUE *method = RTYPEDDATA_GET_DATA(um); /* embedded in the object on 3.4 */
#else
    const VALUE *method = RTYPEDDATA_DATA(um);
#endif
    VALUE me = method ? method[VM_METHOD_ME_INDEX] : 0;
    if (!me || SPECIAL_CONST_P(me) || BUILTIN_TYPE(me) != T_IMEMO || IMEMO_TYPE(me) != IMEMO_MENT) return 0;
    const VALUE *m = (const VALUE *)me; /* rb_method_entry_t: flags, defined_class, def, called_id, owner */
    return (ID)m[3] == mid && m[4] == klass ? me : 0;
}

static VALUE instance_method(VALUE args) /* rb_protect's body: [klass, name] */
{
    return rb_funcall(RARRAY_AREF(args, 0), rb_intern("instance_method"), 1, RARRAY_AREF(args, 1));
}

/* Adds the methods an instruction whose call data names mid_sym may stand
 * for; how many. */
static int add_methods(VALUE mid_sym)
{
    const char *name = rb_id2name(SYM2ID(mid_sym));
    for (size_t i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
        if (strcmp(served[i].mid, name) != 0) continue;
        int added = 0;
        for (const char *const *c = served[i].classes; *c; c++) {
            VALUE klass = rb_const_get(rb_cObject, rb_intern(*c));
            int state = 0;
            VALUE um = rb_protect(instance_method, rb_ary_new_from_args(2, klass, mid_sym), &state);
            if (state) {
                rb_set_errinfo(Qnil);
                continue;
            }
            VALUE me = entry_of(um, klass, SYM2ID(mid_sym));
            RB_GC_GUARD(um);
            if (!me || nmethods >= MAX_METHODS) continue;
            synth_methods[nmethods++] = (synth_method){klass, me};
            added++;
        }
        return added;
    }
    return 0;
}

/* The call data operand of an instruction as #to_a gives it (the last one: opt_neq has two), or nil */
static VALUE call_data(VALUE insn)
{
    VALUE cd = Qnil;
    for (long k = 1; k < RARRAY_LEN(insn); k++)
        if (RB_TYPE_P(RARRAY_AREF(insn, k), T_HASH)) cd = RARRAY_AREF(insn, k);
    return cd;
}

static VALUE compile_snippet(VALUE unused)
{
    (void)unused;
    VALUE vm = rb_const_get(rb_cObject, rb_intern("RubyVM"));
    VALUE iseq_class = rb_const_get(vm, rb_intern("InstructionSequence"));
    return rb_funcall(iseq_class, rb_intern("compile"), 1, rb_str_new_cstr(snippet));
}

static VALUE to_a(VALUE iseqw) { return rb_funcall(iseqw, rb_intern("to_a"), 0); }

/* ctx: GVL. Learns the specialized instructions from the compiled snippet: its
 * #to_a lists them with their operands, its iseq holds their words. NULL, or
 * what failed. */
static const char *learn(void)
{
    int state = 0;
    VALUE iseqw = rb_protect(compile_snippet, Qnil, &state);
    VALUE list = state ? Qnil : rb_protect(to_a, iseqw, &state);
    if (state) {
        rb_set_errinfo(Qnil);
        return "RubyVM::InstructionSequence could not compile the probe";
    }
    const vm_iseq *iseq = rb_iseqw_to_iseq(iseqw);
    if (!iseq || iseq->wrapper != iseqw) return "the probe's iseq is not where its wrapper says";
    const vm_body_head *body = iseq->body;
    VALUE insns = RB_TYPE_P(list, T_ARRAY) && RARRAY_LEN(list) ? RARRAY_AREF(list, RARRAY_LEN(list) - 1) : Qnil;
    if (!body) return "the probe's iseq has no body";
    if (!RB_TYPE_P(insns, T_ARRAY)) return "the probe's instruction list is not an Array";
    ID id_mid = rb_intern("mid"), id_argc = rb_intern("orig_argc");
    size_t pos = 0;
    for (long i = 0; i < RARRAY_LEN(insns); i++) {
        VALUE insn = RARRAY_AREF(insns, i);
        if (!RB_TYPE_P(insn, T_ARRAY) || !RARRAY_LEN(insn)) continue; /* a line number, label or event */
        long width = RARRAY_LEN(insn);
        if (pos + (size_t)width > body->iseq_size) return "the probe's instructions overrun its iseq";
        const char *name = rb_id2name(SYM2ID(RARRAY_AREF(insn, 0)));
        VALUE cd = call_data(insn);
        if (strncmp(name, "opt_", 4) == 0 && strcmp(name, "opt_send_without_block") != 0 && !NIL_P(cd) &&
            ninsns < MAX_INSNS && width <= 3) {
            VALUE mid = rb_hash_aref(cd, ID2SYM(id_mid)), argc = rb_hash_aref(cd, ID2SYM(id_argc));
            /* an *_with instruction has its key as an operand, not on the stack */
            long with = strstr(name, "_with") != NULL;
            size_t first = nmethods;
            long recv_at = FIXNUM_P(argc) ? FIX2LONG(argc) + 1 - with : 0;
            if (RB_TYPE_P(mid, T_SYMBOL) && recv_at >= 1 && recv_at <= 3 && add_methods(mid) > 0)
                synth_insns[ninsns++] = (synth_insn){body->iseq_encoded[pos], (uint8_t)width,
                                                     (uint8_t)recv_at, (uint8_t)first,
                                                     (uint8_t)(nmethods - first)};
        }
        pos += (size_t)width;
    }
    RB_GC_GUARD(iseqw);
    if (pos != body->iseq_size) return "the probe's instructions do not add up to its iseq";
    return ninsns ? NULL : "no specialized instruction found";
}

int hk_synth_start(int want, const char **why)
{
    profile_on = 0;
    if (!want) {
        *why = "off (synthesize: false)";
        return 0;
    }
    if (!W.enabled) {
        *why = "off: the control-frame walker is not in use (rb_profile_frames)";
        return 0;
    }
    if (!learned) {
        learn_failure = learn();
        learned = learn_failure ? -1 : 1;
#if HK_VM_LAYOUT >= 33
        yjit_flag = (const volatile bool *)dlsym(RTLD_DEFAULT, "rb_yjit_enabled_p");
#endif
    }
    if (learned < 0) {
        *why = learn_failure;
        return 0;
    }
#if HK_VM_LAYOUT < 33
    VALUE vm = rb_const_get(rb_cObject, rb_intern("RubyVM"));
    yjit_at_start = rb_const_defined(vm, rb_intern("YJIT")) &&
                    RTEST(rb_funcall(rb_const_get(vm, rb_intern("YJIT")), rb_intern("enabled?"), 0));
#endif
    if (hk_synth_yjit_now()) {
        *why = "off under YJIT: compiled code does not keep a frame's pc current";
        return 0;
    }
    *why = "on";
    profile_on = 1;
    return 1;
}

int hk_synth_yjit_now(void) { return yjit_at_start || (yjit_flag && *yjit_flag); }

void hk_synth_stop(void) { profile_on = 0; }

/* Words at `at` into `to`: by the fault-free system call (another thread's frames, which may
 * move or be freed meanwhile), or, `here`, read directly (the calling thread's own live frames
 * and objects, in object mode's hook). 1 when read. */
static int read_words(int here, const void *at, void *to, size_t n)
{
    if (!here) return hk_stack_walk_read_words(at, to, n);
    memcpy(to, at, n);
    return 1;
}

/* the class of a receiver read off the VM stack: an immediate's by its tag,
 * else the klass word of its RBasic; 0 when it cannot be read */
static VALUE class_of(VALUE v, int here)
{
    if (RB_FIXNUM_P(v)) return rb_cInteger;
    if (RB_FLONUM_P(v)) return rb_cFloat;
    if (RB_STATIC_SYM_P(v)) return rb_cSymbol;
    if (v == Qnil) return rb_cNilClass;
    if (v == Qtrue) return rb_cTrueClass;
    if (v == Qfalse) return rb_cFalseClass;
    if (SPECIAL_CONST_P(v)) return 0;
    VALUE klass;
    return read_words(here, (const VALUE *)v + 1, &klass, sizeof(klass)) ? klass : 0;
}

/* The class in the receiver's slot of the instruction that ends at f->pc, in
 * the frame at cfp, while the frame seems to run it; 0 when it cannot be
 * read. The program has moved on since f was read, so the frame is read again
 * before and after the slots, in one call, and the slots count only when both
 * reads find that instruction at that depth. One call still copies its pieces
 * some hundreds of ns apart: a short instruction run again and again may have
 * been left and re-entered in between, so a reading is a vote, not a verdict. */
static VALUE receiver_class(uintptr_t cfp, const vm_frame *f, int recv_at, int here)
{
    VALUE slot;
    if (here) /* the thread itself, inside the instruction: nothing moves while it reads */
        return read_words(1, (const void *)(f->sp - recv_at), &slot, sizeof(slot)) ? class_of(slot, 1) : 0;
    vm_frame a, b;
    struct iovec local[3] = {{&a, 2 * sizeof(VALUE)}, {&slot, sizeof(slot)}, {&b, 2 * sizeof(VALUE)}};
    struct iovec remote[3] = {
        {(void *)cfp, 2 * sizeof(VALUE)}, {(void *)(f->sp - recv_at), sizeof(slot)}, {(void *)cfp, 2 * sizeof(VALUE)}};
    if (!hk_stack_walk_read_vec(local, remote, 3)) return 0;
    /* the same depth as f: between an instruction's last step and the next one's first, the
     * pc still names it while sp has moved past its operands */
    if (a.pc != f->pc || b.pc != f->pc || a.sp != f->sp || b.sp != f->sp) return 0;
    return class_of(slot, 0);
}

/* Per instruction (by pc), how often each of its methods' classes was read in
 * its receiver's slot: one writer at a time, the worker at its ticks in the time modes (ticks
 * do not nest), the NEWOBJ hook under the GVL in the object modes, whose worker reads none. A call site
 * almost always sees one class; the readings that caught another instruction's
 * values scatter. */
#define VOTE_SLOTS 512
#define VOTE_MAX 6 /* methods per instruction, at most (served[].classes) */
static struct vote {
    const VALUE *pc;
    uint16_t n[VOTE_MAX];
    uint16_t ticks; /* since the slot was taken: a settled instruction is read one tick in 8 */
    uint16_t unread; /* ticks that found no class to vote for, before the first vote */
} votes[VOTE_SLOTS];

/* Ticks an instruction serving several classes is tried before, with no class read yet, it is
 * given its usual one: until then its samples stay with the caller. A long one (Hash#[] on a
 * long key) is read within a tick or two; a short one (Array#[] by index) rarely ever is. A
 * loaded machine's slow reads had given the usual class to a tenth of a long one's samples. */
#define UNREAD_TICKS 8

/* pc's slot, taken over (its votes cleared) when another instruction had it */
static struct vote *vote_slot(const VALUE *pc)
{
    struct vote *v = &votes[((uintptr_t)pc >> 3) % VOTE_SLOTS];
    if (v->pc != pc) *v = (struct vote){.pc = pc};
    return v;
}

/* the index (from 0) of the method the votes favour; the first (the usual one) when none */
static uint32_t favoured(const struct vote *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t k = 1; k < n && k < VOTE_MAX; k++)
        if (v->n[k] > v->n[best]) best = k;
    return best;
}

/* The votes leave no doubt: 16 or more, nine in ten for one method. Then
 * the receiver is read only one tick in 8, which keeps following a call site
 * whose class changes while saving the worker most of the reads. */
static int settled(struct vote *v, uint32_t n)
{
    uint32_t all = 0, best = v->n[favoured(v, n)];
    for (uint32_t k = 0; k < n && k < VOTE_MAX; k++) all += v->n[k];
    return all >= 16 && best * 10 >= all * 9 && (++v->ticks & 7) != 0;
}

/* the receiver's class among this instruction's methods (index from in->first),
 * or UINT32_MAX. BasicObject's serves any class the others do not, but true,
 * false and nil: the result of a comparison lingers in the slots it was
 * computed from, where a reading that straddled instructions finds it. */
static uint32_t method_of_class(const synth_insn *in, VALUE klass)
{
    uint32_t read = UINT32_MAX;
    for (uint32_t k = 0; klass && k < in->n; k++) {
        VALUE c = synth_methods[in->first + k].klass;
        if (c == klass) return k;
        if (c == rb_cBasicObject && klass != rb_cTrueClass && klass != rb_cFalseClass && klass != rb_cNilClass)
            read = k;
    }
    return read;
}

static uint32_t synth_read(uintptr_t cfp, uintptr_t *iseq, int here)
{
    if (!profile_on || !cfp || hk_synth_yjit_now()) return 0;
    vm_frame f; /* pc, sp, iseq: the first three fields in every layout */
    if (!read_words(here, (const void *)cfp, &f, 3 * sizeof(VALUE)) || !f.pc || !f.iseq) return 0;
    VALUE before[3] = {0, 0, 0}; /* the words before pc: a running instruction's, which are at most three */
    if (here) {
        /* read directly, only words of the frame's own code: the first instruction's pc is one
         * to three words past the code's start (the system call reads past it harmlessly) */
        const vm_body_head *body = ((const vm_iseq *)f.iseq)->body;
        if (!body || f.pc <= body->iseq_encoded) return 0;
        size_t in_code = (size_t)(f.pc - body->iseq_encoded);
        size_t n = in_code < 3 ? in_code : 3;
        memcpy(before + 3 - n, f.pc - n, n * sizeof(VALUE));
    } else if (!read_words(0, f.pc - 3, before, sizeof(before))) {
        return 0;
    }
    /* An operand is an object, a number or a pointer to the heap, never the
     * address of an instruction's code: the word matched is the opcode of the
     * instruction that ends at pc. */
    const synth_insn *in = NULL;
    for (size_t i = 0; i < ninsns && !in; i++)
        if (before[3 - synth_insns[i].width] == synth_insns[i].word) in = &synth_insns[i];
    if (!in) return 0;
    struct vote *v = vote_slot(f.pc);
    if (in->n > 1 && !settled(v, in->n)) {
        /* The first vote, which names the instruction's samples until
         * another outnumbers it, takes two readings that agree (one that
         * caught another instruction's values rarely agrees with the next)
         * and up to 8 tries, so that its first samples do not get the usual
         * class whatever the receiver; later ones take one reading of two tries. */
        uint32_t all = 0;
        for (int k = 0; k < VOTE_MAX; k++) all += v->n[k];
        VALUE klass = 0;
        for (int tries = all ? 2 : 8; tries > 0 && !klass; tries--) {
            klass = receiver_class(cfp, &f, in->recv_at, here);
            if (!all && klass && receiver_class(cfp, &f, in->recv_at, here) != klass) klass = 0;
        }
        uint32_t read = method_of_class(in, klass);
        if (read < in->n && ++v->n[read] == UINT16_MAX)
            for (int k = 0; k < VOTE_MAX; k++) v->n[k] /= 2;
        if (read < in->n) all++;
        if (!all && v->unread < UNREAD_TICKS) {
            v->unread++;
            return 0;
        }
    }
    *iseq = (uintptr_t)f.iseq;
    return in->first + favoured(v, in->n) + 1;
}

uint32_t hk_synth_read(uintptr_t cfp, uintptr_t *iseq) { return synth_read(cfp, iseq, 0); }
uint32_t hk_synth_read_here(uintptr_t cfp, uintptr_t *iseq) { return synth_read(cfp, iseq, 1); }

VALUE hk_synth_frame(uint32_t id) { return id && id <= nmethods ? synth_methods[id - 1].me : 0; }

void hk_synth_mark(void)
{
    for (size_t i = 0; i < nmethods; i++) rb_gc_mark(synth_methods[i].me);
}

#else

int hk_synth_start(int want, const char **why)
{
    *why = want ? "off: no control-frame layout is known for this Ruby" : "off (synthesize: false)";
    return 0;
}
int hk_synth_yjit_now(void) { return 0; }
void hk_synth_stop(void) {}
uint32_t hk_synth_read(uintptr_t cfp, uintptr_t *iseq)
{
    (void)cfp;
    (void)iseq;
    return 0;
}
uint32_t hk_synth_read_here(uintptr_t cfp, uintptr_t *iseq) { return hk_synth_read(cfp, iseq); }
VALUE hk_synth_frame(uint32_t id)
{
    (void)id;
    return 0;
}
void hk_synth_mark(void) {}

#endif
