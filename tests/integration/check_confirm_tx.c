/*
 * SPDX-License-Identifier: Apache-2.0
 * Publisher confirms, transactions and the disk alarm against a real
 * roostd, with RabbitMQ 3.10 as the reference (issue 5):
 *
 * - confirm.select (also with nowait: no select-ok) numbers the channel's
 *   publishes 1, 2, ... and every one is confirmed exactly once, in
 *   increasing order (RabbitMQ may confirm an unroutable publish ahead of
 *   earlier routed ones); publishes pipelined in one write are acked in
 *   batches (multiple=true; asserted against roostd only, RabbitMQ may
 *   ack them one by one);
 * - an unroutable mandatory publish gets its basic.return before the ack
 *   that covers it, an unroutable non-mandatory one is simply acked;
 * - a queue with x-overflow=reject-publish that is full gets basic.nack;
 * - a persistent message for a durable queue is acked after the store
 *   synced it, and a transient one behind it is not held back;
 * - confirm and tx mode exclude each other (406), tx.commit and
 *   tx.rollback need tx mode (406), with RabbitMQ's reply texts;
 * - in tx mode publishes reach their queues at tx.commit and never after
 *   tx.rollback; acks, nacks and rejects take effect at tx.commit only,
 *   and after tx.rollback (or a channel closed before the commit) the
 *   messages they named are unacked again, while basic.recover leaves a
 *   message whose ack the transaction holds alone;
 * - with the free disk space below disk_free_limit, a publishing
 *   connection that announced the connection.blocked capability gets
 *   connection.blocked "low on disk", one that did not is blocked
 *   silently, neither message is enqueued, and roostd's log says why.
 *
 * Confirms, returns and connection.blocked are read with the harness's
 * h_next and kept by value here (struct cev). No RPC is made on a
 * connection while confirms are due, so that rabbitmq-c never has to
 * queue frames on the side.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>

#include "tests/integration/harness.h"
#include "tests/integration/rawsock.h"

/* ---- reading what the broker sends ---- */

/* One method from the broker, as this file needs it. */
struct cev {
    amqp_channel_t channel;
    amqp_method_number_t id;
    uint64_t tag;                  /* ack, nack, deliver */
    bool multiple, requeue;        /* ack, nack */
    bool redelivered;              /* deliver */
    int code;                      /* return, channel or connection.close */
    char text[256];                /* reply text; connection.blocked's reason */
    char exchange[256], rkey[256]; /* return */
    char body[64];                 /* content, cut short */
};

/* The next method within 'timeout_ms' (the harness's h_next), kept by
 * value with its body cut short: 1, 0 on timeout, -1 when the connection
 * is gone. */
/* Keep harness event 'h' by value in *e, and free it. */
static void
cev_from(struct cev *e, struct h_event *h)
{
    memset(e, 0, sizeof(*e));
    e->channel = h->channel;
    e->id = h->id;
    e->tag = h->tag;
    e->multiple = h->multiple;
    e->requeue = h->requeue;
    e->redelivered = h->redelivered;
    e->code = h->code;
    memcpy(e->text, h->text, sizeof(e->text));
    memcpy(e->exchange, h->exchange, sizeof(e->exchange));
    memcpy(e->rkey, h->rkey, sizeof(e->rkey));
    if (h->body)
        snprintf(e->body, sizeof(e->body), "%s", h->body);
    h_event_free(h);
}

static int
cnext(amqp_connection_state_t c, int timeout_ms, struct cev *e)
{
    struct h_event h;
    int n = h_next(c, timeout_ms, &h);

    memset(e, 0, sizeof(*e));
    if (n == 1)
        cev_from(e, &h);
    return n;
}

static const char *
cev_str(const struct cev *e, char *buf, size_t len)
{
    switch (e->id) {
    case AMQP_BASIC_ACK_METHOD:
    case AMQP_BASIC_NACK_METHOD:
        snprintf(buf, len, "%s tag %llu multiple=%d on channel %u",
                 h_method_name(e->id), (unsigned long long)e->tag, e->multiple,
                 e->channel);
        break;
    case AMQP_BASIC_RETURN_METHOD:
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD:
        snprintf(buf, len, "%s %d \"%s\" on channel %u", h_method_name(e->id),
                 e->code, e->text, e->channel);
        break;
    default:
        snprintf(buf, len, "%s on channel %u", h_method_name(e->id),
                 e->channel);
        break;
    }
    return buf;
}

/* The next method (within 5 s) must be 'id'; returned in *e. */
static void
cexpect_at(const char *file, int line, amqp_connection_state_t c,
           amqp_method_number_t id, struct cev *e)
{
    char buf[512];
    int n = cnext(c, 5000, e);

    H_ASSERT_AT(file, line, n == 1, "expected %s, got %s", h_method_name(id),
                n == 0 ? "nothing within 5 s" : "a closed connection");
    H_ASSERT_AT(file, line, e->id == id, "expected %s, got %s",
                h_method_name(id), cev_str(e, buf, sizeof(buf)));
}
#define CEXPECT(c, id, e) cexpect_at(__FILE__, __LINE__, (c), (id), (e))

