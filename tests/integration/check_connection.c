/*
 * SPDX-License-Identifier: Apache-2.0
 * Connections against a real roostd: protocol header negotiation,
 * connection.start (server properties and capabilities), PLAIN and
 * AMQPLAIN logins and their failures, tune negotiation, heartbeats,
 * connection.open, the handshake timeout, the close handshake in both
 * directions, guest's loopback restriction, and SIGTERM. Raw sockets are
 * used wherever the exact bytes or the absence of a reply matter.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/rawsock.h"

static const char amqp091[8] = { 'A', 'M', 'Q', 'P', 0, 0, 9, 1 };

static void
raw_open(struct rawsock *rs, const struct harness *h, const struct rs_login *o)
{
    ck_assert_msg(rs_open(rs, h->host, h->port, o) == 0,
                  "raw handshake failed (close %u \"%s\")", rs->close_code,
                  rs->close_text);
}

/* Connect, send the header and read connection.start. */
static void
raw_started(struct rawsock *rs, const struct harness *h)
{
    ck_assert_int_eq(rs_connect(rs, h->host, h->port, 0), 0);
    ck_assert_int_eq(rs_send_header(rs), 0);
    ck_assert_msg(rs_expect_start(rs, 5000) == 0, "no connection.start");
}

/* ---- protocol header ---- */

static void
expect_header_refused(const void *what, size_t len)
{
    struct rawsock rs;
    char got[8];

    ck_assert_int_eq(rs_connect(&rs, H->host, H->port, 0), 0);
    ck_assert_int_eq(rs_send(&rs, what, len), 0);
    size_t n = rs_read_raw(&rs, got, sizeof(got), 5000);
    ck_assert_msg(n == 8 && memcmp(got, amqp091, 8) == 0,
                  "expected the 0-9-1 header back, got %zu bytes", n);
    ck_assert_msg(rs_wait_eof(&rs, 5000, NULL) >= 0,
                  "the socket stays open after a refused header");
    rs_close(&rs);
}

START_TEST(header_other_version)
{
    /* AMQP 0-10 */
    expect_header_refused("AMQP\x01\x01\x00\x0a", 8);
}
END_TEST

START_TEST(header_http)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    expect_header_refused(http, sizeof(http) - 1);
}
END_TEST

START_TEST(header_amqp_0_9_refused)
{
    /* docs/compatibility.md: Roost speaks 0-9-1 only (RabbitMQ accepts the
     * 0-9 header). */
    SKIP_IF_REMOTE("documented difference: RabbitMQ accepts 0-9");
    expect_header_refused("AMQP\x01\x01\x00\x09", 8);
}
END_TEST

START_TEST(header_then_correct_client_works)
{
    struct rawsock rs;

    raw_started(&rs, H);
    ck_assert_msg(strstr(rs.mechanisms, "PLAIN") != NULL, "mechanisms '%s'",
                  rs.mechanisms);
    rs_close(&rs);
}
END_TEST

/* ---- connection.start ---- */

static const amqp_field_value_t *
find(const amqp_table_t *t, const char *key)
{
    for (int i = 0; i < t->num_entries; i++)
        if (t->entries[i].key.len == strlen(key) &&
            memcmp(t->entries[i].key.bytes, key, strlen(key)) == 0)
            return &t->entries[i].value;
    return NULL;
}

static bool
str_eq(const amqp_field_value_t *v, const char *s)
{
    return v &&
           (v->kind == AMQP_FIELD_KIND_UTF8 ||
            v->kind == AMQP_FIELD_KIND_BYTES) &&
           v->value.bytes.len == strlen(s) &&
           memcmp(v->value.bytes.bytes, s, strlen(s)) == 0;
}

START_TEST(start_server_properties)
{
    static const char *const keys[] = { "product", "version", "platform",
                                        "copyright", "information" };
    amqp_connection_state_t c = h_connect(H);
    amqp_table_t *props = amqp_get_server_properties(c);

    ck_assert(props != NULL);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const amqp_field_value_t *v = find(props, keys[i]);
        ck_assert_msg(v != NULL, "server property '%s' missing", keys[i]);
        ck_assert_msg(v->kind == AMQP_FIELD_KIND_UTF8 && v->value.bytes.len > 0,
                      "server property '%s' is not a non-empty long string",
                      keys[i]);
    }
    /* docs/compatibility.md: by default Roost announces the RabbitMQ
     * release whose behaviour it follows, so kombu picks global=True. */
    ck_assert_msg(str_eq(find(props, "product"), "RabbitMQ"),
                  "product is not RabbitMQ");
    ck_assert_msg(harness_is_remote() ||
                      str_eq(find(props, "version"), "3.10.8"),
                  "version is not 3.10.8");
    ck_assert_msg(harness_is_remote() ||
                      find(props, "roost_version") != NULL,
                  "roost_version missing");
    h_close(c);
}
END_TEST

START_TEST(start_cluster_name)
{
    /* RabbitMQ names a lone node's cluster after the node, NAME@host
     * with the short host name; Roost's node (the management API's) is
     * rabbit@host. */
    amqp_connection_state_t c = h_connect(H);
    const amqp_field_value_t *v =
        find(amqp_get_server_properties(c), "cluster_name");
    char host[256], got[512];

    ck_assert_msg(v && v->kind == AMQP_FIELD_KIND_UTF8, "no cluster_name");
    snprintf(got, sizeof(got), "%.*s", (int)v->value.bytes.len,
             (const char *)v->value.bytes.bytes);
    ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
    host[sizeof(host) - 1] = '\0';
    host[strcspn(host, ".")] = '\0';
    const char *at = strchr(got, '@');
    ck_assert_msg(at != NULL && at > got && strcmp(at + 1, host) == 0,
                  "cluster_name '%s' is not NAME@%s", got, host);
    ck_assert_msg(harness_is_remote() || strncmp(got, "rabbit@", 7) == 0,
                  "cluster_name '%s' is not rabbit@%s", got, host);
    h_close(c);
}
END_TEST

