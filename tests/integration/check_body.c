/*
 * SPDX-License-Identifier: Apache-2.0
 * Message bodies on their way through the broker (broker/core/inbuf.h): a
 * large body that arrives in one frame is lent by the input block it was
 * read into instead of copied; a body in several frames gets its own
 * allocation; a small one is copied. Each way must deliver the same bytes,
 * to every queue a message reaches, after a dead-lettering, and after
 * inbuf_compact() has given a kept message its own copy; and bodies kept
 * in a queue must not hold on to whole input blocks for long. Envelopes
 * (exchange, routing key, properties) shared by a run of publishes must
 * still come out as each message's own.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "tests/integration/harness.h"

/* Byte i of a body of 'len' bytes: differs between sizes and positions,
 * so a body cut short, shifted or swapped with another shows. */
static uint8_t
pattern(size_t len, size_t i)
{
    return (uint8_t)((i * 131u) ^ (len * 7u) ^ (i >> 9));
}

static void *
body_new(size_t len)
{
    uint8_t *b = malloc(len);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < len; i++)
        b[i] = pattern(len, i);
    return b;
}

static void
check_body(const struct h_event *e, size_t len, const char *where)
{
    ck_assert_msg(e->has_content && e->len == len,
                  "%s: body of %zu bytes, expected %zu", where, e->len, len);
    size_t i = 0;
    while (i < len && (uint8_t)e->body[i] == pattern(len, i))
        i++;
    ck_assert_msg(i == len, "%s: body of %zu bytes differs at byte %zu",
                  where, len, i);
}

/* Declare a queue 'dead' and a queue 'ttl' whose messages expire after
 * 'ttl_ms' into it (names into the callers' 256-byte buffers). */
static void
declare_ttl_pair(amqp_connection_state_t c, int ttl_ms, char *ttl, char *dead)
{
    char name[64];

    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "dead"), false, false,
                  false, dead);
    amqp_table_entry_t args[3] = {
        { .key = amqp_cstring_bytes("x-message-ttl"),
          .value = { .kind = AMQP_FIELD_KIND_I32, .value.i32 = ttl_ms } },
        h_entry_str("x-dead-letter-exchange", ""),
        h_entry_str("x-dead-letter-routing-key", dead),
    };
    h_declare_queue_at(__FILE__, __LINE__, c, 1,
                       h_name(name, sizeof(name), "ttl"), false, false, false,
                       h_table(args, 3), ttl, NULL, NULL);
}

/*
 * Below, at and above the lending threshold (16 KiB), up to the largest
 * single frame rabbitmq-c sends (frame_max 131072 less 8) and beyond it
 * into two and more frames.
 */
static const size_t sizes[] = { 0,      1,      4096,   16383,  16384,
                                20000,  65536,  131063, 131064, 131065,
                                300000, 1048576 };

START_TEST(bodies_arrive_byte_exact)
{
    /* Each message goes through a fanout to three queues: one consumed
     * right away, one read with basic.get after three seconds (when
     * inbuf_compact has run over its retired input blocks), and one whose
     * TTL dead-letters it into a fourth queue. */
    struct harness h;
    amqp_connection_state_t c;
    char x[64], keep[256], live[256], ttl[256], dead[256], name[64];
    const size_t n = sizeof(sizes) / sizeof(sizes[0]);

    if (!harness_start(&h, NULL))
        return;
    c = h_connect(&h);
    h_name(x, sizeof(x), "fan");
    DECLARE_EXCHANGE(c, 1, x, "fanout");
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "live"), false, false,
                  false, live);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "keep"), false, false,
                  false, keep);
    declare_ttl_pair(c, 200, ttl, dead);
    BIND(c, 1, live, x, "");
    BIND(c, 1, keep, x, "");
    BIND(c, 1, ttl, x, "");
    CONSUME(c, 1, live, "live", true, NULL);

    for (size_t i = 0; i < n; i++) {
        void *b = body_new(sizes[i]);
        h_publish_at(__FILE__, __LINE__, c, 1, x, "", b, sizes[i], false,
                     NULL);
        free(b);
    }
    for (size_t i = 0; i < n; i++) {
        struct h_event e;
        h_expect_delivery_at(__FILE__, __LINE__, c, NULL, &e);
        check_body(&e, sizes[i], "consumed at once");
        h_event_free(&e);
    }
    h_sleep_ms(3000);
    for (size_t i = 0; i < n; i++) {
        struct h_event e;
        ck_assert_int_eq(GET(c, 1, keep, true, &e), 1);
        check_body(&e, sizes[i], "kept three seconds");
        h_event_free(&e);
    }
    WAIT_COUNT(c, 1, dead, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        struct h_event e;
        ck_assert_int_eq(GET(c, 1, dead, true, &e), 1);
        check_body(&e, sizes[i], "dead-lettered");
        h_event_free(&e);
    }
    h_close(c);
    harness_stop(&h);
}
END_TEST

