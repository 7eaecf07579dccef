/*
 * The store, as the event loop sees it: durable definitions and
 * persistent messages on disk (docs/storage.md has the format).
 *
 * Everything here runs on the event-loop thread. The store collects what
 * changes into an open batch; whenever its I/O thread is idle, the open
 * batch is serialised and handed over, and the thread appends it to the
 * journal (and the definitions log), syncs, and reports back. So many
 * publishes share one fdatasync: the batch is whatever arrived while the
 * previous sync ran. Whoever must not answer before the disk has it
 * (publisher confirms, tx.commit-ok, a durable declare-ok) takes the
 * number of the open batch and waits for it with a store_waiter.
 *
 * The store learns of a queue entry's life only from queue.c (push,
 * take, settle) and of definitions only from defs_changed (defs.h).
 */
#ifndef ROOST_BROKER_STORE_STORE_H
#define ROOST_BROKER_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct queue;
struct qentry;
struct msg;
struct config;

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
 * Lock the data directory (flock: a second roostd gets -1 and a message
 * naming the holder's pid), check or write its format version, and start
 * the I/O thread. -1 with a message in 'err' on failure.
 */
int store_open(const char *dir, const struct config *cfg, char *err,
               size_t errlen);

/* The pieces of store_open, for offline tools: lock 'dir' (returns the
 * lock's fd) and check its format version (writing it if new). */
int store_lock_dir(const char *dir, char *err, size_t errlen);
int store_check_format(const char *dir, char *err, size_t errlen);

/* Read the whole file 'path' into '*out' (with room for a NUL after
 * its '*len' bytes; the caller frees it). 1 if read, 0 if there is no
 * such file, -1 with errno if it cannot be read. */
int store_read_file(const char *path, uint8_t **out, size_t *len);

/* Rebuild the durable definitions and every durable queue's messages
 * from disk, and log what was recovered and how long it took. Runs
 * before the listeners open. -1 if the data cannot be read at all. */
int store_recover(void);

/* Called now and then while store_recover runs (each segment read, each
 * 64 Ki entries restored) with where it is: roostd tells systemd the
 * start is still going (notify.h). NULL: nobody. */
void store_on_recovery_progress(void (*cb)(const char *status));

/* Write and sync what is pending, stop the thread, unlock. */
void store_close(void);

/* Whether 'q' keeps its persistent messages on disk. */
bool store_queue_is_durable(const struct queue *q);

/* A new entry in 'q'. True if it went to the store: the publish's
 * confirm then waits for store_open_batch(). */
bool store_enqueue(struct queue *q, const struct qentry *e);

/* Whether persistent message 'm' went to the store but was consumed
 * and acked everywhere before its record was written: it never will be,
 * and its publish need not wait for the disk. */
bool store_msg_unneeded(const struct msg *m);

/* The entry was handed out (its delivery count changed). */
void store_delivered(struct queue *q, const struct qentry *e);

/* A taken entry waits out a requeue delay of 'delay' ms (x-requeue-
 * delay): its J_DELIVER record carries when it is due (wall clock), so
 * that a restart lets it wait until then. */
void store_retry_wait(struct queue *q, const struct qentry *e, uint64_t delay);

/* The entry left 'q' for good (acked, expired, dead-lettered, purged). */
void store_settled(struct queue *q, const struct qentry *e);

/*
 * Paging (queue.h): whether entry 'e' of 'q' can leave memory now (its
 * message's record is on disk and readable); if so it is paged: 'e->m'
 * is released and 'e->pg' says where the record is. Otherwise
 * store_page_prepare says whether it will be later: 1 if its record is
 * being written (to the journal, or now to the scratch area, which it
 * asks for when 'pressure' is set and the message has no record), 2 if
 * so but the scratch area takes no more for this pass, 0 if not.
 */
bool store_page_out(struct queue *q, struct qentry *e);
int store_page_prepare(struct queue *q, struct qentry *e, bool pressure);
/* Hand the scratch records asked for so far to the pager thread. */
void store_page_flush(void);
/* The message in a record read back for paged entry 'e' (NULL if it
 * does not check out), and bringing it back into 'e'. */
struct pager_read;
struct msg *store_page_decode(const struct qentry *e,
                              const struct pager_read *r);
void store_page_in(struct queue *q, struct qentry *e, struct msg *m);
/* Whether memory use is above the paging ratio of the watermark
 * (vm_memory_high_watermark_paging_ratio). */
bool store_memory_pressure(void);
/* Whether the store pages at all (it is open). */
bool store_pages(void);
/* Give memory freed by paging back to the system, if much was (at most
 * once a second; the pager and the alarm tick call it). */
void store_trim_memory(void);
/* A message whose record is in the scratch area is freed (msg.c). */
void store_msg_freed(struct msg *m);

/*
 * Delayed messages (delayed.h): persistent 'm' held by the durable
 * x-delayed-message exchange with store id 'sid', as its entry 'seq' due
 * at 'due_wall' (wall-clock ms): an enqueue record under the exchange's
 * id whose expiry field is the due time. True if it went to the store
 * (the confirm then waits for store_open_batch()).
 */
bool store_delay_hold(uint32_t sid, uint64_t seq, struct msg *m,
                      uint64_t due_wall);
/* Whether held message 'm' may be routed now: its record is no longer
 * waiting to be written (routing would otherwise let the store drop
 * the record and its publisher's confirm go out before the routed
 * copy is on disk). */
bool store_delay_ready(const struct msg *m);
/* The held entry ends: routed ('routed': a settled record, in the
 * transaction of its routing), or its exchange is gone (no record: the
 * exchange's deletion makes its records orphans). */
void store_delay_release(uint32_t sid, uint64_t seq, struct msg *m,
                         bool routed);

/* The queue is gone with everything in it (its records become orphans). */
void store_queue_gone(struct queue *q);

/* Publishes and settlements of one tx.commit: recovery applies all of
 * them or none. store_tx_end says whether the transaction wrote to the
 * store (its commit-ok must then wait for store_open_batch()). */
void store_tx_begin(void);
bool store_tx_end(void);

/* The number of the batch now being collected, and whether anything in
 * it needs the disk. */
uint64_t store_open_batch(void);
/* The last batch known durable. */
uint64_t store_durable_batch(void);
/* During a waiter's recheck: no message of a batch below this turned out
 * unneeded since the last recheck (store_msg_unneeded). */
uint64_t store_recheck_batch(void);
bool store_has_pending(void);

/* How many definition records have been written so far: a handler that
 * changed it must hold its reply for the disk (conn_hold_for_store). */
uint64_t store_defs_written(void);

/* Wait for batch 'batch'; a batch already durable calls back at once. */
void store_wait(struct store_waiter *w, uint64_t batch);
void store_unwait(struct store_waiter *w);

/* True while the store cannot write: publishers are blocked. */
bool store_is_failed(void);

/* The messages and bytes held by the store, for logs and metrics. */
struct store_stats {
    uint64_t batches, syncs, records, bytes_written;
    uint64_t batch_max_records;
    uint64_t segments, live_bytes, disk_bytes;
    uint64_t paged_out, paged_in, scratch_bytes, page_reads;
    uint64_t msgs_written;      /* message records written */
};
void store_get_stats(struct store_stats *s);

#endif
