/*
 * SPDX-License-Identifier: Apache-2.0
 * Priority queues (x-max-priority), with rabbitmq-c, against a real
 * roostd or (ROOST_TEST_REMOTE) the reference RabbitMQ, whose answers
 * these expectations were recorded from:
 * - the argument: 0 to 255, checked as RabbitMQ checks it (406 with its
 *   texts), and compared on redeclare;
 * - order: higher priorities first, FIFO within one; no priority is 0;
 *   one above the maximum counts as the maximum; the property is
 *   delivered as it was published;
 * - requeue puts a message back at its place within its priority;
 * - x-max-length counts all levels: drop-head drops the head (the
 *   highest priority's), reject-publish refuses the new one, whatever
 *   its priority; x-max-length-bytes alike;
 * - TTL: each level expires from its own head;
 * - a consumer gets them in priority order too (prefetch 1);
 * - restarts: a durable priority queue comes back in the same order,
 *   after a clean stop, and after kill -9 once its messages were taken
 *   and given back (the paged case, with a window of 16, is in
 *   check_paging).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

/* A queue named for 'tag' (into 'q', 256 bytes) with x-max-priority
 * 'max' and up to two more arguments. */
static void
declare_prio_at(const char *file, int line, amqp_connection_state_t c,
                char *q, const char *tag, int max, bool durable,
                const amqp_table_entry_t *extra, int nextra)
{
    char name[64];
    amqp_table_entry_t a[3] = { h_entry_int("x-max-priority", max) };
    for (int i = 0; i < nextra; i++)
        a[1 + i] = extra[i];
    h_declare_queue_at(file, line, c, 1, h_name(name, sizeof(name), tag),
                       durable, false, false, h_table(a, 1 + nextra), q,
                       NULL, NULL);
}
#define DECLARE_PRIO(c, q, tag, max, durable, extra, nextra)                   \
    declare_prio_at(__FILE__, __LINE__, (c), (q), (tag), (max), (durable),     \
                    (extra), (nextra))

/* Publish 'body' to 'q' with priority 'prio' (-1: none), persistent
 * when 'persistent', with 'expiration' when not NULL. */
static void
pub_prio_at(const char *file, int line, amqp_connection_state_t c,
            const char *q, const char *body, int prio, bool persistent,
            const char *expiration)
{
    amqp_basic_properties_t p = { 0 };
    if (prio >= 0) {
        p._flags |= AMQP_BASIC_PRIORITY_FLAG;
        p.priority = (uint8_t)prio;
    }
    if (persistent) {
        p._flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
        p.delivery_mode = 2;
    }
    if (expiration) {
        p._flags |= AMQP_BASIC_EXPIRATION_FLAG;
        p.expiration = amqp_cstring_bytes(expiration);
    }
    h_publish_at(file, line, c, 1, "", q, body, strlen(body), false, &p);
}
#define PUB_PRIO(c, q, body, prio)                                             \
    pub_prio_at(__FILE__, __LINE__, (c), (q), (body), (prio), false, NULL)

/* Publish "<prefix><i>" with priorities[i] for each i. */
static void
pub_all_at(const char *file, int line, amqp_connection_state_t c,
           const char *q, const char *prefix, const int *prios, int n,
           bool persistent)
{
    char body[32];
    for (int i = 0; i < n; i++) {
        snprintf(body, sizeof(body), "%s%d", prefix, i);
        pub_prio_at(file, line, c, q, body, prios[i], persistent, NULL);
    }
}
#define PUB_ALL(c, q, prefix, prios, persistent)                               \
    pub_all_at(__FILE__, __LINE__, (c), (q), (prefix), (prios),               \
               (int)(sizeof(prios) / sizeof((prios)[0])), (persistent))

/*
 * basic.get (no-ack) until get-empty and expect exactly the bodies in
 * 'want' (space-separated), each with the priority property it was
 * published with ("m2:9", or "m0:-" for none).
 */
static void
expect_gets_at(const char *file, int line, amqp_connection_state_t c,
               const char *q, const char *want)
{
    char got[1024] = "";
    struct h_event e;
    size_t n = 0;

    while (h_get_at(file, line, c, 1, q, true, &e) == 1) {
        char prio[8] = "-";
        if (e.flags & AMQP_BASIC_PRIORITY_FLAG)
            snprintf(prio, sizeof(prio), "%u", e.priority);
        n += (size_t)snprintf(got + n, sizeof(got) - n, "%s%s:%s",
                              n ? " " : "", e.body, prio);
        h_event_free(&e);
        H_ASSERT_AT(file, line, n < sizeof(got), "too many messages");
    }
    H_ASSERT_AT(file, line, strcmp(got, want) == 0,
                "queue '%s' gave \"%s\", expected \"%s\"", q, got, want);
}
#define EXPECT_GETS(c, q, want) expect_gets_at(__FILE__, __LINE__, (c), (q), (want))

