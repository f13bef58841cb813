/* test_buf.c — hk_buf: appends, growth, printf, the sticky out-of-memory flag. */
#include <stdint.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "buf.h"
#include "check.h"

static void test_init_is_empty(void)
{
    hk_buf b;
    hk_buf_init(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0 && hk_buf_ok(&b));
    hk_buf_free(&b);
    hk_buf_free(&b); /* free leaves an empty buffer, so twice is harmless */
    CHECK(b.data == NULL && b.len == 0);
}

static void test_append_putc_puts(void)
{
    hk_buf b;
    hk_buf_init(&b);
    hk_buf_append(&b, "ab", 2);
    hk_buf_putc(&b, 'c');
    hk_buf_puts(&b, "def");
    hk_buf_append(&b, NULL, 0); /* zero bytes: no-op, no allocation needed */
    hk_buf_puts(&b, "");
    hk_buf_putc(&b, '\0');
    CHECK_INT(b.len, 7);
    CHECK(memcmp(b.data, "abcdef", 7) == 0);
    CHECK(hk_buf_ok(&b));
    hk_buf_free(&b);
}

static void test_growth_keeps_bytes(void)
{
    hk_buf b;
    hk_buf_init(&b);
    for (size_t i = 0; i < 100000; i++) hk_buf_putc(&b, (uint8_t)(i * 7));
    CHECK_INT(b.len, 100000);
    CHECK(b.cap >= b.len);
    for (size_t i = 0; i < 100000; i++) CHECK_INT(b.data[i], (uint8_t)(i * 7));
    /* one large append past the current capacity */
    static uint8_t big[300000];
    memset(big, 0xab, sizeof(big));
    hk_buf_append(&b, big, sizeof(big));
    CHECK_INT(b.len, 400000);
    CHECK(b.data[99999] == (uint8_t)(99999 * 7) && b.data[399999] == 0xab);
    hk_buf_free(&b);
}

static void test_reserve(void)
{
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_buf_reserve(&b, 0), 0);
    CHECK_INT(hk_buf_reserve(&b, 1000), 0);
    CHECK(b.cap >= 1000 && b.len == 0);
    uint8_t *before = b.data;
    for (int i = 0; i < 1000; i++) hk_buf_putc(&b, 'x');
    CHECK(b.data == before); /* reserved room is used without moving */
    hk_buf_free(&b);
}

static void test_printf(void)
{
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_buf_printf(&b, "%d-%s-%lld", 42, "x", (long long)INT64_MIN), 0);
    CHECK_INT(b.len, strlen("42-x--9223372036854775808"));
    CHECK(memcmp(b.data, "42-x--9223372036854775808", b.len) == 0);
    CHECK_INT(hk_buf_printf(&b, "%s", ""), 0);
    CHECK_INT(b.len, 25);
    /* longer than the first capacity: the size is measured, then written */
    char longs[1000];
    memset(longs, 'q', sizeof(longs) - 1);
    longs[999] = '\0';
    CHECK_INT(hk_buf_printf(&b, "[%s]", longs), 0);
    CHECK_INT(b.len, 25 + 1001);
    CHECK(b.data[25] == '[' && b.data[25 + 1000] == ']' && b.data[500] == 'q');
    hk_buf_free(&b);
}

static void test_oom_is_sticky(void)
{
    hk_buf b;
    hk_buf_init(&b);
    hk_buf_puts(&b, "keep");
    /* a request no allocator can meet: the buffer refuses, remembers, keeps its bytes */
    CHECK_INT(hk_buf_reserve(&b, (size_t)1 << 45), -1); /* 64 TiB after doubling */
    CHECK(!hk_buf_ok(&b));
    hk_buf_puts(&b, "lost");
    hk_buf_putc(&b, 'x');
    CHECK_INT(hk_buf_printf(&b, "%d", 1), -1);
    CHECK_INT(hk_buf_reserve(&b, 1), -1);
    CHECK_INT(b.len, 4);
    CHECK(memcmp(b.data, "keep", 4) == 0);
    hk_buf_free(&b);
    CHECK(hk_buf_ok(&b)); /* free resets the flag */
}

static void test_oom_doubling_overflow(void)
{
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_buf_reserve(&b, SIZE_MAX / 2 + 2), -1);
    CHECK(!hk_buf_ok(&b) && b.data == NULL);
    hk_buf_free(&b);
}

static void test_injected_oom(void)
{
    hk_buf b;
    hk_buf_init(&b);
    hk_buf_puts(&b, "abc");
    size_t cap = b.cap;
    alloc_fail_at(0);
    uint8_t big[512] = {0};
    hk_buf_append(&b, big, sizeof(big)); /* needs to grow; the realloc fails */
    CHECK(alloc_fail_done());
    CHECK(!hk_buf_ok(&b));
    CHECK(b.len == 3 && b.cap == cap && memcmp(b.data, "abc", 3) == 0);
    hk_buf_free(&b);
}

/* hk_buf_reserve computes len + extra without checking for overflow,
 * so a huge extra wraps around and "succeeds" though the room is not there. */
static void test_reserve_overflow(void)
{
    hk_buf b;
    hk_buf_init(&b);
    hk_buf_puts(&b, "0123456789");
    CHECK_INT(hk_buf_reserve(&b, SIZE_MAX - 5), -1);
    hk_buf_free(&b);
}

int main(void)
{
    RUN(test_init_is_empty);
    RUN(test_append_putc_puts);
    RUN(test_growth_keeps_bytes);
    RUN(test_reserve);
    RUN(test_printf);
    RUN(test_oom_is_sticky);
    RUN(test_oom_doubling_overflow);
    RUN(test_injected_oom);
    RUN(test_reserve_overflow);
    return check_done();
}
