/*
 * SPDX-License-Identifier: Apache-2.0
 * The offline check of a data directory (check.h). It reads every file
 * itself, so that it can account for each record and report each bad
 * one, with the code recovery runs, so that the totals are what a start
 * would rebuild: the definitions with the record reader and then
 * defs_replay(), the journal's segments with replay_segment(), whose
 * entries it then resolves with replay.c (docs/storage.md). It writes
 * nothing but its pid in LOCK.
 *
 * What counts as corrupt (exit status 1): a record that does not check
 * out with valid records after it, records hidden behind zeros (except
 * in a segment that was the newest at a crash, the newest now without
 * CLEAN or one a recovery marked (seglog_mark_crashed), where damage
 * that fits in the last write is its unsynced tail: judge_tail), a record
 * whose payload does not parse or whose type is unknown, a definition
 * record that does not apply, a segment whose header does not match its
 * name, and a live queue entry whose message is missing or does not
 * decode; definitions a start stops at (a file no record of which
 * checks out, a log with no record beside a snapshot or a journal). A
 * torn tail, orphan entries of deleted queues and a
 * transaction cut before its commit are what a crash or normal operation
 * leaves, and recovery handles them: they are reported, not counted.
 */
#include "broker/store/check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/core/broker.h"
#include "broker/core/defs.h"
#include "broker/core/exchange.h"
#include "broker/core/queue.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/store/seglog.h"
#include "broker/store/journal.h"
#include "broker/store/record.h"
#include "broker/store/replay.h"
#include "broker/store/store.h"
#include "broker/store/store_defs.h"

/* A recovered queue (or delayed exchange, delayed.h: then 'q' is NULL),
 * by the store's id, with its live entries. */
struct c_queue {
    uint32_t sid;
    struct queue *q;
    struct exchange *x;
    uint64_t entries;
};

struct check {
    FILE *out;
    const char *dir;
    uint64_t corrupt;
    /* the file being read */
    const char *file;
    uint64_t counts[256];
    uint64_t records;
    /* the definitions: a snapshot, and the log's records */
    bool has_snap;
    size_t log_records;
    /* the newest segment after a crash (no CLEAN): its damage may be the
     * last write, never synced, as a power cut that reordered it left it */
    bool unclean;
    char msgdir[4200];          /* where a segment's ".crashed" mark is */
    bool tail_mode;             /* reading that segment */
    size_t tail_first;          /* its first damage; SIZE_MAX: none */
    uint64_t tail_faults;
    size_t tail_max_rec;        /* its largest record */
    bool tail_unsynced;         /* judge_tail found an unsynced tail */
    /* the journal: its segments, mapped, and their records */
    uint64_t *segs;
    size_t nsegs;
    void **maps;
    size_t *lens;
    struct replay rp;
    uint64_t seg_number;        /* of the segment being read */
    /* a transaction it ends inside: the records dropped */
    bool tx_cut;
    size_t cut_msgs, cut_enqs, cut_acks;
    /* the queues recovery would rebuild, by store id */
    struct c_queue *qs;
    size_t nqs;
    /* the stream whose log is being read (check_streams) */
    struct c_stream *stream;
    /* what is said about the file being read, printed after its counts */
    FILE *notes;
    char *notes_text;
    size_t notes_len;
};

static void problem(struct check *c, const char *fmt, ...) LOG_PRINTF(2, 3);
static void note(struct check *c, const char *fmt, ...) LOG_PRINTF(2, 3);

static void
vsay(struct check *c, const char *fmt, va_list ap)
{
    FILE *fp = c->notes ? c->notes : c->out;

    if (c->notes)
        fputs("  ", fp);
    else
        fprintf(fp, "%s: ", c->file);
    vfprintf(fp, fmt, ap);
    fputc('\n', fp);
}

/* A line about the file being read that makes the directory corrupt. */
static void
problem(struct check *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsay(c, fmt, ap);
    va_end(ap);
    c->corrupt++;
}

/* A line about what recovery handles (a torn tail, ...). */
static void
note(struct check *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsay(c, fmt, ap);
    va_end(ap);
}

/* What is said about file 'name' waits until its counts are printed. */
static void
file_begin(struct check *c, const char *name)
{
    c->file = name;
    c->notes = open_memstream(&c->notes_text, &c->notes_len);
    if (c->notes == NULL)
        fatal("check: open_memstream");
}

