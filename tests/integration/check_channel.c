/*
 * SPDX-License-Identifier: Apache-2.0
 * Channels against a real roostd: open, close and close-ok in both
 * directions, channel_max, methods on channels that are not open (504),
 * content frames out of order (505), what a channel error does to the
 * channel's unacknowledged messages and to the connection's other
 * channels, and channel.flow.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/rawsock.h"

static void
raw_open(struct rawsock *rs, const struct rs_login *o)
{
    ck_assert_msg(rs_open(rs, H->host, H->port, o) == 0,
                  "raw handshake failed (close %u \"%s\")", rs->close_code,
                  rs->close_text);
}

/* queue.declare passive=true of a queue that does not exist: a 404. */
static void
raw_declare_missing(struct rawsock *rs, uint16_t ch)
{
    struct rs_buf b;
    rb_init(&b);
    rb_u16(&b, 0);
    rb_shortstr(&b, "no-such-queue-for-roost");
    rb_u8(&b, 1); /* passive */
    rb_u32(&b, 0);
    ck_assert_int_eq(rs_send_method(rs, ch, RS_QUEUE_DECLARE, b.p, b.len), 0);
    rb_free(&b);
}

static void
expect_raw_conn_close(struct rawsock *rs, int code, const char *prefix)
{
    int got = rs_expect_close(rs, 5000);
    H_ASSERT(got == code, "expected connection.close %d, got %s %d \"%s\"",
             code,
             got == 0  ? "EOF"
             : got < 0 ? "timeout"
                       : "close",
             got, rs->close_text);
    if (prefix)
        H_ASSERT(strncmp(rs->close_text, prefix, strlen(prefix)) == 0,
                 "text \"%s\" does not start with \"%s\"", rs->close_text,
                 prefix);
}

/* ---- open and close ---- */

