/*
 * SPDX-License-Identifier: Apache-2.0
 * Paging (docs/storage.md, "Paging") against a real roostd, over real
 * sockets: a queue keeps its first paging.window entries in memory (16
 * here, the least it takes); beyond them a persistent message in a
 * durable queue leaves memory once its record is synced, and is read back
 * by the pager thread ahead of delivery. Under memory pressure transient
 * messages go to the scratch area (DATADIR/scratch) too.
 *
 * - paged_backlog_in_order: 5,000 persistent 1 KiB messages, almost all
 *   paged, reach a consumer (prefetch 50, manual acks) each once, in
 *   order, with their whole bodies, not redelivered;
 * - get_waits_for_read: basic.get on a paged head waits for the read and
 *   answers get-ok, never get-empty while messages remain: 3,000 gets,
 *   one at a time and then pipelined in seeded batches of up to 64, each
 *   get-ok the next id with the right message_count, then get-empty;
 * - paged_restart: 5,000 paged messages survive a clean restart in order
 *   and unmarked; delivered once and requeued, then 3,000 more published
 *   and confirmed, all 8,000 survive a SIGKILL in order exactly once, the
 *   delivered ones marked redelivered;
 * - paged_expiry: paged messages with a per-message TTL of 500 ms leave a
 *   durable queue without a dead-letter exchange; from one with one they
 *   all reach the dead-letter queue, in order, with their original bodies
 *   and an x-death header naming the queue and "expired";
 * - paged_purge: queue.purge of 5,000 paged messages counts them all; the
 *   queue is empty then (a message published after it is the only one
 *   there), and still empty after a restart;
 * - transient_scratch: with a 30 MB memory watermark, 100,000 transient
 *   1 KiB messages to a non-durable queue are all confirmed (the
 *   publisher is not blocked for good), the log says "above the paging
 *   threshold", DATADIR/scratch holds segments, roostd's RSS stays below
 *   120 MB, and a consumer gets every id once, in order; a second backlog
 *   of 30,000 brings the pressure back and goes to scratch too: its
 *   segments are gone after a clean stop, and after the restart;
 * - stalled_consumer_pages: a consumer with unlimited prefetch that never
 *   reads its socket while 200,000 persistent 1 KiB messages are
 *   published: roostd's RSS grows by less than 64 MB; then it reads a
 *   seeded number of them and closes, and a fresh consumer gets the rest:
 *   every id once, in order, the ones the first was sent but did not ack
 *   (a prefix of the rest) marked redelivered, the others not;
 * - compaction_reads_paged: with 64 KiB segments, 3,000 messages each to
 *   queues A (1000-byte bodies) and B (3000-byte bodies) alternating, B
 *   drained: compaction reads A's paged messages back and copies them
 *   forward (the log says so), and within 15 s, on a broker idle by
 *   then, the number of segment files falls to about what A's messages
 *   fill (a quarter of what there was, and 12 more); after a SIGKILL, A
 *   holds every id once, in order, with its bodies;
 * - corrupt_paged_record: a paged message's record corrupted on disk
 *   under the running roostd: reading it back finds the bad CRC, logs it,
 *   drops that one message, and every other one is delivered in order;
 * - get_wait_interrupted: with reads held up, a basic.get waiting for one
 *   is answered when its queue is deleted, before the method pipelined
 *   behind it; a connection dropped while its get waits costs nothing;
 * - scratch_write_fails: while scratch writes fail, transient messages
 *   stay in memory (logged) and are still confirmed; once writes work
 *   again they page out, and all are delivered in order.
 * - paged_priorities: a priority queue (x-max-priority 3) of 4,000
 *   persistent messages, priorities 0 to 3 in turn: each level pages as
 *   its own queue; a consumer gets the 3s in order, then the 2s, 1s and
 *   0s, after a clean restart (recovery restores them paged, each at its
 *   level) and after a SIGKILL.
 *
 * Message bodies carry their id ("<id:000042>" repeated) and are checked
 * whole. The random choices come from a seed printed at the start of each
 * test that uses one; ROOST_TEST_SEED sets it.
 *
 * Every test configures (and most restart) roostd, so none runs against
 * a remote broker.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/store_common.h"

/* The least window there is: all but 16 entries of a queue are paged. */
#define W16 "--set", "paging.window=16"

/* ---- publishing ---- */

/* Ids from..to-1, persistent, 'size' bytes, to 'q', all confirmed. */
static void
pub_range_at(const char *file, int line, amqp_connection_state_t c,
             struct confirms *t, const char *q, int from, int to, size_t size)
{
    for (int id = from; id < to; id++)
        pub_mode_at(file, line, c, 1, t, "", q, id, size, 2, 512, 10000);
    conf_wait_all_at(file, line, c, t, 30000);
}
#define PUB_RANGE(c, t, q, from, to, size)                                     \
    pub_range_at(__FILE__, __LINE__, (c), (t), (q), (from), (to), (size))

static void
qos(amqp_connection_state_t c, amqp_channel_t ch, uint16_t prefetch)
{
    amqp_basic_qos(c, ch, 0, prefetch, 0);
    EXPECT_OK(c, "basic.qos");
}

static void
ack_at(const char *file, int line, amqp_connection_state_t c,
       amqp_channel_t ch, uint64_t tag, bool multiple)
{
    int st = amqp_basic_ack(c, ch, tag, multiple);
    H_ASSERT_AT(file, line, st == AMQP_STATUS_OK, "basic.ack: %s",
                amqp_error_string2(st));
}

/* ---- consuming ---- */

/*
 * Read deliveries on channel 'ch' of 'c' (a consumer there is set up)
 * and expect ids from..to-1, in order, each body exactly make_body(id,
 * size), redelivered=false; ack them (multiple) every 'ack_every' and at
 * the last one, or not at all when 'ack_every' is 0 (no-ack consumers).
 * 'what' names the reader in messages.
 */
