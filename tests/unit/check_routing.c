/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Routing through the core alone (exchange.c and its types): which
 * queues a message reaches through a direct, fanout, topic or headers
 * exchange, the default exchange, alternate exchanges, exchange-to-
 * exchange bindings and the CC and BCC headers, each queue once. No
 * socket and no channel: exchanges, queues and bindings are made with
 * the core's constructors (core_fixture.h) and messages routed with
 * exchange_route_msg, as channel_route does.
 */
#include "tests/unit/core_fixture.h"

/* ---- direct ---- */

START_TEST(direct_routes_by_exact_key)
{
    fx_exchange("d", "direct", NULL);
    fx_queue("q1", false, NULL);
    fx_queue("q2", false, NULL);
    fx_queue("q3", false, NULL);
    fx_bind("d", "q1", "a", NULL);
    fx_bind("d", "q2", "a", NULL);
    fx_bind("d", "q3", "b", NULL);
    ck_assert_str_eq(fx_route("d", "a", NULL), "q1,q2");
    ck_assert_str_eq(fx_route("d", "b", NULL), "q3");
    ck_assert_str_eq(fx_route("d", "c", NULL), "");
    ck_assert_str_eq(fx_route("d", "A", NULL), "");
    ck_assert_str_eq(fx_route("d", "", NULL), "");
}
END_TEST

START_TEST(direct_bind_twice_is_one_binding_and_unbind_removes_it)
{
    struct exchange *x = fx_exchange("d", "direct", NULL);
    struct queue *q = fx_queue("q1", false, NULL);
    fx_bind("d", "q1", "a", NULL);
    fx_bind("d", "q1", "a", NULL);
    fx_bind("d", "q1", "b", NULL);
    ck_assert_uint_eq(x->nbindings, 2);
    /* Two keys of one queue: the queue once per message. */
    ck_assert_str_eq(fx_route("d", "a", NULL), "q1");
    struct amqp_table none = { NULL, 0 };
    ck_assert(exchange_unbind(x, q, NULL, amqp_cstr("a"), none));
    ck_assert(!exchange_unbind(x, q, NULL, amqp_cstr("a"), none));
    ck_assert_str_eq(fx_route("d", "a", NULL), "");
    ck_assert_str_eq(fx_route("d", "b", NULL), "q1");
}
END_TEST

/* ---- fanout ---- */

START_TEST(fanout_ignores_keys)
{
    fx_exchange("f", "fanout", NULL);
    fx_queue("q1", false, NULL);
    fx_queue("q2", false, NULL);
    fx_bind("f", "q1", "x", NULL);
    fx_bind("f", "q2", "", NULL);
    fx_bind("f", "q2", "y", NULL);
    ck_assert_str_eq(fx_route("f", "anything", NULL), "q1,q2");
    ck_assert_str_eq(fx_route("f", "", NULL), "q1,q2");
}
END_TEST

/* ---- topic ---- */

static const struct topic_vec {
    const char *pattern, *key;
    bool match;
} topic_vecs[] = {
    { "a.b.c", "a.b.c", true },
    { "a.b.c", "a.b", false },
    { "a.b", "a.b.c", false },
    { "a.*.c", "a.b.c", true },
    { "a.*.c", "a.c", false },
    { "a.*.c", "a.b.b.c", false },
    { "*", "a", true },
    { "*", "a.b", false },
    { "*.*", "a.b", true },
    { "*.*", "a", false },
    { "a.#", "a", true },
    { "a.#", "a.b.c", true },
    { "a.#", "b.a", false },
    { "#.c", "c", true },
    { "#.c", "a.b.c", true },
    { "#.c", "a.b.c.d", false },
    { "a.#.c", "a.c", true },
    { "a.#.c", "a.b.x.c", true },
    { "a.#.c", "a.b", false },
    { "*.b.#", "a.b", true },
    { "*.b.#", "a.b.c.d", true },
    { "*.b.#", "b", false },
    { "#.*", "a", true },
    { "#.*", "", false },
    { "#", "", true },
    { "#", "a.b.c", true },
    { "#.#", "a.b", true },
    { "", "", true },
    { "", "a", false },
    { "A.b", "a.b", false },
};

START_TEST(topic_patterns)
{
    const struct topic_vec *v = &topic_vecs[_i];
    fx_exchange("t", "topic", NULL);
    fx_queue("q", false, NULL);
    fx_bind("t", "q", v->pattern, NULL);
    ck_assert_msg(strcmp(fx_route("t", v->key, NULL), v->match ? "q" : "") == 0,
                  "pattern '%s' key '%s': want %s", v->pattern, v->key,
                  v->match ? "a match" : "no match");
}
END_TEST

