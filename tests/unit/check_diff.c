/*
 * SPDX-License-Identifier: Apache-2.0
 * Differential test of our codec against rabbitmq-c 0.11's: every method
 * of the specification, the basic content properties and field tables go
 * through one library's encoder and the other's decoder, field by field,
 * and both encoders must write the same bytes for the same values.
 *
 * This file includes only our headers; rabbitmq-c is reached through the
 * neutral interface of rmq_bridge.h, because both libraries use amqp_
 * names. Tables are described once, as neutral trees (struct dfield), and
 * each side builds them with its own types and encoder; a decoded table is
 * compared as canonical text (rmq_bridge.h), against the text of the tree.
 *
 * Where the two codecs part (each pinned below, under "differences"):
 *
 * - Field type 'L': rabbitmq-c encodes and decodes it as an unsigned 64-bit
 *   integer (AMQP_FIELD_KIND_U64); we refuse it (AMQP_E_FIELD_TYPE).
 *   RabbitMQ 3.10 (rabbit_binary_parser) reads 'L' like 'l', as a *signed*
 *   64-bit long, so rabbitmq-c and RabbitMQ disagree above 2^63 - 1, and
 *   our refusal is stricter than RabbitMQ. RabbitMQ's 17 types agree among
 *   all three in letter, width and signedness: t b B s u I i l f d D S x A
 *   T F V (RabbitMQ alone refuses NaN and infinities in 'f' and 'd').
 * - rabbitmq-c bounds a table's entries by the whole buffer, not by the
 *   table's own length: an entry running past the declared size is read on
 *   (and the fields after the table are then misread); we say
 *   AMQP_E_TRUNCATED.
 * - rabbitmq-c nests tables without limit, by recursion (with an 8 MiB
 *   stack it read 65536 levels and crashed at 131072); we stop at
 *   TABLE_MAX_DEPTH (16).
 * - rabbitmq-c ignores bytes after a method's arguments or after the
 *   properties, accepts the reserved property flag bit 1 and property bits
 *   in continuation flag words, and keeps the continuation bit in _flags;
 *   we answer AMQP_E_TRAILING / AMQP_E_PROPERTY_FLAGS.
 * - rabbitmq-c 0.11 predates connection.update-secret and -ok: its
 *   amqp_encode_method and amqp_decode_method answer
 *   AMQP_STATUS_UNKNOWN_METHOD. These two are checked on our side only.
 *
 * For valid values the two encoders never wrote different bytes.
 */
#include "tests/unit/testutil.h"

#include <inttypes.h>
#include <stdbool.h>

#include "amqp/codec.h"
#include "amqp/method.h"
#include "amqp/props.h"
#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"
#include "tests/unit/rmq_bridge.h"

/*
 * check's ck_assert*() report a passing point to the runner too (a write
 * each), and these loops compare millions of values: they go through
 * ck_abort_msg() only when a comparison fails.
 */
#define EXPECT(cond, ...) \
    do { \
        if (!(cond)) \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)
#define EXPECT_TRUE(cond) EXPECT(cond, "failed: %s", #cond)
#define EXPECT_EQ(a, b) \
    EXPECT((uint64_t)(a) == (uint64_t)(b), \
           "%s == %s: %" PRIu64 " vs %" PRIu64, #a, #b, (uint64_t)(a), \
           (uint64_t)(b))

#define BIG_STR 70000            /* a longstr longer than any short length */
#define BUF_CAP (1u << 20)       /* one encoded method or content header */
#define TEXT_CAP (1u << 20)      /* one canonical text */
#define CONTENT_HEADER_FIXED 12  /* class, weight, body size */
#define PROP_CHUNK 1024          /* flag combinations per check */

static uint8_t pattern[BIG_STR + 1024];
/* Shortstrs must be UTF-8 (method_decode refuses others): printable
 * ASCII of the same shape. */
static uint8_t ascii_pattern[1024];
static uint8_t rbuf[BUF_CAP]; /* rabbitmq-c's encodings */
static uint8_t obuf[BUF_CAP]; /* ours */
static uint8_t arena_mem[4u << 20];
static struct dv_arena arena = { arena_mem, sizeof(arena_mem), 0 };
static char text[TEXT_CAP];

/* ---- tables as neutral trees ---- */

#define KEY(s) .key = (s), .keylen = sizeof(s) - 1
#define NUM(k_, t_, v_) { KEY(k_), .kind = (t_), .u = (uint64_t)(v_) }
#define DEC(k_, sc_, v_) { KEY(k_), .kind = 'D', .scale = (sc_), .u = (v_) }
#define STR(k_, t_, s_) \
    { KEY(k_), .kind = (t_), .ptr = (const uint8_t *)(s_), \
      .len = sizeof(s_) - 1 }
#define SUB(k_, t_, a_) { KEY(k_), .kind = (t_), .items = (a_), \
                          .nitems = NELEMS(a_) }
#define NONE(k_, t_) { KEY(k_), .kind = (t_) }

/* One table per RabbitMQ type, with its edge values. */
static const struct dfield t_bool[] = {
    NUM("false", 't', 0), NUM("true", 't', 1),
};
static const struct dfield t_i8[] = {
    NUM("min", 'b', INT8_MIN), NUM("-1", 'b', -1), NUM("0", 'b', 0),
    NUM("1", 'b', 1), NUM("max", 'b', INT8_MAX),
};
static const struct dfield t_u8[] = {
    NUM("0", 'B', 0), NUM("1", 'B', 1), NUM("max", 'B', UINT8_MAX),
};
static const struct dfield t_i16[] = {
    NUM("min", 's', INT16_MIN), NUM("-1", 's', -1), NUM("0", 's', 0),
    NUM("max", 's', INT16_MAX),
};
static const struct dfield t_u16[] = {
    NUM("0", 'u', 0), NUM("1", 'u', 1), NUM("max", 'u', UINT16_MAX),
};
static const struct dfield t_i32[] = {
    NUM("min", 'I', INT32_MIN), NUM("-1", 'I', -1), NUM("0", 'I', 0),
    NUM("max", 'I', INT32_MAX),
};
static const struct dfield t_u32[] = {
    NUM("0", 'i', 0), NUM("1", 'i', 1), NUM("max", 'i', UINT32_MAX),
};
static const struct dfield t_i64[] = {
    NUM("min", 'l', INT64_MIN), NUM("-1", 'l', -1), NUM("0", 'l', 0),
    NUM("max", 'l', INT64_MAX),
};
static const struct dfield t_float[] = {
    NUM("0", 'f', 0), NUM("-0", 'f', 0x80000000u),
    NUM("1.5", 'f', 0x3fc00000u), NUM("inf", 'f', 0x7f800000u),
    NUM("qnan", 'f', 0x7fc00001u), NUM("snan", 'f', 0x7f800001u),
};
static const struct dfield t_double[] = {
    NUM("0", 'd', 0), NUM("-0", 'd', 0x8000000000000000u),
    NUM("-2.25", 'd', 0xc002000000000000u),
    NUM("max", 'd', 0x7fefffffffffffffu),
    NUM("-inf", 'd', 0xfff0000000000000u),
    NUM("qnan", 'd', 0x7ff8000000000001u),
    NUM("snan", 'd', 0x7ff0000000000001u),
};
static const struct dfield t_decimal[] = {
    DEC("0", 0, 0), DEC("123.45", 2, 12345), DEC("max", 255, UINT32_MAX),
};
static const struct dfield t_longstr[] = {
    STR("empty", 'S', ""), STR("ascii", 'S', "hello"),
    STR("binary", 'S', "\x00\xff\"\\\x7f"),
    STR("utf-8", 'S', "gr\xc3\xbc\xc3\x9f"),
};
static const struct dfield t_bytes[] = {
    STR("empty", 'x', ""), STR("binary", 'x', "\x00\xff\x7f"),
};
static const struct dfield small_array[] = {
    NUM("", 'I', 1), STR("", 'S', "a"), NONE("", 'V'),
};
static const struct dfield t_array[] = {
    NONE("empty", 'A'), SUB("mixed", 'A', small_array),
};
static const struct dfield t_timestamp[] = {
    NUM("0", 'T', 0), NUM("2023", 'T', 1700000000), NUM("max", 'T', UINT64_MAX),
};
static const struct dfield small_table[] = { NUM("a", 'l', 1) };
static const struct dfield t_table[] = {
    NONE("empty", 'F'), SUB("one", 'F', small_table),
};
static const struct dfield t_void[] = { NONE("v", 'V') };

