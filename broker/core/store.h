/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The store, as the core sees it: a table of what a queue, a channel or
 * the delayed exchange asks of whatever keeps messages and definitions
 * (docs/storage.md). The local segment journal (broker/store/, started
 * by store_journal_open) is one implementation; store_ram.c, which keeps
 * nothing on disk and is durable when told (store_ram_sync), is the
 * other, for tests that drive the core without a disk. Replication will
 * be a third: "durable" is whatever the store in use says it is (a batch
 * at or below durable_batch), so no caller changes with it.
 *
 * Everything here runs on the event-loop thread. The store collects what
 * changes into an open batch; whoever must not answer before that batch
 * is durable (publisher confirms, tx.commit-ok, a durable declare-ok)
 * takes the number of the open batch and waits for it with a
 * store_waiter.
 *
 * The store learns of a queue entry's life only from queue.c (push,
 * take, settle) and of definitions only from defs_changed (defs.h).
 * The functions below are the table's entries under their old names:
 * each calls the store in use.
 */
#ifndef ROOST_BROKER_CORE_STORE_H
#define ROOST_BROKER_CORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "broker/lib/wbuf.h"

struct msg;
struct qentry;
struct queue;

/* Something waiting for batch 'batch' to be durable: 'durable' is called
 * once it is (or at shutdown), after the waiter was taken off the list.
 * 'recheck', if set, is called (the waiter still waiting) at the end of
 * a loop turn in which messages turned out never to need writing
 * (store_msg_unneeded). */
struct store_waiter {
    TAILQ_ENTRY(store_waiter) link;
    uint64_t batch;
    bool waiting;
    void (*durable)(struct store_waiter *w);
    void (*recheck)(struct store_waiter *w);
};

/*
 * Reading paged messages back (and, inside the journal, writing the
 * scratch area): a job of records for the store's pager thread, handed
 * over with store_read_submit; 'done' is called on the loop thread once
 * it ran. The loop never waits for a read.
 */
/* One record to read: at least 'want' bytes at 'off' in segment 'seg'
 * (of the journal, or of the scratch area); the whole record ends up in
 * 'buf' ('len' bytes), its CRC checked, or 'err' says why not (EBADMSG:
 * it does not check out). */
struct pager_read {
    uint64_t seq;               /* the caller's: which entry it is for */
    uint32_t seg, off, want;
    bool scratch;
    uint8_t *buf;               /* its own allocation, unless 'shared' */
    bool shared;                /* inside one of the job's extents */
    uint32_t len;
    int err;
};

enum pager_kind { PAGER_READ, PAGER_WRITE, PAGER_UNLINK, PAGER_OFFSETS };

struct pager_job {
    TAILQ_ENTRY(pager_job) link;
    enum pager_kind kind;
    /* PAGER_READ: records close to each other in a segment are read
     * with one pread, into an extent they then point into */
    struct pager_read *reads;
    size_t nreads;
    uint32_t log_sid;           /* the records are in the own log of stream
                                   'log_sid' (0: the journal's, scratch) */
    uint8_t **extents;
    size_t nextents;
    /* PAGER_WRITE: 'data' appended at 'off' of scratch segment 'seg';
     * PAGER_UNLINK: scratch segment 'seg' deleted; PAGER_OFFSETS: the
     * consumer names of stream 'seg' written or deleted (offsets.h) */
    uint32_t seg;
    uint64_t off;
    struct wbuf data;
    int err;
    /* the caller's */
    void (*done)(struct pager_job *j);
    void *arg;
    uint32_t arg_index;
    void (*then)(void);
};

/* Free what a read job's reads hold (their buffers and extents). */
void pager_read_free(struct pager_job *j);

/* One consumer name of a stream and its committed offset
 * (x-stream-consumer-name; broker/core/stream.h). */
struct stream_offset {
    const char *name;
    size_t len;
    uint64_t offset;
    uint64_t updated_wall;      /* when it last changed (wall-clock ms) */
};

/* The messages and bytes held by the store, for logs and metrics. */
struct store_stats {
    uint64_t batches, syncs, records, bytes_written;
    uint64_t batch_max_records;
    uint64_t segments, live_bytes, disk_bytes;
    uint64_t paged_out, paged_in, scratch_bytes, page_reads;
    uint64_t msgs_written;      /* message records written */
};

/* One implementation of the store: each entry is documented at its
 * function below. */
