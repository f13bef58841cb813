/* test_ring.c — the job-to-worker ring: records come out whole, in order,
 * each once, across wrap marks; a full ring refuses a record and changes
 * nothing; iteration sees exactly the records not yet released; and a
 * producer and a consumer on two threads lose and corrupt nothing. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "alloc_fail.h"
#include "check.h"
#include "ring.h"

/* record k: its length (1..max), then words derived from k */
static size_t len_of(uint64_t k, size_t max) { return 1 + (size_t)((k * 2654435761u) % max); }
static uint64_t word_of(uint64_t k, size_t i) { return k * 1000003u + i; }

static int put(hk_ring *r, uint64_t k, size_t max)
{
    uint64_t *w = hk_ring_reserve(r, max);
    if (!w) return 0;
    size_t n = len_of(k, max);
    w[0] = k;
    for (size_t i = 1; i < n; i++) w[i] = word_of(k, i);
    hk_ring_commit(r, n);
    return 1;
}

/* 0 when the next record is record k, whole */
static int take(hk_ring *r, uint64_t k, size_t max)
{
    size_t n;
    const uint64_t *w = hk_ring_peek(r, &n);
    if (!w) return 1;
    if (n != len_of(k, max) || w[0] != k) return 2;
    for (size_t i = 1; i < n; i++)
        if (w[i] != word_of(k, i)) return 3;
    hk_ring_release(r);
    return 0;
}

static void test_records_come_out_whole_in_order_across_laps(void)
{
    hk_ring r;
    CHECK(hk_ring_init(&r, 97) == 0); /* a size no record length divides */
    uint64_t next_put = 0, next_take = 0;
    for (int round = 0; round < 500; round++) {
        int burst = 1 + round % 7;
        for (int i = 0; i < burst && put(&r, next_put, 11); i++) next_put++;
        int drain = 1 + (round * 5) % 6;
        for (int i = 0; i < drain && next_take < next_put; i++, next_take++)
            CHECK_MSG(take(&r, next_take, 11) == 0, "record %llu", (unsigned long long)next_take);
    }
    while (next_take < next_put) {
        CHECK_MSG(take(&r, next_take, 11) == 0, "record %llu", (unsigned long long)next_take);
        next_take++;
    }
    size_t n;
    CHECK(hk_ring_peek(&r, &n) == NULL);
    CHECK_INT(hk_ring_used(&r), 0);
    CHECK_MSG(next_put > 1000, "%llu records went through", (unsigned long long)next_put);
    hk_ring_free(&r);
}

static void test_a_full_ring_refuses_and_changes_nothing(void)
{
    hk_ring r;
    CHECK(hk_ring_init(&r, 32) == 0);
    CHECK(hk_ring_reserve(&r, 32) == NULL); /* never fits with its length word */
    uint64_t k = 0;
    while (k < 100 && put(&r, k, 7)) k++;
    CHECK_MSG(k < 100, "a 32-word ring took %llu records of up to 8 words", (unsigned long long)k);
    size_t used = hk_ring_used(&r);
    CHECK(hk_ring_reserve(&r, 7) == NULL);
    CHECK_INT(hk_ring_used(&r), used);
    for (uint64_t i = 0; i < k; i++) CHECK_MSG(take(&r, i, 7) == 0, "record %llu", (unsigned long long)i);
    CHECK(put(&r, k, 7)); /* room again */
    CHECK(take(&r, k, 7) == 0);
    hk_ring_free(&r);
}

/* the sampler keeps its ring for the next session: a cleared ring is empty
 * and takes a whole lap again, from its first word */
static void test_a_cleared_ring_is_empty_and_whole(void)
{
    hk_ring r;
    CHECK(hk_ring_init(&r, 64) == 0);
    uint64_t *words = r.words, k = 0;
    while (put(&r, k, 5)) k++;
    CHECK(take(&r, 0, 5) == 0); /* one released, the rest left behind by the stop */
    hk_ring_clear(&r);
    CHECK(r.words == words && r.cap == 64);
    CHECK_INT(hk_ring_used(&r), 0);
    size_t n;
    CHECK(hk_ring_peek(&r, &n) == NULL);
    uint64_t cursor;
    CHECK(hk_ring_first(&r, &cursor, &n) == NULL);
    uint64_t again = 0;
    while (put(&r, 100 + again, 5)) again++;
    CHECK_MSG(again >= k, "a cleared ring took %llu records, a new one %llu", (unsigned long long)again,
              (unsigned long long)k);
    for (uint64_t i = 0; i < again; i++) CHECK(take(&r, 100 + i, 5) == 0);
    hk_ring_free(&r);
}

