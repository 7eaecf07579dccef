/*
 * SPDX-License-Identifier: Apache-2.0
 * Retry back-off, Roost's own (x-requeue-delay, x-requeue-delay-max),
 * with rabbitmq-c against a real roostd: a message a nack or reject
 * returns with requeue waits before it is delivered again, for
 * x-requeue-delay doubled at each return up to x-requeue-delay-max, less
 * up to half of it (jitter); it then goes back to its place; returns by
 * a channel that closes or basic.recover do not wait; x-delivery-limit
 * is judged first; purge drops waiting messages and queue.declare-ok
 * does not count them; a transaction's nack waits from its commit; the
 * wait survives a clean restart and a kill -9 (the journal keeps when
 * it is due); bad values get 406.
 *
 * Timings are checked from below (never early) and loosely from above
 * (within seconds): they are the feature, not a speed.
 *
 * RabbitMQ has no such argument (it ignores it): every test skips itself
 * against a remote broker.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

#define SKIP_REFERENCE() SKIP_IF_REMOTE("x-requeue-delay is Roost's own")

/* A queue named for 'tag' (into 'q', 256 bytes) with x-requeue-delay
 * 'delay' and, when 'max' > 0, x-requeue-delay-max, plus 'extra'. */
static void
declare_retry_at(const char *file, int line, amqp_connection_state_t c,
                 char *q, const char *tag, int delay, int max, bool durable,
                 const amqp_table_entry_t *extra)
{
    char name[64];
    amqp_table_entry_t a[4] = { h_entry_int("x-requeue-delay", delay) };
    int n = 1;
    if (max > 0)
        a[n++] = h_entry_int("x-requeue-delay-max", max);
    for (; extra && extra->key.len; extra++)
        a[n++] = *extra;
    h_declare_queue_at(file, line, c, 1, h_name(name, sizeof(name), tag),
                       durable, false, false, h_table(a, n), q, NULL, NULL);
}
#define DECLARE_RETRY(c, q, tag, delay, max)                                   \
    declare_retry_at(__FILE__, __LINE__, (c), (q), (tag), (delay), (max),      \
                     false, NULL)

/* basic.get until a message comes (or 'timeout_ms'): the ms it took,
 * with the message in *e; -1 if none came. */
static long
get_within(amqp_connection_state_t c, const char *q, int timeout_ms,
           struct h_event *e)
{
    uint64_t t0 = h_now_ms();
    for (;;) {
        if (GET(c, 1, q, false, e) == 1)
            return (long)(h_now_ms() - t0);
        if (h_now_ms() - t0 > (uint64_t)timeout_ms)
            return -1;
        h_sleep_ms(10);
    }
}

static void
nack(amqp_connection_state_t c, uint64_t tag)
{
    ck_assert_int_eq(amqp_basic_nack(c, 1, tag, 0, 1), AMQP_STATUS_OK);
}

START_TEST(nack_waits_then_back)
{
    amqp_connection_state_t c;
    char q[256];
    struct h_event e;

    SKIP_REFERENCE();
    c = h_connect(H);
    DECLARE_RETRY(c, q, "wait", 400, 0);
    PUBLISH(c, 1, "", q, "job");
    ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
    uint64_t t0 = h_now_ms();
    nack(c, e.tag);
    h_event_free(&e);
    /* Not there at once, and not declared as ready. */
    ck_assert_int_eq(GET(c, 1, q, false, &e), 0);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    long ms = get_within(c, q, 5000, &e);
    long waited = (long)(h_now_ms() - t0);
    ck_assert_msg(ms >= 0, "the nacked message never came back");
    /* 400 ms less up to half of it. */
    ck_assert_msg(waited >= 190, "back after %ld ms, before 200", waited);
    ck_assert_msg(waited < 2000, "back after %ld ms", waited);
    ck_assert_str_eq(e.body, "job");
    ck_assert(e.redelivered);
    ck_assert_int_eq(amqp_basic_ack(c, 1, e.tag, 0), AMQP_STATUS_OK);
    h_event_free(&e);
    h_close(c);
}
END_TEST

/* Each return doubles the wait: 200, 400, 800, then 800 (the maximum);
 * each at least half of that. */