START_TEST(topic_reaches_each_queue_once)
{
    fx_exchange("t", "topic", NULL);
    fx_queue("q1", false, NULL);
    fx_queue("q2", false, NULL);
    fx_queue("q3", false, NULL);
    fx_bind("t", "q1", "stock.#", NULL);
    fx_bind("t", "q1", "*.usd.*", NULL);
    fx_bind("t", "q1", "#", NULL);
    fx_bind("t", "q2", "stock.usd.*", NULL);
    fx_bind("t", "q3", "stock.eur.*", NULL);
    ck_assert_str_eq(fx_route("t", "stock.usd.nyse", NULL), "q1,q2");
    ck_assert_str_eq(fx_route("t", "stock.eur.xetra", NULL), "q1,q3");
    /* The same key again (the trie's memo of the last route). */
    ck_assert_str_eq(fx_route("t", "stock.eur.xetra", NULL), "q1,q3");
    ck_assert_str_eq(fx_route("t", "bond", NULL), "q1");
    struct amqp_table none = { NULL, 0 };
    ck_assert(exchange_unbind(fx_find_exchange("t"), fx_find_queue("q1"),
                              NULL, amqp_cstr("#"), none));
    ck_assert_str_eq(fx_route("t", "bond", NULL), "");
    ck_assert_str_eq(fx_route("t", "stock.eur.xetra", NULL), "q1,q3");
}
END_TEST

/* ---- headers ---- */

static const struct headers_vec {
    const char *binding, *headers;
    bool match;
} headers_vecs[] = {
    /* all is the default */
    { "a=1 b=2", "a=1 b=2 c=3", true },
    { "a=1 b=2", "a=1", false },
    { "x-match=all a=1 b=2", "b=2 a=1", true },
    { "x-match=all a=1 b=2", "a=1 b=3", false },
    { "x-match=any a=1 b=2", "b=2", true },
    { "x-match=any a=1 b=2", "a=9 c=1", false },
    /* a void argument asks only that the header be there */
    { "a!", "a=anything", true },
    { "a!", "b=1", false },
    /* values compare with their kinds: the string "5" is not 5 */
    { "n#5", "n#5", true },
    { "n#5", "n=5", false },
    { "n#5", "n#6", false },
    /* all and any skip arguments named x-*; the -with-x modes compare
     * them too */
    { "x-match=all x-k=1 a=1", "a=1", true },
    { "x-match=all-with-x x-k=1 a=1", "a=1", false },
    { "x-match=all-with-x x-k=1 a=1", "a=1 x-k=1", true },
    { "x-match=any x-k=1", "x-k=1", false },
    { "x-match=any-with-x x-k=1 a=1", "x-k=1", true },
    { "x-match=any-with-x x-k=1 a=1", "x-k=2", false },
    /* no argument to match: all of none holds, any of none does not */
    { "x-match=all", "a=1", true },
    { "x-match=any", "a=1", false },
    /* a message without headers */
    { "a=1", NULL, false },
    { "x-match=all", NULL, true },
};

START_TEST(headers_matches)
{
    const struct headers_vec *v = &headers_vecs[_i];
    struct fx_props p = { .headers = v->headers };
    fx_exchange("h", "headers", NULL);
    fx_queue("q", false, NULL);
    fx_bind("h", "q", "", v->binding);
    ck_assert_msg(strcmp(fx_route("h", "ignored", &p), v->match ? "q" : "") == 0,
                  "binding '%s' headers '%s': want %s", v->binding,
                  v->headers ? v->headers : "(none)",
                  v->match ? "a match" : "no match");
}
END_TEST

START_TEST(headers_refuses_unknown_x_match)
{
    struct exchange *x = fx_exchange("h", "headers", NULL);
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_table t;
    char err[400] = "";

    ck_assert_int_eq(exchange_bind(x, q, NULL, amqp_cstr(""),
                                   fx_table(&t, "x-match=some a=1"), err,
                                   sizeof(err)), -1);
    ck_assert_str_eq(err, "Invalid x-match field value <<\"some\">>; expected "
                     "all, any, all-with-x, or any-with-x");
    ck_assert_uint_eq(x->nbindings, 0);
}
END_TEST

/* ---- the default exchange and the predeclared ones ---- */

START_TEST(default_exchange_routes_to_the_queue_named)
{
    fx_queue("orders", false, NULL);
    fx_queue("orders.eu", false, NULL);
    ck_assert(fx_find_exchange("")->is_default);
    ck_assert_str_eq(fx_route("", "orders", NULL), "orders");
    ck_assert_str_eq(fx_route("", "orders.eu", NULL), "orders.eu");
    ck_assert_str_eq(fx_route("", "nope", NULL), "");
    ck_assert_str_eq(fx_route("", "", NULL), "");
}
END_TEST

