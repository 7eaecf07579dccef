/*
 * SPDX-License-Identifier: Apache-2.0
 * Queues against a real roostd: server-generated names, the reserved
 * prefix, passive declare, the durable and auto-delete flags and their
 * equivalence, exclusive queues (locked for other connections, deleted
 * with their owner), auto-delete queues (deleted with their last
 * consumer), declare-ok counts, queue arguments, bind and unbind, purge,
 * delete with if-unused and if-empty, and the nowait variants.
 */
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

static const char *const locked_text =
    "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '";

static void
reopen(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_channel_open(c, ch);
    EXPECT_OK(c, "channel.open");
}

/* Whether queue 'q' exists (a passive declare; reopens the channel). */
static bool
queue_exists(amqp_connection_state_t c, const char *q)
{
    amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 1, 0, 0, 0,
                       amqp_empty_table);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(c);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return true;
    /* 405: it exists, as another connection's exclusive queue. */
    bool locked = r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
                  r.reply.id == AMQP_CHANNEL_CLOSE_METHOD &&
                  ((amqp_channel_close_t *)r.reply.decoded)->reply_code == 405;
    h_expect_channel_close_at(__FILE__, __LINE__, c, r, 1, locked ? 405 : 404,
                              locked ? "RESOURCE_LOCKED - "
                                     : "NOT_FOUND - no queue '");
    reopen(c, 1);
    return locked;
}

/* Poll until 'q' is gone (its owner's teardown may be asynchronous). */
static bool
queue_gone_within(amqp_connection_state_t c, const char *q, unsigned ms)
{
    uint64_t deadline = h_now_ms() + ms;
    while (queue_exists(c, q)) {
        if (h_now_ms() > deadline)
            return false;
        h_sleep_ms(5);
    }
    return true;
}

static void
delete_queue(amqp_connection_state_t c, const char *q)
{
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(c, "queue.delete");
}

/* ---- declare ---- */

START_TEST(server_named)
{
    amqp_connection_state_t c = h_connect(H);
    char q1[256], q2[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q1);
    DECLARE_QUEUE(c, 1, "", false, true, false, q2);
    ck_assert_msg(strncmp(q1, "amq.gen-", 8) == 0, "server-named queue '%s'",
                  q1);
    ck_assert_uint_eq(strlen(q1), 8 + 22);
    for (const char *p = q1 + 8; *p; p++)
        ck_assert_msg(isalnum((unsigned char)*p) || *p == '-' || *p == '_',
                      "character '%c' in '%s'", *p, q1);
    ck_assert_str_ne(q1, q2);
    ck_assert_msg(queue_exists(c, q1), "'%s' does not exist", q1);
    h_close(c);
}
END_TEST

START_TEST(reserved_prefix)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_queue_declare(c, 1, amqp_cstring_bytes("amq.roost-test"), 0, 0, 0, 1,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 403,
                         "ACCESS_REFUSED - queue name 'amq.roost-test' "
                         "contains reserved prefix 'amq.*'");
    h_close(c);
}
END_TEST

START_TEST(passive)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], name[64];
    uint32_t consumers;

    h_name(name, sizeof(name), "passive");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 1, 0, 0, 0,
                       amqp_empty_table);
    char want[256];
    snprintf(want, sizeof(want), "NOT_FOUND - no queue '%s' in vhost '/'",
             name);
    EXPECT_CHANNEL_CLOSE(c, 1, 404, want);
    reopen(c, 1);
    DECLARE_QUEUE(c, 1, name, false, true, false, q);
    ck_assert_str_eq(q, name);
    PUBLISH(c, 1, "", q, "one");
    WAIT_COUNT(c, 1, q, 1);
    ck_assert_uint_eq(h_queue_count_at(__FILE__, __LINE__, c, 1, q, &consumers),
                      1);
    ck_assert_uint_eq(consumers, 0);
    h_close(c);
}
END_TEST

