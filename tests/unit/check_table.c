/*
 * SPDX-License-Identifier: Apache-2.0
 * Field tables and arrays (table.h): each of the 17 value types decoded
 * from hand-written bytes to exact values (signedness, bit-exact floats,
 * decimals, borrowed strings) and written back byte for byte by
 * field_put(); unknown types; nested tables and arrays; the depth and size
 * limits at their exact edges; truncation at every byte boundary, read from
 * exact-size heap copies so that ASan sees any over-read; lookups and
 * counts; and the writers, including what happens when the output buffer
 * runs out in the middle of a table.
 */
#include "tests/unit/testutil.h"

#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"

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

static struct amqp_table
tbl(const uint8_t *p, size_t n)
{
    struct amqp_table t = { p, n };
    return t;
}

static struct amqp_array
arr(const uint8_t *p, size_t n)
{
    struct amqp_array a = { p, n };
    return a;
}

/* ---- single values ---- */

enum cmp { CMP_BOOL, CMP_I, CMP_U, CMP_F, CMP_D, CMP_DEC, CMP_STR, CMP_NEST,
           CMP_VOID };

/*
 * One value with its type octet, as on the wire, and what it decodes to:
 * CMP_I compares v.i, CMP_U v.u, CMP_BOOL v.b against 'u', CMP_F/CMP_D the
 * bits of v.f/v.d against 'u', CMP_STR/CMP_NEST a borrowed range of 'u'
 * bytes starting right after the 4-byte length.
 */
