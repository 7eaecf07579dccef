/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods (amqp/method.h): every argument of every method survives encode
 * and decode, filled generically through the generated codec_field
 * descriptors and checked against an independent reference encoder; exact
 * bytes for the methods the broker lives on; every truncation and a
 * trailing byte; unknown ids; shortstr and buffer limits; method frames;
 * bad tables inside arguments; and the generated lookup tables.
 */
#include "tests/unit/codec_fields.h"
#include "tests/unit/testutil.h"

#include <stdbool.h>

#include "amqp/codec.h"
#include "amqp/frame.h"
#include "amqp/method.h"
#include "amqp/status.h"
#include "amqp/table.h"

/* ---- generic access to an argument struct through its descriptors ---- */

static size_t
fixed_size(uint8_t type)
{
    switch (type) {
    case FIELD_OCTET: return 1;
    case FIELD_SHORT: return 2;
    case FIELD_LONG: return 4;
    case FIELD_LONGLONG:
    case FIELD_TIMESTAMP: return 8;
    case FIELD_BIT: return sizeof(bool);
    case FIELD_SHORTSTR:
    case FIELD_LONGSTR: return sizeof(struct amqp_bytes);
    case FIELD_TABLE: return sizeof(struct amqp_table);
    }
    return 0;
}

static void
set_int(void *base, const struct codec_field *f, uint64_t v)
{
    uint8_t *p = (uint8_t *)base + f->offset;
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;
    bool b = v != 0;

    switch (f->type) {
    case FIELD_OCTET: memcpy(p, &u8, 1); break;
    case FIELD_BIT: memcpy(p, &b, sizeof(b)); break;
    case FIELD_SHORT: memcpy(p, &u16, 2); break;
    case FIELD_LONG: memcpy(p, &u32, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

/* Compare every argument of two structs of method 'mi'. */
static void
assert_args_eq(const struct method_info *mi, const void *want,
               const void *got, const char *ctx)
{
    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];

        if (is_range(f->type)) {
            struct amqp_bytes a = get_range(want, f), b = get_range(got, f);
            ck_assert_msg(a.len == b.len, "%s: %s %s: length %zu, want %zu",
                          ctx, mi->name, f->name, b.len, a.len);
            ck_assert_msg(a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0,
                          "%s: %s %s: bytes differ", ctx, mi->name, f->name);
        } else {
            uint64_t a = get_int(want, f), b = get_int(got, f);
            ck_assert_msg(a == b, "%s: %s %s: got %#llx, want %#llx", ctx,
                          mi->name, f->name, (unsigned long long)b,
                          (unsigned long long)a);
            if (f->type == FIELD_BIT)
                ck_assert_msg(b <= 1, "%s: %s %s: bool holds %llu", ctx,
                              mi->name, f->name, (unsigned long long)b);
        }
    }
}

/* Decoded strings and tables borrow the payload they came from. */
static void
assert_borrows(const struct method_info *mi, const void *args,
               const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];
        struct amqp_bytes b;

        if (!is_range(f->type))
            continue;
        b = get_range(args, f);
        if (b.len == 0)
            continue;
        ck_assert_msg(b.ptr >= buf && b.ptr + b.len <= buf + len,
                      "%s %s does not borrow the payload", mi->name, f->name);
    }
}

/* ---- an independent reference encoder (§4.2.5) ---- */

static size_t
ref_put(uint8_t *out, size_t at, uint64_t v, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (out)
            out[at + k] = (uint8_t)(v >> (8 * (n - 1 - k)));
    return at + n;
}

/*
 * The payload the specification asks for: ids, then each argument; a run
 * of consecutive bits shares octets, eight to an octet, first bit lowest,
 * and any other field ends the run. With out == NULL it only counts.
 */
static size_t
ref_encode(const struct method_info *mi, const void *args, uint8_t *out)
{
    size_t at = 0, bit_at = 0;
    unsigned run = 0;

    at = ref_put(out, at, method_class(mi->id), 2);
    at = ref_put(out, at, method_index(mi->id), 2);
    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];
        struct amqp_bytes b;

        if (f->type != FIELD_BIT)
            run = 0;
        switch (f->type) {
        case FIELD_OCTET:
        case FIELD_SHORT:
        case FIELD_LONG:
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP:
            at = ref_put(out, at, get_int(args, f),
                         (unsigned)fixed_size(f->type));
            break;
        case FIELD_BIT:
            if (run % 8 == 0) {
                bit_at = at;
                at = ref_put(out, at, 0, 1);
            }
            if (out && get_int(args, f))
                out[bit_at] |= (uint8_t)(1u << (run % 8));
            run++;
            break;
        default:
            b = get_range(args, f);
            at = ref_put(out, at, b.len, f->type == FIELD_SHORTSTR ? 1 : 4);
            if (out && b.len)
                memcpy(out + at, b.ptr, b.len);
            at += b.len;
            break;
        }
    }
    return at;
}

/* ---- filling every argument with a distinctive value ---- */

#define NVARIANTS 4

/* Bits of one method take these patterns, bit k from bit k of the byte:
 * alternating from true, alternating from false, all set, and pairs. */
static const uint8_t bit_patterns[NVARIANTS] = { 0x55, 0xAA, 0xFF, 0x99 };

/* Heap blocks a filled method points into, freed at the end of a test. */
struct scratch {
    void *mem[32];
    size_t n;
};

static uint8_t *
scratch_alloc(struct scratch *s, size_t n)
{
    ck_assert(s->n < NELEMS(s->mem));
    s->mem[s->n] = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(s->mem[s->n]);
    return s->mem[s->n++];
}

static void
scratch_free(struct scratch *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->mem[i]);
    s->n = 0;
}

/* A small valid table: empty, flat, or with a nested table and array. */
static struct amqp_table
make_table(struct scratch *s, unsigned variant, unsigned salt)
{
    uint8_t tmp[512];
    struct wire_wr w;
    size_t mark, inner;
    struct amqp_field v;
    struct amqp_table t;
    uint8_t *body;

    wire_wr_init(&w, tmp, sizeof(tmp));
    mark = table_begin(&w);
    switch (variant) {
    case 1:
        break;
    case 2:
        ck_assert_int_eq(table_put_key(&w, amqp_cstr("inner")), AMQP_OK);
        wire_put_u8(&w, AMQP_FIELD_TABLE);
        inner = table_begin(&w);
        ck_assert_int_eq(table_put_i64(&w, "n", -(int64_t)salt), AMQP_OK);
        table_end(&w, inner);
        ck_assert_int_eq(table_put_key(&w, amqp_cstr("list")), AMQP_OK);
        wire_put_u8(&w, AMQP_FIELD_ARRAY);
        inner = table_begin(&w);
        v.kind = AMQP_FIELD_I32;
        v.v.i = -(int64_t)salt;
        field_put(&w, &v);
        v.kind = AMQP_FIELD_VOID;
        field_put(&w, &v);
        table_end(&w, inner);
        break;
    default:
        ck_assert_int_eq(table_put_str(&w, "product", "Roost"), AMQP_OK);
        ck_assert_int_eq(table_put_bool(&w, "flag", salt & 1), AMQP_OK);
        ck_assert_int_eq(table_put_i64(&w, "salt", (int64_t)salt * -1000003),
                         AMQP_OK);
        break;
    }
    table_end(&w, mark);
    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_uint_eq(wire_load32(tmp), w.len - 4);
    body = scratch_alloc(s, w.len - 4);
    memcpy(body, tmp + 4, w.len - 4);
    t.ptr = body;
    t.len = w.len - 4;
    return t;
}

