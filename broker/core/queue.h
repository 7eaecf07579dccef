/*
 * SPDX-License-Identifier: Apache-2.0
 * A queue: an ordered store of message references, its consumers, and the
 * dispatcher that hands messages round-robin to the consumers that have
 * credit. Every message entry carries the sequence number it was enqueued
 * with, so that requeued messages go back to their original position.
 * A priority queue (x-max-priority) keeps one ring of entries for each
 * priority level, and hands out the highest level's first.
 */
#ifndef ROOST_BROKER_QUEUE_H
#define ROOST_BROKER_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "amqp/table.h"
#include "broker/core/exchange.h"
#include "broker/core/qargs.h"
#include "broker/core/stats.h"

struct channel;
struct consumer;
struct conn;
struct msg;
struct vhost;
struct event;

/*
 * One message in one queue. An entry is born by queue_push, is ready in
 * the ring until queue_take hands it to a consumer (it is then held by
 * the channel as unacked), and ends by queue_ack, queue_reject, expiry,
 * x-max-length, purge or the queue's deletion; queue_requeue puts an
 * unacked one back. Each of these is a queue function, and only they
 * tell the store (store/store.h).
 */
struct qentry {
    uint64_t seq;
    uint64_t expires_at : 60;   /* monotonic ms; 0: never */
    uint64_t redelivered : 1;
    uint64_t paged : 1;         /* its message is on disk only: 'pg' */
    uint64_t scratch : 1;       /* paged to the scratch area */
    uint64_t stored : 1;        /* the store keeps it (messages_persistent) */
    union {
        struct msg *m;          /* in memory */
        struct {
            uint32_t seg, off;  /* where its record is (store.h) */
        } pg;
    };
    /* A log's entry (a stream's) in memory uses these two for where
     * its record is in the stream's own log: log_seg is 1 + its
     * segment, 0 until the record is written (its entries are never
     * handed out themselves, so never counted). */
    union {
        uint32_t body_len;      /* paged only (in memory: m->body_len) */
        uint32_t log_seg;
    };
    union {
        uint32_t deliveries;    /* times handed out (survives restarts) */
        uint32_t log_off;
    };
    /* now_ms() when it entered the queue, as 32 bits, as msg->born:
     * here so that a paged entry has it, and kept across restarts (the
     * store's enqueue record has it on the wall clock); 0: not known */
    uint32_t born;
};

/*
 * Paging (docs/storage.md, "Paging"): a queue keeps the first entries,
 * its window, in memory, and lets the others' messages go once they are
 * on disk; the entry stays, 40 bytes, with where its record is and
 * when it entered the queue. Reads
 * bring the messages back ahead of delivery, off the event loop.
 */

/*
 * A queue type, in the way of struct exchange_ops: what a queue of the
 * type accepts at declare and how it keeps its entries. x-queue-type
 * names one. "classic" (queue_classic.c) and "quorum" (queue_quorum.c)
 * keep entries in the same rings (queue.c) and differ in what they
 * accept and what they store; a stream keeps a log instead. The queue
 * functions below (queue_push, queue_take, ...) call the queue's type.
 */
struct qargs;
struct queue_info;
struct queue_ops {
    const char *type;
    /* RabbitMQ's name, in "of queue type T" */
    const char *rabbit_name;
    /* whether its durable queues keep persistent messages in the store */
    bool stores_messages;
    /* and transient ones too (a quorum queue keeps every message) */
    bool stores_transient;
    /* every delivery carries x-delivery-count, limit or not */
    bool counts_deliveries;
    /* the delivery-limit policy key applies (RabbitMQ's, quorum only) */
    bool takes_delivery_limit_policy;
    /* a log (a stream): entries stay after delivery, each consumer
     * reads from its own offset with credit; no basic.get, purge or
     * no-ack, as RabbitMQ's streams (the session refuses them) */
    bool log;
    /* The policy keys it does not take, NULL-terminated (NULL: none):
     * a policy holding any of them does not apply to its queues at all
     * (RabbitMQ 3.10.8's unsupported_policies, is_policy_applicable/2). */
    const char *const *refused_policy_keys;

