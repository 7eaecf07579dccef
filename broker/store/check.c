/*
 * The offline check of a data directory (check.h). It reads every file
 * itself with the record reader, so that it can account for each record
 * and report each bad one; the definitions it then hands to
 * defs_replay(), the code recovery runs, and the journal's entries it
 * resolves by recovery's rules (docs/storage.md), so that the totals are
 * what a start would rebuild. It writes nothing but its pid in LOCK.
 *
 * What counts as corrupt (exit status 1): a record that does not check
 * out with valid records after it, records hidden behind zeros, a record
 * whose payload does not parse or whose type is unknown, a definition
 * record that does not apply, a segment whose header does not match its
 * name, and a live queue entry whose message is missing or does not
 * decode. A torn tail, orphan entries of deleted queues and a
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

#include "amqp/props.h"
#include "broker/broker.h"
#include "broker/defs.h"
#include "broker/exchange.h"
#include "broker/log.h"
#include "broker/queue.h"
#include "broker/store/io.h"
#include "broker/store/journal.h"
#include "broker/store/record.h"
#include "broker/store/store.h"
#include "broker/store/store_defs.h"
#include "broker/util.h"
#include "broker/vhost.h"

#define PUSH(arr, n, cap, v)                                                 \
    do {                                                                     \
        if ((n) == (cap)) {                                                  \
            (cap) = (cap) ? (cap) * 2 : 256;                                 \
            (arr) = xrealloc((arr), (cap) * sizeof(*(arr)));                 \
        }                                                                    \
        (arr)[(n)++] = (v);                                                  \
    } while (0)

struct c_msg {
    uint64_t id;
    uint64_t order;             /* the newest copy of an id counts */
    bool ok;                    /* its fields and content header decode */
    bool live;                  /* a live entry holds it */
};

struct c_enq {
    uint32_t qid;
    uint64_t seq, id, order;
};

struct c_range {
    uint32_t qid;
    uint64_t lo, hi;
};

