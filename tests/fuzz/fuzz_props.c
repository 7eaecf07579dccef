/*
 * libFuzzer target: content_header_decode() on the input, taken as a
 * content header frame's payload (class, weight, body size, property
 * flags, properties).
 *
 * Whatever decodes must hold up when written back: content_header_encode()
 * gives the input again, byte for byte, except that the continuation flag
 * words (which may not announce anything) are dropped; that encoding
 * decodes to the same header; flags naming a reserved bit are refused;
 * and an output buffer that is too small gives AMQP_E_OVERFLOW with the
 * size that was needed, without writing past its end. The headers table
 * is walked with the iterators, nested tables and arrays included.
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

#include "amqp/props.h"
#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_props";

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond))                                                      \
            check_failed(#cond, __LINE__);                                \
    } while (0)

static void
check_failed(const char *what, int line)
{
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, line, what);
    abort();
}

static void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        abort();
    return p;
}

static bool
bytes_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* ---- tables: iterate everything, recursively ---- */

/* Entries per table looked up again with table_get(); a bound keeps the
 * lookups linear in the input. */
#define GET_CHECKS 8

static void walk_table(struct amqp_table t, unsigned depth);
static void walk_array(struct amqp_array a, unsigned depth);

/* Values borrowed from the same bytes: strings, tables and arrays are
 * compared by address. */
static bool
field_equal(const struct amqp_field *a, const struct amqp_field *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case AMQP_FIELD_BOOL:
        return a->v.b == b->v.b;
    case AMQP_FIELD_I8:
    case AMQP_FIELD_I16:
    case AMQP_FIELD_I32:
    case AMQP_FIELD_I64:
    case AMQP_FIELD_L64:
        return a->v.i == b->v.i;
    case AMQP_FIELD_U8:
    case AMQP_FIELD_U16:
    case AMQP_FIELD_U32:
    case AMQP_FIELD_TIMESTAMP:
        return a->v.u == b->v.u;
    case AMQP_FIELD_FLOAT:
        return memcmp(&a->v.f, &b->v.f, sizeof(a->v.f)) == 0;
    case AMQP_FIELD_DOUBLE:
        return memcmp(&a->v.d, &b->v.d, sizeof(a->v.d)) == 0;
    case AMQP_FIELD_DECIMAL:
        return a->v.decimal.scale == b->v.decimal.scale &&
               a->v.decimal.value == b->v.decimal.value;
    case AMQP_FIELD_LONGSTR:
    case AMQP_FIELD_BYTES:
        return a->v.str.ptr == b->v.str.ptr && a->v.str.len == b->v.str.len;
    case AMQP_FIELD_TABLE:
        return a->v.table.ptr == b->v.table.ptr &&
               a->v.table.len == b->v.table.len;
    case AMQP_FIELD_ARRAY:
        return a->v.array.ptr == b->v.array.ptr &&
               a->v.array.len == b->v.array.len;
    case AMQP_FIELD_VOID:
        return true;
    }
    return false;
}

static void
walk_value(const struct amqp_field *v, unsigned depth)
{
    CHECK(field_kind_is_valid((uint8_t)v->kind));
    if (v->kind == AMQP_FIELD_TABLE) {
        /* The validator allows TABLE_MAX_DEPTH levels, no more. */
        CHECK(depth < TABLE_MAX_DEPTH);
        walk_table(v->v.table, depth + 1);
    } else if (v->kind == AMQP_FIELD_ARRAY) {
        CHECK(depth < TABLE_MAX_DEPTH);
        walk_array(v->v.array, depth + 1);
    }
}