    /* Declare checks: the first property this type refuses, as
     * RabbitMQ names it in "invalid property 'P' for queue ..."
     * ("non-durable", "exclusive-owner", "auto-delete"), or NULL; the
     * first argument in 'qa' it does not take, or NULL. */
    const char *(*refused_property)(bool durable, bool exclusive,
                                    bool auto_delete);
    const char *(*refused_arg)(const struct qargs *qa);

    /* The life of an entry: documented at queue_push ... below. */
    int (*push)(struct queue *q, struct msg *m);
    bool (*take)(struct queue *q, struct qentry *out);
    void (*dispatch)(struct queue *q);
    void (*ack)(struct queue *q, struct qentry e);
    void (*reject)(struct queue *q, struct qentry e);
    void (*requeue)(struct queue *q, struct qentry e);
    void (*retry)(struct queue *q, struct qentry e);
    uint32_t (*purge)(struct queue *q);
    void (*info)(const struct queue *q, struct queue_info *out);
    void (*restore)(struct queue *q, const struct qentry *e,
                    uint8_t priority, uint64_t due);
    /* Optional: a consumer about to be added, with its basic.consume
     * arguments (c->args, which live as long as it): false refuses it
     * with 'err' (406 PRECONDITION_FAILED); one that leaves. */
    bool (*attach)(struct queue *q, struct consumer *c,
                   struct amqp_table args, char *err, size_t errlen);
    void (*detach)(struct queue *q, struct consumer *c);
    /* Optional: a delivery to consumer 'c' (attached or not) is settled
     * by its client: acked, or dropped by a nack or reject without
     * requeue ('requeue' false), or given back with requeue (nack,
     * reject, recover). Without it, the four calls above. */
    void (*settle_by)(struct queue *q, struct consumer *c, struct qentry e,
                      bool requeue);
    /* Optional: the queue is freed; the type lets go of q->log. */
    void (*release)(struct queue *q);
    /* Optional: what the queue applies changed (queue_set_qargs) from
     * 'was' to q->qa, before the limits act on its entries. */
    void (*reconfigure)(struct queue *q, const struct qargs *was);
};

extern const struct queue_ops queue_classic_ops, queue_quorum_ops,
    queue_stream_ops;

/* The type called 'name', or NULL if Roost has none. */
const struct queue_ops *queue_ops_find(struct amqp_bytes name);

/*
 * What a queue asks of a consumer's owner (the session's channel gives
 * it, channel_consumer_ops): the queue never sees a channel or a
 * connection, only this table and the owner's pointer.
 */
struct consumer;
struct consumer_ops {
    /* it has credit and its connection takes output now */
    bool (*can_take)(const struct consumer *c);
    /* it has credit but its connection's output drains slowly: flow
     * control's test (queue_is_backed_up) */
    bool (*backs_up)(const struct consumer *c);
    /* 'e', taken off 'q', goes to it */
    void (*deliver)(struct consumer *c, struct queue *q, struct qentry e);
    /* its queue went away: it is cancelled (basic.cancel to a client
     * that asked for consumer_cancel_notify) */
    void (*cancelled)(struct consumer *c);
};

struct consumer {
    struct queue *q;
    const struct consumer_ops *ops;
    struct channel *ch;         /* the owner: the queue only passes it on */
    char *tag;
    size_t tag_len;
    bool no_ack;
    bool exclusive;
    bool cancelled;             /* removed from the queue, kept for acks */
    uint32_t prefetch;          /* per-consumer limit; 0 = none */
    int64_t priority;           /* x-priority: higher ones are served first */
    struct amqp_table args;     /* its basic.consume arguments (owned) */
    uint32_t unacked;
    uint32_t refs;              /* the queue's list, each unacked delivery */
    /* a log's reader (queue_stream.c): the offset it reads next, and
     * what it read back from disk */
    uint64_t offset;
    void *reader;
    TAILQ_ENTRY(consumer) q_link;
};
TAILQ_HEAD(consumer_list, consumer);

/* A basic.get that found the head of its queue paged: it runs again
 * once the read is done (the connection reads nothing meanwhile). */
struct get_wait {
    TAILQ_ENTRY(get_wait) link;
    struct queue *q;            /* NULL: not waiting */
    /* 'q' is the queue, or NULL if it was deleted meanwhile */
    void (*ready)(struct get_wait *w, struct queue *q);
};
TAILQ_HEAD(get_wait_list, get_wait);

