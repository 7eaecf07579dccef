/*
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
    tcase_add_test(tc, backlog_not_paced);
    return h_run(s);
}
