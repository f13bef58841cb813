/* buf.c — growable byte buffer (see buf.h). Doubling growth, sticky OOM flag. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hk_buf_init(hk_buf *b) { memset(b, 0, sizeof(*b)); }

void hk_buf_free(hk_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

int hk_buf_reserve(hk_buf *b, size_t extra)
{
    if (b->oom) return -1;
    if (extra > SIZE_MAX - b->len) { b->oom = 1; return -1; }
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2) { b->oom = 1; return -1; }
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (!p) { b->oom = 1; return -1; }
    b->data = p;
    b->cap = cap;
    return 0;
}

void hk_buf_append(hk_buf *b, const void *p, size_t n)
{
    if (n == 0 || hk_buf_reserve(b, n) < 0) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void hk_buf_putc(hk_buf *b, uint8_t c) { hk_buf_append(b, &c, 1); }

void hk_buf_puts(hk_buf *b, const char *s) { hk_buf_append(b, s, strlen(s)); }

int hk_buf_printf(hk_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || hk_buf_reserve(b, (size_t)n + 1) < 0) return -1;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int hk_array_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2) return -1;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem) return -1;
    void *q = realloc(*arr, c * elem);
    if (!q) return -1;
    *arr = q;
    *cap = c;
    return 0;
}

void hk_touch_pages(void *p, size_t bytes)
{
    /* volatile: a compiler may turn malloc and a zeroing into calloc, which
     * writes nothing to fresh pages */
    volatile unsigned char *c = p;
    for (size_t i = 0; i < bytes; i += 4096) c[i] = 0;
    if (bytes) c[bytes - 1] = 0;
}
