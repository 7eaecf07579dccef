/*
 * SPDX-License-Identifier: Apache-2.0
 * Class basic against a real roostd: publish (every exchange type,
 * properties kept, mandatory and basic.return, immediate, bodies split
 * over many frames, the maximum message size), consume (tags, exclusive
 * consumers, duplicate tags, no-ack, nowait, cancel from either side),
 * get, ack/nack/reject with multiple and requeue, redelivery in the
 * original order, recover, qos with RabbitMQ's per-consumer and
 * per-channel meaning, unacked messages going back when a channel,
 * connection or socket goes away, round-robin dispatch, and a slow
 * consumer that must not make the broker buffer without bound.
 */
#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/rawsock.h"

static void
reopen(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_channel_open(c, ch);
    EXPECT_OK(c, "channel.open");
}

static void
qos(amqp_connection_state_t c, amqp_channel_t ch, uint16_t count, bool global)
{
    amqp_basic_qos(c, ch, 0, count, global);
    EXPECT_OK(c, "basic.qos");
}

static void
expect_get_at(const char *file, int line, amqp_connection_state_t c,
              amqp_channel_t ch, const char *q, const char *body,
              bool redelivered)
{
    struct h_event e;
    int n = h_get_at(file, line, c, ch, q, true, &e);
    H_ASSERT_AT(file, line, n == 1, "expected \"%s\" from '%s', got get-empty",
                body, q);
    H_ASSERT_AT(file, line,
                strcmp(e.body, body) == 0 && e.redelivered == redelivered,
                "expected \"%s\" (redelivered=%d), got \"%s\" "
                "(redelivered=%d)",
                body, redelivered, e.body, e.redelivered);
    h_event_free(&e);
}
#define EXPECT_GET(c, ch, q, body, redelivered)                                \
    expect_get_at(__FILE__, __LINE__, (c), (ch), (q), (body), (redelivered))

static void
expect_empty_at(const char *file, int line, amqp_connection_state_t c,
                amqp_channel_t ch, const char *q)
{
    struct h_event e;
    char got[64];
    if (h_get_at(file, line, c, ch, q, true, &e) == 1) {
        snprintf(got, sizeof(got), "%s", e.body);
        h_event_free(&e);
        _ck_assert_failed(file, line, "Failed",
                          "expected '%s' empty, got \"%s\"", q, got);
    }
}
#define EXPECT_EMPTY(c, ch, q)                                                 \
    expect_empty_at(__FILE__, __LINE__, (c), (ch), (q))

/* ---- publish ---- */

START_TEST(publish_to_each_exchange_type)
{
    static const char *const types[] = { "direct", "fanout", "topic",
                                         "headers" };
    amqp_connection_state_t c = h_connect(H);
    char x[64], q[256], tag[256];
    struct h_event e;

    for (size_t i = 0; i < 4; i++) {
        h_name(x, sizeof(x), types[i]);
        DECLARE_EXCHANGE(c, 1, x, types[i]);
        DECLARE_QUEUE(c, 1, "", false, true, false, q);
        BIND(c, 1, q, x, "rk");
        CONSUME(c, 1, q, "", false, tag);
        PUBLISH(c, 1, x, "rk", types[i]);
        EXPECT_DELIVERY(c, types[i], &e);
        ck_assert_str_eq(e.exchange, x);
        ck_assert_str_eq(e.rkey, "rk");
        ck_assert_str_eq(e.ctag, tag);
        ck_assert(!e.redelivered);
        amqp_basic_ack(c, 1, e.tag, 0);
        h_event_free(&e);
        amqp_exchange_delete(c, 1, amqp_cstring_bytes(x), 0);
        EXPECT_OK(c, "exchange.delete");
    }
    h_close(c);
}
END_TEST

START_TEST(publish_keeps_properties)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_basic_properties_t p;
    amqp_table_entry_t h[] = { h_entry_str("hdr", "v") };
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    memset(&p, 0, sizeof(p));
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG |
               AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_PRIORITY_FLAG |
               AMQP_BASIC_CORRELATION_ID_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
               AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_APP_ID_FLAG;
    p.content_type = amqp_cstring_bytes("text/plain");
    p.headers = h_table(h, 1);
    p.delivery_mode = 2;
    p.priority = 3;
    p.correlation_id = amqp_cstring_bytes("corr");
    p.message_id = amqp_cstring_bytes("mid");
    p.timestamp = 1234567890;
    p.app_id = amqp_cstring_bytes("app");
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, "props", 5, false, &p);
    CONSUME(c, 1, q, "", true, NULL);
    EXPECT_DELIVERY(c, "props", &e);
    ck_assert_uint_eq(e.flags, p._flags);
    ck_assert_str_eq(e.content_type, "text/plain");
    ck_assert_int_eq(e.nheaders, 1);
    ck_assert_str_eq(e.header0, "hdr");
    ck_assert_uint_eq(e.delivery_mode, 2);
    ck_assert_uint_eq(e.priority, 3);
    ck_assert_str_eq(e.correlation_id, "corr");
    ck_assert_str_eq(e.message_id, "mid");
    ck_assert_uint_eq(e.timestamp, 1234567890);
    ck_assert_str_eq(e.app_id, "app");
    h_event_free(&e);
    h_close(c);
}
END_TEST

START_TEST(publish_empty_body)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, "", 0, false, NULL);
    WAIT_COUNT(c, 1, q, 1);
    ck_assert_int_eq(GET(c, 1, q, true, &e), 1);
    ck_assert_uint_eq(e.len, 0);
    h_event_free(&e);
    h_close(c);
}
END_TEST

