/*
 * SPDX-License-Identifier: Apache-2.0
 * The I/O thread. Every file it creates, renames or deletes has its
 * directory synced before the job counts as done, so that a power cut
 * never loses a file whose data was reported durable.
 *
 * Two test hooks, read from the environment at start, stand in for a
 * disk the tests cannot break: ROOST_TEST_SYNC_LOG names a file to
 * which every successful sync appends "FILE LENGTH" (what a power cut
 * would keep), and while the file named by ROOST_TEST_IO_FAIL exists,
 * every write fails with EIO. ROOST_TEST_SYNC_DELAY_US waits that long
 * between each write and its sync, so that a kill finds written but
 * unsynced data more often.
 */
#define _GNU_SOURCE
#include "broker/store/io.h"

#include <errno.h>
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
#include "broker/store/seglog.h"
#include "broker/store/store.h"

static struct {
    char dir[4096];
    char msgdir[4200];
    int dirfd;
    struct seglog_writer seg;   /* the journal's segments */
    int defs_fd;
    uint64_t defs_len;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct io_job *todo;
    bool stop;
    struct wake wake;
    void (*done)(struct io_job *j);
    struct io_job *finished;
    /* test hooks */
    FILE *sync_log;
    char *fail_path;
    unsigned sync_delay_us;
} io = { .seg = { .fd = -1, .dirfd = -1 }, .defs_fd = -1, .dirfd = -1 };

static int
fail(struct io_job *j, const char *what)
{
    j->err = errno ? errno : EIO;
    /* run_journal's what is under 900 bytes: the error fits after it. */
    if (snprintf(j->errmsg, sizeof(j->errmsg), "%s: %s", what,
                 strerror(j->err)) < 0)
        j->errmsg[0] = '\0';
    return -1;
}

static bool
injected_failure(void)
{
    if (io.fail_path && access(io.fail_path, F_OK) == 0) {
        errno = EIO;
        return true;
    }
    return false;
}

static int
write_all(int fd, const uint8_t *p, size_t n)
{
    if (injected_failure())
        return -1;
    return seglog_write_all(fd, p, n);
}

static int
sync_fd(int fd, const char *name, uint64_t len)
{
    if (io.sync_delay_us)
        usleep(io.sync_delay_us);
    if (injected_failure() || fdatasync(fd) != 0)
        return -1;
    if (io.sync_log) {
        fprintf(io.sync_log, "%s %llu\n", name, (unsigned long long)len);
        fflush(io.sync_log);
    }
    return 0;
}

static const struct seglog_io seg_io = {
    .write_all = write_all, .sync = sync_fd, .failing = injected_failure,
};

/* Write 'data' to dir/name.tmp, sync it, rename it over dir/name. */
static int
replace_file(struct io_job *j, const char *name, const struct wbuf *data)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s.tmp", name);
    int fd = openat(io.dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0640);
    if (fd < 0)
        return fail(j, "cannot create definitions file");
    if (write_all(fd, data->p, data->len) != 0 ||
        sync_fd(fd, tmp, data->len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return fail(j, "cannot write definitions file");
    }
    close(fd);
    if (renameat(io.dirfd, tmp, io.dirfd, name) != 0)
        return fail(j, "cannot rename definitions file");
    return 0;
}

