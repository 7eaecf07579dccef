/*
 * SPDX-License-Identifier: Apache-2.0
 * The durable store against a real roostd (broker/store/): what a client
 * sees of persistent messages and durable definitions across restarts,
 * crashes, lost writes, corrupt records and a failing disk.
 *
 * - clean_restart: after SIGTERM, durable exchanges, queues (a durable
 *   auto-delete one too, as in RabbitMQ) and bindings are back and
 *   transient and exclusive ones are not; a
 *   durable queue holds exactly its unacked persistent messages, in order,
 *   the delivered-but-unacked ones marked redelivered, and no transient
 *   message;
 * - kill9_restart: the same after SIGKILL, once a confirm has shown that
 *   the acks before it are on disk: acked messages stay gone;
 * - crash_loop: rounds of a producer and a consumer against a roostd
 *   killed at a random moment (seeded): every confirmed message that was
 *   not acked survives, none appears twice, an acked one that comes back
 *   is marked redelivered, and nothing comes back that was settled for
 *   good; crash_loop_paged the same with a window of 16 messages, so
 *   that nearly every one is paged out and read back; crash_loop_quorum
 *   on a quorum queue with transient messages; crash_loop_retry with
 *   x-requeue-delay, every fourth message nacked once, so that some wait
 *   out their delay at each kill;
 * - power_cut_retry: the same while messages wait out a requeue delay
 *   (x-requeue-delay): every one not acked is back after it;
 * - crash_loop_delayed: the same with persistent delayed messages
 *   (x-delayed-message) confirmed while held: after each kill, every
 *   confirmed one is routed exactly once when due, none early;
 *   power_cut_delayed: power_cut's cut while they are held;
 * - power_cut: writes after the last sync (ROOST_TEST_SYNC_LOG says where)
 *   are cut off and replaced with zeros or garbage: every confirmed message
 *   survives, and the garbage is reported as a torn tail; power_cut_stream
 *   the same into a stream with transient messages (its own segments cut);
 *   power_cut_dead_letter_stream while messages are dead-lettered from a
 *   queue into a stream: each is in one or both, never in neither;
 * - corruption: bytes flipped inside one message's record lose that
 *   message only, and the log says "corrupt record";
 * - failing_disk: while writes fail (ROOST_TEST_IO_FAIL), confirms are
 *   withheld and publishers blocked; once writes succeed they arrive, and
 *   what they confirmed survives a SIGKILL;
 * - emptied_queue_restart, deleted_queue_records_stay_dead: records a
 *   kept segment still holds for a queue emptied or deleted before a
 *   restart do not act on what a queue takes after it;
 * - delivered_before_crash_marked: crash_loop's redelivered check, made
 *   deterministic with the failing disk;
 * - consumed_before_write_confirmed_at_once: a persistent message acked
 *   before its batch was written is confirmed while every write fails.
 *
 * Message bodies carry their id ("<id:000042>" repeated), so that what a
 * queue holds can be checked against what was published and confirmed.
 * The random choices (kill times, cut points) come from a seed printed at
 * the start of each test that uses one; ROOST_TEST_SEED sets it.
 *
 * Every test restarts roostd, so none runs against a remote broker.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/store/record.h"
#include "tests/integration/harness.h"
#include "tests/integration/store_common.h"

/* ---- passive declares ---- */

/* A passive declare of queue (or exchange, 'x') 'name' gets 404; the
 * channel is opened again. */
static void
expect_gone_at(const char *file, int line, amqp_connection_state_t c,
               amqp_channel_t ch, const char *name, bool x)
{
    if (x)
        amqp_exchange_declare(c, ch, amqp_cstring_bytes(name),
                              amqp_cstring_bytes("direct"), 1, 0, 0, 0,
                              amqp_empty_table);
    else
        amqp_queue_declare(c, ch, amqp_cstring_bytes(name), 1, 0, 0, 0,
                           amqp_empty_table);
    h_expect_channel_close_at(file, line, c, amqp_get_rpc_reply(c), ch, 404,
                              "NOT_FOUND");
    amqp_channel_open(c, ch);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "channel.open");
}

static void
passive_exchange_at(const char *file, int line, amqp_connection_state_t c,
                    amqp_channel_t ch, const char *name)
{
    amqp_exchange_declare(c, ch, amqp_cstring_bytes(name),
                          amqp_cstring_bytes("direct"), 1, 0, 0, 0,
                          amqp_empty_table);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c),
                   "passive exchange.declare");
}

/* ---- definitions for the restart tests ---- */

struct defs {
    char x[64], tx[64];                 /* durable, transient exchange */
    char q[64], tq[64], eq[64], aq[64]; /* durable, transient, exclusive,
                                           auto-delete queue */
};

/* Declare them all on channel 1 of 'c' (the exclusive queue is c's) and
 * bind each queue to both exchanges with key "k". */
static void
declare_defs(amqp_connection_state_t c, struct defs *d)
{
    char out[256];

    h_name(d->x, sizeof(d->x), "x");
    h_name(d->tx, sizeof(d->tx), "tx");
    h_name(d->q, sizeof(d->q), "q");
    h_name(d->tq, sizeof(d->tq), "tq");
    h_name(d->eq, sizeof(d->eq), "eq");
    h_name(d->aq, sizeof(d->aq), "aq");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, d->x, "direct", true,
                          false, false, amqp_empty_table);
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, d->tx, "direct", false,
                          false, false, amqp_empty_table);
    DECLARE_QUEUE(c, 1, d->q, true, false, false, out);
    DECLARE_QUEUE(c, 1, d->tq, false, false, false, out);
    DECLARE_QUEUE(c, 1, d->eq, true, true, false, out);
    DECLARE_QUEUE(c, 1, d->aq, true, false, true, out);
    const char *qs[] = { d->q, d->tq, d->eq, d->aq };
    for (int i = 0; i < 4; i++) {
        BIND(c, 1, qs[i], d->x, "k");
        BIND(c, 1, qs[i], d->tx, "k");
    }
}

/* After a restart: the durable ones are there, the others are not
 * (passive declares get 404). */
static void
check_defs_at(const char *file, int line, amqp_connection_state_t c,
              const struct defs *d)
{
    passive_exchange_at(file, line, c, 1, d->x);
    (void)h_queue_count_at(file, line, c, 1, d->q, NULL);
    expect_gone_at(file, line, c, 1, d->tx, true);
    expect_gone_at(file, line, c, 1, d->tq, false);
    expect_gone_at(file, line, c, 1, d->eq, false);
    /* Durable and auto-delete: kept, with what it holds, until its last
     * consumer goes (RabbitMQ 3.10 does the same). */
    (void)h_queue_count_at(file, line, c, 1, d->aq, NULL);
}
#define CHECK_DEFS(c, d) check_defs_at(__FILE__, __LINE__, (c), (d))

/* The binding x -> q survived: a message to x with key "k" reaches q,
 * which must be empty before. */
static void
check_binding_at(const char *file, int line, amqp_connection_state_t c,
                 const struct defs *d)
{
    char body[BODY_MAX];
    size_t len = make_body(body, 999999, 11);
    amqp_basic_properties_t p = mode_props(2);

    h_publish_at(file, line, c, 1, d->x, "k", body, len, false, &p);
    h_wait_count_at(file, line, c, 1, d->q, 1);
}

/* ---- 1. clean restart ---- */

/*
 * Restart on the same data (the stop or kill done), then: the recovery
 * line counts 'msgs' messages in two queues (the durable one and the
 * durable auto-delete one), the definitions are there,
 * the queue holds ids from..to-1 in order (those below 'rb' marked
 * redelivered; 'exact': the others not), and the binding still routes.
 */
static void
after_restart_at(const char *file, int line, size_t mark,
                 const struct defs *d, unsigned long long want_msgs, int from,
                 int to, int rb, bool exact)
{
    unsigned long long msgs, queues;
    struct qmsg *m;

    harness_restart(H, NULL);
    recovered_at(file, line, H, mark, &msgs, &queues);
    H_ASSERT_AT(file, line, msgs == want_msgs, "recovered %llu messages, "
                "expected %llu", msgs, want_msgs);
    H_ASSERT_AT(file, line, queues == 2, "recovered %llu queues", queues);
    amqp_connection_state_t c = h_connect(H);
    check_defs_at(file, line, c, d);
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open");
    int n = read_queue_at(file, line, c, 2, d->q, 0, &m);
    expect_ids_at(file, line, m, n, from, to, rb, exact);
    free(m);
    /* Settle them so that the binding's check starts from nothing. */
    amqp_channel_close(c, 2, AMQP_REPLY_SUCCESS);
    EXPECT_OK(c, "channel.close");
    amqp_queue_purge(c, 1, amqp_cstring_bytes(d->q));
    EXPECT_OK(c, "queue.purge");
    check_binding_at(file, line, c, d);
    h_close(c);
}

START_TEST(clean_restart)
{
    enum { N = 2000, ACKED = 500, UNACKED = 100, PLAIN_FROM = 600 };
    amqp_connection_state_t c, cons;
    struct confirms t = { 0 };
    struct defs d;
    struct h_event e;
    int transient = 0;

    SKIP_IF_REMOTE("restarts roostd");
    harness_start(H, NULL);
    c = h_connect(H);
    declare_defs(c, &d);
    confirm_select(c, 1);

    /* 2000 persistent messages; after the first 600, a transient one
     * after every seventh. */
    for (int id = 1; id <= N; id++) {
        PUB(c, 1, &t, d.x, "k", id, 64, 2);
        if (id > PLAIN_FROM && id % 7 == 0) {
            PUB(c, 1, &t, d.x, "k", 500000 + id, 64, 1);
            transient++;
        }
    }
    CONF_WAIT_ALL(c, &t, 20000);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, d.q), N + transient);

    /* A consumer with prefetch 1 acks the first 500 (cancelled before
     * the last ack, so that no 501st comes); basic.get takes 100 more,
     * not acked. */
    cons = h_connect(H);
    amqp_basic_qos(cons, 1, 0, 1, 0);
    EXPECT_OK(cons, "basic.qos");
    char ctag[256];
    CONSUME(cons, 1, d.q, "acker", false, ctag);
    for (int id = 1; id <= ACKED; id++) {
        EXPECT_DELIVERY(cons, NULL, &e);
        ck_assert_int_eq(body_id(e.body, e.len), id);
        ck_assert(!e.redelivered);
        if (id == ACKED) {
            amqp_basic_cancel_t cancel = { amqp_cstring_bytes(ctag), 0 };
            SEND(cons, 1, AMQP_BASIC_CANCEL_METHOD, &cancel);
            EXPECT_METHOD(cons, AMQP_BASIC_CANCEL_OK_METHOD, NULL);
        }
        ck_assert_int_eq(amqp_basic_ack(cons, 1, e.tag, 0), 0);
        h_event_free(&e);
    }
    for (int id = ACKED + 1; id <= ACKED + UNACKED; id++) {
        ck_assert_int_eq(GET(cons, 1, d.q, false, &e), 1);
        ck_assert_int_eq(body_id(e.body, e.len), id);
        h_event_free(&e);
    }
    h_close(cons);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, d.q), N - ACKED + transient);
    h_close(c);

    harness_stop_keep(H);
    size_t mark = log_mark(H);
    /* The auto-delete queue keeps all N persistent messages too. */
    after_restart_at(__FILE__, __LINE__, mark, &d, N - ACKED + N, ACKED + 1,
                     N + 1, ACKED + UNACKED + 1, true);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- 2. restart after SIGKILL ---- */

