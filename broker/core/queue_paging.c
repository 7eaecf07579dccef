/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Queues beyond memory (queue.h): paging out and reading back, the
 * basic.gets that wait for a read, peeking at ready entries for the
 * dead-letter tools, and moving entries out one at a time for replays.
 * The rings themselves are queue.c's.
 */
#include "broker/core/queue.h"
#include "broker/core/queue_int.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/broker.h"
#include "broker/core/deadletter.h"
#include "broker/core/msg.h"
#include "broker/core/store.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

/* ---- paging (queue.h; docs/storage.md, "Paging") ---- */

TAILQ_HEAD(page_list, queue);
static struct page_list page_queues = TAILQ_HEAD_INITIALIZER(page_queues);
static struct event *pager_ev;
static uint64_t pressure_gen;

/* At most this much is read back for a queue at a time, and at most
 * this many entries are looked at by one paging pass of one queue. */
#define FILL_MAX_BYTES (4u * 1024 * 1024)
#define PASS_MAX 65536

size_t
queue_window(void)
{
    size_t w = (size_t)broker.cfg.paging_window;
    if (store_memory_pressure()) {
        w /= 16;
        if (w < 16)
            w = 16;
    }
    return w;
}

/* The index of the first entry of 'r' whose seq is at least 'seq': at
 * once where the entries from the first to it are contiguous (a
 * stream's offsets, a queue without priorities or requeues), else a
 * binary search. */
