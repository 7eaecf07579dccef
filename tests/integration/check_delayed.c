/*
 * SPDX-License-Identifier: Apache-2.0
 * Delayed messages (x-delayed-message, broker/core/delayed.h), with rabbitmq-c
 * against a real roostd. The reference RabbitMQ (3.10.8) runs without
 * the rabbitmq_delayed_message_exchange plugin, so these expectations
 * come from the plugin's source (docs/compatibility.md, "Delayed
 * messages") and every test skips itself against a remote broker:
 * - declare: x-delayed-type missing or not a string, or naming
 *   x-delayed-message, is 406 with the plugin's texts; an unknown type
 *   is 503 (as an unknown exchange type); a redeclare compares only
 *   alternate-exchange, as the plugin's inner types do;
 * - x-delay: integers of any width, floats truncated, a longstr holding
 *   an integer; 1 .. 2^32-1 ms is held, anything else routes at once;
 * - order by due time, none early; the routed message keeps its
 *   headers, x-delay negated;
 * - routing when due, through the inner type (topic here), to the queues
 *   bound then; no basic.return for a mandatory held publish (one that
 *   routes at once is returned as usual);
 * - confirms: at once for held messages in memory, after the sync for
 *   persistent ones in durable exchanges; the bound's nack;
 * - deleting the exchange drops what it holds;
 * - transactions: held at tx.commit, not after tx.rollback;
 * - a message due before its batch is synced is routed once;
 * - restarts (clean and kill -9): persistent messages in durable
 *   exchanges come back with their due time, the others do not; also
 *   once compaction has copied them forward.
 * The crash loop with kill -9 at random moments is check_store's
 * crash_loop_delayed.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

#define NO_PLUGIN "the reference RabbitMQ has no delayed-message plugin"

/* An x-delayed-message exchange named for 'tag' (into 'x', 256 bytes)
 * routing as 'inner'. */
static void
declare_delayed_at(const char *file, int line, amqp_connection_state_t c,
                   char *x, const char *tag, const char *inner, bool durable)
{
    amqp_table_entry_t a = h_entry_str("x-delayed-type", inner);
    h_name(x, 256, tag);
    h_declare_exchange_at(file, line, c, 1, x, "x-delayed-message", durable,
                          false, false, h_table(&a, 1));
}
#define DECLARE_DELAYED(c, x, tag, inner, durable)                             \
    declare_delayed_at(__FILE__, __LINE__, (c), (x), (tag), (inner), (durable))

/* A queue named for 'tag' bound to 'x' with 'key'. */
static void
bound_queue_at(const char *file, int line, amqp_connection_state_t c,
               char *q, const char *tag, const char *x, const char *key,
               bool durable)
{
    char name[64];
    h_declare_queue_at(file, line, c, 1, h_name(name, sizeof(name), tag),
                       durable, false, false, amqp_empty_table, q, NULL, NULL);
    h_bind_at(file, line, c, 1, q, x, key, amqp_empty_table);
}
#define BOUND_QUEUE(c, q, tag, x, key, durable)                                \
    bound_queue_at(__FILE__, __LINE__, (c), (q), (tag), (x), (key), (durable))

/* Publish 'body' to 'x' with 'key' and the header x-delay = 'delay'
 * (no header if 'delay' is NULL). */
static void
pub_delay_at(const char *file, int line, amqp_connection_state_t c,
             const char *x, const char *key, const char *body,
             const amqp_field_value_t *delay, bool persistent, bool mandatory)
{
    amqp_basic_properties_t p = { 0 };
    amqp_table_entry_t h;
    if (delay) {
        h.key = amqp_cstring_bytes("x-delay");
        h.value = *delay;
        p._flags |= AMQP_BASIC_HEADERS_FLAG;
        p.headers = h_table(&h, 1);
    }
    if (persistent) {
        p._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
        p.delivery_mode = 2;
    }
    h_publish_at(file, line, c, 1, x, key, body, strlen(body), mandatory, &p);
}

static amqp_field_value_t
v_int(int64_t v)
{
    amqp_field_value_t f;
    f.kind = AMQP_FIELD_KIND_I64;
    f.value.i64 = v;
    return f;
}