struct store_ops {
    const char *name;
    bool (*queue_is_durable)(const struct queue *q);
    bool (*enqueue)(struct queue *q, const struct qentry *e);
    bool (*msg_unneeded)(const struct msg *m);
    void (*delivered)(struct queue *q, const struct qentry *e);
    void (*retry_wait)(struct queue *q, const struct qentry *e,
                       uint64_t delay);
    void (*settled)(struct queue *q, const struct qentry *e);
    bool (*page_out)(struct queue *q, struct qentry *e);
    int (*page_prepare)(struct queue *q, struct qentry *e, bool pressure);
    void (*page_flush)(void);
    struct msg *(*page_decode)(const struct qentry *e,
                               const struct pager_read *r);
    void (*page_in)(struct queue *q, struct qentry *e, struct msg *m);
    bool (*memory_pressure)(void);
    bool (*pages)(void);
    void (*trim_memory)(void);
    void (*msg_freed)(struct msg *m);
    bool (*delay_hold)(uint32_t sid, uint64_t seq, struct msg *m,
                       uint64_t due_wall);
    bool (*delay_ready)(const struct msg *m);
    void (*delay_release)(uint32_t sid, uint64_t seq, struct msg *m,
                          bool routed);
    void (*queue_gone)(struct queue *q);
    void (*tx_begin)(void);
    bool (*tx_end)(void);
    uint64_t (*open_batch)(void);
    uint64_t (*durable_batch)(void);
    uint64_t (*recheck_batch)(void);
    bool (*has_pending)(void);
    uint64_t (*defs_written)(void);
    void (*wait)(struct store_waiter *w, uint64_t batch);
    void (*unwait)(struct store_waiter *w);
    bool (*is_failed)(void);
    /* While is_failed: what failed (the error and the file); NULL: the
     * store does not say. */
    const char *(*failure)(void);
    void (*get_stats)(struct store_stats *s);
    int (*recover)(void);
    void (*close)(void);
    void (*read_submit)(struct pager_job *j);
    /* Optional (NULL: names are not kept across restarts). */
    void (*offsets_save)(struct queue *q, const struct stream_offset *v,
                         size_t n);
    /* Optional (NULL: a stream has no files of its own): stream 'q''s
     * own segment files, their bytes, and the size each takes before
     * the next one opens. */
    void (*stream_files)(const struct queue *q, uint64_t *segments,
                         uint64_t *bytes, uint64_t *segment_size);
};

/* The store in use; store_ram_ops until an implementation is opened. */
extern const struct store_ops *store_impl;
extern const struct store_ops store_ram_ops;

/* Use 'ops' from now on (an implementation's open calls it). */
void store_use(const struct store_ops *ops);

/* Open the RAM store: it is used, and from now on each durable queue
 * added (not exclusive, as the journal keeps them) gets a store id, so
 * that its persistent messages go to the store and their confirms wait
 * for store_ram_sync. store_close closes it. Before it is opened the RAM
 * store keeps no queue's messages. */
void store_ram_open(void);

/* The RAM store: every open batch becomes durable now (its waiters are
 * called). A unit test decides when the "disk" has synced. */
void store_ram_sync(void);

/* Rebuild the durable definitions and every durable queue's messages
 * from disk, and log what was recovered and how long it took. Runs
 * before the listeners open. -1 if the data cannot be read at all. */
static inline int
store_recover(void)
{
    return store_impl->recover();
}

/* Write and sync what is pending, stop the thread, unlock. */
static inline void
store_close(void)
{
    store_impl->close();
}

/* Whether 'q' keeps its persistent messages on disk. */
static inline bool
store_queue_is_durable(const struct queue *q)
{
    return store_impl->queue_is_durable(q);
}

/* A new entry in 'q'. True if it went to the store: the publish's
 * confirm then waits for store_open_batch(). */
static inline bool
store_enqueue(struct queue *q, const struct qentry *e)
{
    return store_impl->enqueue(q, e);
}

/* Whether persistent message 'm' went to the store but was consumed
 * and acked everywhere before its record was written: it never will be,
 * and its publish need not wait for the disk. */
static inline bool
store_msg_unneeded(const struct msg *m)
{
    return store_impl->msg_unneeded(m);
}

/* The entry was handed out (its delivery count changed). */
static inline void
store_delivered(struct queue *q, const struct qentry *e)
{
    store_impl->delivered(q, e);
}

/* A taken entry waits out a requeue delay of 'delay' ms (x-requeue-
 * delay): its J_DELIVER record carries when it is due (wall clock), so
 * that a restart lets it wait until then. */
static inline void
store_retry_wait(struct queue *q, const struct qentry *e, uint64_t delay)
{
    store_impl->retry_wait(q, e, delay);
}

/* The entry left 'q' for good (acked, expired, dead-lettered, purged). */
static inline void
store_settled(struct queue *q, const struct qentry *e)
{
    store_impl->settled(q, e);
}

/*
 * Paging (queue.h): whether entry 'e' of 'q' can leave memory now (its
 * message's record is on disk and readable); if so it is paged: 'e->m'
 * is released and 'e->pg' says where the record is. Otherwise
 * store_page_prepare says whether it will be later: 1 if its record is
 * being written (to the journal, or now to the scratch area, which it
 * asks for when 'pressure' is set and the message has no record), 2 if
 * so but the scratch area takes no more for this pass, 0 if not.
 */
static inline bool
store_page_out(struct queue *q, struct qentry *e)
{
    return store_impl->page_out(q, e);
}
static inline int
store_page_prepare(struct queue *q, struct qentry *e, bool pressure)
{
    return store_impl->page_prepare(q, e, pressure);
}
/* Hand the scratch records asked for so far to the pager thread. */
static inline void
store_page_flush(void)
{
    store_impl->page_flush();
}
/* The message in a record read back for paged entry 'e' (NULL if it
 * does not check out), and bringing it back into 'e'. */
