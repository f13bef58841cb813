/* vm_layout_33.h — Ruby 3.3's private layouts that the control-frame walker
 * reads (vm_core.h), and how that Ruby's rb_profile_frames treats them. Only
 * stack_walk_vm.h includes it (and vm_layout_34.h, whose fields are the same),
 * when extconf.rb found this Ruby's API version. Every start checks the walk
 * against rb_profile_frames (hk_vm_self_check).
 */
#ifndef HK_VM_LAYOUT_33_H
#define HK_VM_LAYOUT_33_H

#include <ruby.h>

/* rb_control_frame_t (without VM_DEBUG_BP_CHECK, as release builds are) */
typedef struct vm_frame {
    const VALUE *pc;
    VALUE *sp;
    const void *iseq;
    VALUE self;
    const VALUE *ep;
    const void *block_code;
    void *jit_return; /* a JIT's return address: rb_profile_frames reads it (below) */
} vm_frame;

/* the leading fields of rb_execution_context_t */
typedef struct vm_ec {
    VALUE *vm_stack;
    size_t vm_stack_size; /* in VALUEs; the control frames end where the stack does */
    vm_frame *cfp;        /* the leaf frame */
    void *tag;
    uint32_t interrupt_flag, interrupt_mask; /* rb_atomic_t */
    void *fiber_ptr;
    const void *thread_ptr; /* the thread's rb_thread_t, which its Thread object wraps */
} vm_ec;

/* the leading fields of rb_thread_t: its list node, self, ractor, vm, native thread, ec */
typedef struct vm_thread_head {
    void *next, *prev;
    VALUE self;
    void *ractor, *vm, *nt;
    const vm_ec *ec; /* the running fiber's context; its stack is cleared when the thread ends */
} vm_thread_head;

/* The running thread's context. 3.3's libruby no longer exports
 * ruby_current_ec: the Thread object's rb_thread_t holds the context of the
 * fiber it runs (cont.c sets it at every switch). NULL when unknown. */
static inline const vm_ec *vm_current_ec(void)
{
    VALUE th = rb_thread_current();
    if (!RB_TYPE_P(th, T_DATA) || !RTYPEDDATA_P(th)) return NULL;
    const vm_thread_head *t = RTYPEDDATA_DATA(th);
    return t ? t->ec : NULL;
}

/* 3.3's rb_profile_frames stops above the stack's root frame (a dummy), skips
 * a Ruby frame whose pc is not set yet, and gives line 0 for a top frame that
 * has a JIT return address (its pc may be stale). The walker does the first two;
 * at the job's interrupt check the top frame's pc is its own, so it gives that
 * frame's line, and verify mode does not count the 0 as a difference. */
#define VM_SKIPS_ROOT_FRAME 1
#define VM_TOP_JIT_FRAME_LINE_0 1
#define VM_SKIPS_FRAME_WITHOUT_PC 1
/* No marks: rb_profile_frames would read one as a JIT return address. */
#define VM_MARKS_ALLOWED 0

/* struct METHOD (proc.c), what an UnboundMethod wraps: recv, klass, iclass, owner, me */
#define VM_METHOD_ME_INDEX 4

#endif