static size_t
shortstr_len(unsigned variant, size_t i)
{
    static const size_t lens[NVARIANTS] = { 1, 0, 255, 128 };
    return variant == 0 ? 1 + 3 * i : variant == 3 ? 128 + i : lens[variant];
}

static size_t
longstr_len(unsigned variant, size_t i)
{
    /* 70000 needs more than 16 bits of length. */
    static const size_t lens[NVARIANTS] = { 3, 0, 70000, 256 };
    return variant == 0 ? 3 + i : lens[variant];
}

/* Fill every argument of 'mi' with a value no other field (or variant)
 * shares, so that a swapped, dropped or truncated field shows. */
static void
fill_method(struct amqp_method *m, const struct method_info *mi,
            unsigned variant, struct scratch *s)
{
    unsigned nbit = 0;

    memset(m, 0, sizeof(*m));
    m->id = mi->id;
    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];
        unsigned salt = (unsigned)(i + 1) * 16 + variant;
        size_t len = 0;
        uint8_t *p;
        struct amqp_table t;

        switch (f->type) {
        case FIELD_OCTET:
            set_int(&m->a, f, 0x60 + salt);
            break;
        case FIELD_SHORT:
            set_int(&m->a, f, 0xF000 + salt * 17);
            break;
        case FIELD_LONG:
            set_int(&m->a, f, 0xF1000000u + salt * 0x10101u);
            break;
        case FIELD_LONGLONG:
            set_int(&m->a, f, 0xF2E3D4C5B6A79800ull + salt);
            break;
        case FIELD_TIMESTAMP:
            set_int(&m->a, f, 0x7F6E5D4C3B2A1900ull + salt);
            break;
        case FIELD_BIT:
            set_int(&m->a, f, bit_patterns[variant] >> (nbit++ % 8) & 1);
            break;
        case FIELD_SHORTSTR:
        case FIELD_LONGSTR:
            len = f->type == FIELD_SHORTSTR ? shortstr_len(variant, i)
                                            : longstr_len(variant, i);
            p = scratch_alloc(s, len);
            /* A shortstr must be UTF-8 (method_decode): printable ASCII. */
            for (size_t k = 0; k < len; k++)
                p[k] = f->type == FIELD_SHORTSTR
                           ? (uint8_t)(0x20 + (salt + k * 7) % 0x5f)
                           : (uint8_t)(salt + k * 7);
            set_range(&m->a, f, p, len);
            break;
        case FIELD_TABLE:
            t = make_table(s, variant, salt);
            set_range(&m->a, f, t.ptr, t.len);
            break;
        }
    }
}

/* Encode 'm' into a new exact-size heap block. */
static uint8_t *
encode_exact(const struct amqp_method *m, size_t *len)
{
    struct wire_wr w;
    uint8_t *buf;

    wire_wr_init(&w, NULL, 0);
    ck_assert_int_eq(method_encode(m, &w), AMQP_E_OVERFLOW);
    *len = w.len;
    buf = malloc(w.len);
    ck_assert_ptr_nonnull(buf);
    wire_wr_init(&w, buf, *len);
    ck_assert_int_eq(method_encode(m, &w), AMQP_OK);
    ck_assert_uint_eq(w.len, *len);
    return buf;
}

static uint8_t *
copy_exact(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    if (n)
        memcpy(p, src, n);
    return p;
}

/* ---- round trips of every method ---- */

static void
round_trip(const struct method_info *mi, unsigned variant)
{
    struct scratch s = { .n = 0 };
    struct amqp_method m, d;
    struct wire_wr w;
    size_t want_len, len;
    uint8_t *ref, *buf, *again;
    enum amqp_status st;
    char ctx[64];

    snprintf(ctx, sizeof(ctx), "variant %u", variant);
    fill_method(&m, mi, variant, &s);

    /* The length is the sum over the field types, bits packed. */
    want_len = ref_encode(mi, &m.a, NULL);
    ref = calloc(1, want_len);
    ck_assert_ptr_nonnull(ref);
    ck_assert_uint_eq(ref_encode(mi, &m.a, ref), want_len);

    buf = malloc(want_len);
    wire_wr_init(&w, buf, want_len);
    ck_assert_msg(method_encode(&m, &w) == AMQP_OK, "%s %s", mi->name, ctx);
    ck_assert_msg(w.len == want_len, "%s %s: length %zu, want %zu", mi->name,
                  ctx, w.len, want_len);
    ck_assert_msg(memcmp(buf, ref, want_len) == 0, "%s %s: got %s", mi->name,
                  ctx, hexdump(buf, want_len));

    /* Poisoned, so that a field the decoder skips cannot pass. */
    memset(&d, 0xA5, sizeof(d));
    st = method_decode(buf, want_len, &d);
    ck_assert_msg(st == AMQP_OK, "%s %s: %s", mi->name, ctx, status_name(st));
    ck_assert_uint_eq(d.id, mi->id);
    assert_args_eq(mi, &m.a, &d.a, ctx);
    assert_borrows(mi, &d.a, buf, want_len);

    /* The decoded struct encodes to the same bytes. */
    again = encode_exact(&d, &len);
    ck_assert_uint_eq(len, want_len);
    ck_assert_msg(memcmp(again, buf, len) == 0, "%s %s: re-encoding differs",
                  mi->name, ctx);

    free(again);
    free(buf);
    free(ref);
    scratch_free(&s);
}

START_TEST(round_trip_every_method)
{
    for (unsigned variant = 0; variant < NVARIANTS; variant++)
        round_trip(&method_infos[_i], variant);
}
END_TEST

/* A synthetic field list with runs longer than a byte: 9 bits, an octet,
 * 8 bits, 1 bit after a short. The generated methods have at most 5 bits
 * in a row, so this is the only check of the octet boundary. */
struct many_bits {
    bool a[9];
    uint8_t o;
    bool b[8];
    uint16_t s;
    bool c;
};

#define MB_BIT(arr, k) { #arr, FIELD_BIT, offsetof(struct many_bits, arr[k]) }
static const struct codec_field many_bits_fields[] = {
    MB_BIT(a, 0), MB_BIT(a, 1), MB_BIT(a, 2), MB_BIT(a, 3), MB_BIT(a, 4),
    MB_BIT(a, 5), MB_BIT(a, 6), MB_BIT(a, 7), MB_BIT(a, 8),
    { "o", FIELD_OCTET, offsetof(struct many_bits, o) },
    MB_BIT(b, 0), MB_BIT(b, 1), MB_BIT(b, 2), MB_BIT(b, 3), MB_BIT(b, 4),
    MB_BIT(b, 5), MB_BIT(b, 6), MB_BIT(b, 7),
    { "s", FIELD_SHORT, offsetof(struct many_bits, s) },
    { "c", FIELD_BIT, offsetof(struct many_bits, c) },
};