static void test_iteration_sees_what_is_not_released(void)
{
    hk_ring r;
    CHECK(hk_ring_init(&r, 50) == 0);
    uint64_t oldest = 0;
    for (uint64_t k = 0; k < 40; k++) {
        /* at most 4 records stay in the ring, so every few records a lap wraps */
        while (k - oldest >= 4) {
            CHECK(take(&r, oldest, 9) == 0);
            oldest++;
        }
        CHECK(put(&r, k, 9));
        uint64_t cursor;
        size_t n, seen = 0;
        for (const uint64_t *w = hk_ring_first(&r, &cursor, &n); w; w = hk_ring_next(&r, &cursor, &n)) {
            CHECK_MSG(w[0] == oldest + seen, "iteration met record %llu, expected %llu",
                      (unsigned long long)w[0], (unsigned long long)(oldest + seen));
            CHECK_INT(n, len_of(w[0], 9));
            seen++;
        }
        CHECK_INT(seen, k + 1 - oldest);
    }
    hk_ring_free(&r);
}

static void test_init_fails_cleanly_without_memory(void)
{
    hk_ring r;
    long live = alloc_live();
    alloc_fail_at(0);
    CHECK(hk_ring_init(&r, 64) == -1);
    CHECK(alloc_fail_done());
    CHECK(r.words == NULL);
    hk_ring_free(&r); /* harmless after a failed init */
    CHECK_INT(alloc_live(), live);
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/* the producer is the sampling job: its first lap must not fault on each new page */
static void test_a_new_ring_is_already_mapped(void)
{
    hk_ring r;
    size_t words = 1 << 18; /* 2 MB: a fresh mapping of 512 pages */
    CHECK(hk_ring_init(&r, words) == 0);
    long before = minor_faults();
    for (size_t i = 0; i < words; i += 8) ((volatile uint64_t *)r.words)[i] = i;
    long faults = minor_faults() - before;
    CHECK_MSG(faults < 16, "the first lap took %ld page faults in 512 pages", faults);
    hk_ring_free(&r);
}

/* two threads: the producer never waits for the consumer, it retries */
#define STRESS_RECORDS 200000
static uint64_t stress_records; /* set before the producer starts */
static hk_ring stress;
static int stop_producing;
static void *produce(void *arg)
{
    (void)arg;
    for (uint64_t k = 0; k < stress_records && !__atomic_load_n(&stop_producing, __ATOMIC_RELAXED);)
        if (put(&stress, k, 13)) k++;
    return NULL;
}

static void test_two_threads_lose_and_corrupt_nothing(void)
{
    CHECK(hk_ring_init(&stress, 61) == 0);
    /* under valgrind (HK_TEST_QUICK) the two threads take turns, slowly */
    stress_records = getenv("HK_TEST_QUICK") ? STRESS_RECORDS / 50 : STRESS_RECORDS;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, produce, NULL) == 0);
    int bad = 0;
    time_t give_up = time(NULL) + 20; /* a lost record would leave both sides waiting */
    for (uint64_t k = 0; k < stress_records && !bad;) {
        int rc = take(&stress, k, 13);
        if (rc == 0) k++;
        else if (rc != 1) bad = rc;
        else if (time(NULL) > give_up) bad = 4;
    }
    if (bad) { /* let a producer stuck on a full ring finish */
        __atomic_store_n(&stop_producing, 1, __ATOMIC_RELAXED);
    }
    pthread_join(t, NULL);
    CHECK_MSG(!bad, "a record came out %s", bad == 2 ? "out of order or with a wrong length"
                                            : bad == 3 ? "corrupt" : "never (the ring lost it)");
    CHECK_INT(hk_ring_used(&stress), 0);
    hk_ring_free(&stress);
}

int main(void)
{
    RUN(test_records_come_out_whole_in_order_across_laps);
    RUN(test_a_full_ring_refuses_and_changes_nothing);
    RUN(test_iteration_sees_what_is_not_released);
    RUN(test_a_cleared_ring_is_empty_and_whole);
    RUN(test_init_fails_cleanly_without_memory);
    RUN(test_a_new_ring_is_already_mapped);
    RUN(test_two_threads_lose_and_corrupt_nothing);
    return check_done();
}