START_TEST(start_server_properties_own_name)
{
    struct harness h;
    amqp_connection_state_t c;
    amqp_table_t *props;

    SKIP_IF_REMOTE("a roostd setting");
    if (!harness_start(&h, ARGS("--set", "server_properties.rabbitmq=false")))
        return;
    c = h_connect(&h);
    props = amqp_get_server_properties(c);
    ck_assert_msg(str_eq(find(props, "product"), "Roost"),
                  "product is not Roost with server_properties.rabbitmq=false");
    ck_assert_msg(!str_eq(find(props, "version"), "3.10.8"),
                  "version is RabbitMQ's with server_properties.rabbitmq=false");
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(start_capabilities_exact)
{
    /* docs/compatibility.md: exactly what is implemented is true. */
    static const char *const yes[] = { "publisher_confirms",
                                       "exchange_exchange_bindings",
                                       "basic.nack",
                                       "consumer_cancel_notify",
                                       "authentication_failure_close",
                                       "per_consumer_qos",
                                       "connection.blocked",
                                       "consumer_priorities",
                                       "direct_reply_to" };
    amqp_connection_state_t c;

    SKIP_IF_REMOTE("Roost's own list (RabbitMQ implements more)");
    c = h_connect(H);
    const amqp_field_value_t *caps =
        find(amqp_get_server_properties(c), "capabilities");

    ck_assert_msg(caps && caps->kind == AMQP_FIELD_KIND_TABLE,
                  "no capabilities table");
    const amqp_table_t *t = &caps->value.table;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        const amqp_field_value_t *v = find(t, yes[i]);
        ck_assert_msg(v && v->kind == AMQP_FIELD_KIND_BOOLEAN &&
                          v->value.boolean,
                      "capability '%s' is not announced as true", yes[i]);
    }
    /* Nothing else may claim to be there. */
    for (int i = 0; i < t->num_entries; i++) {
        const amqp_table_entry_t *e = &t->entries[i];
        ck_assert_msg(e->value.kind == AMQP_FIELD_KIND_BOOLEAN,
                      "capability '%.*s' is not a boolean", (int)e->key.len,
                      (const char *)e->key.bytes);
        if (!e->value.value.boolean)
            continue;
        bool listed = false;
        for (size_t k = 0; k < sizeof(yes) / sizeof(yes[0]); k++)
            listed |= e->key.len == strlen(yes[k]) &&
                      memcmp(e->key.bytes, yes[k], e->key.len) == 0;
        ck_assert_msg(listed,
                      "capability '%.*s' is announced but not implemented",
                      (int)e->key.len, (const char *)e->key.bytes);
    }
    h_close(c);
}
END_TEST

START_TEST(start_mechanisms)
{
    struct rawsock rs;

    raw_started(&rs, H);
    ck_assert_msg(strstr(rs.mechanisms, "PLAIN") &&
                      strstr(rs.mechanisms, "AMQPLAIN"),
                  "mechanisms '%s' lack PLAIN or AMQPLAIN", rs.mechanisms);
    rs_close(&rs);
}
END_TEST

/* ---- login ---- */

START_TEST(login_plain)
{
    amqp_connection_state_t c = h_connect(H);
    h_close(c);
}
END_TEST

START_TEST(login_amqplain)
{
    struct rawsock rs;
    struct rs_login o = { .mechanism = "AMQPLAIN" };

    raw_open(&rs, H, &o);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    rs_close(&rs);
}
END_TEST

START_TEST(login_amqplain_bad_password)
{
    struct rawsock rs;
    struct rs_login o = { .mechanism = "AMQPLAIN", .pass = "wrong" };

    ck_assert_int_eq(rs_connect(&rs, H->host, H->port, 0), 0);
    ck_assert_int_eq(rs_handshake(&rs, &o), -1);
    ck_assert_msg(rs.close_code == 403, "expected 403, got %u \"%s\"",
                  rs.close_code, rs.close_text);
    rs_close(&rs);
}
END_TEST

START_TEST(login_bad_password_403)
{
    /* rabbitmq-c announces authentication_failure_close. */
    struct hconn_opts o = { .pass = "wrong" };
    amqp_rpc_reply_t r;
    amqp_connection_state_t c = h_connect_opts(H, &o, &r);

    ck_assert_msg(c == NULL, "login with a wrong password succeeded");
    ck_assert_int_eq(r.reply_type, AMQP_RESPONSE_SERVER_EXCEPTION);
    ck_assert_int_eq(r.reply.id, AMQP_CONNECTION_CLOSE_METHOD);
    amqp_connection_close_t *m = r.reply.decoded;
    ck_assert_int_eq(m->reply_code, 403);
    static const char want[] = "ACCESS_REFUSED - Login was refused using "
                               "authentication mechanism PLAIN";
    ck_assert_msg(m->reply_text.len >= sizeof(want) - 1 &&
                      memcmp(m->reply_text.bytes, want, sizeof(want) - 1) == 0,
                  "reply text \"%.*s\"", (int)m->reply_text.len,
                  (const char *)m->reply_text.bytes);
}
END_TEST