/* Nothing may be pending on 'c': the next method is the reply to the
 * harness's sync on channel 'ch'. */
static void
cquiet_at(const char *file, int line, amqp_connection_state_t c,
          amqp_channel_t ch)
{
    struct h_event h[1];
    struct cev e;
    char buf[512] = "-";
    int n = h_sync_at(file, line, c, ch, h, 1);

    if (n > 0) {
        cev_from(&e, &h[0]);
        cev_str(&e, buf, sizeof(buf));
    }
    H_ASSERT_AT(file, line, n == 0,
                "%d unexpected methods before the sync reply, the first %s",
                n, buf);
}
#define CQUIET(c, ch) cquiet_at(__FILE__, __LINE__, (c), (ch))

/*
 * End a transaction test: with 'settled', close channel 1 of 'c' and
 * check that nothing came back to 'q' with it; then delete 'q' and close
 * both connections.
 */
static void
finish_at(const char *file, int line, amqp_connection_state_t c,
          amqp_connection_state_t obs, const char *q, bool settled)
{
    if (settled) {
        h_expect_ok_at(file, line,
                       amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS),
                       "channel.close");
        uint32_t left = h_queue_count_at(file, line, obs, 1, q, NULL);
        H_ASSERT_AT(file, line, left == 0,
                    "%u messages came back to '%s' when the channel closed",
                    left, q);
    }
    amqp_queue_delete(obs, 1, amqp_cstring_bytes(q), 0, 0);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(obs), "queue.delete");
    h_close_at(file, line, c);
    h_close_at(file, line, obs);
}
#define FINISH(c, obs, q, settled)                                             \
    finish_at(__FILE__, __LINE__, (c), (obs), (q), (settled))

/* ---- publisher confirms ---- */

enum { MAX_TAGS = 512 };

/*
 * The confirms of one channel: tags 1..n were published. Each ack or nack
 * must name a tag that is still open, and unless 'any_order' is set, one
 * above every earlier one (increasing order); multiple settles every tag
 * up to it that is still open, otherwise only itself. RabbitMQ confirms
 * an unroutable publish at once but a routed one when its queue has
 * taken it, so across the two it may go back to a lower tag.
 */
struct confirms {
    int n;
    bool any_order;
    char st[MAX_TAGS + 1]; /* 0 open, 'a' acked, 'n' nacked */
    uint64_t last;
    int settled, acks, nacks, multiples;
    int nack_requeue; /* the requeue flag of the last nack */
};

/* Apply an ack or nack; returns how many tags it settled. */
static int
confirm_apply_at(const char *file, int line, struct confirms *t,
                 const struct cev *e)
{
    char buf[512];
    bool ack = e->id == AMQP_BASIC_ACK_METHOD;
    int newly = 0;

    cev_str(e, buf, sizeof(buf));
    H_ASSERT_AT(file, line, e->tag >= 1 && e->tag <= (uint64_t)t->n,
                "%s: only tags 1..%d were published", buf, t->n);
    H_ASSERT_AT(file, line, t->any_order || e->tag > t->last,
                "%s after a confirm of tag %llu: not in increasing order", buf,
                (unsigned long long)t->last);
    H_ASSERT_AT(file, line, t->st[e->tag] == 0, "%s: tag %llu was confirmed "
                "before", buf, (unsigned long long)e->tag);
    for (uint64_t k = e->multiple ? 1 : e->tag; k <= e->tag; k++)
        if (t->st[k] == 0) {
            t->st[k] = ack ? 'a' : 'n';
            newly++;
        }
    t->settled += newly;
    t->last = e->tag;
    if (ack) {
        t->acks++;
    } else {
        t->nacks++;
        t->nack_requeue = e->requeue;
    }
    if (e->multiple)
        t->multiples++;
    return newly;
}

/* Read acks and nacks on 'ch' until all of tags 1..t->n are settled. */
static void
wait_confirms_at(const char *file, int line, amqp_connection_state_t c,
                 amqp_channel_t ch, struct confirms *t)
{
    struct cev e;
    char buf[512];

    while (t->settled < t->n) {
        int n = cnext(c, 5000, &e);
        H_ASSERT_AT(file, line, n == 1,
                    "%d of %d publishes confirmed, then %s", t->settled, t->n,
                    n == 0 ? "nothing within 5 s" : "the connection closed");
        H_ASSERT_AT(file, line,
                    (e.id == AMQP_BASIC_ACK_METHOD ||
                     e.id == AMQP_BASIC_NACK_METHOD) &&
                        e.channel == ch,
                    "waiting for confirms on channel %u, got %s", ch,
                    cev_str(&e, buf, sizeof(buf)));
        confirm_apply_at(file, line, t, &e);
    }
}
#define WAIT_CONFIRMS(c, ch, t)                                                \
    wait_confirms_at(__FILE__, __LINE__, (c), (ch), (t))

