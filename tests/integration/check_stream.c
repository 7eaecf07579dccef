/*
 * SPDX-License-Identifier: Apache-2.0
 * Streams from rabbitmq-c (issue 24, point 10; streams-spec.md 1.5-1.8,
 * P2, P3, P5), against a real roostd or, with ROOST_TEST_REMOTE, the
 * RabbitMQ 3.10.8 reference node for the R cases: offsets first and an
 * integer with their bodies and the x-stream-offset header; the
 * refusals (basic.get 540, closing the connection; no basic.qos 406)
 * with RabbitMQ's texts.
 * Roost only (RabbitMQ delivers whole chunks and keeps no names):
 * credit exactly the prefetch count; a named consumer resumes after
 * what it acked.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

/* A new stream named for 'tag' with "m0".."m<n-1>" in it, into 'q',
 * each published alone with a confirm (so that RabbitMQ makes a chunk
 * of each, as stream_consume.py does). */
static void
fresh_stream(amqp_connection_state_t c, const char *tag, int n, char *q)
{
    char name[64];
    amqp_table_entry_t t = h_entry_str("x-queue-type", "stream");

    h_name(name, sizeof(name), tag);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, true, false, false,
                       h_table(&t, 1), q, NULL, NULL);
    amqp_confirm_select(c, 1);
    EXPECT_OK(c, "confirm.select");
    for (int i = 0; i < n; i++) {
        char body[16];
        snprintf(body, sizeof(body), "m%d", i);
        PUBLISH(c, 1, "", q, body);
        EXPECT_METHOD(c, AMQP_BASIC_ACK_METHOD, NULL);
    }
}

/* basic.qos 'prefetch' and basic.consume on 'ch' with x-stream-offset
 * 'offset' (an integer if 'str' is NULL) and, if 'name', a consumer name. */
static void
consume_at(amqp_connection_state_t c, amqp_channel_t ch, const char *q,
           const char *str, int64_t offset, const char *name,
           uint16_t prefetch)
{
    amqp_table_entry_t e[2];
    int n = 0;

    amqp_channel_open(c, ch);
    EXPECT_OK(c, "channel.open");
    amqp_basic_qos(c, ch, 0, prefetch, 0);
    EXPECT_OK(c, "basic.qos");
    if (str) {
        e[0] = h_entry_str("x-stream-offset", str);
    } else {
        e[0].key = amqp_cstring_bytes("x-stream-offset");
        e[0].value.kind = AMQP_FIELD_KIND_I64;
        e[0].value.value.i64 = offset;
    }
    n++;
    if (name)
        e[n++] = h_entry_str("x-stream-consumer-name", name);
    amqp_basic_consume(c, ch, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 0,
                       0, h_table(e, n));
    EXPECT_OK(c, "basic.consume");
}

START_TEST(offsets_first_last_integer)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], want[16];
    struct h_event e;

    fresh_stream(c, "stream-offsets", 10, q);
    consume_at(c, 2, q, "first", 0, NULL, 10);
    for (int i = 0; i < 10; i++) {
        snprintf(want, sizeof(want), "m%d", i);
        uint64_t tag = EXPECT_DELIVERY(c, want, &e);
        ck_assert_msg(e.nheaders >= 1 && strcmp(e.header0,
                                                "x-stream-offset") == 0,
                      "delivery %d: first header '%s'", i, e.header0);
        ck_assert(!e.redelivered);
        h_event_free(&e);
        amqp_basic_ack(c, 2, tag, 0);
    }
    h_close(c);
    c = h_connect(H);
    consume_at(c, 2, q, NULL, 5, NULL, 1);
    EXPECT_DELIVERY(c, "m5", NULL);
    h_close(c);
}
END_TEST

START_TEST(refusals)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];

    fresh_stream(c, "stream-refusals", 1, q);
    amqp_basic_get(c, 1, amqp_cstring_bytes(q), 0);
    /* 540 is a connection error */
    EXPECT_CONN_CLOSE(c, 540, "NOT_IMPLEMENTED - basic.get not supported "
                      "by stream queues");
    c = h_connect(H);
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open");
    amqp_table_entry_t e = h_entry_str("x-stream-offset", "first");
    amqp_basic_consume(c, 2, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 0,
                       0, h_table(&e, 1));
    EXPECT_CHANNEL_CLOSE(c, 2, 406, "PRECONDITION_FAILED - consumer prefetch "
                         "count is not set for ");
    h_close(c);
}
END_TEST

START_TEST(credit_is_the_prefetch_count)
{
    if (h_skipped_remote("RabbitMQ 3.10.8 delivers whole chunks"))
        return;
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event evs[8];

    fresh_stream(c, "stream-credit", 20, q);
    consume_at(c, 2, q, "first", 0, NULL, 3);
    h_sleep_ms(200);
    int n = SYNC(c, 2, evs, 8);
    ck_assert_msg(n == 3, "%d deliveries with prefetch 3", n);
    for (int i = 0; i < n; i++)
        h_event_free(&evs[i]);
    h_close(c);
}
END_TEST

START_TEST(named_consumer_resumes_after_its_acks)
{
    if (h_skipped_remote("RabbitMQ keeps no 0-9-1 consumer offsets"))
        return;
    amqp_connection_state_t c = h_connect(H);
    char q[256], want[16];

    fresh_stream(c, "stream-named", 10, q);
    consume_at(c, 2, q, "first", 0, "c-named", 4);
    for (int i = 0; i < 4; i++) {
        snprintf(want, sizeof(want), "m%d", i);
        amqp_basic_ack(c, 2, EXPECT_DELIVERY(c, want, NULL), 0);
    }
    h_close(c);
    c = h_connect(H);
    consume_at(c, 2, q, "first", 0, "c-named", 1);
    EXPECT_DELIVERY(c, "m4", NULL);
    h_close(c);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = h_tcase(s, "stream", 20, true);
    tcase_add_test(tc, offsets_first_last_integer);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, credit_is_the_prefetch_count);
    tcase_add_test(tc, named_consumer_resumes_after_its_acks);
    return h_run(s);
}