START_TEST(kill9_restart)
{
    enum { N = 1000, ACKED = 300, PREFETCH = 300 };
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct defs d;
    struct h_event e;

    SKIP_IF_REMOTE("kills roostd");
    harness_start(H, NULL);
    c = h_connect(H);
    declare_defs(c, &d);
    confirm_select(c, 1);
    for (int id = 1; id <= N; id++)
        PUB(c, 1, &t, d.x, "k", id, 64, 2);
    CONF_WAIT_ALL(c, &t, 20000);

    /* Channel 2 consumes with prefetch 300: acks the first 300 at once
     * (multiple), then takes the next 300 and keeps them. */
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open 2");
    amqp_basic_qos(c, 2, 0, PREFETCH, 0);
    EXPECT_OK(c, "basic.qos");
    CONSUME(c, 2, d.q, "acker", false, NULL);
    for (int id = 1; id <= ACKED + PREFETCH; id++) {
        EXPECT_DELIVERY(c, NULL, &e);
        ck_assert_int_eq(e.channel, 2);
        ck_assert_int_eq(body_id(e.body, e.len), id);
        ck_assert(!e.redelivered);
        if (id == ACKED)
            ck_assert_int_eq(amqp_basic_ack(c, 2, e.tag, 1), 0);
        h_event_free(&e);
    }
    /* One more persistent message: its confirm comes after a sync that
     * holds everything before it, the ack and the deliveries included. */
    PUB(c, 1, &t, d.x, "k", N + 1, 64, 2);
    CONF_WAIT_ALL(c, &t, 5000);

    /* Killed with the connection open: its exclusive queue, its
     * unacked messages and all. */
    KILL9(H);
    h_drop(c);
    size_t mark = log_mark(H);
    after_restart_at(__FILE__, __LINE__, mark, &d, N + 1 - ACKED + N + 1,
                     ACKED + 1, N + 2, ACKED + PREFETCH + 1, false);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/* ---- a queue emptied before a restart ---- */

/*
 * A queue whose messages were all acked comes back empty, while the
 * segment that holds its acks stays (another queue's message lives in
 * it). What it takes after the restart must not be mistaken for what
 * those acks settled.
 */
START_TEST(emptied_queue_restart)
{
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct h_event e;
    struct qmsg *m;
    char q1[64], q2[64], out[256];

    SKIP_IF_REMOTE("restarts roostd");
    harness_start(H, NULL);
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(q1, sizeof(q1), "emptied"), true, false, false,
                  out);
    DECLARE_QUEUE(c, 1, h_name(q2, sizeof(q2), "keeper"), true, false, false,
                  out);
    confirm_select(c, 1);
    for (int id = 1; id <= 10; id++)
        PUB(c, 1, &t, "", q1, id, 64, 2);
    /* Large enough to keep its segment from compaction (over half
     * live). */
    PUB(c, 1, &t, "", q2, 100, 3000, 2);
    CONF_WAIT_ALL(c, &t, 5000);
    for (int id = 1; id <= 10; id++) {
        ck_assert_int_eq(GET(c, 1, q1, false, &e), 1);
        ck_assert_int_eq(body_id(e.body, e.len), id);
        ck_assert_int_eq(amqp_basic_ack(c, 1, e.tag, 0), 0);
        h_event_free(&e);
    }
    h_close(c);
    conf_free(&t);
    harness_stop_keep(H);

    harness_restart(H, NULL);
    c = h_connect(H);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, q1), 0);
    confirm_select(c, 1);
    for (int id = 11; id <= 15; id++)
        PUB(c, 1, &t, "", q1, id, 64, 2);
    CONF_WAIT_ALL(c, &t, 5000);
    h_close(c);
    harness_stop_keep(H);

    harness_restart(H, NULL);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q1, 0, &m);
    EXPECT_IDS(m, n, 11, 16, 0);
    free(m);
    n = READ_QUEUE(c, 1, q2, 0, &m);
    EXPECT_IDS(m, n, 100, 101, 0);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/*
 * A durable queue deleted with messages in it leaves their records in a
 * segment that another queue's message keeps; once the definitions are
 * compacted into a snapshot that no longer names the deleted queue, a
 * queue declared after a restart must not take those records for its
 * own.
 */
START_TEST(deleted_queue_records_stay_dead)
{
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;
    char keep[64], gone[64], churn[64], fresh[64], out[256], defs[512];
    struct stat sb;
    int rounds = 0;

    SKIP_IF_REMOTE("restarts roostd");
    harness_start(H, NULL);
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(keep, sizeof(keep), "keep"), true, false,
                  false, out);
    DECLARE_QUEUE(c, 1, h_name(gone, sizeof(gone), "gone"), true, false,
                  false, out);
    confirm_select(c, 1);
    for (int id = 1; id <= 10; id++)
        PUB(c, 1, &t, "", gone, id, 64, 2);
    PUB(c, 1, &t, "", keep, 100, 3000, 2);
    CONF_WAIT_ALL(c, &t, 5000);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(gone), 0, 0);
    EXPECT_OK(c, "queue.delete");
    /* Churn until a snapshot of the definitions is the last thing
     * written: defs.log then holds its header alone. */
    data_path(defs, sizeof(defs), H, "defs.log");
    h_name(churn, sizeof(churn), "churn");
    do {
        ck_assert_msg(++rounds <= 3000, "no snapshot of the definitions");
        DECLARE_QUEUE(c, 1, churn, true, false, false, out);
        amqp_queue_delete(c, 1, amqp_cstring_bytes(churn), 0, 0);
        EXPECT_OK(c, "queue.delete");
        ck_assert(stat(defs, &sb) == 0);
    } while (sb.st_size > 64);
    h_close(c);
    conf_free(&t);
    harness_stop_keep(H);

    harness_restart(H, NULL);
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(fresh, sizeof(fresh), "fresh"), true, false,
                  false, out);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, fresh), 0);
    h_close(c);
    harness_stop_keep(H);

    harness_restart(H, NULL);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, fresh, 0, &m);
    ck_assert_msg(n == 0, "a new queue holds %d messages of a queue deleted "
                  "before it was declared (the first id %d)", n, m[0].id);
    free(m);
    n = READ_QUEUE(c, 1, keep, 0, &m);
    EXPECT_IDS(m, n, 100, 101, 0);
    free(m);
    h_close(c);
    harness_stop(H);
}
END_TEST

/* ---- 3. crash loop ---- */

/*
 * The state of the ids across rounds. Per id: published or confirmed in
 * this round (the producer thread writes these), acked in this round (the
 * consumer thread), present at the last check (the main thread). Each
 * array has one writer; the main thread reads them after joining.
 */
enum { CL_MAX_IDS = 1 << 25, CL_WINDOW = 200, CL_PREFETCH = 20 };

struct cl {
    const char *q;
    uint8_t *pub, *conf, *acked, *present;
    int next_id; /* the next id to publish */
    /* this round */
    amqp_connection_state_t pc, cc;
    int first_id; /* the id of tag 1 on pc */
    atomic_bool stop;
    char perr[256], cerr[256];
    int published, confirmed, delivered, acks, redelivered_seen;
    const char *name;
    int lag_us;     /* the consumer waits this long after each delivery */
    int max_backlog;    /* the producer keeps the queue below it (0: no) */
    int in_queue;       /* at the last check */
    /* acked ones back with redelivered=false, over all rounds */
    int unmarked;
    char unmarked_first[64];
    uint8_t mode;       /* the messages' delivery mode */
    /* with x-requeue-delay 'retry_ms': the consumer nacks every fourth
     * id the first time it sees it (noted in 'nacked', over all rounds),
     * so that some wait out their delay when the kill comes */
    int retry_ms;
    uint8_t *nacked;
    int nacks;
};

/* Wait up to 'ms' for a frame; 1, 0 on timeout, -1 when gone. */
static int
raw_frame(amqp_connection_state_t c, amqp_frame_t *f, int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    amqp_maybe_release_buffers(c);
    int st = amqp_simple_wait_frame_noblock(c, f, &tv);
    if (st == AMQP_STATUS_TIMEOUT)
        return 0;
    return st == AMQP_STATUS_OK ? 1 : -1;
}

/* Publishes increasing ids with at most CL_WINDOW unconfirmed, until
 * the connection goes (roostd killed) or it is told to stop. */
static void *
cl_producer(void *arg)
{
    struct cl *s = arg;
    amqp_basic_properties_t p = mode_props(s->mode);
    char body[BODY_MAX];
    uint64_t floor = 0;
    uint8_t *tagacked = calloc(CL_MAX_IDS + 1, 1);

    if (tagacked == NULL)
        return NULL;
    while (!atomic_load(&s->stop)) {
        while (s->published - s->confirmed < CL_WINDOW &&
               s->next_id < CL_MAX_IDS && !atomic_load(&s->stop) &&
               (s->max_backlog == 0 ||
                s->in_queue + s->published - s->acks < s->max_backlog)) {
            int id = s->next_id;
            size_t len = make_body(body, id, 40 + (size_t)(id % 200));
            s->pub[id] = 1;
            s->next_id++;
            s->published++;
            if (amqp_basic_publish(s->pc, 1, amqp_cstring_bytes(""),
                                   amqp_cstring_bytes(s->q), 0, 0, &p,
                                   (amqp_bytes_t){ len, body }) != 0)
                goto out;
        }
        amqp_frame_t f;
        int r = raw_frame(s->pc, &f, 20);
        if (r < 0)
            break;
        if (r == 0)
            continue;
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
            amqp_basic_ack_t *a = f.payload.method.decoded;
            uint64_t tag = a->delivery_tag;
            if (tag < 1 || tag > (uint64_t)s->published) {
                snprintf(s->perr, sizeof(s->perr),
                         "ack of tag %" PRIu64 ", %d published", tag,
                         s->published);
                break;
            }
            uint64_t lo = a->multiple ? floor + 1 : tag;
            if (!a->multiple && tagacked[tag]) {
                snprintf(s->perr, sizeof(s->perr),
                         "tag %" PRIu64 " acked twice", tag);
                break;
            }
            for (uint64_t k = lo; k <= tag; k++)
                if (!tagacked[k]) {
                    tagacked[k] = 1;
                    s->conf[s->first_id + (int)k - 1] = 1;
                    s->confirmed++;
                }
            while (tagacked[floor + 1])
                floor++;
        } else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
            amqp_basic_nack_t *a = f.payload.method.decoded;
            snprintf(s->perr, sizeof(s->perr),
                     "nack of tag %" PRIu64 " (id %d)", a->delivery_tag,
                     s->first_id + (int)a->delivery_tag - 1);
            break;
        } else if (f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD ||
                   f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
            snprintf(s->perr, sizeof(s->perr), "the producer got %s",
                     h_method_name(f.payload.method.id));
            break;
        }
    }