START_TEST(declare_ok_counts)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], name[64];
    uint32_t messages, consumers;

    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "counts"), false, true,
                  false, q);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       amqp_empty_table, NULL, &messages, &consumers);
    ck_assert_uint_eq(messages, 0);
    ck_assert_uint_eq(consumers, 0);
    PUBLISH(c, 1, "", q, "1");
    PUBLISH(c, 1, "", q, "2");
    PUBLISH(c, 1, "", q, "3");
    WAIT_COUNT(c, 1, q, 3);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       amqp_empty_table, NULL, &messages, &consumers);
    ck_assert_uint_eq(messages, 3);
    /* (a server-named queue cannot be redeclared by name: amq.*) */
    messages = h_queue_count_at(__FILE__, __LINE__, c, 1, q, &consumers);
    ck_assert_uint_eq(messages, 3);
    ck_assert_uint_eq(consumers, 0);
    /* A consumer with prefetch 1 holds one unacked message: ready
     * messages and consumers are counted. */
    reopen(c, 2);
    amqp_basic_qos(c, 2, 0, 1, 0);
    EXPECT_OK(c, "basic.qos");
    CONSUME(c, 2, q, "c", false, NULL);
    EXPECT_DELIVERY(c, "1", NULL);
    WAIT_COUNT(c, 1, q, 2);
    messages = h_queue_count_at(__FILE__, __LINE__, c, 1, q, &consumers);
    ck_assert_uint_eq(messages, 2);
    ck_assert_uint_eq(consumers, 1);
    h_close(c);
}
END_TEST

START_TEST(durable_recorded_and_compared)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[512];

    h_name(name, sizeof(name), "durable");
    DECLARE_QUEUE(c, 1, name, true, false, false, q);
    DECLARE_QUEUE(c, 1, name, true, false, false, q);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 0,
                       amqp_empty_table);
    snprintf(
        want, sizeof(want),
        "PRECONDITION_FAILED - inequivalent arg 'durable' "
        "for queue '%s' in vhost '/': received 'false' but current is 'true'",
        name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    delete_queue(c, name);
    h_close(c);
}
END_TEST

START_TEST(auto_delete_compared)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[512];

    h_name(name, sizeof(name), "adcmp");
    DECLARE_QUEUE(c, 1, name, false, false, false, q);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 1,
                       amqp_empty_table);
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - inequivalent arg "
             "'auto_delete' for queue '%s' in vhost '/': received 'true' but "
             "current is 'false'",
             name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    delete_queue(c, name);
    h_close(c);
}
END_TEST

START_TEST(declare_nowait)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_queue_declare_t d;
    char name[64];

    memset(&d, 0, sizeof(d));
    d.queue = amqp_cstring_bytes(h_name(name, sizeof(name), "nowait"));
    d.exclusive = 1;
    d.nowait = 1;
    d.arguments = amqp_empty_table;
    SEND(c, 1, AMQP_QUEUE_DECLARE_METHOD, &d);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0); /* no declare-ok */
    ck_assert_msg(queue_exists(c, name), "nowait declare did not declare");
    h_close(c);
}
END_TEST

/* ---- arguments ---- */

START_TEST(args_other_than_x_not_compared)
{
    /* docs/compatibility.md: only implemented arguments are compared. */
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256];
    amqp_table_entry_t a[] = { h_entry_str("colour", "red") };
    amqp_table_entry_t b[] = { h_entry_str("colour", "blue") };

    h_name(name, sizeof(name), "args");
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       h_table(a, 1), q, NULL, NULL);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       h_table(b, 1), q, NULL, NULL);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       amqp_empty_table, q, NULL, NULL);
    h_close(c);
}
END_TEST

START_TEST(args_classic_queue_type_accepted)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_table_entry_t a[] = { h_entry_str("x-queue-type", "classic") };

    h_declare_queue_at(__FILE__, __LINE__, c, 1, "", false, true, false,
                       h_table(a, 1), q, NULL, NULL);
    h_close(c);
}
END_TEST

