/*
 * SPDX-License-Identifier: Apache-2.0
 * The journal's stream logs (streams.h).
 */
#define _GNU_SOURCE
#include "broker/store/streams.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/core/broker.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/stream.h"
#include "broker/core/vhost.h"
#include "broker/lib/hmap.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/store/io.h"
#include "broker/store/journal.h"
#include "broker/store/record.h"
#include "broker/store/replay.h"
#include "broker/store/seglog.h"
#include "broker/store/store.h"
#include "broker/store/store_defs.h"

/* A message waiting for its record to be written. */
struct spend {
    struct msg *m;              /* a reference */
    uint64_t offset, wall;
    uint64_t batch;             /* the open batch when it was appended */
};

/* One stream's log. It lives while its queue does, and after, until
 * the job that deletes its files is done. */
struct slog {
    uint32_t sid;
    struct queue *q;            /* NULL once the stream is deleted */
    char dir[4300];
    struct seglog *log;
    struct seglog_writer w;     /* the I/O thread's */
    struct spend *pend;
    size_t npend, pend_cap;
    uint64_t trim;              /* the first offset retained */
    bool trim_due;              /* a J_STRIM for the next job */
    bool remove;                /* deleted: its files go with the next job */
    bool in_job;                /* a part of the job in hand */
    bool due;                   /* on the 'due' list */
    TAILQ_ENTRY(slog) link;
};

TAILQ_HEAD(slog_list, slog);

static struct {
    bool open;
    char dir[4200];             /* dir/streams */
    uint64_t seg_size;
    struct msg_env_cache *envs;
    struct hmap by_sid;         /* struct slog */
    struct slog_list due;       /* something for the next job */
} sl;

/* ---- the logs ---- */

/* A J_SMSG record's offset and append time (seglog's stamp). */
static bool
stamp(const struct rec *r, uint64_t *offset, uint64_t *time)
{
    struct rbuf b;

    if (r->type != J_SMSG)
        return false;
    rbuf_init(&b, r->payload, r->len);
    *offset = rbuf_u64(&b);
    *time = rbuf_u64(&b);
    return !b.bad;
}

/* The segment size stream 'q' asks for, raised to the floor. */
static uint64_t
seg_size_of(const struct queue *q)
{
    int64_t want = q ? q->qa.segment_size : -1;
    if (want < 0)
        return sl.seg_size;
    return (uint64_t)want < STREAM_SEG_MIN ? STREAM_SEG_MIN : (uint64_t)want;
}

static struct slog *
slog_new(uint32_t sid, struct queue *q)
{
    struct slog *s = xcalloc(1, sizeof(*s));
    char name[64];

    s->sid = sid;
    s->q = q;
    snprintf(s->dir, sizeof(s->dir), "%s/%" PRIu32, sl.dir, sid);
    snprintf(name, sizeof(name), "stream %" PRIu32, sid);
    struct seglog_config cfg = { .dir = s->dir, .name = name,
                                 .seg_size = seg_size_of(q),
                                 .header = store_seg_header, .stamp = stamp };
    s->log = seglog_new(&cfg);
    s->w.fd = s->w.dirfd = -1;
    snprintf(s->w.label, sizeof(s->w.label), "streams/%" PRIu32, sid);
    hmap_put(&sl.by_sid, &s->sid, sizeof(s->sid), s);
    return s;
}

static void
slog_free(struct slog *s)
{
    for (size_t i = 0; i < s->npend; i++)
        msg_unref(s->pend[i].m);
    free(s->pend);
    seglog_writer_close(&s->w);
    seglog_free(s->log);
    free(s);
}

/* The log of stream 'q', made on first need. */
static struct slog *
slog_of(struct queue *q)
{
    struct slog *s = hmap_get(&sl.by_sid, &q->sid, sizeof(q->sid));
    return s ? s : slog_new(q->sid, q);
}

static void
mark_due(struct slog *s)
{
    if (!s->due) {
        s->due = true;
        TAILQ_INSERT_TAIL(&sl.due, s, link);
    }
}