/* A recovered queue, by the store's id, with its live entries. */
struct c_queue {
    uint32_t sid;
    struct queue *q;
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
    /* the journal */
    struct c_msg *msgs;
    size_t nmsgs, msgs_cap;
    struct c_enq *enqs;
    size_t nenqs, enqs_cap;
    struct c_range *acks;
    size_t nacks, acks_cap;
    uint64_t seg_number;        /* of the segment being read */
    /* an open transaction in it: the journal's lengths at its begin */
    bool in_tx;
    size_t tx_msgs, tx_enqs, tx_acks;
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
        [D_UNBIND] = "binding-deleted",
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

/*
 * Read the records of the file in 'p' as recovery does, and call 'each'
 * for every one that checks out. Bad records are reported here. Returns
 * the bytes up to the end of the last record.
 */
static size_t
scan(struct check *c, const uint8_t *p, size_t len,
     void (*each)(struct check *c, const struct rec *r, size_t off))
{
    size_t off = 0, end = 0;
    struct rec rec;

    memset(c->counts, 0, sizeof(c->counts));
    c->records = 0;
    while (off < len) {
        enum rec_status s = rec_read(p + off, len - off, &rec);
        if (s == REC_END) {
            /* The end: zeros (a preallocated segment), or less than a
             * header. Anything valid behind it is lost to recovery. */
            size_t next = rec_resync(p, len, off);
            if (next < len) {
                problem(c, "zeros at offset %zu hide records from offset "
                        "%zu on (recovery stops at the zeros)", off, next);
            } else if (len - off < REC_HDR) {
                for (size_t i = off; i < len; i++)
                    if (p[i]) {
                        note(c, "torn record at offset %zu (%zu bytes), cut "
                             "by recovery", off, len - off);
                        end = len;
                        break;
                    }
            }
            break;
        }
        if (s == REC_BAD) {
            size_t next = rec_resync(p, len, off);
            if (next == len) {
                note(c, "torn record at offset %zu (%zu bytes), cut by "
                     "recovery", off, len - off);
                end = len;
                break;
            }
            problem(c, "corrupt record at offset %zu (%zu bytes), skipped; "
                    "the records after it are kept", off, next - off);
            off = next;
            continue;
        }
        c->counts[rec.type]++;
        c->records++;
        if (each)
            each(c, &rec, off);
        off += rec.size;
        end = off;
    }
    return end;
}

static int
read_all(const char *path, uint8_t **out, size_t *len)
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
    int r = read_all(path, &p, &len);
    if (r < 0) {
        fprintf(stderr, "roostd: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (r == 0) {
        fprintf(c->out, "%s: absent\n", name);
        return 0;
    }
    file_begin(c, name);
    size_t used = scan(c, p, len, NULL);
    uint64_t good = c->records;
    /* Replay what recovery replays. Its warnings repeat what the scan
     * above reported: keep them out of the way. */
    enum log_level was = log_level_now();
    log_set_level(LOG_LVL_ERROR);
    long n = defs_replay(name, p, len, &gen, max_qid);
    log_set_level(was);
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

static void
journal_record(struct check *c, const struct rec *rec, size_t off)
{
    struct rbuf r;

    rbuf_init(&r, rec->payload, rec->len);
    if (off == 0 && rec->type != J_SEG)
        problem(c, "does not start with a segment header");
    switch (rec->type) {
    case J_SEG: {
        uint32_t fmt = rbuf_u32(&r);
        uint64_t seg = rbuf_u64(&r);
        if (!r.bad && off == 0 && (fmt != STORE_FORMAT || seg != c->seg_number))
            problem(c, "the segment header says format %u, segment %" PRIu64,
                    fmt, seg);
        break;
    }
    case J_MSG: {
        struct c_msg m = { .order = c->nmsgs };
        uint32_t xlen, rklen, hlen;
        struct content_header ch;
        m.id = rbuf_u64(&r);
        (void)rbuf_str(&r, &xlen);
        (void)rbuf_str(&r, &rklen);
        const uint8_t *h = rbuf_str(&r, &hlen);
        uint64_t blen = rbuf_u64(&r);
        (void)rbuf_bytes(&r, (size_t)blen);
        m.ok = !r.bad && xlen <= 255 && rklen <= 255 &&
               content_header_decode(h, hlen, &ch) == AMQP_OK &&
               ch.body_size == blen;
        if (r.bad)
            break;
        PUSH(c->msgs, c->nmsgs, c->msgs_cap, m);
        return;
    }
    case J_ENQ: {
        struct c_enq e = { .order = c->nenqs };
        e.qid = rbuf_u32(&r);
        e.seq = rbuf_u64(&r);
        e.id = rbuf_u64(&r);
        (void)rbuf_u64(&r);
        (void)rbuf_u32(&r);
        if (r.bad)
            break;
        PUSH(c->enqs, c->nenqs, c->enqs_cap, e);
        return;
    }
    case J_DELIVER:
        (void)rbuf_u32(&r);
        (void)rbuf_u64(&r);
        (void)rbuf_u32(&r);
        break;
    case J_ACK: {
        struct c_range a;
        a.qid = rbuf_u32(&r);
        a.lo = rbuf_u64(&r);
        a.hi = rbuf_u64(&r);
        if (r.bad)
            break;
        PUSH(c->acks, c->nacks, c->acks_cap, a);
        return;
    }
    case J_TX_BEGIN:
        /* A transaction's records count only with its commit. */
        c->in_tx = true;
        c->tx_msgs = c->nmsgs;
        c->tx_enqs = c->nenqs;
        c->tx_acks = c->nacks;
        (void)rbuf_u64(&r);
        break;
    case J_TX_COMMIT:
        c->in_tx = false;
        (void)rbuf_u64(&r);
        break;
    default:
        problem(c, "record of unknown type %u at offset %zu", rec->type, off);
        return;
    }
    if (r.bad)
        problem(c, "%s record at offset %zu is too short for its fields",
                journal_type_name(rec->type), off);
}

/* The records of one segment, with recovery's rule for transactions:
 * what stands after a begin without its commit does not count. */
static void
check_segment(struct check *c, const uint8_t *p, size_t len)
{
    c->in_tx = false;
    size_t used = scan(c, p, len, journal_record);
    if (c->in_tx) {
        note(c, "a transaction without its commit record: its %zu message, "
             "%zu enqueue and %zu settled records are ignored by recovery",
             c->nmsgs - c->tx_msgs, c->nenqs - c->tx_enqs,
             c->nacks - c->tx_acks);
        c->nmsgs = c->tx_msgs;
        c->nenqs = c->tx_enqs;
        c->nacks = c->tx_acks;
    }
    print_counts(c, journal_type_name, used, len);
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int
check_journal(struct check *c)
{
    char path[4200], name[64];
    uint64_t *segs = NULL;
    size_t nsegs = 0, cap = 0;

    snprintf(path, sizeof(path), "%s/msgs", c->dir);
    DIR *d = opendir(path);
    if (d == NULL) {
        if (errno == ENOENT) {
            fprintf(c->out, "msgs: absent\n");
            return 0;
        }
        fprintf(stderr, "roostd: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        unsigned long long n;
        char tail[8];
        if (sscanf(de->d_name, "%llu.se%1s", &n, tail) == 2 &&
            strcmp(tail, "g") == 0)
            PUSH(segs, nsegs, cap, (uint64_t)n);
    }
    closedir(d);
    if (nsegs)
        qsort(segs, nsegs, sizeof(*segs), cmp_u64);
    for (size_t i = 0; i < nsegs; i++) {
        char file[80];
        io_seg_name(name, sizeof(name), segs[i]);
        snprintf(file, sizeof(file), "msgs/%s", name);
        snprintf(path, sizeof(path), "%s/%s", c->dir, file);
        c->seg_number = segs[i];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0) {
            fprintf(stderr, "roostd: cannot read %s: %s\n", path,
                    strerror(errno));
            if (fd >= 0)
                close(fd);
            free(segs);
            return -1;
        }
        size_t len = (size_t)sb.st_size;
        void *p = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        close(fd);
        if (p == MAP_FAILED) {
            fprintf(stderr, "roostd: cannot map %s: %s\n", path,
                    strerror(errno));
            free(segs);
            return -1;
        }
        if (p)
            madvise(p, len, MADV_SEQUENTIAL);
        file_begin(c, file);
        check_segment(c, p, len);
        file_end(c);
        if (p)
            munmap(p, len);
    }
    if (nsegs == 0)
        fprintf(c->out, "msgs: no segments\n");
    free(segs);
    return 0;
}

/* ---- what recovery would rebuild ---- */

static int
cmp_msg(const void *a, const void *b)
{
    const struct c_msg *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int
cmp_enq(const void *a, const void *b)
{
    const struct c_enq *x = a, *y = b;
    if (x->qid != y->qid)
        return x->qid < y->qid ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int
cmp_range(const void *a, const void *b)
{
    const struct c_range *x = a, *y = b;
    if (x->qid != y->qid)
        return x->qid < y->qid ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int
cmp_cq(const void *a, const void *b)
{
    const struct c_queue *x = a, *y = b;
    return x->sid < y->sid ? -1 : x->sid > y->sid;
}

/* The newest copy of message 'id', or NULL. */
static struct c_msg *
find_msg(struct check *c, uint64_t id)
{
    size_t lo = 0, hi = c->nmsgs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->msgs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    struct c_msg *found = NULL;
    while (lo < c->nmsgs && c->msgs[lo].id == id)
        found = &c->msgs[lo++];
    return found;
}

struct totals {
    uint64_t entries, settled, orphans, messages;
};

/* Resolve the entries as recovery does: of several records for one
 * entry the newest counts, a settled range ends it, and an entry of a
 * queue that no longer exists is an orphan. */
static void
resolve_entries(struct check *c, struct c_queue *qs, size_t nqs,
                struct totals *t)
{
    char qn[300];
    size_t ai = 0;

    if (c->nmsgs)
        qsort(c->msgs, c->nmsgs, sizeof(*c->msgs), cmp_msg);
    if (c->nenqs)
        qsort(c->enqs, c->nenqs, sizeof(*c->enqs), cmp_enq);
    if (c->nacks)
        qsort(c->acks, c->nacks, sizeof(*c->acks), cmp_range);
    c->file = "journal";
    for (size_t i = 0; i < c->nenqs; i++) {
        struct c_enq *e = &c->enqs[i];
        if (i + 1 < c->nenqs && c->enqs[i + 1].qid == e->qid &&
            c->enqs[i + 1].seq == e->seq)
            continue;
        struct c_queue key = { .sid = e->qid };
        struct c_queue *cq = nqs ? bsearch(&key, qs, nqs, sizeof(*qs), cmp_cq)
                                 : NULL;
        if (cq == NULL) {
            t->orphans++;
            continue;
        }
        while (ai < c->nacks && (c->acks[ai].qid < e->qid ||
                                 (c->acks[ai].qid == e->qid &&
                                  c->acks[ai].hi < e->seq)))
            ai++;
        bool acked = false;
        for (size_t k = ai; k < c->nacks && c->acks[k].qid == e->qid &&
                            c->acks[k].lo <= e->seq; k++)
            if (c->acks[k].hi >= e->seq) {
                acked = true;
                break;
            }
        if (acked) {
            t->settled++;
            continue;
        }
        struct c_msg *m = find_msg(c, e->id);
        log_escape(qn, sizeof(qn), cq->q->name, cq->q->name_len);
        if (m == NULL) {
            problem(c, "queue '%s' in vhost '%s': message %" PRIu64 " at "
                    "position %" PRIu64 " is missing (recovery drops the "
                    "entry)", qn, cq->q->vh->name, e->id, e->seq);
            continue;
        }
        if (!m->ok) {
            problem(c, "queue '%s' in vhost '%s': message %" PRIu64 " at "
                    "position %" PRIu64 " does not decode (recovery drops "
                    "it)", qn, cq->q->vh->name, e->id, e->seq);
            continue;
        }
        if (!m->live) {
            m->live = true;
            t->messages++;
        }
        cq->entries++;
        t->entries++;
    }
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
        nqs += ((struct vhost *)s->val)->queues.count;
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
    }
    qsort(qs, nqs, sizeof(*qs), cmp_cq);
    resolve_entries(c, qs, nqs, &t);

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
            if (qs[k].q->vh == vh)
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
    int r = read_all(path, &text, &len);
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
    defs_quiet(true);
    int ok = check_defs(&c, "defs.snap", &max_qid) == 0 &&
             check_defs(&c, "defs.log", &max_qid) == 0 &&
             check_journal(&c) == 0;
    defs_quiet(false);
    if (ok) {
        report_contents(&c);
        if (c.corrupt)
            fprintf(out, "CORRUPT: %" PRIu64 " %s (see above)\n", c.corrupt,
                    plural(c.corrupt, "problem", "problems"));
        else
            fprintf(out, "ok: no corrupt records\n");
        rc = c.corrupt ? 1 : 0;
    }
    free_vhosts();
    free(c.msgs);
    free(c.enqs);
    free(c.acks);
    close(lock);
    return rc;
}