static void
drain_at(const char *file, int line, amqp_connection_state_t c,
         amqp_channel_t ch, const char *what, int from, int to, size_t size,
         int ack_every)
{
    for (int want = from; want < to; want++) {
        struct h_event e;
        int r = h_next(c, 10000, &e);
        H_ASSERT_AT(file, line, r == 1, "%s: id %d (%d of %d): %s", what,
                    want, want - from + 1, to - from,
                    r == 0 ? "nothing within 10 s" : "connection closed");
        H_ASSERT_AT(file, line,
                    e.id == AMQP_BASIC_DELIVER_METHOD && e.channel == ch,
                    "%s: expected id %d, got %s on channel %u", what, want,
                    h_method_name(e.id), e.channel);
        int id = body_id(e.body, e.len);
        H_ASSERT_AT(file, line, id == want,
                    "%s: delivery %d is id %d, expected %d", what,
                    want - from + 1, id, want);
        H_ASSERT_AT(file, line, body_is(e.body, e.len, id, size),
                    "%s: id %d has a body of %zu bytes that is not the one "
                    "published (%zu bytes)", what, id, e.len, size);
        H_ASSERT_AT(file, line, !e.redelivered,
                    "%s: id %d is marked redelivered", what, id);
        if (ack_every && ((want - from + 1) % ack_every == 0 || want + 1 == to))
            ack_at(file, line, c, ch, e.tag, true);
        h_event_free(&e);
    }
}
#define DRAIN(c, ch, what, from, to, size, ack_every)                          \
    drain_at(__FILE__, __LINE__, (c), (ch), (what), (from), (to), (size),      \
             (ack_every))

static void
expect_empty_at(const char *file, int line, amqp_connection_state_t c,
                const char *q)
{
    struct h_event e;
    uint32_t n = h_queue_count_at(file, line, c, 1, q, NULL);
    H_ASSERT_AT(file, line, n == 0, "queue '%s' holds %u messages", q, n);
    int got = h_get_at(file, line, c, 1, q, true, &e);
    if (got) {
        int id = body_id(e.body, e.len);
        h_event_free(&e);
        H_ASSERT_AT(file, line, 0, "basic.get on the empty '%s' got id %d", q,
                    id);
    }
}
#define EXPECT_EMPTY(c, q) expect_empty_at(__FILE__, __LINE__, (c), (q))

/*
 * A consumer on a new connection (prefetch 'prefetch', manual acks, tag
 * 'what') drains 'q' as DRAIN checks it (ids 1..n, bodies of 'size'
 * bytes, acked every 'ack_every') and gets nothing more; closed then,
 * and 'q' is empty (counted on 'c').
 */
static void
drain_queue_at(const char *file, int line, amqp_connection_state_t c,
               const char *q, const char *what, int n, size_t size,
               uint16_t prefetch, int ack_every)
{
    amqp_connection_state_t cons = h_connect(H);

    qos(cons, 1, prefetch);
    h_consume_at(file, line, cons, 1, q, what, false, false, NULL);
    drain_at(file, line, cons, 1, what, 1, n + 1, size, ack_every);
    int extra = h_sync_at(file, line, cons, 1, NULL, 0);
    H_ASSERT_AT(file, line, extra == 0, "%s: %d deliveries after id %d", what,
                extra, n);
    h_close_at(file, line, cons);
    uint32_t left = h_queue_count_at(file, line, c, 1, q, NULL);
    H_ASSERT_AT(file, line, left == 0, "'%s' holds %u messages once %s is "
                "done", q, left, what);
}
#define DRAIN_QUEUE(c, q, what, n, size, prefetch, ack_every)                  \
    drain_queue_at(__FILE__, __LINE__, (c), (q), (what), (n), (size),          \
                   (prefetch), (ack_every))

/* ---- roostd with a window of 16 ---- */

/* Start roostd with a window of 16, declare the durable queue named for
 * 'tag' (into 'q') and return a connection with confirms on channel 1. */
static amqp_connection_state_t
start_queue_at(const char *file, int line, char *q, size_t len,
               const char *tag)
{
    char out[256];

    harness_start(H, ARGS(W16));
    amqp_connection_state_t c = h_connect(H);
    h_declare_queue_at(file, line, c, 1, h_name(q, len, tag), true, false,
                       false, amqp_empty_table, out, NULL, NULL);
    confirm_select(c, 1);
    return c;
}
#define START_QUEUE(q, tag)                                                    \
    start_queue_at(__FILE__, __LINE__, (q), sizeof(q), (tag))

/* Start roostd again on its data (after a stop or a kill) with a window
 * of 16; its recovery line must count 'want_msgs' messages. Returns the
 * number of durable queues it counts. */
static unsigned long long
restart_recovered_at(const char *file, int line, unsigned long long want_msgs)
{
    unsigned long long msgs, queues;
    size_t mark = log_mark(H);

    harness_restart(H, ARGS(W16));
    recovered_at(file, line, H, mark, &msgs, &queues);
    H_ASSERT_AT(file, line, msgs == want_msgs, "recovered %llu messages, "
                "expected %llu", msgs, want_msgs);
    return queues;
}
#define RESTART_RECOVERED(msgs)                                                \
    restart_recovered_at(__FILE__, __LINE__, (msgs))

/* roostd's RSS in KiB now, noted in *max when it is more. */
static long
note_rss(long *max)
{
    long rss = harness_rss_kb(H);
    if (rss > *max)
        *max = rss;
    return rss;
}

/* ---- 1. a paged backlog ---- */

START_TEST(paged_backlog_in_order)
{
    enum { N = 5000, SIZE = 1024 };
    struct confirms t = { 0 };
    char q[64];

    SKIP_IF_REMOTE("sets paging.window");
    amqp_connection_state_t c = START_QUEUE(q, "backlog");
    uint64_t t0 = h_now_ms();
    PUB_RANGE(c, &t, q, 1, N + 1, SIZE);
    uint64_t t1 = h_now_ms();
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), N);

    DRAIN_QUEUE(c, q, "backlog consumer", N, SIZE, 50, 10);
    fprintf(stderr, "paged_backlog_in_order: %d published in %" PRIu64
            " ms, consumed in %" PRIu64 " ms\n", N, t1 - t0, h_now_ms() - t1);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 2. basic.get on a paged head ---- */