START_TEST(login_unknown_user_403)
{
    struct hconn_opts o = { .user = "nobody", .pass = "x" };
    amqp_rpc_reply_t r;

    ck_assert(h_connect_opts(H, &o, &r) == NULL);
    ck_assert_int_eq(r.reply_type, AMQP_RESPONSE_SERVER_EXCEPTION);
    ck_assert_int_eq(((amqp_connection_close_t *)r.reply.decoded)->reply_code,
                     403);
}
END_TEST

START_TEST(login_bad_password_silent_without_capability)
{
    /* A client that did not announce authentication_failure_close just
     * sees the socket close, as with RabbitMQ. */
    struct rawsock rs;
    struct rs_login o = { .pass = "wrong", .no_capabilities = true };
    int code;

    raw_started(&rs, H);
    ck_assert_int_eq(rs_send_start_ok(&rs, &o), 0);
    ck_assert_msg(rs_wait_eof(&rs, 8000, &code) >= 0, "socket not closed");
    ck_assert_msg(code == 0, "got connection.close %d \"%s\"", code,
                  rs.close_text);
    rs_close(&rs);
}
END_TEST

START_TEST(login_unsupported_mechanism)
{
    /* docs/compatibility.md: 403 rather than RabbitMQ's silent close. */
    struct rawsock rs;
    struct rs_login o = { .mechanism = "EXTERNAL" };

    SKIP_IF_REMOTE("documented difference: RabbitMQ closes the socket");
    raw_started(&rs, H);
    ck_assert_int_eq(rs_send_start_ok(&rs, &o), 0);
    ck_assert_int_eq(rs_expect_close(&rs, 5000), 403);
    ck_assert_msg(strstr(rs.close_text,
                         "ACCESS_REFUSED - unsupported "
                         "authentication mechanism") == rs.close_text,
                  "text \"%s\"", rs.close_text);
    rs_close(&rs);
}
END_TEST

START_TEST(login_configured_default_user)
{
    struct harness h;
    struct hconn_opts alice = { .user = "alice", .pass = "s3cret" };
    struct hconn_opts guest = { 0 };
    amqp_rpc_reply_t r;

    if (!harness_start(&h, ARGS("--set", "default_user=alice", "--set",
                                "default_pass=s3cret")))
        return;
    h_close(h_connect_opts(&h, &alice, NULL));
    ck_assert_msg(h_connect_opts(&h, &guest, &r) == NULL,
                  "guest still logs in when the default user is alice");
    ck_assert_int_eq(((amqp_connection_close_t *)r.reply.decoded)->reply_code,
                     403);
    harness_stop(&h);
}
END_TEST

/* ---- tune ---- */

static void expect_tune_dropped(const struct harness *h, uint16_t channel_max,
                                uint32_t frame_max);

START_TEST(tune_defaults)
{
    struct rawsock rs;

    raw_started(&rs, H);
    ck_assert_int_eq(rs_send_start_ok(&rs, NULL), 0);
    ck_assert_int_eq(rs_expect_tune(&rs, 5000), 0);
    ck_assert_int_eq(rs.tune_channel_max, 2047);
    ck_assert_int_eq(rs.tune_frame_max, 131072);
    ck_assert_int_eq(rs.tune_heartbeat, 60);
    rs_close(&rs);
}
END_TEST

START_TEST(tune_configured)
{
    struct harness h;
    struct rawsock rs;

    if (!harness_start(&h, ARGS("--set", "channel_max=7", "--set",
                                "frame_max=8192", "--set", "heartbeat=5")))
        return;
    raw_started(&rs, &h);
    ck_assert_int_eq(rs_send_start_ok(&rs, NULL), 0);
    ck_assert_int_eq(rs_expect_tune(&rs, 5000), 0);
    ck_assert_int_eq(rs.tune_channel_max, 7);
    ck_assert_int_eq(rs.tune_frame_max, 8192);
    ck_assert_int_eq(rs.tune_heartbeat, 5);
    rs_close(&rs);
    /* More than the configured frame_max is refused. */
    expect_tune_dropped(&h, 7, 8193);
    harness_stop(&h);
}
END_TEST

START_TEST(tune_client_lowers)
{
    struct hconn_opts o = { .channel_max = 5,
                            .frame_max = 4096,
                            .heartbeat = 0 };
    amqp_connection_state_t c = h_connect_opts(H, &o, NULL);

    ck_assert_int_eq(amqp_get_channel_max(c), 5);
    ck_assert_int_eq(amqp_get_frame_max(c), 4096);
    ck_assert_int_eq(amqp_get_heartbeat(c), 0);
    amqp_channel_open(c, 5);
    EXPECT_OK(c, "channel.open 5 with channel_max 5");
    h_close(c);
}
END_TEST

