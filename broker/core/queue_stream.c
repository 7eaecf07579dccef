/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The stream queue type (queue.h; docs/streams.md): a log. Entries stay
 * after they are delivered, in the queue's ring, in offset order (an
 * entry's seq is its offset); each consumer reads from its own offset
 * (consumer->offset) with credit, its prefetch count. Retention
 * (x-max-length-bytes, x-max-age, or their policies, whose values win)
 * lets entries go from the head, one message at a time, on each append,
 * when a policy changes and, for age, by the queue's timer. Every
 * message is stored, transient or not, and synced before its confirm;
 * beyond the paging window the ring's entries are paged as any queue's,
 * and a consumer reading behind reads them back on the pager thread
 * into copies of its own, at most its credit at a time.
 *
 * The ring and its accounting are queue.c's (queue_int.h); what is a
 * stream's own is here.
 */
#include "broker/core/queue_int.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/broker.h"
#include "broker/core/msg.h"
#include "broker/core/qargs.h"
#include "broker/core/store.h"
#include "broker/core/stream.h"
#include "broker/core/vhost.h"
#include "broker/lib/hmap.h"
#include "broker/lib/util.h"

/* The most entries, and about the most bytes, one read back takes. */
#define READ_MAX_ENTRIES 256
#define READ_MAX_BYTES (1u << 20)

/* A consumer's reads (c->reader): the messages of a run of paged
 * entries read back, in offset order, handed out from 'next'. */
struct reader {
    struct consumer *c;
    struct queue *q;
    struct qentry *es;          /* the entries read (their offsets) */
    struct msg **ms;            /* their messages; NULL: unreadable */
    size_t n, next;
    bool reading;
    bool detached;              /* its consumer left: freed after the read */
    /* deliveries it nacked or rejected with requeue, or recovered: each
     * goes to it again, lowest offset first, before its offset moves on;
     * no more than it had unacked, so its prefetch count bounds them */
    struct qentry *back;
    size_t nback, back_cap;
    struct cname *name;         /* x-stream-consumer-name, or NULL */
    /* x-stream-filter: the values it takes (in its consumer's
     * arguments, c->args), and whether a message without
     * x-stream-filter-value goes to it too */
    struct amqp_bytes *filters;
    uint64_t *filter_hashes;    /* each value's, for the blocks' filters */
    size_t nfilters;
    bool match_unfiltered;
};

/* The most values one x-stream-filter may list. */
#define FILTERS_MAX 64

/* A consumer name (stream.h): its committed offset, and the offsets
 * delivered to its consumers and not yet settled, ascending, from
 * 'head' to 'n' (at most their prefetch counts; a delivery that
 * was lost with its consumer stays until the name is attached again). */
struct cname {
    char *name;
    size_t len;
    uint64_t committed, updated_wall;
    uint32_t consumers;
    uint64_t *out;
    size_t head, n, cap;
};

/* A stream's own state (q->log), made when it first needs it. */
struct log_state {
    struct hmap names;          /* struct cname */
    struct event *save;         /* STREAM_SAVE_MS after a change */
    bool dirty;
    /* the filter index: block fb_base + i is fb[fb_head + i] */
    struct fblock *fb;
    size_t fb_head, fb_len, fb_cap;
    uint64_t fb_base;
    uint64_t filter_skipped;    /* messages passed over unread */
};

/*
 * The filter index (x-stream-filter; streams-spec.md P11): for each
 * block of FBLOCK_MSGS offsets, a Bloom filter of its messages'
 * x-stream-filter-values (FBLOCK_WORDS * 64 bits, FBLOCK_PROBES probes
 * of one 64-bit hash) and whether one without a value is in it. A
 * filtering consumer whose values cannot be in the block it has reached
 * (and which takes no unfiltered message, or the block has none) passes
 * over the rest of the block without reading it: a Bloom filter's "no"
 * is certain, so filtering stays exact. 72 bytes a block, about a
 * quarter of a byte a message, rebuilt at recovery from the records.
 */
#define FBLOCK_SHIFT 8
#define FBLOCK_MSGS (1u << FBLOCK_SHIFT)
#define FBLOCK_WORDS 8
#define FBLOCK_PROBES 3
struct fblock {
    uint64_t bits[FBLOCK_WORDS];
    bool unfiltered;
};

/* A read back in flight. */
struct read_job {
    struct pager_job job;
    struct reader *rd;
};

static void stream_dispatch(struct queue *q);

/* ---- offsets ---- */

/* The first offset kept, and the one the next append takes. */
static uint64_t
first_offset(const struct queue *q)
{
    return q->lv0.len ? at(&q->lv0, 0)->seq : q->next_seq;
}

struct qentry *
queue_log_entry(struct queue *q, uint64_t offset)
{
    uint64_t first = first_offset(q);

    if (offset < first || offset - first >= q->lv0.len)
        return NULL;
    struct qentry *e = at(&q->lv0, (size_t)(offset - first));
    return e->seq == offset ? e : NULL;
}

/* The first offset whose entry came at most 'age' ms before now (the
 * ring is in append order, so its ages fall: a binary search); ages
 * are the 32 bits of qentry.born, so 'age' counts up to 24 days. An
 * entry whose time is not known (born 0) counts as old. */
