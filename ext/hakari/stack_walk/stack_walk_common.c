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



uintptr_t hk_stack_walk_read_leaf(const void *slot)
{
#ifdef HAVE_PROCESS_VM_READV
    static volatile int unavailable; /* seccomp or an old kernel: EPERM, ENOSYS */
    if (!slot || unavailable) return 0;
    uintptr_t leaf = 0;
    struct iovec local = {&leaf, sizeof(leaf)}, remote = {(void *)slot, sizeof(leaf)};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof(leaf)) return leaf;
    if (errno == EPERM || errno == ENOSYS) unavailable = 1;
    return 0;
#else
    (void)slot;
    return 0;
#endif
}

const char *hk_stack_walk_kind(void) { return hk_walk_kind; }
uint64_t hk_stack_walk_mismatches(void) { return hk_walk_mismatches; }
