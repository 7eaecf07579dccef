/*
 * SPDX-License-Identifier: Apache-2.0
 * The HTTP listeners' bounds evhttp lacks (http_guard.h): a watcher on
 * each connection's input buffer that follows the requests' framing as
 * bytes are added to it, before evhttp reads them. (Not a filtering
 * bufferevent: libevent 2.1's filter reports a reply written once it
 * is in the socket's buffer, and evhttp then shuts the socket down under
 * it, losing every reply that closes its connection.)
 */
#include "broker/mgmt/http_guard.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "broker/core/alarm.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

/* A header block evhttp takes (mgmt.c's HEADERS_MAX), with its request
 * line; a chunk's size line. Past either the filter stops following. */
#define HEAD_MAX (64 * 1024 + 8 * 1024)
#define LINE_MAX 256
/* Lines about the bounds, at most one per guard and reason this often. */
#define GUARD_LOG_MS 60000

struct http_guard {
    struct accept_guard *listener;
    LIST_HEAD(, conn) conns;
    struct http_guard_limits lim;
    char what[96];
    struct event_base *base;
    size_t count;
    bool held;                  /* accepts held at the cap */
    unsigned long late, late_unlogged;
    int64_t cap_logged_ms, late_logged_ms;
};

/* The guards in use, for http_guard_set_closecb. */
#define GUARDS_MAX 8
static struct http_guard *guards[GUARDS_MAX];

enum phase {
    P_IDLE,                     /* between requests */
    P_HEAD,                     /* the request line and headers */
    P_BODY,                     /* 'left' bytes of a Content-Length body */
    P_CHUNK_SIZE,               /* a chunk's size line */
    P_CHUNK_DATA,               /* 'left' bytes of a chunk */
    P_CHUNK_END,                /* the line that ends a chunk's data */
    P_TRAILERS,                 /* lines until an empty one */
    P_BLIND,                    /* framing lost: evhttp decides */
};

struct conn {
    struct http_guard *g;
    LIST_ENTRY(conn) link;
    struct bufferevent *bev;    /* evhttp's: a socket's, or TLS's */
    struct evhttp_connection *evcon;    /* once adopted */
    struct event *deadline;
    struct event *adopt;        /* a turn after accept: adopt_cb */
    void (*closecb)(struct evhttp_connection *, void *);  /* the user's */
    void *closecb_arg;
    enum phase phase;
    char *buf;                  /* the head or the line being read */
    size_t len, cap;            /* cap grows up to HEAD_MAX + 1 */
    uint64_t left;
    uint64_t arrived;           /* of the request arriving: counted */
    uint64_t body, body_max;    /* its body so far; what evhttp keeps */
};

static void
hold(struct http_guard *g, bool held)
{
    if (g->held == held)
        return;
    g->held = held;
    if (g->listener == NULL)
        return;
    accept_guard_hold(g->listener, held);
    int64_t now = mono_ms();
    if (held && (g->cap_logged_ms == 0 ||
                 now - g->cap_logged_ms >= GUARD_LOG_MS)) {
        g->cap_logged_ms = now;
        log_warnx("%s: %zu connections, as many as it takes "
                  "(management.http.max_connections): not accepting more "
                  "until one closes", g->what, g->count);
    }
}

/* ---- the request as it arrives ---- */

static void
arrived(struct conn *c, size_t n)
{
    c->arrived += n;
    alarm_http_bytes((int64_t)n);
}

/* Bytes of the request's body: counted only up to what evhttp keeps
 * of it (past its limit it reads and drops the rest, to answer 413). */
static void
body_arrived(struct conn *c, size_t n)
{
    uint64_t keep = c->body < c->body_max ? c->body_max - c->body : 0;
    c->body += n;
    arrived(c, n < keep ? n : (size_t)keep);
}