static void
reopen(amqp_connection_state_t c)
{
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
}

/* ---- the argument ---- */

START_TEST(argument_checked_and_compared)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256], want[512];

    EXPECT_ARG_REFUSED(c, "badprio", h_entry_int("x-max-priority", 256),
                       "{max_value_exceeded,256}");
    EXPECT_ARG_REFUSED(c, "badprio", h_entry_int("x-max-priority", -1),
                       "{value_negative,-1}");
    EXPECT_ARG_REFUSED(c, "badprio", h_entry_str("x-max-priority", "10"),
                       "\"expected integer, got longstr\"");
    /* 0 and 255 are taken. */
    DECLARE_PRIO(c, q, "prio0", 0, false, NULL, 0);
    DECLARE_PRIO(c, q, "prio255", 255, false, NULL, 0);
    amqp_table_entry_t other = h_entry_int("x-max-priority", 254);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 0, 0, 0, 0,
                       h_table(&other, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - inequivalent arg "
             "'x-max-priority' for queue '%s' in vhost '/': received '254' "
             "but current is '255'", q);
    EXPECT_CHANNEL_CLOSE(c, 1, 406, want);
    h_close(c);
}
END_TEST

/* ---- order ---- */

START_TEST(higher_first_fifo_within)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    static const int prios[] = { -1, 1, 9, 5, 0, 3, 5, 1, -1, 7 };

    DECLARE_PRIO(c, q, "order", 5, false, NULL, 0);
    PUB_ALL(c, q, "m", prios, false);
    /* 9 and 7 count as 5, and come in publishing order with the 5s; no
     * priority counts as 0. */
    EXPECT_GETS(c, q, "m2:9 m3:5 m6:5 m9:7 m5:3 m1:1 m7:1 m0:- m4:0 m8:-");

    /* A maximum of 0: one level, so publishing order. */
    DECLARE_PRIO(c, q, "zero", 0, false, NULL, 0);
    PUB_ALL(c, q, "z", prios, false);
    EXPECT_GETS(c, q, "z0:- z1:1 z2:9 z3:5 z4:0 z5:3 z6:5 z7:1 z8:- z9:7");
    h_close(c);
}
END_TEST

START_TEST(requeue_keeps_place_within_priority)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e[3];
    static const int prios[] = { 1, 1, 2, 2 };

    DECLARE_PRIO(c, q, "requeue", 5, false, NULL, 0);
    PUB_ALL(c, q, "s", prios, false);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(GET(c, 1, q, false, &e[i]), 1);
    ck_assert_str_eq(e[0].body, "s2");
    ck_assert_str_eq(e[1].body, "s3");
    ck_assert_str_eq(e[2].body, "s0");
    /* s2 goes back before s3's place; s0 stays taken. */
    ck_assert_int_eq(amqp_basic_nack(c, 1, e[0].tag, 0, 1), AMQP_STATUS_OK);
    ck_assert_int_eq(amqp_basic_nack(c, 1, e[2].tag, 0, 1), AMQP_STATUS_OK);
    EXPECT_GETS(c, q, "s2:2 s0:1 s1:1");
    ck_assert_int_eq(amqp_basic_ack(c, 1, e[1].tag, 0), AMQP_STATUS_OK);
    for (int i = 0; i < 3; i++)
        h_event_free(&e[i]);
    h_close(c);
}
END_TEST

START_TEST(consumer_gets_priority_order)
{
    amqp_connection_state_t c = h_connect(H), p = h_connect(H);
    char q[256];
    struct h_event e;
    static const int prios[] = { 0, 3, 1, 3, 2, 0 };

    DECLARE_PRIO(c, q, "consume", 3, false, NULL, 0);
    PUB_ALL(p, q, "c", prios, false);
    QUEUE_COUNT(p, 1, q);   /* they are all in */
    amqp_basic_qos(c, 1, 0, 1, 0);
    EXPECT_OK(c, "basic.qos");
    CONSUME(c, 1, q, "prio", false, NULL);
    static const char *const want[] = { "c1", "c3", "c4", "c2", "c0", "c5" };
    for (int i = 0; i < 6; i++) {
        uint64_t tag = EXPECT_DELIVERY(c, NULL, &e);
        ck_assert_msg(strcmp(e.body, want[i]) == 0, "delivery %d is %s, "
                      "expected %s", i + 1, e.body, want[i]);
        h_event_free(&e);
        /* A higher one published while a delivery is out goes first. */
        if (i == 1) {
            PUB_PRIO(p, q, "hi", 3);
            QUEUE_COUNT(p, 1, q);
        }
        ck_assert_int_eq(amqp_basic_ack(c, 1, tag, 0), AMQP_STATUS_OK);
        if (i == 1) {
            EXPECT_DELIVERY(c, "hi", &e);
            ck_assert_int_eq(amqp_basic_ack(c, 1, e.tag, 0), AMQP_STATUS_OK);
            h_event_free(&e);
        }
    }
    h_close(p);
    h_close(c);
}
END_TEST