static const struct val_vec {
    const char *name;
    uint8_t in[16];
    size_t len;
    enum cmp cmp;
    int64_t i;
    uint64_t u;
    uint8_t scale;
    uint32_t dec;
} val_vecs[] = {
    { "t true", { 't', 1 }, 2, CMP_BOOL, .u = 1 },
    { "t false", { 't', 0 }, 2, CMP_BOOL, .u = 0 },
    { "b -1", { 'b', 0xFF }, 2, CMP_I, .i = -1 },
    { "b 127", { 'b', 0x7F }, 2, CMP_I, .i = 127 },
    { "b -128", { 'b', 0x80 }, 2, CMP_I, .i = -128 },
    { "B 255", { 'B', 0xFF }, 2, CMP_U, .u = 255 },
    { "B 128", { 'B', 0x80 }, 2, CMP_U, .u = 128 },
    { "s -2", { 's', 0xFF, 0xFE }, 3, CMP_I, .i = -2 },
    { "s min", { 's', 0x80, 0x00 }, 3, CMP_I, .i = INT16_MIN },
    { "s max", { 's', 0x7F, 0xFF }, 3, CMP_I, .i = INT16_MAX },
    { "u 65534", { 'u', 0xFF, 0xFE }, 3, CMP_U, .u = 65534 },
    { "u 0x8001", { 'u', 0x80, 0x01 }, 3, CMP_U, .u = 0x8001 },
    { "I -3", { 'I', 0xFF, 0xFF, 0xFF, 0xFD }, 5, CMP_I, .i = -3 },
    { "I min", { 'I', 0x80, 0, 0, 0 }, 5, CMP_I, .i = INT32_MIN },
    { "I 0x01020304", { 'I', 1, 2, 3, 4 }, 5, CMP_I, .i = 0x01020304 },
    { "i 0xFFFFFFFD", { 'i', 0xFF, 0xFF, 0xFF, 0xFD }, 5, CMP_U,
      .u = 0xFFFFFFFDu },
    { "l -1", { 'l', 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF }, 9,
      CMP_I, .i = -1 },
    { "l min", { 'l', 0x80, 0, 0, 0, 0, 0, 0, 0 }, 9, CMP_I, .i = INT64_MIN },
    /* RabbitMQ reads 'L' like 'l', as a signed long long. */
    { "L -1", { 'L', 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF }, 9,
      CMP_I, .i = -1 },
    { "L 5", { 'L', 0, 0, 0, 0, 0, 0, 0, 5 }, 9, CMP_I, .i = 5 },
    { "l 0x0102030405060708", { 'l', 1, 2, 3, 4, 5, 6, 7, 8 }, 9, CMP_I,
      .i = 0x0102030405060708ll },
    { "f 1.5", { 'f', 0x3F, 0xC0, 0, 0 }, 5, CMP_F, .u = 0x3FC00000u },
    { "f -0.0", { 'f', 0x80, 0, 0, 0 }, 5, CMP_F, .u = 0x80000000u },
    { "f quiet NaN with payload", { 'f', 0x7F, 0xC0, 0x00, 0x01 }, 5, CMP_F,
      .u = 0x7FC00001u },
    { "d pi", { 'd', 0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18 }, 9,
      CMP_D, .u = 0x400921FB54442D18ull },
    { "d -inf", { 'd', 0xFF, 0xF0, 0, 0, 0, 0, 0, 0 }, 9, CMP_D,
      .u = 0xFFF0000000000000ull },
    { "d smallest subnormal", { 'd', 0, 0, 0, 0, 0, 0, 0, 1 }, 9, CMP_D,
      .u = 1 },
    { "D 123.45", { 'D', 2, 0, 0, 0x30, 0x39 }, 6, CMP_DEC, .scale = 2,
      .dec = 12345 },
    { "D max", { 'D', 0xFF, 0xFF, 0xFF, 0xFF, 0xFF }, 6, CMP_DEC,
      .scale = 255, .dec = 0xFFFFFFFFu },
    { "S hello", { 'S', 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o' }, 10, CMP_STR,
      .u = 5 },
    { "S empty", { 'S', 0, 0, 0, 0 }, 5, CMP_STR, .u = 0 },
    { "x binary", { 'x', 0, 0, 0, 3, 0x00, 0xFF, 0x80 }, 8, CMP_STR, .u = 3 },
    { "A of b and V", { 'A', 0, 0, 0, 3, 'b', 0xFF, 'V' }, 8, CMP_NEST,
      .u = 3 },
    { "A empty", { 'A', 0, 0, 0, 0 }, 5, CMP_NEST, .u = 0 },
    { "T", { 'T', 0, 0, 0, 1, 0x5F, 0x5E, 0x10, 0x00 }, 9, CMP_U,
      .u = 0x000000015F5E1000ull },
    { "T top bit", { 'T', 0x80, 0, 0, 0, 0, 0, 0, 2 }, 9, CMP_U,
      .u = 0x8000000000000002ull },
    { "T max is unsigned", { 'T', 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
      0xFF }, 9, CMP_U, .u = UINT64_MAX },
    { "F with one entry", { 'F', 0, 0, 0, 3, 1, 'k', 'V' }, 8, CMP_NEST,
      .u = 3 },
    { "F empty", { 'F', 0, 0, 0, 0 }, 5, CMP_NEST, .u = 0 },
    { "V", { 'V' }, 1, CMP_VOID },
};

/* Check 'val' against 'v'; 'at' is where v->in sits in the decoded buffer,
 * so borrowed ranges can be checked to point into it. */
static void
check_val(const struct val_vec *v, const struct amqp_field *val,
          const uint8_t *at)
{
    uint32_t f32;
    uint64_t f64;

    ck_assert_msg(val->kind == (enum amqp_field_kind)v->in[0],
                  "%s: kind %c", v->name, (char)val->kind);
    switch (v->cmp) {
    case CMP_BOOL:
        ck_assert_msg(val->v.b == (v->u != 0), "%s", v->name);
        break;
    case CMP_I:
        ck_assert_msg(val->v.i == v->i, "%s: %lld, want %lld", v->name,
                      (long long)val->v.i, (long long)v->i);
        break;
    case CMP_U:
        ck_assert_msg(val->v.u == v->u, "%s: %llu, want %llu", v->name,
                      (unsigned long long)val->v.u,
                      (unsigned long long)v->u);
        break;
    case CMP_F:
        memcpy(&f32, &val->v.f, sizeof(f32));
        ck_assert_msg(f32 == v->u, "%s: bits %08x", v->name, f32);
        break;
    case CMP_D:
        memcpy(&f64, &val->v.d, sizeof(f64));
        ck_assert_msg(f64 == v->u, "%s: bits %016llx", v->name,
                      (unsigned long long)f64);
        break;
    case CMP_DEC:
        ck_assert_msg(val->v.decimal.scale == v->scale, "%s: scale",
                      v->name);
        ck_assert_msg(val->v.decimal.value == v->dec, "%s: value", v->name);
        break;
    case CMP_STR:
        ck_assert_msg(val->v.str.len == v->u, "%s: len", v->name);
        ck_assert_ptr_eq(val->v.str.ptr, at + 5);
        break;
    case CMP_NEST:
        ck_assert_msg(val->v.table.len == v->u, "%s: len", v->name);
        ck_assert_ptr_eq(val->v.table.ptr, at + 5);
        ck_assert_ptr_eq(val->v.array.ptr, at + 5);
        break;
    case CMP_VOID:
        break;
    }
}

/* As the one entry "k" of a table. */
START_TEST(value_in_table)
{
    const struct val_vec *v = &val_vecs[_i];
    size_t n = 2 + v->len;
    uint8_t *body = malloc(n);
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val;
    enum amqp_status st;

    ck_assert_ptr_nonnull(body);
    body[0] = 1;
    body[1] = 'k';
    memcpy(body + 2, v->in, v->len);
    st = table_validate(body, n, 1);
    ck_assert_msg(st == AMQP_OK, "%s: %s", v->name, status_name(st));

    table_iter_init(&it, tbl(body, n));
    ck_assert(table_next(&it, &key, &val));
    ck_assert_ptr_eq(key.ptr, body + 1);
    ck_assert(amqp_bytes_eq(key, "k"));
    check_val(v, &val, body + 2);
    ck_assert(!table_next(&it, &key, &val));
    ck_assert_uint_eq(table_count(tbl(body, n)), 1);

    memset(&val, 0, sizeof(val));
    ck_assert(table_get(tbl(body, n), "k", &val));
    check_val(v, &val, body + 2);
    free(body);
}
END_TEST

/* As the one value of an array. */
START_TEST(value_in_array)
{
    const struct val_vec *v = &val_vecs[_i];
    uint8_t *body = heap_copy(v->in, v->len);
    struct table_iter it;
    struct amqp_field val;
    enum amqp_status st;

    st = array_validate(body, v->len, 1);
    ck_assert_msg(st == AMQP_OK, "%s: %s", v->name, status_name(st));
    array_iter_init(&it, arr(body, v->len));
    ck_assert(array_next(&it, &val));
    check_val(v, &val, body);
    ck_assert(!array_next(&it, &val));
    ck_assert_uint_eq(array_count(arr(body, v->len)), 1);
    free(body);
}
END_TEST

/* Decoding and writing back gives the same bytes. */
START_TEST(value_round_trip)
{
    const struct val_vec *v = &val_vecs[_i];
    uint8_t body[32], out[32];
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val;
    struct wire_wr w;

    body[0] = 1;
    body[1] = 'k';
    memcpy(body + 2, v->in, v->len);
    ck_assert_int_eq(table_validate(body, 2 + v->len, 1), AMQP_OK);
    table_iter_init(&it, tbl(body, 2 + v->len));
    ck_assert(table_next(&it, &key, &val));

    memset(out, 0xAA, sizeof(out));
    wire_wr_init(&w, out, sizeof(out));
    field_put(&w, &val);
    ck_assert_msg(w.len == v->len, "%s: wrote %zu, want %zu", v->name, w.len,
                  v->len);
    ck_assert_msg(memcmp(out, v->in, v->len) == 0, "%s: wrote %s", v->name,
                  hexdump(out, w.len));
    ck_assert_uint_eq(out[v->len], 0xAA);

    /* And as a whole entry through table_put_key. */
    wire_wr_init(&w, out, sizeof(out));
    ck_assert_int_eq(table_put_key(&w, key), AMQP_OK);
    field_put(&w, &val);
    ck_assert_uint_eq(w.len, 2 + v->len);
    ck_assert(memcmp(out, body, 2 + v->len) == 0);
}
END_TEST

/* Any nonzero octet is true; it is written back as 1. */
START_TEST(value_bool_nonzero)
{
    static const uint8_t body[] = { 1, 'k', 't', 0x80 };
    struct amqp_field val;
    uint8_t out[4];
    struct wire_wr w;

    ck_assert_int_eq(table_validate(body, sizeof(body), 1), AMQP_OK);
    ck_assert(table_get(tbl(body, sizeof(body)), "k", &val));
    ck_assert_int_eq(val.kind, AMQP_FIELD_BOOL);
    ck_assert(val.v.b);
    wire_wr_init(&w, out, sizeof(out));
    field_put(&w, &val);
    ck_assert_uint_eq(w.len, 2);
    ck_assert_mem_eq(out, "t\x01", 2);
}
END_TEST

/* Values the writer builds from C, not from decoded bytes. */
START_TEST(value_put_from_c)
{
    struct amqp_field f[6];
    static const uint8_t want[] = {
        'b', 0xFE,
        'u', 0xFF, 0xFF,
        'I', 0x80, 0, 0, 0,
        'd', 0xBF, 0xF0, 0, 0, 0, 0, 0, 0,
        'D', 3, 0, 0, 0x04, 0xD2,
        'x', 0, 0, 0, 2, 0, 1,
    };
    uint8_t out[64];
    struct wire_wr w;

    memset(f, 0, sizeof(f));
    f[0].kind = AMQP_FIELD_I8;
    f[0].v.i = -2;
    f[1].kind = AMQP_FIELD_U16;
    f[1].v.u = 65535;
    f[2].kind = AMQP_FIELD_I32;
    f[2].v.i = INT32_MIN;
    f[3].kind = AMQP_FIELD_DOUBLE;
    f[3].v.d = -1.0;
    f[4].kind = AMQP_FIELD_DECIMAL;
    f[4].v.decimal.scale = 3;
    f[4].v.decimal.value = 1234;
    f[5].kind = AMQP_FIELD_BYTES;
    f[5].v.str.ptr = (const uint8_t *)"\x00\x01";
    f[5].v.str.len = 2;

    wire_wr_init(&w, out, sizeof(out));
    for (size_t i = 0; i < NELEMS(f); i++)
        field_put(&w, &f[i]);
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_msg(memcmp(out, want, sizeof(want)) == 0, "%s",
                  hexdump(out, w.len));
    ck_assert_int_eq(array_validate(out, w.len, 1), AMQP_OK);
    ck_assert_uint_eq(array_count(arr(out, w.len)), NELEMS(f));
}
END_TEST

/* ---- unknown types ---- */

static const uint8_t bad_kinds[] = {
    'U', 'Q', 'Z', 0, 'a', 'c', 'e', 'v', 'z', '0', 0x7F, 0x80, 0xFF,
};

START_TEST(unknown_type_vectors)
{
    uint8_t kind = bad_kinds[_i];
    /* Followed by plenty of bytes, so that it is not mere truncation. */
    uint8_t tb[3 + 8] = { 1, 'k', kind };
    uint8_t ab[1 + 8] = { kind };
    /* Inside a nested table: the error comes up unchanged. */
    uint8_t nb[] = { 1, 'o', 'F', 0, 0, 0, 11, 1, 'k', kind, 0, 0, 0, 0, 0,
                     0, 0, 0 };
    enum amqp_status st;

    ck_assert(!field_kind_is_valid(kind));
    st = table_validate(tb, sizeof(tb), 1);
    ck_assert_msg(st == AMQP_E_FIELD_TYPE, "table, 0x%02x: %s", kind,
                  status_name(st));
    st = array_validate(ab, sizeof(ab), 1);
    ck_assert_msg(st == AMQP_E_FIELD_TYPE, "array, 0x%02x: %s", kind,
                  status_name(st));
    st = table_validate(nb, sizeof(nb), 1);
    ck_assert_msg(st == AMQP_E_FIELD_TYPE, "nested, 0x%02x: %s", kind,
                  status_name(st));
}
END_TEST

START_TEST(kind_validity)
{
    /* RabbitMQ's 17, and 'L', which it reads like 'l'. */
    static const char valid[] = "tbBsuIilLfdDSxATFV";

    ck_assert_uint_eq(strlen(valid), 18);
    for (unsigned k = 0; k < 256; k++) {
        bool want = k != 0 && memchr(valid, (int)k, 18) != NULL;
        ck_assert_msg(field_kind_is_valid((uint8_t)k) == want, "0x%02x", k);
    }
}
END_TEST

/* ---- nesting ---- */

/*
 * { "arr": [ { "x": int32 7 }, {}, "hi" ], "tbl": { "list": [ u16 1, u16 2 ] } }
 */
static const uint8_t nested[] = {
    3, 'a', 'r', 'r', 'A', 0, 0, 0, 24,
        'F', 0, 0, 0, 7, 1, 'x', 'I', 0, 0, 0, 7,
        'F', 0, 0, 0, 0,
        'S', 0, 0, 0, 2, 'h', 'i',
    3, 't', 'b', 'l', 'F', 0, 0, 0, 16,
        4, 'l', 'i', 's', 't', 'A', 0, 0, 0, 6,
            'u', 0, 1, 'u', 0, 2,
};

START_TEST(nested_read)
{
    uint8_t *p = heap_copy(nested, sizeof(nested));
    struct amqp_table t = tbl(p, sizeof(nested));
    struct amqp_field a, e, x;
    struct table_iter it;

    ck_assert_int_eq(table_validate(p, sizeof(nested), 1), AMQP_OK);
    ck_assert_uint_eq(table_count(t), 2);

    /* An array of tables. */
    ck_assert(table_get(t, "arr", &a));
    ck_assert_int_eq(a.kind, AMQP_FIELD_ARRAY);
    ck_assert_uint_eq(a.v.array.len, 24);
    ck_assert_uint_eq(array_count(a.v.array), 3);
    array_iter_init(&it, a.v.array);
    ck_assert(array_next(&it, &e));
    ck_assert_int_eq(e.kind, AMQP_FIELD_TABLE);
    ck_assert_uint_eq(table_count(e.v.table), 1);
    ck_assert(table_get(e.v.table, "x", &x));
    ck_assert_int_eq(x.kind, AMQP_FIELD_I32);
    ck_assert_int_eq(x.v.i, 7);
    ck_assert(array_next(&it, &e));
    ck_assert_int_eq(e.kind, AMQP_FIELD_TABLE);
    ck_assert_uint_eq(e.v.table.len, 0);
    ck_assert_uint_eq(table_count(e.v.table), 0);
    ck_assert(array_next(&it, &e));
    ck_assert_int_eq(e.kind, AMQP_FIELD_LONGSTR);
    ck_assert(amqp_bytes_eq(e.v.str, "hi"));
    ck_assert(!array_next(&it, &e));

    /* A table of arrays. */
    ck_assert(table_get(t, "tbl", &a));
    ck_assert_int_eq(a.kind, AMQP_FIELD_TABLE);
    ck_assert(table_get(a.v.table, "list", &e));
    ck_assert_int_eq(e.kind, AMQP_FIELD_ARRAY);
    ck_assert_uint_eq(array_count(e.v.array), 2);
    array_iter_init(&it, e.v.array);
    ck_assert(array_next(&it, &x));
    ck_assert_int_eq(x.kind, AMQP_FIELD_U16);
    ck_assert_uint_eq(x.v.u, 1);
    ck_assert(array_next(&it, &x));
    ck_assert_uint_eq(x.v.u, 2);
    ck_assert(!array_next(&it, &x));

    /* Nested lookups do not see the outer keys, nor outer the inner. */
    ck_assert(!table_get(a.v.table, "arr", &x));
    ck_assert(!table_get(t, "list", &x));
    ck_assert(!table_get(t, "x", &x));
    free(p);
}
END_TEST

/* The same bytes, built with the writers. */
START_TEST(nested_write)
{
    uint8_t arrbuf[32], listbuf[8], out[80];
    struct wire_wr w;
    struct amqp_field f;
    size_t outer, inner;

    /* The array [ {"x": 7}, {}, "hi" ]. */
    wire_wr_init(&w, arrbuf, sizeof(arrbuf));
    wire_put_u8(&w, 'F');
    inner = table_begin(&w);
    ck_assert_uint_eq(inner, 1);
    ck_assert_int_eq(table_put_key(&w, amqp_cstr("x")), AMQP_OK);
    f.kind = AMQP_FIELD_I32;
    f.v.i = 7;
    field_put(&w, &f);
    table_end(&w, inner);
    wire_put_u8(&w, 'F');
    table_end(&w, table_begin(&w));
    f.kind = AMQP_FIELD_LONGSTR;
    f.v.str = amqp_cstr("hi");
    field_put(&w, &f);
    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 24);
    ck_assert_int_eq(array_validate(arrbuf, w.len, 2), AMQP_OK);

    wire_wr_init(&w, listbuf, sizeof(listbuf));
    f.kind = AMQP_FIELD_U16;
    f.v.u = 1;
    field_put(&w, &f);
    f.v.u = 2;
    field_put(&w, &f);
    ck_assert_uint_eq(w.len, 6);

    wire_wr_init(&w, out, sizeof(out));
    outer = table_begin(&w);
    ck_assert_int_eq(table_put_key(&w, amqp_cstr("arr")), AMQP_OK);
    f.kind = AMQP_FIELD_ARRAY;
    f.v.array = arr(arrbuf, 24);
    field_put(&w, &f);
    ck_assert_int_eq(table_put_key(&w, amqp_cstr("tbl")), AMQP_OK);
    wire_put_u8(&w, 'F');
    inner = table_begin(&w);
    ck_assert_int_eq(table_put_key(&w, amqp_cstr("list")), AMQP_OK);
    f.kind = AMQP_FIELD_ARRAY;
    f.v.array = arr(listbuf, 6);
    field_put(&w, &f);
    table_end(&w, inner);
    table_end(&w, outer);

    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 4 + sizeof(nested));
    ck_assert_uint_eq(wire_load32(out), sizeof(nested));
    ck_assert_msg(memcmp(out + 4, nested, sizeof(nested)) == 0, "%s",
                  hexdump(out, w.len));

    /* A decoded table is copied back whole by field_put and
     * wire_put_table. */
    {
        uint8_t copy[80];
        struct amqp_field tf = { .kind = AMQP_FIELD_TABLE };

        tf.v.table = tbl(nested, sizeof(nested));
        wire_wr_init(&w, copy, sizeof(copy));
        field_put(&w, &tf);
        ck_assert_uint_eq(w.len, 1 + 4 + sizeof(nested));
        ck_assert_uint_eq(copy[0], 'F');
        ck_assert(memcmp(copy + 1, out, 4 + sizeof(nested)) == 0);

        wire_wr_init(&w, copy, sizeof(copy));
        wire_put_table(&w, tbl(nested, sizeof(nested)));
        ck_assert_uint_eq(w.len, 4 + sizeof(nested));
        ck_assert(memcmp(copy, out, 4 + sizeof(nested)) == 0);
    }
}
END_TEST