/* The request is in: evhttp has it all. */
static void
complete(struct conn *c)
{
    alarm_http_bytes(-(int64_t)c->arrived);
    c->arrived = 0;
    c->phase = P_IDLE;
    evtimer_del(c->deadline);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct http_guard *g = c->g;
    int64_t now = mono_ms();

    (void)fd;
    (void)what;
    g->late++;
    g->late_unlogged++;
    if (g->late_logged_ms == 0 || now - g->late_logged_ms >= GUARD_LOG_MS) {
        log_warnx("%s: closed %lu connection(s) whose request did not "
                  "arrive within %d ms (management.tcp.request_timeout)",
                  g->what, g->late_unlogged, g->lim.request_ms);
        g->late_logged_ms = now;
        g->late_unlogged = 0;
    }
    /* As if the peer had gone: evhttp's own path for that frees the
     * connection and whatever it holds. */
    evtimer_del(c->deadline);
    int s = bufferevent_getfd(c->bev);
    if (s >= 0)
        shutdown(s, SHUT_RDWR);
}

/* Where the header block or line in c->buf ends (the index after it),
 * looking from 'from'; 0 if not yet. */
static size_t
scan_end(const struct conn *c, size_t from, bool head)
{
    for (size_t i = from; i < c->len; i++) {
        if (c->buf[i] != '\n')
            continue;
        if (!head)
            return i + 1;
        if (i >= 1 && c->buf[i - 1] == '\n')
            return i + 1;
        if (i >= 2 && c->buf[i - 1] == '\r' && c->buf[i - 2] == '\n')
            return i + 1;
    }
    return 0;
}

/* A header's value in the block, or NULL. */
static const char *
header_value(const char *head, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strchr(head, '\n'); p != NULL;
         p = strchr(p + 1, '\n')) {
        const char *h = p + 1;
        if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
            h += n + 1;
            while (*h == ' ' || *h == '\t')
                h++;
            return h;
        }
    }
    return NULL;
}

/* The head is in c->buf (NUL-ended): choose the body's limit, and what
 * follows it. */
static void
head_done(struct conn *c)
{
    struct http_guard *g = c->g;
    char method[16] = "", path[512] = "";

    if (sscanf(c->buf, "%15s %511s", method, path) != 2) {
        c->phase = P_BLIND;     /* evhttp answers 400 */
        return;
    }
    char *q = strchr(path, '?');
    if (q)
        *q = '\0';
    void *evcon = NULL;
    bufferevent_getcb(c->bev, NULL, NULL, NULL, &evcon);
    int64_t max = g->lim.large && g->lim.large(path) ? g->lim.large_body
                                                      : g->lim.small_body;
    if (evcon != NULL)
        evhttp_connection_set_max_body_size(evcon, max);
    c->body = 0;
    c->body_max = (uint64_t)max;

    /* What evhttp reads as the body (evhttp_get_body). */
    if (strcmp(method, "HEAD") == 0 || strcmp(method, "TRACE") == 0) {
        complete(c);
        return;
    }
    const char *te = header_value(c->buf, "Transfer-Encoding");
    if (te != NULL && strncasecmp(te, "chunked", 7) == 0) {
        c->phase = P_CHUNK_SIZE;
        return;
    }
    const char *cl = header_value(c->buf, "Content-Length");
    char *end;
    unsigned long long n = cl ? strtoull(cl, &end, 10) : 0;
    if (n == 0) {
        complete(c);
        return;
    }
    c->left = n;
    c->phase = P_BODY;
}

/* A chunk's size line, or a trailer, is in c->buf. */
static void
line_done(struct conn *c)
{
    switch (c->phase) {
    case P_CHUNK_SIZE: {
        char *end;
        if (!isxdigit((unsigned char)c->buf[0])) {
            c->phase = P_BLIND;
            return;
        }
        unsigned long long n = strtoull(c->buf, &end, 16);
        c->left = n;
        c->phase = n ? P_CHUNK_DATA : P_TRAILERS;
        return;
    }
    case P_CHUNK_END:
        c->phase = P_CHUNK_SIZE;
        return;
    case P_TRAILERS:
        if (c->buf[0] == '\r' || c->buf[0] == '\n')
            complete(c);
        return;
    default:
        return;
    }
}