START_TEST(args_queue_mode)
{
    /* x-queue-mode: lazy and default accepted, anything else refused with
     * RabbitMQ 3.10's texts (checked against it). */
    amqp_connection_state_t c = h_connect(H);
    char q[256], name[64], want[512];
    amqp_table_entry_t a[] = { h_entry_str("x-queue-mode", "lazy") };
    amqp_table_entry_t d[] = { h_entry_str("x-queue-mode", "default") };
    amqp_table_entry_t bad[] = { h_entry_str("x-queue-mode", "foo") };
    amqp_table_entry_t num;

    h_declare_queue_at(__FILE__, __LINE__, c, 1, "", false, true, false,
                       h_table(a, 1), q, NULL, NULL);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, "", false, true, false,
                       h_table(d, 1), q, NULL, NULL);
    h_name(name, sizeof(name), "qmode");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 1, 0,
                       h_table(bad, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - invalid arg "
             "'x-queue-mode' for queue '%s' in vhost '/': \"unsupported "
             "queue mode 'foo'\"", name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    num.key = amqp_cstring_bytes("x-queue-mode");
    num.value.kind = AMQP_FIELD_KIND_I32;
    num.value.value.i32 = 5;
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open");
    amqp_queue_declare(c, 2, amqp_cstring_bytes(name), 0, 0, 1, 0,
                       h_table(&num, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - invalid arg "
             "'x-queue-mode' for queue '%s' in vhost '/': "
             "{unacceptable_type,signedint}", name);
    EXPECT_CHANNEL_CLOSE(c, 2, 406, want);
    h_close(c);
}
END_TEST

/* x-queue-version 1 and 2 and x-queue-master-locator accepted and
 * compared on redeclare; other values refused with RabbitMQ 3.10's texts
 * (a bad locator crashes RabbitMQ's channel: 541, so that case runs on
 * Roost only). */
START_TEST(args_queue_version_and_locator)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[512];
    amqp_table_entry_t v1, v2 = { 0 }, v3, loc = h_entry_str(
        "x-queue-master-locator", "client-local");
    amqp_table_entry_t vs = h_entry_str("x-queue-version", "2");

    v1.key = v3.key = amqp_cstring_bytes("x-queue-version");
    v1.value.kind = v3.value.kind = AMQP_FIELD_KIND_I32;
    v1.value.value.i32 = 1;
    v3.value.value.i32 = 3;
    v2 = v1;
    v2.value.value.i32 = 2;
    h_name(name, sizeof(name), "qver");
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, false, true,
                       h_table(&v1, 1), q, NULL, NULL);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 1,
                       h_table(&v2, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - inequivalent arg "
             "'x-queue-version' for queue '%s' in vhost '/': received '2' "
             "but current is '1'", name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    delete_queue(c, name);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 1,
                       h_table(&v3, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - invalid arg "
             "'x-queue-version' for queue '%s' in vhost '/': \"unsupported "
             "queue version '3'\"", name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 1,
                       h_table(&vs, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - invalid arg "
             "'x-queue-version' for queue '%s' in vhost '/': \"expected "
             "integer, got longstr\"", name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, false, true,
                       h_table(&loc, 1), q, NULL, NULL);
    delete_queue(c, name);
    if (!harness_is_remote()) {
        amqp_table_entry_t bad = h_entry_str("x-queue-master-locator", "x");
        amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 1,
                           h_table(&bad, 1));
        snprintf(want, sizeof(want), "PRECONDITION_FAILED - invalid arg "
                 "'x-queue-master-locator' for queue '%s' in vhost '/': "
                 "\"unsupported queue master locator 'x'\"", name);
        EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    }
    h_close(c);
}
END_TEST

static void
expect_arg_540(amqp_table_entry_t arg, const char *text)
{
    amqp_connection_state_t c;
    char name[64];

    SKIP_IF_REMOTE("documented difference: RabbitMQ implements these");
    c = h_connect(H);
    amqp_queue_declare(c, 1,
                       amqp_cstring_bytes(h_name(name, sizeof(name), "xarg")),
                       0, 0, 1, 0, h_table(&arg, 1));
    EXPECT_CONN_CLOSE(c, 540, text);
}

START_TEST(args_unimplemented_540)
{
    /* docs/compatibility.md: refused rather than silently ignored. */
    expect_arg_540(h_entry_int("x-no-such-argument", 10),
                   "NOT_IMPLEMENTED - queue argument 'x-no-such-argument' is "
                   "not implemented");
}
END_TEST

START_TEST(args_implemented_compared_406)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[512];
    amqp_table_entry_t a, b;

    a.key = b.key = amqp_cstring_bytes("x-message-ttl");
    a.value.kind = b.value.kind = AMQP_FIELD_KIND_I32;
    a.value.value.i32 = 1000;
    b.value.value.i32 = 2000;
    h_name(name, sizeof(name), "ttl");
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       h_table(&a, 1), q, NULL, NULL);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       h_table(&a, 1), q, NULL, NULL);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 1, 0,
                       h_table(&b, 1));
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - inequivalent arg "
             "'x-message-ttl' for queue '%s' in vhost '/': received '2000' but "
             "current is '1000'",
             name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    /* Leaving it out is a difference too. */
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 1, 0,
                       amqp_empty_table);
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - inequivalent arg "
             "'x-message-ttl' for queue '%s' in vhost '/': received none but "
             "current is the value '1000' of type 'signedint'",
             name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
}
END_TEST

