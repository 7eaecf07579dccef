/*
 * SPDX-License-Identifier: Apache-2.0
 * Content header frames (props.h): the fixed part (class 60, weight 0,
 * body size up to 2^64-1) and its errors; each of the 14 basic properties
 * alone and all together, decoded to exact values and encoded to the same
 * bytes, in flag order; the property flag words (reserved bit, continuation
 * words); truncation at every byte boundary, read from exact-size heap
 * copies so that ASan sees any over-read; trailing bytes; a bad headers
 * table; and the encoder's errors and overflow accounting. Finally
 * decode(encode(x)) == x for every subset of the 14 properties.
 */
#include <stddef.h>

#include "tests/unit/testutil.h"

#include "amqp/props.h"
#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"

/* class 60, weight 0, then the body size and the first flag word follow */
#define FIXED_LEN 14

/* A borrowed range over a string literal, without its NUL. */
#define B(s) { (const uint8_t *)(s), sizeof(s) - 1 }

/* An exact-size heap copy of the first 'n' bytes of 'src'. */
static uint8_t *
heap_copy(const void *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    if (n)
        memcpy(p, src, n);
    return p;
}

/* Write a content header payload: class, weight, body size, one flag word
 * and 'plen' bytes of properties. Returns its length. */
static size_t
build(uint8_t *buf, uint16_t class_id, uint16_t weight, uint64_t body,
      uint16_t flags, const void *props, size_t plen)
{
    wire_store16(buf, class_id);
    wire_store16(buf + 2, weight);
    wire_store64(buf + 4, body);
    wire_store16(buf + 12, flags);
    if (plen)
        memcpy(buf + FIXED_LEN, props, plen);
    return FIXED_LEN + plen;
}

/*
 * Decode from an exact-size heap copy, for the status: 'out' borrows the
 * copy, which is gone on return, so callers that look at the strings
 * decode 'in' itself as well.
 */
static enum amqp_status
decode_copy(const uint8_t *in, size_t n, struct content_header *out)
{
    uint8_t *p = heap_copy(in, n);
    enum amqp_status st = content_header_decode(p, n, out);
    free(p);
    return st;
}

