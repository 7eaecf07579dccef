/*
 * SPDX-License-Identifier: Apache-2.0
 * Field tables and arrays: validation when read, borrowing iteration after,
 * and writing. Validation and iteration share value_read(), so what was
 * accepted is exactly what the iterator walks.
 */
#include "amqp/table.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

bool
field_kind_is_valid(uint8_t kind)
{
    return kind != 0 && strchr("tbBsuIilLfdDSxATFV", kind) != NULL;
}

/*
 * Read one value of type 'kind' from 'r' into 'val'. Nested tables and
 * arrays are validated at 'depth' + 1 when 'validate' is set; iteration of
 * already validated bytes skips that.
 */
static enum amqp_status
value_read(struct wire_rd *r, uint8_t kind, unsigned depth, bool validate,
           struct amqp_field *val)
{
    enum amqp_status st = AMQP_OK;
    uint8_t u8 = 0;
    uint16_t u16 = 0;
    uint32_t u32 = 0;
    uint64_t u64 = 0;

    val->kind = (enum amqp_field_kind)kind;
    switch (kind) {
    case AMQP_FIELD_BOOL:
        st = wire_get_u8(r, &u8);
        val->v.b = u8 != 0;
        break;
    case AMQP_FIELD_I8:
        st = wire_get_u8(r, &u8);
        val->v.i = (int8_t)u8;
        break;
    case AMQP_FIELD_U8:
        st = wire_get_u8(r, &u8);
        val->v.u = u8;
        break;
    case AMQP_FIELD_I16:
        st = wire_get_u16(r, &u16);
        val->v.i = (int16_t)u16;
        break;
    case AMQP_FIELD_U16:
        st = wire_get_u16(r, &u16);
        val->v.u = u16;
        break;
    case AMQP_FIELD_I32:
        st = wire_get_u32(r, &u32);
        val->v.i = (int32_t)u32;
        break;
    case AMQP_FIELD_U32:
        st = wire_get_u32(r, &u32);
        val->v.u = u32;
        break;
    case AMQP_FIELD_I64:
    case AMQP_FIELD_L64:
        st = wire_get_u64(r, &u64);
        val->v.i = (int64_t)u64;
        break;
    case AMQP_FIELD_TIMESTAMP:
        st = wire_get_u64(r, &u64);
        val->v.u = u64;
        break;
    case AMQP_FIELD_FLOAT:
        st = wire_get_u32(r, &u32);
        memcpy(&val->v.f, &u32, sizeof(val->v.f));
        break;
    case AMQP_FIELD_DOUBLE:
        st = wire_get_u64(r, &u64);
        memcpy(&val->v.d, &u64, sizeof(val->v.d));
        break;
    case AMQP_FIELD_DECIMAL:
        st = wire_get_u8(r, &val->v.decimal.scale);
        if (st == AMQP_OK)
            st = wire_get_u32(r, &val->v.decimal.value);
        break;
    case AMQP_FIELD_LONGSTR:
    case AMQP_FIELD_BYTES:
        st = wire_get_longstr(r, &val->v.str);
        break;
    case AMQP_FIELD_TABLE:
    case AMQP_FIELD_ARRAY: {
        struct amqp_bytes body = { NULL, 0 };
        st = wire_get_longstr(r, &body);
        if (st == AMQP_OK && validate)
            st = kind == AMQP_FIELD_TABLE
                     ? table_validate(body.ptr, body.len, depth + 1)
                     : array_validate(body.ptr, body.len, depth + 1);
        /* table and array share a layout: a borrowed range */
        val->v.table.ptr = body.ptr;
        val->v.table.len = body.len;
        break;
    }
    case AMQP_FIELD_VOID:
        break;
    default:
        return AMQP_E_FIELD_TYPE;
    }
    return st;
}

static enum amqp_status
check_nesting(size_t len, unsigned depth)
{
    if (depth > TABLE_MAX_DEPTH)
        return AMQP_E_TABLE_DEPTH;
    if (len > TABLE_MAX_SIZE)
        return AMQP_E_TABLE_SIZE;
    return AMQP_OK;
}

enum amqp_status
table_validate(const uint8_t *buf, size_t len, unsigned depth)
{
    enum amqp_status st = check_nesting(len, depth);
    struct wire_rd r;
    struct amqp_bytes key;
    struct amqp_field val;
    uint8_t kind;

    wire_rd_init(&r, buf, len);
    while (st == AMQP_OK && wire_rd_left(&r) > 0) {
        st = wire_get_shortstr(&r, &key);
        if (st == AMQP_OK)
            st = wire_get_u8(&r, &kind);
        if (st == AMQP_OK)
            st = value_read(&r, kind, depth, true, &val);
    }
    return st;
}