START_TEST(bit_runs_longer_than_an_octet)
{
    static const uint8_t want[] = { 0xA5, 0x01, 0x42, 0x3C, 0xBE, 0xEF, 0x01 };
    struct many_bits in, out;
    uint8_t buf[sizeof(want)];
    struct wire_wr w;
    struct wire_rd r;

    memset(&in, 0, sizeof(in));
    for (int k = 0; k < 9; k++)
        in.a[k] = (0x1A5 >> k) & 1;
    in.o = 0x42;
    for (int k = 0; k < 8; k++)
        in.b[k] = (0x3C >> k) & 1;
    in.s = 0xBEEF;
    in.c = true;

    wire_wr_init(&w, buf, sizeof(buf));
    ck_assert_int_eq(codec_write(&w, many_bits_fields,
                                 NELEMS(many_bits_fields), CODEC_ALL, &in),
                     AMQP_OK);
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_msg(memcmp(buf, want, sizeof(want)) == 0, "got %s",
                  hexdump(buf, w.len));

    memset(&out, 0, sizeof(out));
    wire_rd_init(&r, want, sizeof(want));
    ck_assert_int_eq(codec_read(&r, many_bits_fields, NELEMS(many_bits_fields),
                                CODEC_ALL, &out),
                     AMQP_OK);
    ck_assert_uint_eq(wire_rd_left(&r), 0);
    ck_assert_mem_eq(&out, &in, sizeof(in));
}
END_TEST

/* ---- exact bytes ---- */

#define BYTES(lit) { (const uint8_t *)(lit), sizeof(lit) - 1 }

/* connection.start's server-properties: product, and a nested
 * capabilities table. */
#define SERVER_PROPS \
    "\x07" "product" "S" "\x00\x00\x00\x05" "Roost" \
    "\x0c" "capabilities" "F" "\x00\x00\x00\x15" \
    "\x12" "publisher_confirms" "t" "\x01"
#define CLIENT_PROPS "\x07" "product" "S" "\x00\x00\x00\x04" "test"
#define XD_ARGS "\x12" "alternate-exchange" "S" "\x00\x00\x00\x04" "alts"
#define QD_ARGS "\x0d" "x-message-ttl" "I" "\x00\x00\xea\x60"
#define BC_ARGS "\x0a" "x-priority" "I" "\x00\x00\x00\x05"

static const struct method_vec {
    const char *name;
    struct amqp_method m;
    struct amqp_bytes wire;
} method_vecs[] = {
    { "connection.start",
      { AMQP_CONNECTION_START,
        { .connection_start = { 0, 9, BYTES(SERVER_PROPS),
                                BYTES("PLAIN AMQPLAIN"), BYTES("en_US") } } },
      BYTES("\x00\x0a\x00\x0a" "\x00\x09" "\x00\x00\x00\x39" SERVER_PROPS
            "\x00\x00\x00\x0e" "PLAIN AMQPLAIN" "\x00\x00\x00\x05" "en_US") },
    { "connection.start-ok",
      { AMQP_CONNECTION_START_OK,
        { .connection_start_ok = { BYTES(CLIENT_PROPS), BYTES("PLAIN"),
                                   BYTES("\0guest\0guest"),
                                   BYTES("en_US") } } },
      BYTES("\x00\x0a\x00\x0b" "\x00\x00\x00\x11" CLIENT_PROPS
            "\x05" "PLAIN" "\x00\x00\x00\x0c" "\x00" "guest" "\x00" "guest"
            "\x05" "en_US") },
    { "connection.tune",
      { AMQP_CONNECTION_TUNE, { .connection_tune = { 2047, 131072, 60 } } },
      BYTES("\x00\x0a\x00\x1e" "\x07\xff" "\x00\x02\x00\x00" "\x00\x3c") },
    { "connection.tune-ok",
      { AMQP_CONNECTION_TUNE_OK,
        { .connection_tune_ok = { 0xFFFF, 0x12345678, 0x0102 } } },
      BYTES("\x00\x0a\x00\x1f" "\xff\xff" "\x12\x34\x56\x78" "\x01\x02") },
    { "connection.open",
      { AMQP_CONNECTION_OPEN,
        { .connection_open = { BYTES("/"), BYTES(""), true } } },
      BYTES("\x00\x0a\x00\x28" "\x01" "/" "\x00" "\x01") },
    { "connection.close",
      { AMQP_CONNECTION_CLOSE,
        { .connection_close = { 501, BYTES("FRAME_ERROR"), 60, 40 } } },
      BYTES("\x00\x0a\x00\x32" "\x01\xf5" "\x0b" "FRAME_ERROR"
            "\x00\x3c" "\x00\x28") },
    { "connection.blocked",
      { AMQP_CONNECTION_BLOCKED,
        { .connection_blocked = { BYTES("low on memory") } } },
      BYTES("\x00\x0a\x00\x3c" "\x0d" "low on memory") },
    { "connection.update-secret",
      { AMQP_CONNECTION_UPDATE_SECRET,
        { .connection_update_secret = { BYTES("s3cr3t"),
                                        BYTES("refresh") } } },
      BYTES("\x00\x0a\x00\x46" "\x00\x00\x00\x06" "s3cr3t" "\x07" "refresh") },
    { "channel.open",
      { AMQP_CHANNEL_OPEN, { .channel_open = { BYTES("") } } },
      BYTES("\x00\x14\x00\x0a" "\x00") },
    { "channel.close",
      { AMQP_CHANNEL_CLOSE,
        { .channel_close = { 404, BYTES("NOT_FOUND"), 50, 10 } } },
      BYTES("\x00\x14\x00\x28" "\x01\x94" "\x09" "NOT_FOUND"
            "\x00\x32" "\x00\x0a") },
    { "access.request (5 bits)",
      { AMQP_ACCESS_REQUEST,
        { .access_request = { BYTES("/data"), true, false, true, false,
                              true } } },
      BYTES("\x00\x1e\x00\x0a" "\x05" "/data" "\x15") },
    /* passive 0, durable 1, auto-delete 0, internal 1, nowait 1: 0x1a */
    { "exchange.declare",
      { AMQP_EXCHANGE_DECLARE,
        { .exchange_declare = { 0, BYTES("logs"), BYTES("fanout"), false,
                                true, false, true, true,
                                BYTES(XD_ARGS) } } },
      BYTES("\x00\x28\x00\x0a" "\x00\x00" "\x04" "logs" "\x06" "fanout"
            "\x1a" "\x00\x00\x00\x1c" XD_ARGS) },
    { "exchange.unbind-ok",
      { AMQP_EXCHANGE_UNBIND_OK, { .exchange_unbind_ok = { 0 } } },
      BYTES("\x00\x28\x00\x33") },
    /* passive 0, durable 1, exclusive 0, auto-delete 1, nowait 0: 0x0a */
    { "queue.declare",
      { AMQP_QUEUE_DECLARE,
        { .queue_declare = { 0, BYTES("tasks"), false, true, false, true,
                             false, BYTES(QD_ARGS) } } },
      BYTES("\x00\x32\x00\x0a" "\x00\x00" "\x05" "tasks" "\x0a"
            "\x00\x00\x00\x13" QD_ARGS) },
    { "queue.declare-ok",
      { AMQP_QUEUE_DECLARE_OK,
        { .queue_declare_ok = { BYTES("tasks"), 0x01020304, 0x0a0b0c0d } } },
      BYTES("\x00\x32\x00\x0b" "\x05" "tasks" "\x01\x02\x03\x04"
            "\x0a\x0b\x0c\x0d") },
    { "queue.bind",
      { AMQP_QUEUE_BIND,
        { .queue_bind = { 0, BYTES("q"), BYTES("amq.topic"), BYTES("a.*.c"),
                          true, BYTES("") } } },
      BYTES("\x00\x32\x00\x14" "\x00\x00" "\x01" "q" "\x09" "amq.topic"
            "\x05" "a.*.c" "\x01" "\x00\x00\x00\x00") },
    { "basic.qos",
      { AMQP_BASIC_QOS, { .basic_qos = { 0x01020304, 0x0506, true } } },
      BYTES("\x00\x3c\x00\x0a" "\x01\x02\x03\x04" "\x05\x06" "\x01") },
    /* no-local 0, no-ack 1, exclusive 1, nowait 0: 0x06 */
    { "basic.consume",
      { AMQP_BASIC_CONSUME,
        { .basic_consume = { 0, BYTES("q1"), BYTES("ctag"), false, true,
                             true, false, BYTES(BC_ARGS) } } },
      BYTES("\x00\x3c\x00\x14" "\x00\x00" "\x02" "q1" "\x04" "ctag" "\x06"
            "\x00\x00\x00\x10" BC_ARGS) },
    { "basic.publish mandatory",
      { AMQP_BASIC_PUBLISH,
        { .basic_publish = { 0, BYTES(""), BYTES("rk"), true, false } } },
      BYTES("\x00\x3c\x00\x28" "\x00\x00" "\x00" "\x02" "rk" "\x01") },
    { "basic.publish immediate",
      { AMQP_BASIC_PUBLISH,
        { .basic_publish = { 0, BYTES("amq.direct"), BYTES(""), false,
                             true } } },
      BYTES("\x00\x3c\x00\x28" "\x00\x00" "\x0a" "amq.direct" "\x00"
            "\x02") },
    { "basic.deliver",
      { AMQP_BASIC_DELIVER,
        { .basic_deliver = { BYTES("ctag"), 0x0102030405060708ull, true,
                             BYTES("ex"), BYTES("rk") } } },
      BYTES("\x00\x3c\x00\x3c" "\x04" "ctag"
            "\x01\x02\x03\x04\x05\x06\x07\x08" "\x01" "\x02" "ex" "\x02"
            "rk") },
    { "basic.get-ok",
      { AMQP_BASIC_GET_OK,
        { .basic_get_ok = { 1, false, BYTES(""), BYTES("k"), 3 } } },
      BYTES("\x00\x3c\x00\x47" "\x00\x00\x00\x00\x00\x00\x00\x01" "\x00"
            "\x00" "\x01" "k" "\x00\x00\x00\x03") },
    { "basic.ack",
      { AMQP_BASIC_ACK, { .basic_ack = { 42, true } } },
      BYTES("\x00\x3c\x00\x50" "\x00\x00\x00\x00\x00\x00\x00\x2a" "\x01") },
    { "basic.nack requeue",
      { AMQP_BASIC_NACK, { .basic_nack = { 7, false, true } } },
      BYTES("\x00\x3c\x00\x78" "\x00\x00\x00\x00\x00\x00\x00\x07" "\x02") },
    { "basic.nack multiple requeue",
      { AMQP_BASIC_NACK,
        { .basic_nack = { 0xFFFFFFFFFFFFFFFFull, true, true } } },
      BYTES("\x00\x3c\x00\x78" "\xff\xff\xff\xff\xff\xff\xff\xff" "\x03") },
    { "basic.reject",
      { AMQP_BASIC_REJECT,
        { .basic_reject = { 0x8000000000000001ull, false } } },
      BYTES("\x00\x3c\x00\x5a" "\x80\x00\x00\x00\x00\x00\x00\x01" "\x00") },
    { "confirm.select",
      { AMQP_CONFIRM_SELECT, { .confirm_select = { true } } },
      BYTES("\x00\x55\x00\x0a" "\x01") },
    { "tx.select",
      { AMQP_TX_SELECT, { .tx_select = { 0 } } },
      BYTES("\x00\x5a\x00\x0a") },
};