static uint64_t
offset_of_age(const struct queue *q, uint64_t age)
{
    const struct qring *r = &q->lv0;
    uint32_t now = (uint32_t)now_ms();
    size_t lo = 0, hi = r->len;

    if (age > UINT32_MAX / 2)
        return first_offset(q);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct qentry *e = at(r, mid);
        if (e->born == 0 || (uint32_t)(now - e->born) > age)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->len ? at(r, lo)->seq : q->next_seq;
}

/* The offset of the last message ("last"; the next one if empty). */
static uint64_t
last_offset(const struct queue *q)
{
    return q->lv0.len ? at(&q->lv0, q->lv0.len - 1)->seq : q->next_seq;
}

/* The first offset appended at or after wall-clock time 't' (ms). */
static uint64_t
offset_at_wall(const struct queue *q, uint64_t t)
{
    uint64_t wall = wall_ms();
    return t >= wall ? q->next_seq : offset_of_age(q, wall - t);
}

/* A consumer argument's value as RabbitMQ formats one it does not take
 * (x-stream-offset's {invalid_stream_offset_arg,{TYPE,VALUE}}). */
static bool
bad_arg(const struct queue *q, const char *key, const char *atom,
        const struct amqp_field *v, char *err, size_t errlen)
{
    char val[300];
    if (v->kind == AMQP_FIELD_LONGSTR || v->kind == AMQP_FIELD_BYTES)
        snprintf(val, sizeof(val), "<<\"%.*s\">>",
                 (int)(v->v.str.len > 200 ? 200 : v->v.str.len),
                 (const char *)v->v.str.ptr);
    else if (v->kind == AMQP_FIELD_BOOL)
        snprintf(val, sizeof(val), "%s", v->v.b ? "true" : "false");
    else
        snprintf(val, sizeof(val), "_");
    snprintf(err, errlen, "invalid arg '%s' for queue '%s' in vhost '%s': "
             "{%s,{%s,%s}}", key, q->name, q->vh->name, atom,
             qargs_type_atom(v->kind), val);
    return false;
}

static bool
bad_offset(const struct queue *q, const struct amqp_field *v, char *err,
           size_t errlen)
{
    return bad_arg(q, "x-stream-offset", "invalid_stream_offset_arg", v, err,
                   errlen);
}

/* Where a consumer with x-stream-offset 'v' starts. */
static bool
parse_offset(const struct queue *q, const struct amqp_field *v,
             uint64_t *out, char *err, size_t errlen)
{
    uint64_t first = first_offset(q), next = q->next_seq;
    int64_t n;

    if (field_as_int(v, &n)) {
        /* -N: the last N messages; past the end: next; below the first
         * kept: the first kept */
        uint64_t back = 0 - (uint64_t)n;    /* -n, INT64_MIN too */
        if (n < 0)
            *out = back >= next - first ? first : next - back;
        else
            *out = (uint64_t)n > next ? next
                   : (uint64_t)n < first ? first : (uint64_t)n;
        return true;
    }
    if (v->kind == AMQP_FIELD_TIMESTAMP) {
        /* seconds: the first message appended at or after it */
        *out = offset_at_wall(q, v->v.u > UINT64_MAX / 1000
                                     ? UINT64_MAX : v->v.u * 1000);
        return true;
    }
    if (v->kind != AMQP_FIELD_LONGSTR && v->kind != AMQP_FIELD_BYTES)
        return bad_offset(q, v, err, errlen);
    struct amqp_bytes s = v->v.str;
    int64_t ms;
    if (amqp_bytes_eq(s, "first"))
        *out = first;
    else if (amqp_bytes_eq(s, "last"))
        *out = last_offset(q);
    else if (amqp_bytes_eq(s, "next"))
        *out = next;
    else if (v->kind == AMQP_FIELD_LONGSTR && qargs_parse_age(s, &ms) == 0 &&
             ms > 0)
        *out = offset_of_age(q, (uint64_t)ms);
    else
        return bad_offset(q, v, err, errlen);
    return true;
}

/* ---- consumer names ---- */

static struct log_state *
state_of(struct queue *q)
{
    if (q->log == NULL) {
        struct log_state *ls = xcalloc(1, sizeof(*ls));
        hmap_init(&ls->names);
        q->log = ls;
    }
    return q->log;
}

static bool
name_expired(const struct cname *n, uint64_t wall)
{
    return n->consumers == 0 &&
           n->updated_wall + (uint64_t)broker.cfg.stream_offset_retention <
               wall;
}

static void
name_free(struct cname *n)
{
    free(n->out);
    free(n->name);
    free(n);
}

static void save_names(struct queue *q);

static void
save_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    save_names(arg);
}

/* The names changed: written STREAM_SAVE_MS from the first change. */
static void
mark_dirty(struct queue *q)
{
    struct log_state *ls = state_of(q);
    ls->dirty = true;
    if (ls->save == NULL)
        ls->save = evtimer_new(broker.base, save_cb, q);
    if (!evtimer_pending(ls->save, NULL)) {
        struct timeval tv = { 0, STREAM_SAVE_MS * 1000 };
        evtimer_add(ls->save, &tv);
    }
}

