/*
 * SPDX-License-Identifier: Apache-2.0
 * Exchanges against a real roostd: routing by each type (direct, fanout,
 * topic with its edge cases, headers with every x-match mode), the default
 * exchange, the predeclared amq.* exchanges and the reserved prefix,
 * declare equivalence, passive declare, delete with if-unused,
 * exchange-to-exchange bindings (cycles, diamonds), alternate exchanges,
 * internal and auto-delete exchanges.
 *
 * What reached a queue is read back with basic.get up to a sentinel
 * message published last through the default exchange on the same
 * channel, so "nothing else was routed here" is checked without waiting.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

/* An exclusive server-named queue bound to 'x' with 'key'. */
static void
bound_queue(amqp_connection_state_t c, const char *x, const char *key, char *q)
{
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    if (x)
        BIND(c, 1, q, x, key);
}

static void
delete_x(amqp_connection_state_t c, const char *x)
{
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(x), 0);
    EXPECT_OK(c, "exchange.delete");
}

/*
 * The bodies routed to 'q', comma-separated, in order: publishes a
 * sentinel through the default exchange and gets messages until it comes.
 */
static const char *
routed_at(const char *file, int line, amqp_connection_state_t c, const char *q,
          char *out, size_t len)
{
    struct h_event e;
    uint64_t deadline = h_now_ms() + 5000;

    out[0] = '\0';
    h_publish_at(file, line, c, 1, "", q, "END", 3, false, NULL);
    for (;;) {
        if (h_get_at(file, line, c, 1, q, true, &e) == 0) {
            H_ASSERT_AT(file, line, h_now_ms() < deadline,
                        "the sentinel never reached '%s'", q);
            h_sleep_ms(5);
            continue;
        }
        bool end = strcmp(e.body, "END") == 0;
        if (!end) {
            size_t n = strlen(out);
            snprintf(out + n, len - n, "%s%s", n ? "," : "", e.body);
        }
        h_event_free(&e);
        if (end)
            return out;
    }
}
#define ROUTED(c, q, buf)                                                      \
    routed_at(__FILE__, __LINE__, (c), (q), (buf), sizeof(buf))

static void
publish_props(amqp_connection_state_t c, const char *x, const char *key,
              const char *body, amqp_table_t *headers)
{
    amqp_basic_properties_t p;
    memset(&p, 0, sizeof(p));
    if (headers) {
        p._flags = AMQP_BASIC_HEADERS_FLAG;
        p.headers = *headers;
    }
    h_publish_at(__FILE__, __LINE__, c, 1, x, key, body, strlen(body), false,
                 headers ? &p : NULL);
}

/* ---- direct and fanout ---- */

START_TEST(direct_routes_by_key)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q1[256], q2[256], q3[256], buf[256];

    DECLARE_EXCHANGE(c, 1, h_name(x, sizeof(x), "direct"), "direct");
    bound_queue(c, x, "a", q1);
    bound_queue(c, x, "b", q2);
    bound_queue(c, x, "a", q3);
    BIND(c, 1, q3, x, "b");
    BIND(c, 1, q3, x, "b"); /* the same binding twice is one binding */
    PUBLISH(c, 1, x, "a", "1");
    PUBLISH(c, 1, x, "b", "2");
    PUBLISH(c, 1, x, "c", "3");
    PUBLISH(c, 1, x, "", "4");
    ck_assert_str_eq(ROUTED(c, q1, buf), "1");
    ck_assert_str_eq(ROUTED(c, q2, buf), "2");
    ck_assert_str_eq(ROUTED(c, q3, buf), "1,2");
    delete_x(c, x);
    h_close(c);
}
END_TEST

START_TEST(fanout_ignores_key)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q1[256], q2[256], buf[256];

    DECLARE_EXCHANGE(c, 1, h_name(x, sizeof(x), "fanout"), "fanout");
    bound_queue(c, x, "", q1);
    bound_queue(c, x, "whatever", q2);
    PUBLISH(c, 1, x, "a", "1");
    PUBLISH(c, 1, x, "", "2");
    ck_assert_str_eq(ROUTED(c, q1, buf), "1,2");
    ck_assert_str_eq(ROUTED(c, q2, buf), "1,2");
    delete_x(c, x);
    h_close(c);
}
END_TEST

/* ---- topic ---- */

/* RabbitMQ's rules: words split at '.', "" has no words, '*' is exactly one
 * word, '#' zero or more. Body "k<routing key>". */
static const char *const topic_keys[] = { "",      "a",       "b",    "a.b",
                                          "a.x.b", "a.x.y.b", "a..b", "x.a.b",
                                          ".",     "a.",      ".b",   "b.b" };
static const struct {
    const char *pattern;
    const char *want;
} topic_vecs[] = {
    { "#", "k,ka,kb,ka.b,ka.x.b,ka.x.y.b,ka..b,kx.a.b,k.,ka.,k.b,kb.b" },
    { "*", "ka,kb" },
    { "a.*", "ka.b,ka." },
    { "a.#", "ka,ka.b,ka.x.b,ka.x.y.b,ka..b,ka." },
    { "#.b", "kb,ka.b,ka.x.b,ka.x.y.b,ka..b,kx.a.b,k.b,kb.b" },
    { "a.#.b", "ka.b,ka.x.b,ka.x.y.b,ka..b" },
    { "a.*.b", "ka.x.b,ka..b" },
    { "*.*", "ka.b,k.,ka.,k.b,kb.b" },
    { "a..b", "ka..b" },
    { "#.#", "k,ka,kb,ka.b,ka.x.b,ka.x.y.b,ka..b,kx.a.b,k.,ka.,k.b,kb.b" },
    { "a.*.#", "ka.b,ka.x.b,ka.x.y.b,ka..b,ka." },
    { "", "k" },
    { "*.b.#", "ka.b,k.b,kb.b" },
    { "#.a.#", "ka,ka.b,ka.x.b,ka.x.y.b,ka..b,kx.a.b,ka." },
    { "#.*", "ka,kb,ka.b,ka.x.b,ka.x.y.b,ka..b,kx.a.b,k.,ka.,k.b,kb.b" },
    { "a", "ka" },
};