/* The get-ok for id 'want' of 'n' published (so n - want remain). */
static void
check_get_ok_at(const char *file, int line, const struct h_event *e,
                int want, int n, size_t size)
{
    int id = body_id(e->body, e->len);
    H_ASSERT_AT(file, line, id == want, "basic.get got id %d, expected %d",
                id, want);
    H_ASSERT_AT(file, line, body_is(e->body, e->len, id, size),
                "basic.get: id %d does not have its body", id);
    H_ASSERT_AT(file, line, !e->redelivered,
                "basic.get: id %d marked redelivered", id);
    H_ASSERT_AT(file, line, e->message_count == (uint32_t)(n - want),
                "get-ok of id %d says %u messages remain, expected %d", id,
                e->message_count, n - want);
}

START_TEST(get_waits_for_read)
{
    enum { N = 3000, SIZE = 1024, MAX_BATCH = 64 };
    struct confirms t = { 0 };
    struct h_event e;
    char q[64];
    int id, batches = 0;

    SKIP_IF_REMOTE("sets paging.window");
    seed("get_waits_for_read", 20260301);
    amqp_connection_state_t c = START_QUEUE(q, "get");
    PUB_RANGE(c, &t, q, 1, N + 1, SIZE);
    h_close(c);

    /* A channel without confirms: only get replies come back on it. */
    c = h_connect(H);
    uint64_t t0 = h_now_ms();
    /* One basic.get at a time: each waits for its read when the head is
     * paged, and is never answered get-empty. */
    for (id = 1; id <= N / 2; id++) {
        int got = GET(c, 1, q, false, &e);
        ck_assert_msg(got == 1, "basic.get %d of %d: get-empty with %d "
                      "messages in the queue", id, N, N - id + 1);
        check_get_ok_at(__FILE__, __LINE__, &e, id, N, SIZE);
        ack_at(__FILE__, __LINE__, c, 1, e.tag, false);
        h_event_free(&e);
    }
    uint64_t t1 = h_now_ms();
    /* Pipelined: a batch of basic.gets sent at once; a get that waits for
     * a read holds back the ones after it, so the replies come in order,
     * each the next id. */
    while (id <= N) {
        int b = (int)rnd_in(1, MAX_BATCH);
        if (b > N - id + 1)
            b = N - id + 1;
        for (int k = 0; k < b; k++) {
            amqp_basic_get_t g = { 0, amqp_cstring_bytes(q), 0 };
            SEND(c, 1, AMQP_BASIC_GET_METHOD, &g);
        }
        for (int k = 0; k < b; k++, id++) {
            int r = h_next(c, 10000, &e);
            ck_assert_msg(r == 1, "pipelined basic.get of id %d: %s", id,
                          r == 0 ? "no reply within 10 s"
                                 : "connection closed");
            ck_assert_msg(e.id == AMQP_BASIC_GET_OK_METHOD,
                          "pipelined basic.get of id %d: got %s", id,
                          h_method_name(e.id));
            check_get_ok_at(__FILE__, __LINE__, &e, id, N, SIZE);
            ack_at(__FILE__, __LINE__, c, 1, e.tag, false);
            h_event_free(&e);
        }
        batches++;
    }
    fprintf(stderr, "get_waits_for_read: %d gets one at a time in %" PRIu64
            " ms, %d in %d pipelined batches in %" PRIu64 " ms\n", N / 2,
            t1 - t0, N - N / 2, batches, h_now_ms() - t1);
    ck_assert_int_eq(GET(c, 1, q, false, &e), 0);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 3. restarts ---- */

START_TEST(paged_restart)
{
    enum { N1 = 5000, N2 = 3000, SIZE = 1024 };
    struct confirms t = { 0 };
    struct qmsg *m;
    char q[64];

    SKIP_IF_REMOTE("restarts roostd");
    amqp_connection_state_t c = START_QUEUE(q, "restart");
    PUB_RANGE(c, &t, q, 1, N1 + 1, SIZE);
    h_close(c);
    conf_free(&t);

    /* A clean restart: recovery leaves all but the window paged; all of
     * them come back in order, never delivered. */
    harness_stop_keep(H);
    ck_assert_uint_eq(RESTART_RECOVERED(N1), 1);
    c = h_connect(H);
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open 2");
    int n = READ_QUEUE(c, 2, q, SIZE, &m);
    EXPECT_IDS(m, n, 1, N1 + 1, 0);
    free(m);
    /* Given back (now redelivered, and paged again), then 3000 more. */
    amqp_channel_close(c, 2, AMQP_REPLY_SUCCESS);
    EXPECT_OK(c, "channel.close 2");
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), N1);
    confirm_select(c, 1);
    PUB_RANGE(c, &t, q, N1 + 1, N1 + N2 + 1, SIZE);

    /* SIGKILL after the confirms: the last one came after a sync that
     * holds everything before it. */
    KILL9(H);
    h_drop(c);
    RESTART_RECOVERED(N1 + N2);
    c = h_connect(H);
    n = READ_QUEUE(c, 1, q, SIZE, &m);
    EXPECT_IDS_AFTER_CRASH(m, n, 1, N1 + N2 + 1, N1 + 1);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 4. expiry ---- */

static const amqp_field_value_t *
table_get(const amqp_table_t *t, const char *key)
{
    for (int i = 0; i < t->num_entries; i++)
        if (t->entries[i].key.len == strlen(key) &&
            memcmp(t->entries[i].key.bytes, key, t->entries[i].key.len) == 0)
            return &t->entries[i].value;
    return NULL;
}

static bool
field_is_str(const amqp_field_value_t *v, const char *s)
{
    return v != NULL &&
           (v->kind == AMQP_FIELD_KIND_UTF8 ||
            v->kind == AMQP_FIELD_KIND_BYTES) &&
           v->value.bytes.len == strlen(s) &&
           memcmp(v->value.bytes.bytes, s, v->value.bytes.len) == 0;
}

/* Why the headers do not say that queue 'q' dead-lettered the message
 * for "expired", or NULL when they do. */
static const char *
x_death_problem(const amqp_basic_properties_t *p, const char *q)
{
    if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
        return "no headers";
    const amqp_field_value_t *v = table_get(&p->headers, "x-death");
    if (v == NULL)
        return "no x-death header";
    if (v->kind != AMQP_FIELD_KIND_ARRAY || v->value.array.num_entries < 1 ||
        v->value.array.entries[0].kind != AMQP_FIELD_KIND_TABLE)
        return "x-death is not an array of tables";
    const amqp_table_t *d = &v->value.array.entries[0].value.table;
    if (!field_is_str(table_get(d, "reason"), "expired"))
        return "x-death's reason is not \"expired\"";
    if (!field_is_str(table_get(d, "queue"), q))
        return "x-death does not name the queue";
    return NULL;
}

