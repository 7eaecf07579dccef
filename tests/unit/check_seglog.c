/*
 * SPDX-License-Identifier: Apache-2.0
 * The segment log (broker/store/seglog.c) driven alone on a temporary
 * directory: batches appended and synced by its writer, the log reopened
 * and every record found again (offsets, the sparse index), a torn tail
 * cut, a corrupt record skipped, a read from an offset in the middle, a
 * failed batch written again to a new segment, and retention dropping
 * whole old segments.
 */
#include "tests/unit/testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/store/record.h"
#include "broker/store/seglog.h"

enum { T_HEAD = 1, T_REC = 2 };

#define SEG_SIZE (16u * 1024)
#define NREC 2000
#define PER_BATCH 25

static char dir[64];

static void
header(struct wbuf *b, uint64_t seg)
{
    size_t at = rec_begin(b, T_HEAD);
    wbuf_u64(b, seg);
    rec_end(b, at);
}

static const struct seglog_config cfg = {
    .dir = dir, .name = "check_seglog", .seg_size = SEG_SIZE,
    .udata_size = sizeof(uint64_t), .header = header,
};

static uint64_t number_of(const struct rec *r);

/* Offsets read from the records, as a stream's will be. */
static bool
stamp(const struct rec *r, uint64_t *offset, uint64_t *time)
{
    if (r->type == T_HEAD)
        return false;
    *offset = number_of(r);
    *time = 0;
    return true;
}

static const struct seglog_config stamped = {
    .dir = dir, .name = "check_seglog", .seg_size = SEG_SIZE,
    .header = header, .stamp = stamp,
};

static void
make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/check_seglog.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[320];

    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Record i: its number, then (i * 37) % 300 bytes of a pattern. */
static size_t
payload(uint64_t i, uint8_t *p)
{
    size_t n = (size_t)(i * 37 % 300);
    for (int k = 0; k < 8; k++)
        p[k] = (uint8_t)(i >> (8 * k));
    for (size_t k = 0; k < n; k++)
        p[8 + k] = (uint8_t)(i + k);
    return 8 + n;
}

static uint64_t
number_of(const struct rec *r)
{
    uint64_t i = 0;
    for (int k = 0; k < 8; k++)
        i |= (uint64_t)r->payload[k] << (8 * k);
    return i;
}

static bool
is_record(const struct rec *r, uint64_t i)
{
    uint8_t want[320];
    size_t n = payload(i, want);
    return r->type == T_REC && r->len == n && memcmp(r->payload, want, n) == 0;
}

/* Hand what the log dropped to the writer. */
static void
unlink_dropped(struct seglog *l, struct seglog_writer *w)
{
    uint64_t *segs;
    size_t n;
    seglog_take_unlinks(l, &segs, &n);
    seglog_writer_unlink(w, segs, n);
    free(segs);
}

/* Records first..first+n-1 as one batch, written and synced. */
static void
append_batch(struct seglog *l, struct seglog_writer *w, uint64_t first,
             size_t n, uint64_t time)
{
    struct wbuf b = { 0 };
    uint8_t p[320];
    const char *what = NULL;

    uint64_t seg = seglog_batch_begin(l, &b);
    for (uint64_t i = first; i < first + n; i++) {
        struct seglog_pos at = seglog_append(l, &b, T_REC, p, payload(i, p),
                                             time);
        ck_assert_uint_eq(at.offset, i);
        ck_assert_uint_eq(at.seg, seg);
    }
    seglog_batch_end(l, &b);
    ck_assert_msg(seglog_writer_append(w, seg, b.p, b.len, &what) == 0,
                  "%s", what);
    seglog_batch_synced(l);
    unlink_dropped(l, w);
    wbuf_free(&b);
}

/* A fresh log of NREC records in batches, its time the batch's number. */
static struct seglog *
write_log(void)
{
    struct seglog *l = seglog_new(&cfg);
    struct seglog_writer w;

    ck_assert_int_eq(seglog_reopen(l, NULL, NULL), 0);
    ck_assert_int_eq(seglog_writer_open(&w, dir, SEG_SIZE, NULL), 0);
    for (uint64_t i = 0; i < NREC; i += PER_BATCH)
        append_batch(l, &w, i, PER_BATCH, 1000 + i / PER_BATCH);
    seglog_writer_close(&w);
    return l;
}

