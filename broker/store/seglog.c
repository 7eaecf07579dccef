/*
 * SPDX-License-Identifier: Apache-2.0
 * The segment log (seglog.h): the loop's table of segments and their
 * sparse indexes, reopening a directory of segments, and the writer's
 * file operations.
 *
 * Segments are numbered; the table is indexed by number from 'base', so
 * a number missing on disk (none are, normally) is an empty segment.
 * Only the front is ever dropped, so the table slides forward: once far
 * enough past its start, it is moved down.
 */
#define _GNU_SOURCE
#include "broker/store/seglog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/lib/log.h"
#include "broker/lib/util.h"

struct seg {
    uint64_t written;           /* bytes in the file */
    uint64_t first_offset, next_offset;
    uint64_t last_time;         /* of its newest record; 0: unknown */
    bool has_records;
    struct seglog_index *idx;
    size_t nidx, idx_cap;
    uint32_t since_recs;        /* since the last index entry */
    uint64_t since_pos;         /* that entry's position */
};

struct map {
    uint64_t seg;
    uint8_t *p;
    size_t len;
};

struct seglog {
    char dir[4096];
    char name[64];
    uint64_t seg_size;
    size_t udata_size;
    void (*header)(struct wbuf *b, uint64_t seg);
    bool (*stamp)(const struct rec *r, uint64_t *offset, uint64_t *time);
    /* the table: segments base.. (first..cur exist) */
    struct seg *segs;
    uint8_t *udata;
    size_t nsegs;               /* slots of both arrays */
    uint64_t base, first, cur;
    uint64_t cur_len;           /* bytes given to the writer for 'cur' */
    uint64_t bytes;             /* in first..cur */
    uint64_t next_offset;
    /* the batch being built */
    uint64_t batch_seg, batch_base, batch_offset;
    size_t batch_start;         /* where it starts in its buffer */
    /* the last rewrite: old position -> new */
    uint64_t rw_base, rw_skip, rw_head;
    /* what is synced: every segment below rd_seg, rd_len bytes of it */
    uint64_t rd_seg, rd_len;
    uint64_t *unlink;
    size_t nunlink, unlink_cap;
    /* reopen */
    struct map *maps;
    size_t nmaps;
    uint64_t mapped_bytes, corrupt, torn;
};

static struct seg *
seg_at(struct seglog *l, uint64_t seg)
{
    if (seg < l->base)
        fatalx("%s: segment %" PRIu64 " below base %" PRIu64, l->name, seg,
               l->base);
    size_t i = (size_t)(seg - l->base), n = l->nsegs;
    array_reach(&l->segs, sizeof(*l->segs), &l->nsegs, i);
    if (l->udata_size && l->nsegs != n) {
        l->udata = xrealloc(l->udata, l->nsegs * l->udata_size);
        memset(l->udata + n * l->udata_size, 0,
               (l->nsegs - n) * l->udata_size);
    }
    return &l->segs[i];
}

static const struct seg *
seg_get(const struct seglog *l, uint64_t seg)
{
    if (seg < l->base || seg - l->base >= l->nsegs)
        return NULL;
    return &l->segs[seg - l->base];
}

struct seglog *
seglog_new(const struct seglog_config *cfg)
{
    struct seglog *l = xcalloc(1, sizeof(*l));
    snprintf(l->dir, sizeof(l->dir), "%s", cfg->dir);
    snprintf(l->name, sizeof(l->name), "%s", cfg->name ? cfg->name : "seglog");
    l->seg_size = cfg->seg_size;
    l->udata_size = cfg->udata_size;
    l->header = cfg->header;
    l->stamp = cfg->stamp;
    l->base = l->first = l->cur = 1;
    l->rd_seg = 1;
    return l;
}

void
seglog_free(struct seglog *l)
{
    if (l == NULL)
        return;
    seglog_unmap(l);
    for (size_t i = 0; i < l->nsegs; i++)
        free(l->segs[i].idx);
    free(l->segs);
    free(l->udata);
    free(l->unlink);
    free(l);
}

/* ---- the index ---- */

static void
index_add(struct seg *s, uint64_t offset, uint64_t time, uint64_t pos)
{
    if (s->nidx == s->idx_cap) {
        s->idx_cap = s->idx_cap ? s->idx_cap * 2 : 16;
        s->idx = xrealloc(s->idx, s->idx_cap * sizeof(*s->idx));
    }
    s->idx[s->nidx++] = (struct seglog_index){ offset, time, pos };
    s->since_recs = 0;
    s->since_pos = pos;
}