START_TEST(paged_expiry)
{
    enum { N = 1000, SIZE = 1024, TTL_MS = 500 };
    amqp_connection_state_t c, cons;
    struct confirms t = { 0 };
    char q1[64], q2[64], dq[64], out[256];
    amqp_table_entry_t dl[2];

    SKIP_IF_REMOTE("sets paging.window");
    harness_start(H, ARGS(W16));
    c = h_connect(H);
    /* q1: no dead-letter exchange; q2 dead-letters to dq. */
    DECLARE_QUEUE(c, 1, h_name(q1, sizeof(q1), "ttl"), true, false, false,
                  out);
    DECLARE_QUEUE(c, 1, h_name(dq, sizeof(dq), "dead"), true, false, false,
                  out);
    h_name(q2, sizeof(q2), "ttl-dlx");
    dl[0] = h_entry_str("x-dead-letter-exchange", "");
    dl[1] = h_entry_str("x-dead-letter-routing-key", dq);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, q2, true, false, false,
                       h_table(dl, 2), out, NULL, NULL);
    confirm_select(c, 1);
    amqp_basic_properties_t p = mode_props(2);
    p._flags |= AMQP_BASIC_EXPIRATION_FLAG;
    p.expiration = amqp_cstring_bytes("500");
    uint64_t t0 = h_now_ms();
    for (int id = 1; id <= N; id++) {
        pub_at(__FILE__, __LINE__, c, 1, &t, "", q1, id, SIZE, &p, 512, 10000);
        pub_at(__FILE__, __LINE__, c, 1, &t, "", q2, id, SIZE, &p, 512, 10000);
    }
    uint64_t t1 = h_now_ms();
    CONF_WAIT_ALL(c, &t, 30000);
    fprintf(stderr, "paged_expiry: %d published in %" PRIu64 " ms, "
            "confirmed %" PRIu64 " ms after that\n", 2 * N, t1 - t0,
            h_now_ms() - t1);

    /* 1.5 s after the last publish, then (at most 5 s more) all gone. */
    uint64_t now = h_now_ms();
    if (now < t1 + 3 * TTL_MS)
        h_sleep_ms((unsigned)(t1 + 3 * TTL_MS - now));
    WAIT_COUNT(c, 1, q1, 0);
    WAIT_COUNT(c, 1, q2, 0);
    WAIT_COUNT(c, 1, dq, N);
    EXPECT_EMPTY(c, q1);

    /* The dead-lettered copies: every id once, in order, with its body
     * (read back from disk to be dead-lettered), its delivery mode, an
     * x-death header, and no expiration of its own (as in RabbitMQ). */
    cons = h_connect(H);
    qos(cons, 1, 100);
    CONSUME(cons, 1, dq, "dead", false, NULL);
    for (int want = 1; want <= N; want++) {
        amqp_envelope_t env;
        struct timeval tv = { 10, 0 };
        amqp_maybe_release_buffers(cons);
        amqp_rpc_reply_t r = amqp_consume_message(cons, &env, &tv, 0);
        char buf[256];
        ck_assert_msg(r.reply_type == AMQP_RESPONSE_NORMAL,
                      "dead-letter queue: id %d: %s", want,
                      h_reply_str(r, buf, sizeof(buf)));
        amqp_basic_properties_t *mp = &env.message.properties;
        int id = body_id(env.message.body.bytes, env.message.body.len);
        ck_assert_msg(id == want, "dead-letter queue: delivery %d is id %d",
                      want, id);
        ck_assert_msg(body_is(env.message.body.bytes, env.message.body.len, id,
                              SIZE),
                      "dead-lettered id %d does not carry its original body "
                      "(%zu bytes)", id, env.message.body.len);
        ck_assert_msg((mp->_flags & AMQP_BASIC_DELIVERY_MODE_FLAG) &&
                          mp->delivery_mode == 2,
                      "dead-lettered id %d is not persistent", id);
        const char *why = x_death_problem(mp, q2);
        ck_assert_msg(why == NULL, "dead-lettered id %d: %s", id, why);
        ck_assert_msg(!(mp->_flags & AMQP_BASIC_EXPIRATION_FLAG),
                      "dead-lettered id %d keeps its expiration", id);
        ck_assert(!env.redelivered);
        if (want % 50 == 0 || want == N)
            ack_at(__FILE__, __LINE__, cons, 1, env.delivery_tag, true);
        amqp_destroy_envelope(&env);
    }
    ck_assert_int_eq(SYNC(cons, 1, NULL, 0), 0);
    h_close(cons);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, dq), 0);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 5. purge ---- */

START_TEST(paged_purge)
{
    enum { N = 5000, SIZE = 1024 };
    struct confirms t = { 0 };
    struct h_event e;
    char q[64];

    SKIP_IF_REMOTE("restarts roostd");
    amqp_connection_state_t c = START_QUEUE(q, "purge");
    PUB_RANGE(c, &t, q, 1, N + 1, SIZE);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), N);
    uint64_t t0 = h_now_ms();
    amqp_queue_purge_ok_t *ok = amqp_queue_purge(c, 1, amqp_cstring_bytes(q));
    EXPECT_OK(c, "queue.purge");
    ck_assert_msg(ok->message_count == N, "queue.purge-ok counts %u, "
                  "expected %d", ok->message_count, N);
    fprintf(stderr, "paged_purge: %d purged in %" PRIu64 " ms\n", N,
            h_now_ms() - t0);
    EXPECT_EMPTY(c, q);
    /* What the purge wrote is on disk once this confirm comes. */
    PUB_RANGE(c, &t, q, N + 1, N + 2, SIZE);
    ck_assert_int_eq(GET(c, 1, q, false, &e), 1);
    ck_assert_int_eq(body_id(e.body, e.len), N + 1);
    ck_assert_int_eq(amqp_basic_ack(c, 1, e.tag, 0), 0);
    h_event_free(&e);
    EXPECT_EMPTY(c, q);
    h_close(c);

    harness_stop_keep(H);
    ck_assert_uint_eq(RESTART_RECOVERED(0), 1);
    c = h_connect(H);
    EXPECT_EMPTY(c, q);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 6. transient messages to scratch under memory pressure ---- */

