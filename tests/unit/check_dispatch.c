/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A queue's dispatch through the core alone (queue.c): prefetch credit,
 * round-robin among consumers of one priority, x-priority (higher first,
 * a blocked one letting lower ones have it), a single active consumer,
 * priority queues (x-max-priority), requeue to the original position and
 * the requeue delay. The consumers are fakes behind struct consumer_ops
 * (core_fixture.h) whose credit is a prefetch count, as a channel's; each
 * delivery is logged as "consumer:body", a redelivered one "body*".
 */
#include "tests/unit/core_fixture.h"

static void
publish_n(const char *queue, int from, int to)
{
    for (int i = from; i <= to; i++) {
        char body[16];
        snprintf(body, sizeof(body), "m%d", i);
        ck_assert_uint_eq(fx_publish("", queue, body, NULL).routed, 1);
    }
}

/* ---- prefetch ---- */

START_TEST(prefetch_limits_what_is_unacked)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *c = fx_consume(q, "c", 2, 0);
    publish_n("q", 1, 5);
    ck_assert_str_eq(fx_deliveries(), "c:m1 c:m2");
    ck_assert_uint_eq(queue_ready_count(q), 3);
    ck_assert_uint_eq(queue_unacked_count(q), 2);
    fx_settle(c, "m1", FX_ACK);
    ck_assert_str_eq(fx_deliveries(), "c:m3");
    fx_settle(c, "m3", FX_ACK);
    fx_settle(c, "m2", FX_ACK);
    ck_assert_str_eq(fx_deliveries(), "c:m4 c:m5");
    ck_assert_uint_eq(queue_ready_count(q), 0);
    ck_assert_uint_eq(queue_unacked_count(q), 2);
}
END_TEST

START_TEST(consumer_without_credit_is_passed_over)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *c1 = fx_consume(q, "c1", 1, 0);
    struct fx_consumer *c2 = fx_consume(q, "c2", 1, 0);
    publish_n("q", 1, 3);
    ck_assert_str_eq(fx_deliveries(), "c1:m1 c2:m2");
    ck_assert_uint_eq(queue_ready_count(q), 1);
    fx_settle(c2, "m2", FX_ACK);
    ck_assert_str_eq(fx_deliveries(), "c2:m3");
    fx_settle(c1, "m1", FX_ACK);
    ck_assert_str_eq(fx_deliveries(), "");
}
END_TEST

START_TEST(blocked_consumer_takes_nothing_until_dispatched_again)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    c->blocked = true;
    publish_n("q", 1, 2);
    ck_assert_str_eq(fx_deliveries(), "");
    ck_assert_uint_eq(queue_ready_count(q), 2);
    c->blocked = false;
    queue_dispatch(q);
    ck_assert_str_eq(fx_deliveries(), "c:m1 c:m2");
}
END_TEST

/* ---- round-robin ---- */

START_TEST(equal_consumers_take_turns)
{
    struct queue *q = fx_queue("q", false, NULL);
    fx_consume(q, "c1", 0, 0);
    fx_consume(q, "c2", 0, 0);
    fx_consume(q, "c3", 0, 0);
    publish_n("q", 1, 7);
    ck_assert_str_eq(fx_deliveries(),
                     "c1:m1 c2:m2 c3:m3 c1:m4 c2:m5 c3:m6 c1:m7");
}
END_TEST

START_TEST(backlog_is_shared_in_turns)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *c1 = fx_consume(q, "c1", 0, 0);
    struct fx_consumer *c2 = fx_consume(q, "c2", 0, 0);
    c1->blocked = c2->blocked = true;
    publish_n("q", 1, 4);
    ck_assert_str_eq(fx_deliveries(), "");
    c1->blocked = c2->blocked = false;
    queue_dispatch(q);
    ck_assert_str_eq(fx_deliveries(), "c1:m1 c2:m2 c1:m3 c2:m4");
    /* One blocked: the other takes everything meanwhile. */
    c1->blocked = true;
    publish_n("q", 5, 6);
    c1->blocked = false;
    publish_n("q", 7, 8);
    ck_assert_str_eq(fx_deliveries(), "c2:m5 c2:m6 c1:m7 c2:m8");
}
END_TEST

