/*
 * SPDX-License-Identifier: Apache-2.0
 * The store's I/O thread: the only code that writes, syncs, creates,
 * renames or deletes files in the data directory while roostd runs, so
 * that the event loop never waits for the disk. It takes one job at a
 * time from the loop and hands it back, done or failed, through a pipe
 * the loop watches.
 */
#ifndef ROOST_BROKER_STORE_IO_H
#define ROOST_BROKER_STORE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/store/record.h"

struct msg;
struct event;

/* A store thread's way back to the loop: a pipe the loop watches, with
 * 'cb' called when the thread pokes it (pager.c uses it too). */
struct wake {
    int fd[2];
    struct event *ev;
};
int wake_open(struct wake *w, void (*cb)(int fd, short what, void *arg));
void wake_poke(struct wake *w);     /* from the thread */
void wake_drain(int fd);            /* in 'cb' */
void wake_close(struct wake *w);

/* A test hook from the environment (io.c and pager.c list theirs): the
 * path it names (a copy, or NULL), or the number it says (0 if unset). */
char *test_hook_path(const char *name);
unsigned test_hook_number(const char *name);

/*
 * A stream's part of a job (streams.h): records for segment 'seg' of its
 * own log in 'dir' (which the thread makes, and syncs its parent, before
 * the log's first segment), then segments of it to delete once the job's
 * writes are synced; or, with 'remove', the whole log deleted, files and
 * directory. 'w' is the stream's writer: only the thread touches it.
 */
struct seglog_writer;
struct io_stream {
    struct seglog_writer *w;
    const char *dir;
    uint64_t prealloc;
    uint64_t seg;
    struct wbuf data;
    uint64_t *unlink;
    size_t nunlink;
    bool remove;
    void *owner;                /* the caller's (the stream's log) */
    uint64_t first, next;       /* the offsets of the records in 'data' */
};

struct io_job {
    uint64_t batch;
    uint64_t durable_upto;      /* every batch up to this is durable when
                                   the job is done (a job may carry only
                                   the first part of a batch) */
    /* journal records for segment 'seg': a segment number the thread
     * has not written yet is a new file (preallocated, its directory
     * synced); the previous one is closed */
    uint64_t seg;
    struct wbuf journal;
    /* definition records appended to defs.log; or, when 'snapshot' is
     * set, defs_snap becomes defs.snap and 'defs' the whole new log */
    struct wbuf defs;
    struct wbuf defs_snap;
    bool snapshot;
    /* segments to delete once this job's writes are synced */
    uint64_t *unlink;
    size_t nunlink;
    /* the streams' parts (written and synced before the journal) */
    struct io_stream *streams;
    size_t nstreams, streams_cap;
    /* the messages written (a reference each), so that a failed job's
     * can move to the segment it is written to again */
    struct msg **msgs;
    size_t nmsgs, msgs_cap;
    /* result */
    int err;                    /* 0, or the errno of the failure */
    char errmsg[1024];
    uint64_t synced;            /* fdatasync calls made */
};

/* Start the thread on data directory 'dir' (whose journal lives in
 * dir/msgs), with segments preallocated to 'seg_size' bytes. 'done' is
 * called on the loop thread for each finished job. */
int io_start(const char *dir, uint64_t seg_size,
             void (*done)(struct io_job *j));

/* Hand over a job; the thread takes one at a time, so the caller
 * submits the next only after 'done'. */
void io_submit(struct io_job *j);

/* Block until the job in hand is done, and call 'done' for it. */
void io_wait(void);

/* Stop the thread (after the job in hand) and close the files. */
void io_stop(void);

#endif
