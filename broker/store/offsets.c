/*
 * SPDX-License-Identifier: Apache-2.0
 * Stream consumer names on disk (offsets.h).
 */
#include "broker/store/offsets.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/core/queue.h"
#include "broker/core/stream.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/store/journal.h"
#include "broker/store/record.h"
#include "broker/store/seglog.h"
#include "broker/store/store.h"

enum { OFFSETS_SAVE, OFFSETS_FORGET };

static void
job_done(struct pager_job *j)
{
    if (j->err)
        log_warnx("store: cannot %s the consumer offsets of stream %" PRIu32
                  " (offsets/%" PRIu32 "): %s", j->arg_index == OFFSETS_SAVE
                  ? "write" : "delete", j->seg, j->seg, strerror(j->err));
    wbuf_free(&j->data);
    free(j);
}

static struct pager_job *
new_job(uint32_t sid, unsigned what)
{
    struct pager_job *j = xcalloc(1, sizeof(*j));
    j->kind = PAGER_OFFSETS;
    j->seg = sid;
    j->arg_index = what;
    j->done = job_done;
    return j;
}

struct pager_job *
offsets_save_job(uint32_t sid, const struct stream_offset *v, size_t n)
{
    struct pager_job *j = new_job(sid, OFFSETS_SAVE);
    for (size_t i = 0; i < n; i++) {
        size_t at = rec_begin(&j->data, J_OFFSET);
        wbuf_u32(&j->data, sid);
        wbuf_str(&j->data, v[i].name, v[i].len);
        wbuf_u64(&j->data, v[i].offset);
        wbuf_u64(&j->data, v[i].updated_wall);
        rec_end(&j->data, at);
    }
    return j;
}

struct pager_job *
offsets_forget_job(uint32_t sid)
{
    return new_job(sid, OFFSETS_FORGET);
}

void
offsets_run(struct pager_job *j, const char *dir)
{
    char d[4200], path[4300], tmp[4400];

    snprintf(d, sizeof(d), "%s/offsets", dir);
    snprintf(path, sizeof(path), "%s/%" PRIu32, d, j->seg);
    j->err = 0;
    if (j->arg_index == OFFSETS_FORGET) {
        if (unlink(path) == 0)
            (void)store_sync_dir(d);
        else if (errno != ENOENT)
            j->err = errno;
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        j->err = errno;
        return;
    }
    if (seglog_write_all(fd, j->data.p, j->data.len) != 0 ||
        fdatasync(fd) != 0) {
        j->err = errno;
        close(fd);
        unlink(tmp);
        return;
    }
    close(fd);
    if (rename(tmp, path) != 0 || store_sync_dir(d) != 0) {
        j->err = errno;
        unlink(tmp);
    }
}

struct load {
    struct queue *q;
    const char *file;
    size_t names;
};

static void
load_record(void *arg, const struct rec *r, size_t off)
{
    struct load *l = arg;
    struct rbuf b;
    uint32_t len;

    if (r->type != J_OFFSET) {
        log_warnx("store: %s: record of type %u at %zu is not an offset; "
                  "skipped", l->file, r->type, off);
        return;
    }
    rbuf_init(&b, r->payload, r->len);
    (void)rbuf_u32(&b);
    const uint8_t *name = rbuf_str(&b, &len);
    uint64_t offset = rbuf_u64(&b), updated = rbuf_u64(&b);
    if (b.bad || len == 0 || len > 255) {
        log_warnx("store: %s: offset record at %zu is malformed; skipped",
                  l->file, off);
        return;
    }
    stream_restore_offset(l->q, (const char *)name, len, offset, updated);
    l->names++;
}

static void
load_fault(void *arg, enum rec_fault f, size_t off, size_t n)
{
    const struct load *l = arg;
    log_warnx("store: %s: %zu bytes at %zu do not check out (%s); skipped: "
              "the names in them start again from where their consumers "
              "ask", l->file, n, off, f == REC_TORN ? "a torn tail"
                                                     : "corrupt");
}

size_t
offsets_load(const char *dir, struct queue *(*find)(uint32_t sid, void *arg),
             void *arg)
{
    char d[4200], path[4600];
    struct dirent *de;
    size_t names = 0;

    snprintf(d, sizeof(d), "%s/offsets", dir);
    DIR *dh = opendir(d);
    if (dh == NULL)
        return 0;
    while ((de = readdir(dh)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", d, de->d_name);
        char *end;
        unsigned long sid = strtoul(de->d_name, &end, 10);
        struct queue *q = *end == '\0' && sid > 0 && sid <= UINT32_MAX
                              ? find((uint32_t)sid, arg) : NULL;
        if (q == NULL || !q->ops->log) {
            /* a save that never was renamed in, or a stream deleted
             * before its file was */
            if (unlink(path) != 0)
                log_warn("store: cannot delete %s", path);
            continue;
        }
        uint8_t *p;
        size_t len;
        int r = store_read_file(path, &p, &len);
        if (r == 0)
            continue;
        if (r < 0) {
            log_warn("store: cannot read %s; the consumer names of stream "
                     "'%s' in vhost '%s' are lost", path, q->name,
                     q->vh->name);
            continue;
        }
        struct load l = { q, path, 0 };
        (void)rec_walk(p, len, load_record, load_fault, &l);
        free(p);
        names += l.names;
    }
    closedir(dh);
    return names;
}