/* Publishes 'pairs' times a 20 KiB body to 'keep' and a 100 KiB one that
 * no queue takes, then waits for a queue.declare-ok (every publish was
 * handled). */
struct pub {
    const struct harness *h;
    const char *keep;
    int pairs;
    volatile int done;
    uint32_t kept;
};

enum { KEEP_LEN = 20 * 1024, DROP_LEN = 100 * 1024 };

static void *
publisher(void *arg)
{
    struct pub *p = arg;
    amqp_connection_state_t c = h_connect(p->h);
    uint8_t *keep = body_new(KEEP_LEN), *drop = body_new(DROP_LEN);

    for (int i = 0; i < p->pairs; i++) {
        amqp_basic_publish(c, 1, amqp_empty_bytes,
                           amqp_cstring_bytes(p->keep), 0, 0, NULL,
                           (amqp_bytes_t){ KEEP_LEN, keep });
        amqp_basic_publish(c, 1, amqp_empty_bytes,
                           amqp_cstring_bytes("no-such-queue"), 0, 0, NULL,
                           (amqp_bytes_t){ DROP_LEN, drop });
    }
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(c, 1, amqp_cstring_bytes(p->keep), 1, 0, 0, 0,
                           amqp_empty_table);
    p->kept = ok ? ok->message_count : 0;
    h_close(c);
    free(keep);
    free(drop);
    __atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

START_TEST(kept_bodies_release_input_blocks)
{
    /* Every input block the publisher's 120 KiB pairs are read into keeps
     * one or two 20 KiB bodies: without compaction the 1,500 kept bodies
     * (31 MB) would hold about 200 MB of blocks, far over the 64 MiB
     * memory watermark, and the publisher would stay blocked. With it,
     * the blocks are given back within a second or two of being left,
     * and the alarm clears each time it is raised. */
    enum { PAIRS = 1500 };
    struct harness h;
    struct pub p = { 0 };
    amqp_connection_state_t c;
    char name[64], keep[256];
    pthread_t t;

    SKIP_IF_REMOTE("Roost's memory accounting");
    if (!harness_start(&h, ARGS("--set",
                                "vm_memory_high_watermark.absolute=67108864")))
        return;
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "keep"), false, false,
                  false, keep);
    p.h = &h;
    p.keep = keep;
    p.pairs = PAIRS;
    uint64_t start = h_now_ms(), until = start + 60000;
    ck_assert_int_eq(pthread_create(&t, NULL, publisher, &p), 0);
    while (!__atomic_load_n(&p.done, __ATOMIC_SEQ_CST) && h_now_ms() < until)
        h_sleep_ms(50);
    ck_assert_msg(p.done, "the publisher is still blocked after 30 s: kept "
                          "bodies hold their input blocks");
    pthread_join(t, NULL);
    fprintf(stderr, "kept bodies: %d pairs published in %llu ms\n", PAIRS,
            (unsigned long long)(h_now_ms() - start));
    ck_assert_uint_eq(p.kept, PAIRS);
    for (int i = 0; i < PAIRS; i++) {
        struct h_event e;
        ck_assert_int_eq(GET(c, 1, keep, true, &e), 1);
        check_body(&e, KEEP_LEN, "kept");
        h_event_free(&e);
    }
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(idle_connections_hold_no_input)
{
    /* Each of 200 connections reads a 300 KiB message, which grows its
     * reads past 128 KiB, and then goes quiet. Were each to keep its last
     * input block (256 to 512 KiB), they would hold 50 to 100 MiB, over
     * the 32 MiB memory watermark, and the last publish below would be
     * blocked (or, as likely, one of the round trips of the burst: it then
     * times out). An emptied input gives its block back at once. */
    enum { CONNS = 200, LEN = 300 * 1024 };
    amqp_connection_state_t conns[CONNS], c, obs;
    uint8_t *big = body_new(LEN);
    char name[64], q[256];
    struct harness h;

    SKIP_IF_REMOTE("Roost's memory accounting");
    if (!harness_start(&h, ARGS("--set",
                                "vm_memory_high_watermark.absolute=33554432")))
        return;
    for (int i = 0; i < CONNS; i++) {
        conns[i] = h_connect(&h);
        h_publish_at(__FILE__, __LINE__, conns[i], 1, "", "no-such-queue",
                     big, LEN, false, NULL);
        /* A round trip: the publish was handled. */
        h_declare_exchange_at(__FILE__, __LINE__, conns[i], 1, "amq.direct",
                              "direct", true, false, false, amqp_empty_table);
    }
    /* Past two alarm ticks (100 ms each). */
    h_sleep_ms(300);
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "after"), false, false,
                  false, q);
    PUBLISH(c, 1, "", q, "after the burst");
    /* Blocked by a memory alarm, the publish would never reach the queue
     * (a connection that has not published is not blocked). */
    obs = h_connect(&h);
    WAIT_COUNT(obs, 1, q, 1);
    h_close(obs);
    h_drop(c);
    for (int i = 0; i < CONNS; i++)
        h_close(conns[i]);
    free(big);
    harness_stop(&h);
}
END_TEST

