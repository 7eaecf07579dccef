/*
 * SPDX-License-Identifier: Apache-2.0
 * Consumer priorities (x-priority on basic.consume) and single active
 * consumer (x-single-active-consumer on queue.declare), against a real
 * roostd or, with ROOST_TEST_REMOTE, a RabbitMQ: higher priorities
 * served first, round-robin within one, a blocked higher consumer
 * letting lower ones have the messages; one active consumer, the next in
 * order of arrival taking over (with the unacked messages, in order)
 * when it cancels or its connection dies; the arguments' type checks
 * and equivalence with RabbitMQ's texts; the consumer_priorities
 * capability.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

static amqp_table_entry_t
bool_entry(const char *key, bool v)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_BOOLEAN;
    e.value.value.boolean = v;
    return e;
}

/* basic.consume with 'args' (tag 'tag'), asserting consume-ok. */
static void
consume_with(amqp_connection_state_t c, amqp_channel_t ch, const char *q,
             const char *tag, bool no_ack, amqp_table_t args)
{
    amqp_basic_consume(c, ch, amqp_cstring_bytes(q), amqp_cstring_bytes(tag),
                       0, no_ack, 0, args);
    EXPECT_OK(c, "basic.consume");
}

/* basic.qos prefetch_count 'n' on 'ch'. */
static void
qos(amqp_connection_state_t c, amqp_channel_t ch, uint16_t n)
{
    amqp_basic_qos(c, ch, 0, n, 0);
    EXPECT_OK(c, "basic.qos");
}

/* Collect 'n' deliveries; count them by consumer tag into 'a' (tag "a")
 * and 'b' (tag "b"), bodies in order into 'order' (comma separated). */
static void
collect(amqp_connection_state_t c, int n, int *a, int *b, char *order,
        size_t len)
{
    struct h_event e;
    order[0] = '\0';
    for (int i = 0; i < n; i++) {
        EXPECT_DELIVERY(c, NULL, &e);
        if (strcmp(e.ctag, "a") == 0)
            ++*a;
        else if (strcmp(e.ctag, "b") == 0)
            ++*b;
        size_t off = strlen(order);
        snprintf(order + off, len - off, "%s%s:%s", off ? "," : "", e.ctag,
                 e.body);
        h_event_free(&e);
    }
}

/* ---- consumer priorities ---- */

START_TEST(priority_served_first)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], order[512];
    amqp_table_entry_t hi = h_entry_int("x-priority", 10);
    int a = 0, b = 0;

    h_name(name, sizeof(name), "prio");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open");
    consume_with(c, 1, q, "b", true, amqp_empty_table);
    consume_with(c, 2, q, "a", true, h_table(&hi, 1));
    PUBLISH_N(c, 1, q, "m", 0, 6);
    collect(c, 6, &a, &b, order, sizeof(order));
    ck_assert_msg(a == 6 && b == 0, "priority 10 got %d, priority 0 got %d "
                  "(%s)", a, b, order);
    h_close(c);
}
END_TEST

START_TEST(priority_blocked_lets_lower_have_it)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], order[512];
    amqp_table_entry_t hi = h_entry_int("x-priority", 5);
    int a = 0, b = 0;

    h_name(name, sizeof(name), "prio-blocked");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open");
    /* "a" has the higher priority but room for 2 unacked only. */
    qos(c, 2, 2);
    consume_with(c, 2, q, "a", false, h_table(&hi, 1));
    consume_with(c, 1, q, "b", true, amqp_empty_table);
    PUBLISH_N(c, 1, q, "m", 0, 6);
    collect(c, 6, &a, &b, order, sizeof(order));
    ck_assert_msg(a == 2 && b == 4, "a (prefetch 2) got %d, b got %d (%s)", a,
                  b, order);
    h_close(c);
}
END_TEST