out:
    free(tagacked);
    return NULL;
}

/* Acks every delivery at once (prefetch CL_PREFETCH), noting the id as
 * acked before the ack goes out, until the connection goes. */
static void *
cl_consumer(void *arg)
{
    struct cl *s = arg;
    int last = 0;

    while (!atomic_load(&s->stop)) {
        amqp_frame_t f;
        int r = raw_frame(s->cc, &f, 20);
        if (r < 0)
            break;
        if (r == 0)
            continue;
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        if (f.payload.method.id != AMQP_BASIC_DELIVER_METHOD) {
            if (f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD ||
                f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
                snprintf(s->cerr, sizeof(s->cerr), "the consumer got %s",
                         h_method_name(f.payload.method.id));
                break;
            }
            continue;
        }
        amqp_basic_deliver_t *d = f.payload.method.decoded;
        uint64_t tag = d->delivery_tag;
        bool redelivered = d->redelivered;
        amqp_message_t msg;
        amqp_rpc_reply_t rr = amqp_read_message(s->cc, 1, &msg, 0);
        if (rr.reply_type != AMQP_RESPONSE_NORMAL)
            break;
        int id = body_id(msg.body.bytes, msg.body.len);
        amqp_destroy_message(&msg);
        s->delivered++;
        if (s->lag_us)
            usleep((useconds_t)s->lag_us);
        if (id <= 0 || id >= CL_MAX_IDS) {
            snprintf(s->cerr, sizeof(s->cerr), "a delivery without an id");
            break;
        }
        /* One consumer, no requeues: ids come in increasing order. */
        if (id <= last && !s->retry_ms) {
            snprintf(s->cerr, sizeof(s->cerr),
                     "id %d delivered after id %d", id, last);
            break;
        }
        last = id;
        /* Left over from before the restart: delivered at the check, so
         * now redelivered. */
        if (s->present[id] && !redelivered) {
            snprintf(s->cerr, sizeof(s->cerr),
                     "id %d, delivered and requeued at the check, came "
                     "with redelivered=false", id);
            break;
        }
        if (redelivered)
            s->redelivered_seen++;
        if (s->retry_ms && id % 4 == 0 && !s->nacked[id]) {
            s->nacked[id] = 1;
            s->nacks++;
            if (amqp_basic_nack(s->cc, 1, tag, 0, 1) != 0)
                break;
            continue;
        }
        s->acked[id] = 1;
        s->acks++;
        if (amqp_basic_ack(s->cc, 1, tag, 0) != 0)
            break;
    }
    return NULL;
}

/* Violations of one check, the first few spelled out. */
struct viol {
    int n;
    char text[1024];
};

static void
violation(struct viol *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
violation(struct viol *v, const char *fmt, ...)
{
    size_t used = strlen(v->text);
    if (v->n++ < 6 && used < sizeof(v->text) - 2) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->text + used, sizeof(v->text) - used, fmt, ap);
        va_end(ap);
        used = strlen(v->text);
        snprintf(v->text + used, sizeof(v->text) - used, "; ");
    }
}

/*
 * After a restart: read what the queue holds (and leave it there: the
 * connection closes, so it is requeued, redelivered) and check it against
 * what the last round did.
 */
static void
cl_check(struct cl *s, int round, uint64_t the_seed)
{
    amqp_connection_state_t c = h_connect(H);
    struct qmsg *m;
    int n = READ_QUEUE(c, 1, s->q, 0, &m);
    uint8_t *now = calloc(CL_MAX_IDS, 1);
    struct viol v = { 0 };
    int prev = 0, comeback = 0;

    ck_assert(now != NULL);
    for (int i = 0; i < n; i++) {
        int id = m[i].id;
        if (id <= 0 || id >= s->next_id) {
            violation(&v, "an id never published (%d)", id);
            continue;
        }
        if (id <= prev)
            violation(&v, "id %d after id %d (%s)", id, prev,
                      id == prev ? "twice" : "out of order");
        prev = id;
        now[id] = 1;
        if (!s->present[id] && !s->pub[id])
            violation(&v, "id %d came back, settled for good before", id);
        if (s->acked[id]) {
            comeback++;
            if (!m[i].redelivered && s->unmarked++ == 0)
                snprintf(s->unmarked_first, sizeof(s->unmarked_first),
                         "round %d: id %d", round, id);
        }
    }
    int lost = 0;
    for (int id = 1; id < s->next_id; id++)
        if ((s->present[id] || s->conf[id]) && !s->acked[id] && !now[id]) {
            if (lost++ == 0)
                violation(&v, "id %d lost (%s, not acked)", id,
                          s->present[id] ? "present at the last check"
                                         : "confirmed");
        }
    if (lost > 1)
        violation(&v, "%d ids lost in all", lost);
    fprintf(stderr, "%s: round %d: %d published, %d confirmed, %d "
            "delivered (%d redelivered), %d acks, %d nacks; after the kill "
            "%d in the queue, %d acked ones back (%d unmarked so far)\n",
            s->name, round, s->published, s->confirmed, s->delivered,
            s->redelivered_seen, s->acks, s->nacks, n, comeback, s->unmarked);
    ck_assert_msg(v.n == 0, "%s round %d (seed %" PRIu64 "): %d "
                  "violations: %s", s->name, round, the_seed, v.n, v.text);
    memcpy(s->present, now, CL_MAX_IDS);
    s->in_queue = n;
    free(now);
    free(m);
    h_close(c);
}

/* 'quorum': the queue is a quorum queue and the messages transient,
 * which such a queue keeps all the same; 'retry_ms' > 0: it has that
 * x-requeue-delay, and the consumer nacks some (struct cl). */
static void
crash_loop_with(const char *name, const char *const *args, uint64_t dflt_seed,
                int lag_us, int max_backlog, bool quorum, int retry_ms)
{
    enum { MIN_ROUNDS = 20, MAX_ROUNDS = 30, BUDGET_MS = 40000 };
    struct cl s;
    char q[64], out[256];
    uint64_t the_seed, t0 = h_now_ms();
    int round;

    the_seed = seed(name, dflt_seed);
    memset(&s, 0, sizeof(s));
    s.name = name;
    s.lag_us = lag_us;
    s.max_backlog = max_backlog;
    s.mode = quorum ? 1 : 2;
    s.q = h_name(q, sizeof(q), "crash");
    s.pub = calloc(CL_MAX_IDS, 1);
    s.conf = calloc(CL_MAX_IDS, 1);
    s.acked = calloc(CL_MAX_IDS, 1);
    s.present = calloc(CL_MAX_IDS, 1);
    s.nacked = calloc(CL_MAX_IDS, 1);
    s.retry_ms = retry_ms;
    ck_assert(s.pub && s.conf && s.acked && s.present && s.nacked);
    s.next_id = 1;

    harness_start(H, args);
    amqp_connection_state_t c = h_connect(H);
    /* The delay does not grow (each check's reading counts as a
     * delivery): every wait is over retry_ms after the kill. */
    amqp_table_entry_t qa[2] = {
        h_entry_int("x-requeue-delay", retry_ms),
        h_entry_int("x-requeue-delay-max", retry_ms),
    };
    amqp_table_entry_t qt = h_entry_str("x-queue-type", "quorum");
    h_declare_queue_at(__FILE__, __LINE__, c, 1, q, true, false, false,
                       quorum     ? h_table(&qt, 1)
                       : retry_ms ? h_table(qa, 2)
                                  : amqp_empty_table,
                       out, NULL, NULL);
    h_close(c);

    /* ROOST_CRASH_ROUNDS=N: exactly N rounds (scripts/crash-soak.sh). */
    int min_rounds = MIN_ROUNDS, max_rounds = MAX_ROUNDS;
    uint64_t budget = BUDGET_MS;
    const char *want = getenv("ROOST_CRASH_ROUNDS");
    if (want && atoi(want) > 0) {
        min_rounds = max_rounds = atoi(want);
        budget = UINT64_MAX;
    }
    for (round = 1; round <= max_rounds; round++) {
        if (round > min_rounds && h_now_ms() - t0 > budget)
            break;
        if (round > 1) {
            harness_restart(H, args);
            /* Those still waiting after the restart are back by then. */
            if (retry_ms)
                h_sleep_ms((unsigned)retry_ms + 200);
            cl_check(&s, round - 1, the_seed);
            memset(s.pub, 0, CL_MAX_IDS);
            memset(s.conf, 0, CL_MAX_IDS);
            memset(s.acked, 0, CL_MAX_IDS);
        }
        s.published = s.confirmed = s.delivered = s.acks = s.nacks = 0;
        s.redelivered_seen = 0;
        s.perr[0] = s.cerr[0] = '\0';
        s.first_id = s.next_id;
        atomic_store(&s.stop, false);

        s.pc = h_connect(H);
        confirm_select(s.pc, 1);
        s.cc = h_connect(H);
        amqp_basic_qos(s.cc, 1, 0, CL_PREFETCH, 0);
        EXPECT_OK(s.cc, "basic.qos");
        CONSUME(s.cc, 1, q, "crash-consumer", false, NULL);

        pthread_t pt, ct;
        ck_assert_int_eq(pthread_create(&ct, NULL, cl_consumer, &s), 0);
        ck_assert_int_eq(pthread_create(&pt, NULL, cl_producer, &s), 0);
        /* The moment of the crash is what this test is about. */
        h_sleep_ms((unsigned)rnd_in(50, 400));
        KILL9(H);
        atomic_store(&s.stop, true);
        pthread_join(pt, NULL);
        pthread_join(ct, NULL);
        h_drop(s.pc);
        h_drop(s.cc);
        ck_assert_msg(s.perr[0] == '\0', "round %d: %s", round, s.perr);
        ck_assert_msg(s.cerr[0] == '\0', "round %d: %s", round, s.cerr);
        ck_assert_msg(s.next_id < CL_MAX_IDS, "ran out of ids");
    }
    /* The last round's check, and a clean stop after all that. */
    harness_restart(H, args);
    if (retry_ms)
        h_sleep_ms((unsigned)retry_ms + 200);
    cl_check(&s, round - 1, the_seed);
    fprintf(stderr, "%s: %d rounds, %d ids, %" PRIu64 " ms\n", name,
            round - 1, s.next_id - 1, h_now_ms() - t0);
    /* Checked last, so that one kind of failure does not hide the
     * others: a message the consumer had (it acked it) must not come
     * back as never delivered. */
    ck_assert_msg(s.unmarked == 0, "%s (seed %" PRIu64 "): %d "
                  "messages acked before a kill came back with "
                  "redelivered=false, the first in %s", name, the_seed,
                  s.unmarked, s.unmarked_first);
    free(s.pub);
    free(s.conf);
    free(s.acked);
    free(s.present);
    free(s.nacked);
    harness_stop(H);
}

START_TEST(crash_loop)
{
    SKIP_IF_REMOTE("kills roostd");
    crash_loop_with("crash_loop", ARGS("--set", "store.segment_size=65536"),
                    20261201, 0, 0, false, 0);
}
END_TEST