START_TEST(topic_patterns)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q[256], body[64], buf[1024];

    DECLARE_EXCHANGE(c, 1, h_name(x, sizeof(x), "topic"), "topic");
    bound_queue(c, x, topic_vecs[_i].pattern, q);
    for (size_t k = 0; k < sizeof(topic_keys) / sizeof(topic_keys[0]); k++) {
        snprintf(body, sizeof(body), "k%s", topic_keys[k]);
        PUBLISH(c, 1, x, topic_keys[k], body);
    }
    ck_assert_msg(strcmp(ROUTED(c, q, buf), topic_vecs[_i].want) == 0,
                  "binding \"%s\": routed \"%s\", expected \"%s\"",
                  topic_vecs[_i].pattern, buf, topic_vecs[_i].want);
    delete_x(c, x);
    h_close(c);
}
END_TEST

START_TEST(topic_overlapping_bindings_one_copy)
{
    /* A queue bound with several matching patterns gets one copy. */
    amqp_connection_state_t c = h_connect(H);
    char x[64], q[256], buf[256];

    DECLARE_EXCHANGE(c, 1, h_name(x, sizeof(x), "topic"), "topic");
    bound_queue(c, x, "a.*", q);
    BIND(c, 1, q, x, "#");
    BIND(c, 1, q, x, "a.b");
    BIND(c, 1, q, x, "*.b");
    PUBLISH(c, 1, x, "a.b", "once");
    ck_assert_str_eq(ROUTED(c, q, buf), "once");
    /* Unbinding one pattern leaves the others. */
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(x),
                      amqp_cstring_bytes("#"), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind");
    PUBLISH(c, 1, x, "z.z", "no");
    PUBLISH(c, 1, x, "z.b", "yes");
    ck_assert_str_eq(ROUTED(c, q, buf), "yes");
    delete_x(c, x);
    h_close(c);
}
END_TEST

/* ---- headers ---- */

#define NO_HEADERS (-1) /* a message without a headers property */
#define EMPTY { 0 }
#define NONE { NO_HEADERS }

/*
 * A headers exchange with a queue bound by each of 'bind' (one or two),
 * the messages 'msg' published to it in turn with their headers, and
 * what reached each queue.
 */
static const struct headers_case {
    const char *name;
    struct h_fields bind[2];
    struct {
        const char *body;
        struct h_fields headers;
    } msg[5];
    const char *routed[2];
} headers_cases[] = {
    { "x-match all",
      { H_FIELDS(H_STR("x-match", "all"), H_I32("a", 1), H_STR("b", "x")) },
      { { "both", H_FIELDS(H_I32("a", 1), H_STR("b", "x")) },
        { "one", H_FIELDS(H_I32("a", 1)) },
        { "extra",
          H_FIELDS(H_STR("b", "x"), H_I32("a", 1), H_STR("c", "extra")) },
        { "wrong", H_FIELDS(H_I32("a", 2), H_STR("b", "x")) },
        { "none", NONE } },
      { "both,extra" } },
    { "no x-match is all",
      { H_FIELDS(H_STR("a", "1"), H_STR("b", "2")) },
      { { "one", H_FIELDS(H_STR("a", "1")) },
        { "both", H_FIELDS(H_STR("a", "1"), H_STR("b", "2")) } },
      { "both" } },
    { "x-match any",
      { H_FIELDS(H_STR("x-match", "any"), H_STR("a", "1"), H_STR("b", "2")) },
      { { "a", H_FIELDS(H_STR("a", "1")) },
        { "wrong-b", H_FIELDS(H_STR("b", "3")) },
        { "b", H_FIELDS(H_STR("c", "1"), H_STR("b", "2")) },
        { "empty", EMPTY },
        { "none", NONE } },
      { "a,b" } },
    /* Plain all/any skip binding arguments named x-...: a binding with
     * only x- arguments matches everything under all, nothing under any. */
    { "x- arguments ignored by all and any",
      { H_FIELDS(H_STR("x-match", "all"), H_STR("x-k", "v")),
        H_FIELDS(H_STR("x-match", "any"), H_STR("x-k", "v")) },
      { { "with", H_FIELDS(H_STR("x-k", "v")) }, { "without", NONE } },
      { "with,without", "" } },
    { "all-with-x and any-with-x",
      { H_FIELDS(H_STR("x-match", "all-with-x"), H_STR("x-k", "v"),
                 H_STR("a", "1")),
        H_FIELDS(H_STR("x-match", "any-with-x"), H_STR("x-k", "v"),
                 H_STR("a", "1")) },
      { { "both", H_FIELDS(H_STR("x-k", "v"), H_STR("a", "1")) },
        { "a-only", H_FIELDS(H_STR("a", "1")) },
        { "x-only", H_FIELDS(H_STR("x-k", "v")) } },
      { "both", "both,a-only,x-only" } },
    { "void means present",
      { H_FIELDS(H_STR("x-match", "all"), H_VOID("a")) },
      { { "str", H_FIELDS(H_STR("a", "anything")) },
        { "int", H_FIELDS(H_I64("a", 7)) },
        { "absent", H_FIELDS(H_STR("b", "1")) } },
      { "str,int" } },
    /* RabbitMQ compares values of the same type class: an int32 binding
     * argument matches an int64 or int8 header of the same value, not a
     * string. */
    { "integer types compare by value",
      { H_FIELDS(H_I32("n", 5)) },
      { { "i32", H_FIELDS(H_I32("n", 5)) },
        { "i64", H_FIELDS(H_I64("n", 5)) },
        { "i8", H_FIELDS(H_I8("n", 5)) },
        { "str", H_FIELDS(H_STR("n", "5")) },
        { "other", H_FIELDS(H_I64("n", 6)) } },
      { "i32,i64,i8" } },
};

START_TEST(headers_routing)
{
    const struct headers_case *v = &headers_cases[_i];
    amqp_connection_state_t c;
    char x[64], q[2][256], buf[256];
    int nq = v->routed[1] ? 2 : 1;

    h_case(v->name);
    c = h_connect(H);
    DECLARE_EXCHANGE(c, 1, h_name(x, sizeof(x), "headers"), "headers");
    for (int k = 0; k < nq; k++) {
        DECLARE_QUEUE(c, 1, "", false, true, false, q[k]);
        h_bind_at(__FILE__, __LINE__, c, 1, q[k], x, "",
                  h_fields_table(&v->bind[k]));
    }
    for (size_t m = 0; m < NELEMS(v->msg) && v->msg[m].body; m++) {
        amqp_table_t t = h_fields_table(&v->msg[m].headers);
        publish_props(c, x, "", v->msg[m].body,
                      v->msg[m].headers.n == NO_HEADERS ? NULL : &t);
    }
    for (int k = 0; k < nq; k++)
        H_ASSERT(strcmp(ROUTED(c, q[k], buf), v->routed[k]) == 0,
                 "binding %d: routed \"%s\", expected \"%s\"", k, buf,
                 v->routed[k]);
    h_close(c);
}
END_TEST