#define PUB_DELAY(c, x, key, body, ms)                                         \
    do {                                                                       \
        amqp_field_value_t d_ = v_int(ms);                                     \
        pub_delay_at(__FILE__, __LINE__, (c), (x), (key), (body), &d_, false,  \
                     false);                                                   \
    } while (0)

/* One delivery read with rabbitmq-c's consumer API: its body, its
 * x-delay header (INT64_MIN if none) and when it arrived. */
struct got {
    char body[64];
    int64_t xdelay;
    uint64_t at;
};

/* The next delivery within 'timeout_ms': 1, or 0 if none came. */
static int
next_got(amqp_connection_state_t c, int timeout_ms, struct got *g)
{
    amqp_envelope_t env;
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

    amqp_maybe_release_buffers(c);
    amqp_rpc_reply_t r = amqp_consume_message(c, &env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        r.library_error == AMQP_STATUS_TIMEOUT)
        return 0;
    ck_assert_msg(r.reply_type == AMQP_RESPONSE_NORMAL,
                  "consume_message failed (%d, %d)", r.reply_type,
                  r.library_error);
    g->at = h_now_ms();
    size_t n = env.message.body.len < sizeof(g->body) - 1
                   ? env.message.body.len : sizeof(g->body) - 1;
    memcpy(g->body, env.message.body.bytes, n);
    g->body[n] = '\0';
    g->xdelay = INT64_MIN;
    amqp_basic_properties_t *p = &env.message.properties;
    if (p->_flags & AMQP_BASIC_HEADERS_FLAG)
        for (int i = 0; i < p->headers.num_entries; i++) {
            amqp_table_entry_t *e = &p->headers.entries[i];
            if (e->key.len != 7 || memcmp(e->key.bytes, "x-delay", 7) != 0)
                continue;
            switch (e->value.kind) {
            case AMQP_FIELD_KIND_I32: g->xdelay = e->value.value.i32; break;
            case AMQP_FIELD_KIND_I64: g->xdelay = e->value.value.i64; break;
            default: g->xdelay = INT64_MAX; break;
            }
        }
    amqp_destroy_envelope(&env);
    return 1;
}

/* Consume 'q' (no-ack) on channel 1 of a connection of its own. */
static amqp_connection_state_t
consumer(const char *q)
{
    amqp_connection_state_t c = h_connect(H);
    char tag[256];
    CONSUME(c, 1, q, "", true, tag);
    return c;
}

/*
 * Expect exactly the bodies in 'want' (space-separated), in order, each
 * no earlier than 'delays[i]' ms after 't0', within 'ms' in all; then
 * nothing for 300 ms more. 'xdelay' (if not NULL) is what each x-delay
 * header must say.
 */
static void
expect_order_at(const char *file, int line, amqp_connection_state_t c,
                const char *want, const int64_t *delays,
                const int64_t *xdelay, uint64_t t0, int ms)
{
    char got[1024] = "";
    size_t n = 0;
    struct got g;
    int i = 0;
    uint64_t end = h_now_ms() + (uint64_t)ms;

    while (h_now_ms() < end && next_got(c, (int)(end - h_now_ms()) + 1, &g)) {
        n += (size_t)snprintf(got + n, sizeof(got) - n, "%s%s", n ? " " : "",
                              g.body);
        if (delays)
            H_ASSERT_AT(file, line, g.at >= t0 + (uint64_t)delays[i],
                        "'%s' came after %llu ms, before its %lld ms", g.body,
                        (unsigned long long)(g.at - t0), (long long)delays[i]);
        if (xdelay)
            H_ASSERT_AT(file, line, g.xdelay == xdelay[i],
                        "'%s' has x-delay %lld, expected %lld", g.body,
                        (long long)g.xdelay, (long long)xdelay[i]);
        i++;
        if (strcmp(got, want) == 0)
            break;
    }
    H_ASSERT_AT(file, line, next_got(c, 300, &g) == 0,
                "'%s' came after all expected", g.body);
    H_ASSERT_AT(file, line, strcmp(got, want) == 0,
                "got \"%s\", expected \"%s\"", got, want);
}
#define EXPECT_ORDER(c, want, delays, xdelay, t0, ms)                          \
    expect_order_at(__FILE__, __LINE__, (c), (want), (delays), (xdelay), (t0), \
                    (ms))