/* What a reopen walked. */
struct found {
    unsigned seen[NREC + PER_BATCH];
    size_t records, heads, faults;
    enum rec_fault last_fault;
    size_t ends;
};

static void
found_record(void *arg, size_t i, const struct rec *r, size_t pos)
{
    struct found *f = arg;
    (void)i;
    if (r->type == T_HEAD) {
        ck_assert_uint_eq(pos, 0);
        f->heads++;
        return;
    }
    uint64_t n = number_of(r);
    ck_assert_uint_lt(n, NREC + PER_BATCH);
    ck_assert_msg(is_record(r, n), "record %llu differs",
                  (unsigned long long)n);
    f->seen[n]++;
    f->records++;
}

static void
found_fault(void *arg, size_t i, enum rec_fault fault, size_t pos, size_t n)
{
    struct found *f = arg;
    (void)i;
    (void)pos;
    (void)n;
    f->faults++;
    f->last_fault = fault;
}

static void
found_end(void *arg, size_t i)
{
    (void)i;
    ((struct found *)arg)->ends++;
}

static struct seglog *
reopen_as(const struct seglog_config *c, struct found *f)
{
    const struct seglog_scan scan = {
        .record = found_record, .fault = found_fault,
        .segment_end = found_end, .arg = f,
    };
    struct seglog *l = seglog_new(c);
    memset(f, 0, sizeof(*f));
    ck_assert_int_eq(seglog_reopen(l, &scan, NULL), 0);
    return l;
}

static struct seglog *
reopen(struct found *f)
{
    return reopen_as(&cfg, f);
}

/* The reopen met one bad record, of kind 'k', and the log counted it. */
static void
one_fault(const struct seglog *l, const struct found *f, enum rec_fault k)
{
    uint64_t corrupt, torn;

    ck_assert_uint_eq(f->faults, 1);
    ck_assert_int_eq(f->last_fault, k);
    seglog_faults(l, &corrupt, &torn);
    ck_assert_uint_eq(torn, k == REC_TORN);
    ck_assert_uint_eq(corrupt, k == REC_CORRUPT);
}

/* The path of segment 'seg', and its length. */
static off_t
seg_path(uint64_t seg, char *path, size_t len)
{
    char name[64];
    struct stat sb;
    seglog_name(name, sizeof(name), seg);
    snprintf(path, len, "%s/%s", dir, name);
    ck_assert_int_eq(stat(path, &sb), 0);
    return sb.st_size;
}

/* ---- appending and reopening ---- */

START_TEST(reopen_finds_every_record)
{
    struct found f;

    make_dir();
    struct seglog *w = write_log();
    uint64_t nsegs = seglog_count(w), bytes = seglog_bytes(w);
    ck_assert_uint_gt(nsegs, 10);
    ck_assert_uint_eq(seglog_next_offset(w), NREC);

    struct seglog *l = reopen(&f);
    ck_assert_uint_eq(f.records, NREC);
    for (size_t i = 0; i < NREC; i++)
        ck_assert_uint_eq(f.seen[i], 1);
    ck_assert_uint_eq(f.heads, nsegs);
    ck_assert_uint_eq(f.ends, nsegs);
    ck_assert_uint_eq(f.faults, 0);
    ck_assert_uint_eq(seglog_nmapped(l), nsegs);
    ck_assert_uint_eq(seglog_bytes(l), bytes);
    ck_assert_uint_eq(seglog_mapped_bytes(l), bytes);
    ck_assert_uint_eq(seglog_next_offset(l), NREC);
    ck_assert_uint_eq(seglog_first_offset(l), 0);
    /* Appends go on in a new segment after the last. */
    ck_assert_uint_eq(seglog_current(l), seglog_first(l) + nsegs);
    /* The rebuilt index is the one built while writing. */
    for (uint64_t s = seglog_first(l); s < seglog_current(l); s++) {
        size_t n1, n2;
        const struct seglog_index *a = seglog_seg_index(w, s, &n1);
        const struct seglog_index *b = seglog_seg_index(l, s, &n2);
        ck_assert_uint_eq(n1, n2);
        ck_assert_uint_ge(n1, 1);
        for (size_t k = 0; k < n1; k++) {
            ck_assert_uint_eq(a[k].offset, b[k].offset);
            ck_assert_uint_eq(a[k].pos, b[k].pos);
        }
    }
    seglog_free(w);
    seglog_free(l);
    remove_dir();
}
END_TEST