START_TEST(open_close_reopen)
{
    amqp_connection_state_t c = h_connect(H);

    for (amqp_channel_t ch = 2; ch <= 4; ch++) {
        amqp_channel_open(c, ch);
        EXPECT_OK(c, "channel.open");
    }
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_channel_close(c, 3, AMQP_REPLY_SUCCESS),
                   "channel.close 3");
    /* The number is free again. */
    amqp_channel_open(c, 3);
    EXPECT_OK(c, "channel.open 3 again");
    for (amqp_channel_t ch = 1; ch <= 4; ch++)
        ck_assert_int_eq(SYNC(c, ch, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(close_by_server_then_reopen)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_queue_declare(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"), 1,
                       0, 0, 0, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 404,
                         "NOT_FOUND - no queue 'no-such-queue-for-roost' "
                         "in vhost '/'");
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open after a server close");
    ck_assert_int_eq(SYNC(c, 1, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(methods_after_server_close_ignored)
{
    /* Until close-ok, the broker drops whatever else comes on the
     * channel; after it, the channel can be opened again. */
    struct rawsock rs;
    struct rs_frame f;

    raw_open(&rs, NULL);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    raw_declare_missing(&rs, 1);
    ck_assert_int_eq(rs_expect_method(&rs, 1, RS_CHANNEL_CLOSE, 5000, NULL), 0);
    ck_assert_int_eq(rs.close_code, 404);
    raw_declare_missing(&rs, 1);
    ck_assert_int_eq(rs_basic_publish(&rs, 1, "", "x", "body", 4), 0);
    ck_assert_int_eq(rs_send_method(&rs, 1, RS_CHANNEL_CLOSE_OK, NULL, 0), 0);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    /* Nothing else arrived in between (rs_channel_open would have failed),
     * and nothing follows. */
    ck_assert_int_eq(rs_read_frame(&rs, &f, 300), -1);
    rs_close(&rs);
}
END_TEST

START_TEST(close_crossing_server_close)
{
    /* The client closes while the server closes the channel for an
     * error: as RabbitMQ, the server answers the client's close with
     * close-ok and ends the channel at the client's close-ok; the
     * connection stays. */
    struct rawsock rs;
    struct rs_frame f;

    raw_open(&rs, NULL);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    raw_declare_missing(&rs, 1);
    ck_assert_int_eq(rs_send_method(&rs, 1, RS_CHANNEL_CLOSE,
                                    "\x00\xc8\x00\x00\x00\x00\x00", 7),
                     0);
    ck_assert_int_eq(rs_expect_method(&rs, 1, RS_CHANNEL_CLOSE, 5000, NULL), 0);
    ck_assert_int_eq(rs.close_code, 404);
    ck_assert_msg(rs_expect_method(&rs, 1, RS_CHANNEL_CLOSE_OK, 5000, NULL) ==
                      0,
                  "no close-ok for the crossing close (connection.close %u "
                  "\"%s\")", rs.close_code, rs.close_text);
    ck_assert_int_eq(rs_send_method(&rs, 1, RS_CHANNEL_CLOSE_OK, NULL, 0), 0);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    ck_assert_int_eq(rs_read_frame(&rs, &f, 300), -1);
    rs_close(&rs);
}
END_TEST

/* ---- channel_max ---- */

START_TEST(channel_max_negotiated_by_client)
{
    struct hconn_opts o = { .channel_max = 3 };
    amqp_connection_state_t c = h_connect_opts(H, &o, NULL);

    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open 2");
    amqp_channel_open(c, 3);
    EXPECT_OK(c, "channel.open 3");
    h_close(c);
    /* rabbitmq-c refuses to send above its channel_max: go raw. */

    struct rawsock rs;
    struct rs_login lo = { .channel_max = 3 };
    raw_open(&rs, &lo);
    for (uint16_t ch = 1; ch <= 3; ch++)
        ck_assert_int_eq(rs_channel_open(&rs, ch), 0);
    uint8_t reserved = 0;
    ck_assert_int_eq(rs_send_method(&rs, 4, RS_CHANNEL_OPEN, &reserved, 1), 0);
    expect_raw_conn_close(&rs, 530, "NOT_ALLOWED - ");
    rs_close(&rs);
}
END_TEST

START_TEST(channel_max_counts_open_channels)
{
    /* As RabbitMQ: channel_max bounds how many channels are open, not
     * their numbers; the one beyond the count is 530. */
    struct rawsock rs;
    struct rs_login lo = { .channel_max = 2 };
    uint8_t reserved = 0;

    raw_open(&rs, &lo);
    ck_assert_int_eq(rs_channel_open(&rs, 65535), 0);
    ck_assert_int_eq(rs_channel_open(&rs, 7), 0);
    ck_assert_int_eq(rs_send_method(&rs, 3, RS_CHANNEL_OPEN, &reserved, 1), 0);
    expect_raw_conn_close(&rs, 530,
                          "NOT_ALLOWED - number of channels opened (2) has "
                          "reached the negotiated channel_max (2)");
    ck_assert_uint_eq(rs.close_class, 0);
    rs_close(&rs);

    /* A closed channel no longer counts. */
    raw_open(&rs, &lo);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    ck_assert_int_eq(rs_channel_open(&rs, 2), 0);
    ck_assert_int_eq(rs_send_method(&rs, 1, RS_CHANNEL_CLOSE,
                                    "\x00\xc8\x00\x00\x00\x00\x00", 7),
                     0);
    ck_assert_int_eq(rs_expect_method(&rs, 1, RS_CHANNEL_CLOSE_OK, 5000, NULL),
                     0);
    ck_assert_int_eq(rs_channel_open(&rs, 3), 0);
    rs_close(&rs);
}
END_TEST

/* High channel numbers (kept in a map, not the array) work like low ones:
 * open, publish, get, close, open again. */
START_TEST(high_channel_numbers_work)
{
    amqp_connection_state_t c = h_connect(H);
    static const amqp_channel_t nums[] = { 255, 256, 40000, 65535 };
    char q[256];
    struct h_event e;

    DECLARE_QUEUE(c, 1, "", false, true, false, q);
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
            char body[32];
            amqp_channel_open(c, nums[i]);
            EXPECT_OK(c, "channel.open");
            snprintf(body, sizeof(body), "on-%u", nums[i]);
            PUBLISH(c, nums[i], "", q, body);
            ck_assert_int_eq(GET(c, nums[i], q, true, &e), 1);
            ck_assert_str_eq(e.body, body);
            h_event_free(&e);
        }
        for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
            amqp_channel_close(c, nums[i], AMQP_REPLY_SUCCESS);
            EXPECT_OK(c, "channel.close");
        }
    }
    h_close(c);
}
END_TEST

START_TEST(channel_max_configured)
{
    struct harness h;
    struct rawsock rs;
    uint8_t reserved = 0;

    if (!harness_start(&h, ARGS("--set", "channel_max=2")))
        return;
    amqp_connection_state_t c = h_connect(&h);
    ck_assert_int_eq(amqp_get_channel_max(c), 2);
    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open 2");
    h_close(c);
    ck_assert_int_eq(rs_open(&rs, h.host, h.port, NULL), 0);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    ck_assert_int_eq(rs_channel_open(&rs, 2), 0);
    ck_assert_int_eq(rs_send_method(&rs, 3, RS_CHANNEL_OPEN, &reserved, 1), 0);
    ck_assert_int_eq(rs_expect_close(&rs, 5000), 530);
    rs_close(&rs);
    harness_stop(&h);
}
END_TEST

/* ---- content frames out of order ---- */

static void
send_header(struct rawsock *rs, uint16_t ch, uint64_t size)
{
    struct rs_buf b;
    rb_init(&b);
    rb_u16(&b, 60);
    rb_u16(&b, 0);
    rb_u64(&b, size);
    rb_u16(&b, 0);
    ck_assert_int_eq(rs_send_frame(rs, RS_FRAME_HEADER, ch, b.p, b.len), 0);
    rb_free(&b);
}

static void
send_publish(struct rawsock *rs, uint16_t ch, const char *key)
{
    struct rs_buf b;
    rb_init(&b);
    rb_u16(&b, 0);
    rb_shortstr(&b, "");
    rb_shortstr(&b, key);
    rb_u8(&b, 0);
    ck_assert_int_eq(rs_send_method(rs, ch, RS_BASIC_PUBLISH, b.p, b.len), 0);
    rb_free(&b);
}

START_TEST(interleaved_content_on_two_channels)
{
    /* Content is assembled per channel: frames of two publishes on two
     * channels may interleave. */
    struct rawsock rs;
    char q[64];
    struct rs_frame f;

    raw_open(&rs, NULL);
    ck_assert_int_eq(rs_channel_open(&rs, 1), 0);
    ck_assert_int_eq(rs_channel_open(&rs, 2), 0);
    ck_assert_int_eq(rs_queue_declare(&rs, 1, h_name(q, sizeof(q), "il"), false,
                                      true, false),
                     0);
    ck_assert_int_eq(rs_expect_method(&rs, 1, RS_QUEUE_DECLARE_OK, 5000, NULL),
                     0);
    send_publish(&rs, 1, q);
    send_publish(&rs, 2, q);
    send_header(&rs, 2, 3);
    send_header(&rs, 1, 3);
    ck_assert_int_eq(rs_send_frame(&rs, RS_FRAME_BODY, 1, "one", 3), 0);
    ck_assert_int_eq(rs_send_frame(&rs, RS_FRAME_BODY, 2, "two", 3), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(rs_basic_get(&rs, 1, q, true), 0);
        ck_assert_int_eq(rs_expect_method(&rs, 1, RS_BASIC_GET_OK, 5000, NULL),
                         0);
        ck_assert_int_eq(rs_read_frame(&rs, &f, 5000), 1);
        ck_assert_int_eq(f.type, RS_FRAME_HEADER);
        rs_frame_free(&f);
        ck_assert_int_eq(rs_read_frame(&rs, &f, 5000), 1);
        ck_assert_int_eq(f.type, RS_FRAME_BODY);
        ck_assert_msg(f.size == 3 &&
                          memcmp(f.payload, i == 0 ? "one" : "two", 3) == 0,
                      "message %d has the wrong body", i);
        rs_frame_free(&f);
    }
    rs_close(&rs);
}
END_TEST

/* ---- frames refused with connection.close ---- */

/* Send what 'expr' sends, or fail naming it. */
#define SENT(expr) H_ASSERT((expr) == 0, "%s", #expr)

static void
send_channel_open(struct rawsock *rs)
{
    uint8_t reserved = 0;

    SENT(rs_send_method(rs, 1, RS_CHANNEL_OPEN, &reserved, 1));
}

static void
send_close_ok(struct rawsock *rs)
{
    SENT(rs_send_method(rs, 1, RS_CHANNEL_CLOSE_OK, NULL, 0));
}

static void
send_deliver(struct rawsock *rs)
{
    struct rs_buf b;

    rb_init(&b);
    rb_shortstr(&b, "ctag");
    rb_u64(&b, 1);
    rb_u8(&b, 0);
    rb_shortstr(&b, "");
    rb_shortstr(&b, "k");
    SENT(rs_send_method(rs, 1, RS_BASIC_DELIVER, b.p, b.len));
    rb_free(&b);
}

static void
declare_on_channel_5(struct rawsock *rs)
{
    raw_declare_missing(rs, 5);
}

static void
declare_on_closed_channel(struct rawsock *rs)
{
    struct rs_buf b;

    rb_init(&b);
    rb_u16(&b, 200);
    rb_shortstr(&b, "");
    rb_u16(&b, 0);
    rb_u16(&b, 0);
    SENT(rs_send_method(rs, 2, RS_CHANNEL_CLOSE, b.p, b.len));
    rb_free(&b);
    SENT(rs_expect_method(rs, 2, RS_CHANNEL_CLOSE_OK, 5000, NULL));
    raw_declare_missing(rs, 2);
}

static void
send_body(struct rawsock *rs)
{
    SENT(rs_send_frame(rs, RS_FRAME_BODY, 1, "stray", 5));
}

static void
send_header_only(struct rawsock *rs)
{
    send_header(rs, 1, 5);
}

static void
method_after_publish(struct rawsock *rs)
{
    send_publish(rs, 1, "k");
    raw_declare_missing(rs, 1);
}

static void
method_after_part_of_body(struct rawsock *rs)
{
    send_publish(rs, 1, "k");
    send_header(rs, 1, 10);
    SENT(rs_send_frame(rs, RS_FRAME_BODY, 1, "12345", 5));
    raw_declare_missing(rs, 1);
}

/* On a raw connection with channel 'open' open (0: none), 'send' sends
 * what the broker must close the connection for. */
static const struct raw_refusal {
    const char *name;
    uint16_t open;
    void (*send)(struct rawsock *rs);
    int code;
    const char *text;
    const char *roost_only; /* NULL, or why it is skipped when remote */
} raw_refusals[] = {
    { "second channel.open", 1, send_channel_open, 504,
      "CHANNEL_ERROR - second 'channel.open' seen" },
    /* RabbitMQ 3.10: channel.close-ok for a close it never sent is
     * "COMMAND_INVALID - unimplemented method" (connection). */
    { "unsolicited channel.close-ok", 1, send_close_ok, 503,
      "COMMAND_INVALID" },
    /* docs/compatibility.md: a server-only method from a client is 503. */
    { "server-only basic.deliver", 1, send_deliver, 503, "COMMAND_INVALID",
      "documented difference: RabbitMQ ignores it" },
    { "method on a channel never opened", 0, declare_on_channel_5, 504,
      "CHANNEL_ERROR - expected 'channel.open'" },
    { "method on a closed channel", 2, declare_on_closed_channel, 504,
      "CHANNEL_ERROR - expected 'channel.open'" },
    { "body without publish", 1, send_body, 505, "UNEXPECTED_FRAME - " },
    { "header without publish", 1, send_header_only, 505,
      "UNEXPECTED_FRAME - " },
    { "method instead of the header", 1, method_after_publish, 505,
      "UNEXPECTED_FRAME - expected content header for class 60, got non "
      "content header frame instead" },
    { "method instead of the body", 1, method_after_part_of_body, 505,
      "UNEXPECTED_FRAME - expected content body, got non content body frame "
      "instead" },
};

START_TEST(raw_refused)
{
    const struct raw_refusal *v = &raw_refusals[_i];
    struct rawsock rs;

    h_case(v->name);
    if (h_skipped_remote(v->roost_only))
        return;
    raw_open(&rs, NULL);
    if (v->open)
        SENT(rs_channel_open(&rs, v->open));
    v->send(&rs);
    expect_raw_conn_close(&rs, v->code, v->text);
    rs_close(&rs);
}
END_TEST

/* ---- after a channel error ---- */

START_TEST(channel_error_requeues_unacked)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];
    struct h_event e;

    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open 2");
    DECLARE_QUEUE(c, 2, "", false, true, false, q);
    PUBLISH(c, 2, "", q, "m1");
    PUBLISH(c, 2, "", q, "m2");
    PUBLISH(c, 2, "", q, "m3");
    WAIT_COUNT(c, 2, q, 3);
    CONSUME(c, 1, q, "ctag", false, NULL);
    EXPECT_DELIVERY(c, "m1", NULL);
    EXPECT_DELIVERY(c, "m2", NULL);
    EXPECT_DELIVERY(c, "m3", NULL);
    /* An unknown delivery tag is a channel error (406). */
    amqp_basic_ack(c, 1, 999, 0);
    EXPECT_ASYNC_CHANNEL_CLOSE(
        c, 1, 406, "PRECONDITION_FAILED - unknown delivery tag 999");
    /* The other channel goes on, and finds the messages back in order,
     * marked redelivered. */
    static const char *const bodies[] = { "m1", "m2", "m3" };
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(GET(c, 2, q, false, &e), 1);
        ck_assert_str_eq(e.body, bodies[i]);
        ck_assert_msg(e.redelivered, "%s is not marked redelivered", bodies[i]);
        ck_assert_uint_eq(e.message_count, (unsigned)(2 - i));
        h_event_free(&e);
    }
    ck_assert_int_eq(GET(c, 2, q, false, &e), 0);
    amqp_basic_ack(c, 2, 0, 1);
    ck_assert_int_eq(SYNC(c, 2, NULL, 0), 0);
    h_close(c);
}
END_TEST