/* Every type once; also used as the values of arrays (keys unused). */
static const struct dfield all_types[] = {
    NUM("t", 't', 1), NUM("b", 'b', -5), NUM("B", 'B', 200),
    NUM("s", 's', -300), NUM("u", 'u', 60000), NUM("I", 'I', -70000),
    NUM("i", 'i', 4000000000u), NUM("l", 'l', -5000000000),
    NUM("f", 'f', 0x40490fdbu), NUM("d", 'd', 0x400921fb54442d18u),
    DEC("D", 3, 1234567), STR("S", 'S', "string"), STR("x", 'x', "\x01\x02"),
    SUB("A", 'A', small_array), NUM("T", 'T', 1234567890),
    SUB("F", 'F', small_table), NONE("V", 'V'),
};
static const struct dfield arrays_of_arrays[] = {
    SUB("", 'A', small_array), NONE("", 'A'), SUB("", 'A', all_types),
};
static const struct dfield arrays_of_tables[] = {
    SUB("", 'F', all_types), NONE("", 'F'), SUB("", 'F', small_table),
};
static const struct dfield arrays[] = {
    SUB("every type", 'A', all_types), SUB("arrays", 'A', arrays_of_arrays),
    SUB("tables", 'A', arrays_of_tables), NONE("empty", 'A'),
};
static const struct dfield nested_inner[] = {
    SUB("all", 'F', all_types), SUB("array", 'A', arrays_of_tables),
};
static const struct dfield nested[] = {
    SUB("t", 'F', nested_inner), SUB("u", 'F', all_types),
};

/* Built at run time (fixtures_init). */
#define DEEP_LEVELS 15 /* nested in a top-level table: depth 16, our limit */
#define MANY 100       /* beyond rabbitmq-c's initial 16 entries */
static struct dfield deep_nodes[DEEP_LEVELS + 1];
static struct dfield too_deep_nodes[DEEP_LEVELS + 2];
static const struct dfield deep_leaf[] = { NUM("leaf", 'l', 42) };
static char key255[255];
static struct dfield keys[5];
static char many_keys[MANY][5];
static struct dfield many[MANY + 1];
static struct dfield many_values[MANY];
static struct dfield big[2];

struct fixture {
    const char *name;
    const struct dfield *items;
    size_t n;
    /* filled by fixtures_init() */
    const uint8_t *ours; /* encoded by us, length prefix included */
    size_t ours_len;
    const uint8_t *rmq;  /* encoded by rabbitmq-c */
    size_t rmq_len;
    int rmq_st;
    const char *canon;   /* the tree's canonical text */
    size_t canon_len;
};

#define FIX(name, a) { name, a, NELEMS(a), NULL, 0, NULL, 0, 0, NULL, 0 }
static struct fixture fixtures[] = {
    { "empty", NULL, 0, NULL, 0, NULL, 0, 0, NULL, 0 },
    FIX("type t", t_bool), FIX("type b", t_i8), FIX("type B", t_u8),
    FIX("type s", t_i16), FIX("type u", t_u16), FIX("type I", t_i32),
    FIX("type i", t_u32), FIX("type l", t_i64), FIX("type f", t_float),
    FIX("type d", t_double), FIX("type D", t_decimal),
    FIX("type S", t_longstr), FIX("type x", t_bytes), FIX("type A", t_array),
    FIX("type T", t_timestamp), FIX("type F", t_table), FIX("type V", t_void),
    FIX("every type", all_types), FIX("arrays", arrays),
    FIX("nested", nested),
    /* run-time trees; items set by fixtures_init() */
    { "depth 16", NULL, 1, NULL, 0, NULL, 0, 0, NULL, 0 },
    { "keys", NULL, NELEMS(keys), NULL, 0, NULL, 0, 0, NULL, 0 },
    { "many entries", NULL, NELEMS(many), NULL, 0, NULL, 0, 0, NULL, 0 },
    { "long strings", NULL, NELEMS(big), NULL, 0, NULL, 0, 0, NULL, 0 },
};
#define NFIX NELEMS(fixtures)

static uint8_t fixture_store[4u << 20];
static size_t fixture_used;
static bool fixtures_ready;

/* A chain of 'levels' containers, alternately tables and arrays, around
 * deep_leaf. */
static void
build_chain(struct dfield *nodes, size_t levels)
{
    for (size_t i = 0; i < levels; i++) {
        memset(&nodes[i], 0, sizeof(nodes[i]));
        nodes[i].key = "n";
        nodes[i].keylen = 1;
        nodes[i].kind = i % 2 == 0 ? 'F' : 'A';
        nodes[i].items = i + 1 < levels ? &nodes[i + 1] : deep_leaf;
        nodes[i].nitems = 1;
    }
}

/* ---- our side: trees to bytes, decoded tables to text ---- */

static void put_items(struct wire_wr *w, const struct dfield *items,
                      size_t n, bool keyed);

static void
put_value(struct wire_wr *w, const struct dfield *f)
{
    struct amqp_field v;
    uint8_t *inner = NULL;
    uint32_t bits;

    memset(&v, 0, sizeof(v));
    v.kind = (enum amqp_field_kind)f->kind;
    switch (f->kind) {
    case AMQP_FIELD_BOOL:
        v.v.b = f->u != 0;
        break;
    case AMQP_FIELD_I8:
    case AMQP_FIELD_I16:
    case AMQP_FIELD_I32:
    case AMQP_FIELD_I64:
    case AMQP_FIELD_L64:
        v.v.i = (int64_t)f->u;
        break;
    case AMQP_FIELD_U8:
    case AMQP_FIELD_U16:
    case AMQP_FIELD_U32:
    case AMQP_FIELD_TIMESTAMP:
        v.v.u = f->u;
        break;
    case AMQP_FIELD_FLOAT:
        bits = (uint32_t)f->u;
        memcpy(&v.v.f, &bits, sizeof(bits));
        break;
    case AMQP_FIELD_DOUBLE:
        memcpy(&v.v.d, &f->u, sizeof(f->u));
        break;
    case AMQP_FIELD_DECIMAL:
        v.v.decimal.scale = f->scale;
        v.v.decimal.value = (uint32_t)f->u;
        break;
    case AMQP_FIELD_LONGSTR:
    case AMQP_FIELD_BYTES:
        v.v.str.ptr = f->ptr;
        v.v.str.len = f->len;
        break;
    case AMQP_FIELD_TABLE:
    case AMQP_FIELD_ARRAY: {
        /* field_put takes the contents encoded: measure, then write. */
        struct wire_wr tmp;
        uint8_t none;
        size_t len;

        wire_wr_init(&tmp, &none, 0);
        put_items(&tmp, f->items, f->nitems, f->kind == AMQP_FIELD_TABLE);
        len = tmp.len;
        inner = malloc(len > 0 ? len : 1);
        EXPECT_TRUE(inner != NULL);
        wire_wr_init(&tmp, inner, len);
        put_items(&tmp, f->items, f->nitems, f->kind == AMQP_FIELD_TABLE);
        EXPECT_TRUE(!wire_wr_overflowed(&tmp));
        if (f->kind == AMQP_FIELD_TABLE) {
            v.v.table.ptr = inner;
            v.v.table.len = len;
        } else {
            v.v.array.ptr = inner;
            v.v.array.len = len;
        }
        break;
    }
    default:
        break;
    }
    field_put(w, &v);
    free(inner);
}

static void
put_items(struct wire_wr *w, const struct dfield *items, size_t n, bool keyed)
{
    for (size_t i = 0; i < n; i++) {
        if (keyed) {
            struct amqp_bytes k = { (const uint8_t *)items[i].key,
                                    items[i].keylen };
            EXPECT_TRUE(table_put_key(w, k) == AMQP_OK);
        }
        put_value(w, &items[i]);
    }
}

static void
our_table_encode(struct wire_wr *w, const struct dfield *items, size_t n)
{
    size_t mark = table_begin(w);
    put_items(w, items, n, true);
    table_end(w, mark);
}