START_TEST(args_compared_by_value)
{
    /* RabbitMQ compares integer arguments by value: 1000 as an int64 is
     * the 1000 the queue was declared with as an int32. */
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256];
    amqp_table_entry_t a, b;

    a.key = b.key = amqp_cstring_bytes("x-message-ttl");
    a.value.kind = AMQP_FIELD_KIND_I32;
    a.value.value.i32 = 1000;
    b.value.kind = AMQP_FIELD_KIND_I64;
    b.value.value.i64 = 1000;
    h_name(name, sizeof(name), "ttlv");
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       h_table(&a, 1), q, NULL, NULL);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, true, false,
                       h_table(&b, 1), q, NULL, NULL);
    h_close(c);
}
END_TEST

/* Quorum queues on one node, with RabbitMQ 3.10's rules and texts. */
static void
expect_quorum_refused(amqp_connection_state_t c, bool durable, bool excl,
                      bool ad, amqp_table_entry_t *extra, const char *why)
{
    char name[64], want[512];
    amqp_table_entry_t a[2] = { h_entry_str("x-queue-type", "quorum") };
    int n = 1;

    if (extra)
        a[n++] = *extra;
    h_name(name, sizeof(name), "qq");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, durable, excl, ad,
                       h_table(a, n));
    snprintf(want, sizeof(want), why, name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
}

START_TEST(args_quorum_rules)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[512];
    amqp_table_entry_t qt = h_entry_str("x-queue-type", "quorum");
    amqp_table_entry_t mode = h_entry_str("x-queue-mode", "lazy");
    amqp_table_entry_t strat = h_entry_str("x-dead-letter-strategy", "x");
    amqp_table_entry_t prio;

    prio.key = amqp_cstring_bytes("x-max-priority");
    prio.value.kind = AMQP_FIELD_KIND_I32;
    prio.value.value.i32 = 5;
    expect_quorum_refused(c, false, false, false, NULL,
                          "PRECONDITION_FAILED - invalid property "
                          "'non-durable' for queue '%s' in vhost '/'");
    expect_quorum_refused(c, true, true, false, NULL,
                          "PRECONDITION_FAILED - invalid property "
                          "'exclusive-owner' for queue '%s' in vhost '/'");
    expect_quorum_refused(c, true, false, true, NULL,
                          "PRECONDITION_FAILED - invalid property "
                          "'auto-delete' for queue '%s' in vhost '/'");
    expect_quorum_refused(c, true, false, false, &mode,
                          "PRECONDITION_FAILED - invalid arg 'x-queue-mode' "
                          "for queue '%s' in vhost '/' of queue type "
                          "rabbit_quorum_queue");
    expect_quorum_refused(c, true, false, false, &prio,
                          "PRECONDITION_FAILED - invalid arg "
                          "'x-max-priority' for queue '%s' in vhost '/' of "
                          "queue type rabbit_quorum_queue");
    expect_quorum_refused(c, true, false, false, &strat,
                          "PRECONDITION_FAILED - invalid arg "
                          "'x-dead-letter-strategy' for queue '%s' in vhost "
                          "'/': invalid_dlx_strategy");
    /* Accepted, and its type compared on redeclare (none is classic). */
    h_name(name, sizeof(name), "qq");
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, true, false, false,
                       h_table(&qt, 1), q, NULL, NULL);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 1, 0, 0,
                       amqp_empty_table);
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - inequivalent arg "
             "'x-queue-type' for queue '%s' in vhost '/': received none but "
             "current is the value 'quorum' of type 'longstr'", name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    delete_queue(c, name);
    /* An unknown type is RabbitMQ's 406; stream is RabbitMQ's but not
     * Roost's (540, docs/compatibility.md). */
    amqp_table_entry_t bogus = h_entry_str("x-queue-type", "bogus");
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 1, 0, 0,
                       h_table(&bogus, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - invalid arg "
             "'x-queue-type' for queue '%s' in vhost '/': \"unsupported "
             "queue type 'bogus'\"", name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
    if (!harness_is_remote())
        expect_arg_540(h_entry_str("x-queue-type", "stream"),
                       "NOT_IMPLEMENTED - queue type 'stream' is not "
                       "implemented");
}
END_TEST