START_TEST(encode_vectors)
{
    const struct method_vec *v = &method_vecs[_i];
    uint8_t *buf = malloc(v->wire.len);
    struct wire_wr w;
    enum amqp_status st;

    wire_wr_init(&w, buf, v->wire.len);
    st = method_encode(&v->m, &w);
    ck_assert_msg(st == AMQP_OK, "%s: %s", v->name, status_name(st));
    ck_assert_msg(w.len == v->wire.len, "%s: length %zu, want %zu", v->name,
                  w.len, v->wire.len);
    ck_assert_msg(memcmp(buf, v->wire.ptr, w.len) == 0, "%s: got %s",
                  v->name, hexdump(buf, w.len));
    free(buf);
}
END_TEST

START_TEST(decode_vectors)
{
    const struct method_vec *v = &method_vecs[_i];
    const struct method_info *mi = method_info_find(v->m.id);
    uint8_t *buf = copy_exact(v->wire.ptr, v->wire.len);
    struct amqp_method d;
    enum amqp_status st;

    ck_assert_ptr_nonnull(mi);
    memset(&d, 0xA5, sizeof(d));
    st = method_decode(buf, v->wire.len, &d);
    ck_assert_msg(st == AMQP_OK, "%s: %s", v->name, status_name(st));
    ck_assert_msg(d.id == v->m.id, "%s: id %#x", v->name, d.id);
    assert_args_eq(mi, &v->m.a, &d.a, v->name);
    assert_borrows(mi, &d.a, buf, v->wire.len);
    free(buf);
}
END_TEST

/* Spot checks of named fields after decoding, independent of the
 * descriptors: a wrong offset in the generated table shows here. */
