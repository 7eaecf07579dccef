/*
 * SPDX-License-Identifier: Apache-2.0
 * Plain TCP behind the transport seam (transport.h): read(2), evbuffer's
 * writev, and one event each for readable and writable.
 */
#include "base/transport.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "base/closer.h"

struct tcp {
    struct transport t;
    struct event *rev, *wev;
};

static ssize_t
tcp_read(struct transport *t, void *buf, size_t n)
{
    ssize_t got = read(t->fd, buf, n);
    if (got > 0)
        return got;
    if (got == 0)
        return TRANSPORT_EOF;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return TRANSPORT_AGAIN;
    return TRANSPORT_ERROR;
}

static ssize_t
tcp_write(struct transport *t, struct evbuffer *out, size_t max)
{
    /* evbuffer_write_atmost returns -1 for an empty buffer without a
     * system call, errno left as whatever set it last: that is no
     * error of this socket. */
    if (evbuffer_get_length(out) == 0 || max == 0)
        return 0;
    int n = evbuffer_write_atmost(out, t->fd, (ssize_t)max);
    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return TRANSPORT_ERROR;
}

static void
arm(struct event *ev, bool on)
{
    if (on)
        event_add(ev, NULL);
    else
        event_del(ev);
}

static void
tcp_want_read(struct transport *t, bool on)
{
    arm(((struct tcp *)t)->rev, on);
}

static void
tcp_want_write(struct transport *t, bool on)
{
    arm(((struct tcp *)t)->wev, on);
}

static bool
tcp_write_waiting(const struct transport *t)
{
    return event_pending(((const struct tcp *)t)->wev, EV_WRITE, NULL);
}

static const char *
tcp_error(const struct transport *t)
{
    (void)t;
    return NULL;
}

static bool
tcp_peer_login(const struct transport *t, char *out, size_t len)
{
    (void)t;
    (void)out;
    (void)len;
    return false;
}

static void
tcp_free(struct transport *t)
{
    struct tcp *p = (struct tcp *)t;
    event_free(p->rev);
    event_free(p->wev);
    closer_close(t->fd);
    free(p);
}

static const struct transport_ops tcp_ops = {
    .name = "tcp",
    .read = tcp_read,
    .write = tcp_write,
    .want_read = tcp_want_read,
    .want_write = tcp_want_write,
    .write_waiting = tcp_write_waiting,
    .error = tcp_error,
    .peer_login = tcp_peer_login,
    .free = tcp_free,
};

static void
readable_cb(evutil_socket_t fd, short what, void *arg)
{
    struct transport *t = arg;
    (void)fd;
    (void)what;
    t->on_read(t->arg);
}

static void
writable_cb(evutil_socket_t fd, short what, void *arg)
{
    struct transport *t = arg;
    (void)fd;
    (void)what;
    t->on_write(t->arg);
}

struct transport *
transport_tcp_new(struct event_base *base, int fd, transport_cb on_read,
                  transport_cb on_write, void *arg)
{
    struct tcp *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->t = (struct transport){ &tcp_ops, fd, on_read, on_write, arg };
    p->rev = event_new(base, fd, EV_READ | EV_PERSIST, readable_cb, &p->t);
    p->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, writable_cb, &p->t);
    if (p->rev == NULL || p->wev == NULL) {
        if (p->rev)
            event_free(p->rev);
        if (p->wev)
            event_free(p->wev);
        free(p);
        return NULL;
    }
    return &p->t;
}