/*
 * The entries of one priority level, in sequence order, in a ring, with
 * its paging state: a queue without x-max-priority has one level; a
 * priority queue pages each level as its own queue (as RabbitMQ's
 * priority queues do), so each keeps up to a window in memory.
 */
struct qring {
    struct qentry *ring;
    size_t cap, head, len;
    size_t npaged;              /* entries in the ring that are paged */
    size_t mem_head;            /* the first mem_head entries are not */
    uint64_t page_seq;          /* the paging pass goes on from here */
    uint64_t fill_seq;          /* the next read ahead starts here */
    size_t fill_pending;        /* entries the reads in flight read */
    uint8_t filling;            /* read jobs ahead of the head in flight */
};

/* An entry waiting out its requeue delay (x-requeue-delay). */
struct qwait {
    uint64_t due;               /* monotonic ms */
    struct qentry e;
};

struct queue {
    const struct queue_ops *ops;
    char *name;
    size_t name_len;
    struct vhost *vh;
    bool durable, exclusive, auto_delete;
    bool deleted;               /* gone from the vhost; refs keep it */
    struct conn *owner;         /* exclusive queues only */
    uint8_t *args_buf;
    struct amqp_table args;
    struct qargs qa;            /* parsed x-arguments */
    /* TTL and x-expires: one timer, armed for the earliest deadline */
    struct event *timer;
    uint64_t timer_at;
    uint64_t last_used_ms;      /* consumers, get, declare: for x-expires */
    /* messages: 'nlv' priority levels (lv[0] the lowest), each a ring
     * of entries in sequence order; 'top' is the highest non-empty one
     * (0 when all are empty). One level is 'lv0', inside the queue. */
    struct qring *lv;
    uint16_t nlv, top;
    struct qring lv0;
    size_t len;                 /* entries ready, in all levels */
    uint64_t next_seq;
    uint64_t bytes;             /* body bytes queued */
    uint32_t unacked;           /* taken, not yet settled */
    /* consumers */
    struct consumer_list consumers;
    size_t nconsumers;
    bool had_consumer;          /* for auto-delete */
    bool dispatching;
    struct binding_list bindings;   /* bindings that lead here */
    uint64_t epoch;             /* routing de-duplication */
    uint32_t refs;              /* the vhost, unacked deliveries */
    uint32_t sid;               /* the store's id; 0: not on disk */
    bool store_gone;            /* deleted: its records are orphans */
    /* paging */
    size_t npaged;              /* entries paged, in all levels */
    uint64_t page_gen;          /* the pressure the passes were made under */
    bool page_listed;
    TAILQ_ENTRY(queue) page_link;
    struct get_wait_list get_waits; /* basic.get waiting for a read */
    /* x-requeue-delay: entries a nack or reject returned wait here, in a
     * heap by due time, in memory, neither ready nor unacked; then they
     * go back to their place */
    struct qwait *waits;
    size_t nwaits, waits_cap;
    struct event *wait_timer;
    /* counters (stats.h), read through queue_info: message_stats, the
     * messages it let go by reason, its latency histograms (made at its
     * first delivery) and the rates of the last interval */
    struct msg_stats ms;
    uint64_t dead_lettered[DROP_COUNT], dropped[DROP_COUNT];
    uint64_t drop_logged_ms;        /* queue_drop's last line; 0: none */
    uint64_t drops_unlogged;        /* drops since that line */
    uint64_t bytes_unacked;     /* body bytes taken, not yet settled */
    uint64_t bytes_paged;       /* body bytes of the entries paged out */
    uint64_t persistent, bytes_persistent;  /* entries the store keeps */
    struct hist *hist;          /* [HIST_KINDS] */
    struct stats_series *series;
    struct history *history;    /* rate and depth history (history.h) */
    float utilisation;          /* consumer utilisation, sampled */
    void *log;                  /* a log's own state (queue_stream.c) */
};

/* A new queue; it takes over 'qa' (parsed from 'args'). */
struct queue *queue_new(struct vhost *vh, struct amqp_bytes name,
                        bool durable, bool exclusive, bool auto_delete,
                        struct conn *owner, struct amqp_table args,
                        struct qargs *qa);

static inline struct queue *
queue_ref(struct queue *q)
{
    q->refs++;
    return q;
}

void queue_unref(struct queue *q);