/*
 * Write the body of a container of kind kinds[0] ('F' or 'A') nested
 * 'levels' deep: each level holds the next (kinds[1], ...), the innermost
 * a single void.
 */
static void
put_nest(struct wire_wr *w, const char *kinds, unsigned levels)
{
    size_t mark;

    if (kinds[0] == 'F')
        ck_assert_int_eq(table_put_key(w, amqp_cstr("n")), AMQP_OK);
    if (levels == 1) {
        wire_put_u8(w, 'V');
        return;
    }
    wire_put_u8(w, (uint8_t)kinds[1]);
    mark = table_begin(w);
    put_nest(w, kinds + 1, levels - 1);
    table_end(w, mark);
}

static const char *const nest_kinds[] = {
    "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "FAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFA",
    "AFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAFAF",
    "FFFFFFFFFFFFFFFAAAAAAAAAAAAAAAAAAAAAAAAA",
};

static enum amqp_status
validate_nest(const char *kinds, unsigned levels, uint8_t **bufp,
              size_t *lenp)
{
    uint8_t tmp[1024];
    struct wire_wr w;

    wire_wr_init(&w, tmp, sizeof(tmp));
    put_nest(&w, kinds, levels);
    ck_assert(!wire_wr_overflowed(&w));
    *bufp = heap_copy(tmp, w.len);
    *lenp = w.len;
    return kinds[0] == 'F' ? table_validate(*bufp, w.len, 1)
                           : array_validate(*bufp, w.len, 1);
}