static void
file_end(struct check *c)
{
    fclose(c->notes);
    c->notes = NULL;
    fputs(c->notes_text, c->out);
    free(c->notes_text);
    c->notes_text = NULL;
}

static const char *
defs_type_name(uint8_t t)
{
    static const char *const names[] = {
        [D_HEADER] = "header", [D_VHOST] = "vhost",
        [D_VHOST_DEL] = "vhost-deleted", [D_EXCHANGE] = "exchange",
        [D_EXCHANGE_DEL] = "exchange-deleted", [D_QUEUE] = "queue",
        [D_QUEUE_DEL] = "queue-deleted", [D_BIND] = "binding",
        [D_UNBIND] = "binding-deleted", [D_USER] = "user",
        [D_USER_DEL] = "user-deleted", [D_PERM] = "permission",
        [D_PERM_DEL] = "permission-deleted", [D_POLICY] = "policy",
        [D_POLICY_DEL] = "policy-deleted",
    };
    return t < NELEMS(names) && names[t] ? names[t] : NULL;
}

static const char *
journal_type_name(uint8_t t)
{
    static const char *const names[] = {
        [J_SEG] = "segment-header", [J_MSG] = "message",
        [J_ENQ] = "enqueue", [J_DELIVER] = "delivered",
        [J_ACK] = "settled", [J_TX_BEGIN] = "tx-begin",
        [J_TX_COMMIT] = "tx-commit",
    };
    return t < NELEMS(names) && names[t] ? names[t] : NULL;
}

/* "12 records (1 header, 3 queue, ...)" for the file just read. */
static void
print_counts(struct check *c, const char *(*type_name)(uint8_t),
             size_t used, size_t size)
{
    bool first = true;

    fprintf(c->out, "%s: %" PRIu64 " record%s", c->file, c->records,
            c->records == 1 ? "" : "s");
    for (unsigned t = 0; t < 256; t++) {
        if (c->counts[t] == 0)
            continue;
        const char *name = type_name((uint8_t)t);
        if (name)
            fprintf(c->out, "%s%" PRIu64 " %s", first ? " (" : ", ",
                    c->counts[t], name);
        else
            fprintf(c->out, "%s%" PRIu64 " of unknown type %u",
                    first ? " (" : ", ", c->counts[t], t);
        first = false;
    }
    fprintf(c->out, "%s in %zu bytes", first ? "" : ")", used);
    if (size != used)
        fprintf(c->out, " (of %zu)", size);
    fputc('\n', c->out);
}

/* Before a file's records are read. */
static void
scan_begin(struct check *c)
{
    memset(c->counts, 0, sizeof(c->counts));
    c->records = 0;
}

/* A record that checks out (rec_walk). */
static void
scan_record(void *arg, const struct rec *r, size_t off)
{
    struct check *c = arg;

    (void)off;
    c->counts[r->type]++;
    c->records++;
    if (r->size > c->tail_max_rec)
        c->tail_max_rec = r->size;
}

/* Damage at 'off': corrupt, unless it may be the newest segment's
 * unsynced tail (check_segment decides, once it has read it all). */
static void
damage(struct check *c, size_t off)
{
    if (!c->tail_mode) {
        c->corrupt++;
        return;
    }
    if (off < c->tail_first)
        c->tail_first = off;
    c->tail_faults++;
}

/* A record that does not (rec_walk, replay_segment). */
static void
scan_fault(void *arg, enum rec_fault f, size_t off, size_t n)
{
    struct check *c = arg;

    if (f == REC_TORN) {
        note(c, "torn record at offset %zu (%zu bytes), cut by recovery",
             off, n);
    } else {
        note(c, "corrupt record at offset %zu (%zu bytes), skipped; the "
             "records after it are kept", off, n);
        damage(c, off);
    }
}

/*
 * The walk over the file in 'p' ended at 'stop' (rec_walk). Short of
 * the end, it found zeros (a preallocated segment) or less than a
 * header: anything valid behind them is lost to recovery. Returns the
 * bytes up to the end of the last record.
 */
