/*
 * SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: field tables and arrays. The input is
 *
 *   key length k (1 octet), k octets of key, body
 *
 * The body is validated both as table entries and as array values
 * (table_validate() and array_validate() at depth 1, as a method argument
 * is). Whichever is valid is then
 *
 *  - walked with the iterators, nested tables and arrays included: the
 *    iterators end exactly at the end, agree with table_count() and
 *    array_count(), and table_get() finds the first entries again;
 *  - written again entry by entry with table_put_key() and field_put(),
 *    nested tables and arrays rebuilt the same way inside table_begin()
 *    and table_end(), which must give the body byte for byte (booleans
 *    other than 0 and 1 read as true and are written as 1); field_put() of
 *    a nested table or array must also copy its bytes exactly;
 *  - validated again at the deepest starting depth its nesting allows,
 *    which must pass, and one deeper, which must fail with
 *    AMQP_E_TABLE_DEPTH.
 *
 * The key (up to its first NUL) is looked up with table_get() and must
 * find the first entry with that name, if any. Finally a small table built
 * with table_put_bool(), table_put_i64() and table_put_str() under that key
 * must read back with wire_get_table().
 *
 * A failed check prints the line and calls abort(), which libFuzzer and
 * the replay driver report as a crash. Every buffer is sized from the
 * input's actual length, never from a length field inside it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_table";

/* ---- writing a validated table or array again ---- */

struct rewrite {
    struct wire_wr w;
    const uint8_t *body; /* the input's body */
    uint8_t *canon;      /* a copy of it with booleans made 0 or 1 */
    unsigned nest;       /* deepest nesting level seen (1: flat) */
};

static void put_entries(struct rewrite *rw, struct amqp_table t,
                        unsigned depth);
static void put_values(struct rewrite *rw, struct amqp_array a,
                       unsigned depth);

/* Write 'v', which ends at 'end' in the input. */
static void
put_value(struct rewrite *rw, const struct amqp_field *v, const uint8_t *end,
          unsigned depth)
{
    size_t at, mark;

    switch (v->kind) {
    case AMQP_FIELD_TABLE:
    case AMQP_FIELD_ARRAY:
        /* field_put() copies the encoded bytes: type octet, length, body. */
        at = rw->w.len;
        field_put(&rw->w, v);
        CHECK(rw->w.len - at == 5 + v->v.table.len);
        CHECK(wire_wr_overflowed(&rw->w) ||
              memcmp(rw->w.buf + at, v->v.table.ptr - 5,
                     5 + v->v.table.len) == 0);
        /* Then write the same place again, entry by entry. */
        rw->w.len = at;
        wire_put_u8(&rw->w, (uint8_t)v->kind);
        mark = table_begin(&rw->w);
        if (v->kind == AMQP_FIELD_TABLE)
            put_entries(rw, v->v.table, depth + 1);
        else
            put_values(rw, v->v.array, depth + 1);
        table_end(&rw->w, mark);
        break;
    case AMQP_FIELD_BOOL:
        CHECK(end > rw->body);
        rw->canon[end - 1 - rw->body] = v->v.b ? 1 : 0;
        field_put(&rw->w, v);
        break;
    default:
        field_put(&rw->w, v);
        break;
    }
}

static void
put_entries(struct rewrite *rw, struct amqp_table t, unsigned depth)
{
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val;

    if (depth > rw->nest)
        rw->nest = depth;
    table_iter_init(&it, t);
    while (table_next(&it, &key, &val)) {
        CHECK(table_put_key(&rw->w, key) == AMQP_OK);
        put_value(rw, &val, it.p, depth);
    }
}

static void
put_values(struct rewrite *rw, struct amqp_array a, unsigned depth)
{
    struct table_iter it;
    struct amqp_field val;

    if (depth > rw->nest)
        rw->nest = depth;
    array_iter_init(&it, a);
    while (array_next(&it, &val))
        put_value(rw, &val, it.p, depth);
}

/* Rewrite the valid table or array 'body' and check the result; returns
 * its nesting depth. */