START_TEST(grows_to_the_maximum)
{
    amqp_connection_state_t c;
    char q[256];
    struct h_event e;
    static const long want[] = { 200, 400, 800, 800 };

    SKIP_REFERENCE();
    c = h_connect(H);
    DECLARE_RETRY(c, q, "grow", 200, 800);
    PUBLISH(c, 1, "", q, "job");
    ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
    for (int i = 0; i < 4; i++) {
        uint64_t t0 = h_now_ms();
        if (i % 2)
            ck_assert_int_eq(amqp_basic_reject(c, 1, e.tag, 1), AMQP_STATUS_OK);
        else
            nack(c, e.tag);
        h_event_free(&e);
        ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
        long waited = (long)(h_now_ms() - t0);
        ck_assert_msg(waited >= want[i] / 2 - 10 && waited < want[i] + 1500,
                      "return %d: back after %ld ms, expected %ld to %ld", i + 1,
                      waited, want[i] / 2, want[i]);
    }
    ck_assert_int_eq(amqp_basic_ack(c, 1, e.tag, 0), AMQP_STATUS_OK);
    h_event_free(&e);
    h_close(c);
}
END_TEST

/* Back at its place: two nacked, a third never taken; they come back in
 * publishing order. A channel closed holding one, or basic.recover,
 * returns it at once. */
START_TEST(back_in_place_and_other_returns_at_once)
{
    amqp_connection_state_t c, c2;
    char q[256];
    struct h_event e[3];

    SKIP_REFERENCE();
    c = h_connect(H);
    DECLARE_RETRY(c, q, "place", 300, 0);
    PUBLISH_N(c, 1, q, "m", 0, 3);
    ck_assert_int_ge(get_within(c, q, 5000, &e[0]), 0);
    ck_assert_int_ge(get_within(c, q, 5000, &e[1]), 0);
    nack(c, e[1].tag);
    nack(c, e[0].tag);
    ck_assert_int_ge(get_within(c, q, 5000, &e[2]), 0);
    ck_assert_str_eq(e[2].body, "m2");
    nack(c, e[2].tag);
    for (int i = 0; i < 3; i++)
        h_event_free(&e[i]);
    h_sleep_ms(700);
    for (int i = 0; i < 3; i++) {
        char want[8];
        snprintf(want, sizeof(want), "m%d", i);
        ck_assert_int_eq(GET(c, 1, q, true, &e[0]), 1);
        ck_assert_str_eq(e[0].body, want);
        h_event_free(&e[0]);
    }

    /* A consumer's channel goes: no wait. */
    PUBLISH(c, 1, "", q, "held");
    c2 = h_connect(H);
    ck_assert_int_ge(get_within(c2, q, 5000, &e[0]), 0);
    h_event_free(&e[0]);
    h_close(c2);
    ck_assert_int_eq(GET(c, 1, q, false, &e[0]), 1);
    ck_assert_str_eq(e[0].body, "held");
    h_event_free(&e[0]);
    /* basic.recover: no wait either. */
    amqp_basic_recover(c, 1, 1);
    EXPECT_OK(c, "basic.recover");
    ck_assert_int_eq(GET(c, 1, q, true, &e[0]), 1);
    ck_assert_str_eq(e[0].body, "held");
    h_event_free(&e[0]);
    h_close(c);
}
END_TEST

/* The delivery limit is judged first: past it, dead-lettered at once. */
START_TEST(delivery_limit_first_and_purge)
{
    amqp_connection_state_t c;
    char q[256], dead[256], name[64];
    struct h_event e;

    SKIP_REFERENCE();
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "dead"), false, false,
                  true, dead);
    amqp_table_entry_t extra[] = {
        h_entry_int("x-delivery-limit", 1),
        h_entry_str("x-dead-letter-exchange", ""),
        h_entry_str("x-dead-letter-routing-key", dead),
        { { 0, NULL }, { 0, { 0 } } },
    };
    declare_retry_at(__FILE__, __LINE__, c, q, "limit", 300, 0, false, extra);
    PUBLISH(c, 1, "", q, "poison");
    ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
    nack(c, e.tag);
    h_event_free(&e);
    ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
    uint64_t t0 = h_now_ms();
    nack(c, e.tag);
    h_event_free(&e);
    ck_assert_int_ge(get_within(c, dead, 5000, &e), 0);
    ck_assert_msg(h_now_ms() - t0 < 150, "dead-lettered only after %llu ms",
                  (unsigned long long)(h_now_ms() - t0));
    ck_assert_str_eq(e.body, "poison");
    h_event_free(&e);

    /* queue.purge drops a waiting message and counts it. */
    PUBLISH(c, 1, "", q, "purged");
    ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
    nack(c, e.tag);
    h_event_free(&e);
    amqp_queue_purge_ok_t *ok = amqp_queue_purge(c, 1, amqp_cstring_bytes(q));
    EXPECT_OK(c, "queue.purge");
    ck_assert_uint_eq(ok->message_count, 1);
    h_sleep_ms(600);
    ck_assert_int_eq(GET(c, 1, q, true, &e), 0);
    h_close(c);
}
END_TEST