START_TEST(tune_client_frame_max_respected)
{
    /* After tune-ok frame_max=4096 the broker's frames stay within it. */
    struct rawsock rs;
    struct rs_login o = { .frame_max = 4096 };
    struct rs_frame f;
    char q[64];
    static char body[10000];
    size_t got = 0;

    memset(body, 'x', sizeof(body));
    raw_open(&rs, H, &o);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    ck_assert_int_eq(rs_queue_declare(&rs, 1, h_name(q, sizeof(q), "fm"), false,
                                      false, true),
                     0);
    ck_assert_int_eq(rs_expect_method(&rs, 1, RS_QUEUE_DECLARE_OK, 5000, NULL),
                     0);
    ck_assert_int_eq(rs_basic_publish(&rs, 1, "", q, body, sizeof(body)), 0);
    ck_assert_int_eq(rs_basic_get(&rs, 1, q, true), 0);
    ck_assert_int_eq(rs_expect_method(&rs, 1, RS_BASIC_GET_OK, 5000, NULL), 0);
    ck_assert_int_eq(rs_read_frame(&rs, &f, 5000), 1);
    ck_assert_int_eq(f.type, RS_FRAME_HEADER);
    ck_assert_uint_eq(rs_load64(f.payload + 4), sizeof(body));
    rs_frame_free(&f);
    while (got < sizeof(body)) {
        ck_assert_int_eq(rs_read_frame(&rs, &f, 5000), 1);
        ck_assert_int_eq(f.type, RS_FRAME_BODY);
        ck_assert_msg(f.size + 8 <= 4096,
                      "body frame of %u bytes with frame_max 4096", f.size + 8);
        got += f.size;
        rs_frame_free(&f);
    }
    ck_assert_uint_eq(got, sizeof(body));
    rs_close(&rs);
}
END_TEST

/*
 * A tune-ok the server cannot accept. 0-9-1 (connection.tune-ok frame-max):
 * "the server MUST close the connection without attempting a negotiated
 * close"; RabbitMQ 3.10 does that for every bad value (after a 3 s delay
 * against floods): the socket closes and no connection.close is sent.
 */
static void
expect_tune_dropped(const struct harness *h, uint16_t channel_max,
                    uint32_t frame_max)
{
    struct rawsock rs;
    struct rs_login o = { .exact_tune = true,
                          .channel_max = channel_max,
                          .frame_max = frame_max };
    int code;

    raw_started(&rs, h);
    ck_assert_int_eq(rs_send_start_ok(&rs, NULL), 0);
    ck_assert_int_eq(rs_expect_tune(&rs, 5000), 0);
    ck_assert_int_eq(rs_send_tune_ok(&rs, &o), 0);
    /* Then open, as a client that did not wait would. */
    ck_assert_int_eq(rs_send_open(&rs, "/"), 0);
    for (;;) {
        struct rs_frame f;
        int r = rs_read_frame(&rs, &f, 8000);
        ck_assert_msg(r != -1,
                      "tune-ok channel_max=%u frame_max=%u accepted: "
                      "the connection is still open after 8 s",
                      channel_max, frame_max);
        if (r != 1)
            break;
        code =
            f.method == RS_CONNECTION_CLOSE ? (int)rs_load16(f.payload + 4) : 0;
        ck_assert_msg(f.method != RS_CONNECTION_OPEN_OK,
                      "tune-ok channel_max=%u frame_max=%u accepted (open-ok)",
                      channel_max, frame_max);
        ck_assert_msg(code == 0,
                      "tune-ok channel_max=%u frame_max=%u: expected "
                      "the socket closed without a negotiated close, got "
                      "connection.close %d \"%.*s\"",
                      channel_max, frame_max, code, (int)f.payload[6],
                      (const char *)f.payload + 7);
        rs_frame_free(&f);
    }
    rs_close(&rs);
}

START_TEST(tune_frame_max_above_server)
{
    expect_tune_dropped(H, 2047, 131073);
}
END_TEST

START_TEST(tune_frame_max_below_minimum)
{
    expect_tune_dropped(H, 2047, 4095);
}
END_TEST

START_TEST(tune_channel_max_above_server)
{
    expect_tune_dropped(H, 2048, 131072);
}
END_TEST

/*
 * docs/compatibility.md: Roost follows 0-9-1 for a 0 in tune-ok ("no limit
 * of the client's own": the server's offer stands); RabbitMQ 3.10 drops
 * the socket instead.
 */
static void
expect_tune_accepted(const struct harness *h, uint16_t channel_max,
                     uint32_t frame_max)
{
    struct rawsock rs;
    struct rs_login o = { .exact_tune = true,
                          .channel_max = channel_max,
                          .frame_max = frame_max };
    bool opened = false;

    raw_started(&rs, h);
    ck_assert_int_eq(rs_send_start_ok(&rs, NULL), 0);
    ck_assert_int_eq(rs_expect_tune(&rs, 5000), 0);
    ck_assert_int_eq(rs_send_tune_ok(&rs, &o), 0);
    ck_assert_int_eq(rs_send_open(&rs, "/"), 0);
    while (!opened) {
        struct rs_frame f;
        int r = rs_read_frame(&rs, &f, 5000);
        ck_assert_msg(r == 1, "tune-ok channel_max=%u frame_max=%u: no "
                      "open-ok (read %d)", channel_max, frame_max, r);
        ck_assert_msg(f.method != RS_CONNECTION_CLOSE,
                      "tune-ok channel_max=%u frame_max=%u refused: %.*s",
                      channel_max, frame_max, (int)f.payload[6],
                      (const char *)f.payload + 7);
        opened = f.method == RS_CONNECTION_OPEN_OK;
        rs_frame_free(&f);
    }
    rs_close(&rs);
}

START_TEST(tune_zero_frame_max)
{
    SKIP_IF_REMOTE("documented difference");
    expect_tune_accepted(H, 2047, 0);
}
END_TEST

START_TEST(tune_zero_channel_max)
{
    SKIP_IF_REMOTE("documented difference");
    expect_tune_accepted(H, 0, 131072);
}
END_TEST

/* ---- heartbeats ---- */

