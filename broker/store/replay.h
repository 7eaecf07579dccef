/*
 * SPDX-License-Identifier: Apache-2.0
 * Journal replay: the records of the journal's segments (journal.h)
 * collected, and resolved into the queue entries they leave live, by the
 * rules recovery applies (docs/storage.md). Recovery (store.c) rebuilds
 * its messages and queue entries from what this resolves; the offline
 * check (check.c) counts it. One piece of code, so that the check says
 * what a start would rebuild.
 *
 * Pure: it reads only the bytes it is given and knows no broker state.
 * Queues are the caller's, named by their store ids; the caller says
 * which ids it knows through a lookup.
 */
#ifndef ROOST_BROKER_STORE_REPLAY_H
#define ROOST_BROKER_STORE_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/props.h"
#include "broker/store/record.h"

/* A J_MSG record. 'payload' borrows the segment's bytes. */
struct replay_msg {
    uint64_t id;
    uint64_t order;             /* of the message records read so far */
    const uint8_t *payload;
    uint32_t len;               /* of the payload */
    uint32_t size;              /* of the whole record, header included */
    uint32_t seg;               /* the segment, as replay_segment() got it */
};

/* A J_ENQ record: message 'id' in queue 'qid' at position 'seq'. */
struct replay_enq {
    uint32_t qid;
    uint32_t deliveries;
    uint32_t seg;               /* the segment, as replay_segment() got it */
    uint64_t seq, id, expires_wall;
    uint64_t enq_wall;          /* when it entered the queue; 0: not said */
    uint64_t order;             /* of the enqueue records read so far */
};

/* A J_ACK record: the entries lo..hi of queue 'qid' are settled. */
struct replay_range {
    uint32_t qid;
    uint64_t lo, hi;
};

/* A J_DELIVER record. */
struct replay_del {
    uint32_t qid, deliveries;
    uint64_t seq;
    uint64_t due_wall;          /* a requeue delay's end; 0: none */
};

/*
 * What the segments read so far hold: every record that counts (those
 * of a transaction cut before its commit do not), in journal order;
 * after replay_resolve(), sorted: messages by id (copies of one id
 * oldest first), entries, settled ranges and delivery counts by queue id
 * and position. Callers read the arrays; replay.c alone writes them.
 * Start from { 0 }; replay_free() releases the arrays.
 */
struct replay {
    struct replay_msg *msgs;
    size_t nmsgs, msgs_cap;
    struct replay_enq *enqs;
    size_t nenqs, enqs_cap;
    struct replay_range *acks;
    size_t nacks, acks_cap;
    struct replay_del *dels;
    size_t ndels, dels_cap;
    uint64_t max_id;            /* the largest message id named */
    uint64_t corrupt, torn;     /* records skipped, tails cut */
};

/*
 * What replay_segment() tells its caller as it reads, each optional:
 * - record: a record that checks out, at 'off', after it was collected;
 *   'fits' is false if its payload is too short for its type's fields.
 *   Such a record is dropped, except a message whose id still reads: it
 *   is kept (as recovery always kept it), and does not decode. A type
 *   the journal does not know is skipped, with 'fits' true;
 * - fault: a record that does not check out (rec_walk());
 * - tx_cut: the segment ends inside a transaction; the records after its
 *   begin, as many as given, were dropped.
 */
struct replay_report {
    void (*record)(void *arg, const struct rec *r, size_t off, bool fits);
    void (*fault)(void *arg, enum rec_fault f, size_t off, size_t n);
    void (*tx_cut)(void *arg, size_t msgs, size_t enqs, size_t acks,
                   size_t dels);
    void *arg;
};

/*
 * Collect the records of one whole segment file, 'p' (borrowed until the
 * replay is freed), as segment number 'seg' of the caller's (an index
 * into its list of segments: replay_msg.seg). Segments go oldest first.
 * 'rep' may be NULL. Returns where its records end (rec_walk()).
 */
size_t replay_segment(struct replay *rp, uint32_t seg, const uint8_t *p,
                      size_t len, const struct replay_report *rep);

/* The same, record by record, for a caller that walks the segment
 * itself (seglog_reopen): begin, then each record and each record that
 * does not check out as the walk meets them, then end (a transaction
 * without its commit is dropped there). */
struct replay_seg {
    struct replay *rp;
    uint32_t seg;
    const struct replay_report *rep;
    /* an open transaction: the arrays' lengths at its begin */
    bool in_tx;
    size_t tx_msgs, tx_enqs, tx_acks, tx_dels;
};

void replay_seg_begin(struct replay_seg *sr, struct replay *rp, uint32_t seg,
                      const struct replay_report *rep);
void replay_seg_record(struct replay_seg *sr, const struct rec *r,
                       size_t off);
void replay_seg_fault(struct replay_seg *sr, enum rec_fault f, size_t off,
                      size_t n);
void replay_seg_end(struct replay_seg *sr);

/* Sort what was collected, for the walk below. After every segment. */
void replay_resolve(struct replay *rp);

void replay_free(struct replay *rp);

enum replay_fate {
    REPLAY_LIVE,                /* recovery restores it */
    REPLAY_SETTLED,             /* a settled range ends it */
    REPLAY_ORPHAN,              /* its queue is unknown (deleted) */
};

/* One queue entry: the newest enqueue record of its queue id and
 * position, and what became of it. */
struct replay_entry {
    enum replay_fate fate;
    uint32_t qid;
    uint64_t seq, msg_id, expires_wall;
    uint64_t enq_wall;          /* when it entered the queue; 0: not said */
    void *queue;                /* the lookup's answer for qid */
    uint32_t enq_seg;           /* the segment of its newest enqueue record */
    /* REPLAY_LIVE only: */
    uint32_t deliveries;        /* the highest count the journal names */
    uint64_t due_wall;          /* waiting out a requeue delay until then
                                 * (wall ms), or 0 */
    const struct replay_msg *msg;  /* its newest copy; NULL if none */
};

/*
 * A walk over the entries of a resolved replay, in queue id and position
 * order. 'find_queue' is asked once per queue id whether the caller
 * knows it (non-NULL: its queue, handed back in replay_entry.queue).
 * 'queues' counts the ids it knew so far; the other fields are the
 * walk's own.
 */
struct replay_walk {
    const struct replay *rp;
    void *(*find_queue)(void *arg, uint32_t qid);
    void *arg;
    uint64_t queues;
    size_t i, ai, di;
    uint32_t qid;
    void *queue;
    bool looked_up;
};

void replay_walk_init(struct replay_walk *w, const struct replay *rp,
                      void *(*find_queue)(void *arg, uint32_t qid),
                      void *arg);

/* The next entry into 'out'; false at the end. Allocates nothing. */
bool replay_next(struct replay_walk *w, struct replay_entry *out);

/* A message record's fields, borrowing its payload. */
struct replay_fields {
    const uint8_t *exchange, *rkey, *hdr, *body;
    uint32_t exchange_len, rkey_len, hdr_len;
    uint64_t body_len;
    struct content_header ch;   /* borrows 'hdr' */
};

/* Whether the message decodes: its fields read with nothing after them,
 * its names fit a shortstr, its body fits a message (MSG_BODY_MAX), its
 * content header decodes and gives the body's length. */
bool replay_msg_decode(const struct replay_msg *m, struct replay_fields *out);

#endif