static bool
bytes_same(struct amqp_bytes a, struct amqp_bytes b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* The first property (or "flags") where 'got' and 'want' differ, or NULL.
 * Plain comparisons: the round trip runs it 16384 times. */
static const char *
props_diff(const struct amqp_basic_props *got,
           const struct amqp_basic_props *want)
{
    struct amqp_bytes gh = { got->headers.ptr, got->headers.len };
    struct amqp_bytes wh = { want->headers.ptr, want->headers.len };

    if (got->flags != want->flags)
        return "flags";
    if (!bytes_same(got->content_type, want->content_type))
        return "content-type";
    if (!bytes_same(got->content_encoding, want->content_encoding))
        return "content-encoding";
    if (!bytes_same(gh, wh))
        return "headers";
    if (got->delivery_mode != want->delivery_mode)
        return "delivery-mode";
    if (got->priority != want->priority)
        return "priority";
    if (!bytes_same(got->correlation_id, want->correlation_id))
        return "correlation-id";
    if (!bytes_same(got->reply_to, want->reply_to))
        return "reply-to";
    if (!bytes_same(got->expiration, want->expiration))
        return "expiration";
    if (!bytes_same(got->message_id, want->message_id))
        return "message-id";
    if (got->timestamp != want->timestamp)
        return "timestamp";
    if (!bytes_same(got->type, want->type))
        return "type";
    if (!bytes_same(got->user_id, want->user_id))
        return "user-id";
    if (!bytes_same(got->app_id, want->app_id))
        return "app-id";
    if (!bytes_same(got->cluster_id, want->cluster_id))
        return "cluster-id";
    return NULL;
}

static void
check_props_eq(const struct amqp_basic_props *got,
               const struct amqp_basic_props *want, const char *ctx)
{
    const char *diff = props_diff(got, want);

    ck_assert_msg(diff == NULL, "%s: %s differs (flags %04x, want %04x)", ctx,
                  diff, got->flags, want->flags);
}

/* ---- the properties one by one ---- */

#define V(s) .val = s, .vlen = sizeof(s) - 1

static const uint8_t hdr_body[] = { 1, 'k', 'I', 0, 0, 0, 42 };

/* Each property with a distinctive value, in flag order (bit 15 first). */
static const struct prop_vec {
    const char *name;
    uint16_t flag;
    uint8_t val[32];
    size_t vlen;
    struct amqp_basic_props want; /* flags left 0; the test sets them */
} prop_vecs[] = {
    { "content-type", AMQP_BASIC_CONTENT_TYPE_FLAG, V("\x0a" "text/plain"),
      { .content_type = B("text/plain") } },
    { "content-encoding", AMQP_BASIC_CONTENT_ENCODING_FLAG, V("\x04" "gzip"),
      { .content_encoding = B("gzip") } },
    { "headers", AMQP_BASIC_HEADERS_FLAG,
      V("\x00\x00\x00\x07" "\x01" "kI" "\x00\x00\x00\x2a"),
      { .headers = { hdr_body, sizeof(hdr_body) } } },
    { "delivery-mode", AMQP_BASIC_DELIVERY_MODE_FLAG, V("\x02"),
      { .delivery_mode = 2 } },
    { "priority", AMQP_BASIC_PRIORITY_FLAG, V("\x09"), { .priority = 9 } },
    { "correlation-id", AMQP_BASIC_CORRELATION_ID_FLAG, V("\x06" "corr-1"),
      { .correlation_id = B("corr-1") } },
    { "reply-to", AMQP_BASIC_REPLY_TO_FLAG,
      V("\x15" "amq.rabbitmq.reply-to"),
      { .reply_to = B("amq.rabbitmq.reply-to") } },
    { "expiration", AMQP_BASIC_EXPIRATION_FLAG, V("\x05" "60000"),
      { .expiration = B("60000") } },
    { "message-id", AMQP_BASIC_MESSAGE_ID_FLAG, V("\x06" "msg-42"),
      { .message_id = B("msg-42") } },
    { "timestamp", AMQP_BASIC_TIMESTAMP_FLAG,
      V("\x80\x01\x02\x03\x04\x05\x06\x07"),
      { .timestamp = 0x8001020304050607ull } },
    { "type", AMQP_BASIC_TYPE_FLAG, V("\x0d" "order.created"),
      { .type = B("order.created") } },
    { "user-id", AMQP_BASIC_USER_ID_FLAG, V("\x05" "guest"),
      { .user_id = B("guest") } },
    { "app-id", AMQP_BASIC_APP_ID_FLAG, V("\x0a" "roost-test"),
      { .app_id = B("roost-test") } },
    { "cluster-id", AMQP_BASIC_CLUSTER_ID_FLAG, V("\x02" "c1"),
      { .cluster_id = B("c1") } },
};

START_TEST(prop_flag_layout)
{
    /* 14 properties on bits 15..2, one each, in order. */
    ck_assert_uint_eq(NELEMS(prop_vecs), AMQP_BASIC_PROP_COUNT);
    for (size_t i = 0; i < NELEMS(prop_vecs); i++) {
        ck_assert_uint_eq(prop_vecs[i].flag, 1u << (15 - i));
        ck_assert_str_eq(basic_prop_fields[i].name, prop_vecs[i].name);
    }
}
END_TEST

START_TEST(prop_alone_vectors)
{
    const struct prop_vec *v = &prop_vecs[_i];
    uint8_t in[64], out[64];
    size_t n = build(in, 60, 0, 1000, v->flag, v->val, v->vlen);
    struct amqp_basic_props want = v->want;
    struct content_header h;
    struct wire_wr w;
    enum amqp_status st;

    want.flags = v->flag;
    st = decode_copy(in, n, &h);
    ck_assert_msg(st == AMQP_OK, "%s: %s", v->name, status_name(st));
    ck_assert_int_eq(content_header_decode(in, n, &h), AMQP_OK);
    ck_assert_uint_eq(h.class_id, 60);
    ck_assert_uint_eq(h.weight, 0);
    ck_assert(h.body_size == 1000);
    check_props_eq(&h.props, &want, v->name);

    memset(out, 0xAA, sizeof(out));
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_msg(w.len == n, "%s: encoded %zu, want %zu", v->name, w.len, n);
    ck_assert_msg(memcmp(out, in, n) == 0, "%s: %s", v->name,
                  hexdump(out, w.len));

    /* From the expected struct, not from the decoded one. */
    h.props = want;
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, n);
    ck_assert(memcmp(out, in, n) == 0);
}
END_TEST

/* Each single property cut at every byte is truncation. */
START_TEST(prop_alone_truncation)
{
    const struct prop_vec *v = &prop_vecs[_i];
    uint8_t in[64];
    size_t n = build(in, 60, 0, 1, v->flag, v->val, v->vlen);
    struct content_header h;

    for (size_t cut = FIXED_LEN; cut < n; cut++) {
        enum amqp_status st = decode_copy(in, cut, &h);
        ck_assert_msg(st == AMQP_E_TRUNCATED, "%s cut at %zu: %s", v->name,
                      cut, status_name(st));
    }
}
END_TEST

