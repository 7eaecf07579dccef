/*
 * libFuzzer target: method_decode() on the input, taken as a method
 * frame's payload (class id, method id, arguments).
 *
 * Whatever decodes must hold up when written back: method_encode() gives
 * the input again, byte for byte, except for the unused bits of bit
 * octets (ignored when read, as RabbitMQ does, and written as 0); that
 * encoding decodes to the same arguments; method_frame_put() frames it;
 * and an output buffer that is too small gives AMQP_E_OVERFLOW with the
 * size that was needed, without writing past its end. Every table argument
 * is then walked with the iterators, nested tables and arrays included,
 * and its first entries are looked up again with table_get().
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

#include "amqp/frame.h"
#include "amqp/method.h"
#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_method";

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

/* ---- methods: the same arguments and the same bytes ---- */

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

/*
 * Turn 'buf', a copy of the payload 'm' was decoded from, into what
 * method_encode() must write: clear the bits of each bit octet that no
 * argument uses. The layout is worked out here from the field list,
 * independently of the codec; false if it does not account for exactly
 * 'len' bytes.
 */
static bool
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

static void
check_method(const uint8_t *in, size_t len, const struct amqp_method *m)
{
    const struct method_info *mi = method_info_find(m->id);
    static const size_t frame_caps[] = { 0, 3, 7, 8 };
    struct amqp_method again;
    struct wire_wr w;
    uint8_t *canon, *out, *frame, *small;
    size_t caps[3], i;

    CHECK(mi != NULL && mi->id == m->id);
    CHECK(strcmp(method_name(m->id), mi->name) == 0);
    CHECK(class_is_known(method_class(m->id)));

    canon = xmalloc(len);
    memcpy(canon, in, len);
    CHECK(method_canon(mi, m, canon, len));

    /* The same bytes... */
    out = xmalloc(len);
    wire_wr_init(&w, out, len);
    CHECK(method_encode(m, &w) == AMQP_OK);
    CHECK(w.len == len);
    CHECK(memcmp(out, canon, len) == 0);

    /* ...and the same arguments. */
    memset(&again, 0, sizeof(again));
    CHECK(method_decode(out, len, &again) == AMQP_OK);
    CHECK(again.id == m->id);
    CHECK(fields_equal(mi->fields, mi->nfields, CODEC_ALL, &m->a, &again.a));

    /* Too small a buffer: the writer counts and writes nothing past the
     * end (each buffer is allocated to its exact size for ASan). */
    caps[0] = 0;
    caps[1] = len / 2;
    caps[2] = len - 1;
    for (i = 0; i < 3; i++) {
        small = caps[i] ? xmalloc(caps[i]) : NULL;
        wire_wr_init(&w, small, caps[i]);
        CHECK(method_encode(m, &w) == AMQP_E_OVERFLOW);
        CHECK(w.len == len);
        free(small);
    }

    /* The whole frame, then the frame with too little room. */
    frame = xmalloc(len + AMQP_FRAME_OVERHEAD);
    wire_wr_init(&w, frame, len + AMQP_FRAME_OVERHEAD);
    CHECK(method_frame_put(&w, 7, m) == AMQP_OK);
    CHECK(w.len == len + AMQP_FRAME_OVERHEAD);
    CHECK(frame[0] == AMQP_FRAME_METHOD && wire_load16(frame + 1) == 7);
    CHECK(frame_peek_size(frame) == len);
    CHECK(memcmp(frame + AMQP_FRAME_HEADER_LEN, canon, len) == 0);
    CHECK(frame[AMQP_FRAME_HEADER_LEN + len] == AMQP_FRAME_END);
    for (i = 0; i < sizeof(frame_caps) / sizeof(frame_caps[0]); i++) {
        size_t cap = len + AMQP_FRAME_OVERHEAD - 1 - frame_caps[i];
        small = xmalloc(cap);
        wire_wr_init(&w, small, cap);
        CHECK(method_frame_put(&w, 7, m) == AMQP_E_OVERFLOW);
        free(small);
    }

    free(frame);
    free(out);
    free(canon);
}

static void
walk_arguments(const struct amqp_method *m)
{
    const struct method_info *mi = method_info_find(m->id);

    for (size_t i = 0; i < mi->nfields; i++) {
        const uint8_t *src = (const uint8_t *)&m->a + mi->fields[i].offset;
        if (mi->fields[i].type == FIELD_TABLE)
            walk_table(*(const struct amqp_table *)(const void *)src, 1);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct amqp_method m;
    enum amqp_status st;

    memset(&m, 0, sizeof(m));
    st = method_decode(data, size, &m);
    if (st != AMQP_OK) {
        /* Every way to fail has a reply code to close with. */
        CHECK(status_reply_code(st) != 0 && status_reply_code(st) != 200);
        CHECK(status_name(st) != NULL && status_text(st) != NULL);
        return 0;
    }
    check_method(data, size, &m);
    walk_arguments(&m);
    return 0;
}
