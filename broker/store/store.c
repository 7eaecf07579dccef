/*
 * SPDX-License-Identifier: Apache-2.0
 * The store's loop side: the open batch, handing batches to the I/O
 * thread, waiters, segment accounting, and recovery.
 *
 * The journal (dir/msgs/NNNNNNNNNN.seg) is one log of records in
 * segments: J_MSG holds a persistent message once, however many durable
 * queues it reaches; J_ENQ puts it in one queue at a sequence number;
 * J_DELIVER notes a delivery count; J_ACK ends entries, in seq ranges;
 * J_TX_BEGIN/J_TX_COMMIT bracket a transaction. A message's J_MSG and its
 * J_ENQ records are always in the same batch, so in the same segment.
 *
 * A segment is deleted when no live message remains in it and every
 * older segment is gone: an ack in a segment may be what keeps a message
 * in an older one dead, so only the oldest may go.
 *
 * Recovery maps the segments and hands them to replay.c, which decides
 * which entries are live (the offline check runs the same code); what is
 * here builds the messages and queue entries from them.
 */
#define _GNU_SOURCE
#include "broker/store/store.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "amqp/props.h"
#include "broker/core/alarm.h"
#include "broker/core/broker.h"
#include "broker/core/defs.h"
#include "broker/core/delayed.h"
#include "broker/core/exchange.h"
#include "broker/core/hooks.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/stream.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/store/io.h"
#include "broker/store/journal.h"
#include "broker/store/offsets.h"
#include "broker/store/pager.h"
#include "broker/store/record.h"
#include "broker/store/replay.h"
#include "broker/store/seglog.h"
#include "broker/store/store_defs.h"
#include "broker/store/streams.h"

/* A message's record: none, being written to the journal, in the
 * journal, being written to the scratch area, in the scratch area. */
#define MS_STATES(X) \
    X(MS_NONE) X(MS_PENDING) X(MS_WRITTEN) X(MS_SCRATCHING) X(MS_SCRATCH)

enum ms_state {
#define AS_ENUM(s) s,
    MS_STATES(AS_ENUM)
#undef AS_ENUM
};

/*
 * What the store keeps of a message it has a record of (msg.h's srec),
 * made on first need and freed with the message: its id on disk (0:
 * none: only a scratch copy, or none yet), its state, the segment
 * holding its record (in the journal, or in the scratch area) and where
 * in it, and the durable entries and delayed holds that hold it. A
 * freed one waits in a free list for the next.
 */
struct store_rec {
    union {
        uint64_t id;
        struct store_rec *next_free;
    };
    uint32_t seg, off;
    uint32_t refs;
    uint8_t state;              /* enum ms_state: rec_set_state only */
};

/* The moves a record may make (rec_set_state), and why:
 *   NONE -> PENDING        a durable holder: its record is due
 *   NONE -> SCRATCHING     paged out under pressure, with no record
 *   NONE -> WRITTEN        recovered, or read back from the journal
 *   NONE -> SCRATCH        read back from the scratch area
 *   PENDING -> WRITTEN     serialised into a batch
 *   PENDING -> NONE        settled before it was written: never will be
 *   WRITTEN -> PENDING     compaction writes it again
 *   SCRATCHING -> SCRATCH  its scratch write is done
 *   SCRATCHING -> NONE     that write failed, the store closes, or a
 *                          durable holder came (add_holder)
 *   SCRATCH -> NONE        a durable holder came: the scratch copy goes */
#define MS_BIT(s) (1u << (s))
static const uint8_t ms_next[] = {
    [MS_NONE] = MS_BIT(MS_PENDING) | MS_BIT(MS_SCRATCHING) |
                MS_BIT(MS_WRITTEN) | MS_BIT(MS_SCRATCH),
    [MS_PENDING] = MS_BIT(MS_WRITTEN) | MS_BIT(MS_NONE),
    [MS_WRITTEN] = MS_BIT(MS_PENDING),
    [MS_SCRATCHING] = MS_BIT(MS_SCRATCH) | MS_BIT(MS_NONE),
    [MS_SCRATCH] = MS_BIT(MS_NONE),
};