START_TEST(depth_limit_vectors)
{
    const char *kinds = nest_kinds[_i];
    uint8_t *p;
    size_t n;
    enum amqp_status st;

    ck_assert_uint_ge(strlen(kinds), 40);
    st = validate_nest(kinds, TABLE_MAX_DEPTH, &p, &n);
    ck_assert_msg(st == AMQP_OK, "%.16s at depth %d: %s", kinds,
                  TABLE_MAX_DEPTH, status_name(st));
    free(p);
    st = validate_nest(kinds, TABLE_MAX_DEPTH + 1, &p, &n);
    ck_assert_msg(st == AMQP_E_TABLE_DEPTH, "%.17s at depth %d: %s", kinds,
                  TABLE_MAX_DEPTH + 1, status_name(st));
    free(p);
    st = validate_nest(kinds, 40, &p, &n);
    ck_assert_msg(st == AMQP_E_TABLE_DEPTH, "%s: %s", kinds,
                  status_name(st));
    free(p);
}
END_TEST

/* Through wire_get_table, the outermost table is depth 1 as well; a table
 * read at a deeper starting depth has less room. */
START_TEST(depth_limit_get_table)
{
    uint8_t *body, *p;
    size_t n;
    struct wire_rd r;
    struct amqp_table t;
    struct amqp_field val;
    struct amqp_table cur;

    ck_assert_int_eq(validate_nest(nest_kinds[0], TABLE_MAX_DEPTH, &body, &n),
                     AMQP_OK);
    p = malloc(4 + n);
    ck_assert_ptr_nonnull(p);
    wire_store32(p, (uint32_t)n);
    memcpy(p + 4, body, n);

    wire_rd_init(&r, p, 4 + n);
    ck_assert_int_eq(wire_get_table(&r, 1, &t), AMQP_OK);
    ck_assert_uint_eq(r.off, 4 + n);
    wire_rd_init(&r, p, 4 + n);
    ck_assert_int_eq(wire_get_table(&r, 2, &t), AMQP_E_TABLE_DEPTH);

    /* Walk down all the levels of the accepted table. */
    cur = tbl(p + 4, n);
    for (unsigned d = 1; d < TABLE_MAX_DEPTH; d++) {
        ck_assert_msg(table_get(cur, "n", &val), "level %u", d);
        ck_assert_int_eq(val.kind, AMQP_FIELD_TABLE);
        cur = val.v.table;
    }
    ck_assert(table_get(cur, "n", &val));
    ck_assert_int_eq(val.kind, AMQP_FIELD_VOID);
    free(body);
    free(p);

    /* Empty tables and arrays at the edge. */
    ck_assert_int_eq(table_validate((const uint8_t *)"", 0, TABLE_MAX_DEPTH),
                     AMQP_OK);
    ck_assert_int_eq(table_validate((const uint8_t *)"", 0,
                                    TABLE_MAX_DEPTH + 1), AMQP_E_TABLE_DEPTH);
    ck_assert_int_eq(array_validate((const uint8_t *)"", 0, TABLE_MAX_DEPTH),
                     AMQP_OK);
    ck_assert_int_eq(array_validate((const uint8_t *)"", 0,
                                    TABLE_MAX_DEPTH + 1), AMQP_E_TABLE_DEPTH);
}
END_TEST

/* ---- size limit ---- */

/* 'n' bytes of table entries "" = void (two bytes each), after a
 * 'pre'-byte gap for a length prefix. */
static uint8_t *
void_entries(size_t pre, size_t n)
{
    uint8_t *p = malloc(pre + n);
    ck_assert_ptr_nonnull(p);
    memset(p, 0, pre);
    for (size_t i = 0; i + 1 < n; i += 2) {
        p[pre + i] = 0;
        p[pre + i + 1] = 'V';
    }
    return p;
}

START_TEST(size_limit_table)
{
    size_t ok = TABLE_MAX_SIZE, over = TABLE_MAX_SIZE + 2;
    uint8_t *p = void_entries(0, over);

    ck_assert_uint_eq(TABLE_MAX_SIZE % 2, 0);
    ck_assert_int_eq(table_validate(p, ok, 1), AMQP_OK);
    ck_assert_int_eq(table_validate(p, over, 1), AMQP_E_TABLE_SIZE);
    /* The limit holds for nested tables too. */
    ck_assert_int_eq(table_validate(p, ok, 2), AMQP_OK);
    ck_assert_int_eq(table_validate(p, over, 2), AMQP_E_TABLE_SIZE);
    free(p);
}
END_TEST