START_TEST(decode_named_fields)
{
    static const uint8_t deliver[] = {
        0x00, 0x3c, 0x00, 0x3c, 0x04, 'c', 't', 'a', 'g',
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x01,
        0x02, 'e', 'x', 0x02, 'r', 'k',
    };
    static const uint8_t declare[] = {
        0x00, 0x28, 0x00, 0x0a, 0x00, 0x00, 0x01, 'x', 0x05, 't', 'o', 'p',
        'i', 'c', 0x1a, 0x00, 0x00, 0x00, 0x09, 0x01, 'k', 'S', 0x00, 0x00,
        0x00, 0x02, 'v', 'w',
    };
    struct amqp_method d;
    struct amqp_field val;

    ck_assert_int_eq(method_decode(deliver, sizeof(deliver), &d), AMQP_OK);
    ck_assert_uint_eq(d.id, AMQP_BASIC_DELIVER);
    ck_assert(amqp_bytes_eq(d.a.basic_deliver.consumer_tag, "ctag"));
    ck_assert_uint_eq(d.a.basic_deliver.delivery_tag, 0x0102030405060708ull);
    ck_assert(d.a.basic_deliver.redelivered);
    ck_assert(amqp_bytes_eq(d.a.basic_deliver.exchange, "ex"));
    ck_assert(amqp_bytes_eq(d.a.basic_deliver.routing_key, "rk"));

    ck_assert_int_eq(method_decode(declare, sizeof(declare), &d), AMQP_OK);
    ck_assert_uint_eq(d.id, AMQP_EXCHANGE_DECLARE);
    ck_assert(amqp_bytes_eq(d.a.exchange_declare.exchange, "x"));
    ck_assert(amqp_bytes_eq(d.a.exchange_declare.type, "topic"));
    ck_assert(!d.a.exchange_declare.passive);
    ck_assert(d.a.exchange_declare.durable);
    ck_assert(!d.a.exchange_declare.auto_delete);
    ck_assert(d.a.exchange_declare.internal);
    ck_assert(d.a.exchange_declare.nowait);
    ck_assert_uint_eq(d.a.exchange_declare.arguments.len, 9);
    ck_assert(table_get(d.a.exchange_declare.arguments, "k", &val));
    ck_assert_int_eq(val.kind, AMQP_FIELD_LONGSTR);
    ck_assert(amqp_bytes_eq(val.v.str, "vw"));
}
END_TEST

START_TEST(unbind_ok_quirk)
{
    /* RabbitMQ numbers exchange.unbind-ok 51, not 41. */
    ck_assert_uint_eq(AMQP_EXCHANGE_UNBIND_OK, AMQP_METHOD_ID(40, 51));
    ck_assert_str_eq(method_name(AMQP_METHOD_ID(40, 51)),
                     "exchange.unbind-ok");
    ck_assert_ptr_null(method_info_find(AMQP_METHOD_ID(40, 41)));
}
END_TEST

/* ---- malformed input ---- */

/* Every cut of every method's encoding fails. Below the four id bytes it
 * is METHOD_SHORT; after that some field runs past the end, so it is
 * TRUNCATED, also inside a table: a cut table's length prefix claims more
 * bytes than are left, which fails before the entries are looked at.
 * Each cut is an exact-size heap copy so that ASan sees any over-read. */
static void
truncations(const struct method_info *mi, unsigned variant)
{
    struct scratch s = { .n = 0 };
    struct amqp_method m, d;
    size_t len;
    uint8_t *full;

    fill_method(&m, mi, variant, &s);
    full = encode_exact(&m, &len);
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = copy_exact(full, n);
        enum amqp_status st = method_decode(cut, n, &d);
        enum amqp_status want = n < 4 ? AMQP_E_METHOD_SHORT : AMQP_E_TRUNCATED;
        ck_assert_msg(st == want, "%s variant %u cut at %zu of %zu: %s",
                      mi->name, variant, n, len, status_name(st));
        free(cut);
    }
    ck_assert_int_eq(method_decode(full, len, &d), AMQP_OK);
    free(full);
    scratch_free(&s);
}

START_TEST(every_truncation)
{
    truncations(&method_infos[_i], 0);
    truncations(&method_infos[_i], 3);
}
END_TEST

static void
trailing_byte_one(const struct method_info *mi)
{
    static const uint8_t extra[] = { 0x00, 0x01, 0xCE, 0xFF };
    struct scratch s = { .n = 0 };
    struct amqp_method m, d;
    size_t len;
    uint8_t *full, *longer;

    fill_method(&m, mi, 0, &s);
    full = encode_exact(&m, &len);
    longer = malloc(len + 1);
    memcpy(longer, full, len);
    for (size_t k = 0; k < NELEMS(extra); k++) {
        enum amqp_status st;
        longer[len] = extra[k];
        st = method_decode(longer, len + 1, &d);
        ck_assert_msg(st == AMQP_E_TRAILING, "%s + %02x: %s", mi->name,
                      extra[k], status_name(st));
    }
    free(longer);
    free(full);
    scratch_free(&s);
}

START_TEST(trailing_byte)
{
    for (size_t k = 0; k < method_info_count; k++)
        trailing_byte_one(&method_infos[k]);
}
END_TEST

static const struct raw_vec {
    const char *name;
    struct amqp_bytes in;
    enum amqp_status want;
} raw_vecs[] = {
    { "empty", BYTES(""), AMQP_E_METHOD_SHORT },
    { "one byte", BYTES("\x00"), AMQP_E_METHOD_SHORT },
    { "class only", BYTES("\x00\x3c"), AMQP_E_METHOD_SHORT },
    { "three bytes", BYTES("\x00\x3c\x00"), AMQP_E_METHOD_SHORT },
    { "class 99", BYTES("\x00\x63\x00\x0a"), AMQP_E_UNKNOWN_CLASS },
    { "class 99 with args", BYTES("\x00\x63\x00\x0a\x01\x02"),
      AMQP_E_UNKNOWN_CLASS },
    { "class 0", BYTES("\x00\x00\x00\x00"), AMQP_E_UNKNOWN_CLASS },
    { "class 70 (0-9 file)", BYTES("\x00\x46\x00\x0a"), AMQP_E_UNKNOWN_CLASS },
    { "class 80 (0-9 stream)", BYTES("\x00\x50\x00\x0a"),
      AMQP_E_UNKNOWN_CLASS },
    { "class 65535", BYTES("\xff\xff\x00\x0a"), AMQP_E_UNKNOWN_CLASS },
    { "class 60 + 256", BYTES("\x01\x3c\x00\x50"), AMQP_E_UNKNOWN_CLASS },
    { "basic 999", BYTES("\x00\x3c\x03\xe7"), AMQP_E_UNKNOWN_METHOD },
    { "connection 12", BYTES("\x00\x0a\x00\x0c"), AMQP_E_UNKNOWN_METHOD },
    { "exchange 41", BYTES("\x00\x28\x00\x29"), AMQP_E_UNKNOWN_METHOD },
    { "access 12", BYTES("\x00\x1e\x00\x0c"), AMQP_E_UNKNOWN_METHOD },
    { "confirm 20", BYTES("\x00\x55\x00\x14"), AMQP_E_UNKNOWN_METHOD },
    { "tx 0", BYTES("\x00\x5a\x00\x00"), AMQP_E_UNKNOWN_METHOD },
    { "basic.ack + 256", BYTES("\x00\x3c\x01\x50"), AMQP_E_UNKNOWN_METHOD },
    { "basic.ack without arguments", BYTES("\x00\x3c\x00\x50"),
      AMQP_E_TRUNCATED },
    { "connection.close-ok", BYTES("\x00\x0a\x00\x33"), AMQP_OK },
    { "connection.close-ok + 1", BYTES("\x00\x0a\x00\x33\x00"),
      AMQP_E_TRAILING },
    { "shortstr past end", BYTES("\x00\x14\x00\x0a\x02" "a"),
      AMQP_E_TRUNCATED },
    { "longstr past end",
      BYTES("\x00\x0a\x00\x15" "\x00\x00\x01\x00" "abc"), AMQP_E_TRUNCATED },
    { "longstr 4G", BYTES("\x00\x0a\x00\x15" "\xff\xff\xff\xff"),
      AMQP_E_TRUNCATED },
    { "bit octet missing", BYTES("\x00\x55\x00\x0a"), AMQP_E_TRUNCATED },
    /* Like RabbitMQ, the unused bits of a bit octet are ignored. */
    { "unused bits set", BYTES("\x00\x55\x00\x0a\xfe"), AMQP_OK },
    /* A bad table inside an argument. */
    { "exchange.declare table type Z",
      BYTES("\x00\x28\x00\x0a" "\x00\x00" "\x01" "x" "\x06" "direct" "\x00"
            "\x00\x00\x00\x04" "\x01" "k" "Z" "\x00"),
      AMQP_E_FIELD_TYPE },
    { "queue.declare table type U (not RabbitMQ's)",
      BYTES("\x00\x32\x00\x0a" "\x00\x00" "\x01" "q" "\x00"
            "\x00\x00\x00\x05" "\x01" "k" "U" "\x00\x01"),
      AMQP_E_FIELD_TYPE },
    { "basic.consume table type L (RabbitMQ reads it as a signed long)",
      BYTES("\x00\x3c\x00\x14" "\x00\x00" "\x00" "\x00" "\x00"
            "\x00\x00\x00\x0b" "\x01" "k" "L" "\x00\x00\x00\x00\x00\x00\x00"
            "\x01"),
      AMQP_OK },
    { "start-ok nested table type 0",
      BYTES("\x00\x0a\x00\x0b" "\x00\x00\x00\x0a" "\x01" "n" "F"
            "\x00\x00\x00\x03" "\x01" "y" "\x00" "\x00" "\x00\x00\x00\x00"
            "\x00"),
      AMQP_E_FIELD_TYPE },
    { "queue.bind array with type ?",
      BYTES("\x00\x32\x00\x14" "\x00\x00" "\x00" "\x00" "\x00" "\x00"
            "\x00\x00\x00\x0a" "\x01" "a" "A" "\x00\x00\x00\x03" "t"
            "\x01" "?"),
      AMQP_E_FIELD_TYPE },
    { "table entry runs past the table",
      BYTES("\x00\x28\x00\x0a" "\x00\x00" "\x00" "\x00" "\x00"
            "\x00\x00\x00\x03" "\x01" "k" "I" "\x00\x00\x00\x00"),
      AMQP_E_TRUNCATED },
};