static inline struct msg *
store_page_decode(const struct qentry *e, const struct pager_read *r)
{
    return store_impl->page_decode(e, r);
}
static inline void
store_page_in(struct queue *q, struct qentry *e, struct msg *m)
{
    store_impl->page_in(q, e, m);
}
/* Whether memory use is above the paging ratio of the watermark
 * (vm_memory_high_watermark_paging_ratio). */
static inline bool
store_memory_pressure(void)
{
    return store_impl->memory_pressure();
}
/* Whether the store pages at all (it is open). */
static inline bool
store_pages(void)
{
    return store_impl->pages();
}
/* Give memory freed by paging back to the system, if much was (at most
 * once a second; the pager and the alarm tick call it). */
static inline void
store_trim_memory(void)
{
    store_impl->trim_memory();
}
/* A message the store keeps a record of (m->srec) is freed (msg.c):
 * the store lets the record go, and what it holds. */
static inline void
store_msg_freed(struct msg *m)
{
    store_impl->msg_freed(m);
}

/*
 * Delayed messages (delayed.h): persistent 'm' held by the durable
 * x-delayed-message exchange with store id 'sid', as its entry 'seq' due
 * at 'due_wall' (wall-clock ms): an enqueue record under the exchange's
 * id whose expiry field is the due time. True if it went to the store
 * (the confirm then waits for store_open_batch()).
 */
static inline bool
store_delay_hold(uint32_t sid, uint64_t seq, struct msg *m, uint64_t due_wall)
{
    return store_impl->delay_hold(sid, seq, m, due_wall);
}
/* Whether held message 'm' may be routed now: its record is no longer
 * waiting to be written (routing would otherwise let the store drop
 * the record and its publisher's confirm go out before the routed
 * copy is on disk). */
static inline bool
store_delay_ready(const struct msg *m)
{
    return store_impl->delay_ready(m);
}
/* The held entry ends: routed ('routed': a settled record, in the
 * transaction of its routing), or its exchange is gone (no record: the
 * exchange's deletion makes its records orphans). */
static inline void
store_delay_release(uint32_t sid, uint64_t seq, struct msg *m, bool routed)
{
    store_impl->delay_release(sid, seq, m, routed);
}

/* The queue is gone with everything in it (its records become orphans). */
static inline void
store_queue_gone(struct queue *q)
{
    store_impl->queue_gone(q);
}

/* Publishes and settlements of one tx.commit: recovery applies all of
 * them or none. store_tx_end says whether the transaction wrote to the
 * store (its commit-ok must then wait for store_open_batch()). */
static inline void
store_tx_begin(void)
{
    store_impl->tx_begin();
}
static inline bool
store_tx_end(void)
{
    return store_impl->tx_end();
}

/* The number of the batch now being collected, and whether anything in
 * it needs the disk. */
static inline uint64_t
store_open_batch(void)
{
    return store_impl->open_batch();
}
/* The last batch known durable. */
static inline uint64_t
store_durable_batch(void)
{
    return store_impl->durable_batch();
}
/* During a waiter's recheck: no message of a batch below this turned out
 * unneeded since the last recheck (store_msg_unneeded). */
static inline uint64_t
store_recheck_batch(void)
{
    return store_impl->recheck_batch();
}
static inline bool
store_has_pending(void)
{
    return store_impl->has_pending();
}

/* How many definition records have been written so far: a handler that
 * changed it must hold its reply for the disk (conn_hold_for_store). */
static inline uint64_t
store_defs_written(void)
{
    return store_impl->defs_written();
}

/* Wait for batch 'batch'; a batch already durable calls back at once. */
static inline void
store_wait(struct store_waiter *w, uint64_t batch)
{
    store_impl->wait(w, batch);
}
static inline void
store_unwait(struct store_waiter *w)
{
    store_impl->unwait(w);
}

/* True while the store cannot write: publishers are blocked. */
static inline bool
store_is_failed(void)
{
    return store_impl->is_failed();
}

/* While store_is_failed(): what failed, or "". */
static inline const char *
store_failure(void)
{
    return store_impl->failure ? store_impl->failure() : "";
}

/* Hand a read job to the store's pager ('done' runs on the loop once it
 * is read). */
static inline void
store_read_submit(struct pager_job *j)
{
    store_impl->read_submit(j);
}

/*
 * What the store keeps of stream 'q''s consumer names becomes these
 * 'n' (all of them), written off the loop and durable soon after, not
 * before this returns: a crash may find an earlier set, never a later
 * one. Recovery hands them back (stream_restore_offset). A store that
 * keeps none ignores it.
 */
static inline void
store_offsets_save(struct queue *q, const struct stream_offset *v, size_t n)
{
    if (store_impl->offsets_save)
        store_impl->offsets_save(q, v, n);
}

/* The messages and bytes held by the store (struct store_stats). */
static inline void
store_get_stats(struct store_stats *s)
{
    store_impl->get_stats(s);
}

#endif
