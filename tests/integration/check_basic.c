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

/* Close channel 'ch' and open it again: its unacked messages go back. */
static void
cycle_channel(amqp_connection_state_t c, amqp_channel_t ch)
{
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, ch, AMQP_REPLY_SUCCESS),
                   "channel.close");
    reopen(c, ch);
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
        h_assert_failed(file, line, "Failed", "expected '%s' empty, got \"%s\"",
                        q, got);
    }
}
#define EXPECT_EMPTY(c, ch, q)                                                 \
    expect_empty_at(__FILE__, __LINE__, (c), (ch), (q))

/* ---- publish ---- */

static const char *const exchange_types[] = { "direct", "fanout", "topic",
                                              "headers" };

START_TEST(publish_to_each_exchange_type)
{
    const char *type = exchange_types[_i];
    amqp_connection_state_t c;
    char x[64], q[256], tag[256];
    struct h_event e;

    h_case(type);
    c = h_connect(H);
    h_name(x, sizeof(x), type);
    DECLARE_EXCHANGE(c, 1, x, type);
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    BIND(c, 1, q, x, "rk");
    CONSUME(c, 1, q, "", false, tag);
    PUBLISH(c, 1, x, "rk", type);
    EXPECT_DELIVERY(c, type, &e);
    H_ASSERT_STR_EQ(e.exchange, x);
    H_ASSERT_STR_EQ(e.rkey, "rk");
    H_ASSERT_STR_EQ(e.ctag, tag);
    H_ASSERT(!e.redelivered, "delivered as redelivered");
    amqp_basic_ack(c, 1, e.tag, 0);
    h_event_free(&e);
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(x), 0);
    EXPECT_OK(c, "exchange.delete");
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
    cycle_channel(c, 1);
    WAIT_COUNT(c, 1, q, 1);
    EXPECT_GET(c, 1, q, "g1", true);
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

/* How a message fetched with ack is settled. */
struct settle {
    enum { END_OF_OPS, ACK, NACK, REJECT } op;
    int msg; /* which of the messages fetched (from 0); TAG_ZERO: tag 0 */
    bool multiple, requeue;
};
#define TAG_ZERO (-1)

/*
 * 'n' messages "<prefix>0".. fetched with ack on channel 1, then 'newer'
 * published behind them, settled by 'ops' in turn; with 'close_channel'
 * the channel is then closed and opened again (what is unacked goes
 * back). Then the queue holds 'back', in that order (the messages fetched
 * before come back redelivered), and nothing else. Whatever is still
 * unacked is acked at the end, one by one.
 */
static const struct settle_case {
    const char *name;
    const char *prefix;
    int n, newer;
    struct settle ops[4];
    bool close_channel;
    const char *back[5];
} settle_cases[] = {
    { "ack single, then multiple", "a", 5, 0,
      { { ACK, 1, false }, /* a1 */ { ACK, 3, true } /* a0, a2, a3 */ },
      true, { "a4" } },
    { "ack of tag 0 with multiple is all", "z", 3, 0,
      { { ACK, TAG_ZERO, true } }, true, { NULL } },
    { "nack multiple with requeue, nack without", "n", 4, 0,
      { { NACK, 2, true, true }, /* n0..n2 back */
        { NACK, 3, false, false } /* n3 dropped */ },
      false, { "n0", "n1", "n2" } },
    { "reject without requeue, reject with", "r", 3, 0,
      { { REJECT, 0, false, false }, /* dropped */
        { REJECT, 1, false, true } /* back */ },
      false, { "r1" } },
    /* Rejected out of order, with a newer message behind them: they go
     * back to their original places, ahead of it. */
    { "requeue keeps the original order", "o", 5, 1,
      { { REJECT, 3, false, true }, { REJECT, 1, false, true },
        { NACK, 4, false, true } },
      false, { "o1", "o3", "o4", "o5" } },
};