/* In a transaction the nack counts from tx.commit. */
START_TEST(transaction_waits_from_commit)
{
    amqp_connection_state_t c;
    char q[256];
    struct h_event e;

    SKIP_REFERENCE();
    c = h_connect(H);
    DECLARE_RETRY(c, q, "tx", 300, 0);
    PUBLISH(c, 1, "", q, "job");
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
    nack(c, e.tag);
    h_event_free(&e);
    h_sleep_ms(400);
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    uint64_t t0 = h_now_ms();
    ck_assert_int_eq(GET(c, 1, q, true, &e), 0);
    ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
    ck_assert_msg(h_now_ms() - t0 >= 140, "back %llu ms after the commit",
                  (unsigned long long)(h_now_ms() - t0));
    h_event_free(&e);
    h_close(c);
}
END_TEST

START_TEST(bad_values_406)
{
    amqp_connection_state_t c;

    SKIP_REFERENCE();
    c = h_connect(H);
    EXPECT_ARG_REFUSED(c, "bad", h_entry_int("x-requeue-delay", -1),
                       "{value_negative,-1}");
    EXPECT_ARG_REFUSED(c, "bad", h_entry_str("x-requeue-delay", "1s"),
                       "\"expected integer, got longstr\"");
    EXPECT_ARG_REFUSED(c, "bad", h_entry_int("x-requeue-delay-max", -5),
                       "{value_negative,-5}");
    h_close(c);
}
END_TEST

/* A durable queue's persistent message waits out what is left of its
 * delay after a clean restart, and after a kill -9. */
START_TEST(wait_survives_restarts)
{
    amqp_connection_state_t c;
    char q[256];
    struct h_event e;
    amqp_basic_properties_t p = { 0 };

    SKIP_REFERENCE();
    harness_start(H, NULL);
    p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    p.delivery_mode = 2;
    for (int kill = 0; kill < 2; kill++) {
        c = h_connect(H);
        declare_retry_at(__FILE__, __LINE__, c, q, kill ? "kill" : "clean",
                         6000, 0, true, NULL);
        h_publish_at(__FILE__, __LINE__, c, 1, "", q, "kept", 4, false, &p);
        ck_assert_int_ge(get_within(c, q, 5000, &e), 0);
        nack(c, e.tag);
        h_event_free(&e);
        /* Synced: a passive declare after the nack on one channel. */
        QUEUE_COUNT(c, 1, q);
        uint64_t t0 = h_now_ms();
        if (kill) {
            h_sleep_ms(300);   /* the group commit's interval, and more */
            harness_kill(H, SIGKILL);
            h_drop(c);
            harness_reap(H);
        } else {
            h_close(c);
            harness_stop_keep(H);
        }
        harness_restart(H, NULL);
        c = h_connect(H);
        long left = 3000 - (long)(h_now_ms() - t0);
        if (left > 200)
            ck_assert_msg(GET(c, 1, q, true, &e) == 0,
                          "%s restart: back %llu ms after the nack, before "
                          "3,000 ms", kill ? "kill -9" : "clean",
                          (unsigned long long)(h_now_ms() - t0));
        ck_assert_msg(get_within(c, q, 10000, &e) >= 0, "%s restart: the "
                      "message never came back", kill ? "kill -9" : "clean");
        ck_assert_msg(h_now_ms() - t0 >= 2990, "back %llu ms after the nack",
                      (unsigned long long)(h_now_ms() - t0));
        ck_assert_str_eq(e.body, "kept");
        ck_assert(e.redelivered);
        ck_assert_int_eq(amqp_basic_ack(c, 1, e.tag, 0), AMQP_STATUS_OK);
        h_event_free(&e);
        h_close(c);
    }
    harness_stop(H);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("retry");
    TCase *tc;

    tc = h_tcase(s, "x-requeue-delay", 30, true);
    tcase_add_test(tc, nack_waits_then_back);
    tcase_add_test(tc, grows_to_the_maximum);
    tcase_add_test(tc, back_in_place_and_other_returns_at_once);
    tcase_add_test(tc, delivery_limit_first_and_purge);
    tcase_add_test(tc, transaction_waits_from_commit);
    tcase_add_test(tc, bad_values_406);

    tc = h_tcase(s, "restarts", 60, false);
    tcase_add_test(tc, wait_survives_restarts);

    return h_run(s);
}