/* ---- exclusive ---- */

START_TEST(exclusive_locked_for_others)
{
    amqp_connection_state_t owner = h_connect(H), other = h_connect(H);
    char name[64], q[256];
    struct h_event e;

    h_name(name, sizeof(name), "excl");
    DECLARE_QUEUE(owner, 1, name, false, true, false, q);
    PUBLISH(owner, 1, "", q, "mine");

    amqp_queue_declare(other, 1, amqp_cstring_bytes(name), 0, 0, 1, 0,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(other, 1, 405, locked_text);
    reopen(other, 1);
    amqp_queue_declare(other, 1, amqp_cstring_bytes(name), 0, 0, 0, 0,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(other, 1, 405, locked_text);
    reopen(other, 1);
    amqp_queue_declare(other, 1, amqp_cstring_bytes(name), 1, 0, 0, 0,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(other, 1, 405, locked_text);
    reopen(other, 1);
    amqp_basic_consume(other, 1, amqp_cstring_bytes(name), amqp_empty_bytes, 0,
                       1, 0, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(other, 1, 405, locked_text);
    reopen(other, 1);
    amqp_rpc_reply_t r = amqp_basic_get(other, 1, amqp_cstring_bytes(name), 1);
    h_expect_channel_close_at(__FILE__, __LINE__, other, r, 1, 405,
                              locked_text);
    reopen(other, 1);
    amqp_queue_purge(other, 1, amqp_cstring_bytes(name));
    EXPECT_CHANNEL_CLOSE(other, 1, 405, locked_text);
    reopen(other, 1);
    amqp_queue_bind(other, 1, amqp_cstring_bytes(name),
                    amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("k"),
                    amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(other, 1, 405, locked_text);
    reopen(other, 1);
    amqp_queue_delete(other, 1, amqp_cstring_bytes(name), 0, 0);
    EXPECT_CHANNEL_CLOSE(other, 1, 405, locked_text);

    /* The owner still has it all. */
    ck_assert_int_eq(GET(owner, 1, q, true, &e), 1);
    ck_assert_str_eq(e.body, "mine");
    h_event_free(&e);
    h_close(other);
    h_close(owner);
}
END_TEST

START_TEST(exclusive_redeclare_by_owner)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256];

    h_name(name, sizeof(name), "exclre");
    DECLARE_QUEUE(c, 1, name, false, true, false, q);
    reopen(c, 2);
    /* another channel of the same connection */
    DECLARE_QUEUE(c, 2, name, false, true, false, q);
    h_close(c);
}
END_TEST

START_TEST(exclusive_deleted_with_connection)
{
    amqp_connection_state_t owner = h_connect(H), other = h_connect(H);
    char q[256], q2[256];

    DECLARE_QUEUE(owner, 1, "", false, true, false, q);
    DECLARE_QUEUE(owner, 1, "", false, true, false, q2);
    h_close(owner);
    ck_assert_msg(queue_gone_within(other, q, 5000),
                  "exclusive queue survives its connection's close");
    ck_assert_msg(queue_gone_within(other, q2, 5000),
                  "exclusive queue survives its connection's close");
    /* and when the socket just drops */
    owner = h_connect(H);
    DECLARE_QUEUE(owner, 1, "", false, true, false, q);
    h_drop(owner);
    ck_assert_msg(queue_gone_within(other, q, 5000),
                  "exclusive queue survives its connection's socket");
    h_close(other);
}
END_TEST

START_TEST(exclusive_on_shared_queue_405)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256];

    h_name(name, sizeof(name), "shared");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 1, 1,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 405, locked_text);
    reopen(c, 1);
    delete_queue(c, name);
    h_close(c);
}
END_TEST

/* ---- auto-delete ---- */

