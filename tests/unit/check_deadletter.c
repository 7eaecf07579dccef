/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * How messages leave a queue other than by an ack, through the core
 * alone (queue.c, deadletter.c): TTL expiry (the expiration property and
 * x-message-ttl, the lower winning, at the head only, by the queue's
 * timer), x-expires, dead-lettering with x-death and x-first-death-*
 * for the reasons rejected, expired, maxlen and delivery_limit, the
 * cycles RabbitMQ drops, and x-delivery-limit.
 *
 * The core reads the monotonic clock itself (now_ms, broker/lib/util.h):
 * there is no clock to fake. Expiry is tested with TTLs of 0 (gone at
 * once, decided at the push) and 60 s (never within a test), and the
 * timers with TTLs of a few ms and a bounded run of the event loop.
 */
#include "tests/unit/core_fixture.h"

#include "amqp/props.h"
#include "broker/core/deadletter.h"
#include "broker/core/stats.h"

/* Take the first ready entry of 'q' (the test fails if it is empty);
 * the caller acks it. */
static struct qentry
take_one(struct queue *q)
{
    struct qentry e;
    ck_assert_msg(queue_take(q, &e), "queue %s is empty", q->name);
    return e;
}

static bool
is_empty(void *arg)
{
    return queue_ready_count(arg) == 0;
}

/* ---- TTL ---- */

START_TEST(ttl_zero_expires_at_once_without_a_consumer)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_props p = { .expiration = "0" };
    ck_assert_uint_eq(fx_publish("", "q", "m1", &p).routed, 1);
    ck_assert_uint_eq(queue_ready_count(q), 0);
    ck_assert_uint_eq(q->dropped[DROP_EXPIRED], 1);
    ck_assert_uint_eq(q->dead_lettered[DROP_EXPIRED], 0);
}
END_TEST

START_TEST(ttl_zero_still_reaches_a_ready_consumer)
{
    struct queue *q = fx_queue("q", false, NULL);
    fx_consume(q, "c", 0, 0);
    struct fx_props p = { .expiration = "0" };
    fx_publish("", "q", "m1", &p);
    ck_assert_str_eq(fx_deliveries(), "c:m1");
    ck_assert_uint_eq(q->dropped[DROP_EXPIRED], 0);
}
END_TEST

START_TEST(ttl_zero_expires_when_no_consumer_can_take_it)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    c->blocked = true;
    struct fx_props p = { .expiration = "0" };
    fx_publish("", "q", "m1", &p);
    ck_assert_uint_eq(queue_ready_count(q), 0);
    ck_assert_uint_eq(q->dropped[DROP_EXPIRED], 1);
    c->blocked = false;
    queue_dispatch(q);
    ck_assert_str_eq(fx_deliveries(), "");
}
END_TEST

static const struct ttl_vec {
    const char *args, *expiration;
    bool expired;
} ttl_vecs[] = {
    { "x-message-ttl#0", NULL, true },
    { "x-message-ttl#0", "60000", true },
    { "x-message-ttl#60000", "0", true },
    { "x-message-ttl#60000", NULL, false },
    { NULL, "60000", false },
    { NULL, NULL, false },
};

START_TEST(queue_ttl_and_expiration_the_lower_wins)
{
    const struct ttl_vec *v = &ttl_vecs[_i];
    struct queue *q = fx_queue("q", false, v->args);
    struct fx_props p = { .expiration = v->expiration };
    fx_publish("", "q", "m1", &p);
    ck_assert_msg(queue_ready_count(q) == (v->expired ? 0u : 1u),
                  "args '%s' expiration '%s': want %s",
                  v->args ? v->args : "", v->expiration ? v->expiration : "",
                  v->expired ? "expired" : "kept");
}
END_TEST

START_TEST(messages_expire_at_the_head_only)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_props later = { .expiration = "60000" };
    struct fx_props now = { .expiration = "0" };
    fx_publish("", "q", "m1", &later);
    fx_publish("", "q", "m2", &now);
    fx_publish("", "q", "m3", NULL);
    /* m2 is due, but m1 is ahead of it (RabbitMQ's rule too). */
    ck_assert_uint_eq(queue_ready_count(q), 3);
    struct qentry e = take_one(q);
    ck_assert_str_eq(fx_body(e.m, false), "m1");
    queue_expire(q);
    ck_assert_uint_eq(q->dropped[DROP_EXPIRED], 1);
    ck_assert_str_eq(fx_drain(q), "m3");
    queue_ack(q, e);
}
END_TEST

