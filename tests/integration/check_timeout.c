/*
 * SPDX-License-Identifier: Apache-2.0
 * The consumer timeout (consumer_timeout, x-consumer-timeout), against
 * a real roostd started with a short consumer_timeout: a delivery left
 * unacknowledged closes its channel with 406 and RabbitMQ's text, its
 * message comes back redelivered to another consumer, the connection's
 * other channels go on; acked deliveries and no-ack ones never time
 * out; basic.get without no-ack is held to it too; a queue's
 * x-consumer-timeout wins over the global value either way; 0 means no
 * timeout; a bad x-consumer-timeout gets 406.
 *
 * The reference RabbitMQ runs with the default 30 minutes, which no test
 * can wait for, and 3.10 ignores x-consumer-timeout (it accepts -1 and
 * "abc" alike): those tests skip themselves against it.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

/* RabbitMQ's close text for a timeout of 'ms' on channel 'ch'. */
static const char *
timeout_text(char *buf, size_t len, int ch, int ms)
{
    snprintf(buf, len, "PRECONDITION_FAILED - delivery acknowledgement on "
             "channel %d timed out. Timeout value used: %d ms. This timeout "
             "value can be configured, see consumers doc guide to learn more",
             ch, ms);
    return buf;
}

static void
open_channel(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_channel_open(c, ch);
    EXPECT_OK(c, "channel.open");
}

/* basic.ack of 'tag' on 'ch'. */
static void
ack(amqp_connection_state_t c, amqp_channel_t ch, uint64_t tag)
{
    ck_assert_int_eq(amqp_basic_ack(c, ch, tag, 0), AMQP_STATUS_OK);
}

/* ---- the global consumer_timeout ---- */

START_TEST(unacked_delivery_closes_channel_and_requeues)
{
    struct harness h;
    amqp_connection_state_t c;
    char name[64], q[256], want[300];
    struct h_event e;

    SKIP_IF_REMOTE("needs a short consumer_timeout (RabbitMQ: 30 min)");
    if (!harness_start(&h, ARGS("--set", "consumer_timeout=400")))
        return;
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "cto"), false, false,
                  false, q);
    open_channel(c, 2);
    CONSUME(c, 2, q, "slow", false, NULL);
    uint64_t t0 = h_now_ms();
    PUBLISH(c, 1, "", q, "m1");
    EXPECT_DELIVERY(c, "m1", &e);
    ck_assert(!e.redelivered);
    h_event_free(&e);

    /* No ack: the channel is closed with RabbitMQ's text. */
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 2, 406, timeout_text(want, sizeof(want), 2,
                                                        400));
    /* The broker's coarse clock may stamp the delivery a few ms early. */
    uint64_t waited = h_now_ms() - t0;
    ck_assert_msg(waited >= 350 && waited < 3000,
                  "closed after %llu ms", (unsigned long long)waited);
    ck_assert(harness_log_contains(&h, "timed out waiting for delivery "
                                       "acknowledgement"));

    /* The connection's other channel goes on, and the message is back,
     * redelivered, for another consumer. */
    SYNC(c, 1, NULL, 0);
    open_channel(c, 3);
    CONSUME(c, 3, q, "next", true, NULL);
    EXPECT_DELIVERY(c, "m1", &e);
    ck_assert_msg(e.redelivered, "requeued message not marked redelivered");
    ck_assert_str_eq(e.ctag, "next");
    h_event_free(&e);
    PUBLISH(c, 1, "", q, "m2");
    EXPECT_DELIVERY(c, "m2", NULL);
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(acked_and_no_ack_deliveries_never_time_out)
{
    struct harness h;
    amqp_connection_state_t c;
    char name[64], q[256], nq[256];
    struct h_event e;

    /* Against RabbitMQ (30 min) this checks only that nothing else
     * closes the channel. */
    if (!harness_start(&h, harness_is_remote()
                               ? NULL
                               : ARGS("--set", "consumer_timeout=300")))
        return;
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "cto-acked"), false,
                  false, true, q);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "cto-noack"), false,
                  false, false, nq);
    open_channel(c, 2);
    CONSUME(c, 2, q, "acker", false, NULL);
    /* Deliveries acked as they come, over twice the timeout. */
    for (int i = 0; i < 6; i++) {
        PUBLISH(c, 1, "", q, "m");
        uint64_t tag = EXPECT_DELIVERY(c, "m", NULL);
        h_sleep_ms(100);
        ack(c, 2, tag);
    }
    /* A no-ack consumer and a no-ack basic.get hold nothing. */
    open_channel(c, 3);
    CONSUME(c, 3, nq, "noack", true, NULL);
    PUBLISH(c, 1, "", nq, "n1");
    EXPECT_DELIVERY(c, "n1", NULL);
    amqp_basic_cancel(c, 3, amqp_cstring_bytes("noack"));
    EXPECT_OK(c, "basic.cancel");
    PUBLISH(c, 1, "", nq, "n2");
    WAIT_COUNT(c, 1, nq, 1);
    ck_assert_int_eq(GET(c, 3, nq, true, &e), 1);
    h_event_free(&e);
    EXPECT_SILENCE(c, 800);
    SYNC(c, 2, NULL, 0);
    SYNC(c, 3, NULL, 0);
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(get_without_ack_times_out)
{
    struct harness h;
    amqp_connection_state_t c;
    char name[64], q[256], want[300];
    struct h_event e;

    SKIP_IF_REMOTE("needs a short consumer_timeout (RabbitMQ: 30 min)");
    if (!harness_start(&h, ARGS("--set", "consumer_timeout=300")))
        return;
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "cto-get"), false, false,
                  false, q);
    PUBLISH(c, 1, "", q, "g1");
    WAIT_COUNT(c, 1, q, 1);
    open_channel(c, 2);
    ck_assert_int_eq(GET(c, 2, q, false, &e), 1);
    ck_assert(!e.redelivered);
    h_event_free(&e);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 2, 406, timeout_text(want, sizeof(want), 2,
                                                        300));
    WAIT_COUNT(c, 1, q, 1);
    ck_assert_int_eq(GET(c, 1, q, true, &e), 1);
    ck_assert_str_eq(e.body, "g1");
    ck_assert_msg(e.redelivered, "requeued message not marked redelivered");
    h_event_free(&e);
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(zero_means_no_timeout)
{
    struct harness h;
    amqp_connection_state_t c;
    char name[64], q[256];

    SKIP_IF_REMOTE("a roostd setting (RabbitMQ refuses consumer_timeout = 0)");
    if (!harness_start(&h, ARGS("--set", "consumer_timeout=0")))
        return;
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "cto-zero"), false, false,
                  false, q);
    open_channel(c, 2);
    CONSUME(c, 2, q, "held", false, NULL);
    PUBLISH(c, 1, "", q, "z");
    EXPECT_DELIVERY(c, "z", NULL);
    EXPECT_SILENCE(c, 800);
    SYNC(c, 2, NULL, 0);
    h_close(c);
    harness_stop(&h);
}
END_TEST