static void
reopen(amqp_connection_state_t c)
{
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
}

/* ---- declare ---- */

static void
expect_declare_refused(amqp_connection_state_t c, const amqp_table_t args,
                       const char *text)
{
    char x[256];
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(h_name(x, sizeof(x), "bad")),
                          amqp_cstring_bytes("x-delayed-message"), 0, 0, 0, 0,
                          args);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, text);
    reopen(c);
}

START_TEST(declare_checks_x_delayed_type)
{
    SKIP_IF_REMOTE(NO_PLUGIN);
    amqp_connection_state_t c = h_connect(H);
    char x[256], want[512];

    expect_declare_refused(c, amqp_empty_table, "PRECONDITION_FAILED - "
                           "Invalid argument, 'x-delayed-type' must be an "
                           "existing exchange type");
    amqp_table_entry_t a = h_entry_int("x-delayed-type", 1);
    expect_declare_refused(c, h_table(&a, 1), "PRECONDITION_FAILED - "
                           "Invalid argument, 'x-delayed-type' must be an "
                           "existing exchange type");
    a = h_entry_str("x-delayed-type", "x-delayed-message");
    expect_declare_refused(c, h_table(&a, 1), "PRECONDITION_FAILED - "
                           "Invalid argument, 'x-delayed-message' can't be "
                           "used for 'x-delayed-type'");
    /* Inner types are compared as they compare: only the alternate
     * exchange; the type itself is. */
    DECLARE_DELAYED(c, x, "decl", "topic", false);
    a = h_entry_str("x-delayed-type", "fanout");
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(x),
                          amqp_cstring_bytes("x-delayed-message"), 0, 0, 0, 0,
                          h_table(&a, 1));
    EXPECT_OK(c, "redeclare with another x-delayed-type");
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(x),
                          amqp_cstring_bytes("topic"), 0, 0, 0, 0,
                          amqp_empty_table);
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - inequivalent arg "
             "'type' for exchange '%s' in vhost '/': received 'topic' but "
             "current is 'x-delayed-message'", x);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    reopen(c);
    /* An unknown inner type is an unknown exchange type: 503. */
    a = h_entry_str("x-delayed-type", "nope");
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(h_name(x, sizeof(x), "un")),
                          amqp_cstring_bytes("x-delayed-message"), 0, 0, 0, 0,
                          h_table(&a, 1));
    EXPECT_CONN_CLOSE(c, 503, "COMMAND_INVALID - unknown exchange type 'nope'");
}
END_TEST

/* ---- order and headers ---- */

START_TEST(due_order_none_early_x_delay_negated)
{
    SKIP_IF_REMOTE(NO_PLUGIN);
    amqp_connection_state_t c = h_connect(H);
    char x[256], q[256];

    DECLARE_DELAYED(c, x, "order", "direct", false);
    BOUND_QUEUE(c, q, "order", x, "k", false);
    amqp_connection_state_t cons = consumer(q);
    uint64_t t0 = h_now_ms();
    PUB_DELAY(c, x, "k", "d600", 600);
    PUB_DELAY(c, x, "k", "d200", 200);
    PUB_DELAY(c, x, "k", "d400", 400);
    PUB_DELAY(c, x, "k", "d200b", 200);
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "none", NULL, false, false);
    static const int64_t delays[] = { 0, 200, 200, 400, 600 };
    static const int64_t xdelay[] = { INT64_MIN, -200, -200, -400, -600 };
    EXPECT_ORDER(cons, "none d200 d200b d400 d600", delays, xdelay, t0, 3000);
    h_close(cons);
    h_close(c);
}
END_TEST