/* Record 'offset' at 'pos' of 's' is in the log. */
static void
note_record(struct seg *s, uint64_t offset, uint64_t time, uint64_t pos)
{
    if (!s->has_records) {
        s->has_records = true;
        s->first_offset = offset;
        index_add(s, offset, time, pos);
    } else if (++s->since_recs >= SEGLOG_INDEX_RECORDS ||
               pos - s->since_pos >= SEGLOG_INDEX_BYTES) {
        index_add(s, offset, time, pos);
    }
    s->next_offset = offset + 1;
    if (time > s->last_time)
        s->last_time = time;
}

/* ---- reopening ---- */

struct walk {
    struct seglog *l;
    const struct seglog_scan *scan;
    size_t i;
    uint64_t seg;
    struct seg *s;
    size_t records;             /* that checked out */
};

static void
walk_record(void *arg, const struct rec *r, size_t pos)
{
    struct walk *w = arg;
    struct seglog *l = w->l;
    uint64_t offset = l->next_offset, time = 0;
    bool takes;

    w->records++;
    if (l->stamp)
        takes = l->stamp(r, &offset, &time);
    else
        takes = !(l->header && pos == 0);
    if (takes) {
        note_record(w->s, offset, time, pos);
        l->next_offset = offset + 1;
    }
    if (w->scan && w->scan->record)
        w->scan->record(w->scan->arg, w->i, r, pos);
}

static void
walk_fault(void *arg, enum rec_fault f, size_t pos, size_t n)
{
    struct walk *w = arg;
    char name[64];

    seglog_name(name, sizeof(name), w->seg);
    if (f == REC_TORN) {
        /* Only zeros after it: a write the crash cut short. */
        w->l->torn++;
        log_warnx("%s: %s: torn record at offset %zu cut", w->l->name, name,
                  pos);
    } else {
        w->l->corrupt++;
        log_warnx("%s: %s: corrupt record at offset %zu skipped (%zu "
                  "bytes); the records after it are kept", w->l->name, name,
                  pos, n);
    }
    if (w->scan && w->scan->fault)
        w->scan->fault(w->scan->arg, w->i, f, pos, n);
}

/* A segment with no record, not even its header: emptied (truncated)
 * or zeroed. What it held is lost, and nothing else records how much.
 * The newest may instead have been made just before a crash, before
 * its first write was synced: then it held nothing confirmed. */
static void
empty_segment(struct seglog *l, uint64_t seg, size_t len, bool newest)
{
    char name[64];

    seglog_name(name, sizeof(name), seg);
    log_warnx("%s: %s/%s holds no record (%zu bytes, %s): the messages it "
              "held are lost, and how many is recorded nowhere else%s",
              l->name, l->dir, name, len,
              len ? "none at its start" : "empty",
              newest ? " (or, as the newest, it was made just before a "
                       "crash, before anything in it was synced)"
                     : "");
}

/* Map segment 'seg' into 'm' (empty if it cannot be). */
static void
map_segment(struct seglog *l, uint64_t seg, struct map *m)
{
    char name[64], path[4200];
    struct stat sb;

    m->seg = seg;
    seglog_name(name, sizeof(name), seg);
    snprintf(path, sizeof(path), "%s/%s", l->dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        log_warn("%s: cannot open %s", l->name, path);
        if (fd >= 0)
            close(fd);
        return;
    }
    if (sb.st_size > 0) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            m->p = p;
            m->len = (size_t)sb.st_size;
            madvise(p, m->len, MADV_SEQUENTIAL | MADV_WILLNEED);
        } else {
            log_warn("%s: cannot map %s", l->name, path);
        }
    }
    close(fd);
}

int
seglog_reopen(struct seglog *l, const struct seglog_scan *scan,
              void (*progress)(size_t i, size_t n))
{
    uint64_t *nums;
    size_t n;

    if (seglog_list(l->dir, &nums, &n) != 0)
        return -1;
    seglog_unmap(l);
    l->maps = xcalloc(n + 1, sizeof(*l->maps));
    l->nmaps = n;
    l->base = l->first = n ? nums[0] : 1;
    for (size_t i = 0; i < n; i++) {
        struct walk w = { l, scan, i, nums[i], NULL, 0 };
        if (progress)
            progress(i, n);
        map_segment(l, nums[i], &l->maps[i]);
        w.s = seg_at(l, nums[i]);
        w.s->written = l->maps[i].len;
        l->bytes += l->maps[i].len;
        l->mapped_bytes += l->maps[i].len;
        if (l->maps[i].p)
            (void)rec_walk(l->maps[i].p, l->maps[i].len, walk_record,
                           walk_fault, &w);
        if (w.records == 0)
            empty_segment(l, nums[i], l->maps[i].len, i + 1 == n);
        if (scan && scan->segment_end)
            scan->segment_end(scan->arg, i);
    }
    /* Appends go to a new segment: the last may end in a torn record. */
    l->cur = n ? nums[n - 1] + 1 : 1;
    l->cur_len = 0;
    (void)seg_at(l, l->cur);
    l->rd_seg = l->cur;
    l->rd_len = 0;
    free(nums);
    return 0;
}