/* Append a reference to 'm' and dispatch. -1 if the queue refused it
 * (x-overflow reject-publish at its length limit), 1 if the store took
 * it (persistent, durable queue: a confirm waits for the disk), else 0. */
static inline int
queue_push(struct queue *q, struct msg *m)
{
    return q->ops->push(q, m);
}

/* Read functions (the management API's): messages ready, and taken
 * but not settled. */
static inline uint64_t
queue_ready_count(const struct queue *q)
{
    return q->len;
}

static inline uint64_t
queue_unacked_count(const struct queue *q)
{
    return q->unacked;
}

/* A queue's histogram of 'kind' (HIST_IN_QUEUE, ...), made when first
 * needed. */
void queue_hist_make(struct queue *q);

static inline struct hist *
queue_hist(struct queue *q, int kind)
{
    if (__builtin_expect(q->hist == NULL, 0))
        queue_hist_make(q);
    return &q->hist[kind];
}

/*
 * Count a delivery as 'kind' (MS_DELIVER, MS_DELIVER_NO_ACK, MS_GET,
 * MS_GET_NO_ACK) at 'now' (ms, the clock of msg->born): a first
 * delivery times the message's wait since 'born' (0: not known).
 */
static inline void
queue_count_delivery(struct queue *q, bool redelivered, uint32_t born,
                     int kind, uint64_t now)
{
    q->ms.n[kind]++;
    if (redelivered)
        q->ms.n[MS_REDELIVER]++;
    else if (born)
        hist_observe(queue_hist(q, HIST_IN_QUEUE),
                     (uint32_t)((uint32_t)now - born));
}

/* What the management API and /metrics show of a queue (queue_info). */
struct queue_info {
    uint64_t ready, unacked, waiting, paged, consumers;
    uint64_t bytes_ready, bytes_unacked, bytes_paged;
    uint64_t persistent, bytes_persistent;
    uint64_t memory;            /* bytes it holds beyond its messages' */
    int64_t head_age_ms;        /* the oldest ready message's wait; -1:
                                 * none, or not known (recovered, read
                                 * back from disk) */
    double utilisation;         /* -1: no consumers */
    const struct msg_stats *ms;
    const uint64_t *dead_lettered, *dropped;   /* [DROP_COUNT] */
    const struct hist *hist;    /* [HIST_KINDS] or NULL: none yet */
    const struct stats_series *series;  /* rates: QS_* below */
    const struct history *history;      /* or NULL: none yet */
};

/* The rates a queue's series holds: its message_stats, then these. */
enum { QS_MESSAGES = MS_COUNT, QS_READY, QS_UNACKED, QS_COUNT };

static inline void
queue_info(const struct queue *q, struct queue_info *out)
{
    q->ops->info(q, out);
}

/* Each binding that leads to 'q' (not the default exchange's). */
void queue_foreach_binding(struct queue *q,
                           void (*fn)(const struct binding *b, void *arg),
                           void *arg);

/* Each consumer of 'q', in the order they are served. */
void queue_foreach_consumer(struct queue *q,
                            void (*fn)(struct consumer *c, void *arg),
                            void *arg);

/* The stats tick (stats.c), for one queue. */
void queue_sample(struct queue *q);

/* Messages waiting out their requeue delay (x-requeue-delay). */
static inline uint64_t
queue_waiting_count(const struct queue *q)
{
    return q->nwaits;
}

/* Call 'fn' for each entry waiting out its requeue delay, with when it
 * is due (monotonic ms), in no particular order. */
void queue_foreach_waiting(struct queue *q,
                           void (*fn)(struct queue *q, struct qentry *e,
                                      uint64_t due, void *arg), void *arg);

/* Call 'fn' for each ready entry, in the order they would be handed
 * out. */
void queue_foreach_ready(struct queue *q,
                         void (*fn)(struct queue *q, struct qentry *e,
                                    void *arg), void *arg);

/* A log's (a stream's) entry at 'offset', or NULL if it keeps none
 * there (queue_stream.c): the store's stream logs note where its record
 * is (qentry.log_seg, log_off). */
struct qentry *queue_log_entry(struct queue *q, uint64_t offset);