START_TEST(priority_round_robin_within)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], order[512];
    amqp_table_entry_t one = h_entry_int("x-priority", 1);
    int a = 0, b = 0;

    h_name(name, sizeof(name), "prio-rr");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    consume_with(c, 1, q, "low", true, amqp_empty_table);
    consume_with(c, 1, q, "a", true, h_table(&one, 1));
    consume_with(c, 1, q, "b", true, h_table(&one, 1));
    PUBLISH_N(c, 1, q, "m", 0, 6);
    collect(c, 6, &a, &b, order, sizeof(order));
    ck_assert_msg(a == 3 && b == 3, "two consumers of priority 1 got %d and "
                  "%d; priority 0 the rest (%s)", a, b, order);
    h_close(c);
}
END_TEST

START_TEST(priority_not_an_integer_406)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[512];
    amqp_table_entry_t bad = h_entry_str("x-priority", "high");

    h_name(name, sizeof(name), "prio-bad");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    amqp_basic_consume(c, 1, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 1, 0,
                       h_table(&bad, 1));
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - invalid arg 'x-priority' for queue '%s' "
             "in vhost '/': \"expected integer, got longstr\"", q);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
}
END_TEST

START_TEST(capability_announced)
{
    amqp_connection_state_t c = h_connect(H);
    const amqp_table_t *props = amqp_get_server_properties(c);
    bool found = false;

    for (int i = 0; i < props->num_entries; i++) {
        const amqp_table_entry_t *e = &props->entries[i];
        if (strncmp(e->key.bytes, "capabilities", e->key.len) != 0 ||
            e->value.kind != AMQP_FIELD_KIND_TABLE)
            continue;
        const amqp_table_t *caps = &e->value.value.table;
        for (int j = 0; j < caps->num_entries; j++) {
            const amqp_table_entry_t *k = &caps->entries[j];
            if (k->key.len == strlen("consumer_priorities") &&
                memcmp(k->key.bytes, "consumer_priorities", k->key.len) == 0)
                found = k->value.kind == AMQP_FIELD_KIND_BOOLEAN &&
                        k->value.value.boolean;
        }
    }
    ck_assert_msg(found, "capabilities lack consumer_priorities = true");
    h_close(c);
}
END_TEST

/* ---- single active consumer ---- */

static void
declare_sac(amqp_connection_state_t c, const char *base, char *q)
{
    char name[64];
    amqp_table_entry_t sac = bool_entry("x-single-active-consumer", true);
    h_name(name, sizeof(name), base);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, false, true,
                       h_table(&sac, 1), q, NULL, NULL);
}

START_TEST(sac_one_consumer_then_the_next)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], order[512];
    amqp_table_entry_t hi = h_entry_int("x-priority", 9);
    int a = 0, b = 0;

    declare_sac(c, "sac", q);
    consume_with(c, 1, q, "a", true, amqp_empty_table);
    /* A later consumer waits, whatever its priority (RabbitMQ 3.10's
     * classic queues take them in order of arrival). */
    consume_with(c, 1, q, "b", true, h_table(&hi, 1));
    PUBLISH_N(c, 1, q, "m", 0, 4);
    collect(c, 4, &a, &b, order, sizeof(order));
    ck_assert_msg(a == 4 && b == 0, "active got %d, waiting got %d (%s)", a, b,
                  order);
    amqp_basic_cancel(c, 1, amqp_cstring_bytes("a"));
    EXPECT_OK(c, "basic.cancel");
    PUBLISH_N(c, 1, q, "n", 0, 3);
    a = b = 0;
    collect(c, 3, &a, &b, order, sizeof(order));
    ck_assert_msg(a == 0 && b == 3, "after the cancel: a %d, b %d (%s)", a, b,
                  order);
    h_close(c);
}
END_TEST

