/*
 * SPDX-License-Identifier: Apache-2.0
 * A published message: immutable once complete, reference-counted, shared
 * by every queue it reaches. It keeps the content header exactly as the
 * publisher encoded it and the body bytes as they arrived, so delivery
 * forwards them without re-encoding; large bodies are sent by reference.
 *
 * The body is in one of three places: inside the message's own allocation
 * (small bodies), in a separate allocation (a large body that arrived in
 * several frames), or in the connection input block it was read into (a
 * large body that arrived in one frame: msg_borrow_body, see inbuf.h).
 * The exchange name, the routing key and the content header make the
 * message's envelope (struct msg_env). A publisher that sends the same
 * envelope twice in a row shares one between its messages (struct
 * msg_env_cache); any other message carries its own, inside its
 * allocation. The struct is 32 bytes, the envelope header 32; a body
 * outside the message costs a struct msg_ext more.
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
#include "broker/core/inbuf.h"

/* The largest body a message holds (max_message_size's upper bound). */
#define MSG_BODY_MAX (512u * 1024 * 1024)

/* Where a body is (msg.c's business alone). */
enum msg_body { MSG_BODY_INLINE, MSG_BODY_NONE, MSG_BODY_HEAP, MSG_BODY_LENT };

/*
 * The publish's exchange name and routing key, each NUL-terminated, and
 * its encoded content header, after this struct in the same allocation,
 * with what the broker reads from the header. Immutable; shared by the
 * messages of a publisher that repeats it (refs counts them), or inside
 * a single message's allocation (refs unused).
 */
struct msg_env {
    uint32_t refs;
    uint32_t hdr_len;           /* encoded content header payload */
    int64_t ttl;                /* expiration property in ms; -1: none */
    /* the headers table, inside the content header (0, 0: none) */
    uint32_t headers_off, headers_len;
    uint8_t exchange_len;
    uint8_t rkey_len;
    bool persistent;            /* delivery-mode 2 */
    uint8_t priority;
    bool cc_bcc;                /* its headers have CC or BCC */
    uint8_t unused[3];
};

/* The store's record of a message: the store's own type (for the
 * journal, store/store.c's: its id on disk, its state, where its record
 * is, the durable entries that hold it). */
struct store_rec;

struct msg {
    uint32_t refs;
    uint32_t body_len;          /* at most MSG_BODY_MAX */
    struct msg_env *env;        /* shared, or right after the struct */
    uint8_t body_at;            /* enum msg_body */
    uint8_t unused[3];
    /* now_ms() when it was published (or recovered, or read back), as
     * 32 bits: for time in queue and confirm latency (stats.h) */
    uint32_t born;
    /*
     * The store's record of it, or NULL while the store has none (every
     * transient message that is not paged, so the hot path never makes
     * one). The store's fields live there, not here; this pointer
     * stays, because the store must reach its record from the message
     * in O(1) on every call about it (enqueue, settle, page, free), and
     * a table keyed by message would cost a lookup on each of those and
     * on every message freed. The store makes it, and frees it when the
     * message goes (store_msg_freed).
     */
    struct store_rec *srec;
    /* then, in the same allocation: the envelope unless it is shared,
     * and either a small body or, for one that arrives later (msg_new's
     * 'body_later'), a struct msg_ext saying where it is */
};

/* Where a body that is not inside the message is: its own allocation,
 * or lent by an input block (and listed in it). */
struct msg_ext {
    uint8_t *body;
    uint32_t cap;               /* MSG_BODY_HEAP: bytes allocated, grown
                                 * as the body's frames arrive */
    struct inblock *blk;
    TAILQ_ENTRY(msg_ext) blk_link;  /* in blk->msgs */
    struct msg *m;
};

/*
 * A publisher's memory of its last envelope, so that a run of messages
 * with the same one shares it: the shared envelope of its last publish
 * (a reference) or the bytes of the last one it saw (up to
 * MSG_ENV_CACHE_MAX; a longer one is not remembered). Zeroed to start;
 * msg_env_cache_clear at the end.
 */
#define MSG_ENV_CACHE_MAX 512

struct msg_env_cache {
    struct msg_env *env;
    uint8_t *last;              /* exchange, rkey, hdr, back to back */
    uint32_t last_ex, last_rk, last_hdr;
    bool have_last;
};