/* With a length prefix, as wire_get_table reads it. */
START_TEST(size_limit_get_table)
{
    size_t ok = TABLE_MAX_SIZE, over = TABLE_MAX_SIZE + 2;
    uint8_t *p = void_entries(4, over);
    struct wire_rd r;
    struct amqp_table t = { NULL, 0 };

    wire_store32(p, (uint32_t)over);
    wire_rd_init(&r, p, 4 + over);
    ck_assert_int_eq(wire_get_table(&r, 1, &t), AMQP_E_TABLE_SIZE);
    ck_assert_ptr_null(t.ptr);

    wire_store32(p, (uint32_t)ok);
    wire_rd_init(&r, p, 4 + over);
    ck_assert_int_eq(wire_get_table(&r, 1, &t), AMQP_OK);
    ck_assert_ptr_eq(t.ptr, p + 4);
    ck_assert_uint_eq(t.len, ok);
    ck_assert_uint_eq(r.off, 4 + ok);
    free(p);
}
END_TEST

START_TEST(size_limit_array)
{
    size_t over = TABLE_MAX_SIZE + 1;
    uint8_t *p = malloc(over);

    ck_assert_ptr_nonnull(p);
    memset(p, 'V', over);
    ck_assert_int_eq(array_validate(p, TABLE_MAX_SIZE, 1), AMQP_OK);
    ck_assert_int_eq(array_validate(p, over, 1), AMQP_E_TABLE_SIZE);
    ck_assert_int_eq(array_validate(p, over, 3), AMQP_E_TABLE_SIZE);
    free(p);
}
END_TEST

/* ---- truncation ---- */

/* A table with every value vector as an entry and the nested table too;
 * 'bounds' gets the offset after each entry. */
static size_t
rich_table(uint8_t *buf, size_t cap, size_t *bounds, size_t *nbounds)
{
    struct wire_wr w;
    char key[8];

    wire_wr_init(&w, buf, cap);
    *nbounds = 0;
    bounds[(*nbounds)++] = 0;
    for (size_t i = 0; i < NELEMS(val_vecs); i++) {
        snprintf(key, sizeof(key), "k%zu", i);
        ck_assert_int_eq(table_put_key(&w, amqp_cstr(key)), AMQP_OK);
        wire_put_raw(&w, val_vecs[i].in, val_vecs[i].len);
        bounds[(*nbounds)++] = w.len;
    }
    /* The two entries of 'nested'. */
    wire_put_raw(&w, nested, 33);
    bounds[(*nbounds)++] = w.len;
    wire_put_raw(&w, nested + 33, sizeof(nested) - 33);
    bounds[(*nbounds)++] = w.len;
    ck_assert(!wire_wr_overflowed(&w));
    return w.len;
}

static bool
is_bound(size_t n, const size_t *bounds, size_t nbounds)
{
    for (size_t i = 0; i < nbounds; i++)
        if (bounds[i] == n)
            return true;
    return false;
}

/* A table body cut inside an entry fails; cut between entries it is a
 * valid (shorter) table. */
START_TEST(truncate_table_body)
{
    uint8_t buf[1024];
    size_t bounds[NELEMS(val_vecs) + 3], nb;
    size_t len = rich_table(buf, sizeof(buf), bounds, &nb);

    ck_assert_int_eq(table_validate(buf, len, 1), AMQP_OK);
    ck_assert_uint_eq(table_count(tbl(buf, len)), NELEMS(val_vecs) + 2);
    for (size_t n = 0; n < len; n++) {
        uint8_t *p = heap_copy(buf, n);
        enum amqp_status st = table_validate(p, n, 1);
        if (is_bound(n, bounds, nb))
            ck_assert_msg(st == AMQP_OK, "cut at entry boundary %zu: %s", n,
                          status_name(st));
        else
            ck_assert_msg(st == AMQP_E_TRUNCATED, "cut at %zu of %zu: %s", n,
                          len, status_name(st));
        free(p);
    }
}
END_TEST

/* With its length prefix, every cut is truncation. */
START_TEST(truncate_table_prefixed)
{
    uint8_t body[1024], buf[1028];
    size_t bounds[NELEMS(val_vecs) + 3], nb;
    size_t len = rich_table(body, sizeof(body), bounds, &nb);
    struct wire_rd r;
    struct amqp_table t;

    wire_store32(buf, (uint32_t)len);
    memcpy(buf + 4, body, len);
    for (size_t n = 0; n < 4 + len; n++) {
        uint8_t *p = heap_copy(buf, n);
        enum amqp_status st;
        wire_rd_init(&r, p, n);
        st = wire_get_table(&r, 1, &t);
        ck_assert_msg(st == AMQP_E_TRUNCATED, "cut at %zu: %s", n,
                      status_name(st));
        ck_assert_uint_le(r.off, n);
        free(p);
    }
    wire_rd_init(&r, buf, 4 + len);
    ck_assert_int_eq(wire_get_table(&r, 1, &t), AMQP_OK);
    ck_assert_ptr_eq(t.ptr, buf + 4);
    ck_assert_uint_eq(t.len, len);
}
END_TEST

START_TEST(truncate_array_body)
{
    uint8_t buf[512];
    size_t bounds[NELEMS(val_vecs) + 1], nb = 0;
    size_t len = 0;

    bounds[nb++] = 0;
    for (size_t i = 0; i < NELEMS(val_vecs); i++) {
        memcpy(buf + len, val_vecs[i].in, val_vecs[i].len);
        len += val_vecs[i].len;
        bounds[nb++] = len;
    }
    ck_assert_int_eq(array_validate(buf, len, 1), AMQP_OK);
    ck_assert_uint_eq(array_count(arr(buf, len)), NELEMS(val_vecs));
    for (size_t n = 0; n < len; n++) {
        uint8_t *p = heap_copy(buf, n);
        enum amqp_status st = array_validate(p, n, 1);
        if (is_bound(n, bounds, nb))
            ck_assert_msg(st == AMQP_OK, "boundary %zu: %s", n,
                          status_name(st));
        else
            ck_assert_msg(st == AMQP_E_TRUNCATED, "cut at %zu: %s", n,
                          status_name(st));
        free(p);
    }
}
END_TEST

static const struct get_table_vec {
    const char *name;
    uint8_t in[12];
    size_t len;
    enum amqp_status want;
    size_t off; /* where the reader ends on AMQP_OK */
} get_table_vecs[] = {
    { "empty input", { 0 }, 0, AMQP_E_TRUNCATED, 0 },
    { "three prefix bytes", { 0, 0, 0 }, 3, AMQP_E_TRUNCATED, 0 },
    { "prefix one too large", { 0, 0, 0, 4, 1, 'k', 'V' }, 7,
      AMQP_E_TRUNCATED, 0 },
    { "prefix 2^32-1", { 0xFF, 0xFF, 0xFF, 0xFF, 1, 'k', 'V' }, 7,
      AMQP_E_TRUNCATED, 0 },
    { "prefix 16 MiB + 1, short input", { 1, 0, 0, 1, 1, 'k', 'V' }, 7,
      AMQP_E_TRUNCATED, 0 },
    { "exact", { 0, 0, 0, 3, 1, 'k', 'V' }, 7, AMQP_OK, 7 },
    { "empty table", { 0, 0, 0, 0 }, 4, AMQP_OK, 4 },
    { "bytes after the table stay unread", { 0, 0, 0, 3, 1, 'k', 'V', 0xAA },
      8, AMQP_OK, 7 },
    { "prefix cuts an entry", { 0, 0, 0, 2, 1, 'k', 'V' }, 7,
      AMQP_E_TRUNCATED, 0 },
    { "bad type inside", { 0, 0, 0, 3, 1, 'k', 'U' }, 7, AMQP_E_FIELD_TYPE,
      0 },
};