static const char *
ms_name(unsigned s)
{
    static const char *const names[] = {
#define AS_NAME(s) #s,
        MS_STATES(AS_NAME)
#undef AS_NAME
    };
    return s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* The one place a record's state changes. */
static void
rec_set_state(struct store_rec *r, enum ms_state next)
{
    if (!(ms_next[r->state] & MS_BIT(next)))
        fatalx("store: message %" PRIu64 ": record %s -> %s is not a move "
               "it may make", r->id, ms_name(r->state), ms_name(next));
    log_debug("store: message %" PRIu64 " record %s -> %s", r->id,
              ms_name(r->state), ms_name(next));
    r->state = (uint8_t)next;
}

/* Of a message with no record: its state is MS_NONE, its id 0. */
static inline unsigned
msg_state(const struct msg *m)
{
    return m->srec ? m->srec->state : MS_NONE;
}

static inline uint64_t
msg_id(const struct msg *m)
{
    return m->srec ? m->srec->id : 0;
}

/* off of a record that is not where seg says (it cannot be paged from
 * there). */
#define NO_OFF UINT32_MAX

/* What a paged entry's records take in the journal, at least: its body
 * and the fixed part of its message and enqueue records (the exchange,
 * routing key and content header are not known once it is paged).
 * Compaction weighs segments by it: counted by body bytes alone, a
 * backlog of small paged messages (a long stream of 16-byte events)
 * looked mostly dead, and the front segment, wholly live, was copied
 * forward again and again. */
#define PAGED_REC_MIN (2 * REC_HDR + 8 + 3 * 4 + 8 + 4 + 8 + 8 + 8 + 4 + 8)

static inline uint64_t
paged_size(uint32_t body_len)
{
    return (uint64_t)body_len + PAGED_REC_MIN;
}

/* One change waiting in the open batch. 'm' holds a reference while its
 * record may still be dropped (the message was settled before it was
 * written). */
struct op {
    uint64_t batch;             /* the open batch when it was added */
    uint8_t type;
    uint32_t qid;
    uint32_t deliveries;
    uint64_t seq, seq_hi;
    uint64_t expires_wall;
    uint64_t due_wall;          /* J_DELIVER: a requeue delay's end */
    uint64_t enq_wall;          /* J_ENQ: when it entered the queue */
    struct msg *m;
};

TAILQ_HEAD(waiter_list, store_waiter);

/* What the journal keeps of each segment of its log (seglog_udata):
 * bytes of live message records in it held by messages in memory,
 * entries paged to it (each holds it) and their body bytes. */
struct segacct {
    uint64_t live;
    uint64_t paged, paged_bytes;    /* paged_size() each */
    uint64_t last_drop;         /* when something in it last ended (ms) */
};

/* One scratch segment: the messages and paged entries whose record is
 * in it (each holds it), bytes in it. */
struct scratchacct {
    uint64_t refs, len;
};

/* Scratch segments are this large; one pass asks for at most this much
 * to be written. */
#define SCRATCH_SEG_SIZE (16u * 1024 * 1024)
#define SCRATCH_PASS_MAX (4u * 1024 * 1024)
/* Records handed to the pager thread and not yet written hold a copy of
 * their messages: at most this much; beyond it, paging waits for a write
 * to finish. */
#define SCRATCH_INFLIGHT_MAX (16u * 1024 * 1024)

/* A write to the scratch area and the messages it carries. */
struct scratch_job {
    struct pager_job job;
    struct msg **msgs;
    size_t n;
};

static struct {
    bool open, closing;
    char dir[4096];
    int lock_fd;
    uint64_t seg_size;
    uint64_t next_msg_id, next_txid;
    uint32_t next_qid;
    /* batches */
    uint64_t open_batch, durable_batch;
    struct op *ops;
    size_t nops, ops_cap;
    size_t tx_start;
    bool in_tx;
    struct wbuf defs;
    uint64_t defs_written;
    bool busy;
    struct io_job job;
    struct event *kick, *recheck;
    uint64_t recheck_from;      /* journal_recheck_batch(); 0: none due */
    struct waiter_list waiters;
    /* the journal's segments (dir/msgs), a struct segacct each */
    struct seglog *log;
    uint64_t batch_wall;        /* the batch's append time */
    uint64_t compactions, copied_bytes;
    /* definitions log */
    uint64_t defs_gen, defs_log_records, defs_live;
    bool is_new;                /* no FORMAT, no definitions, no journal */
    bool accept_loss;           /* --accept-data-loss */
    uint64_t paged_bytes;       /* paged_size() of the entries paged to it */
    /* compaction that waits for paged messages to be read back */
    uint64_t compacting;        /* the segment; UINT64_MAX: none */
    size_t compact_reads;
    struct event *compact_timer;   /* a sparse front segment settles */
    /* the scratch area */
    bool pager;
    struct scratchacct *scr;
    size_t nscr;
    uint64_t scr_base, scr_cur, scr_len;
    struct wbuf scr_buf;        /* to be written at scr_buf_off of scr_cur */
    uint64_t scr_buf_off;
    uint64_t scr_inflight;      /* bytes of scratch jobs not yet done */
    struct msg **scr_msgs;
    size_t scr_nmsgs, scr_msgs_cap;
    uint64_t scr_retry_at;      /* after a failed write, not before */
    char fail_msg[1024];        /* the last failed write's, for the alarm */
    struct event *scr_retry;
    /* envelopes shared by the messages recovered or paged in */
    struct msg_env_cache envs;
    /* failure */
    bool failed;
    unsigned failures;
    struct event *retry;
    struct store_stats stats;
    size_t job_max;             /* JOB_MAX_BYTES, or a test's smaller one */
} st;

/* ---- message records ---- */

#define REC_FREE_MAX 65536
static struct store_rec *rec_free;
static size_t rec_nfree;

/* The record of 'm', made (MS_NONE, id 0) if it has none. */
static struct store_rec *
rec_of(struct msg *m)
{
    struct store_rec *r = m->srec;

    if (r != NULL)
        return r;
    if ((r = rec_free) != NULL) {
        rec_free = r->next_free;
        rec_nfree--;
    } else {
        r = xmalloc(sizeof(*r));
    }
    memset(r, 0, sizeof(*r));
    m->srec = r;
    return r;
}

static void
rec_release(struct msg *m)
{
    struct store_rec *r = m->srec;

    m->srec = NULL;
    if (!st.open || rec_nfree >= REC_FREE_MAX) {
        free(r);
        return;
    }
    r->next_free = rec_free;
    rec_free = r;
    rec_nfree++;
}

static void
rec_free_all(void)
{
    struct store_rec *r;
    while ((r = rec_free) != NULL) {
        rec_free = r->next_free;
        free(r);
    }
    rec_nfree = 0;
}

/* ---- segments ---- */

static struct segacct *
seg_of(uint64_t seg)
{
    return seglog_udata(st.log, seg);
}

static uint64_t *
live_of(uint64_t seg)
{
    return &seg_of(seg)->live;
}

/* Drop every dead segment at the front of the journal (deleted with the
 * next job, after its sync). */
static void
collect_dead_segments(void)
{
    uint64_t first;

    while ((first = seglog_first(st.log)) < seglog_current(st.log) &&
           seg_of(first)->live == 0 && seg_of(first)->paged == 0)
        seglog_drop_first(st.log);
}

/* The size of a message's record (put_msg's), kept nowhere: the message
 * knows every length in it. */
static uint32_t
rec_size(const struct msg *m)
{
    return (uint32_t)(REC_HDR + 8 + 4 + msg_exchange_len(m) + 4 +
                      msg_rkey_len(m) + 4 + msg_hdr_len(m) + 8 + m->body_len);
}

static void
msg_dead(struct msg *m)
{
    struct segacct *a = seg_of(m->srec->seg);
    a->live -= rec_size(m);
    a->last_drop = now_ms();
    st.stats.live_bytes -= rec_size(m);
    if (m->srec->seg == seglog_first(st.log) && a->live == 0 &&
        a->paged == 0)
        collect_dead_segments();
}

/* ---- the open batch ---- */

static void
schedule(void)
{
    if (!st.busy && st.kick)
        event_active(st.kick, EV_TIMEOUT, 0);
}

static struct op *
add_op(uint8_t type, uint32_t qid, uint64_t seq, struct msg *m)
{
    if (st.nops == st.ops_cap) {
        st.ops_cap = st.ops_cap ? st.ops_cap * 2 : 256;
        st.ops = xrealloc(st.ops, st.ops_cap * sizeof(*st.ops));
    }
    struct op *o = &st.ops[st.nops++];
    memset(o, 0, sizeof(*o));
    o->batch = st.open_batch;
    o->type = type;
    o->qid = qid;
    o->seq = o->seq_hi = seq;
    o->m = m ? msg_ref(m) : NULL;
    schedule();
    return o;
}

static bool
is_stored(const struct queue *q, const struct qentry *e)
{
    return st.open && q->sid != 0 && msg_id(e->m) != 0;
}

static bool
journal_queue_is_durable(const struct queue *q)
{
    return q->sid != 0 && !q->store_gone;
}

/* The enqueue record of entry 'e', its expiry and the time it entered
 * the queue on the wall clock (the monotonic one does not survive a
 * restart; 1 stays "at once"). */
static void
add_enqueue(const struct queue *q, const struct qentry *e)
{
    struct op *o = add_op(J_ENQ, q->sid, e->seq, e->m);
    o->deliveries = e->deliveries;
    if (e->born)
        o->enq_wall = wall_ms() - (uint32_t)((uint32_t)now_ms() - e->born);
    if (e->expires_at > 1) {
        uint64_t now = now_ms();
        o->expires_wall = wall_ms() + (e->expires_at > now ? e->expires_at - now
                                                           : 0);
    } else if (e->expires_at == 1) {
        o->expires_wall = 1;
    }
}

static void scratch_unref(uint64_t seg);

/* One more holder of 'm' in the store: its record once, then each
 * holder's enqueue record. A copy in the scratch area is not needed
 * once the record is due in the journal. */
static void
add_holder(struct msg *m)
{
    struct store_rec *r = rec_of(m);

    if (r->id == 0) {
        if (r->state == MS_SCRATCH)
            scratch_unref(r->seg);
        if (r->state == MS_SCRATCH || r->state == MS_SCRATCHING)
            rec_set_state(r, MS_NONE);
        r->id = st.next_msg_id++;
        rec_set_state(r, MS_PENDING);
        add_op(J_MSG, 0, 0, m);
    }
    r->refs++;
}

static bool
journal_enqueue(struct queue *q, const struct qentry *e)
{
    struct msg *m = e->m;

    if (!st.open || st.closing || q->sid == 0 || q->store_gone ||
        !(msg_persistent(m) || q->ops->stores_transient) ||
        !q->ops->stores_messages)
        return false;
    if (q->ops->log) {
        slog_append(q, e);
        schedule();
        return true;
    }
    add_holder(m);
    add_enqueue(q, e);
    return true;
}

static bool
journal_delay_hold(uint32_t sid, uint64_t seq, struct msg *m,
                   uint64_t due_wall)
{
    if (!st.open || st.closing || sid == 0 || !msg_persistent(m))
        return false;
    add_holder(m);
    add_op(J_ENQ, sid, seq, m)->expires_wall = due_wall;
    return true;
}

static bool
journal_delay_ready(const struct msg *m)
{
    return msg_state(m) != MS_PENDING;
}

/* The J_DELIVER record of a stored entry, or NULL. */
static struct op *
add_deliver(struct queue *q, const struct qentry *e)
{
    if (!is_stored(q, e) || q->store_gone || st.closing)
        return NULL;
    struct op *o = add_op(J_DELIVER, q->sid, e->seq,
                          msg_state(e->m) == MS_WRITTEN ? NULL : e->m);
    o->deliveries = e->deliveries;
    return o;
}

static void
journal_delivered(struct queue *q, const struct qentry *e)
{
    add_deliver(q, e);
}

static void
journal_retry_wait(struct queue *q, const struct qentry *e, uint64_t delay)
{
    struct op *o = add_deliver(q, e);
    if (o)
        o->due_wall = wall_ms() + delay;
}

/* The settlement of a written entry; runs of them become one range. */
static void
add_ack(uint32_t sid, uint64_t seq)
{
    struct op *last = st.nops ? &st.ops[st.nops - 1] : NULL;
    if (last && last->type == J_ACK && last->m == NULL &&
        last->qid == sid && last->seq_hi + 1 == seq)
        last->seq_hi = seq;
    else
        add_op(J_ACK, sid, seq, NULL);
}

static void recheck_soon(void);

/* A paged entry ends: it no longer holds its segment. */
static void
paged_settled(struct queue *q, const struct qentry *e)
{
    if (e->scratch) {
        scratch_unref(e->pg.seg);
        return;
    }
    struct segacct *a = seg_of(e->pg.seg);
    a->paged--;
    a->paged_bytes -= paged_size(e->body_len);
    a->last_drop = now_ms();
    st.paged_bytes -= paged_size(e->body_len);
    if (q->sid && !q->store_gone)
        add_ack(q->sid, e->seq);
    if (e->pg.seg == seglog_first(st.log) && a->live == 0 && a->paged == 0)
        collect_dead_segments();
}

/* Holder 'sid' (a queue, or a delayed exchange) of 'm' at 'seq' lets it
 * go: with a settled record if 'record' (not when the holder is gone). */
static void
drop_holder(uint32_t sid, uint64_t seq, struct msg *m, bool record)
{
    struct store_rec *r = m->srec;

    r->refs--;
    if (record) {
        if (r->state == MS_WRITTEN) {
            add_ack(sid, seq);
        } else if (r->refs > 0) {
            add_op(J_ACK, sid, seq, m);
        } else {
            /* Never written, and now never will be: whoever waits to
             * confirm it need not. */
            if (r->state != MS_NONE)
                rec_set_state(r, MS_NONE);
            recheck_soon();
        }
    }
    if (r->refs == 0 && r->state == MS_WRITTEN)
        msg_dead(m);
}

static void
journal_settled(struct queue *q, const struct qentry *e)
{
    if (q->ops->log) {
        if (st.open && !st.closing && q->sid && !q->store_gone) {
            slog_settled(q, e);
            schedule();
        }
        return;
    }
    if (e->paged) {
        if (st.open && !st.closing)
            paged_settled(q, e);
        return;
    }
    struct msg *m = e->m;

    if (!is_stored(q, e) || st.closing)
        return;
    drop_holder(q->sid, e->seq, m, !q->store_gone);
}

static void
journal_delay_release(uint32_t sid, uint64_t seq, struct msg *m, bool routed)
{
    if (!st.open || st.closing || sid == 0 || msg_id(m) == 0)
        return;
    drop_holder(sid, seq, m, routed);
}

/* ---- paging (queue.h, pager.h) ---- */

static bool
journal_pages(void)
{
    return st.open && st.pager && !st.closing;
}

static bool
journal_memory_pressure(void)
{
    return alarm_paging();
}

static struct scratchacct *
scratch_of(uint64_t seg)
{
    if (seg < st.scr_base)
        fatalx("store: scratch segment %" PRIu64 " below base", seg);
    size_t i = (size_t)(seg - st.scr_base);
    array_reach(&st.scr, sizeof(*st.scr), &st.nscr, i);
    return &st.scr[i];
}

static void
free_pager_job(struct pager_job *j)
{
    free(j);
}

/* Delete scratch segment 'seg': nothing holds it, and it is full. */
static void
scratch_drop(uint64_t seg)
{
    struct scratchacct *a = scratch_of(seg);
    st.stats.scratch_bytes -= a->len;
    a->len = 0;
    struct pager_job *j = xcalloc(1, sizeof(*j));
    j->kind = PAGER_UNLINK;
    j->seg = (uint32_t)seg;
    j->done = free_pager_job;
    pager_submit(j);
    /* Keep the accounting array from growing with the numbers. */
    while (st.scr_base < st.scr_cur && st.scr[0].refs == 0 &&
           st.scr[0].len == 0) {
        memmove(st.scr, st.scr + 1, (st.nscr - 1) * sizeof(*st.scr));
        memset(&st.scr[st.nscr - 1], 0, sizeof(*st.scr));
        st.scr_base++;
    }
}

static void
scratch_unref(uint64_t seg)
{
    if (!st.pager)
        return;
    struct scratchacct *a = scratch_of(seg);
    if (--a->refs == 0 && seg != st.scr_cur)
        scratch_drop(seg);
}

/*
 * Messages paged out were freed, but malloc keeps freed memory for
 * reuse, inside its heap, where the process still holds it: once many
 * were paged out (at most once a second), give the free pages back.
 */
static void
journal_trim_memory(void)
{
    static uint64_t last_ms, last_out;
    if (st.stats.paged_out - last_out < 16384)
        return;
    uint64_t now = now_ms();
    if (now < last_ms + 1000)
        return;
    last_ms = now;
    last_out = st.stats.paged_out;
    malloc_trim(0);
}

static void
journal_msg_freed(struct msg *m)
{
    if (m->srec->state == MS_SCRATCH && st.open)
        scratch_unref(m->srec->seg);
    rec_release(m);
}

/* Whether the journal record of 'm' can be read back now: it was
 * written (not merely handed to the I/O thread). */
static bool
readable(const struct msg *m)
{
    const struct store_rec *r = m->srec;

    if (r->off == NO_OFF || r->seg == st.compacting)
        return false;
    return seglog_is_readable(st.log, r->seg, r->off, rec_size(m));
}

static bool
journal_page_out(struct queue *q, struct qentry *e)
{
    struct msg *m = e->m;

    if (!journal_pages())
        return false;
    if (q->ops->log) {
        if (!slog_page_out(q, e))
            return false;
        st.stats.paged_out++;
        return true;
    }
    struct store_rec *r = m->srec;

    if (msg_state(m) == MS_WRITTEN && readable(m)) {
        struct segacct *a = seg_of(r->seg);
        a->paged++;
        a->paged_bytes += paged_size(m->body_len);
        st.paged_bytes += paged_size(m->body_len);
        e->scratch = 0;
        if (is_stored(q, e) && --r->refs == 0) {
            a->live -= rec_size(m);
            st.stats.live_bytes -= rec_size(m);
        }
    } else if (msg_state(m) == MS_SCRATCH) {
        scratch_of(r->seg)->refs++;
        e->scratch = 1;
    } else {
        return false;
    }
    e->body_len = (uint32_t)m->body_len;
    e->pg.seg = r->seg;
    e->pg.off = r->off;
    e->paged = 1;
    st.stats.paged_out++;
    msg_unref(m);
    return true;
}

static void scratch_written(struct pager_job *j);

static void
journal_page_flush(void)
{
    if (st.scr_buf.len == 0)
        return;
    struct scratch_job *sj = xcalloc(1, sizeof(*sj));
    sj->job.kind = PAGER_WRITE;
    sj->job.seg = (uint32_t)st.scr_cur;
    sj->job.off = st.scr_buf_off;
    sj->job.data = st.scr_buf;
    st.scr_inflight += st.scr_buf.len;
    sj->msgs = st.scr_msgs;
    sj->n = st.scr_nmsgs;
    memset(&st.scr_buf, 0, sizeof(st.scr_buf));
    st.scr_msgs = NULL;
    st.scr_nmsgs = st.scr_msgs_cap = 0;
    st.scr_buf_off = st.scr_len;
    sj->job.done = scratch_written;
    pager_submit(&sj->job);
    if (st.scr_len >= SCRATCH_SEG_SIZE) {
        uint64_t full = st.scr_cur;
        st.scr_cur++;
        st.scr_len = st.scr_buf_off = 0;
        if (scratch_of(full)->refs == 0)
            scratch_drop(full);
    }
}

static void put_msg(struct wbuf *b, const struct msg *m);

static int
journal_page_prepare(struct queue *q, struct qentry *e, bool pressure)
{
    struct msg *m = e->m;

    if (q->ops->log)
        return q->sid && !q->store_gone ? slog_page_prepare(q, e) : 0;
    switch (msg_state(m)) {
    case MS_PENDING:
    case MS_SCRATCHING:
        return 1;
    case MS_WRITTEN:
        /* Not yet synced, or being compacted: soon. */
        return m->srec->off != NO_OFF;
    case MS_NONE:
        break;
    default:
        return 0;
    }
    if (!pressure || !journal_pages() || now_ms() < st.scr_retry_at)
        return 0;
    /* The pager thread has enough to write: after its next write. */
    if (st.scr_inflight + st.scr_buf.len >= SCRATCH_INFLIGHT_MAX)
        return 2;
    /* A message with no record, under memory pressure: to scratch. */
    size_t at = st.scr_buf.len;
    put_msg(&st.scr_buf, m);
    struct store_rec *r = rec_of(m);
    rec_set_state(r, MS_SCRATCHING);
    r->seg = (uint32_t)st.scr_cur;
    r->off = (uint32_t)(st.scr_buf_off + at);
    st.scr_len += rec_size(m);
    struct scratchacct *a = scratch_of(st.scr_cur);
    a->refs++;
    a->len += rec_size(m);
    st.stats.scratch_bytes += rec_size(m);
    if (st.scr_nmsgs == st.scr_msgs_cap) {
        st.scr_msgs_cap = st.scr_msgs_cap ? st.scr_msgs_cap * 2 : 256;
        st.scr_msgs = xrealloc(st.scr_msgs, st.scr_msgs_cap * sizeof(*st.scr_msgs));
    }
    st.scr_msgs[st.scr_nmsgs++] = msg_ref(m);
    if (st.scr_buf.len >= SCRATCH_PASS_MAX || st.scr_len >= SCRATCH_SEG_SIZE) {
        journal_page_flush();
        return 2;
    }
    return 1;
}

static void
scratch_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    /* The timer is what ends the rest: the loop's clock it was set on may
     * lag now_ms() by the turn that set it, so scr_retry_at could still be
     * a few ms ahead, and nothing would look again. */
    st.scr_retry_at = 0;
    if (st.open && !st.closing)
        queue_pager_kick(true);
}