START_TEST(heartbeat_sent_by_server)
{
    struct rawsock rs;
    struct rs_login o = { .heartbeat = 1 };
    int beats = 0;

    raw_open(&rs, H, &o);
    /* For 3.2 s, beat every 400 ms ourselves and count the server's. */
    uint64_t end = h_now_ms() + 3200;
    while (h_now_ms() < end) {
        struct rs_frame f;
        ck_assert_int_eq(rs_send_heartbeat(&rs), 0);
        int r = rs_read_frame(&rs, &f, 400);
        ck_assert_msg(r != 0, "connection dropped although we beat");
        if (r == 1) {
            ck_assert_msg(f.type == RS_FRAME_HEARTBEAT && f.channel == 0,
                          "unexpected frame type %u on channel %u", f.type,
                          f.channel);
            beats++;
            rs_frame_free(&f);
        }
    }
    ck_assert_msg(beats >= 2, "only %d heartbeats in 3.2 s with heartbeat=1",
                  beats);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    rs_close(&rs);
}
END_TEST

START_TEST(heartbeat_silent_client_dropped)
{
    struct rawsock rs;
    struct rs_login o = { .heartbeat = 1 };

    raw_open(&rs, H, &o);
    long waited = rs_wait_eof(&rs, 8000, NULL);
    ck_assert_msg(waited >= 0, "a client silent for 8 s with heartbeat=1 is "
                               "still connected");
    ck_assert_msg(waited >= 1500, "dropped after %ld ms, before two intervals",
                  waited);
    rs_close(&rs);
}
END_TEST

START_TEST(heartbeat_answering_client_stays)
{
    /* A client that only answers the server's heartbeats: RabbitMQ sends
     * one every half interval, so with heartbeat=1 the client is never
     * silent for two intervals, even when other output makes a beat
     * skip. */
    struct rawsock rs;
    struct rs_login o = { .heartbeat = 1 };
    int beats = 0;

    raw_open(&rs, H, &o);
    uint64_t end = h_now_ms() + 4000;
    while (h_now_ms() < end) {
        struct rs_frame f;
        int r = rs_read_frame(&rs, &f, 1500);
        ck_assert_msg(r != 0, "dropped after %d heartbeats although it "
                              "answered each", beats);
        ck_assert_msg(r == 1, "no heartbeat within 1.5 s with heartbeat=1");
        ck_assert_msg(f.type == RS_FRAME_HEARTBEAT && f.channel == 0,
                      "unexpected frame type %u on channel %u", f.type,
                      f.channel);
        rs_frame_free(&f);
        beats++;
        ck_assert_int_eq(rs_send_heartbeat(&rs), 0);
    }
    ck_assert_msg(beats >= 6, "only %d heartbeats in 4 s with heartbeat=1 "
                              "(RabbitMQ sends one every 0.5 s)", beats);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    rs_close(&rs);
}
END_TEST

START_TEST(heartbeat_rabbitmq_c_client_stays)
{
    /* rabbitmq-c beats while it waits; the connection survives 3 s idle. */
    struct hconn_opts o = { .heartbeat = 1 };
    amqp_connection_state_t c = h_connect_opts(H, &o, NULL);
    ck_assert_int_eq(amqp_get_heartbeat(c), 1);
    EXPECT_SILENCE(c, 3000);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
}
END_TEST

/* ---- connection.open ---- */

START_TEST(open_unknown_vhost)
{
    struct hconn_opts o = { .vhost = "nope" };
    amqp_rpc_reply_t r;

    ck_assert(h_connect_opts(H, &o, &r) == NULL);
    ck_assert_int_eq(r.reply_type, AMQP_RESPONSE_SERVER_EXCEPTION);
    ck_assert_int_eq(r.reply.id, AMQP_CONNECTION_CLOSE_METHOD);
    amqp_connection_close_t *m = r.reply.decoded;
    ck_assert_int_eq(m->reply_code, 530);
    ck_assert_msg(strncmp(m->reply_text.bytes,
                          "NOT_ALLOWED - vhost nope not found",
                          m->reply_text.len) == 0 &&
                      m->reply_text.len == 34,
                  "text \"%.*s\"", (int)m->reply_text.len,
                  (const char *)m->reply_text.bytes);
}
END_TEST

START_TEST(open_configured_vhost)
{
    struct harness h;
    struct hconn_opts other = { .vhost = "/other" }, slash = { 0 };
    amqp_rpc_reply_t r;

    if (!harness_start(&h, ARGS("--set", "default_vhost=/other")))
        return;
    h_close(h_connect_opts(&h, &other, NULL));
    ck_assert(h_connect_opts(&h, &slash, &r) == NULL);
    ck_assert_int_eq(((amqp_connection_close_t *)r.reply.decoded)->reply_code,
                     530);
    harness_stop(&h);
}
END_TEST

/* ---- handshake timeout ---- */

START_TEST(handshake_timeout_silent)
{
    struct harness h;
    struct rawsock rs;

    if (!harness_start(&h, ARGS("--set", "handshake_timeout=500")))
        return;
    ck_assert_int_eq(rs_connect(&rs, h.host, h.port, 0), 0);
    long waited = rs_wait_eof(&rs, 5000, NULL);
    ck_assert_msg(waited >= 0, "a silent client is not dropped within 5 s");
    ck_assert_msg(waited >= 400, "dropped after %ld ms, before the timeout",
                  waited);
    rs_close(&rs);
    harness_stop(&h);
}
END_TEST