START_TEST(raw_vectors)
{
    const struct raw_vec *v = &raw_vecs[_i];
    uint8_t *buf = copy_exact(v->in.ptr, v->in.len);
    struct amqp_method d;
    enum amqp_status st = method_decode(buf, v->in.len, &d);

    ck_assert_msg(st == v->want, "%s: got %s, want %s", v->name,
                  status_name(st), status_name(v->want));
    free(buf);
}
END_TEST

/* Tables nest 16 deep in a method argument; the argument is depth 1. */
static size_t
nested_arguments(uint8_t *buf, size_t cap, unsigned depth)
{
    struct wire_wr w;
    size_t marks[32];

    ck_assert_uint_le(depth, NELEMS(marks));
    wire_wr_init(&w, buf, cap);
    wire_put_u16(&w, AMQP_CLASS_EXCHANGE);
    wire_put_u16(&w, 10);
    wire_put_u16(&w, 0);
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr("x")), AMQP_OK);
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr("direct")), AMQP_OK);
    wire_put_u8(&w, 0);
    marks[0] = table_begin(&w);
    for (unsigned d = 1; d < depth; d++) {
        ck_assert_int_eq(table_put_key(&w, amqp_cstr("n")), AMQP_OK);
        wire_put_u8(&w, AMQP_FIELD_TABLE);
        marks[d] = table_begin(&w);
    }
    for (unsigned d = depth; d-- > 0;)
        table_end(&w, marks[d]);
    ck_assert(!wire_wr_overflowed(&w));
    return w.len;
}

START_TEST(table_depth_in_argument)
{
    uint8_t buf[512];
    struct amqp_method d;
    size_t len;

    len = nested_arguments(buf, sizeof(buf), TABLE_MAX_DEPTH);
    ck_assert_int_eq(method_decode(buf, len, &d), AMQP_OK);
    len = nested_arguments(buf, sizeof(buf), TABLE_MAX_DEPTH + 1);
    ck_assert_int_eq(method_decode(buf, len, &d), AMQP_E_TABLE_DEPTH);
}
END_TEST

/* ---- encoding limits ---- */

START_TEST(encode_unknown_id)
{
    static const uint32_t ids[] = {
        AMQP_METHOD_ID(99, 10), AMQP_METHOD_ID(60, 999),
        AMQP_METHOD_ID(10, 12), AMQP_METHOD_ID(40, 41), 0, UINT32_MAX,
    };
    uint8_t buf[64];
    struct amqp_method m;
    struct wire_wr w;

    for (size_t k = 0; k < NELEMS(ids); k++) {
        memset(&m, 0, sizeof(m));
        m.id = ids[k];
        wire_wr_init(&w, buf, sizeof(buf));
        ck_assert_msg(method_encode(&m, &w) == AMQP_E_UNKNOWN_METHOD,
                      "id %#x", ids[k]);
        ck_assert_msg(w.len == 0, "id %#x wrote %zu bytes", ids[k], w.len);
        ck_assert_msg(method_frame_put(&w, 1, &m) == AMQP_E_UNKNOWN_METHOD,
                      "frame id %#x", ids[k]);
    }
}
END_TEST

/* Each shortstr argument of each method refuses 256 bytes. */
static void
shortstr_too_long_one(const struct method_info *mi)
{
    static uint8_t big[256];
    uint8_t buf[2048];
    struct scratch s = { .n = 0 };
    struct amqp_method m;
    struct wire_wr w;

    for (size_t i = 0; i < mi->nfields; i++) {
        if (mi->fields[i].type != FIELD_SHORTSTR)
            continue;
        fill_method(&m, mi, 0, &s);
        set_range(&m.a, &mi->fields[i], big, 256);
        wire_wr_init(&w, buf, sizeof(buf));
        ck_assert_msg(method_encode(&m, &w) == AMQP_E_VALUE, "%s %s",
                      mi->name, mi->fields[i].name);
        wire_wr_init(&w, buf, sizeof(buf));
        ck_assert_msg(method_frame_put(&w, 1, &m) == AMQP_E_VALUE,
                      "frame %s %s", mi->name, mi->fields[i].name);
        set_range(&m.a, &mi->fields[i], big, 255);
        wire_wr_init(&w, buf, sizeof(buf));
        ck_assert_msg(method_encode(&m, &w) == AMQP_OK, "%s %s 255",
                      mi->name, mi->fields[i].name);
        scratch_free(&s);
    }
}

START_TEST(shortstr_too_long)
{
    for (size_t k = 0; k < method_info_count; k++)
        shortstr_too_long_one(&method_infos[k]);
}
END_TEST

/* Every buffer one byte short or more overflows, writes nothing past its
 * end (ASan on an exact-size block; a canary after it for size 0), and
 * reports the size it needed. */