/* A scratch write is done: its messages may be paged now (or, if it
 * failed, stay in memory, and the scratch area rests for a second). */
static void
scratch_written(struct pager_job *j)
{
    struct scratch_job *sj = (struct scratch_job *)j;
    static bool warned;

    st.scr_inflight -= j->data.len;
    if (j->err) {
        if (!warned)
            log_warnx("store: cannot write to the scratch area %s (%s): "
                      "transient messages stay in memory for now",
                      pager_scratch_dir(), strerror(j->err));
        warned = true;
        st.scr_retry_at = now_ms() + 1000;
        /* Then every queue looks again at what it could not page. */
        if (st.scr_retry == NULL)
            st.scr_retry = evtimer_new(broker.base, scratch_retry_cb, NULL);
        struct timeval tv = { 1, 0 };
        evtimer_add(st.scr_retry, &tv);
    } else if (warned) {
        log_info("store: the scratch area takes writes again");
        warned = false;
    }
    for (size_t i = 0; i < sj->n; i++) {
        struct msg *m = sj->msgs[i];
        struct store_rec *r = m->srec;
        if (r->state != MS_SCRATCHING) {
            /* A durable holder came meanwhile (add_holder): the copy
             * is not needed. */
            scratch_unref(j->seg);
        } else if (j->err) {
            rec_set_state(r, MS_NONE);
            scratch_unref(r->seg);
        } else {
            rec_set_state(r, MS_SCRATCH);
        }
        msg_unref(m);
    }
    free(sj->msgs);
    wbuf_free(&j->data);
    free(sj);
    if (st.open && !st.closing)
        queue_pager_kick(false);
}

static struct msg *
journal_page_decode(const struct qentry *e, const struct pager_read *r)
{
    struct replay_fields f;

    /* The pager thread checked the record (pager.h). */
    if (r->len >= REC_HDR && r->buf[8] == J_SMSG)
        return slog_page_decode(e, r);
    if (r->len < REC_HDR || r->buf[8] != J_MSG)
        return NULL;
    struct replay_msg rm = { 0 };
    rm.payload = r->buf + REC_HDR;
    rm.len = r->len - REC_HDR;
    if (!replay_msg_decode(&rm, &f) || f.body_len != e->body_len)
        return NULL;
    struct msg *m = msg_new((struct amqp_bytes){ f.exchange, f.exchange_len },
                            (struct amqp_bytes){ f.rkey, f.rkey_len }, f.hdr,
                            f.hdr_len, &f.ch, false, &st.envs);
    msg_body_copy_in(m, f.body);
    struct rbuf rb;
    rbuf_init(&rb, rm.payload, rm.len);
    struct store_rec *sr = rec_of(m);
    sr->id = rbuf_u64(&rb);
    sr->seg = r->seg;
    sr->off = r->off;
    return m;
}

static void
journal_page_in(struct queue *q, struct qentry *e, struct msg *m)
{
    st.stats.paged_in++;
    if (q->ops->log) {
        slog_page_in(q, e, m);
        return;
    }
    struct store_rec *r = rec_of(m);

    if (e->scratch) {
        /* The entry's hold on the scratch segment becomes the message's. */
        r->id = 0;
        rec_set_state(r, MS_SCRATCH);
    } else {
        struct segacct *a = seg_of(e->pg.seg);
        a->paged--;
        a->paged_bytes -= paged_size(e->body_len);
        st.paged_bytes -= paged_size(e->body_len);
        rec_set_state(r, MS_WRITTEN);
        if (q->sid && !q->store_gone) {
            r->refs = 1;
            a->live += rec_size(m);
            st.stats.live_bytes += rec_size(m);
        }
    }
    e->paged = 0;
    e->scratch = 0;
    e->m = m;
}

static void
journal_queue_gone(struct queue *q)
{
    if (q->sid == 0)
        return;
    q->store_gone = true;
    if (q->ops->log && st.pager)
        pager_submit(offsets_forget_job(q->sid));
    if (q->ops->log && st.open && !st.closing) {
        slog_gone(q);
        schedule();
    }
}

/* A stream's consumer names: its file replaced on the pager thread. */
static void
journal_offsets_save(struct queue *q, const struct stream_offset *v, size_t n)
{
    if (st.pager && q->sid && !q->store_gone)
        pager_submit(offsets_save_job(q->sid, v, n));
}

static void
journal_tx_begin(void)
{
    if (!st.open)
        return;
    st.in_tx = true;
    st.tx_start = st.nops;
    add_op(J_TX_BEGIN, 0, st.next_txid++, NULL);
}

static bool
journal_tx_end(void)
{
    if (!st.open || !st.in_tx)
        return false;
    st.in_tx = false;
    if (st.nops == st.tx_start + 1) {
        st.nops--;
        return false;
    }
    add_op(J_TX_COMMIT, 0, st.ops[st.tx_start].seq, NULL);
    return true;
}

static uint64_t
journal_open_batch(void)
{
    return st.open_batch;
}

static uint64_t
journal_durable_batch(void)
{
    return st.durable_batch;
}

static bool
journal_has_pending(void)
{
    return st.nops > 0 || st.defs.len > 0 || slogs_pending();
}

static uint64_t
journal_defs_written(void)
{
    return st.defs_written;
}

/* The store's listener of definition changes (defs.h), from store_open
 * to store_close. */
static void
journal_defs_changed(enum defs_event ev, const void *obj, void *arg)
{
    (void)arg;
    if (!st.open || st.closing)
        return;
    if (ev == DEFS_QUEUE_ADDED) {
        struct queue *q = (struct queue *)obj;
        if (store_keeps_queue(q) && q->sid == 0)
            q->sid = st.next_qid++;
    }
    /* A durable delayed exchange's held messages are entries under an
     * id from the queues' space (delayed.h). */
    if (ev == DEFS_EXCHANGE_ADDED) {
        struct exchange *x = (struct exchange *)obj;
        if (x->ops->holds_messages && store_keeps_exchange(x) &&
            x->sid == 0)
            x->sid = st.next_qid++;
    }
    if (defs_encode(&st.defs, ev, obj)) {
        st.defs_written++;
        st.defs_log_records++;
        if (ev == DEFS_QUEUE_ADDED || ev == DEFS_EXCHANGE_ADDED ||
            ev == DEFS_BINDING_ADDED || ev == DEFS_VHOST_ADDED ||
            ev == DEFS_USER_ADDED || ev == DEFS_PERM_ADDED ||
            ev == DEFS_POLICY_ADDED)
            st.defs_live++;
        else if (st.defs_live > 0)
            st.defs_live--;
        schedule();
    }
}