START_TEST(index_is_sparse)
{
    make_dir();
    struct seglog *l = seglog_new(&cfg);
    struct seglog_writer w;
    struct seglog_config big = cfg;
    big.seg_size = 64u * 1024 * 1024;
    seglog_free(l);
    l = seglog_new(&big);
    ck_assert_int_eq(seglog_reopen(l, NULL, NULL), 0);
    ck_assert_int_eq(seglog_writer_open(&w, dir, 0, NULL), 0);
    for (uint64_t i = 0; i < NREC; i += PER_BATCH)
        append_batch(l, &w, i, PER_BATCH, i);
    size_t n;
    const struct seglog_index *idx = seglog_seg_index(l, seglog_first(l), &n);
    /* One segment: an entry every 256 records or 64 KiB, never fewer. */
    ck_assert_uint_ge(n, NREC / SEGLOG_INDEX_RECORDS);
    ck_assert_uint_le(n, NREC / 32);
    for (size_t k = 1; k < n; k++) {
        ck_assert_uint_gt(idx[k].offset, idx[k - 1].offset);
        ck_assert_uint_le(idx[k].offset - idx[k - 1].offset,
                          SEGLOG_INDEX_RECORDS);
        ck_assert_uint_ge(idx[k].time, idx[k - 1].time);
    }
    seglog_writer_close(&w);
    seglog_free(l);
    remove_dir();
}
END_TEST

/* ---- bad records at reopen ---- */

START_TEST(torn_tail_is_cut)
{
    struct found f;
    char path[128];

    make_dir();
    struct seglog *w = write_log();
    uint64_t last = seglog_current(w);
    seglog_free(w);
    /* A record the crash cut short after the last one synced. */
    struct wbuf b = { 0 };
    uint8_t p[320];
    size_t at = rec_begin(&b, T_REC);
    wbuf_bytes(&b, p, payload(NREC, p));
    rec_end(&b, at);
    off_t len = seg_path(last, path, sizeof(path));
    int fd = open(path, O_WRONLY);
    ck_assert_int_eq(pwrite(fd, b.p, b.len / 2, len), (ssize_t)(b.len / 2));
    close(fd);
    wbuf_free(&b);

    struct seglog *l = reopen(&f);
    ck_assert_uint_eq(f.records, NREC);
    one_fault(l, &f, REC_TORN);
    /* Nothing is appended after the torn record: a new segment. */
    ck_assert_uint_eq(seglog_current(l), last + 1);
    ck_assert_uint_eq(seglog_next_offset(l), NREC);
    seglog_free(l);
    remove_dir();
}
END_TEST

START_TEST(corrupt_record_is_skipped)
{
    struct found f;
    struct seglog_pos at;
    char path[128];

    make_dir();
    struct seglog *w = write_log();
    /* A byte of record 1000's payload flipped in place. */
    ck_assert(seglog_seek(w, 1000, &at));
    seglog_free(w);
    seg_path(at.seg, path, sizeof(path));
    int fd = open(path, O_RDWR);
    uint64_t pos = at.pos;
    for (uint64_t o = at.offset; o < 1000; o++) {
        uint8_t h[REC_HDR];
        ck_assert_int_eq(pread(fd, h, REC_HDR, (off_t)pos), REC_HDR);
        pos += REC_HDR + (h[4] | h[5] << 8 | h[6] << 16 | (uint32_t)h[7] << 24);
    }
    uint8_t c;
    ck_assert_int_eq(pread(fd, &c, 1, (off_t)pos + REC_HDR + 2), 1);
    c ^= 0x55;
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)pos + REC_HDR + 2), 1);
    close(fd);

    struct seglog *l = reopen(&f);
    ck_assert_uint_eq(f.records, NREC - 1);
    ck_assert_uint_eq(f.seen[1000], 0);
    ck_assert_uint_eq(f.seen[999], 1);
    ck_assert_uint_eq(f.seen[1001], 1);
    one_fault(l, &f, REC_CORRUPT);
    seglog_free(l);
    remove_dir();
}
END_TEST