START_TEST(the_queue_timer_expires_messages)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_props p = { .expiration = "20" };
    fx_publish("", "q", "m1", &p);
    fx_publish("", "q", "m2", &p);
    ck_assert_uint_eq(queue_ready_count(q), 2);
    ck_assert(fx_loop_until(is_empty, q, 2000));
    ck_assert_uint_eq(q->dropped[DROP_EXPIRED], 2);
}
END_TEST

static bool
is_gone(void *arg)
{
    return fx_find_queue(arg) == NULL;
}

static bool
never(void *arg)
{
    (void)arg;
    return false;
}

START_TEST(x_expires_deletes_a_queue_left_unused)
{
    fx_queue("idle", false, "x-expires#20");
    struct queue *used = fx_queue("used", false, "x-expires#20");
    fx_consume(used, "c", 0, 0);
    ck_assert(fx_loop_until(is_gone, "idle", 2000));
    (void)fx_loop_until(never, NULL, 60);
    ck_assert_ptr_eq(fx_find_queue("used"), used);
}
END_TEST

/* ---- dead-lettering ---- */

/* A queue "work" dead-lettering to exchange 'dlx' (of 'type', made
 * here), which leads to queue "dlq" by key 'dlq_key'. */
static struct queue *
work_queue(const char *type, const char *args, const char *dlq_key)
{
    fx_exchange("dlx", type, NULL);
    fx_queue("dlq", false, NULL);
    fx_bind("dlx", "dlq", dlq_key, NULL);
    return fx_queue("work", false, args);
}

/* The head of "dlq" is 'body', dead-lettered once from "work" for
 * 'reason'; it is taken and acked. */
static void
expect_dead_letter(const char *body, const char *reason)
{
    struct queue *dlq = fx_find_queue("dlq");
    struct qentry e = take_one(dlq);
    struct deadletter_death d;

    ck_assert_str_eq(fx_body(e.m, false), body);
    ck_assert(deadletter_first_death(e.m, &d));
    ck_assert_msg(amqp_bytes_eq(d.reason, reason), "reason '%.*s', want %s",
                  (int)d.reason.len, (const char *)d.reason.ptr, reason);
    ck_assert(amqp_bytes_eq(d.queue, "work"));
    ck_assert_int_eq(d.count, 1);
    queue_ack(dlq, e);
}

static struct amqp_bytes
header_str(const struct msg *m, const char *key)
{
    struct amqp_field v;
    ck_assert_msg(table_get(msg_headers(m), key, &v), "no header %s", key);
    ck_assert_int_eq(v.kind, AMQP_FIELD_LONGSTR);
    return v.v.str;
}

/* The x-death header's entries (its array). */
static struct amqp_array
deaths(const struct msg *m)
{
    struct amqp_field v;
    ck_assert(table_get(msg_headers(m), "x-death", &v));
    ck_assert_int_eq(v.kind, AMQP_FIELD_ARRAY);
    return v.v.array;
}

START_TEST(rejected_is_dead_lettered_with_x_death)
{
    struct queue *q = work_queue("direct", "x-dead-letter-exchange=dlx "
                                 "x-dead-letter-routing-key=dead", "dead");
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    struct fx_props p = { .headers = "app=demo", .message_id = "id-1" };
    fx_publish("", "work", "m1", &p);
    ck_assert_str_eq(fx_deliveries(), "c:m1");
    fx_settle(c, "m1", FX_REJECT);
    ck_assert_uint_eq(queue_ready_count(q), 0);
    ck_assert_uint_eq(queue_unacked_count(q), 0);
    ck_assert_uint_eq(q->dead_lettered[DROP_REJECTED], 1);

    struct queue *dlq = fx_find_queue("dlq");
    ck_assert_uint_eq(queue_ready_count(dlq), 1);
    struct qentry e = take_one(dlq);
    const struct msg *m = e.m;
    ck_assert_str_eq(fx_body(m, false), "m1");
    /* Republished to the DLX with the dead-letter routing key. */
    ck_assert_str_eq(msg_exchange(m), "dlx");
    ck_assert_str_eq(msg_rkey(m), "dead");
    struct deadletter_death d;
    ck_assert(deadletter_first_death(m, &d));
    ck_assert(amqp_bytes_eq(d.reason, "rejected"));
    ck_assert(amqp_bytes_eq(d.queue, "work"));
    ck_assert(amqp_bytes_eq(d.exchange, ""));
    ck_assert(d.has_rkey && amqp_bytes_eq(d.rkey, "work"));
    ck_assert_int_eq(d.count, 1);
    ck_assert_uint_eq(array_count(deaths(m)), 1);
    /* The entry's time, and nothing of an expiration it did not have. */
    struct table_iter it;
    struct amqp_field entry, v;
    array_iter_init(&it, deaths(m));
    ck_assert(array_next(&it, &entry));
    ck_assert(table_get(entry.v.table, "time", &v));
    ck_assert_int_eq(v.kind, AMQP_FIELD_TIMESTAMP);
    ck_assert_uint_gt(v.v.u, 0);
    ck_assert(!table_get(entry.v.table, "original-expiration", &v));
    ck_assert(amqp_bytes_eq(header_str(m, "x-first-death-reason"),
                            "rejected"));
    ck_assert(amqp_bytes_eq(header_str(m, "x-first-death-queue"), "work"));
    ck_assert(amqp_bytes_eq(header_str(m, "x-first-death-exchange"), ""));
    /* The publisher's headers and properties are kept. */
    ck_assert(amqp_bytes_eq(header_str(m, "app"), "demo"));
    struct content_header h;
    ck_assert_int_eq(content_header_decode(msg_hdr(m), msg_hdr_len(m), &h),
                     AMQP_OK);
    ck_assert(amqp_bytes_eq(h.props.message_id, "id-1"));
    queue_ack(dlq, e);
}
END_TEST