/* The properties of prop_vecs named by 'flags', in flag order. */
static size_t
props_bytes(uint16_t flags, uint8_t *buf, struct amqp_basic_props *want)
{
    size_t n = 0;

    memset(want, 0, sizeof(*want));
    want->flags = flags;
    for (size_t i = 0; i < NELEMS(prop_vecs); i++) {
        const struct prop_vec *v = &prop_vecs[i];
        if (!(flags & v->flag))
            continue;
        memcpy(buf + n, v->val, v->vlen);
        n += v->vlen;
        switch (i) {
        case 0: want->content_type = v->want.content_type; break;
        case 1: want->content_encoding = v->want.content_encoding; break;
        case 2: want->headers = v->want.headers; break;
        case 3: want->delivery_mode = v->want.delivery_mode; break;
        case 4: want->priority = v->want.priority; break;
        case 5: want->correlation_id = v->want.correlation_id; break;
        case 6: want->reply_to = v->want.reply_to; break;
        case 7: want->expiration = v->want.expiration; break;
        case 8: want->message_id = v->want.message_id; break;
        case 9: want->timestamp = v->want.timestamp; break;
        case 10: want->type = v->want.type; break;
        case 11: want->user_id = v->want.user_id; break;
        case 12: want->app_id = v->want.app_id; break;
        case 13: want->cluster_id = v->want.cluster_id; break;
        }
    }
    return n;
}

#define ALL_PROPS 0xFFFCu

START_TEST(prop_all_together)
{
    uint8_t props[512], in[512 + FIXED_LEN], out[600];
    struct amqp_basic_props want;
    size_t plen = props_bytes(ALL_PROPS, props, &want);
    size_t n = build(in, 60, 0, 123456789, ALL_PROPS, props, plen);
    struct content_header h;
    struct amqp_field f;
    struct wire_wr w;

    ck_assert_uint_eq(n, FIXED_LEN + 11 + 5 + 11 + 1 + 1 + 7 + 22 + 6 + 7 + 8 +
                             14 + 6 + 11 + 3);
    ck_assert_int_eq(decode_copy(in, n, &h), AMQP_OK);
    ck_assert_int_eq(content_header_decode(in, n, &h), AMQP_OK);
    ck_assert(h.body_size == 123456789);
    check_props_eq(&h.props, &want, "all");
    /* Strings and the table borrow the payload. */
    ck_assert_ptr_eq(h.props.content_type.ptr, in + FIXED_LEN + 1);
    ck_assert(h.props.headers.ptr > in && h.props.headers.ptr < in + n);
    ck_assert(table_get(h.props.headers, "k", &f));
    ck_assert_int_eq(f.kind, AMQP_FIELD_I32);
    ck_assert_int_eq(f.v.i, 42);

    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, n);
    ck_assert_msg(memcmp(out, in, n) == 0, "%s", hexdump(out, w.len));
}
END_TEST

/* The wire order is flag order, whatever order makes sense elsewhere. */
START_TEST(prop_wire_order)
{
    static const uint8_t two[] = { 3, 'c', 't', '1', 3, 'c', 'l', '2' };
    uint8_t in[64], out[64];
    size_t n = build(in, 60, 0, 0,
                     AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_CLUSTER_ID_FLAG,
                     two, sizeof(two));
    struct content_header h;
    struct wire_wr w;
    static const uint8_t want[] = {
        0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0x18, 0x40,                              /* bits 12, 11, 6 */
        7,                                       /* delivery-mode */
        3,                                       /* priority */
        0, 0, 0, 0, 0, 0, 0x30, 0x39,            /* timestamp */
    };

    ck_assert_int_eq(content_header_decode(in, n, &h), AMQP_OK);
    ck_assert(amqp_bytes_eq(h.props.content_type, "ct1"));
    ck_assert(amqp_bytes_eq(h.props.cluster_id, "cl2"));

    memset(&h, 0, sizeof(h));
    h.class_id = 60;
    h.props.flags = AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_PRIORITY_FLAG |
                    AMQP_BASIC_DELIVERY_MODE_FLAG;
    h.props.timestamp = 12345;
    h.props.priority = 3;
    h.props.delivery_mode = 7;
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_msg(memcmp(out, want, sizeof(want)) == 0, "%s",
                  hexdump(out, w.len));
}
END_TEST

/* Absent properties are neither read nor written, whatever the struct
 * holds. */
START_TEST(prop_absent_ignored)
{
    struct content_header h;
    uint8_t out[64];
    struct wire_wr w;

    memset(&h, 0, sizeof(h));
    h.class_id = 60;
    h.body_size = 5;
    h.props.flags = AMQP_BASIC_PRIORITY_FLAG;
    h.props.priority = 4;
    h.props.content_type = amqp_cstr("ignored");
    h.props.delivery_mode = 2;
    h.props.timestamp = 99;
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, FIXED_LEN + 1);
    ck_assert_mem_eq(out, "\0\x3c\0\0\0\0\0\0\0\0\0\x05\x08\0\x04",
                     FIXED_LEN + 1);

    ck_assert_int_eq(content_header_decode(out, w.len, &h), AMQP_OK);
    ck_assert_uint_eq(h.props.flags, AMQP_BASIC_PRIORITY_FLAG);
    ck_assert_uint_eq(h.props.priority, 4);
    ck_assert_uint_eq(h.props.content_type.len, 0);
    ck_assert_uint_eq(h.props.delivery_mode, 0);
    ck_assert(h.props.timestamp == 0);
}
END_TEST

