/*
 * The pager thread: reads paged message records back from the journal
 * (dir/msgs) and the scratch area (dir/scratch), and writes transient
 * messages to the scratch area, so that the event loop never waits for
 * a read. It is not the I/O thread: that one must keep syncing while a
 * backlog is read back. Jobs run one at a time, in the order given; each
 * comes back to the loop, done, through a pipe the loop watches.
 *
 * The scratch area is never synced and holds nothing a restart needs:
 * it is wiped when the store opens.
 */
#ifndef ROOST_BROKER_STORE_PAGER_H
#define ROOST_BROKER_STORE_PAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "broker/store/record.h"

/* One record to read: at least 'want' bytes at 'off' in segment 'seg'
 * (of the journal, or of the scratch area); the whole record ends up in
 * 'buf' ('len' bytes), its CRC checked, or 'err' says why not (EBADMSG:
 * it does not check out). */
struct pager_read {
    uint64_t seq;               /* the caller's: which entry it is for */
    uint32_t seg, off, want;
    bool scratch;
    uint8_t *buf;               /* its own allocation, unless 'shared' */
    bool shared;                /* inside one of the job's extents */
    uint32_t len;
    int err;
};

enum pager_kind { PAGER_READ, PAGER_WRITE, PAGER_UNLINK };

struct pager_job {
    TAILQ_ENTRY(pager_job) link;
    enum pager_kind kind;
    /* PAGER_READ: records close to each other in a segment are read
     * with one pread, into an extent they then point into */
    struct pager_read *reads;
    size_t nreads;
    uint8_t **extents;
    size_t nextents;
    /* PAGER_WRITE: 'data' appended at 'off' of scratch segment 'seg';
     * PAGER_UNLINK: scratch segment 'seg' deleted */
    uint32_t seg;
    uint64_t off;
    struct wbuf data;
    int err;
    /* the caller's */
    void (*done)(struct pager_job *j);
    void *arg;
    uint32_t arg_index;
    void (*then)(void);
};

/* Start the thread on data directory 'dir'; empties dir/scratch. */
int pager_start(const char *dir);

/* Free what a read job's reads hold (their buffers and extents). */
void pager_read_free(struct pager_job *j);

/* Hand over a job; 'done' is called on the loop thread once it ran. */
void pager_submit(struct pager_job *j);

/* Stop the thread once it ran every job it was given, and hand those
 * back ('done'); then empty the scratch area. */
void pager_stop(void);

/* The scratch area's directory ("dir/scratch"). */
const char *pager_scratch_dir(void);

#endif
