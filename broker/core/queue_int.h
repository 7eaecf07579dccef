/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Inside the queue types: the ring functions of queue.c that classic
 * and quorum queues share (their ops tables are in queue_classic.c and
 * queue_quorum.c). Nothing outside broker/core/queue*.c includes this.
 */
#ifndef ROOST_BROKER_QUEUE_INT_H
#define ROOST_BROKER_QUEUE_INT_H

#include "broker/core/queue.h"
#include "broker/lib/log.h"

int ring_push(struct queue *q, struct msg *m);
bool ring_take(struct queue *q, struct qentry *out);
void ring_dispatch(struct queue *q);
void ring_ack(struct queue *q, struct qentry e);
void ring_reject(struct queue *q, struct qentry e);
void ring_requeue(struct queue *q, struct qentry e);
void ring_retry(struct queue *q, struct qentry e);
uint32_t ring_purge(struct queue *q);
void ring_info(const struct queue *q, struct queue_info *out);
void ring_restore(struct queue *q, const struct qentry *e, uint8_t priority,
                  uint64_t due);

/* The rings' parts a type's own functions use: append 'm' as a new
 * entry of level 'r' (stored if the store keeps it; no limit applied,
 * nothing dispatched), list the queue for paging when its level 'r' is
 * past the window, and take the next entry out. */
struct qentry *ring_append(struct queue *q, struct qring *r, struct msg *m,
                           uint64_t expires_at);
void ring_maybe_page(struct queue *q, struct qring *r);
bool queue_pop(struct queue *q, struct qentry *out);
/* One more record for pager job 'j' to read (of 'cap' so far): paged
 * entry 'e''s, tagged 'tag'; its size to come. */
struct pager_job;
size_t pager_add_read(struct pager_job *j, size_t *cap,
                      const struct qentry *e, uint64_t tag);

/* Between the rings (queue.c) and paging (queue_paging.c). */
struct qring;
static inline struct qentry *
at(const struct qring *r, size_t i)
{
    return &r->ring[(r->head + i) & (r->cap - 1)];
}
/* the end of an entry's life in 'q', whatever ended it */
void entry_end(struct queue *q, struct qentry e);
/* a log line about 'q' and its message 'm' (NULL: none) */
void queue_log(const struct queue *q, const struct msg *m,
               enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void drop_head(struct queue *q);
void put_back(struct queue *q, struct qentry e);
void entry_left(struct queue *q, struct qring *r, const struct qentry *e);
size_t index_of_seq(const struct qring *r, uint64_t seq);
void page_unlist(struct queue *q);
void page_list(struct queue *q);
void queue_fill(struct queue *q);
void wake_get_waits(struct queue *q, bool gone);

/* The ring functions, for a type's table: .push = ring_push, ... */
#define QUEUE_RING_OPS                                                       \
    .push = ring_push, .take = ring_take, .dispatch = ring_dispatch,         \
    .ack = ring_ack, .reject = ring_reject, .requeue = ring_requeue,         \
    .retry = ring_retry, .purge = ring_purge, .info = ring_info,             \
    .restore = ring_restore

#endif