/* Recovery: append an entry the store rebuilt, in sequence order, at
 * the level of its message's 'priority', taking a new reference to 'm'
 * (or, paged, with its 'pg' and body_len set and no message); not
 * written back to the store. With 'due' (monotonic ms; 0: none) an
 * entry in memory waits out its requeue delay until then. */
static inline void
queue_restore(struct queue *q, const struct qentry *e, uint8_t priority,
              uint64_t due)
{
    q->ops->restore(q, e, priority, due);
}

/* Bytes held by the entries of every queue (their rings), for the
 * memory alarm: a paged backlog still costs 40 bytes a message. */
uint64_t queue_ring_bytes(void);

/* The body bytes of an entry, in memory or paged. */
uint64_t qentry_body_len(const struct qentry *e);

/* How many entries a queue keeps in memory now (paging.window, less
 * under memory pressure). */
size_t queue_window(void);

/* Let queues page: after the store wrote something, or memory pressure
 * changed ('pressure_changed': every queue looks again). */
void queue_pager_kick(bool pressure_changed);

/* Whether the next entry to hand out is paged (a read is under way). */
bool queue_head_paged(const struct queue *q);

/* Wait for the head to be read: 'w->ready' is called then (or when the
 * queue is deleted). */
void queue_get_wait(struct queue *q, struct get_wait *w);
void queue_get_unwait(struct get_wait *w);

/* The store's compaction wants the messages of the entries paged to
 * journal segment 'seg' in memory (it is being emptied): read them,
 * calling 'done' once per read job; returns how many jobs it started. */
size_t queue_page_in_seg(struct queue *q, uint32_t seg, void (*done)(void));

/* Whether publishing to 'q' should pause the publisher (flow control):
 * more is ready than flow_control allows, and a consumer with credit
 * waits only on a slowly draining connection. */
bool queue_is_backed_up(const struct queue *q);

/* The queue was used (declare, get, consume): restarts x-expires. */
void queue_touch(struct queue *q);

/* Replace what the queue applies ('qa', taken over: its arguments with
 * the policies, policy.c) and act on it at once: a lower x-max-length
 * drops (or dead-letters) from the head under drop-head, as RabbitMQ;
 * a new TTL or x-expires re-arms the timer. Messages keep the expiry
 * they were given when they came (RabbitMQ's too), except in a stream,
 * whose max-age counts from each message's append time. */
void queue_set_qargs(struct queue *q, struct qargs *qa);

/* Arm the timer for the next TTL or x-expires deadline. */
void queue_arm(struct queue *q);

/* Drop expired messages at the head (dead-lettering them). */
void queue_expire(struct queue *q);

/* Take the first ready message to hand it out (basic.deliver or
 * basic.get); false if empty. It counts as delivered; the caller owns
 * the entry until it gives it back with queue_ack, queue_reject or
 * queue_requeue. */
static inline bool
queue_take(struct queue *q, struct qentry *out)
{
    return q->ops->take(q, out);
}

/* A taken entry is done with: acknowledged, or delivered with no-ack. */
static inline void
queue_ack(struct queue *q, struct qentry e)
{
    q->ops->ack(q, e);
}

/* A taken entry was rejected (or nacked) without requeue: dead-letter it
 * with reason "rejected" if the queue has a dead-letter exchange, else
 * drop it. */
static inline void
queue_reject(struct queue *q, struct qentry e)
{
    q->ops->reject(q, e);
}

/* Put an entry back at its original position, marked redelivered, and
 * take over its message reference. A deleted queue drops it. Does not
 * dispatch: call queue_dispatch() after a batch. */
static inline void
queue_requeue(struct queue *q, struct qentry e)
{
    q->ops->requeue(q, e);
}

/* The same for an entry a nack or reject returned: with x-requeue-delay
 * it waits first (the store keeps when it is due), then goes back. */
static inline void
queue_retry(struct queue *q, struct qentry e)
{
    q->ops->retry(q, e);
}

/* Drop every ready message, and those waiting out a requeue delay;
 * returns how many. */
static inline uint32_t
queue_purge(struct queue *q)
{
    return q->ops->purge(q);
}

/* Hand ready messages to consumers with credit. */
static inline void
queue_dispatch(struct queue *q)
{
    q->ops->dispatch(q);
}

/* Add a consumer (the caller checked exclusivity); the queue keeps a ref.
 * The list is in priority order, then in order of arrival; a queue with
 * a single active consumer keeps it in order of arrival only. */
