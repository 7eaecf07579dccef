/*
 * Messages live in one allocation: the struct, the exchange name, the
 * routing key, the content header and, unless it is lent by an input
 * block or too large for one frame, the body.
 */
#include "broker/msg.h"

#include <stdlib.h>
#include <string.h>

#include "amqp/props.h"
#include "broker/qargs.h"
#include "broker/util.h"

static uint64_t bytes_in_use;

struct msg *
msg_new(struct amqp_bytes exchange, struct amqp_bytes rkey,
        const uint8_t *hdr, size_t hdr_len, uint64_t body_len,
        bool body_later)
{
    size_t size = sizeof(struct msg) + exchange.len + 1 + rkey.len + 1 +
                  hdr_len + (body_later ? 0 : (size_t)body_len);
    struct msg *m = xmalloc(size);
    char *p = (char *)(m + 1);
    struct content_header ch;

    memset(m, 0, sizeof(*m));
    m->refs = 1;
    m->exchange = p;
    memcpy(p, exchange.ptr, exchange.len);
    p[exchange.len] = '\0';
    m->exchange_len = (uint8_t)exchange.len;
    p += exchange.len + 1;
    m->rkey = p;
    memcpy(p, rkey.ptr, rkey.len);
    p[rkey.len] = '\0';
    m->rkey_len = (uint8_t)rkey.len;
    p += rkey.len + 1;
    m->hdr = (uint8_t *)p;
    memcpy(m->hdr, hdr, hdr_len);
    m->hdr_len = (uint32_t)hdr_len;
    m->body = body_later ? NULL : m->hdr + hdr_len;
    m->body_len = body_len;
    /* The caller decoded this header already; decoding the copy again
     * points 'headers' into memory the message owns. */
    m->ttl = -1;
    if (content_header_decode(m->hdr, hdr_len, &ch) == AMQP_OK) {
        if (ch.props.flags & AMQP_BASIC_EXPIRATION_FLAG) {
            int64_t ttl = qargs_parse_expiration(ch.props.expiration);
            m->ttl = ttl >= 0 ? ttl : -1;
        }
        if (ch.props.flags & AMQP_BASIC_HEADERS_FLAG)
            m->headers = ch.props.headers;
        if (ch.props.flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
            m->persistent = ch.props.delivery_mode == 2;
        if (ch.props.flags & AMQP_BASIC_PRIORITY_FLAG)
            m->priority = ch.props.priority;
    }
    bytes_in_use += size;
    return m;
}

void
msg_borrow_body(struct msg *m, struct inblock *b, const uint8_t *body)
{
    m->blk = inblock_ref(b);
    m->body = (uint8_t *)body;
    TAILQ_INSERT_TAIL(&b->msgs, m, blk_link);
    b->pinned += m->body_len;
}

void
msg_body_alloc(struct msg *m)
{
    m->body = xmalloc(m->body_len);
    m->body_heap = true;
    bytes_in_use += m->body_len;
}

/* Stop borrowing: drop the hold on the block (which may free it). */
static void
unborrow(struct msg *m)
{
    struct inblock *b = m->blk;

    TAILQ_REMOVE(&b->msgs, m, blk_link);
    b->pinned -= m->body_len;
    m->blk = NULL;
    inblock_unref(b);
}

void
msg_unborrow_all(struct inblock *b)
{
    struct msg *m;

    inblock_ref(b);
    while ((m = TAILQ_FIRST(&b->msgs)) != NULL) {
        const uint8_t *lent = m->body;
        msg_body_alloc(m);
        memcpy(m->body, lent, m->body_len);
        unborrow(m);
    }
    inblock_unref(b);
}

void
msg_unref(struct msg *m)
{
    if (m == NULL || --m->refs > 0)
        return;
    bytes_in_use -= sizeof(struct msg) + m->exchange_len + 1u + m->rkey_len +
                    1u + m->hdr_len;
    if (m->blk != NULL) {
        unborrow(m);
    } else if (m->body_heap) {
        bytes_in_use -= m->body_len;
        free(m->body);
    } else if (m->body != NULL) {
        bytes_in_use -= m->body_len;  /* inside the allocation */
    }
    free(m);
}

uint64_t
msg_bytes_in_use(void)
{
    return bytes_in_use;
}