size_t
seglog_nmapped(const struct seglog *l)
{
    return l->nmaps;
}

const uint8_t *
seglog_mapped(const struct seglog *l, size_t i, size_t *len, uint64_t *seg)
{
    *len = l->maps[i].len;
    if (seg)
        *seg = l->maps[i].seg;
    return l->maps[i].p;
}

uint64_t
seglog_mapped_bytes(const struct seglog *l)
{
    return l->mapped_bytes;
}

void
seglog_faults(const struct seglog *l, uint64_t *corrupt, uint64_t *torn)
{
    *corrupt = l->corrupt;
    *torn = l->torn;
}

void
seglog_unmap(struct seglog *l)
{
    for (size_t i = 0; i < l->nmaps; i++)
        if (l->maps[i].p)
            munmap(l->maps[i].p, l->maps[i].len);
    free(l->maps);
    l->maps = NULL;
    l->nmaps = 0;
}

/* ---- appending ---- */

uint64_t
seglog_batch_begin(struct seglog *l, struct wbuf *b)
{
    if (l->seg_size && l->cur_len >= l->seg_size) {
        l->cur++;
        l->cur_len = 0;
    }
    /* (A new log that was never reopened has no table yet.) */
    (void)seg_at(l, l->cur);
    l->batch_seg = l->cur;
    l->batch_base = l->cur_len;
    l->batch_start = b->len;
    l->batch_offset = l->next_offset;
    /* A new segment's header is the batch's first bytes, at 0. */
    if (l->cur_len == 0 && l->header)
        l->header(b, l->cur);
    return l->cur;
}

struct seglog_pos
seglog_add(struct seglog *l, size_t at, uint64_t time)
{
    struct seglog_pos p;

    p.seg = l->batch_seg;
    p.pos = l->batch_base + (at - l->batch_start);
    p.offset = l->next_offset++;
    note_record(&l->segs[l->batch_seg - l->base], p.offset, time, p.pos);
    return p;
}

void
seglog_batch_end(struct seglog *l, const struct wbuf *b)
{
    uint64_t n = b->len - l->batch_start;
    l->cur_len += n;
    seg_at(l, l->cur)->written += n;
    l->bytes += n;
}

struct seglog_pos
seglog_append(struct seglog *l, struct wbuf *b, uint8_t type,
              const void *payload, size_t len, uint64_t time)
{
    size_t at = rec_begin(b, type);
    wbuf_bytes(b, payload, len);
    rec_end(b, at);
    return seglog_add(l, at, time);
}

uint64_t
seglog_rewrite(struct seglog *l, struct wbuf *b)
{
    struct wbuf again = { 0 };
    uint64_t skip = 0, bo = l->batch_offset;
    struct rec r;

    l->cur++;
    struct seg *s = seg_at(l, l->cur);
    struct seg *old = seg_at(l, l->batch_seg);
    if (l->header)
        l->header(&again, l->cur);
    uint64_t head = again.len;
    if (l->header && l->batch_base == 0 &&
        rec_read(b->p + l->batch_start, b->len - l->batch_start, &r) == REC_OK)
        skip = r.size;
    wbuf_bytes(&again, b->p + l->batch_start + skip,
               b->len - l->batch_start - skip);
    wbuf_free(b);
    *b = again;
    l->cur_len = b->len;
    s->written += b->len;
    l->bytes += b->len;
    l->rw_base = l->batch_base;
    l->rw_skip = skip;
    l->rw_head = head;
    /* The batch's records, and their index entries, move with it; the
     * old segment ends where the batch began. */
    size_t keep = old->nidx;
    while (keep > 0 && old->idx[keep - 1].pos >= l->batch_base)
        keep--;
    if (l->next_offset > bo) {
        s->has_records = true;
        s->first_offset = bo;
        s->next_offset = l->next_offset;
        s->last_time = old->last_time;
        size_t k = keep;
        if (k == old->nidx || old->idx[k].offset != bo)
            index_add(s, bo, old->last_time, head);
        for (; k < old->nidx; k++)
            index_add(s, old->idx[k].offset, old->idx[k].time,
                      seglog_moved(l, old->idx[k].pos));
        old->nidx = keep;
        if (keep == 0)
            old->has_records = false;
        else
            old->next_offset = bo;
    }
    l->batch_seg = l->cur;
    l->batch_base = 0;
    l->batch_start = 0;
    return l->cur;
}