START_TEST(mandatory_unroutable_returned_first)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event evs[4];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    CONSUME(c, 1, q, "", true, NULL);
    h_publish_at(__FILE__, __LINE__, c, 1, "amq.direct", "nobody-binds-this",
                 "ret", 3, true, NULL);
    PUBLISH(c, 1, "", q, "after");
    /* The return comes before the reply to the next synchronous method
     * and before the delivery of the next publish (which RabbitMQ may
     * send after that reply). */
    int n = SYNC(c, 1, evs, 4);
    ck_assert_msg(n >= 1 && evs[0].id == AMQP_BASIC_RETURN_METHOD,
                  "no basic.return first (%d methods before the sync reply, "
                  "the first %s)",
                  n, n ? h_method_name(evs[0].id) : "-");
    ck_assert_int_eq(evs[0].code, 312);
    ck_assert_str_eq(evs[0].text, "NO_ROUTE");
    ck_assert_str_eq(evs[0].exchange, "amq.direct");
    ck_assert_str_eq(evs[0].rkey, "nobody-binds-this");
    ck_assert_str_eq(evs[0].body, "ret");
    if (n == 1) {
        EXPECT_DELIVERY(c, "after", NULL);
    } else {
        ck_assert_int_eq(n, 2);
        ck_assert_int_eq(evs[1].id, AMQP_BASIC_DELIVER_METHOD);
        ck_assert_str_eq(evs[1].body, "after");
        h_event_free(&evs[1]);
    }
    h_event_free(&evs[0]);
    /* Routable mandatory messages and unroutable non-mandatory ones are not
     * returned. */
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, "m", 1, true, NULL);
    EXPECT_DELIVERY(c, "m", NULL);
    PUBLISH(c, 1, "amq.direct", "nobody-binds-this", "dropped");
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(immediate_540)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_bytes_t b = amqp_cstring_bytes("x");

    ck_assert_int_eq(amqp_basic_publish(c, 1, amqp_cstring_bytes("amq.direct"),
                                        amqp_cstring_bytes("k"), 0, 1, NULL, b),
                     AMQP_STATUS_OK);
    EXPECT_ASYNC_CONN_CLOSE(c, 540, "NOT_IMPLEMENTED - immediate=true");
}
END_TEST

START_TEST(publish_to_missing_exchange_404)
{
    amqp_connection_state_t c = h_connect(H);

    PUBLISH(c, 1, "no-such-exchange-for-roost", "k", "x");
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 1, 404,
                               "NOT_FOUND - no exchange "
                               "'no-such-exchange-for-roost' in vhost '/'");
    h_close(c);
}
END_TEST

static void
big_body_roundtrip(const struct harness *h, int client_frame_max)
{
    struct hconn_opts o = { .frame_max = client_frame_max };
    amqp_connection_state_t c = h_connect_opts(h, &o, NULL);
    size_t len = 1024 * 1024;
    char *body = malloc(len), q[256];
    struct h_event e;

    ck_assert_int_eq(amqp_get_frame_max(c), 4096);
    for (size_t i = 0; i < len; i++)
        body[i] = (char)('a' + i % 26 + (i / 4093) % 3);
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, body, len, false, NULL);
    CONSUME(c, 1, q, "", true, NULL);
    EXPECT_DELIVERY(c, NULL, &e);
    ck_assert_uint_eq(e.len, len);
    ck_assert_msg(memcmp(e.body, body, len) == 0,
                  "the 1 MiB body came back different");
    h_event_free(&e);
    free(body);
    h_close(c);
}

START_TEST(multi_frame_body_client_frame_max)
{
    big_body_roundtrip(H, 4096);
}
END_TEST

START_TEST(multi_frame_body_server_frame_max)
{
    struct harness h;
    if (!harness_start(&h, ARGS("--set", "frame_max=4096")))
        return;
    big_body_roundtrip(&h, 0);
    harness_stop(&h);
}
END_TEST

START_TEST(max_message_size)
{
    struct harness h;
    static char body[1001];
    char q[256];

    if (!harness_start(&h, ARGS("--set", "max_message_size=1000")))
        return;
    memset(body, 'b', sizeof(body));
    amqp_connection_state_t c = h_connect(&h);
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, body, 1000, false, NULL);
    WAIT_COUNT(c, 1, q, 1);
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, body, 1001, false, NULL);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 1, 406,
                               "PRECONDITION_FAILED - message size 1001 "
                               "is larger than configured max size 1000");
    reopen(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 1);
    h_close(c);
    harness_stop(&h);
}
END_TEST

/* ---- consume ---- */

START_TEST(consume_tags)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], tag[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    CONSUME(c, 1, q, "", true, tag);
    ck_assert_msg(strncmp(tag, "amq.ctag-", 9) == 0 && strlen(tag) == 9 + 22,
                  "server-generated tag '%s'", tag);
    for (const char *p = tag + 9; *p; p++)
        ck_assert_msg(isalnum((unsigned char)*p) || *p == '-' || *p == '_',
                      "character '%c' in '%s'", *p, tag);
    CONSUME(c, 1, q, "my-tag", true, tag);
    ck_assert_str_eq(tag, "my-tag");
    /* The same tag on another channel is another consumer. */
    reopen(c, 2);
    CONSUME(c, 2, q, "my-tag", true, tag);
    h_close(c);
}
END_TEST