/* Write every name kept, forgetting those unused too long. */
static void
save_names(struct queue *q)
{
    struct log_state *ls = q->log;
    uint64_t wall = wall_ms();
    struct hmap_slot *s;
    size_t pos = 0, n = 0;

    if (ls == NULL || !ls->dirty)
        return;
    ls->dirty = false;
    /* the expired ones are gathered first: deleting moves slots */
    size_t count = ls->names.count, ngone = 0;
    struct stream_offset *v = xcalloc(count ? count : 1, sizeof(*v));
    struct cname **gone = xcalloc(count ? count : 1, sizeof(*gone));
    while ((s = hmap_next(&ls->names, &pos)) != NULL) {
        struct cname *cn = s->val;
        if (name_expired(cn, wall))
            gone[ngone++] = cn;
        else
            v[n++] = (struct stream_offset){ cn->name, cn->len,
                                             cn->committed, cn->updated_wall };
    }
    store_offsets_save(q, v, n);
    for (size_t i = 0; i < ngone; i++) {
        hmap_del(&ls->names, gone[i]->name, gone[i]->len);
        name_free(gone[i]);
    }
    free(gone);
    free(v);
}

static struct cname *
name_find(const struct queue *q, const char *name, size_t len)
{
    const struct log_state *ls = q->log;
    return ls ? hmap_get(&ls->names, name, len) : NULL;
}

/* Name 'name' of 'q', if kept and not expired (an expired one goes). */
static struct cname *
name_live(struct queue *q, const char *name, size_t len)
{
    struct cname *n = name_find(q, name, len);
    if (n && name_expired(n, wall_ms())) {
        hmap_del(&state_of(q)->names, name, len);
        name_free(n);
        mark_dirty(q);
        n = NULL;
    }
    return n;
}

/* A new name at 'offset'; NULL if the stream keeps as many as it may. */
static struct cname *
name_add(struct queue *q, const char *name, size_t len, uint64_t offset,
         uint64_t wall)
{
    struct log_state *ls = state_of(q);
    if (ls->names.count >= (uint64_t)broker.cfg.stream_names_max)
        return NULL;
    struct cname *n = xcalloc(1, sizeof(*n));
    n->name = xstrndup(name, len);
    n->len = len;
    n->committed = offset;
    n->updated_wall = wall;
    hmap_put(&ls->names, name, len, n);
    return n;
}

/* An offset delivered to a consumer of 'n', in order (deliveries to
 * one consumer rise; two consumers of a name interleave). */
static void
out_add(struct cname *n, uint64_t off)
{
    if (n->head > 0 && n->head * 2 >= n->n) {
        memmove(n->out, n->out + n->head, (n->n - n->head) * sizeof(*n->out));
        n->n -= n->head;
        n->head = 0;
    }
    if (n->n == n->cap) {
        n->cap = n->cap ? n->cap * 2 : 16;
        n->out = xrealloc(n->out, n->cap * sizeof(*n->out));
    }
    size_t i = n->n;
    while (i > n->head && n->out[i - 1] > off) {
        n->out[i] = n->out[i - 1];
        i--;
    }
    n->out[i] = off;
    n->n++;
}

/* An outstanding offset of 'n' settled (one not there is ignored: it
 * was delivered before the name was attached again). */
static void
out_remove(struct cname *n, uint64_t off)
{
    size_t lo = n->head, hi = n->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (n->out[mid] < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n->n || n->out[lo] != off)
        return;
    if (lo == n->head) {
        n->head++;
    } else {
        memmove(n->out + lo, n->out + lo + 1,
                (n->n - lo - 1) * sizeof(*n->out));
        n->n--;
    }
    if (n->head == n->n)
        n->head = n->n = 0;
}

/* The ack watermark of 'n': its lowest outstanding offset, or the
 * lowest offset its consumers ('also' too, one that is leaving) read
 * next. Unchanged while it has neither. */
static void
name_recompute(struct queue *q, struct cname *n, const struct consumer *also)
{
    uint64_t w = n->n > n->head ? n->out[n->head] : UINT64_MAX;
    const struct consumer *c;

    if (also && also->offset < w)
        w = also->offset;
    TAILQ_FOREACH(c, &q->consumers, q_link) {
        const struct reader *rd = c->reader;
        if (rd && rd->name == n && c->offset < w)
            w = c->offset;
    }
    if (w == UINT64_MAX || w == n->committed)
        return;
    n->committed = w;
    n->updated_wall = wall_ms();
    mark_dirty(q);
}

/* The name a consumer gives in 'args': x-stream-consumer-name (1-255
 * bytes), or its tag with x-stream-automatic-offset-tracking true
 * (LavinMQ's). 0: none; -1: refused, 'err' says why. */
static int
consumer_name(const struct queue *q, const struct consumer *c,
              struct amqp_table args, struct amqp_bytes *out, char *err,
              size_t errlen)
{
    struct amqp_field v;

    if (table_get(args, "x-stream-consumer-name", &v)) {
        if (v.kind != AMQP_FIELD_LONGSTR || v.v.str.len == 0 ||
            v.v.str.len > 255)
            return bad_arg(q, "x-stream-consumer-name",
                           "invalid_stream_consumer_name", &v, err, errlen)
                       ? 0 : -1;
        *out = v.v.str;
        return 1;
    }
    if (table_get(args, "x-stream-automatic-offset-tracking", &v) &&
        v.kind == AMQP_FIELD_BOOL && v.v.b && c->tag_len > 0) {
        *out = (struct amqp_bytes){ (const uint8_t *)c->tag, c->tag_len };
        return 1;
    }
    return 0;
}

/* ---- filtering (x-stream-filter; docs/streams.md) ---- */

static void
filters_free(struct reader *rd)
{
    free(rd->filters);
    free(rd->filter_hashes);
    rd->filters = NULL;
    rd->filter_hashes = NULL;
    rd->nfilters = 0;
}

