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

#define LOCKED                                                                 \
    "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '"

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

/* ---- declare: flags and arguments, accepted, compared, refused ---- */

#define DURABLE 1u
#define EXCLUSIVE 2u
#define AUTO_DELETE 4u

/* queue.declare with 'flags' and 'args', and the reply it must get. */
struct qdecl {
    unsigned flags;
    struct h_fields args;
    int code;         /* 0: declare-ok; else the close (5xx: the connection) */
    const char *text; /* how the close's text starts; "%s": the queue */
};
#define DECLS(...)                                                             \
    { (int)(sizeof((struct qdecl[]){ __VA_ARGS__ }) / sizeof(struct qdecl)),   \
      { __VA_ARGS__ } }
#define INVALID_ARG(k, why)                                                    \
    "PRECONDITION_FAILED - invalid arg '" k "' for queue '%s' in vhost '/'"    \
    why
#define INEQUIVALENT(k, got_cur)                                               \
    "PRECONDITION_FAILED - inequivalent arg '" k "' for queue '%s' in vhost "  \
    "'/': received " got_cur
#define QUORUM H_STR("x-queue-type", "quorum")

/*
 * Declarations of one queue in turn, up to the first refused (after a
 * channel close the channel opens again). RabbitMQ 3.10's rules and texts
 * (checked against it); docs/compatibility.md has where Roost differs.
 */
