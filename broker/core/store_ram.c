/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The RAM store (store.h): keeps nothing anywhere, pages nothing, and
 * holds what a durable queue would have written until store_ram_sync
 * says the "disk" has it, so that a unit test drives the core, confirms
 * included, without a data directory. It is also the store in use
 * before an implementation is opened; it keeps a queue's messages only
 * once opened (store_ram_open), as the journal does. And what every
 * store shares: the freeing of a read job (pager_read_free).
 */
#include "broker/core/store.h"

#include <errno.h>
#include <stdlib.h>

#include "broker/core/defs.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"

static struct {
    uint64_t open_batch, durable_batch;
    bool pending, in_tx, tx_wrote;
    uint32_t next_qid;
    TAILQ_HEAD(, store_waiter) waiters;
} ram = {
    .open_batch = 1,
    .next_qid = 1,
    .waiters = TAILQ_HEAD_INITIALIZER(ram.waiters),
};

const struct store_ops *store_impl = &store_ram_ops;

void
store_use(const struct store_ops *ops)
{
    store_impl = ops;
}

static bool
ram_queue_is_durable(const struct queue *q)
{
    return q->durable;
}

static bool
ram_enqueue(struct queue *q, const struct qentry *e)
{
    if (!q->durable || !q->ops->stores_messages ||
        !(msg_persistent(e->m) || q->ops->stores_transient))
        return false;
    ram.pending = true;
    ram.tx_wrote |= ram.in_tx;
    return true;
}

static void
ram_unwait(struct store_waiter *w)
{
    if (!w->waiting)
        return;
    TAILQ_REMOVE(&ram.waiters, w, link);
    w->waiting = false;
}

static void
ram_wait(struct store_waiter *w, uint64_t batch)
{
    ram_unwait(w);
    w->batch = batch;
    if (batch <= ram.durable_batch) {
        w->durable(w);
        return;
    }
    w->waiting = true;
    TAILQ_INSERT_TAIL(&ram.waiters, w, link);
}

/* Every waiter at or below the durable batch, in the order they came. */
static void
wake(void)
{
    struct store_waiter *w, *next;
    for (w = TAILQ_FIRST(&ram.waiters); w != NULL; w = next) {
        next = TAILQ_NEXT(w, link);
        if (w->batch <= ram.durable_batch) {
            ram_unwait(w);
            w->durable(w);
        }
    }
}

void
store_ram_sync(void)
{
    ram.durable_batch = ram.open_batch++;
    ram.pending = false;
    wake();
}

/* A queue the store keeps gets an id when it is added, as the journal
 * numbers them (queue.c asks the store only about queues with one). */
static void
ram_defs_changed(enum defs_event ev, const void *obj, void *arg)
{
    (void)arg;
    if (ev != DEFS_QUEUE_ADDED)
        return;
    struct queue *q = (struct queue *)obj;
    if (q->durable && !q->exclusive && q->sid == 0)
        q->sid = ram.next_qid++;
}

void
store_ram_open(void)
{
    store_use(&store_ram_ops);
    defs_listen(ram_defs_changed, NULL);
}

static void
ram_close(void)
{
    defs_unlisten(ram_defs_changed, NULL);
    store_ram_sync();
}

static void
ram_tx_begin(void)
{
    ram.in_tx = true;
    ram.tx_wrote = false;
}

static bool
ram_tx_end(void)
{
    ram.in_tx = false;
    return ram.tx_wrote;
}

static uint64_t
ram_open_batch(void)
{
    return ram.open_batch;
}

static uint64_t
ram_durable_batch(void)
{
    return ram.durable_batch;
}

static bool
ram_has_pending(void)
{
    return ram.pending;
}

/* ---- what the RAM store does not do ---- */

static bool
ram_false(void)
{
    return false;
}

static uint64_t
ram_zero(void)
{
    return 0;
}

static void
ram_nothing(void)
{
}