static void
headers_setup(amqp_connection_state_t c, char *x, amqp_table_t args, char *q)
{
    DECLARE_EXCHANGE(c, 1, h_name(x, 64, "headers"), "headers");
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    h_bind_at(__FILE__, __LINE__, c, 1, q, x, "", args);
}

START_TEST(headers_unbind_needs_arguments)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q[256], buf[256];
    amqp_table_entry_t b[] = { h_entry_str("a", "1") };
    amqp_table_entry_t m[] = { h_entry_str("a", "1") };
    amqp_table_t t = h_table(m, 1);

    headers_setup(c, x, h_table(b, 1), q);
    /* Without the arguments it is another binding: nothing removed. */
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(x),
                      amqp_cstring_bytes(""), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind without arguments");
    publish_props(c, x, "", "still", &t);
    ck_assert_str_eq(ROUTED(c, q, buf), "still");
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(x),
                      amqp_cstring_bytes(""), h_table(b, 1));
    EXPECT_OK(c, "queue.unbind with arguments");
    publish_props(c, x, "", "gone", &t);
    ck_assert_str_eq(ROUTED(c, q, buf), "");
    h_close(c);
}
END_TEST

/* ---- sender-selected distribution: CC and BCC ---- */

/* Publish 'body' to 'x' with 'key' and headers CC (cc, n of them) and
 * BCC (bcc, m of them), and traceparent first. */
static void
publish_cc(amqp_connection_state_t c, const char *x, const char *key,
           const char *body, const char *const *cc, int n,
           const char *const *bcc, int m, bool mandatory)
{
    amqp_field_value_t ccv[8], bccv[8];
    amqp_table_entry_t e[3];
    int ne = 0;
    amqp_basic_properties_t p = { 0 };

    e[ne++] = h_entry_str("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    for (int i = 0; i < n; i++) {
        ccv[i].kind = AMQP_FIELD_KIND_UTF8;
        ccv[i].value.bytes = amqp_cstring_bytes(cc[i]);
    }
    for (int i = 0; i < m; i++) {
        bccv[i].kind = AMQP_FIELD_KIND_UTF8;
        bccv[i].value.bytes = amqp_cstring_bytes(bcc[i]);
    }
    if (n) {
        e[ne].key = amqp_cstring_bytes("CC");
        e[ne].value.kind = AMQP_FIELD_KIND_ARRAY;
        e[ne].value.value.array.num_entries = n;
        e[ne].value.value.array.entries = ccv;
        ne++;
    }
    if (m) {
        e[ne].key = amqp_cstring_bytes("BCC");
        e[ne].value.kind = AMQP_FIELD_KIND_ARRAY;
        e[ne].value.value.array.num_entries = m;
        e[ne].value.value.array.entries = bccv;
        ne++;
    }
    p._flags = AMQP_BASIC_HEADERS_FLAG;
    p.headers = h_table(e, ne);
    h_publish_at(__FILE__, __LINE__, c, 1, x, key, body, strlen(body),
                 mandatory, &p);
}

/* What 'q' holds: one message with 'body' and 'nheaders' headers, the
 * first traceparent. */
static void
expect_one(amqp_connection_state_t c, const char *q, const char *body,
           int nheaders)
{
    struct h_event g;
    ck_assert_msg(GET(c, 1, q, true, &g) == 1, "queue %s is empty", q);
    ck_assert_str_eq(g.body, body);
    ck_assert_int_eq(g.nheaders, nheaders);
    ck_assert_str_eq(g.header0, "traceparent");
    h_event_free(&g);
    ck_assert_int_eq(GET(c, 1, q, true, &g), 0);
}

START_TEST(cc_bcc_default_exchange)
{
    amqp_connection_state_t c = h_connect(H);
    char a[256], b[256], d[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, a);
    DECLARE_QUEUE(c, 1, "", false, true, false, b);
    DECLARE_QUEUE(c, 1, "", false, true, false, d);
    const char *cc[] = { b, a }, *bcc[] = { d };
    /* 'a' by the key and by CC: one copy. BCC is gone from every copy;
     * traceparent and CC stay. */
    publish_cc(c, "", a, "m", cc, 2, bcc, 1, false);
    SYNC(c, 1, NULL, 0);
    expect_one(c, a, "m", 2);
    expect_one(c, b, "m", 2);
    expect_one(c, d, "m", 2);
    h_close(c);
}
END_TEST

START_TEST(cc_topic_and_mandatory)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q1[256], q2[256];
    struct h_event e;

    h_name(x, sizeof(x), "cc-topic");
    DECLARE_EXCHANGE(c, 1, x, "topic");
    DECLARE_QUEUE(c, 1, "", false, true, false, q1);
    DECLARE_QUEUE(c, 1, "", false, true, false, q2);
    BIND(c, 1, q1, x, "orders.*");
    BIND(c, 1, q2, x, "audit.#");
    const char *cc[] = { "audit.eu.orders" };
    publish_cc(c, x, "nothing.here", "t", cc, 1, NULL, 0, true);
    SYNC(c, 1, NULL, 0);
    expect_one(c, q2, "t", 2);
    ck_assert_int_eq(GET(c, 1, q1, true, &e), 0);
    /* Routed by a CC key only: not returned. Neither key matching:
     * returned. */
    const char *none[] = { "no.match" };
    publish_cc(c, x, "nothing", "r", none, 1, NULL, 0, true);
    EXPECT_METHOD(c, AMQP_BASIC_RETURN_METHOD, &e);
    ck_assert_int_eq(e.code, 312);
    h_event_free(&e);
    delete_x(c, x);
    h_close(c);
}
END_TEST

/* ---- the default exchange ---- */

