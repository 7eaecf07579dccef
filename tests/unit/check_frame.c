/*
 * SPDX-License-Identifier: Apache-2.0
 * Frame splitting and the protocol header: every violation gets its own
 * status, and a frame is never read past its buffer.
 */
#include "tests/unit/testutil.h"

#include "amqp/frame.h"
#include "amqp/status.h"

static const struct hdr_vec {
    const char *name;
    uint8_t in[8];
    size_t len;
    enum amqp_status want;
} hdr_vecs[] = {
    { "0-9-1", { 'A', 'M', 'Q', 'P', 0, 0, 9, 1 }, 8, AMQP_OK },
    { "empty", { 0 }, 0, AMQP_INCOMPLETE },
    { "prefix AM", { 'A', 'M' }, 2, AMQP_INCOMPLETE },
    { "prefix AMQP 0 0", { 'A', 'M', 'Q', 'P', 0, 0 }, 6, AMQP_INCOMPLETE },
    { "0-8", { 'A', 'M', 'Q', 'P', 1, 1, 8, 0 }, 8, AMQP_E_PROTOCOL_VERSION },
    { "0-9", { 'A', 'M', 'Q', 'P', 1, 1, 0, 9 }, 8, AMQP_E_PROTOCOL_VERSION },
    { "1-0", { 'A', 'M', 'Q', 'P', 0, 1, 0, 0 }, 8, AMQP_E_PROTOCOL_VERSION },
    { "early version byte", { 'A', 'M', 'Q', 'P', 3 }, 5, AMQP_E_PROTOCOL_VERSION },
    { "HTTP", { 'G', 'E', 'T', ' ', '/', ' ', 'H', 'T' }, 8, AMQP_E_PROTOCOL_HEADER },
    { "short garbage", { 'X' }, 1, AMQP_E_PROTOCOL_HEADER },
    { "lowercase", { 'a', 'm', 'q', 'p', 0, 0, 9, 1 }, 8, AMQP_E_PROTOCOL_HEADER },
};

START_TEST(header_vectors)
{
    const struct hdr_vec *v = &hdr_vecs[_i];
    ck_assert_msg(protocol_header_check(v->in, v->len) == v->want,
                  "%s: got %s", v->name,
                  status_name(protocol_header_check(v->in, v->len)));
}
END_TEST

START_TEST(header_constant)
{
    ck_assert_mem_eq(amqp_protocol_header, "AMQP\x00\x00\x09\x01", 8);
}
END_TEST

static const struct frame_vec {
    const char *name;
    uint8_t in[24];
    size_t len;
    uint32_t frame_max;
    enum amqp_status want;
} frame_vecs[] = {
    { "heartbeat", { 8, 0, 0, 0, 0, 0, 0, 0xCE }, 8, 4096, AMQP_OK },
    { "bad end", { 8, 0, 0, 0, 0, 0, 0, 0x00 }, 8, 4096, AMQP_E_FRAME_END },
    { "heartbeat on channel 1", { 8, 0, 1, 0, 0, 0, 0, 0xCE }, 8, 4096,
      AMQP_E_HEARTBEAT_CHANNEL },
    { "heartbeat with payload", { 8, 0, 0, 0, 0, 0, 1, 'x', 0xCE }, 9, 4096,
      AMQP_E_HEARTBEAT_SIZE },
    { "method", { 1, 0, 1, 0, 0, 0, 4, 0, 20, 0, 10, 0xCE }, 12, 4096, AMQP_OK },
    { "header type", { 2, 0, 1, 0, 0, 0, 1, 0, 0xCE }, 9, 4096, AMQP_OK },
    { "body type", { 3, 0, 1, 0, 0, 0, 0, 0xCE }, 8, 4096, AMQP_OK },
    { "unknown type 4", { 4, 0, 1, 0, 0, 0, 0, 0xCE }, 8, 4096, AMQP_E_FRAME_TYPE },
    { "unknown type 0", { 0, 0, 0, 0, 0, 0, 0, 0xCE }, 8, 4096, AMQP_E_FRAME_TYPE },
    { "unknown type 255", { 255, 0, 0, 0, 0, 0, 0, 0xCE }, 8, 4096, AMQP_E_FRAME_TYPE },
    { "end checked before type", { 9, 0, 0, 0, 0, 0, 0, 0x01 }, 8, 4096,
      AMQP_E_FRAME_END },
    { "only header", { 1, 0, 1, 0, 0, 0, 4 }, 7, 4096, AMQP_INCOMPLETE },
    { "six bytes", { 1, 0, 1, 0, 0, 0 }, 6, 4096, AMQP_INCOMPLETE },
    { "empty", { 0 }, 0, 4096, AMQP_INCOMPLETE },
    { "payload without end", { 3, 0, 1, 0, 0, 0, 2, 'a', 'b' }, 9, 4096,
      AMQP_INCOMPLETE },
    { "exactly frame_max", { 3, 0, 1, 0, 0, 0, 2, 'a', 'b', 0xCE }, 10, 10, AMQP_OK },
    { "one over frame_max", { 3, 0, 1, 0, 0, 0, 3, 'a', 'b', 'c', 0xCE }, 11, 10,
      AMQP_E_FRAME_TOO_LARGE },
    { "too large before payload arrives", { 3, 0, 1, 0, 1, 0, 0 }, 7, 4096,
      AMQP_E_FRAME_TOO_LARGE },
    { "huge size", { 3, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF }, 7, 131072,
      AMQP_E_FRAME_TOO_LARGE },
    { "huge size, no limit", { 3, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF }, 7, 0,
      AMQP_INCOMPLETE },
    { "frame_max below overhead", { 3, 0, 1, 0, 0, 0, 0, 0xCE }, 8, 4,
      AMQP_E_FRAME_TOO_LARGE },
    { "max channel", { 3, 0xFF, 0xFF, 0, 0, 0, 0, 0xCE }, 8, 4096, AMQP_OK },
};

