/*
 * SPDX-License-Identifier: Apache-2.0
 * Journal replay (replay.h): reading segments into arrays, sorting them,
 * and the rules that decide which entries are live:
 *
 *  - of several enqueue records for one queue id and position (an entry
 *    compaction copied forward, or moved), the newest counts;
 *  - an entry inside a settled range is gone;
 *  - its delivery count is the highest any record gives it;
 *  - a transaction's records count only with its commit record, which
 *    is in the same segment (one batch);
 *  - an entry of a queue id the caller does not know is an orphan.
 *
 * Everything is sorted once and then merged in one pass, so recovery
 * costs O(n log n) with no allocation per record or entry.
 */
#include "broker/store/replay.h"

#include <stdlib.h>
#include <string.h>

#include "broker/core/msg.h"
#include "broker/lib/util.h"
#include "broker/store/journal.h"

#define PUSH(arr, n, cap, v)                                                 \
    do {                                                                     \
        if ((n) == (cap)) {                                                  \
            (cap) = (cap) ? (cap) * 2 : 1024;                                \
            (arr) = xrealloc((arr), (cap) * sizeof(*(arr)));                 \
        }                                                                    \
        (arr)[(n)++] = (v);                                                  \
    } while (0)

/* Whether a J_MSG payload holds all its fields (the id already read). */
static bool
msg_fits(struct rbuf *r)
{
    uint32_t n;

    (void)rbuf_str(r, &n);
    (void)rbuf_str(r, &n);
    (void)rbuf_str(r, &n);
    uint64_t blen = rbuf_u64(r);
    (void)rbuf_bytes(r, (size_t)blen);
    return !r->bad;
}

/* Collect one record; returns whether it holds its type's fields. */
static bool
collect(struct replay_seg *sr, const struct rec *rec)
{
    struct replay *rp = sr->rp;
    struct rbuf r;

    rbuf_init(&r, rec->payload, rec->len);
    switch (rec->type) {
    case J_SEG:
        (void)rbuf_u32(&r);
        (void)rbuf_u64(&r);
        return !r.bad;
    case J_MSG: {
        struct replay_msg m = { 0 };
        m.id = rbuf_u64(&r);
        m.order = rp->nmsgs;
        m.seg = sr->seg;
        m.size = (uint32_t)rec->size;
        m.payload = rec->payload;
        m.len = rec->len;
        /* Kept once its id reads: a message that does not decode is
         * dropped when an entry wants it, and said so. */
        if (!r.bad)
            PUSH(rp->msgs, rp->nmsgs, rp->msgs_cap, m);
        if (m.id > rp->max_id)
            rp->max_id = m.id;
        return msg_fits(&r);
    }
    case J_ENQ: {
        struct replay_enq e;
        e.qid = rbuf_u32(&r);
        e.seq = rbuf_u64(&r);
        e.id = rbuf_u64(&r);
        e.expires_wall = rbuf_u64(&r);
        e.deliveries = rbuf_u32(&r);
        e.enq_wall = r.len - r.off >= 8 ? rbuf_u64(&r) : 0;
        e.seg = sr->seg;
        e.order = rp->nenqs;
        if (!r.bad)
            PUSH(rp->enqs, rp->nenqs, rp->enqs_cap, e);
        return !r.bad;
    }
    case J_DELIVER: {
        struct replay_del d;
        d.qid = rbuf_u32(&r);
        d.seq = rbuf_u64(&r);
        d.deliveries = rbuf_u32(&r);
        d.due_wall = r.len - r.off >= 8 ? rbuf_u64(&r) : 0;
        if (!r.bad)
            PUSH(rp->dels, rp->ndels, rp->dels_cap, d);
        return !r.bad;
    }
    case J_ACK: {
        struct replay_range a;
        a.qid = rbuf_u32(&r);
        a.lo = rbuf_u64(&r);
        a.hi = rbuf_u64(&r);
        if (!r.bad)
            PUSH(rp->acks, rp->nacks, rp->acks_cap, a);
        return !r.bad;
    }
    case J_TX_BEGIN:
        sr->in_tx = true;
        sr->tx_msgs = rp->nmsgs;
        sr->tx_enqs = rp->nenqs;
        sr->tx_acks = rp->nacks;
        sr->tx_dels = rp->ndels;
        (void)rbuf_u64(&r);
        return !r.bad;
    case J_TX_COMMIT:
        sr->in_tx = false;
        (void)rbuf_u64(&r);
        return !r.bad;
    default:
        return true;
    }
}

