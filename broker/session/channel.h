/*
 * SPDX-License-Identifier: Apache-2.0
 * A channel: its frames (methods go to the method table, methods.h),
 * content assembly for publishes,
 * delivery tags and the unacknowledged messages they name, consumers,
 * prefetch limits (basic.qos with RabbitMQ's meaning of 'global') and the
 * close handshake for channel exceptions.
 */
#ifndef ROOST_BROKER_CHANNEL_H
#define ROOST_BROKER_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/method.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/store.h"
#include "broker/lib/hmap.h"
#include "broker/lib/log.h"

struct conn;
struct event;
struct frame;
struct msg;

#define CHANNEL_STATES(X) X(CH_OPEN) X(CH_CLOSING)
enum channel_state {
#define CH_AS_ENUM(s) s,
    CHANNEL_STATES(CH_AS_ENUM)
#undef CH_AS_ENUM
};

#define CONTENT_STATES(X) X(CA_IDLE) X(CA_AWAIT_HEADER) X(CA_AWAIT_BODY)
enum content_state {
#define CA_AS_ENUM(s) s,
    CONTENT_STATES(CA_AS_ENUM)
#undef CA_AS_ENUM
};

/* What a transaction will do with an unacked delivery at commit. */
enum tx_op { TX_NONE, TX_ACK, TX_DROP, TX_REQUEUE };

/* One delivery that waits for its ack. */
struct unacked {
    uint64_t tag;
    uint8_t tx_op;              /* enum tx_op: settled by a pending tx */
    struct qentry e;            /* message, sequence, redelivered */
    struct queue *q;            /* a reference */
    struct consumer *c;         /* a reference; NULL for basic.get */
    uint64_t at;                /* now_ms() when delivered: the consumer
                                 * timeout counts from it */
};

/* A publish in the confirm ring: it waits until store batch 'batch' is
 * durable, or it needed no disk and was 'told' (acked or nacked) alone. */
struct pend_confirm {
    uint64_t seq, batch;
    bool told;
    struct msg *m;              /* waiting for the store: its message */
    struct queue *q;            /* and the first queue that stored it (a
                                 * reference): its confirm latency */
};

/* A publish held by an open transaction. */
struct tx_pub {
    struct msg *m;
    bool mandatory;
};

struct channel {
    struct conn *conn;
    uint16_t number;
    enum channel_state state;
    bool flow_active;
    /* publishing */
    enum content_state content;
    struct amqp_basic_publish pub;  /* strings copied into pub_buf */
    uint8_t pub_buf[512];
    bool pub_mandatory;
    struct msg *pub_msg;
    uint64_t pub_filled;            /* body bytes of pub_msg so far */
    uint64_t pub_charged;           /* of them, told conn_content_grew */
    struct msg_env_cache envs;      /* envelopes its publishes share */
    /* consuming */
    struct hmap consumers;          /* tag -> struct consumer */
    uint32_t prefetch_consumer;     /* qos global=false: for new consumers */
    uint32_t prefetch_channel;      /* qos global=true: shared */
    uint64_t next_tag;
    /* unacked deliveries in tag order: a ring */
    struct unacked *unacked;
    size_t ua_cap, ua_head, ua_len;
    uint32_t ua_live;               /* entries not yet acked */
    /* the consumer timeout: one timer, armed for the deadline of the
     * oldest unacked delivery (channel.c, "The consumer timeout") */
    struct event *cto_timer;        /* created when first needed */
    bool cto_armed;
    /* publisher confirms: every publish gets the next sequence number.
     * Acks go out batched with multiple=true up to the first publish
     * still waiting for the store; a publish that needs no disk behind
     * one that does is acked alone (multiple=false) at once (channel.c,
     * "The confirms of a channel"). */
    bool confirm;
    uint64_t pub_seq;               /* last sequence number assigned */
    uint64_t confirmed;             /* highest sequence number routed */
    uint64_t acked;                 /* every one up to it was told */
    bool confirm_dirty;             /* in the connection's flush list */
    struct pend_confirm *pend;      /* waiting for the store, seq order */
    size_t pend_cap, pend_head, pend_len;
    struct store_waiter store_w;    /* for the first of them */
    /* transactions: publishes and settlements wait for tx.commit */
    bool tx;
    struct tx_pub *tx_pubs;
    size_t tx_npubs, tx_cap;
    uint64_t tx_bytes;
    /* counters (stats.h), read through channel_info; folded into its
     * vhost's when it closes */
    struct msg_stats ms;
    struct stats_series *series;
    /* a basic.get waiting for its queue's head to be read back */
    struct get_wait get_w;
    bool get_no_ack;
    /* the last queue declared, for methods that name no queue */
    char last_queue[256];
    size_t last_queue_len;
    /* direct reply-to (reply_to.c): the reply consumer's tag (NULL:
     * none) and the channel's address */
    char *reply_tag;
    char reply_addr[64];
    /* the last resource a permission allowed (access.c) */
    struct access_memo {
        unsigned epoch;             /* perm_epoch + 1 when it was; 0: none */
        uint8_t kind, res, len;
        char name[255];
    } access_memo;
};

struct channel *channel_new(struct conn *c, uint16_t number);

/* Requeue unacked messages, cancel consumers, free. */
void channel_free(struct channel *ch);

/* The connection is closing: release consumers, requeue unacked
 * messages, and ignore further frames. The connection frees it later. */
void channel_shutdown(struct channel *ch);

/* A content method was taken (methods.c): its header comes next. */
void channel_await_content(struct channel *ch);

/* Handle one frame addressed to this channel (not channel 0). It lies in
 * the connection's current input block (conn_input_block), from which a
 * large body is lent to its message rather than copied. */
void channel_frame(struct channel *ch, const struct frame *f);

/*
 * A channel exception (soft error): send channel.close with 'code' and
 * "NAME - text", requeue, cancel consumers, and ignore everything but
 * close/close-ok until close-ok arrives.
 */
void channel_fail(struct channel *ch, uint16_t code, uint32_t method_id,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* What a queue calls on a consumer of this channel (queue.h). */
extern const struct consumer_ops channel_consumer_ops;

/* ---- read functions (the management API's) ---- */

/* Each consumer of 'ch' that is not cancelled. */
void channel_foreach_consumer(struct channel *ch,
                              void (*fn)(struct consumer *c, void *arg),
                              void *arg);

struct channel_info {
    uint32_t consumers;
    uint32_t unacked;           /* deliveries not yet settled */
    uint64_t unconfirmed;       /* publishes not yet confirmed */
    uint64_t uncommitted;       /* publishes a transaction holds */
    const struct stats_series *series;  /* MS_* rates */
};
void channel_info(const struct channel *ch, struct channel_info *out);

/* Send the publisher confirms that became due (end of a read). */
void channel_flush_confirms(struct channel *ch);

/* Call 'fn' for each delivery the channel holds unacked. */
void channel_foreach_unacked(struct channel *ch,
                             void (*fn)(struct queue *q, struct qentry *e,
                                        void *arg), void *arg);

/* Output drained below the low watermark: retry dispatch for this
 * channel's consumers. */
void channel_resume(struct channel *ch);

#endif
