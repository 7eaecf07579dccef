/*
 * SPDX-License-Identifier: Apache-2.0
 * A segment log: a directory of numbered segment files (NNNNNNNNNN.seg)
 * of records as record.h frames them, appended to at the end and freed
 * by whole files at the front. The journal (store.c) is one; a stream
 * queue's per-stream series will be another (streams-spec.md, P1).
 *
 * It has two sides, which share nothing, so that the loop never waits
 * for the disk:
 *
 *  - struct seglog, on the event loop: where the next record goes (the
 *    segment, its position, its offset), the segments that exist and
 *    their bytes, a sparse index of each (record offset, append time,
 *    file position: an entry every SEGLOG_INDEX_RECORDS records or
 *    SEGLOG_INDEX_BYTES bytes), what has been synced and can be read
 *    back, and which segments are to be deleted. Records are built by
 *    the caller into a batch buffer, which the writer appends.
 *  - struct seglog_writer, on the thread that writes (io.c): creates
 *    segments (preallocated, their directory synced), appends and syncs
 *    batches, deletes segments.
 *
 * Offsets number a log's records in order, contiguously, from the first
 * record of its oldest segment (0 unless the caller's 'stamp' reads them
 * from the records); a segment's header record takes none.
 *
 * Reopening (seglog_reopen) maps every segment, walks its records, and
 * rebuilds the segments' table and indexes from them: a torn tail (only
 * zeros or nothing valid after a bad record) is cut, a corrupt record in
 * the middle skipped, each said in the log; the caller sees every record
 * that checks out. Appends then go to a new segment after the last one.
 */
#ifndef ROOST_BROKER_STORE_SEGLOG_H
#define ROOST_BROKER_STORE_SEGLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/lib/wbuf.h"
#include "broker/store/record.h"

#define SEGLOG_INDEX_RECORDS 256
#define SEGLOG_INDEX_BYTES (64u * 1024)

struct seglog;

struct seglog_config {
    const char *dir;            /* the segments' directory (exists) */
    const char *name;           /* for the log: "store", "stream 's1'" */
    uint64_t seg_size;          /* a segment takes batches until this full */
    size_t udata_size;          /* the caller's bytes per segment, zeroed */
    /* The record that opens each segment (the journal's J_SEG), into
     * 'b'. NULL: segments have none. */
    void (*header)(struct wbuf *b, uint64_t seg);
    /* At reopen, the offset and append time a record carries; false if
     * it takes none. NULL: each record after a segment's header takes
     * the next offset, and its time is unknown (0). */
    bool (*stamp)(const struct rec *r, uint64_t *offset, uint64_t *time);
};

/* Where a record is: its segment, its byte position in the file, and
 * its offset in the log. */
struct seglog_pos {
    uint64_t seg;
    uint64_t pos;
    uint64_t offset;
};

/* One entry of a segment's sparse index. */
struct seglog_index {
    uint64_t offset, time, pos;
};

/* A new, empty log over cfg->dir (copied): seglog_reopen reads what is
 * on disk. seglog_free(NULL) is a no-op; it unmaps what reopen mapped. */
struct seglog *seglog_new(const struct seglog_config *cfg);
void seglog_free(struct seglog *l);

/* ---- reopening ---- */

/* What seglog_reopen tells its caller as it walks, each optional: every
 * record that checks out, in order, with 'i' its segment's place among
 * the reopened ones (0 is the oldest); a bad record (after the log says
 * so); the end of each segment. */
struct seglog_scan {
    void (*record)(void *arg, size_t i, const struct rec *r, size_t pos);
    void (*fault)(void *arg, size_t i, enum rec_fault f, size_t pos,
                  size_t n);
    void (*segment_end)(void *arg, size_t i);
    void *arg;
};

/*
 * Once, on a new log, before anything is appended: read the segments in
 * the directory, oldest first: map each (until
 * seglog_unmap), walk it, rebuild the table and the indexes. 'progress'
 * (may be NULL) is called before each segment with its place and the
 * count. The next batch opens a new segment after the last. -1 with
 * errno if the directory cannot be read; a segment that cannot be
 * opened is logged and counts as empty.
 */