void
replay_seg_begin(struct replay_seg *sr, struct replay *rp, uint32_t seg,
                 const struct replay_report *rep)
{
    memset(sr, 0, sizeof(*sr));
    sr->rp = rp;
    sr->seg = seg;
    sr->rep = rep;
}

void
replay_seg_record(struct replay_seg *sr, const struct rec *r, size_t off)
{
    bool fits = collect(sr, r);

    if (sr->rep && sr->rep->record)
        sr->rep->record(sr->rep->arg, r, off, fits);
}

void
replay_seg_fault(struct replay_seg *sr, enum rec_fault f, size_t off,
                 size_t n)
{
    if (f == REC_TORN)
        sr->rp->torn++;
    else
        sr->rp->corrupt++;
    if (sr->rep && sr->rep->fault)
        sr->rep->fault(sr->rep->arg, f, off, n);
}

void
replay_seg_end(struct replay_seg *sr)
{
    struct replay *rp = sr->rp;
    const struct replay_report *rep = sr->rep;

    if (sr->in_tx) {
        if (rep && rep->tx_cut)
            rep->tx_cut(rep->arg, rp->nmsgs - sr->tx_msgs,
                        rp->nenqs - sr->tx_enqs, rp->nacks - sr->tx_acks,
                        rp->ndels - sr->tx_dels);
        rp->nmsgs = sr->tx_msgs;
        rp->nenqs = sr->tx_enqs;
        rp->nacks = sr->tx_acks;
        rp->ndels = sr->tx_dels;
    }
    sr->in_tx = false;
}

static void
seg_record(void *arg, const struct rec *r, size_t off)
{
    replay_seg_record(arg, r, off);
}

static void
seg_fault(void *arg, enum rec_fault f, size_t off, size_t n)
{
    replay_seg_fault(arg, f, off, n);
}

size_t
replay_segment(struct replay *rp, uint32_t seg, const uint8_t *p, size_t len,
               const struct replay_report *rep)
{
    struct replay_seg sr;

    replay_seg_begin(&sr, rp, seg, rep);
    size_t end = rec_walk(p, len, seg_record, seg_fault, &sr);
    replay_seg_end(&sr);
    return end;
}

static int
cmp_msg(const void *a, const void *b)
{
    const struct replay_msg *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    /* The newest copy last. */
    return x->order < y->order ? -1 : x->order > y->order;
}