START_TEST(handshake_timeout_midway)
{
    /* Header and start-ok, then nothing: dropped as well. */
    struct harness h;
    struct rawsock rs;

    if (!harness_start(&h, ARGS("--set", "handshake_timeout=500")))
        return;
    raw_started(&rs, &h);
    ck_assert_int_eq(rs_send_start_ok(&rs, NULL), 0);
    ck_assert_int_eq(rs_expect_tune(&rs, 5000), 0);
    ck_assert_msg(rs_wait_eof(&rs, 5000, NULL) >= 0,
                  "a client stuck after tune is not dropped");
    rs_close(&rs);
    /* An open connection is not subject to the timeout. */
    amqp_connection_state_t c = h_connect(&h);
    h_sleep_ms(800);
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
    harness_stop(&h);
}
END_TEST

/* ---- close ---- */

START_TEST(close_by_client)
{
    struct rawsock rs;
    struct rs_buf b;

    raw_open(&rs, H, NULL);
    rb_init(&b);
    rb_u16(&b, 200);
    rb_shortstr(&b, "bye");
    rb_u16(&b, 0);
    rb_u16(&b, 0);
    ck_assert_int_eq(rs_send_method(&rs, 0, RS_CONNECTION_CLOSE, b.p, b.len),
                     0);
    rb_free(&b);
    ck_assert_int_eq(
        rs_expect_method(&rs, 0, RS_CONNECTION_CLOSE_OK, 5000, NULL), 0);
    /* The client closes the socket now (RabbitMQ waits 30 s for it). */
    rs_close(&rs);
    /* and with rabbitmq-c */
    h_close(h_connect(H));
}
END_TEST

START_TEST(close_by_server)
{
    /* A second channel.open on channel 1 is a connection error (504); the
     * broker ignores what follows its close until close-ok, then drops
     * the socket. */
    struct rawsock rs;
    uint8_t reserved = 0;
    struct rs_frame f;

    raw_open(&rs, H, NULL);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    ck_assert_int_eq(rs_send_method(&rs, 1, RS_CHANNEL_OPEN, &reserved, 1), 0);
    ck_assert_int_eq(rs_expect_method(&rs, 0, RS_CONNECTION_CLOSE, 5000, NULL),
                     0);
    ck_assert_int_eq(rs.close_code, 504);
    ck_assert_int_eq(rs.close_class, 20);
    ck_assert_int_eq(rs.close_method, 10);
    /* Ignored: */
    ck_assert_int_eq(rs_send_method(&rs, 2, RS_CHANNEL_OPEN, &reserved, 1), 0);
    ck_assert_int_eq(rs_send_method(&rs, 0, RS_CONNECTION_CLOSE_OK, NULL, 0),
                     0);
    int r = rs_read_frame(&rs, &f, 5000);
    ck_assert_msg(r == 0,
                  "expected EOF after close-ok, got %s (type %u method 0x%x)",
                  r == 1 ? "a frame" : "a timeout", f.type, f.method);
    rs_close(&rs);
}
END_TEST

START_TEST(close_by_server_without_close_ok)
{
    /* A client that never answers the close is dropped after
     * close_timeout. */
    struct harness h;
    struct rawsock rs;
    uint8_t reserved = 0;

    if (!harness_start(&h, ARGS("--set", "close_timeout=300")))
        return;
    raw_open(&rs, &h, NULL);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    ck_assert_int_eq(rs_send_method(&rs, 1, RS_CHANNEL_OPEN, &reserved, 1), 0);
    ck_assert_int_eq(rs_expect_method(&rs, 0, RS_CONNECTION_CLOSE, 5000, NULL),
                     0);
    long waited = rs_wait_eof(&rs, 5000, NULL);
    ck_assert_msg(waited >= 0, "not dropped without close-ok");
    rs_close(&rs);
    harness_stop(&h);
}
END_TEST

/* connection.open again, or a close-ok nobody asked for, on an open
 * connection: RabbitMQ's 504, naming the method. */
static void
expect_running_504(uint32_t method, const void *args, size_t len)
{
    struct rawsock rs;

    raw_open(&rs, H, NULL);
    ck_assert_int_eq(rs_send_method(&rs, 0, method, args, len), 0);
    ck_assert_int_eq(rs_expect_close(&rs, 5000), 504);
    ck_assert_str_eq(rs.close_text, "CHANNEL_ERROR - unexpected method in "
                                    "connection state running");
    ck_assert_uint_eq(rs.close_class, method >> 16);
    ck_assert_uint_eq(rs.close_method, method & 0xffff);
    rs_close(&rs);
}

START_TEST(second_connection_open_504)
{
    struct rs_buf b;

    rb_init(&b);
    rb_shortstr(&b, "/");
    rb_shortstr(&b, "");
    rb_u8(&b, 0);
    expect_running_504(RS_CONNECTION_OPEN, b.p, b.len);
    rb_free(&b);
}
END_TEST

START_TEST(unasked_close_ok_504)
{
    expect_running_504(RS_CONNECTION_CLOSE_OK, NULL, 0);
}
END_TEST

START_TEST(handshake_method_when_open_504)
{
    struct rs_buf b;

    rb_init(&b);
    rb_u16(&b, 0);
    rb_u32(&b, 131072);
    rb_u16(&b, 0);
    expect_running_504(RS_CONNECTION_TUNE_OK, b.p, b.len);
    rb_free(&b);
}
END_TEST

START_TEST(exclusive_redeclared_shared_405)
{
    /* The exclusive flag must match the queue's also on its own
     * connection: RabbitMQ answers 405, as for the other way round. */
    amqp_connection_state_t c = h_connect(H);
    char q[256], name[64];

    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "excl-redeclare"), false,
                  true, false, q);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 0, 0, 0, 0,
                       amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 405,
                         "RESOURCE_LOCKED - cannot obtain exclusive access "
                         "to locked queue");
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
    /* Passive, and with the same flag, it is still there. */
    amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 1, 0, 0, 0,
                       amqp_empty_table);
    EXPECT_OK(c, "passive declare");
    DECLARE_QUEUE(c, 1, q, false, true, false, q);
    h_close(c);
}
END_TEST