size_t
index_of_seq(const struct qring *r, uint64_t seq)
{
    size_t lo = 0, hi = r->len;
    if (hi > 0 && seq >= at(r, 0)->seq) {
        uint64_t d = seq - at(r, 0)->seq;
        if (d < hi && at(r, (size_t)d)->seq == seq)
            return (size_t)d;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (at(r, mid)->seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void
page_unlist(struct queue *q)
{
    if (!q->page_listed)
        return;
    TAILQ_REMOVE(&page_queues, q, page_link);
    q->page_listed = false;
}

/* What a paging pass left: nothing, entries whose records are being
 * written (the store kicks the pager when they are), or entries it had
 * no time for (PASS_MAX). */
enum pass_result { PASS_DONE, PASS_WAIT, PASS_MORE };

/*
 * One paging pass over level 'r': the entries beyond the window, from
 * where the last pass stopped, leave memory if their records are on
 * disk. It looks at most at PASS_MAX entries, and goes on next time from
 * the first one whose record is still being written, or from where it
 * stopped.
 */
static enum pass_result
ring_page_pass(struct queue *q, struct qring *r, size_t window, bool pressure)
{
    if (r->len <= window)
        return PASS_DONE;
    size_t i = index_of_seq(r, r->page_seq);
    if (i < window)
        i = window;
    uint64_t again = UINT64_MAX;
    size_t looked = 0;
    for (; i < r->len && looked < PASS_MAX; i++, looked++) {
        struct qentry *e = at(r, i);
        if (e->paged)
            continue;
        if (store_page_out(q, e)) {
            r->npaged++;
            q->npaged++;
            q->bytes_paged += e->body_len;
            if (i < r->mem_head)
                r->mem_head = i;
            continue;
        }
        int later = store_page_prepare(q, e, pressure);
        if (later && again == UINT64_MAX)
            again = e->seq;
        if (later == 2)
            break;
    }
    if (again != UINT64_MAX) {
        r->page_seq = again;
        return PASS_WAIT;
    }
    if (i < r->len) {
        r->page_seq = at(r, i)->seq;
        return PASS_MORE;
    }
    r->page_seq = q->next_seq;
    return PASS_DONE;
}

/* A paging pass over each level: it waits if one waits, and goes on if
 * one has more. */
static enum pass_result
page_pass(struct queue *q, size_t window, bool pressure)
{
    enum pass_result res = PASS_DONE;

    if (q->page_gen != pressure_gen) {
        q->page_gen = pressure_gen;
        for (size_t l = 0; l < q->nlv; l++)
            q->lv[l].page_seq = 0;
    }
    if (q->deleted)
        return PASS_DONE;
    for (size_t l = q->len ? q->top + 1 : 0; l-- > 0;) {
        enum pass_result r = ring_page_pass(q, &q->lv[l], window, pressure);
        if (r == PASS_MORE || (r == PASS_WAIT && res == PASS_DONE))
            res = r;
    }
    return res;
}

static void
pager_cb(evutil_socket_t fd, short what, void *arg)
{
    struct queue *q, *next;
    bool pressure = store_memory_pressure();
    size_t window = queue_window();
    (void)fd;
    (void)what;
    (void)arg;

    bool more = false;
    for (q = TAILQ_FIRST(&page_queues); q != NULL; q = next) {
        next = TAILQ_NEXT(q, page_link);
        enum pass_result r = page_pass(q, window, pressure);
        if (r == PASS_DONE)
            page_unlist(q);
        more |= r == PASS_MORE;
    }
    store_page_flush();
    /* A pass that stopped at its budget goes on at the next turn. */
    if (more)
        event_active(pager_ev, EV_TIMEOUT, 0);
    store_trim_memory();
}

void
page_list(struct queue *q)
{
    if (q->page_listed || q->deleted)
        return;
    TAILQ_INSERT_TAIL(&page_queues, q, page_link);
    q->page_listed = true;
}

void
queue_pager_kick(bool pressure_changed)
{
    if (!store_pages())
        return;
    if (pressure_changed) {
        size_t window = queue_window(), pos = 0, qpos;
        struct hmap_slot *s, *qs;
        pressure_gen++;
        while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
            struct vhost *vh = s->val;
            qpos = 0;
            while ((qs = hmap_next(&vh->queues, &qpos)) != NULL) {
                struct queue *q = qs->val;
                if (q->len > window)
                    page_list(q);
                if (q->npaged)
                    queue_fill(q);
            }
        }
    }
    /* A push that took a queue beyond its window lists it (queue_push
     * calls us only then); so does the store, for whatever waits. */
    if (TAILQ_EMPTY(&page_queues) && !pressure_changed)
        return;
    if (pager_ev == NULL)
        pager_ev = event_new(broker.base, -1, 0, pager_cb, NULL);
    event_active(pager_ev, EV_TIMEOUT, 0);
}

/* Take the entry at index 'i' of 'r' out of the ring (moving the
 * shorter side of it) and out of the queue's accounting. */
static struct qentry
remove_at(struct queue *q, struct qring *r, size_t i)
{
    struct qentry e = *at(r, i);
    if (i < r->len / 2) {
        for (size_t k = i; k > 0; k--)
            *at(r, k) = *at(r, k - 1);
        r->head = (r->head + 1) & (r->cap - 1);
    } else {
        for (size_t k = i; k + 1 < r->len; k++)
            *at(r, k) = *at(r, k + 1);
    }
    if (i < r->mem_head)
        r->mem_head--;
    entry_left(q, r, &e);
    return e;
}

/* Drop the entry at index 'i' of 'r' (a record that cannot be read). */
static void
ring_remove(struct queue *q, struct qring *r, size_t i)
{
    entry_end(q, remove_at(q, r, i));
}

/* Bring back the messages a read job of level 'rg' got. */
static void
apply_reads(struct queue *q, struct qring *rg, struct pager_job *j)
{
    for (size_t k = 0; k < j->nreads; k++) {
        struct pager_read *r = &j->reads[k];
        size_t i = index_of_seq(rg, r->seq);
        struct qentry *e = i < rg->len ? at(rg, i) : NULL;
        if (e && e->seq == r->seq && e->paged && e->pg.seg == r->seg &&
            e->pg.off == r->off && e->scratch == r->scratch) {
            struct msg *m = r->err ? NULL : store_page_decode(e, r);
            if (m) {
                q->bytes_paged -= e->body_len;
                store_page_in(q, e, m);
                rg->npaged--;
                q->npaged--;
            } else {
                queue_log(q, NULL, LOG_LVL_WARN, "queue '%s' in vhost '%s': "
                          "the message at position %" PRIu64 " cannot be "
                          "read back (%s segment %u, offset %u: %s); "
                          "dropped", q->name, q->vh->name, e->seq,
                          r->scratch ? "scratch" : "journal", r->seg, r->off,
                          r->err ? strerror(r->err)
                                 : "record does not check out");
                ring_remove(q, rg, i);
            }
        }
    }
    pager_read_free(j);
}

/* What waited for messages to come back goes on. */
static void
after_reads(struct queue *q)
{
    if (q->deleted)
        return;
    queue_expire(q);
    drop_head(q);
    if (q->nconsumers)
        queue_dispatch(q);
    wake_get_waits(q, false);
    queue_fill(q);
    queue_arm(q);
}

static void
fill_done(struct pager_job *j)
{
    struct queue *q = j->arg;
    struct qring *r = &q->lv[j->arg_index];

    if (j->then == NULL) {
        r->filling--;
        r->fill_pending -= j->nreads;
    }
    apply_reads(q, r, j);
    void (*then)(void) = j->then;
    free(j);
    if (!broker.shutting_down)
        after_reads(q);
    queue_unref(q);
    if (then)
        then();
}

/* One more record for job 'j' to read: entry 'e''s, tagged 'tag' (the
 * caller's way back to it); returns its size to come. */
size_t
pager_add_read(struct pager_job *j, size_t *cap, const struct qentry *e,
         uint64_t tag)
{
    if (j->nreads == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        j->reads = xrealloc(j->reads, *cap * sizeof(*j->reads));
    }
    struct pager_read *r = &j->reads[j->nreads++];
    memset(r, 0, sizeof(*r));
    r->seq = tag;
    r->seg = e->pg.seg;
    r->off = e->pg.off;
    r->scratch = e->scratch;
    r->want = e->body_len + 1024;
    return r->want;
}

/* Fill read job 'j' for level 'rg' with up to 'max_entries' paged
 * entries from index 'i' on (only those paged to journal segment 'seg',
 * unless it is UINT32_MAX), up to FILL_MAX_BYTES. Returns the index
 * after the last one looked at. */
static size_t
build_reads(struct qring *rg, size_t i, size_t max_entries, uint32_t seg,
            struct pager_job *j)
{
    size_t cap = 0, bytes = 0;

    for (; i < rg->len && j->nreads < max_entries && bytes < FILL_MAX_BYTES;
         i++) {
        struct qentry *e = at(rg, i);
        if (!e->paged || (seg != UINT32_MAX && (e->scratch || e->pg.seg != seg)))
            continue;
        bytes += pager_add_read(j, &cap, e, e->seq);
    }
    return i;
}

/* A read job for level 'rg' of 'q' (build_reads), brought back by
 * fill_done. Returns the index after the last one looked at;
 * '*submitted' says how many it reads. */
static size_t
submit_reads(struct queue *q, struct qring *rg, size_t i, size_t max_entries,
             uint32_t seg, void (*then)(void), size_t *submitted)
{
    struct pager_job *j = xcalloc(1, sizeof(*j));

    i = build_reads(rg, i, max_entries, seg, j);
    *submitted = j->nreads;
    if (j->nreads == 0) {
        free(j);
        return i;
    }
    j->kind = PAGER_READ;
    j->log_sid = q->ops->log ? q->sid : 0;
    j->done = fill_done;
    j->arg = queue_ref(q);
    j->arg_index = (uint32_t)(rg - q->lv);
    j->then = then;
    store_read_submit(j);
    return i;
}

/* Read ahead in level 'r': keep a window's worth in memory at its head,
 * or on its way, in reads of half a window, two at a time at most. */
static void
ring_fill(struct queue *q, struct qring *r, size_t w)
{
    size_t sent;

    if (r->filling >= 2 || r->npaged == 0)
        return;
    while (r->mem_head < r->len && !at(r, r->mem_head)->paged)
        r->mem_head++;
    if (r->mem_head + r->fill_pending >= w)
        return;
    size_t from = r->filling ? index_of_seq(r, r->fill_seq) : r->mem_head;
    size_t end = submit_reads(q, r, from, w / 2, UINT32_MAX, NULL, &sent);
    if (sent) {
        r->filling++;
        r->fill_pending += sent;
        r->fill_seq = end < r->len ? at(r, end)->seq : q->next_seq;
    }
}

void
queue_fill(struct queue *q)
{
    if (q->npaged == 0 || q->deleted)
        return;
    size_t w = queue_window();
    for (size_t l = q->top + 1; l-- > 0;)
        ring_fill(q, &q->lv[l], w);
}

size_t
queue_page_in_seg(struct queue *q, uint32_t seg, void (*done)(void))
{
    size_t jobs = 0, sent;

    for (size_t l = 0; l < q->nlv; l++) {
        struct qring *r = &q->lv[l];
        for (size_t i = 0; i < r->len;) {
            i = submit_reads(q, r, i, SIZE_MAX, seg, done, &sent);
            jobs += sent > 0;
        }
    }
    return jobs;
}

void
queue_get_wait(struct queue *q, struct get_wait *w)
{
    w->q = queue_ref(q);
    TAILQ_INSERT_TAIL(&q->get_waits, w, link);
    queue_fill(q);
}

void
queue_get_unwait(struct get_wait *w)
{
    struct queue *q = w->q;
    if (q == NULL)
        return;
    TAILQ_REMOVE(&q->get_waits, w, link);
    w->q = NULL;
    queue_unref(q);
}

/* The waiting basic.gets run again: those whose head is back, or all
 * of them when the queue is gone. */
void
wake_get_waits(struct queue *q, bool gone)
{
    struct get_wait *w;

    queue_ref(q);
    while ((w = TAILQ_FIRST(&q->get_waits)) != NULL &&
           (gone || !queue_head_paged(q))) {
        TAILQ_REMOVE(&q->get_waits, w, link);
        w->q = NULL;
        queue_unref(q);
        w->ready(w, gone ? NULL : q);
    }
    queue_unref(q);
}

/* ---- peeking (queue.h): browse and search ---- */

struct queue_peek *
queue_peek_new(struct queue *q, uint64_t offset, size_t max,
               uint64_t max_bytes)
{
    struct queue_peek *p = xcalloc(1, sizeof(*p));
    uint64_t pos = 0;

    /* Delivery order: the highest level first, each in sequence order. */
    for (size_t l = q->nlv; l-- > 0 && p->n < max;) {
        struct qring *r = &q->lv[l];
        size_t i = 0;
        if (pos + r->len <= offset) {
            pos += r->len;
            continue;
        }
        if (pos < offset) {
            i = (size_t)(offset - pos);
            pos = offset;
        }
        for (; i < r->len && p->n < max; i++, pos++) {
            struct qentry *e = at(r, i);
            uint64_t len = qentry_body_len(e);
            if (p->n > 0 && p->bytes + len > max_bytes)
                return p;
            if (p->n == 0 || (p->n & (p->n - 1)) == 0)
                p->es = xrealloc(p->es, (p->n ? p->n * 2 : 1) *
                                            sizeof(*p->es));
            struct queue_peek_entry *pe = &p->es[p->n++];
            memset(pe, 0, sizeof(*pe));
            pe->position = pos;
            pe->redelivered = e->redelivered;
            pe->deliveries = e->deliveries;
            pe->e = *e;
            if (!e->paged) {
                pe->m = msg_ref(e->m);
                pe->e.m = NULL;
            }
            p->bytes += len;
        }
    }
    return p;
}

static void
peek_release(struct queue_peek *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->es[i].m)
            msg_unref(p->es[i].m);
    free(p->es);
    free(p);
}

void
queue_peek_free(struct queue_peek *p)
{
    if (p == NULL)
        return;
    if (p->reading) {
        p->freed = true;        /* peek_read_done frees it */
        return;
    }
    peek_release(p);
}

static void
peek_read_done(struct pager_job *j)
{
    struct queue_peek *p = j->arg;

    for (size_t k = 0; k < j->nreads && !p->freed; k++) {
        struct pager_read *r = &j->reads[k];
        struct queue_peek_entry *pe = &p->es[r->seq];
        /* A copy of its own: the entry itself stays paged. */
        pe->m = r->err ? NULL : store_page_decode(&pe->e, r);
    }
    pager_read_free(j);
    free(j);
    if (--p->reading > 0)
        return;
    if (p->freed)
        peek_release(p);
    else
        p->done(p, p->arg);
}

bool
queue_peek_load(struct queue_peek *p,
                void (*done)(struct queue_peek *p, void *arg), void *arg)
{
    struct pager_job *j = NULL;
    size_t cap = 0, bytes = 0;

    p->done = done;
    p->arg = arg;
    /* Jobs of FILL_MAX_BYTES at most, all handed over now: the pager
     * runs them in order, one at a time. */
    for (size_t i = 0; i <= p->n; i++) {
        if (j != NULL && (i == p->n || bytes >= FILL_MAX_BYTES)) {
            j->kind = PAGER_READ;
            j->done = peek_read_done;
            j->arg = p;
            p->reading++;
            store_read_submit(j);
            j = NULL;
        }
        if (i == p->n)
            break;
        if (p->es[i].m != NULL || !p->es[i].e.paged)
            continue;
        if (j == NULL) {
            j = xcalloc(1, sizeof(*j));
            cap = bytes = 0;
        }
        bytes += pager_add_read(j, &cap, &p->es[i].e, i);
    }
    return p->reading > 0;
}

/* ---- moving entries out (queue.h): the replay of dead letters ---- */

struct queue_cursor {
    uint64_t *from;             /* per level: entries below it passed */
    uint16_t nlv;
    bool reading, freed;
    void (*ready)(void *arg);
    void *arg;
};

/* A read the cursor started: the messages come back into their
 * entries, as a read ahead's do. */
struct cursor_job {
    struct pager_job job;
    struct queue_cursor *c;
};

#define MOVE_READ_MAX 256

struct queue_cursor *
queue_cursor_new(struct queue *q, void (*ready)(void *arg), void *arg)
{
    struct queue_cursor *c = xcalloc(1, sizeof(*c));
    c->nlv = q->nlv;
    c->from = xcalloc(q->nlv, sizeof(*c->from));
    c->ready = ready;
    c->arg = arg;
    return c;
}

void
queue_cursor_free(struct queue_cursor *c)
{
    if (c == NULL)
        return;
    if (c->reading) {
        c->freed = true;        /* cursor_read_done frees it */
        return;
    }
    free(c->from);
    free(c);
}

static void
cursor_read_done(struct pager_job *j)
{
    struct cursor_job *cj = (struct cursor_job *)j;
    struct queue *q = j->arg;
    struct queue_cursor *c = cj->c;

    apply_reads(q, &q->lv[j->arg_index], j);
    free(cj);
    if (!broker.shutting_down)
        after_reads(q);
    queue_unref(q);
    c->reading = false;
    if (c->freed)
        queue_cursor_free(c);
    else
        c->ready(c->arg);
}

/* Read the paged entries of level 'r' from index 'i' on (up to
 * MOVE_READ_MAX of them) back into memory. Unlike a browse, the mover
 * takes them next, so they come back into their entries. */
static void
cursor_read(struct queue *q, struct queue_cursor *c, struct qring *r,
            size_t i)
{
    struct cursor_job *cj = xcalloc(1, sizeof(*cj));
    struct pager_job *j = &cj->job;

    build_reads(r, i, MOVE_READ_MAX, UINT32_MAX, j);
    cj->c = c;
    j->kind = PAGER_READ;
    j->log_sid = q->ops->log ? q->sid : 0;
    j->done = cursor_read_done;
    j->arg = queue_ref(q);
    j->arg_index = (uint32_t)(r - q->lv);
    c->reading = true;
    store_read_submit(j);
}

enum queue_move_result
queue_move_next(struct queue *q, struct queue_cursor *c, queue_move_fn fn,
                void *arg)
{
    static struct route_result rr;
    struct qring *r = NULL;
    size_t i = 0, l;
    struct amqp_bytes rk;

    if (q->deleted || c->nlv != q->nlv)
        return QUEUE_END;
    for (l = q->nlv; l-- > 0;) {
        r = &q->lv[l];
        i = index_of_seq(r, c->from[l]);
        if (i < r->len)
            break;
    }
    if (l == SIZE_MAX)
        return QUEUE_END;
    struct qentry *e = at(r, i);
    if (e->paged) {
        if (!c->reading)
            cursor_read(q, c, r, i);
        return QUEUE_READING;
    }
    /* As a delayed message's (exchange_delayed.c): a copy routed before
     * the original's record is written would let the store drop that
     * record, and a confirm waiting on it go out before the copy is on
     * disk. */
    if (!store_delay_ready(e->m))
        return QUEUE_NOT_WRITTEN;
    uint64_t seq = e->seq;
    struct exchange *x = fn(e->m, &rk, arg);
    if (x == NULL) {
        c->from[l] = seq + 1;
        return QUEUE_PASSED;
    }
    /* Always a copy, with a record of its own: a message and its
     * enqueue records stay in one batch (docs/storage.md). */
    struct amqp_bytes xn = { (const uint8_t *)x->name, x->name_len };
    struct msg *copy = msg_copy_as(e->m, xn, rk);

    rr.n = 0;
    struct msg *out = exchange_route_msg(x, copy, &rr);
    size_t pushed = 0;
    if (rr.n > 0) {
        store_tx_begin();
        struct qentry taken = remove_at(q, r, i);
        for (size_t k = 0; k < rr.n; k++)
            pushed += ring_push(rr.qs[k], out) >= 0;
        if (pushed)
            entry_end(q, taken);
        else
            put_back(q, taken);
        (void)store_tx_end();
    }
    if (out != copy)
        msg_unref(out);
    msg_unref(copy);
    if (!pushed) {
        c->from[l] = seq + 1;
        return QUEUE_PASSED;
    }
    if (q->npaged)
        queue_fill(q);
    return QUEUE_MOVED;
}