START_TEST(get_table_vectors)
{
    const struct get_table_vec *v = &get_table_vecs[_i];
    uint8_t *p = heap_copy(v->in, v->len);
    struct wire_rd r;
    struct amqp_table t = { NULL, 0 };
    enum amqp_status st;

    wire_rd_init(&r, p, v->len);
    st = wire_get_table(&r, 1, &t);
    ck_assert_msg(st == v->want, "%s: %s", v->name, status_name(st));
    ck_assert_uint_le(r.off, v->len);
    if (st == AMQP_OK) {
        ck_assert_uint_eq(r.off, v->off);
        ck_assert_ptr_eq(t.ptr, p + 4);
        ck_assert_uint_eq(t.len, v->off - 4);
    }
    free(p);
}
END_TEST

/* ---- lookups ---- */

static const uint8_t lookup[] = {
    1, 'a', 'b', 1,                 /* "a" = int8 1 */
    2, 'a', 'b', 'b', 2,            /* "ab" = int8 2 */
    1, 'a', 'b', 3,                 /* "a" again = int8 3 */
    0, 'S', 0, 0, 0, 1, 'e',        /* "" = "e" */
    1, 'c', 'V',                    /* "c" = void */
};

START_TEST(lookup_get)
{
    uint8_t *p = heap_copy(lookup, sizeof(lookup));
    struct amqp_table t = tbl(p, sizeof(lookup));
    struct amqp_field val;

    ck_assert_int_eq(table_validate(p, sizeof(lookup), 1), AMQP_OK);
    ck_assert_uint_eq(table_count(t), 5);

    ck_assert(table_get(t, "a", &val));
    ck_assert_int_eq(val.kind, AMQP_FIELD_I8);
    ck_assert_int_eq(val.v.i, 1); /* the first of the duplicates */
    ck_assert(table_get(t, "ab", &val));
    ck_assert_int_eq(val.v.i, 2);
    ck_assert(table_get(t, "", &val));
    ck_assert_int_eq(val.kind, AMQP_FIELD_LONGSTR);
    ck_assert(amqp_bytes_eq(val.v.str, "e"));
    ck_assert(table_get(t, "c", &val));
    ck_assert_int_eq(val.kind, AMQP_FIELD_VOID);

    ck_assert(!table_get(t, "b", &val));
    ck_assert(!table_get(t, "abc", &val));
    ck_assert(!table_get(t, "A", &val));
    ck_assert(!table_get(t, "cc", &val));
    free(p);
}
END_TEST

START_TEST(lookup_iterate_in_order)
{
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val;
    static const char *const keys[] = { "a", "ab", "a", "", "c" };
    size_t n = 0;

    table_iter_init(&it, tbl(lookup, sizeof(lookup)));
    while (table_next(&it, &key, &val)) {
        ck_assert_uint_lt(n, NELEMS(keys));
        ck_assert_msg(amqp_bytes_eq(key, keys[n]), "entry %zu", n);
        ck_assert(key.ptr > lookup && key.ptr < lookup + sizeof(lookup));
        n++;
    }
    ck_assert_uint_eq(n, NELEMS(keys));
    ck_assert_ptr_eq(it.p, lookup + sizeof(lookup));
    ck_assert(!table_next(&it, &key, &val)); /* stays at the end */
}
END_TEST

START_TEST(lookup_empty)
{
    static const uint8_t one = 0;
    struct amqp_table empty = { &one, 0 };
    struct amqp_table zero = { NULL, 0 }; /* e.g. an absent headers table */
    struct amqp_array azero = { NULL, 0 };
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val;

    ck_assert_int_eq(table_validate(&one, 0, 1), AMQP_OK);
    ck_assert_int_eq(array_validate(&one, 0, 1), AMQP_OK);
    ck_assert_uint_eq(table_count(empty), 0);
    ck_assert(!table_get(empty, "", &val));
    table_iter_init(&it, empty);
    ck_assert(!table_next(&it, &key, &val));

    ck_assert_uint_eq(table_count(zero), 0);
    ck_assert(!table_get(zero, "x", &val));
    ck_assert_uint_eq(array_count(azero), 0);
    array_iter_init(&it, azero);
    ck_assert(!array_next(&it, &val));
}
END_TEST

START_TEST(lookup_counts)
{
    static const uint8_t a[] = { 'V', 'V', 't', 1, 'S', 0, 0, 0, 0, 'V' };

    ck_assert_int_eq(array_validate(a, sizeof(a), 1), AMQP_OK);
    ck_assert_uint_eq(array_count(arr(a, sizeof(a))), 5);
    ck_assert_uint_eq(array_count(arr(a, 1)), 1);
    ck_assert_uint_eq(table_count(tbl(nested, sizeof(nested))), 2);
}
END_TEST

/* ---- writing ---- */

START_TEST(write_begin_end)
{
    static const uint8_t want[] = {
        0x99,
        0, 0, 0, 24,
        1, 'b', 't', 1,
        1, 's', 'S', 0, 0, 0, 2, 'h', 'i',
        1, 'n', 'l', 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
    };
    uint8_t buf[64];
    struct wire_wr w;
    struct wire_rd r;
    struct amqp_table t;
    struct amqp_field val;
    size_t mark;

    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, sizeof(buf));
    wire_put_u8(&w, 0x99);
    mark = table_begin(&w);
    ck_assert_uint_eq(mark, 1);
    ck_assert_uint_eq(w.len, 5); /* the prefix is reserved */
    ck_assert_int_eq(table_put_bool(&w, "b", true), AMQP_OK);
    ck_assert_int_eq(table_put_str(&w, "s", "hi"), AMQP_OK);
    ck_assert_int_eq(table_put_i64(&w, "n", -2), AMQP_OK);
    table_end(&w, mark);
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_msg(memcmp(buf, want, sizeof(want)) == 0, "%s",
                  hexdump(buf, w.len));
    ck_assert_uint_eq(buf[sizeof(want)], 0xAA);

    wire_rd_init(&r, buf + 1, w.len - 1);
    ck_assert_int_eq(wire_get_table(&r, 1, &t), AMQP_OK);
    ck_assert(table_get(t, "b", &val) && val.v.b);
    ck_assert(table_get(t, "s", &val) && amqp_bytes_eq(val.v.str, "hi"));
    ck_assert(table_get(t, "n", &val) && val.v.i == -2);
}
END_TEST

