/*
 * SPDX-License-Identifier: Apache-2.0
 * Wire primitives (wire.h): big-endian loads and stores, the reader's
 * getters (values, offsets, and AMQP_E_TRUNCATED on every too-short input,
 * read from exact-size heap copies so that ASan sees any over-read), the
 * writer's putters and its overflow accounting, and the amqp_bytes helpers.
 * Also the status table (status.h) and the reply code table (reply.h),
 * checked row by row against values written out here, not derived from the
 * same X-macro.
 */
#include "tests/unit/testutil.h"

#include "amqp/reply.h"
#include "amqp/status.h"
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

/* ---- loads and stores ---- */

/* Eight bytes and the big-endian u64 they spell; the u32, u16 and u8
 * loads of the same bytes are its high parts. */
static const struct int_vec {
    const char *name;
    uint8_t b[8];
    uint64_t v;
} int_vecs[] = {
    { "zero", { 0, 0, 0, 0, 0, 0, 0, 0 }, 0 },
    { "ascending", { 1, 2, 3, 4, 5, 6, 7, 8 }, 0x0102030405060708ull },
    { "all ones", { 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF },
      UINT64_MAX },
    { "top bit only", { 0x80, 0, 0, 0, 0, 0, 0, 0 }, 0x8000000000000000ull },
    { "low bit only", { 0, 0, 0, 0, 0, 0, 0, 1 }, 1 },
    { "high bytes set", { 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10 },
      0xFEDCBA9876543210ull },
    { "sign bits in every byte", { 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86,
      0x87 }, 0x8081828384858687ull },
};

START_TEST(load_vectors)
{
    const struct int_vec *v = &int_vecs[_i];

    ck_assert_msg(wire_load64(v->b) == v->v, "%s: load64", v->name);
    ck_assert_msg(wire_load32(v->b) == (uint32_t)(v->v >> 32), "%s: load32",
                  v->name);
    ck_assert_msg(wire_load16(v->b) == (uint16_t)(v->v >> 48), "%s: load16",
                  v->name);
    /* The second half loads on its own, too. */
    ck_assert_msg(wire_load32(v->b + 4) == (uint32_t)v->v, "%s: load32+4",
                  v->name);
    ck_assert_msg(wire_load16(v->b + 6) == (uint16_t)v->v, "%s: load16+6",
                  v->name);
}
END_TEST

/* Stores write exactly their bytes and leave the neighbours alone. */
START_TEST(store_vectors)
{
    const struct int_vec *v = &int_vecs[_i];
    uint8_t buf[12];

    memset(buf, 0xAA, sizeof(buf));
    wire_store64(buf + 2, v->v);
    ck_assert_msg(memcmp(buf + 2, v->b, 8) == 0, "%s: store64 %s", v->name,
                  hexdump(buf, sizeof(buf)));
    ck_assert(buf[0] == 0xAA && buf[1] == 0xAA && buf[10] == 0xAA &&
              buf[11] == 0xAA);

    memset(buf, 0xAA, sizeof(buf));
    wire_store32(buf + 2, (uint32_t)(v->v >> 32));
    ck_assert_msg(memcmp(buf + 2, v->b, 4) == 0, "%s: store32", v->name);
    ck_assert(buf[1] == 0xAA && buf[6] == 0xAA);

    memset(buf, 0xAA, sizeof(buf));
    wire_store16(buf + 2, (uint16_t)(v->v >> 48));
    ck_assert_msg(memcmp(buf + 2, v->b, 2) == 0, "%s: store16", v->name);
    ck_assert(buf[1] == 0xAA && buf[4] == 0xAA);
}
END_TEST

/* ---- reading ---- */

START_TEST(get_ints_vectors)
{
    const struct int_vec *v = &int_vecs[_i];
    uint8_t *p = heap_copy(v->b, 8);
    struct wire_rd r;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;

    wire_rd_init(&r, p, 8);
    ck_assert_int_eq(wire_get_u64(&r, &u64), AMQP_OK);
    ck_assert_msg(u64 == v->v, "%s: u64", v->name);
    ck_assert_uint_eq(r.off, 8);
    ck_assert_uint_eq(wire_rd_left(&r), 0);

    /* u8, u16, u32 in sequence read bytes 0, 1-2, 3-6. */
    wire_rd_init(&r, p, 8);
    ck_assert_int_eq(wire_get_u8(&r, &u8), AMQP_OK);
    ck_assert_uint_eq(u8, v->b[0]);
    ck_assert_uint_eq(r.off, 1);
    ck_assert_int_eq(wire_get_u16(&r, &u16), AMQP_OK);
    ck_assert_uint_eq(u16, (uint16_t)(v->b[1] << 8 | v->b[2]));
    ck_assert_uint_eq(r.off, 3);
    ck_assert_int_eq(wire_get_u32(&r, &u32), AMQP_OK);
    ck_assert_uint_eq(u32, wire_load32(v->b + 3));
    ck_assert_uint_eq(r.off, 7);
    ck_assert_uint_eq(wire_rd_left(&r), 1);
    free(p);
}
END_TEST