START_TEST(default_routes_by_queue_name)
{
    amqp_connection_state_t c = h_connect(H);
    char q1[256], q2[256], buf[256];

    DECLARE_QUEUE(c, 1, "", false, true, false, q1);
    DECLARE_QUEUE(c, 1, "", false, true, false, q2);
    PUBLISH(c, 1, "", q1, "to-1");
    PUBLISH(c, 1, "", q2, "to-2");
    PUBLISH(c, 1, "", "no-such-queue-for-roost", "lost");
    ck_assert_str_eq(ROUTED(c, q1, buf), "to-1");
    ck_assert_str_eq(ROUTED(c, q2, buf), "to-2");
    h_close(c);
}
END_TEST

/* ---- amq.* ---- */

static const struct {
    const char *name, *type;
} amq_exchanges[] = { { "amq.direct", "direct" },
                      { "amq.fanout", "fanout" },
                      { "amq.topic", "topic" },
                      { "amq.headers", "headers" },
                      { "amq.match", "headers" } };

START_TEST(amq_exchanges_exist)
{
    const char *x = amq_exchanges[_i].name, *type = amq_exchanges[_i].type;
    amqp_connection_state_t c;
    char q[256], buf[64];

    h_case(x);
    c = h_connect(H);
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(x), amqp_cstring_bytes(type),
                          1, 0, 0, 0, amqp_empty_table);
    EXPECT_OK(c, "passive exchange.declare");
    /* Redeclaring with the same properties (durable) is allowed. */
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(x), amqp_cstring_bytes(type),
                          0, 1, 0, 0, amqp_empty_table);
    EXPECT_OK(c, "exchange.declare");
    /* and they route (a headers binding without arguments takes all) */
    bound_queue(c, x, "k", q);
    PUBLISH(c, 1, x, "k", "via-amq");
    H_ASSERT_STR_EQ(ROUTED(c, q, buf), "via-amq");
    h_close(c);
}
END_TEST

/* ---- declare ---- */

/* exchange.declare of 'type' with flags and arguments. */
struct xdecl {
    const char *type;
    bool durable, auto_delete, internal;
    struct h_fields args;
};

#define AE(name) H_FIELDS(H_STR("alternate-exchange", name))
#define INEQUIVALENT(k, got_cur)                                               \
    "PRECONDITION_FAILED - inequivalent arg '" k "' for exchange '%s' in "     \
    "vhost '/': received " got_cur

/* An exchange declared as 'first', then again as 'again': accepted when
 * 'text' is NULL, else refused with 406 and 'text' ("%s": its name). */
static const struct redeclare_case {
    const char *name;
    struct xdecl first, again;
    const char *text;
} redeclare_cases[] = {
    /* Arguments other than alternate-exchange are not compared. */
    { "other arguments not compared",
      { "topic", .args = H_FIELDS(H_STR("other", "1")) },
      { "topic", .args = H_FIELDS(H_STR("other", "2")) } },
    { "another type", { "direct" }, { "fanout" },
      INEQUIVALENT("type", "'fanout' but current is 'direct'") },
    { "durable", { "direct" }, { "direct", .durable = true },
      INEQUIVALENT("durable", "'true' but current is 'false'") },
    { "auto-delete", { "direct" }, { "direct", .auto_delete = true },
      INEQUIVALENT("auto_delete", "'true' but current is 'false'") },
    { "internal", { "direct" }, { "direct", .internal = true },
      INEQUIVALENT("internal", "'true' but current is 'false'") },
    { "another alternate-exchange", { "direct", .args = AE("ae1") },
      { "direct", .args = AE("ae2") },
      INEQUIVALENT("alternate-exchange", "'ae2' but current is 'ae1'") },
    { "without its alternate-exchange", { "direct", .args = AE("ae1") },
      { "direct" },
      INEQUIVALENT("alternate-exchange", "none but current is the value "
                                         "'ae1' of type 'longstr'") },
};

START_TEST(redeclare)
{
    const struct redeclare_case *v = &redeclare_cases[_i];
    const struct xdecl *d[2] = { &v->first, &v->again };
    amqp_connection_state_t c;
    char x[64], want[512];

    h_case(v->name);
    c = h_connect(H);
    h_name(x, sizeof(x), "redecl");
    for (int k = 0; k < 2; k++) {
        amqp_exchange_declare(c, 1, amqp_cstring_bytes(x),
                              amqp_cstring_bytes(d[k]->type), 0, d[k]->durable,
                              d[k]->auto_delete, d[k]->internal,
                              h_fields_table(&d[k]->args));
        if (k == 0 || !v->text)
            EXPECT_OK(c, "exchange.declare");
    }
    if (v->text) {
        snprintf(want, sizeof(want), v->text, x);
        EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
        amqp_channel_open(c, 1);
        EXPECT_OK(c, "channel.open");
    }
    delete_x(c, x);
    h_close(c);
}
END_TEST

START_TEST(passive_declare)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64];

    h_name(x, sizeof(x), "passive");
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(x),
                          amqp_cstring_bytes("direct"), 1, 0, 0, 0,
                          amqp_empty_table);
    char want[256];
    snprintf(want, sizeof(want), "NOT_FOUND - no exchange '%s' in vhost '/'",
             x);
    EXPECT_CHANNEL_CLOSE(c, 1, 404, want);
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
    DECLARE_EXCHANGE(c, 1, x, "fanout");
    /* Passive ignores the type and the flags. */
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(x),
                          amqp_cstring_bytes("topic"), 1, 1, 1, 0,
                          amqp_empty_table);
    EXPECT_OK(c, "passive declare of an existing exchange");
    delete_x(c, x);
    h_close(c);
}
END_TEST

START_TEST(declare_nowait)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_exchange_declare_t d;
    char x[64];

    memset(&d, 0, sizeof(d));
    d.exchange = amqp_cstring_bytes(h_name(x, sizeof(x), "nowait"));
    d.type = amqp_cstring_bytes("fanout");
    d.nowait = 1;
    d.arguments = amqp_empty_table;
    SEND(c, 1, AMQP_EXCHANGE_DECLARE_METHOD, &d);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0); /* no declare-ok came */
    amqp_exchange_declare(c, 1, d.exchange, d.type, 1, 0, 0, 0,
                          amqp_empty_table);
    EXPECT_OK(c, "the exchange exists");
    amqp_exchange_delete_t del;
    memset(&del, 0, sizeof(del));
    del.exchange = d.exchange;
    del.nowait = 1;
    SEND(c, 1, AMQP_EXCHANGE_DELETE_METHOD, &del);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    amqp_exchange_declare(c, 1, d.exchange, d.type, 1, 0, 0, 0,
                          amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 404, "NOT_FOUND - ");
    h_close(c);
}
END_TEST