static int
run_defs(struct io_job *j)
{
    if (j->snapshot) {
        if (replace_file(j, "defs.snap", &j->defs_snap) != 0 ||
            replace_file(j, "defs.log", &j->defs) != 0)
            return -1;
        if (fsync(io.dirfd) != 0)
            return fail(j, "cannot sync the data directory");
        if (io.defs_fd >= 0)
            close(io.defs_fd);
        io.defs_fd = openat(io.dirfd, "defs.log",
                            O_WRONLY | O_APPEND | O_CLOEXEC);
        if (io.defs_fd < 0)
            return fail(j, "cannot open defs.log");
        io.defs_len = j->defs.len;
        j->synced += 2;
        return 0;
    }
    if (j->defs.len == 0)
        return 0;
    if (io.defs_fd < 0) {
        io.defs_fd = openat(io.dirfd, "defs.log",
                            O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (io.defs_fd < 0 || fsync(io.dirfd) != 0)
            return fail(j, "cannot open defs.log");
        struct stat st;
        io.defs_len = fstat(io.defs_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    }
    if (write_all(io.defs_fd, j->defs.p, j->defs.len) != 0)
        return fail(j, "cannot write defs.log");
    io.defs_len += j->defs.len;
    if (sync_fd(io.defs_fd, "defs.log", io.defs_len) != 0)
        return fail(j, "cannot sync defs.log");
    j->synced++;
    return 0;
}

static int
run_journal(struct io_job *j)
{
    const char *what = NULL;

    if (seglog_writer_append(&io.seg, j->seg, j->journal.p, j->journal.len,
                             &what) != 0) {
        /* Say which file: the alarm's line repeats this. */
        char name[64], at[900];
        seglog_name(name, sizeof(name), j->seg);
        if (snprintf(at, sizeof(at), "%s (%s/%s)", what, io.msgdir,
                     name) < 0)
            snprintf(at, sizeof(at), "%s", what);
        return fail(j, at);
    }
    if (j->journal.len)
        j->synced++;
    return 0;
}

/* Make stream log directory 'dir' (durably: its parent synced) and open
 * its writer. */
static int
open_stream(struct io_job *j, struct io_stream *p)
{
    char parent[4200];

    if (mkdir(p->dir, 0750) != 0 && errno != EEXIST)
        return fail(j, "cannot make a stream's directory");
    snprintf(parent, sizeof(parent), "%s/streams", io.dir);
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || injected_failure() || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return fail(j, "cannot sync the streams directory");
    }
    close(fd);
    if (seglog_writer_open(p->w, p->dir, p->prealloc, &seg_io) != 0)
        return fail(j, "cannot open a stream's directory");
    return 0;
}

/* A deleted stream's log: every file, then its directory. Failures are
 * logged: recovery deletes what is left of a log without a stream. */
static void
remove_stream(struct io_stream *p)
{
    char parent[4200];

    seglog_writer_close(p->w);
    if (seglog_remove_dir(p->dir) != 0 && errno != ENOENT) {
        log_warn("store: cannot delete %s", p->dir);
        return;
    }
    snprintf(parent, sizeof(parent), "%s/streams", io.dir);
    if (store_sync_dir(parent) != 0)
        log_warn("store: cannot sync %s", parent);
}

static int
run_streams(struct io_job *j)
{
    for (size_t i = 0; i < j->nstreams; i++) {
        struct io_stream *p = &j->streams[i];
        const char *what = NULL;
        char name[64], at[900];

        if (p->remove || p->data.len == 0)
            continue;
        if (p->w->dirfd < 0 && open_stream(j, p) != 0)
            return -1;
        if (seglog_writer_append(p->w, p->seg, p->data.p, p->data.len,
                                 &what) != 0) {
            seglog_name(name, sizeof(name), p->seg);
            if (snprintf(at, sizeof(at), "%s (%s/%s)", what, p->dir, name) < 0)
                snprintf(at, sizeof(at), "%s", what);
            return fail(j, at);
        }
        j->synced++;
    }
    return 0;
}

static void
run(struct io_job *j)
{
    j->err = 0;
    j->synced = 0;
    errno = 0;
    /* The streams' parts first: a message that leaves a queue for a
     * stream (dead-lettered, replayed, moved) is settled in the journal
     * and appended to the stream in one job, and a crash between the
     * two syncs must leave it in both, never in neither. */
    if (run_streams(j) != 0 || run_journal(j) != 0 || run_defs(j) != 0)
        return;
    seglog_writer_unlink(&io.seg, j->unlink, j->nunlink);
    for (size_t i = 0; i < j->nstreams; i++) {
        struct io_stream *p = &j->streams[i];
        if (p->remove)
            remove_stream(p);
        else if (p->nunlink && p->w->dirfd >= 0)
            seglog_writer_unlink(p->w, p->unlink, p->nunlink);
    }
}

static void *
thread_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&io.mu);
    for (;;) {
        while (io.todo == NULL && !io.stop)
            pthread_cond_wait(&io.cv, &io.mu);
        if (io.todo == NULL && io.stop)
            break;
        struct io_job *j = io.todo;
        pthread_mutex_unlock(&io.mu);
        run(j);
        pthread_mutex_lock(&io.mu);
        io.todo = NULL;
        io.finished = j;
        pthread_cond_broadcast(&io.cv);
        wake_poke(&io.wake);
    }
    pthread_mutex_unlock(&io.mu);
    return NULL;
}