START_TEST(get_mixed_sequence)
{
    static const uint8_t in[] = {
        0x7F,                                     /* u8 */
        0xBE, 0xEF,                               /* u16 */
        0xDE, 0xAD, 0xBE, 0xEF,                   /* u32 */
        0, 0, 0, 1, 0, 0, 0, 2,                   /* u64 */
        3, 'a', 'b', 'c',                         /* shortstr */
        0, 0, 0, 2, 'x', 0,                       /* longstr with a NUL */
        9, 8, 7,                                  /* raw 3 */
    };
    uint8_t *p = heap_copy(in, sizeof(in));
    struct wire_rd r;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    struct amqp_bytes s;
    const uint8_t *raw;

    wire_rd_init(&r, p, sizeof(in));
    ck_assert_ptr_eq(r.buf, p);
    ck_assert_uint_eq(r.len, sizeof(in));
    ck_assert_uint_eq(r.off, 0);
    ck_assert_uint_eq(wire_rd_left(&r), sizeof(in));

    ck_assert_int_eq(wire_get_u8(&r, &u8), AMQP_OK);
    ck_assert_uint_eq(u8, 0x7F);
    ck_assert_int_eq(wire_get_u16(&r, &u16), AMQP_OK);
    ck_assert_uint_eq(u16, 0xBEEF);
    ck_assert_int_eq(wire_get_u32(&r, &u32), AMQP_OK);
    ck_assert_uint_eq(u32, 0xDEADBEEFu);
    ck_assert_int_eq(wire_get_u64(&r, &u64), AMQP_OK);
    ck_assert(u64 == 0x0000000100000002ull);
    ck_assert_uint_eq(r.off, 15);

    ck_assert_int_eq(wire_get_shortstr(&r, &s), AMQP_OK);
    ck_assert_uint_eq(s.len, 3);
    ck_assert_ptr_eq(s.ptr, p + 16); /* borrows, no copy */
    ck_assert(amqp_bytes_eq(s, "abc"));
    ck_assert_uint_eq(r.off, 19);

    ck_assert_int_eq(wire_get_longstr(&r, &s), AMQP_OK);
    ck_assert_uint_eq(s.len, 2);
    ck_assert_ptr_eq(s.ptr, p + 23);
    ck_assert(s.ptr[0] == 'x' && s.ptr[1] == 0);
    ck_assert_uint_eq(r.off, 25);

    ck_assert_int_eq(wire_get_raw(&r, 3, &raw), AMQP_OK);
    ck_assert_ptr_eq(raw, p + 25);
    ck_assert_uint_eq(r.off, sizeof(in));
    ck_assert_uint_eq(wire_rd_left(&r), 0);

    /* At the end: every getter reports truncation. */
    ck_assert_int_eq(wire_get_u8(&r, &u8), AMQP_E_TRUNCATED);
    ck_assert_int_eq(wire_get_shortstr(&r, &s), AMQP_E_TRUNCATED);
    ck_assert_int_eq(wire_get_raw(&r, 1, &raw), AMQP_E_TRUNCATED);
    ck_assert_uint_eq(r.off, sizeof(in));
    free(p);
}
END_TEST

START_TEST(get_empty_strings)
{
    static const uint8_t in[] = { 0, 0, 0, 0, 0 };
    uint8_t *p = heap_copy(in, sizeof(in));
    struct wire_rd r;
    struct amqp_bytes s;

    wire_rd_init(&r, p, sizeof(in));
    ck_assert_int_eq(wire_get_shortstr(&r, &s), AMQP_OK);
    ck_assert_uint_eq(s.len, 0);
    ck_assert(amqp_bytes_eq(s, ""));
    ck_assert_uint_eq(r.off, 1);
    ck_assert_int_eq(wire_get_longstr(&r, &s), AMQP_OK);
    ck_assert_uint_eq(s.len, 0);
    ck_assert_uint_eq(r.off, 5);
    free(p);
}
END_TEST

START_TEST(get_shortstr_255)
{
    uint8_t in[256];
    uint8_t *p;
    struct wire_rd r;
    struct amqp_bytes s;

    in[0] = 255;
    for (size_t i = 1; i < sizeof(in); i++)
        in[i] = (uint8_t)i;
    p = heap_copy(in, sizeof(in));
    wire_rd_init(&r, p, sizeof(in));
    ck_assert_int_eq(wire_get_shortstr(&r, &s), AMQP_OK);
    ck_assert_uint_eq(s.len, 255);
    ck_assert_ptr_eq(s.ptr, p + 1);
    ck_assert_uint_eq(r.off, 256);
    free(p);
}
END_TEST