/* Publish transient ids from..to-1 to 'q', confirms awaited; the most
 * RSS seen (sampled every 1000) into *rss_max. */
static void
pub_transient_at(const char *file, int line, amqp_connection_state_t c,
                 struct confirms *t, const char *q, int from, int to,
                 size_t size, long *rss_max)
{
    for (int id = from; id < to; id++) {
        pub_mode_at(file, line, c, 1, t, "", q, id, size, 1, 512, 30000);
        if (id % 1000 == 0)
            note_rss(rss_max);
    }
    conf_wait_all_at(file, line, c, t, 60000);
    note_rss(rss_max);
}

START_TEST(transient_scratch)
{
    enum { N = 100000, N2 = 30000, SIZE = 1024 };
    const long RSS_MAX_KB = 120 * 1024;
    const char *const *args =
        ARGS(W16, "--set", "vm_memory_high_watermark.absolute=30000000");
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    char q[64], out[256];
    long rss_max = 0;

    SKIP_IF_REMOTE("sets the memory watermark");
    /* ASan's quarantine kept small, so that RSS shows what roostd
     * holds. */
    harness_start_asan(H, args, "quarantine_size_mb=1");
    long rss0 = harness_rss_kb(H);
    c = h_connect_blocked_cap(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "scratch"), false, false, false,
                  out);
    confirm_select(c, 1);
    uint64_t t0 = h_now_ms();
    pub_transient_at(__FILE__, __LINE__, c, &t, q, 1, N + 1, SIZE, &rss_max);
    uint64_t t1 = h_now_ms();
    int segs = count_segs(H, "scratch");
    fprintf(stderr, "transient_scratch: %d confirmed in %" PRIu64 " ms "
            "(connection.blocked %d, unblocked %d), %d scratch segments, "
            "RSS %ld KiB at the start, %ld at most\n", N, t1 - t0, t.blocked,
            t.unblocked, segs, rss0, rss_max);
    ck_assert_msg(harness_log_contains(H, "above the paging threshold"),
                  "the log does not say \"above the paging threshold\"");
    ck_assert_msg(segs >= 1, "DATADIR/scratch holds no .seg file with %d "
                  "transient messages queued", N);
    ck_assert_msg(rss_max < RSS_MAX_KB, "roostd's RSS reached %ld KiB "
                  "(limit %ld) for %d KiB of transient messages", rss_max,
                  RSS_MAX_KB, N);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), N);

    DRAIN_QUEUE(c, q, "scratch consumer", N, SIZE, 200, 50);
    fprintf(stderr, "transient_scratch: consumed in %" PRIu64 " ms\n",
            h_now_ms() - t1);

    /* A second backlog, in the scratch area when roostd stops: a clean
     * stop wipes it, and a start finds nothing there. */
    size_t mark = log_mark(H);
    pub_transient_at(__FILE__, __LINE__, c, &t, q, N + 1, N + N2 + 1, SIZE,
                     &rss_max);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), N2);
    segs = count_segs(H, "scratch");
    fprintf(stderr, "transient_scratch: a second backlog of %d, %d scratch "
            "segments, RSS %ld KiB at most\n", N2, segs, rss_max);
    ck_assert_msg(log_has_since(H, mark, "above the paging threshold"),
                  "the second backlog did not bring memory pressure back");
    ck_assert_msg(segs >= 1, "DATADIR/scratch holds no .seg file with %d "
                  "transient messages queued", N2);
    ck_assert_msg(rss_max < RSS_MAX_KB, "roostd's RSS reached %ld KiB",
                  rss_max);
    h_close(c);
    harness_stop_keep(H);
    ck_assert_msg(count_segs(H, "scratch") == 0, "%d scratch segments left "
                  "after a clean stop", count_segs(H, "scratch"));
    harness_restart(H, args);
    ck_assert_msg(count_segs(H, "scratch") == 0, "%d scratch segments after "
                  "a restart", count_segs(H, "scratch"));
    c = h_connect(H);
    /* Not durable: gone with the restart. */
    amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 1, 0, 0, 0,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 404, "NOT_FOUND");
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 7. a consumer that does not read ---- */