START_TEST(predeclared_exchanges_have_their_types)
{
    static const char *const names[][2] = {
        { "amq.direct", "direct" }, { "amq.fanout", "fanout" },
        { "amq.topic", "topic" }, { "amq.headers", "headers" },
        { "amq.match", "headers" }, { "amq.rabbitmq.trace", "topic" },
    };
    for (size_t i = 0; i < NELEMS(names); i++) {
        struct exchange *x = fx_find_exchange(names[i][0]);
        ck_assert_msg(x != NULL, "%s", names[i][0]);
        ck_assert_str_eq(x->ops->type, names[i][1]);
    }
    fx_queue("q", false, NULL);
    fx_bind("amq.topic", "q", "a.*", NULL);
    ck_assert_str_eq(fx_route("amq.topic", "a.b", NULL), "q");
}
END_TEST

/* ---- alternate exchanges ---- */

START_TEST(alternate_exchange_takes_what_routes_nowhere)
{
    fx_exchange("ae", "fanout", NULL);
    fx_exchange("main", "direct", "alternate-exchange=ae");
    fx_queue("routed", false, NULL);
    fx_queue("unrouted", false, NULL);
    fx_bind("main", "routed", "k", NULL);
    fx_bind("ae", "unrouted", "", NULL);
    ck_assert_str_eq(fx_route("main", "k", NULL), "routed");
    ck_assert_str_eq(fx_route("main", "other", NULL), "unrouted");
    /* Publish: the message itself reaches the alternate's queue. */
    struct fx_pub r = fx_publish("main", "other", "m1", NULL);
    ck_assert_uint_eq(r.routed, 1);
    ck_assert_str_eq(fx_drain(fx_find_queue("unrouted")), "m1");
    ck_assert_str_eq(fx_drain(fx_find_queue("routed")), "");
}
END_TEST

START_TEST(alternate_exchanges_chain_and_may_be_missing)
{
    fx_exchange("ae2", "fanout", NULL);
    fx_exchange("ae1", "direct", "alternate-exchange=ae2");
    fx_exchange("main", "direct", "alternate-exchange=ae1");
    fx_exchange("lost", "direct", "alternate-exchange=nowhere");
    fx_queue("q1", false, NULL);
    fx_queue("q2", false, NULL);
    fx_bind("ae1", "q1", "k1", NULL);
    fx_bind("ae2", "q2", "", NULL);
    ck_assert_str_eq(fx_route("main", "k1", NULL), "q1");
    ck_assert_str_eq(fx_route("main", "k2", NULL), "q2");
    ck_assert_str_eq(fx_route("lost", "k1", NULL), "");
}
END_TEST

START_TEST(alternate_exchange_cycle_ends)
{
    fx_exchange("a", "direct", "alternate-exchange=b");
    fx_exchange("b", "direct", "alternate-exchange=a");
    fx_queue("q", false, NULL);
    fx_bind("b", "q", "k", NULL);
    ck_assert_str_eq(fx_route("a", "k", NULL), "q");
    ck_assert_str_eq(fx_route("a", "other", NULL), "");
}
END_TEST

/* ---- exchange to exchange ---- */

START_TEST(exchange_to_exchange_bindings_are_followed)
{
    fx_exchange("t", "topic", NULL);
    fx_exchange("f", "fanout", NULL);
    fx_queue("q1", false, NULL);
    fx_queue("q2", false, NULL);
    fx_bind_x("t", "f", "a.*", NULL);
    fx_bind("f", "q1", "", NULL);
    fx_bind("t", "q2", "#", NULL);
    ck_assert_str_eq(fx_route("t", "a.b", NULL), "q1,q2");
    ck_assert_str_eq(fx_route("t", "b", NULL), "q2");
}
END_TEST

START_TEST(exchange_cycles_reach_each_queue_once)
{
    fx_exchange("x1", "fanout", NULL);
    fx_exchange("x2", "fanout", NULL);
    fx_queue("q", false, NULL);
    fx_bind_x("x1", "x2", "", NULL);
    fx_bind_x("x2", "x1", "", NULL);
    fx_bind("x1", "q", "", NULL);
    fx_bind("x2", "q", "", NULL);
    ck_assert_str_eq(fx_route("x1", "", NULL), "q");
    ck_assert_str_eq(fx_route("x2", "", NULL), "q");
}
END_TEST

/* ---- sender-selected distribution: CC and BCC ---- */

static void
three_keys(void)
{
    fx_exchange("d", "direct", NULL);
    fx_queue("q1", false, NULL);
    fx_queue("q2", false, NULL);
    fx_queue("q3", false, NULL);
    fx_bind("d", "q1", "k1", NULL);
    fx_bind("d", "q2", "k2", NULL);
    fx_bind("d", "q3", "k3", NULL);
}