/* A length that would wrap an offset computation is just truncation. */
START_TEST(get_huge_lengths)
{
    static const uint8_t in[] = { 0xFF, 0xFF, 0xFF, 0xFF, 'a', 'b' };
    uint8_t *p = heap_copy(in, sizeof(in));
    struct wire_rd r;
    struct amqp_bytes s;
    const uint8_t *raw = NULL;

    wire_rd_init(&r, p, sizeof(in));
    ck_assert_int_eq(wire_get_longstr(&r, &s), AMQP_E_TRUNCATED);
    ck_assert_uint_le(r.off, sizeof(in));

    wire_rd_init(&r, p, sizeof(in));
    ck_assert_int_eq(wire_get_raw(&r, SIZE_MAX, &raw), AMQP_E_TRUNCATED);
    ck_assert_int_eq(wire_get_raw(&r, SIZE_MAX - 1, &raw), AMQP_E_TRUNCATED);
    ck_assert_ptr_null(raw);
    ck_assert_uint_eq(r.off, 0);

    /* Off by one past a partly consumed reader. */
    ck_assert_int_eq(wire_get_raw(&r, 2, &raw), AMQP_OK);
    ck_assert_int_eq(wire_get_raw(&r, 5, &raw), AMQP_E_TRUNCATED);
    ck_assert_uint_eq(r.off, 2);
    ck_assert_int_eq(wire_get_raw(&r, 4, &raw), AMQP_OK);
    ck_assert_uint_eq(r.off, 6);
    free(p);
}
END_TEST

START_TEST(get_raw_zero)
{
    static const uint8_t in[] = { 1, 2 };
    struct wire_rd r;
    const uint8_t *raw = NULL;

    wire_rd_init(&r, in, sizeof(in));
    ck_assert_int_eq(wire_get_raw(&r, 0, &raw), AMQP_OK);
    ck_assert_ptr_eq(raw, in);
    ck_assert_uint_eq(r.off, 0);
    ck_assert_int_eq(wire_get_raw(&r, 2, &raw), AMQP_OK);
    ck_assert_int_eq(wire_get_raw(&r, 0, &raw), AMQP_OK); /* at the end */
    ck_assert_uint_eq(r.off, 2);
}
END_TEST

enum getter { G_U8, G_U16, G_U32, G_U64, G_SHORTSTR, G_LONGSTR, G_RAW };

/* Each getter with an input of exactly the size it needs ('need'); every
 * shorter prefix must be AMQP_E_TRUNCATED. */