/* ---- delete ---- */

START_TEST(delete_if_unused)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q[256], want[256];

    h_name(x, sizeof(x), "unused");
    DECLARE_EXCHANGE(c, 1, x, "direct");
    bound_queue(c, x, "k", q);
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(x), 1);
    snprintf(want, sizeof(want),
             "PRECONDITION_FAILED - exchange '%s' in vhost '/' in use", x);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(x),
                      amqp_cstring_bytes("k"), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind");
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(x), 1);
    EXPECT_OK(c, "exchange.delete if-unused of an unused exchange");
    h_close(c);
}
END_TEST

START_TEST(delete_if_unused_counts_only_source_bindings)
{
    amqp_connection_state_t c = h_connect(H);
    char src[64], dst[64];

    DECLARE_EXCHANGE(c, 1, h_name(src, sizeof(src), "src"), "fanout");
    DECLARE_EXCHANGE(c, 1, h_name(dst, sizeof(dst), "dst"), "fanout");
    amqp_exchange_bind(c, 1, amqp_cstring_bytes(dst), amqp_cstring_bytes(src),
                       amqp_cstring_bytes(""), amqp_empty_table);
    EXPECT_OK(c, "exchange.bind");
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(dst), 1);
    EXPECT_OK(c, "deleting a destination-only exchange with if-unused");
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(src), 1);
    EXPECT_OK(c, "its binding went with it");
    h_close(c);
}
END_TEST

START_TEST(delete_missing_is_ok)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_exchange_delete(c, 1, amqp_cstring_bytes("no-such-exchange-for-roost"),
                         0);
    EXPECT_OK(c, "exchange.delete of a missing exchange");
    h_close(c);
}
END_TEST

START_TEST(delete_removes_bindings)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q[256], buf[64];

    h_name(x, sizeof(x), "delb");
    DECLARE_EXCHANGE(c, 1, x, "fanout");
    bound_queue(c, x, "", q);
    delete_x(c, x);
    DECLARE_EXCHANGE(c, 1, x, "fanout");
    PUBLISH(c, 1, x, "", "after");
    ck_assert_str_eq(ROUTED(c, q, buf), "");
    delete_x(c, x);
    h_close(c);
}
END_TEST

/* ---- exchange-to-exchange bindings ---- */

static void
e2e_bind(amqp_connection_state_t c, const char *dst, const char *src,
         const char *key)
{
    amqp_exchange_bind(c, 1, amqp_cstring_bytes(dst), amqp_cstring_bytes(src),
                       amqp_cstring_bytes(key), amqp_empty_table);
    EXPECT_OK(c, "exchange.bind");
}

START_TEST(e2e_bind_and_unbind)
{
    amqp_connection_state_t c = h_connect(H);
    char a[64], b[64], q[256], buf[64];

    DECLARE_EXCHANGE(c, 1, h_name(a, sizeof(a), "a"), "topic");
    DECLARE_EXCHANGE(c, 1, h_name(b, sizeof(b), "b"), "direct");
    bound_queue(c, b, "k.1", q);
    e2e_bind(c, b, a, "k.*");
    PUBLISH(c, 1, a, "k.1", "yes");
    PUBLISH(c, 1, a, "k.2", "b-drops");
    PUBLISH(c, 1, a, "j.1", "a-drops");
    ck_assert_str_eq(ROUTED(c, q, buf), "yes");
    amqp_exchange_unbind(c, 1, amqp_cstring_bytes(b), amqp_cstring_bytes(a),
                         amqp_cstring_bytes("k.*"), amqp_empty_table);
    EXPECT_OK(c, "exchange.unbind");
    PUBLISH(c, 1, a, "k.1", "no");
    ck_assert_str_eq(ROUTED(c, q, buf), "");
    delete_x(c, a);
    delete_x(c, b);
    h_close(c);
}
END_TEST

START_TEST(e2e_cycle_delivers_once)
{
    amqp_connection_state_t c = h_connect(H);
    char a[64], b[64], qa[256], qb[256], buf[64];

    DECLARE_EXCHANGE(c, 1, h_name(a, sizeof(a), "ca"), "fanout");
    DECLARE_EXCHANGE(c, 1, h_name(b, sizeof(b), "cb"), "fanout");
    e2e_bind(c, b, a, "");
    e2e_bind(c, a, b, "");
    bound_queue(c, a, "", qa);
    bound_queue(c, b, "", qb);
    PUBLISH(c, 1, a, "", "from-a");
    PUBLISH(c, 1, b, "", "from-b");
    ck_assert_str_eq(ROUTED(c, qa, buf), "from-a,from-b");
    ck_assert_str_eq(ROUTED(c, qb, buf), "from-a,from-b");
    delete_x(c, a);
    delete_x(c, b);
    h_close(c);
}
END_TEST

START_TEST(e2e_diamond_delivers_once)
{
    amqp_connection_state_t c = h_connect(H);
    char a[64], b[64], d[64], e[64], q[256], buf[64];

    DECLARE_EXCHANGE(c, 1, h_name(a, sizeof(a), "da"), "fanout");
    DECLARE_EXCHANGE(c, 1, h_name(b, sizeof(b), "db"), "fanout");
    DECLARE_EXCHANGE(c, 1, h_name(d, sizeof(d), "dc"), "fanout");
    DECLARE_EXCHANGE(c, 1, h_name(e, sizeof(e), "dd"), "fanout");
    e2e_bind(c, b, a, "");
    e2e_bind(c, d, a, "");
    e2e_bind(c, e, b, "");
    e2e_bind(c, e, d, "");
    bound_queue(c, e, "", q);
    BIND(c, 1, q, a, "");
    PUBLISH(c, 1, a, "", "one");
    ck_assert_str_eq(ROUTED(c, q, buf), "one");
    delete_x(c, a);
    delete_x(c, b);
    delete_x(c, d);
    delete_x(c, e);
    h_close(c);
}
END_TEST

/* ---- alternate exchange ---- */

