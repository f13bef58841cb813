/* vm_layout_31.h — Ruby 3.1's private layouts that the control-frame walker
 * reads (vm_core.h), and how that Ruby's rb_profile_frames treats them. Only
 * stack_walk_vm.h includes it, when extconf.rb found this Ruby's API version.
 * Every start checks the walk against rb_profile_frames (hk_vm_self_check).
 */
#ifndef HK_VM_LAYOUT_31_H
#define HK_VM_LAYOUT_31_H

/* rb_control_frame_t */
typedef struct vm_frame {
    const VALUE *pc;
    VALUE *sp;
    const void *iseq;
    VALUE self;
    const VALUE *ep;
    const void *block_code;
    VALUE *bp;
    void *jit_return; /* read only by YJIT's code, cleared at every push: the walker's marks go here */
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

/* the leading fields of rb_thread_t: its list node, self, ractor, vm, ec */
typedef struct vm_thread_head {
    void *next, *prev;
    VALUE self;
    void *ractor, *vm;
    const vm_ec *ec; /* the running fiber's context; its stack is cleared when the thread ends */
} vm_thread_head;

extern __thread vm_ec *ruby_current_ec; /* vm.c; exported by 3.1's libruby */

/* the running thread's context */
static inline vm_ec *vm_current_ec(void) { return ruby_current_ec; }

/* 3.1's rb_profile_frames walks down to the stack's end (its root frame, a
 * dummy C frame, gives nothing) and names the top frame's line from its pc. */
#define VM_SKIPS_ROOT_FRAME 0
#define VM_TOP_JIT_FRAME_LINE_0 0
/* Marks may go in jit_return: nothing but YJIT's code reads it. */
#define VM_MARKS_ALLOWED 1
/* A Ruby frame without a pc (being set up, a C extension's Init under require)
 * is one the walker leaves to rb_profile_frames. */
#define VM_SKIPS_FRAME_WITHOUT_PC 0

/* struct METHOD (proc.c), what an UnboundMethod wraps: recv, klass, iclass, me */
#define VM_METHOD_ME_INDEX 3

#endif
