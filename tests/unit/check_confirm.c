/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Confirms held for the store, through the core and the RAM store
 * (store.h, store_ram.c): a push the store takes answers 1 and its
 * publisher's confirm waits for the open batch (a store_waiter), which is
 * durable only once store_ram_sync says the "disk" has it; what the store
 * does not keep (transient messages in classic queues, any message in a
 * transient queue) answers 0 and confirms at once. The channel's side,
 * which sends basic.ack when the waiter is called, needs a session.
 */
#include "tests/unit/core_fixture.h"

#include "broker/core/store.h"

static const struct fx_props persistent = { .persistent = true };

/* A waiter that counts its calls and notes their order. */
struct waiter {
    struct store_waiter w;
    int calls;
    int order;
};

static int calls_so_far;

static void
on_durable(struct store_waiter *sw)
{
    struct waiter *w = (struct waiter *)sw;
    w->calls++;
    w->order = ++calls_so_far;
}

START_TEST(persistent_in_durable_queue_waits_for_the_sync)
{
    struct queue *q = fx_queue("dq", true, NULL);
    struct waiter w = { .w.durable = on_durable };

    ck_assert_uint_ne(q->sid, 0);   /* the store keeps it */
    struct fx_pub r = fx_publish("", "dq", "m1", &persistent);
    ck_assert_uint_eq(r.routed, 1);
    ck_assert_uint_eq(r.stored, 1);
    ck_assert(store_has_pending());
    uint64_t batch = store_open_batch();
    ck_assert_uint_gt(batch, store_durable_batch());
    store_wait(&w.w, batch);
    ck_assert_int_eq(w.calls, 0);
    ck_assert(w.w.waiting);
    store_ram_sync();
    ck_assert_int_eq(w.calls, 1);
    ck_assert(!w.w.waiting);
    ck_assert_uint_eq(store_durable_batch(), batch);
    ck_assert(!store_has_pending());
    store_ram_sync();
    ck_assert_int_eq(w.calls, 1);
    /* The entry is counted as one the store keeps. */
    struct queue_info qi;
    queue_info(q, &qi);
    ck_assert_uint_eq(qi.persistent, 1);
    ck_assert_uint_eq(qi.bytes_persistent, 2);
    ck_assert_str_eq(fx_drain(q), "m1");
    queue_info(q, &qi);
    ck_assert_uint_eq(qi.persistent, 0);
}
END_TEST

static const struct keep_vec {
    bool durable;
    const char *args;
    bool persistent;
    size_t stored;
} keep_vecs[] = {
    { true, NULL, true, 1 },
    { true, NULL, false, 0 },            /* transient: at once */
    { false, NULL, true, 0 },            /* the queue is not kept */
    { true, "x-queue-type=quorum", true, 1 },
    { true, "x-queue-type=quorum", false, 1 },   /* it keeps every one */
};

START_TEST(what_the_store_keeps)
{
    const struct keep_vec *v = &keep_vecs[_i];
    fx_queue("q", v->durable, v->args);
    struct fx_props p = { .persistent = v->persistent };
    struct fx_pub r = fx_publish("", "q", "m1", &p);
    ck_assert_uint_eq(r.routed, 1);
    ck_assert_msg(r.stored == v->stored, "%s %s queue, %s message: "
                  "stored %zu, want %zu", v->durable ? "durable" : "transient",
                  v->args ? v->args : "classic",
                  v->persistent ? "persistent" : "transient", r.stored,
                  v->stored);
    ck_assert(store_has_pending() == (v->stored > 0));
}
END_TEST

START_TEST(one_of_several_queues_is_enough_to_wait)
{
    fx_exchange("f", "fanout", NULL);
    fx_queue("dq", true, NULL);
    fx_queue("tq", false, NULL);
    fx_bind("f", "dq", "", NULL);
    fx_bind("f", "tq", "", NULL);
    struct fx_pub r = fx_publish("f", "", "m1", &persistent);
    ck_assert_uint_eq(r.routed, 2);
    ck_assert_uint_eq(r.stored, 1);
}
END_TEST

START_TEST(a_later_publish_waits_for_the_next_sync)
{
    struct waiter w1 = { .w.durable = on_durable };
    struct waiter w2 = { .w.durable = on_durable };
    struct waiter w3 = { .w.durable = on_durable };

    fx_queue("dq", true, NULL);
    fx_publish("", "dq", "m1", &persistent);
    uint64_t b1 = store_open_batch();
    store_wait(&w1.w, b1);
    store_ram_sync();
    ck_assert_int_eq(w1.calls, 1);
    fx_publish("", "dq", "m2", &persistent);
    uint64_t b2 = store_open_batch();
    ck_assert_uint_gt(b2, b1);
    store_wait(&w2.w, b2);
    ck_assert_int_eq(w2.calls, 0);
    /* A batch already durable calls back at once. */
    store_wait(&w3.w, b1);
    ck_assert_int_eq(w3.calls, 1);
    store_ram_sync();
    ck_assert_int_eq(w2.calls, 1);
    ck_assert_int_eq(w1.calls, 1);
}
END_TEST

START_TEST(waiters_are_called_in_order_unless_taken_off)
{
    struct waiter w[3];
    fx_queue("dq", true, NULL);
    fx_publish("", "dq", "m1", &persistent);
    for (int i = 0; i < 3; i++) {
        w[i] = (struct waiter){ .w.durable = on_durable };
        store_wait(&w[i].w, store_open_batch());
    }
    /* A channel that closes takes its waiter off. */
    store_unwait(&w[1].w);
    ck_assert(!w[1].w.waiting);
    store_ram_sync();
    ck_assert_int_eq(w[0].calls, 1);
    ck_assert_int_eq(w[1].calls, 0);
    ck_assert_int_eq(w[2].calls, 1);
    ck_assert_int_lt(w[0].order, w[2].order);
}
END_TEST

START_TEST(a_transaction_says_whether_it_wrote)
{
    fx_queue("dq", true, NULL);
    store_tx_begin();
    fx_publish("", "dq", "m1", NULL);
    ck_assert(!store_tx_end());
    store_tx_begin();
    fx_publish("", "dq", "m2", NULL);
    fx_publish("", "dq", "m3", &persistent);
    ck_assert(store_tx_end());
}
END_TEST

static Suite *
confirm_suite(void)
{
    Suite *s = suite_create("confirm");
    TCase *tc = fx_tcase(s, "held for the store");
    tcase_add_test(tc, persistent_in_durable_queue_waits_for_the_sync);
    tcase_add_loop_test(tc, what_the_store_keeps, 0, (int)NELEMS(keep_vecs));
    tcase_add_test(tc, one_of_several_queues_is_enough_to_wait);
    tc = fx_tcase(s, "batches");
    tcase_add_test(tc, a_later_publish_waits_for_the_next_sync);
    tcase_add_test(tc, waiters_are_called_in_order_unless_taken_off);
    tcase_add_test(tc, a_transaction_says_whether_it_wrote);
    return s;
}

int
main(void)
{
    return run_suite(confirm_suite());
}