/* ---- the fixed part ---- */

START_TEST(fixed_no_properties)
{
    static const uint8_t in[] = { 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42,
                                  0, 0 };
    struct content_header h;
    struct amqp_basic_props none;
    uint8_t out[FIXED_LEN];
    struct wire_wr w;

    memset(&none, 0, sizeof(none));
    memset(&h, 0x5A, sizeof(h));
    ck_assert_int_eq(decode_copy(in, sizeof(in), &h), AMQP_OK);
    memset(&h, 0x5A, sizeof(h));
    ck_assert_int_eq(content_header_decode(in, sizeof(in), &h), AMQP_OK);
    ck_assert_uint_eq(h.class_id, AMQP_CLASS_BASIC);
    ck_assert_uint_eq(h.weight, 0);
    ck_assert(h.body_size == 42);
    check_props_eq(&h.props, &none, "no properties");
    /* The absent headers table is empty, and safe to look into. */
    ck_assert_uint_eq(table_count(h.props.headers), 0);
    {
        struct amqp_field f;
        ck_assert(!table_get(h.props.headers, "x-death", &f));
    }

    /* Exactly 14 bytes, into a buffer of exactly 14. */
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, FIXED_LEN);
    ck_assert(memcmp(out, in, FIXED_LEN) == 0);
}
END_TEST

static const uint64_t body_sizes[] = {
    0, 1, 0xFF, 0x100, 0xFFFFFFFFull, 0x100000000ull,
    0x0102030405060708ull, 0x8000000000000000ull, UINT64_MAX - 1, UINT64_MAX,
};

START_TEST(fixed_body_size_vectors)
{
    uint64_t size = body_sizes[_i];
    uint8_t in[FIXED_LEN + 2], out[FIXED_LEN + 2];
    size_t n = build(in, 60, 0, size, AMQP_BASIC_PRIORITY_FLAG, "\x01", 1);
    struct content_header h;
    struct wire_wr w;

    ck_assert_int_eq(content_header_decode(in, n, &h), AMQP_OK);
    ck_assert_msg(h.body_size == size, "%llx",
                  (unsigned long long)h.body_size);
    ck_assert_uint_eq(h.props.priority, 1);
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, n);
    ck_assert(memcmp(out, in, n) == 0);
    ck_assert(wire_load64(out + 4) == size);
}
END_TEST

/* Anything shorter than the fixed part is too short, whatever it holds. */
START_TEST(fixed_short_every_length)
{
    uint8_t in[64];
    size_t n = build(in, 60, 0, 7, AMQP_BASIC_CONTENT_TYPE_FLAG, "\x01z", 2);
    struct content_header h;

    ck_assert_int_eq(content_header_decode(in, n, &h), AMQP_OK);
    for (size_t cut = 0; cut < FIXED_LEN; cut++) {
        enum amqp_status st = decode_copy(in, cut, &h);
        ck_assert_msg(st == AMQP_E_HEADER_SHORT, "%zu bytes: %s", cut,
                      status_name(st));
    }
    /* Even when the class in those bytes is wrong. */
    build(in, 10, 1, 0, 0, NULL, 0);
    ck_assert_int_eq(decode_copy(in, FIXED_LEN - 1, &h), AMQP_E_HEADER_SHORT);
}
END_TEST

static const uint16_t bad_classes[] = {
    0, 10, 20, 30, 40, 50, 59, 61, 85, 90, 0x3C00, 0x013C, 0xFFFF,
};

START_TEST(fixed_class_vectors)
{
    uint8_t in[FIXED_LEN];
    size_t n = build(in, bad_classes[_i], 0, 0, 0, NULL, 0);
    struct content_header h;
    enum amqp_status st = decode_copy(in, n, &h);

    ck_assert_msg(st == AMQP_E_HEADER_CLASS, "class %u: %s", bad_classes[_i],
                  status_name(st));
}
END_TEST

static const uint16_t bad_weights[] = { 1, 2, 0x00FF, 0x0100, 0x8000,
                                        0xFFFF };

START_TEST(fixed_weight_vectors)
{
    uint8_t in[FIXED_LEN];
    size_t n = build(in, 60, bad_weights[_i], 0, 0, NULL, 0);
    struct content_header h;
    enum amqp_status st = decode_copy(in, n, &h);

    ck_assert_msg(st == AMQP_E_HEADER_WEIGHT, "weight %u: %s",
                  bad_weights[_i], status_name(st));
}
END_TEST

