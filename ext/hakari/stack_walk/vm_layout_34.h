/* vm_layout_34.h — Ruby 3.4's private layouts that the control-frame walker
 * reads. Every field it reads (rb_control_frame_t, the heads of
 * rb_execution_context_t and rb_thread_t, the iseq body's head, the method
 * entry's and definition's heads, imemo types, env flags, the postponed-job
 * interrupt bit) and thread_profile_frames' rules are as in 3.3's vm_core.h,
 * method.h, internal/imemo.h and vm_backtrace.c. Checked against
 * rb_profile_frames at every start (hk_vm_self_check).
 */
#ifndef HK_VM_LAYOUT_34_H
#define HK_VM_LAYOUT_34_H

#include "vm_layout_33.h"

#endif
