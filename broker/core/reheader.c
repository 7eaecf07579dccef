/*
 * SPDX-License-Identifier: Apache-2.0
 * Re-encoding a content header: two growing buffers, one for the new
 * headers table and one for the header, each written once more when
 * the first pass says how much room it needs.
 */
#include "broker/core/reheader.h"

#include <stdlib.h>

#include "broker/core/msg.h"
#include "broker/lib/util.h"

uint8_t *
reheader(const struct msg *m, reheader_fn fn, void *arg, size_t *len)
{
    return reheader_bytes(msg_hdr(m), msg_hdr_len(m), fn, arg, len);
}

static uint8_t *rewrite(const uint8_t *hdr, size_t hdr_len, reheader_fn fn,
                        void *arg, size_t *len, struct content_header *out);

struct msg *
reheader_copy(const struct msg *m, reheader_fn fn, void *arg,
              const struct amqp_bytes *exchange, const struct amqp_bytes *rkey)
{
    return reheader_copy_header(m, msg_hdr(m), msg_hdr_len(m), fn, arg,
                                exchange, rkey);
}

struct msg *
reheader_copy_header(const struct msg *m, const uint8_t *from,
                     size_t from_len, reheader_fn fn, void *arg,
                     const struct amqp_bytes *exchange,
                     const struct amqp_bytes *rkey)
{
    struct content_header h;
    size_t len;
    uint8_t *hdr = rewrite(from, from_len, fn, arg, &len, &h);

    if (hdr == NULL)
        return NULL;
    struct amqp_bytes rk = { (const uint8_t *)msg_rkey(m), msg_rkey_len(m) };
    struct amqp_bytes xn = { (const uint8_t *)msg_exchange(m),
                             msg_exchange_len(m) };
    struct msg *copy = msg_new(exchange ? *exchange : xn, rkey ? *rkey : rk,
                               hdr, len, &h, false, NULL);
    msg_body_copy_from(copy, m);
    copy->born = m->born;
    free(hdr);
    return copy;
}

uint8_t *
reheader_bytes(const uint8_t *hdr, size_t hdr_len, reheader_fn fn,
               void *arg, size_t *len)
{
    struct content_header check;
    return rewrite(hdr, hdr_len, fn, arg, len, &check);
}

/* reheader_bytes, with the new header's decoding in 'check' (it borrows
 * the result): the check that it decodes is the decoding a copy needs. */
static uint8_t *
rewrite(const uint8_t *hdr, size_t hdr_len, reheader_fn fn, void *arg,
        size_t *len, struct content_header *check)
{
    struct content_header h;
    struct wire_wr w;
    size_t cap = hdr_len + 256;
    uint8_t *table = NULL, *out = NULL;
    bool had_headers;

    for (;;) {
        /* Decoded anew each pass: 'fn' may have changed the properties. */
        if (content_header_decode(hdr, hdr_len, &h) != AMQP_OK)
            goto fail;   /* cannot happen: it was checked at publish */
        had_headers = h.props.flags & AMQP_BASIC_HEADERS_FLAG;
        table = xrealloc(table, cap);
        wire_wr_init(&w, table, cap);
        if (!fn(&w, &h, arg))
            goto fail;
        if (!wire_wr_overflowed(&w))
            break;
        cap = w.len;
    }
    /* 'table' holds a length-prefixed table: point the headers at it. */
    h.props.headers.ptr = table + 4;
    h.props.headers.len = w.len - 4;
    /* No headers before and none now: none, not an empty table. */
    if (had_headers || w.len > 4)
        h.props.flags |= AMQP_BASIC_HEADERS_FLAG;
    size_t ocap = hdr_len + w.len + 64;
    for (;;) {
        out = xrealloc(out, ocap);
        wire_wr_init(&w, out, ocap);
        enum amqp_status st = content_header_encode(&h, &w);
        if (st == AMQP_OK)
            break;
        if (st != AMQP_E_OVERFLOW)
            goto fail;
        ocap = w.len;
    }
    /* What the codec would refuse to read (a table over 16 MiB), no one
     * is sent. */
    if (content_header_decode(out, w.len, check) != AMQP_OK ||
        check->body_size != h.body_size)
        goto fail;
    free(table);
    *len = w.len;
    return out;
fail:
    free(table);
    free(out);
    return NULL;
}