static bool
ram_msg_unneeded(const struct msg *m)
{
    (void)m;
    return false;
}

static void
ram_entry(struct queue *q, const struct qentry *e)
{
    (void)q;
    (void)e;
}

static void
ram_retry_wait(struct queue *q, const struct qentry *e, uint64_t delay)
{
    (void)q;
    (void)e;
    (void)delay;
}

static bool
ram_page_out(struct queue *q, struct qentry *e)
{
    (void)q;
    (void)e;
    return false;
}

static int
ram_page_prepare(struct queue *q, struct qentry *e, bool pressure)
{
    (void)q;
    (void)e;
    (void)pressure;
    return 0;
}

static struct msg *
ram_page_decode(const struct qentry *e, const struct pager_read *r)
{
    (void)e;
    (void)r;
    return NULL;
}

static void
ram_page_in(struct queue *q, struct qentry *e, struct msg *m)
{
    (void)q;
    (void)e;
    (void)m;
}

static void
ram_msg_freed(struct msg *m)
{
    (void)m;
}

static bool
ram_delay_hold(uint32_t sid, uint64_t seq, struct msg *m, uint64_t due)
{
    (void)sid;
    (void)seq;
    (void)m;
    (void)due;
    return false;
}

static bool
ram_delay_ready(const struct msg *m)
{
    (void)m;
    return true;
}

static void
ram_delay_release(uint32_t sid, uint64_t seq, struct msg *m, bool routed)
{
    (void)sid;
    (void)seq;
    (void)m;
    (void)routed;
}

static void
ram_queue_gone(struct queue *q)
{
    (void)q;
}

static void
ram_get_stats(struct store_stats *s)
{
    *s = (struct store_stats){ 0 };
}

static int
ram_recover(void)
{
    return 0;
}

/* The RAM store pages nothing, so nothing asks it to read: a job that
 * came anyway fails at once, each read with ENODATA. */
static void
ram_read_submit(struct pager_job *j)
{
    for (size_t i = 0; i < j->nreads; i++)
        j->reads[i].err = ENODATA;
    j->done(j);
}

/* Every store's read jobs are freed the same way (store.h). */
void
pager_read_free(struct pager_job *j)
{
    for (size_t i = 0; i < j->nreads; i++)
        if (!j->reads[i].shared)
            free(j->reads[i].buf);
    for (size_t i = 0; i < j->nextents; i++)
        free(j->extents[i]);
    free(j->extents);
    free(j->reads);
    j->extents = NULL;
    j->reads = NULL;
    j->nreads = j->nextents = 0;
}

const struct store_ops store_ram_ops = {
    .name = "ram",
    .queue_is_durable = ram_queue_is_durable,
    .enqueue = ram_enqueue,
    .msg_unneeded = ram_msg_unneeded,
    .delivered = ram_entry,
    .retry_wait = ram_retry_wait,
    .settled = ram_entry,
    .page_out = ram_page_out,
    .page_prepare = ram_page_prepare,
    .page_flush = ram_nothing,
    .page_decode = ram_page_decode,
    .page_in = ram_page_in,
    .memory_pressure = ram_false,
    .pages = ram_false,
    .trim_memory = ram_nothing,
    .msg_freed = ram_msg_freed,
    .delay_hold = ram_delay_hold,
    .delay_ready = ram_delay_ready,
    .delay_release = ram_delay_release,
    .queue_gone = ram_queue_gone,
    .tx_begin = ram_tx_begin,
    .tx_end = ram_tx_end,
    .open_batch = ram_open_batch,
    .durable_batch = ram_durable_batch,
    .recheck_batch = ram_open_batch,
    .has_pending = ram_has_pending,
    .defs_written = ram_zero,
    .wait = ram_wait,
    .unwait = ram_unwait,
    .is_failed = ram_false,
    .get_stats = ram_get_stats,
    .recover = ram_recover,
    .close = ram_close,
    .read_submit = ram_read_submit,
};