/* ---- limits and TTL across priorities ---- */

START_TEST(max_length_across_priorities)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    static const int prios[] = { 1, 5, 1, 3, 0 };
    amqp_table_entry_t len = h_entry_int("x-max-length", 3);
    amqp_table_entry_t reject[2] = {
        len, h_entry_str("x-overflow", "reject-publish")
    };
    amqp_table_entry_t bytes = h_entry_int("x-max-length-bytes", 6);

    /* drop-head: d1 (5) then d3 (3) are the head when each goes. */
    DECLARE_PRIO(c, q, "drophead", 5, false, &len, 1);
    PUB_ALL(c, q, "d", prios, false);
    EXPECT_GETS(c, q, "d0:1 d2:1 d4:0");
    /* reject-publish: the fourth and fifth are refused. */
    DECLARE_PRIO(c, q, "reject", 5, false, reject, 2);
    PUB_ALL(c, q, "d", prios, false);
    EXPECT_GETS(c, q, "d1:5 d0:1 d2:1");
    /* Bytes: three 2-byte bodies fit. */
    DECLARE_PRIO(c, q, "bytes", 5, false, &bytes, 1);
    PUB_ALL(c, q, "d", prios, false);
    EXPECT_GETS(c, q, "d0:1 d2:1 d4:0");
    h_close(c);
}
END_TEST

START_TEST(ttl_at_each_level_head)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    amqp_table_entry_t ttl = h_entry_int("x-message-ttl", 300);

    /* The low one expires though it never reached the queue's head. */
    DECLARE_PRIO(c, q, "msgttl", 5, false, NULL, 0);
    PUB_PRIO(c, q, "u0", 5);
    pub_prio_at(__FILE__, __LINE__, c, q, "u1", 1, false, "200");
    pub_prio_at(__FILE__, __LINE__, c, q, "u2", 5, false, "5000");
    h_sleep_ms(500);
    EXPECT_GETS(c, q, "u0:5 u2:5");
    /* A queue TTL expires every level. */
    DECLARE_PRIO(c, q, "qttl", 5, false, &ttl, 1);
    PUB_PRIO(c, q, "t0", 1);
    PUB_PRIO(c, q, "t1", 5);
    h_sleep_ms(600);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    h_close(c);
}
END_TEST

/* ---- restarts ---- */

START_TEST(durable_priorities_survive_restarts)
{
    amqp_connection_state_t c;
    char q[256];
    static const int prios[] = { 2, -1, 7, 2, 1, 0, 7, 3 };
    const char *want = "r2:7 r6:7 r7:3 r0:2 r3:2 r4:1 r1:- r5:0";

    SKIP_IF_REMOTE("restarts roostd");
    harness_start(H, NULL);
    c = h_connect(H);
    DECLARE_PRIO(c, q, "restart", 3, true, NULL, 0);
    PUB_ALL(c, q, "r", prios, true);
    struct h_event e;
    h_close(c);
    harness_stop_keep(H);
    harness_restart(H, NULL);
    c = h_connect(H);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 8);
    /* Taken and given back (each once), then a kill -9. */
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(GET(c, 1, q, false, &e), 1);
        h_event_free(&e);
    }
    amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
    EXPECT_OK(c, "channel.close");
    reopen(c);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 8);
    harness_kill(H, SIGKILL);
    h_drop(c);
    harness_reap(H);
    harness_restart(H, NULL);
    c = h_connect(H);
    EXPECT_GETS(c, q, want);
    h_close(c);
    harness_stop(H);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("priority");
    TCase *tc;

    tc = h_tcase(s, "x-max-priority", 30, true);
    tcase_add_test(tc, argument_checked_and_compared);
    tcase_add_test(tc, higher_first_fifo_within);
    tcase_add_test(tc, requeue_keeps_place_within_priority);
    tcase_add_test(tc, consumer_gets_priority_order);
    tcase_add_test(tc, max_length_across_priorities);
    tcase_add_test(tc, ttl_at_each_level_head);

    tc = h_tcase(s, "restarts", 30, false);
    tcase_add_test(tc, durable_priorities_survive_restarts);

    return h_run(s);
}