uint64_t
seglog_moved(const struct seglog *l, uint64_t pos)
{
    return pos - l->rw_base - l->rw_skip + l->rw_head;
}

void
seglog_batch_synced(struct seglog *l)
{
    l->rd_seg = l->batch_seg;
    l->rd_len = l->cur_len;
}

bool
seglog_is_readable(const struct seglog *l, uint64_t seg, uint64_t pos,
                   uint64_t size)
{
    return seg < l->rd_seg || (seg == l->rd_seg && pos + size <= l->rd_len);
}

/* ---- what is there ---- */

uint64_t
seglog_first(const struct seglog *l)
{
    return l->first;
}

uint64_t
seglog_current(const struct seglog *l)
{
    return l->cur;
}

uint64_t
seglog_count(const struct seglog *l)
{
    return l->cur - l->first + 1;
}

uint64_t
seglog_bytes(const struct seglog *l)
{
    return l->bytes;
}

uint64_t
seglog_seg_bytes(const struct seglog *l, uint64_t seg)
{
    const struct seg *s = seg_get(l, seg);
    return s ? s->written : 0;
}

uint64_t
seglog_next_offset(const struct seglog *l)
{
    return l->next_offset;
}

uint64_t
seglog_first_offset(const struct seglog *l)
{
    for (uint64_t n = l->first; n <= l->cur; n++) {
        const struct seg *s = seg_get(l, n);
        if (s && s->has_records)
            return s->first_offset;
    }
    return l->next_offset;
}

void
seglog_skip_to(struct seglog *l, uint64_t offset)
{
    if (offset > l->next_offset)
        l->next_offset = offset;
}

void
seglog_set_seg_size(struct seglog *l, uint64_t size)
{
    l->seg_size = size;
}

size_t
seglog_drop_before(struct seglog *l, uint64_t offset)
{
    size_t n = 0;

    while (l->first < l->cur) {
        const struct seg *s = seg_get(l, l->first);
        if (s && s->has_records && s->next_offset > offset)
            break;
        seglog_drop_first(l);
        n++;
    }
    return n;
}

void *
seglog_udata(struct seglog *l, uint64_t seg)
{
    (void)seg_at(l, seg);
    return l->udata + (size_t)(seg - l->base) * l->udata_size;
}

const struct seglog_index *
seglog_seg_index(const struct seglog *l, uint64_t seg, size_t *n)
{
    const struct seg *s = seg_get(l, seg);
    *n = s ? s->nidx : 0;
    return s ? s->idx : NULL;
}

bool
seglog_seek(const struct seglog *l, uint64_t offset, struct seglog_pos *at)
{
    /* The segment: the last, from the front, whose first offset is at
     * or below it (few segments: a scan is enough). */
    const struct seg *s = NULL;
    uint64_t num = 0;
    for (uint64_t n = l->first; n <= l->cur; n++) {
        const struct seg *c = seg_get(l, n);
        if (c == NULL || !c->has_records)
            continue;
        if (c->first_offset > offset)
            break;
        s = c;
        num = n;
    }
    if (s == NULL || offset >= s->next_offset)
        return false;
    /* Then its index, by binary search. */
    size_t lo = 0, hi = s->nidx;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->idx[mid].offset <= offset)
            lo = mid;
        else
            hi = mid;
    }
    at->seg = num;
    at->pos = s->idx[lo].pos;
    at->offset = s->idx[lo].offset;
    return true;
}

/* ---- freeing space ---- */