START_TEST(fixed_trailing)
{
    uint8_t in[600], props[512];
    struct amqp_basic_props want;
    size_t n;
    struct content_header h;

    n = build(in, 60, 0, 0, 0, NULL, 0);
    in[n++] = 0;
    ck_assert_int_eq(decode_copy(in, n, &h), AMQP_E_TRAILING);

    n = build(in, 60, 0, 0, ALL_PROPS, props,
              props_bytes(ALL_PROPS, props, &want));
    ck_assert_int_eq(decode_copy(in, n, &h), AMQP_OK);
    in[n++] = 0xCE;
    ck_assert_int_eq(decode_copy(in, n, &h), AMQP_E_TRAILING);

    /* After a continuation word. */
    n = build(in, 60, 0, 0, PROPS_FLAG_CONTINUE, NULL, 0);
    in[n++] = 0;
    in[n++] = 0;
    ck_assert_int_eq(decode_copy(in, n, &h), AMQP_OK);
    in[n++] = 1;
    ck_assert_int_eq(decode_copy(in, n, &h), AMQP_E_TRAILING);
}
END_TEST

/* ---- property flags ---- */

/* Bytes from the first flag word on. */
static const struct flag_vec {
    const char *name;
    uint8_t in[16];
    size_t len;
    enum amqp_status want;
    uint16_t flags; /* decoded, on AMQP_OK */
} flag_vecs[] = {
    { "reserved bit 1", { 0x00, 0x02 }, 2, AMQP_E_PROPERTY_FLAGS, 0 },
    { "reserved bit with content-type", { 0x80, 0x02, 1, 'a' }, 4,
      AMQP_E_PROPERTY_FLAGS, 0 },
    { "reserved and continuation", { 0x00, 0x03, 0, 0 }, 4,
      AMQP_E_PROPERTY_FLAGS, 0 },
    { "continuation, zero word", { 0x00, 0x01, 0x00, 0x00 }, 4, AMQP_OK, 0 },
    { "properties follow all flag words", { 0x80, 0x01, 0x00, 0x00, 1, 'a' },
      6, AMQP_OK, 0x8000 },
    { "delivery-mode, cluster-id and continuation",
      { 0x10, 0x05, 0x00, 0x00, 2, 1, 'c' }, 7, AMQP_OK, 0x1004 },
    { "chain of five words",
      { 0x08, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 9 }, 11,
      AMQP_OK, 0x0800 },
    { "chain, then a property bit", { 0x00, 0x01, 0x00, 0x01, 0x00, 0x20 }, 6,
      AMQP_E_PROPERTY_FLAGS, 0 },
    { "chain, then bit 1", { 0x00, 0x01, 0x00, 0x01, 0x00, 0x03, 0, 0 }, 8,
      AMQP_E_PROPERTY_FLAGS, 0 },
    { "continuation word all ones", { 0x00, 0x01, 0xFF, 0xFF }, 4,
      AMQP_E_PROPERTY_FLAGS, 0 },
    { "continuation word missing", { 0x00, 0x01 }, 2, AMQP_E_TRUNCATED, 0 },
    { "continuation word half there", { 0x00, 0x01, 0x00 }, 3,
      AMQP_E_TRUNCATED, 0 },
    { "chain ends early", { 0x00, 0x01, 0x00, 0x01 }, 4, AMQP_E_TRUNCATED, 0 },
    { "chain ends in a word", { 0x00, 0x01, 0x00, 0x01, 0x00 }, 5,
      AMQP_E_TRUNCATED, 0 },
};

START_TEST(flag_vectors)
{
    const struct flag_vec *v = &flag_vecs[_i];
    uint8_t in[FIXED_LEN + 16];
    size_t n = build(in, 60, 0, 0, 0, NULL, 0) - 2;
    struct content_header h;
    enum amqp_status st;

    memcpy(in + n, v->in, v->len);
    n += v->len;
    st = decode_copy(in, n, &h);
    ck_assert_msg(st == v->want, "%s: %s, want %s", v->name, status_name(st),
                  status_name(v->want));
    if (st == AMQP_OK) {
        ck_assert_int_eq(content_header_decode(in, n, &h), AMQP_OK);
        ck_assert_msg(h.props.flags == v->flags, "%s: flags %04x", v->name,
                      h.props.flags);
        ck_assert(!(h.props.flags & PROPS_FLAG_CONTINUE));
    }
}
END_TEST

