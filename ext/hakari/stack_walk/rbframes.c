/* rbframes.c — rb_profile_frames as a capture (stack_walk_int.h): the walker
 * where this Ruby's control-frame layout is not known, and the control-frame
 * walker's fallback for a sample it cannot read. It keeps its latest result to
 * tell the next resolve how much of it is unchanged.
 */
#include "stack_walk_int.h"

#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>

/* rb_profile_frames, with the previous walk's result kept to tell the caller
 * how much of it is unchanged (the fallback, and Rubies of unknown layout) */
static struct {
    VALUE *frames; int *lines; int n, cap;
    uint64_t walk; /* the walk they are from, 0: none */
} G;

int hk_rbframes_start(int limit)
{
    if (G.frames && G.cap == limit) { /* the previous run's */
        G.walk = 0;
        G.n = 0;
        return 0;
    }
    hk_rbframes_stop();
    G.cap = limit;
    G.walk = 0;
    G.frames = malloc((size_t)limit * sizeof(VALUE));
    G.lines = malloc((size_t)limit * sizeof(int));
    return G.frames && G.lines ? 0 : -1;
}

void hk_rbframes_stop(void)
{
    free(G.frames);
    free(G.lines);
    memset(&G, 0, sizeof(G));
}

size_t hk_rbframes_room(void) { return HK_CAP_HEAD_WORDS + HK_CAP_RESOLVED_WORDS(G.cap); }

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

long hk_rbframes_capture(uint64_t *out, size_t room)
{
    if (room < hk_rbframes_room()) return 0;
    hk_cap_head *h = (hk_cap_head *)out;
    uint32_t n = hk_cap_put_profile_frames(out + HK_CAP_HEAD_WORDS, G.cap);
    if (!n) return -1; /* no Ruby frame (the main script being compiled, a thread starting) */
    *h = (hk_cap_head){.words = (uint32_t)(HK_CAP_HEAD_WORDS + HK_CAP_RESOLVED_WORDS(n)), .kind = HK_CAP_RESOLVED,
                       .n = n, .number = __atomic_add_fetch(&hk_walks, 1, __ATOMIC_SEQ_CST)};
    return (long)h->words;
}

int hk_rbframes_resolve(const hk_cap_head *h, VALUE *frames, int *lines, int limit, uint64_t known, int *same)
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

void hk_rbframes_mark_capture(const hk_cap_head *h) { hk_cap_mark_frames(h, HK_CAP_HEAD_WORDS, h->n); }

size_t hk_rbframes_memsize(void) { return (size_t)G.cap * (sizeof(VALUE) + sizeof(int)); }