/*
 * Read 'p' (n bytes) into c->buf up to the end of the head (head) or of
 * a line: how many bytes it took. c->buf holds the head or line,
 * NUL-ended, once '*ended'; past HEAD_MAX or LINE_MAX without an end
 * the framing is lost (P_BLIND).
 */
static size_t
take_until_end(struct conn *c, const char *p, size_t n, bool head,
               bool *ended)
{
    size_t cap = head ? HEAD_MAX : LINE_MAX;
    size_t from = c->len;

    *ended = false;
    if (n > cap - c->len)
        n = cap - c->len;
    if (c->len + n + 1 > c->cap) {
        size_t want = c->cap * 2 > c->len + n + 1 ? c->cap * 2
                                                  : c->len + n + 1;
        c->cap = want < HEAD_MAX + 1 ? want : HEAD_MAX + 1;
        c->buf = xrealloc(c->buf, c->cap);
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    size_t end = scan_end(c, from, head);
    if (end == 0) {
        if (c->len == cap)
            c->phase = P_BLIND;
        return n;
    }
    c->buf[end] = '\0';
    c->len = 0;
    *ended = true;
    return end - from;
}

/* The next 'n' bytes of the connection's input, as they arrive. */
static void
feed(struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        size_t used = 0;
        bool ended;
        switch (c->phase) {
        case P_IDLE: {
            struct timeval tv = { c->g->lim.request_ms / 1000,
                                  (c->g->lim.request_ms % 1000) * 1000 };
            evtimer_add(c->deadline, &tv);
            c->phase = P_HEAD;
            c->len = 0;
            c->body = c->body_max = 0;
            continue;
        }
        case P_HEAD:
            used = take_until_end(c, p, n, true, &ended);
            arrived(c, used);
            if (ended)
                head_done(c);
            break;
        case P_CHUNK_SIZE:
        case P_CHUNK_END:
        case P_TRAILERS:
            used = take_until_end(c, p, n, false, &ended);
            arrived(c, used);
            if (ended)
                line_done(c);
            break;
        case P_BODY:
        case P_CHUNK_DATA:
            used = c->left < n ? (size_t)c->left : n;
            body_arrived(c, used);
            c->left -= used;
            if (c->left == 0) {
                if (c->phase == P_BODY)
                    complete(c);
                else
                    c->phase = P_CHUNK_END;
            }
            break;
        case P_BLIND:
            used = n;
            body_arrived(c, used);
            break;
        }
        p += used;
        n -= used;
    }
}

/* Bytes added to the input (before evhttp's read callback reads them). */
static void
input_changed(struct evbuffer *buf, const struct evbuffer_cb_info *info,
              void *arg)
{
    struct conn *c = arg;

    if (info->n_added == 0)
        return;
    size_t len = evbuffer_get_length(buf);
    struct evbuffer_ptr pos;
    if (evbuffer_ptr_set(buf, &pos, len - info->n_added,
                         EVBUFFER_PTR_SET) != 0)
        return;
    struct evbuffer_iovec v[8];
    size_t left = info->n_added;
    while (left > 0) {
        int nv = evbuffer_peek(buf, (ev_ssize_t)left, &pos, v, NELEMS(v));
        if (nv <= 0)
            return;
        for (int i = 0; i < nv && i < (int)NELEMS(v) && left > 0; i++) {
            size_t n = v[i].iov_len < left ? v[i].iov_len : left;
            feed(c, v[i].iov_base, n);
            left -= n;
            evbuffer_ptr_set(buf, &pos, n, EVBUFFER_PTR_ADD);
        }
    }
}

static void
conn_free(struct conn *c)
{
    struct http_guard *g = c->g;

    LIST_REMOVE(c, link);
    alarm_http_bytes(-(int64_t)c->arrived);
    event_free(c->deadline);
    event_free(c->adopt);
    free(c->buf);
    free(c);
    g->count--;
    if (g->count < g->lim.conn_max)
        hold(g, false);
}

/* evhttp frees the connection. */
static void
conn_closed(struct evhttp_connection *evcon, void *arg)
{
    struct conn *c = arg;

    if (c->closecb != NULL)
        c->closecb(evcon, c->closecb_arg);
    conn_free(c);
}