START_TEST(channel_error_leaves_other_channels_consuming)
{
    amqp_connection_state_t c = h_connect(H);
    char q[256];

    amqp_channel_open(c, 2);
    EXPECT_OK(c, "channel.open 2");
    DECLARE_QUEUE(c, 2, "", false, true, false, q);
    CONSUME(c, 2, q, "c2", true, NULL);
    amqp_queue_declare(c, 1, amqp_cstring_bytes("no-such-queue-for-roost"), 1,
                       0, 0, 0, amqp_empty_table);
    EXPECT_CHANNEL_CLOSE(c, 1, 404, "NOT_FOUND - ");
    PUBLISH(c, 2, "", q, "after");
    EXPECT_DELIVERY(c, "after", NULL);
    h_close(c);
}
END_TEST

/* ---- channel.flow ---- */

START_TEST(flow_active_true)
{
    amqp_connection_state_t c = h_connect(H);
    amqp_channel_flow_ok_t *ok = amqp_channel_flow(c, 1, 1);

    EXPECT_OK(c, "channel.flow active=true");
    ck_assert(ok != NULL && ok->active);
    h_close(c);
}
END_TEST

START_TEST(flow_active_false_540)
{
    amqp_connection_state_t c = h_connect(H);

    amqp_channel_flow(c, 1, 0);
    EXPECT_CONN_CLOSE(c, 540, "NOT_IMPLEMENTED - active=false");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("channel");
    TCase *tc;

    tc = h_tcase(s, "open and close", 20, true);
    tcase_add_test(tc, open_close_reopen);
    tcase_add_test(tc, close_by_server_then_reopen);
    tcase_add_test(tc, methods_after_server_close_ignored);
    tcase_add_test(tc, close_crossing_server_close);

    tc = h_tcase(s, "channel_max", 20, true);
    tcase_add_test(tc, channel_max_negotiated_by_client);
    tcase_add_test(tc, channel_max_counts_open_channels);
    tcase_add_test(tc, high_channel_numbers_work);
    tcase_add_test(tc, channel_max_configured);

    tc = h_tcase(s, "content order", 20, true);
    tcase_add_test(tc, interleaved_content_on_two_channels);

    tc = h_tcase(s, "refused frames", 20, true);
    H_LOOP(tc, raw_refused, raw_refusals);

    tc = h_tcase(s, "after a channel error", 20, true);
    tcase_add_test(tc, channel_error_requeues_unacked);
    tcase_add_test(tc, channel_error_leaves_other_channels_consuming);

    tc = h_tcase(s, "channel.flow", 20, true);
    tcase_add_test(tc, flow_active_true);
    tcase_add_test(tc, flow_active_false_540);

    return h_run(s);
}