/* ---- waiters ---- */

static bool
journal_msg_unneeded(const struct msg *m)
{
    return m != NULL && msg_id(m) != 0 && m->srec->state == MS_NONE &&
           m->srec->refs == 0;
}

static void
recheck_cb(evutil_socket_t fd, short what, void *arg)
{
    struct store_waiter *w, *next;
    (void)fd;
    (void)what;
    (void)arg;

    /* A callback may unwait itself, not others. */
    for (w = TAILQ_FIRST(&st.waiters); w != NULL; w = next) {
        next = TAILQ_NEXT(w, link);
        if (w->recheck)
            w->recheck(w);
    }
    st.recheck_from = 0;
}

static uint64_t
journal_recheck_batch(void)
{
    return st.recheck_from;
}

/* At the end of this loop turn, waiters look again (store_waiter). */
static void
recheck_soon(void)
{
    /* The message's record was not written: its batch is at least the
     * oldest one with changes still waiting. */
    if (st.recheck_from == 0)
        st.recheck_from = st.nops ? st.ops[0].batch : st.open_batch;
    if (st.recheck == NULL)
        st.recheck = event_new(broker.base, -1, 0, recheck_cb, NULL);
    event_active(st.recheck, EV_TIMEOUT, 0);
}

static void journal_unwait(struct store_waiter *w);

static void
journal_wait(struct store_waiter *w, uint64_t batch)
{
    journal_unwait(w);
    w->batch = batch;
    if (!st.open || batch <= st.durable_batch) {
        w->batch = st.durable_batch;
        w->durable(w);
        return;
    }
    w->waiting = true;
    TAILQ_INSERT_TAIL(&st.waiters, w, link);
}

static void
journal_unwait(struct store_waiter *w)
{
    if (!w->waiting)
        return;
    TAILQ_REMOVE(&st.waiters, w, link);
    w->waiting = false;
}

static void
wake_waiters(void)
{
    struct waiter_list ready = TAILQ_HEAD_INITIALIZER(ready);
    struct store_waiter *w, *next;

    for (w = TAILQ_FIRST(&st.waiters); w != NULL; w = next) {
        next = TAILQ_NEXT(w, link);
        if (w->batch <= st.durable_batch) {
            TAILQ_REMOVE(&st.waiters, w, link);
            TAILQ_INSERT_TAIL(&ready, w, link);
        }
    }
    /* A callback may wait again or unwait others: take them one by one. */
    while ((w = TAILQ_FIRST(&ready)) != NULL) {
        TAILQ_REMOVE(&ready, w, link);
        w->waiting = false;
        w->batch = st.durable_batch;
        w->durable(w);
    }
}

/* ---- serialising a batch ---- */

void
store_put_fields(struct wbuf *b, const struct msg *m)
{
    wbuf_str(b, msg_exchange(m), msg_exchange_len(m));
    wbuf_str(b, msg_rkey(m), msg_rkey_len(m));
    wbuf_str(b, msg_hdr(m), msg_hdr_len(m));
    wbuf_u64(b, m->body_len);
    wbuf_reserve(b, (size_t)m->body_len);
    msg_body_copy(m, b->p + b->len);
    b->len += (size_t)m->body_len;
}

static void
put_msg(struct wbuf *b, const struct msg *m)
{
    size_t at = rec_begin(b, J_MSG);
    wbuf_u64(b, msg_id(m));
    store_put_fields(b, m);
    rec_end(b, at);
    if (b->len - at != rec_size(m))
        fatalx("store: rec_size disagrees with put_msg");
}

/*
 * One job writes at most this much: a burst larger than that goes out in
 * several writes and syncs, and the confirms of its first part need not
 * wait for the rest. A job is cut only before a message (so a message's
 * enqueues stay with it) and never inside a transaction. A test may set
 * a smaller one (ROOST_TEST_JOB_MAX_BYTES), so that a split does not
 * depend on how fast the machine publishes.
 */
#define JOB_MAX_BYTES (16u * 1024 * 1024)

/* Serialise the open batch's changes into 'b', up to about 'limit'
 * bytes; returns how many were taken (the rest stay, in order). */
static size_t
serialise(struct wbuf *b, size_t limit, uint64_t stop)
{
    bool in_tx = false;
    size_t i;

    for (i = 0; i < st.nops; i++) {
        struct op *o = &st.ops[i];
        struct msg *m = o->m;
        size_t at = b->len;
        struct seglog_pos p;

        /* A batch whose streams' records wait for a later job waits with
         * them (a batch's ops never straddle a transaction). */
        if (o->batch >= stop && !in_tx)
            break;
        if (o->type == J_TX_BEGIN)
            in_tx = true;
        else if (o->type == J_TX_COMMIT)
            in_tx = false;
        else if (o->type == J_MSG && !in_tx && b->len >= limit)
            break;

        switch (o->type) {
        case J_MSG:
            if (m->srec->refs == 0) {
                /* Settled before it was written: never written. */
                if (m->srec->state != MS_NONE)
                    rec_set_state(m->srec, MS_NONE);
                break;
            }
            put_msg(b, m);
            p = seglog_add(st.log, at, st.batch_wall);
            if (st.job.nmsgs == st.job.msgs_cap) {
                st.job.msgs_cap = st.job.msgs_cap ? st.job.msgs_cap * 2 : 1024;
                st.job.msgs = xrealloc(st.job.msgs, st.job.msgs_cap *
                                                    sizeof(*st.job.msgs));
            }
            st.job.msgs[st.job.nmsgs++] = msg_ref(m);
            rec_set_state(m->srec, MS_WRITTEN);
            m->srec->seg = (uint32_t)p.seg;
            m->srec->off = (uint32_t)p.pos;
            *live_of(p.seg) += rec_size(m);
            st.stats.live_bytes += rec_size(m);
            st.stats.msgs_written++;
            break;
        case J_ENQ:
            if (msg_state(m) != MS_WRITTEN)
                break;
            at = rec_begin(b, J_ENQ);
            wbuf_u32(b, o->qid);
            wbuf_u64(b, o->seq);
            wbuf_u64(b, m->srec->id);
            wbuf_u64(b, o->expires_wall);
            wbuf_u32(b, o->deliveries);
            if (o->enq_wall)
                wbuf_u64(b, o->enq_wall);
            rec_end(b, at);
            break;
        case J_DELIVER:
            if (m && msg_state(m) != MS_WRITTEN)
                break;
            at = rec_begin(b, J_DELIVER);
            wbuf_u32(b, o->qid);
            wbuf_u64(b, o->seq);
            wbuf_u32(b, o->deliveries);
            if (o->due_wall)
                wbuf_u64(b, o->due_wall);
            rec_end(b, at);
            break;
        case J_ACK:
            if (m && msg_state(m) != MS_WRITTEN)
                break;
            at = rec_begin(b, J_ACK);
            wbuf_u32(b, o->qid);
            wbuf_u64(b, o->seq);
            wbuf_u64(b, o->seq_hi);
            rec_end(b, at);
            break;
        case J_TX_BEGIN:
        case J_TX_COMMIT:
            at = rec_begin(b, o->type);
            wbuf_u64(b, o->seq);
            rec_end(b, at);
            break;
        }
        if (o->type != J_MSG && b->len > at)
            (void)seglog_add(st.log, at, st.batch_wall);
        st.stats.records++;
    }
    for (size_t k = 0; k < i; k++)
        msg_unref(st.ops[k].m);
    if (i > st.stats.batch_max_records)
        st.stats.batch_max_records = i;
    memmove(st.ops, st.ops + i, (st.nops - i) * sizeof(*st.ops));
    st.nops -= i;
    return i;
}

/* The record each segment of the journal opens with (seglog.h). */
void
store_seg_header(struct wbuf *b, uint64_t seg)
{
    size_t at = rec_begin(b, J_SEG);
    wbuf_u32(b, STORE_FORMAT);
    wbuf_u64(b, seg);
    rec_end(b, at);
}

static void job_done(struct io_job *j);

/* Hand the open batch to the thread, if it is idle and there is work. */
static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct io_job *j = &st.job;
    (void)fd;
    (void)what;
    (void)arg;

    if (st.busy || st.failed || st.in_tx)
        return;
    if (st.nops == 0 && st.defs.len == 0 && !seglog_has_unlinks(st.log) &&
        !slogs_pending())
        return;
    j->batch = st.open_batch++;
    j->journal.len = 0;
    j->durable_upto = 0;
    /* The streams' records first (io.c writes them first too): the
     * journal never records a batch whose stream records are left for
     * a later job, so a message moved from a queue into a stream is
     * never settled on disk before it is in the stream. */
    uint64_t left = slogs_serialise(j, st.job_max);
    if (st.nops > 0) {
        (void)seglog_batch_begin(st.log, &j->journal);
        st.batch_wall = wall_ms();
        serialise(&j->journal, st.job_max, left);
        seglog_batch_end(st.log, &j->journal);
    }
    j->seg = seglog_current(st.log);
    /* What is left over belongs to batches this job does not finish. */
    j->durable_upto = st.nops ? st.ops[0].batch - 1 : j->batch;
    if (left != UINT64_MAX && left - 1 < j->durable_upto)
        j->durable_upto = left - 1;
    for (size_t i = 0; i < j->nstreams; i++)
        st.stats.bytes_written += j->streams[i].data.len;
    /* Definitions: compact into a snapshot once the log is mostly
     * history, so a change costs what it changes, amortised. */
    j->snapshot = false;
    j->defs.len = 0;
    j->defs_snap.len = 0;
    if (st.defs.len > 0 &&
        st.defs_log_records > 2 * st.defs_live + 1024) {
        st.defs_gen++;
        st.defs_live = defs_snapshot(&j->defs_snap, st.defs_gen);
        defs_header(&j->defs, st.defs_gen);
        st.defs_log_records = 0;
        j->snapshot = true;
    } else {
        wbuf_bytes(&j->defs, st.defs.p, st.defs.len);
    }
    st.defs.len = 0;
    free(j->unlink);
    seglog_take_unlinks(st.log, &j->unlink, &j->nunlink);
    st.busy = true;
    st.stats.batches++;
    st.stats.bytes_written += j->journal.len + j->defs.len + j->defs_snap.len;
    io_submit(j);
}

/* Write the failed job's batch again, whole, at the start of a new
 * segment: the old one is abandoned (what it held before the batch was
 * synced and stays valid). The batch's messages move with it. */