static bool
add_filter(struct reader *rd, const struct amqp_field *v)
{
    if (v->kind != AMQP_FIELD_LONGSTR)
        return false;
    rd->filter_hashes[rd->nfilters] = hash_bytes(v->v.str.ptr, v->v.str.len);
    rd->filters[rd->nfilters++] = v->v.str;
    return true;
}

/* x-stream-filter (a string, or an array of at most FILTERS_MAX strings:
 * any of them) and x-stream-match-unfiltered (bool) into 'rd', from
 * 'args', which outlive it (the consumer's own copy); false refuses the
 * consumer with 'err'. */
static bool
parse_filter(const struct queue *q, struct reader *rd,
             struct amqp_table args, char *err, size_t errlen)
{
    struct amqp_field v, u;

    if (table_get(args, "x-stream-match-unfiltered", &u)) {
        if (u.kind != AMQP_FIELD_BOOL)
            return bad_arg(q, "x-stream-match-unfiltered",
                           "invalid_stream_match_unfiltered", &u, err,
                           errlen);
        rd->match_unfiltered = u.v.b;
    }
    if (!table_get(args, "x-stream-filter", &v))
        return true;
    bool ok = true;
    if (v.kind == AMQP_FIELD_ARRAY) {
        struct table_iter it;
        struct amqp_field e;
        size_t n = array_count(v.v.array);
        ok = n > 0 && n <= FILTERS_MAX;
        rd->filters = xcalloc(n ? n : 1, sizeof(*rd->filters));
        rd->filter_hashes = xcalloc(n ? n : 1, sizeof(*rd->filter_hashes));
        array_iter_init(&it, v.v.array);
        while (ok && array_next(&it, &e))
            ok = add_filter(rd, &e);
    } else {
        rd->filters = xcalloc(1, sizeof(*rd->filters));
        rd->filter_hashes = xcalloc(1, sizeof(*rd->filter_hashes));
        ok = add_filter(rd, &v);
    }
    if (!ok) {
        filters_free(rd);
        return bad_arg(q, "x-stream-filter", "invalid_stream_filter", &v,
                       err, errlen);
    }
    return true;
}

/* Whether 'm' goes to a consumer reading with 'rd''s filter: its
 * x-stream-filter-value is one of the values, exactly (RabbitMQ's Bloom
 * filter without a false positive); one without goes with
 * x-stream-match-unfiltered. */
/* Probe 'k' of hash 'h': its word and bit (double hashing). */
static void
probe(uint64_t h, unsigned k, size_t *word, uint64_t *bit)
{
    uint64_t v = (h & 0xffffffffu) + k * ((h >> 32) | 1);
    v %= FBLOCK_WORDS * 64;
    *word = (size_t)(v / 64);
    *bit = UINT64_C(1) << (v % 64);
}

bool
stream_filter_hash(const struct amqp_table *headers, uint64_t *hash)
{
    struct amqp_field v;

    if (!table_get(*headers, "x-stream-filter-value", &v) ||
        (v.kind != AMQP_FIELD_LONGSTR && v.kind != AMQP_FIELD_BYTES))
        return false;
    *hash = hash_bytes(v.v.str.ptr, v.v.str.len);
    return true;
}

/* The block of 'offset', made (with those before it) if new; NULL if
 * it is below the blocks kept. */
static struct fblock *
fblock_of(struct log_state *ls, uint64_t offset, bool make)
{
    uint64_t b = offset >> FBLOCK_SHIFT;

    if (ls->fb_len == 0 && make)
        ls->fb_base = b;
    if (b < ls->fb_base)
        return NULL;
    while (make && b - ls->fb_base >= ls->fb_len) {
        if (ls->fb_head + ls->fb_len == ls->fb_cap) {
            if (ls->fb_head > ls->fb_cap / 2) {
                memmove(ls->fb, ls->fb + ls->fb_head,
                        ls->fb_len * sizeof(*ls->fb));
                ls->fb_head = 0;
            } else {
                ls->fb_cap = ls->fb_cap ? ls->fb_cap * 2 : 16;
                ls->fb = xrealloc(ls->fb, ls->fb_cap * sizeof(*ls->fb));
            }
        }
        memset(&ls->fb[ls->fb_head + ls->fb_len++], 0, sizeof(*ls->fb));
    }
    return b - ls->fb_base < ls->fb_len
               ? &ls->fb[ls->fb_head + (size_t)(b - ls->fb_base)] : NULL;
}

/* The message at 'offset' has x-stream-filter-value hash 'h' (or none,
 * 'has' false); the blocks wholly below the first offset kept go. */
static void
filter_note(struct queue *q, uint64_t offset, bool has, uint64_t h)
{
    struct log_state *ls = state_of(q);
    uint64_t first = first_offset(q) >> FBLOCK_SHIFT;

    while (ls->fb_len > 0 && ls->fb_base < first) {
        ls->fb_head++;
        ls->fb_len--;
        ls->fb_base++;
    }
    struct fblock *b = fblock_of(ls, offset, true);
    if (!has) {
        b->unfiltered = true;
        return;
    }
    for (unsigned k = 0; k < FBLOCK_PROBES; k++) {
        size_t w;
        uint64_t bit;
        probe(h, k, &w, &bit);
        b->bits[w] |= bit;
    }
}

void
stream_restore_filter(struct queue *q, uint64_t offset, bool has,
                      uint64_t hash)
{
    filter_note(q, offset, has, hash);
}

