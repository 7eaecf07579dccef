/*
 * SPDX-License-Identifier: Apache-2.0
 * The definitions log, inside the store: durable vhosts, exchanges,
 * queues, bindings, users, permissions and policies as records in defs.log, compacted from time to
 * time into defs.snap (docs/storage.md). store.c owns the files' I/O;
 * this is the encoding, the replay and the snapshot.
 */
#ifndef ROOST_BROKER_STORE_STORE_DEFS_H
#define ROOST_BROKER_STORE_STORE_DEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/core/defs.h"
#include "broker/store/record.h"

struct exchange;
struct queue;
struct binding;

enum {
    D_HEADER = 1, D_VHOST, D_VHOST_DEL, D_EXCHANGE, D_EXCHANGE_DEL,
    D_QUEUE, D_QUEUE_DEL, D_BIND, D_UNBIND,
    D_USER, D_USER_DEL,
    D_PERM, D_PERM_DEL,
    D_POLICY, D_POLICY_DEL,
};

#define STORE_FORMAT 1

/* Whether the store keeps this object. */
bool store_keeps_exchange(const struct exchange *x);
bool store_keeps_queue(const struct queue *q);
bool store_keeps_binding(const struct binding *b);

/* Append the record for one change to 'out'; false if it is not kept. */
bool defs_encode(struct wbuf *out, enum defs_event ev, const void *obj);

/* Every kept definition, as a snapshot with generation 'gen'; returns
 * how many objects it holds. */
uint64_t defs_snapshot(struct wbuf *out, uint64_t gen);

/* A header record for generation 'gen'. */
void defs_header(struct wbuf *out, uint64_t gen);

/* What defs_replay() found wrong with a file, besides records that do
 * not apply. */
struct defs_damage {
    size_t records;         /* that checked out, applied or not */
    size_t corrupt;         /* records skipped in the middle */
    bool torn;              /* the walk ended at a record cut short */
    size_t torn_at;         /* its offset */
    bool hidden;            /* bytes not zero after a zero header */
};

/* Damage the store cannot start over: a corrupt record, or a torn
 * record with no good record before it (the file is not a definitions
 * log at all). A torn tail after good records is what a crash leaves,
 * and is not; nor are bytes behind zeros (logged), which a power cut
 * that reordered unsynced writes may leave. */
bool defs_is_damaged(const struct defs_damage *d);

/*
 * Apply the records in 'p' (a snapshot or log file) to the broker.
 * Returns the records applied, or -1 if the file is unusable; notes the
 * file's generation in '*gen' (0 if it has no header), the largest queue
 * id in '*max_qid', what was wrong in '*dmg' (if not NULL), and logs
 * each bad record.
 */
long defs_replay(const char *file, const uint8_t *p, size_t len,
                 uint64_t *gen, uint32_t *max_qid, struct defs_damage *dmg);

#endif