START_TEST(frame_vectors)
{
    const struct frame_vec *v = &frame_vecs[_i];
    struct frame f;
    enum amqp_status st = frame_decode(v->in, v->len, v->frame_max, &f);
    ck_assert_msg(st == v->want, "%s: got %s want %s", v->name,
                  status_name(st), status_name(v->want));
}
END_TEST

START_TEST(frame_fields)
{
    static const uint8_t in[] = { 1, 0x01, 0x02, 0, 0, 0, 4, 0, 20, 0, 10, 0xCE,
                                  8, 0, 0, 0, 0, 0, 0, 0xCE };
    struct frame f;

    ck_assert_int_eq(frame_decode(in, sizeof(in), 4096, &f), AMQP_OK);
    ck_assert_int_eq(f.type, AMQP_FRAME_METHOD);
    ck_assert_int_eq(f.channel, 0x0102);
    ck_assert_uint_eq(f.size, 4);
    ck_assert_ptr_eq(f.payload, in + 7);
    ck_assert_uint_eq(f.wire_len, 12);
    ck_assert_uint_eq(frame_peek_size(in), 4);

    /* The second frame follows the first. */
    ck_assert_int_eq(frame_decode(in + f.wire_len, sizeof(in) - f.wire_len,
                                  4096, &f), AMQP_OK);
    ck_assert_int_eq(f.type, AMQP_FRAME_HEARTBEAT);
}
END_TEST

/* A frame cut at every byte boundary is incomplete, never an error and
 * never a read past the cut (ASan watches the heap copy). */
START_TEST(frame_every_truncation)
{
    static const uint8_t in[] = { 1, 0, 1, 0, 0, 0, 5, 0, 60, 0, 80, 1, 0xCE };
    struct frame f;

    for (size_t n = 0; n < sizeof(in); n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, in, n);
        ck_assert_msg(frame_decode(copy, n, 4096, &f) == AMQP_INCOMPLETE,
                      "cut at %zu", n);
        free(copy);
    }
    ck_assert_int_eq(frame_decode(in, sizeof(in), 4096, &f), AMQP_OK);
}
END_TEST

START_TEST(frame_put_round_trip)
{
    uint8_t buf[32];
    struct wire_wr w;
    struct frame f;

    wire_wr_init(&w, buf, sizeof(buf));
    frame_put(&w, AMQP_FRAME_BODY, 7, "hello", 5);
    frame_put_heartbeat(&w);
    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 13 + 8);
    ck_assert_int_eq(frame_decode(buf, w.len, 4096, &f), AMQP_OK);
    ck_assert_int_eq(f.type, AMQP_FRAME_BODY);
    ck_assert_int_eq(f.channel, 7);
    ck_assert_mem_eq(f.payload, "hello", 5);
    ck_assert_int_eq(frame_decode(buf + 13, w.len - 13, 4096, &f), AMQP_OK);
    ck_assert_int_eq(f.type, AMQP_FRAME_HEARTBEAT);
    ck_assert_mem_eq(buf + 13, "\x08\x00\x00\x00\x00\x00\x00\xCE", 8);
}
END_TEST

START_TEST(frame_put_overflow_counts)
{
    uint8_t buf[8];
    struct wire_wr w;

    wire_wr_init(&w, buf, sizeof(buf));
    frame_put(&w, AMQP_FRAME_BODY, 1, "0123456789", 10);
    ck_assert(wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 18);
}
END_TEST

START_TEST(status_reply_codes)
{
    ck_assert_uint_eq(status_reply_code(AMQP_OK), 200);
    ck_assert_uint_eq(status_reply_code(AMQP_E_FRAME_END), 501);
    ck_assert_uint_eq(status_reply_code(AMQP_E_FRAME_TOO_LARGE), 501);
    ck_assert_uint_eq(status_reply_code(AMQP_E_FRAME_TYPE), 501);
    ck_assert_uint_eq(status_reply_code(AMQP_E_HEARTBEAT_CHANNEL), 505);
    ck_assert_uint_eq(status_reply_code(AMQP_E_UNKNOWN_CLASS), 540);
    ck_assert_uint_eq(status_reply_code(AMQP_E_VALUE), 502);
    ck_assert_uint_eq(status_reply_code(AMQP_INCOMPLETE), 0);
    ck_assert_uint_eq(status_reply_code((enum amqp_status)999), 0);
    ck_assert_str_eq(status_name(AMQP_E_FRAME_END), "AMQP_E_FRAME_END");
    ck_assert_str_eq(status_name((enum amqp_status)999), "AMQP_E_?");
    ck_assert_str_eq(status_text(AMQP_E_FRAME_END), "frame does not end with 0xCE");
    ck_assert_str_eq(status_text((enum amqp_status)999), "unknown status");
}
END_TEST

static Suite *
frame_suite(void)
{
    Suite *s = suite_create("frame");
    TCase *tc = tcase_create("protocol header");
    tcase_add_loop_test(tc, header_vectors, 0, NELEMS(hdr_vecs));
    tcase_add_test(tc, header_constant);
    suite_add_tcase(s, tc);

    tc = tcase_create("decode");
    tcase_add_loop_test(tc, frame_vectors, 0, NELEMS(frame_vecs));
    tcase_add_test(tc, frame_fields);
    tcase_add_test(tc, frame_every_truncation);
    suite_add_tcase(s, tc);

    tc = tcase_create("encode");
    tcase_add_test(tc, frame_put_round_trip);
    tcase_add_test(tc, frame_put_overflow_counts);
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_test(tc, status_reply_codes);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(frame_suite());
}