/* Tags that must have been acked ('a') or nacked ('n'). */
static void
expect_outcome_at(const char *file, int line, const struct confirms *t,
                  int tag, char want)
{
    H_ASSERT_AT(file, line, t->st[tag] == want, "tag %d was %s, expected %s",
                tag,
                t->st[tag] == 'a'   ? "acked"
                : t->st[tag] == 'n' ? "nacked"
                                    : "not confirmed",
                want == 'a' ? "an ack" : "a nack");
}
#define EXPECT_ACKED(t, tag)                                                   \
    expect_outcome_at(__FILE__, __LINE__, (t), (tag), 'a')
#define EXPECT_NACKED(t, tag)                                                  \
    expect_outcome_at(__FILE__, __LINE__, (t), (tag), 'n')

static void
reopen(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_channel_open(c, ch);
    EXPECT_OK(c, "channel.open");
}

static void
confirm_select(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_confirm_select(c, ch);
    EXPECT_OK(c, "confirm.select");
}

static void
frame_put(struct rs_buf *out, uint8_t type, uint16_t ch,
          const struct rs_buf *payload)
{
    rb_u8(out, type);
    rb_u16(out, ch);
    rb_u32(out, (uint32_t)payload->len);
    rb_raw(out, payload->p, payload->len);
    rb_u8(out, 0xCE);
}

/* 'n' publishes of "p<i>" to 'q', encoded by hand and written to the
 * socket of 'c' with one send() (the broker reads many at once). */
static void
publish_pipelined(amqp_connection_state_t c, amqp_channel_t ch, const char *q,
                  int n)
{
    struct rs_buf all, p;
    char body[32];
    size_t off = 0;

    rb_init(&all);
    rb_init(&p);
    for (int i = 0; i < n; i++) {
        int len = snprintf(body, sizeof(body), "p%d", i);
        p.len = 0;
        rb_u16(&p, 60); /* basic.publish */
        rb_u16(&p, 40);
        rb_u16(&p, 0);
        rb_shortstr(&p, "");
        rb_shortstr(&p, q);
        rb_u8(&p, 0); /* neither mandatory nor immediate */
        frame_put(&all, RS_FRAME_METHOD, ch, &p);
        p.len = 0;
        rb_u16(&p, 60);
        rb_u16(&p, 0);
        rb_u64(&p, (uint64_t)len);
        rb_u16(&p, 0); /* no properties */
        frame_put(&all, RS_FRAME_HEADER, ch, &p);
        p.len = 0;
        rb_raw(&p, body, (size_t)len);
        frame_put(&all, RS_FRAME_BODY, ch, &p);
    }
    while (off < all.len) {
        ssize_t w = send(h_fd(c), all.p + off, all.len - off, MSG_NOSIGNAL);
        ck_assert_msg(w > 0 || errno == EINTR, "send: %s", strerror(errno));
        if (w > 0)
            off += (size_t)w;
    }
    rb_free(&p);
    rb_free(&all);
}

START_TEST(confirm_acks_every_tag_once_in_order)
{
    enum { N = 10 };
    amqp_connection_state_t c = h_connect(H);
    amqp_confirm_select_ok_t *ok;
    struct confirms t = { .n = N };
    char q[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    ok = amqp_confirm_select(c, 1);
    EXPECT_OK(c, "confirm.select");
    ck_assert_msg(ok != NULL, "no confirm.select-ok");
    PUBLISH_N(c, 1, q, "c", 0, N);
    WAIT_CONFIRMS(c, 1, &t);
    ck_assert_msg(t.nacks == 0, "%d nacks for transient publishes", t.nacks);
    for (int k = 1; k <= N; k++)
        EXPECT_ACKED(&t, k);
    /* No confirm beyond the last tag, none twice. */
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), N);
    /* The numbering continues: the next publish is tag N + 1. */
    t.n = N + 1;
    PUBLISH(c, 1, "", q, "one-more");
    WAIT_CONFIRMS(c, 1, &t);
    EXPECT_ACKED(&t, N + 1);
    CQUIET(c, 1);
    h_close(c);
}
END_TEST