START_TEST(consume_duplicate_tag_530)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    CONSUME(c, 1, q, "dup", true, NULL);
    amqp_basic_consume(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes("dup"),
                       0, 1, 0, amqp_empty_table);
    EXPECT_CONN_CLOSE(c, 530,
                      "NOT_ALLOWED - attempt to reuse consumer tag 'dup'");
}
END_TEST

START_TEST(consume_exclusive_403)
{
    amqp_connection_state_t c = h_connect(H), other = h_connect(H);
    char name[64], q[256], want[256];

    h_name(name, sizeof(name), "exclc");
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    snprintf(want, sizeof(want),
             "ACCESS_REFUSED - queue '%s' in vhost '/' in "
             "exclusive use",
             name);
    h_consume_at(__FILE__, __LINE__, c, 1, q, "x", true, true, NULL);
    /* no second consumer, from anywhere */
    amqp_basic_consume(other, 1, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 1,
                       0, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(other, 1, 403, want);
    reopen(other, 1);
    reopen(c, 2);
    amqp_basic_consume(c, 2, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 1, 1,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 2, 403, want);
    /* and no exclusive consumer when there is already one */
    amqp_basic_cancel(c, 1, amqp_cstring_bytes("x"));
    EXPECT_OK(c, "basic.cancel");
    /* (the queue was auto-delete: declare a new one) */
    DECLARE_QUEUE(c, 1, name, false, false, true, q);
    CONSUME(c, 1, q, "shared", true, NULL);
    amqp_basic_consume(other, 1, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 1,
                       1, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(other, 1, 403, want);
    h_close(other);
    h_close(c);
}
END_TEST

START_TEST(consume_missing_queue_404)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_basic_consume(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"),
                       amqp_empty_bytes, 0, 1, 0, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 404,
                         "NOT_FOUND - no queue 'no-such-queue-for-roost' "
                         "in vhost '/'");
    h_close(c);
}
END_TEST

START_TEST(consume_no_ack)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    reopen(c, 2);
    PUBLISH_N(c, 1, q, "n", 0, 3);
    CONSUME(c, 2, q, "", true, NULL);
    EXPECT_DELIVERY(c, "n0", NULL);
    EXPECT_DELIVERY(c, "n1", NULL);
    EXPECT_DELIVERY(c, "n2", NULL);
    /* Nothing to requeue when the channel goes. */
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 2, AMQP_REPLY_SUCCESS),
                   "channel.close");
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    h_close(c);
}
END_TEST

START_TEST(consume_nowait)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_basic_consume_t m;
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    memset(&m, 0, sizeof(m));
    m.queue = amqp_cstring_bytes(q);
    m.consumer_tag = amqp_cstring_bytes("nw");
    m.no_ack = 1;
    m.nowait = 1;
    m.arguments = amqp_empty_table;
    SEND(c, 1, AMQP_BASIC_CONSUME_METHOD, &m);
    PUBLISH(c, 1, "", q, "to-nowait");
    EXPECT_DELIVERY(c, "to-nowait", &e);
    ck_assert_str_eq(e.ctag, "nw");
    h_event_free(&e);
    h_close(c);
}
END_TEST

START_TEST(cancel)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_basic_cancel_ok_t *ok;
    amqp_basic_cancel_t m;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    CONSUME(c, 1, q, "c1", true, NULL);
    ok = amqp_basic_cancel(c, 1, amqp_cstring_bytes("c1"));
    EXPECT_OK(c, "basic.cancel");
    ck_assert_int_eq((int)ok->consumer_tag.len, 2);
    ck_assert(memcmp(ok->consumer_tag.bytes, "c1", 2) == 0);
    PUBLISH(c, 1, "", q, "stays");
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    WAIT_COUNT(c, 1, q, 1);
    /* An unknown tag is fine. */
    amqp_basic_cancel(c, 1, amqp_cstring_bytes("never-was"));
    EXPECT_OK(c, "basic.cancel of an unknown tag");
    /* nowait */
    CONSUME(c, 1, q, "c2", false, NULL);
    EXPECT_DELIVERY(c, "stays", NULL);
    memset(&m, 0, sizeof(m));
    m.consumer_tag = amqp_cstring_bytes("c2");
    m.nowait = 1;
    SEND(c, 1, AMQP_BASIC_CANCEL_METHOD, &m);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    PUBLISH(c, 1, "", q, "after-cancel");
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    /* The cancelled consumer's unacked delivery can still be acked. */
    amqp_basic_ack(c, 1, 1, 0);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    WAIT_COUNT(c, 1, q, 1);
    h_close(c);
}
END_TEST