void msg_env_cache_clear(struct msg_env_cache *c);

/* The exchange name and routing key of the publish, NUL-terminated, and
 * the encoded content header. */
static inline char *
msg_exchange(const struct msg *m)
{
    return (char *)(m->env + 1);
}

static inline size_t
msg_exchange_len(const struct msg *m)
{
    return m->env->exchange_len;
}

static inline char *
msg_rkey(const struct msg *m)
{
    return msg_exchange(m) + m->env->exchange_len + 1;
}

static inline size_t
msg_rkey_len(const struct msg *m)
{
    return m->env->rkey_len;
}

static inline uint8_t *
msg_hdr(const struct msg *m)
{
    return (uint8_t *)(msg_rkey(m) + m->env->rkey_len + 1);
}

static inline size_t
msg_hdr_len(const struct msg *m)
{
    return m->env->hdr_len;
}

/* The expiration property in ms (-1: none). */
static inline int64_t
msg_ttl(const struct msg *m)
{
    return m->env->ttl;
}

/* Delivery-mode 2. */
static inline bool
msg_persistent(const struct msg *m)
{
    return m->env->persistent;
}

/* Whether its headers name more routing keys (CC, BCC): the sender-
 * selected distribution's slow path (handle_basic.c). */
static inline bool
msg_cc_bcc(const struct msg *m)
{
    return m->env->cc_bcc;
}

/* The headers table of its properties (empty if there is none). */
static inline struct amqp_table
msg_headers(const struct msg *m)
{
    struct amqp_table t = { msg_hdr(m) + m->env->headers_off,
                            m->env->headers_len };
    return t;
}

/*
 * A message with the publish's exchange and routing key and the encoded
 * content header 'hdr', which 'ch' is the decoding of, for ch->body_size
 * bytes of body still to arrive (at most MSG_BODY_MAX). The envelope is
 * shared with the last message made through 'cache' if it is the same
 * (a NULL 'cache' shares nothing). The body's space is part of the
 * allocation, unless 'body_later': then the first body frame either
 * lends the body (msg_borrow_body: the whole body in that frame) or
 * starts the body's own allocation, which grows in steps as the frames
 * arrive (msg_body_reserve), charged to the memory figure only as it
 * grows. Returns a new reference (refs == 1).
 */
struct msg *msg_new(struct amqp_bytes exchange, struct amqp_bytes rkey,
                    const uint8_t *hdr, size_t hdr_len,
                    const struct content_header *ch, bool body_later,
                    struct msg_env_cache *cache);

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
 * ways to its bytes. msg_body_out appends bytes [off, off + n) to 'out'
 * when they are few (copied); more are handed to 'lend' with 'arg',
 * which appends them by reference holding what they live in: input
 * block 'b' for a body lent by its block, else message 'm' (the session's
 * output counts what it pins, and counts a referenced body's bytes not
 * as its own memory: the block or message already does). msg_body_copy
 * copies the whole body to 'dst'.
 */
struct evbuffer;
typedef void msg_lend_fn(void *arg, const uint8_t *data, size_t len,
                         struct inblock *b, struct msg *m);
void msg_body_out(struct msg *m, struct evbuffer *out, uint64_t off,
                  size_t n, msg_lend_fn *lend, void *arg);
void msg_body_copy(const struct msg *m, uint8_t *dst);
/* Fill a message made with room for its body (msg_new, !body_later),
 * from 'src' or from the body of 'from'. */
void msg_body_copy_in(struct msg *m, const uint8_t *src);
void msg_body_copy_from(struct msg *m, const struct msg *from);

/* A copy of 'm' (content header and body) as if published to 'exchange'
 * with 'rkey': a new reference. */
struct msg *msg_copy_as(const struct msg *m, struct amqp_bytes exchange,
                        struct amqp_bytes rkey);

/* Give every message whose body lies in 'b' its own copy (inbuf_compact). */
void msg_unborrow_all(struct inblock *b);

/* Its message-id property escaped for a log line (log_escape) into
 * 'out' of 'cap' bytes, or NULL if it has none. */
const char *msg_log_id(const struct msg *m, char *out, size_t cap);

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