START_TEST(confirm_select_nowait)
{
    enum { N = 5 };
    amqp_connection_state_t c = h_connect(H);
    amqp_confirm_select_t m = { .nowait = 1 };
    struct confirms t = { .n = N };
    char q[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    SEND(c, 1, AMQP_CONFIRM_SELECT_METHOD, &m);
    /* No select-ok: the next thing on the wire is the sync reply. */
    CQUIET(c, 1);
    PUBLISH_N(c, 1, q, "w", 0, N);
    WAIT_CONFIRMS(c, 1, &t);
    for (int k = 1; k <= N; k++)
        EXPECT_ACKED(&t, k);
    CQUIET(c, 1);
    h_close(c);
}
END_TEST

START_TEST(confirm_pipelined_publishes_batched)
{
    enum { N = 200 };
    amqp_connection_state_t c = h_connect(H);
    struct confirms t = { .n = N };
    char q[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    confirm_select(c, 1);
    publish_pipelined(c, 1, q, N);
    WAIT_CONFIRMS(c, 1, &t);
    ck_assert_msg(t.nacks == 0, "%d nacks", t.nacks);
    for (int k = 1; k <= N; k++)
        EXPECT_ACKED(&t, k);
    fprintf(stderr, "%d pipelined publishes: %d acks, %d with multiple=true\n",
            N, t.acks, t.multiples);
    if (!harness_is_remote())
        ck_assert_msg(t.multiples >= 1,
                      "%d publishes in one write got %d acks, none with "
                      "multiple=true: roostd did not batch them",
                      N, t.acks);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), N);
    h_close(c);
}
END_TEST

START_TEST(confirm_return_before_ack)
{
    /* tag 1 routable, 2 mandatory and unroutable, 3 mandatory and
     * routable, 4 unroutable but not mandatory. */
    amqp_connection_state_t c = h_connect(H);
    struct confirms t = { .n = 4, .any_order = true };
    struct cev e;
    char q[256], buf[512];
    int returns = 0;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    confirm_select(c, 1);
    PUBLISH(c, 1, "", q, "r1");
    h_publish_at(__FILE__, __LINE__, c, 1, "amq.direct", "nobody-binds-this",
                 "m2", 2, true, NULL);
    h_publish_at(__FILE__, __LINE__, c, 1, "", q, "r3", 2, true, NULL);
    PUBLISH(c, 1, "amq.direct", "nobody-binds-this", "u4");
    while (t.settled < t.n) {
        int n = cnext(c, 5000, &e);
        ck_assert_msg(n == 1, "%d of 4 publishes confirmed, then %s",
                      t.settled,
                      n == 0 ? "nothing within 5 s" : "the connection closed");
        if (e.id == AMQP_BASIC_RETURN_METHOD) {
            returns++;
            ck_assert_msg(returns == 1, "a second basic.return (\"%s\")",
                          e.body);
            ck_assert_int_eq(e.channel, 1);
            ck_assert_int_eq(e.code, 312);
            ck_assert_str_eq(e.text, "NO_ROUTE");
            ck_assert_str_eq(e.exchange, "amq.direct");
            ck_assert_str_eq(e.rkey, "nobody-binds-this");
            ck_assert_str_eq(e.body, "m2");
            ck_assert_msg(t.st[2] == 0,
                          "the basic.return of tag 2 came after its confirm");
            continue;
        }
        cev_str(&e, buf, sizeof(buf));
        ck_assert_msg(e.channel == 1 && (e.id == AMQP_BASIC_ACK_METHOD ||
                                         e.id == AMQP_BASIC_NACK_METHOD),
                      "got %s", buf);
        confirm_apply_at(__FILE__, __LINE__, &t, &e);
        ck_assert_msg(t.st[2] == 0 || returns == 1,
                      "%s covers tag 2 before its basic.return", buf);
    }
    ck_assert_int_eq(returns, 1);
    for (int k = 1; k <= 4; k++)
        EXPECT_ACKED(&t, k);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 2);
    h_close(c);
}
END_TEST

START_TEST(confirm_nack_on_reject_publish)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_table_entry_t args[2];
    struct confirms t = { .n = 2 };
    struct h_event g;
    char q[256];

    args[0].key = amqp_cstring_bytes("x-max-length");
    args[0].value.kind = AMQP_FIELD_KIND_I32;
    args[0].value.value.i32 = 1;
    args[1] = h_entry_str("x-overflow", "reject-publish");
    h_declare_queue_at(__FILE__, __LINE__, c, 1, "", false, true, false,
                       h_table(args, 2), q, NULL, NULL);
    confirm_select(c, 1);
    PUBLISH(c, 1, "", q, "first");
    PUBLISH(c, 1, "", q, "second");
    WAIT_CONFIRMS(c, 1, &t);
    EXPECT_ACKED(&t, 1);
    EXPECT_NACKED(&t, 2);
    /* Meaningless in a publisher nack; RabbitMQ sends true (its record's
     * default), roostd false. */
    fprintf(stderr, "reject-publish: basic.nack with requeue=%d\n",
            t.nack_requeue);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 1);
    ck_assert_int_eq(GET(c, 1, q, true, &g), 1);
    ck_assert_str_eq(g.body, "first");
    h_event_free(&g);
    /* With room again, the next publish is taken and acked. */
    t.n = 3;
    PUBLISH(c, 1, "", q, "third");
    WAIT_CONFIRMS(c, 1, &t);
    EXPECT_ACKED(&t, 3);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 1);
    h_close(c);
}
END_TEST

