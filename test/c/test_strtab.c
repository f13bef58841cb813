/* test_strtab.c — hk_strtab: "" at 0, interning, embedded NULs, growth, long
 * strings, failed growth. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_fail.h"
#include "check.h"
#include "strtab.h"

static void test_init_has_empty_string(void)
{
    hk_strtab t;
    CHECK_INT(hk_strtab_init(&t), 0);
    CHECK_INT(t.count, 1);
    size_t len = 99;
    CHECK_STR(hk_strtab_get(&t, 0, &len), "");
    CHECK_INT(len, 0);
    CHECK_INT(hk_strtab_intern(&t, "", 0), 0);
    CHECK_INT(hk_strtab_intern(&t, "x", 0), 0); /* length rules, not the terminator */
    CHECK(hk_strtab_memsize(&t) > 0);
    hk_strtab_free(&t);
}

static void test_intern_and_get(void)
{
    hk_strtab t;
    hk_strtab_init(&t);
    CHECK_INT(hk_strtab_intern(&t, "foo", 3), 1);
    CHECK_INT(hk_strtab_intern(&t, "bar", 3), 2);
    CHECK_INT(hk_strtab_intern(&t, "foo", 3), 1);
    CHECK_INT(hk_strtab_intern(&t, "foobar", 3), 1); /* only the first 3 bytes count */
    CHECK_INT(hk_strtab_intern(&t, "fo", 2), 3);
    CHECK_STR(hk_strtab_get(&t, 1, NULL), "foo");
    CHECK_STR(hk_strtab_get(&t, 3, NULL), "fo");
    CHECK_INT(t.count, 4);
    hk_strtab_free(&t);
}

static void test_embedded_nul(void)
{
    hk_strtab t;
    hk_strtab_init(&t);
    int64_t a = hk_strtab_intern(&t, "a\0b", 3), b = hk_strtab_intern(&t, "a", 1),
            c = hk_strtab_intern(&t, "a\0c", 3), z = hk_strtab_intern(&t, "\0", 1);
    CHECK(a > 0 && b > 0 && c > 0 && z > 0 && a != b && a != c && b != c && z != 0);
    size_t len;
    const char *s = hk_strtab_get(&t, (uint32_t)a, &len);
    CHECK(len == 3 && memcmp(s, "a\0b", 4) == 0); /* and NUL-terminated after the bytes */
    hk_strtab_get(&t, (uint32_t)z, &len);
    CHECK_INT(len, 1);
    CHECK_INT(hk_strtab_intern(&t, "a\0b", 3), a);
    hk_strtab_free(&t);
}

static void test_growth(void)
{
    hk_strtab t;
    hk_strtab_init(&t);
    char buf[32];
    const int n = 100000;
    for (int i = 1; i <= n; i++) {
        int len = snprintf(buf, sizeof(buf), "frame_%d", i);
        CHECK_INT(hk_strtab_intern(&t, buf, (size_t)len), i);
    }
    CHECK_INT(t.count, n + 1);
    for (int i = 1; i <= n; i += 13) {
        int len = snprintf(buf, sizeof(buf), "frame_%d", i);
        CHECK_INT(hk_strtab_intern(&t, buf, (size_t)len), i);
        size_t got;
        CHECK_STR(hk_strtab_get(&t, (uint32_t)i, &got), buf);
        CHECK_INT(got, len);
    }
    hk_strtab_free(&t);
}

static void test_long_strings(void)
{
    hk_strtab t;
    hk_strtab_init(&t);
    size_t n = 3 * 1000 * 1000;
    char *big = malloc(n);
    CHECK(big);
    memset(big, 'x', n);
    int64_t a = hk_strtab_intern(&t, big, n);
    big[n - 1] = 'y';
    int64_t b = hk_strtab_intern(&t, big, n);
    CHECK(a == 1 && b == 2);
    size_t len;
    const char *s = hk_strtab_get(&t, 1, &len);
    CHECK(len == n && s[n - 1] == 'x' && s[n] == '\0');
    CHECK_INT(hk_strtab_intern(&t, big, n), 2);
    free(big);
    hk_strtab_free(&t);
}

static void test_failed_allocation_leaves_table(void)
{
    hk_strtab t;
    char buf[32];
    for (long nth = 0; nth < 5; nth++) { /* init itself allocates: it fails cleanly */
        alloc_fail_at(nth);
        int rc = hk_strtab_init(&t);
        int failed = alloc_fail_done();
        CHECK(failed ? rc == -1 : rc == 0);
        hk_strtab_free(&t);
    }
    hk_strtab_init(&t);
    for (long nth = 0;; nth++) {
        alloc_fail_at(nth);
        int64_t before = (int64_t)t.count, i = before, id = 0;
        for (; i < before + 300 && id >= 0; i++) {
            int len = snprintf(buf, sizeof(buf), "s%lld", (long long)i);
            id = hk_strtab_intern(&t, buf, (size_t)len);
        }
        if (!alloc_fail_done()) break;
        CHECK_INT(id, -1);
        CHECK_INT(t.count, i - 1);
        CHECK(nth < 100);
    }
    for (uint32_t i = 1; i < t.count; i++) {
        int len = snprintf(buf, sizeof(buf), "s%u", i);
        CHECK_INT(hk_strtab_intern(&t, buf, (size_t)len), i);
        CHECK_STR(hk_strtab_get(&t, i, NULL), buf);
    }
    hk_strtab_free(&t);
}

int main(void)
{
    RUN(test_init_has_empty_string);
    RUN(test_intern_and_get);
    RUN(test_embedded_nul);
    RUN(test_growth);
    RUN(test_long_strings);
    RUN(test_failed_allocation_leaves_table);
    return check_done();
}