START_TEST(log_escapes_del)
{
    /* A queue name reaches a log line (x-expires) as it was sent: its
     * DEL (0x7f) is escaped there as every control byte is. */
    amqp_connection_state_t c;
    amqp_table_entry_t e = { .key = amqp_cstring_bytes("x-expires") };
    char q[256], name[64], want[128];

    SKIP_IF_REMOTE("reads roostd's log");
    c = h_connect(H);
    h_name(name, sizeof(name), "del\x7f" "q");
    e.value.kind = AMQP_FIELD_KIND_I32;
    e.value.value.i32 = 50;
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, false, false, false,
                       h_table(&e, 1), q, NULL, NULL);
    h_close(c);
    snprintf(want, sizeof(want), "queue 't%d-del\\x7fq' in vhost '/' unused",
             (int)getpid());
    uint64_t end = h_now_ms() + 5000;
    while (!harness_log_contains(H, want) && h_now_ms() < end)
        h_sleep_ms(20);
    ck_assert_msg(harness_log_contains(H, want), "no log line with \"%s\"",
                  want);
    ck_assert_msg(!harness_log_contains(H, "\x7f"), "a raw DEL is in the log");
}
END_TEST

START_TEST(update_secret_ok)
{
    /* As RabbitMQ 3.10 for an internal user: update-secret-ok, the
     * secret not checked, and the connection goes on. */
    struct rawsock rs;
    struct rs_buf b;

    raw_open(&rs, H, NULL);
    rb_init(&b);
    rb_longstr(&b, "token", 5);
    rb_shortstr(&b, "refresh");
    ck_assert_int_eq(rs_send_method(&rs, 0, RS_M(10, 70), b.p, b.len), 0);
    rb_free(&b);
    ck_assert_int_eq(rs_expect_method(&rs, 0, RS_M(10, 71), 5000, NULL), 0);
    /* Still open: a channel opens. */
    rb_init(&b);
    rb_shortstr(&b, "");
    ck_assert_int_eq(rs_send_method(&rs, 1, RS_M(20, 10), b.p, b.len), 0);
    rb_free(&b);
    ck_assert_int_eq(rs_expect_method(&rs, 1, RS_M(20, 11), 5000, NULL), 0);
    rs_close(&rs);
}
END_TEST

/* ---- guest and loopback ---- */

/* A non-loopback address of this machine to connect from, or false
 * (the test 'fn' skips itself, saying so). */
static bool
elsewhere(char *addr, size_t len, const char *fn)
{
    if (h_non_loopback_ipv4(addr, len))
        return true;
    fprintf(stderr, "%s: skipped: this machine has no non-loopback IPv4 "
            "address to connect from\n", fn);
    return false;
}

START_TEST(loopback_guest_from_loopback)
{
    struct hconn_opts o = { .host = "127.0.0.1" };
    h_close(h_connect_opts(H, &o, NULL));
}
END_TEST

START_TEST(loopback_guest_refused_elsewhere)
{
    char addr[64];
    struct hconn_opts o = { .host = addr };
    amqp_rpc_reply_t r;

    SKIP_IF_REMOTE("the reference broker listens on 127.0.0.1 only");
    if (!elsewhere(addr, sizeof(addr), __func__))
        return;
    ck_assert(h_connect_opts(H, &o, &r) == NULL);
    ck_assert_int_eq(r.reply_type, AMQP_RESPONSE_SERVER_EXCEPTION);
    amqp_connection_close_t *m = r.reply.decoded;
    ck_assert_int_eq(m->reply_code, 403);
}
END_TEST

/* Settings that let guest in from elsewhere: its own entry false, or
 * nobody held to loopback. */
static const char *const guest_free[] = { "loopback_users.guest=false",
                                          "loopback_users=none" };

START_TEST(loopback_guest_allowed_when_configured)
{
    char addr[64];
    struct harness h;
    struct hconn_opts o = { .host = addr };

    SKIP_IF_REMOTE("the reference broker listens on 127.0.0.1 only");
    if (!elsewhere(addr, sizeof(addr), __func__))
        return;
    harness_start(&h, ARGS("--set", guest_free[_i]));
    h_close(h_connect_opts(&h, &o, NULL));
    harness_stop(&h);
}
END_TEST

START_TEST(loopback_other_user_elsewhere)
{
    char addr[64];
    struct harness h;
    struct hconn_opts o = { .host = addr, .user = "alice", .pass = "pw" };

    SKIP_IF_REMOTE("the reference broker listens on 127.0.0.1 only");
    if (!elsewhere(addr, sizeof(addr), __func__))
        return;
    harness_start(
        &h, ARGS("--set", "default_user=alice", "--set", "default_pass=pw"));
    h_close(h_connect_opts(&h, &o, NULL));
    harness_stop(&h);
}
END_TEST