int
slogs_open(const char *dir, uint64_t seg_size, struct msg_env_cache *envs)
{
    snprintf(sl.dir, sizeof(sl.dir), "%s/streams", dir);
    if (mkdir(sl.dir, 0750) != 0 && errno != EEXIST)
        return -1;
    if (store_sync_dir(dir) != 0)
        return -1;
    sl.seg_size = seg_size;
    sl.envs = envs;
    hmap_init(&sl.by_sid);
    TAILQ_INIT(&sl.due);
    sl.open = true;
    return 0;
}

void
slogs_close(void)
{
    size_t pos = 0;
    struct hmap_slot *s;

    if (!sl.open)
        return;
    while ((s = hmap_next(&sl.by_sid, &pos)) != NULL)
        slog_free(s->val);
    hmap_destroy(&sl.by_sid);
    sl.open = false;
}

/* ---- what changes ---- */

void
slog_append(struct queue *q, const struct qentry *e)
{
    struct slog *s = slog_of(q);

    if (s->npend == s->pend_cap) {
        s->pend_cap = s->pend_cap ? s->pend_cap * 2 : 64;
        s->pend = xrealloc(s->pend, s->pend_cap * sizeof(*s->pend));
    }
    struct spend *p = &s->pend[s->npend++];
    p->m = msg_ref(e->m);
    p->offset = e->seq;
    p->batch = store_open_batch();
    p->wall = wall_ms();
    if (e->born)
        p->wall -= (uint32_t)((uint32_t)now_ms() - e->born);
    mark_due(s);
}

void
slog_settled(struct queue *q, const struct qentry *e)
{
    struct slog *s = slog_of(q);

    if (e->seq + 1 <= s->trim)
        return;
    s->trim = e->seq + 1;
    s->trim_due = true;
    /* Files wholly before it go with the job that carries the J_STRIM,
     * after its sync (the records they held are never read again: the
     * entries are gone). */
    seglog_drop_before(s->log, s->trim);
    mark_due(s);
}

void
slog_gone(struct queue *q)
{
    struct slog *s = hmap_get(&sl.by_sid, &q->sid, sizeof(q->sid));
    char probe[4400];

    if (s == NULL) {
        /* Never written this run: its files may be from an earlier one. */
        snprintf(probe, sizeof(probe), "%s/%" PRIu32, sl.dir, q->sid);
        if (access(probe, F_OK) != 0)
            return;
        s = slog_new(q->sid, q);
    }
    s->q = NULL;
    s->remove = true;
    mark_due(s);
}

bool
slogs_pending(void)
{
    return sl.open && !TAILQ_EMPTY(&sl.due);
}

/* ---- a job's parts ---- */

static struct io_stream *
add_part(struct io_job *j, struct slog *s)
{
    if (j->nstreams == j->streams_cap) {
        j->streams_cap = j->streams_cap ? j->streams_cap * 2 : 8;
        j->streams = xrealloc(j->streams, j->streams_cap * sizeof(*j->streams));
    }
    struct io_stream *p = &j->streams[j->nstreams++];
    memset(p, 0, sizeof(*p));
    p->w = &s->w;
    p->dir = s->dir;
    p->owner = s;
    s->in_job = true;
    return p;
}

/* One message's record into part 'p' of 's', and where it is into its
 * entry (if it is still kept: one settled before it was written is
 * written all the same, so that the log's offsets stay the stream's). */
static void
put_record(struct slog *s, struct io_stream *p, const struct spend *pd)
{
    size_t at = rec_begin(&p->data, J_SMSG);
    wbuf_u64(&p->data, pd->offset);
    wbuf_u64(&p->data, pd->wall);
    store_put_fields(&p->data, pd->m);
    rec_end(&p->data, at);
    seglog_skip_to(s->log, pd->offset);
    struct seglog_pos pos = seglog_add(s->log, at, pd->wall);
    struct qentry *e = s->q ? queue_log_entry(s->q, pd->offset) : NULL;
    if (e != NULL && !e->paged) {
        e->log_seg = (uint32_t)pos.seg + 1;
        e->log_off = (uint32_t)pos.pos;
    }
}

/* Stream 's''s part of job 'j'; returns the lowest batch it left for a
 * later job (UINT64_MAX: none). */