START_TEST(without_a_dead_letter_key_the_routing_key_is_kept)
{
    struct queue *q = work_queue("fanout", "x-dead-letter-exchange=dlx", "");
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    fx_publish("", "work", "m1", NULL);
    fx_settle(c, "m1", FX_REJECT);
    struct queue *dlq = fx_find_queue("dlq");
    struct qentry e = take_one(dlq);
    ck_assert_str_eq(msg_exchange(e.m), "dlx");
    ck_assert_str_eq(msg_rkey(e.m), "work");
    queue_ack(dlq, e);
}
END_TEST

START_TEST(expired_copy_moves_its_expiration_into_x_death)
{
    struct queue *q = work_queue("fanout", "x-dead-letter-exchange=dlx", "");
    struct fx_props p = { .expiration = "0" };
    fx_publish("", "work", "m1", &p);
    ck_assert_uint_eq(queue_ready_count(q), 0);
    ck_assert_uint_eq(q->dead_lettered[DROP_EXPIRED], 1);
    struct queue *dlq = fx_find_queue("dlq");
    /* Without its expiration it does not expire again in the DLQ. */
    ck_assert_uint_eq(queue_ready_count(dlq), 1);
    struct qentry e = take_one(dlq);
    struct deadletter_death d;
    ck_assert(deadletter_first_death(e.m, &d));
    ck_assert(amqp_bytes_eq(d.reason, "expired"));
    ck_assert(amqp_bytes_eq(d.queue, "work"));
    struct table_iter it;
    struct amqp_field entry, v;
    array_iter_init(&it, deaths(e.m));
    ck_assert(array_next(&it, &entry));
    ck_assert(table_get(entry.v.table, "original-expiration", &v));
    ck_assert(amqp_bytes_eq(v.v.str, "0"));
    struct content_header h;
    ck_assert_int_eq(content_header_decode(msg_hdr(e.m), msg_hdr_len(e.m),
                                           &h), AMQP_OK);
    ck_assert_uint_eq(h.props.flags & AMQP_BASIC_EXPIRATION_FLAG, 0);
    ck_assert_int_eq(msg_ttl(e.m), -1);
    queue_ack(dlq, e);
}
END_TEST

static const char *const maxlen_args[] = {
    "x-max-length#2 x-dead-letter-exchange=dlx",
    /* bodies of 2 bytes: 3 of them are over 5 */
    "x-max-length-bytes#5 x-dead-letter-exchange=dlx",
};

START_TEST(drop_head_dead_letters_the_oldest_as_maxlen)
{
    struct queue *q = work_queue("fanout", maxlen_args[_i], "");
    for (int i = 1; i <= 3; i++) {
        char body[8];
        snprintf(body, sizeof(body), "m%d", i);
        struct fx_pub r = fx_publish("", "work", body, NULL);
        ck_assert_uint_eq(r.refused, 0);
    }
    ck_assert_uint_eq(q->dead_lettered[DROP_MAXLEN], 1);
    ck_assert_str_eq(fx_drain(q), "m2 m3");
    expect_dead_letter("m1", "maxlen");
}
END_TEST

static const struct overflow_vec {
    const char *args;
    bool dead_lettered;
} overflow_vecs[] = {
    { "x-max-length#1 x-overflow=reject-publish-dlx "
      "x-dead-letter-exchange=dlx", true },
    { "x-max-length#1 x-overflow=reject-publish "
      "x-dead-letter-exchange=dlx", false },
};