START_TEST(auto_delete_with_last_consumer)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], t1[256], t2[256];

    h_name(name, sizeof(name), "ad");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    ck_assert_msg(queue_exists(c, q), "deleted before it had a consumer");
    reopen(c, 2);
    CONSUME(c, 2, q, "", true, t1);
    CONSUME(c, 2, q, "", true, t2);
    amqp_basic_cancel(c, 2, amqp_cstring_bytes(t1));
    EXPECT_OK(c, "basic.cancel");
    ck_assert_msg(queue_exists(c, q), "deleted while a consumer is left");
    amqp_basic_cancel(c, 2, amqp_cstring_bytes(t2));
    EXPECT_OK(c, "basic.cancel");
    ck_assert_msg(queue_gone_within(c, q, 5000),
                  "not deleted after its last consumer");
    h_close(c);
}
END_TEST

START_TEST(auto_delete_when_consumer_channel_closes)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256];

    h_name(name, sizeof(name), "adch");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    reopen(c, 2);
    CONSUME(c, 2, q, "", true, NULL);
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 2, AMQP_REPLY_SUCCESS),
                   "channel.close");
    ck_assert_msg(queue_gone_within(c, q, 5000),
                  "not deleted when its consumer's channel closed");
    h_close(c);
}
END_TEST

START_TEST(auto_delete_when_consumer_connection_drops)
{
    amqp_connection_state_t c = h_connect(H), other = h_connect(H);
    char name[64], q[256];

    h_name(name, sizeof(name), "adconn");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    CONSUME(other, 1, q, "", false, NULL);
    h_drop(other);
    ck_assert_msg(queue_gone_within(c, q, 5000),
                  "not deleted when its consumer's connection dropped");
    h_close(c);
}
END_TEST

/* ---- bind and unbind ---- */

START_TEST(bind_errors)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    amqp_queue_bind(c, 1, amqp_cstring_bytes(q),
                    amqp_cstring_bytes("no-such-exchange-for-roost"),
                    amqp_cstring_bytes("k"), amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 404,
                         "NOT_FOUND - no exchange "
                         "'no-such-exchange-for-roost' in vhost '/'");
    reopen(c, 1);
    amqp_queue_bind(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"),
                    amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("k"),
                    amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 404,
                         "NOT_FOUND - no queue 'no-such-queue-for-roost' "
                         "in vhost '/'");
    reopen(c, 1);
    /* Unbinding what was never bound is fine. */
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q),
                      amqp_cstring_bytes("amq.direct"),
                      amqp_cstring_bytes("never"), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind of a missing binding");
    h_close(c);
}
END_TEST

START_TEST(bind_empty_queue_name_means_last_declared)
{
    /* 0-9-1: an empty queue name is the channel's last declared queue. */
    amqp_connection_state_t c = h_connect(H);
    char q[256], key[64];
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    h_name(key, sizeof(key), "last");
    BIND(c, 1, "", "amq.direct", key);
    PUBLISH(c, 1, "amq.direct", key, "via-last");
    WAIT_COUNT(c, 1, q, 1);
    ck_assert_int_eq(GET(c, 1, "", true, &e), 1);
    ck_assert_str_eq(e.body, "via-last");
    h_event_free(&e);
    h_close(c);
}
END_TEST

START_TEST(bind_nowait_and_unbind)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], key[64];
    amqp_queue_bind_t b;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    memset(&b, 0, sizeof(b));
    b.queue = amqp_cstring_bytes(q);
    b.exchange = amqp_cstring_bytes("amq.direct");
    b.routing_key = amqp_cstring_bytes(h_name(key, sizeof(key), "nw"));
    b.nowait = 1;
    b.arguments = amqp_empty_table;
    SEND(c, 1, AMQP_QUEUE_BIND_METHOD, &b);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    PUBLISH(c, 1, "amq.direct", key, "bound");
    WAIT_COUNT(c, 1, q, 1);
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q),
                      amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes(key),
                      amqp_empty_table);
    EXPECT_OK(c, "queue.unbind");
    PUBLISH(c, 1, "amq.direct", key, "unbound");
    PUBLISH(c, 1, "", q, "direct");
    WAIT_COUNT(c, 1, q, 2);
    h_close(c);
}
END_TEST