/* The same on a quorum queue with transient messages: it keeps every
 * message, so nothing confirmed may be lost either. */
START_TEST(crash_loop_quorum)
{
    SKIP_IF_REMOTE("kills roostd");
    crash_loop_with("crash_loop_quorum",
                    ARGS("--set", "store.segment_size=65536"), 20261203, 0, 0,
                    true, 0);
}
END_TEST

/* The same with a window of 16 and a consumer slower than the
 * producer, which keeps the queue at about 4,000: nearly every message
 * is paged out and read back, and (in 64 KiB segments) compacted while
 * it is paged. */
START_TEST(crash_loop_paged)
{
    SKIP_IF_REMOTE("kills roostd");
    crash_loop_with("crash_loop_paged",
                    ARGS("--set", "store.segment_size=65536", "--set",
                         "paging.window=16"), 20261202, 200, 4000, false, 0);
}
END_TEST

/* The same with x-requeue-delay 300 and every fourth id nacked once: a
 * message waiting out its delay when the kill comes must come back
 * (the journal keeps its due time; compaction, in 64 KiB segments,
 * copies it forward with the entry). */
START_TEST(crash_loop_retry)
{
    SKIP_IF_REMOTE("kills roostd");
    crash_loop_with("crash_loop_retry",
                    ARGS("--set", "store.segment_size=65536"), 20261204, 0, 0,
                    false, 300);
}
END_TEST

/* ---- 3b. delayed messages (x-delayed-message, broker/core/delayed.h) ---- */

enum { DL_MAX_IDS = 100000, DL_ROUND_MAX = 800, DL_DELAY_MAX = 600 };

/* What the delayed crash loop published, confirmed and saw delivered. */
struct dl {
    const char *q, *x;
    uint64_t *sent;     /* per id: when its publish began (h_now_ms) */
    uint32_t *delay;    /* its x-delay */
    uint8_t *conf;      /* confirmed */
    int next_id;
    uint64_t last_due;  /* the latest sent + delay */
    amqp_connection_state_t cc;
    atomic_bool stop;
    int early, strange;
    char cerr[512];
    unsigned long long held_recovered;
};

/* Publish delayed message 'id' (persistent, its delay at random up to
 * 'max_delay' ms) to the test's exchange, noting it in 't' and 's'. */
static void
dl_publish(struct dl *s, amqp_connection_state_t c, struct confirms *t,
           int id, uint32_t min_delay, uint32_t max_delay, uint64_t window)
{
    amqp_basic_properties_t p = mode_props(2);
    amqp_table_entry_t h = h_entry_int("x-delay", 0);
    uint32_t delay = (uint32_t)rnd_in(min_delay, max_delay);

    h.value.value.i32 = (int32_t)delay;
    p._flags |= AMQP_BASIC_HEADERS_FLAG;
    p.headers = h_table(&h, 1);
    s->delay[id] = delay;
    uint64_t now = h_now_ms();
    __atomic_store_n(&s->sent[id], now, __ATOMIC_RELEASE);
    if (now + delay > s->last_due)
        s->last_due = now + delay;
    pub_at(__FILE__, __LINE__, c, 1, t, s->x, "k", id, 64 + id % 200, &p,
           window, 5000);
}

/* The consumer of a round: notes each delivery (it never acks, so the
 * queue keeps everything for the checks) and whether it came early. */
static void *
dl_consumer(void *arg)
{
    struct dl *s = arg;

    while (!atomic_load(&s->stop)) {
        amqp_envelope_t env;
        struct timeval tv = { 0, 100000 };
        amqp_maybe_release_buffers(s->cc);
        amqp_rpc_reply_t r = amqp_consume_message(s->cc, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_TIMEOUT)
            continue;
        if (r.reply_type != AMQP_RESPONSE_NORMAL)
            break;      /* the kill */
        uint64_t now = h_now_ms();
        int id = body_id(env.message.body.bytes, env.message.body.len);
        uint64_t sent = id > 0 && id < DL_MAX_IDS
                            ? __atomic_load_n(&s->sent[id], __ATOMIC_ACQUIRE)
                            : 0;
        if (sent == 0) {
            if (s->strange++ == 0)
                snprintf(s->cerr, sizeof(s->cerr), "a delivery of id %d, "
                         "never published", id);
        } else if (now < sent + s->delay[id]) {
            if (s->early++ == 0)
                snprintf(s->cerr, sizeof(s->cerr), "id %d delivered %" PRIu64
                         " ms after its publish began, before its x-delay "
                         "of %u ms", id, now - sent, s->delay[id]);
        }
        amqp_destroy_envelope(&env);
    }
    return NULL;
}

/* The number in the last "store: recovered N delayed messages". */
static unsigned long long
dl_recovered(const struct harness *h, size_t from)
{
    FILE *f = fopen(h->log_path, "r");
    char line[1024];
    unsigned long long n = 0, v;

    if (f == NULL)
        return 0;
    if (fseek(f, (long)from, SEEK_SET) == 0)
        while (fgets(line, sizeof(line), f)) {
            const char *p = strstr(line, "store: recovered ");
            if (p && sscanf(p, "store: recovered %llu delayed", &v) == 1 &&
                strstr(p, " delayed messages"))
                n = v;
        }
    fclose(f);
    return n;
}

/*
 * Once everything published is due (and so routed): the queue holds
 * every confirmed id exactly once, and nothing never published. (One
 * published but not confirmed may be there or not.)
 */
static void
dl_check(struct dl *s, const char *name, int round, uint64_t the_seed)
{
    while (h_now_ms() < s->last_due + 300)
        h_sleep_ms(50);
    amqp_connection_state_t c = h_connect(H);
    struct qmsg *m;
    int n = READ_QUEUE(c, 1, s->q, 0, &m);
    uint8_t *seen = calloc(DL_MAX_IDS, 1);
    int twice = 0, unknown = 0, lost = 0, first_lost = 0, confirmed = 0;

    ck_assert(seen != NULL);
    for (int i = 0; i < n; i++) {
        int id = m[i].id;
        if (id <= 0 || id >= s->next_id)
            unknown++;
        else if (seen[id]++)
            twice++;
    }
    for (int id = 1; id < s->next_id; id++) {
        confirmed += s->conf[id];
        if (s->conf[id] && !seen[id] && lost++ == 0)
            first_lost = id;
    }
    fprintf(stderr, "%s: round %d: %d ids published, %d confirmed, %d in "
            "the queue; %llu held ones recovered\n", name, round,
            s->next_id - 1, confirmed, n, s->held_recovered);
    ck_assert_msg(lost == 0 && twice == 0 && unknown == 0, "%s round %d "
                  "(seed %" PRIu64 "): %d confirmed ids lost (the first "
                  "%d), %d ids twice, %d never published", name, round,
                  the_seed, lost, first_lost, twice, unknown);
    free(seen);
    free(m);
    h_close(c);
}

/* A durable x-delayed-message exchange (direct) and a durable queue
 * bound to it with key "k". */
static void
dl_declare(struct dl *s, char *x, char *q)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_table_entry_t a = h_entry_str("x-delayed-type", "direct");
    char out[256];

    s->x = h_name(x, 64, "dlx");
    s->q = h_name(q, 64, "dlq");
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, x, "x-delayed-message",
                          true, false, false, h_table(&a, 1));
    DECLARE_QUEUE(c, 1, q, true, false, false, out);
    BIND(c, 1, q, x, "k");
    h_close(c);
}

static void
dl_init(struct dl *s)
{
    memset(s, 0, sizeof(*s));
    s->sent = calloc(DL_MAX_IDS, sizeof(*s->sent));
    s->delay = calloc(DL_MAX_IDS, sizeof(*s->delay));
    s->conf = calloc(DL_MAX_IDS, 1);
    ck_assert(s->sent && s->delay && s->conf);
    s->next_id = 1;
}

static void
dl_free(struct dl *s)
{
    free(s->sent);
    free(s->delay);
    free(s->conf);
}

/* Every tag acked in 't' confirms its id ('first' is the round's first). */
static void
dl_confirmed(struct dl *s, const struct confirms *t, int first)
{
    ck_assert_uint_eq(t->nacks, 0);
    for (uint64_t tag = 1; tag <= t->n; tag++)
        if (t->st[tag] == 1)
            s->conf[first + (int)tag - 1] = 1;
}

/*
 * Rounds of a producer of persistent delayed messages (x-delay up to
 * 600 ms) with confirms, and a consumer, against a roostd killed at a
 * random moment: many messages are held at the kill, others are being
 * routed. After each restart: every confirmed id is in the queue exactly
 * once once it is due (its routing and the end of its held entry are one
 * transaction), and no delivery ever came before its delay.
 */
START_TEST(crash_loop_delayed)
{
    enum { ROUNDS = 20 };
    const char *const *args = ARGS("--set", "store.segment_size=65536");
    const char *name = "crash_loop_delayed";
    struct dl s;
    char x[64], q[64];
    uint64_t t0 = h_now_ms();

    SKIP_IF_REMOTE("kills roostd");
    uint64_t the_seed = seed(name, 20261204);
    dl_init(&s);
    harness_start(H, args);
    dl_declare(&s, x, q);
    int rounds = ROUNDS;
    const char *want = getenv("ROOST_CRASH_ROUNDS");
    if (want && atoi(want) > 0)
        rounds = atoi(want);
    for (int round = 1; round <= rounds; round++) {
        if (round > 1) {
            size_t mark = log_mark(H);
            harness_restart(H, args);
            s.held_recovered += dl_recovered(H, mark);
            dl_check(&s, name, round - 1, the_seed);
        }
        struct confirms t = { 0 };
        int first = s.next_id;
        amqp_connection_state_t pc = h_connect(H);
        confirm_select(pc, 1);
        s.cc = h_connect(H);
        CONSUME(s.cc, 1, q, "dl-consumer", false, NULL);
        atomic_store(&s.stop, false);
        pthread_t ct;
        ck_assert_int_eq(pthread_create(&ct, NULL, dl_consumer, &s), 0);
        /* The moment of the crash is what this test is about. */
        uint64_t kill_at = h_now_ms() + rnd_in(50, 400);
        while (h_now_ms() < kill_at) {
            if (s.next_id - first < DL_ROUND_MAX && s.next_id < DL_MAX_IDS)
                dl_publish(&s, pc, &t, s.next_id++, 1, DL_DELAY_MAX, 64);
            else
                (void)CONF_PUMP(pc, &t, 10);
        }
        KILL9(H);
        atomic_store(&s.stop, true);
        pthread_join(ct, NULL);
        h_drop(pc);
        h_drop(s.cc);
        dl_confirmed(&s, &t, first);
        conf_free(&t);
        ck_assert_msg(s.early == 0 && s.strange == 0, "round %d: %s", round,
                      s.cerr);
    }
    size_t mark = log_mark(H);
    harness_restart(H, args);
    s.held_recovered += dl_recovered(H, mark);
    dl_check(&s, name, rounds, the_seed);
    fprintf(stderr, "%s: %d rounds, %d ids, %llu held ones recovered, %"
            PRIu64 " ms\n", name, rounds, s.next_id - 1, s.held_recovered,
            h_now_ms() - t0);
    ck_assert_msg(s.held_recovered > 0, "no round recovered a held message");
    dl_free(&s);
    harness_stop(H);
}
END_TEST