START_TEST(x_delay_values)
{
    SKIP_IF_REMOTE(NO_PLUGIN);
    amqp_connection_state_t c = h_connect(H);
    char x[256], q[256];
    amqp_field_value_t v;

    DECLARE_DELAYED(c, x, "vals", "direct", false);
    BOUND_QUEUE(c, q, "vals", x, "k", false);
    amqp_connection_state_t cons = consumer(q);
    uint64_t t0 = h_now_ms();
    /* Held: a longstr integer, a double truncated, a short. */
    v.kind = AMQP_FIELD_KIND_UTF8;
    v.value.bytes = amqp_cstring_bytes("300");
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "str300", &v, false, false);
    v.kind = AMQP_FIELD_KIND_F64;
    v.value.f64 = 200.9;
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "dbl200", &v, false, false);
    v.kind = AMQP_FIELD_KIND_I16;
    v.value.i16 = 100;
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "short100", &v, false, false);
    /* At once: 0, negative, over 2^32-1, not a number, a bool. */
    PUB_DELAY(c, x, "k", "zero", 0);
    PUB_DELAY(c, x, "k", "neg", -500);
    PUB_DELAY(c, x, "k", "huge", INT64_C(4294967296));
    v.kind = AMQP_FIELD_KIND_UTF8;
    v.value.bytes = amqp_cstring_bytes("soon");
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "word", &v, false, false);
    v.kind = AMQP_FIELD_KIND_BOOLEAN;
    v.value.boolean = 1;
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "bool", &v, false, false);
    static const int64_t delays[] = { 0, 0, 0, 0, 0, 100, 200, 300 };
    /* Routed at once: the header as published (a word or a bool is
     * INT64_MAX here); held: minus the delay. */
    static const int64_t xdelay[] = { 0, -500, INT64_C(4294967296), INT64_MAX,
                                      INT64_MAX, -100, -200, -300 };
    EXPECT_ORDER(cons, "zero neg huge word bool short100 dbl200 str300", delays,
                 xdelay, t0, 3000);
    h_close(cons);
    h_close(c);
}
END_TEST

/* ---- routing when due ---- */

START_TEST(routes_when_due_through_inner_type)
{
    SKIP_IF_REMOTE(NO_PLUGIN);
    amqp_connection_state_t c = h_connect(H);
    char x[256], q1[256], q2[256], name[64];

    DECLARE_DELAYED(c, x, "topic", "topic", false);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "t1"), false, false, false,
                  q1);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "t2"), false, false, false,
                  q2);
    BIND(c, 1, q2, x, "old.#");
    PUB_DELAY(c, x, "a.b.c", "m1", 300);
    PUB_DELAY(c, x, "old.key", "m2", 300);
    /* Bound after the publish, before it is due: it counts. Unbound
     * before it is due: it does not. */
    BIND(c, 1, q1, x, "a.*.c");
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q2), amqp_cstring_bytes(x),
                      amqp_cstring_bytes("old.#"), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind");
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q1), 0);
    amqp_connection_state_t cons = consumer(q1);
    EXPECT_ORDER(cons, "m1", NULL, NULL, 0, 2000);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q2), 0);
    h_close(cons);
    h_close(c);
}
END_TEST

START_TEST(no_return_for_held_mandatory)
{
    SKIP_IF_REMOTE(NO_PLUGIN);
    amqp_connection_state_t c = h_connect(H);
    char x[256];
    struct h_event e;
    amqp_field_value_t d = v_int(200);

    DECLARE_DELAYED(c, x, "mand", "direct", false);
    amqp_confirm_select(c, 1);
    EXPECT_OK(c, "confirm.select");
    /* Held: no route is known yet, so no basic.return; the confirm
     * comes at once. */
    pub_delay_at(__FILE__, __LINE__, c, x, "nowhere", "held", &d, false, true);
    EXPECT_METHOD(c, AMQP_BASIC_ACK_METHOD, &e);
    ck_assert_uint_eq(e.tag, 1);
    h_event_free(&e);
    /* At once (no x-delay): as its inner type, returned. */
    pub_delay_at(__FILE__, __LINE__, c, x, "nowhere", "now", NULL, false, true);
    EXPECT_METHOD(c, AMQP_BASIC_RETURN_METHOD, &e);
    ck_assert_int_eq(e.code, 312);
    h_event_free(&e);
    EXPECT_METHOD(c, AMQP_BASIC_ACK_METHOD, &e);
    ck_assert_uint_eq(e.tag, 2);
    h_event_free(&e);
    /* And nothing when the held one falls due, unroutable. */
    EXPECT_SILENCE(c, 400);
    h_close(c);
}
END_TEST