START_TEST(write_empty_table_and_key)
{
    uint8_t buf[16];
    struct wire_wr w;
    struct amqp_field val;
    size_t mark;

    wire_wr_init(&w, buf, sizeof(buf));
    mark = table_begin(&w);
    table_end(&w, mark);
    ck_assert_uint_eq(w.len, 4);
    ck_assert_mem_eq(buf, "\0\0\0\0", 4);

    wire_wr_init(&w, buf, sizeof(buf));
    mark = table_begin(&w);
    ck_assert_int_eq(table_put_bool(&w, "", false), AMQP_OK);
    table_end(&w, mark);
    ck_assert_uint_eq(w.len, 7);
    ck_assert_mem_eq(buf, "\0\0\0\3\0t\0", 7);
    ck_assert_int_eq(table_validate(buf + 4, 3, 1), AMQP_OK);
    ck_assert(table_get(tbl(buf + 4, 3), "", &val));
    ck_assert_int_eq(val.kind, AMQP_FIELD_BOOL);
    ck_assert(!val.v.b);
}
END_TEST

START_TEST(write_convenience_values)
{
    uint8_t buf[64];
    struct wire_wr w;
    static const uint8_t want[] = {
        1, 'x', 'l', 0x80, 0, 0, 0, 0, 0, 0, 0,
        1, 'y', 'l', 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        1, 'z', 'S', 0, 0, 0, 0,
        1, 'e', 'S', 0, 0, 0, 0,
        1, 't', 't', 1,
    };

    wire_wr_init(&w, buf, sizeof(buf));
    ck_assert_int_eq(table_put_i64(&w, "x", INT64_MIN), AMQP_OK);
    ck_assert_int_eq(table_put_i64(&w, "y", INT64_MAX), AMQP_OK);
    ck_assert_int_eq(table_put_str(&w, "z", NULL), AMQP_OK);
    ck_assert_int_eq(table_put_str(&w, "e", ""), AMQP_OK);
    ck_assert_int_eq(table_put_bool(&w, "t", true), AMQP_OK);
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert_msg(memcmp(buf, want, sizeof(want)) == 0, "%s",
                  hexdump(buf, w.len));
}
END_TEST

/* Keys longer than 255 bytes are refused and write nothing, by every
 * writer that takes a key. */
START_TEST(write_long_key)
{
    char key[257];
    uint8_t buf[512];
    struct wire_wr w;

    memset(key, 'k', 256);
    key[256] = '\0';
    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, sizeof(buf));
    ck_assert_int_eq(table_put_key(&w, amqp_cstr(key)), AMQP_E_VALUE);
    ck_assert_uint_eq(w.len, 0);
    ck_assert_int_eq(table_put_bool(&w, key, true), AMQP_E_VALUE);
    ck_assert_uint_eq(w.len, 0);
    ck_assert_int_eq(table_put_str(&w, key, "v"), AMQP_E_VALUE);
    ck_assert_uint_eq(w.len, 0);
    ck_assert_int_eq(table_put_i64(&w, key, 1), AMQP_E_VALUE);
    ck_assert_uint_eq(w.len, 0);
    for (size_t i = 0; i < sizeof(buf); i++)
        ck_assert_msg(buf[i] == 0xAA, "byte %zu written", i);

    /* 255 is the longest key. */
    key[255] = '\0';
    ck_assert_int_eq(table_put_bool(&w, key, true), AMQP_OK);
    ck_assert_uint_eq(w.len, 1 + 255 + 2);
    ck_assert_uint_eq(buf[0], 255);
    ck_assert_int_eq(table_validate(buf, w.len, 1), AMQP_OK);
}
END_TEST

/*
 * Out of room in the middle of a table: the writer counts the full size,
 * writes nothing past its capacity (exact heap buffers, so ASan would see
 * it), and table_end() leaves the length prefix alone.
 */
START_TEST(write_overflow_inside_table)
{
    uint8_t full[64];
    struct wire_wr w;
    size_t mark, need;

    wire_wr_init(&w, full, sizeof(full));
    mark = table_begin(&w);
    ck_assert_int_eq(table_put_str(&w, "key", "a long value"), AMQP_OK);
    ck_assert_int_eq(table_put_i64(&w, "n", 5), AMQP_OK);
    table_end(&w, mark);
    need = w.len;
    ck_assert_uint_eq(need, 4 + (1 + 3 + 1 + 4 + 12) + (1 + 1 + 1 + 8));
    ck_assert_uint_eq(wire_load32(full), need - 4);

    for (size_t cap = 0; cap < need; cap++) {
        uint8_t *p = malloc(cap ? cap : 1);
        ck_assert_ptr_nonnull(p);
        memset(p, 0xAA, cap);
        wire_wr_init(&w, p, cap);
        mark = table_begin(&w);
        (void)table_put_str(&w, "key", "a long value");
        (void)table_put_i64(&w, "n", 5);
        table_end(&w, mark);
        ck_assert_msg(wire_wr_overflowed(&w), "cap %zu", cap);
        ck_assert_msg(w.len == need, "cap %zu: len %zu", cap, w.len);
        if (cap >= 4)
            ck_assert_msg(wire_load32(p) == 0,
                          "cap %zu: length %u written into an overflowed "
                          "writer", cap, wire_load32(p));
        else
            for (size_t i = 0; i < cap; i++)
                ck_assert_uint_eq(p[i], 0xAA);
        free(p);
    }
}
END_TEST

/* A table that fits, followed by one that does not, keeps the first. */
START_TEST(write_overflow_after_table)
{
    uint8_t buf[12];
    struct wire_wr w;
    size_t m1, m2;

    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, sizeof(buf));
    m1 = table_begin(&w);
    ck_assert_int_eq(table_put_bool(&w, "a", true), AMQP_OK);
    table_end(&w, m1);
    ck_assert_mem_eq(buf, "\0\0\0\4\1at\1", 8);
    m2 = table_begin(&w);
    ck_assert_uint_eq(m2, 8);
    ck_assert_int_eq(table_put_bool(&w, "b", true), AMQP_OK);
    table_end(&w, m2);
    ck_assert(wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 16);
    ck_assert_mem_eq(buf, "\0\0\0\4\1at\1\0\0\0\0", 12);
}
END_TEST

/* ---- what a value is (field_as_int, field_as_real, field_text,
 * field_values_equal, table_values_equal) ---- */

static struct amqp_field
fi(enum amqp_field_kind k, int64_t i)
{
    struct amqp_field f = { .kind = k };
    f.v.i = i;
    return f;
}

static struct amqp_field
fu(enum amqp_field_kind k, uint64_t u)
{
    struct amqp_field f = { .kind = k };
    f.v.u = u;
    return f;
}

START_TEST(value_as_int)
{
    int64_t out;
    struct amqp_field f = fi(AMQP_FIELD_I8, -5);
    ck_assert(field_as_int(&f, &out));
    ck_assert_int_eq(out, -5);
    f = fu(AMQP_FIELD_U32, 4294967295u);
    ck_assert(field_as_int(&f, &out));
    ck_assert_int_eq(out, 4294967295LL);
    f = fi(AMQP_FIELD_L64, INT64_MIN);
    ck_assert(field_as_int(&f, &out));
    ck_assert(out == INT64_MIN);
    f = fu(AMQP_FIELD_TIMESTAMP, 7);
    ck_assert(!field_as_int(&f, &out));
    f = (struct amqp_field){ .kind = AMQP_FIELD_DOUBLE, .v.d = 1.0 };
    ck_assert(!field_as_int(&f, &out));
}
END_TEST