static const struct get_vec {
    const char *name;
    enum getter g;
    uint8_t in[12];
    size_t need;
} get_vecs[] = {
    { "u8", G_U8, { 0xAB }, 1 },
    { "u16", G_U16, { 0xAB, 0xCD }, 2 },
    { "u32", G_U32, { 1, 2, 3, 4 }, 4 },
    { "u64", G_U64, { 1, 2, 3, 4, 5, 6, 7, 8 }, 8 },
    { "shortstr", G_SHORTSTR, { 3, 'a', 'b', 'c' }, 4 },
    { "shortstr empty", G_SHORTSTR, { 0 }, 1 },
    { "shortstr 255 long", G_SHORTSTR, { 255, 'a' }, 256 },
    { "longstr", G_LONGSTR, { 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o' }, 9 },
    { "longstr empty", G_LONGSTR, { 0, 0, 0, 0 }, 4 },
    { "longstr length bytes all count", G_LONGSTR, { 0, 0, 1, 0 }, 260 },
    { "raw 1", G_RAW, { 9 }, 1 },
    { "raw 7", G_RAW, { 1, 2, 3, 4, 5, 6, 7 }, 7 },
};

/* Run getter 'g' on 'r'; integer outputs start as the 0x5A sentinel so
 * that a failed get can be seen not to have written. */
static enum amqp_status
run_getter(struct wire_rd *r, enum getter g, size_t rawn, bool *wrote)
{
    uint8_t u8 = 0x5A;
    uint16_t u16 = 0x5A5A;
    uint32_t u32 = 0x5A5A5A5Au;
    uint64_t u64 = 0x5A5A5A5A5A5A5A5Aull;
    struct amqp_bytes s;
    const uint8_t *raw = NULL;
    enum amqp_status st = AMQP_OK;

    *wrote = false;
    switch (g) {
    case G_U8:
        st = wire_get_u8(r, &u8);
        *wrote = u8 != 0x5A;
        break;
    case G_U16:
        st = wire_get_u16(r, &u16);
        *wrote = u16 != 0x5A5A;
        break;
    case G_U32:
        st = wire_get_u32(r, &u32);
        *wrote = u32 != 0x5A5A5A5Au;
        break;
    case G_U64:
        st = wire_get_u64(r, &u64);
        *wrote = u64 != 0x5A5A5A5A5A5A5A5Aull;
        break;
    case G_SHORTSTR:
        st = wire_get_shortstr(r, &s);
        break;
    case G_LONGSTR:
        st = wire_get_longstr(r, &s);
        break;
    case G_RAW:
        st = wire_get_raw(r, rawn, &raw);
        *wrote = raw != NULL;
        break;
    }
    return st;
}

START_TEST(get_every_truncation)
{
    const struct get_vec *v = &get_vecs[_i];
    uint8_t *full = calloc(1, v->need);
    bool wrote;

    ck_assert_ptr_nonnull(full);
    memcpy(full, v->in, v->need < sizeof(v->in) ? v->need : sizeof(v->in));

    /* Also from a reader that has already consumed a byte, so that the
     * checks are relative to the offset and not to the buffer start. */
    for (size_t skip = 0; skip <= 1; skip++) {
        for (size_t n = 0; n <= v->need; n++) {
            uint8_t *p = malloc(skip + n ? skip + n : 1);
            struct wire_rd r;
            uint8_t dummy;
            enum amqp_status st;

            ck_assert_ptr_nonnull(p);
            if (skip)
                p[0] = 0xEE;
            if (n)
                memcpy(p + skip, full, n);
            wire_rd_init(&r, p, skip + n);
            if (skip)
                ck_assert_int_eq(wire_get_u8(&r, &dummy), AMQP_OK);
            st = run_getter(&r, v->g, v->need, &wrote);
            if (n < v->need) {
                ck_assert_msg(st == AMQP_E_TRUNCATED,
                              "%s: %zu of %zu bytes (skip %zu): got %s",
                              v->name, n, v->need, skip, status_name(st));
                ck_assert_msg(r.off <= r.len, "%s: off %zu past len %zu",
                              v->name, r.off, r.len);
                ck_assert_msg(!wrote, "%s: wrote its output on failure",
                              v->name);
                /* Fixed-size getters do not move on failure. */
                if (v->g <= G_U64 || v->g == G_RAW)
                    ck_assert_uint_eq(r.off, skip);
            } else {
                ck_assert_msg(st == AMQP_OK, "%s: full input: %s", v->name,
                              status_name(st));
                ck_assert_uint_eq(r.off, skip + v->need);
                ck_assert_uint_eq(wire_rd_left(&r), 0);
            }
            free(p);
        }
    }
    free(full);
}
END_TEST

/* ---- writing ---- */

START_TEST(put_ints_vectors)
{
    const struct int_vec *v = &int_vecs[_i];
    uint8_t buf[15 + 2];
    struct wire_wr w;

    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, 15);
    ck_assert_ptr_eq(w.buf, buf);
    ck_assert_uint_eq(w.cap, 15);
    ck_assert_uint_eq(w.len, 0);
    wire_put_u8(&w, (uint8_t)(v->v >> 56));
    ck_assert_uint_eq(w.len, 1);
    wire_put_u16(&w, (uint16_t)(v->v >> 48));
    ck_assert_uint_eq(w.len, 3);
    wire_put_u32(&w, (uint32_t)(v->v >> 32));
    ck_assert_uint_eq(w.len, 7);
    wire_put_u64(&w, v->v);
    ck_assert_uint_eq(w.len, 15);
    ck_assert(!wire_wr_overflowed(&w));

    ck_assert_msg(buf[0] == v->b[0], "%s: u8", v->name);
    ck_assert_msg(memcmp(buf + 1, v->b, 2) == 0, "%s: u16", v->name);
    ck_assert_msg(memcmp(buf + 3, v->b, 4) == 0, "%s: u32", v->name);
    ck_assert_msg(memcmp(buf + 7, v->b, 8) == 0, "%s: u64 %s", v->name,
                  hexdump(buf, 15));
    ck_assert(buf[15] == 0xAA && buf[16] == 0xAA);
}
END_TEST

START_TEST(put_strings)
{
    uint8_t buf[32];
    static const uint8_t want[] = {
        5, 'h', 'e', 'l', 'l', 'o',
        0,
        0, 0, 0, 3, 'a', 0, 'b',
        0, 0, 0, 0,
        'r', 'a', 'w',
    };
    struct wire_wr w;

    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, sizeof(buf));
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr("hello")), AMQP_OK);
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr("")), AMQP_OK);
    ck_assert_int_eq(wire_put_longstr(&w,
                         (struct amqp_bytes){ (const uint8_t *)"a\0b", 3 }),
                     AMQP_OK);
    ck_assert_int_eq(wire_put_longstr(&w, amqp_cstr(NULL)), AMQP_OK);
    wire_put_raw(&w, "raw", 3);
    wire_put_raw(&w, NULL, 0); /* nothing, and no memcpy from NULL */
    ck_assert_uint_eq(w.len, sizeof(want));
    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_msg(memcmp(buf, want, sizeof(want)) == 0, "%s",
                  hexdump(buf, w.len));
    ck_assert_uint_eq(buf[sizeof(want)], 0xAA);
}
END_TEST