START_TEST(delete_drops_held)
{
    SKIP_IF_REMOTE(NO_PLUGIN);
    amqp_connection_state_t c = h_connect(H);
    char x[256], q[256];

    DECLARE_DELAYED(c, x, "del", "fanout", false);
    BOUND_QUEUE(c, q, "del", x, "", false);
    PUB_DELAY(c, x, "", "gone", 200);
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(x), 0);
    EXPECT_OK(c, "exchange.delete");
    DECLARE_DELAYED(c, x, "del", "fanout", false);
    BIND(c, 1, q, x, "");
    amqp_connection_state_t cons = consumer(q);
    EXPECT_ORDER(cons, "", NULL, NULL, 0, 500);
    h_close(cons);
    h_close(c);
}
END_TEST

/* ---- the bound ---- */

START_TEST(bound_refuses_with_nack)
{
    SKIP_IF_REMOTE("configures roostd");
    harness_start(H, ARGS("--set", "delayed_message.max_messages=3"));
    amqp_connection_state_t c = h_connect(H);
    char x[256], q[256];
    struct h_event e;

    DECLARE_DELAYED(c, x, "bound", "direct", false);
    BOUND_QUEUE(c, q, "bound", x, "k", false);
    amqp_confirm_select(c, 1);
    EXPECT_OK(c, "confirm.select");
    for (int i = 0; i < 4; i++) {
        char body[16];
        snprintf(body, sizeof(body), "b%d", i);
        PUB_DELAY(c, x, "k", body, 300);
    }
    /* At once, routed as usual: the bound counts only held ones. */
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "now", NULL, false, false);
    int nacks = 0;
    for (uint64_t last = 0; last < 5;) {
        ck_assert_int_eq(h_next(c, 5000, &e), 1);
        if (e.id == AMQP_BASIC_NACK_METHOD) {
            ck_assert_uint_eq(e.tag, 4);
            nacks++;
        } else {
            ck_assert_uint_eq(e.id, AMQP_BASIC_ACK_METHOD);
            ck_assert_uint_ne(e.tag, 4);
        }
        last = e.tag;
        h_event_free(&e);
    }
    ck_assert_int_eq(nacks, 1);
    ck_assert_msg(harness_log_contains(H, "delayed_message.max_messages"),
                  "the refusal is logged");
    amqp_connection_state_t cons = consumer(q);
    EXPECT_ORDER(cons, "now b0 b1 b2", NULL, NULL, 0, 2000);
    h_close(cons);
    h_close(c);
    harness_stop(H);
}
END_TEST

/* ---- restarts ---- */

