/*
 * SPDX-License-Identifier: Apache-2.0
 * export_definitions and import_definitions, on /api/definitions. Both
 * move the JSON bytes as they are (checked to parse, never re-encoded, so
 * no number changes on the way); "-" is stdout or stdin. A file read for
 * import is bounded like an API answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "xalloc.h"

static int
write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int
cmd_export_definitions(struct ctl *c)
{
    const char *file = c->argv[0];
    bool to_stdout = strcmp(file, "-") == 0;
    struct ctl_answer a;
    char *body = NULL;
    size_t len = 0;
    int rc;

    /* rabbitmqctl checks the directory before it asks the node. */
    if (!to_stdout) {
        char *copy = xstrdup(file);
        const char *dir = dirname(copy);
        struct stat st;
        bool ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
        if (!ok)
            rc = ctl_fail(EX_DATAERR, "Directory %s does not exist", dir);
        free(copy);
        if (!ok)
            return rc;
        ctl_banner(c, "Exporting definitions in JSON to a file at \"%s\" ...",
                   file);
    }
    rc = ctl_call_raw(c, EVHTTP_REQ_GET, "/api/definitions", NULL, 0, NULL,
                      &a, &body, &len);
    if (rc != 0)
        return rc;
    if (a.status != 200 || !json_is_object(a.json)) {
        rc = ctl_unexpected(&a, "exporting definitions");
        goto out;
    }
    if (to_stdout) {
        fflush(stdout);
        if (write_all(STDOUT_FILENO, body, len) == -1)
            rc = ctl_fail(EX_UNAVAILABLE, "cannot write to stdout: %s",
                          strerror(errno));
        goto out;
    }
    /* The file holds password hashes: readable by its owner only, even
     * when it was there before with another mode (open's mode is only
     * for a new file). */
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd == -1 || fchmod(fd, 0600) == -1) {
        rc = ctl_fail(EX_UNAVAILABLE, "cannot create %s: %s", file,
                      strerror(errno));
        if (fd != -1)
            close(fd);
        goto out;
    }
    if (write_all(fd, body, len) == -1 || close(fd) == -1)
        rc = ctl_fail(EX_UNAVAILABLE, "cannot write %s: %s", file,
                      strerror(errno));
out:
    free(body);
    ctl_answer_clear(&a);
    return rc;
}

/* Read all of 'fd' into '*out' (NUL-terminated); -1 with errno, or
 * EFBIG when it is over CTL_MAX_BODY. */
static int
read_bounded(int fd, char **out, size_t *len)
{
    size_t cap = 64 * 1024, n = 0;
    char *buf = xmalloc(cap + 1);

    for (;;) {
        if (n == cap) {
            /* one byte over the limit tells "too large" from "at it" */
            if (cap > CTL_MAX_BODY) {
                free(buf);
                errno = EFBIG;
                return -1;
            }
            cap = cap * 2 > CTL_MAX_BODY ? CTL_MAX_BODY + 1 : cap * 2;
            char *nb = realloc(buf, cap + 1);
            if (nb == NULL)
                xalloc_fail();
            buf = nb;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r == -1 && errno == EINTR)
            continue;
        if (r == -1) {
            int saved = errno;
            free(buf);
            errno = saved;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > CTL_MAX_BODY) {
        free(buf);
        errno = EFBIG;
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int
cmd_import_definitions(struct ctl *c)
{
    const char *file = c->argc > 0 ? c->argv[0] : "-";
    bool from_stdin = strcmp(file, "-") == 0;
    const char *shown = from_stdin ? "standard input" : file;
    char *body;
    size_t len;
    int fd = from_stdin ? STDIN_FILENO : open(file, O_RDONLY);

    if (fd == -1 && errno == ENOENT)
        return ctl_fail(EX_DATAERR, "File %s does not exist", file);
    if (fd == -1 || read_bounded(fd, &body, &len) == -1) {
        int e = errno;
        if (fd != -1 && !from_stdin)
            close(fd);
        if (e == EFBIG)
            return ctl_fail(EX_DATAERR, "%s is over the limit of %u bytes",
                            shown, CTL_MAX_BODY);
        return ctl_fail(EX_DATAERR, "cannot read %s: %s", shown,
                        strerror(e));
    }
    if (!from_stdin)
        close(fd);

    json_error_t jerr;
    json_t *parsed = json_loadb(body, len, 0, &jerr);
    if (parsed == NULL) {
        free(body);
        return ctl_fail(EX_DATAERR, "Failed to deserialise input (format: "
                        "JSON) (error: %s, at line %d, column %d of %s)",
                        jerr.text, jerr.line, jerr.column, shown);
    }
    json_decref(parsed);

    if (from_stdin)
        ctl_banner(c, "Importing definitions in JSON from standard input ...");
    else
        ctl_banner(c, "Importing definitions in JSON from a file at \"%s\" ...",
                   file);
    struct ctl_answer a;
    int rc = ctl_call_raw(c, EVHTTP_REQ_POST, "/api/definitions", body,
                          len, NULL, &a, NULL, NULL);
    free(body);
    if (rc != 0)
        return rc;
    if (a.status == 200 || a.status == 201 || a.status == 204) {
        ctl_info(c, "Successfully started definition import. This process "
                 "is asynchronous and can take some time.");
    } else {
        char buf[512];
        const char *reason = ctl_reason(&a, buf, sizeof(buf));
        rc = ctl_fail(EX_UNAVAILABLE, "%s", *reason ? reason : "the import "
                      "was refused");
    }
    ctl_answer_clear(&a);
    return rc;
}