START_TEST(server_cancel_on_queue_delete)
{
    struct hconn_opts o = { .cancel_notify = true };
    amqp_connection_state_t c = h_connect_opts(H, &o, NULL),
                            admin = h_connect(H);
    char name[64], q[256];
    struct h_event e;

    h_name(name, sizeof(name), "cn");
    DECLARE_QUEUE(admin, 1, name, false, false, false, q);
    CONSUME(c, 1, q, "watched", true, NULL);
    amqp_queue_delete(admin, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(admin, "queue.delete");
    EXPECT_METHOD(c, AMQP_BASIC_CANCEL_METHOD, &e);
    ck_assert_str_eq(e.ctag, "watched");
    ck_assert_int_eq(e.channel, 1);
    /* The channel stays open. */
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(admin);
    h_close(c);
}
END_TEST

START_TEST(server_cancel_needs_capability)
{
    /* Without consumer_cancel_notify the consumer just goes away. */
    amqp_connection_state_t c = h_connect(H), admin = h_connect(H);
    char name[64], q[256];

    h_name(name, sizeof(name), "ncn");
    DECLARE_QUEUE(admin, 1, name, false, false, false, q);
    CONSUME(c, 1, q, "unwatched", true, NULL);
    amqp_queue_delete(admin, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(admin, "queue.delete");
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    /* The tag is free again on this channel. */
    DECLARE_QUEUE(admin, 1, name, false, false, false, q);
    CONSUME(c, 1, q, "unwatched", true, NULL);
    amqp_queue_delete(admin, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(admin, "queue.delete");
    h_close(admin);
    h_close(c);
}
END_TEST

/* ---- get ---- */

START_TEST(get_ok_and_empty)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    EXPECT_EMPTY(c, 1, q);
    PUBLISH_N(c, 1, q, "g", 0, 3);
    WAIT_COUNT(c, 1, q, 3);
    for (int i = 0; i < 3; i++) {
        char want[8];
        snprintf(want, sizeof(want), "g%d", i);
        ck_assert_int_eq(GET(c, 1, q, i != 1, &e), 1);
        ck_assert_str_eq(e.body, want);
        ck_assert_uint_eq(e.message_count, (unsigned)(2 - i));
        ck_assert_str_eq(e.exchange, "");
        ck_assert_str_eq(e.rkey, q);
        ck_assert(!e.redelivered);
        h_event_free(&e);
    }
    EXPECT_EMPTY(c, 1, q);
    /* The one fetched with ack is unacked: it comes back when the channel
     * closes. */
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS),
                   "channel.close");
    reopen(c, 1);
    WAIT_COUNT(c, 1, q, 1);
    EXPECT_GET(c, 1, q, "g1", true);
    h_close(c);
}
END_TEST

START_TEST(get_missing_queue_404)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_rpc_reply_t r =
        amqp_basic_get(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"), 1);
    h_expect_channel_close_at(__FILE__, __LINE__, c, r, 1, 404, "NOT_FOUND - ");
    h_close(c);
}
END_TEST

/* ---- ack, nack, reject ---- */

/* Get 'n' messages with ack from 'q' on channel 1; their tags in 'tags'. */
static void
get_unacked(amqp_connection_state_t c, const char *q, int n, uint64_t *tags)
{
    struct h_event e;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(GET(c, 1, q, false, &e), 1);
        tags[i] = e.tag;
        h_event_free(&e);
    }
}

START_TEST(ack_single_and_multiple)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[5];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "a", 0, 5);
    WAIT_COUNT(c, 1, q, 5);
    get_unacked(c, q, 5, t);
    amqp_basic_ack(c, 1, t[1], 0); /* a1 */
    amqp_basic_ack(c, 1, t[3], 1); /* a0, a2, a3 */
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS),
                   "channel.close");
    reopen(c, 1);
    WAIT_COUNT(c, 1, q, 1);
    EXPECT_GET(c, 1, q, "a4", true);
    h_close(c);
}
END_TEST

START_TEST(ack_zero_multiple_is_all)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[3];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "z", 0, 3);
    WAIT_COUNT(c, 1, q, 3);
    get_unacked(c, q, 3, t);
    amqp_basic_ack(c, 1, 0, 1);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS),
                   "channel.close");
    reopen(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    h_close(c);
}
END_TEST

START_TEST(nack_multiple_requeue)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[4];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "n", 0, 4);
    WAIT_COUNT(c, 1, q, 4);
    get_unacked(c, q, 4, t);
    amqp_basic_nack(c, 1, t[2], 1, 1); /* n0..n2 back */
    amqp_basic_nack(c, 1, t[3], 0, 0); /* n3 dropped */
    WAIT_COUNT(c, 1, q, 3);
    EXPECT_GET(c, 1, q, "n0", true);
    EXPECT_GET(c, 1, q, "n1", true);
    EXPECT_GET(c, 1, q, "n2", true);
    EXPECT_EMPTY(c, 1, q);
    h_close(c);
}
END_TEST

START_TEST(reject_requeue_and_drop)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[3];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "r", 0, 3);
    WAIT_COUNT(c, 1, q, 3);
    get_unacked(c, q, 3, t);
    amqp_basic_reject(c, 1, t[0], 0); /* dropped */
    amqp_basic_reject(c, 1, t[1], 1); /* back */
    WAIT_COUNT(c, 1, q, 1);
    EXPECT_GET(c, 1, q, "r1", true);
    amqp_basic_ack(c, 1, t[2], 0);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(requeue_keeps_original_order)
{
    /* Rejected out of order, with a newer message behind them: they go
     * back to their original places, ahead of it. */
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[5];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "o", 0, 5);
    WAIT_COUNT(c, 1, q, 5);
    get_unacked(c, q, 5, t);
    PUBLISH_N(c, 1, q, "o", 5, 6);
    WAIT_COUNT(c, 1, q, 1);
    amqp_basic_reject(c, 1, t[3], 1);
    amqp_basic_reject(c, 1, t[1], 1);
    amqp_basic_nack(c, 1, t[4], 0, 1);
    WAIT_COUNT(c, 1, q, 4);
    EXPECT_GET(c, 1, q, "o1", true);
    EXPECT_GET(c, 1, q, "o3", true);
    EXPECT_GET(c, 1, q, "o4", true);
    EXPECT_GET(c, 1, q, "o5", false);
    h_close(c);
}
END_TEST