/* ---- reading from an offset ---- */

struct reader {
    uint64_t offset, want;
    unsigned got;
};

static bool
read_one(void *arg, const struct rec *r, uint64_t pos)
{
    struct reader *rd = arg;
    (void)pos;
    if (rd->offset++ < rd->want)
        return true;
    ck_assert_msg(is_record(r, rd->want), "record at offset %llu differs",
                  (unsigned long long)rd->want);
    rd->want++;
    return ++rd->got < 10;
}

START_TEST(read_from_the_middle)
{
    struct found f;
    struct seglog_pos at;

    make_dir();
    seglog_free(write_log());
    struct seglog *l = reopen(&f);
    static const uint64_t wants[] = { 0, 1, 255, 256, 1000, 1237, NREC - 10 };
    for (size_t k = 0; k < NELEMS(wants); k++) {
        ck_assert(seglog_seek(l, wants[k], &at));
        ck_assert_uint_le(at.offset, wants[k]);
        ck_assert_uint_lt(wants[k] - at.offset, SEGLOG_INDEX_RECORDS);
        struct reader rd = { at.offset, wants[k], 0 };
        ck_assert_int_eq(seglog_read(dir, at.seg, at.pos, 0, read_one, &rd), 0);
        /* Ten records from it, or to the end of its segment. */
        ck_assert_uint_ge(rd.got, 1);
    }
    ck_assert(!seglog_seek(l, NREC, &at));
    seglog_free(l);
    remove_dir();
}
END_TEST

/* ---- a failed batch ---- */

START_TEST(rewritten_batch_moves_to_a_new_segment)
{
    struct found f;
    struct wbuf b = { 0 };
    uint8_t p[320];
    const char *what;
    struct seglog_writer w;

    make_dir();
    struct seglog *l = write_log();
    ck_assert_int_eq(seglog_writer_open(&w, dir, 0, NULL), 0);
    uint64_t seg = seglog_batch_begin(l, &b);
    struct seglog_pos at[PER_BATCH];
    for (uint64_t i = 0; i < PER_BATCH; i++)
        at[i] = seglog_append(l, &b, T_REC, p, payload(NREC + i, p), 5);
    seglog_batch_end(l, &b);
    /* Half of it reached the disk, then the write failed. */
    ck_assert_int_eq(seglog_writer_append(&w, seg, b.p, b.len / 2, &what), 0);
    uint64_t now = seglog_rewrite(l, &b);
    ck_assert_uint_eq(now, seg + 1);
    ck_assert_int_eq(seglog_writer_append(&w, now, b.p, b.len, &what), 0);
    seglog_batch_synced(l);
    for (uint64_t i = 0; i < PER_BATCH; i++) {
        struct seglog_pos s;
        ck_assert(seglog_seek(l, NREC + i, &s));
        ck_assert_uint_eq(s.seg, now);
        ck_assert_uint_le(s.offset, NREC + i);
        struct reader rd = { NREC + i, NREC + i, 0 };
        ck_assert_int_eq(seglog_read(dir, s.seg, seglog_moved(l, at[i].pos),
                                     0, read_one, &rd), 0);
        ck_assert_uint_ge(rd.got, 1);
    }
    wbuf_free(&b);
    seglog_writer_close(&w);
    seglog_free(l);
    /* The torn half in the old segment is cut, the whole copy found;
     * offsets read from the records come back as they were. */
    l = reopen_as(&stamped, &f);
    one_fault(l, &f, REC_TORN);
    for (uint64_t i = 0; i < NREC + PER_BATCH; i++)
        ck_assert_uint_ge(f.seen[i], 1);
    ck_assert_uint_eq(seglog_next_offset(l), NREC + PER_BATCH);
    struct seglog_pos s;
    ck_assert(seglog_seek(l, NREC, &s));
    ck_assert_uint_eq(s.seg, now);
    seglog_free(l);
    remove_dir();
}
END_TEST

/* ---- retention ---- */

