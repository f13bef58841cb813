/* buf.h — growable byte buffer, the output sink of every encoder, and the
 * doubling growth every other growable array in hakari uses.
 *
 * Layout: one heap block `data` of `cap` bytes, `len` of them used. A failed
 * growth sets `oom` and turns every later append into a no-op, so encoders can
 * append freely and check once at the end (hk_buf_ok).
 * ctx: core (plain C, any thread; a buffer is owned by one caller at a time).
 */
#ifndef HK_BUF_H
#define HK_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct hk_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    int oom;
} hk_buf;

void hk_buf_init(hk_buf *b);
void hk_buf_free(hk_buf *b);
int hk_buf_reserve(hk_buf *b, size_t extra);
void hk_buf_append(hk_buf *b, const void *p, size_t n);
void hk_buf_putc(hk_buf *b, uint8_t c);
void hk_buf_puts(hk_buf *b, const char *s);
/* printf-style append; returns 0 or -1 on failure */
int hk_buf_printf(hk_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int hk_buf_ok(const hk_buf *b) { return !b->oom; }

/* Grows the array *arr (elements of elem bytes, *cap of them) so it holds at
 * least need, doubling from 64; 0, or -1 when out of memory (array unchanged). */
int hk_array_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* Writes a zero into every page of [p, p + bytes): a fresh allocation's pages
 * are mapped at their first write, and where the sampling job is the first to
 * write, each costs it a page fault (tens of µs in a VM). For memory whose
 * contents do not matter yet, or that calloc zeroed. */
void hk_touch_pages(void *p, size_t bytes);

#endif