static unsigned
check_rewrite(const uint8_t *body, size_t len, bool is_table)
{
    struct rewrite rw;
    uint8_t *out = fuzz_xmalloc(len + 4);
    size_t mark;

    rw.body = body;
    rw.canon = fuzz_xmalloc(len);
    if (len)
        memcpy(rw.canon, body, len);
    rw.nest = 0;
    wire_wr_init(&rw.w, out, len + 4);
    mark = table_begin(&rw.w);
    if (is_table) {
        struct amqp_table t = { body, len };
        put_entries(&rw, t, 1);
    } else {
        struct amqp_array a = { body, len };
        put_values(&rw, a, 1);
    }
    table_end(&rw.w, mark);
    CHECK(rw.w.len == len + 4);
    CHECK(wire_load32(out) == len);
    CHECK(len == 0 || memcmp(out + 4, rw.canon, len) == 0);
    free(rw.canon);
    free(out);
    CHECK(rw.nest >= 1 && rw.nest <= TABLE_MAX_DEPTH);
    return rw.nest;
}

/* ---- the input ---- */

static void
check_body(const uint8_t *body, size_t len, bool is_table)
{
    enum amqp_status (*validate)(const uint8_t *, size_t, unsigned) =
        is_table ? table_validate : array_validate;
    enum amqp_status st = validate(body, len, 1);
    unsigned nest, start;

    if (st != AMQP_OK) {
        /* Every way to fail has a reply code to close with. */
        CHECK(status_reply_code(st) != 0 && status_reply_code(st) != 200);
        return;
    }
    if (is_table) {
        struct amqp_table t = { body, len };
        walk_table(t, 1);
    } else {
        struct amqp_array a = { body, len };
        walk_array(a, 1);
    }
    nest = check_rewrite(body, len, is_table);

    /* Levels are counted from where validation starts. */
    start = TABLE_MAX_DEPTH + 1 - nest;
    CHECK(validate(body, len, start) == AMQP_OK);
    CHECK(validate(body, len, start + 1) == AMQP_E_TABLE_DEPTH);
}

/* table_get() with the key from the input: the first entry named so. */
static void
check_lookup(const uint8_t *body, size_t len, const char *name)
{
    struct amqp_table t = { body, len };
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val, got;
    bool found = false;

    table_iter_init(&it, t);
    while (!found && table_next(&it, &key, &val))
        found = bytes_equal(key.ptr, key.len, (const uint8_t *)name,
                            strlen(name));
    CHECK(table_get(t, name, &got) == found);
    CHECK(!found || field_equal(&got, &val));
}

/* The convenience writers, under the input's key. */
static void
check_writers(const char *name)
{
    uint8_t buf[4 + 3 * (1 + 255 + 1) + 1 + 8 + 4 + 255];
    struct wire_wr w;
    struct wire_rd r;
    struct amqp_table t;
    struct amqp_field val;
    size_t mark;

    wire_wr_init(&w, buf, sizeof(buf));
    mark = table_begin(&w);
    CHECK(table_put_bool(&w, name, true) == AMQP_OK);
    CHECK(table_put_i64(&w, name, -2) == AMQP_OK);
    CHECK(table_put_str(&w, name, name) == AMQP_OK);
    table_end(&w, mark);
    CHECK(!wire_wr_overflowed(&w));

    wire_rd_init(&r, buf, w.len);
    CHECK(wire_get_table(&r, 1, &t) == AMQP_OK);
    CHECK(r.off == w.len && table_count(t) == 3);
    CHECK(table_get(t, name, &val));
    CHECK(val.kind == AMQP_FIELD_BOOL && val.v.b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[256];
    size_t k;
    const uint8_t *body;
    size_t len;

    if (size == 0)
        return 0;
    k = data[0] < size - 1 ? data[0] : size - 1;
    memcpy(name, data + 1, k);
    name[k] = '\0';
    body = data + 1 + k;
    len = size - 1 - k;

    check_body(body, len, true);
    check_body(body, len, false);
    if (table_validate(body, len, 1) == AMQP_OK)
        check_lookup(body, len, name);
    check_writers(name);
    return 0;
}
