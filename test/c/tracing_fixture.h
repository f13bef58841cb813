/* tracing_fixture.h — hand-built tracing and sampling profiles with known
 * numbers, for the call tree, its reports and tools_check.sh's driver.
 *
 * A path is written as a string of function digits, leaf first, so "110" is
 * fib called by fib called by main. Times are given in ms and stored in ns.
 * tf_fib (one thread, label thread=1):
 *   path    calls self wait      node total
 *   0           1   10    0      60   main
 *   10          1    5    1      41   main > fib
 *   110         2    4    0      32   main > fib > fib
 *   1110        4    8    0      22   main > fib > fib > fib
 *   210         1    3    0       3   main > fib > helper
 *   2110        2    6    0       6
 *   21110       4   12    2      14
 *   20          3    9    0       9   main > helper
 * so main: calls 1, self 10, total 60, child 50; fib (recursive): calls 7,
 * self 17, wait 1, total 41, child 23; helper: calls 10, self 30, wait 2,
 * total 32; edges main>fib 1 call 41 ms, fib>fib 6 calls 0 ms, fib>helper
 * 7 calls 23 ms, main>helper 3 calls 9 ms; whole profile 60 ms (57 self +
 * 3 wait), 18 calls.
 * Header-only and static, like check.h: each program includes it once.
 */
#ifndef HK_TRACING_FIXTURE_H
#define HK_TRACING_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "profile.h"

#define TF_MS 1000000LL

typedef struct tf {
    hk_profile *p;
    uint32_t loc[10];   /* location of function digit d */
    uint32_t thread_key;
} tf;

/* a tracing profile with sample types calls, <measure>/<unit>, wait/<unit>,
 * and the functions of `names` (digit d = names[d]) */
__attribute__((unused))
static tf tf_new(const char *measure, const char *unit, const char *const *names, int n)
{
    tf t;
    memset(&t, 0, sizeof(t));
    t.p = hk_profile_new();
    hk_profile_add_sample_type(t.p, "calls", "count");
    hk_profile_add_sample_type(t.p, measure, unit);
    hk_profile_add_sample_type(t.p, "wait", unit);
    t.p->default_sample_type = hk_profile_string(t.p, measure);
    t.thread_key = hk_profile_string(t.p, "thread");
    for (int i = 0; i < n && i < 10; i++) {
        uint32_t name = hk_profile_string(t.p, names[i]);
        uint32_t file = hk_profile_string(t.p, i == 2 ? "lib/helper.rb" : "app.rb");
        uint32_t f = hk_profile_function(t.p, name, 0, file, 1 + 10 * i);
        t.loc[i] = hk_profile_location(t.p, f, 2 + 10 * i);
    }
    return t;
}

/* one node: path as leaf-first digits; thread < 0 means no thread label */
__attribute__((unused))
static void tf_node(tf *t, int64_t thread, const char *path, int64_t calls, int64_t self_ms, int64_t wait_ms)
{
    uint32_t locs[64];
    uint32_t n = 0;
    for (const char *c = path; *c && n < 64; c++) locs[n++] = t->loc[*c - '0'];
    int64_t v[3] = {calls, self_ms * TF_MS, wait_ms * TF_MS};
    hk_label l = {t->thread_key, 0, 0, thread};
    hk_profile_add_sample(t->p, locs, n, v, &l, thread < 0 ? 0 : 1);
}

static const char *const tf_names[] = {"main", "fib", "helper"};

__attribute__((unused))
static void tf_fib_nodes(tf *t, int64_t thread)
{
    tf_node(t, thread, "0", 1, 10, 0);
    tf_node(t, thread, "10", 1, 5, 1);
    tf_node(t, thread, "110", 2, 4, 0);
    tf_node(t, thread, "1110", 4, 8, 0);
    tf_node(t, thread, "210", 1, 3, 0);
    tf_node(t, thread, "2110", 2, 6, 0);
    tf_node(t, thread, "21110", 4, 12, 2);
    tf_node(t, thread, "20", 3, 9, 0);
}

