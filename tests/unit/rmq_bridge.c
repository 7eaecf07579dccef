/*
 * SPDX-License-Identifier: Apache-2.0
 * The rabbitmq-c half of the differential test for field tables, and the
 * canonical text both halves describe tables in (see rmq_bridge.h). It
 * includes only rabbitmq-c's headers and rmq_bridge.h; the method and
 * property half is generated (rmq_bridge_gen.c).
 *
 * Tables are built with rabbitmq-c's own structures (amqp_table_t,
 * amqp_array_t, amqp_field_value_t) in a pool, so that what is compared is
 * rabbitmq-c's encoder and decoder, not a copy of bytes we made. Every pool
 * is emptied before the function that made it returns.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <amqp.h>
#include <amqp_framing.h>

#include "tests/unit/rmq_bridge.h"

/* ---- canonical text ---- */

void
canon_init(struct canon *c, char *buf, size_t cap)
{
    c->buf = buf;
    c->cap = cap;
    c->len = 0;
    if (cap > 0)
        buf[0] = '\0';
}

bool
canon_ok(const struct canon *c)
{
    return c->len < c->cap;
}

void
canon_char(struct canon *c, char ch)
{
    if (c->len + 1 < c->cap) {
        c->buf[c->len] = ch;
        c->buf[c->len + 1] = '\0';
    }
    c->len++;
}

