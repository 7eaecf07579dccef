/*
 * SPDX-License-Identifier: Apache-2.0
 * The pager thread (pager.h). It opens a segment for each run of reads
 * in it and closes it after, so that it never keeps a deleted segment's
 * space alive.
 *
 * Test hooks, read at start as io.c reads its own: while the file named
 * by ROOST_TEST_SCRATCH_FAIL exists, scratch writes fail with EIO;
 * ROOST_TEST_READ_DELAY_US waits that long before each read job, so
 * that a test can act while a read is under way.
 */
#define _GNU_SOURCE
#include "broker/store/pager.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/core/broker.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/store/io.h"
#include "broker/store/offsets.h"
#include "broker/store/seglog.h"

TAILQ_HEAD(pager_list, pager_job);

static struct {
    char dir[4096], msgdir[4200], scratchdir[4200];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct pager_list todo, finished;
    bool running, stop;
    struct wake wake;
    int write_fd;               /* the scratch segment being written */
    uint32_t write_seg;
    /* test hooks */
    char *fail_path;
    unsigned read_delay_us;
} pg = { .write_fd = -1 };

const char *
pager_scratch_dir(void)
{
    return pg.scratchdir;
}

/* Segment 'seg' of the journal, the scratch area, or (log_sid) the own
 * log of stream 'log_sid'. */
static int
open_seg(bool scratch, uint32_t log_sid, uint32_t seg, int flags)
{
    char path[4400], name[64];
    seglog_name(name, sizeof(name), seg);
    if (log_sid)
        snprintf(path, sizeof(path), "%s/streams/%" PRIu32 "/%s", pg.dir,
                 log_sid, name);
    else
        snprintf(path, sizeof(path), "%s/%s",
                 scratch ? pg.scratchdir : pg.msgdir, name);
    return open(path, flags | O_CLOEXEC, 0600);
}