static uint64_t
serialise_one(struct io_job *j, struct slog *s, size_t limit)
{
    uint64_t left = UINT64_MAX;
    size_t i = 0;

    if (s->remove) {
        add_part(j, s)->remove = true;
        for (; i < s->npend; i++)
            msg_unref(s->pend[i].m);
        s->npend = 0;
        return left;
    }
    struct io_stream *p = add_part(j, s);
    uint64_t size = seg_size_of(s->q);
    seglog_set_seg_size(s->log, size);
    p->prealloc = size < STREAM_PREALLOC_MAX ? size : STREAM_PREALLOC_MAX;
    if (s->npend > 0 || s->trim_due) {
        p->seg = seglog_batch_begin(s->log, &p->data);
        p->first = s->npend ? s->pend[0].offset : 0;
        for (; i < s->npend && p->data.len < limit; i++) {
            put_record(s, p, &s->pend[i]);
            msg_unref(s->pend[i].m);
        }
        p->next = i ? s->pend[i - 1].offset + 1 : p->first;
        if (s->trim_due) {
            size_t at = rec_begin(&p->data, J_STRIM);
            wbuf_u64(&p->data, s->trim);
            rec_end(&p->data, at);
            s->trim_due = false;
        }
        seglog_batch_end(s->log, &p->data);
    }
    if (i < s->npend)
        left = s->pend[i].batch;
    if (i < s->npend)
        memmove(s->pend, s->pend + i, (s->npend - i) * sizeof(*s->pend));
    s->npend -= i;
    seglog_take_unlinks(s->log, &p->unlink, &p->nunlink);
    return left;
}

uint64_t
slogs_serialise(struct io_job *j, size_t limit)
{
    uint64_t left = UINT64_MAX;
    struct slog *s, *next;

    j->nstreams = 0;
    if (!sl.open)
        return left;
    for (s = TAILQ_FIRST(&sl.due); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        uint64_t l = serialise_one(j, s, limit);
        if (l < left)
            left = l;
        if (s->npend == 0) {
            TAILQ_REMOVE(&sl.due, s, link);
            s->due = false;
        }
    }
    return left;
}

void
slogs_rewrite(struct io_job *j)
{
    for (size_t i = 0; i < j->nstreams; i++) {
        struct io_stream *p = &j->streams[i];
        struct slog *s = p->owner;
        if (p->remove || p->data.len == 0)
            continue;
        uint64_t old = p->seg;
        p->seg = seglog_rewrite(s->log, &p->data);
        for (uint64_t off = p->first; s->q && off < p->next; off++) {
            struct qentry *e = queue_log_entry(s->q, off);
            if (e == NULL || e->paged || e->log_seg != old + 1)
                continue;
            e->log_seg = (uint32_t)p->seg + 1;
            e->log_off = (uint32_t)seglog_moved(s->log, e->log_off);
        }
    }
}

bool
slogs_job_done(struct io_job *j)
{
    bool wrote = false;

    for (size_t i = 0; i < j->nstreams; i++) {
        struct io_stream *p = &j->streams[i];
        struct slog *s = p->owner;
        s->in_job = false;
        if (p->data.len > 0) {
            seglog_batch_synced(s->log);
            wrote = wrote || p->next > p->first;
        }
        wbuf_free(&p->data);
        free(p->unlink);
        if (p->remove && !s->due) {
            hmap_del(&sl.by_sid, &s->sid, sizeof(s->sid));
            slog_free(s);
        }
    }
    j->nstreams = 0;
    return wrote;
}

/* ---- paging ---- */

static size_t
record_size(const struct msg *m)
{
    return REC_HDR + 8 + 8 + 4 + msg_exchange_len(m) + 4 + msg_rkey_len(m) +
           4 + msg_hdr_len(m) + 8 + m->body_len;
}

bool
slog_page_out(struct queue *q, struct qentry *e)
{
    struct slog *s = hmap_get(&sl.by_sid, &q->sid, sizeof(q->sid));
    struct msg *m = e->m;

    if (s == NULL || e->log_seg == 0 ||
        !seglog_is_readable(s->log, e->log_seg - 1, e->log_off,
                            record_size(m)))
        return false;
    uint32_t seg = e->log_seg - 1, off = e->log_off;
    e->pg.seg = seg;
    e->pg.off = off;
    e->body_len = (uint32_t)m->body_len;
    e->deliveries = 0;
    e->paged = 1;
    msg_unref(m);
    return true;
}