static void
rewrite_job(struct io_job *j)
{
    uint64_t old = j->seg;

    j->seg = seglog_rewrite(st.log, &j->journal);
    for (size_t i = 0; i < j->nmsgs; i++) {
        struct msg *m = j->msgs[i];
        struct store_rec *r = m->srec;
        if (r->state != MS_WRITTEN || r->seg != old)
            continue;
        r->seg = (uint32_t)j->seg;
        r->off = (uint32_t)seglog_moved(st.log, r->off);
        if (r->refs > 0) {
            *live_of(old) -= rec_size(m);
            *live_of(j->seg) += rec_size(m);
        }
    }
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    io_submit(&st.job);
}

/* ---- compaction ---- */

struct compact_ctx {
    uint64_t seg;
    uint64_t copied;
    bool paged;                 /* the queue has entries paged to 'seg' */
};

/* Whether a holder of 'm' writes its enqueue record again: 'm' is in
 * the segment being compacted, and is written again (once). */
static bool
compact_msg(struct compact_ctx *cc, struct msg *m)
{
    struct store_rec *r = m->srec;

    if (r->state == MS_WRITTEN && r->seg == cc->seg) {
        *live_of(r->seg) -= rec_size(m);
        st.stats.live_bytes -= rec_size(m);
        cc->copied += rec_size(m);
        rec_set_state(r, MS_PENDING);
        add_op(J_MSG, 0, 0, m);
        return true;
    }
    return r->state == MS_PENDING && r->seg == cc->seg;
}

/* A live entry whose message is in the segment being compacted: write
 * the message again (once) and the entry, as it is now, after it. An
 * entry paged to it is read back first (maybe_compact). */
static bool
copy_entry(struct queue *q, struct qentry *e, struct compact_ctx *cc)
{
    /* A stream's records are in its own log. */
    if (q->ops->log)
        return false;
    if (e->paged) {
        if (!e->scratch && e->pg.seg == cc->seg)
            cc->paged = true;
        return false;
    }
    struct msg *m = e->m;
    if (q->sid == 0 || q->store_gone || msg_id(m) == 0)
        return false;
    if (!compact_msg(cc, m))
        return false;
    add_enqueue(q, e);
    return true;
}

static void
compact_entry(struct queue *q, struct qentry *e, void *arg)
{
    copy_entry(q, e, arg);
}

/* One waiting out a requeue delay: its new enqueue record is followed
 * by when it is due, which the old segment's J_DELIVER said. */
static void
compact_waiting(struct queue *q, struct qentry *e, uint64_t due, void *arg)
{
    uint64_t now = now_ms();
    if (copy_entry(q, e, arg))
        journal_retry_wait(q, e, due > now ? due - now : 0);
}

/* The same for a message held by a delayed exchange (delayed.h). */
static void
compact_held(uint32_t sid, uint64_t seq, uint64_t due_wall, struct msg *m,
             void *arg)
{
    if (compact_msg(arg, m))
        add_op(J_ENQ, sid, seq, m)->expires_wall = due_wall;
}

static void maybe_compact(void);

static void
compact_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    maybe_compact();
}

static void
compact_read_done(void)
{
    if (st.compact_reads > 0 && --st.compact_reads == 0 && !st.closing)
        maybe_compact();
}

/*
 * The oldest segment holds the journal back: every segment after it
 * waits for it to go. Copy its live messages forward when at most half
 * of it is live (each byte copied frees at least one) and that has not
 * changed for a second, or when the
 * journal holds more than twice the live bytes and two segments more
 * (a long-lived backlog at the front would otherwise keep any number of
 * dead segments behind it). Messages paged to it are read back first
 * (at most a segment's worth in memory for a moment), and copied when
 * the reads are done; meanwhile nothing is paged to it again. Then the
 * segment is deleted with the batch that holds the copies, after its
 * sync.
 */
static void
maybe_compact(void)
{
    static uint64_t stuck;

    if (st.compact_reads > 0 || st.closing || !st.pager)
        return;
    bool resumed = st.compacting != UINT64_MAX;
    st.compacting = UINT64_MAX;
    uint64_t first = seglog_first(st.log);
    if (first >= seglog_current(st.log) || first == stuck)
        goto out;
    struct segacct *a = seg_of(first);
    uint64_t written = seglog_seg_bytes(st.log, first);
    uint64_t live = a->live + a->paged_bytes, now = now_ms();
    /* A front segment that is being consumed is not copied: it empties
     * soon enough by itself. Only one in which nothing ended for a
     * second is (a few messages that stay); an idle broker looks again
     * when that second is over. */
    bool sparse = live * 2 <= written;
    if (sparse && now < a->last_drop + 1000) {
        if (st.compact_timer == NULL)
            st.compact_timer = evtimer_new(broker.base, compact_timer_cb, NULL);
        uint64_t ms = a->last_drop + 1000 - now;
        struct timeval tv = { (time_t)(ms / 1000),
                              (suseconds_t)(ms % 1000) * 1000 };
        evtimer_add(st.compact_timer, &tv);
        sparse = false;
    }
    bool bloated = seglog_bytes(st.log) >
                   2 * (st.stats.live_bytes + st.paged_bytes) + 2 * st.seg_size;
    if ((a->live == 0 && a->paged == 0) || !(sparse || bloated))
        goto out;
    struct compact_ctx cc = { first, 0, false };
    size_t pos = 0, qpos, reads = 0;
    struct hmap_slot *s, *qs;
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
        struct vhost *vh = s->val;
        qpos = 0;
        while ((qs = hmap_next(&vh->queues, &qpos)) != NULL) {
            cc.paged = false;
            queue_foreach_ready(qs->val, compact_entry, &cc);
            queue_foreach_waiting(qs->val, compact_waiting, &cc);
            if (cc.paged)
                reads += queue_page_in_seg(qs->val, (uint32_t)cc.seg,
                                           compact_read_done);
        }
    }
    session_hooks.foreach_unacked(compact_entry, &cc);
    delayed_foreach_stored(compact_held, &cc);
    st.compactions++;
    st.copied_bytes += cc.copied;
    log_debug("store: compacting segment %" PRIu64 ": %" PRIu64 " of %" PRIu64
              " bytes live, copied forward (%s)%s", cc.seg, cc.copied,
              written, sparse ? "mostly dead" : "journal over twice live",
              reads ? "; reading paged messages back first" : "");
    if (reads) {
        st.compacting = cc.seg;
        st.compact_reads = reads;
        return;
    }
    if (a->live == 0 && a->paged == 0) {
        collect_dead_segments();
    } else {
        stuck = cc.seg;
        log_warnx("store: segment %" PRIu64 " keeps %" PRIu64 " live bytes "
                  "that compaction did not find", cc.seg, a->live + a->paged_bytes);
    }
out:
    /* What was read back for it may leave memory again. */
    if (resumed)
        queue_pager_kick(true);
}

static void
release_job_msgs(struct io_job *j)
{
    for (size_t i = 0; i < j->nmsgs; i++)
        msg_unref(j->msgs[i]);
    j->nmsgs = 0;
}

static void
job_done(struct io_job *j)
{
    if (j->err != 0) {
        st.failures++;
        snprintf(st.fail_msg, sizeof(st.fail_msg), "%s", j->errmsg);
        log_warnx("store: batch %" PRIu64 " not written (%s); segment %" PRIu64
                  " abandoned, nothing in the batch is confirmed, writing it "
                  "again to a new segment", j->batch, j->errmsg, j->seg);
        rewrite_job(j);
        slogs_rewrite(j);
        if (st.failures < 2) {
            io_submit(j);
            return;
        }
        if (!st.failed) {
            st.failed = true;
            log_warnx("store: writes keep failing: publishers are blocked "
                      "until the disk takes writes again (retrying every "
                      "second)");
        }
        struct timeval tv = { 1, 0 };
        evtimer_add(st.retry, &tv);
        return;
    }
    st.busy = false;
    if (st.failed) {
        st.failed = false;
        log_info("store: writes succeed again; publishers may go on");
    }
    st.failures = 0;
    st.stats.syncs += j->synced;
    if (j->durable_upto > st.durable_batch)
        st.durable_batch = j->durable_upto;
    if (j->journal.len > 0) {
        seglog_batch_synced(st.log);
    }
    bool wrote_msgs = slogs_job_done(j) || j->nmsgs > 0;
    release_job_msgs(j);
    wake_waiters();
    maybe_compact();
    if (wrote_msgs)
        queue_pager_kick(false);
    schedule();
}

static const char *
journal_failure(void)
{
    return st.fail_msg;
}

static bool
journal_is_failed(void)
{
    return st.failed;
}

static void
journal_get_stats(struct store_stats *s)
{
    *s = st.stats;
    s->segments = seglog_count(st.log);
    s->disk_bytes = 0;
}

/* ---- open and close ---- */

int
store_read_file(const char *path, uint8_t **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;

    *out = NULL;
    *len = 0;
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return -1;
    }
    *out = xmalloc((size_t)sb.st_size + 1);
    while (*len < (size_t)sb.st_size) {
        ssize_t n = read(fd, *out + *len, (size_t)sb.st_size - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            free(*out);
            *out = NULL;
            *len = 0;
            errno = e;
            return -1;
        }
        if (n == 0)
            break;
        *len += (size_t)n;
    }
    close(fd);
    return 1;
}

int
store_sync_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int r = fsync(dfd);
    close(dfd);
    return r;
}

static int
write_synced(const char *dir, const char *name, const char *text)
{
    char path[4200], tmp[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n || fsync(fd) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0)
        return -1;
    return store_sync_dir(dir);
}

int
store_lock_dir(const char *dir, char *err, size_t errlen)
{
    char path[4200], pid[32];
    snprintf(path, sizeof(path), "%s/LOCK", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        snprintf(err, errlen, "data directory %s is in use by process %s "
                 "(%s is locked)", dir, pid[0] ? pid : "?", path);
        close(fd);
        return -1;
    }
    snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, strlen(pid), 0) < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Check the format version of 'dir' (writing it if new, and saying
 * so in '*is_new'). */