/* ---- x-consumer-timeout ---- */

START_TEST(queue_timeout_shorter_than_global)
{
    struct harness h;
    amqp_connection_state_t c;
    char name[64], q[256], want[300];
    amqp_table_entry_t a = h_entry_int("x-consumer-timeout", 300);

    SKIP_IF_REMOTE("RabbitMQ 3.10 ignores x-consumer-timeout");
    if (!harness_start(&h, ARGS("--set", "consumer_timeout=60000")))
        return;
    c = h_connect(&h);
    h_declare_queue_at(__FILE__, __LINE__, c, 1,
                       h_name(name, sizeof(name), "cto-q300"), false, false,
                       false, h_table(&a, 1), q, NULL, NULL);
    open_channel(c, 2);
    CONSUME(c, 2, q, "slow", false, NULL);
    PUBLISH(c, 1, "", q, "q1");
    EXPECT_DELIVERY(c, "q1", NULL);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 2, 406, timeout_text(want, sizeof(want), 2,
                                                        300));
    WAIT_COUNT(c, 1, q, 1);
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(queue_timeout_longer_than_global)
{
    struct harness h;
    amqp_connection_state_t c;
    char name[64], q[256], zq[256];
    amqp_table_entry_t a = h_entry_int("x-consumer-timeout", 60000);
    amqp_table_entry_t z = h_entry_int("x-consumer-timeout", 0);

    SKIP_IF_REMOTE("RabbitMQ 3.10 ignores x-consumer-timeout");
    if (!harness_start(&h, ARGS("--set", "consumer_timeout=200")))
        return;
    c = h_connect(&h);
    h_declare_queue_at(__FILE__, __LINE__, c, 1,
                       h_name(name, sizeof(name), "cto-q60000"), false,
                       false, false, h_table(&a, 1), q, NULL, NULL);
    /* 0: no timeout for this queue's deliveries (Roost's reading). */
    h_declare_queue_at(__FILE__, __LINE__, c, 1,
                       h_name(name, sizeof(name), "cto-q0"), false, false,
                       false, h_table(&z, 1), zq, NULL, NULL);
    open_channel(c, 2);
    CONSUME(c, 2, q, "long", false, NULL);
    open_channel(c, 3);
    CONSUME(c, 3, zq, "none", false, NULL);
    PUBLISH(c, 1, "", q, "l1");
    EXPECT_DELIVERY(c, "l1", NULL);
    PUBLISH(c, 1, "", zq, "z1");
    EXPECT_DELIVERY(c, "z1", NULL);
    EXPECT_SILENCE(c, 800);
    SYNC(c, 2, NULL, 0);
    SYNC(c, 3, NULL, 0);
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(bad_queue_timeout_406)
{
    amqp_connection_state_t c;

    SKIP_IF_REMOTE("RabbitMQ 3.10 ignores x-consumer-timeout (accepts -1)");
    c = h_connect(H);
    EXPECT_ARG_REFUSED(c, "cto-bad", h_entry_int("x-consumer-timeout", -1),
                       "{value_negative,-1}");
    EXPECT_ARG_REFUSED(c, "cto-bad", h_entry_str("x-consumer-timeout", "soon"),
                       "\"expected integer, got longstr\"");
    h_close(c);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("timeout");
    TCase *tc;

    tc = h_tcase(s, "consumer_timeout", 30, false);
    tcase_add_test(tc, unacked_delivery_closes_channel_and_requeues);
    tcase_add_test(tc, acked_and_no_ack_deliveries_never_time_out);
    tcase_add_test(tc, get_without_ack_times_out);
    tcase_add_test(tc, zero_means_no_timeout);

    tc = h_tcase(s, "x-consumer-timeout", 30, false);
    tcase_add_test(tc, queue_timeout_shorter_than_global);
    tcase_add_test(tc, queue_timeout_longer_than_global);

    tc = h_tcase(s, "x-consumer-timeout validation", 20, true);
    tcase_add_test(tc, bad_queue_timeout_406);

    return h_run(s);
}