START_TEST(bind_arguments_distinguish_bindings)
{
    /* The same queue, exchange and key with other arguments is another
     * binding; unbind removes only the one with equal arguments. */
    amqp_connection_state_t c = h_connect(H);
    char q[256], key[64];
    amqp_table_entry_t a[] = { h_entry_str("a", "1") };
    amqp_table_entry_t b[] = { h_entry_str("a", "2") };

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    h_name(key, sizeof(key), "args");
    h_bind_at(__FILE__, __LINE__, c, 1, q, "amq.direct", key, h_table(a, 1));
    h_bind_at(__FILE__, __LINE__, c, 1, q, "amq.direct", key, h_table(b, 1));
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q),
                      amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes(key),
                      h_table(a, 1));
    EXPECT_OK(c, "queue.unbind");
    PUBLISH(c, 1, "amq.direct", key, "still-bound");
    WAIT_COUNT(c, 1, q, 1);
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q),
                      amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes(key),
                      h_table(b, 1));
    EXPECT_OK(c, "queue.unbind");
    PUBLISH(c, 1, "amq.direct", key, "unbound");
    PUBLISH(c, 1, "", q, "marker");
    WAIT_COUNT(c, 1, q, 2);
    static const char *const want[] = { "still-bound", "marker" };
    for (int i = 0; i < 2; i++) {
        struct h_event e;
        ck_assert_int_eq(GET(c, 1, q, true, &e), 1);
        ck_assert_str_eq(e.body, want[i]);
        h_event_free(&e);
    }
    h_close(c);
}
END_TEST

/* ---- purge ---- */

START_TEST(purge_counts_ready_messages)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_queue_purge_ok_t *ok;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    for (int i = 0; i < 3; i++)
        PUBLISH(c, 1, "", q, "m");
    WAIT_COUNT(c, 1, q, 3);
    /* One message out to a consumer, unacked: purge leaves it. */
    reopen(c, 2);
    amqp_basic_qos(c, 2, 0, 1, 0);
    EXPECT_OK(c, "basic.qos");
    CONSUME(c, 2, q, "c", false, NULL);
    EXPECT_DELIVERY(c, "m", NULL);
    WAIT_COUNT(c, 1, q, 2);
    ok = amqp_queue_purge(c, 1, amqp_cstring_bytes(q));
    EXPECT_OK(c, "queue.purge");
    ck_assert_uint_eq(ok->message_count, 2);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    /* Closing the consumer's channel brings the unacked one back. */
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 2, AMQP_REPLY_SUCCESS),
                   "channel.close");
    WAIT_COUNT(c, 1, q, 1);
    ok = amqp_queue_purge(c, 1, amqp_cstring_bytes(q));
    EXPECT_OK(c, "queue.purge");
    ck_assert_uint_eq(ok->message_count, 1);
    h_close(c);
}
END_TEST

START_TEST(purge_nowait_and_missing)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_queue_purge_t p;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH(c, 1, "", q, "m");
    WAIT_COUNT(c, 1, q, 1);
    memset(&p, 0, sizeof(p));
    p.queue = amqp_cstring_bytes(q);
    p.nowait = 1;
    SEND(c, 1, AMQP_QUEUE_PURGE_METHOD, &p);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    WAIT_COUNT(c, 1, q, 0);
    amqp_queue_purge(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"));
    EXPECT_CHANNEL_CLOSE(c, 1, 404,
                         "NOT_FOUND - no queue 'no-such-queue-for-roost' "
                         "in vhost '/'");
    h_close(c);
}
END_TEST

/* ---- delete ---- */

START_TEST(delete_returns_count_and_unbinds)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], key[64];
    amqp_queue_delete_ok_t *ok;

    h_name(name, sizeof(name), "del");
    h_name(key, sizeof(key), "delkey");
    DECLARE_QUEUE(c, 1, name, false, false, false, q);
    BIND(c, 1, q, "amq.direct", key);
    PUBLISH(c, 1, "", q, "1");
    PUBLISH(c, 1, "", q, "2");
    WAIT_COUNT(c, 1, q, 2);
    ok = amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(c, "queue.delete");
    ck_assert_uint_eq(ok->message_count, 2);
    ck_assert_msg(!queue_exists(c, q), "queue still there");
    /* A queue of the same name starts empty and unbound. */
    DECLARE_QUEUE(c, 1, name, false, false, false, q);
    PUBLISH(c, 1, "amq.direct", key, "x");
    PUBLISH(c, 1, "", q, "y");
    WAIT_COUNT(c, 1, q, 1);
    delete_queue(c, q);
    h_close(c);
}
END_TEST