static int
store_check_format(const char *dir, bool *is_new, char *err, size_t errlen)
{
    char path[4200];
    uint8_t *text;
    size_t len;

    *is_new = false;
    snprintf(path, sizeof(path), "%s/FORMAT", dir);
    int r = store_read_file(path, &text, &len);
    if (r < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (r == 0) {
        char line[64];
        snprintf(line, sizeof(line), "roost-store %d\n", STORE_FORMAT);
        if (write_synced(dir, "FORMAT", line) != 0) {
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
            return -1;
        }
        *is_new = true;
        return 0;
    }
    text[len] = '\0';
    int v = 0;
    if (sscanf((char *)text, "roost-store %d", &v) != 1 || v != STORE_FORMAT) {
        snprintf(err, errlen, "%s says the data is in format '%.*s'; this "
                 "roostd reads 'roost-store %d' only (an older roostd wrote "
                 "it, or a newer one: use the release that did, or migrate)",
                 path, (int)strcspn((char *)text, "\n"), (char *)text,
                 STORE_FORMAT);
        free(text);
        return -1;
    }
    free(text);
    return 0;
}

/* The data directory holds password hashes and messages: say so when
 * its group or others may look in. */
static void
warn_if_open(const char *dir)
{
    struct stat sb;

    if (stat(dir, &sb) == 0 && (sb.st_mode & (S_IRWXG | S_IRWXO)))
        log_warnx("store: the data directory %s is accessible by its group "
                  "or others (mode %04o), and holds password hashes and "
                  "messages: make it 0700", dir,
                  (unsigned)(sb.st_mode & 07777));
}

/* The directory 'name' in 'dir', made if missing; anything else there
 * (a plain file) stops the start with a message that says so. */
static int
make_subdir(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[4200];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (mkdir(path, 0700) == 0)
        return 0;
    if (errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    if (stat(path, &sb) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s is not a directory (%s): the store keeps "
                 "its %s there; move it out of the way", path,
                 S_ISREG(sb.st_mode) ? "a plain file" : "not a directory",
                 strcmp(name, "msgs") == 0      ? "message segments"
                 : strcmp(name, "offsets") == 0 ? "streams' consumer offsets"
                 : strcmp(name, "streams") == 0 ? "streams' own logs"
                                                : "paged-out transient messages");
        return -1;
    }
    return 0;
}

int
store_open(const char *dir, const struct config *cfg, char *err, size_t errlen)
{
    char path[4200];

    store_use(&store_journal_ops);
    snprintf(st.dir, sizeof(st.dir), "%s", dir);
    st.job_max = test_hook_number("ROOST_TEST_JOB_MAX_BYTES");
    if (st.job_max == 0 || st.job_max > JOB_MAX_BYTES)
        st.job_max = JOB_MAX_BYTES;
    st.lock_fd = store_lock_dir(dir, err, errlen);
    if (st.lock_fd < 0)
        return -1;
    if (store_check_format(dir, &st.is_new, err, errlen) != 0)
        return -1;
    warn_if_open(dir);
    if (make_subdir(dir, "scratch", err, errlen) != 0 ||
        make_subdir(dir, "msgs", err, errlen) != 0 ||
        make_subdir(dir, "offsets", err, errlen) != 0 ||
        make_subdir(dir, "streams", err, errlen) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/msgs", dir);
    st.seg_size = (uint64_t)cfg->store_segment_size;
    if (slogs_open(dir, st.seg_size, &st.envs) != 0) {
        snprintf(err, errlen, "cannot open %s/streams: %s", dir,
                 strerror(errno));
        return -1;
    }
    const struct seglog_config lc = {
        .dir = path, .name = "store", .seg_size = st.seg_size,
        .udata_size = sizeof(struct segacct), .header = store_seg_header,
    };
    st.log = seglog_new(&lc);
    st.next_msg_id = 1;
    st.next_qid = 1;
    st.next_txid = 1;
    st.open_batch = 1;
    st.durable_batch = 0;
    TAILQ_INIT(&st.waiters);
    st.kick = event_new(broker.base, -1, 0, kick_cb, NULL);
    st.retry = evtimer_new(broker.base, retry_cb, NULL);
    st.open = true;
    defs_listen(journal_defs_changed, NULL);
    return 0;
}

/* ---- recovery ---- */

static void
recover_tx_cut(void *arg, size_t msgs, size_t enqs, size_t acks, size_t dels)
{
    (void)msgs;
    (void)enqs;
    (void)acks;
    (void)dels;
    log_warnx("store: %s: a transaction without its commit record is "
              "ignored", (const char *)arg);
}

/* The message of record 'rm', made once: 'made' has a slot for each of
 * the replay's messages. */
static struct msg *
restore_msg(const struct replay *rp, const struct replay_msg *rm,
            struct msg **made, const uint64_t *seg_numbers, void **maps)
{
    struct msg **slot = &made[rm - rp->msgs];
    struct replay_fields f;

    if (*slot)
        return *slot;
    if (!replay_msg_decode(rm, &f)) {
        log_warnx("store: message %" PRIu64 " does not decode; dropped", rm->id);
        return NULL;
    }
    struct msg *m = msg_new((struct amqp_bytes){ f.exchange, f.exchange_len },
                            (struct amqp_bytes){ f.rkey, f.rkey_len }, f.hdr,
                            f.hdr_len, &f.ch, false, &st.envs);
    msg_body_copy_in(m, f.body);
    struct store_rec *r = rec_of(m);
    r->id = rm->id;
    rec_set_state(r, MS_WRITTEN);
    r->seg = (uint32_t)seg_numbers[rm->seg];
    r->off = (uint32_t)(rm->payload - (const uint8_t *)maps[rm->seg] -
                              REC_HDR);
    *live_of(r->seg) += rec_size(m);
    st.stats.live_bytes += rec_size(m);
    *slot = m;
    return m;
}

/* Entry 'e' restored paged into 'qe', reading its message (and the
 * priority it has, into '*priority') from the oldest copy: false if that copy is newer than the entry's enqueue
 * record (a torn compaction) or does not decode. */
static bool
restore_paged(const struct replay *rp, const struct replay_entry *e,
              const uint64_t *seg_numbers, const uint8_t *const *maps,
              struct qentry *qe, uint8_t *priority)
{
    const struct replay_msg *o = e->msg;
    struct replay_fields f;

    while (o > rp->msgs && o[-1].id == o->id)
        o--;
    if (o->seg > e->enq_seg || !replay_msg_decode(o, &f))
        return false;
    uint64_t seg = seg_numbers[o->seg];
    qe->paged = 1;
    qe->pg.seg = (uint32_t)seg;
    qe->pg.off = (uint32_t)(o->payload - maps[o->seg] - REC_HDR);
    qe->body_len = (uint32_t)f.body_len;
    *priority = (f.ch.props.flags & AMQP_BASIC_PRIORITY_FLAG)
                    ? f.ch.props.priority : 0;
    struct segacct *a = seg_of(seg);
    a->paged++;
    a->paged_bytes += paged_size(qe->body_len);
    st.paged_bytes += paged_size(qe->body_len);
    return true;
}

/*
 * One more holder of recovered message 'm', whose enqueue record is in
 * segment 'es'. The message lives, for the accounting, in the oldest
 * segment that a live record of it is in: a compaction cut short by a
 * crash can leave its newest copy in one segment and an entry's only
 * enqueue record in an older one, which must then not be deleted as if
 * nothing in it were live. (Its record is then not where its record
 * says: it is not paged from there.)
 */
static void
restore_holder(struct msg *m, uint64_t es)
{
    struct store_rec *r = m->srec;

    if (es < r->seg) {
        *live_of(r->seg) -= rec_size(m);
        r->seg = (uint32_t)es;
        r->off = NO_OFF;
        *live_of(es) += rec_size(m);
    }
    r->refs++;
}

/* Every kept queue by its store id, for recovery. */
static void
index_queues(struct hmap *by_sid)
{
    size_t pos = 0, qpos;
    struct hmap_slot *s, *qs;

    hmap_init(by_sid);
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
        struct vhost *vh = s->val;
        qpos = 0;
        while ((qs = hmap_next(&vh->queues, &qpos)) != NULL) {
            struct queue *q = qs->val;
            if (q->sid)
                hmap_put(by_sid, &q->sid, sizeof(q->sid), q);
        }
    }
}

static struct queue *
queue_by_sid(const struct hmap *by_sid, uint32_t sid)
{
    return hmap_get(by_sid, &sid, sizeof(sid));
}

static struct queue *
stream_of_sid(uint32_t sid, void *arg)
{
    return queue_by_sid(arg, sid);
}

/* Every kept delayed exchange by its store id (delayed.h). */
static void
index_delayed(struct hmap *by_sid)
{
    size_t pos = 0, xpos;
    struct hmap_slot *s, *xs;

    hmap_init(by_sid);
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
        struct vhost *vh = s->val;
        xpos = 0;
        while ((xs = hmap_next(&vh->exchanges, &xpos)) != NULL) {
            struct exchange *x = xs->val;
            if (x->sid && x->ops->holds_messages)
                hmap_put(by_sid, &x->sid, sizeof(x->sid), x);
        }
    }
}

/* What holds entries, by store id: queues and delayed exchanges. */
struct holders {
    struct hmap queues, delayed;
    uint64_t delayed_known;     /* of the ids looked up */
};

/* replay_walk's lookup: a queue or a delayed exchange. */
static void *
find_queue(void *arg, uint32_t sid)
{
    struct holders *h = arg;
    void *q = queue_by_sid(&h->queues, sid);

    if (q == NULL && (q = hmap_get(&h->delayed, &sid, sizeof(sid))) != NULL)
        h->delayed_known++;
    return q;
}

bool
store_is_new(void)
{
    return st.is_new;
}

void
store_accept_data_loss(bool yes)
{
    st.accept_loss = yes;
}

/* What recover_defs found of the two files. */
struct defs_found {
    bool has_snap;
    struct defs_damage snap, log;
};

/* Replay the snapshot, then the log; -1 if either cannot be read (with
 * errno), else the records applied. */
static int
recover_defs(uint32_t *max_qid, struct defs_found *df)
{
    char path[4200];
    uint8_t *p;
    size_t len;
    uint64_t snap_gen = 0, log_gen = 0;
    long n = 0;

    *df = (struct defs_found){ .has_snap = false };
    snprintf(path, sizeof(path), "%s/defs.snap", st.dir);
    if (store_read_file(path, &p, &len) < 0)
        return -1;
    if (p) {
        df->has_snap = true;
        n += defs_replay("defs.snap", p, len, &snap_gen, max_qid, &df->snap);
        free(p);
    }
    snprintf(path, sizeof(path), "%s/defs.log", st.dir);
    if (store_read_file(path, &p, &len) < 0)
        return -1;
    if (p) {
        long k = defs_replay("defs.log", p, len, &log_gen, max_qid, &df->log);
        n += k;
        st.defs_log_records = (uint64_t)k;
        free(p);
    }
    st.defs_gen = snap_gen > log_gen ? snap_gen : log_gen;
    return (int)n;
}

/*
 * Whether recovery may go on over the definitions it found, with the
 * journal read into 'rp' (nothing has been written yet). Damage to
 * either file stops the start, and so does a log with no record when
 * the directory is not new: its definitions are what make the
 * journal's records anything but orphans, and recovery would drop
 * them all (and a start would make the default user again). A torn
 * tail after good records is a crash's, and goes on. With nothing in
 * the journal and no snapshot, a log with no record is a first start
 * that stopped before its first sync: the directory is new.
 * --accept-data-loss goes on over all of it. 0: go on; -1: stop
 * (logged).
 */