START_TEST(persistent_held_survive_restarts)
{
    SKIP_IF_REMOTE("restarts roostd");
    harness_start(H, NULL);
    amqp_connection_state_t c = h_connect(H);
    char x[256], xt[256], q[256], qt[256];
    struct h_event e;

    DECLARE_DELAYED(c, x, "dur", "direct", true);
    DECLARE_DELAYED(c, xt, "trans", "direct", false);
    BOUND_QUEUE(c, q, "dur", x, "k", true);
    BOUND_QUEUE(c, qt, "durt", xt, "k", true);
    amqp_confirm_select(c, 1);
    EXPECT_OK(c, "confirm.select");
    amqp_field_value_t d;
    /* Due before the restart is over, and after it; a transient one in
     * the durable exchange, a persistent one in a transient exchange. */
    static const struct { const char *body; int64_t ms; bool persistent; }
        pubs[] = {
            { "p3000", 3000, true }, { "p100", 100, true },
            { "t200", 200, false }, { "p1500", 1500, true },
            { "p101", 101, true },
        };
    uint64_t t0 = h_now_ms();
    for (size_t i = 0; i < 5; i++) {
        d = v_int(pubs[i].ms);
        pub_delay_at(__FILE__, __LINE__, c, x, "k", pubs[i].body, &d,
                     pubs[i].persistent, false);
    }
    d = v_int(100);
    pub_delay_at(__FILE__, __LINE__, c, xt, "k", "lost", &d, true, false);
    /* Every one confirmed: those that need no disk are told alone,
     * before the others. */
    bool acked[7] = { false };
    for (int n = 0; n < 6;) {
        EXPECT_METHOD(c, AMQP_BASIC_ACK_METHOD, &e);
        for (uint64_t t = e.multiple ? 1 : e.tag; t <= e.tag; t++)
            if (!acked[t]) {
                acked[t] = true;
                n++;
            }
        h_event_free(&e);
    }
    /* kill -9 at once: what was confirmed is on disk. */
    harness_kill(H, SIGKILL);
    h_drop(c);
    harness_reap(H);
    harness_restart(H, NULL);
    amqp_connection_state_t cons = consumer(q);
    static const int64_t delays[] = { 100, 101, 1500, 3000 };
    EXPECT_ORDER(cons, "p100 p101 p1500 p3000", delays, NULL, t0, 5000);
    h_close(cons);
    c = h_connect(H);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, qt), 0);
    /* And after a clean stop. */
    d = v_int(700);
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "clean", &d, true, false);
    SYNC(c, 1, NULL, 0);
    h_close(c);
    harness_stop_keep(H);
    harness_restart(H, NULL);
    cons = consumer(q);
    EXPECT_ORDER(cons, "clean", NULL, NULL, 0, 3000);
    h_close(cons);
    harness_stop(H);
}
END_TEST

START_TEST(held_messages_compacted)
{
    SKIP_IF_REMOTE("restarts roostd");
    const char *const *args = ARGS("--set", "store.segment_size=65536");
    harness_start(H, args);
    amqp_connection_state_t c = h_connect(H);
    char x[256], q[256], busy[256], name[64], body[1024], want[4096] = "";
    struct h_event e;

    DECLARE_DELAYED(c, x, "compact", "direct", true);
    BOUND_QUEUE(c, q, "compact", x, "k", true);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "busy"), true, false,
                  false, busy);
    amqp_confirm_select(c, 1);
    EXPECT_OK(c, "confirm.select");
    /* Held at the front of the journal, then ten times their size
     * written and consumed behind them: the journal is over twice its
     * live bytes, and their segment is compacted. */
    amqp_field_value_t d = v_int(4000);
    memset(body, 'h', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    for (int i = 0; i < 40; i++) {
        snprintf(body, 8, "h%02d", i);
        body[3] = 'h';
        pub_delay_at(__FILE__, __LINE__, c, x, "k", body, &d, true, false);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%.3s",
                 i ? " " : "", body);
    }
    amqp_basic_properties_t p = { ._flags = AMQP_BASIC_DELIVERY_MODE_FLAG,
                                  .delivery_mode = 2 };
    for (int i = 0; i < 400; i++)
        h_publish_at(__FILE__, __LINE__, c, 1, "", busy, body, sizeof(body) - 1,
                     false, &p);
    for (int acked = 0; acked < 440;) {
        EXPECT_METHOD(c, AMQP_BASIC_ACK_METHOD, &e);
        acked = (int)e.tag;
        h_event_free(&e);
    }
    for (int i = 0; i < 400; i++) {
        ck_assert_int_eq(GET(c, 1, busy, true, &e), 1);
        h_event_free(&e);
    }
    SYNC(c, 1, NULL, 0);
    for (int i = 0; i < 100 && !harness_log_contains(H, "compacting segment");
         i++)
        h_sleep_ms(20);
    ck_assert_msg(harness_log_contains(H, "compacting segment"),
                  "no compaction");
    h_sleep_ms(200);   /* its batch synced */
    ck_assert_msg(!harness_log_contains(H, "compaction did not find"),
                  "compaction missed the held messages");
    harness_kill(H, SIGKILL);
    h_drop(c);
    harness_reap(H);
    harness_restart(H, args);
    ck_assert_msg(harness_log_contains(H, "recovered 40 delayed messages"),
                  "the held messages recovered");
    amqp_connection_state_t cons = h_connect(H);
    char tag[256];
    CONSUME(cons, 1, q, "", true, tag);
    char got[4096] = "";
    struct got g;
    for (int i = 0; i < 40 && next_got(cons, 6000, &g); i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%.3s",
                 i ? " " : "", g.body);
    ck_assert_str_eq(got, want);
    h_close(cons);
    harness_stop(H);
}
END_TEST