START_TEST(unknown_delivery_tag_406)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_basic_ack(c, 1, 7, 0);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 1, 406,
                               "PRECONDITION_FAILED - unknown delivery tag 7");
    h_close(c);
}
END_TEST

START_TEST(double_ack_406)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[1];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "d", 0, 1);
    WAIT_COUNT(c, 1, q, 1);
    get_unacked(c, q, 1, t);
    amqp_basic_ack(c, 1, t[0], 0);
    amqp_basic_ack(c, 1, t[0], 0);
    char want[128];
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - unknown delivery tag %llu",
             (unsigned long long)t[0]);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
}
END_TEST

START_TEST(delivery_tags_are_per_channel)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[1];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    reopen(c, 2);
    PUBLISH_N(c, 1, q, "p", 0, 1);
    WAIT_COUNT(c, 1, q, 1);
    get_unacked(c, q, 1, t);
    amqp_basic_ack(c, 2, t[0], 0);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 2, 406,
                               "PRECONDITION_FAILED - unknown delivery tag");
    h_close(c);
}
END_TEST

/* ---- recover ---- */

START_TEST(recover_requeues)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "v", 0, 3);
    CONSUME(c, 1, q, "", false, NULL);
    EXPECT_DELIVERY(c, "v0", NULL);
    EXPECT_DELIVERY(c, "v1", NULL);
    EXPECT_DELIVERY(c, "v2", NULL);
    amqp_basic_recover(c, 1, 1);
    EXPECT_OK(c, "basic.recover");
    for (int i = 0; i < 3; i++) {
        char want[8];
        snprintf(want, sizeof(want), "v%d", i);
        EXPECT_DELIVERY(c, want, &e);
        ck_assert_msg(e.redelivered, "%s not redelivered", want);
        h_event_free(&e);
    }
    h_close(c);
}
END_TEST

START_TEST(recover_async_requeues)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;
    amqp_basic_recover_async_t m = { 1 };

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "w", 0, 2);
    CONSUME(c, 1, q, "", false, NULL);
    EXPECT_DELIVERY(c, "w0", NULL);
    EXPECT_DELIVERY(c, "w1", NULL);
    SEND(c, 1, AMQP_BASIC_RECOVER_ASYNC_METHOD, &m);
    EXPECT_DELIVERY(c, "w0", &e);
    ck_assert(e.redelivered);
    h_event_free(&e);
    EXPECT_DELIVERY(c, "w1", &e);
    ck_assert(e.redelivered);
    h_event_free(&e);
    h_close(c);
}
END_TEST

START_TEST(recover_without_requeue_540)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_basic_recover(c, 1, 0);
    EXPECT_CONN_CLOSE(c, 540, "NOT_IMPLEMENTED - requeue=false");
}
END_TEST

/* ---- qos ---- */

/* Wait for 'n' deliveries; store their tags. */
static void
take(amqp_connection_state_t c, int n, uint64_t *tags)
{
    for (int i = 0; i < n; i++) {
        uint64_t t = EXPECT_DELIVERY(c, NULL, NULL);
        if (tags)
            tags[i] = t;
    }
}

START_TEST(qos_per_consumer)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    uint64_t t[3];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "m", 0, 10);
    qos(c, 1, 2, false);
    CONSUME(c, 1, q, "", false, NULL);
    take(c, 2, t);
    WAIT_COUNT(c, 1, q, 8);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    /* one ack, one more */
    amqp_basic_ack(c, 1, t[0], 0);
    take(c, 1, t + 2);
    WAIT_COUNT(c, 1, q, 7);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    /* ack both outstanding: two more */
    amqp_basic_ack(c, 1, t[2], 1);
    take(c, 2, NULL);
    WAIT_COUNT(c, 1, q, 5);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(qos_per_consumer_only_for_later_consumers)
{
    /* global=false applies to consumers created after it. */
    amqp_connection_state_t c = h_connect(H);
    char q1[256], q2[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q1);
    DECLARE_QUEUE(c, 1, "", false, true, false, q2);
    PUBLISH_N(c, 1, q1, "a", 0, 10);
    PUBLISH_N(c, 1, q2, "b", 0, 10);
    WAIT_COUNT(c, 1, q1, 10);
    WAIT_COUNT(c, 1, q2, 10);
    qos(c, 1, 2, false);
    CONSUME(c, 1, q1, "first", false, NULL);
    take(c, 2, NULL);
    qos(c, 1, 5, false);
    CONSUME(c, 1, q2, "second", false, NULL);
    take(c, 5, NULL);
    WAIT_COUNT(c, 1, q1, 8);
    WAIT_COUNT(c, 1, q2, 5);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(qos_per_channel)
{
    amqp_connection_state_t c = h_connect(H);
    char q1[256], q2[256];
    struct h_event e;
    uint64_t last = 0;

    DECLARE_QUEUE(c, 1, "", false, true, false, q1);
    DECLARE_QUEUE(c, 1, "", false, true, false, q2);
    PUBLISH_N(c, 1, q1, "a", 0, 10);
    PUBLISH_N(c, 1, q2, "b", 0, 10);
    WAIT_COUNT(c, 1, q1, 10);
    WAIT_COUNT(c, 1, q2, 10);
    qos(c, 1, 3, true);
    CONSUME(c, 1, q1, "c1", false, NULL);
    CONSUME(c, 1, q2, "c2", false, NULL);
    for (int i = 0; i < 3; i++) {
        EXPECT_DELIVERY(c, NULL, &e);
        last = e.tag;
        h_event_free(&e);
    }
    /* 3 in flight in total, across both consumers */
    uint32_t ready = QUEUE_COUNT(c, 1, q1) + QUEUE_COUNT(c, 1, q2);
    ck_assert_uint_eq(ready, 17);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    amqp_basic_ack(c, 1, last, 1);
    take(c, 3, NULL);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(qos_both_limits)
{
    /* A per-consumer limit of 2 and a channel limit of 3: each consumer
     * gets at most 2, the two together at most 3. */
    amqp_connection_state_t c = h_connect(H);
    char q1[256], q2[256];
    int got1 = 0, got2 = 0;
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q1);
    DECLARE_QUEUE(c, 1, "", false, true, false, q2);
    PUBLISH_N(c, 1, q1, "a", 0, 10);
    PUBLISH_N(c, 1, q2, "b", 0, 10);
    WAIT_COUNT(c, 1, q1, 10);
    WAIT_COUNT(c, 1, q2, 10);
    qos(c, 1, 2, false);
    qos(c, 1, 3, true);
    CONSUME(c, 1, q1, "c1", false, NULL);
    CONSUME(c, 1, q2, "c2", false, NULL);
    for (int i = 0; i < 3; i++) {
        EXPECT_DELIVERY(c, NULL, &e);
        if (strcmp(e.ctag, "c1") == 0)
            got1++;
        else
            got2++;
        h_event_free(&e);
    }
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q1) + QUEUE_COUNT(c, 1, q2), 17);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    ck_assert_msg(got1 <= 2 && got2 <= 2, "c1 got %d, c2 got %d", got1, got2);
    h_close(c);
}
END_TEST