START_TEST(alternate_exchange_takes_unroutable)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], ae[64], q[256], qae[256], buf[64];
    amqp_table_entry_t args[1];

    DECLARE_EXCHANGE(c, 1, h_name(ae, sizeof(ae), "ae"), "fanout");
    args[0] = h_entry_str("alternate-exchange", ae);
    h_name(x, sizeof(x), "withae");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, x, "direct", false, false,
                          false, h_table(args, 1));
    bound_queue(c, x, "k", q);
    bound_queue(c, ae, "", qae);
    PUBLISH(c, 1, x, "k", "routed");
    PUBLISH(c, 1, x, "other", "alternate");
    ck_assert_str_eq(ROUTED(c, q, buf), "routed");
    ck_assert_str_eq(ROUTED(c, qae, buf), "alternate");
    /* A mandatory message the alternate exchange routes is not returned. */
    h_publish_at(__FILE__, __LINE__, c, 1, x, "other", "m", 1, true, NULL);
    ck_assert_str_eq(ROUTED(c, qae, buf), "m");
    delete_x(c, x);
    delete_x(c, ae);
    h_close(c);
}
END_TEST

START_TEST(alternate_exchange_missing_or_unrouting)
{
    /* An alternate exchange that does not exist, or routes nowhere: the
     * message is unroutable, and a mandatory one comes back. */
    amqp_connection_state_t c = h_connect(H);
    char x[64];
    amqp_table_entry_t args[] = { h_entry_str("alternate-exchange",
                                              "no-such-exchange-for-roost") };
    struct h_event e;

    h_name(x, sizeof(x), "aemissing");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, x, "direct", false, false,
                          false, h_table(args, 1));
    h_publish_at(__FILE__, __LINE__, c, 1, x, "k", "back", 4, true, NULL);
    EXPECT_METHOD(c, AMQP_BASIC_RETURN_METHOD, &e);
    ck_assert_int_eq(e.code, 312);
    ck_assert_str_eq(e.body, "back");
    h_event_free(&e);
    delete_x(c, x);
    h_close(c);
}
END_TEST

START_TEST(alternate_exchange_chain)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], ae1[64], ae2[64], q[256], buf[64];
    amqp_table_entry_t a1[1], a2[1];

    h_name(ae2, sizeof(ae2), "ae2");
    DECLARE_EXCHANGE(c, 1, ae2, "fanout");
    a2[0] = h_entry_str("alternate-exchange", ae2);
    h_name(ae1, sizeof(ae1), "ae1");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, ae1, "direct", false, false,
                          false, h_table(a2, 1));
    a1[0] = h_entry_str("alternate-exchange", ae1);
    h_name(x, sizeof(x), "x");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, x, "direct", false, false,
                          false, h_table(a1, 1));
    bound_queue(c, ae2, "", q);
    PUBLISH(c, 1, x, "k", "down-the-chain");
    ck_assert_str_eq(ROUTED(c, q, buf), "down-the-chain");
    delete_x(c, x);
    delete_x(c, ae1);
    delete_x(c, ae2);
    h_close(c);
}
END_TEST

/* ---- internal ---- */

START_TEST(internal_reachable_through_bindings)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], in[64], q[256], buf[64];

    DECLARE_EXCHANGE(c, 1, h_name(x, sizeof(x), "front"), "fanout");
    h_name(in, sizeof(in), "inner");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, in, "fanout", false, false,
                          true, amqp_empty_table);
    e2e_bind(c, in, x, "");
    bound_queue(c, in, "", q);
    PUBLISH(c, 1, x, "", "through");
    ck_assert_str_eq(ROUTED(c, q, buf), "through");
    delete_x(c, x);
    delete_x(c, in);
    h_close(c);
}
END_TEST

/* ---- auto-delete ---- */

static bool
exchange_exists(amqp_connection_state_t c, const char *x)
{
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(x),
                          amqp_cstring_bytes("direct"), 1, 0, 0, 0,
                          amqp_empty_table);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(c);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return true;
    h_expect_channel_close_at(__FILE__, __LINE__, c, r, 1, 404, "NOT_FOUND - ");
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
    return false;
}

START_TEST(auto_delete_after_last_unbind)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q1[256], q2[256];

    h_name(x, sizeof(x), "ad");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, x, "direct", false, true,
                          false, amqp_empty_table);
    ck_assert_msg(exchange_exists(c, x),
                  "an unused auto-delete exchange went away");
    bound_queue(c, x, "a", q1);
    bound_queue(c, x, "b", q2);
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q1), amqp_cstring_bytes(x),
                      amqp_cstring_bytes("a"), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind");
    ck_assert_msg(exchange_exists(c, x), "deleted while a binding is left");
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q2), amqp_cstring_bytes(x),
                      amqp_cstring_bytes("b"), amqp_empty_table);
    EXPECT_OK(c, "queue.unbind");
    ck_assert_msg(!exchange_exists(c, x), "not deleted after its last binding");
    h_close(c);
}
END_TEST

START_TEST(auto_delete_when_bound_queue_deleted)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], q[256];

    h_name(x, sizeof(x), "adq");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, x, "fanout", false, true,
                          false, amqp_empty_table);
    bound_queue(c, x, "", q);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(c, "queue.delete");
    ck_assert_msg(!exchange_exists(c, x),
                  "not deleted with its last bound queue");
    h_close(c);
}
END_TEST

START_TEST(auto_delete_after_e2e_unbind)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64], d[64];

    h_name(x, sizeof(x), "ade");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, x, "fanout", false, true,
                          false, amqp_empty_table);
    DECLARE_EXCHANGE(c, 1, h_name(d, sizeof(d), "aded"), "fanout");
    e2e_bind(c, d, x, "");
    amqp_exchange_unbind(c, 1, amqp_cstring_bytes(d), amqp_cstring_bytes(x),
                         amqp_cstring_bytes(""), amqp_empty_table);
    EXPECT_OK(c, "exchange.unbind");
    ck_assert_msg(!exchange_exists(c, x),
                  "not deleted after its last e2e binding");
    delete_x(c, d);
    h_close(c);
}
END_TEST

/* ---- unbind of what is gone ---- */

/* queue.unbind, expecting unbind-ok. */
static void
unbind_ok_at(const char *file, int line, amqp_connection_state_t c,
             const char *q, const char *x, const char *key)
{
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(x),
                      amqp_cstring_bytes(key), amqp_empty_table);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "queue.unbind");
}
#define UNBIND_OK(c, q, x, key) unbind_ok_at(__FILE__, __LINE__, c, q, x, key)

