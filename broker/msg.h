/*
 * A published message: immutable once complete, reference-counted, shared
 * by every queue it reaches. It keeps the content header exactly as the
 * publisher encoded it and the body bytes as they arrived, so delivery
 * forwards them without re-encoding; large bodies are sent by reference.
 *
 * The body is in one of three places: inside the message's own allocation
 * (small bodies), in a separate allocation (a large body that arrived in
 * several frames), or in the connection input block it was read into (a
 * large body that arrived in one frame: msg_borrow_body, see inbuf.h).
 * The struct is 64 bytes; a body outside it costs a struct msg_ext more.
 */
#ifndef ROOST_BROKER_MSG_H
#define ROOST_BROKER_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "amqp/props.h"
#include "amqp/table.h"
#include "amqp/wire.h"
#include "broker/inbuf.h"

/* Where a body is (msg.c's business alone). */
enum msg_body { MSG_BODY_INLINE, MSG_BODY_NONE, MSG_BODY_HEAP, MSG_BODY_LENT };

struct msg {
    uint32_t refs;
    uint32_t hdr_len;           /* encoded content header payload */
    uint64_t body_len;
    int64_t ttl;                /* expiration property in ms; -1: none */
    bool persistent;            /* delivery-mode 2 */
    uint8_t priority;
    uint8_t exchange_len;
    uint8_t rkey_len;
    uint8_t body_at;            /* enum msg_body */
    uint8_t store_state;        /* the store's (store/store.c) */
    uint16_t pool_class;        /* msg.c's pool; 0: not pooled */
    /* the headers table, inside the content header (0, 0: none) */
    uint32_t headers_off, headers_len;
    /* the store (store/store.c): its id on disk (0: none yet), the
     * segment holding its record (in the journal, or in the scratch
     * area for a transient message paged out) and where in it, the
     * record's size, and the durable queue entries that hold it */
    uint32_t store_off, store_seg, store_size, store_refs;
    uint64_t store_id;
    /* then, in the same allocation: the exchange name and the routing
     * key, each NUL-terminated, the content header, and either a small
     * body or, for one that arrives later (msg_new's 'body_later'), a
     * struct msg_ext saying where it is (msg_exchange, msg_rkey,
     * msg_hdr) */
};

/* Where a body that is not inside the message is: its own allocation,
 * or lent by an input block (and listed in it). */
struct msg_ext {
    uint8_t *body;
    struct inblock *blk;
    TAILQ_ENTRY(msg_ext) blk_link;  /* in blk->msgs */
    struct msg *m;
};

/* The exchange name and routing key of the publish, NUL-terminated, and
 * the encoded content header: all inside the message's allocation. */
static inline char *
msg_exchange(const struct msg *m)
{
    return (char *)(m + 1);
}

static inline char *
msg_rkey(const struct msg *m)
{
    return msg_exchange(m) + m->exchange_len + 1;
}

static inline uint8_t *
msg_hdr(const struct msg *m)
{
    return (uint8_t *)(msg_rkey(m) + m->rkey_len + 1);
}

/* The headers table of its properties (empty if there is none). */
static inline struct amqp_table
msg_headers(const struct msg *m)
{
    struct amqp_table t = { msg_hdr(m) + m->headers_off, m->headers_len };
    return t;
}

/*
 * A message with a copy of the publish's exchange and routing key and of
 * the encoded content header 'hdr', which 'ch' is the decoding of, for
 * ch->body_size bytes of body still to arrive. The body's space is part of the allocation, unless
 * 'body_later': then the first body frame either lends the body
 * (msg_borrow_body) or makes room for it (msg_body_alloc). Returns a new
 * reference (refs == 1).
 */
struct msg *msg_new(struct amqp_bytes exchange, struct amqp_bytes rkey,
                    const uint8_t *hdr, size_t hdr_len,
                    const struct content_header *ch, bool body_later);

/* The whole body is at 'body' inside input block 'b': point at it and
 * hold 'b' (no copy). */
void msg_borrow_body(struct msg *m, struct inblock *b, const uint8_t *body);

/* Room for the body in its own allocation (body_later, body not lent). */
void msg_body_alloc(struct msg *m);

/*
 * One body frame of 'n' bytes at 'data', which lies in input block 'b',
 * the 'filled' bytes before it already given: the whole body in one
 * frame is lent by the block (no copy), anything else is copied into
 * the message. The caller checked that it fits, and knows the message
 * is complete once filled + n is body_len.
 */
void msg_body_frame(struct msg *m, struct inblock *b, const uint8_t *data,
                    size_t n, uint64_t filled);

/*
 * Where the body lives is msg.c's business alone: these are the only
 * ways to its bytes. msg_body_out appends bytes [off, off + n) to a
 * connection's output (copied when small, else referenced: the output
 * holds the message or its input block until written); msg_body_copy
 * copies the whole body to 'dst'.
 */
struct conn;
void msg_body_out(struct msg *m, struct conn *c, uint64_t off, size_t n);
void msg_body_copy(const struct msg *m, uint8_t *dst);
/* Fill a message made with room for its body (msg_new, !body_later),
 * from 'src' or from the body of 'from'. */
void msg_body_copy_in(struct msg *m, const uint8_t *src);
void msg_body_copy_from(struct msg *m, const struct msg *from);

/* Give every message whose body lies in 'b' its own copy (inbuf_compact). */
void msg_unborrow_all(struct inblock *b);

static inline struct msg *
msg_ref(struct msg *m)
{
    m->refs++;
    return m;
}

void msg_unref(struct msg *m);

/* Free the pool of freed messages (at exit). */
void msg_pool_free(void);

/* Bytes of memory held by messages right now (for alarms and metrics). */
uint64_t msg_bytes_in_use(void);

#endif