/* ---- 4. power cut ---- */

/* The largest synced length of segment 'name' in the sync log. */
static uint64_t
synced_len(const char *sync_log, const char *name)
{
    FILE *fp = fopen(sync_log, "r");
    char file[256];
    unsigned long long len;
    uint64_t best = 0;

    if (fp == NULL)
        return 0;
    while (fscanf(fp, "%255s %llu", file, &len) == 2)
        if (strcmp(file, name) == 0 && len > best)
            best = len;
    fclose(fp);
    return best;
}

static int
cmp_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Start roostd with 'args', its syncs logged to the file named for 'tag'
 * (into 'sync_log') and each slowed by 'delay_us'. */
static void
start_sync_logged(char *sync_log, size_t len, const char *tag,
                  const char *delay_us, const char *const *args)
{
    hook_path(sync_log, len, tag);
    unlink(sync_log);
    setenv("ROOST_TEST_SYNC_LOG", sync_log, 1);
    setenv("ROOST_TEST_SYNC_DELAY_US", delay_us, 1);
    harness_start(H, args);
    unsetenv("ROOST_TEST_SYNC_LOG");
    unsetenv("ROOST_TEST_SYNC_DELAY_US");
}

START_TEST(large_batch_split)
{
    /* A batch far larger than one job may write goes out in several
     * writes and syncs, each at most that much plus one message; every
     * confirm comes, and everything is there after a crash. The syncs are
     * slowed so that a big batch gathers behind each one, and the limit is
     * lowered from 16 MiB to 1 MiB (ROOST_TEST_JOB_MAX_BYTES) so that
     * how fast this machine publishes does not decide whether it does. */
    enum { N = 30000, SIZE = 400, JOB_MAX = 1024 * 1024,
           MAX_WRITE = JOB_MAX + 4096 };
    char sync_log[256], q[64], out[256], line[512], job_max[16];
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;

    SKIP_IF_REMOTE("needs roostd's test hooks");
    snprintf(job_max, sizeof(job_max), "%d", JOB_MAX);
    setenv("ROOST_TEST_JOB_MAX_BYTES", job_max, 1);
    start_sync_logged(sync_log, sizeof(sync_log), "sync-log-split", "300000",
                      NULL);
    unsetenv("ROOST_TEST_JOB_MAX_BYTES");
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "split"), true, false, false, out);
    confirm_select(c, 1);
    for (int id = 1; id <= N; id++)
        pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", q, id, SIZE, 2, 0,
                    5000);
    CONF_WAIT_ALL(c, &t, 60000);

    /* Each sync of the journal covered at most one job's write. */
    FILE *f = fopen(sync_log, "r");
    ck_assert(f != NULL);
    char prev_name[64] = "";
    unsigned long long prev = 0, len, biggest = 0;
    int writes = 0;
    char name[64];
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "%63s %llu", name, &len) == 2 &&
            strstr(name, ".seg") != NULL) {
            unsigned long long step =
                strcmp(name, prev_name) == 0 ? len - prev : len;
            if (step > biggest)
                biggest = step;
            writes++;
            snprintf(prev_name, sizeof(prev_name), "%s", name);
            prev = len;
        }
    fclose(f);
    fprintf(stderr, "large_batch_split: %d journal syncs, largest write "
            "%llu bytes\n", writes, biggest);
    ck_assert_msg(biggest <= MAX_WRITE, "a write of %llu bytes", biggest);
    ck_assert_msg(biggest >= JOB_MAX,
                  "no batch was large enough to split (largest %llu)",
                  biggest);

    KILL9(H);
    h_drop(c);
    harness_restart(H, NULL);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, 0, &m);
    EXPECT_IDS_AFTER_CRASH(m, n, 1, N + 1, 1);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/*
 * A power cut: each journal segment loses what came after its last sync
 * (per 'sync_log'), from a random point on: zeros, or garbage (as a
 * write the cut tore; the last segment always gets some if none did).
 * 'test' names the test in what is printed. Returns how many segments
 * got garbage.
 */
static int
cut_unsynced_in(const char *test, const char *sync_log, const char *sub,
                int min_segs)
{
    char dir[512], path[1024], logged[512];

    data_path(dir, sizeof(dir), H, sub);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s: %s", dir, strerror(errno));
    struct dirent *de;
    char names[64][256];
    int nseg = 0, garbage = 0;
    while ((de = readdir(d)) != NULL && nseg < 64)
        if (strstr(de->d_name, ".seg") != NULL)
            snprintf(names[nseg++], sizeof(names[0]), "%s", de->d_name);
    closedir(d);
    qsort(names, (size_t)nseg, sizeof(names[0]), cmp_name);
    ck_assert_msg(nseg >= min_segs, "%d segments in %s; expected at least %d "
                  "of 64 KiB", nseg, sub, min_segs);
    for (int i = 0; i < nseg; i++) {
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%.255s", dir, names[i]);
        int fd = open(path, O_WRONLY);
        ck_assert_msg(fd >= 0 && fstat(fd, &sb) == 0, "%s: %s", path,
                      strerror(errno));
        uint64_t size = (uint64_t)sb.st_size;
        /* The sync log names a stream's segments under their log. */
        if (strcmp(sub, "msgs") == 0)
            snprintf(logged, sizeof(logged), "%s", names[i]);
        else
            snprintf(logged, sizeof(logged), "%s/%s", sub, names[i]);
        uint64_t synced = synced_len(sync_log, logged);
        ck_assert_msg(synced <= size, "%s: synced %" PRIu64 " bytes, but "
                      "holds %" PRIu64, names[i], synced, size);
        uint64_t cut = rnd_in(synced, size);
        bool junk = rnd() % 2 || (i == nseg - 1 && garbage == 0);
        uint64_t end = junk && size - cut < 64 ? cut + 64 : size;
        char buf[4096];
        for (uint64_t off = cut; off < end;) {
            size_t k = end - off < sizeof(buf) ? (size_t)(end - off)
                                               : sizeof(buf);
            for (size_t j = 0; j < k; j++)
                buf[j] = junk ? (char)(rnd() | 1) : 0;
            ck_assert(pwrite(fd, buf, k, (off_t)off) == (ssize_t)k);
            off += k;
        }
        fprintf(stderr, "%s: %s: %" PRIu64 " bytes, synced %" PRIu64
                ", %s from %" PRIu64 " to %" PRIu64 "\n", test, names[i],
                size, synced, junk ? "garbage" : "zeros", cut, end);
        garbage += junk;
        close(fd);
    }
    return garbage;
}

static int
cut_unsynced(const char *test, const char *sync_log)
{
    return cut_unsynced_in(test, sync_log, "msgs", 2);
}

/* The same for the own log of the one stream in the data directory
 * (streams/<queue id>). */
static int
cut_unsynced_stream(const char *test, const char *sync_log, int min_segs)
{
    char dir[512], sub[600] = "";
    data_path(dir, sizeof(dir), H, "streams");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            snprintf(sub, sizeof(sub), "streams/%.255s", de->d_name);
    closedir(d);
    if (sub[0] == '\0' && min_segs == 0)
        return 0;       /* nothing of it written yet */
    ck_assert_msg(sub[0] != '\0', "no stream log in %s", dir);
    return cut_unsynced_in(test, sync_log, sub, min_segs);
}

/* power_cut, into a durable queue with persistent messages or into a
 * stream with transient ones (a stream keeps and syncs them too). */
static void
power_cut_run(const char *test, bool stream)
{
    enum { CONFIRMED = 1500 };
    const char *const *args = ARGS("--set", "store.segment_size=65536");
    char sync_log[256], q[64], out[256];
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;
    /* Its own segments as small as the journal's here (the floor). */
    amqp_table_entry_t st[2] = {
        h_entry_str("x-queue-type", "stream"),
        h_entry_int("x-stream-max-segment-size-bytes", 65536),
    };

    seed(test, stream ? 525252 : 424242);
    /* Written but not yet synced, often, when the kill comes. */
    start_sync_logged(sync_log, sizeof(sync_log), "sync-log", "3000", args);
    c = h_connect(H);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, h_name(q, sizeof(q), "cut"),
                       true, false, false,
                       stream ? h_table(st, 2) : amqp_empty_table, out,
                       NULL, NULL);
    confirm_select(c, 1);
    /* Killed while publishing, with writes in flight. */
    for (int id = 1; t.acks < CONFIRMED; id++)
        pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", q, id,
                    200 + (size_t)rnd_in(0, 400), stream ? 1 : 2, 400, 5000);
    ck_assert_uint_eq(t.nacks, 0);
    KILL9(H);
    h_drop(c);
    int garbage = stream ? cut_unsynced_stream(test, sync_log, 2)
                         : cut_unsynced(test, sync_log);

    size_t mark = log_mark(H);
    harness_restart(H, args);
    if (garbage)
        ck_assert_msg(log_has_since(H, mark, "torn record at offset"),
                      "garbage after the last sync, but no torn record in "
                      "the log");
    c = h_connect(H);
    int n = stream ? READ_STREAM(c, 1, q, 0, &m) : READ_QUEUE(c, 1, q, 0, &m);
    /* Every confirmed one, once, in order; of the others, those that
     * made it. */
    int k = 0, prev = 0;
    for (uint64_t tag = 1; tag <= t.n; tag++) {
        int id = (int)tag;
        bool here = k < n && m[k].id == id;
        ck_assert_msg(here || t.st[tag] == 0,
                      "confirmed id %d lost (found %d at position %d)", id,
                      k < n ? m[k].id : -1, k);
        if (here) {
            ck_assert_msg(m[k].id > prev, "id %d after %d", m[k].id, prev);
            prev = m[k].id;
            k++;
        }
    }
    ck_assert_msg(k == n, "the queue holds %d messages, %d of them published "
                  "(in order): next is id %d", n, k, m[k].id);
    fprintf(stderr, "%s: %" PRIu64 " published, %" PRIu64
            " confirmed, %d recovered\n", test, t.n, t.acks, n);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
    unlink(sync_log);
}

START_TEST(power_cut)
{
    SKIP_IF_REMOTE("kills roostd");
    power_cut_run("power_cut", false);
}
END_TEST

START_TEST(power_cut_stream)
{
    SKIP_IF_REMOTE("kills roostd");
    power_cut_run("power_cut_stream", true);
}
END_TEST

/* A power cut while messages are dead-lettered from a durable queue into
 * a stream: each settle in the journal and each append to the stream's
 * own log go in one job, and whatever of that job the cut leaves, every
 * message is in the queue or in the stream (or both), never in neither:
 * the stream's part is synced first. Syncs are slowed, so that the kill
 * often falls between the two. */