static size_t
scan_end(struct check *c, const uint8_t *p, size_t len, size_t stop)
{
    if (stop == len)
        return len;
    size_t next = rec_resync(p, len, stop);
    if (next < len) {
        note(c, "zeros at offset %zu hide records from offset %zu on "
             "(recovery stops at the zeros)", stop, next);
        damage(c, stop);
    } else if (len - stop < REC_HDR) {
        for (size_t i = stop; i < len; i++)
            if (p[i]) {
                note(c, "torn record at offset %zu (%zu bytes), cut by "
                     "recovery", stop, len - stop);
                return len;
            }
    }
    return stop;
}

/* ---- definitions ---- */

static enum log_level
log_level_now(void)
{
    enum log_level l = LOG_LVL_DEBUG;
    while (l < LOG_LVL_ERROR && !log_enabled(l))
        l++;
    return l;
}

static int
check_defs(struct check *c, const char *name, uint32_t *max_qid)
{
    char path[4200];
    uint8_t *p;
    size_t len;
    uint64_t gen;

    snprintf(path, sizeof(path), "%s/%s", c->dir, name);
    int r = store_read_file(path, &p, &len);
    if (r < 0) {
        fprintf(stderr, "roostd: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (r == 0) {
        fprintf(c->out, "%s: absent\n", name);
        return 0;
    }
    file_begin(c, name);
    scan_begin(c);
    size_t used = scan_end(c, p, len,
                           rec_walk(p, len, scan_record, scan_fault, c));
    uint64_t good = c->records;
    /* Replay what recovery replays. Its warnings repeat what the scan
     * above reported: keep them out of the way. */
    enum log_level was = log_level_now();
    log_set_level(LOG_LVL_ERROR);
    struct defs_damage dmg;
    long n = defs_replay(name, p, len, &gen, max_qid, &dmg);
    log_set_level(was);
    /* What stops a start (store.c's check_defs), corrupt records aside,
     * which the scan above counted. */
    if (dmg.torn && dmg.records == 0)
        problem(c, "no record checks out: not a torn tail after good "
                "records but a file that cannot be read; a start stops "
                "here");
    if (strcmp(name, "defs.snap") == 0)
        c->has_snap = true;
    else
        c->log_records = dmg.records;
    if (n >= 0 && (uint64_t)n < good)
        problem(c, "%" PRIu64 " definition record%s do not apply (a field "
                "that does not make sense, or a type this roostd does not "
                "know)", good - (uint64_t)n, good - (uint64_t)n == 1 ? "" : "s");
    else if (n < 0)
        problem(c, "unusable");
    print_counts(c, defs_type_name, used, len);
    file_end(c);
    free(p);
    return 0;
}

/* ---- the journal ---- */

/* A journal record that checks out, as replay_segment() collected it. */
static void
journal_record(void *arg, const struct rec *rec, size_t off, bool fits)
{
    struct check *c = arg;

    scan_record(c, rec, off);
    if (off == 0 && rec->type != J_SEG)
        problem(c, "does not start with a segment header");
    const char *name = journal_type_name(rec->type);
    if (name == NULL) {
        problem(c, "record of unknown type %u at offset %zu", rec->type, off);
        return;
    }
    if (!fits) {
        problem(c, "%s record at offset %zu is too short for its fields",
                name, off);
        return;
    }
    if (rec->type == J_SEG && off == 0) {
        struct rbuf r;
        rbuf_init(&r, rec->payload, rec->len);
        uint32_t fmt = rbuf_u32(&r);
        uint64_t seg = rbuf_u64(&r);
        if (fmt != STORE_FORMAT || seg != c->seg_number)
            problem(c, "the segment header says format %u, segment %" PRIu64,
                    fmt, seg);
    }
}

/* Said after the segment's other notes, as it is found at its end. */
static void
journal_tx_cut(void *arg, size_t msgs, size_t enqs, size_t acks, size_t dels)
{
    struct check *c = arg;

    (void)dels;
    c->tx_cut = true;
    c->cut_msgs = msgs;
    c->cut_enqs = enqs;
    c->cut_acks = acks;
}

/* The records of one segment, collected as recovery collects them. */
/* Larger than any one write of the I/O thread (store.c's JOB_MAX_BYTES;
 * a single larger message is a write of its own). */
#define CHECK_WRITE_MAX (16u * 1024 * 1024)

/*
 * A segment that was the newest at a crash has damage from
 * c->tail_first on.
 * The I/O thread writes a batch, syncs it, and only then writes the
 * next: so everything before its last write was synced, and a power cut
 * can only have damaged that last write, which was never confirmed. If
 * the damage and every byte written after it fit in one write, it may
 * be that unsynced tail, which recovery cuts or skips (the records that
 * check out are kept, what they miss is dropped): not corruption. If
 * not, synced data is damaged: corruption.
 */
static void
judge_tail(struct check *c, const uint8_t *p, size_t len)
{
    size_t end = len;
    while (end > c->tail_first && p[end - 1] == 0)
        end--;
    size_t span = end - c->tail_first;
    size_t limit = c->tail_max_rec > CHECK_WRITE_MAX ? c->tail_max_rec
                                                     : CHECK_WRITE_MAX;
    if (span <= limit) {
        note(c, "offsets %zu to %zu: an unsynced tail, not corruption: the "
             "last stop was a crash (no CLEAN), and the damage and "
             "everything written after it fit in the last write (%zu "
             "bytes at most), which was never synced nor confirmed; "
             "recovery keeps the records that check out and drops the rest",
             c->tail_first, end, limit);
        c->tail_unsynced = true;
        return;
    }
    problem(c, "damage to synced data: offsets %zu to %zu span more than "
            "one write (%zu bytes), so what is damaged was synced before "
            "the crash", c->tail_first, end, limit);
    c->corrupt += c->tail_faults - 1;
}

static void
check_segment(struct check *c, uint32_t idx, const uint8_t *p, size_t len)
{
    struct replay_report rep = {
        .record = journal_record, .fault = scan_fault,
        .tx_cut = journal_tx_cut, .arg = c,
    };

    scan_begin(c);
    c->tx_cut = false;
    c->tail_mode = (c->unclean && idx + 1 == c->nsegs) ||
                   seglog_was_crashed(c->msgdir, c->segs[idx]);
    c->tail_first = SIZE_MAX;
    c->tail_faults = 0;
    c->tail_max_rec = 0;
    size_t used = scan_end(c, p, len, replay_segment(&c->rp, idx, p, len,
                                                     &rep));
    if (c->tail_faults)
        judge_tail(c, p, len);
    c->tail_mode = false;
    if (c->tx_cut)
        note(c, "a transaction without its commit record: its %zu message, "
             "%zu enqueue and %zu settled records are ignored by recovery",
             c->cut_msgs, c->cut_enqs, c->cut_acks);
    print_counts(c, journal_type_name, used, len);
}

static int
check_journal(struct check *c)
{
    char path[4200], name[64], file[80];

    snprintf(path, sizeof(path), "%s/msgs", c->dir);
    snprintf(c->msgdir, sizeof(c->msgdir), "%s", path);
    if (seglog_list(path, &c->segs, &c->nsegs) != 0) {
        if (errno == ENOENT) {
            fprintf(c->out, "msgs: absent\n");
            return 0;
        }
        fprintf(stderr, "roostd: cannot read %s/msgs: %s\n", c->dir,
                strerror(errno));
        return -1;
    }
    /* Mapped until the end: the messages collected borrow them. */
    c->maps = xcalloc(c->nsegs + 1, sizeof(*c->maps));
    c->lens = xcalloc(c->nsegs + 1, sizeof(*c->lens));
    for (size_t i = 0; i < c->nsegs; i++) {
        seglog_name(name, sizeof(name), c->segs[i]);
        snprintf(file, sizeof(file), "msgs/%s", name);
        snprintf(path, sizeof(path), "%s/%s", c->dir, file);
        c->seg_number = c->segs[i];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0) {
            fprintf(stderr, "roostd: cannot read %s: %s\n", path,
                    strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        size_t len = (size_t)sb.st_size;
        void *p = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        close(fd);
        if (p == MAP_FAILED) {
            fprintf(stderr, "roostd: cannot map %s: %s\n", path,
                    strerror(errno));
            return -1;
        }
        if (p)
            madvise(p, len, MADV_SEQUENTIAL);
        c->maps[i] = p;
        c->lens[i] = len;
        file_begin(c, file);
        check_segment(c, (uint32_t)i, p, len);
        file_end(c);
    }
    if (c->nsegs == 0)
        fprintf(c->out, "msgs: no segments\n");
    return 0;
}

/* ---- what recovery would rebuild ---- */

static int
cmp_cq(const void *a, const void *b)
{
    const struct c_queue *x = a, *y = b;
    return x->sid < y->sid ? -1 : x->sid > y->sid;
}

/* replay_walk's lookup. */
static void *
find_cq(void *arg, uint32_t sid)
{
    struct check *c = arg;
    struct c_queue key = { .sid = sid };

    return c->nqs ? bsearch(&key, c->qs, c->nqs, sizeof(*c->qs), cmp_cq)
                  : NULL;
}

struct totals {
    uint64_t entries, settled, orphans, messages;
    uint64_t delayed;           /* messages held by delayed exchanges */
};

/* Per message record: whether it was looked at, and how it came out. */
enum { MSG_UNSEEN, MSG_LIVE, MSG_BAD };

/* Count the entries recovery would restore (replay.h has the rules). */
static void
resolve_entries(struct check *c, struct totals *t)
{
    char qn[300];
    struct replay_walk w;
    struct replay_entry e;
    struct replay_fields f;
    uint8_t *state = xcalloc(c->rp.nmsgs + 1, 1);

    replay_resolve(&c->rp);
    c->file = "journal";
    replay_walk_init(&w, &c->rp, find_cq, c);
    while (replay_next(&w, &e)) {
        if (e.fate == REPLAY_ORPHAN) {
            t->orphans++;
            continue;
        }
        if (e.fate == REPLAY_SETTLED) {
            t->settled++;
            continue;
        }
        struct c_queue *cq = e.queue;
        const char *kind = cq->q ? "queue" : "delayed exchange";
        const char *vn = cq->q ? cq->q->vh->name : cq->x->vh->name;
        if (cq->q)
            log_escape(qn, sizeof(qn), cq->q->name, cq->q->name_len);
        else
            log_escape(qn, sizeof(qn), cq->x->name, cq->x->name_len);
        /* A message is in the same write as its enqueue records: one
         * enqueued in an unsynced tail lost its message there. */
        if (e.msg == NULL && c->tail_unsynced && e.enq_seg + 1 == c->nsegs) {
            fprintf(c->out, "%s '%s' in vhost '%s': message %" PRIu64 " at "
                    "position %" PRIu64 " was in the unsynced tail (never "
                    "confirmed; recovery drops the entry)\n", kind, qn, vn,
                    e.msg_id, e.seq);
            continue;
        }
        if (e.msg == NULL) {
            problem(c, "%s '%s' in vhost '%s': message %" PRIu64 " at "
                    "position %" PRIu64 " is missing (recovery drops the "
                    "entry)", kind, qn, vn, e.msg_id, e.seq);
            continue;
        }
        uint8_t *ms = &state[e.msg - c->rp.msgs];
        if (*ms == MSG_UNSEEN) {
            *ms = replay_msg_decode(e.msg, &f) ? MSG_LIVE : MSG_BAD;
            t->messages += *ms == MSG_LIVE;
        }
        if (*ms == MSG_BAD) {
            problem(c, "%s '%s' in vhost '%s': message %" PRIu64 " at "
                    "position %" PRIu64 " does not decode (recovery drops "
                    "it)", kind, qn, vn, e.msg_id, e.seq);
            continue;
        }
        cq->entries++;
        if (cq->q)
            t->entries++;
        else
            t->delayed++;
    }
    free(state);
}

static bool
is_predeclared(const struct exchange *x)
{
    return x->is_default ||
           (x->name_len >= 4 && memcmp(x->name, "amq.", 4) == 0);
}

static int
cmp_vhost(const void *a, const void *b)
{
    return strcmp((*(struct vhost *const *)a)->name,
                  (*(struct vhost *const *)b)->name);
}

static const char *
plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* Free what the replay built: broker.vhosts is left empty. */
static void
free_vhosts(void)
{
    size_t n = 0, pos = 0;
    struct vhost **vs = xmalloc((broker.vhosts.count + 1) * sizeof(*vs));
    struct hmap_slot *s;

    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL)
        vs[n++] = s->val;
    defs_quiet(true);
    for (size_t i = 0; i < n; i++) {
        hmap_del(&broker.vhosts, vs[i]->name, strlen(vs[i]->name));
        vhost_free(vs[i]);
    }
    defs_quiet(false);
    free(vs);
}

/* Per vhost and in total. */
static void
report_contents(struct check *c)
{
    size_t nv = 0, nqs = 0, pos = 0;
    struct vhost **vs = xmalloc((broker.vhosts.count + 1) * sizeof(*vs));
    struct hmap_slot *s, *qs_slot;
    struct totals t = { 0 };
    uint64_t tx = 0, tq = 0, tb = 0;
    char vn[300];

    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL) {
        vs[nv++] = s->val;
        nqs += ((struct vhost *)s->val)->queues.count +
               ((struct vhost *)s->val)->exchanges.count;
    }
    qsort(vs, nv, sizeof(*vs), cmp_vhost);
    struct c_queue *qs = xcalloc(nqs + 1, sizeof(*qs));
    nqs = 0;
    for (size_t i = 0; i < nv; i++) {
        size_t qpos = 0;
        while ((qs_slot = hmap_next(&vs[i]->queues, &qpos)) != NULL) {
            struct queue *q = qs_slot->val;
            qs[nqs++] = (struct c_queue){ .sid = q->sid, .q = q };
        }
        qpos = 0;
        while ((qs_slot = hmap_next(&vs[i]->exchanges, &qpos)) != NULL) {
            struct exchange *x = qs_slot->val;
            if (x->sid && x->ops->holds_messages)
                qs[nqs++] = (struct c_queue){ .sid = x->sid, .x = x };
        }
    }
    qsort(qs, nqs, sizeof(*qs), cmp_cq);
    c->qs = qs;
    c->nqs = nqs;
    resolve_entries(c, &t);

    for (size_t i = 0; i < nv; i++) {
        struct vhost *vh = vs[i];
        uint64_t nx = 0, nb = 0, entries = 0;
        size_t xpos = 0;
        while ((s = hmap_next(&vh->exchanges, &xpos)) != NULL) {
            struct exchange *x = s->val;
            nb += x->nbindings;
            nx += !is_predeclared(x);
        }
        for (size_t k = 0; k < nqs; k++)
            if (qs[k].q && qs[k].q->vh == vh)
                entries += qs[k].entries;
        fprintf(c->out, "vhost '%s': %" PRIu64 " %s, %zu %s, %" PRIu64
                " %s, %" PRIu64 " queue %s\n",
                log_escape(vn, sizeof(vn), vh->name, strlen(vh->name)), nx,
                plural(nx, "exchange", "exchanges"), vh->queues.count,
                plural(vh->queues.count, "queue", "queues"), nb,
                plural(nb, "binding", "bindings"), entries,
                plural(entries, "entry", "entries"));
        tx += nx;
        tq += vh->queues.count;
        tb += nb;
    }
    fprintf(c->out, "total: %zu %s, %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64
            " %s; %" PRIu64 " %s in %" PRIu64 " queue %s (%" PRIu64
            " settled, %" PRIu64 " orphaned by deleted queues)\n",
            nv, plural(nv, "vhost", "vhosts"), tx,
            plural(tx, "exchange", "exchanges"), tq,
            plural(tq, "queue", "queues"), tb,
            plural(tb, "binding", "bindings"), t.messages,
            plural(t.messages, "message", "messages"), t.entries,
            plural(t.entries, "entry", "entries"), t.settled, t.orphans);
    if (t.delayed)
        fprintf(c->out, "delayed: %" PRIu64 " %s held by x-delayed-message "
                "exchanges\n", t.delayed,
                plural(t.delayed, "message", "messages"));
    c->qs = NULL;
    c->nqs = 0;
    free(qs);
    free(vs);
}

