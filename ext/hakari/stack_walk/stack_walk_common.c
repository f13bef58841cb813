/* stack_walk_common.c — what every walker shares (stack_walk.h): capture
 * numbers and headers, the worker's read of a thread's leaf frame, the kind
 * and verify mode's mismatch count. The walkers themselves are whole-file
 * alternatives: stack_walk_vm.c where this Ruby's control-frame layout is
 * known, stack_walk_ruby.c where it is not.
 */
#include "stack_walk.h"
#include "stack_walk_int.h"

#include <errno.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

const char *hk_walk_kind = "rb_profile_frames";
/* Across runs: a mark from an earlier run is never trusted. Counted up
 * by the job (the only writer) and read by the resolver on another thread. */
uint64_t hk_walks;
uint64_t hk_walk_mismatches;

int hk_same_from_root(const VALUE *frames, const int *lines, int n, const VALUE *f, const int *l, int m)
{
    int k = 0;
    while (k < n && k < m && frames[n - 1 - k] == f[m - 1 - k] && lines[n - 1 - k] == l[m - 1 - k]) k++;
    return k;
}

size_t hk_stack_walk_capture_words(const uint64_t *cap) { return ((const hk_cap_head *)cap)->words; }
uint64_t hk_stack_walk_capture_number(const uint64_t *cap) { return ((const hk_cap_head *)cap)->number; }

void hk_stack_walk_report_mismatch(const char *what, int n, int m, int same)
{
    if (!hk_walk_mismatches++)
        fprintf(stderr, "hakari: HAKARI_STACK_WALK=verify: %s (%d and %d frames, %d reported unchanged)\n", what, n,
                m, same);
}



int hk_stack_walk_read_vec(const struct iovec *local, const struct iovec *remote, int n)
{
#ifdef HAVE_PROCESS_VM_READV
    static volatile int unavailable; /* seccomp or an old kernel: EPERM, ENOSYS */
    if (unavailable) return 0;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        if (!remote[i].iov_base) return 0;
        bytes += remote[i].iov_len;
    }
    if (process_vm_readv(getpid(), local, (unsigned long)n, remote, (unsigned long)n, 0) == (ssize_t)bytes) return 1;
    if (errno == EPERM || errno == ENOSYS) unavailable = 1;
    return 0;
#else
    (void)local;
    (void)remote;
    (void)n;
    return 0;
#endif
}

int hk_stack_walk_read_words(const void *at, void *to, size_t bytes)
{
    struct iovec local = {to, bytes}, remote = {(void *)at, bytes};
    return hk_stack_walk_read_vec(&local, &remote, 1);
}

uintptr_t hk_stack_walk_read_leaf(const void *slot)
{
    uintptr_t leaf = 0;
    return hk_stack_walk_read_words(slot, &leaf, sizeof(leaf)) ? leaf : 0;
}

#ifdef HAVE_RB_GC_OBJ_SLOT_SIZE
size_t rb_gc_obj_slot_size(VALUE obj); /* exported by libruby 3.3+, declared in none of its public headers */
#endif

VALUE hk_new_object_class(VALUE obj)
{
    int type = RB_BUILTIN_TYPE(obj);
    return type == T_IMEMO || type == T_ICLASS || type == T_NODE ? 0 : rb_class_real(RBASIC_CLASS(obj));
}

uint32_t hk_heap_slot_bytes(VALUE obj)
{
#ifdef HAVE_RB_GC_OBJ_SLOT_SIZE
    return (uint32_t)rb_gc_obj_slot_size(obj);
#else
    (void)obj;
    return 5 * sizeof(VALUE);
#endif
}

const char *hk_stack_walk_kind(void) { return hk_walk_kind; }
uint64_t hk_stack_walk_mismatches(void) { return hk_walk_mismatches; }
