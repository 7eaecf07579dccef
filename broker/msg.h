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

struct msg {
    uint32_t refs;
    uint32_t alloc_size;        /* of the allocation (msg.c's pool) */
    int64_t ttl;                /* expiration property in ms; -1: none */
    bool persistent;            /* delivery-mode 2 */
    uint8_t priority;
    uint8_t exchange_len;
    uint8_t rkey_len;
    bool body_heap;             /* body is its own allocation */
    uint8_t store_state;        /* the store's (store/store.c) */
    uint32_t hdr_len;           /* encoded content header payload */
    uint32_t store_off;         /* where its record is in store_seg */
    uint64_t body_len;
    uint64_t body_filled;       /* while body frames arrive */
    struct amqp_table headers;  /* borrows the header; empty if absent */
    uint8_t *body;              /* NULL until the first body frame when
                                   msg_new() was told 'body_later' */
    struct inblock *blk;        /* body lies in this input block */
    TAILQ_ENTRY(msg) blk_link;  /* in blk->msgs */
    /* the store (store/store.c): its id on disk (0: none yet), the
     * segment holding its record (with store_off above: in the journal,
     * or in the scratch area for a transient message paged out), the
     * record's size, and the durable queue entries that hold it */
    uint64_t store_id;
    uint32_t store_seg;
    uint32_t store_size;
    uint32_t store_refs;
    /* then, in the same allocation: the exchange name and the routing
     * key, each NUL-terminated, the content header, and a small body
     * (msg_exchange, msg_rkey, msg_hdr) */
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
 * One body frame of 'n' bytes at 'data', which lies in input block 'b':
 * the whole body in one frame is lent by the block (no copy), anything
 * else is copied into the message. The caller checked that it fits.
 */
void msg_body_frame(struct msg *m, struct inblock *b, const uint8_t *data,
                    size_t n);

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
/* Fill a message made with room for its body (msg_new, !body_later). */
void msg_body_copy_in(struct msg *m, const uint8_t *src);

/* Give every message whose body lies in 'b' its own copy (inbuf_compact). */
void msg_unborrow_all(struct inblock *b);

static inline struct msg *
msg_ref(struct msg *m)
{
    m->refs++;
    return m;
}

void msg_unref(struct msg *m);

static inline bool
msg_is_complete(const struct msg *m)
{
    return m->body_filled == m->body_len;
}

/* Free the pool of freed messages (at exit). */
void msg_pool_free(void);

/* Bytes of memory held by messages right now (for alarms and metrics). */
uint64_t msg_bytes_in_use(void);

#endif