static void canon_our_value(struct canon *c, const struct amqp_field *v);

static void
canon_our_table(struct canon *c, struct amqp_table t)
{
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field v;
    bool first = true;

    canon_char(c, '{');
    table_iter_init(&it, t);
    while (table_next(&it, &key, &v)) {
        if (!first)
            canon_char(c, ',');
        first = false;
        canon_quoted(c, key.ptr, key.len);
        canon_char(c, ':');
        canon_our_value(c, &v);
    }
    canon_char(c, '}');
}

static void
canon_our_array(struct canon *c, struct amqp_array a)
{
    struct table_iter it;
    struct amqp_field v;
    bool first = true;

    canon_char(c, '[');
    array_iter_init(&it, a);
    while (array_next(&it, &v)) {
        if (!first)
            canon_char(c, ',');
        first = false;
        canon_our_value(c, &v);
    }
    canon_char(c, ']');
}

static void
canon_our_value(struct canon *c, const struct amqp_field *v)
{
    uint8_t k = (uint8_t)v->kind;
    uint32_t u32;
    uint64_t u64;

    switch (v->kind) {
    case AMQP_FIELD_BOOL:
        canon_scalar(c, k, v->v.b, 0);
        break;
    case AMQP_FIELD_I8:
    case AMQP_FIELD_I16:
    case AMQP_FIELD_I32:
    case AMQP_FIELD_I64:
    case AMQP_FIELD_L64:
        canon_scalar(c, k, (uint64_t)v->v.i, 0);
        break;
    case AMQP_FIELD_U8:
    case AMQP_FIELD_U16:
    case AMQP_FIELD_U32:
    case AMQP_FIELD_TIMESTAMP:
        canon_scalar(c, k, v->v.u, 0);
        break;
    case AMQP_FIELD_FLOAT:
        memcpy(&u32, &v->v.f, sizeof(u32));
        canon_scalar(c, k, u32, 0);
        break;
    case AMQP_FIELD_DOUBLE:
        memcpy(&u64, &v->v.d, sizeof(u64));
        canon_scalar(c, k, u64, 0);
        break;
    case AMQP_FIELD_DECIMAL:
        canon_scalar(c, k, v->v.decimal.value, v->v.decimal.scale);
        break;
    case AMQP_FIELD_LONGSTR:
    case AMQP_FIELD_BYTES:
        canon_kind(c, k);
        canon_quoted(c, v->v.str.ptr, v->v.str.len);
        break;
    case AMQP_FIELD_TABLE:
        canon_kind(c, k);
        canon_our_table(c, v->v.table);
        break;
    case AMQP_FIELD_ARRAY:
        canon_kind(c, k);
        canon_our_array(c, v->v.array);
        break;
    case AMQP_FIELD_VOID:
        canon_kind(c, k);
        break;
    }
}

/* The text the tree itself stands for: what both decoders must give. */
static void
canon_tree(struct canon *c, const struct dfield *items, size_t n, bool keyed)
{
    canon_char(c, keyed ? '{' : '[');
    for (size_t i = 0; i < n; i++) {
        const struct dfield *f = &items[i];
        if (i > 0)
            canon_char(c, ',');
        if (keyed) {
            canon_quoted(c, (const uint8_t *)f->key, f->keylen);
            canon_char(c, ':');
        }
        switch (f->kind) {
        case 'S':
        case 'x':
            canon_kind(c, f->kind);
            canon_quoted(c, f->ptr, f->len);
            break;
        case 'F':
        case 'A':
            canon_kind(c, f->kind);
            canon_tree(c, f->items, f->nitems, f->kind == 'F');
            break;
        default:
            canon_scalar(c, f->kind, f->u, f->scale);
            break;
        }
    }
    canon_char(c, keyed ? '}' : ']');
}

/* ---- fixtures ---- */

static uint8_t *
store(size_t n)
{
    uint8_t *p = fixture_store + fixture_used;
    EXPECT(n <= sizeof(fixture_store) - fixture_used,
           "fixture store full");
    fixture_used += n;
    return p;
}

static void
fixtures_init(void)
{
    struct wire_wr w;
    struct canon c;
    size_t room;

    if (fixtures_ready)
        return;
    for (size_t i = 0; i < sizeof(pattern); i++)
        pattern[i] = (uint8_t)(i * 7 + 3);
    for (size_t i = 0; i < sizeof(ascii_pattern); i++)
        ascii_pattern[i] = (uint8_t)(0x20 + (i * 7 + 3) % 0x5f);

    build_chain(deep_nodes, DEEP_LEVELS);
    build_chain(too_deep_nodes, DEEP_LEVELS + 1);
    memset(key255, 'k', sizeof(key255));
    memset(keys, 0, sizeof(keys));
    keys[0] = (struct dfield)NUM("", 'B', 1);
    keys[1] = (struct dfield)NUM("", 'B', 2);
    keys[1].key = key255;
    keys[1].keylen = sizeof(key255);
    keys[2] = (struct dfield)STR("\x00\xff", 'S', "nul and 0xff in the key");
    keys[3] = (struct dfield)NUM("dup", 'l', 1);
    keys[4] = (struct dfield)NUM("dup", 'l', 2);
    for (size_t i = 0; i < MANY; i++) {
        snprintf(many_keys[i], sizeof(many_keys[i]), "k%03zu", i);
        many[i] = (struct dfield)NUM("", 'i', i);
        many[i].key = many_keys[i];
        many[i].keylen = 4;
        many_values[i] = (struct dfield)NUM("", 'l', (int64_t)i - 50);
    }
    many[MANY] = (struct dfield)NONE("array", 'A');
    many[MANY].items = many_values;
    many[MANY].nitems = MANY;
    big[0] = (struct dfield)NONE("S", 'S');
    big[0].ptr = pattern;
    big[0].len = BIG_STR;
    big[1] = (struct dfield)NONE("x", 'x');
    big[1].ptr = pattern + 1;
    big[1].len = 300;
    for (size_t i = 0; i < NFIX; i++) {
        if (strcmp(fixtures[i].name, "depth 16") == 0)
            fixtures[i].items = deep_nodes;
        else if (strcmp(fixtures[i].name, "keys") == 0)
            fixtures[i].items = keys;
        else if (strcmp(fixtures[i].name, "many entries") == 0)
            fixtures[i].items = many;
        else if (strcmp(fixtures[i].name, "long strings") == 0)
            fixtures[i].items = big;
    }

    for (size_t i = 0; i < NFIX; i++) {
        struct fixture *fx = &fixtures[i];

        room = sizeof(fixture_store) - fixture_used;
        wire_wr_init(&w, fixture_store + fixture_used, room);
        our_table_encode(&w, fx->items, fx->n);
        EXPECT(!wire_wr_overflowed(&w), "fixture store full");
        fx->ours = store(w.len);
        fx->ours_len = w.len;

        room = sizeof(fixture_store) - fixture_used;
        fx->rmq_st = rmq_table_encode(fx->items, fx->n,
                                      fixture_store + fixture_used, room,
                                      &fx->rmq_len);
        EXPECT(fx->rmq_st == 0, "%s: rabbitmq-c: %s", fx->name,
               rmq_strerror(fx->rmq_st));
        fx->rmq = store(fx->rmq_len);

        room = sizeof(fixture_store) - fixture_used;
        canon_init(&c, (char *)fixture_store + fixture_used, room);
        canon_tree(&c, fx->items, fx->n, true);
        EXPECT(canon_ok(&c), "fixture store full");
        fx->canon = (const char *)store(c.len + 1);
        fx->canon_len = c.len;
    }
    fixtures_ready = true;
}

/* ---- comparing ---- */