START_TEST(qos_zero_is_unlimited)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "u", 0, 20);
    qos(c, 1, 0, false);
    qos(c, 1, 0, true);
    CONSUME(c, 1, q, "", false, NULL);
    take(c, 20, NULL);
    h_close(c);
}
END_TEST

START_TEST(qos_prefetch_size_540)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_basic_qos(c, 1, 1, 0, 0);
    EXPECT_CONN_CLOSE(c, 540, "NOT_IMPLEMENTED - prefetch_size!=0 (1)");
}
END_TEST

/* ---- unacked messages go back ---- */

static void
three_unacked(amqp_connection_state_t c, const char *q)
{
    PUBLISH_N(c, 1, q, "u", 0, 3);
    CONSUME(c, 1, q, "", false, NULL);
    EXPECT_DELIVERY(c, "u0", NULL);
    EXPECT_DELIVERY(c, "u1", NULL);
    EXPECT_DELIVERY(c, "u2", NULL);
}

static void
expect_three_back(amqp_connection_state_t admin, const char *q)
{
    WAIT_COUNT(admin, 1, q, 3);
    EXPECT_GET(admin, 1, q, "u0", true);
    EXPECT_GET(admin, 1, q, "u1", true);
    EXPECT_GET(admin, 1, q, "u2", true);
}

START_TEST(unacked_back_on_channel_close)
{
    amqp_connection_state_t admin = h_connect(H), c = h_connect(H);
    char name[64], q[256];

    DECLARE_QUEUE(admin, 1, h_name(name, sizeof(name), "back1"), false, false,
                  false, q);
    three_unacked(c, q);
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS),
                   "channel.close");
    expect_three_back(admin, q);
    h_close(c);
    amqp_queue_delete(admin, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(admin, "queue.delete");
    h_close(admin);
}
END_TEST

