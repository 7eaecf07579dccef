/*
 * SPDX-License-Identifier: Apache-2.0
 * systemd's service notification protocol (sd_notify(3)), for a unit of
 * Type=notify: one datagram of "KEY=VALUE" lines to the socket that
 * $NOTIFY_SOCKET names. With libsystemd (configure found it) its
 * sd_notify sends them; without, the datagram is written here. When
 * $NOTIFY_SOCKET is unset (roostd not started by systemd) every call
 * does nothing.
 */
#include "broker/proc/notify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "roost-config.h"

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

/* While recovering, each message extends the start timeout by this. */
#define EXTEND_USEC (30 * 1000 * 1000)
#define EXTEND_EVERY_MS 1000

static struct {
    bool on;                    /* $NOTIFY_SOCKET is set */
    uint64_t watchdog_usec;     /* $WATCHDOG_USEC for this process; 0: none */
    struct event *watchdog;
    uint64_t extended_ms;       /* when EXTEND_TIMEOUT_USEC last went */
    bool failed_logged;
#ifndef HAVE_LIBSYSTEMD
    int fd;
    struct sockaddr_un addr;
    socklen_t addrlen;
#endif
} nt = {
#ifndef HAVE_LIBSYSTEMD
    .fd = -1,
#endif
};

/* The send itself: 0, or -1 with errno. */
static int
send_state(const char *text)
{
#ifdef HAVE_LIBSYSTEMD
    int rc = sd_notify(0, text);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
#else
    ssize_t n = sendto(nt.fd, text, strlen(text), MSG_NOSIGNAL,
                       (const struct sockaddr *)&nt.addr, nt.addrlen);
    return n < 0 ? -1 : 0;
#endif
}

void
notify_init(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    const char *wd = getenv("WATCHDOG_USEC"), *wd_pid = getenv("WATCHDOG_PID");

    if (path == NULL || path[0] == '\0')
        return;
#ifndef HAVE_LIBSYSTEMD
    size_t len = strlen(path);
    /* A path, or '@' for the abstract namespace. */
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(nt.addr.sun_path)) {
        log_warnx("systemd: NOTIFY_SOCKET '%s' is not a socket path; not "
                  "notifying", path);
        return;
    }
    nt.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (nt.fd < 0) {
        log_warn("systemd: cannot make the notify socket");
        return;
    }
    nt.addr.sun_family = AF_UNIX;
    memcpy(nt.addr.sun_path, path, len);
    if (path[0] == '@')
        nt.addr.sun_path[0] = '\0';
    nt.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                             (path[0] == '@' ? 0 : 1));
#endif
    nt.on = true;
    /* The watchdog is this process's only if WATCHDOG_PID says so (or
     * names nobody). */
    if (wd != NULL && (wd_pid == NULL || strtol(wd_pid, NULL, 10) == getpid()))
        nt.watchdog_usec = strtoull(wd, NULL, 10);
}

void
notify_send(const char *fmt, ...)
{
    char text[512];
    va_list ap;

    if (!nt.on)
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (send_state(text) != 0 && !nt.failed_logged) {
        /* Once: systemd going away must not fill the log. */
        log_warn("systemd: cannot notify (%s)", getenv("NOTIFY_SOCKET"));
        nt.failed_logged = true;
    }
}

void
notify_recovering(const char *status)
{
    uint64_t now = now_ms();

    if (!nt.on || (nt.extended_ms != 0 &&
                   now - nt.extended_ms < EXTEND_EVERY_MS))
        return;
    nt.extended_ms = now;
    notify_send("EXTEND_TIMEOUT_USEC=%u\nSTATUS=%s%s", EXTEND_USEC, status,
                nt.watchdog_usec ? "\nWATCHDOG=1" : "");
}

static void
watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    notify_send("WATCHDOG=1");
}

void
notify_watchdog_start(struct event_base *base)
{
    if (!nt.on || nt.watchdog_usec == 0)
        return;
    /* Twice a period, from the loop: a loop that is stuck stops it. */
    uint64_t half = nt.watchdog_usec / 2;
    struct timeval tv = { (time_t)(half / 1000000),
                          (suseconds_t)(half % 1000000) };
    nt.watchdog = event_new(base, -1, EV_PERSIST, watchdog_cb, NULL);
    event_add(nt.watchdog, &tv);
    log_info("systemd: watchdog every %" PRIu64 " ms", half / 1000);
}

void
notify_shutdown(void)
{
    if (nt.watchdog)
        event_free(nt.watchdog);
    nt.watchdog = NULL;
#ifndef HAVE_LIBSYSTEMD
    if (nt.fd >= 0)
        close(nt.fd);
    nt.fd = -1;
#endif
    nt.on = false;
}