START_TEST(retention_drops_old_segments)
{
    struct found f;
    struct seglog_writer w;
    char path[128];

    make_dir();
    seglog_free(write_log());
    struct seglog *l = reopen(&f);
    seglog_unmap(l);
    ck_assert_int_eq(seglog_writer_open(&w, dir, 0, NULL), 0);
    uint64_t first = seglog_first(l), n = seglog_count(l);

    /* Nothing over the limits: nothing goes. */
    struct seglog_retention r = { .max_segments = n };
    ck_assert_uint_eq(seglog_retain(l, &r, 0), 0);
    /* By count: the oldest whole segments, to the limit. */
    r.max_segments = n - 3;
    ck_assert_uint_eq(seglog_retain(l, &r, 0), 3);
    ck_assert_uint_eq(seglog_first(l), first + 3);
    unlink_dropped(l, &w);
    seg_path(first + 3, path, sizeof(path));
    char gone[64], gpath[160];
    seglog_name(gone, sizeof(gone), first + 2);
    snprintf(gpath, sizeof(gpath), "%s/%s", dir, gone);
    ck_assert_int_eq(access(gpath, F_OK), -1);
    ck_assert(!seglog_seek(l, 0, &(struct seglog_pos){ 0 }));
    ck_assert_uint_gt(seglog_first_offset(l), 0);
    /* By size. */
    uint64_t bytes = seglog_bytes(l);
    r = (struct seglog_retention){ .max_bytes = bytes / 2 };
    ck_assert_uint_gt(seglog_retain(l, &r, 0), 0);
    ck_assert_uint_le(seglog_bytes(l), bytes / 2);
    unlink_dropped(l, &w);
    /* By age: times are unknown after a reopen, so only segments
     * appended since are judged; the current one never goes. */
    r = (struct seglog_retention){ .max_age_ms = 10 };
    ck_assert_uint_eq(seglog_retain(l, &r, 1u << 30), 0);
    seglog_free(l);

    /* A log written now, its times known. */
    seglog_writer_close(&w);
    remove_dir();
    make_dir();
    l = write_log();
    ck_assert_int_eq(seglog_writer_open(&w, dir, 0, NULL), 0);
    uint64_t before = seglog_count(l);
    /* Batch b's time is 1000 + b; segments whose newest is under 1040
     * are older than 10 ms at 1050. */
    r = (struct seglog_retention){ .max_age_ms = 10 };
    size_t dropped = seglog_retain(l, &r, 1050);
    ck_assert_uint_gt(dropped, 0);
    ck_assert_uint_eq(seglog_count(l), before - dropped);
    /* Record o is in batch o / 25, at time 1000 + o / 25: the first
     * segment kept holds offset 1000's batch or begins just after. */
    ck_assert_uint_gt(seglog_first_offset(l), 0);
    ck_assert_uint_le(seglog_first_offset(l), 1000);
    size_t k;
    const struct seglog_index *idx = seglog_seg_index(l, seglog_first(l), &k);
    ck_assert_uint_ge(k, 1);
    ck_assert_uint_le(idx[0].time, 1040);
    /* Everything old: all but the current segment. */
    ck_assert_uint_gt(seglog_retain(l, &r, 1u << 30), 0);
    ck_assert_uint_eq(seglog_count(l), 1);
    ck_assert(!seglog_drop_first(l));
    unlink_dropped(l, &w);
    seglog_writer_close(&w);
    seglog_free(l);
    uint64_t *segs;
    size_t nsegs;
    ck_assert_int_eq(seglog_list(dir, &segs, &nsegs), 0);
    /* The current segment alone is left. */
    ck_assert_uint_eq(nsegs, 1);
    free(segs);
    remove_dir();
}
END_TEST

static Suite *
seglog_suite(void)
{
    Suite *s = suite_create("seglog");
    TCase *tc = tcase_create("appending");
    tcase_add_test(tc, reopen_finds_every_record);
    tcase_add_test(tc, index_is_sparse);
    tcase_add_test(tc, rewritten_batch_moves_to_a_new_segment);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad records");
    tcase_add_test(tc, torn_tail_is_cut);
    tcase_add_test(tc, corrupt_record_is_skipped);
    suite_add_tcase(s, tc);
    tc = tcase_create("reading");
    tcase_add_test(tc, read_from_the_middle);
    suite_add_tcase(s, tc);
    tc = tcase_create("retention");
    tcase_add_test(tc, retention_drops_old_segments);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(seglog_suite());
}