/* Any bit but the continuation bit in a continuation word is refused. */
START_TEST(flag_continuation_bits)
{
    unsigned bit = (unsigned)_i;
    uint8_t in[FIXED_LEN + 4];
    size_t n = build(in, 60, 0, 0, PROPS_FLAG_CONTINUE, NULL, 0);
    struct content_header h;
    enum amqp_status st;

    wire_store16(in + n, (uint16_t)(1u << bit));
    n += 2;
    st = decode_copy(in, n, &h);
    ck_assert_msg(st == AMQP_E_PROPERTY_FLAGS, "bit %u: %s", bit,
                  status_name(st));
}
END_TEST

START_TEST(flag_encode_refused)
{
    static const uint16_t bad[] = { 0x0001, 0x0002, 0x0003, 0x8001, 0x8002,
                                    0xFFFF, 0xFFFD, 0xFFFE };
    struct content_header h;
    uint8_t out[512];
    struct wire_wr w;

    for (size_t i = 0; i < NELEMS(bad); i++) {
        memset(&h, 0, sizeof(h));
        h.class_id = 60;
        h.props.flags = bad[i];
        wire_wr_init(&w, out, sizeof(out));
        ck_assert_msg(content_header_encode(&h, &w) == AMQP_E_PROPERTY_FLAGS,
                      "flags %04x", bad[i]);
        ck_assert_msg(w.len == 0, "flags %04x: wrote %zu bytes", bad[i],
                      w.len);
    }
}
END_TEST

/* ---- truncation and the headers table ---- */

START_TEST(truncate_all_props)
{
    uint8_t props[512], in[512 + FIXED_LEN];
    struct amqp_basic_props want;
    size_t n = build(in, 60, 0, 9, ALL_PROPS, props,
                     props_bytes(ALL_PROPS, props, &want));
    struct content_header h;

    ck_assert_int_eq(decode_copy(in, n, &h), AMQP_OK);
    for (size_t cut = 0; cut < n; cut++) {
        enum amqp_status st = decode_copy(in, cut, &h);
        enum amqp_status expect =
            cut < FIXED_LEN ? AMQP_E_HEADER_SHORT : AMQP_E_TRUNCATED;
        ck_assert_msg(st == expect, "cut at %zu of %zu: %s", cut, n,
                      status_name(st));
    }
}
END_TEST

static const struct hdr_vec {
    const char *name;
    uint8_t val[24]; /* the headers property: length prefix and body */
    size_t len;
    enum amqp_status want;
} hdr_vecs[] = {
    { "empty", { 0, 0, 0, 0 }, 4, AMQP_OK },
    { "unknown type U", { 0, 0, 0, 7, 1, 'k', 'U', 0, 0, 0, 0 }, 11,
      AMQP_E_FIELD_TYPE },
    { "unknown type 0", { 0, 0, 0, 3, 1, 'k', 0 }, 7, AMQP_E_FIELD_TYPE },
    { "unknown type in nested table",
      { 0, 0, 0, 10, 1, 'n', 'F', 0, 0, 0, 3, 1, 'k', 'Q' }, 14,
      AMQP_E_FIELD_TYPE },
    { "unknown type in array", { 0, 0, 0, 8, 1, 'a', 'A', 0, 0, 0, 1, 'Z' },
      12, AMQP_E_FIELD_TYPE },
    { "prefix beyond the payload", { 0, 0, 0, 8, 1, 'k', 'V' }, 7,
      AMQP_E_TRUNCATED },
    { "entry cut by its prefix", { 0, 0, 0, 2, 1, 'k', 'V' }, 7,
      AMQP_E_TRUNCATED },
    { "void entry", { 0, 0, 0, 3, 1, 'k', 'V' }, 7, AMQP_OK },
};

START_TEST(headers_vectors)
{
    const struct hdr_vec *v = &hdr_vecs[_i];
    uint8_t in[FIXED_LEN + 24];
    size_t n = build(in, 60, 0, 0, AMQP_BASIC_HEADERS_FLAG, v->val, v->len);
    struct content_header h;
    enum amqp_status st = decode_copy(in, n, &h);

    ck_assert_msg(st == v->want, "%s: %s", v->name, status_name(st));
}
END_TEST

/* The headers table is depth 1: 16 levels are fine, 17 are not. */
START_TEST(headers_depth)
{
    for (unsigned levels = TABLE_MAX_DEPTH; levels <= TABLE_MAX_DEPTH + 1;
         levels++) {
        uint8_t tmp[256], in[256 + FIXED_LEN];
        struct wire_wr w;
        size_t marks[TABLE_MAX_DEPTH + 1];
        struct content_header h;
        enum amqp_status st;

        wire_wr_init(&w, tmp, sizeof(tmp));
        marks[0] = table_begin(&w);
        for (unsigned d = 1; d < levels; d++) {
            ck_assert_int_eq(table_put_key(&w, amqp_cstr("n")), AMQP_OK);
            wire_put_u8(&w, 'F');
            marks[d] = table_begin(&w);
        }
        for (unsigned d = levels; d-- > 0;)
            table_end(&w, marks[d]);
        ck_assert(!wire_wr_overflowed(&w));
        st = decode_copy(in, build(in, 60, 0, 0, AMQP_BASIC_HEADERS_FLAG, tmp,
                                   w.len), &h);
        ck_assert_msg(st == (levels <= TABLE_MAX_DEPTH ? AMQP_OK
                                                       : AMQP_E_TABLE_DEPTH),
                      "%u levels: %s", levels, status_name(st));
    }
}
END_TEST