START_TEST(settle)
{
    const struct settle_case *v = &settle_cases[_i];
    amqp_connection_state_t c;
    char q[256];
    uint64_t t[8];
    bool settled[8] = { false };
    int nback = 0;

    h_case(v->name);
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, v->prefix, 0, v->n);
    WAIT_COUNT(c, 1, q, (uint32_t)v->n);
    get_unacked(c, q, v->n, t);
    if (v->newer) {
        PUBLISH_N(c, 1, q, v->prefix, v->n, v->n + v->newer);
        WAIT_COUNT(c, 1, q, (uint32_t)v->newer);
    }
    for (const struct settle *o = v->ops; o->op != END_OF_OPS; o++) {
        uint64_t tag = o->msg == TAG_ZERO ? 0 : t[o->msg];
        if (o->op == ACK)
            amqp_basic_ack(c, 1, tag, o->multiple);
        else if (o->op == NACK)
            amqp_basic_nack(c, 1, tag, o->multiple, o->requeue);
        else
            amqp_basic_reject(c, 1, tag, o->requeue);
        for (int i = 0; i < v->n; i++)
            if (o->msg == TAG_ZERO || i == o->msg ||
                (o->multiple && i < o->msg))
                settled[i] = true;
    }
    if (v->close_channel) {
        H_ASSERT(SYNC(c, 1, NULL, 0) == 0, "deliveries after the settling");
        cycle_channel(c, 1);
        memset(settled, 1, sizeof(settled));
    }
    while (nback < 5 && v->back[nback])
        nback++;
    WAIT_COUNT(c, 1, q, (uint32_t)nback);
    for (int k = 0; k < nback; k++)
        EXPECT_GET(c, 1, q, v->back[k],
                   atoi(v->back[k] + strlen(v->prefix)) < v->n);
    EXPECT_EMPTY(c, 1, q);
    for (int i = 0; i < v->n; i++)
        if (!settled[i])
            amqp_basic_ack(c, 1, t[i], 0);
    H_ASSERT(SYNC(c, 1, NULL, 0) == 0, "deliveries after the acks");
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