static const struct declare_case {
    const char *name;
    const char *queue; /* NULL: a name made for the case */
    struct {
        int n;
        struct qdecl d[3];
    } decls;
    const char *roost_only; /* NULL, or why it is skipped when remote */
} declare_cases[] = {
    { "reserved prefix", "amq.roost-test",
      DECLS({ AUTO_DELETE, { 0 }, 403,
              "ACCESS_REFUSED - queue name 'amq.roost-test' contains "
              "reserved prefix 'amq.*'" }) },
    { "durable recorded and compared", NULL,
      DECLS({ DURABLE }, { DURABLE },
            { 0, { 0 }, 406, INEQUIVALENT("durable", "'false' but current "
                                                     "is 'true'") }) },
    { "auto_delete compared", NULL,
      DECLS({ 0 }, { AUTO_DELETE, { 0 }, 406,
                     INEQUIVALENT("auto_delete", "'true' but current is "
                                                 "'false'") }) },
    { "exclusive on a shared queue", NULL,
      DECLS({ AUTO_DELETE },
            { EXCLUSIVE | AUTO_DELETE, { 0 }, 405,
              LOCKED }) },
    /* docs/compatibility.md: only implemented arguments are compared. */
    { "arguments other than x- not compared", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_STR("colour", "red")) },
            { EXCLUSIVE, H_FIELDS(H_STR("colour", "blue")) },
            { EXCLUSIVE }) },
    { "x-queue-type classic", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_STR("x-queue-type", "classic")) }) },
    { "x-queue-mode lazy", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_STR("x-queue-mode", "lazy")) }) },
    { "x-queue-mode default", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_STR("x-queue-mode", "default")) }) },
    { "x-queue-mode foo", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_STR("x-queue-mode", "foo")), 406,
              INVALID_ARG("x-queue-mode",
                          ": \"unsupported queue mode 'foo'\"") }) },
    { "x-queue-mode an integer", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_I32("x-queue-mode", 5)), 406,
              INVALID_ARG("x-queue-mode",
                          ": {unacceptable_type,signedint}") }) },
    /* x-queue-version 1 and 2 accepted and compared on redeclare */
    { "x-queue-version compared", NULL,
      DECLS({ AUTO_DELETE, H_FIELDS(H_I32("x-queue-version", 1)) },
            { AUTO_DELETE, H_FIELDS(H_I32("x-queue-version", 2)), 406,
              INEQUIVALENT("x-queue-version", "'2' but current is "
                                              "'1'") }) },
    { "x-queue-version 2", NULL,
      DECLS({ AUTO_DELETE, H_FIELDS(H_I32("x-queue-version", 2)) }) },
    { "x-queue-version 3", NULL,
      DECLS({ AUTO_DELETE, H_FIELDS(H_I32("x-queue-version", 3)), 406,
              INVALID_ARG("x-queue-version",
                          ": \"unsupported queue version '3'\"") }) },
    { "x-queue-version a string", NULL,
      DECLS({ AUTO_DELETE, H_FIELDS(H_STR("x-queue-version", "2")), 406,
              INVALID_ARG("x-queue-version",
                          ": \"expected integer, got longstr\"") }) },
    { "x-queue-master-locator client-local", NULL,
      DECLS({ AUTO_DELETE,
              H_FIELDS(H_STR("x-queue-master-locator", "client-local")) }) },
    { "x-queue-master-locator x", NULL,
      DECLS({ AUTO_DELETE, H_FIELDS(H_STR("x-queue-master-locator", "x")),
              406,
              INVALID_ARG("x-queue-master-locator",
                          ": \"unsupported queue master locator 'x'\"") }),
      "a bad locator crashes RabbitMQ's channel (541)" },
    /* docs/compatibility.md: refused rather than silently ignored. */
    { "an unimplemented argument", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_I32("x-no-such-argument", 10)), 540,
              "NOT_IMPLEMENTED - queue argument 'x-no-such-argument' is not "
              "implemented" }),
      "documented difference: RabbitMQ implements these" },
    { "x-message-ttl compared", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_I32("x-message-ttl", 1000)) },
            { EXCLUSIVE, H_FIELDS(H_I32("x-message-ttl", 1000)) },
            { EXCLUSIVE, H_FIELDS(H_I32("x-message-ttl", 2000)), 406,
              INEQUIVALENT("x-message-ttl", "'2000' but current is "
                                            "'1000'") }) },
    /* Leaving it out is a difference too. */
    { "x-message-ttl left out", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_I32("x-message-ttl", 1000)) },
            { EXCLUSIVE, { 0 }, 406,
              INEQUIVALENT("x-message-ttl", "none but current is the value "
                                            "'1000' of type 'signedint'") }) },
    /* RabbitMQ compares integer arguments by value: 1000 as an int64 is
     * the 1000 the queue was declared with as an int32. */
    { "x-message-ttl compared by value", NULL,
      DECLS({ EXCLUSIVE, H_FIELDS(H_I32("x-message-ttl", 1000)) },
            { EXCLUSIVE, H_FIELDS(H_I64("x-message-ttl", 1000)) }) },
    /* Quorum queues on one node. */
    { "quorum: not durable", NULL,
      DECLS({ 0, H_FIELDS(QUORUM), 406,
              "PRECONDITION_FAILED - invalid property 'non-durable' for "
              "queue '%s' in vhost '/'" }) },
    { "quorum: exclusive", NULL,
      DECLS({ DURABLE | EXCLUSIVE, H_FIELDS(QUORUM), 406,
              "PRECONDITION_FAILED - invalid property 'exclusive-owner' for "
              "queue '%s' in vhost '/'" }) },
    { "quorum: auto-delete", NULL,
      DECLS({ DURABLE | AUTO_DELETE, H_FIELDS(QUORUM), 406,
              "PRECONDITION_FAILED - invalid property 'auto-delete' for "
              "queue '%s' in vhost '/'" }) },
    { "quorum: x-queue-mode", NULL,
      DECLS({ DURABLE, H_FIELDS(QUORUM, H_STR("x-queue-mode", "lazy")), 406,
              INVALID_ARG("x-queue-mode",
                          " of queue type rabbit_quorum_queue") }) },
    { "quorum: x-max-priority", NULL,
      DECLS({ DURABLE, H_FIELDS(QUORUM, H_I32("x-max-priority", 5)), 406,
              INVALID_ARG("x-max-priority",
                          " of queue type rabbit_quorum_queue") }) },
    { "quorum: x-dead-letter-strategy", NULL,
      DECLS({ DURABLE, H_FIELDS(QUORUM, H_STR("x-dead-letter-strategy", "x")),
              406,
              INVALID_ARG("x-dead-letter-strategy",
                          ": invalid_dlx_strategy") }) },
    /* Accepted, and its type compared on redeclare (none is classic). */
    { "quorum: type compared", NULL,
      DECLS({ DURABLE, H_FIELDS(QUORUM) },
            { DURABLE, { 0 }, 406,
              INEQUIVALENT("x-queue-type", "none but current is the value "
                                           "'quorum' of type 'longstr'") }) },
    /* An unknown type is RabbitMQ's 406. */
    { "x-queue-type bogus", NULL,
      DECLS({ DURABLE, H_FIELDS(H_STR("x-queue-type", "bogus")), 406,
              INVALID_ARG("x-queue-type",
                          ": \"unsupported queue type 'bogus'\"") }) },
    /* A stream (its declare checks: stream_declare.py), its type
     * compared on redeclare as RabbitMQ 3.10.8 (streams-spec.md 1.3). */
    { "x-queue-type stream", NULL,
      DECLS({ DURABLE, H_FIELDS(H_STR("x-queue-type", "stream")) },
            { DURABLE, { 0 }, 406,
              INEQUIVALENT("x-queue-type", "none but current is the value "
                                           "'stream' of type 'longstr'") }) },
};