START_TEST(value_as_real)
{
    double d;
    struct amqp_field f = { .kind = AMQP_FIELD_DECIMAL };
    f.v.decimal.scale = 2;
    f.v.decimal.value = 12345;
    ck_assert(field_as_real(&f, &d));
    ck_assert_double_eq_tol(d, 123.45, 1e-9);
    f = (struct amqp_field){ .kind = AMQP_FIELD_FLOAT, .v.f = 0.5f };
    ck_assert(field_as_real(&f, &d));
    ck_assert_double_eq(d, 0.5);
    f = fi(AMQP_FIELD_I32, 3);
    ck_assert(!field_as_real(&f, &d));
}
END_TEST

START_TEST(value_text)
{
    char buf[32];
    struct amqp_bytes t;
    struct amqp_field f = { .kind = AMQP_FIELD_LONGSTR };
    f.v.str = amqp_cstr("abc");
    ck_assert(field_text(&f, buf, sizeof(buf), &t));
    ck_assert(t.ptr == f.v.str.ptr && t.len == 3);   /* borrowed */
    f = (struct amqp_field){ .kind = AMQP_FIELD_BOOL, .v.b = true };
    ck_assert(field_text(&f, buf, sizeof(buf), &t));
    ck_assert_mem_eq(t.ptr, "true", 4);
    f = fi(AMQP_FIELD_I16, -42);
    ck_assert(field_text(&f, buf, sizeof(buf), &t));
    ck_assert_str_eq((const char *)t.ptr, "-42");
    f = fu(AMQP_FIELD_TIMESTAMP, 18446744073709551615u);
    ck_assert(field_text(&f, buf, sizeof(buf), &t));
    ck_assert_str_eq((const char *)t.ptr, "18446744073709551615");
    f = (struct amqp_field){ .kind = AMQP_FIELD_VOID };
    ck_assert(!field_text(&f, buf, sizeof(buf), &t));
    ck_assert_str_eq(field_type_name(AMQP_FIELD_I32), "signedint");
    ck_assert_str_eq(field_type_name(AMQP_FIELD_U8), "unsignedbyte");
    ck_assert_str_eq(field_type_name(AMQP_FIELD_BYTES), "binary");
}
END_TEST

START_TEST(value_equality)
{
    struct amqp_field a = fi(AMQP_FIELD_I8, 7), b = fu(AMQP_FIELD_U32, 7);
    ck_assert(field_values_equal(&a, &b));      /* widths do not matter */
    b = fi(AMQP_FIELD_I64, -7);
    ck_assert(!field_values_equal(&a, &b));
    struct amqp_field s = { .kind = AMQP_FIELD_LONGSTR };
    s.v.str = amqp_cstr("7");
    ck_assert(!field_values_equal(&a, &s));     /* kinds differ */
    struct amqp_field t = { .kind = AMQP_FIELD_BYTES };
    t.v.str = amqp_cstr("7");
    ck_assert(!field_values_equal(&s, &t));
    struct amqp_field x = { .kind = AMQP_FIELD_DOUBLE, .v.d = 0.0 };
    struct amqp_field y = { .kind = AMQP_FIELD_DOUBLE, .v.d = -0.0 };
    ck_assert(!field_values_equal(&x, &y));     /* bit for bit */
}
END_TEST

/* {a: 1 (I32), b: "x"} in both orders, and with a different value. */
START_TEST(table_equality_any_order)
{
    uint8_t b1[64], b2[64], b3[64];
    struct wire_wr w;
    size_t m;

    wire_wr_init(&w, b1, sizeof(b1));
    m = table_begin(&w);
    table_put_i64(&w, "a", 1);
    table_put_str(&w, "b", "x");
    table_end(&w, m);
    size_t n1 = w.len;
    wire_wr_init(&w, b2, sizeof(b2));
    m = table_begin(&w);
    table_put_str(&w, "b", "x");
    table_put_i64(&w, "a", 1);
    table_end(&w, m);
    size_t n2 = w.len;
    wire_wr_init(&w, b3, sizeof(b3));
    m = table_begin(&w);
    table_put_str(&w, "b", "y");
    table_put_i64(&w, "a", 1);
    table_end(&w, m);
    size_t n3 = w.len;
    struct amqp_table t1 = tbl(b1 + 4, n1 - 4), t2 = tbl(b2 + 4, n2 - 4);
    struct amqp_table t3 = tbl(b3 + 4, n3 - 4);
    ck_assert(table_values_equal(t1, t2));
    ck_assert(!table_values_equal(t1, t3));
    ck_assert(table_values_equal(tbl(NULL, 0), tbl(NULL, 0)));
    ck_assert(!table_values_equal(t1, tbl(NULL, 0)));
}
END_TEST

static Suite *
table_suite(void)
{
    Suite *s = suite_create("table");
    TCase *tc = tcase_create("value types");
    tcase_add_loop_test(tc, value_in_table, 0, NELEMS(val_vecs));
    tcase_add_loop_test(tc, value_in_array, 0, NELEMS(val_vecs));
    tcase_add_loop_test(tc, value_round_trip, 0, NELEMS(val_vecs));
    tcase_add_test(tc, value_bool_nonzero);
    tcase_add_test(tc, value_put_from_c);
    suite_add_tcase(s, tc);

    tc = tcase_create("unknown types");
    tcase_add_loop_test(tc, unknown_type_vectors, 0, NELEMS(bad_kinds));
    tcase_add_test(tc, kind_validity);
    suite_add_tcase(s, tc);

    tc = tcase_create("nesting");
    tcase_add_test(tc, nested_read);
    tcase_add_test(tc, nested_write);
    tcase_add_loop_test(tc, depth_limit_vectors, 0, NELEMS(nest_kinds));
    tcase_add_test(tc, depth_limit_get_table);
    suite_add_tcase(s, tc);

    tc = tcase_create("size limit");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, size_limit_table);
    tcase_add_test(tc, size_limit_array);
    tcase_add_test(tc, size_limit_get_table);
    suite_add_tcase(s, tc);

    tc = tcase_create("truncation");
    tcase_add_test(tc, truncate_table_body);
    tcase_add_test(tc, truncate_table_prefixed);
    tcase_add_test(tc, truncate_array_body);
    tcase_add_loop_test(tc, get_table_vectors, 0, NELEMS(get_table_vecs));
    suite_add_tcase(s, tc);

    tc = tcase_create("lookup");
    tcase_add_test(tc, lookup_get);
    tcase_add_test(tc, lookup_iterate_in_order);
    tcase_add_test(tc, lookup_empty);
    tcase_add_test(tc, lookup_counts);
    suite_add_tcase(s, tc);

    tc = tcase_create("write");
    tcase_add_test(tc, write_begin_end);
    tcase_add_test(tc, write_empty_table_and_key);
    tcase_add_test(tc, write_convenience_values);
    tcase_add_test(tc, write_long_key);
    suite_add_tcase(s, tc);

    tc = tcase_create("what a value is");
    tcase_add_test(tc, value_as_int);
    tcase_add_test(tc, value_as_real);
    tcase_add_test(tc, value_text);
    tcase_add_test(tc, value_equality);
    tcase_add_test(tc, table_equality_any_order);
    suite_add_tcase(s, tc);

    tc = tcase_create("write overflow");
    tcase_add_test(tc, write_overflow_inside_table);
    tcase_add_test(tc, write_overflow_after_table);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(table_suite());
}
