/*
 * SPDX-License-Identifier: Apache-2.0
 * What the four fuzz targets share: the check that aborts, comparisons of
 * decoded values and structs, walking tables and arrays to the bottom, and
 * the canonical re-encodings that a decode-encode round trip must give.
 */
#include "tests/fuzz/fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
check_failed(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    abort();
}

void *
fuzz_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        abort();
    return p;
}

bool
bytes_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* Values borrowed from the same bytes: strings, tables and arrays are
 * compared by address. */
bool
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
void
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

void
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

/* As codec.c reads it: CODEC_ALL, or bit (15 - i) of the property flags. */
static bool
is_present(uint32_t present, size_t i)
{
    return present == CODEC_ALL || (present >> (15 - i) & 1);
}

/* Compare two decoded method argument or property structs field by field
 * (they have padding, and their strings borrow different buffers). */
bool
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

/*
 * Turn 'buf', a copy of the payload 'm' was decoded from, into what
 * method_encode() must write: clear the bits of each bit octet that no
 * argument uses. The layout is worked out here from the field list,
 * independently of the codec; false if it does not account for exactly
 * 'len' bytes.
 */
bool
method_canon(const struct method_info *mi, const struct amqp_method *m,
             uint8_t *buf, size_t len)
{
    size_t off = 4, bitpos = 0;
    unsigned nbits = 8; /* bits used in the octet at bitpos; 8: none open */
    uint8_t octet = 0, used = 0;

    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];
        const uint8_t *src = (const uint8_t *)&m->a + f->offset;
        const struct amqp_bytes *s = (const void *)src;
        const struct amqp_table *t = (const void *)src;

        if (f->type == FIELD_BIT) {
            if (nbits == 8) {
                if (off >= len)
                    return false;
                bitpos = off++;
                octet = buf[bitpos];
                nbits = 0;
                used = 0;
            }
            used |= (uint8_t)(1u << nbits++);
            buf[bitpos] = octet & used;
            continue;
        }
        nbits = 8;
        switch (f->type) {
        case FIELD_OCTET:
            off += 1;
            break;
        case FIELD_SHORT:
            off += 2;
            break;
        case FIELD_LONG:
            off += 4;
            break;
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP:
            off += 8;
            break;
        case FIELD_SHORTSTR:
            off += 1 + s->len;
            break;
        case FIELD_LONGSTR:
            off += 4 + s->len;
            break;
        case FIELD_TABLE:
            off += 4 + t->len;
            break;
        }
    }
    return off == len;
}

/*
 * What content_header_encode() must write for a header decoded from
 * 'in': the input without its continuation flag words, and with the
 * continuation bit cleared. Returns a new buffer of *outlen bytes.
 */
uint8_t *
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
    canon = fuzz_xmalloc(*outlen);
    memcpy(canon, in, HEADER_FIXED_LEN);
    wire_store16(canon + 12,
                 (uint16_t)(wire_load16(in + 12) & ~PROPS_FLAG_CONTINUE));
    memcpy(canon + HEADER_FIXED_LEN, in + HEADER_FIXED_LEN + skip,
           len - HEADER_FIXED_LEN - skip);
    return canon;
}

bool
header_equal(const struct content_header *a, const struct content_header *b)
{
    return a->class_id == b->class_id && a->weight == b->weight &&
           a->body_size == b->body_size && a->props.flags == b->props.flags &&
           fields_equal(basic_prop_fields, AMQP_BASIC_PROP_COUNT,
                        a->props.flags, &a->props, &b->props);
}