static int
pread_all(int fd, uint8_t *p, size_t n, uint64_t off, size_t *got)
{
    *got = 0;
    while (*got < n) {
        ssize_t r = pread(fd, p + *got, n - *got, (off_t)(off + *got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

static uint32_t rec_len_at(const uint8_t *p);

/* One record: first 'want' bytes, then the rest if its header says it
 * is longer. */
static void
read_one(int fd, struct pager_read *r)
{
    size_t got;

    r->buf = xmalloc(r->want);
    if (pread_all(fd, r->buf, r->want, r->off, &got) != 0) {
        r->err = errno;
        return;
    }
    if (got < REC_HDR) {
        r->err = ENODATA;
        return;
    }
    uint32_t plen = rec_len_at(r->buf);
    size_t size = (size_t)REC_HDR + plen;
    if (plen > REC_MAX) {
        r->err = EBADMSG;
        return;
    }
    if (size > got) {
        size_t more;
        r->buf = xrealloc(r->buf, size);
        if (pread_all(fd, r->buf + got, size - got, r->off + got, &more) != 0) {
            r->err = errno;
            return;
        }
        got += more;
        if (got < size) {
            r->err = ENODATA;
            return;
        }
    }
    r->len = (uint32_t)size;
}

/* Records whose gap is at most this are read together, in extents of
 * at most EXTENT_MAX bytes. */
#define GAP_MAX (64u * 1024)
#define EXTENT_MAX (4u * 1024 * 1024)

static uint32_t
rec_len_at(const uint8_t *p)
{
    return (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
           (uint32_t)p[7] << 24;
}

/* Reads i..k (same segment, offsets rising) with one pread; any that
 * the extent does not hold whole is read alone. */
static void
read_extent(int fd, struct pager_job *j, size_t i, size_t k, uint64_t end)
{
    uint64_t start = j->reads[i].off;
    size_t got, n = (size_t)(end - start);
    uint8_t *ext = xmalloc(n);

    if (pread_all(fd, ext, n, start, &got) != 0)
        got = 0;
    j->extents = xrealloc(j->extents, (j->nextents + 1) * sizeof(*j->extents));
    j->extents[j->nextents++] = ext;
    for (size_t x = i; x <= k; x++) {
        struct pager_read *r = &j->reads[x];
        size_t d = (size_t)(r->off - start);
        if (d + REC_HDR <= got) {
            uint32_t plen = rec_len_at(ext + d);
            if (plen <= REC_MAX && d + REC_HDR + plen <= got) {
                r->buf = ext + d;
                r->shared = true;
                r->len = REC_HDR + plen;
                continue;
            }
        }
        read_one(fd, r);
    }
}

/* Each record read is checked here, off the loop: its CRC, and that it
 * is exactly what was read. */
static void
check_reads(struct pager_job *j)
{
    for (size_t i = 0; i < j->nreads; i++) {
        struct pager_read *r = &j->reads[i];
        struct rec rec;
        if (r->err == 0 && (rec_read(r->buf, r->len, &rec) != REC_OK ||
                            rec.size != r->len))
            r->err = EBADMSG;
    }
}

static void
run_reads(struct pager_job *j)
{
    int fd = -1;
    uint32_t fd_seg = 0;
    bool fd_scratch = false;

    for (size_t i = 0; i < j->nreads;) {
        struct pager_read *r = &j->reads[i];
        if (fd < 0 || r->seg != fd_seg || r->scratch != fd_scratch) {
            if (fd >= 0)
                close(fd);
            fd = open_seg(r->scratch, j->log_sid, r->seg, O_RDONLY);
            fd_seg = r->seg;
            fd_scratch = r->scratch;
        }
        if (fd < 0) {
            r->err = errno;
            i++;
            continue;
        }
        /* As far as the next records lie close after this one. */
        uint64_t end = (uint64_t)r->off + r->want;
        size_t k = i;
        while (k + 1 < j->nreads) {
            const struct pager_read *n = &j->reads[k + 1];
            uint64_t nend = (uint64_t)n->off + n->want;
            if (n->seg != r->seg || n->scratch != r->scratch ||
                n->off < j->reads[k].off || n->off > end + GAP_MAX ||
                nend - r->off > EXTENT_MAX)
                break;
            if (nend > end)
                end = nend;
            k++;
        }
        if (k == i)
            read_one(fd, r);
        else
            read_extent(fd, j, i, k, end);
        i = k + 1;
    }
    if (fd >= 0)
        close(fd);
    check_reads(j);
}

static void
run_write(struct pager_job *j)
{
    if (pg.fail_path && access(pg.fail_path, F_OK) == 0) {
        j->err = EIO;
        return;
    }
    if (pg.write_fd < 0 || pg.write_seg != j->seg) {
        if (pg.write_fd >= 0)
            close(pg.write_fd);
        pg.write_fd = open_seg(true, 0, j->seg, O_WRONLY | O_CREAT);
        pg.write_seg = j->seg;
        if (pg.write_fd < 0) {
            j->err = errno;
            return;
        }
    }
    size_t done = 0;
    while (done < j->data.len) {
        ssize_t w = pwrite(pg.write_fd, j->data.p + done, j->data.len - done,
                           (off_t)(j->off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            j->err = errno;
            return;
        }
        done += (size_t)w;
    }
}

static void
run_job(struct pager_job *j)
{
    char name[64], path[4300];

    j->err = 0;
    switch (j->kind) {
    case PAGER_READ:
        if (pg.read_delay_us)
            usleep(pg.read_delay_us);
        run_reads(j);
        break;
    case PAGER_WRITE:
        run_write(j);
        break;
    case PAGER_OFFSETS:
        offsets_run(j, pg.dir);
        break;
    case PAGER_UNLINK:
        if (pg.write_fd >= 0 && pg.write_seg == j->seg) {
            close(pg.write_fd);
            pg.write_fd = -1;
        }
        seglog_name(name, sizeof(name), j->seg);
        snprintf(path, sizeof(path), "%s/%s", pg.scratchdir, name);
        if (unlink(path) != 0 && errno != ENOENT)
            j->err = errno;
        break;
    }
}

static void *
thread_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pg.mu);
    for (;;) {
        while (TAILQ_EMPTY(&pg.todo) && !pg.stop)
            pthread_cond_wait(&pg.cv, &pg.mu);
        struct pager_job *j = TAILQ_FIRST(&pg.todo);
        if (j == NULL)
            break;
        TAILQ_REMOVE(&pg.todo, j, link);
        pthread_mutex_unlock(&pg.mu);
        run_job(j);
        pthread_mutex_lock(&pg.mu);
        TAILQ_INSERT_TAIL(&pg.finished, j, link);
        wake_poke(&pg.wake);
    }
    pthread_mutex_unlock(&pg.mu);
    return NULL;
}

static void
pipe_cb(evutil_socket_t fd, short what, void *arg)
{
    struct pager_list done = TAILQ_HEAD_INITIALIZER(done);
    struct pager_job *j;
    (void)what;
    (void)arg;

    wake_drain(fd);
    pthread_mutex_lock(&pg.mu);
    TAILQ_CONCAT(&done, &pg.finished, link);
    pthread_mutex_unlock(&pg.mu);
    while ((j = TAILQ_FIRST(&done)) != NULL) {
        TAILQ_REMOVE(&done, j, link);
        j->done(j);
    }
}

/* Remove every file in the scratch directory (left by an earlier run). */
static void
wipe_scratch(void)
{
    DIR *d = opendir(pg.scratchdir);
    struct dirent *de;
    char path[4600];
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", pg.scratchdir, de->d_name);
        if (unlink(path) != 0)
            log_warn("cannot delete %s", path);
    }
    closedir(d);
}

int
pager_start(const char *dir)
{
    snprintf(pg.dir, sizeof(pg.dir), "%s", dir);
    snprintf(pg.msgdir, sizeof(pg.msgdir), "%s/msgs", dir);
    snprintf(pg.scratchdir, sizeof(pg.scratchdir), "%s/scratch", dir);
    if (mkdir(pg.scratchdir, 0700) != 0 && errno != EEXIST)
        return -1;
    wipe_scratch();
    pg.fail_path = test_hook_path("ROOST_TEST_SCRATCH_FAIL");
    pg.read_delay_us = test_hook_number("ROOST_TEST_READ_DELAY_US");
    TAILQ_INIT(&pg.todo);
    TAILQ_INIT(&pg.finished);
    if (wake_open(&pg.wake, pipe_cb) != 0)
        return -1;
    pthread_mutex_init(&pg.mu, NULL);
    pthread_cond_init(&pg.cv, NULL);
    pg.stop = false;
    if (pthread_create(&pg.thread, NULL, thread_main, NULL) != 0)
        return -1;
    pg.running = true;
    return 0;
}

void
pager_submit(struct pager_job *j)
{
    pthread_mutex_lock(&pg.mu);
    TAILQ_INSERT_TAIL(&pg.todo, j, link);
    pthread_cond_signal(&pg.cv);
    pthread_mutex_unlock(&pg.mu);
}

void
pager_stop(void)
{
    if (!pg.running)
        return;
    pthread_mutex_lock(&pg.mu);
    pg.stop = true;
    pthread_cond_signal(&pg.cv);
    pthread_mutex_unlock(&pg.mu);
    pthread_join(pg.thread, NULL);
    pg.running = false;
    /* The thread ran every job it was given: hand them back. */
    pipe_cb(pg.wake.fd[0], EV_READ, NULL);
    wake_close(&pg.wake);
    if (pg.write_fd >= 0)
        close(pg.write_fd);
    pg.write_fd = -1;
    free(pg.fail_path);
    pg.fail_path = NULL;
    wipe_scratch();
}