START_TEST(stalled_consumer_output_bounded)
{
    /* A no-ack consumer stops reading. Each 16 KiB body delivered to it
     * is referenced in its output, and keeps alive the whole input block
     * it was lent from (the 480 KiB unroutable messages in between fill
     * those blocks). Counted at 16 KiB each, the output would never be
     * congested while it held hundreds of megabytes, over the 64 MiB
     * watermark, and every publisher would stay blocked. Counted with
     * their blocks, deliveries stop at the watermark, the rest wait in
     * the queue, where compaction gives them their own copies. */
    enum { PAIRS = 600, KEEP = 16 * 1024, FILL = 480 * 1024 };
    amqp_connection_state_t stalled, pub, c, obs;
    uint8_t *keep = body_new(KEEP), *fill = body_new(FILL);
    char name[64], q[256], after[256];
    struct harness h;
    int small = 4096;

    SKIP_IF_REMOTE("Roost's memory accounting");
    if (!harness_start(&h, ARGS("--set",
                                "vm_memory_high_watermark.absolute=67108864")))
        return;
    stalled = h_connect(&h);
    setsockopt(h_fd(stalled), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    DECLARE_QUEUE(stalled, 1, h_name(name, sizeof(name), "stalled"), false,
                  false, false, q);
    CONSUME(stalled, 1, q, "stalled", true, NULL);
    pub = h_connect(&h);
    for (int i = 0; i < PAIRS; i++) {
        h_publish_at(__FILE__, __LINE__, pub, 1, "", q, keep, KEEP, false,
                     NULL);
        h_publish_at(__FILE__, __LINE__, pub, 1, "", "no-such-queue", fill,
                     FILL, false, NULL);
    }
    /* A round trip: every publish was handled (or the alarm holds it). */
    h_declare_exchange_at(__FILE__, __LINE__, pub, 1, "amq.direct", "direct",
                          true, false, false, amqp_empty_table);
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "after"), false, false,
                  false, after);
    PUBLISH(c, 1, "", after, "after the stall");
    obs = h_connect(&h);
    WAIT_COUNT(obs, 1, after, 1);
    h_close(obs);
    h_drop(c);
    h_drop(pub);
    h_drop(stalled);
    free(keep);
    free(fill);
    harness_stop(&h);
}
END_TEST