bool
seglog_drop_first(struct seglog *l)
{
    if (l->first >= l->cur)
        return false;
    struct seg *s = seg_at(l, l->first);
    if (l->nunlink == l->unlink_cap) {
        l->unlink_cap = l->unlink_cap ? l->unlink_cap * 2 : 16;
        l->unlink = xrealloc(l->unlink, l->unlink_cap * sizeof(*l->unlink));
    }
    l->unlink[l->nunlink++] = l->first;
    l->bytes -= s->written;
    free(s->idx);
    memset(s, 0, sizeof(*s));
    l->first++;
    /* Keep the table from growing with the segment numbers. */
    if (l->first - l->base > 1024) {
        size_t drop = (size_t)(l->first - l->base);
        memmove(l->segs, l->segs + drop, (l->nsegs - drop) * sizeof(*l->segs));
        memset(l->segs + l->nsegs - drop, 0, drop * sizeof(*l->segs));
        if (l->udata_size) {
            memmove(l->udata, l->udata + drop * l->udata_size,
                    (l->nsegs - drop) * l->udata_size);
            memset(l->udata + (l->nsegs - drop) * l->udata_size, 0,
                   drop * l->udata_size);
        }
        l->base = l->first;
    }
    return true;
}

size_t
seglog_retain(struct seglog *l, const struct seglog_retention *r,
              uint64_t now)
{
    size_t dropped = 0;

    while (l->first < l->cur) {
        const struct seg *s = seg_get(l, l->first);
        bool over = (r->max_segments && seglog_count(l) > r->max_segments) ||
                    (r->max_bytes && l->bytes > r->max_bytes) ||
                    (r->max_age_ms && s && s->last_time != 0 &&
                     s->last_time + r->max_age_ms < now);
        if (!over)
            break;
        seglog_drop_first(l);
        dropped++;
    }
    return dropped;
}

void
seglog_take_unlinks(struct seglog *l, uint64_t **segs, size_t *n)
{
    *segs = l->unlink;
    *n = l->nunlink;
    l->unlink = NULL;
    l->nunlink = l->unlink_cap = 0;
}

bool
seglog_has_unlinks(const struct seglog *l)
{
    return l->nunlink > 0;
}

/* ---- the files ---- */

void
seglog_name(char *out, size_t len, uint64_t seg)
{
    snprintf(out, len, "%010llu.seg", (unsigned long long)seg);
}

static void
crashed_name(char *out, size_t len, uint64_t seg)
{
    snprintf(out, len, "%010llu.crashed", (unsigned long long)seg);
}

int
seglog_mark_crashed(const char *dir, uint64_t seg)
{
    char name[64], path[4200];
    crashed_name(name, sizeof(name), seg);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    int dfd = rc == 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd < 0)
        return -1;
    rc = fsync(dfd);
    close(dfd);
    return rc;
}

bool
seglog_was_crashed(const char *dir, uint64_t seg)
{
    char name[64], path[4200];
    crashed_name(name, sizeof(name), seg);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int
seglog_list(const char *dir, uint64_t **segs, size_t *nsegs)
{
    size_t cap = 0;

    *segs = NULL;
    *nsegs = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        unsigned long long n;
        char tail[8];
        if (sscanf(de->d_name, "%llu.se%1s", &n, tail) != 2 ||
            strcmp(tail, "g") != 0)
            continue;
        if (*nsegs == cap) {
            cap = cap ? cap * 2 : 64;
            *segs = xrealloc(*segs, cap * sizeof(**segs));
        }
        (*segs)[(*nsegs)++] = (uint64_t)n;
    }
    closedir(d);
    if (*nsegs)
        qsort(*segs, *nsegs, sizeof(**segs), cmp_u64);
    return 0;
}

int
seglog_remove_dir(const char *dir)
{
    uint64_t *segs = NULL;
    size_t n = 0;
    char name[64], path[4200];

    if (seglog_list(dir, &segs, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            seglog_name(name, sizeof(name), segs[i]);
            snprintf(path, sizeof(path), "%s/%s", dir, name);
            if (unlink(path) != 0 && errno != ENOENT)
                log_warn("cannot delete segment %s", path);
            crashed_name(name, sizeof(name), segs[i]);
            snprintf(path, sizeof(path), "%s/%s", dir, name);
            if (unlink(path) != 0 && errno != ENOENT)
                log_warn("cannot delete %s", path);
        }
    }
    free(segs);
    return rmdir(dir);
}