START_TEST(sac_takeover_on_connection_death_keeps_order)
{
    amqp_connection_state_t c1 = h_connect(H), c2 = h_connect(H);
    char q[256], order[512];
    int a = 0, b = 0;

    declare_sac(c1, "sac-death", q);
    qos(c1, 1, 10);
    consume_with(c1, 1, q, "a", false, amqp_empty_table);
    SYNC(c1, 1, NULL, 0);
    consume_with(c2, 1, q, "b", false, amqp_empty_table);
    PUBLISH_N(c2, 1, q, "m", 0, 4);
    collect(c1, 4, &a, &b, order, sizeof(order));
    ck_assert_msg(a == 4, "the active consumer got %d of 4 (%s)", a, order);
    /* It dies with all four unacked: the next consumer gets them, in
     * their order, redelivered. */
    amqp_destroy_connection(c1);
    a = b = 0;
    collect(c2, 4, &a, &b, order, sizeof(order));
    ck_assert_str_eq(order, "b:m0,b:m1,b:m2,b:m3");
    h_close(c2);
}
END_TEST

/* The active consumer cancelled while it holds an unacked delivery and
 * the queue holds more: the next one gets them at once, as in RabbitMQ,
 * not at the next publish or ack. */
START_TEST(sac_cancel_hands_over_at_once)
{
    amqp_connection_state_t c1 = h_connect(H), c2 = h_connect(H);
    char q[256], order[512];
    int a = 0, b = 0;

    declare_sac(c1, "sac-cancel", q);
    qos(c1, 1, 1);
    consume_with(c1, 1, q, "a", false, amqp_empty_table);
    SYNC(c1, 1, NULL, 0);
    consume_with(c2, 1, q, "b", false, amqp_empty_table);
    PUBLISH_N(c2, 1, q, "m", 0, 4);
    collect(c1, 1, &a, &b, order, sizeof(order));
    ck_assert_str_eq(order, "a:m0");
    amqp_basic_cancel(c1, 1, amqp_cstring_bytes("a"));
    EXPECT_OK(c1, "basic.cancel");
    a = b = 0;
    collect(c2, 3, &a, &b, order, sizeof(order));
    ck_assert_str_eq(order, "b:m1,b:m2,b:m3");
    h_close(c1);
    h_close(c2);
}
END_TEST

START_TEST(sac_not_a_bool_406)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], want[512];
    amqp_table_entry_t bad = h_entry_str("x-single-active-consumer", "yes");

    h_name(name, sizeof(name), "sac-bad");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 1,
                       h_table(&bad, 1));
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - invalid arg 'x-single-active-consumer' "
             "for queue '%s' in vhost '/': {unacceptable_type,longstr}",
             name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
}
END_TEST

START_TEST(sac_compared_on_redeclare)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], want[512];
    amqp_table_entry_t off = bool_entry("x-single-active-consumer", false);

    declare_sac(c, "sac-equiv", q);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 0, 0, 0, 1,
                       h_table(&off, 1));
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - inequivalent arg "
             "'x-single-active-consumer' for queue '%s' in vhost '/': "
             "received 'false' but current is 'true'", q);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
}
END_TEST

/* ---- direct reply-to ---- */

START_TEST(reply_to_refusals)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_basic_properties_t p = { 0 };

    /* A request naming the pseudo-queue needs a reply consumer first. */
    p._flags = AMQP_BASIC_REPLY_TO_FLAG;
    p.reply_to = amqp_cstring_bytes("amq.rabbitmq.reply-to");
    h_publish_at(__FILE__, __LINE__, c, 1, "", "nowhere", "q", 1, false, &p);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 1, 406, "PRECONDITION_FAILED - fast reply "
                               "consumer does not exist");
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
    amqp_basic_consume(c, 1, amqp_cstring_bytes("amq.rabbitmq.reply-to"),
                       amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, "PRECONDITION_FAILED - reply consumer "
                         "cannot acknowledge");
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
    consume_with(c, 1, "amq.rabbitmq.reply-to", "r", true, amqp_empty_table);
    amqp_basic_consume(c, 1, amqp_cstring_bytes("amq.rabbitmq.reply-to"),
                       amqp_cstring_bytes("r2"), 0, 1, 0, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, "PRECONDITION_FAILED - reply consumer "
                         "already set");
    h_close(c);
}
END_TEST