/* reject-publish-dlx: the publish that does not fit is nacked and
 * dead-lettered (x-death reason maxlen), as in RabbitMQ 3.10. */
START_TEST(confirm_nack_on_reject_publish_dlx)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_table_entry_t args[3];
    struct confirms t = { .n = 2 };
    struct h_event g;
    char q[256], dlx[64], dlq[256];

    h_name(dlx, sizeof(dlx), "rpdlx");
    DECLARE_EXCHANGE(c, 1, dlx, "fanout");
    DECLARE_QUEUE(c, 1, "", false, true, false, dlq);
    BIND(c, 1, dlq, dlx, "");
    args[0].key = amqp_cstring_bytes("x-max-length");
    args[0].value.kind = AMQP_FIELD_KIND_I32;
    args[0].value.value.i32 = 1;
    args[1] = h_entry_str("x-overflow", "reject-publish-dlx");
    args[2] = h_entry_str("x-dead-letter-exchange", dlx);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, "", false, true, false,
                       h_table(args, 3), q, NULL, NULL);
    confirm_select(c, 1);
    PUBLISH(c, 1, "", q, "first");
    PUBLISH(c, 1, "", q, "second");
    WAIT_CONFIRMS(c, 1, &t);
    EXPECT_ACKED(&t, 1);
    EXPECT_NACKED(&t, 2);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 1);
    WAIT_COUNT(c, 1, dlq, 1);
    ck_assert_int_eq(GET(c, 1, dlq, true, &g), 1);
    ck_assert_str_eq(g.body, "second");
    /* x-death, x-first-death-exchange, -queue and -reason */
    ck_assert_int_eq(g.nheaders, 4);
    h_event_free(&g);
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(dlx), 0);
    EXPECT_OK(c, "exchange.delete");
    h_close(c);
}
END_TEST

START_TEST(confirm_persistent_after_store)
{
    /* A persistent message that reaches a durable queue is acked once the
     * store has synced it; one that needs no disk is acked at once, even
     * behind it (then alone, multiple=false). Every publish is acked. */
    amqp_connection_state_t c;
    amqp_basic_properties_t persistent;
    /* Out of order: 2 and 3 may be told before 1 is synced. */
    struct confirms t = { .n = 4, .any_order = true };
    char qd[256], qt[256], x[64];

    c = h_connect(H);
    memset(&persistent, 0, sizeof(persistent));
    persistent._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    persistent.delivery_mode = 2;
    DECLARE_QUEUE(c, 1, "", true, false, false, qd);
    DECLARE_QUEUE(c, 1, "", false, true, false, qt);
    DECLARE_EXCHANGE(c, 1, h_name(x, sizeof(x), "both"), "fanout");
    BIND(c, 1, qd, x, "");
    BIND(c, 1, qt, x, "");
    confirm_select(c, 1);
    h_publish_at(__FILE__, __LINE__, c, 1, "", qd, "pd", 2, false,
                 &persistent);                /* 1: stored */
    PUBLISH(c, 1, "", qd, "td");              /* 2: transient */
    h_publish_at(__FILE__, __LINE__, c, 1, "", qt, "pt", 2, false,
                 &persistent);                /* 3: non-durable queue */
    h_publish_at(__FILE__, __LINE__, c, 1, x, "", "pboth", 5, false,
                 &persistent);                /* 4: one queue durable */
    WAIT_CONFIRMS(c, 1, &t);
    EXPECT_ACKED(&t, 1);
    EXPECT_ACKED(&t, 2);
    EXPECT_ACKED(&t, 3);
    EXPECT_ACKED(&t, 4);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, qd), 3);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, qt), 2);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(qd), 0, 0);
    EXPECT_OK(c, "queue.delete");
    h_close(c);
}
END_TEST

START_TEST(confirm_mixed_persistent_transient)
{
    /* Persistent and transient publishes mixed on one channel: the
     * transient ones are told without waiting for the disk, so confirms
     * come out of order; every tag is still told exactly once, and no
     * ack names a tag told before (struct confirms checks both). */
    amqp_connection_state_t c;
    amqp_basic_properties_t persistent;
    struct confirms t = { .n = 300, .any_order = true };
    char qd[256];

    c = h_connect(H);
    memset(&persistent, 0, sizeof(persistent));
    persistent._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    persistent.delivery_mode = 2;
    DECLARE_QUEUE(c, 1, "", true, false, false, qd);
    confirm_select(c, 1);
    for (int i = 1; i <= t.n; i++) {
        if ((i * 7919) % 3 == 0)
            PUBLISH(c, 1, "", qd, "t");
        else
            h_publish_at(__FILE__, __LINE__, c, 1, "", qd, "p", 1, false,
                         &persistent);
    }
    WAIT_CONFIRMS(c, 1, &t);
    ck_assert_int_eq(t.nacks, 0);
    for (int i = 1; i <= t.n; i++)
        EXPECT_ACKED(&t, i);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, qd), (uint32_t)t.n);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(qd), 0, 0);
    EXPECT_OK(c, "queue.delete");
    h_close(c);
}
END_TEST