START_TEST(route_keys_adds_extra_keys_each_queue_once)
{
    three_keys();
    struct msg *m = fx_msg("d", "k1", "", NULL);
    struct amqp_bytes extra[] = { amqp_cstr("k3"), amqp_cstr("k1"),
                                  amqp_cstr("k3"), amqp_cstr("none") };
    struct route_result rr;
    route_result_init(&rr);
    exchange_route_keys(fx_find_exchange("d"), m, extra, NELEMS(extra), &rr);
    ck_assert_uint_eq(rr.n, 2);
    ck_assert_str_eq(rr.qs[0]->name, "q1");
    ck_assert_str_eq(rr.qs[1]->name, "q3");
    route_result_free(&rr);
    msg_unref(m);
}
END_TEST

START_TEST(cc_and_bcc_headers_route_too)
{
    three_keys();
    struct fx_props cc = { .headers = "CC=[k2]" };
    struct fx_props bcc = { .headers = "BCC=[k3]" };
    struct fx_props both = { .headers = "CC=[k1,k2] BCC=[k3,k2]" };
    struct fx_props only_cc = { .headers = "CC=[k3]" };
    ck_assert_str_eq(fx_route("d", "k1", &cc), "q1,q2");
    ck_assert_str_eq(fx_route("d", "k1", &bcc), "q1,q3");
    ck_assert_str_eq(fx_route("d", "k1", &both), "q1,q2,q3");
    /* The routing key may route nowhere: CC alone is enough. */
    ck_assert_str_eq(fx_route("d", "nope", &only_cc), "q3");
}
END_TEST

START_TEST(bcc_is_removed_from_what_queues_get)
{
    three_keys();
    struct fx_props p = { .headers = "CC=[k2] BCC=[k3] app=x" };
    struct fx_pub r = fx_publish("d", "k1", "m1", &p);
    ck_assert_uint_eq(r.routed, 3);
    static const char *const qs[] = { "q1", "q2", "q3" };
    for (size_t i = 0; i < NELEMS(qs); i++) {
        struct queue *q = fx_find_queue(qs[i]);
        struct qentry e;
        struct amqp_field v;
        ck_assert_msg(queue_take(q, &e), "%s is empty", qs[i]);
        struct amqp_table h = msg_headers(e.m);
        ck_assert_msg(!table_get(h, "BCC", &v), "%s sees BCC", qs[i]);
        ck_assert(table_get(h, "CC", &v) && v.kind == AMQP_FIELD_ARRAY);
        ck_assert(table_get(h, "app", &v) && amqp_bytes_eq(v.v.str, "x"));
        ck_assert_str_eq(fx_body(e.m, false), "m1");
        /* The routing key is the publish's, whichever key routed it. */
        ck_assert_uint_eq(msg_rkey_len(e.m), 2);
        ck_assert_str_eq(msg_rkey(e.m), "k1");
        queue_ack(q, e);
    }
}
END_TEST

static Suite *
routing_suite(void)
{
    Suite *s = suite_create("routing");
    TCase *tc = fx_tcase(s, "direct");
    tcase_add_test(tc, direct_routes_by_exact_key);
    tcase_add_test(tc, direct_bind_twice_is_one_binding_and_unbind_removes_it);
    tc = fx_tcase(s, "fanout");
    tcase_add_test(tc, fanout_ignores_keys);
    tc = fx_tcase(s, "topic");
    tcase_add_loop_test(tc, topic_patterns, 0, (int)NELEMS(topic_vecs));
    tcase_add_test(tc, topic_reaches_each_queue_once);
    tc = fx_tcase(s, "headers");
    tcase_add_loop_test(tc, headers_matches, 0, (int)NELEMS(headers_vecs));
    tcase_add_test(tc, headers_refuses_unknown_x_match);
    tc = fx_tcase(s, "default");
    tcase_add_test(tc, default_exchange_routes_to_the_queue_named);
    tcase_add_test(tc, predeclared_exchanges_have_their_types);
    tc = fx_tcase(s, "alternate");
    tcase_add_test(tc, alternate_exchange_takes_what_routes_nowhere);
    tcase_add_test(tc, alternate_exchanges_chain_and_may_be_missing);
    tcase_add_test(tc, alternate_exchange_cycle_ends);
    tc = fx_tcase(s, "exchange to exchange");
    tcase_add_test(tc, exchange_to_exchange_bindings_are_followed);
    tcase_add_test(tc, exchange_cycles_reach_each_queue_once);
    tc = fx_tcase(s, "sender-selected");
    tcase_add_test(tc, route_keys_adds_extra_keys_each_queue_once);
    tcase_add_test(tc, cc_and_bcc_headers_route_too);
    tcase_add_test(tc, bcc_is_removed_from_what_queues_get);
    return s;
}

int
main(void)
{
    return run_suite(routing_suite());
}