int seglog_reopen(struct seglog *l, const struct seglog_scan *scan,
                  void (*progress)(size_t i, size_t n));

/* What reopen mapped: how many segments, and segment 'i' (its bytes and
 * number; NULL if it could not be mapped or is empty). */
size_t seglog_nmapped(const struct seglog *l);
const uint8_t *seglog_mapped(const struct seglog *l, size_t i, size_t *len,
                             uint64_t *seg);
/* Bytes of all mapped segments; corrupt records skipped, tails cut. */
uint64_t seglog_mapped_bytes(const struct seglog *l);
void seglog_faults(const struct seglog *l, uint64_t *corrupt, uint64_t *torn);
void seglog_unmap(struct seglog *l);

/* ---- appending (the loop) ---- */

/*
 * A batch: seglog_batch_begin before its first record goes into 'b'
 * (the buffer the writer will append; it says which segment, and moves
 * to a new one, header first, when the current one is full),
 * seglog_add after each record (rec_begin at 'at' .. rec_end) with its
 * append time, seglog_batch_end when it is complete. One batch at a
 * time.
 */
uint64_t seglog_batch_begin(struct seglog *l, struct wbuf *b);
struct seglog_pos seglog_add(struct seglog *l, size_t at, uint64_t time);
void seglog_batch_end(struct seglog *l, const struct wbuf *b);

/* A record of 'type' and 'payload' built into 'b' and added. */
struct seglog_pos seglog_append(struct seglog *l, struct wbuf *b,
                                uint8_t type, const void *payload,
                                size_t len, uint64_t time);

/*
 * The last batch, in 'b', was not written: it goes again, whole, at the
 * start of a new segment (the old one is abandoned: what it held before
 * the batch stays valid). 'b' is rewritten; seglog_moved says where a
 * record of the batch, at 'pos' of the old segment, is now. Returns the
 * new segment.
 */
uint64_t seglog_rewrite(struct seglog *l, struct wbuf *b);
uint64_t seglog_moved(const struct seglog *l, uint64_t pos);

/* The last batch is synced: what it holds can be read back. */
void seglog_batch_synced(struct seglog *l);

/* Whether 'size' bytes at 'pos' of 'seg' are synced. */
bool seglog_is_readable(const struct seglog *l, uint64_t seg, uint64_t pos,
                        uint64_t size);

/* ---- what is there ---- */

uint64_t seglog_first(const struct seglog *l);      /* the oldest segment */
uint64_t seglog_current(const struct seglog *l);    /* the one appended to */
uint64_t seglog_count(const struct seglog *l);      /* first..current */
uint64_t seglog_bytes(const struct seglog *l);      /* in all of them */
uint64_t seglog_seg_bytes(const struct seglog *l, uint64_t seg);
/* The offset the next record takes; the oldest one kept. */
uint64_t seglog_next_offset(const struct seglog *l);
uint64_t seglog_first_offset(const struct seglog *l);
/* The next record appended takes at least 'offset' (a caller whose
 * offsets skip some: a stream whose messages were not all stored). */
void seglog_skip_to(struct seglog *l, uint64_t offset);
/* Segments opened from now on take batches until this full. */
void seglog_set_seg_size(struct seglog *l, uint64_t size);
/* The caller's udata_size bytes of segment 'seg' (first..current). */
void *seglog_udata(struct seglog *l, uint64_t seg);
/* Segment 'seg''s index (valid until the next append or drop). */
const struct seglog_index *seglog_seg_index(const struct seglog *l,
                                            uint64_t seg, size_t *n);

/*
 * Where to start reading for the record at 'offset': the segment and
 * position of the last indexed record at or before it, and that
 * record's offset. false if no segment holds it (dropped, or not yet
 * appended).
 */
bool seglog_seek(const struct seglog *l, uint64_t offset,
                 struct seglog_pos *at);

/* ---- freeing space ---- */

/* Drop the oldest segment (never the current one): its file is deleted
 * once the writer is told (seglog_take_unlinks). false if there is
 * only the current one. */
bool seglog_drop_first(struct seglog *l);

/* Drop the oldest segments (never the current one) while every record
 * in them is below 'offset'; returns how many. */
size_t seglog_drop_before(struct seglog *l, uint64_t offset);