/* FORMAT names the format this roostd reads: 0, or -1 with a message. */
static int
check_format(const char *dir)
{
    char path[4200], want[64];
    uint8_t *text;
    size_t len;

    snprintf(path, sizeof(path), "%s/FORMAT", dir);
    int r = store_read_file(path, &text, &len);
    if (r <= 0) {
        fprintf(stderr, "roostd: %s is not a Roost data directory (%s: %s)\n",
                dir, path, r == 0 ? "absent" : strerror(errno));
        return -1;
    }
    text[len] = '\0';
    snprintf(want, sizeof(want), "roost-store %d", STORE_FORMAT);
    size_t n = strcspn((char *)text, "\n");
    if (n != strlen(want) || memcmp(text, want, n) != 0) {
        fprintf(stderr, "roostd: %s says '%.*s'; this roostd reads '%s'\n",
                path, (int)(n < 64 ? n : 64), (char *)text, want);
        free(text);
        return -1;
    }
    free(text);
    return 0;
}

/* ---- streams' consumer names (offsets.h) ---- */

static const char *
offsets_type_name(uint8_t t)
{
    return t == J_OFFSET ? "consumer offset" : NULL;
}

/* A file replaced whole after its sync has no unsynced tail: any bad
 * record is damage. */
static void
offsets_fault(void *arg, enum rec_fault f, size_t off, size_t n)
{
    struct check *c = arg;

    note(c, "%s record at offset %zu (%zu bytes), skipped: the names in "
         "it start again where their consumers ask", f == REC_TORN ? "torn"
         : "corrupt", off, n);
    c->corrupt++;
}