START_TEST(queue_unbind_gone_is_ok)
{
    /* As RabbitMQ 3.10: unbinding what is not bound is unbind-ok, also
     * when the queue or the exchange is gone (client libraries unbind
     * in their cleanup). */
    amqp_connection_state_t c = h_connect(H);
    char q[256], q2[256], x[64], name[64];

    UNBIND_OK(c, h_name(name, sizeof(name), "no-such-queue"), "amq.direct",
              "k");
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    UNBIND_OK(c, q, h_name(x, sizeof(x), "no-such-exchange"), "k");
    UNBIND_OK(c, q, "amq.direct", "never-bound");
    /* The exchange auto-deleted with its last binding. */
    h_declare_exchange_at(__FILE__, __LINE__, c, 1,
                          h_name(x, sizeof(x), "unbind-ad"), "direct", false,
                          true, false, amqp_empty_table);
    BIND(c, 1, q, x, "k");
    UNBIND_OK(c, q, x, "k");
    UNBIND_OK(c, q, x, "k");
    /* The queue deleted. */
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "unbind-deleted"), false,
                  false, false, q2);
    BIND(c, 1, q2, "amq.direct", "k");
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q2), 0, 0);
    EXPECT_OK(c, "queue.delete");
    UNBIND_OK(c, q2, "amq.direct", "k");
    h_close(c);
}
END_TEST

START_TEST(queue_unbind_other_exclusive)
{
    /* Another connection's exclusive queue: nothing bound is still ok,
     * an existing binding is 405 RESOURCE_LOCKED (as RabbitMQ). */
    amqp_connection_state_t owner = h_connect(H), c = h_connect(H);
    char q[256];

    DECLARE_QUEUE(owner, 1, "", false, true, false, q);
    BIND(owner, 1, q, "amq.direct", "k");
    UNBIND_OK(c, q, "amq.direct", "other-key");
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q),
                      amqp_cstring_bytes("amq.direct"),
                      amqp_cstring_bytes("k"), amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 405,
                         "RESOURCE_LOCKED - cannot obtain exclusive access "
                         "to locked queue");
    h_close(c);
    h_close(owner);
}
END_TEST

START_TEST(exchange_unbind_gone_is_ok)
{
    amqp_connection_state_t c = h_connect(H);
    char x[64];

    h_name(x, sizeof(x), "no-such-exchange");
    amqp_exchange_unbind(c, 1, amqp_cstring_bytes(x),
                         amqp_cstring_bytes("amq.direct"),
                         amqp_cstring_bytes("k"), amqp_empty_table);
    EXPECT_OK(c, "exchange.unbind, destination gone");
    amqp_exchange_unbind(c, 1, amqp_cstring_bytes("amq.direct"),
                         amqp_cstring_bytes(x), amqp_cstring_bytes("k"),
                         amqp_empty_table);
    EXPECT_OK(c, "exchange.unbind, source gone");
    amqp_exchange_unbind(c, 1, amqp_cstring_bytes("amq.direct"),
                         amqp_cstring_bytes("amq.fanout"),
                         amqp_cstring_bytes("never-bound"), amqp_empty_table);
    EXPECT_OK(c, "exchange.unbind, not bound");
    h_close(c);
}
END_TEST

/* ---- refused methods ---- */

#define DEFAULT_REFUSED                                                        \
    "ACCESS_REFUSED - operation not permitted on the default exchange"