START_TEST(power_cut_dead_letter_stream)
{
    enum { N = 400 };
    const char *const *args = ARGS("--set", "store.segment_size=65536");
    char sync_log[256], q[64], s[64], out[256];
    struct confirms t = { 0 };
    struct qmsg *mq, *ms;
    struct h_event e;

    SKIP_IF_REMOTE("kills roostd");
    seed("power_cut_dead_letter_stream", 616161);
    start_sync_logged(sync_log, sizeof(sync_log), "sync-log-dls", "3000",
                      args);
    amqp_connection_state_t c = h_connect(H), g = h_connect(H);
    h_name(s, sizeof(s), "cuts");
    amqp_table_entry_t sa[2] = {
        h_entry_str("x-queue-type", "stream"),
        h_entry_int("x-stream-max-segment-size-bytes", 65536),
    };
    h_declare_queue_at(__FILE__, __LINE__, c, 1, s, true, false, false,
                       h_table(sa, 2), out, NULL, NULL);
    amqp_table_entry_t qa[2] = {
        h_entry_str("x-dead-letter-exchange", ""),
        h_entry_str("x-dead-letter-routing-key", s),
    };
    h_declare_queue_at(__FILE__, __LINE__, c, 1, h_name(q, sizeof(q), "cutq"),
                       true, false, false, h_table(qa, 2), out, NULL, NULL);
    confirm_select(c, 1);
    for (int id = 1; id <= N; id++)
        pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", q, id, 300, 2, 0, 5000);
    CONF_WAIT_ALL(c, &t, 30000);
    /* Rejected without requeue, each dead-lettered into the stream;
     * killed at a random one, with jobs in flight. */
    int upto = (int)rnd_in(N / 4, N);
    for (int id = 1; id <= upto; id++) {
        ck_assert_int_eq(GET(g, 1, q, false, &e), 1);
        ck_assert_int_eq(amqp_basic_reject(g, 1, e.tag, 0), AMQP_STATUS_OK);
        h_event_free(&e);
    }
    KILL9(H);
    h_drop(c);
    h_drop(g);
    cut_unsynced_in("power_cut_dead_letter_stream", sync_log, "msgs", 2);
    cut_unsynced_stream("power_cut_dead_letter_stream", sync_log, 0);
    harness_restart(H, args);
    c = h_connect(H);
    int nq = READ_QUEUE(c, 1, q, 300, &mq);
    int ns = READ_STREAM(c, 1, s, 300, &ms);
    bool *seen = calloc(N + 1, 1);
    ck_assert_ptr_nonnull(seen);
    for (int k = 0; k < nq; k++)
        if (mq[k].id >= 1 && mq[k].id <= N)
            seen[mq[k].id] = true;
    for (int k = 0; k < ns; k++)
        if (ms[k].id >= 1 && ms[k].id <= N)
            seen[ms[k].id] = true;
    for (int id = 1; id <= N; id++)
        ck_assert_msg(seen[id], "confirmed id %d is neither in the queue "
                      "(%d there) nor in the stream (%d there)", id, nq, ns);
    fprintf(stderr, "power_cut_dead_letter_stream: %d published, %d "
            "rejected before the kill; %d in the queue, %d in the stream\n",
            N, upto, nq, ns);
    free(seen);
    free(mq);
    free(ms);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
    unlink(sync_log);
}
END_TEST

/* The same cut while messages wait out a requeue delay: 300 confirmed,
 * then each taken and nacked (its J_DELIVER record carries its due
 * time) or, every third, acked, and a kill at once. Whatever of those
 * records the cut takes, every message that was not acked is there once
 * its delay is over, in order; an acked one may be back (its ack was
 * cut), marked redelivered. */
START_TEST(power_cut_retry)
{
    enum { N = 300, DELAY = 1500 };
    const char *const *args = ARGS("--set", "store.segment_size=65536");
    char sync_log[256], q[64], out[256];
    struct confirms t = { 0 };
    struct qmsg *m;
    struct h_event e;

    SKIP_IF_REMOTE("kills roostd");
    seed("power_cut_retry", 434343);
    start_sync_logged(sync_log, sizeof(sync_log), "sync-log-retry", "3000",
                      args);
    amqp_connection_state_t c = h_connect(H), g = h_connect(H);
    amqp_table_entry_t a = h_entry_int("x-requeue-delay", DELAY);
    h_declare_queue_at(__FILE__, __LINE__, c, 1, h_name(q, sizeof(q), "cutr"),
                       true, false, false, h_table(&a, 1), out, NULL, NULL);
    confirm_select(c, 1);
    for (int id = 1; id <= N; id++)
        pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", q, id, 300, 2, 0, 5000);
    CONF_WAIT_ALL(c, &t, 30000);
    for (int id = 1; id <= N; id++) {
        ck_assert_int_eq(GET(g, 1, q, false, &e), 1);
        ck_assert_int_eq(body_id(e.body, e.len), id);
        int st = id % 3 == 0 ? amqp_basic_ack(g, 1, e.tag, 0)
                             : amqp_basic_nack(g, 1, e.tag, 0, 1);
        ck_assert_int_eq(st, AMQP_STATUS_OK);
        h_event_free(&e);
    }
    KILL9(H);
    h_drop(c);
    h_drop(g);
    cut_unsynced("power_cut_retry", sync_log);
    harness_restart(H, args);
    h_sleep_ms(DELAY + 300);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, 300, &m), k = 0;
    for (int id = 1; id <= N; id++) {
        bool here = k < n && m[k].id == id;
        ck_assert_msg(here || id % 3 == 0, "id %d, nacked, lost (found %d "
                      "at position %d)", id, k < n ? m[k].id : -1, k);
        if (here) {
            ck_assert_msg(m[k].body_ok && m[k].redelivered, "id %d: %s", id,
                          m[k].body_ok ? "not marked redelivered"
                                       : "not its body");
            k++;
        }
    }
    ck_assert_msg(k == n, "the queue holds %d messages, %d of them in order",
                  n, k);
    fprintf(stderr, "power_cut_retry: %d published and taken, %d back\n", N,
            n);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
    unlink(sync_log);
}
END_TEST

/* The same power cut while persistent delayed messages are held (x-delay
 * 300 .. 1500 ms): every confirmed one is routed after the restart,
 * exactly once. */
START_TEST(power_cut_delayed)
{
    enum { CONFIRMED = 600 };
    const char *const *args = ARGS("--set", "store.segment_size=65536");
    char sync_log[256], x[64], q[64];
    struct confirms t = { 0 };
    struct dl s;

    SKIP_IF_REMOTE("kills roostd");
    uint64_t the_seed = seed("power_cut_delayed", 424243);
    dl_init(&s);
    start_sync_logged(sync_log, sizeof(sync_log), "sync-log-delayed", "3000",
                      args);
    dl_declare(&s, x, q);
    amqp_connection_state_t c = h_connect(H);
    confirm_select(c, 1);
    while (t.acks < CONFIRMED)
        dl_publish(&s, c, &t, s.next_id++, 300, 1500, 400);
    KILL9(H);
    h_drop(c);
    dl_confirmed(&s, &t, 1);
    int garbage = cut_unsynced("power_cut_delayed", sync_log);
    size_t mark = log_mark(H);
    harness_restart(H, args);
    if (garbage)
        ck_assert_msg(log_has_since(H, mark, "torn record at offset"),
                      "garbage after the last sync, but no torn record in "
                      "the log");
    s.held_recovered = dl_recovered(H, mark);
    ck_assert_msg(s.held_recovered > 0, "no held message recovered");
    dl_check(&s, "power_cut_delayed", 1, the_seed);
    conf_free(&t);
    dl_free(&s);
    harness_stop(H);
    unlink(sync_log);
}
END_TEST

/* ---- 5. a corrupt record ---- */

/* The offset of the last record of 'type' in journal segment 'buf'
 * (records: "RSR1", u32 length, type, 3 zero bytes, CRC, payload), or
 * -1. */
static long
last_record_of(const unsigned char *buf, size_t size, unsigned type)
{
    long found = -1;
    size_t off = 0;

    while (off + 16 <= size && memcmp(buf + off, "RSR1", 4) == 0) {
        uint32_t len = (uint32_t)buf[off + 4] | (uint32_t)buf[off + 5] << 8 |
                       (uint32_t)buf[off + 6] << 16 |
                       (uint32_t)buf[off + 7] << 24;
        if (buf[off + 8] == type)
            found = (long)off;
        off += 16 + (size_t)len;
    }
    return found;
}

START_TEST(tx_commit_record)
{
    /* tx.commit-ok for persistent messages comes after their sync (they
     * survive kill -9); and a transaction whose commit record did not
     * reach the disk is ignored as a whole by recovery, the messages
     * before it kept. */
    enum { BEFORE = 10, IN_TX = 25 };
    char q[64], out[256], dir[512], path[1024];
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;

    SKIP_IF_REMOTE("kills roostd and edits its files");
    harness_start(H, NULL);
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "tx"), true, false, false, out);
    confirm_select(c, 1);
    for (int id = 1; id <= BEFORE; id++)
        PUB(c, 1, &t, "", q, id, 200, 2);
    CONF_WAIT_ALL(c, &t, 5000);
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open 2");
    amqp_tx_select(c, 2);
    EXPECT_OK(c, "tx.select");
    struct confirms none = { 0 };
    for (int id = BEFORE + 1; id <= BEFORE + IN_TX; id++)
        pub_mode_at(__FILE__, __LINE__, c, 2, &none, "", q, id, 200, 2, 0,
                    5000);
    amqp_tx_commit(c, 2);
    EXPECT_OK(c, "tx.commit");

    /* Committed: kill -9 keeps them all. */
    KILL9(H);
    h_drop(c);
    harness_restart(H, NULL);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, 0, &m);
    EXPECT_IDS_AFTER_CRASH(m, n, 1, BEFORE + IN_TX + 1, 0);
    free(m);
    h_close(c);
    harness_stop_keep(H);

    /* Now as if the commit record had not reached the disk: cut the
     * segment that holds it just before it. */
    data_path(dir, sizeof(dir), H, "msgs");
    DIR *d = opendir(dir);
    ck_assert(d != NULL);
    struct dirent *de;
    bool cut = false;
    while ((de = readdir(d)) != NULL && !cut) {
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (!strstr(de->d_name, ".seg") || stat(path, &sb) != 0 ||
            sb.st_size == 0)
            continue;
        unsigned char *buf = malloc((size_t)sb.st_size);
        int fd = open(path, O_RDWR);
        ck_assert(buf != NULL && fd >= 0);
        ck_assert(pread(fd, buf, (size_t)sb.st_size, 0) == sb.st_size);
        long at = last_record_of(buf, (size_t)sb.st_size, 7);
        if (at >= 0) {
            ck_assert_int_eq(ftruncate(fd, at), 0);
            cut = true;
        }
        close(fd);
        free(buf);
    }
    closedir(d);
    ck_assert_msg(cut, "no transaction commit record in the journal");
    size_t mark = log_mark(H);
    harness_restart(H, NULL);
    WAIT_LOG(H, mark, "a transaction without its commit record is ignored");
    c = h_connect(H);
    n = READ_QUEUE(c, 1, q, 0, &m);
    EXPECT_IDS_AFTER_CRASH(m, n, 1, BEFORE + 1, 0);
    free(m);
    h_close(c);
    conf_free(&t);
    conf_free(&none);
    harness_stop(H);
}
END_TEST