START_TEST(put_shortstr_limit)
{
    char s[257];
    uint8_t buf[300];
    struct wire_wr w;

    memset(s, 'k', 256);
    s[256] = '\0';

    /* 255 bytes: the longest shortstr. */
    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, sizeof(buf));
    ck_assert_int_eq(wire_put_shortstr(&w, (struct amqp_bytes){
                         (const uint8_t *)s, 255 }), AMQP_OK);
    ck_assert_uint_eq(w.len, 256);
    ck_assert_uint_eq(buf[0], 255);
    ck_assert_uint_eq(buf[255], 'k');
    ck_assert_uint_eq(buf[256], 0xAA);

    /* 256 bytes: refused, and nothing written or counted. */
    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, sizeof(buf));
    wire_put_u8(&w, 7);
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr(s)), AMQP_E_VALUE);
    ck_assert_uint_eq(w.len, 1);
    ck_assert_uint_eq(buf[0], 7);
    for (size_t i = 1; i < sizeof(buf); i++)
        ck_assert_msg(buf[i] == 0xAA, "byte %zu written", i);

    /* Also when the writer has no room: still refused, still not counted. */
    wire_wr_init(&w, NULL, 0);
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr(s)), AMQP_E_VALUE);
    ck_assert_uint_eq(w.len, 0);
    ck_assert(!wire_wr_overflowed(&w));
}
END_TEST

/* A writer that runs out of room writes nothing beyond 'cap', never half
 * a value, and keeps counting so that w.len is the size needed. */
START_TEST(put_overflow_accounting)
{
    uint8_t buf[16];
    struct wire_wr w;

    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, 3);
    wire_put_u16(&w, 0x0102);
    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 2);

    wire_put_u16(&w, 0x0304); /* needs bytes 2-3, only 2 fits */
    ck_assert(wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 4);
    ck_assert_msg(buf[2] == 0xAA, "half a u16 was written");

    wire_put_u8(&w, 5);
    ck_assert_uint_eq(w.len, 5);
    wire_put_u32(&w, 6);
    ck_assert_uint_eq(w.len, 9);
    wire_put_u64(&w, 7);
    ck_assert_uint_eq(w.len, 17);
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr("abc")), AMQP_OK);
    ck_assert_uint_eq(w.len, 21);
    ck_assert_int_eq(wire_put_longstr(&w, amqp_cstr("abc")), AMQP_OK);
    ck_assert_uint_eq(w.len, 28);
    wire_put_raw(&w, "xy", 2);
    ck_assert_uint_eq(w.len, 30);
    ck_assert_ptr_null(wire_wr_reserve(&w, 1));
    ck_assert_uint_eq(w.len, 31);
    ck_assert_ptr_null(wire_wr_reserve(&w, 0));
    ck_assert_uint_eq(w.len, 31);
    ck_assert(wire_wr_overflowed(&w));

    ck_assert_uint_eq(buf[0], 0x01);
    ck_assert_uint_eq(buf[1], 0x02);
    for (size_t i = 2; i < sizeof(buf); i++)
        ck_assert_msg(buf[i] == 0xAA, "byte %zu written past cap", i);
}
END_TEST

START_TEST(put_exact_fit)
{
    uint8_t buf[5];
    struct wire_wr w;
    uint8_t *p;

    memset(buf, 0xAA, sizeof(buf));
    wire_wr_init(&w, buf, 4);
    wire_put_u32(&w, 0x01020304);
    ck_assert(!wire_wr_overflowed(&w)); /* full is not overflowed */
    ck_assert_uint_eq(w.len, 4);
    ck_assert_mem_eq(buf, "\x01\x02\x03\x04", 4);

    p = wire_wr_reserve(&w, 0);
    ck_assert_ptr_eq(p, buf + 4);
    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_ptr_null(wire_wr_reserve(&w, 1));
    ck_assert(wire_wr_overflowed(&w));
    ck_assert_uint_eq(w.len, 5);
    ck_assert_uint_eq(buf[4], 0xAA);
}
END_TEST

START_TEST(put_reserve)
{
    uint8_t buf[8];
    struct wire_wr w;
    uint8_t *a, *b;

    wire_wr_init(&w, buf, sizeof(buf));
    a = wire_wr_reserve(&w, 3);
    ck_assert_ptr_eq(a, buf);
    b = wire_wr_reserve(&w, 5);
    ck_assert_ptr_eq(b, buf + 3);
    ck_assert_uint_eq(w.len, 8);
    ck_assert(!wire_wr_overflowed(&w));
    ck_assert_ptr_null(wire_wr_reserve(&w, 1));
    ck_assert_uint_eq(w.len, 9);
}
END_TEST