static amqp_rpc_reply_t
bind_to_default(amqp_connection_state_t c, const char *obj)
{
    char q[256];

    (void)obj;
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    amqp_queue_bind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(""),
                    amqp_cstring_bytes("k"), amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
unbind_from_default(amqp_connection_state_t c, const char *obj)
{
    char q[256];

    (void)obj;
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    amqp_queue_unbind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(""),
                      amqp_cstring_bytes(q), amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

/* exchange.delete of 'name'. */
static amqp_rpc_reply_t
delete_exchange(amqp_connection_state_t c, const char *name)
{
    amqp_exchange_delete(c, 1, amqp_cstring_bytes(name), 0);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
delete_default(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    return delete_exchange(c, "");
}

static amqp_rpc_reply_t
delete_amq_direct(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    return delete_exchange(c, "amq.direct");
}

static void
amq_direct_still_there(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    amqp_exchange_declare(c, 1, amqp_cstring_bytes("amq.direct"),
                          amqp_cstring_bytes("direct"), 1, 0, 0, 0,
                          amqp_empty_table);
    EXPECT_OK(c, "amq.direct is still there");
}

/* exchange.declare of 'name' with 'type', flags and 'args'. */
static amqp_rpc_reply_t
declare_x(amqp_connection_state_t c, const char *name, const char *type,
          bool passive, bool durable, bool auto_delete, bool internal,
          amqp_table_t args)
{
    amqp_exchange_declare(c, 1, amqp_cstring_bytes(name),
                          amqp_cstring_bytes(type), passive, durable,
                          auto_delete, internal, args);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
declare_default(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    return declare_x(c, "", "direct", false, true, false, false,
                     amqp_empty_table);
}

/* Even passively, as RabbitMQ 3.10.8 does. */
static amqp_rpc_reply_t
declare_default_passive(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    return declare_x(c, "", "direct", true, false, false, false,
                     amqp_empty_table);
}

static amqp_rpc_reply_t
declare_amq_prefix(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    return declare_x(c, "amq.roost-test", "direct", false, false, false,
                     false, amqp_empty_table);
}

static amqp_rpc_reply_t
redeclare_amq_direct_as_fanout(amqp_connection_state_t c, const char *obj)
{
    (void)obj;
    return declare_x(c, "amq.direct", "fanout", false, true, false, false,
                     amqp_empty_table);
}

static amqp_rpc_reply_t
declare_unknown_type(amqp_connection_state_t c, const char *obj)
{
    return declare_x(c, obj, "x-bogus", false, false, false, false,
                     amqp_empty_table);
}

static amqp_rpc_reply_t
bind_bad_x_match(amqp_connection_state_t c, const char *obj)
{
    char q[256];
    amqp_table_entry_t b[] = { h_entry_str("x-match", "bogus") };

    DECLARE_EXCHANGE(c, 1, obj, "headers");
    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    amqp_queue_bind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(obj),
                    amqp_cstring_bytes(""), h_table(b, 1));
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
publish_cc_not_an_array(amqp_connection_state_t c, const char *obj)
{
    amqp_table_entry_t e = h_entry_str("CC", "some-queue");
    amqp_basic_properties_t p = { 0 };

    (void)obj;
    p._flags = AMQP_BASIC_HEADERS_FLAG;
    p.headers = h_table(&e, 1);
    h_publish_at(__FILE__, __LINE__, c, 1, "", "k", "x", 1, false, &p);
    return H_NO_REPLY;
}

static amqp_rpc_reply_t
bind_missing_to_exchange(amqp_connection_state_t c, const char *obj)
{
    DECLARE_EXCHANGE(c, 1, obj, "fanout");
    amqp_exchange_bind(c, 1, amqp_cstring_bytes("no-such-exchange-for-roost"),
                       amqp_cstring_bytes(obj), amqp_cstring_bytes(""),
                       amqp_empty_table);
    return amqp_get_rpc_reply(c);
}

static amqp_rpc_reply_t
publish_to_internal(amqp_connection_state_t c, const char *obj)
{
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, obj, "fanout", false,
                          false, true, amqp_empty_table);
    PUBLISH(c, 1, obj, "", "refused");
    return H_NO_REPLY;
}

static const struct h_refusal refusals[] = {
    { "default exchange: queue.bind", bind_to_default, 1, 403,
      DEFAULT_REFUSED },
    { "default exchange: queue.unbind", unbind_from_default, 1, 403,
      DEFAULT_REFUSED },
    { "default exchange: exchange.delete", delete_default, 1, 403,
      DEFAULT_REFUSED },
    { "default exchange: exchange.declare", declare_default, 1, 403,
      DEFAULT_REFUSED },
    { "default exchange: passive exchange.declare", declare_default_passive,
      1, 403, DEFAULT_REFUSED },
    { "amq.* prefix reserved", declare_amq_prefix, 1, 403,
      "ACCESS_REFUSED - exchange name 'amq.roost-test' contains reserved "
      "prefix 'amq.*'" },
    { "amq.direct declared as a fanout", redeclare_amq_direct_as_fanout, 1,
      406,
      "PRECONDITION_FAILED - inequivalent arg 'type' for exchange "
      "'amq.direct' in vhost '/': received 'fanout' but current is "
      "'direct'" },
    { "amq.direct deleted", delete_amq_direct, 1, 403, "ACCESS_REFUSED - ",
      amq_direct_still_there },
    { "unknown type", declare_unknown_type, 0, 503,
      "COMMAND_INVALID - unknown exchange type 'x-bogus'" },
    { "headers: bad x-match", bind_bad_x_match, 1, 406,
      "PRECONDITION_FAILED - Invalid x-match field value <<\"bogus\">>; "
      "expected all, any, all-with-x, or any-with-x" },
    { "CC not an array", publish_cc_not_an_array, 1, 406,
      "PRECONDITION_FAILED - invalid message: "
      "{unacceptable_type_in_header,\"CC\",longstr}" },
    { "exchange.bind of a missing exchange", bind_missing_to_exchange, 1, 404,
      "NOT_FOUND - no exchange 'no-such-exchange-for-roost' in vhost '/'",
      delete_x },
    { "publish to an internal exchange", publish_to_internal, 1, 403,
      "ACCESS_REFUSED - cannot publish to internal exchange '%s' in vhost "
      "'/'",
      delete_x },
};

START_TEST(refused)
{
    h_refused(&refusals[_i]);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("exchange");
    TCase *tc;

    tc = h_tcase(s, "direct and fanout", 20, true);
    tcase_add_test(tc, direct_routes_by_key);
    tcase_add_test(tc, fanout_ignores_key);

    tc = h_tcase(s, "topic", 20, true);
    H_LOOP(tc, topic_patterns, topic_vecs);
    tcase_add_test(tc, topic_overlapping_bindings_one_copy);

    tc = h_tcase(s, "headers", 20, true);
    H_LOOP(tc, headers_routing, headers_cases);
    tcase_add_test(tc, headers_unbind_needs_arguments);

    tc = h_tcase(s, "default exchange", 20, true);
    tcase_add_test(tc, default_routes_by_queue_name);
    tcase_add_test(tc, cc_bcc_default_exchange);
    tcase_add_test(tc, cc_topic_and_mandatory);

    tc = h_tcase(s, "amq.*", 20, true);
    H_LOOP(tc, amq_exchanges_exist, amq_exchanges);

    tc = h_tcase(s, "declare", 20, true);
    H_LOOP(tc, redeclare, redeclare_cases);
    tcase_add_test(tc, passive_declare);
    tcase_add_test(tc, declare_nowait);

    tc = h_tcase(s, "delete", 20, true);
    tcase_add_test(tc, delete_if_unused);
    tcase_add_test(tc, delete_if_unused_counts_only_source_bindings);
    tcase_add_test(tc, delete_missing_is_ok);
    tcase_add_test(tc, delete_removes_bindings);

    tc = h_tcase(s, "exchange-to-exchange", 20, true);
    tcase_add_test(tc, e2e_bind_and_unbind);
    tcase_add_test(tc, e2e_cycle_delivers_once);
    tcase_add_test(tc, e2e_diamond_delivers_once);

    tc = h_tcase(s, "alternate-exchange", 20, true);
    tcase_add_test(tc, alternate_exchange_takes_unroutable);
    tcase_add_test(tc, alternate_exchange_missing_or_unrouting);
    tcase_add_test(tc, alternate_exchange_chain);

    tc = h_tcase(s, "internal", 20, true);
    tcase_add_test(tc, internal_reachable_through_bindings);

    tc = h_tcase(s, "auto-delete", 20, true);
    tcase_add_test(tc, auto_delete_after_last_unbind);
    tcase_add_test(tc, auto_delete_when_bound_queue_deleted);
    tcase_add_test(tc, auto_delete_after_e2e_unbind);

    tc = h_tcase(s, "unbind of what is gone", 20, true);
    tcase_add_test(tc, queue_unbind_gone_is_ok);
    tcase_add_test(tc, queue_unbind_other_exclusive);
    tcase_add_test(tc, exchange_unbind_gone_is_ok);

    tc = h_tcase(s, "refused", 20, true);
    H_LOOP(tc, refused, refusals);

    return h_run(s);
}