START_TEST(declare_in_turn)
{
    const struct declare_case *v = &declare_cases[_i];
    amqp_connection_state_t c;
    char made[64], want[512];
    const char *q = v->queue ? v->queue : h_name(made, sizeof(made), "decl");
    bool declared = false;

    h_case(v->name);
    if (h_skipped_remote(v->roost_only))
        return;
    c = h_connect(H);
    for (int k = 0; k < v->decls.n; k++) {
        const struct qdecl *d = &v->decls.d[k];
        amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 0, d->flags & DURABLE,
                           (d->flags & EXCLUSIVE) != 0,
                           (d->flags & AUTO_DELETE) != 0,
                           h_fields_table(&d->args));
        if (d->code == 0) {
            EXPECT_OK(c, "queue.declare");
            declared = true;
            continue;
        }
        snprintf(want, sizeof(want), d->text, q);
        EXPECT_REFUSED(c, amqp_get_rpc_reply(c), d->code >= 500 ? 0 : 1,
                       d->code, want);
        if (d->code >= 500)
            return;
        reopen(c, 1);
        break;
    }
    if (declared)
        delete_queue(c, q);
    h_close(c);
}
END_TEST

/* ---- exclusive ---- */

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

START_TEST(purge_nowait)
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

/* ---- refused methods ---- */

/* The connection whose exclusive queue the "locked" rows use. */
static amqp_connection_state_t owner;

/* 'obj', a queue another connection declared exclusive, holding "mine". */
static void
own(const char *obj)
{
    char q[256];

    owner = h_connect(H);
    DECLARE_QUEUE(owner, 1, obj, false, true, false, q);
    PUBLISH(owner, 1, "", q, "mine");
}

/* The owner still has it all. */
static void
owner_still_has_it(amqp_connection_state_t c, const char *obj)
{
    struct h_event e;

    (void)c;
    H_ASSERT(GET(owner, 1, obj, true, &e) == 1, "the owner's queue is empty");
    H_ASSERT_STR_EQ(e.body, "mine");
    h_event_free(&e);
    h_close(owner);
}

