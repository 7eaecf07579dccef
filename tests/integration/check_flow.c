/*
 * SPDX-License-Identifier: Apache-2.0
 * Flow control (docs/architecture.md, "Backpressure and limits"): a
 * publisher that feeds a queue faster than its consumer's socket drains is
 * paced to the consumer, so the queue does not grow without bound; a queue
 * whose consumers are at their prefetch limit (a job-queue backlog) never
 * slows its publisher; and nothing is lost either way.
 *
 * The publisher runs in a thread with its own rabbitmq-c connection and
 * reports through 'struct pub' (check's assertions belong to the main
 * thread).
 */
#include <pthread.h>

#include "tests/integration/harness.h"

enum { BODY = 1024 };

struct pub {
    const struct harness *h;
    const char *queue;
    int n;
    int failed_at;      /* -1, or the message whose publish failed */
    volatile int done;  /* set when every publish was written */
    uint64_t done_ms;
};

static void *
publisher(void *arg)
{
    struct pub *p = arg;
    amqp_connection_state_t c = h_connect(p->h);
    static char body[BODY];

    for (int i = 0; i < p->n; i++) {
        snprintf(body, sizeof(body), "%d", i);
        if (amqp_basic_publish(c, 1, amqp_empty_bytes,
                               amqp_cstring_bytes(p->queue), 0, 0, NULL,
                               (amqp_bytes_t){ BODY, body }) != 0) {
            p->failed_at = i;
            break;
        }
    }
    p->done_ms = h_now_ms();
    __atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
    h_close(c);
    return NULL;
}

static void
start_publisher(pthread_t *t, struct pub *p)
{
    p->failed_at = -1;
    p->done = 0;
    ck_assert_int_eq(pthread_create(t, NULL, publisher, p), 0);
}

START_TEST(slow_consumer_paces_publisher)
{
    /* A consumer that reads, but slower than the publisher writes. With
     * flow_control.queue_length 100 the queue stays near that (plus what
     * a few reads of the publisher carry); without flow control the
     * publisher is done within a second or two and most of the 60,000
     * messages wait in the queue. */
    enum { N = 60000, MAX_READY = 20000 };
    struct harness h;
    struct pub p = { 0 };
    amqp_connection_state_t cons, obs;
    char name[64], q[256];
    uint32_t peak = 0;
    pthread_t t;

    SKIP_IF_REMOTE("a roostd setting");
    if (!harness_start(&h, ARGS("--set", "flow_control.queue_length=100")))
        return;
    cons = h_connect(&h);
    obs = h_connect(&h);
    DECLARE_QUEUE(cons, 1, h_name(name, sizeof(name), "flow"), false, false,
                  false, q);
    CONSUME(cons, 1, q, "slow", true, NULL);

    p.h = &h;
    p.queue = q;
    p.n = N;
    start_publisher(&t, &p);
    for (int i = 0; i < N; i++) {
        struct h_event e;
        char want[16];
        ck_assert_msg(h_next(cons, 10000, &e) == 1,
                      "delivery %d of %d did not arrive", i, N);
        ck_assert_int_eq(e.id, AMQP_BASIC_DELIVER_METHOD);
        snprintf(want, sizeof(want), "%d", i);
        ck_assert_msg(e.len == BODY && strcmp(e.body, want) == 0,
                      "delivery %d: body starts \"%.10s\"", i,
                      e.body ? e.body : "");
        h_event_free(&e);
        /* About 10,000 messages a second: slower than the publisher. */
        if (i % 10 == 9)
            h_sleep_ms(1);
        if (i % 1000 == 999) {
            uint32_t ready = QUEUE_COUNT(obs, 1, q);
            if (ready > peak)
                peak = ready;
        }
    }
    pthread_join(t, NULL);
    ck_assert_int_eq(p.failed_at, -1);
    fprintf(stderr, "slow consumer: peak ready %u\n", peak);
    ck_assert_msg(peak <= MAX_READY,
                  "%u messages were ready while the consumer was draining: "
                  "the publisher was not paced to it", peak);
    ck_assert_int_eq(QUEUE_COUNT(obs, 1, q), 0);
    h_close(obs);
    h_close(cons);
    harness_stop(&h);
}
END_TEST