static int
check_defs(const struct defs_found *df, const struct replay *rp,
           size_t nsegs)
{
    const char *file = NULL, *what = NULL;
    bool journal = rp->nmsgs > 0 || rp->nenqs > 0;

    /* A directory an older roostd made without FORMAT is not new. */
    if (df->log.records > 0 || df->has_snap || journal)
        st.is_new = false;

    if (df->has_snap && defs_is_damaged(&df->snap)) {
        file = "defs.snap";
        what = df->snap.corrupt ? "has corrupt records" : "is unreadable";
    } else if (defs_is_damaged(&df->log)) {
        file = "defs.log";
        what = df->log.corrupt ? "has corrupt records" : "is unreadable";
    } else if (df->log.records == 0 && !st.is_new &&
               (df->has_snap || journal)) {
        file = "defs.log";
        what = "is missing or holds no record";
    } else {
        if (df->log.records == 0 && !df->has_snap && !st.is_new) {
            log_warnx("store: %s has no definitions and no messages: "
                      "taken as a new data directory", st.dir);
            st.is_new = true;
        }
        return 0;
    }
    if (st.accept_loss) {
        log_warnx("store: %s/%s %s; --accept-data-loss: starting with "
                  "the definitions that could be read, and dropping the "
                  "messages of queues they do not hold (%zu records in %zu "
                  "segments)", st.dir, file, what, rp->nmsgs + rp->nenqs,
                  nsegs);
        return 0;
    }
    log_warnx("store: %s/%s %s, and the definitions are what the %zu "
              "message segments' %zu records belong to: not started, and "
              "nothing changed. See what the directory holds with "
              "'roostd --check-data %s' (stopped), restore the definitions "
              "from a backup, or start with --accept-data-loss to drop "
              "what they kept", st.dir, file, what, nsegs,
              rp->nmsgs + rp->nenqs, st.dir);
    return -1;
}

static void (*recovery_progress)(const char *status);

void
store_on_recovery_progress(void (*cb)(const char *status))
{
    recovery_progress = cb;
}

static void
progress(const char *fmt, size_t a, size_t b)
{
    char status[128];
    if (recovery_progress == NULL)
        return;
    snprintf(status, sizeof(status), fmt, a, b);
    recovery_progress(status);
}

/* What recovery holds while it rebuilds the queues. */
struct recovery {
    struct replay rp;
    struct replay_seg seg;      /* the segment being read */
    struct replay_report rep;
    char seg_name[64];
    bool in_seg;
    uint64_t *segs;             /* the journal's segments, oldest first */
    size_t nsegs;
    void **maps;                /* each mapped (seglog_mapped), or NULL */
    bool clean;                 /* the last stop synced everything */
    uint64_t now_wall, now;
    struct holders by_sid;
    struct msg **made;          /* each message restored once */
    uint64_t nrec, orphans, nheld;
};

/* seglog_reopen's walk, record by record into the replay. */
static struct replay_seg *
scan_seg(struct recovery *rc, size_t i)
{
    if (!rc->in_seg) {
        uint64_t seg;
        size_t len;
        (void)seglog_mapped(st.log, i, &len, &seg);
        seglog_name(rc->seg_name, sizeof(rc->seg_name), seg);
        rc->rep = (struct replay_report){ .tx_cut = recover_tx_cut,
                                          .arg = rc->seg_name };
        replay_seg_begin(&rc->seg, &rc->rp, (uint32_t)i, &rc->rep);
        rc->in_seg = true;
    }
    return &rc->seg;
}

static void
scan_record(void *arg, size_t i, const struct rec *r, size_t pos)
{
    replay_seg_record(scan_seg(arg, i), r, pos);
}

/* The log said what it was (seglog.c); the replay counts it. */
static void
scan_fault(void *arg, size_t i, enum rec_fault f, size_t pos, size_t n)
{
    replay_seg_fault(scan_seg(arg, i), f, pos, n);
}

static void
scan_end(void *arg, size_t i)
{
    struct recovery *rc = arg;
    replay_seg_end(scan_seg(rc, i));
    rc->in_seg = false;
}

static void
scan_progress(size_t i, size_t n)
{
    progress("recovering: reading journal segment %zu of %zu", i + 1, n);
}

/* Reopen the journal's log, replaying its records into rc->rp; then the
 * ids the journal still names. */
static int
read_segments(struct recovery *rc)
{
    const struct seglog_scan scan = {
        .record = scan_record, .fault = scan_fault, .segment_end = scan_end,
        .arg = rc,
    };

    if (seglog_reopen(st.log, &scan, scan_progress) != 0) {
        log_warn("store: cannot read %s/msgs", st.dir);
        return -1;
    }
    rc->nsegs = seglog_nmapped(st.log);
    rc->segs = xcalloc(rc->nsegs + 1, sizeof(*rc->segs));
    rc->maps = xcalloc(rc->nsegs + 1, sizeof(*rc->maps));
    for (size_t i = 0; i < rc->nsegs; i++) {
        size_t len;
        rc->maps[i] = (void *)seglog_mapped(st.log, i, &len, &rc->segs[i]);
    }
    st.next_msg_id = rc->rp.max_id + 1;
    /* Queue ids the journal still names are not given out again, even
     * when the definitions no longer know them (a snapshot leaves out
     * deleted queues): a new queue would take their records. */
    for (size_t i = 0; i < rc->rp.nenqs; i++)
        if (rc->rp.enqs[i].qid >= st.next_qid)
            st.next_qid = rc->rp.enqs[i].qid + 1;
    for (size_t i = 0; i < rc->rp.nacks; i++)
        if (rc->rp.acks[i].qid >= st.next_qid)
            st.next_qid = rc->rp.acks[i].qid + 1;
    return 0;
}

/* A live entry held by the delayed exchange 'hx': its expiry field is
 * its due time. */
static void
restore_held(struct recovery *rc, struct exchange *hx,
             const struct replay_entry *e)
{
    struct msg *m = e->msg ? restore_msg(&rc->rp, e->msg, rc->made,
                                         rc->segs, rc->maps)
                           : NULL;
    if (m == NULL) {
        log_warnx("store: delayed exchange '%s': message %" PRIu64
                  " at position %" PRIu64 " is missing from the "
                  "journal; dropped", hx->name, e->msg_id, e->seq);
        return;
    }
    restore_holder(m, rc->segs[e->enq_seg]);
    delayed_restore(hx, e->seq, e->expires_wall, m);
    rc->nheld++;
}

/* The time an entry entered its queue, as qentry.born, from its wall
 * time in the journal; recovery's own time for a record that has none
 * (written before Roost kept it) or one from a clock that was ahead. */
uint32_t
store_born_at(uint64_t now, uint64_t now_wall, uint64_t wall)
{
    uint64_t age = wall && wall < now_wall ? now_wall - wall : 0;
    /* 32 bits of milliseconds: ages up to 49 days */
    if (age > UINT32_MAX / 2)
        age = UINT32_MAX / 2;
    uint32_t born = (uint32_t)(now - age);
    return born ? born : 1;
}

static uint32_t
born_of(const struct recovery *rc, uint64_t enq_wall)
{
    return store_born_at(rc->now, rc->now_wall, enq_wall);
}

/* A live entry of its queue, in memory or (beyond the window) paged. */
static void
restore_entry(struct recovery *rc, const struct replay_entry *e)
{
    struct queue *q = e->queue;
    uint64_t expires = 0;
    if (e->expires_wall == 1)
        expires = 1;
    else if (e->expires_wall > 1)
        expires = e->expires_wall > rc->now_wall
                      ? rc->now + (e->expires_wall - rc->now_wall) : 1;
    struct qentry qe = { 0 };
    qe.seq = e->seq;
    qe.expires_at = expires;
    qe.deliveries = e->deliveries;
    qe.born = born_of(rc, e->enq_wall);
    /* After a crash a delivery may have gone out before its record
     * was synced: every message may have been delivered. */
    qe.redelivered = e->deliveries > 0 || !rc->clean;
    /* Beyond the window, an entry stays on disk: it reads its
     * message from the oldest copy, which is never in a newer
     * segment than the entry's enqueue record. */
    /* One still waiting out a requeue delay waits in memory for
     * what is left of it. */
    uint64_t due = e->due_wall > rc->now_wall
                       ? rc->now + (e->due_wall - rc->now_wall) : 0;
    uint8_t prio;
    if (e->msg && due == 0 && q->len >= (size_t)broker.cfg.paging_window &&
        restore_paged(&rc->rp, e, rc->segs,
                      (const uint8_t *const *)rc->maps, &qe, &prio)) {
        queue_restore(q, &qe, prio, 0);
        rc->nrec++;
        return;
    }
    struct msg *m = e->msg ? restore_msg(&rc->rp, e->msg, rc->made, rc->segs,
                                         rc->maps)
                           : NULL;
    if (m == NULL) {
        log_warnx("store: queue '%s': message %" PRIu64 " at position %"
                  PRIu64 " is missing from the journal; dropped", q->name,
                  e->msg_id, e->seq);
        return;
    }
    restore_holder(m, rc->segs[e->enq_seg]);
    qe.m = m;
    queue_restore(q, &qe, m->env->priority, due);
    rc->nrec++;
}

/* Every live entry back in its queue or delayed exchange; returns how
 * many queues the walk met. */
static uint64_t
restore_entries(struct recovery *rc)
{
    struct exchange *hx = NULL;  /* the delayed exchange holding them */
    uint32_t hx_qid = 0;
    struct replay_walk w;
    struct replay_entry e;
    size_t walked = 0;

    rc->made = xcalloc(rc->rp.nmsgs + 1, sizeof(*rc->made));
    replay_walk_init(&w, &rc->rp, find_queue, &rc->by_sid);
    while (replay_next(&w, &e)) {
        if (++walked % 65536 == 0)
            progress("recovering: %zu of %zu queue entries restored",
                     walked, rc->rp.nenqs);
        if (e.fate == REPLAY_ORPHAN)
            rc->orphans++;
        if (e.fate != REPLAY_LIVE)
            continue;
        if (hx_qid != e.qid) {
            hx_qid = e.qid;
            hx = hmap_get(&rc->by_sid.delayed, &e.qid, sizeof(e.qid));
        }
        if (hx)
            restore_held(rc, hx, &e);
        else
            restore_entry(rc, &e);
    }
    return w.queues;
}

/* Nor are positions given out again: a queue that comes back empty (or
 * short) would number new entries from where its restored ones end, and
 * a settled record still on disk for an old entry at that position would
 * settle the new one at the next recovery. */