START_TEST(stalled_consumer_pages)
{
    enum { N = 200000, SIZE = 1024 };
    const long GROWTH_MAX_KB = 64 * 1024;
    amqp_connection_state_t p, s, c2;
    struct confirms t = { 0 };
    char q[64], out[256];
    long rss_max = 0;

    SKIP_IF_REMOTE("measures roostd's memory");
    seed("stalled_consumer_pages", 20260302);
    /* How many the stalled consumer reads and acks once it reads. */
    int k = (int)rnd_in(N / 4, 3 * N / 4);
    harness_start_asan(H, ARGS(W16), "quarantine_size_mb=1");
    p = h_connect(H);
    DECLARE_QUEUE(p, 1, h_name(q, sizeof(q), "stalled"), true, false, false,
                  out);
    s = h_connect(H);
    qos(s, 1, 0);
    CONSUME(s, 1, q, "stalled", false, NULL);
    confirm_select(p, 1);
    long rss0 = harness_rss_kb(H);
    uint64_t t0 = h_now_ms();
    for (int id = 1; id <= N; id++) {
        pub_mode_at(__FILE__, __LINE__, p, 1, &t, "", q, id, SIZE, 2, 512,
                    10000);
        if (id % 2000 == 0)
            note_rss(&rss_max);
    }
    CONF_WAIT_ALL(p, &t, 30000);
    uint64_t t1 = h_now_ms();
    long rss1 = note_rss(&rss_max);
    uint32_t ready = QUEUE_COUNT(p, 1, q);
    fprintf(stderr, "stalled_consumer_pages: %d confirmed in %" PRIu64 " ms; "
            "%u still ready (%u handed to the stalled consumer); RSS %ld KiB "
            "before, %ld after, %ld at most\n", N, t1 - t0, ready, N - ready,
            rss0, rss1, rss_max);
    ck_assert_msg(rss_max - rss0 < GROWTH_MAX_KB, "roostd's RSS grew by %ld "
                  "KiB (to %ld at most) for %d KiB of persistent messages",
                  rss_max - rss0, rss_max, N);
    ck_assert_msg(rss1 - rss0 < GROWTH_MAX_KB, "roostd's RSS grew by %ld KiB",
                  rss1 - rss0);
    ck_assert_msg(ready < (uint32_t)N, "nothing was delivered to the "
                  "consumer");

    /* The stalled consumer reads now: ids 1..k in order, never delivered
     * before; it acks them and closes. Whatever it was sent beyond k is
     * unacked and goes back. */
    DRAIN(s, 1, "the stalled consumer", 1, k + 1, SIZE, 100);
    h_close(s);
    fprintf(stderr, "stalled_consumer_pages: the stalled consumer read %d "
            "in %" PRIu64 " ms\n", k, h_now_ms() - t1);

    /* A fresh consumer: ids k+1..N, in order, once each; the first of
     * them, those the closed consumer had been sent, are marked
     * redelivered (at least one: it was sent more than it read), the
     * rest not. */
    c2 = h_connect(H);
    qos(c2, 1, 500);
    CONSUME(c2, 1, q, "fresh", false, NULL);
    int marked = 0;
    bool unmarked_seen = false;
    for (int want = k + 1; want <= N; want++) {
        struct h_event e;
        int r = h_next(c2, 10000, &e);
        ck_assert_msg(r == 1, "fresh consumer: id %d: %s", want,
                      r == 0 ? "nothing within 10 s" : "connection closed");
        ck_assert_msg(e.id == AMQP_BASIC_DELIVER_METHOD,
                      "fresh consumer: expected id %d, got %s", want,
                      h_method_name(e.id));
        int id = body_id(e.body, e.len);
        ck_assert_msg(id == want, "fresh consumer: got id %d, expected %d",
                      id, want);
        ck_assert_msg(body_is(e.body, e.len, id, SIZE),
                      "fresh consumer: id %d does not have its body", id);
        if (e.redelivered) {
            ck_assert_msg(!unmarked_seen, "id %d is marked redelivered after "
                          "id %d was not: only what the first consumer was "
                          "sent may be", id, k + marked + 1);
            marked++;
        } else {
            unmarked_seen = true;
        }
        if ((want - k) % 250 == 0 || want == N)
            ack_at(__FILE__, __LINE__, c2, 1, e.tag, true);
        h_event_free(&e);
    }
    ck_assert_int_eq(SYNC(c2, 1, NULL, 0), 0);
    fprintf(stderr, "stalled_consumer_pages: the fresh consumer read %d, "
            "the first %d redelivered\n", N - k, marked);
    ck_assert_msg(marked >= 1, "none of the messages sent to the closed "
                  "consumer came back marked redelivered");
    h_close(c2);
    ck_assert_uint_eq(QUEUE_COUNT(p, 1, q), 0);
    h_close(p);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 8. compaction of segments with paged messages ---- */

START_TEST(compaction_reads_paged)
{
    enum { N = 3000, SIZE_A = 1000, SIZE_B = 3000 };
    const char *const *args = ARGS(W16, "--set", "store.segment_size=65536");
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;
    char qa[64], qb[64], out[256];

    SKIP_IF_REMOTE("restarts roostd");
    harness_start(H, args);
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(qa, sizeof(qa), "A"), true, false, false, out);
    DECLARE_QUEUE(c, 1, h_name(qb, sizeof(qb), "B"), true, false, false, out);
    confirm_select(c, 1);
    /* Alternating, so that every segment holds both; with at most 16
     * unconfirmed, so that the batches, and so the segments they fill
     * past 64 KiB, stay small (about 190 of them). */
    for (int id = 1; id <= N; id++) {
        pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", qa, id, SIZE_A, 2, 16,
                    10000);
        pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", qb, id, SIZE_B, 2, 16,
                    10000);
    }
    CONF_WAIT_ALL(c, &t, 30000);
    conf_free(&t);
    int before = count_segs(H, "msgs");
    size_t mark = log_mark(H);

    /* B drained: every segment is left with A's messages only, paged,
     * about a quarter of it. */
    uint64_t t0 = h_now_ms();
    DRAIN_QUEUE(c, qb, "B's consumer", N, SIZE_B, 100, 20);
    uint64_t t1 = h_now_ms();
    int drained = count_segs(H, "msgs");

    /* Compaction reads A's paged messages back and copies them forward,
     * a second after B's last ack, on a broker that is idle by then:
     * the segments go, down to about what A's messages fill (a quarter
     * of what there was, and a few more). */
    int now = count_segs(H, "msgs"), target = before / 4 + 12;
    uint64_t deadline = h_now_ms() + 15000;
    while (now > target && h_now_ms() < deadline) {
        h_sleep_ms(50);
        now = count_segs(H, "msgs");
    }
    fprintf(stderr, "compaction_reads_paged: %d segments after publishing, "
            "%d once B was drained (in %" PRIu64 " ms), %d %" PRIu64 " ms "
            "later\n", before, drained, t1 - t0, now, h_now_ms() - t1);
    ck_assert_msg(before >= 100, "only %d segments to begin with", before);
    ck_assert_msg(now <= target, "%d segments %" PRIu64 " ms after B was "
                  "drained, %d before: compaction did not get below %d",
                  now, h_now_ms() - t1, before, target);
    ck_assert_msg(log_has_since(H, mark, "reading paged messages back first"),
                  "no compaction of a segment with paged messages in the "
                  "log");

    /* A SIGKILL: what compaction copied was synced before the segments
     * went. A holds every id once, in order, with its bodies. */
    KILL9(H);
    h_drop(c);
    harness_restart(H, args);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, qa, SIZE_A, &m);
    EXPECT_IDS_AFTER_CRASH(m, n, 1, N + 1, 0);
    free(m);
    h_close(c);
    c = h_connect(H);
    EXPECT_EMPTY(c, qb);
    h_close(c);
    harness_stop(H);
}
END_TEST

/* ---- 9. a paged record that no longer checks out ---- */

/* Flip a byte in the body of message 'id' in whichever journal segment
 * holds it, under the running roostd (its record is paged out). */