/* ---- consumer priorities (x-priority) ---- */

START_TEST(higher_priority_is_served_first)
{
    struct queue *q = fx_queue("q", false, NULL);
    fx_consume(q, "lo", 0, 0);
    fx_consume(q, "hi", 0, 10);
    fx_consume(q, "neg", 0, -5);
    publish_n("q", 1, 3);
    ck_assert_str_eq(fx_deliveries(), "hi:m1 hi:m2 hi:m3");
}
END_TEST

START_TEST(blocked_higher_priority_lets_lower_have_it)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *hi = fx_consume(q, "hi", 2, 10);
    fx_consume(q, "lo", 0, 0);
    publish_n("q", 1, 4);
    ck_assert_str_eq(fx_deliveries(), "hi:m1 hi:m2 lo:m3 lo:m4");
    fx_settle(hi, "m1", FX_ACK);
    ck_assert_str_eq(fx_deliveries(), "");
    publish_n("q", 5, 6);
    ck_assert_str_eq(fx_deliveries(), "hi:m5 lo:m6");
}
END_TEST

START_TEST(equal_priorities_take_turns_above_lower_ones)
{
    struct queue *q = fx_queue("q", false, NULL);
    fx_consume(q, "lo", 0, 0);
    fx_consume(q, "h1", 0, 5);
    fx_consume(q, "mid", 0, 3);
    fx_consume(q, "h2", 0, 5);
    publish_n("q", 1, 4);
    ck_assert_str_eq(fx_deliveries(), "h1:m1 h2:m2 h1:m3 h2:m4");
    /* The order served: by priority, then in turn. */
    static char order[64];
    order[0] = '\0';
    struct consumer *c;
    TAILQ_FOREACH(c, &q->consumers, q_link) {
        strcat(order, c->tag);
        strcat(order, " ");
    }
    ck_assert_str_eq(order, "h1 h2 mid lo ");
}
END_TEST

/* ---- single active consumer ---- */

START_TEST(single_active_is_the_first_whatever_its_priority)
{
    struct queue *q = fx_queue("q", false, "x-single-active-consumer:true");
    fx_consume(q, "c1", 0, 0);
    fx_consume(q, "c2", 0, 10);
    publish_n("q", 1, 3);
    ck_assert_str_eq(fx_deliveries(), "c1:m1 c1:m2 c1:m3");
}
END_TEST

START_TEST(single_active_without_credit_holds_the_rest_back)
{
    struct queue *q = fx_queue("q", false, "x-single-active-consumer:true");
    struct fx_consumer *c1 = fx_consume(q, "c1", 1, 0);
    fx_consume(q, "c2", 0, 0);
    publish_n("q", 1, 3);
    ck_assert_str_eq(fx_deliveries(), "c1:m1");
    ck_assert_uint_eq(queue_ready_count(q), 2);
    /* The active one goes: the next in order of arrival takes over once
     * the queue dispatches (here when c1's delivery comes back). */
    fx_cancel(c1);
    fx_settle(c1, "m1", FX_REQUEUE);
    ck_assert_str_eq(fx_deliveries(), "c2:m1* c2:m2 c2:m3");
}
END_TEST

/* ---- priority queues (x-max-priority) ---- */

static void
publish_priorities(void)
{
    /* m4 has no priority (level 0); m6's 9 is over the maximum (5). */
    static const struct { const char *body; bool has; uint8_t p; } ms[] = {
        { "m1", true, 1 }, { "m2", true, 5 }, { "m3", true, 3 },
        { "m4", false, 0 }, { "m5", true, 5 }, { "m6", true, 9 },
        { "m7", true, 0 },
    };
    for (size_t i = 0; i < NELEMS(ms); i++) {
        struct fx_props p = { .has_priority = ms[i].has,
                              .priority = ms[i].p };
        ck_assert_uint_eq(fx_publish("", "pq", ms[i].body, &p).routed, 1);
    }
}