void queue_add_consumer(struct queue *q, struct consumer *c);

/* Remove a consumer from the queue. Deletes an auto-delete queue that
 * loses its last consumer (the queue is then marked deleted). */
void queue_remove_consumer(struct queue *q, struct consumer *c);

/* Remove from the vhost, drop messages, unbind, cancel consumers (with
 * basic.cancel to clients that asked for it). */
void queue_delete(struct queue *q);

void consumer_unref(struct consumer *c);

/*
 * Peeking (the management API's browse and search): a snapshot of ready
 * entries in delivery order that changes nothing in the queue - no
 * delivery counted, no redelivered flag, no store record, no entry moved
 * and no message read back into it. Messages in memory are referenced
 * at once; those of paged entries are read by the pager thread into
 * copies of their own (queue_peek_load), so the event loop never waits
 * for the disk. The snapshot does not follow the queue afterwards.
 */
struct queue_peek_entry {
    uint64_t position;          /* 0-based, in delivery order, when taken */
    bool redelivered;
    uint32_t deliveries;
    /* a reference; NULL while a paged one is not read yet, and after
     * its read if it could not be read (its message left meanwhile) */
    struct msg *m;
    struct qentry e;            /* queue.c's: where a paged one's record is */
};

struct queue_peek {
    struct queue_peek_entry *es;
    size_t n;
    uint64_t bytes;             /* body bytes of the n entries */
    /* queue.c's */
    size_t reading;             /* read jobs in flight */
    bool freed;
    void (*done)(struct queue_peek *p, void *arg);
    void *arg;
};

/* The ready entries of 'q' from position 'offset' on, in delivery order:
 * at most 'max', and no more once their bodies reach 'max_bytes' (at
 * least one). Free it with queue_peek_free. */
struct queue_peek *queue_peek_new(struct queue *q, uint64_t offset,
                                  size_t max, uint64_t max_bytes);

/* Read the messages of its paged entries: false if there are none to
 * read; else 'done' is called on the loop thread once every read is
 * back (never from inside this call). */
bool queue_peek_load(struct queue_peek *p,
                     void (*done)(struct queue_peek *p, void *arg),
                     void *arg);

/* Release the snapshot's references. While a load is in flight its
 * reads are dropped when they come back and 'done' is not called. */
void queue_peek_free(struct queue_peek *p);

/*
 * Moving ready entries out of a queue into others (the replay of dead
 * letters, dlreplay.h), one at a time in delivery order, each move one
 * store transaction: the routed copy's enqueue records and the settled
 * record that ends the entry here, so that recovery finds the message
 * here or there, never both, never neither.
 *
 * A cursor remembers which entries the mover passed over (left in
 * place): in each priority level, those below a sequence number.
 */
struct queue_cursor;

/* Where the message of the next entry goes: an exchange of the queue's
 * vhost and a routing key (valid until the call returns), or NULL to
 * leave the entry where it is. */
typedef struct exchange *(*queue_move_fn)(const struct msg *m,
                                          struct amqp_bytes *rkey,
                                          void *arg);

enum queue_move_result {
    QUEUE_MOVED,                /* routed to at least one queue, gone here */
    QUEUE_PASSED,               /* left in place: no target, routed nowhere,
                                 * or every target refused it */
    QUEUE_READING,              /* paged: a read is under way, 'ready' is
                                 * called when it is back */
    QUEUE_NOT_WRITTEN,          /* its record is still being written: try
                                 * again after the next sync (ms) */
    QUEUE_END,                  /* nothing more after the cursor, or the
                                 * queue is deleted */
};

/* A cursor over 'q' that passed nothing yet; 'ready' is called when a
 * read it started (QUEUE_READING) is back. */
struct queue_cursor *queue_cursor_new(struct queue *q,
                                      void (*ready)(void *arg), void *arg);
/* Safe while a read is in flight ('ready' is then never called). */
void queue_cursor_free(struct queue_cursor *c);

/* Move the first ready entry the cursor has not passed, to where 'fn'
 * says. The copy routed keeps the content header and body; it is
 * published to the exchange and routing key 'fn' gives. */
enum queue_move_result queue_move_next(struct queue *q,
                                       struct queue_cursor *c,
                                       queue_move_fn fn, void *arg);

#endif