START_TEST(unacked_back_on_connection_close)
{
    amqp_connection_state_t admin = h_connect(H), c = h_connect(H);
    char name[64], q[256];

    DECLARE_QUEUE(admin, 1, h_name(name, sizeof(name), "back2"), false, false,
                  false, q);
    three_unacked(c, q);
    h_close(c);
    expect_three_back(admin, q);
    amqp_queue_delete(admin, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(admin, "queue.delete");
    h_close(admin);
}
END_TEST

START_TEST(unacked_back_on_socket_drop)
{
    amqp_connection_state_t admin = h_connect(H), c = h_connect(H);
    char name[64], q[256];

    DECLARE_QUEUE(admin, 1, h_name(name, sizeof(name), "back3"), false, false,
                  false, q);
    three_unacked(c, q);
    h_drop(c);
    expect_three_back(admin, q);
    amqp_queue_delete(admin, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(admin, "queue.delete");
    h_close(admin);
}
END_TEST

/*
 * A nack that requeues messages from many queues at once must offer every
 * one of them again at once, to consumers on other connections too: an
 * early version dispatched only the first eight queues it touched.
 */
START_TEST(nack_requeue_many_queues_redelivers_all)
{
    enum { NQ = 12 };
    amqp_connection_state_t getter = h_connect(H), worker = h_connect(H);
    char name[64], q[NQ][256], body[16];
    struct h_event e;
    bool seen[NQ] = { false };

    for (int i = 0; i < NQ; i++) {
        snprintf(body, sizeof(body), "many%d", i);
        DECLARE_QUEUE(getter, 1, h_name(name, sizeof(name), body), false,
                      false, false, q[i]);
        PUBLISH(getter, 1, "", q[i], body);
    }
    /* One unacked message from each queue on the getter's channel... */
    for (int i = 0; i < NQ; i++) {
        ck_assert_int_eq(GET(getter, 1, q[i], false, &e), 1);
        h_event_free(&e);
    }
    /* ...a consumer on each queue on another connection... */
    for (int i = 0; i < NQ; i++)
        CONSUME(worker, 1, q[i], "", true, NULL);
    /* ...then all of them back at once. */
    amqp_basic_nack(getter, 1, 0, 1, 1);
    for (int i = 0; i < NQ; i++) {
        EXPECT_DELIVERY(worker, NULL, &e);
        ck_assert_msg(e.redelivered, "\"%s\" not marked redelivered", e.body);
        int k = atoi(e.body + 4);
        ck_assert_msg(k >= 0 && k < NQ && !seen[k], "unexpected \"%s\"",
                      e.body);
        seen[k] = true;
        h_event_free(&e);
    }
    h_close(worker);
    for (int i = 0; i < NQ; i++) {
        amqp_queue_delete(getter, 1, amqp_cstring_bytes(q[i]), 0, 0);
        EXPECT_OK(getter, "queue.delete");
    }
    h_close(getter);
}
END_TEST

START_TEST(unacked_back_ahead_of_newer_messages)
{
    amqp_connection_state_t admin = h_connect(H), c = h_connect(H);
    char name[64], q[256];

    DECLARE_QUEUE(admin, 1, h_name(name, sizeof(name), "back4"), false, false,
                  false, q);
    qos(c, 1, 2, false);
    PUBLISH_N(admin, 1, q, "k", 0, 4);
    CONSUME(c, 1, q, "", false, NULL);
    EXPECT_DELIVERY(c, "k0", NULL);
    EXPECT_DELIVERY(c, "k1", NULL);
    WAIT_COUNT(admin, 1, q, 2);
    h_drop(c);
    WAIT_COUNT(admin, 1, q, 4);
    EXPECT_GET(admin, 1, q, "k0", true);
    EXPECT_GET(admin, 1, q, "k1", true);
    EXPECT_GET(admin, 1, q, "k2", false);
    EXPECT_GET(admin, 1, q, "k3", false);
    amqp_queue_delete(admin, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(admin, "queue.delete");
    h_close(admin);
}
END_TEST

/* ---- dispatch ---- */

START_TEST(round_robin)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;
    char got[2][64] = { "", "" };

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    reopen(c, 2);
    CONSUME(c, 1, q, "A", true, NULL);
    CONSUME(c, 2, q, "B", true, NULL);
    PUBLISH_N(c, 1, q, "", 0, 6);
    for (int i = 0; i < 6; i++) {
        EXPECT_DELIVERY(c, NULL, &e);
        int k = strcmp(e.ctag, "A") == 0 ? 0 : 1;
        strncat(got[k], e.body, sizeof(got[k]) - strlen(got[k]) - 1);
        h_event_free(&e);
    }
    ck_assert_str_eq(got[0], "024");
    ck_assert_str_eq(got[1], "135");
    h_close(c);
}
END_TEST

START_TEST(round_robin_skips_consumers_without_credit)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;
    int a = 0, b = 0;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    reopen(c, 2);
    qos(c, 1, 1, false);
    CONSUME(c, 1, q, "A", false, NULL);
    CONSUME(c, 2, q, "B", true, NULL);
    PUBLISH_N(c, 1, q, "", 0, 6);
    for (int i = 0; i < 6; i++) {
        EXPECT_DELIVERY(c, NULL, &e);
        if (strcmp(e.ctag, "A") == 0)
            a++;
        else
            b++;
        h_event_free(&e);
    }
    ck_assert_int_eq(a, 1);
    ck_assert_int_eq(b, 5);
    h_close(c);
}
END_TEST

START_TEST(slow_consumer_bounded)
{
    /* A consumer whose socket is never read, with no-ack: the broker must
     * stop writing to it at its output watermark, keep the rest queued,
     * and keep serving others. */
    enum { BODY = 4000, TOTAL = 50 * 1024 * 1024, N = TOTAL / BODY };
    amqp_connection_state_t p, c2;
    struct rawsock slow;
    struct harness h;
    char name[64], q[256];
    static char body[BODY];

    SKIP_IF_REMOTE("measures the broker's memory");
    /* Its own broker, with ASan's quarantine kept small so that RSS
     * reflects what the broker holds. */
    harness_start_asan(&h, NULL, "quarantine_size_mb=1");
    p = h_connect(&h);
    DECLARE_QUEUE(p, 1, h_name(name, sizeof(name), "slow"), false, false, false,
                  q);
    ck_assert_int_eq(rs_connect(&slow, h.host, h.port, 16384), 0);
    ck_assert_int_eq(rs_handshake(&slow, NULL), 0);
    ck_assert_int_eq(rs_channel_open(&slow, 1), 0);
    ck_assert_int_eq(rs_basic_consume(&slow, 1, q, "slow", true), 0);
    ck_assert_int_eq(
        rs_expect_method(&slow, 1, RS_BASIC_CONSUME_OK, 5000, NULL), 0);

    long rss0 = harness_rss_kb(&h);
    memset(body, 's', sizeof(body));
    for (int i = 0; i < N; i++) {
        h_publish_at(__FILE__, __LINE__, p, 1, "", q, body, BODY, false, NULL);
        if (i % 500 == 499)
            ck_assert_int_eq(SYNC(p, 1, NULL, 0), 0);
    }
    ck_assert_int_eq(SYNC(p, 1, NULL, 0), 0);
    uint32_t left = QUEUE_COUNT(p, 1, q);
    long rss1 = harness_rss_kb(&h);
    fprintf(
        stderr,
        "slow consumer: %d published, %u still queued, RSS %ld -> %ld KiB\n", N,
        left, rss0, rss1);
    /* At most the watermark plus the socket buffers (16 MiB is generous)
     * may have left the queue. */
    ck_assert_msg(left >= (uint32_t)(N - (16 * 1024 * 1024) / BODY),
                  "only %u of %d messages are still queued: the broker kept "
                  "writing to a consumer that does not read",
                  left, N);
    /* The broker holds the 50 MB once, not once more in output buffers. */
    ck_assert_msg(rss1 - rss0 < (TOTAL + 40 * 1024 * 1024) / 1024,
                  "RSS grew by %ld KiB for %d KiB of messages", rss1 - rss0,
                  TOTAL / 1024);

    /* Another consumer elsewhere is served. */
    c2 = h_connect(&h);
    CONSUME(c2, 1, q, "fast", true, NULL);
    for (int i = 0; i < 100; i++)
        EXPECT_DELIVERY(c2, NULL, NULL);
    h_close(c2);
    rs_close(&slow);
    amqp_queue_delete(p, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(p, "queue.delete");
    h_close(p);
    harness_stop(&h);
}
END_TEST

START_TEST(publish_user_id_checked)
{
    /* RabbitMQ: a user-id property must name the user who logged in. */
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    amqp_basic_properties_t own = { ._flags = AMQP_BASIC_USER_ID_FLAG,
                                    .user_id = amqp_cstring_bytes("guest") };
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, "mine", 4, false, &own);
    ck_assert_int_eq(GET(c, 1, q, true, &e), 1);
    ck_assert_str_eq(e.body, "mine");
    h_event_free(&e);
    amqp_basic_properties_t other = { ._flags = AMQP_BASIC_USER_ID_FLAG,
                                      .user_id = amqp_cstring_bytes("bob") };
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, "theirs", 6, false, &other);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 1, 406,
                               "PRECONDITION_FAILED - user_id property set "
                               "to 'bob' but authenticated user was "
                               "'guest'");
    reopen(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    h_close(c);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("basic");
    TCase *tc;

    tc = h_tcase(s, "publish", 30, true);
    tcase_add_test(tc, publish_to_each_exchange_type);
    tcase_add_test(tc, publish_keeps_properties);
    tcase_add_test(tc, publish_empty_body);
    tcase_add_test(tc, publish_user_id_checked);
    tcase_add_test(tc, mandatory_unroutable_returned_first);
    tcase_add_test(tc, immediate_540);
    tcase_add_test(tc, publish_to_missing_exchange_404);
    tcase_add_test(tc, multi_frame_body_client_frame_max);
    tcase_add_test(tc, multi_frame_body_server_frame_max);
    tcase_add_test(tc, max_message_size);

    tc = h_tcase(s, "consume", 20, true);
    tcase_add_test(tc, consume_tags);
    tcase_add_test(tc, consume_duplicate_tag_530);
    tcase_add_test(tc, consume_exclusive_403);
    tcase_add_test(tc, consume_missing_queue_404);
    tcase_add_test(tc, consume_no_ack);
    tcase_add_test(tc, consume_nowait);
    tcase_add_test(tc, cancel);
    tcase_add_test(tc, server_cancel_on_queue_delete);
    tcase_add_test(tc, server_cancel_needs_capability);

    tc = h_tcase(s, "get", 20, true);
    tcase_add_test(tc, get_ok_and_empty);
    tcase_add_test(tc, get_missing_queue_404);

    tc = h_tcase(s, "ack nack reject", 20, true);
    tcase_add_test(tc, ack_single_and_multiple);
    tcase_add_test(tc, ack_zero_multiple_is_all);
    tcase_add_test(tc, nack_multiple_requeue);
    tcase_add_test(tc, reject_requeue_and_drop);
    tcase_add_test(tc, requeue_keeps_original_order);
    tcase_add_test(tc, unknown_delivery_tag_406);
    tcase_add_test(tc, double_ack_406);
    tcase_add_test(tc, delivery_tags_are_per_channel);

    tc = h_tcase(s, "recover", 20, true);
    tcase_add_test(tc, recover_requeues);
    tcase_add_test(tc, recover_async_requeues);
    tcase_add_test(tc, recover_without_requeue_540);

    tc = h_tcase(s, "qos", 20, true);
    tcase_add_test(tc, qos_per_consumer);
    tcase_add_test(tc, qos_per_consumer_only_for_later_consumers);
    tcase_add_test(tc, qos_per_channel);
    tcase_add_test(tc, qos_both_limits);
    tcase_add_test(tc, qos_zero_is_unlimited);
    tcase_add_test(tc, qos_prefetch_size_540);

    tc = h_tcase(s, "unacked on close", 20, true);
    tcase_add_test(tc, unacked_back_on_channel_close);
    tcase_add_test(tc, unacked_back_on_connection_close);
    tcase_add_test(tc, unacked_back_on_socket_drop);
    tcase_add_test(tc, nack_requeue_many_queues_redelivers_all);
    tcase_add_test(tc, unacked_back_ahead_of_newer_messages);

    tc = h_tcase(s, "dispatch", 20, true);
    tcase_add_test(tc, round_robin);
    tcase_add_test(tc, round_robin_skips_consumers_without_credit);

    tc = h_tcase(s, "backpressure", 40, false);
    tcase_add_test(tc, slow_consumer_bounded);

    return h_run(s);
}