static void
check_offsets(struct check *c)
{
    char d[4200], path[4600], name[300];
    struct dirent *de;

    snprintf(d, sizeof(d), "%s/offsets", c->dir);
    DIR *dh = opendir(d);
    if (dh == NULL)
        return;
    while ((de = readdir(dh)) != NULL) {
        uint8_t *p;
        size_t len;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", d, de->d_name);
        snprintf(name, sizeof(name), "offsets/%.250s", de->d_name);
        if (store_read_file(path, &p, &len) <= 0) {
            fprintf(c->out, "%s: cannot be read: %s\n", name,
                    strerror(errno));
            c->corrupt++;
            continue;
        }
        file_begin(c, name);
        scan_begin(c);
        size_t stop = rec_walk(p, len, scan_record, offsets_fault, c);
        print_counts(c, offsets_type_name, stop, len);
        file_end(c);
        free(p);
    }
    closedir(dh);
}

/* ---- streams' own logs (streams.h) ---- */

static const char *
stream_type_name(uint8_t t)
{
    return t == J_SEG ? "segment-header" : t == J_SMSG ? "stream message"
           : t == J_STRIM ? "retention mark" : NULL;
}

/* What a stream's log holds: its messages and where retention stands. */
struct c_stream {
    uint64_t messages, first, last, trim;
    bool any;
};