START_TEST(confirm_and_tx_exclude_each_other)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    amqp_confirm_select(c, 1);
    EXPECT_CHANNEL_CLOSE(c, 1, 406,
                         "PRECONDITION_FAILED - cannot switch from tx to "
                         "confirm mode");
    reopen(c, 1);
    confirm_select(c, 1);
    confirm_select(c, 1); /* again: fine */
    amqp_tx_select(c, 1);
    EXPECT_CHANNEL_CLOSE(c, 1, 406,
                         "PRECONDITION_FAILED - cannot switch from confirm "
                         "to tx mode");
    reopen(c, 1);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select again");
    /* The connection survived all of it. */
    CQUIET(c, 1);
    h_close(c);
}
END_TEST

/* ---- transactions ---- */

START_TEST(tx_publishes_at_commit)
{
    enum { N = 5 };
    amqp_connection_state_t c = h_connect(H), obs = h_connect(H);
    char name[64], q[256];

    DECLARE_QUEUE(obs, 1, h_name(name, sizeof(name), "txpub"), false, false,
                  false, q);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    PUBLISH_N(c, 1, q, "t", 0, N);
    CQUIET(c, 1);
    ck_assert_msg(QUEUE_COUNT(obs, 1, q) == 0,
                  "publishes reached the queue before tx.commit");
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), N);
    /* The channel stays transactional: the next publish waits again. */
    PUBLISH(c, 1, "", q, "t-next");
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), N);
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), N + 1);
    for (int i = 0; i <= N; i++) {
        struct h_event g;
        char want[16];
        snprintf(want, sizeof(want), i < N ? "t%d" : "t-next", i);
        ck_assert_int_eq(GET(obs, 1, q, true, &g), 1);
        ck_assert_str_eq(g.body, want);
        h_event_free(&g);
    }
    FINISH(c, obs, q, false);
}
END_TEST

START_TEST(tx_rollback_discards_publishes)
{
    amqp_connection_state_t c = h_connect(H), obs = h_connect(H);
    char name[64], q[256];

    DECLARE_QUEUE(obs, 1, h_name(name, sizeof(name), "txrb"), false, false,
                  false, q);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    PUBLISH_N(c, 1, q, "gone", 0, 3);
    amqp_tx_rollback(c, 1);
    EXPECT_OK(c, "tx.rollback");
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), 0);
    /* A commit after the rollback has nothing to commit. */
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), 0);
    /* Pending publishes also go when the channel closes. */
    PUBLISH_N(c, 1, q, "gone", 3, 5);
    FINISH(c, obs, q, true);
}
END_TEST

/* Expect deliveries of "<prefix>0".."<prefix><n-1>" with tags from
 * 'first' on, redelivered or not. */
static void
take_at(const char *file, int line, amqp_connection_state_t c,
        const char *prefix, int n, uint64_t first, bool redelivered)
{
    struct cev e;
    char want[64];

    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "%s%d", prefix, i);
        cexpect_at(file, line, c, AMQP_BASIC_DELIVER_METHOD, &e);
        H_ASSERT_AT(file, line,
                    strcmp(e.body, want) == 0 &&
                        e.tag == first + (uint64_t)i &&
                        e.redelivered == redelivered,
                    "expected \"%s\" with tag %llu (redelivered=%d), got "
                    "\"%s\" with tag %llu (redelivered=%d)",
                    want, (unsigned long long)(first + (uint64_t)i),
                    redelivered, e.body, (unsigned long long)e.tag,
                    e.redelivered);
    }
}
#define TAKE(c, prefix, n, first, redelivered)                                 \
    take_at(__FILE__, __LINE__, (c), (prefix), (n), (first), (redelivered))

START_TEST(tx_acks_take_effect_at_commit)
{
    amqp_connection_state_t c = h_connect(H), obs = h_connect(H);
    char name[64], q[256];

    DECLARE_QUEUE(obs, 1, h_name(name, sizeof(name), "txack"), false, false,
                  false, q);
    PUBLISH_N(obs, 1, q, "k", 0, 3);
    WAIT_COUNT(obs, 1, q, 3);
    CONSUME(c, 1, q, "", false, NULL);
    TAKE(c, "k", 3, 1, false);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");

    /* Acked, rolled back: still unacked, so basic.recover redelivers. */
    amqp_basic_ack(c, 1, 3, 1);
    CQUIET(c, 1);
    amqp_tx_rollback(c, 1);
    EXPECT_OK(c, "tx.rollback");
    amqp_basic_recover(c, 1, 1);
    EXPECT_OK(c, "basic.recover");
    TAKE(c, "k", 3, 4, true);

    /* Acked, never committed: the channel's close requeues them. */
    amqp_basic_ack(c, 1, 6, 1);
    CQUIET(c, 1);
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), 0);
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS),
                   "channel.close");
    WAIT_COUNT(obs, 1, q, 3);

    /* Acked and committed: gone for good. */
    reopen(c, 1);
    CONSUME(c, 1, q, "", false, NULL);
    TAKE(c, "k", 3, 1, true);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    amqp_basic_ack(c, 1, 3, 1);
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    FINISH(c, obs, q, true);
}
END_TEST

