/*
 * SPDX-License-Identifier: Apache-2.0
 * The history rings (broker/core/history.c) over many ticks: wrapping,
 * counters widened past 32 bits, the ring an age picks, increments
 * rounded up to its steps, and the bound on a queue's memory.
 * (tests/integration/history.sh checks the same through the API.)
 */
#include "tests/unit/testutil.h"

#include "broker/core/history.h"

#define IV 5000     /* the tick, ms */
#define T0 1796000000000ull

/* Record ticks 1..last: ready = tick, publish = base + 100 * tick. */
static struct history *
run(enum history_kind kind, uint64_t last, uint64_t base)
{
    struct history *h = NULL;
    for (uint64_t t = 1; t <= last; t++) {
        uint64_t v[HC_COUNT] = { [HC_READY] = t,
                                 [HC_PUBLISH] = base + 100 * t };
        history_record(&h, kind, t, T0 + t * IV, v);
    }
    return h;
}

START_TEST(nothing_is_kept_before_a_nonzero_value)
{
    struct history *h = NULL;
    uint64_t zero[HC_COUNT] = { 0 };
    history_record(&h, HISTORY_QUEUE, 5, T0, zero);
    ck_assert_ptr_null(h);
    ck_assert_uint_eq(history_memory(h), 0);
}
END_TEST

START_TEST(a_queue_ring_wraps_and_keeps_the_newest_24)
{
    struct history *h = run(HISTORY_QUEUE, 1000, 0);
    struct history_sample s[64];
    size_t n = history_samples(h, HC_READY, 1000, IV, 600, 25, s, 64);
    ck_assert_uint_eq(n, 24);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(s[i].value, 1000 - 5 * i);
        ck_assert_uint_eq(s[i].ts_ms, T0 + (1000 - 5 * i) * IV);
    }
    history_free(&h);
    ck_assert_ptr_null(h);
}
END_TEST

START_TEST(counters_are_widened_past_32_bits)
{
    uint64_t base = (1ull << 32) - 1000;    /* crosses 2^32 on the way */
    struct history *h = run(HISTORY_QUEUE, 300, base);
    struct history_sample s[64];
    uint64_t now = base + 100 * 300 + 7;    /* counted since the tick */
    size_t n = history_samples(h, HC_PUBLISH, now, IV, 600, 25, s, 64);
    ck_assert_uint_eq(n, 24);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(s[i].value, base + 100 * (300 - 5 * i));
    history_free(&h);
}
END_TEST

START_TEST(the_age_picks_the_ring_and_the_increment_its_steps)
{
    struct history *h = run(HISTORY_BROKER, 10000, 0);
    struct history_sample s[200];
    /* 10 minutes: 5 s steps, 121 of them */
    size_t n = history_samples(h, HC_READY, 0, IV, 600, 5, s, 200);
    ck_assert_uint_eq(n, 121);
    ck_assert_uint_eq(s[0].value - s[1].value, 1);
    /* an hour: the 60 s ring (12 ticks), every 60 s */
    n = history_samples(h, HC_READY, 0, IV, 3600, 60, s, 200);
    ck_assert_uint_eq(n, 61);
    ck_assert_uint_eq(s[0].value, 10000 - 10000 % 12);
    ck_assert_uint_eq(s[0].value - s[1].value, 12);
    /* 8 hours every 10 minutes: the 600 s ring */
    n = history_samples(h, HC_READY, 0, IV, 28800, 600, s, 200);
    ck_assert_uint_eq(n, 49);
    ck_assert_uint_eq(s[0].ts_ms - s[1].ts_ms, 600000);
    /* an increment of 7 s in the 5 s ring: every 10 s */
    n = history_samples(h, HC_READY, 0, IV, 60, 7, s, 200);
    ck_assert_uint_eq(n, 7);
    ck_assert_uint_eq(s[0].ts_ms - s[1].ts_ms, 10000);
    /* more than the longest ring: what it holds */
    n = history_samples(h, HC_READY, 0, IV, 86400, 600, s, 200);
    ck_assert_uint_eq(n, 49);
    /* at most 'max' */
    n = history_samples(h, HC_READY, 0, IV, 600, 5, s, 10);
    ck_assert_uint_eq(n, 10);
    history_free(&h);
}
END_TEST

START_TEST(a_young_history_answers_from_the_ring_that_has_samples)
{
    /* 100 ticks: the 150 s ring (30 ticks) has 3, the 1200 s one none */
    struct history *h = run(HISTORY_QUEUE, 100, 0);
    struct history_sample s[64];
    size_t n = history_samples(h, HC_READY, 0, IV, 28800, 1200, s, 64);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(s[0].value, 90);
    history_free(&h);
}
END_TEST

START_TEST(a_queue_history_is_at_most_2_KB)
{
    struct history *h = run(HISTORY_QUEUE, 1, 0);
    ck_assert_uint_le(history_memory(h), HISTORY_QUEUE_MAX);
    history_free(&h);
    uint64_t ages[HISTORY_TIERS];
    history_ages(HISTORY_QUEUE, IV, ages);
    ck_assert_uint_eq(ages[0], 600000);
    ck_assert_uint_eq(ages[1], 3600000);
    ck_assert_uint_eq(ages[2], 28800000);
    history_ages(HISTORY_BROKER, IV, ages);
    ck_assert_uint_eq(ages[0], 605000);
    ck_assert_uint_eq(ages[2], 29400000);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("rings");
    tcase_add_test(tc, nothing_is_kept_before_a_nonzero_value);
    tcase_add_test(tc, a_queue_ring_wraps_and_keeps_the_newest_24);
    tcase_add_test(tc, counters_are_widened_past_32_bits);
    tcase_add_test(tc, the_age_picks_the_ring_and_the_increment_its_steps);
    tcase_add_test(tc, a_young_history_answers_from_the_ring_that_has_samples);
    tcase_add_test(tc, a_queue_history_is_at_most_2_KB);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