static void
corrupt_body_on_disk(int id)
{
    char dir[4096], path[8300], unit[32];
    int ul = snprintf(unit, sizeof(unit), "<id:%06d>", id);
    bool done = false;

    data_path(dir, sizeof(dir), H, "msgs");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    struct dirent *de;
    while (!done && (de = readdir(d)) != NULL) {
        if (strstr(de->d_name, ".seg") == NULL)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        int fd = open(path, O_RDWR);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size == 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char *buf = malloc((size_t)sb.st_size);
        ck_assert(buf != NULL);
        ck_assert(pread(fd, buf, (size_t)sb.st_size, 0) == sb.st_size);
        char *at = memmem(buf, (size_t)sb.st_size, unit, (size_t)ul);
        if (at) {
            char flip = (char)(at[ul + 3] ^ 0x5a);
            ck_assert(pwrite(fd, &flip, 1, (off_t)(at - buf) + ul + 3) == 1);
            done = true;
        }
        free(buf);
        close(fd);
    }
    closedir(d);
    ck_assert_msg(done, "message %d is in no segment", id);
}

/*
 * A record corrupted on disk after its message was paged out: reading
 * it back finds the bad CRC, the log says which queue, position and
 * segment, that one message is dropped, and every other one is
 * delivered, in order.
 */
START_TEST(corrupt_paged_record)
{
    enum { N = 200, BAD = 120, SIZE = 512 };
    struct confirms t = { 0 };
    struct h_event e;
    char q[64];

    SKIP_IF_REMOTE("changes roostd's files");
    amqp_connection_state_t c = START_QUEUE(q, "corrupt");
    PUB_RANGE(c, &t, q, 1, N + 1, SIZE);
    size_t mark = log_mark(H);
    corrupt_body_on_disk(BAD);
    amqp_connection_state_t cons = h_connect(H);
    qos(cons, 1, 10);
    CONSUME(cons, 1, q, "corrupt consumer", false, NULL);
    for (int want = 1; want <= N; want++) {
        if (want == BAD)
            continue;
        ck_assert_int_eq(h_next(cons, 10000, &e), 1);
        ck_assert_uint_eq(e.id, AMQP_BASIC_DELIVER_METHOD);
        ck_assert_msg(body_is(e.body, e.len, want, SIZE), "expected id %d, "
                      "got id %d", want, body_id(e.body, e.len));
        ck_assert_int_eq(amqp_basic_ack(cons, 1, e.tag, 0), 0);
        h_event_free(&e);
    }
    ck_assert_int_eq(SYNC(cons, 1, NULL, 0), 0);
    h_close(cons);
    WAIT_LOG(H, mark, "cannot be read back");
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q), 0);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 10. a basic.get waiting for a read, and what may happen then ---- */

/*
 * With each read-back held up for 300 ms (ROOST_TEST_READ_DELAY_US): a
 * basic.get on a paged head waits; the queue is deleted meanwhile by
 * another connection: the get is answered get-empty, and a method
 * pipelined behind it is answered after it. A connection dropped while
 * its get waits costs nothing else: the broker goes on, and stops clean.
 */
START_TEST(get_wait_interrupted)
{
    enum { N = 100, SIZE = 256 };
    struct confirms t = { 0 };
    struct h_event e;
    char q[64], q2[64], out[256];

    SKIP_IF_REMOTE("sets a test hook");
    setenv("ROOST_TEST_READ_DELAY_US", "300000", 1);
    amqp_connection_state_t c = START_QUEUE(q, "getwait");
    unsetenv("ROOST_TEST_READ_DELAY_US");
    DECLARE_QUEUE(c, 1, h_name(q2, sizeof(q2), "getwait2"), true, false,
                  false, out);
    PUB_RANGE(c, &t, q, 1, N + 1, SIZE);
    PUB_RANGE(c, &t, q2, 1, N + 1, SIZE);

    /* The window's 16 come at once; the 17th waits for its read. */
    amqp_connection_state_t g = h_connect(H);
    for (int id = 1; id <= 16; id++) {
        ck_assert_int_eq(GET(g, 1, q, true, &e), 1);
        ck_assert_int_eq(body_id(e.body, e.len), id);
        h_event_free(&e);
    }
    amqp_basic_get_t bg = { .queue = amqp_cstring_bytes(q), .no_ack = 1 };
    ck_assert_int_eq(amqp_send_method(g, 1, AMQP_BASIC_GET_METHOD, &bg), 0);
    /* Pipelined behind the get: answered only after it. */
    amqp_queue_declare_t qd = { .queue = amqp_cstring_bytes(q2),
                                .passive = 1 };
    ck_assert_int_eq(amqp_send_method(g, 1, AMQP_QUEUE_DECLARE_METHOD, &qd),
                     0);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(q), 0, 0);
    EXPECT_OK(c, "queue.delete");
    ck_assert_int_eq(h_next(g, 5000, &e), 1);
    ck_assert_msg(e.id == AMQP_BASIC_GET_EMPTY_METHOD ||
                      e.id == AMQP_BASIC_GET_OK_METHOD,
                  "the waiting get got %s", h_method_name(e.id));
    if (e.id == AMQP_BASIC_GET_OK_METHOD)   /* the read won the race */
        ck_assert_int_eq(body_id(e.body, e.len), 17);
    h_event_free(&e);
    ck_assert_int_eq(h_next(g, 5000, &e), 1);
    ck_assert_uint_eq(e.id, AMQP_QUEUE_DECLARE_OK_METHOD);
    h_event_free(&e);
    h_close(g);

    /* Dropped while its get waits. */
    amqp_connection_state_t d = h_connect(H);
    for (int id = 1; id <= 16; id++) {
        ck_assert_int_eq(GET(d, 1, q2, false, &e), 1);
        h_event_free(&e);
    }
    amqp_basic_get_t bg2 = { .queue = amqp_cstring_bytes(q2) };
    ck_assert_int_eq(amqp_send_method(d, 1, AMQP_BASIC_GET_METHOD, &bg2), 0);
    h_drop(d);
    /* Once its get is answered (the read done) the broker finds the
     * socket gone: its 17 unacked ones come back, and all are there. */
    WAIT_COUNT(c, 1, q2, N);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 11. the scratch area refuses writes ---- */