int
slog_page_prepare(struct queue *q, struct qentry *e)
{
    (void)q;
    /* Its record is due in the next job, or being written: soon; an
     * entry the store did not take is never written, and waiting for it
     * would stop the pass there for good. */
    return e->stored ? 1 : 0;
}

void
slog_page_in(struct queue *q, struct qentry *e, struct msg *m)
{
    uint32_t seg = e->pg.seg, off = e->pg.off;
    (void)q;

    e->paged = 0;
    e->scratch = 0;
    e->m = m;
    e->log_seg = seg + 1;
    e->log_off = off;
}

struct msg *
slog_page_decode(const struct qentry *e, const struct pager_read *r)
{
    struct replay_fields f;
    struct replay_msg rm = { 0 };

    /* The pager thread checked the record; its offset is the entry's,
     * and after it, the fields as a J_MSG has them after its id. */
    if (r->len < REC_HDR + 16 || r->buf[8] != J_SMSG)
        return NULL;
    struct rbuf b;
    rbuf_init(&b, r->buf + REC_HDR, r->len - REC_HDR);
    if (rbuf_u64(&b) != e->seq)
        return NULL;
    rm.payload = r->buf + REC_HDR + 8;
    rm.len = r->len - REC_HDR - 8;
    if (!replay_msg_decode(&rm, &f) || f.body_len != e->body_len)
        return NULL;
    struct msg *m = msg_new((struct amqp_bytes){ f.exchange, f.exchange_len },
                            (struct amqp_bytes){ f.rkey, f.rkey_len }, f.hdr,
                            f.hdr_len, &f.ch, false, sl.envs);
    msg_body_copy_in(m, f.body);
    return m;
}

void
slog_files(const struct queue *q, uint64_t *segments, uint64_t *bytes,
           uint64_t *segment_size)
{
    struct slog *s = sl.open ? hmap_get(&sl.by_sid, &q->sid, sizeof(q->sid))
                             : NULL;

    *segments = *bytes = 0;
    *segment_size = seg_size_of(q);
    if (s == NULL)
        return;
    /* The current segment counts once something is in it. */
    *bytes = seglog_bytes(s->log);
    *segments = seglog_count(s->log);
    if (seglog_seg_bytes(s->log, seglog_current(s->log)) == 0 && *segments)
        (*segments)--;
}

/* ---- recovery ---- */

/* One record read back: where, and what of it the entry keeps. */
struct found {
    uint64_t offset, wall;
    uint32_t seg, pos, body_len;
    bool has_filter;            /* x-stream-filter-value, hashed */
    uint64_t filter;
};

struct reading {
    struct slog *s;
    const uint64_t *segs;       /* the reopened segments' numbers */
    struct found *f;
    size_t n, cap;
    uint64_t trim, last;
    bool any;
};

static void
read_record(void *arg, size_t i, const struct rec *r, size_t pos)
{
    struct reading *rd = arg;
    struct rbuf b;

    rbuf_init(&b, r->payload, r->len);
    if (r->type == J_STRIM) {
        uint64_t t = rbuf_u64(&b);
        if (!b.bad && t > rd->trim)
            rd->trim = t;
        return;
    }
    if (r->type != J_SMSG)
        return;
    uint64_t offset = rbuf_u64(&b), wall = rbuf_u64(&b);
    struct replay_msg rm = { .payload = r->payload + 8, .len = r->len - 8 };
    struct replay_fields fl;
    if (b.bad || r->len < 16 || !replay_msg_decode(&rm, &fl)) {
        log_warnx("store: stream %" PRIu32 ": a message at %zu of segment %"
                  PRIu64 " does not decode; skipped", rd->s->sid, pos,
                  rd->segs[i]);
        return;
    }
    /* A batch written again after a failed write may be in two segments:
     * the first copy counts. */
    if (rd->any && offset <= rd->last)
        return;
    if (rd->n == rd->cap) {
        rd->cap = rd->cap ? rd->cap * 2 : 1024;
        rd->f = xrealloc(rd->f, rd->cap * sizeof(*rd->f));
    }
    struct found *f = &rd->f[rd->n++];
    *f = (struct found){ offset, wall, (uint32_t)rd->segs[i], (uint32_t)pos,
                         (uint32_t)fl.body_len, false, 0 };
    f->has_filter = stream_filter_hash(&fl.ch.props.headers, &f->filter);
    rd->last = offset;
    rd->any = true;
}