static void canon_printf(struct canon *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
canon_printf(struct canon *c, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    for (int i = 0; i < n && (size_t)i < sizeof(tmp) - 1; i++)
        canon_char(c, tmp[i]);
}

/* One byte, escaped as \xHH unless it is printable and not '"' or '\'.
 * (By hand: long binary strings make printf the test's hot spot.) */
static void
canon_byte(struct canon *c, uint8_t b)
{
    static const char hex[] = "0123456789abcdef";

    if (b < 0x20 || b > 0x7e || b == '"' || b == '\\') {
        canon_char(c, '\\');
        canon_char(c, 'x');
        canon_char(c, hex[b >> 4]);
        canon_char(c, hex[b & 15]);
    } else {
        canon_char(c, (char)b);
    }
}

void
canon_quoted(struct canon *c, const uint8_t *p, size_t n)
{
    canon_char(c, '"');
    for (size_t i = 0; i < n; i++)
        canon_byte(c, p[i]);
    canon_char(c, '"');
}

void
canon_kind(struct canon *c, uint8_t kind)
{
    canon_byte(c, kind);
    canon_char(c, ':');
}

void
canon_scalar(struct canon *c, uint8_t kind, uint64_t u, uint8_t scale)
{
    canon_kind(c, kind);
    switch (kind) {
    case 't':
    case 'B':
    case 'u':
    case 'i':
    case 'L':
    case 'T':
        canon_printf(c, "%" PRIu64, u);
        break;
    case 'b':
    case 's':
    case 'I':
    case 'l':
        canon_printf(c, "%" PRId64, (int64_t)u);
        break;
    case 'f':
        canon_printf(c, "0x%08" PRIx64, u);
        break;
    case 'd':
        canon_printf(c, "0x%016" PRIx64, u);
        break;
    case 'D':
        canon_printf(c, "%u/%" PRIu64, scale, u);
        break;
    case 'V':
        break;
    default:
        canon_printf(c, "?%" PRIu64, u);
        break;
    }
}

/* ---- rabbitmq-c's decoded tables as canonical text ---- */

static void canon_rmq_value(struct canon *c, const amqp_field_value_t *v);

static void
canon_rmq_table(struct canon *c, const amqp_table_t *t)
{
    canon_char(c, '{');
    for (int i = 0; i < t->num_entries; i++) {
        const amqp_table_entry_t *e = &t->entries[i];
        if (i > 0)
            canon_char(c, ',');
        canon_quoted(c, e->key.bytes, e->key.len);
        canon_char(c, ':');
        canon_rmq_value(c, &e->value);
    }
    canon_char(c, '}');
}

static void
canon_rmq_array(struct canon *c, const amqp_array_t *a)
{
    canon_char(c, '[');
    for (int i = 0; i < a->num_entries; i++) {
        if (i > 0)
            canon_char(c, ',');
        canon_rmq_value(c, &a->entries[i]);
    }
    canon_char(c, ']');
}

/* Each value as rabbitmq-c's union holds it: signed kinds sign-extend,
 * floats give their bits, a boolean its int unchanged. */
static void
canon_rmq_value(struct canon *c, const amqp_field_value_t *v)
{
    uint32_t u32;
    uint64_t u64;

    switch (v->kind) {
    case AMQP_FIELD_KIND_BOOLEAN:
        canon_scalar(c, v->kind, (uint64_t)(int64_t)v->value.boolean, 0);
        break;
    case AMQP_FIELD_KIND_I8:
        canon_scalar(c, v->kind, (uint64_t)(int64_t)v->value.i8, 0);
        break;
    case AMQP_FIELD_KIND_U8:
        canon_scalar(c, v->kind, v->value.u8, 0);
        break;
    case AMQP_FIELD_KIND_I16:
        canon_scalar(c, v->kind, (uint64_t)(int64_t)v->value.i16, 0);
        break;
    case AMQP_FIELD_KIND_U16:
        canon_scalar(c, v->kind, v->value.u16, 0);
        break;
    case AMQP_FIELD_KIND_I32:
        canon_scalar(c, v->kind, (uint64_t)(int64_t)v->value.i32, 0);
        break;
    case AMQP_FIELD_KIND_U32:
        canon_scalar(c, v->kind, v->value.u32, 0);
        break;
    case AMQP_FIELD_KIND_I64:
        canon_scalar(c, v->kind, (uint64_t)v->value.i64, 0);
        break;
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP:
        canon_scalar(c, v->kind, v->value.u64, 0);
        break;
    case AMQP_FIELD_KIND_F32:
        memcpy(&u32, &v->value.f32, sizeof(u32));
        canon_scalar(c, v->kind, u32, 0);
        break;
    case AMQP_FIELD_KIND_F64:
        memcpy(&u64, &v->value.f64, sizeof(u64));
        canon_scalar(c, v->kind, u64, 0);
        break;
    case AMQP_FIELD_KIND_DECIMAL:
        canon_scalar(c, v->kind, v->value.decimal.value,
                     v->value.decimal.decimals);
        break;
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
        canon_kind(c, v->kind);
        canon_quoted(c, v->value.bytes.bytes, v->value.bytes.len);
        break;
    case AMQP_FIELD_KIND_TABLE:
        canon_kind(c, v->kind);
        canon_rmq_table(c, &v->value.table);
        break;
    case AMQP_FIELD_KIND_ARRAY:
        canon_kind(c, v->kind);
        canon_rmq_array(c, &v->value.array);
        break;
    case AMQP_FIELD_KIND_VOID:
        canon_kind(c, v->kind);
        break;
    default:
        canon_scalar(c, v->kind, 0, 0);
        break;
    }
}

int
rmq_table_canon(const uint8_t *wire, size_t len, size_t *used,
                struct canon *c)
{
    amqp_pool_t pool;
    amqp_bytes_t in;
    amqp_table_t t;
    size_t off = 0;
    int st;

    in.bytes = (void *)(uintptr_t)wire;
    in.len = len;
    init_amqp_pool(&pool, 4096);
    st = amqp_decode_table(in, &pool, &t, &off);
    if (st == AMQP_STATUS_OK) {
        *used = off;
        canon_rmq_table(c, &t);
    }
    empty_amqp_pool(&pool);
    return st;
}

/* ---- neutral trees as rabbitmq-c tables ---- */

static int build_value(const struct dfield *f, amqp_pool_t *pool,
                       amqp_field_value_t *v);

static int
build_table(const struct dfield *items, size_t n, amqp_pool_t *pool,
            amqp_table_t *t)
{
    t->num_entries = (int)n;
    t->entries = NULL;
    if (n == 0)
        return 0;
    t->entries = amqp_pool_alloc(pool, n * sizeof(*t->entries));
    if (t->entries == NULL)
        return AMQP_STATUS_NO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        t->entries[i].key.bytes = (void *)(uintptr_t)items[i].key;
        t->entries[i].key.len = items[i].keylen;
        int st = build_value(&items[i], pool, &t->entries[i].value);
        if (st != 0)
            return st;
    }
    return 0;
}