START_TEST(dead_letter_too_large_dropped)
{
    /* With frame_max at its largest (16 MiB), a header can carry a
     * headers table of almost 16 MiB. Dead-lettering adds x-death, and
     * the table would outgrow what a table may hold: the message is
     * dropped with a warning, not delivered with a header that cannot be
     * decoded (and nothing is written past the new message). */
    enum { FRAME_MAX = 16 * 1024 * 1024, BODY = 65536 };
    struct hconn_opts o = { .frame_max = FRAME_MAX };
    amqp_connection_state_t c;
    char ttl[256], dead[256];
    struct harness h;
    /* rabbitmq-c's largest header payload (frame_max - 8), less its
     * fixed fields and the table's length (18) and the entry's key, type
     * and string length (9). */
    size_t vlen = FRAME_MAX - 8 - 18 - 9;
    char *v = malloc(vlen);
    uint8_t *body = body_new(BODY);

    SKIP_IF_REMOTE("a roostd setting");
    if (!harness_start(&h, ARGS("--set", "frame_max=16777216")))
        return;
    ck_assert_ptr_nonnull(v);
    memset(v, 'h', vlen);
    c = h_connect_opts(&h, &o, NULL);
    declare_ttl_pair(c, 0, ttl, dead);
    amqp_table_entry_t hdr = { .key = amqp_cstring_bytes("big"),
                               .value = { .kind = AMQP_FIELD_KIND_UTF8,
                                          .value.bytes = { vlen, v } } };
    amqp_basic_properties_t props = {
        ._flags = AMQP_BASIC_HEADERS_FLAG,
        .headers = { 1, &hdr },
    };
    h_publish_at(__FILE__, __LINE__, c, 1, "", ttl, body, BODY, false, &props);
    /* A small one behind it is dead-lettered as usual. */
    PUBLISH(c, 1, "", ttl, "small");
    WAIT_COUNT(c, 1, dead, 1);
    ck_assert(harness_log_contains(&h, "too large to dead-letter"));
    h_close(c);
    free(v);
    free(body);
    harness_stop(&h);
}
END_TEST

/*
 * Envelopes (broker/core/msg.h): a channel's run of publishes with the same
 * exchange, routing key and properties shares one; a change in any of
 * them (a routing key, a message-id per message, a content type, the
 * delivery mode, a priority, headers) gives the message its own. Every
 * message must come out with its own, live and after a restart (which
 * shares envelopes between recovered messages the same way), and a TTL
 * in a shared envelope must still expire its messages.
 */
enum { ENV_N = 60 };

static bool
env_is_b(int i)
{
    return i % 7 == 3;
}

static void
env_props(int i, amqp_basic_properties_t *p, char *id, size_t idlen,
          amqp_table_entry_t *hdr)
{
    memset(p, 0, sizeof(*p));
    p->_flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    p->content_type = amqp_cstring_bytes(i < 40 ? "text/a" : "text/b");
    p->delivery_mode = i >= 45 && i < 50 ? 1 : 2;
    if (i >= 20 && i < 30) {
        snprintf(id, idlen, "id-%d", i);
        p->_flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        p->message_id = amqp_cstring_bytes(id);
    }
    if (i % 10 == 0) {
        p->_flags |= AMQP_BASIC_PRIORITY_FLAG;
        p->priority = 5;
    }
    if (i >= 50) {
        *hdr = h_entry_str("h", "v");
        p->_flags |= AMQP_BASIC_HEADERS_FLAG;
        p->headers = h_table(hdr, 1);
    }
}