/* A counting pass over no buffer at all gives the size needed. */
START_TEST(put_counting_pass)
{
    struct wire_wr w;

    wire_wr_init(&w, NULL, 0);
    wire_put_u8(&w, 1);
    wire_put_u16(&w, 1);
    wire_put_u32(&w, 1);
    wire_put_u64(&w, 1);
    ck_assert_int_eq(wire_put_shortstr(&w, amqp_cstr("four")), AMQP_OK);
    ck_assert_int_eq(wire_put_longstr(&w, amqp_cstr("four")), AMQP_OK);
    wire_put_raw(&w, "ab", 2);
    ck_assert_uint_eq(w.len, 1 + 2 + 4 + 8 + 5 + 8 + 2);
    ck_assert(wire_wr_overflowed(&w));
}
END_TEST

/* A count that would wrap around size_t must not make the writer look
 * healthy again: it stays overflowed and hands out no more room. */
START_TEST(put_count_wraparound)
{
    uint8_t buf[8];
    struct wire_wr w;

    wire_wr_init(&w, buf, sizeof(buf));
    w.len = SIZE_MAX - 2;
    ck_assert_ptr_null(wire_wr_reserve(&w, 4));
    ck_assert(wire_wr_overflowed(&w));
    ck_assert_ptr_null(wire_wr_reserve(&w, 1));
    ck_assert(wire_wr_overflowed(&w));

    wire_wr_init(&w, buf, sizeof(buf));
    wire_put_u8(&w, 1);
    wire_put_raw(&w, buf, SIZE_MAX);
    ck_assert(wire_wr_overflowed(&w));
    ck_assert_ptr_null(wire_wr_reserve(&w, 1));
}
END_TEST

/* ---- amqp_bytes ---- */

START_TEST(bytes_cstr)
{
    const char *s = "exchange";
    struct amqp_bytes b = amqp_cstr(s);

    ck_assert_ptr_eq(b.ptr, s);
    ck_assert_uint_eq(b.len, 8);
    b = amqp_cstr("");
    ck_assert_uint_eq(b.len, 0);
    b = amqp_cstr(NULL);
    ck_assert_ptr_null(b.ptr);
    ck_assert_uint_eq(b.len, 0);
}
END_TEST

static const struct eq_vec {
    const char *name;
    const char *ptr;
    size_t len;
    const char *s;
    bool want;
} eq_vecs[] = {
    { "equal", "queue", 5, "queue", true },
    { "borrowed slice", "queue.name", 5, "queue", true },
    { "differs in last byte", "queuf", 5, "queue", false },
    { "differs in first byte", "Queue", 5, "queue", false },
    { "shorter", "queu", 4, "queue", false },
    { "longer", "queues", 6, "queue", false },
    { "empty both", "", 0, "", true },
    { "NULL empty vs empty", NULL, 0, "", true },
    { "NULL empty vs text", NULL, 0, "q", false },
    { "text vs empty", "q", 1, "", false },
    { "embedded NUL", "ab\0c", 4, "ab", false },
    { "embedded NUL, prefix", "ab\0c", 2, "ab", true },
};

START_TEST(bytes_eq_vectors)
{
    const struct eq_vec *v = &eq_vecs[_i];
    struct amqp_bytes b = { (const uint8_t *)v->ptr, v->len };

    ck_assert_msg(amqp_bytes_eq(b, v->s) == v->want, "%s", v->name);
}
END_TEST

/* ---- statuses ---- */

/* Written out by hand: a row swapped or mis-typed in status.h fails. */
static const struct status_vec {
    enum amqp_status s;
    const char *name;
    uint16_t code;
    const char *text;
} status_vecs[] = {
    { AMQP_OK, "AMQP_OK", 200, "ok" },
    { AMQP_INCOMPLETE, "AMQP_INCOMPLETE", 0, "more input needed" },
    { AMQP_E_PROTOCOL_HEADER, "AMQP_E_PROTOCOL_HEADER", 0,
      "not an AMQP protocol header" },
    { AMQP_E_PROTOCOL_VERSION, "AMQP_E_PROTOCOL_VERSION", 0,
      "unsupported AMQP protocol version" },
    { AMQP_E_FRAME_TYPE, "AMQP_E_FRAME_TYPE", 501, "unknown frame type" },
    { AMQP_E_FRAME_END, "AMQP_E_FRAME_END", 501,
      "frame does not end with 0xCE" },
    { AMQP_E_FRAME_TOO_LARGE, "AMQP_E_FRAME_TOO_LARGE", 501,
      "frame larger than frame_max" },
    { AMQP_E_HEARTBEAT_CHANNEL, "AMQP_E_HEARTBEAT_CHANNEL", 505,
      "heartbeat frame on a channel other than 0" },
    { AMQP_E_HEARTBEAT_SIZE, "AMQP_E_HEARTBEAT_SIZE", 501,
      "heartbeat frame with a payload" },
    { AMQP_E_METHOD_SHORT, "AMQP_E_METHOD_SHORT", 501,
      "method frame shorter than its class and method ids" },
    { AMQP_E_TRUNCATED, "AMQP_E_TRUNCATED", 501,
      "field runs past the end of the frame" },
    { AMQP_E_TRAILING, "AMQP_E_TRAILING", 501,
      "bytes left over after the last field" },
    { AMQP_E_UTF8, "AMQP_E_UTF8", 501, "Malformed UTF-8 in shortstr" },
    { AMQP_E_FIELD_TYPE, "AMQP_E_FIELD_TYPE", 501,
      "unknown field value type" },
    { AMQP_E_TABLE_DEPTH, "AMQP_E_TABLE_DEPTH", 501,
      "field tables nested too deeply" },
    { AMQP_E_TABLE_SIZE, "AMQP_E_TABLE_SIZE", 501, "field table too large" },
    { AMQP_E_UNKNOWN_CLASS, "AMQP_E_UNKNOWN_CLASS", 540, "unknown class" },
    { AMQP_E_UNKNOWN_METHOD, "AMQP_E_UNKNOWN_METHOD", 540, "unknown method" },
    { AMQP_E_HEADER_SHORT, "AMQP_E_HEADER_SHORT", 501,
      "content header shorter than its fixed part" },
    { AMQP_E_HEADER_CLASS, "AMQP_E_HEADER_CLASS", 505,
      "content header for a class without content" },
    { AMQP_E_HEADER_WEIGHT, "AMQP_E_HEADER_WEIGHT", 505,
      "content header weight is not zero" },
    { AMQP_E_PROPERTY_FLAGS, "AMQP_E_PROPERTY_FLAGS", 501,
      "unknown content property flag" },
    { AMQP_E_VALUE, "AMQP_E_VALUE", 502, "value too long for its field" },
    { AMQP_E_OVERFLOW, "AMQP_E_OVERFLOW", 0, "output buffer too small" },
};