/* Whether a message consumer 'rd' takes may be in block 'b'. */
static bool
block_may_take(const struct reader *rd, const struct fblock *b)
{
    if (b->unfiltered && rd->match_unfiltered)
        return true;
    for (size_t i = 0; i < rd->nfilters; i++) {
        uint64_t h = rd->filter_hashes[i];
        unsigned k;
        for (k = 0; k < FBLOCK_PROBES; k++) {
            size_t w;
            uint64_t bit;
            probe(h, k, &w, &bit);
            if (!(b->bits[w] & bit))
                break;
        }
        if (k == FBLOCK_PROBES)
            return true;
    }
    return false;
}

/* Where filtering consumer 'c' at 'offset' goes on: past the rest of
 * its block if nothing there is for it, else 'offset' itself. */
static uint64_t
filter_skip(struct queue *q, const struct consumer *c, uint64_t offset)
{
    struct log_state *ls = q->log;
    const struct reader *rd = c->reader;

    if (ls == NULL || rd == NULL || rd->nfilters == 0)
        return offset;
    const struct fblock *b = fblock_of(ls, offset, false);
    if (b == NULL || block_may_take(rd, b))
        return offset;
    uint64_t end = ((offset >> FBLOCK_SHIFT) + 1) << FBLOCK_SHIFT;
    if (end > q->next_seq)
        end = q->next_seq;
    ls->filter_skipped += end - offset;
    return end;
}

static bool
filter_takes(const struct reader *rd, const struct msg *m)
{
    struct amqp_field v;

    if (rd->nfilters == 0)
        return true;
    if (!table_get(msg_headers(m), "x-stream-filter-value", &v) ||
        (v.kind != AMQP_FIELD_LONGSTR && v.kind != AMQP_FIELD_BYTES))
        return rd->match_unfiltered;
    for (size_t i = 0; i < rd->nfilters; i++)
        if (v.v.str.len == rd->filters[i].len &&
            memcmp(v.v.str.ptr, rd->filters[i].ptr, v.v.str.len) == 0)
            return true;
    return false;
}

static uint64_t
clamp_offset(const struct queue *q, uint64_t off)
{
    uint64_t first = first_offset(q);
    return off < first ? first : off > q->next_seq ? q->next_seq : off;
}

/* ---- consumers ---- */

static bool
stream_attach(struct queue *q, struct consumer *c, struct amqp_table args,
              char *err, size_t errlen)
{
    struct amqp_field v;
    struct amqp_bytes name = { NULL, 0 };

    int named = consumer_name(q, c, args, &name, err, errlen);
    if (named < 0)
        return false;
    struct cname *n = named ? name_live(q, (const char *)name.ptr, name.len)
                            : NULL;
    c->offset = q->next_seq;
    if (n != NULL)
        c->offset = clamp_offset(q, n->committed);    /* x-stream-offset: no */
    else if (table_get(args, "x-stream-offset", &v) &&
             !parse_offset(q, &v, &c->offset, err, errlen))
        return false;
    struct reader *rd = xcalloc(1, sizeof(*rd));
    rd->c = c;
    rd->q = q;
    if (!parse_filter(q, rd, args, err, errlen)) {
        free(rd);
        return false;
    }
    uint64_t wall = wall_ms();
    if (named && n == NULL) {
        n = name_add(q, (const char *)name.ptr, name.len, c->offset, wall);
        if (n == NULL) {
            snprintf(err, errlen, "stream '%s' in vhost '%s' keeps %lld "
                     "consumer names (stream.consumer_names_max): a new "
                     "x-stream-consumer-name is refused", q->name,
                     q->vh->name, (long long)broker.cfg.stream_names_max);
            filters_free(rd);
            free(rd);
            return false;
        }
    }
    c->reader = rd;
    if (n != NULL) {
        /* what its consumers had outstanding was lost with them: it is
         * read again from the committed offset */
        if (n->consumers++ == 0)
            n->head = n->n = 0;
        n->updated_wall = wall;
        rd->name = n;
        mark_dirty(q);
    }
    return true;
}

/* Let go of what 'rd' read and has not handed out. */
static void
reader_clear(struct reader *rd)
{
    for (size_t i = rd->next; i < rd->n; i++)
        if (rd->ms[i] != NULL)
            msg_unref(rd->ms[i]);
    free(rd->es);
    free(rd->ms);
    rd->es = NULL;
    rd->ms = NULL;
    rd->n = rd->next = 0;
}

static void
stream_detach(struct queue *q, struct consumer *c)
{
    struct reader *rd = c->reader;
    if (rd == NULL)
        return;
    c->reader = NULL;
    filters_free(rd);
    if (rd->name != NULL) {
        name_recompute(q, rd->name, c);
        rd->name->consumers--;
        rd->name->updated_wall = wall_ms();
        mark_dirty(q);
        rd->name = NULL;
    }
    reader_clear(rd);
    for (size_t i = 0; i < rd->nback; i++)
        msg_unref(rd->back[i].m);
    free(rd->back);
    rd->back = NULL;
    rd->nback = 0;
    if (rd->reading)
        rd->detached = true;
    else
        free(rd);
}