/* ---- a data directory written by hand ---- */

static void
add_to_file(const char *path, const char *mode, const void *p, size_t n)
{
    FILE *f = fopen(path, mode);
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    ck_assert(fwrite(p, 1, n, f) == n);
    fclose(f);
}

static void
put_file(const char *path, const void *p, size_t n)
{
    add_to_file(path, "wb", p, n);
}

/* A persistent message record (store/store.c's J_MSG) with body 'body'. */
static void
put_msg_record(struct wbuf *b, uint64_t id, const char *body)
{
    uint8_t hdr[15] = { 0, 60, 0, 0 };
    size_t blen = strlen(body);
    for (int k = 0; k < 8; k++)
        hdr[4 + k] = (uint8_t)((uint64_t)blen >> (56 - 8 * k));
    hdr[12] = 0x10;             /* property flags: delivery-mode */
    hdr[13] = 0;
    hdr[14] = 2;                /* persistent */
    size_t at = rec_begin(b, 2);
    wbuf_u64(b, id);
    wbuf_str(b, "", 0);
    wbuf_str(b, "kq", 2);
    wbuf_str(b, hdr, sizeof(hdr));
    wbuf_u64(b, blen);
    wbuf_bytes(b, body, blen);
    rec_end(b, at);
}

START_TEST(torn_compaction_copy)
{
    /* A compaction cut short by a crash: segment 1 holds a message and
     * its queue entry; segment 2 holds the copy of the message, but the
     * entry's copy never made it. Recovery must keep segment 1 (the
     * entry lives there), so the message survives a second restart too.
     * Before the fix the message counted as living in segment 2 only,
     * segment 1 was deleted as dead, and the second restart lost it. */
    char path[1024];
    struct wbuf b = { 0 };
    size_t at;

    SKIP_IF_REMOTE("writes roostd's data directory");
    /* Start once to learn the directory layout and make the default
     * user (made only at a directory's first start), then replace the
     * journal and add the queue to the definitions. */
    harness_start(H, NULL);
    harness_stop_keep(H);
    data_path(path, sizeof(path), H, "defs.log");
    at = rec_begin(&b, 6);
    wbuf_str(&b, "/", 1);
    wbuf_str(&b, "kq", 2);
    wbuf_u32(&b, 1);
    wbuf_u8(&b, 0);             /* not auto-delete */
    wbuf_str(&b, "", 0);
    rec_end(&b, at);
    add_to_file(path, "ab", b.p, b.len);
    for (int seg = 1; seg <= 2; seg++) {
        b.len = 0;
        at = rec_begin(&b, 1);
        wbuf_u32(&b, 1);
        wbuf_u64(&b, (uint64_t)seg);
        rec_end(&b, at);
        put_msg_record(&b, 7, "keep me");
        if (seg == 1) {
            at = rec_begin(&b, 3);
            wbuf_u32(&b, 1);    /* queue id */
            wbuf_u64(&b, 0);    /* position */
            wbuf_u64(&b, 7);    /* message id */
            wbuf_u64(&b, 0);    /* no expiry */
            wbuf_u32(&b, 0);
            rec_end(&b, at);
        }
        char rel[64];
        snprintf(rel, sizeof(rel), "msgs/%010d.seg", seg);
        data_path(path, sizeof(path), H, rel);
        put_file(path, b.p, b.len);
    }
    wbuf_free(&b);
    data_path(path, sizeof(path), H, "CLEAN");
    unlink(path);

    for (int round = 1; round <= 2; round++) {
        harness_restart(H, NULL);
        amqp_connection_state_t c = h_connect(H);
        struct h_event e;
        /* Taken without an ack and given back when the connection
         * closes: still the recovered entry. */
        int got = GET(c, 1, "kq", false, &e);
        ck_assert_msg(got == 1, "restart %d: the message is gone", round);
        ck_assert_int_eq((int)e.len, 7);
        ck_assert(memcmp(e.body, "keep me", 7) == 0);
        h_event_free(&e);
        h_close(c);
        harness_stop_keep(H);
    }
    harness_stop(H);
}
END_TEST

START_TEST(corruption)
{
    enum { N = 200 };
    char q[64], out[256], path[1024], dir[512];
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;

    SKIP_IF_REMOTE("edits roostd's files");
    harness_start(H, NULL);
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "rot"), true, false, false, out);
    confirm_select(c, 1);
    for (int id = 1; id <= N; id++)
        PUB(c, 1, &t, "", q, id, 1024, 2);
    CONF_WAIT_ALL(c, &t, 10000);
    h_close(c);
    harness_stop_keep(H);

    /* The largest segment (there is one at this size). */
    data_path(dir, sizeof(dir), H, "msgs");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s: %s", dir, strerror(errno));
    struct dirent *de;
    off_t size = 0;
    while ((de = readdir(d)) != NULL) {
        struct stat sb;
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        if (strstr(de->d_name, ".seg") && stat(p, &sb) == 0 &&
            sb.st_size > size) {
            size = sb.st_size;
            snprintf(path, sizeof(path), "%s", p);
        }
    }
    closedir(d);
    ck_assert_msg(size > N * 1024, "the journal holds %lld bytes",
                  (long long)size);
    char *buf = malloc((size_t)size);
    int fd = open(path, O_RDWR);
    ck_assert(buf != NULL && fd >= 0);
    ck_assert(pread(fd, buf, (size_t)size, 0) == size);
    /* From the middle on, the first place deep inside a body: 64 bytes
     * of nothing but body characters either side; the id is that of
     * the last "<id:" before it. */
    off_t at = size / 2;
    for (;; at++) {
        ck_assert_msg(at + 64 < size, "no body found after the middle");
        bool inside = true;
        for (off_t k = at - 64; k < at + 64 && inside; k++)
            inside = strchr("<id:0123456789>", buf[k]) != NULL && buf[k];
        if (inside)
            break;
    }
    off_t s = at;
    while (s > 0 && memcmp(buf + s, "<id:", 4) != 0)
        s--;
    int hit = body_id(buf + s, 11);
    ck_assert_msg(hit >= 1 && hit <= N, "bad id %d at offset %lld", hit,
                  (long long)s);
    for (int k = 0; k < 4; k++)
        buf[at + k] ^= 0x5a;
    ck_assert(pwrite(fd, buf + at, 4, at) == 4);
    close(fd);
    free(buf);
    fprintf(stderr, "corruption: flipped 4 bytes at offset %lld of %s, in "
            "the body of id %d\n", (long long)at, path, hit);

    size_t mark = log_mark(H);
    harness_restart(H, NULL);
    ck_assert_msg(log_has_since(H, mark, "corrupt record at offset"),
                  "no corrupt record in the log");
    unsigned long long msgs, queues;
    RECOVERED(H, mark, &msgs, &queues);
    ck_assert_uint_eq(msgs, N - 1);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, 0, &m);
    /* All but the one hit, in order, once. */
    ck_assert_int_eq(n, N - 1);
    EXPECT_IDS(m, hit - 1, 1, hit, 0);
    EXPECT_IDS(m + hit - 1, n - (hit - 1), hit + 1, N + 1, 0);
    free(m);
    h_close(c);
    conf_free(&t);
    /* And it still stops cleanly (no leak, no crash). */
    harness_stop(H);
}
END_TEST

/* ---- 6. a failing disk ---- */

START_TEST(full_disk)
{
    /* A real full disk: the data directory on a small tmpfs the test
     * mounts (as root; skipped otherwise), nearly filled by a file. The
     * store gets ENOSPC, confirms nothing it could not sync, blocks the
     * publisher with the disk alarm, and goes on by itself once the file
     * is removed. The statvfs alarm is off (disk_free_limit 0), so that
     * what is seen is the store's own reaction. */
    enum { GOOD = 50, MAX_IDS = 6000 };
    char mnt[] = "/tmp/roost-full-XXXXXX", data[128], filler[128], cmd[640];
    char q[64], out[256], dir_arg[160];
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;

    SKIP_IF_REMOTE("fills roostd's disk");
    /* A run that failed half-way left its mount: take it away. */
    FILE *mounts = fopen("/proc/mounts", "r");
    char line[512], old[256];
    while (mounts && fgets(line, sizeof(line), mounts))
        if (sscanf(line, "%*s %255s", old) == 1 &&
            strncmp(old, "/tmp/roost-full-", 16) == 0) {
            snprintf(cmd, sizeof(cmd), "umount %s && rmdir %s", old, old);
            if (system(cmd) != 0)
                fprintf(stderr, "full_disk: cannot remove %s\n", old);
        }
    if (mounts)
        fclose(mounts);
    if (geteuid() != 0 || mkdtemp(mnt) == NULL) {
        fprintf(stderr, "full_disk: skipped: needs root to mount a tmpfs\n");
        return;
    }
    snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=6m tmpfs %s", mnt);
    if (system(cmd) != 0) {
        fprintf(stderr, "full_disk: skipped: cannot mount a tmpfs\n");
        rmdir(mnt);
        return;
    }
    snprintf(data, sizeof(data), "%s/data", mnt);
    snprintf(dir_arg, sizeof(dir_arg), "%s", data);
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    const char *const *args = ARGS("--data-dir", dir_arg,
                                   "--set", "store.segment_size=65536",
                                   "--set", "disk_free_limit.absolute=0");
    harness_start(H, args);
    c = h_connect_blocked_cap(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "full"), true, false, false, out);
    confirm_select(c, 1);
    for (int id = 1; id <= GOOD; id++)
        PUB(c, 1, &t, "", q, id, 1000, 2);
    CONF_WAIT_ALL(c, &t, 5000);

    /* Leave about 300 KiB free, then publish until the store fails. */
    struct statvfs sv;
    ck_assert_int_eq(statvfs(mnt, &sv), 0);
    long long fill = (long long)sv.f_bavail * (long long)sv.f_frsize -
                     300 * 1024;
    snprintf(cmd, sizeof(cmd), "fallocate -l %lld %s", fill, filler);
    ck_assert_int_eq(system(cmd), 0);
    size_t mark = log_mark(H);
    int id = GOOD + 1;
    uint64_t until = h_now_ms() + 20000;
    while (!harness_log_contains(H, "store: writes keep failing") &&
           id < MAX_IDS && h_now_ms() < until) {
        pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", q, id++, 1000, 2, 0,
                    5000);
        CONF_PUMP(c, &t, 1);
    }
    WAIT_LOG(H, mark, "store: writes keep failing");
    /* Confirms of the last batch that made it may still be on their way;
     * after them, what was not synced is not confirmed. */
    until = h_now_ms() + 500;
    while (h_now_ms() < until)
        CONF_PUMP(c, &t, 50);
    uint64_t settled = t.settled;
    until = h_now_ms() + 1500;
    while (h_now_ms() < until)
        CONF_PUMP(c, &t, 50);
    ck_assert_msg(t.settled == settled, "%" PRIu64 " confirms while the "
                  "disk was full", t.settled - settled);
    ck_assert_msg(t.settled < t.n, "every publish was confirmed: the disk "
                  "never filled");
    until = h_now_ms() + 5000;
    while (t.blocked == 0 && h_now_ms() < until) {
        if (t.n < (uint64_t)MAX_IDS)
            pub_mode_at(__FILE__, __LINE__, c, 1, &t, "", q, id++, 1000, 2,
                        0, 5000);
        CONF_PUMP(c, &t, 50);
    }
    ck_assert_msg(t.blocked == 1, "no connection.blocked within 5 s");
    ck_assert_str_eq(t.blocked_reason, "low on disk");
    fprintf(stderr, "full_disk: %" PRIu64 " published, %" PRIu64
            " confirmed when the disk filled\n", t.n, t.settled);

    /* Space returns: everything is confirmed and the publisher goes on. */
    ck_assert_int_eq(unlink(filler), 0);
    CONF_WAIT_ALL(c, &t, 10000);
    until = h_now_ms() + 5000;
    while (t.unblocked == 0 && h_now_ms() < until)
        CONF_PUMP(c, &t, 50);
    ck_assert_msg(t.unblocked == 1, "no connection.unblocked within 5 s");
    WAIT_LOG(H, mark, "store: writes succeed again");

    KILL9(H);
    h_drop(c);
    harness_restart(H, args);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, 0, &m);
    EXPECT_IDS_AFTER_CRASH(m, n, 1, id, 0);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
    snprintf(cmd, sizeof(cmd), "umount %s", mnt);
    ck_assert_int_eq(system(cmd), 0);
    rmdir(mnt);
}
END_TEST