static int
cmp_enq(const void *a, const void *b)
{
    const struct replay_enq *x = a, *y = b;
    if (x->qid != y->qid)
        return x->qid < y->qid ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int
cmp_range(const void *a, const void *b)
{
    const struct replay_range *x = a, *y = b;
    if (x->qid != y->qid)
        return x->qid < y->qid ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int
cmp_del(const void *a, const void *b)
{
    const struct replay_del *x = a, *y = b;
    if (x->qid != y->qid)
        return x->qid < y->qid ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void
replay_resolve(struct replay *rp)
{
    if (rp->nmsgs)
        qsort(rp->msgs, rp->nmsgs, sizeof(*rp->msgs), cmp_msg);
    if (rp->nenqs)
        qsort(rp->enqs, rp->nenqs, sizeof(*rp->enqs), cmp_enq);
    if (rp->nacks)
        qsort(rp->acks, rp->nacks, sizeof(*rp->acks), cmp_range);
    if (rp->ndels)
        qsort(rp->dels, rp->ndels, sizeof(*rp->dels), cmp_del);
}

void
replay_free(struct replay *rp)
{
    free(rp->msgs);
    free(rp->enqs);
    free(rp->acks);
    free(rp->dels);
    memset(rp, 0, sizeof(*rp));
}

void
replay_walk_init(struct replay_walk *w, const struct replay *rp,
                 void *(*find_queue)(void *arg, uint32_t qid), void *arg)
{
    memset(w, 0, sizeof(*w));
    w->rp = rp;
    w->find_queue = find_queue;
    w->arg = arg;
}

/* The newest copy of message 'id', or NULL. */
static const struct replay_msg *
find_msg(const struct replay *rp, uint64_t id)
{
    size_t lo = 0, hi = rp->nmsgs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rp->msgs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    const struct replay_msg *found = NULL;
    while (lo < rp->nmsgs && rp->msgs[lo].id == id)
        found = &rp->msgs[lo++];
    return found;
}

/* Whether a settled range covers entry 'e'. The ranges are sorted, and
 * the entries come in order: 'ai' only moves forward. */
static bool
is_settled(struct replay_walk *w, const struct replay_enq *e)
{
    const struct replay *rp = w->rp;

    while (w->ai < rp->nacks && (rp->acks[w->ai].qid < e->qid ||
                                 (rp->acks[w->ai].qid == e->qid &&
                                  rp->acks[w->ai].hi < e->seq)))
        w->ai++;
    for (size_t k = w->ai; k < rp->nacks && rp->acks[k].qid == e->qid &&
                           rp->acks[k].lo <= e->seq; k++)
        if (rp->acks[k].hi >= e->seq)
            return true;
    return false;
}

/* The highest delivery count of entry 'e', and the due time of a
 * requeue delay it was last returned to wait out (of the records with
 * that count, whose order qsort lost: the return's comes after its
 * delivery's, and it alone has a time); 'di' as 'ai' above. */
static uint32_t
deliveries_of(struct replay_walk *w, const struct replay_enq *e,
              uint64_t *due_wall)
{
    const struct replay *rp = w->rp;
    uint32_t n = e->deliveries;

    *due_wall = 0;
    while (w->di < rp->ndels && (rp->dels[w->di].qid < e->qid ||
                                 (rp->dels[w->di].qid == e->qid &&
                                  rp->dels[w->di].seq < e->seq)))
        w->di++;
    for (size_t k = w->di; k < rp->ndels && rp->dels[k].qid == e->qid &&
                           rp->dels[k].seq == e->seq; k++)
        if (rp->dels[k].deliveries > n ||
            (rp->dels[k].deliveries == n && rp->dels[k].due_wall > *due_wall)) {
            n = rp->dels[k].deliveries;
            *due_wall = rp->dels[k].due_wall;
        }
    return n;
}

bool
replay_next(struct replay_walk *w, struct replay_entry *out)
{
    const struct replay *rp = w->rp;

    for (; w->i < rp->nenqs; w->i++) {
        const struct replay_enq *e = &rp->enqs[w->i];
        /* Of several records for one entry, the newest (the last). */
        if (w->i + 1 < rp->nenqs && rp->enqs[w->i + 1].qid == e->qid &&
            rp->enqs[w->i + 1].seq == e->seq)
            continue;
        w->i++;
        if (!w->looked_up || e->qid != w->qid) {
            w->looked_up = true;
            w->qid = e->qid;
            w->queue = w->find_queue(w->arg, e->qid);
            if (w->queue)
                w->queues++;
        }
        memset(out, 0, sizeof(*out));
        out->qid = e->qid;
        out->seq = e->seq;
        out->msg_id = e->id;
        out->expires_wall = e->expires_wall;
        out->enq_wall = e->enq_wall;
        out->enq_seg = e->seg;
        out->queue = w->queue;
        out->due_wall = 0;
        if (w->queue == NULL)
            out->fate = REPLAY_ORPHAN;
        else if (is_settled(w, e))
            out->fate = REPLAY_SETTLED;
        else {
            out->fate = REPLAY_LIVE;
            out->deliveries = deliveries_of(w, e, &out->due_wall);
            out->msg = find_msg(rp, e->id);
        }
        return true;
    }
    return false;
}

bool
replay_msg_decode(const struct replay_msg *m, struct replay_fields *out)
{
    struct rbuf r;

    rbuf_init(&r, m->payload, m->len);
    (void)rbuf_u64(&r);
    out->exchange = rbuf_str(&r, &out->exchange_len);
    out->rkey = rbuf_str(&r, &out->rkey_len);
    out->hdr = rbuf_str(&r, &out->hdr_len);
    out->body_len = rbuf_u64(&r);
    out->body = rbuf_bytes(&r, (size_t)out->body_len);
    /* Nothing after the body: the record's size is what its fields say
     * (the store derives it from them, store.c rec_size). */
    return !r.bad && r.off == r.len && out->body_len <= MSG_BODY_MAX &&
           out->exchange_len <= 255 && out->rkey_len <= 255 &&
           content_header_decode(out->hdr, out->hdr_len, &out->ch) ==
               AMQP_OK &&
           out->ch.body_size == out->body_len;
}