START_TEST(tx_reject_nack_take_effect_at_commit)
{
    amqp_connection_state_t c = h_connect(H), obs = h_connect(H);
    char name[64], q[256];
    struct h_event g;
    uint64_t t[4];

    DECLARE_QUEUE(obs, 1, h_name(name, sizeof(name), "txrej"), false, false,
                  false, q);
    PUBLISH_N(obs, 1, q, "r", 0, 4);
    WAIT_COUNT(obs, 1, q, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(GET(c, 1, q, false, &g), 1);
        t[i] = g.tag;
        h_event_free(&g);
    }
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    amqp_basic_reject(c, 1, t[0], 1);  /* r0 back */
    amqp_basic_nack(c, 1, t[1], 0, 1); /* r1 back */
    amqp_basic_nack(c, 1, t[2], 0, 0); /* r2 dropped */
    amqp_basic_ack(c, 1, t[3], 0);     /* r3 done */
    CQUIET(c, 1);
    ck_assert_msg(QUEUE_COUNT(obs, 1, q) == 0,
                  "a requeue inside the transaction took effect before "
                  "tx.commit");
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    WAIT_COUNT(obs, 1, q, 2);
    ck_assert_int_eq(GET(obs, 1, q, true, &g), 1);
    ck_assert_str_eq(g.body, "r0");
    ck_assert(g.redelivered);
    h_event_free(&g);
    ck_assert_int_eq(GET(obs, 1, q, true, &g), 1);
    ck_assert_str_eq(g.body, "r1");
    ck_assert(g.redelivered);
    h_event_free(&g);
    /* r2 and r3 are settled: nothing comes back with the channel. */
    FINISH(c, obs, q, true);
}
END_TEST

START_TEST(tx_recover_leaves_held_acks)
{
    /* An ack held by the transaction has taken its message out of the
     * channel's unacked ones: basic.recover redelivers only the others,
     * and the commit then acks it (RabbitMQ's rabbit_channel). */
    amqp_connection_state_t c = h_connect(H), obs = h_connect(H);
    char name[64], q[256];
    struct cev e;

    DECLARE_QUEUE(obs, 1, h_name(name, sizeof(name), "txrec"), false, false,
                  false, q);
    PUBLISH_N(obs, 1, q, "h", 0, 2);
    WAIT_COUNT(obs, 1, q, 2);
    CONSUME(c, 1, q, "", false, NULL);
    TAKE(c, "h", 2, 1, false);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    amqp_basic_ack(c, 1, 1, 0); /* h0, held */
    amqp_basic_recover(c, 1, 1);
    EXPECT_OK(c, "basic.recover");
    CEXPECT(c, AMQP_BASIC_DELIVER_METHOD, &e);
    ck_assert_msg(strcmp(e.body, "h1") == 0 && e.redelivered,
                  "basic.recover redelivered \"%s\" (redelivered=%d), "
                  "expected only h1: the held ack of h0 was dropped",
                  e.body, e.redelivered);
    ck_assert_uint_eq(e.tag, 3);
    CQUIET(c, 1);
    amqp_basic_ack(c, 1, 3, 0); /* h1, held */
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    FINISH(c, obs, q, true);
}
END_TEST

START_TEST(tx_double_ack_406)
{
    /* An ack held by the transaction settles its tag: acking it again
     * before the commit names an unknown tag, as in RabbitMQ. */
    amqp_connection_state_t c = h_connect(H);
    char q[256], want[128];
    struct h_event g;
    uint64_t tag;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    PUBLISH(c, 1, "", q, "once");
    WAIT_COUNT(c, 1, q, 1);
    ck_assert_int_eq(GET(c, 1, q, false, &g), 1);
    tag = g.tag;
    h_event_free(&g);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    amqp_basic_ack(c, 1, tag, 0);
    amqp_basic_ack(c, 1, tag, 0);
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - unknown delivery tag %llu",
             (unsigned long long)tag);
    EXPECT_ASYNC_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
}
END_TEST