START_TEST(reject_publish_refuses_the_new_one)
{
    const struct overflow_vec *v = &overflow_vecs[_i];
    struct queue *q = work_queue("fanout", v->args, "");
    ck_assert_uint_eq(fx_publish("", "work", "m1", NULL).refused, 0);
    ck_assert_uint_eq(fx_publish("", "work", "m2", NULL).refused, 1);
    ck_assert_str_eq(fx_drain(q), "m1");
    ck_assert_uint_eq(queue_ready_count(fx_find_queue("dlq")),
                      v->dead_lettered ? 1 : 0);
    /* reject-publish-dlx: dead-lettered as "maxlen". */
    if (v->dead_lettered)
        expect_dead_letter("m2", "maxlen");
}
END_TEST

START_TEST(rejected_twice_in_one_queue_counts_two)
{
    /* The default exchange leads back into the queue itself, which a
     * rejection may do (RabbitMQ's rule). */
    struct queue *q = fx_queue("loop", false, "x-dead-letter-exchange= "
                               "x-dead-letter-routing-key=loop");
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    fx_publish("", "loop", "m1", NULL);
    fx_settle(c, "m1", FX_REJECT);
    /* A new message, not a redelivery. */
    ck_assert_str_eq(fx_deliveries(), "c:m1 c:m1");
    fx_settle(c, "m1", FX_REJECT);
    ck_assert_str_eq(fx_deliveries(), "c:m1");
    ck_assert_uint_eq(c->nheld, 1);
    const struct msg *m = c->held[0].e.m;
    struct deadletter_death d;
    ck_assert(deadletter_first_death(m, &d));
    ck_assert(amqp_bytes_eq(d.reason, "rejected"));
    ck_assert(amqp_bytes_eq(d.queue, "loop"));
    ck_assert_int_eq(d.count, 2);
    ck_assert_uint_eq(array_count(deaths(m)), 1);
    ck_assert_uint_eq(q->dead_lettered[DROP_REJECTED], 2);
}
END_TEST

START_TEST(an_expiry_cycle_is_dropped)
{
    /* q1 expires into q2, q2 into q1: reaching q1 again, with no
     * rejection since it died there, closes a fully automatic cycle
     * (RabbitMQ 3.10's rule): q2 drops it. */
    struct queue *q1 = fx_queue("q1", false, "x-message-ttl#0 "
                                "x-dead-letter-exchange= "
                                "x-dead-letter-routing-key=q2");
    struct queue *q2 = fx_queue("q2", false, "x-message-ttl#0 "
                                "x-dead-letter-exchange= "
                                "x-dead-letter-routing-key=q1");
    fx_publish("", "q1", "m1", NULL);
    ck_assert_uint_eq(q1->dead_lettered[DROP_EXPIRED], 1);
    ck_assert_uint_eq(q2->dead_lettered[DROP_EXPIRED], 0);
    ck_assert_uint_eq(q1->dropped[DROP_EXPIRED], 0);
    ck_assert_uint_eq(q2->dropped[DROP_EXPIRED], 1);
    ck_assert_uint_eq(queue_ready_count(q1), 0);
    ck_assert_uint_eq(queue_ready_count(q2), 0);
}
END_TEST

START_TEST(an_expiry_into_the_queue_itself_is_dropped)
{
    struct queue *q = fx_queue("q", false, "x-message-ttl#0 "
                               "x-dead-letter-exchange= "
                               "x-dead-letter-routing-key=q");
    fx_publish("", "q", "m1", NULL);
    /* Dropped at once, as a drop, not as a dead letter. */
    ck_assert_uint_eq(q->dead_lettered[DROP_EXPIRED], 0);
    ck_assert_uint_eq(q->dropped[DROP_EXPIRED], 1);
    ck_assert_uint_eq(queue_ready_count(q), 0);
}
END_TEST

static const char *const drop_args[] = {
    NULL,                                   /* no dead-letter exchange */
    "x-dead-letter-exchange=missing",       /* one that does not exist */
};

START_TEST(without_a_dead_letter_exchange_it_is_dropped)
{
    struct queue *q = fx_queue("q", false, drop_args[_i]);
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    fx_publish("", "q", "m1", NULL);
    fx_settle(c, "m1", FX_REJECT);
    ck_assert_uint_eq(q->dropped[DROP_REJECTED], 1);
    ck_assert_uint_eq(q->dead_lettered[DROP_REJECTED], 0);
    ck_assert_uint_eq(queue_ready_count(q), 0);
    ck_assert_uint_eq(queue_unacked_count(q), 0);
}
END_TEST

