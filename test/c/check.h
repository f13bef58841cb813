/* check.h — assertions and a runner for hakari's C unit tests.
 *
 * A test is `static void test_x(void)`; a failing CHECK* prints where and why
 * and returns from the test (later checks would only cascade). main() runs
 * tests with RUN(test_x) and ends with `return check_done();`, which prints
 * "RESULT <passed> <failed>" for run.sh to add up. RUN_BUG runs a test of a
 * bug that is known and not fixed yet only when built with KNOWN_BUGS=1
 * (-DHK_KNOWN_BUGS); otherwise it is listed as skipped.
 * Header-only and static: each test program includes it once.
 */
#ifndef HK_CHECK_H
#define HK_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed, check_skipped, check_current;

__attribute__((format(printf, 3, 4), unused))
static void check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stdout, "        %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    check_current = 1;
}

#define CHECK_MSG(cond, ...)                                      \
    do {                                                          \
        if (!(cond)) {                                            \
            check_fail(__FILE__, __LINE__, __VA_ARGS__);          \
            return;                                               \
        }                                                         \
    } while (0)
#define CHECK(cond) CHECK_MSG(cond, "CHECK(%s)", #cond)
/* integers of any signedness up to 64 bits, compared and shown as long long */
#define CHECK_INT(a, b)                                                                      \
    do {                                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                                  \
        CHECK_MSG(a_ == b_, "CHECK_INT(%s, %s): %lld != %lld", #a, #b, a_, b_);               \
    } while (0)
#define CHECK_STR(a, b)                                                                      \
    do {                                                                                     \
        const char *a_ = (a), *b_ = (b);                                                     \
        CHECK_MSG(a_ && b_ && strcmp(a_, b_) == 0, "CHECK_STR(%s, %s): \"%s\" != \"%s\"", #a, #b, \
                  a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                    \
    } while (0)
#define CHECK_CONTAINS(hay, needle)                                                          \
    do {                                                                                     \
        const char *h_ = (hay), *n_ = (needle);                                              \
        CHECK_MSG(h_ && strstr(h_, n_), "CHECK_CONTAINS(%s, %s): \"%s\" lacks \"%s\"", #hay, #needle, \
                  h_ ? h_ : "(null)", n_);                                                   \
    } while (0)

__attribute__((unused))
static void check_run(const char *name, void (*fn)(void))
{
    check_current = 0;
    fn();
    if (check_current) check_failed++;
    else check_passed++;
    printf("  %-4s  %s\n", check_current ? "FAIL" : "ok", name);
    fflush(stdout);
}

#define RUN(fn) check_run(#fn, fn)
#ifdef HK_KNOWN_BUGS
#define RUN_BUG(fn) RUN(fn)
#else
#define RUN_BUG(fn)                                                          \
    do {                                                                     \
        (void)fn;                                                            \
        check_skipped++;                                                     \
        printf("  skip  %s (known bug; make KNOWN_BUGS=1 runs it)\n", #fn);  \
    } while (0)
#endif

__attribute__((unused))
static int check_done(void)
{
    printf("RESULT %d %d %d\n", check_passed, check_failed, check_skipped);
    fflush(stdout); /* a leak report at exit ends the process without flushing */
    return check_failed ? 1 : 0;
}

#endif