/* Walk a validated table at nesting level 'depth' (1 for an argument). */
static void
walk_table(struct amqp_table t, unsigned depth)
{
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val, got;
    struct {
        struct amqp_bytes key;
        struct amqp_field val;
    } seen[GET_CHECKS];
    char name[256];
    size_t n = 0, first;

    table_iter_init(&it, t);
    while (table_next(&it, &key, &val)) {
        CHECK(it.p <= it.end);
        walk_value(&val, depth);
        if (n < GET_CHECKS) {
            seen[n].key = key;
            seen[n].val = val;
            /* table_get() takes a C string: keys with a NUL are skipped. */
            if (key.len < sizeof(name) &&
                (key.len == 0 || memchr(key.ptr, 0, key.len) == NULL)) {
                if (key.len)
                    memcpy(name, key.ptr, key.len);
                name[key.len] = '\0';
                for (first = 0; !bytes_equal(seen[first].key.ptr,
                                             seen[first].key.len, key.ptr,
                                             key.len);
                     first++)
                    ;
                CHECK(table_get(t, name, &got));
                CHECK(field_equal(&got, &seen[first].val));
            }
        }
        n++;
    }
    CHECK(it.p == it.end);
    CHECK(table_count(t) == n);
}

static void
walk_array(struct amqp_array a, unsigned depth)
{
    struct table_iter it;
    struct amqp_field val;
    size_t n = 0;

    array_iter_init(&it, a);
    while (array_next(&it, &val)) {
        CHECK(it.p <= it.end);
        walk_value(&val, depth);
        n++;
    }
    CHECK(it.p == it.end);
    CHECK(array_count(a) == n);
}

/* ---- comparing decoded structs ---- */

/* As codec.c reads it: CODEC_ALL, or bit (15 - i) of the property flags. */
static bool
is_present(uint32_t present, size_t i)
{
    return present == CODEC_ALL || (present >> (15 - i) & 1);
}

/* Compare two decoded method argument or property structs field by field
 * (they have padding, and their strings borrow different buffers). */
static bool
fields_equal(const struct codec_field *f, size_t n, uint32_t present,
             const void *a, const void *b)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *pa = (const uint8_t *)a + f[i].offset;
        const uint8_t *pb = (const uint8_t *)b + f[i].offset;
        const struct amqp_bytes *sa = (const void *)pa, *sb = (const void *)pb;
        const struct amqp_table *ta = (const void *)pa, *tb = (const void *)pb;
        bool same = false;

        if (!is_present(present, i))
            continue;
        switch (f[i].type) {
        case FIELD_OCTET:
            same = *pa == *pb;
            break;
        case FIELD_SHORT:
            same = *(const uint16_t *)(const void *)pa ==
                   *(const uint16_t *)(const void *)pb;
            break;
        case FIELD_LONG:
            same = *(const uint32_t *)(const void *)pa ==
                   *(const uint32_t *)(const void *)pb;
            break;
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP:
            same = *(const uint64_t *)(const void *)pa ==
                   *(const uint64_t *)(const void *)pb;
            break;
        case FIELD_BIT:
            same = *(const bool *)(const void *)pa ==
                   *(const bool *)(const void *)pb;
            break;
        case FIELD_SHORTSTR:
        case FIELD_LONGSTR:
            same = bytes_equal(sa->ptr, sa->len, sb->ptr, sb->len);
            break;
        case FIELD_TABLE:
            same = bytes_equal(ta->ptr, ta->len, tb->ptr, tb->len);
            break;
        }
        if (!same)
            return false;
    }
    return true;
}

/* ---- content headers: the same properties and the same bytes ---- */

/* class, weight, body size, first flag word */
#define HEADER_FIXED_LEN 14

/*
 * What content_header_encode() must write for a header decoded from
 * 'in': the input without its continuation flag words, and with the
 * continuation bit cleared. Returns a new buffer of *outlen bytes.
 */