static void
encode_overflow_one(const struct method_info *mi)
{
    struct scratch s = { .n = 0 };
    struct amqp_method m;
    size_t need;
    uint8_t *full;

    fill_method(&m, mi, 3, &s);
    full = encode_exact(&m, &need);
    for (size_t cap = 0; cap < need; cap++) {
        uint8_t *buf = malloc(cap ? cap : 1);
        uint8_t *canary = malloc(cap + 16);
        struct wire_wr w;
        enum amqp_status st;

        wire_wr_init(&w, buf, cap);
        st = method_encode(&m, &w);
        ck_assert_msg(st == AMQP_E_OVERFLOW, "%s cap %zu: %s", mi->name, cap,
                      status_name(st));
        ck_assert_msg(w.len == need, "%s cap %zu: len %zu, want %zu",
                      mi->name, cap, w.len, need);

        memset(canary, 0xEE, cap + 16);
        wire_wr_init(&w, canary, cap);
        ck_assert_int_eq(method_encode(&m, &w), AMQP_E_OVERFLOW);
        for (size_t k = cap; k < cap + 16; k++)
            ck_assert_msg(canary[k] == 0xEE, "%s cap %zu: wrote byte %zu",
                          mi->name, cap, k);
        free(canary);
        free(buf);
    }
    free(full);
    scratch_free(&s);
}

START_TEST(encode_overflow)
{
    for (size_t k = 0; k < method_info_count; k++)
        encode_overflow_one(&method_infos[k]);
}
END_TEST

/* ---- method frames ---- */

START_TEST(frame_put_bytes)
{
    static const uint8_t want[] = {
        0x01, 0x00, 0x05, 0x00, 0x00, 0x00, 0x0d,
        0x00, 0x3c, 0x00, 0x50, 0, 0, 0, 0, 0, 0, 0, 0x2a, 0x01,
        0xCE,
    };
    struct amqp_method m = { AMQP_BASIC_ACK, { .basic_ack = { 42, true } } };
    uint8_t *buf = malloc(sizeof(want));
    struct wire_wr w;

    wire_wr_init(&w, buf, sizeof(want));
    ck_assert_int_eq(method_frame_put(&w, 5, &m), AMQP_OK);
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_msg(memcmp(buf, want, sizeof(want)) == 0, "got %s",
                  hexdump(buf, w.len));
    free(buf);
}
END_TEST

/* Every method as a frame, after a heartbeat already in the buffer so that
 * the size lands at the frame's own offset; frame_decode then
 * method_decode give it back. */
static void
frame_put_every_method_one(const struct method_info *mi)
{
    struct scratch s = { .n = 0 };
    struct amqp_method m, d;
    struct frame f;
    struct wire_wr w;
    size_t len, need;
    uint8_t *payload, *buf;

    fill_method(&m, mi, 0, &s);
    payload = encode_exact(&m, &len);
    need = 8 + len + AMQP_FRAME_OVERHEAD;
    buf = malloc(need);
    wire_wr_init(&w, buf, need);
    frame_put_heartbeat(&w);
    ck_assert_int_eq(method_frame_put(&w, 0x1234, &m), AMQP_OK);
    ck_assert_uint_eq(w.len, need);

    ck_assert_int_eq(frame_decode(buf, need, 0, &f), AMQP_OK);
    ck_assert_int_eq(f.type, AMQP_FRAME_HEARTBEAT);
    ck_assert_uint_eq(f.wire_len, 8);
    ck_assert_int_eq(frame_decode(buf + 8, need - 8, (uint32_t)(need - 8), &f),
                     AMQP_OK);
    ck_assert_int_eq(f.type, AMQP_FRAME_METHOD);
    ck_assert_uint_eq(f.channel, 0x1234);
    ck_assert_uint_eq(f.size, len);
    ck_assert_uint_eq(f.wire_len, need - 8);
    ck_assert_mem_eq(f.payload, payload, len);
    ck_assert_int_eq(method_decode(f.payload, f.size, &d), AMQP_OK);
    ck_assert_uint_eq(d.id, mi->id);
    assert_args_eq(mi, &m.a, &d.a, "frame");

    free(buf);
    free(payload);
    scratch_free(&s);
}

START_TEST(frame_put_every_method)
{
    for (size_t k = 0; k < method_info_count; k++)
        frame_put_every_method_one(&method_infos[k]);
}
END_TEST

/* A frame that does not fit reports AMQP_E_OVERFLOW, the whole size it
 * needs, and writes nothing past the buffer, wherever the buffer ends:
 * inside the frame header, the arguments, or at the end octet. */
static void
frame_put_overflow_one(const struct method_info *mi)
{
    struct scratch s = { .n = 0 };
    struct amqp_method m;
    size_t len, need;
    uint8_t *payload;

    fill_method(&m, mi, 0, &s);
    payload = encode_exact(&m, &len);
    need = len + AMQP_FRAME_OVERHEAD;
    for (size_t start = 0; start <= 8; start += 8) {
        for (size_t cap = start; cap < start + need; cap++) {
            uint8_t *buf = malloc(cap ? cap : 1);
            uint8_t *canary = malloc(cap + 16);
            struct wire_wr w;
            enum amqp_status st;

            wire_wr_init(&w, buf, cap);
            if (start)
                frame_put_heartbeat(&w);
            st = method_frame_put(&w, 1, &m);
            ck_assert_msg(st == AMQP_E_OVERFLOW, "%s start %zu cap %zu: %s",
                          mi->name, start, cap, status_name(st));
            ck_assert_msg(w.len == start + need,
                          "%s start %zu cap %zu: len %zu, want %zu", mi->name,
                          start, cap, w.len, start + need);

            memset(canary, 0xEE, cap + 16);
            wire_wr_init(&w, canary, cap);
            if (start)
                frame_put_heartbeat(&w);
            (void)method_frame_put(&w, 1, &m);
            for (size_t k = cap; k < cap + 16; k++)
                ck_assert_msg(canary[k] == 0xEE,
                              "%s start %zu cap %zu: wrote byte %zu",
                              mi->name, start, cap, k);
            free(canary);
            free(buf);
        }
    }
    free(payload);
    scratch_free(&s);
}

START_TEST(frame_put_overflow)
{
    for (size_t k = 0; k < method_info_count; k++)
        frame_put_overflow_one(&method_infos[k]);
}
END_TEST

/* ---- the generated tables ---- */

static const char *
class_name(uint16_t id)
{
    for (size_t k = 0; k < class_info_count; k++)
        if (class_infos[k].id == id)
            return class_infos[k].name;
    return NULL;
}

static void
lookup_every_method_one(const struct method_info *mi)
{
    const char *cls = class_name(method_class(mi->id));
    size_t n;

    ck_assert_ptr_eq(method_info_find(mi->id), mi);
    ck_assert_str_eq(method_name(mi->id), mi->name);
    ck_assert_msg(class_is_known(method_class(mi->id)), "%s", mi->name);
    ck_assert_ptr_nonnull(cls);
    n = strlen(cls);
    ck_assert_msg(strncmp(mi->name, cls, n) == 0 && mi->name[n] == '.',
                  "%s is not in class %s", mi->name, cls);
    ck_assert_msg((mi->nfields == 0) == (mi->fields == NULL), "%s", mi->name);
    ck_assert_uint_le(mi->size, sizeof(union amqp_method_args));
    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];
        ck_assert_msg(f->type <= FIELD_TABLE, "%s %s", mi->name, f->name);
        ck_assert_msg(f->offset + fixed_size(f->type) <= mi->size,
                      "%s %s lies outside its struct", mi->name, f->name);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(mi->fields[j].offset != f->offset,
                          "%s %s shares an offset", mi->name, f->name);
    }
    for (size_t j = 0; j < method_info_count; j++)
        ck_assert_msg(&method_infos[j] == mi || method_infos[j].id != mi->id,
                      "%s appears twice", mi->name);
}