/*
 * Under memory pressure with every scratch write failing
 * (ROOST_TEST_SCRATCH_FAIL): transient messages stay in memory, the log says
 * so once, and every publish is still confirmed while memory lasts; once
 * writes work again the queue pages out to the scratch area, and every
 * message is delivered in order.
 */
/* ---- priority levels, each paged ---- */

/* Ids 1..n with priority id % 4 come out 3s first, each level in id
 * order; 'm' from READ_QUEUE. */
static void
expect_priority_order_at(const char *file, int line, const struct qmsg *m,
                         int got, int n)
{
    int k = 0;
    H_ASSERT_AT(file, line, got == n, "read %d messages, expected %d", got, n);
    for (int prio = 3; prio >= 0; prio--)
        for (int id = 1; id <= n; id++) {
            if (id % 4 != prio)
                continue;
            H_ASSERT_AT(file, line, m[k].id == id && m[k].body_ok,
                        "message %d is id %d%s, expected id %d (priority %d)",
                        k + 1, m[k].id, m[k].body_ok ? "" : " (bad body)",
                        id, prio);
            k++;
        }
}

START_TEST(paged_priorities)
{
    enum { N = 4000, SIZE = 512 };
    struct confirms t = { 0 };
    struct qmsg *m;
    char q[64], out[256];

    SKIP_IF_REMOTE("sets paging.window");
    harness_start(H, ARGS(W16));
    amqp_connection_state_t c = h_connect(H);
    amqp_table_entry_t a = h_entry_int("x-max-priority", 3);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, h_name(q, sizeof(q), "prio"),
                       true, false, false, h_table(&a, 1), out, NULL, NULL);
    confirm_select(c, 1);
    for (int id = 1; id <= N; id++) {
        amqp_basic_properties_t p = mode_props(2);
        p._flags |= AMQP_BASIC_PRIORITY_FLAG;
        p.priority = (uint8_t)(id % 4);
        pub_at(__FILE__, __LINE__, c, 1, &t, "", q, id, SIZE, &p, 512, 10000);
    }
    conf_wait_all_at(__FILE__, __LINE__, c, &t, 30000);
    h_close(c);
    conf_free(&t);

    /* Recovery restores all but a window of them paged. */
    harness_stop_keep(H);
    RESTART_RECOVERED(N);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, SIZE, &m);
    expect_priority_order_at(__FILE__, __LINE__, m, n, N);
    free(m);
    /* Given back, then a SIGKILL. */
    h_close(c);
    KILL9(H);
    RESTART_RECOVERED(N);
    c = h_connect(H);
    n = READ_QUEUE(c, 1, q, SIZE, &m);
    expect_priority_order_at(__FILE__, __LINE__, m, n, N);
    free(m);
    h_close(c);
    harness_stop(H);
}
END_TEST

START_TEST(scratch_write_fails)
{
    /* Above the paging threshold (15 MB), below the alarm (30 MB). */
    enum { N = 18000, SIZE = 1024 };
    const char *const *args =
        ARGS(W16, "--set", "vm_memory_high_watermark.absolute=30000000");
    struct confirms t = { 0 };
    char fail[256], q[64], out[256];
    long rss_max = 0;

    SKIP_IF_REMOTE("breaks roostd's disk");
    hook_path(fail, sizeof(fail), "scratch-fail");
    int fd = open(fail, O_WRONLY | O_CREAT, 0644);
    ck_assert_msg(fd >= 0, "cannot create %s", fail);
    close(fd);
    setenv("ROOST_TEST_SCRATCH_FAIL", fail, 1);
    harness_start_asan(H, args, "quarantine_size_mb=1");
    unsetenv("ROOST_TEST_SCRATCH_FAIL");
    amqp_connection_state_t c = h_connect_blocked_cap(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "scrfail"), false, false, false,
                  out);
    confirm_select(c, 1);
    size_t mark = log_mark(H);
    pub_transient_at(__FILE__, __LINE__, c, &t, q, 1, N + 1, SIZE, &rss_max);
    WAIT_LOG(H, mark, "cannot write to the scratch area");
    ck_assert_msg(count_segs(H, "scratch") == 0, "scratch segments while "
                  "every write fails");
    ck_assert_int_eq(t.blocked, 0);

    /* The disk takes writes again: within the second's retry the queue
     * pages out. */
    ck_assert_int_eq(unlink(fail), 0);
    WAIT_LOG(H, mark, "the scratch area takes writes again");
    uint64_t deadline = h_now_ms() + 5000;
    while (count_segs(H, "scratch") == 0 && h_now_ms() < deadline)
        h_sleep_ms(50);
    ck_assert_msg(count_segs(H, "scratch") >= 1, "nothing paged to the "
                  "scratch area once it took writes again");
    DRAIN_QUEUE(c, q, "scrfail consumer", N, SIZE, 200, 50);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("paging");

    /* One case each, so that CK_RUN_CASE=<test name> runs one alone. */
    tcase_add_test(h_tcase(s, "paged_backlog_in_order", 30, false),
                   paged_backlog_in_order);
    tcase_add_test(h_tcase(s, "get_waits_for_read", 30, false),
                   get_waits_for_read);
    tcase_add_test(h_tcase(s, "paged_restart", 40, false), paged_restart);
    tcase_add_test(h_tcase(s, "paged_expiry", 30, false), paged_expiry);
    tcase_add_test(h_tcase(s, "paged_purge", 30, false), paged_purge);
    tcase_add_test(h_tcase(s, "transient_scratch", 90, false),
                   transient_scratch);
    tcase_add_test(h_tcase(s, "stalled_consumer_pages", 90, false),
                   stalled_consumer_pages);
    tcase_add_test(h_tcase(s, "compaction_reads_paged", 40, false),
                   compaction_reads_paged);
    tcase_add_test(h_tcase(s, "corrupt_paged_record", 30, false),
                   corrupt_paged_record);
    tcase_add_test(h_tcase(s, "get_wait_interrupted", 30, false),
                   get_wait_interrupted);
    tcase_add_test(h_tcase(s, "paged_priorities", 60, false),
                   paged_priorities);
    tcase_add_test(h_tcase(s, "scratch_write_fails", 60, false),
                   scratch_write_fails);

    return h_run(s);
}