START_TEST(consumer_gone_unpaces)
{
    /* A publisher paced to a slow consumer goes at full speed as soon as
     * that consumer's connection is gone: the queue has no consumer left
     * to wait for. (A stale "backed up" mark once kept pausing it, 250 ms
     * per read, long after.) */
    enum { N = 40000, READ_FIRST = 2000 };
    struct harness h;
    struct pub p = { 0 };
    amqp_connection_state_t cons;
    char name[64], q[256];
    pthread_t t;
    uint64_t dropped;

    SKIP_IF_REMOTE("a roostd setting");
    if (!harness_start(&h, ARGS("--set", "flow_control.queue_length=100")))
        return;
    cons = h_connect(&h);
    DECLARE_QUEUE(cons, 1, h_name(name, sizeof(name), "gone"), false, false,
                  false, q);
    CONSUME(cons, 1, q, "slow", true, NULL);
    p.h = &h;
    p.queue = q;
    p.n = N;
    start_publisher(&t, &p);
    for (int i = 0; i < READ_FIRST; i++) {
        struct h_event e;
        ck_assert_msg(h_next(cons, 10000, &e) == 1, "delivery %d missing", i);
        h_event_free(&e);
        if (i % 10 == 9)
            h_sleep_ms(1);
    }
    ck_assert_msg(!__atomic_load_n(&p.done, __ATOMIC_SEQ_CST),
                  "the publisher finished before the consumer read %d: it "
                  "was not paced", READ_FIRST);
    dropped = h_now_ms();
    h_drop(cons);
    pthread_join(t, NULL);
    ck_assert_int_eq(p.failed_at, -1);
    fprintf(stderr, "consumer gone: the rest published in %llu ms\n",
            (unsigned long long)(p.done_ms - dropped));
    ck_assert_msg(p.done_ms - dropped < 4000,
                  "with its consumer gone the publisher still took %llu ms",
                  (unsigned long long)(p.done_ms - dropped));
    harness_stop(&h);
}
END_TEST