START_TEST(lookup_every_method)
{
    for (size_t k = 0; k < method_info_count; k++)
        lookup_every_method_one(&method_infos[k]);
}
END_TEST

START_TEST(lookup_exhaustive)
{
    size_t found = 0;

    ck_assert_uint_eq(method_info_count, 66);
    ck_assert_uint_eq(class_info_count, 8);
    for (uint32_t cls = 0; cls < 256; cls++) {
        bool known = cls == 10 || cls == 20 || cls == 30 || cls == 40 ||
                     cls == 50 || cls == 60 || cls == 85 || cls == 90;
        ck_assert_msg(class_is_known((uint16_t)cls) == known, "class %u", cls);
        for (uint32_t meth = 0; meth < 256; meth++) {
            uint32_t id = AMQP_METHOD_ID(cls, meth);
            const struct method_info *mi = method_info_find(id);

            if (mi == NULL) {
                ck_assert_str_eq(method_name(id), "unknown");
                continue;
            }
            ck_assert_msg(mi >= method_infos &&
                              mi < method_infos + method_info_count,
                          "%u/%u", cls, meth);
            ck_assert_msg(mi->id == id, "%u/%u", cls, meth);
            found++;
        }
    }
    /* Every listed method was found, so nothing else was. */
    ck_assert_uint_eq(found, method_info_count);
    ck_assert(!class_is_known(0xFFFF));
    ck_assert(!class_is_known(10 + 256));
    ck_assert_ptr_null(method_info_find(AMQP_METHOD_ID(60, 80 + 256)));
    ck_assert_ptr_null(method_info_find(AMQP_METHOD_ID(60 + 256, 80)));
    ck_assert_ptr_null(method_info_find(UINT32_MAX));
    ck_assert_str_eq(method_name(AMQP_METHOD_ID(99, 10)), "unknown");
    ck_assert_uint_eq(method_class(AMQP_BASIC_NACK), 60);
    ck_assert_uint_eq(method_index(AMQP_BASIC_NACK), 120);
    ck_assert_uint_eq(AMQP_CONFIRM_SELECT, AMQP_METHOD_ID(85, 10));
    ck_assert_uint_eq(AMQP_TX_SELECT, AMQP_METHOD_ID(90, 10));
}
END_TEST

START_TEST(method_flags)
{
    static const struct {
        uint32_t id;
        const char *name;
        bool synchronous;
    } sync[] = {
        { AMQP_CONNECTION_START, "connection.start", true },
        { AMQP_CONNECTION_START_OK, "connection.start-ok", false },
        { AMQP_CONNECTION_TUNE, "connection.tune", true },
        { AMQP_CONNECTION_CLOSE, "connection.close", true },
        { AMQP_CONNECTION_BLOCKED, "connection.blocked", false },
        { AMQP_CONNECTION_UPDATE_SECRET, "connection.update-secret", true },
        { AMQP_CHANNEL_OPEN, "channel.open", true },
        { AMQP_CHANNEL_CLOSE_OK, "channel.close-ok", false },
        { AMQP_EXCHANGE_DECLARE, "exchange.declare", true },
        { AMQP_QUEUE_DECLARE, "queue.declare", true },
        { AMQP_QUEUE_DECLARE_OK, "queue.declare-ok", false },
        { AMQP_BASIC_QOS, "basic.qos", true },
        { AMQP_BASIC_CONSUME, "basic.consume", true },
        { AMQP_BASIC_PUBLISH, "basic.publish", false },
        { AMQP_BASIC_GET, "basic.get", true },
        { AMQP_BASIC_GET_EMPTY, "basic.get-empty", false },
        { AMQP_BASIC_ACK, "basic.ack", false },
        { AMQP_BASIC_NACK, "basic.nack", false },
        { AMQP_BASIC_RECOVER_ASYNC, "basic.recover-async", false },
        { AMQP_BASIC_RECOVER, "basic.recover", true },
        { AMQP_TX_SELECT, "tx.select", true },
        { AMQP_CONFIRM_SELECT, "confirm.select", true },
        { AMQP_CONFIRM_SELECT_OK, "confirm.select-ok", false },
    };

    for (size_t k = 0; k < NELEMS(sync); k++) {
        const struct method_info *mi = method_info_find(sync[k].id);
        ck_assert_ptr_nonnull(mi);
        ck_assert_str_eq(mi->name, sync[k].name);
        ck_assert_msg(mi->synchronous == sync[k].synchronous, "%s",
                      sync[k].name);
    }
    /* Exactly four methods carry content. */
    for (size_t k = 0; k < method_info_count; k++) {
        uint32_t id = method_infos[k].id;
        bool content = id == AMQP_BASIC_PUBLISH || id == AMQP_BASIC_RETURN ||
                       id == AMQP_BASIC_DELIVER || id == AMQP_BASIC_GET_OK;
        ck_assert_msg(method_infos[k].has_content == content, "%s",
                      method_infos[k].name);
        ck_assert_msg(!(content && method_infos[k].synchronous), "%s",
                      method_infos[k].name);
    }
}
END_TEST

static Suite *
method_suite(void)
{
    Suite *s = suite_create("method");
    int n = (int)method_info_count;
    TCase *tc;

    tc = tcase_create("round trip");
    tcase_add_loop_test(tc, round_trip_every_method, 0, n);
    tcase_add_test(tc, bit_runs_longer_than_an_octet);
    suite_add_tcase(s, tc);

    tc = tcase_create("exact bytes");
    tcase_add_loop_test(tc, encode_vectors, 0, (int)NELEMS(method_vecs));
    tcase_add_loop_test(tc, decode_vectors, 0, (int)NELEMS(method_vecs));
    tcase_add_test(tc, decode_named_fields);
    tcase_add_test(tc, unbind_ok_quirk);
    suite_add_tcase(s, tc);

    tc = tcase_create("malformed input");
    tcase_add_loop_test(tc, every_truncation, 0, n);
    tcase_add_test(tc, trailing_byte);
    tcase_add_loop_test(tc, raw_vectors, 0, (int)NELEMS(raw_vecs));
    tcase_add_test(tc, table_depth_in_argument);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("encoding limits");
    tcase_add_test(tc, encode_unknown_id);
    tcase_add_test(tc, shortstr_too_long);
    tcase_add_test(tc, encode_overflow);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("method frames");
    tcase_add_test(tc, frame_put_bytes);
    tcase_add_test(tc, frame_put_every_method);
    tcase_add_test(tc, frame_put_overflow);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("lookup");
    tcase_add_test(tc, lookup_every_method);
    tcase_add_test(tc, lookup_exhaustive);
    tcase_add_test(tc, method_flags);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(method_suite());
}