/* How many statuses status.h defines, counted from its own list. */
#define AMQP_STATUS_COUNT_ONE(name, code, text) +1
static const size_t status_count = 0 AMQP_STATUSES(AMQP_STATUS_COUNT_ONE);
#undef AMQP_STATUS_COUNT_ONE

START_TEST(status_vectors)
{
    const struct status_vec *v = &status_vecs[_i];

    ck_assert_int_eq(v->s, _i); /* the enum is dense and in list order */
    ck_assert_str_eq(status_name(v->s), v->name);
    ck_assert_str_eq(status_text(v->s), v->text);
    ck_assert_msg(status_reply_code(v->s) == v->code, "%s: %u, want %u",
                  v->name, status_reply_code(v->s), v->code);
    /* A nonzero code is always one the specification names. */
    if (v->code != 0)
        ck_assert_ptr_nonnull(reply_name(v->code));
}
END_TEST

START_TEST(status_table_complete)
{
    ck_assert_uint_eq(NELEMS(status_vecs), status_count);
    ck_assert_int_eq(AMQP_E_OVERFLOW + 1, (int)status_count);
    /* Each status has its own text, so a log line says which one. */
    for (size_t i = 0; i < NELEMS(status_vecs); i++)
        for (size_t j = i + 1; j < NELEMS(status_vecs); j++)
            ck_assert_msg(strcmp(status_text(status_vecs[i].s),
                                 status_text(status_vecs[j].s)) != 0,
                          "%s and %s share a text", status_vecs[i].name,
                          status_vecs[j].name);
}
END_TEST

START_TEST(status_out_of_range)
{
    static const unsigned bad[] = { 24, 25, 100, 999, 65535 };

    for (size_t i = 0; i < NELEMS(bad); i++) {
        enum amqp_status s = (enum amqp_status)bad[i];
        ck_assert_uint_ge(bad[i], status_count);
        ck_assert_str_eq(status_name(s), "AMQP_E_?");
        ck_assert_str_eq(status_text(s), "unknown status");
        ck_assert_uint_eq(status_reply_code(s), 0);
    }
}
END_TEST

/* ---- reply codes ---- */

/* Every reply code of the 0-9-1 specification (amqp0-9-1.xml constants
 * with a class, plus reply-success). */
static const struct reply_vec {
    uint16_t code;
    int constant; /* the generated enum value for the same code */
    const char *name;
    bool hard;
} reply_vecs[] = {
    { 200, AMQP_REPLY_SUCCESS, "REPLY_SUCCESS", false },
    { 311, AMQP_CONTENT_TOO_LARGE, "CONTENT_TOO_LARGE", false },
    { 312, AMQP_NO_ROUTE, "NO_ROUTE", false },
    { 313, AMQP_NO_CONSUMERS, "NO_CONSUMERS", false },
    { 320, AMQP_CONNECTION_FORCED, "CONNECTION_FORCED", true },
    { 402, AMQP_INVALID_PATH, "INVALID_PATH", true },
    { 403, AMQP_ACCESS_REFUSED, "ACCESS_REFUSED", false },
    { 404, AMQP_NOT_FOUND, "NOT_FOUND", false },
    { 405, AMQP_RESOURCE_LOCKED, "RESOURCE_LOCKED", false },
    { 406, AMQP_PRECONDITION_FAILED, "PRECONDITION_FAILED", false },
    { 501, AMQP_FRAME_ERROR, "FRAME_ERROR", true },
    { 502, AMQP_SYNTAX_ERROR, "SYNTAX_ERROR", true },
    { 503, AMQP_COMMAND_INVALID, "COMMAND_INVALID", true },
    { 504, AMQP_CHANNEL_ERROR, "CHANNEL_ERROR", true },
    { 505, AMQP_UNEXPECTED_FRAME, "UNEXPECTED_FRAME", true },
    { 506, AMQP_RESOURCE_ERROR, "RESOURCE_ERROR", true },
    { 530, AMQP_NOT_ALLOWED, "NOT_ALLOWED", true },
    { 540, AMQP_NOT_IMPLEMENTED, "NOT_IMPLEMENTED", true },
    { 541, AMQP_INTERNAL_ERROR, "INTERNAL_ERROR", true },
};