/* Message i as it must come out of its queue. */
static void
env_check(const struct h_event *e, int i, const char *where)
{
    char body[16], id[16];
    snprintf(body, sizeof(body), "m%d", i);
    ck_assert_msg(e->has_content && strcmp(e->body, body) == 0,
                  "%s: got %s, expected %s", where, e->body, body);
    ck_assert_str_eq(e->exchange, "amq.direct");
    ck_assert_str_eq(e->rkey, env_is_b(i) ? "kb" : "ka");
    ck_assert_str_eq(e->content_type, i < 40 ? "text/a" : "text/b");
    ck_assert_int_eq(e->delivery_mode, i >= 45 && i < 50 ? 1 : 2);
    ck_assert_msg(((e->flags & AMQP_BASIC_MESSAGE_ID_FLAG) != 0) ==
                      (i >= 20 && i < 30), "%s: m%d message-id", where, i);
    if (i >= 20 && i < 30) {
        snprintf(id, sizeof(id), "id-%d", i);
        ck_assert_str_eq(e->message_id, id);
    }
    ck_assert_msg(((e->flags & AMQP_BASIC_PRIORITY_FLAG) != 0) ==
                      (i % 10 == 0), "%s: m%d priority", where, i);
    ck_assert_int_eq(e->nheaders, i >= 50 ? 1 : 0);
    if (i >= 50)
        ck_assert_str_eq(e->header0, "h");
}

/* Take every message of 'q' (unacked, so a close returns them) and
 * check each; 'durable_only': the transient ones are gone. */
static void
env_check_queue(amqp_connection_state_t c, const char *q, bool b,
                bool durable_only, const char *where)
{
    struct h_event e;
    for (int i = 0; i < ENV_N; i++) {
        if (env_is_b(i) != b || (durable_only && i >= 45 && i < 50))
            continue;
        ck_assert_msg(GET(c, 1, q, false, &e) == 1, "%s: m%d missing", where,
                      i);
        env_check(&e, i, where);
        h_event_free(&e);
    }
    ck_assert_int_eq(GET(c, 1, q, false, &e), 0);
}

START_TEST(envelopes_shared_and_not)
{
    struct harness h;
    amqp_connection_state_t c;
    char qa[256], qb[256], qt[256], name[64];
    struct h_event e;

    SKIP_IF_REMOTE("restarts roostd");
    if (!harness_start(&h, NULL))
        return;
    c = h_connect(&h);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "env-a"), true, false,
                  false, qa);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "env-b"), true, false,
                  false, qb);
    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "env-ttl"), false, false,
                  false, qt);
    BIND(c, 1, qa, "amq.direct", "ka");
    BIND(c, 1, qb, "amq.direct", "kb");
    for (int i = 0; i < ENV_N; i++) {
        amqp_basic_properties_t p;
        amqp_table_entry_t hdr;
        char id[16], body[16];
        env_props(i, &p, id, sizeof(id), &hdr);
        snprintf(body, sizeof(body), "m%d", i);
        h_publish_at(__FILE__, __LINE__, c, 1, "amq.direct",
                     env_is_b(i) ? "kb" : "ka", body, strlen(body), false,
                     &p);
    }
    /* A run sharing an envelope with a 1 ms TTL, then one without. */
    amqp_basic_properties_t tp = { ._flags = AMQP_BASIC_EXPIRATION_FLAG,
                                   .expiration = amqp_cstring_bytes("1") };
    for (int i = 0; i < 3; i++)
        h_publish_at(__FILE__, __LINE__, c, 1, "", qt, "gone", 4, false, &tp);
    PUBLISH(c, 1, "", qt, "kept");
    h_sleep_ms(50);
    ck_assert_int_eq(GET(c, 1, qt, true, &e), 1);
    ck_assert_str_eq(e.body, "kept");
    h_event_free(&e);
    ck_assert_int_eq(GET(c, 1, qt, true, &e), 0);

    env_check_queue(c, qa, false, false, "live");
    env_check_queue(c, qb, true, false, "live");
    h_close(c);

    harness_stop_keep(&h);
    ck_assert(harness_restart(&h, NULL));
    c = h_connect(&h);
    env_check_queue(c, qa, false, true, "recovered");
    env_check_queue(c, qb, true, true, "recovered");
    h_close(c);
    harness_stop(&h);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("body");
    TCase *tc = h_tcase(s, "bodies", 120, false);
    tcase_add_test(tc, bodies_arrive_byte_exact);
    tcase_add_test(tc, kept_bodies_release_input_blocks);
    tcase_add_test(tc, idle_connections_hold_no_input);
    tcase_add_test(tc, stalled_consumer_output_bounded);
    tcase_add_test(tc, dead_letter_too_large_dropped);
    tcase_add_test(tc, envelopes_shared_and_not);
    return h_run(s);
}
