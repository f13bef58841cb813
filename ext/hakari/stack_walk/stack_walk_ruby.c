/* stack_walk_ruby.c — the walker where this Ruby's control-frame layout is
 * not known (extconf.rb): every sample through rb_profile_frames (rbframes.c).
 * Another thread's stack cannot be read, so a waiting thread's time goes to
 * its next sample. The alternative is stack_walk_vm.c.
 */
#include "stack_walk.h"
#include "stack_walk_int.h"

#ifndef HK_VM_LAYOUT

void hk_stack_walk_prefetch(void) {}

const void *hk_stack_walk_leaf_slot(void) { return NULL; }
int hk_stack_walk_checked(const VALUE **frames, const int **lines)
{
    *frames = NULL;
    *lines = NULL;
    return -1;
}
const void *hk_stack_walk_thread(void) { return NULL; }
const void *hk_stack_walk_thread_of(VALUE th)
{
    (void)th;
    return NULL;
}
int hk_stack_walk_main_ractor(const void *vm_thread)
{
    (void)vm_thread;
    return 1;
}
const void *hk_stack_walk_ractor_of(const void *vm_thread)
{
    (void)vm_thread;
    return NULL;
}
int hk_stack_walk_spot(const void *vm_thread, hk_stack_spot *out)
{
    (void)vm_thread;
    (void)out;
    return -1;
}
long hk_stack_walk_capture_thread(const void *vm_thread, uint64_t *out, size_t room)
{
    (void)vm_thread;
    (void)out;
    (void)room;
    return -1;
}
void hk_stack_walk_flag_jobs(const void *vm_thread) { (void)vm_thread; }
void hk_stack_walk_unflag_own_jobs(void) {}
int hk_stack_walk_jobs_flaggable(void) { return 0; }
int hk_stack_walk_pushed_since(const uint64_t *cap, const void *slot, uintptr_t leaf)
{
    (void)cap;
    (void)slot;
    (void)leaf;
    return 0;
}

int hk_stack_walk_start(int limit, hk_walk_choice how)
{
    (void)how; /* verify mode has nothing to compare rb_profile_frames with */
    hk_rbframes_stop();
    hk_walk_kind = "rb_profile_frames";
    return hk_rbframes_start(limit);
}
long hk_stack_walk_capture(uint64_t *out, size_t room) { return hk_rbframes_capture(out, room); }
size_t hk_stack_walk_capture_room(void) { return hk_rbframes_room(); }
int hk_stack_walk_resolve(const uint64_t *cap, VALUE *frames, int *lines, int limit, uint64_t known, int *same,
                          int *cut)
{
    *cut = 0;
    return hk_rbframes_resolve((const hk_cap_head *)cap, frames, lines, limit, known, same);
}
void hk_stack_walk_mark_capture(const uint64_t *cap) { hk_rbframes_mark_capture((const hk_cap_head *)cap); }
void hk_stack_walk_stop(void) { hk_rbframes_stop(); }
void hk_stack_walk_end(void) {} /* two buffers, reused by the next start with the same limit */
void hk_stack_walk_mark(void) {}
size_t hk_stack_walk_memsize(void) { return hk_rbframes_memsize(); }

#endif