static uint8_t *
header_canon(const uint8_t *in, size_t len, size_t *outlen)
{
    uint16_t word = wire_load16(in + 12);
    size_t skip = 0;
    uint8_t *canon;

    /* The decoder accepted them, so the words are in the input. */
    while (word & PROPS_FLAG_CONTINUE) {
        CHECK(HEADER_FIXED_LEN + skip + 2 <= len);
        word = wire_load16(in + HEADER_FIXED_LEN + skip);
        skip += 2;
    }
    *outlen = len - skip;
    canon = xmalloc(*outlen);
    memcpy(canon, in, HEADER_FIXED_LEN);
    wire_store16(canon + 12,
                 (uint16_t)(wire_load16(in + 12) & ~PROPS_FLAG_CONTINUE));
    memcpy(canon + HEADER_FIXED_LEN, in + HEADER_FIXED_LEN + skip,
           len - HEADER_FIXED_LEN - skip);
    return canon;
}

static bool
header_equal(const struct content_header *a, const struct content_header *b)
{
    return a->class_id == b->class_id && a->weight == b->weight &&
           a->body_size == b->body_size && a->props.flags == b->props.flags &&
           fields_equal(basic_prop_fields, AMQP_BASIC_PROP_COUNT,
                        a->props.flags, &a->props, &b->props);
}

static void
check_header(const uint8_t *in, size_t len, const struct content_header *h)
{
    struct content_header again, bad;
    struct wire_wr w;
    uint8_t *canon, *out, *out2, *small;
    size_t clen, caps[3], i;

    CHECK(h->class_id == AMQP_CLASS_BASIC && h->weight == 0);
    CHECK((h->props.flags & (PROPS_FLAG_CONTINUE | PROPS_FLAG_RESERVED)) == 0);
    canon = header_canon(in, len, &clen);

    /* The same bytes... */
    out = xmalloc(clen);
    wire_wr_init(&w, out, clen);
    CHECK(content_header_encode(h, &w) == AMQP_OK);
    CHECK(w.len == clen);
    CHECK(memcmp(out, canon, clen) == 0);

    /* ...the same header, and once more the same bytes. */
    CHECK(content_header_decode(out, clen, &again) == AMQP_OK);
    CHECK(header_equal(h, &again));
    out2 = xmalloc(clen);
    wire_wr_init(&w, out2, clen);
    CHECK(content_header_encode(&again, &w) == AMQP_OK);
    CHECK(w.len == clen && memcmp(out2, out, clen) == 0);

    /* Too small a buffer: the writer counts and writes nothing past the
     * end (each buffer is allocated to its exact size for ASan). */
    caps[0] = 0;
    caps[1] = clen / 2;
    caps[2] = clen - 1;
    for (i = 0; i < 3; i++) {
        small = caps[i] ? xmalloc(caps[i]) : NULL;
        wire_wr_init(&w, small, caps[i]);
        CHECK(content_header_encode(h, &w) == AMQP_E_OVERFLOW);
        CHECK(w.len == clen);
        free(small);
    }

    /* Flags the encoder must refuse: it writes no continuation words. */
    bad = *h;
    bad.props.flags |= PROPS_FLAG_CONTINUE;
    wire_wr_init(&w, out2, clen);
    CHECK(content_header_encode(&bad, &w) == AMQP_E_PROPERTY_FLAGS);
    bad.props.flags = (uint16_t)(h->props.flags | PROPS_FLAG_RESERVED);
    wire_wr_init(&w, out2, clen);
    CHECK(content_header_encode(&bad, &w) == AMQP_E_PROPERTY_FLAGS);

    free(out2);
    free(out);
    free(canon);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct content_header h;
    enum amqp_status st;

    st = content_header_decode(data, size, &h);
    if (st != AMQP_OK) {
        /* Every way to fail has a reply code to close with. */
        CHECK(status_reply_code(st) != 0 && status_reply_code(st) != 200);
        CHECK(status_name(st) != NULL && status_text(st) != NULL);
        return 0;
    }
    check_header(data, size, &h);
    if (h.props.flags & AMQP_BASIC_HEADERS_FLAG)
        walk_table(h.props.headers, 1);
    return 0;
}
