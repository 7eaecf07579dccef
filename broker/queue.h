/*
 * A queue: an ordered store of message references, its consumers, and the
 * dispatcher that hands messages round-robin to the consumers that have
 * credit. Every message entry carries the sequence number it was enqueued
 * with, so that requeued messages go back to their original position.
 */
#ifndef ROOST_BROKER_QUEUE_H
#define ROOST_BROKER_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "amqp/table.h"
#include "broker/exchange.h"
#include "broker/qargs.h"

struct channel;
struct conn;
struct msg;
struct vhost;
struct event;

struct qentry {
    struct msg *m;
    uint64_t seq;
    uint64_t expires_at;        /* monotonic ms; 0: never */
    bool redelivered;
};

struct consumer {
    struct queue *q;
    struct channel *ch;
    char *tag;
    size_t tag_len;
    bool no_ack;
    bool exclusive;
    bool cancelled;             /* removed from the queue, kept for acks */
    uint32_t prefetch;          /* per-consumer limit; 0 = none */
    uint32_t unacked;
    uint32_t refs;              /* the queue's list, each unacked delivery */
    TAILQ_ENTRY(consumer) q_link;
};
TAILQ_HEAD(consumer_list, consumer);

struct queue {
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
    /* messages: a ring of entries in sequence order */
    struct qentry *ring;
    size_t cap, head, len;
    uint64_t next_seq;
    uint64_t bytes;             /* body bytes queued */
    /* consumers */
    struct consumer_list consumers;
    size_t nconsumers;
    bool had_consumer;          /* for auto-delete */
    bool dispatching;
    struct binding_list bindings;   /* bindings that lead here */
    uint64_t epoch;             /* routing de-duplication */
    uint32_t refs;              /* the vhost, unacked deliveries */
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

/* Append a reference to 'm' and dispatch. False if the queue refused it
 * (x-overflow reject-publish at its length limit). */
bool queue_push(struct queue *q, struct msg *m);

/* Whether publishing to 'q' should pause the publisher (flow control):
 * more is ready than flow_control allows, and a consumer with credit
 * waits only on a slowly draining connection. */
bool queue_is_backed_up(const struct queue *q);

/* The queue was used (declare, get, consume): restarts x-expires. */
void queue_touch(struct queue *q);

/* Arm the timer for the next TTL or x-expires deadline. */
void queue_arm(struct queue *q);

/* Drop expired messages at the head (dead-lettering them). */
void queue_expire(struct queue *q);

/* Give up 'm' (a reference the caller owned) with 'reason' "rejected",
 * "expired" or "maxlen": republish it through the queue's dead-letter
 * exchange if it has one, else drop it. */
void queue_dead_letter(struct queue *q, struct msg *m, const char *reason);

/* Put an entry back at its original position, marked redelivered, and
 * take over its message reference. A deleted queue drops it. Does not
 * dispatch: call queue_dispatch() after a batch. */
void queue_requeue(struct queue *q, struct qentry e);

/* Take the first message; false if empty. */
bool queue_pop(struct queue *q, struct qentry *out);

/* Drop every ready message; returns how many. */
uint32_t queue_purge(struct queue *q);

/* Hand ready messages to consumers with credit. */
void queue_dispatch(struct queue *q);

/* Add a consumer (the caller checked exclusivity); the queue keeps a ref. */
void queue_add_consumer(struct queue *q, struct consumer *c);

/* Remove a consumer from the queue. Deletes an auto-delete queue that
 * loses its last consumer (the queue is then marked deleted). */
void queue_remove_consumer(struct queue *q, struct consumer *c);

/* Remove from the vhost, drop messages, unbind, cancel consumers (with
 * basic.cancel to clients that asked for it). */
void queue_delete(struct queue *q);

void consumer_unref(struct consumer *c);

#endif