static void
read_done(struct pager_job *j)
{
    struct read_job *rj = (struct read_job *)j;
    struct reader *rd = rj->rd;
    struct queue *q = rd->q;
    struct consumer *c = rd->c;

    rd->reading = false;
    if (!rd->detached) {
        rd->ms = xcalloc(j->nreads ? j->nreads : 1, sizeof(*rd->ms));
        for (size_t k = 0; k < j->nreads; k++) {
            struct pager_read *r = &j->reads[k];
            rd->ms[k] = r->err ? NULL : store_page_decode(&rd->es[k], r);
        }
        rd->n = j->nreads;
        rd->next = 0;
    }
    pager_read_free(j);
    free(rj);
    if (rd->detached) {
        reader_clear(rd);
        free(rd);
    } else if (!q->deleted) {
        stream_dispatch(q);
    }
    consumer_unref(c);
    queue_unref(q);
}

/* Read back the run of paged entries from ring index 'i' on, for
 * consumer 'c': at most its credit, READ_MAX_ENTRIES and about
 * READ_MAX_BYTES. */
static void
reader_start(struct queue *q, struct consumer *c, size_t i)
{
    struct reader *rd = c->reader;
    struct read_job *rj = xcalloc(1, sizeof(*rj));
    size_t cap = 0, bytes = 0, max = READ_MAX_ENTRIES;

    if (c->prefetch > c->unacked && c->prefetch - c->unacked < max)
        max = c->prefetch - c->unacked;
    reader_clear(rd);
    rd->es = xcalloc(max, sizeof(*rd->es));
    for (; i < q->lv0.len && rj->job.nreads < max && bytes < READ_MAX_BYTES;
         i++) {
        const struct qentry *e = at(&q->lv0, i);
        if (!e->paged)
            break;
        rd->es[rj->job.nreads] = *e;
        bytes += pager_add_read(&rj->job, &cap, e, rj->job.nreads);
    }
    rd->reading = true;
    rj->rd = rd;
    rj->job.kind = PAGER_READ;
    rj->job.log_sid = q->sid;
    rj->job.done = read_done;
    c->refs++;
    queue_ref(q);
    store_read_submit(&rj->job);
}

/* The message of entry 'e' (at ring index 'i') for consumer 'c': a new
 * reference, or NULL when it must be read back first (a read is then
 * under way) or could not be read (then '*skip'). */
static struct msg *
message_for(struct queue *q, struct consumer *c, const struct qentry *e,
            size_t i, bool *skip)
{
    struct reader *rd = c->reader;

    *skip = false;
    if (!e->paged)
        return msg_ref(e->m);
    if (rd->reading)
        return NULL;
    if (rd->next < rd->n && rd->es[rd->next].seq == e->seq) {
        struct msg *m = rd->ms[rd->next++];
        if (m == NULL) {
            queue_log(q, NULL, LOG_LVL_ERROR, "stream '%s' in vhost '%s': "
                      "offset %llu could not be read back; skipped",
                      q->name, q->vh->name, (unsigned long long)e->seq);
            *skip = true;
        }
        return m;
    }
    reader_start(q, c, i);
    return NULL;
}

static void
stream_redeliver(struct queue *q, struct consumer *c, struct qentry e)
{
    struct reader *rd = c->reader;
    if (rd->nback == rd->back_cap) {
        rd->back_cap = rd->back_cap ? rd->back_cap * 2 : 8;
        rd->back = xrealloc(rd->back, rd->back_cap * sizeof(*rd->back));
    }
    size_t i = rd->nback;
    while (i > 0 && rd->back[i - 1].seq > e.seq) {
        rd->back[i] = rd->back[i - 1];
        i--;
    }
    e.redelivered = 1;
    rd->back[i] = e;
    rd->nback++;
    (void)q;    /* the channel dispatches the queue after settling */
}

/* A delivery to 'c' settled by its client: with requeue it goes to 'c'
 * again if 'c' is still attached (else it stays outstanding for the
 * name: read again when the name is next attached); without, the
 * name's watermark may move past it. The entry stays in the log. */
static void
stream_settle_by(struct queue *q, struct consumer *c, struct qentry e,
                 bool requeue)
{
    struct reader *rd = c->reader;
    if (requeue && rd != NULL) {
        stream_redeliver(q, c, e);
        return;
    }
    msg_unref(e.m);
    if (!requeue && rd != NULL && rd->name != NULL) {
        out_remove(rd->name, e.seq);
        name_recompute(q, rd->name, NULL);
    }
}

/* The first delivery that came back to 'c', taken. */
static bool
take_back(struct consumer *c, struct qentry *out)
{
    struct reader *rd = c->reader;
    if (rd->nback == 0)
        return false;
    *out = rd->back[0];
    memmove(rd->back, rd->back + 1, --rd->nback * sizeof(*rd->back));
    return true;
}

/* Hand each consumer with credit what lies at its offset, in turns. */
static void
stream_dispatch(struct queue *q)
{
    if (q->dispatching || q->deleted)
        return;
    q->dispatching = true;
    bool more = true;
    while (more) {
        more = false;
        struct consumer *c;
        TAILQ_FOREACH(c, &q->consumers, q_link) {
            if (!c->ops->can_take(c))
                continue;
            struct qentry d;
            if (take_back(c, &d)) {
                more = true;
                c->ops->deliver(c, q, d);
                continue;
            }
            uint64_t past = filter_skip(q, c, c->offset);
            if (past != c->offset) {
                /* a whole block passed over unread, as filtered-out
                 * messages are: no credit, and a name with nothing
                 * outstanding moves past it */
                struct reader *rdr = c->reader;
                c->offset = past;
                more = true;
                if (rdr->name && rdr->name->n == rdr->name->head)
                    name_recompute(q, rdr->name, NULL);
                continue;
            }
            size_t i = index_of_seq(&q->lv0, c->offset);
            if (i >= q->lv0.len)
                continue;
            const struct qentry *e = at(&q->lv0, i);
            bool skip;
            struct msg *m = message_for(q, c, e, i, &skip);
            if (m == NULL && !skip)
                continue;
            c->offset = e->seq + 1;
            more = true;
            if (m == NULL)
                continue;
            struct reader *rd = c->reader;
            if (!filter_takes(rd, m)) {
                /* no credit taken; a name with nothing outstanding
                 * moves past it */
                msg_unref(m);
                if (rd->name && rd->name->n == rd->name->head)
                    name_recompute(q, rd->name, NULL);
                continue;
            }
            d = *e;
            d.m = m;
            d.paged = d.scratch = d.stored = 0;
            d.redelivered = 0;
            d.deliveries = 0;       /* the copy has no log_seg, log_off */
            d.body_len = 0;
            if (rd->name)
                out_add(rd->name, e->seq);
            c->ops->deliver(c, q, d);
        }
    }
    q->dispatching = false;
}