START_TEST(delete_if_unused_406)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[256];

    h_name(name, sizeof(name), "ifunused");
    DECLARE_QUEUE(c, 1, name, false, true, false, q);
    reopen(c, 2);
    CONSUME(c, 2, q, "", true, NULL);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 1, 0);
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - queue '%s' in vhost '/' in use", name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    ck_assert_msg(queue_exists(c, q), "deleted despite if-unused");
    h_close(c);
}
END_TEST

START_TEST(delete_if_empty_406)
{
    amqp_connection_state_t c = h_connect(H);
    char name[64], q[256], want[256];

    h_name(name, sizeof(name), "ifempty");
    DECLARE_QUEUE(c, 1, name, false, true, false, q);
    PUBLISH(c, 1, "", q, "m");
    WAIT_COUNT(c, 1, q, 1);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 0, 1);
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - queue '%s' in vhost '/' not "
             "empty",
             name);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 1);
    /* An empty queue goes with if-empty, an unused one with if-unused. */
    amqp_queue_purge(c, 1, amqp_cstring_bytes(q));
    EXPECT_OK(c, "queue.purge");
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 1, 1);
    EXPECT_OK(c, "queue.delete if-unused if-empty");
    h_close(c);
}
END_TEST

START_TEST(delete_missing_and_nowait)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_queue_delete_ok_t *ok;
    amqp_queue_delete_t d;

    ok = amqp_queue_delete(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"),
                           0, 0);
    EXPECT_OK(c, "queue.delete of a missing queue");
    ck_assert_uint_eq(ok->message_count, 0);
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    memset(&d, 0, sizeof(d));
    d.queue = amqp_cstring_bytes(q);
    d.nowait = 1;
    SEND(c, 1, AMQP_QUEUE_DELETE_METHOD, &d);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    ck_assert_msg(!queue_exists(c, q), "nowait delete did not delete");
    h_close(c);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("queue");
    TCase *tc;

    tc = h_tcase(s, "declare", 20, true);
    tcase_add_test(tc, server_named);
    tcase_add_test(tc, reserved_prefix);
    tcase_add_test(tc, passive);
    tcase_add_test(tc, declare_ok_counts);
    tcase_add_test(tc, durable_recorded_and_compared);
    tcase_add_test(tc, auto_delete_compared);
    tcase_add_test(tc, declare_nowait);

    tc = h_tcase(s, "arguments", 20, true);
    tcase_add_test(tc, args_other_than_x_not_compared);
    tcase_add_test(tc, args_classic_queue_type_accepted);
    tcase_add_test(tc, args_queue_mode);
    tcase_add_test(tc, args_queue_version_and_locator);
    tcase_add_test(tc, args_unimplemented_540);
    tcase_add_test(tc, args_implemented_compared_406);
    tcase_add_test(tc, args_compared_by_value);
    tcase_add_test(tc, args_quorum_rules);

    tc = h_tcase(s, "exclusive", 20, true);
    tcase_add_test(tc, exclusive_locked_for_others);
    tcase_add_test(tc, exclusive_redeclare_by_owner);
    tcase_add_test(tc, exclusive_deleted_with_connection);
    tcase_add_test(tc, exclusive_on_shared_queue_405);

    tc = h_tcase(s, "auto-delete", 20, true);
    tcase_add_test(tc, auto_delete_with_last_consumer);
    tcase_add_test(tc, auto_delete_when_consumer_channel_closes);
    tcase_add_test(tc, auto_delete_when_consumer_connection_drops);

    tc = h_tcase(s, "bind", 20, true);
    tcase_add_test(tc, bind_errors);
    tcase_add_test(tc, bind_empty_queue_name_means_last_declared);
    tcase_add_test(tc, bind_nowait_and_unbind);
    tcase_add_test(tc, bind_arguments_distinguish_bindings);

    tc = h_tcase(s, "purge", 20, true);
    tcase_add_test(tc, purge_counts_ready_messages);
    tcase_add_test(tc, purge_nowait_and_missing);

    tc = h_tcase(s, "delete", 20, true);
    tcase_add_test(tc, delete_returns_count_and_unbinds);
    tcase_add_test(tc, delete_if_unused_406);
    tcase_add_test(tc, delete_if_empty_406);
    tcase_add_test(tc, delete_missing_and_nowait);

    return h_run(s);
}