static amqp_rpc_reply_t
declare_locked(amqp_connection_state_t c, const char *obj, bool passively,
               bool exclusive)
{
    own(obj);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(obj), passively, 0, exclusive,
                       0, amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
locked_declare_exclusive(amqp_connection_state_t c, const char *obj)
{
    return declare_locked(c, obj, false, true);
}

static amqp_rpc_reply_t
locked_declare(amqp_connection_state_t c, const char *obj)
{
    return declare_locked(c, obj, false, false);
}

static amqp_rpc_reply_t
locked_declare_passive(amqp_connection_state_t c, const char *obj)
{
    return declare_locked(c, obj, true, false);
}

static amqp_rpc_reply_t
locked_consume(amqp_connection_state_t c, const char *obj)
{
    own(obj);
    amqp_basic_consume(c, 1, amqp_cstring_bytes(obj), amqp_empty_bytes, 0, 1,
                       0, amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
locked_get(amqp_connection_state_t c, const char *obj)
{
    own(obj);
    return amqp_basic_get(c, 1, amqp_cstring_bytes(obj), 1);
}

static amqp_rpc_reply_t
locked_purge(amqp_connection_state_t c, const char *obj)
{
    own(obj);
    amqp_queue_purge(c, 1, amqp_cstring_bytes(obj));
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
locked_bind(amqp_connection_state_t c, const char *obj)
{
    own(obj);
    amqp_queue_bind(c, 1, amqp_cstring_bytes(obj),
                    amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("k"),
                    amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
locked_delete(amqp_connection_state_t c, const char *obj)
{
    own(obj);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(obj), 0, 0);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
bind_to_missing_exchange(amqp_connection_state_t c, const char *obj)
{
    char q[256];

    (void)obj;
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    amqp_queue_bind(c, 1, amqp_cstring_bytes(q),
                    amqp_cstring_bytes("no-such-exchange-for-roost"),
                    amqp_cstring_bytes("k"), amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

/* Unbinding what was never bound is fine. */
static void
unbind_never_bound(amqp_connection_state_t c, const char *obj)
{
    char q[256];

    (void)obj;
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q),
                      amqp_cstring_bytes("amq.direct"),
                      amqp_cstring_bytes("never"), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind of a missing binding");
}

static amqp_rpc_reply_t
bind_missing_queue(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    amqp_queue_bind(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"),
                    amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("k"),
                    amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
purge_missing_queue(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    amqp_queue_purge(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"));
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
delete_if_unused(amqp_connection_state_t c, const char *obj)
{
    char q[256];

    DECLARE_QUEUE(c, 1, obj, false, true, false, q);
    reopen(c, 2);
    CONSUME(c, 2, q, "", true, NULL);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 1, 0);
    return amqp_get_rpc_reply(c);
}

static void
still_there(amqp_connection_state_t c, const char *obj)
{
    H_ASSERT(queue_exists(c, obj), "deleted despite if-unused");
}

static amqp_rpc_reply_t
delete_if_empty(amqp_connection_state_t c, const char *obj)
{
    char q[256];

    DECLARE_QUEUE(c, 1, obj, false, true, false, q);
    PUBLISH(c, 1, "", q, "m");
    WAIT_COUNT(c, 1, q, 1);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 0, 1);
    return amqp_get_rpc_reply(c);
}

/* It still holds its message; an empty queue goes with if-empty, an
 * unused one with if-unused. */
static void
empty_then_delete(amqp_connection_state_t c, const char *obj)
{
    H_ASSERT(QUEUE_COUNT(c, 1, obj) == 1, "the message went");
    amqp_queue_purge(c, 1, amqp_cstring_bytes(obj));
    EXPECT_OK(c, "queue.purge");
    amqp_queue_delete(c, 1, amqp_cstring_bytes(obj), 1, 1);
    EXPECT_OK(c, "queue.delete if-unused if-empty");
}

#define NO_SUCH_QUEUE                                                          \
    "NOT_FOUND - no queue 'no-such-queue-for-roost' in vhost '/'"

static const struct h_refusal refusals[] = {
    /* Another connection's exclusive queue is out of reach. */
    { "locked: exclusive declare", locked_declare_exclusive, 1, 405, LOCKED,
      owner_still_has_it },
    { "locked: declare", locked_declare, 1, 405, LOCKED, owner_still_has_it },
    { "locked: passive declare", locked_declare_passive, 1, 405, LOCKED,
      owner_still_has_it },
    { "locked: consume", locked_consume, 1, 405, LOCKED, owner_still_has_it },
    { "locked: get", locked_get, 1, 405, LOCKED, owner_still_has_it },
    { "locked: purge", locked_purge, 1, 405, LOCKED, owner_still_has_it },
    { "locked: bind", locked_bind, 1, 405, LOCKED, owner_still_has_it },
    { "locked: delete", locked_delete, 1, 405, LOCKED, owner_still_has_it },
    { "bind to a missing exchange", bind_to_missing_exchange, 1, 404,
      "NOT_FOUND - no exchange 'no-such-exchange-for-roost' in vhost '/'",
      unbind_never_bound },
    { "bind of a missing queue", bind_missing_queue, 1, 404, NO_SUCH_QUEUE },
    { "purge of a missing queue", purge_missing_queue, 1, 404, NO_SUCH_QUEUE },
    { "delete if-unused of a queue in use", delete_if_unused, 1, 406,
      "PRECONDITION_FAILED - queue '%s' in vhost '/' in use", still_there },
    { "delete if-empty of a queue with a message", delete_if_empty, 1, 406,
      "PRECONDITION_FAILED - queue '%s' in vhost '/' not empty",
      empty_then_delete },
};

START_TEST(refused)
{
    h_refused(&refusals[_i]);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("queue");
    TCase *tc;

    tc = h_tcase(s, "declare", 20, true);
    tcase_add_test(tc, server_named);
    tcase_add_test(tc, passive);
    tcase_add_test(tc, declare_ok_counts);
    tcase_add_test(tc, declare_nowait);

    tc = h_tcase(s, "flags and arguments", 20, true);
    H_LOOP(tc, declare_in_turn, declare_cases);

    tc = h_tcase(s, "exclusive", 20, true);
    tcase_add_test(tc, exclusive_redeclare_by_owner);
    tcase_add_test(tc, exclusive_deleted_with_connection);

    tc = h_tcase(s, "auto-delete", 20, true);
    tcase_add_test(tc, auto_delete_with_last_consumer);
    tcase_add_test(tc, auto_delete_when_consumer_channel_closes);
    tcase_add_test(tc, auto_delete_when_consumer_connection_drops);

    tc = h_tcase(s, "bind", 20, true);
    tcase_add_test(tc, bind_empty_queue_name_means_last_declared);
    tcase_add_test(tc, bind_nowait_and_unbind);
    tcase_add_test(tc, bind_arguments_distinguish_bindings);

    tc = h_tcase(s, "purge", 20, true);
    tcase_add_test(tc, purge_counts_ready_messages);
    tcase_add_test(tc, purge_nowait);

    tc = h_tcase(s, "delete", 20, true);
    tcase_add_test(tc, delete_returns_count_and_unbinds);
    tcase_add_test(tc, delete_missing_and_nowait);

    tc = h_tcase(s, "refused", 20, true);
    H_LOOP(tc, refused, refusals);

    return h_run(s);
}