START_TEST(tx_commit_rollback_need_tx_406)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_tx_commit(c, 1);
    EXPECT_CHANNEL_CLOSE(c, 1, 406,
                         "PRECONDITION_FAILED - channel is not transactional");
    reopen(c, 1);
    amqp_tx_rollback(c, 1);
    EXPECT_CHANNEL_CLOSE(c, 1, 406,
                         "PRECONDITION_FAILED - channel is not transactional");
    /* A confirm-mode channel is not transactional either. */
    reopen(c, 1);
    confirm_select(c, 1);
    amqp_tx_commit(c, 1);
    EXPECT_CHANNEL_CLOSE(c, 1, 406,
                         "PRECONDITION_FAILED - channel is not transactional");
    h_close(c);
}
END_TEST

/* ---- the disk alarm ---- */

/* Poll roostd's log (at most 5 s) for 'needle'. */
static void
wait_log_at(const char *file, int line, const struct harness *h,
            const char *needle)
{
    uint64_t deadline = h_now_ms() + 5000;
    while (!harness_log_contains(h, needle) && h_now_ms() < deadline)
        h_sleep_ms(5);
    H_ASSERT_AT(file, line, harness_log_contains(h, needle),
                "roostd's log does not say \"%s\"", needle);
}
#define WAIT_LOG(h, needle) wait_log_at(__FILE__, __LINE__, (h), (needle))

START_TEST(disk_alarm_blocks_publisher)
{
    /* A limit far above the free space of any disk here (the largest
     * roostd accepts is 2^50). */
    const char *limit = "1000000000000000";
    char arg[64];
    struct harness h;
    struct statvfs sv;
    const char *tmp = getenv("ROOST_TEST_SESSION");
    amqp_connection_state_t pub, quiet, obs;
    char name[64], q[256];
    struct cev e;

    SKIP_IF_REMOTE("a roostd setting");
    ck_assert_msg(statvfs(tmp && tmp[0] ? tmp : "/tmp", &sv) == 0,
                  "statvfs: %s", strerror(errno));
    ck_assert_msg((double)sv.f_bavail * (double)sv.f_frsize < 1e15,
                  "more than 10^15 bytes free: raise the limit");
    snprintf(arg, sizeof(arg), "disk_free_limit.absolute=%s", limit);
    if (!harness_start(&h, ARGS("--set", arg)))
        return;
    WAIT_LOG(&h, "disk resource limit alarm set");
    ck_assert_msg(harness_log_contains(&h, limit),
                  "the alarm line does not name the limit %s", limit);

    obs = h_connect(&h);
    DECLARE_QUEUE(obs, 1, h_name(name, sizeof(name), "disk"), false, false,
                  false, q);

    /* A publisher that can hear it is told why it is blocked. */
    pub = h_connect_blocked_cap(&h);
    PUBLISH(pub, 1, "", q, "blocked");
    CEXPECT(pub, AMQP_CONNECTION_BLOCKED_METHOD, &e);
    ck_assert_int_eq(e.channel, 0);
    ck_assert_str_eq(e.text, "low on disk");
    WAIT_LOG(&h, "blocked (low on disk)");
    /* Not read any further: nothing reached the queue. */
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), 0);

    /* One that cannot hear it is blocked all the same, silently. */
    quiet = h_connect(&h);
    PUBLISH(quiet, 1, "", q, "quiet");
    EXPECT_SILENCE(quiet, 200);
    ck_assert_uint_eq(QUEUE_COUNT(obs, 1, q), 0);

    /* A connection that does not publish is not blocked. */
    ck_assert_int_eq(SYNC(obs, 1, NULL, 0), 0);
    h_close(obs);
    /* The blocked ones are not read: they can only drop. */
    h_drop(quiet);
    h_drop(pub);
    harness_stop(&h);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("confirm_tx");
    TCase *tc;

    tc = h_tcase(s, "confirms", 20, true);
    tcase_add_test(tc, confirm_acks_every_tag_once_in_order);
    tcase_add_test(tc, confirm_select_nowait);
    tcase_add_test(tc, confirm_pipelined_publishes_batched);
    tcase_add_test(tc, confirm_return_before_ack);
    tcase_add_test(tc, confirm_nack_on_reject_publish);
    tcase_add_test(tc, confirm_nack_on_reject_publish_dlx);
    tcase_add_test(tc, confirm_persistent_after_store);
    tcase_add_test(tc, confirm_mixed_persistent_transient);
    tcase_add_test(tc, confirm_and_tx_exclude_each_other);

    tc = h_tcase(s, "transactions", 20, true);
    tcase_add_test(tc, tx_publishes_at_commit);
    tcase_add_test(tc, tx_rollback_discards_publishes);
    tcase_add_test(tc, tx_acks_take_effect_at_commit);
    tcase_add_test(tc, tx_reject_nack_take_effect_at_commit);
    tcase_add_test(tc, tx_recover_leaves_held_acks);
    tcase_add_test(tc, tx_double_ack_406);
    tcase_add_test(tc, tx_commit_rollback_need_tx_406);

    tc = h_tcase(s, "disk alarm", 20, false);
    tcase_add_test(tc, disk_alarm_blocks_publisher);
    return h_run(s);
}