START_TEST(priority_queue_hands_out_highest_first)
{
    struct queue *q = fx_queue("pq", false, "x-max-priority#5");
    publish_priorities();
    ck_assert_uint_eq(queue_ready_count(q), 7);
    ck_assert_str_eq(fx_drain(q), "m2 m5 m6 m3 m1 m4 m7");
}
END_TEST

START_TEST(priority_queue_dispatches_highest_first)
{
    struct queue *q = fx_queue("pq", false, "x-max-priority#5");
    publish_priorities();
    struct fx_consumer *c = fx_consume(q, "c", 2, 0);
    ck_assert_str_eq(fx_deliveries(), "c:m2 c:m5");
    /* A higher one published now goes before the lower ones waiting. */
    struct fx_props p = { .has_priority = true, .priority = 4 };
    fx_publish("", "pq", "m8", &p);
    fx_settle(c, "m2", FX_ACK);
    fx_settle(c, "m5", FX_ACK);
    ck_assert_str_eq(fx_deliveries(), "c:m6 c:m8");
}
END_TEST

START_TEST(priority_queue_requeues_into_the_level)
{
    struct queue *q = fx_queue("pq", false, "x-max-priority#5");
    publish_priorities();
    struct fx_consumer *c = fx_consume(q, "c", 2, 0);
    ck_assert_str_eq(fx_deliveries(), "c:m2 c:m5");
    c->blocked = true;
    fx_settle(c, "m5", FX_REQUEUE);
    fx_settle(c, "m2", FX_REQUEUE);
    ck_assert_str_eq(fx_drain(q), "m2* m5* m6 m3 m1 m4 m7");
}
END_TEST

START_TEST(queue_without_max_priority_ignores_priorities)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_props lo = { .has_priority = true, .priority = 0 };
    struct fx_props hi = { .has_priority = true, .priority = 9 };
    fx_publish("", "q", "m1", &lo);
    fx_publish("", "q", "m2", &hi);
    fx_publish("", "q", "m3", NULL);
    ck_assert_str_eq(fx_drain(q), "m1 m2 m3");
}
END_TEST

/* ---- requeue order ---- */

START_TEST(requeued_entries_go_back_to_their_place)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct qentry e1, e2, e3;
    publish_n("q", 1, 5);
    ck_assert(queue_take(q, &e1));
    ck_assert(queue_take(q, &e2));
    ck_assert(queue_take(q, &e3));
    ck_assert_str_eq(fx_body(e3.m, false), "m3");
    ck_assert_uint_eq(e1.deliveries, 1);
    ck_assert(!e1.redelivered);
    /* Out of order: each goes before the first entry that came after. */
    queue_requeue(q, e3);
    queue_requeue(q, e1);
    ck_assert_uint_eq(queue_ready_count(q), 4);
    ck_assert_uint_eq(queue_unacked_count(q), 1);
    ck_assert(queue_take(q, &e1));
    ck_assert_str_eq(fx_body(e1.m, e1.redelivered), "m1*");
    ck_assert_uint_eq(e1.deliveries, 2);
    queue_ack(q, e1);
    ck_assert_str_eq(fx_drain(q), "m3* m4 m5");
    queue_requeue(q, e2);
    ck_assert_str_eq(fx_drain(q), "m2*");
}
END_TEST

START_TEST(requeued_delivery_goes_to_a_consumer_with_credit)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *c1 = fx_consume(q, "c1", 1, 0);
    fx_consume(q, "c2", 1, 0);
    publish_n("q", 1, 3);
    ck_assert_str_eq(fx_deliveries(), "c1:m1 c2:m2");
    /* m1 goes back before m3 and to the only one with credit again. */
    ck_assert_uint_eq(fx_settle(c1, "m1", FX_REQUEUE), 1);
    ck_assert_str_eq(fx_deliveries(), "c1:m1*");
    ck_assert_uint_eq(fx_settle(c1, "m1", FX_ACK), 2);
    ck_assert_str_eq(fx_deliveries(), "c1:m3");
}
END_TEST

