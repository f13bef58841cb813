/* test_html_encode.c — the HTML page's data (html_encode.h): a name can never
 * close the page's script element or break its JSON; threads become nodes
 * under the root; the differential page carries the base's values; and a
 * failed allocation leaves nothing behind. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc_fail.h"
#include "check.h"
#include "html_encode.h"

#define HOSTILE "</script><script>alert(\"x\")</script>\\\n"

/* main > hostile (thread 1, 3 ms), main > work (thread 2, 1 ms) */
static hk_profile *setup(int64_t work_ms)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "wall", "nanoseconds");
    uint32_t main = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "main"), 0, hk_profile_string(p, "a.rb"), 1), 1);
    uint32_t bad = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, HOSTILE), 0, hk_profile_string(p, "b.rb"), 2), 2);
    uint32_t work = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "work"), 0, hk_profile_string(p, "a.rb"), 3), 3);
    hk_label t1 = {hk_profile_string(p, "thread"), 0, 0, 1}, t2 = {hk_profile_string(p, "thread"), 0, 0, 2};
    uint32_t s1[] = {bad, main}, s2[] = {work, main};
    int64_t v1 = 3000000, v2 = work_ms * 1000000;
    hk_profile_add_sample(p, s1, 2, &v1, &t1, 1);
    hk_profile_add_sample(p, s2, 2, &v2, &t2, 1);
    return p;
}

/* the page's DATA object, as written */
static const char *data_of(hk_buf *b)
{
    hk_buf_putc(b, '\0');
    const char *d = strstr((const char *)b->data, "const DATA = ");
    return d ? d + strlen("const DATA = ") : NULL;
}

static void test_hostile_names_stay_inside_their_string(void)
{
    hk_profile *p = setup(1);
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_html_encode(p, &b), 0);
    const char *d = data_of(&b);
    CHECK(d);
    CHECK_MSG(!strstr(d, "</script><script>alert"), "a name closed the script element");
    CHECK_MSG(strstr(d, "\"\\u003c/script>\\u003cscript>alert(\\\"x\\\")\\u003c/script>\\\\\\u000a\""), "%.300s", d);
    /* one </script> closes DATA's element, one the viewer's: no more */
    int closes = 0;
    for (const char *s = (const char *)b.data; (s = strstr(s, "</script>")); s++) closes++;
    CHECK_INT(closes, 2);
    hk_buf_free(&b);
    hk_profile_free(p);
}

static void test_threads_and_nodes(void)
{
    hk_profile *p = setup(1);
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_html_encode(p, &b), 0);
    const char *d = data_of(&b);
    CHECK_MSG(strstr(d, "\"thread 1\",\"thread 2\",\"[smaller frames]\"],\"files\":[\"a.rb:1\",\"b.rb:2\",\"a.rb:3\",\"\",\"\",\"\"]"),
              "%.400s", d);
    CHECK_MSG(strstr(d, "\"kinds\":[0,0,0,2,2,1]"), "%.400s", d);
    /* depth first, in microseconds: root, thread 1 (name 3), main, hostile (3000 µs); thread 2 (4 nodes
     * after the root), main, work (1000) */
    CHECK_MSG(strstr(d, "\"nodes\":[0,0,0,1,3,0,1,0,0,1,1,3000,4,4,0,1,0,0,1,2,1000]"), "%.600s", d);
    CHECK_MSG(!strstr(d, "\"base\""), "no base without a diff");
    hk_buf_free(&b);
    hk_profile_free(p);
}

static void test_the_diff_page_carries_the_base(void)
{
    hk_profile *base = setup(1), *new = setup(9);
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_html_diff_encode(base, new, &b), 0);
    const char *d = data_of(&b);
    /* threads merged: root, main, hostile, work; base and new side by side */
    CHECK_MSG(strstr(d, "\"nodes\":[0,0,0,1,0,0,1,1,3000,2,2,9000],\"base\":[0,0,3000,1000]"), "%.600s", d);
    hk_buf_free(&b);
    hk_profile_free(base);
    hk_profile_free(new);
}

/* 150 000 stacks main > fN, fN taking N + 1 ns: past the page's budget of 100 000 nodes, the
 * smallest fold into one "[smaller frames]" node under main, and the total stays whole */
static void test_a_huge_tree_folds_its_smallest_frames(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "cpu", "count");
    uint32_t main = hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, "main"), 0, 0, 0), 1);
    int64_t sum = 0;
    for (int i = 0; i < 150000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%d", i);
        uint32_t stack[] = {hk_profile_location(p, hk_profile_function(p, hk_profile_string(p, name), 0, 0, 0), 1), main};
        int64_t v = i + 1;
        sum += v;
        hk_profile_add_sample(p, stack, 2, &v, NULL, 0);
    }
    hk_buf b;
    hk_buf_init(&b);
    CHECK_INT(hk_html_encode(p, &b), 0);
    const char *d = data_of(&b), *nodes = strstr(d, "\"nodes\":[");
    CHECK(nodes);
    long n = 1, total = 0, folded = -1;
    for (const char *c = nodes + 9; *c != ']'; c++) n += *c == ',';
    CHECK_MSG(n / 3 <= 100001, "%ld nodes", n / 3);
    /* every node's self value summed: the third of each triple */
    const char *c = nodes + 9;
    for (long k = 0; k < n / 3; k++) {
        long dist, name, self;
        CHECK(sscanf(c, "%ld,%ld,%ld", &dist, &name, &self) == 3);
        total += self;
        if (name == 150001) folded = self; /* after the 150 000 functions and main */
        for (int commas = 0; commas < 3 && *c != ']'; c++) commas += *c == ',';
    }
    CHECK_INT(total, sum);
    CHECK_MSG(folded > 0, "a [smaller frames] node holds the folded ones");
    hk_buf_free(&b);
    hk_profile_free(p);
}

static void test_under_failed_allocation(void)
{
    hk_profile *p = setup(1), *q = setup(2);
    for (int diff = 0; diff < 2; diff++)
        for (long nth = 0;; nth++) {
            hk_buf b;
            hk_buf_init(&b);
            long live = alloc_live();
            alloc_fail_at(nth);
            int rc = diff ? hk_html_diff_encode(p, q, &b) : hk_html_encode(p, &b);
            int failed = alloc_fail_done();
            hk_buf_free(&b);
            if (!failed) {
                CHECK_INT(rc, 0);
                break;
            }
            CHECK_MSG(rc == -1, "allocation %ld failed, the encoder said %d", nth, rc);
            CHECK_MSG(alloc_live() == live, "allocation %ld: %ld blocks leaked", nth, alloc_live() - live);
        }
    hk_profile_free(p);
    hk_profile_free(q);
}

int main(void)
{
    RUN(test_hostile_names_stay_inside_their_string);
    RUN(test_threads_and_nodes);
    RUN(test_the_diff_page_carries_the_base);
    RUN(test_a_huge_tree_folds_its_smallest_frames);
    RUN(test_under_failed_allocation);
    return check_done();
}