int
seglog_read(const char *dir, uint64_t seg, uint64_t pos, size_t max,
            bool (*each)(void *arg, const struct rec *r, uint64_t pos),
            void *arg)
{
    char name[64], path[4200];
    struct stat sb;

    seglog_name(name, sizeof(name), seg);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    size_t len = (uint64_t)sb.st_size > pos ? (size_t)((uint64_t)sb.st_size -
                                                        pos) : 0;
    if (max && len > max)
        len = max;
    uint8_t *buf = xmalloc(len + 1);
    size_t got = 0;
    while (got < len) {
        ssize_t k = pread(fd, buf + got, len - got, (off_t)(pos + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    size_t off = 0;
    struct rec r;
    while (rec_read(buf + off, got - off, &r) == REC_OK) {
        if (!each(arg, &r, pos + off))
            break;
        off += r.size;
    }
    free(buf);
    return 0;
}

/* ---- writing ---- */

int
seglog_write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int
w_write(struct seglog_writer *w, const uint8_t *p, size_t n)
{
    if (w->io && w->io->write_all)
        return w->io->write_all(w->fd, p, n);
    return seglog_write_all(w->fd, p, n);
}

static int
w_sync(struct seglog_writer *w, const char *name)
{
    char full[128];

    if (w->io && w->io->sync) {
        if (w->label[0])
            snprintf(full, sizeof(full), "%s/%s", w->label, name);
        return w->io->sync(w->fd, w->label[0] ? full : name, w->len);
    }
    return fdatasync(w->fd);
}

static bool
w_failing(struct seglog_writer *w)
{
    return w->io && w->io->failing && w->io->failing();
}

int
seglog_writer_open(struct seglog_writer *w, const char *dir,
                   uint64_t prealloc, const struct seglog_io *io)
{
    char label[sizeof(w->label)];
    snprintf(label, sizeof(label), "%s", w->label);
    memset(w, 0, sizeof(*w));
    snprintf(w->label, sizeof(w->label), "%s", label);
    w->fd = -1;
    w->prealloc = prealloc;
    w->io = io;
    w->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return w->dirfd < 0 ? -1 : 0;
}

/* Create segment 'seg', preallocated, its directory synced. */
static int
create_segment(struct seglog_writer *w, uint64_t seg, const char **what)
{
    char name[64];

    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    seglog_name(name, sizeof(name), seg);
    int fd = openat(w->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0640);
    if (fd < 0) {
        *what = "cannot create segment";
        return -1;
    }
    /* Preallocated, so that appends do not change the file's size and
     * a sync need not write metadata; a full disk shows here first. */
    if (w->prealloc && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0,
                                 (off_t)w->prealloc) != 0 &&
        errno != EOPNOTSUPP) {
        int e = errno;
        close(fd);
        unlinkat(w->dirfd, name, 0);
        errno = e;
        *what = "cannot preallocate segment";
        return -1;
    }
    if (w_failing(w) || fsync(w->dirfd) != 0) {
        int e = errno;
        close(fd);
        unlinkat(w->dirfd, name, 0);
        errno = e;
        *what = "cannot sync the journal directory";
        return -1;
    }
    w->fd = fd;
    w->seg = seg;
    w->len = 0;
    return 0;
}

int
seglog_writer_append(struct seglog_writer *w, uint64_t seg,
                     const uint8_t *p, size_t n, const char **what)
{
    char name[64];

    if (n == 0)
        return 0;
    if ((w->fd < 0 || seg != w->seg) && create_segment(w, seg, what) != 0)
        return -1;
    if (w_write(w, p, n) != 0) {
        *what = "cannot write the journal";
        goto abandon;
    }
    w->len += n;
    seglog_name(name, sizeof(name), w->seg);
    if (w_sync(w, name) != 0) {
        *what = "cannot sync the journal";
        goto abandon;
    }
    return 0;
abandon:
    /* Never written to again: what it holds may not be what we think. */
    {
        int e = errno;
        close(w->fd);
        w->fd = -1;
        errno = e;
    }
    return -1;
}

void
seglog_writer_unlink(struct seglog_writer *w, const uint64_t *segs, size_t n)
{
    char name[64];

    for (size_t i = 0; i < n; i++) {
        seglog_name(name, sizeof(name), segs[i]);
        if (unlinkat(w->dirfd, name, 0) != 0 && errno != ENOENT)
            log_warn("cannot delete segment %s", name);
        crashed_name(name, sizeof(name), segs[i]);
        if (unlinkat(w->dirfd, name, 0) != 0 && errno != ENOENT)
            log_warn("cannot delete %s", name);
    }
    if (n && fsync(w->dirfd) != 0)
        log_warn("cannot sync the journal directory");
}

void
seglog_writer_close(struct seglog_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->dirfd >= 0)
        close(w->dirfd);
    w->fd = w->dirfd = -1;
}