static int
build_array(const struct dfield *items, size_t n, amqp_pool_t *pool,
            amqp_array_t *a)
{
    a->num_entries = (int)n;
    a->entries = NULL;
    if (n == 0)
        return 0;
    a->entries = amqp_pool_alloc(pool, n * sizeof(*a->entries));
    if (a->entries == NULL)
        return AMQP_STATUS_NO_MEMORY;
    for (size_t i = 0; i < n; i++) {
        int st = build_value(&items[i], pool, &a->entries[i]);
        if (st != 0)
            return st;
    }
    return 0;
}

static int
build_value(const struct dfield *f, amqp_pool_t *pool, amqp_field_value_t *v)
{
    uint32_t u32;

    memset(v, 0, sizeof(*v));
    v->kind = f->kind;
    switch (f->kind) {
    case AMQP_FIELD_KIND_BOOLEAN:
        v->value.boolean = (amqp_boolean_t)f->u;
        break;
    case AMQP_FIELD_KIND_I8:
        v->value.i8 = (int8_t)f->u;
        break;
    case AMQP_FIELD_KIND_U8:
        v->value.u8 = (uint8_t)f->u;
        break;
    case AMQP_FIELD_KIND_I16:
        v->value.i16 = (int16_t)f->u;
        break;
    case AMQP_FIELD_KIND_U16:
        v->value.u16 = (uint16_t)f->u;
        break;
    case AMQP_FIELD_KIND_I32:
        v->value.i32 = (int32_t)f->u;
        break;
    case AMQP_FIELD_KIND_U32:
        v->value.u32 = (uint32_t)f->u;
        break;
    case AMQP_FIELD_KIND_I64:
        v->value.i64 = (int64_t)f->u;
        break;
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP:
        v->value.u64 = f->u;
        break;
    case AMQP_FIELD_KIND_F32:
        u32 = (uint32_t)f->u;
        memcpy(&v->value.f32, &u32, sizeof(u32));
        break;
    case AMQP_FIELD_KIND_F64:
        memcpy(&v->value.f64, &f->u, sizeof(f->u));
        break;
    case AMQP_FIELD_KIND_DECIMAL:
        v->value.decimal.decimals = f->scale;
        v->value.decimal.value = (uint32_t)f->u;
        break;
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
        v->value.bytes.bytes = (void *)(uintptr_t)f->ptr;
        v->value.bytes.len = f->len;
        break;
    case AMQP_FIELD_KIND_TABLE:
        return build_table(f->items, f->nitems, pool, &v->value.table);
    case AMQP_FIELD_KIND_ARRAY:
        return build_array(f->items, f->nitems, pool, &v->value.array);
    case AMQP_FIELD_KIND_VOID:
        break;
    default:
        /* Not a kind rabbitmq-c knows; its encoder must not see it. */
        return AMQP_STATUS_INVALID_PARAMETER;
    }
    return 0;
}

int
rmq_table_encode(const struct dfield *items, size_t n, uint8_t *buf,
                 size_t cap, size_t *len)
{
    amqp_pool_t pool;
    amqp_table_t t;
    amqp_bytes_t out;
    size_t off = 0;
    int st;

    init_amqp_pool(&pool, 4096);
    st = build_table(items, n, &pool, &t);
    if (st == 0) {
        out.bytes = buf;
        out.len = cap;
        st = amqp_encode_table(out, &t, &off);
        if (st == AMQP_STATUS_TABLE_TOO_BIG)
            st = RMQ_E_NO_ROOM;
    }
    empty_amqp_pool(&pool);
    if (st == 0)
        *len = off;
    return st;
}

/* ---- statuses ---- */

bool
rmq_is_unknown_method(int st)
{
    return st == AMQP_STATUS_UNKNOWN_METHOD;
}

const char *
rmq_strerror(int st)
{
    switch (st) {
    case RMQ_E_NO_ROOM:
        return "bridge: output buffer or arena too small";
    case RMQ_E_NO_STRUCT:
        return "bridge: rabbitmq-c's headers declare no struct for the method";
    default:
        return amqp_error_string2(st);
    }
}