enum amqp_status
array_validate(const uint8_t *buf, size_t len, unsigned depth)
{
    enum amqp_status st = check_nesting(len, depth);
    struct wire_rd r;
    struct amqp_field val;
    uint8_t kind;

    wire_rd_init(&r, buf, len);
    while (st == AMQP_OK && wire_rd_left(&r) > 0) {
        st = wire_get_u8(&r, &kind);
        if (st == AMQP_OK)
            st = value_read(&r, kind, depth, true, &val);
    }
    return st;
}

enum amqp_status
wire_get_table(struct wire_rd *r, unsigned depth, struct amqp_table *out)
{
    struct amqp_bytes body;
    enum amqp_status st = wire_get_longstr(r, &body);

    if (st != AMQP_OK)
        return st;
    st = table_validate(body.ptr, body.len, depth);
    if (st != AMQP_OK)
        return st;
    out->ptr = body.ptr;
    out->len = body.len;
    return AMQP_OK;
}

/* An empty table may have a NULL ptr (an absent headers property is all
 * zero), and NULL + 0 is undefined in C: only offset a real pointer. */
void
table_iter_init(struct table_iter *it, struct amqp_table t)
{
    it->p = t.ptr;
    it->end = t.len ? t.ptr + t.len : t.ptr;
}

void
array_iter_init(struct table_iter *it, struct amqp_array a)
{
    it->p = a.ptr;
    it->end = a.len ? a.ptr + a.len : a.ptr;
}

/* The iterators walk bytes that were validated, so reads cannot fail. */
bool
table_next(struct table_iter *it, struct amqp_bytes *key,
           struct amqp_field *val)
{
    struct wire_rd r;
    uint8_t kind = 0;

    if (it->p >= it->end)
        return false;
    wire_rd_init(&r, it->p, (size_t)(it->end - it->p));
    (void)wire_get_shortstr(&r, key);
    (void)wire_get_u8(&r, &kind);
    (void)value_read(&r, kind, 0, false, val);
    it->p += r.off;
    return true;
}

bool
array_next(struct table_iter *it, struct amqp_field *val)
{
    struct wire_rd r;
    uint8_t kind = 0;

    if (it->p >= it->end)
        return false;
    wire_rd_init(&r, it->p, (size_t)(it->end - it->p));
    (void)wire_get_u8(&r, &kind);
    (void)value_read(&r, kind, 0, false, val);
    it->p += r.off;
    return true;
}

bool
table_get(struct amqp_table t, const char *key, struct amqp_field *val)
{
    struct table_iter it;
    struct amqp_bytes k;

    table_iter_init(&it, t);
    while (table_next(&it, &k, val))
        if (amqp_bytes_eq(k, key))
            return true;
    return false;
}

size_t
table_count(struct amqp_table t)
{
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field v;
    size_t n = 0;

    table_iter_init(&it, t);
    while (table_next(&it, &k, &v))
        n++;
    return n;
}

size_t
array_count(struct amqp_array a)
{
    struct table_iter it;
    struct amqp_field v;
    size_t n = 0;

    array_iter_init(&it, a);
    while (array_next(&it, &v))
        n++;
    return n;
}

size_t
table_begin(struct wire_wr *w)
{
    size_t mark = w->len;
    wire_put_u32(w, 0);
    return mark;
}

void
table_end(struct wire_wr *w, size_t mark)
{
    /* Fill in the length only when the whole table fit in the buffer. */
    if (!wire_wr_overflowed(w))
        wire_store32(w->buf + mark, (uint32_t)(w->len - mark - 4));
}

enum amqp_status
table_put_key(struct wire_wr *w, struct amqp_bytes key)
{
    return wire_put_shortstr(w, key);
}