/* Stream 'q''s log read back into it; returns the messages restored. */
static uint64_t
recover_one(struct queue *q, bool clean, uint64_t *corrupt, uint64_t *torn)
{
    struct slog *s = slog_new(q->sid, q);
    struct reading rd = { .s = s };
    uint64_t *segs = NULL, now = now_ms(), now_wall = wall_ms();
    size_t nsegs = 0;
    struct seglog_scan scan = { .record = read_record, .arg = &rd };

    if (seglog_list(s->dir, &segs, &nsegs) != 0) {
        if (errno != ENOENT)
            log_warn("store: cannot read %s", s->dir);
        return 0;
    }
    rd.segs = segs;
    if (seglog_reopen(s->log, &scan, NULL) != 0) {
        log_warn("store: cannot read %s", s->dir);
        free(segs);
        return 0;
    }
    uint64_t c, t;
    seglog_faults(s->log, &c, &t);
    *corrupt += c;
    *torn += t;
    uint64_t restored = 0;
    for (size_t i = 0; i < rd.n; i++) {
        const struct found *f = &rd.f[i];
        if (f->offset < rd.trim)
            continue;
        struct qentry qe = { 0 };
        qe.seq = f->offset;
        qe.paged = 1;
        qe.pg.seg = f->seg;
        qe.pg.off = f->pos;
        qe.body_len = f->body_len;
        qe.born = store_born_at(now, now_wall, f->wall);
        queue_restore(q, &qe, 0, 0);
        stream_restore_filter(q, f->offset, f->has_filter, f->filter);
        restored++;
    }
    s->trim = rd.trim;
    if (q->next_seq < rd.trim)
        q->next_seq = rd.trim;
    seglog_skip_to(s->log, q->next_seq);
    seglog_unmap(s->log);
    if (!clean && nsegs > 0 && seglog_mark_crashed(s->dir, segs[nsegs - 1]) != 0)
        log_warn("store: cannot mark segment %" PRIu64 " of %s as the newest "
                 "at a crash", segs[nsegs - 1], s->dir);
    free(rd.f);
    free(segs);
    return restored;
}

/* Delete the log in 'dir' of a queue that is gone, now. */
static void
remove_orphan(const char *dir)
{
    if (seglog_remove_dir(dir) != 0)
        log_warn("store: cannot delete %s", dir);
    else
        log_info("store: deleted %s, the log of a stream that no longer "
                 "exists", dir);
}

uint64_t
slogs_recover(const struct hmap *queues, bool clean, uint64_t *corrupt,
              uint64_t *torn)
{
    uint64_t restored = 0;
    struct dirent **names = NULL;
    int n = scandir(sl.dir, &names, NULL, alphasort);

    for (int i = 0; i < n; i++) {
        const char *d = names[i]->d_name;
        char *end;
        unsigned long sid = strtoul(d, &end, 10);
        char path[4500];
        if (d[0] == '.' || *end != '\0' || sid == 0 || sid > UINT32_MAX) {
            free(names[i]);
            continue;
        }
        uint32_t id = (uint32_t)sid;
        struct queue *q = hmap_get(queues, &id, sizeof(id));
        snprintf(path, sizeof(path), "%s/%s", sl.dir, d);
        if (q != NULL && q->ops->log)
            restored += recover_one(q, clean, corrupt, torn);
        else
            remove_orphan(path);
        free(names[i]);
    }
    free(names);
    if (n > 0 && store_sync_dir(sl.dir) != 0)
        log_warn("store: cannot sync %s", sl.dir);
    return restored;
}