static void
stream_record(void *arg, const struct rec *r, size_t off)
{
    struct check *c = arg;
    struct c_stream *cs = c->stream;
    struct rbuf b;

    scan_record(arg, r, off);
    rbuf_init(&b, r->payload, r->len);
    uint64_t v = rbuf_u64(&b);
    if (b.bad)
        return;
    if (r->type == J_STRIM && v > cs->trim)
        cs->trim = v;
    if (r->type != J_SMSG || (cs->any && v <= cs->last))
        return;
    if (!cs->any)
        cs->first = v;
    cs->any = true;
    cs->last = v;
    cs->messages++;
}

/* One segment of a stream's log, mapped whole. */
static void
check_stream_segment(struct check *c, const char *path, bool newest,
                     const char *sdir, uint64_t seg)
{
    uint8_t *p;
    size_t len;

    if (store_read_file(path, &p, &len) < 0) {
        fprintf(c->out, "%s: cannot be read: %s\n", c->file,
                strerror(errno));
        c->corrupt++;
        return;
    }
    scan_begin(c);
    c->tail_mode = (c->unclean && newest) || seglog_was_crashed(sdir, seg);
    c->tail_first = SIZE_MAX;
    c->tail_faults = 0;
    c->tail_max_rec = 0;
    size_t used = scan_end(c, p, len, rec_walk(p, len, stream_record,
                                               scan_fault, c));
    if (c->tail_faults)
        judge_tail(c, p, len);
    c->tail_mode = false;
    print_counts(c, stream_type_name, used, len);
    free(p);
}