void
field_put(struct wire_wr *w, const struct amqp_field *val)
{
    uint32_t u32;
    uint64_t u64;

    wire_put_u8(w, (uint8_t)val->kind);
    switch (val->kind) {
    case AMQP_FIELD_BOOL:
        wire_put_u8(w, val->v.b ? 1 : 0);
        break;
    case AMQP_FIELD_I8:
        wire_put_u8(w, (uint8_t)val->v.i);
        break;
    case AMQP_FIELD_U8:
        wire_put_u8(w, (uint8_t)val->v.u);
        break;
    case AMQP_FIELD_I16:
        wire_put_u16(w, (uint16_t)val->v.i);
        break;
    case AMQP_FIELD_U16:
        wire_put_u16(w, (uint16_t)val->v.u);
        break;
    case AMQP_FIELD_I32:
        wire_put_u32(w, (uint32_t)val->v.i);
        break;
    case AMQP_FIELD_U32:
        wire_put_u32(w, (uint32_t)val->v.u);
        break;
    case AMQP_FIELD_I64:
    case AMQP_FIELD_L64:
        wire_put_u64(w, (uint64_t)val->v.i);
        break;
    case AMQP_FIELD_TIMESTAMP:
        wire_put_u64(w, val->v.u);
        break;
    case AMQP_FIELD_FLOAT:
        memcpy(&u32, &val->v.f, sizeof(u32));
        wire_put_u32(w, u32);
        break;
    case AMQP_FIELD_DOUBLE:
        memcpy(&u64, &val->v.d, sizeof(u64));
        wire_put_u64(w, u64);
        break;
    case AMQP_FIELD_DECIMAL:
        wire_put_u8(w, val->v.decimal.scale);
        wire_put_u32(w, val->v.decimal.value);
        break;
    case AMQP_FIELD_LONGSTR:
    case AMQP_FIELD_BYTES:
        (void)wire_put_longstr(w, val->v.str);
        break;
    case AMQP_FIELD_TABLE:
        wire_put_table(w, val->v.table);
        break;
    case AMQP_FIELD_ARRAY:
        wire_put_u32(w, (uint32_t)val->v.array.len);
        wire_put_raw(w, val->v.array.ptr, val->v.array.len);
        break;
    case AMQP_FIELD_VOID:
        break;
    }
}

void
wire_put_table(struct wire_wr *w, struct amqp_table t)
{
    wire_put_u32(w, (uint32_t)t.len);
    wire_put_raw(w, t.ptr, t.len);
}

void
wire_put_table_without(struct wire_wr *w, struct amqp_table t,
                       const char *skip)
{
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field v;
    size_t mark = table_begin(w);

    table_iter_init(&it, t);
    while (table_next(&it, &k, &v)) {
        if (amqp_bytes_eq(k, skip))
            continue;
        (void)table_put_key(w, k);
        field_put(w, &v);
    }
    table_end(w, mark);
}

static enum amqp_status
put_entry(struct wire_wr *w, const char *key, const struct amqp_field *val)
{
    enum amqp_status st = table_put_key(w, amqp_cstr(key));
    if (st == AMQP_OK)
        field_put(w, val);
    return st;
}

enum amqp_status
table_put_bool(struct wire_wr *w, const char *key, bool v)
{
    struct amqp_field f = { .kind = AMQP_FIELD_BOOL, .v.b = v };
    return put_entry(w, key, &f);
}

enum amqp_status
table_put_str(struct wire_wr *w, const char *key, const char *v)
{
    struct amqp_field f = { .kind = AMQP_FIELD_LONGSTR, .v.str = amqp_cstr(v) };
    return put_entry(w, key, &f);
}

enum amqp_status
table_put_bytes(struct wire_wr *w, const char *key, struct amqp_bytes v)
{
    struct amqp_field f = { .kind = AMQP_FIELD_LONGSTR, .v.str = v };
    return put_entry(w, key, &f);
}

enum amqp_status
table_put_i64(struct wire_wr *w, const char *key, int64_t v)
{
    struct amqp_field f = { .kind = AMQP_FIELD_I64, .v.i = v };
    return put_entry(w, key, &f);
}

/* ---- what a value is ---- */

bool
field_as_int(const struct amqp_field *v, int64_t *out)
{
    switch (v->kind) {
    case AMQP_FIELD_I8: case AMQP_FIELD_I16: case AMQP_FIELD_I32:
    case AMQP_FIELD_I64: case AMQP_FIELD_L64:
        *out = v->v.i;
        return true;
    case AMQP_FIELD_U8: case AMQP_FIELD_U16: case AMQP_FIELD_U32:
        *out = (int64_t)v->v.u;
        return true;
    default:
        return false;
    }
}