static void
keep_positions(struct recovery *rc)
{
    const struct replay *rp = &rc->rp;
    struct queue *q = NULL;
    struct exchange *hx = NULL;
    uint32_t qid = 0;

    for (size_t i = 0; i < rp->nenqs + rp->nacks + rp->ndels; i++) {
        uint32_t id;
        uint64_t seq;
        if (i < rp->nenqs) {
            id = rp->enqs[i].qid;
            seq = rp->enqs[i].seq;
        } else if (i < rp->nenqs + rp->nacks) {
            id = rp->acks[i - rp->nenqs].qid;
            seq = rp->acks[i - rp->nenqs].hi;
        } else {
            id = rp->dels[i - rp->nenqs - rp->nacks].qid;
            seq = rp->dels[i - rp->nenqs - rp->nacks].seq;
        }
        if (i == 0 || id != qid) {
            qid = id;
            q = queue_by_sid(&rc->by_sid.queues, qid);
            hx = q ? NULL : hmap_get(&rc->by_sid.delayed, &qid, sizeof(qid));
        }
        if (q && seq >= q->next_seq)
            q->next_seq = seq + 1;
        else if (hx)
            delayed_note_seq(hx, seq);
    }
}

/* What recovery held, let go: each restored message holds itself once
 * (the queues hold the rest), the maps, the replay. */
static void
recovery_free(struct recovery *rc)
{
    hmap_destroy(&rc->by_sid.queues);
    hmap_destroy(&rc->by_sid.delayed);
    for (size_t i = 0; rc->made != NULL && i < rc->rp.nmsgs; i++)
        msg_unref(rc->made[i]);
    free(rc->made);
    seglog_unmap(st.log);
    free(rc->maps);
    free(rc->segs);
    replay_free(&rc->rp);
}

/* The queues restored: expire what is due, arm timers. */
static void
arm_queues(void)
{
    size_t pos = 0, qpos;
    struct hmap_slot *s, *qs;
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
        struct vhost *vh = s->val;
        qpos = 0;
        while ((qs = hmap_next(&vh->queues, &qpos)) != NULL)
            queue_arm(qs->val);
    }
}

/* The I/O and pager threads started on a journal that is all on disk
 * and readable. */
static int
recovery_finish(void)
{
    if (io_start(st.dir, st.seg_size, job_done) != 0) {
        log_warn("store: cannot start the I/O thread");
        return -1;
    }
    st.compacting = UINT64_MAX;
    st.scr_base = st.scr_cur = 1;
    if (pager_start(st.dir) != 0) {
        log_warn("store: cannot start the pager thread");
        return -1;
    }
    st.pager = true;
    /* Read ahead where the windows are short of entries. */
    queue_pager_kick(true);
    schedule();
    return 0;
}

static int
journal_recover(void)
{
    uint64_t t0 = now_ms();
    char path[4200];
    struct recovery rc = { .by_sid = { .delayed_known = 0 } };
    uint32_t max_qid = 0;

    /* CLEAN says the last stop synced everything, deliveries included.
     * It goes (durably) before anything else, so that a crash from now on
     * is never taken for a clean stop. */
    snprintf(path, sizeof(path), "%s/CLEAN", st.dir);
    rc.clean = access(path, F_OK) == 0;
    /* Reading changes nothing: the definitions and the journal are read
     * and judged before CLEAN goes. */
    struct defs_found df;
    defs_quiet(true);
    int ndefs = recover_defs(&max_qid, &df);
    if (ndefs < 0) {
        defs_quiet(false);
        log_warn("store: cannot read the definitions in %s", st.dir);
        return -1;
    }
    st.next_qid = max_qid + 1;
    /* A refused start leaves what it read to the exit, freed (a clean
     * leak check). */
    if (read_segments(&rc) != 0 || check_defs(&df, &rc.rp, rc.nsegs) != 0) {
        recovery_free(&rc);
        defs_quiet(false);
        return -1;
    }
    /* Before anything is written after it (writes go to a new segment). */
    char msgdir[4200];
    snprintf(msgdir, sizeof(msgdir), "%s/msgs", st.dir);
    if (!rc.clean && rc.nsegs > 0 &&
        seglog_mark_crashed(msgdir, rc.segs[rc.nsegs - 1]) != 0)
        log_warn("store: cannot mark segment %" PRIu64 " as the newest at "
                 "a crash (--check-data will call damage to its tail "
                 "corrupt)", rc.segs[rc.nsegs - 1]);
    if (rc.clean && (unlink(path) != 0 || store_sync_dir(st.dir) != 0)) {
        log_warn("store: cannot remove %s", path);
        recovery_free(&rc);
        defs_quiet(false);
        return -1;
    }
    replay_resolve(&rc.rp);
    rc.now_wall = wall_ms();
    rc.now = now_ms();
    index_queues(&rc.by_sid.queues);
    index_delayed(&rc.by_sid.delayed);
    uint64_t nqueues = restore_entries(&rc);
    keep_positions(&rc);
    uint64_t scorrupt = 0, storn = 0;
    rc.nrec += slogs_recover(&rc.by_sid.queues, rc.clean, &scorrupt, &storn);
    size_t names = offsets_load(st.dir, stream_of_sid, &rc.by_sid.queues);
    uint64_t corrupt = rc.rp.corrupt + scorrupt, torn = rc.rp.torn + storn;
    uint64_t bytes = seglog_mapped_bytes(st.log);
    recovery_free(&rc);
    defs_quiet(false);
    collect_dead_segments();
    arm_queues();
    if (rc.nheld)
        log_info("store: recovered %" PRIu64 " delayed messages",
                 rc.nheld);
    if (names)
        log_info("store: recovered %zu stream consumer names", names);
    if (st.is_new)
        log_info("store: a new data directory, %s: nothing to recover",
                 st.dir);
    else
        log_info("store: recovered %d definitions, %" PRIu64 " messages "
                 "in %" PRIu64 " durable queues from %zu segments (%" PRIu64
                 " bytes) in %" PRIu64 " ms after %s stop; %" PRIu64
                 " orphan records dropped, %" PRIu64 " corrupt records "
                 "skipped, %" PRIu64 " torn tails cut", ndefs, rc.nrec,
                 nqueues - rc.by_sid.delayed_known, rc.nsegs, bytes,
                 now_ms() - t0, rc.clean ? "a clean" : "an unclean",
                 rc.orphans, corrupt, torn);
    return recovery_finish();
}

static void
journal_close(void)
{
    if (!st.open)
        return;
    /* Reads and scratch writes under way finish first, after the
     * streams' last consumer names. */
    if (st.pager) {
        stream_flush_offsets();
        st.pager = false;
        pager_stop();
        for (size_t i = 0; i < st.scr_nmsgs; i++) {
            struct store_rec *r = st.scr_msgs[i]->srec;
            if (r->state == MS_SCRATCHING)
                rec_set_state(r, MS_NONE);
            msg_unref(st.scr_msgs[i]);
        }
        free(st.scr_msgs);
        st.scr_msgs = NULL;
        st.scr_nmsgs = 0;
        wbuf_free(&st.scr_buf);
    }
    /* What is pending goes to disk; nothing after this is recorded (the
     * shutdown's own teardown of queues is not a deletion). */
    for (;;) {
        if (st.failed) {
            log_warnx("store: stopping while the disk refuses writes; what "
                      "was not synced was not confirmed either");
            break;
        }
        if (st.busy) {
            io_wait();
            continue;
        }
        if (!journal_has_pending() && !seglog_has_unlinks(st.log))
            break;
        kick_cb(-1, 0, NULL);
        if (!st.busy)
            break;
    }
    st.closing = true;
    io_stop();
    slogs_close();
    /* Everything is synced: say so, for the next recovery. */
    if (!st.failed && write_synced(st.dir, "CLEAN", "") != 0)
        log_warn("store: cannot write %s/CLEAN", st.dir);
    if (st.stats.batches)
        log_info("store: closed after %" PRIu64 " batches, %" PRIu64
                 " syncs, %" PRIu64 " records (%.1f a batch on average, "
                 "%" PRIu64 " at most), %" PRIu64 " bytes written; %" PRIu64
                 " messages paged out, %" PRIu64 " read back, %" PRIu64
                 " compactions", st.stats.batches, st.stats.syncs,
                 st.stats.records,
                 (double)st.stats.records / (double)st.stats.batches,
                 st.stats.batch_max_records, st.stats.bytes_written,
                 st.stats.paged_out, st.stats.paged_in, st.compactions);
    defs_unlisten(journal_defs_changed, NULL);
    st.open = false;
    /* Whoever still waits hears now (their connections are closing). */
    st.durable_batch = st.open_batch;
    wake_waiters();
    for (size_t i = 0; i < st.nops; i++)
        msg_unref(st.ops[i].m);
    free(st.ops);
    msg_env_cache_clear(&st.envs);
    wbuf_free(&st.defs);
    wbuf_free(&st.job.journal);
    wbuf_free(&st.job.defs);
    wbuf_free(&st.job.defs_snap);
    release_job_msgs(&st.job);
    free(st.job.msgs);
    free(st.job.unlink);
    seglog_free(st.log);
    st.log = NULL;
    rec_free_all();
    free(st.scr);
    if (st.kick)
        event_free(st.kick);
    if (st.retry)
        event_free(st.retry);
    if (st.recheck)
        event_free(st.recheck);
    if (st.compact_timer)
        event_free(st.compact_timer);
    if (st.scr_retry)
        event_free(st.scr_retry);
    close(st.lock_fd);
}

/* ---- the table (broker/core/store.h) ---- */

const struct store_ops store_journal_ops = {
    .name = "journal",
    .queue_is_durable = journal_queue_is_durable,
    .enqueue = journal_enqueue,
    .msg_unneeded = journal_msg_unneeded,
    .delivered = journal_delivered,
    .retry_wait = journal_retry_wait,
    .settled = journal_settled,
    .page_out = journal_page_out,
    .page_prepare = journal_page_prepare,
    .page_flush = journal_page_flush,
    .page_decode = journal_page_decode,
    .page_in = journal_page_in,
    .memory_pressure = journal_memory_pressure,
    .pages = journal_pages,
    .trim_memory = journal_trim_memory,
    .msg_freed = journal_msg_freed,
    .delay_hold = journal_delay_hold,
    .delay_ready = journal_delay_ready,
    .delay_release = journal_delay_release,
    .queue_gone = journal_queue_gone,
    .offsets_save = journal_offsets_save,
    .stream_files = slog_files,
    .tx_begin = journal_tx_begin,
    .tx_end = journal_tx_end,
    .open_batch = journal_open_batch,
    .durable_batch = journal_durable_batch,
    .recheck_batch = journal_recheck_batch,
    .has_pending = journal_has_pending,
    .defs_written = journal_defs_written,
    .wait = journal_wait,
    .unwait = journal_unwait,
    .is_failed = journal_is_failed,
    .failure = journal_failure,
    .get_stats = journal_get_stats,
    .recover = journal_recover,
    .close = journal_close,
    .read_submit = pager_submit,
};