START_TEST(reply_to_round_trip)
{
    amqp_connection_state_t c = h_connect(H), s = h_connect(H);
    amqp_basic_properties_t p = { 0 };
    char srv[256], addr[256];
    uint32_t consumers = 0;
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, false, true, srv);
    h_queue_count_at(__FILE__, __LINE__, c, 1, "amq.rabbitmq.reply-to",
                     &consumers);
    ck_assert_uint_eq(consumers, 1);   /* as RabbitMQ answers it */
    consume_with(c, 1, "amq.rabbitmq.reply-to", "replies", true,
                 amqp_empty_table);
    p._flags = AMQP_BASIC_REPLY_TO_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG;
    p.reply_to = amqp_cstring_bytes("amq.rabbitmq.reply-to");
    p.correlation_id = amqp_cstring_bytes("c1");
    h_publish_at(__FILE__, __LINE__, c, 1, "", srv, "req", 3, false, &p);
    WAIT_COUNT(s, 1, srv, 1);
    /* The server reads the rewritten reply_to. */
    amqp_rpc_reply_t r = amqp_basic_get(s, 1, amqp_cstring_bytes(srv), 1);
    ck_assert_int_eq(r.reply_type, AMQP_RESPONSE_NORMAL);
    amqp_message_t msg;
    ck_assert_int_eq(amqp_read_message(s, 1, &msg, 0).reply_type,
                     AMQP_RESPONSE_NORMAL);
    ck_assert(msg.properties._flags & AMQP_BASIC_REPLY_TO_FLAG);
    snprintf(addr, sizeof(addr), "%.*s", (int)msg.properties.reply_to.len,
             (const char *)msg.properties.reply_to.bytes);
    amqp_destroy_message(&msg);
    ck_assert_msg(strncmp(addr, "amq.rabbitmq.reply-to.", 22) == 0 &&
                      strlen(addr) > 22, "reply_to is '%s'", addr);
    /* The reply, and a mandatory one: both delivered, the mandatory one
     * also returned (RabbitMQ's rule). */
    amqp_basic_properties_t rp = { 0 };
    rp._flags = AMQP_BASIC_CORRELATION_ID_FLAG;
    rp.correlation_id = amqp_cstring_bytes("c1");
    h_publish_at(__FILE__, __LINE__, s, 1, "", addr, "resp", 4, false, &rp);
    h_publish_at(__FILE__, __LINE__, s, 1, "", addr, "resp2", 5, true, &rp);
    EXPECT_DELIVERY(c, "resp", &e);
    ck_assert_str_eq(e.ctag, "replies");
    ck_assert_str_eq(e.correlation_id, "c1");
    h_event_free(&e);
    EXPECT_DELIVERY(c, "resp2", &e);
    h_event_free(&e);
    EXPECT_METHOD(s, AMQP_BASIC_RETURN_METHOD, &e);
    ck_assert_int_eq(e.code, 312);
    h_event_free(&e);
    /* The requester gone: the reply is dropped, the server unharmed. */
    h_close(c);
    h_publish_at(__FILE__, __LINE__, s, 1, "", addr, "late", 4, false, &rp);
    SYNC(s, 1, NULL, 0);
    h_close(s);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("consumers");
    TCase *tc;

    tc = h_tcase(s, "priorities", 20, true);
    tcase_add_test(tc, priority_served_first);
    tcase_add_test(tc, priority_blocked_lets_lower_have_it);
    tcase_add_test(tc, priority_round_robin_within);
    tcase_add_test(tc, priority_not_an_integer_406);
    tcase_add_test(tc, capability_announced);

    tc = h_tcase(s, "single active consumer", 20, true);
    tcase_add_test(tc, sac_one_consumer_then_the_next);
    tcase_add_test(tc, sac_takeover_on_connection_death_keeps_order);
    tcase_add_test(tc, sac_cancel_hands_over_at_once);
    tcase_add_test(tc, sac_not_a_bool_406);
    tcase_add_test(tc, sac_compared_on_redeclare);

    tc = h_tcase(s, "direct reply-to", 20, true);
    tcase_add_test(tc, reply_to_refusals);
    tcase_add_test(tc, reply_to_round_trip);

    return h_run(s);
}