/* ---- encoding ---- */

/* Out of room at every size: AMQP_E_OVERFLOW, nothing written past the
 * buffer (exact heap buffers), and w.len is the size needed. */
START_TEST(encode_overflow)
{
    uint8_t props[512], in[512 + FIXED_LEN];
    struct amqp_basic_props want;
    size_t need = build(in, 60, 0, 77, ALL_PROPS, props,
                        props_bytes(ALL_PROPS, props, &want));
    struct content_header h;

    memset(&h, 0, sizeof(h));
    h.class_id = 60;
    h.body_size = 77;
    h.props = want;
    for (size_t cap = 0; cap <= need; cap++) {
        uint8_t *p = malloc(cap ? cap : 1);
        struct wire_wr w;
        enum amqp_status st;

        ck_assert_ptr_nonnull(p);
        wire_wr_init(&w, p, cap);
        st = content_header_encode(&h, &w);
        if (cap < need)
            ck_assert_msg(st == AMQP_E_OVERFLOW, "cap %zu: %s", cap,
                          status_name(st));
        else {
            ck_assert_int_eq(st, AMQP_OK);
            ck_assert(memcmp(p, in, need) == 0);
        }
        ck_assert_msg(w.len == need, "cap %zu: len %zu, need %zu", cap, w.len,
                      need);
        free(p);
    }

    /* The same without any property. */
    h.props.flags = 0;
    for (size_t cap = 0; cap < FIXED_LEN; cap++) {
        uint8_t *p = malloc(cap ? cap : 1);
        struct wire_wr w;

        ck_assert_ptr_nonnull(p);
        wire_wr_init(&w, p, cap);
        ck_assert_int_eq(content_header_encode(&h, &w), AMQP_E_OVERFLOW);
        ck_assert_uint_eq(w.len, FIXED_LEN);
        free(p);
    }
}
END_TEST

START_TEST(encode_value_too_long)
{
    char s[257];
    struct content_header h;
    uint8_t out[600];
    struct wire_wr w;

    memset(s, 'v', 256);
    s[256] = '\0';
    memset(&h, 0, sizeof(h));
    h.class_id = 60;
    h.props.flags = AMQP_BASIC_MESSAGE_ID_FLAG;
    h.props.message_id = amqp_cstr(s);
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_E_VALUE);

    /* 255 is fine. */
    s[255] = '\0';
    h.props.message_id = amqp_cstr(s);
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, FIXED_LEN + 256);
    ck_assert_uint_eq(out[FIXED_LEN], 255);
    ck_assert_int_eq(content_header_decode(out, w.len, &h), AMQP_OK);
    ck_assert_uint_eq(h.props.message_id.len, 255);
}
END_TEST

/* Where each property lives, to blank the absent ones. */
static const struct prop_slot {
    uint16_t flag;
    size_t off, size;
} prop_slots[] = {
#define SLOT(flag, field) \
    { flag, offsetof(struct amqp_basic_props, field), \
      sizeof(((struct amqp_basic_props *)0)->field) }
    SLOT(AMQP_BASIC_CONTENT_TYPE_FLAG, content_type),
    SLOT(AMQP_BASIC_CONTENT_ENCODING_FLAG, content_encoding),
    SLOT(AMQP_BASIC_HEADERS_FLAG, headers),
    SLOT(AMQP_BASIC_DELIVERY_MODE_FLAG, delivery_mode),
    SLOT(AMQP_BASIC_PRIORITY_FLAG, priority),
    SLOT(AMQP_BASIC_CORRELATION_ID_FLAG, correlation_id),
    SLOT(AMQP_BASIC_REPLY_TO_FLAG, reply_to),
    SLOT(AMQP_BASIC_EXPIRATION_FLAG, expiration),
    SLOT(AMQP_BASIC_MESSAGE_ID_FLAG, message_id),
    SLOT(AMQP_BASIC_TIMESTAMP_FLAG, timestamp),
    SLOT(AMQP_BASIC_TYPE_FLAG, type),
    SLOT(AMQP_BASIC_USER_ID_FLAG, user_id),
    SLOT(AMQP_BASIC_APP_ID_FLAG, app_id),
    SLOT(AMQP_BASIC_CLUSTER_ID_FLAG, cluster_id),
#undef SLOT
};

/* decode(encode(x)) == x for every subset of the properties, with values
 * built in C: all different, with high bits set in the integers. */