__attribute__((unused))
static hk_profile *tf_fib(void)
{
    tf t = tf_new("wall", "nanoseconds", tf_names, 3);
    tf_fib_nodes(&t, 1);
    return t.p;
}

/* tf_fib's thread 1, plus thread 2: main (1 call, 100 ms self) calling
 * helper from two lines (1 call 50 ms; 2 calls 20 ms self + 5 ms wait).
 * main: calls 2, self 110, total 235; helper: calls 13, self 100, wait 7,
 * total 107; edge main>helper 6 calls, 84 ms; whole profile 235 ms. */
__attribute__((unused))
static hk_profile *tf_threads(void)
{
    tf t = tf_new("wall", "nanoseconds", tf_names, 3);
    tf_fib_nodes(&t, 1);
    tf_node(&t, 2, "0", 1, 100, 0);
    tf_node(&t, 2, "20", 1, 50, 0);
    uint32_t other = hk_profile_location(t.p, hk_profile_loc(t.p, t.loc[2])->function_id, 25);
    uint32_t locs[2] = {other, t.loc[0]};
    int64_t v[3] = {2, 20 * TF_MS, 5 * TF_MS};
    hk_label l = {t.thread_key, 0, 0, 2};
    hk_profile_add_sample(t.p, locs, 2, v, &l, 1);
    return t.p;
}

/* a sampling profile (samples/count, cpu/nanoseconds), stacks leaf first:
 *   0: 1 sample 1 ms; 10: 2, 2 ms; 110: 3, 3 ms; 2110: 4, 4 ms; 20: 5, 5 ms
 * main: self 1, total 15, 15 samples; fib (recursive): self 5, total 9,
 * 9 samples; helper: self 9, total 9; edge fib>helper 4 samples 4 ms. */
__attribute__((unused))
static hk_profile *tf_sampling(void)
{
    hk_profile *p = hk_profile_new();
    hk_profile_add_sample_type(p, "samples", "count");
    hk_profile_add_sample_type(p, "cpu", "nanoseconds");
    p->default_sample_type = hk_profile_string(p, "cpu");
    uint32_t loc[3];
    for (int i = 0; i < 3; i++) {
        uint32_t f = hk_profile_function(p, hk_profile_string(p, tf_names[i]), 0, hk_profile_string(p, "app.rb"),
                                         1 + 10 * i);
        loc[i] = hk_profile_location(p, f, 2 + 10 * i);
    }
    static const char *const paths[] = {"0", "10", "110", "2110", "20"};
    for (int s = 0; s < 5; s++) {
        uint32_t locs[8], n = 0;
        for (const char *c = paths[s]; *c; c++) locs[n++] = loc[*c - '0'];
        int64_t v[2] = {s + 1, (s + 1) * TF_MS};
        hk_profile_add_sample(p, locs, n, v, NULL, 0);
    }
    return p;
}

/* names that need quoting in every format; main > quote > angle > back,
 * main > nl > bad, with one of each call and 1..6 ms self */
static const char *const tf_hostile_names[] = {
    "<main>", "Foo#\"quoted\"", "block in <class:X>", "Bar\\back\\slash {x|y}", "two\nlines\r",
    "bad utf8 \xff\xfe \xe6\x97", "caf\xc3\xa9#na\xc3\xafve", "semi;colon (3) fn=(9)",
};

__attribute__((unused))
static hk_profile *tf_hostile(void)
{
    tf t = tf_new("wall", "nanoseconds", tf_hostile_names, 8);
    tf_node(&t, 7, "0", 1, 1, 0);
    tf_node(&t, 7, "10", 1, 2, 0);
    tf_node(&t, 7, "210", 1, 3, 1);
    tf_node(&t, 7, "3210", 1, 4, 0);
    tf_node(&t, 7, "40", 1, 5, 0);
    tf_node(&t, 7, "540", 1, 6, 0);
    tf_node(&t, 7, "6540", 2, 7, 0);
    tf_node(&t, 7, "76540", 3, 8, 0);
    return t.p;
}

#endif