static void
check_streams(struct check *c)
{
    char d[4200], sdir[4500], path[4600], file[400], name[64];
    struct dirent **ents = NULL;

    snprintf(d, sizeof(d), "%s/streams", c->dir);
    int n = scandir(d, &ents, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *sid = ents[i]->d_name;
        uint64_t *segs = NULL;
        size_t nsegs = 0;
        struct c_stream cs = { 0 };
        if (sid[0] == '.') {
            free(ents[i]);
            continue;
        }
        snprintf(sdir, sizeof(sdir), "%s/%s", d, sid);
        if (seglog_list(sdir, &segs, &nsegs) != 0) {
            fprintf(c->out, "streams/%.255s: cannot be read: %s\n", sid,
                    strerror(errno));
            c->corrupt++;
            free(ents[i]);
            continue;
        }
        c->stream = &cs;
        for (size_t k = 0; k < nsegs; k++) {
            seglog_name(name, sizeof(name), segs[k]);
            snprintf(file, sizeof(file), "streams/%.255s/%s", sid, name);
            snprintf(path, sizeof(path), "%s/%s", sdir, name);
            file_begin(c, file);
            check_stream_segment(c, path, k + 1 == nsegs, sdir, segs[k]);
            file_end(c);
        }
        c->stream = NULL;
        uint64_t kept = 0;
        if (cs.any && cs.last >= cs.trim)
            kept = cs.last - (cs.first > cs.trim ? cs.first : cs.trim) + 1;
        if (kept)
            fprintf(c->out, "streams/%.255s: %" PRIu64 " %s kept, offsets "
                    "%" PRIu64 " to %" PRIu64 "\n", sid, kept,
                    plural(kept, "message", "messages"),
                    cs.first > cs.trim ? cs.first : cs.trim, cs.last);
        else
            fprintf(c->out, "streams/%.255s: no message kept; the next "
                    "takes offset %" PRIu64 "\n", sid,
                    cs.any && cs.last + 1 > cs.trim ? cs.last + 1 : cs.trim);
        free(segs);
        free(ents[i]);
    }
    free(ents);
}