START_TEST(round_trip_every_subset)
{
    static const uint8_t hdrs[] = { 2, 'h', '1', 'S', 0, 0, 0, 1, 'v',
                                    1, 'b', 't', 1 };
    struct content_header x, y;
    struct amqp_basic_props masked;
    uint8_t out[512];
    struct wire_wr w;

    ck_assert_int_eq(table_validate(hdrs, sizeof(hdrs), 1), AMQP_OK);
    memset(&x, 0, sizeof(x));
    x.class_id = 60;
    x.body_size = 0xF00DCAFEBEEF0001ull;
    x.props.content_type = amqp_cstr("application/json");
    x.props.content_encoding = amqp_cstr("utf-8");
    x.props.headers.ptr = hdrs;
    x.props.headers.len = sizeof(hdrs);
    x.props.delivery_mode = 0xFE;
    x.props.priority = 0x81;
    x.props.correlation_id = amqp_cstr("7f3e");
    x.props.reply_to = amqp_cstr("replies");
    x.props.expiration = amqp_cstr("1500");
    x.props.message_id = amqp_cstr("");
    x.props.timestamp = 0xFFFFFFFF00000001ull;
    x.props.type = amqp_cstr("t");
    x.props.user_id = amqp_cstr("admin");
    x.props.app_id = amqp_cstr("app");
    x.props.cluster_id = amqp_cstr("cluster");
    ck_assert_uint_eq(NELEMS(prop_slots), AMQP_BASIC_PROP_COUNT);

    /* Plain comparisons in the loop, ck_abort_msg on the first miss:
     * a ck_assert per field would make this loop slow. */
    for (unsigned mask = 0; mask < 1u << 14; mask++) {
        enum amqp_status est, dst;
        const char *diff;

        x.props.flags = (uint16_t)(mask << 2);
        masked = x.props;
        for (size_t i = 0; i < NELEMS(prop_slots); i++)
            if (!(masked.flags & prop_slots[i].flag))
                memset((uint8_t *)&masked + prop_slots[i].off, 0,
                       prop_slots[i].size);

        wire_wr_init(&w, out, sizeof(out));
        est = content_header_encode(&x, &w);
        dst = est == AMQP_OK ? content_header_decode(out, w.len, &y) : est;
        if (est != AMQP_OK || dst != AMQP_OK)
            ck_abort_msg("flags %04x: encode %s, decode %s", x.props.flags,
                         status_name(est), status_name(dst));
        if (y.class_id != 60 || y.weight != 0 || y.body_size != x.body_size)
            ck_abort_msg("flags %04x: fixed part differs", x.props.flags);
        diff = props_diff(&y.props, &masked);
        if (diff != NULL)
            ck_abort_msg("flags %04x: %s differs", x.props.flags, diff);
    }
}
END_TEST

static Suite *
props_suite(void)
{
    Suite *s = suite_create("props");
    TCase *tc = tcase_create("fixed part");
    tcase_add_test(tc, fixed_no_properties);
    tcase_add_loop_test(tc, fixed_body_size_vectors, 0, NELEMS(body_sizes));
    tcase_add_test(tc, fixed_short_every_length);
    tcase_add_loop_test(tc, fixed_class_vectors, 0, NELEMS(bad_classes));
    tcase_add_loop_test(tc, fixed_weight_vectors, 0, NELEMS(bad_weights));
    tcase_add_test(tc, fixed_trailing);
    suite_add_tcase(s, tc);

    tc = tcase_create("properties");
    tcase_add_test(tc, prop_flag_layout);
    tcase_add_loop_test(tc, prop_alone_vectors, 0, NELEMS(prop_vecs));
    tcase_add_loop_test(tc, prop_alone_truncation, 0, NELEMS(prop_vecs));
    tcase_add_test(tc, prop_all_together);
    tcase_add_test(tc, prop_wire_order);
    tcase_add_test(tc, prop_absent_ignored);
    suite_add_tcase(s, tc);

    tc = tcase_create("property flags");
    tcase_add_loop_test(tc, flag_vectors, 0, NELEMS(flag_vecs));
    tcase_add_loop_test(tc, flag_continuation_bits, 1, 16);
    tcase_add_test(tc, flag_encode_refused);
    suite_add_tcase(s, tc);

    tc = tcase_create("truncation and headers");
    tcase_add_test(tc, truncate_all_props);
    tcase_add_loop_test(tc, headers_vectors, 0, NELEMS(hdr_vecs));
    tcase_add_test(tc, headers_depth);
    suite_add_tcase(s, tc);

    tc = tcase_create("encode");
    tcase_add_test(tc, encode_overflow);
    tcase_add_test(tc, encode_value_too_long);
    tcase_add_test(tc, round_trip_every_subset);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(props_suite());
}