/* ---- retention ----
 *
 * The rings' own limits do it, one message at a time: x-max-length-bytes
 * (or its policy) is drop-head's byte limit, and an entry's expiry is
 * its append time plus x-max-age (or its policy), so the queue's timer
 * lets the head go on time, idle stream or not. A log drops instead of
 * dead-lettering (queue.c, dead_letter). */

static void
retain(struct queue *q)
{
    drop_head(q);
    queue_expire(q);
    queue_arm(q);
}

/* x-max-age, or the max-age policy, in ms; -1: none (qentry.expires_at
 * has 60 bits: an age beyond 2^58 ms, nine million years, is none). */
static int64_t
max_age(const struct queue *q)
{
    return q->qa.max_age_ms < (INT64_C(1) << 58) ? q->qa.max_age_ms : -1;
}

/* Entry 'e''s deadline under the max-age in force: its append time plus
 * the age; 0: none. The append time is known from e->born for ages of
 * up to 24 days (as offset_of_age's); an older entry keeps the deadline
 * it has, if it has one. */
static uint64_t
deadline_of(const struct queue *q, const struct qentry *e, uint64_t now)
{
    int64_t age = max_age(q);
    if (age < 0)
        return 0;
    uint32_t held = e->born ? (uint32_t)now - e->born : UINT32_MAX;
    if (held > UINT32_MAX / 2) {
        if (e->expires_at)
            return e->expires_at;
        held = UINT32_MAX / 2;
    }
    uint64_t d = now + (uint64_t)age;
    return d > held ? d - held : 1;     /* 1: due already, 0 is never */
}

/* A policy changed the max-age: every deadline follows at once, and
 * queue_set_qargs lets go what is then due (and what a new
 * max-length-bytes no longer holds). */
static void
stream_reconfigure(struct queue *q, const struct qargs *was)
{
    if (was->max_age_ms == q->qa.max_age_ms)
        return;
    uint64_t now = now_ms();
    for (size_t i = 0; i < q->lv0.len; i++) {
        struct qentry *e = at(&q->lv0, i);
        e->expires_at = deadline_of(q, e, now);
    }
}

/* ---- the table ---- */

static int
stream_push(struct queue *q, struct msg *m)
{
    int64_t age = max_age(q);
    uint64_t expires = age >= 0 ? now_ms() + (uint64_t)age : 0;
    struct qentry *e = ring_append(q, &q->lv0, m, expires);
    int stored = e->stored;
    uint64_t h = 0;
    struct amqp_table hd = msg_headers(m);
    bool has = stream_filter_hash(&hd, &h);
    filter_note(q, e->seq, has, h);
    retain(q);
    if (q->nconsumers)
        stream_dispatch(q);
    ring_maybe_page(q, &q->lv0);
    return stored;
}

/* Nothing is taken: basic.get is refused before (540). */
static bool
stream_take(struct queue *q, struct qentry *out)
{
    (void)q;
    (void)out;
    return false;
}

/* A delivery settled (acked, rejected or nacked without requeue, or
 * returned after its consumer left): the entry stays in the log; only
 * the consumer's copy goes. */
static void
stream_settle(struct queue *q, struct qentry e)
{
    (void)q;
    msg_unref(e.m);
}

/* Purge is refused before (540). */
static uint32_t
stream_purge(struct queue *q)
{
    (void)q;
    return 0;
}

/* The deadline the store kept is the max-age's when the message came: a
 * policy may have changed it since. */
static void
stream_restore(struct queue *q, const struct qentry *e, uint8_t priority,
               uint64_t due)
{
    struct qentry re = *e;
    (void)due;
    re.expires_at = deadline_of(q, e, now_ms());
    ring_restore(q, &re, priority, 0);
}

static void
stream_release(struct queue *q)
{
    struct log_state *ls = q->log;
    struct hmap_slot *s;
    size_t pos = 0;

    if (ls == NULL)
        return;
    while ((s = hmap_next(&ls->names, &pos)) != NULL)
        name_free(s->val);
    hmap_destroy(&ls->names);
    if (ls->save)
        event_free(ls->save);
    free(ls->fb);
    free(ls);
    q->log = NULL;
}

static const char *
stream_refused_arg(const struct qargs *qa)
{
    return qa->not_stream;
}

/* rabbit_stream_queue:capabilities/0's unsupported_policies, less the
 * keys Roost's policies do not hold (max-priority,
 * single-active-consumer, ha-*), and Roost's keys for queues whose
 * messages come back. */