START_TEST(loopback_users_named)
{
    /* RabbitMQ's loopback_users.NAME: once an entry is set, the users set
     * to true are held to loopback, and guest no longer is. */
    char addr[64];
    struct harness h;
    struct hconn_opts alice = { .host = addr, .user = "alice", .pass = "pw" };
    struct hconn_opts local = { .host = "127.0.0.1", .user = "alice",
                                .pass = "pw" };
    amqp_rpc_reply_t r;

    SKIP_IF_REMOTE("the reference broker listens on 127.0.0.1 only");
    if (!elsewhere(addr, sizeof(addr), __func__))
        return;
    harness_start(&h, ARGS("--set", "default_user=alice", "--set",
                           "default_pass=pw", "--set",
                           "loopback_users.alice=true"));
    ck_assert(h_connect_opts(&h, &alice, &r) == NULL);
    ck_assert_int_eq(r.reply_type, AMQP_RESPONSE_SERVER_EXCEPTION);
    ck_assert(harness_log_contains(&h, "user 'alice' can only connect via "
                                       "localhost"));
    h_close(h_connect_opts(&h, &local, NULL));
    harness_stop(&h);
}
END_TEST

/* ---- shutdown ---- */

START_TEST(sigterm_closes_connections_320)
{
    struct rawsock rs;
    struct h_event e;

    SKIP_IF_REMOTE("cannot signal the remote broker");
    amqp_connection_state_t c = h_connect(H);
    raw_open(&rs, H, NULL);
    harness_kill(H, SIGTERM);
    ck_assert_int_eq(rs_expect_close(&rs, 5000), 320);
    ck_assert_str_eq(rs.close_text,
                     "CONNECTION_FORCED - broker forced connection "
                     "closure with reason 'shutdown'");
    ck_assert_msg(rs_wait_eof(&rs, 5000, NULL) >= 0,
                  "socket open after close-ok");
    rs_close(&rs);
    ck_assert_int_eq(h_next(c, 5000, &e), 1);
    ck_assert_int_eq(e.id, AMQP_CONNECTION_CLOSE_METHOD);
    ck_assert_int_eq(e.code, 320);
    amqp_connection_close_ok_t ok = { 0 };
    (void)amqp_send_method(c, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    amqp_destroy_connection(c);
    /* The teardown checks that roostd exits with status 0. */
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("connection");
    TCase *tc;

    tc = h_tcase(s, "protocol header", 20, true);
    tcase_add_test(tc, header_other_version);
    tcase_add_test(tc, header_http);
    tcase_add_test(tc, header_amqp_0_9_refused);
    tcase_add_test(tc, header_then_correct_client_works);

    tc = h_tcase(s, "connection.start", 20, true);
    tcase_add_test(tc, start_server_properties);
    tcase_add_test(tc, start_cluster_name);
    tcase_add_test(tc, start_server_properties_own_name);
    tcase_add_test(tc, start_capabilities_exact);
    tcase_add_test(tc, start_mechanisms);

    tc = h_tcase(s, "login", 20, true);
    tcase_add_test(tc, login_plain);
    tcase_add_test(tc, login_amqplain);
    tcase_add_test(tc, login_amqplain_bad_password);
    tcase_add_test(tc, login_bad_password_403);
    tcase_add_test(tc, login_unknown_user_403);
    tcase_add_test(tc, login_bad_password_silent_without_capability);
    tcase_add_test(tc, login_unsupported_mechanism);
    tcase_add_test(tc, login_configured_default_user);

    tc = h_tcase(s, "tune", 20, true);
    tcase_add_test(tc, tune_defaults);
    tcase_add_test(tc, tune_configured);
    tcase_add_test(tc, tune_client_lowers);
    tcase_add_test(tc, tune_client_frame_max_respected);
    tcase_add_test(tc, tune_frame_max_above_server);
    tcase_add_test(tc, tune_frame_max_below_minimum);
    tcase_add_test(tc, tune_channel_max_above_server);
    tcase_add_test(tc, tune_zero_frame_max);
    tcase_add_test(tc, tune_zero_channel_max);

    tc = h_tcase(s, "heartbeat", 20, true);
    tcase_add_test(tc, heartbeat_sent_by_server);
    tcase_add_test(tc, heartbeat_silent_client_dropped);
    tcase_add_test(tc, heartbeat_answering_client_stays);
    tcase_add_test(tc, heartbeat_rabbitmq_c_client_stays);

    tc = h_tcase(s, "connection.open", 20, true);
    tcase_add_test(tc, open_unknown_vhost);
    tcase_add_test(tc, open_configured_vhost);

    tc = h_tcase(s, "handshake timeout", 20, true);
    tcase_add_test(tc, handshake_timeout_silent);
    tcase_add_test(tc, handshake_timeout_midway);

    tc = h_tcase(s, "close", 20, true);
    tcase_add_test(tc, close_by_client);
    tcase_add_test(tc, close_by_server);
    tcase_add_test(tc, close_by_server_without_close_ok);
    tcase_add_test(tc, update_secret_ok);
    tcase_add_test(tc, second_connection_open_504);
    tcase_add_test(tc, unasked_close_ok_504);
    tcase_add_test(tc, handshake_method_when_open_504);
    tcase_add_test(tc, exclusive_redeclared_shared_405);
    tcase_add_test(tc, log_escapes_del);

    tc = h_tcase(s, "loopback users", 20, true);
    tcase_add_test(tc, loopback_guest_from_loopback);
    tcase_add_test(tc, loopback_guest_refused_elsewhere);
    tcase_add_loop_test(tc, loopback_guest_allowed_when_configured, 0,
                        sizeof(guest_free) / sizeof(guest_free[0]));
    tcase_add_test(tc, loopback_users_named);
    tcase_add_test(tc, loopback_other_user_elsewhere);

    tc = h_tcase(s, "shutdown", 20, true);
    tcase_add_test(tc, sigterm_closes_connections_320);

    return h_run(s);
}
