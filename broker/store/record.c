/*
 * SPDX-License-Identifier: Apache-2.0
 * Record framing and the buffers records are built in and read from.
 */
#define _GNU_SOURCE
#include "broker/store/record.h"

#include <stdlib.h>
#include <string.h>

#include "broker/lib/util.h"
#include "broker/store/crc32c.h"

static uint32_t
get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

size_t
rec_begin(struct wbuf *b, uint8_t type)
{
    size_t at = b->len;
    wbuf_reserve(b, REC_HDR);
    memset(b->p + at, 0, REC_HDR);
    b->p[at + 8] = type;
    b->len += REC_HDR;
    return at;
}

void
rec_end(struct wbuf *b, size_t at)
{
    uint8_t *h = b->p + at;
    uint32_t len = (uint32_t)(b->len - at - REC_HDR);

    le32_put(h, REC_MAGIC);
    le32_put(h + 4, len);
    uint32_t crc = crc32c(0, h, 12);
    crc = crc32c(crc, h + REC_HDR, len);
    le32_put(h + 12, crc);
}

enum rec_status
rec_read(const uint8_t *p, size_t len, struct rec *out)
{
    static const uint8_t zero[REC_HDR];

    if (len < REC_HDR)
        return REC_END;
    if (memcmp(p, zero, REC_HDR) == 0)
        return REC_END;
    uint32_t plen = get32(p + 4);
    if (get32(p) != REC_MAGIC || plen > REC_MAX || plen > len - REC_HDR ||
        p[9] || p[10] || p[11])
        return REC_BAD;
    uint32_t crc = crc32c(0, p, 12);
    crc = crc32c(crc, p + REC_HDR, plen);
    if (crc != get32(p + 12))
        return REC_BAD;
    out->type = p[8];
    out->payload = p + REC_HDR;
    out->len = plen;
    out->size = REC_HDR + (size_t)plen;
    return REC_OK;
}

size_t
rec_resync(const uint8_t *p, size_t len, size_t from)
{
    static const uint8_t magic[4] = { 'R', 'S', 'R', '1' };
    struct rec r;

    for (size_t off = from + 1; off + REC_HDR <= len; off++) {
        const uint8_t *hit = memmem(p + off, len - off, magic, 4);
        if (hit == NULL)
            break;
        off = (size_t)(hit - p);
        if (rec_read(p + off, len - off, &r) == REC_OK)
            return off;
    }
    return len;
}

size_t
rec_walk(const uint8_t *p, size_t len,
         void (*each)(void *arg, const struct rec *r, size_t off),
         void (*fault)(void *arg, enum rec_fault f, size_t off, size_t n),
         void *arg)
{
    size_t off = 0;
    struct rec r;

    while (off < len) {
        enum rec_status s = rec_read(p + off, len - off, &r);
        if (s == REC_END)
            return off;
        if (s == REC_BAD) {
            size_t next = rec_resync(p, len, off);
            if (fault)
                fault(arg, next == len ? REC_TORN : REC_CORRUPT, off,
                      next - off);
            off = next;
            continue;
        }
        each(arg, &r, off);
        off += r.size;
    }
    return len;
}

void
rbuf_init(struct rbuf *r, const uint8_t *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->bad = false;
}

const uint8_t *
rbuf_bytes(struct rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

uint8_t
rbuf_u8(struct rbuf *r)
{
    const uint8_t *p = rbuf_bytes(r, 1);
    return p ? *p : 0;
}

uint32_t
rbuf_u32(struct rbuf *r)
{
    const uint8_t *p = rbuf_bytes(r, 4);
    return p ? get32(p) : 0;
}

uint64_t
rbuf_u64(struct rbuf *r)
{
    uint64_t lo = rbuf_u32(r);
    return lo | (uint64_t)rbuf_u32(r) << 32;
}

const uint8_t *
rbuf_str(struct rbuf *r, uint32_t *len)
{
    *len = rbuf_u32(r);
    return rbuf_bytes(r, *len);
}