START_TEST(busy_worker_connection_not_pacing_backlog)
{
    /* A worker's connection is congested by a no-ack consumer on another
     * queue (it drains slowly), while its consumer on 'jobs' sits at its
     * prefetch limit. 'jobs' is a backlog: its publisher must not be
     * paced because the worker's connection is busy with something else. */
    enum { FIREHOSE = 40000, JOBS = 40000 };
    struct harness h;
    struct pub fire = { 0 }, jobs = { 0 };
    amqp_connection_state_t w;
    char name[64], fq[256], jq[256];
    pthread_t tf, tj;
    uint64_t start, deadline;
    int got = 0;

    SKIP_IF_REMOTE("a roostd setting");
    if (!harness_start(&h, ARGS("--set", "flow_control.queue_length=100")))
        return;
    w = h_connect(&h);
    DECLARE_QUEUE(w, 1, h_name(name, sizeof(name), "jobs"), false, false,
                  false, jq);
    DECLARE_QUEUE(w, 1, h_name(name, sizeof(name), "firehose"), false, false,
                  false, fq);
    amqp_basic_qos(w, 1, 0, 1, false);
    EXPECT_OK(w, "basic.qos");
    CONSUME(w, 1, jq, "worker", false, NULL);
    /* The worker takes its one job (and never acks it) before anything
     * else is going on: from then on it has no credit. */
    PUBLISH(w, 1, "", jq, "first job");
    EXPECT_DELIVERY(w, "first job", NULL);
    CONSUME(w, 1, fq, "firehose", true, NULL);

    fire.h = jobs.h = &h;
    fire.queue = fq;
    fire.n = FIREHOSE;
    jobs.queue = jq;
    jobs.n = JOBS;
    start_publisher(&tf, &fire);
    /* Read slowly: the worker's connection stays congested, and draining. */
    for (int i = 0; i < 500; i++, got++) {
        struct h_event e;
        ck_assert_msg(h_next(w, 10000, &e) == 1, "delivery %d missing", i);
        h_event_free(&e);
        if (i % 10 == 9)
            h_sleep_ms(1);
    }
    start = h_now_ms();
    start_publisher(&tj, &jobs);
    deadline = start + 15000;
    while (!__atomic_load_n(&jobs.done, __ATOMIC_SEQ_CST) &&
           h_now_ms() < deadline) {
        struct h_event e;
        if (h_next(w, 1000, &e) == 1) {
            h_event_free(&e);
            if (++got % 2 == 0)
                h_sleep_ms(1);
        }
    }
    ck_assert_msg(__atomic_load_n(&jobs.done, __ATOMIC_SEQ_CST),
                  "publishing %d jobs did not finish in 15 s", JOBS);
    fprintf(stderr, "busy worker: %d jobs published in %llu ms\n", JOBS,
            (unsigned long long)(jobs.done_ms - start));
    ck_assert_msg(jobs.done_ms - start < 5000,
                  "publishing %d jobs to a backlog took %llu ms: paced "
                  "because the worker's connection was busy", JOBS,
                  (unsigned long long)(jobs.done_ms - start));
    h_drop(w);
    pthread_join(tj, NULL);
    pthread_join(tf, NULL);
    ck_assert_int_eq(jobs.failed_at, -1);
    ck_assert_int_eq(fire.failed_at, -1);
    harness_stop(&h);
}
END_TEST

START_TEST(backlog_not_paced)
{
    /* A worker at its prefetch limit (1, never acking): the queue is a
     * backlog, and the publisher goes at full speed. Paced, 60,000
     * messages would take a minute (a pause of up to 250 ms per read);
     * unpaced, well under a second. */
    enum { N = 60000 };
    struct harness h;
    struct pub p = { 0 };
    amqp_connection_state_t worker, obs;
    char name[64], q[256];
    pthread_t t;
    uint64_t start;

    SKIP_IF_REMOTE("a roostd setting");
    if (!harness_start(&h, ARGS("--set", "flow_control.queue_length=100")))
        return;
    worker = h_connect(&h);
    obs = h_connect(&h);
    DECLARE_QUEUE(worker, 1, h_name(name, sizeof(name), "backlog"), false,
                  false, false, q);
    amqp_basic_qos(worker, 1, 0, 1, false);
    EXPECT_OK(worker, "basic.qos");
    CONSUME(worker, 1, q, "busy", false, NULL);

    p.h = &h;
    p.queue = q;
    p.n = N;
    start = h_now_ms();
    start_publisher(&t, &p);
    pthread_join(t, NULL);
    ck_assert_int_eq(p.failed_at, -1);
    fprintf(stderr, "backlog: %d published in %llu ms\n", N,
            (unsigned long long)(p.done_ms - start));
    WAIT_COUNT(obs, 1, q, N - 1);
    ck_assert_msg(p.done_ms - start < 8000,
                  "publishing %d messages to a backlog took %llu ms: the "
                  "publisher was paced", N,
                  (unsigned long long)(p.done_ms - start));
    h_close(obs);
    h_drop(worker);
    harness_stop(&h);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("flow");
    TCase *tc = h_tcase(s, "flow control", 60, false);
    tcase_add_test(tc, slow_consumer_paces_publisher);
    tcase_add_test(tc, consumer_gone_unpaces);
    tcase_add_test(tc, busy_worker_connection_not_pacing_backlog);
    tcase_add_test(tc, backlog_not_paced);
    return h_run(s);
}