START_TEST(failing_disk)
{
    enum { GOOD = 20, HELD = 40, BLOCKED = 45 };
    char fail[256], q[64], out[256];
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct qmsg *m;

    SKIP_IF_REMOTE("breaks roostd's disk");
    hook_path(fail, sizeof(fail), "io-fail");
    unlink(fail);
    setenv("ROOST_TEST_IO_FAIL", fail, 1);
    harness_start(H, NULL);
    unsetenv("ROOST_TEST_IO_FAIL");
    c = h_connect_blocked_cap(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "eio"), true, false, false, out);
    confirm_select(c, 1);
    for (int id = 1; id <= GOOD; id++)
        PUB(c, 1, &t, "", q, id, 100, 2);
    CONF_WAIT_ALL(c, &t, 5000);

    /* Writes fail: what is published now is not confirmed... */
    size_t mark = log_mark(H);
    int fd = open(fail, O_WRONLY | O_CREAT, 0644);
    ck_assert_msg(fd >= 0, "cannot create %s: %s", fail, strerror(errno));
    close(fd);
    for (int id = GOOD + 1; id <= HELD; id++)
        PUB(c, 1, &t, "", q, id, 100, 2);
    uint64_t until = h_now_ms() + 1500;
    while (h_now_ms() < until)
        CONF_PUMP(c, &t, 50);
    ck_assert_msg(t.settled == GOOD, "%" PRIu64 " publishes confirmed while "
                  "every write failed", t.settled - GOOD);
    WAIT_LOG(H, mark, "store: writes keep failing");
    /* ...and a publisher is blocked from then on, told why. */
    for (int id = HELD + 1; id <= BLOCKED; id++)
        PUB(c, 1, &t, "", q, id, 100, 2);
    until = h_now_ms() + 5000;
    while (t.blocked == 0 && h_now_ms() < until)
        CONF_PUMP(c, &t, 50);
    ck_assert_msg(t.blocked == 1, "no connection.blocked within 5 s");
    ck_assert_str_eq(t.blocked_reason, "low on disk");
    ck_assert_uint_eq(t.settled, GOOD);

    /* The disk comes back: within the second's retry, everything is
     * confirmed and the publisher unblocked. */
    ck_assert_int_eq(unlink(fail), 0);
    CONF_WAIT_ALL(c, &t, 5000);
    until = h_now_ms() + 5000;
    while (t.unblocked == 0 && h_now_ms() < until)
        CONF_PUMP(c, &t, 50);
    ck_assert_msg(t.unblocked == 1, "no connection.unblocked within 5 s");
    WAIT_LOG(H, mark, "store: writes succeed again");

    KILL9(H);
    h_drop(c);
    harness_restart(H, NULL);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, 0, &m);
    EXPECT_IDS_AFTER_CRASH(m, n, 1, BLOCKED + 1, 0);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/*
 * A persistent message consumed and acked (here by a no-ack consumer)
 * before its batch was written is never written, and its confirm goes
 * out at once: while every write fails, so that nothing can be synced,
 * it is confirmed, alone, and the one published just before it to a
 * queue nobody reads is not, until the disk works again.
 */
START_TEST(consumed_before_write_confirmed_at_once)
{
    char fail[256], slow[64], fast[64], out[256];
    struct confirms t = { 0 };
    struct h_event e;
    struct qmsg *m;

    SKIP_IF_REMOTE("breaks roostd's disk");
    hook_path(fail, sizeof(fail), "io-fail-fast");
    unlink(fail);
    setenv("ROOST_TEST_IO_FAIL", fail, 1);
    harness_start(H, NULL);
    unsetenv("ROOST_TEST_IO_FAIL");
    amqp_connection_state_t c = h_connect_blocked_cap(H);
    amqp_connection_state_t cc = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(slow, sizeof(slow), "slow"), true, false,
                  false, out);
    DECLARE_QUEUE(c, 1, h_name(fast, sizeof(fast), "fast"), true, false,
                  false, out);
    CONSUME(cc, 1, fast, "fast-consumer", true, NULL);
    confirm_select(c, 1);

    int fd = open(fail, O_WRONLY | O_CREAT, 0644);
    ck_assert_msg(fd >= 0, "cannot create %s: %s", fail, strerror(errno));
    close(fd);
    PUB(c, 1, &t, "", slow, 1, 100, 2);
    PUB(c, 1, &t, "", fast, 2, 100, 2);
    uint64_t until = h_now_ms() + 1500;
    while (h_now_ms() < until && t.st[2] == 0)
        CONF_PUMP(c, &t, 50);
    ck_assert_msg(t.st[2] == 1, "the publish consumed at once was not "
                  "confirmed while writes failed");
    ck_assert_msg(t.st[1] == 0, "the publish nobody consumed was confirmed "
                  "while writes failed");
    ck_assert_int_eq(h_next(cc, 2000, &e), 1);
    ck_assert_uint_eq(e.id, AMQP_BASIC_DELIVER_METHOD);
    ck_assert_int_eq(body_id(e.body, e.len), 2);
    h_event_free(&e);

    ck_assert_int_eq(unlink(fail), 0);
    CONF_WAIT_ALL(c, &t, 5000);
    h_close(cc);
    KILL9(H);
    h_drop(c);
    harness_restart(H, NULL);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, slow, 0, &m);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(m[0].id, 1);
    free(m);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, fast), 0);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

/*
 * The crash_loop's redelivered check, made deterministic with the
 * failing disk: messages delivered (one acked) while no write reaches the
 * disk, then SIGKILL. They may come back (their records never made it),
 * but not as never delivered.
 */
START_TEST(delivered_before_crash_marked)
{
    char fail[256], q[64], out[256];
    amqp_connection_state_t c;
    struct confirms t = { 0 };
    struct h_event e;
    struct qmsg *m;

    SKIP_IF_REMOTE("breaks roostd's disk");
    hook_path(fail, sizeof(fail), "io-fail-deliver");
    unlink(fail);
    setenv("ROOST_TEST_IO_FAIL", fail, 1);
    harness_start(H, NULL);
    unsetenv("ROOST_TEST_IO_FAIL");
    c = h_connect(H);
    DECLARE_QUEUE(c, 1, h_name(q, sizeof(q), "marked"), true, false, false,
                  out);
    confirm_select(c, 1);
    for (int id = 1; id <= 3; id++)
        PUB(c, 1, &t, "", q, id, 100, 2);
    CONF_WAIT_ALL(c, &t, 5000);

    int fd = open(fail, O_WRONLY | O_CREAT, 0644);
    ck_assert_msg(fd >= 0, "cannot create %s: %s", fail, strerror(errno));
    close(fd);
    ck_assert_int_eq(GET(c, 1, q, false, &e), 1);
    ck_assert_int_eq(body_id(e.body, e.len), 1);
    h_event_free(&e);
    ck_assert_int_eq(GET(c, 1, q, false, &e), 1);
    ck_assert_int_eq(body_id(e.body, e.len), 2);
    ck_assert_int_eq(amqp_basic_ack(c, 1, e.tag, 0), 0);
    h_event_free(&e);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);

    KILL9(H);
    h_drop(c);
    ck_assert_int_eq(unlink(fail), 0);
    harness_restart(H, NULL);
    c = h_connect(H);
    int n = READ_QUEUE(c, 1, q, 0, &m);
    /* 1 and 2 were delivered. */
    EXPECT_IDS_AFTER_CRASH(m, n, 1, 4, 3);
    free(m);
    h_close(c);
    conf_free(&t);
    harness_stop(H);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("store");
    TCase *tc;

    tc = h_tcase(s, "restart", 60, false);
    tcase_add_test(tc, clean_restart);
    tcase_add_test(tc, kill9_restart);
    tcase_add_test(tc, emptied_queue_restart);
    tcase_add_test(tc, deleted_queue_records_stay_dead);

    /* The crash loops in two cases tagged "crash", so that make check
     * runs each beside the rest (check_store_crash_a.sh, _b.sh, and
     * check_store_rest.sh for the untagged ones) and
     * scripts/crash-soak.sh runs just them (CK_INCLUDE_TAGS=crash) for
     * many rounds. */
    tc = h_tcase(s, "crash_loop", 120, false);
    tcase_set_tags(tc, "crash crash_a");
    tcase_add_test(tc, crash_loop);
    tcase_add_test(tc, crash_loop_paged);
    tcase_add_test(tc, crash_loop_delayed);
    tc = h_tcase(s, "crash_loop_kinds", 120, false);
    tcase_set_tags(tc, "crash crash_b");
    tcase_add_test(tc, crash_loop_quorum);
    tcase_add_test(tc, crash_loop_retry);
    tc = h_tcase(s, "power_cut", 120, false);
    tcase_add_test(tc, power_cut);
    tcase_add_test(tc, power_cut_stream);
    tcase_add_test(tc, power_cut_retry);
    tcase_add_test(tc, power_cut_dead_letter_stream);
    tcase_add_test(tc, power_cut_delayed);
    tcase_add_test(tc, large_batch_split);

    tc = h_tcase(s, "damage", 60, false);
    tcase_add_test(tc, corruption);
    tcase_add_test(tc, tx_commit_record);
    tcase_add_test(tc, torn_compaction_copy);
    tcase_add_test(tc, failing_disk);
    tcase_add_test(tc, consumed_before_write_confirmed_at_once);
    tcase_add_test(tc, full_disk);
    tcase_add_test(tc, delivered_before_crash_marked);

    return h_run(s);
}