static void
pipe_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;

    wake_drain(fd);
    pthread_mutex_lock(&io.mu);
    struct io_job *j = io.finished;
    io.finished = NULL;
    pthread_mutex_unlock(&io.mu);
    if (j)
        io.done(j);
}

int
io_start(const char *dir, uint64_t seg_size, void (*done)(struct io_job *j))
{
    snprintf(io.dir, sizeof(io.dir), "%s", dir);
    snprintf(io.msgdir, sizeof(io.msgdir), "%s/msgs", dir);
    io.done = done;
    io.dirfd = open(io.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (io.dirfd < 0 ||
        seglog_writer_open(&io.seg, io.msgdir, seg_size, &seg_io) != 0)
        return -1;
    const char *p = getenv("ROOST_TEST_SYNC_LOG");
    if (p && *p)
        io.sync_log = fopen(p, "a");
    io.sync_delay_us = test_hook_number("ROOST_TEST_SYNC_DELAY_US");
    io.fail_path = test_hook_path("ROOST_TEST_IO_FAIL");
    if (wake_open(&io.wake, pipe_cb) != 0)
        return -1;
    pthread_mutex_init(&io.mu, NULL);
    pthread_cond_init(&io.cv, NULL);
    if (pthread_create(&io.thread, NULL, thread_main, NULL) != 0)
        return -1;
    return 0;
}

void
io_submit(struct io_job *j)
{
    pthread_mutex_lock(&io.mu);
    io.todo = j;
    pthread_cond_signal(&io.cv);
    pthread_mutex_unlock(&io.mu);
}

void
io_wait(void)
{
    pthread_mutex_lock(&io.mu);
    while (io.todo != NULL)
        pthread_cond_wait(&io.cv, &io.mu);
    pthread_mutex_unlock(&io.mu);
    pipe_cb(io.wake.fd[0], EV_READ, NULL);
}

void
io_stop(void)
{
    if (io.wake.ev == NULL)
        return;
    pthread_mutex_lock(&io.mu);
    io.stop = true;
    pthread_cond_signal(&io.cv);
    pthread_mutex_unlock(&io.mu);
    pthread_join(io.thread, NULL);
    wake_close(&io.wake);
    seglog_writer_close(&io.seg);
    if (io.defs_fd >= 0)
        close(io.defs_fd);
    close(io.dirfd);
    if (io.sync_log)
        fclose(io.sync_log);
    free(io.fail_path);
    io.defs_fd = io.dirfd = -1;
}

int
wake_open(struct wake *w, void (*cb)(int fd, short what, void *arg))
{
    if (pipe2(w->fd, O_NONBLOCK | O_CLOEXEC) != 0)
        return -1;
    w->ev = event_new(broker.base, w->fd[0], EV_READ | EV_PERSIST, cb, NULL);
    event_add(w->ev, NULL);
    return 0;
}

void
wake_poke(struct wake *w)
{
    char b = 1;
    while (write(w->fd[1], &b, 1) < 0 && errno == EINTR)
        ;
}

void
wake_drain(int fd)
{
    char b[64];
    while (read(fd, b, sizeof(b)) > 0)
        ;
}

void
wake_close(struct wake *w)
{
    event_free(w->ev);
    w->ev = NULL;
    close(w->fd[0]);
    close(w->fd[1]);
}

char *
test_hook_path(const char *name)
{
    const char *p = getenv(name);
    return p && *p ? xstrdup(p) : NULL;
}

unsigned
test_hook_number(const char *name)
{
    const char *p = getenv(name);
    return p && *p ? (unsigned)strtoul(p, NULL, 10) : 0;
}