/* ---- x-delivery-limit ---- */

static const struct limit_vec {
    const char *args;
    bool durable;
} limit_vecs[] = {
    { "x-queue-type=quorum x-delivery-limit#2", true },
    /* Roost's extension: a classic queue takes it too */
    { "x-delivery-limit#2", false },
};

START_TEST(delivery_limit_drops_after_the_last_return)
{
    const struct limit_vec *v = &limit_vecs[_i];
    struct queue *q = fx_queue("q", v->durable, v->args);
    struct fx_consumer *c = fx_consume(q, "c", 1, 0);
    fx_publish("", "q", "m1", NULL);
    fx_publish("", "q", "m2", NULL);
    ck_assert_str_eq(fx_deliveries(), "c:m1");
    /* A limit of 2 allows two returns, so three deliveries. */
    ck_assert_uint_eq(fx_settle(c, "m1", FX_REQUEUE), 1);
    ck_assert_str_eq(fx_deliveries(), "c:m1*");
    ck_assert_uint_eq(fx_settle(c, "m1", FX_RETRY), 2);
    ck_assert_str_eq(fx_deliveries(), "c:m1*");
    ck_assert_uint_eq(fx_settle(c, "m1", FX_REQUEUE), 3);
    ck_assert_str_eq(fx_deliveries(), "c:m2");
    ck_assert_uint_eq(q->dropped[DROP_DELIVERY_LIMIT], 1);
    ck_assert_uint_eq(queue_ready_count(q), 0);
}
END_TEST

START_TEST(delivery_limit_dead_letters_with_its_reason)
{
    fx_exchange("dlx", "fanout", NULL);
    fx_queue("dlq", false, NULL);
    fx_bind("dlx", "dlq", "", NULL);
    struct queue *q = fx_queue("work", true, "x-queue-type=quorum "
                               "x-delivery-limit#0 "
                               "x-dead-letter-exchange=dlx");
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    fx_publish("", "work", "m1", NULL);
    ck_assert_str_eq(fx_deliveries(), "c:m1");
    /* A limit of 0: the first return is one too many. */
    fx_settle(c, "m1", FX_REQUEUE);
    ck_assert_str_eq(fx_deliveries(), "");
    ck_assert_uint_eq(q->dead_lettered[DROP_DELIVERY_LIMIT], 1);
    ck_assert_uint_eq(queue_ready_count(q), 0);
    expect_dead_letter("m1", "delivery_limit");
}
END_TEST

static Suite *
deadletter_suite(void)
{
    Suite *s = suite_create("deadletter");
    TCase *tc = fx_tcase(s, "ttl");
    tcase_add_test(tc, ttl_zero_expires_at_once_without_a_consumer);
    tcase_add_test(tc, ttl_zero_still_reaches_a_ready_consumer);
    tcase_add_test(tc, ttl_zero_expires_when_no_consumer_can_take_it);
    tcase_add_loop_test(tc, queue_ttl_and_expiration_the_lower_wins, 0,
                        (int)NELEMS(ttl_vecs));
    tcase_add_test(tc, messages_expire_at_the_head_only);
    tcase_add_test(tc, the_queue_timer_expires_messages);
    tcase_add_test(tc, x_expires_deletes_a_queue_left_unused);
    tc = fx_tcase(s, "dead letters");
    tcase_add_test(tc, rejected_is_dead_lettered_with_x_death);
    tcase_add_test(tc, without_a_dead_letter_key_the_routing_key_is_kept);
    tcase_add_test(tc, expired_copy_moves_its_expiration_into_x_death);
    tcase_add_loop_test(tc, drop_head_dead_letters_the_oldest_as_maxlen, 0,
                        (int)NELEMS(maxlen_args));
    tcase_add_loop_test(tc, reject_publish_refuses_the_new_one, 0,
                        (int)NELEMS(overflow_vecs));
    tcase_add_test(tc, rejected_twice_in_one_queue_counts_two);
    tcase_add_test(tc, an_expiry_cycle_is_dropped);
    tcase_add_test(tc, an_expiry_into_the_queue_itself_is_dropped);
    tcase_add_loop_test(tc, without_a_dead_letter_exchange_it_is_dropped, 0,
                        (int)NELEMS(drop_args));
    tc = fx_tcase(s, "delivery limit");
    tcase_add_loop_test(tc, delivery_limit_drops_after_the_last_return, 0,
                        (int)NELEMS(limit_vecs));
    tcase_add_test(tc, delivery_limit_dead_letters_with_its_reason);
    return s;
}

int
main(void)
{
    return run_suite(deadletter_suite());
}