/* Retention: 0 is no limit. Age counts from the newest record of a
 * segment (a segment whose times are unknown is not dropped by age). */
struct seglog_retention {
    uint64_t max_segments, max_bytes, max_age_ms;
};

/* Drop old segments, whole, while the log is over a limit; returns how
 * many. 'now' is on the clock the append times are on. */
size_t seglog_retain(struct seglog *l, const struct seglog_retention *r,
                     uint64_t now);

/* The segments dropped since the last call (the caller frees the
 * array; NULL if none), for the writer to delete. */
void seglog_take_unlinks(struct seglog *l, uint64_t **segs, size_t *n);
bool seglog_has_unlinks(const struct seglog *l);

/* ---- the files (any thread) ---- */

/* The file name of segment 'seg' ("0000000042.seg"). */
void seglog_name(char *out, size_t len, uint64_t seg);

/* The numbers of the segments in 'dir', oldest first, into '*segs' (the
 * caller frees it; NULL if none). -1 with errno if 'dir' cannot be
 * read. */
int seglog_list(const char *dir, uint64_t **segs, size_t *nsegs);

/* Delete 'dir' with its segments and their .crashed marks (a stream's
 * log): 0, or -1 with errno from the rmdir (ENOENT if it was gone). A
 * segment that cannot be deleted is logged. */
int seglog_remove_dir(const char *dir);

/*
 * A segment that was the newest when the broker crashed: its last write
 * may never have been synced (nor confirmed), and a power cut may have
 * left it damaged. Recovery after a crash marks the newest segment so
 * (a file "NNNNNNNNNN.crashed" beside it, made durable before anything
 * is written after it; deleted with the segment), so that roostd
 * --check-data can tell such a tail from damage to synced data as long
 * as the segment lives, not only until the next start. 0, or -1 with
 * errno.
 */
int seglog_mark_crashed(const char *dir, uint64_t seg);
bool seglog_was_crashed(const char *dir, uint64_t seg);

/*
 * Read segment 'seg' of 'dir' from 'pos' on, at most 'max' bytes (0: to
 * its end): 'each' gets each record that checks out and its position,
 * until it returns false. Stops at the end of the records or the first
 * that does not check out. 0, or -1 with errno.
 */
int seglog_read(const char *dir, uint64_t seg, uint64_t pos, size_t max,
                bool (*each)(void *arg, const struct rec *r, uint64_t pos),
                void *arg);

/* ---- writing (the writer's thread) ---- */

/* write(2) all 'n' bytes (through EINTR and short writes): 0, or -1
 * with errno. */
int seglog_write_all(int fd, const uint8_t *p, size_t n);

/* How the writer writes and syncs: io.c's, with its test hooks; NULL
 * members (or no table) are plain write(2) and fdatasync(2). */
struct seglog_io {
    int (*write_all)(int fd, const uint8_t *p, size_t n);
    int (*sync)(int fd, const char *name, uint64_t len);
    bool (*failing)(void);      /* an injected failure, errno set */
};

struct seglog_writer {
    int dirfd;
    int fd;                     /* the segment appended to, or -1 */
    uint64_t seg, len;
    uint64_t prealloc;
    const struct seglog_io *io;
    /* what the sync hook names its files under ("streams/7"; empty:
     * their bare names), kept by seglog_writer_open */
    char label[48];
};

/* Open 'dir' for writing segments preallocated to 'prealloc' bytes. */
int seglog_writer_open(struct seglog_writer *w, const char *dir,
                       uint64_t prealloc, const struct seglog_io *io);

/*
 * Append 'n' bytes to segment 'seg' and sync them; a segment not yet
 * written is created (the one before it closed). -1 with errno and
 * '*what' saying what failed; the segment is then abandoned, never
 * written again.
 */
int seglog_writer_append(struct seglog_writer *w, uint64_t seg,
                         const uint8_t *p, size_t n, const char **what);

/* Delete segments (a missing one is no error), then sync the
 * directory; failures are logged. */
void seglog_writer_unlink(struct seglog_writer *w, const uint64_t *segs,
                          size_t n);

void seglog_writer_close(struct seglog_writer *w);

#endif