/* Two new queues, of "a0".."a9" and "b0".."b9". */
static void
two_queues_of_ten(amqp_connection_state_t c, char *q1, char *q2)
{
    DECLARE_QUEUE(c, 1, "", false, true, false, q1);
    DECLARE_QUEUE(c, 1, "", false, true, false, q2);
    PUBLISH_N(c, 1, q1, "a", 0, 10);
    PUBLISH_N(c, 1, q2, "b", 0, 10);
    WAIT_COUNT(c, 1, q1, 10);
    WAIT_COUNT(c, 1, q2, 10);
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

    two_queues_of_ten(c, q1, q2);
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

    two_queues_of_ten(c, q1, q2);
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

    two_queues_of_ten(c, q1, q2);
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

/* How the consumer of three unacked messages goes away. */
static const struct unacked_case {
    const char *name;
    enum { CHANNEL_CLOSE, CONNECTION_CLOSE, SOCKET_DROP } how;
} unacked_cases[] = {
    { "channel.close", CHANNEL_CLOSE },
    { "connection.close", CONNECTION_CLOSE },
    { "socket drop", SOCKET_DROP },
};

START_TEST(unacked_back_when_consumer_goes)
{
    const struct unacked_case *v = &unacked_cases[_i];
    amqp_connection_state_t admin, c;
    char name[64], q[256];

    h_case(v->name);
    admin = h_connect(H);
    c = h_connect(H);
    DECLARE_QUEUE(admin, 1, h_name(name, sizeof(name), "back"), false, false,
                  false, q);
    three_unacked(c, q);
    switch (v->how) {
    case CHANNEL_CLOSE:
        h_expect_ok_at(__FILE__, __LINE__,
                       amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS),
                       "channel.close");
        break;
    case CONNECTION_CLOSE:
        h_close(c);
        c = NULL;
        break;
    case SOCKET_DROP:
        h_drop(c);
        c = NULL;
        break;
    }
    expect_three_back(admin, q);
    if (c)
        h_close(c);
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

/* ---- refused methods ---- */

static amqp_rpc_reply_t
publish_immediate(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    ck_assert_int_eq(amqp_basic_publish(c, 1, amqp_cstring_bytes("amq.direct"),
                                        amqp_cstring_bytes("k"), 0, 1, NULL,
                                        amqp_cstring_bytes("x")),
                     AMQP_STATUS_OK);
    return H_NO_REPLY;
}

static amqp_rpc_reply_t
publish_to_missing_exchange(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    PUBLISH(c, 1, "no-such-exchange-for-roost", "k", "x");
    return H_NO_REPLY;
}

static amqp_rpc_reply_t
consume_duplicate_tag(amqp_connection_state_t c, const char *obj)
{
    char q[256];

    (void)obj;
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    CONSUME(c, 1, q, "dup", true, NULL);
    amqp_basic_consume(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes("dup"),
                       0, 1, 0, amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
consume_missing_queue(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    amqp_basic_consume(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"),
                       amqp_empty_bytes, 0, 1, 0, amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
get_missing_queue(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    return amqp_basic_get(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"),
                          1);
}

static amqp_rpc_reply_t
ack_unknown_tag(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    amqp_basic_ack(c, 1, 7, 0);
    return H_NO_REPLY;
}

/* One message fetched with ack on channel 1 (a new channel: tag 1). */
static uint64_t
one_unacked(amqp_connection_state_t c)
{
    char q[256];
    uint64_t t[1];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH_N(c, 1, q, "d", 0, 1);
    WAIT_COUNT(c, 1, q, 1);
    get_unacked(c, q, 1, t);
    H_ASSERT(t[0] == 1, "the first delivery tag on a channel is %llu",
             (unsigned long long)t[0]);
    return t[0];
}

static amqp_rpc_reply_t
ack_twice(amqp_connection_state_t c, const char *obj)
{
    uint64_t t = one_unacked(c);

    (void)obj;
    amqp_basic_ack(c, 1, t, 0);
    amqp_basic_ack(c, 1, t, 0);
    return H_NO_REPLY;
}

/* Delivery tags are per channel. */
static amqp_rpc_reply_t
ack_on_other_channel(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    reopen(c, 2);
    amqp_basic_ack(c, 2, one_unacked(c), 0);
    return H_NO_REPLY;
}

static amqp_rpc_reply_t
recover_without_requeue(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    amqp_basic_recover(c, 1, 0);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
qos_prefetch_size(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    amqp_basic_qos(c, 1, 1, 0, 0);
    return amqp_get_rpc_reply(c);
}

static const struct h_refusal refusals[] = {
    { "publish immediate", publish_immediate, 0, 540,
      "NOT_IMPLEMENTED - immediate=true" },
    { "publish to a missing exchange", publish_to_missing_exchange, 1, 404,
      "NOT_FOUND - no exchange 'no-such-exchange-for-roost' in vhost '/'" },
    { "consume with a tag in use", consume_duplicate_tag, 0, 530,
      "NOT_ALLOWED - attempt to reuse consumer tag 'dup'" },
    { "consume from a missing queue", consume_missing_queue, 1, 404,
      "NOT_FOUND - no queue 'no-such-queue-for-roost' in vhost '/'" },
    { "get from a missing queue", get_missing_queue, 1, 404,
      "NOT_FOUND - no queue 'no-such-queue-for-roost' in vhost '/'" },
    { "ack of an unknown tag", ack_unknown_tag, 1, 406,
      "PRECONDITION_FAILED - unknown delivery tag 7" },
    { "ack twice", ack_twice, 1, 406,
      "PRECONDITION_FAILED - unknown delivery tag 1" },
    { "ack on another channel", ack_on_other_channel, 2, 406,
      "PRECONDITION_FAILED - unknown delivery tag" },
    { "recover requeue=false", recover_without_requeue, 0, 540,
      "NOT_IMPLEMENTED - requeue=false" },
    { "qos prefetch_size", qos_prefetch_size, 0, 540,
      "NOT_IMPLEMENTED - prefetch_size!=0 (1)" },
};

START_TEST(refused)
{
    h_refused(&refusals[_i]);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("basic");
    TCase *tc;

    tc = h_tcase(s, "publish", 30, true);
    H_LOOP(tc, publish_to_each_exchange_type, exchange_types);
    tcase_add_test(tc, publish_keeps_properties);
    tcase_add_test(tc, publish_empty_body);
    tcase_add_test(tc, publish_user_id_checked);
    tcase_add_test(tc, mandatory_unroutable_returned_first);
    tcase_add_test(tc, multi_frame_body_client_frame_max);
    tcase_add_test(tc, multi_frame_body_server_frame_max);
    tcase_add_test(tc, max_message_size);

    tc = h_tcase(s, "consume", 20, true);
    tcase_add_test(tc, consume_tags);
    tcase_add_test(tc, consume_exclusive_403);
    tcase_add_test(tc, consume_no_ack);
    tcase_add_test(tc, consume_nowait);
    tcase_add_test(tc, cancel);
    tcase_add_test(tc, server_cancel_on_queue_delete);
    tcase_add_test(tc, server_cancel_needs_capability);

    tc = h_tcase(s, "get", 20, true);
    tcase_add_test(tc, get_ok_and_empty);

    tc = h_tcase(s, "ack nack reject", 20, true);
    H_LOOP(tc, settle, settle_cases);

    tc = h_tcase(s, "recover", 20, true);
    tcase_add_test(tc, recover_requeues);
    tcase_add_test(tc, recover_async_requeues);

    tc = h_tcase(s, "qos", 20, true);
    tcase_add_test(tc, qos_per_consumer);
    tcase_add_test(tc, qos_per_consumer_only_for_later_consumers);
    tcase_add_test(tc, qos_per_channel);
    tcase_add_test(tc, qos_both_limits);
    tcase_add_test(tc, qos_zero_is_unlimited);

    tc = h_tcase(s, "unacked on close", 20, true);
    H_LOOP(tc, unacked_back_when_consumer_goes, unacked_cases);
    tcase_add_test(tc, nack_requeue_many_queues_redelivers_all);
    tcase_add_test(tc, unacked_back_ahead_of_newer_messages);

    tc = h_tcase(s, "dispatch", 20, true);
    tcase_add_test(tc, round_robin);
    tcase_add_test(tc, round_robin_skips_consumers_without_credit);

    tc = h_tcase(s, "refused", 20, true);
    H_LOOP(tc, refused, refusals);

    tc = h_tcase(s, "backpressure", 40, false);
    tcase_add_test(tc, slow_consumer_bounded);

    return h_run(s);
}
