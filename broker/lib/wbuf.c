/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The growable byte buffer (wbuf.h).
 */
#include "broker/lib/wbuf.h"

#include <stdlib.h>
#include <string.h>

#include "broker/lib/util.h"

void
le32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

void
wbuf_reserve(struct wbuf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap < b->len + more)
        ncap *= 2;
    b->p = xrealloc(b->p, ncap);
    b->cap = ncap;
}

void
wbuf_free(struct wbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void
wbuf_bytes(struct wbuf *b, const void *p, size_t n)
{
    wbuf_reserve(b, n);
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

void
wbuf_u8(struct wbuf *b, uint8_t v)
{
    wbuf_bytes(b, &v, 1);
}

void
wbuf_u32(struct wbuf *b, uint32_t v)
{
    uint8_t t[4];
    le32_put(t, v);
    wbuf_bytes(b, t, 4);
}

void
wbuf_u64(struct wbuf *b, uint64_t v)
{
    wbuf_u32(b, (uint32_t)v);
    wbuf_u32(b, (uint32_t)(v >> 32));
}

void
wbuf_str(struct wbuf *b, const void *p, size_t n)
{
    wbuf_u32(b, (uint32_t)n);
    wbuf_bytes(b, p, n);
}