/* Up to 16 bytes of 'p' from 'at', for messages. */
static const char *
hex_at(char *out, size_t cap, const uint8_t *p, size_t len, size_t at)
{
    size_t k = 0;

    out[0] = '\0';
    for (size_t i = at; i < len && i < at + 16 && k + 4 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%02x ", p[i]);
    return out;
}

static size_t
first_diff(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t i = 0;
    while (i < alen && i < blen && a[i] == b[i])
        i++;
    return i;
}

static void
same_bytes(const uint8_t *got, size_t got_len, const uint8_t *want,
           size_t want_len, const char *ctx)
{
    char h1[80], h2[80];
    size_t at = first_diff(got, got_len, want, want_len);

    EXPECT(got_len == want_len && at == got_len,
           "%s: %zu vs %zu bytes, first difference at %zu: "
           "[%s] vs [%s]", ctx, got_len, want_len, at,
           hex_at(h1, sizeof(h1), got, got_len, at),
           hex_at(h2, sizeof(h2), want, want_len, at));
}

static void
same_text(const struct canon *got, const char *want, size_t want_len,
          const char *ctx)
{
    size_t at = 0;

    EXPECT(canon_ok(got), "%s: canonical text too long", ctx);
    while (at < got->len && at < want_len && got->buf[at] == want[at])
        at++;
    EXPECT(got->len == want_len && at == want_len,
           "%s: tables differ at %zu: got \"%.60s\" want \"%.60s\"",
           ctx, at, got->buf + at, want + at);
}

static int
dv_type_of(uint8_t codec_type)
{
    switch (codec_type) {
    case FIELD_OCTET: return DV_OCTET;
    case FIELD_SHORT: return DV_SHORT;
    case FIELD_LONG: return DV_LONG;
    case FIELD_LONGLONG: return DV_LONGLONG;
    case FIELD_TIMESTAMP: return DV_TIMESTAMP;
    case FIELD_BIT: return DV_BIT;
    case FIELD_SHORTSTR: return DV_SHORTSTR;
    case FIELD_LONGSTR: return DV_LONGSTR;
    case FIELD_TABLE: return DV_TABLE;
    default: return 0;
    }
}

static size_t
field_size(uint8_t codec_type)
{
    switch (codec_type) {
    case FIELD_OCTET: return 1;
    case FIELD_SHORT: return 2;
    case FIELD_LONG: return 4;
    case FIELD_LONGLONG:
    case FIELD_TIMESTAMP: return 8;
    case FIELD_BIT: return sizeof(bool);
    case FIELD_SHORTSTR:
    case FIELD_LONGSTR: return sizeof(struct amqp_bytes);
    default: return sizeof(struct amqp_table);
    }
}

/* Store a neutral value into our struct at f->offset. */
static void
our_set(void *base, const struct codec_field *f, const struct dv *v)
{
    uint8_t *p = (uint8_t *)base + f->offset;
    uint8_t u8 = (uint8_t)v->u;
    uint16_t u16 = (uint16_t)v->u;
    uint32_t u32 = (uint32_t)v->u;
    bool b = v->u != 0;
    struct amqp_bytes s = { v->ptr, v->len };
    struct amqp_table t = { NULL, 0 };

    switch (f->type) {
    case FIELD_OCTET: memcpy(p, &u8, sizeof(u8)); break;
    case FIELD_SHORT: memcpy(p, &u16, sizeof(u16)); break;
    case FIELD_LONG: memcpy(p, &u32, sizeof(u32)); break;
    case FIELD_LONGLONG:
    case FIELD_TIMESTAMP: memcpy(p, &v->u, sizeof(v->u)); break;
    case FIELD_BIT: memcpy(p, &b, sizeof(b)); break;
    case FIELD_SHORTSTR:
    case FIELD_LONGSTR: memcpy(p, &s, sizeof(s)); break;
    case FIELD_TABLE:
        /* our struct holds the entries, without the length prefix */
        t.ptr = v->ptr + 4;
        t.len = v->len - 4;
        memcpy(p, &t, sizeof(t));
        break;
    }
}

/* Our decoded field at f->offset against the value rabbitmq-c encoded
 * ('want'; a table also against its fixture's text). */
static void
check_ours(const void *base, const struct codec_field *f,
           const struct dv *want, int fix, const char *ctx)
{
    const uint8_t *p = (const uint8_t *)base + f->offset;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    bool b;
    struct amqp_bytes s;
    struct amqp_table t;
    struct canon c;
    char what[160];

    snprintf(what, sizeof(what), "%s: %s", ctx, f->name);
    switch (f->type) {
    case FIELD_OCTET:
        memcpy(&u8, p, sizeof(u8));
        EXPECT(u8 == want->u, "%s: %u, want %" PRIu64, what, u8,
               want->u);
        break;
    case FIELD_SHORT:
        memcpy(&u16, p, sizeof(u16));
        EXPECT(u16 == want->u, "%s: %u, want %" PRIu64, what, u16,
               want->u);
        break;
    case FIELD_LONG:
        memcpy(&u32, p, sizeof(u32));
        EXPECT(u32 == want->u, "%s: %" PRIu32 ", want %" PRIu64,
               what, u32, want->u);
        break;
    case FIELD_LONGLONG:
    case FIELD_TIMESTAMP:
        memcpy(&u64, p, sizeof(u64));
        EXPECT(u64 == want->u, "%s: %" PRIu64 ", want %" PRIu64,
               what, u64, want->u);
        break;
    case FIELD_BIT:
        memcpy(&b, p, sizeof(b));
        EXPECT(b == (want->u != 0), "%s: %d, want %" PRIu64, what, b,
               want->u);
        break;
    case FIELD_SHORTSTR:
    case FIELD_LONGSTR:
        memcpy(&s, p, sizeof(s));
        same_bytes(s.ptr, s.len, want->ptr, want->len, what);
        break;
    case FIELD_TABLE:
        memcpy(&t, p, sizeof(t));
        EXPECT(want->len >= 4, "%s: no table", what);
        same_bytes(t.ptr, t.len, want->ptr + 4, want->len - 4, what);
        canon_init(&c, text, sizeof(text));
        canon_our_table(&c, t);
        same_text(&c, fixtures[fix].canon, fixtures[fix].canon_len, what);
        break;
    }
}

/* What rabbitmq-c decoded from our encoding ('got') against the value we
 * encoded ('want'); a table comes back as rabbitmq-c's re-encoding, which
 * must equal ours and read as the fixture's text. */
static void
check_rmq(const struct dv *got, const struct dv *want, int fix,
          const char *name, const char *ctx)
{
    struct canon c;
    size_t used = 0;
    char what[160];
    int st;

    snprintf(what, sizeof(what), "%s: %s", ctx, name);
    EXPECT(got->type == want->type, "%s: type %d, want %d", what,
           got->type, want->type);
    switch (want->type) {
    case DV_SHORTSTR:
    case DV_LONGSTR:
        same_bytes(got->ptr, got->len, want->ptr, want->len, what);
        break;
    case DV_TABLE:
        same_bytes(got->ptr, got->len, want->ptr, want->len, what);
        canon_init(&c, text, sizeof(text));
        st = rmq_table_canon(got->ptr, got->len, &used, &c);
        EXPECT(st == 0, "%s: rabbitmq-c: %s", what, rmq_strerror(st));
        same_text(&c, fixtures[fix].canon, fixtures[fix].canon_len, what);
        break;
    default: /* numbers and bits; rabbitmq-c's booleans must be 0 or 1 */
        EXPECT(got->u == want->u, "%s: %" PRIu64 ", want %" PRIu64,
               what, got->u, want->u);
        break;
    }
}

/* ---- values ---- */

static const uint64_t octets[] = { 0, 1, 0xFF, 0x80, 0x5A };
static const uint64_t shorts[] = { 0, 1, 0xFFFF, 0x8000, 0x1234 };
static const uint64_t longs[] = { 0, 1, 0xFFFFFFFF, 0x80000000, 0x12345678 };
static const uint64_t longlongs[] = { 0, 1, UINT64_MAX, 1ull << 63,
                                      0x0123456789ABCDEFull };
static const size_t short_lens[] = { 0, 1, 255, 2, 128 };
static const size_t long_lens[] = { 0, 1, 255, 256, BIG_STR };
#define NCHOICES 5

/* One set of values for a method's arguments or the properties. */
struct values {
    struct dv ours[RMQ_MAX_FIELDS]; /* tables: our encoding */
    struct dv rmq[RMQ_MAX_FIELDS];  /* tables: rabbitmq-c's */
    int fix[RMQ_MAX_FIELDS];        /* tables: the fixture */
};

/*
 * Values number 'k': field j takes choice (k + j) of its type, so that over
 * NFIX consecutive k every field sees every choice and every table; bit
 * fields take the bits of 'bits', the first one the lowest.
 */
static void
make_values(const struct rmq_field *fields, size_t n, unsigned k,
            unsigned bits, struct values *out)
{
    unsigned bit = 0;

    for (size_t j = 0; j < n; j++) {
        unsigned c = k + (unsigned)j;
        const uint8_t *text_at = pattern + (k * 31 + j * 7) % 256;
        struct dv v = { fields[j].type, 0, NULL, 0 };

        out->fix[j] = -1;
        switch (fields[j].type) {
        case DV_OCTET: v.u = octets[c % NCHOICES]; break;
        case DV_SHORT: v.u = shorts[c % NCHOICES]; break;
        case DV_LONG: v.u = longs[c % NCHOICES]; break;
        case DV_LONGLONG:
        case DV_TIMESTAMP: v.u = longlongs[c % NCHOICES]; break;
        case DV_BIT: v.u = bits >> bit++ & 1; break;
        case DV_SHORTSTR:
            v.ptr = ascii_pattern + (text_at - pattern);
            v.len = short_lens[c % NCHOICES];
            break;
        case DV_LONGSTR:
            v.ptr = text_at;
            v.len = long_lens[c % NCHOICES];
            break;
        case DV_TABLE:
            out->fix[j] = (int)(c % NFIX);
            break;
        }
        out->ours[j] = v;
        out->rmq[j] = v;
        if (out->fix[j] >= 0) {
            const struct fixture *fx = &fixtures[out->fix[j]];
            out->ours[j].ptr = fx->ours;
            out->ours[j].len = fx->ours_len;
            out->rmq[j].ptr = fx->rmq;
            out->rmq[j].len = fx->rmq_len;
        }
    }
}

static unsigned
bit_count(const struct rmq_method_desc *d)
{
    unsigned n = 0;
    for (size_t j = 0; j < d->nfields; j++)
        n += d->fields[j].type == DV_BIT;
    return n;
}

/* Every bit pattern, and at least every fixture in every table field. */
static unsigned
variant_count(const struct rmq_method_desc *d)
{
    unsigned n = 1u << bit_count(d);
    return n > NFIX ? n : (unsigned)NFIX;
}

static const struct method_info *
our_info(const struct rmq_method_desc *d)
{
    const struct method_info *mi = method_info_find(d->id);
    EXPECT(mi != NULL, "%s: not in our tables", d->name);
    return mi;
}

/* Our encoding of method 'd' with values 'v' into obuf; returns its length
 * (class and method ids included). */
static size_t
our_method_encode(const struct rmq_method_desc *d, const struct dv *v)
{
    const struct method_info *mi = our_info(d);
    struct amqp_method m;
    struct wire_wr w;
    enum amqp_status st;

    memset(&m, 0, sizeof(m));
    m.id = d->id;
    for (size_t j = 0; j < mi->nfields; j++)
        our_set(&m.a, &mi->fields[j], &v[j]);
    wire_wr_init(&w, obuf, sizeof(obuf));
    st = method_encode(&m, &w);
    EXPECT(st == AMQP_OK, "%s: we encode: %s", d->name,
           status_name(st));
    return w.len;
}

/* Methods rabbitmq-c 0.11 has no struct for. A newer one that knows them
 * gets them covered like the rest (gen_bridge.py guards each method). */
static const char *const expected_unsupported[] = {
    "connection.update-secret",
    "connection.update-secret-ok",
};

/* A method rabbitmq-c lacks: the library itself refuses it both ways,
 * while we encode and decode it. */
static void
check_unsupported(const struct rmq_method_desc *d)
{
    struct dv zero[RMQ_MAX_FIELDS];
    struct dv out[RMQ_MAX_FIELDS];
    struct amqp_method m;
    struct values vals;
    bool expected = false;
    size_t len = 0;
    int st;

    for (size_t i = 0; i < NELEMS(expected_unsupported); i++)
        expected |= strcmp(d->name, expected_unsupported[i]) == 0;
    EXPECT(expected, "%s: unexpectedly missing from rabbitmq-c",
           d->name);

    memset(zero, 0, sizeof(zero));
    st = rmq_method_encode(d->id, zero, rbuf, sizeof(rbuf), &len);
    EXPECT(rmq_is_unknown_method(st), "%s: rabbitmq-c encodes: %s",
           d->name, rmq_strerror(st));

    make_values(d->fields, d->nfields, 1, 1, &vals);
    len = our_method_encode(d, vals.ours);
    arena.used = 0;
    st = rmq_method_decode(d->id, obuf + 4, len - 4, out, &arena);
    EXPECT(rmq_is_unknown_method(st), "%s: rabbitmq-c decodes: %s",
           d->name, rmq_strerror(st));
    EXPECT_TRUE(method_decode(obuf, len, &m) == AMQP_OK);
    for (size_t j = 0; j < d->nfields; j++)
        check_ours(&m.a, &our_info(d)->fields[j], &vals.ours[j],
                   vals.fix[j], d->name);
}

/* ---- descriptions ---- */

START_TEST(same_methods_and_fields)
{
    EXPECT_EQ(rmq_method_count, method_info_count);
    for (size_t i = 0; i < rmq_method_count; i++) {
        const struct rmq_method_desc *d = &rmq_methods[i];
        const struct method_info *mi = our_info(d);

        ck_assert_str_eq(d->name, mi->name);
        EXPECT(d->nfields == mi->nfields, "%s: %u vs %u fields",
               d->name, d->nfields, mi->nfields);
        for (size_t j = 0; j < d->nfields; j++) {
            ck_assert_str_eq(d->fields[j].name, mi->fields[j].name);
            EXPECT(d->fields[j].type == dv_type_of(mi->fields[j].type),
                   "%s: %s: types differ", d->name, d->fields[j].name);
        }
    }
    for (size_t i = 0; i < method_info_count; i++)
        EXPECT(rmq_method_find(method_infos[i].id) != NULL,
               "%s missing from the bridge", method_infos[i].name);
    for (size_t i = 0; i < RMQ_PROP_COUNT; i++) {
        ck_assert_str_eq(rmq_basic_props[i].name, basic_prop_fields[i].name);
        EXPECT_TRUE(rmq_basic_props[i].type ==
                    dv_type_of(basic_prop_fields[i].type));
    }
}
END_TEST

START_TEST(methods_rabbitmq_c_lacks)
{
    size_t n = 0;

    fixtures_init();
    for (size_t i = 0; i < rmq_method_count; i++) {
        if (!rmq_methods[i].supported) {
            check_unsupported(&rmq_methods[i]);
            n++;
        }
    }
    /* rabbitmq-c 0.11 lacks exactly these; a newer one may lack fewer */
    EXPECT_TRUE(n <= NELEMS(expected_unsupported));
}
END_TEST

/* ---- methods ---- */

/* 1: rabbitmq-c encodes, we decode; field by field. */
START_TEST(method_rmq_to_ours)
{
    const struct rmq_method_desc *d = &rmq_methods[_i];
    const struct method_info *mi = our_info(d);
    unsigned nv = variant_count(d);
    struct values vals;
    struct amqp_method m;
    char ctx[96];

    fixtures_init();
    if (!d->supported) {
        check_unsupported(d);
        return;
    }
    for (unsigned k = 0; k < nv; k++) {
        size_t len = 0;
        int st;
        enum amqp_status ost;

        snprintf(ctx, sizeof(ctx), "%s, values %u", d->name, k);
        make_values(d->fields, d->nfields, k, k, &vals);
        st = rmq_method_encode(d->id, vals.rmq, rbuf + 4, sizeof(rbuf) - 4,
                               &len);
        EXPECT(st == 0, "%s: rabbitmq-c encodes: %s", ctx,
               rmq_strerror(st));
        wire_store16(rbuf, method_class(d->id));
        wire_store16(rbuf + 2, method_index(d->id));
        memset(&m, 0xA5, sizeof(m));
        ost = method_decode(rbuf, len + 4, &m);
        EXPECT(ost == AMQP_OK, "%s: we decode: %s", ctx,
               status_name(ost));
        EXPECT_EQ(m.id, d->id);
        for (size_t j = 0; j < mi->nfields; j++)
            check_ours(&m.a, &mi->fields[j], &vals.rmq[j], vals.fix[j], ctx);
    }
}
END_TEST

/* 2: we encode, rabbitmq-c decodes; field by field. */
START_TEST(method_ours_to_rmq)
{
    const struct rmq_method_desc *d = &rmq_methods[_i];
    unsigned nv = variant_count(d);
    struct dv out[RMQ_MAX_FIELDS];
    struct values vals;
    char ctx[96];

    fixtures_init();
    if (!d->supported) {
        check_unsupported(d);
        return;
    }
    for (unsigned k = 0; k < nv; k++) {
        size_t len;
        int st;

        snprintf(ctx, sizeof(ctx), "%s, values %u", d->name, k);
        make_values(d->fields, d->nfields, k, k, &vals);
        len = our_method_encode(d, vals.ours);
        EXPECT_EQ(wire_load16(obuf), method_class(d->id));
        EXPECT_EQ(wire_load16(obuf + 2), method_index(d->id));
        arena.used = 0;
        st = rmq_method_decode(d->id, obuf + 4, len - 4, out, &arena);
        EXPECT(st == 0, "%s: rabbitmq-c decodes: %s", ctx,
               rmq_strerror(st));
        for (size_t j = 0; j < d->nfields; j++)
            check_rmq(&out[j], &vals.ours[j], vals.fix[j],
                      d->fields[j].name, ctx);
    }
}
END_TEST

/* 5: the same values give the same bytes. */
START_TEST(method_same_bytes)
{
    const struct rmq_method_desc *d = &rmq_methods[_i];
    unsigned nv = variant_count(d);
    struct values vals;
    char ctx[96];

    fixtures_init();
    if (!d->supported) {
        check_unsupported(d);
        return;
    }
    for (unsigned k = 0; k < nv; k++) {
        size_t rlen = 0, olen;
        int st;

        snprintf(ctx, sizeof(ctx), "%s, values %u", d->name, k);
        make_values(d->fields, d->nfields, k, k, &vals);
        st = rmq_method_encode(d->id, vals.rmq, rbuf, sizeof(rbuf), &rlen);
        EXPECT(st == 0, "%s: rabbitmq-c encodes: %s", ctx,
               rmq_strerror(st));
        olen = our_method_encode(d, vals.ours);
        same_bytes(obuf + 4, olen - 4, rbuf, rlen, ctx);
    }
}
END_TEST

/*
 * Both decoders refuse every truncation of a valid encoding. The first
 * values of each method (short ones: every prefix is tried).
 */
#define TRUNC_VARIANTS 8
#define TRUNC_MAX_LEN 2048

START_TEST(method_truncations_refused)
{
    const struct rmq_method_desc *d = &rmq_methods[_i];
    struct dv out[RMQ_MAX_FIELDS];
    struct values vals;
    struct amqp_method m;

    fixtures_init();
    if (!d->supported) {
        check_unsupported(d);
        return;
    }
    for (unsigned k = 0; k < TRUNC_VARIANTS; k++) {
        size_t len;

        make_values(d->fields, d->nfields, k, k, &vals);
        len = our_method_encode(d, vals.ours);
        if (len > TRUNC_MAX_LEN)
            continue;
        for (size_t cut = 4; cut < len; cut++) {
            enum amqp_status ost = method_decode(obuf, cut, &m);
            int st;

            EXPECT(ost != AMQP_OK, "%s, values %u: we accept %zu of "
                   "%zu bytes", d->name, k, cut, len);
            arena.used = 0;
            st = rmq_method_decode(d->id, obuf + 4, cut - 4, out, &arena);
            EXPECT(st != 0, "%s, values %u: rabbitmq-c accepts %zu "
                   "of %zu bytes", d->name, k, cut, len);
        }
    }
}
END_TEST

/*
 * Both decoders ignore the unused high bits of a bit octet. The octet is
 * found as the one byte that differs between all bits clear and all set.
 */
START_TEST(method_unused_bits_ignored)
{
    const struct rmq_method_desc *d = &rmq_methods[_i];
    const struct method_info *mi = our_info(d);
    unsigned nb = bit_count(d), all = (1u << nb) - 1;
    struct dv out[RMQ_MAX_FIELDS];
    struct values vals;
    struct amqp_method m;
    uint8_t *clear = rbuf;
    size_t len, at;

    fixtures_init();
    if (!d->supported || nb == 0)
        return;
    EXPECT_TRUE(nb < 8);
    make_values(d->fields, d->nfields, 1, 0, &vals);
    len = our_method_encode(d, vals.ours);
    memcpy(clear, obuf, len);
    make_values(d->fields, d->nfields, 1, all, &vals);
    EXPECT_EQ(our_method_encode(d, vals.ours), len);
    at = first_diff(clear, len, obuf, len);
    EXPECT_TRUE(at < len);
    EXPECT_EQ(obuf[at] ^ clear[at], all);
    EXPECT_EQ(first_diff(clear + at + 1, len - at - 1,
              obuf + at + 1, len - at - 1),
              len - at - 1);

    for (unsigned pat = 0; pat <= all; pat += all) {
        make_values(d->fields, d->nfields, 1, pat, &vals);
        len = our_method_encode(d, vals.ours);
        obuf[at] |= (uint8_t)~all;
        EXPECT_TRUE(method_decode(obuf, len, &m) == AMQP_OK);
        arena.used = 0;
        EXPECT_TRUE(rmq_method_decode(d->id, obuf + 4, len - 4, out,
                    &arena) == 0);
        for (size_t j = 0; j < d->nfields; j++) {
            if (d->fields[j].type != DV_BIT)
                continue;
            check_ours(&m.a, &mi->fields[j], &vals.ours[j], -1, d->name);
            check_rmq(&out[j], &vals.ours[j], -1, d->fields[j].name,
                      d->name);
        }
    }
}
END_TEST

/* ---- content properties ---- */

static bool
all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/*
 * 3: all 2^14 combinations of property flags, PROP_CHUNK per check. For
 * each: both encode (5: rabbitmq-c writes flag words and properties,
 * exactly our content header after its 12 fixed bytes), we decode
 * rabbitmq-c's and rabbitmq-c decodes ours, field by field.
 */
START_TEST(properties_every_flag_combination)
{
    struct content_header h, got;
    struct dv out[RMQ_PROP_COUNT];
    struct values vals;
    struct wire_wr w;
    char ctx[96];

    fixtures_init();
    for (unsigned c = (unsigned)_i * PROP_CHUNK;
         c < ((unsigned)_i + 1) * PROP_CHUNK; c++) {
        uint16_t flags = (uint16_t)(c << 2);
        uint64_t body = (uint64_t)c * 0x0001000100010001ull;
        uint32_t rflags = 0;
        size_t rlen = 0;
        enum amqp_status ost;
        int st;

        snprintf(ctx, sizeof(ctx), "properties %04x", flags);
        make_values(rmq_basic_props, RMQ_PROP_COUNT, c, 0, &vals);

        st = rmq_props_encode(flags, vals.rmq, rbuf + CONTENT_HEADER_FIXED,
                              sizeof(rbuf) - CONTENT_HEADER_FIXED, &rlen);
        EXPECT(st == 0, "%s: rabbitmq-c encodes: %s", ctx,
               rmq_strerror(st));

        memset(&h, 0, sizeof(h));
        h.class_id = AMQP_CLASS_BASIC;
        h.body_size = body;
        h.props.flags = flags;
        for (size_t i = 0; i < RMQ_PROP_COUNT; i++)
            if (flags >> (15 - i) & 1)
                our_set(&h.props, &basic_prop_fields[i], &vals.ours[i]);
        wire_wr_init(&w, obuf, sizeof(obuf));
        ost = content_header_encode(&h, &w);
        EXPECT(ost == AMQP_OK, "%s: we encode: %s", ctx,
               status_name(ost));
        EXPECT_EQ(wire_load16(obuf), AMQP_CLASS_BASIC);
        EXPECT_EQ(wire_load16(obuf + 2), 0);
        EXPECT_TRUE(wire_load64(obuf + 4) == body);
        same_bytes(obuf + CONTENT_HEADER_FIXED, w.len - CONTENT_HEADER_FIXED,
                   rbuf + CONTENT_HEADER_FIXED, rlen, ctx);

        /* we decode rabbitmq-c's properties behind our fixed part */
        memcpy(rbuf, obuf, CONTENT_HEADER_FIXED);
        memset(&got, 0xA5, sizeof(got));
        ost = content_header_decode(rbuf, rlen + CONTENT_HEADER_FIXED, &got);
        EXPECT(ost == AMQP_OK, "%s: we decode: %s", ctx,
               status_name(ost));
        EXPECT_EQ(got.props.flags, flags);
        EXPECT_TRUE(got.body_size == body);
        for (size_t i = 0; i < RMQ_PROP_COUNT; i++) {
            const struct codec_field *f = &basic_prop_fields[i];
            if (flags >> (15 - i) & 1)
                check_ours(&got.props, f, &vals.rmq[i], vals.fix[i], ctx);
            else
                EXPECT(all_zero((const uint8_t *)&got.props + f->offset,
                       field_size(f->type)),
                       "%s: absent %s not zero", ctx, f->name);
        }

        /* rabbitmq-c decodes ours */
        arena.used = 0;
        st = rmq_props_decode(obuf + CONTENT_HEADER_FIXED,
                              w.len - CONTENT_HEADER_FIXED, &rflags, out,
                              &arena);
        EXPECT(st == 0, "%s: rabbitmq-c decodes: %s", ctx,
               rmq_strerror(st));
        EXPECT_EQ(rflags, flags);
        for (size_t i = 0; i < RMQ_PROP_COUNT; i++) {
            if (flags >> (15 - i) & 1)
                check_rmq(&out[i], &vals.ours[i], vals.fix[i],
                          rmq_basic_props[i].name, ctx);
            else
                EXPECT(out[i].u == 0 && out[i].len == 0,
                       "%s: absent %s not zero", ctx,
                       rmq_basic_props[i].name);
        }
    }
}
END_TEST

/* ---- tables ---- */

/* 4: each fixture both ways; 5: the same bytes. */
START_TEST(table_both_ways)
{
    const struct fixture *fx = &fixtures[_i];
    struct amqp_table t;
    struct wire_rd r;
    struct canon c;
    size_t used = 0;
    enum amqp_status ost;
    int st;

    fixtures_init();
    same_bytes(fx->ours, fx->ours_len, fx->rmq, fx->rmq_len, fx->name);

    wire_rd_init(&r, fx->rmq, fx->rmq_len);
    ost = wire_get_table(&r, 1, &t);
    EXPECT(ost == AMQP_OK, "%s: we decode: %s", fx->name,
           status_name(ost));
    EXPECT_EQ(wire_rd_left(&r), 0);
    EXPECT_EQ(table_count(t), fx->n);
    canon_init(&c, text, sizeof(text));
    canon_our_table(&c, t);
    same_text(&c, fx->canon, fx->canon_len, fx->name);

    canon_init(&c, text, sizeof(text));
    st = rmq_table_canon(fx->ours, fx->ours_len, &used, &c);
    EXPECT(st == 0, "%s: rabbitmq-c decodes: %s", fx->name,
           rmq_strerror(st));
    EXPECT_EQ(used, fx->ours_len);
    same_text(&c, fx->canon, fx->canon_len, fx->name);
}
END_TEST

/* Odd but valid input both read alike: a boolean octet other than 0/1. */
START_TEST(table_bool_octet_2)
{
    static const uint8_t in[] = { 0, 0, 0, 4, 1, 'k', 't', 2 };
    static const char want[] = "{\"k\":t:1}";
    struct amqp_table t;
    struct wire_rd r;
    struct canon c;
    size_t used = 0;

    wire_rd_init(&r, in, sizeof(in));
    EXPECT_TRUE(wire_get_table(&r, 1, &t) == AMQP_OK);
    canon_init(&c, text, sizeof(text));
    canon_our_table(&c, t);
    same_text(&c, want, strlen(want), "ours");
    canon_init(&c, text, sizeof(text));
    EXPECT_TRUE(rmq_table_canon(in, sizeof(in), &used, &c) == 0);
    same_text(&c, want, strlen(want), "rabbitmq-c");
}
END_TEST

/* ---- differences, each pinned so a change on either side shows ---- */

/*
 * 'L': rabbitmq-c writes and reads an unsigned 64-bit value; RabbitMQ reads
 * it as a signed one (like 'l'); we refuse it. Our side is held only to
 * "refuse, or read the value", so that following RabbitMQ later needs no
 * change here.
 */
START_TEST(diff_kind_L)
{
    static const struct dfield entry[] = { NUM("k", 'L', 5) };
    static const uint8_t want[] = { 0, 0, 0, 11, 1, 'k', 'L',
                                    0, 0, 0, 0, 0, 0, 0, 5 };
    static const uint8_t max[] = { 0, 0, 0, 11, 1, 'k', 'L',
                                   0xFF, 0xFF, 0xFF, 0xFF,
                                   0xFF, 0xFF, 0xFF, 0xFF };
    static const char max_text[] = "{\"k\":L:18446744073709551615}";
    struct amqp_table t;
    struct amqp_field v;
    struct wire_rd r;
    struct canon c;
    size_t len = 0, used = 0;
    enum amqp_status st;

    EXPECT_TRUE(rmq_table_encode(entry, 1, rbuf, sizeof(rbuf), &len) == 0);
    same_bytes(rbuf, len, want, sizeof(want), "rabbitmq-c encodes L");
    canon_init(&c, text, sizeof(text));
    EXPECT_TRUE(rmq_table_canon(max, sizeof(max), &used, &c) == 0);
    same_text(&c, max_text, strlen(max_text), "rabbitmq-c decodes L");

    wire_rd_init(&r, want, sizeof(want));
    st = wire_get_table(&r, 1, &t);
    EXPECT(st == AMQP_E_FIELD_TYPE || st == AMQP_OK, "we say %s",
           status_name(st));
    if (st == AMQP_OK) {
        EXPECT_TRUE(table_get(t, "k", &v));
        EXPECT_TRUE(v.v.u == 5);
    }
}
END_TEST

/* An entry running past its table's declared size. */
START_TEST(diff_entry_past_table_size)
{
    static const uint8_t in[] = { 0, 0, 0, 3, 1, 'k', 'I', 0, 0, 0, 5 };
    struct amqp_table t;
    struct wire_rd r;
    struct canon c;
    size_t used = 0;

    canon_init(&c, text, sizeof(text));
    EXPECT_TRUE(rmq_table_canon(in, sizeof(in), &used, &c) == 0);
    EXPECT_EQ(used, sizeof(in)); /* 4 + 3 declared, 11 read */
    same_text(&c, "{\"k\":I:5}", 9, "rabbitmq-c");

    wire_rd_init(&r, in, sizeof(in));
    ck_assert_str_eq(status_name(wire_get_table(&r, 1, &t)),
                     "AMQP_E_TRUNCATED");
}
END_TEST

/* Depth 16 passes both (fixture "depth 16"); depth 17 only rabbitmq-c. */
START_TEST(diff_depth_17)
{
    struct amqp_table t;
    struct wire_rd r;
    struct wire_wr w;
    struct canon c;
    size_t len = 0, used = 0;

    fixtures_init();
    EXPECT_TRUE(rmq_table_encode(too_deep_nodes, 1, rbuf, sizeof(rbuf),
                &len) == 0);
    wire_wr_init(&w, obuf, sizeof(obuf));
    our_table_encode(&w, too_deep_nodes, 1);
    same_bytes(obuf, w.len, rbuf, len, "depth 17");

    canon_init(&c, text, sizeof(text));
    EXPECT_TRUE(rmq_table_canon(rbuf, len, &used, &c) == 0);
    EXPECT_EQ(used, len);

    wire_rd_init(&r, rbuf, len);
    ck_assert_str_eq(status_name(wire_get_table(&r, 1, &t)),
                     "AMQP_E_TABLE_DEPTH");
}
END_TEST

/* Bytes after the last argument. */
START_TEST(diff_method_trailing_bytes)
{
    static const uint8_t close_ok[] = { 0, 20, 0, 41, 0x00 };
    static const uint8_t ack[] = { 0, 60, 0, 80, 0, 0, 0, 0, 0, 0, 0, 7,
                                   0x01, 0xAA };
    struct dv out[RMQ_MAX_FIELDS];
    struct amqp_method m;

    arena.used = 0;
    EXPECT_TRUE(rmq_method_decode(AMQP_CHANNEL_CLOSE_OK, close_ok + 4, 1, out,
                &arena) == 0);
    EXPECT_TRUE(rmq_method_decode(AMQP_BASIC_ACK, ack + 4, sizeof(ack) - 4,
                out, &arena) == 0);
    EXPECT_TRUE(out[0].u == 7 && out[1].u == 1);

    ck_assert_str_eq(status_name(method_decode(close_ok, sizeof(close_ok),
                                               &m)), "AMQP_E_TRAILING");
    ck_assert_str_eq(status_name(method_decode(ack, sizeof(ack), &m)),
                     "AMQP_E_TRAILING");
}
END_TEST

/* Property flag words: reserved bit, continuation words, trailing bytes. */
static const struct prop_vec {
    const char *name;
    uint8_t in[8];
    size_t len;
    uint32_t rmq_flags;     /* rabbitmq-c accepts all of them */
    const char *ours;       /* our status */
    uint16_t ours_flags;
} prop_vecs[] = {
    { "reserved bit 1", { 0x00, 0x02 }, 2, 0x00000002, "AMQP_E_PROPERTY_FLAGS",
      0 },
    { "empty continuation word", { 0x00, 0x01, 0x00, 0x00 }, 4, 0x00000001,
      "AMQP_OK", 0 },
    { "property in continuation word", { 0x00, 0x01, 0x80, 0x00 }, 4,
      0x80000001, "AMQP_E_PROPERTY_FLAGS", 0 },
    { "trailing bytes", { 0x10, 0x00, 0x02, 0xFF }, 4, 0x00001000,
      "AMQP_E_TRAILING", 0 },
};

START_TEST(diff_property_flags)
{
    const struct prop_vec *v = &prop_vecs[_i];
    struct dv out[RMQ_PROP_COUNT];
    struct content_header h;
    uint8_t in[CONTENT_HEADER_FIXED + sizeof(v->in)];
    uint32_t flags = 0;
    enum amqp_status st;

    arena.used = 0;
    EXPECT(rmq_props_decode(v->in, v->len, &flags, out, &arena) == 0,
           "%s: rabbitmq-c refuses", v->name);
    EXPECT(flags == v->rmq_flags, "%s: rabbitmq-c flags %08" PRIx32,
           v->name, flags);

    memset(in, 0, CONTENT_HEADER_FIXED);
    wire_store16(in, AMQP_CLASS_BASIC);
    memcpy(in + CONTENT_HEADER_FIXED, v->in, v->len);
    st = content_header_decode(in, CONTENT_HEADER_FIXED + v->len, &h);
    EXPECT(strcmp(status_name(st), v->ours) == 0, "%s: we say %s",
           v->name, status_name(st));
    if (st == AMQP_OK)
        EXPECT_EQ(h.props.flags, v->ours_flags);
}
END_TEST

/* rabbitmq-c writes a second flag word for _flags above 16 bits (always
 * zero: it keeps only bits 1-15 of each word); we read it. */
START_TEST(rmq_continuation_word_read)
{
    static const uint8_t want[] = { 0x08, 0x01, 0x00, 0x00, 0x07 };
    struct dv in[RMQ_PROP_COUNT];
    struct content_header h;
    uint8_t buf[CONTENT_HEADER_FIXED + sizeof(want)];
    size_t len = 0;

    memset(in, 0, sizeof(in));
    in[4].type = DV_OCTET;
    in[4].u = 7;
    EXPECT_TRUE(rmq_props_encode(1u << 16 | 1u << 11, in, rbuf, sizeof(rbuf),
                &len) == 0);
    same_bytes(rbuf, len, want, sizeof(want), "rabbitmq-c");

    memset(buf, 0, CONTENT_HEADER_FIXED);
    wire_store16(buf, AMQP_CLASS_BASIC);
    memcpy(buf + CONTENT_HEADER_FIXED, want, sizeof(want));
    EXPECT_TRUE(content_header_decode(buf, sizeof(buf), &h) == AMQP_OK);
    EXPECT_EQ(h.props.flags, AMQP_BASIC_PRIORITY_FLAG);
    EXPECT_EQ(h.props.priority, 7);
}
END_TEST

/* Both refuse a shortstr of 256 bytes, in a method and in a property. */
START_TEST(both_refuse_long_shortstr)
{
    struct dv v[RMQ_PROP_COUNT];
    struct amqp_method m;
    struct content_header h;
    struct wire_wr w;
    size_t len = 0;
    int st;

    fixtures_init();
    memset(v, 0, sizeof(v));
    v[0].type = DV_SHORTSTR;
    v[0].ptr = pattern;
    v[0].len = 256;
    st = rmq_method_encode(AMQP_BASIC_CONSUME_OK, v, rbuf, sizeof(rbuf), &len);
    EXPECT(st < 0 && !rmq_is_unknown_method(st), "rabbitmq-c: %d", st);
    st = rmq_props_encode(AMQP_BASIC_CONTENT_TYPE_FLAG, v, rbuf, sizeof(rbuf),
                          &len);
    EXPECT(st < 0, "rabbitmq-c: %d", st);

    memset(&m, 0, sizeof(m));
    m.id = AMQP_BASIC_CONSUME_OK;
    m.a.basic_consume_ok.consumer_tag.ptr = pattern;
    m.a.basic_consume_ok.consumer_tag.len = 256;
    wire_wr_init(&w, obuf, sizeof(obuf));
    EXPECT_TRUE(method_encode(&m, &w) == AMQP_E_VALUE);
    memset(&h, 0, sizeof(h));
    h.class_id = AMQP_CLASS_BASIC;
    h.props.flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
    h.props.content_type.ptr = pattern;
    h.props.content_type.len = 256;
    wire_wr_init(&w, obuf, sizeof(obuf));
    EXPECT_TRUE(content_header_encode(&h, &w) == AMQP_E_VALUE);
}
END_TEST

/* Built once in the runner, before it forks a process per check. */
static void
fixtures_setup(void)
{
    fixtures_init();
}

static Suite *
diff_suite(void)
{
    Suite *s = suite_create("diff");
    int nm = (int)rmq_method_count;
    TCase *tc = tcase_create("descriptions");
    tcase_add_test(tc, same_methods_and_fields);
    tcase_add_test(tc, methods_rabbitmq_c_lacks);
    suite_add_tcase(s, tc);

    tc = tcase_create("methods");
    tcase_add_unchecked_fixture(tc, fixtures_setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, method_rmq_to_ours, 0, nm);
    tcase_add_loop_test(tc, method_ours_to_rmq, 0, nm);
    tcase_add_loop_test(tc, method_same_bytes, 0, nm);
    tcase_add_loop_test(tc, method_truncations_refused, 0, nm);
    tcase_add_loop_test(tc, method_unused_bits_ignored, 0, nm);
    suite_add_tcase(s, tc);

    tc = tcase_create("properties");
    tcase_add_unchecked_fixture(tc, fixtures_setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, properties_every_flag_combination, 0,
                        (1 << RMQ_PROP_COUNT) / PROP_CHUNK);
    suite_add_tcase(s, tc);

    tc = tcase_create("tables");
    tcase_add_unchecked_fixture(tc, fixtures_setup, NULL);
    tcase_add_loop_test(tc, table_both_ways, 0, (int)NFIX);
    tcase_add_test(tc, table_bool_octet_2);
    suite_add_tcase(s, tc);

    tc = tcase_create("differences");
    tcase_add_test(tc, diff_kind_L);
    tcase_add_test(tc, diff_entry_past_table_size);
    tcase_add_test(tc, diff_depth_17);
    tcase_add_test(tc, diff_method_trailing_bytes);
    tcase_add_loop_test(tc, diff_property_flags, 0, (int)NELEMS(prop_vecs));
    tcase_add_test(tc, rmq_continuation_word_read);
    tcase_add_test(tc, both_refuse_long_shortstr);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(diff_suite());
}