bool
field_as_real(const struct amqp_field *v, double *out)
{
    switch (v->kind) {
    case AMQP_FIELD_FLOAT:
        *out = v->v.f;
        return true;
    case AMQP_FIELD_DOUBLE:
        *out = v->v.d;
        return true;
    case AMQP_FIELD_DECIMAL: {
        double d = (double)v->v.decimal.value;
        for (unsigned i = 0; i < v->v.decimal.scale; i++)
            d /= 10;
        *out = d;
        return true;
    }
    default:
        return false;
    }
}

bool
field_text(const struct amqp_field *v, char *buf, size_t len,
           struct amqp_bytes *out)
{
    int64_t i;

    switch (v->kind) {
    case AMQP_FIELD_LONGSTR: case AMQP_FIELD_BYTES:
        *out = v->v.str;
        return true;
    case AMQP_FIELD_BOOL:
        *out = amqp_cstr(v->v.b ? "true" : "false");
        return true;
    case AMQP_FIELD_TIMESTAMP:
        snprintf(buf, len, "%" PRIu64, v->v.u);
        break;
    default:
        if (!field_as_int(v, &i))
            return false;
        snprintf(buf, len, "%" PRId64, i);
        break;
    }
    *out = amqp_cstr(buf);
    return true;
}

const char *
field_type_name(enum amqp_field_kind kind)
{
    switch (kind) {
    case AMQP_FIELD_BOOL: return "bool";
    case AMQP_FIELD_I8: return "byte";
    case AMQP_FIELD_U8: return "unsignedbyte";
    case AMQP_FIELD_I16: return "short";
    case AMQP_FIELD_U16: return "unsignedshort";
    case AMQP_FIELD_I32: return "signedint";
    case AMQP_FIELD_U32: return "unsignedint";
    case AMQP_FIELD_I64: case AMQP_FIELD_L64: return "long";
    case AMQP_FIELD_FLOAT: return "float";
    case AMQP_FIELD_DOUBLE: return "double";
    case AMQP_FIELD_DECIMAL: return "decimal";
    case AMQP_FIELD_LONGSTR: return "longstr";
    case AMQP_FIELD_BYTES: return "binary";
    case AMQP_FIELD_ARRAY: return "array";
    case AMQP_FIELD_TIMESTAMP: return "timestamp";
    case AMQP_FIELD_TABLE: return "table";
    case AMQP_FIELD_VOID: return "void";
    }
    return "unknown";
}

bool
field_values_equal(const struct amqp_field *a, const struct amqp_field *b)
{
    int64_t ia, ib;

    if (field_as_int(a, &ia) && field_as_int(b, &ib))
        return ia == ib;
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case AMQP_FIELD_BOOL:
        return a->v.b == b->v.b;
    case AMQP_FIELD_TIMESTAMP:
        return a->v.u == b->v.u;
    case AMQP_FIELD_FLOAT:
        return memcmp(&a->v.f, &b->v.f, sizeof(a->v.f)) == 0;
    case AMQP_FIELD_DOUBLE:
        return memcmp(&a->v.d, &b->v.d, sizeof(a->v.d)) == 0;
    case AMQP_FIELD_DECIMAL:
        return a->v.decimal.scale == b->v.decimal.scale &&
               a->v.decimal.value == b->v.decimal.value;
    case AMQP_FIELD_TABLE:
        return table_values_equal(a->v.table, b->v.table);
    case AMQP_FIELD_LONGSTR: case AMQP_FIELD_BYTES: case AMQP_FIELD_ARRAY:
        /* strings and arrays share the borrowed-range layout */
        return a->v.str.len == b->v.str.len &&
               (a->v.str.len == 0 ||
                memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0);
    case AMQP_FIELD_VOID:
        return true;
    default:
        return false;   /* integers: compared above */
    }
}

/* Every entry of 'a' appears in 'b' with an equal value of its kind. */
static bool
table_contains(struct amqp_table a, struct amqp_table b)
{
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field v;

    table_iter_init(&it, a);
    while (table_next(&it, &k, &v)) {
        struct table_iter jt;
        struct amqp_bytes k2;
        struct amqp_field v2;
        bool found = false;
        table_iter_init(&jt, b);
        while (!found && table_next(&jt, &k2, &v2)) {
            if (k2.len != k.len || memcmp(k2.ptr, k.ptr, k.len) != 0 ||
                v2.kind != v.kind)
                continue;
            found = field_values_equal(&v, &v2);
        }
        if (!found)
            return false;
    }
    return true;
}

bool
table_values_equal(struct amqp_table a, struct amqp_table b)
{
    if (a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0))
        return true;
    return table_count(a) == table_count(b) && table_contains(a, b) &&
           table_contains(b, a);
}