/* A transaction's delayed publishes are held at tx.commit (stored with
 * it), not at all after tx.rollback. */
START_TEST(tx_commit_holds_rollback_drops)
{
    SKIP_IF_REMOTE("restarts roostd");
    harness_start(H, NULL);
    amqp_connection_state_t c = h_connect(H);
    char x[256], q[256];
    amqp_field_value_t d = v_int(300);

    DECLARE_DELAYED(c, x, "tx", "direct", true);
    BOUND_QUEUE(c, q, "tx", x, "k", true);
    amqp_tx_select(c, 1);
    EXPECT_OK(c, "tx.select");
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "rolled", &d, true, false);
    amqp_tx_rollback(c, 1);
    EXPECT_OK(c, "tx.rollback");
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "c1", &d, true, false);
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "c2", &d, true, false);
    amqp_tx_commit(c, 1);
    EXPECT_OK(c, "tx.commit");
    /* commit-ok waited for the disk: a kill now loses nothing. */
    harness_kill(H, SIGKILL);
    h_drop(c);
    harness_reap(H);
    harness_restart(H, NULL);
    amqp_connection_state_t cons = consumer(q);
    EXPECT_ORDER(cons, "c1 c2", NULL, NULL, 0, 2000);
    h_close(cons);
    harness_stop(H);
}
END_TEST

/*
 * A held message due before its batch is synced (x-delay 1 ms, syncs
 * slowed to 300 ms) is routed only once its record is written, and a
 * kill just after its confirm finds it once: routed, or held and routed
 * at recovery.
 */
START_TEST(due_before_its_sync_routed_once)
{
    SKIP_IF_REMOTE("needs roostd's test hooks");
    setenv("ROOST_TEST_SYNC_DELAY_US", "300000", 1);
    harness_start(H, NULL);
    unsetenv("ROOST_TEST_SYNC_DELAY_US");
    amqp_connection_state_t c = h_connect(H);
    char x[256], q[256];
    struct h_event e;
    amqp_field_value_t d = v_int(1);

    DECLARE_DELAYED(c, x, "early", "direct", true);
    BOUND_QUEUE(c, q, "early", x, "k", true);
    amqp_confirm_select(c, 1);
    EXPECT_OK(c, "confirm.select");
    pub_delay_at(__FILE__, __LINE__, c, x, "k", "quick", &d, true, false);
    EXPECT_METHOD(c, AMQP_BASIC_ACK_METHOD, &e);
    h_event_free(&e);
    harness_kill(H, SIGKILL);
    h_drop(c);
    harness_reap(H);
    harness_restart(H, NULL);
    amqp_connection_state_t cons = consumer(q);
    EXPECT_ORDER(cons, "quick", NULL, NULL, 0, 2000);
    h_close(cons);
    harness_stop(H);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("delayed");
    TCase *tc;

    tc = h_tcase(s, "x-delayed-message", 30, true);
    tcase_add_test(tc, declare_checks_x_delayed_type);
    tcase_add_test(tc, due_order_none_early_x_delay_negated);
    tcase_add_test(tc, x_delay_values);
    tcase_add_test(tc, routes_when_due_through_inner_type);
    tcase_add_test(tc, no_return_for_held_mandatory);
    tcase_add_test(tc, delete_drops_held);

    tc = h_tcase(s, "bound and restarts", 60, false);
    tcase_add_test(tc, bound_refuses_with_nack);
    tcase_add_test(tc, persistent_held_survive_restarts);
    tcase_add_test(tc, held_messages_compacted);
    tcase_add_test(tc, tx_commit_holds_rollback_drops);
    tcase_add_test(tc, due_before_its_sync_routed_once);

    return h_run(s);
}
