/* stack_walk.c — the current thread's frames (see stack_walk.h): the walk
 * numbers, rb_profile_frames as the fallback walker (and the only one where
 * this Ruby's control-frame layout is not known), and the leaf read the worker
 * makes. The control-frame walker and its verify mode are stack_walk_vm.c.
 */
#include "stack_walk.h"
#include "stack_walk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <ruby/debug.h>

#include "hot.h"

const char *hk_walk_kind = "rb_profile_frames";
/* Across sessions: a mark from an earlier session is never trusted. Counted up
 * by the job (the only writer) and read by the resolver on another thread. */
uint64_t hk_walks;
uint64_t hk_walk_mismatches;

/* rb_profile_frames, with the previous walk's result kept to tell the caller
 * how much of it is unchanged (the fallback, and Rubies of unknown layout) */
static struct {
    VALUE *frames; int *lines; int n, cap;
    uint64_t walk; /* the walk they are from, 0: none */
} G;

int hk_profile_frames_start(int limit)
{
    if (G.frames && G.cap == limit) { /* the previous session's */
        G.walk = 0;
        G.n = 0;
        return 0;
    }
    hk_profile_frames_stop();
    G.cap = limit;
    G.walk = 0;
    G.frames = malloc((size_t)limit * sizeof(VALUE));
    G.lines = malloc((size_t)limit * sizeof(int));
    return G.frames && G.lines ? 0 : -1;
}

void hk_profile_frames_stop(void)
{
    free(G.frames);
    free(G.lines);
    memset(&G, 0, sizeof(G));
}

int hk_same_from_root(const VALUE *frames, const int *lines, int n, const VALUE *f, const int *l, int m)
{
    int k = 0;
    while (k < n && k < m && frames[n - 1 - k] == f[m - 1 - k] && lines[n - 1 - k] == l[m - 1 - k]) k++;
    return k;
}

size_t hk_profile_frames_room(void) { return HK_CAP_HEAD_WORDS + HK_CAP_RESOLVED_WORDS(G.cap); }

uint32_t hk_cap_put_profile_frames(uint64_t *at, int limit)
{
    VALUE *frames = (VALUE *)at;
    int *lines = (int *)(frames + limit); /* moved down next to the frames once their number is known */
    int n = rb_profile_frames(0, limit, frames, lines);
    if (n < 0) n = 0;
    memmove(frames + n, lines, (size_t)n * sizeof(int));
    return (uint32_t)n;
}

void hk_cap_mark_frames(const hk_cap_head *h, size_t at, uint32_t n)
{
    const VALUE *f = hk_cap_frames(h, at);
    for (uint32_t i = 0; i < n; i++)
        if (!SPECIAL_CONST_P(f[i])) rb_gc_mark(f[i]);
}

long hk_profile_frames_capture(uint64_t *out, size_t room)
{
    if (room < hk_profile_frames_room()) return 0;
    hk_cap_head *h = (hk_cap_head *)out;
    uint32_t n = hk_cap_put_profile_frames(out + HK_CAP_HEAD_WORDS, G.cap);
    *h = (hk_cap_head){.words = (uint32_t)(HK_CAP_HEAD_WORDS + HK_CAP_RESOLVED_WORDS(n)), .kind = HK_CAP_RESOLVED,
                       .n = n, .number = __atomic_add_fetch(&hk_walks, 1, __ATOMIC_SEQ_CST)};
    return (long)h->words;
}

int hk_profile_frames_resolve(const hk_cap_head *h, VALUE *frames, int *lines, int limit, uint64_t known, int *same)
{
    int n = (int)h->n < limit ? (int)h->n : limit;
    memcpy(frames, hk_cap_frames(h, HK_CAP_HEAD_WORDS), (size_t)n * sizeof(VALUE));
    memcpy(lines, hk_cap_lines(h, HK_CAP_HEAD_WORDS, h->n), (size_t)n * sizeof(int));
    *same = 0;
    if (n > 0 && known && known == h->number - 1 && G.walk == known && n < limit && G.n < limit)
        *same = hk_same_from_root(frames, lines, n, G.frames, G.lines, G.n);
    G.walk = 0;
    if (G.frames && n <= G.cap) {
        memcpy(G.frames, frames, (size_t)n * sizeof(VALUE));
        memcpy(G.lines, lines, (size_t)n * sizeof(int));
        G.n = n;
        G.walk = h->number;
    }
    return n;
}

void hk_profile_frames_mark_capture(const hk_cap_head *h) { hk_cap_mark_frames(h, HK_CAP_HEAD_WORDS, h->n); }

size_t hk_profile_frames_memsize(void) { return (size_t)G.cap * (sizeof(VALUE) + sizeof(int)); }

size_t hk_stack_walk_capture_words(const uint64_t *cap) { return ((const hk_cap_head *)cap)->words; }
uint64_t hk_stack_walk_capture_number(const uint64_t *cap) { return ((const hk_cap_head *)cap)->number; }

void hk_stack_walk_report_mismatch(const char *what, int n, int m, int same)
{
    if (!hk_walk_mismatches++)
        fprintf(stderr, "hakari: HAKARI_STACK_WALK=verify: %s (%d and %d frames, %d reported unchanged)\n", what, n,
                m, same);
}

#ifndef HK_VM_LAYOUT_31 /* no known control-frame layout: rb_profile_frames */

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
int hk_stack_walk_pushed_since(const uint64_t *cap, const void *slot, uintptr_t leaf)
{
    (void)cap;
    (void)slot;
    (void)leaf;
    return 0;
}

int hk_stack_walk_start(int limit)
{
    hk_profile_frames_stop();
    hk_walk_kind = "rb_profile_frames";
    return hk_profile_frames_start(limit);
}
long hk_stack_walk_capture(uint64_t *out, size_t room) { return hk_profile_frames_capture(out, room); }
size_t hk_stack_walk_capture_room(void) { return hk_profile_frames_room(); }
int hk_stack_walk_resolve(const uint64_t *cap, VALUE *frames, int *lines, int limit, uint64_t known, int *same,
                          int *cut)
{
    *cut = 0;
    return hk_profile_frames_resolve((const hk_cap_head *)cap, frames, lines, limit, known, same);
}
void hk_stack_walk_mark_capture(const uint64_t *cap) { hk_profile_frames_mark_capture((const hk_cap_head *)cap); }
void hk_stack_walk_stop(void) { hk_profile_frames_stop(); }
void hk_stack_walk_end(void) {} /* two buffers, reused by the next start with the same limit */
void hk_stack_walk_mark(void) {}
size_t hk_stack_walk_memsize(void) { return hk_profile_frames_memsize(); }

#endif

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