static bool
is_ready(void *arg)
{
    return queue_ready_count(arg) > 0;
}

START_TEST(retry_waits_out_the_requeue_delay)
{
    struct queue *q = fx_queue("q", false, "x-requeue-delay#20");
    struct fx_consumer *c = fx_consume(q, "c", 1, 0);
    publish_n("q", 1, 2);
    ck_assert_str_eq(fx_deliveries(), "c:m1");
    c->blocked = true;
    /* A nack's return waits, neither ready nor unacked; m2 goes first. */
    fx_settle(c, "m1", FX_RETRY);
    ck_assert_uint_eq(queue_waiting_count(q), 1);
    ck_assert_uint_eq(queue_unacked_count(q), 0);
    ck_assert_str_eq(fx_drain(q), "m2");
    ck_assert(fx_loop_until(is_ready, q, 2000));
    ck_assert_uint_eq(queue_waiting_count(q), 0);
    ck_assert_str_eq(fx_drain(q), "m1*");
}
END_TEST

/* ---- a deleted queue ---- */

START_TEST(deleting_a_queue_cancels_its_consumers)
{
    struct queue *q = fx_queue("q", false, NULL);
    struct fx_consumer *c = fx_consume(q, "c", 0, 0);
    publish_n("q", 1, 2);
    ck_assert_str_eq(fx_deliveries(), "c:m1 c:m2");
    queue_delete(q);
    ck_assert(c->told_cancelled);
    ck_assert(c->c.cancelled);
    ck_assert_ptr_null(fx_find_queue("q"));
    /* Its unacked deliveries keep it until they are settled: requeued
     * into a deleted queue, a message is dropped. */
    fx_settle(c, "m1", FX_REQUEUE);
    fx_settle(c, "m2", FX_ACK);
    ck_assert_str_eq(fx_deliveries(), "");
}
END_TEST

static Suite *
dispatch_suite(void)
{
    Suite *s = suite_create("dispatch");
    TCase *tc = fx_tcase(s, "prefetch");
    tcase_add_test(tc, prefetch_limits_what_is_unacked);
    tcase_add_test(tc, consumer_without_credit_is_passed_over);
    tcase_add_test(tc, blocked_consumer_takes_nothing_until_dispatched_again);
    tc = fx_tcase(s, "round-robin");
    tcase_add_test(tc, equal_consumers_take_turns);
    tcase_add_test(tc, backlog_is_shared_in_turns);
    tc = fx_tcase(s, "consumer priority");
    tcase_add_test(tc, higher_priority_is_served_first);
    tcase_add_test(tc, blocked_higher_priority_lets_lower_have_it);
    tcase_add_test(tc, equal_priorities_take_turns_above_lower_ones);
    tc = fx_tcase(s, "single active consumer");
    tcase_add_test(tc, single_active_is_the_first_whatever_its_priority);
    tcase_add_test(tc, single_active_without_credit_holds_the_rest_back);
    tc = fx_tcase(s, "priority queue");
    tcase_add_test(tc, priority_queue_hands_out_highest_first);
    tcase_add_test(tc, priority_queue_dispatches_highest_first);
    tcase_add_test(tc, priority_queue_requeues_into_the_level);
    tcase_add_test(tc, queue_without_max_priority_ignores_priorities);
    tc = fx_tcase(s, "requeue");
    tcase_add_test(tc, requeued_entries_go_back_to_their_place);
    tcase_add_test(tc, requeued_delivery_goes_to_a_consumer_with_credit);
    tcase_add_test(tc, retry_waits_out_the_requeue_delay);
    tcase_add_test(tc, deleting_a_queue_cancels_its_consumers);
    return s;
}

int
main(void)
{
    return run_suite(dispatch_suite());
}