static const char *const stream_refused_policy_keys[] = {
    "expires", "message-ttl", "dead-letter-exchange",
    "dead-letter-routing-key", "max-length", "max-in-memory-length",
    "max-in-memory-bytes", "overflow", "queue-mode", "delivery-limit",
    "queue-master-locator", "dead-letter-strategy",
    "requeue-delay", "requeue-delay-max", "roost-delivery-limit", NULL,
};

const struct queue_ops queue_stream_ops = {
    .type = "stream",
    .rabbit_name = "rabbit_stream_queue",
    .stores_messages = true,
    .stores_transient = true,
    .log = true,
    .refused_policy_keys = stream_refused_policy_keys,
    .refused_property = qargs_stream_refused_property,
    .refused_arg = stream_refused_arg,
    .push = stream_push,
    .take = stream_take,
    .dispatch = stream_dispatch,
    .ack = stream_settle,
    .reject = stream_settle,
    .requeue = stream_settle,
    .retry = stream_settle,
    .settle_by = stream_settle_by,
    .release = stream_release,
    .purge = stream_purge,
    .info = ring_info,
    .restore = stream_restore,
    .attach = stream_attach,
    .detach = stream_detach,
    .reconfigure = stream_reconfigure,
};

/* ---- consumer names, for recovery and the management API ---- */

void
stream_restore_offset(struct queue *q, const char *name, size_t len,
                      uint64_t offset, uint64_t updated_wall)
{
    struct cname *n = name_find(q, name, len);
    if (n == NULL)
        n = name_add(q, name, len, offset, updated_wall);
    if (n != NULL) {
        n->committed = offset;
        n->updated_wall = updated_wall;
    }
}

void
stream_foreach_name(const struct queue *q,
                    void (*each)(const struct stream_name_info *ni, void *arg),
                    void *arg)
{
    const struct log_state *ls = q->log;
    uint64_t wall = wall_ms();
    struct hmap_slot *s;
    size_t pos = 0;

    if (ls == NULL)
        return;
    while ((s = hmap_next(&ls->names, &pos)) != NULL) {
        const struct cname *n = s->val;
        if (name_expired(n, wall))
            continue;
        uint64_t off = clamp_offset(q, n->committed);
        struct stream_name_info ni = { n->name, n->len, off,
                                       q->next_seq - off, n->updated_wall,
                                       n->consumers };
        each(&ni, arg);
    }
}

uint64_t
stream_position(const struct queue *q, enum stream_pos how, uint64_t value)
{
    switch (how) {
    case STREAM_FIRST:
        return first_offset(q);
    case STREAM_LAST:
        return last_offset(q);
    case STREAM_AT_TIME:
        return offset_at_wall(q, value);
    case STREAM_AT_OFFSET:
        break;
    }
    return clamp_offset(q, value);
}

enum stream_name_result
stream_set_offset(struct queue *q, const char *name, size_t len,
                  uint64_t offset)
{
    struct cname *n = name_live(q, name, len);
    uint64_t wall = wall_ms();

    if (n != NULL && n->consumers > 0)
        return STREAM_NAME_ATTACHED;
    if (n == NULL && (n = name_add(q, name, len, offset, wall)) == NULL)
        return STREAM_NAME_FULL;
    n->committed = offset;
    n->updated_wall = wall;
    n->head = n->n = 0;
    mark_dirty(q);
    return STREAM_NAME_OK;
}

enum stream_name_result
stream_forget_name(struct queue *q, const char *name, size_t len)
{
    struct cname *n = name_live(q, name, len);

    if (n == NULL)
        return STREAM_NAME_UNKNOWN;
    if (n->consumers > 0)
        return STREAM_NAME_ATTACHED;
    hmap_del(&state_of(q)->names, name, len);
    name_free(n);
    mark_dirty(q);
    return STREAM_NAME_OK;
}

void
stream_flush_offsets(void)
{
    struct hmap_slot *s, *qs;
    size_t pos = 0, qpos;

    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
        struct vhost *vh = s->val;
        qpos = 0;
        while ((qs = hmap_next(&vh->queues, &qpos)) != NULL) {
            struct queue *q = qs->val;
            if (q->ops == &queue_stream_ops)
                save_names(q);
        }
    }
}

/* The wall-clock time entry 'e' was appended (its born is monotonic,
 * 32 bits of ms). */
static int64_t
appended_wall(const struct qentry *e)
{
    uint32_t age = (uint32_t)now_ms() - e->born;
    return (int64_t)(wall_ms() - age);
}

void
stream_info(const struct queue *q, struct stream_info *out)
{
    const struct log_state *ls = q->log;
    const struct qring *r = &q->lv0;

    *out = (struct stream_info){ .first_offset = first_offset(q),
                                 .next_offset = q->next_seq,
                                 .messages = r->len, .bytes = q->bytes,
                                 .first_timestamp = -1,
                                 .last_timestamp = -1 };
    if (r->len) {
        out->first_timestamp = appended_wall(at(r, 0));
        out->last_timestamp = appended_wall(at(r, r->len - 1));
    }
    out->retention_dropped = q->dropped[DROP_EXPIRED] + q->dropped[DROP_MAXLEN];
    out->names = ls ? ls->names.count : 0;
    out->filter_skipped = ls ? ls->filter_skipped : 0;
    if (store_impl->stream_files)
        store_impl->stream_files(q, &out->segments, &out->disk_bytes,
                                 &out->segment_size);
}
