/*
 * SPDX-License-Identifier: Apache-2.0
 * Wire primitives of AMQP 0-9-1 (§4.2.5): big-endian integers, short and
 * long strings, and the packing of consecutive bits into shared octets.
 *
 * A reader walks a borrowed byte range and never reads past it: each getter
 * returns AMQP_E_TRUNCATED instead. A writer fills a caller's buffer; when
 * the buffer is too small it keeps counting the bytes it would have written,
 * so that one pass tells the caller the size it needs (wire_wr_overflowed()).
 * Nothing here allocates.
 */
#ifndef ROOST_AMQP_WIRE_H
#define ROOST_AMQP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amqp/status.h"

/* A borrowed byte range: shortstr, longstr, or any slice of input. */
struct amqp_bytes {
    const uint8_t *ptr;
    size_t len;
};

/* The encoded entries of a field table, without their length prefix. */
struct amqp_table {
    const uint8_t *ptr;
    size_t len;
};

/* The encoded values of a field array, without their length prefix. */
struct amqp_array {
    const uint8_t *ptr;
    size_t len;
};

static inline struct amqp_bytes
amqp_cstr(const char *s)
{
    struct amqp_bytes b = { (const uint8_t *)s, s ? strlen(s) : 0 };
    return b;
}

static inline bool
amqp_bytes_eq(struct amqp_bytes a, const char *s)
{
    size_t n = strlen(s);
    return a.len == n && (n == 0 || memcmp(a.ptr, s, n) == 0);
}

static inline uint16_t
wire_load16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t
wire_load32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t
wire_load64(const uint8_t *p)
{
    return (uint64_t)wire_load32(p) << 32 | wire_load32(p + 4);
}

static inline void
wire_store16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void
wire_store32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void
wire_store64(uint8_t *p, uint64_t v)
{
    wire_store32(p, (uint32_t)(v >> 32));
    wire_store32(p + 4, (uint32_t)v);
}

/* ---- reading ---- */

struct wire_rd {
    const uint8_t *buf;
    size_t len;
    size_t off;
};

static inline void
wire_rd_init(struct wire_rd *r, const void *buf, size_t len)
{
    r->buf = buf;
    r->len = len;
    r->off = 0;
}

static inline size_t
wire_rd_left(const struct wire_rd *r)
{
    return r->len - r->off;
}

/* Borrow the next 'n' bytes. */
static inline enum amqp_status
wire_get_raw(struct wire_rd *r, size_t n, const uint8_t **out)
{
    if (n > wire_rd_left(r))
        return AMQP_E_TRUNCATED;
    *out = r->buf + r->off;
    r->off += n;
    return AMQP_OK;
}

static inline enum amqp_status
wire_get_u8(struct wire_rd *r, uint8_t *v)
{
    if (wire_rd_left(r) < 1)
        return AMQP_E_TRUNCATED;
    *v = r->buf[r->off++];
    return AMQP_OK;
}

static inline enum amqp_status
wire_get_u16(struct wire_rd *r, uint16_t *v)
{
    if (wire_rd_left(r) < 2)
        return AMQP_E_TRUNCATED;
    *v = wire_load16(r->buf + r->off);
    r->off += 2;
    return AMQP_OK;
}

static inline enum amqp_status
wire_get_u32(struct wire_rd *r, uint32_t *v)
{
    if (wire_rd_left(r) < 4)
        return AMQP_E_TRUNCATED;
    *v = wire_load32(r->buf + r->off);
    r->off += 4;
    return AMQP_OK;
}

static inline enum amqp_status
wire_get_u64(struct wire_rd *r, uint64_t *v)
{
    if (wire_rd_left(r) < 8)
        return AMQP_E_TRUNCATED;
    *v = wire_load64(r->buf + r->off);
    r->off += 8;
    return AMQP_OK;
}

/* shortstr: one length octet, then up to 255 bytes (§4.2.5.3). */
static inline enum amqp_status
wire_get_shortstr(struct wire_rd *r, struct amqp_bytes *s)
{
    uint8_t n;
    if (wire_get_u8(r, &n) != AMQP_OK)
        return AMQP_E_TRUNCATED;
    s->len = n;
    return wire_get_raw(r, n, &s->ptr);
}

/* longstr: a 32-bit length, then that many bytes. */
static inline enum amqp_status
wire_get_longstr(struct wire_rd *r, struct amqp_bytes *s)
{
    uint32_t n;
    if (wire_get_u32(r, &n) != AMQP_OK)
        return AMQP_E_TRUNCATED;
    s->len = n;
    return wire_get_raw(r, n, &s->ptr);
}

/* ---- writing ---- */

struct wire_wr {
    uint8_t *buf;
    size_t cap;
    size_t len; /* bytes written, or that would have been */
};

static inline void
wire_wr_init(struct wire_wr *w, void *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
}

static inline bool
wire_wr_overflowed(const struct wire_wr *w)
{
    return w->len > w->cap;
}

/* Reserve 'n' bytes; NULL when they do not fit (the count still grows). */
static inline uint8_t *
wire_wr_reserve(struct wire_wr *w, size_t n)
{
    size_t at = w->len;
    w->len += n;
    if (w->len < at) {
        /* Saturate: a count that wrapped would look like room again. */
        w->len = SIZE_MAX;
        return NULL;
    }
    if (w->len > w->cap || w->buf == NULL)
        return NULL;   /* also a sizing pass with no buffer */
    return w->buf + at;
}

static inline void
wire_put_u8(struct wire_wr *w, uint8_t v)
{
    uint8_t *p = wire_wr_reserve(w, 1);
    if (p)
        *p = v;
}

static inline void
wire_put_u16(struct wire_wr *w, uint16_t v)
{
    uint8_t *p = wire_wr_reserve(w, 2);
    if (p)
        wire_store16(p, v);
}

static inline void
wire_put_u32(struct wire_wr *w, uint32_t v)
{
    uint8_t *p = wire_wr_reserve(w, 4);
    if (p)
        wire_store32(p, v);
}

static inline void
wire_put_u64(struct wire_wr *w, uint64_t v)
{
    uint8_t *p = wire_wr_reserve(w, 8);
    if (p)
        wire_store64(p, v);
}

static inline void
wire_put_raw(struct wire_wr *w, const void *src, size_t n)
{
    uint8_t *p = wire_wr_reserve(w, n);
    if (p && n)
        memcpy(p, src, n);
}

/* AMQP_E_VALUE when 's' is longer than 255 bytes; nothing is written then. */
static inline enum amqp_status
wire_put_shortstr(struct wire_wr *w, struct amqp_bytes s)
{
    if (s.len > 255)
        return AMQP_E_VALUE;
    wire_put_u8(w, (uint8_t)s.len);
    wire_put_raw(w, s.ptr, s.len);
    return AMQP_OK;
}

static inline enum amqp_status
wire_put_longstr(struct wire_wr *w, struct amqp_bytes s)
{
    if (s.len > UINT32_MAX)
        return AMQP_E_VALUE;
    wire_put_u32(w, (uint32_t)s.len);
    wire_put_raw(w, s.ptr, s.len);
    return AMQP_OK;
}

#endif