START_TEST(reply_vectors)
{
    const struct reply_vec *v = &reply_vecs[_i];
    const char *name = reply_name(v->code);

    ck_assert_int_eq(v->constant, v->code);
    ck_assert_msg(name != NULL, "%u has no name", v->code);
    ck_assert_str_eq(name, v->name);
    ck_assert_msg(reply_is_hard(v->code) == v->hard, "%u: hard %d", v->code,
                  reply_is_hard(v->code));
}
END_TEST

/* The generated table holds exactly the codes above, each once. */
START_TEST(reply_table_complete)
{
    ck_assert_uint_eq(reply_info_count, NELEMS(reply_vecs));
    for (size_t i = 0; i < reply_info_count; i++) {
        size_t hits = 0;
        for (size_t j = 0; j < NELEMS(reply_vecs); j++)
            if (reply_infos[i].code == reply_vecs[j].code) {
                hits++;
                ck_assert_str_eq(reply_infos[i].name, reply_vecs[j].name);
                ck_assert(reply_infos[i].hard == reply_vecs[j].hard);
            }
        ck_assert_msg(hits == 1, "code %u in reply_infos %zu times",
                      reply_infos[i].code, hits);
    }
}
END_TEST

static const uint16_t unknown_codes[] = {
    0, 1, 100, 199, 201, 300, 310, 314, 319, 321, 400, 401, 407, 500, 507,
    529, 531, 539, 542, 600, 999, 65535,
};

START_TEST(reply_unknown_vectors)
{
    uint16_t code = unknown_codes[_i];

    ck_assert_msg(reply_name(code) == NULL, "%u has a name", code);
    ck_assert_msg(reply_is_hard(code), "unknown %u must count as hard", code);
}
END_TEST

static Suite *
wire_suite(void)
{
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("load and store");
    tcase_add_loop_test(tc, load_vectors, 0, NELEMS(int_vecs));
    tcase_add_loop_test(tc, store_vectors, 0, NELEMS(int_vecs));
    suite_add_tcase(s, tc);

    tc = tcase_create("read");
    tcase_add_loop_test(tc, get_ints_vectors, 0, NELEMS(int_vecs));
    tcase_add_test(tc, get_mixed_sequence);
    tcase_add_test(tc, get_empty_strings);
    tcase_add_test(tc, get_shortstr_255);
    tcase_add_test(tc, get_raw_zero);
    suite_add_tcase(s, tc);

    tc = tcase_create("read truncation");
    tcase_add_loop_test(tc, get_every_truncation, 0, NELEMS(get_vecs));
    tcase_add_test(tc, get_huge_lengths);
    suite_add_tcase(s, tc);

    tc = tcase_create("write");
    tcase_add_loop_test(tc, put_ints_vectors, 0, NELEMS(int_vecs));
    tcase_add_test(tc, put_strings);
    tcase_add_test(tc, put_shortstr_limit);
    tcase_add_test(tc, put_reserve);
    suite_add_tcase(s, tc);

    tc = tcase_create("write overflow");
    tcase_add_test(tc, put_overflow_accounting);
    tcase_add_test(tc, put_exact_fit);
    tcase_add_test(tc, put_counting_pass);
    tcase_add_test(tc, put_count_wraparound);
    suite_add_tcase(s, tc);

    tc = tcase_create("bytes");
    tcase_add_test(tc, bytes_cstr);
    tcase_add_loop_test(tc, bytes_eq_vectors, 0, NELEMS(eq_vecs));
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_loop_test(tc, status_vectors, 0, NELEMS(status_vecs));
    tcase_add_test(tc, status_table_complete);
    tcase_add_test(tc, status_out_of_range);
    suite_add_tcase(s, tc);

    tc = tcase_create("reply codes");
    tcase_add_loop_test(tc, reply_vectors, 0, NELEMS(reply_vecs));
    tcase_add_test(tc, reply_table_complete);
    tcase_add_loop_test(tc, reply_unknown_vectors, 0, NELEMS(unknown_codes));
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(wire_suite());
}