int
store_check_data(const char *dir, FILE *out)
{
    struct check c = { .out = out, .dir = dir };
    char err[1024];
    struct stat sb;
    uint32_t max_qid = 0;
    int rc = 2;

    if (stat(dir, &sb) != 0) {
        fprintf(stderr, "roostd: %s: %s\n", dir, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "roostd: %s: not a directory\n", dir);
        return 2;
    }
    if (check_format(dir) != 0)
        return 2;
    int lock = store_lock_dir(dir, err, sizeof(err));
    if (lock < 0) {
        fprintf(stderr, "roostd: %s\n", err);
        return 2;
    }
    fprintf(out, "data directory %s (roost-store %d)\n", dir, STORE_FORMAT);
    char clean[4200];
    snprintf(clean, sizeof(clean), "%s/CLEAN", dir);
    c.unclean = access(clean, F_OK) != 0;
    defs_quiet(true);
    int ok = check_defs(&c, "defs.snap", &max_qid) == 0 &&
             check_defs(&c, "defs.log", &max_qid) == 0 &&
             check_journal(&c) == 0;
    defs_quiet(false);
    if (ok && c.log_records == 0 &&
        (c.has_snap || c.rp.nmsgs > 0 || c.rp.nenqs > 0)) {
        fprintf(out, "defs.log: missing or holds no record, beside %s "
                "and %zu journal records: a start stops here (its queues' "
                "definitions are gone)\n",
                c.has_snap ? "a snapshot" : "no snapshot",
                c.rp.nmsgs + c.rp.nenqs);
        c.corrupt++;
    }
    if (ok) {
        check_offsets(&c);
        check_streams(&c);
        report_contents(&c);
        if (c.corrupt)
            fprintf(out, "CORRUPT: %" PRIu64 " %s (see above)\n", c.corrupt,
                    plural(c.corrupt, "problem", "problems"));
        else
            fprintf(out, "ok: no corrupt records\n");
        rc = c.corrupt ? 1 : 0;
    }
    free_vhosts();
    replay_free(&c.rp);
    for (size_t i = 0; i < c.nsegs && c.maps; i++)
        if (c.maps[i])
            munmap(c.maps[i], c.lens[i]);
    free(c.maps);
    free(c.lens);
    free(c.segs);
    close(lock);
    return rc;
}