/*
 * A turn of the loop after the accept evhttp has made its connection
 * around the bufferevent: learn it (its callbacks' argument) and hear
 * of its end. The reference taken at bevcb kept the bufferevent whole
 * if evhttp freed it already (it could not make the connection), which
 * cleared its callbacks.
 */
static void
adopt_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    void *evcon = NULL;

    (void)fd;
    (void)what;
    bufferevent_getcb(c->bev, NULL, NULL, NULL, &evcon);
    struct bufferevent *bev = c->bev;
    if (evcon == NULL) {
        conn_free(c);
    } else {
        c->evcon = evcon;
        evhttp_connection_set_closecb(evcon, conn_closed, c);
    }
    bufferevent_decref(bev);
}

/* A new connection's bufferevent (evhttp's bevcb): a TLS or a plain
 * one, watched. NULL if libevent cannot make one. */
static struct bufferevent *
guarded_bev(struct event_base *base, void *arg)
{
    struct http_guard *g = arg;
    struct bufferevent *bev =
        g->lim.under ? g->lim.under(base)
                     : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL)
        return NULL;
    struct conn *c = xcalloc(1, sizeof(*c));
    c->g = g;
    c->bev = bev;
    c->cap = 1024;
    c->buf = xmalloc(c->cap);
    c->deadline = evtimer_new(base, deadline_cb, c);
    c->adopt = event_new(base, -1, 0, adopt_cb, c);
    if (c->deadline == NULL || c->adopt == NULL ||
        evbuffer_add_cb(bufferevent_get_input(bev), input_changed, c) ==
            NULL) {
        if (c->deadline != NULL)
            event_free(c->deadline);
        if (c->adopt != NULL)
            event_free(c->adopt);
        free(c->buf);
        free(c);
        bufferevent_free(bev);
        return NULL;
    }
    bufferevent_incref(bev);
    event_active(c->adopt, EV_TIMEOUT, 1);
    LIST_INSERT_HEAD(&g->conns, c, link);
    g->count++;
    if (g->count >= g->lim.conn_max)
        hold(g, true);
    return bev;
}

void
http_guard_set_closecb(struct evhttp_connection *evcon,
                       void (*cb)(struct evhttp_connection *, void *),
                       void *arg)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    for (size_t i = 0; i < NELEMS(guards); i++) {
        struct conn *c;
        if (guards[i] == NULL)
            continue;
        LIST_FOREACH(c, &guards[i]->conns, link)
            if (c->bev == bev) {
                c->closecb = cb;
                c->closecb_arg = arg;
                return;
            }
    }
    evhttp_connection_set_closecb(evcon, cb, arg);
}

/* ---- the guard ---- */

struct http_guard *
http_guard_new(struct accept_guard *listener,
               const struct http_guard_limits *lim, const char *what)
{
    struct http_guard *g = xcalloc(1, sizeof(*g));
    g->listener = listener;
    g->lim = *lim;
    g->base = evconnlistener_get_base(accept_guard_listener(listener));
    snprintf(g->what, sizeof(g->what), "%s", what);
    LIST_INIT(&g->conns);
    for (size_t i = 0; i < NELEMS(guards); i++)
        if (guards[i] == NULL) {
            guards[i] = g;
            break;
        }
    return g;
}

void
http_guard_attach(struct http_guard *g, struct evhttp *http)
{
    evhttp_set_bevcb(http, guarded_bev, g);
}

size_t
http_guard_count(const struct http_guard *g)
{
    return g->count;
}

void
http_guard_stop(struct http_guard *g)
{
    if (g != NULL)
        g->listener = NULL;
}

void
http_guard_free(struct http_guard *g)
{
    struct conn *c;

    if (g == NULL)
        return;
    /* Only those evhttp had not been given yet are left. */
    while ((c = LIST_FIRST(&g->conns)) != NULL) {
        if (c->evcon == NULL)
            bufferevent_decref(c->bev);
        conn_free(c);
    }
    for (size_t i = 0; i < NELEMS(guards); i++)
        if (guards[i] == g)
            guards[i] = NULL;
    free(g);
}
