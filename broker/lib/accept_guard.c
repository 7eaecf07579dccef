/*
 * SPDX-License-Identifier: Apache-2.0
 * Listeners that back off on accept errors (accept_guard.h).
 */
#include "broker/lib/accept_guard.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/lib/log.h"
#include "broker/lib/util.h"

struct accept_guard {
    struct evconnlistener *l;
    struct event *retry;        /* enables the listener again */
    char what[96];
    unsigned long backoffs;     /* since made */
    unsigned long unlogged;     /* since the last line */
    uint64_t logged_ms;         /* when that line was written; 0: never */
    int last_err;
    bool held;                  /* accept_guard_hold */
};

/* libevent gives an error callback the accept callback's argument
 * (evhttp's, once it binds the listener), so a guard is found by its
 * listener. */
static struct accept_guard *guards[ACCEPT_GUARD_MAX];

static struct accept_guard *
guard_of(const struct evconnlistener *l)
{
    for (size_t i = 0; i < ACCEPT_GUARD_MAX; i++)
        if (guards[i] != NULL && guards[i]->l == l)
            return guards[i];
    return NULL;
}

static bool
out_of_resources(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

static void
log_backoff(struct accept_guard *g, uint64_t now)
{
    const char *why = out_of_resources(g->last_err)
                          ? (g->last_err == EMFILE || g->last_err == ENFILE
                                 ? "out of file descriptors"
                                 : "out of kernel memory")
                          : "accept failed";

    if (g->logged_ms == 0 || g->unlogged == 1)
        log_warnx("%s: reducing accept rate: %s (%s); retrying every %d ms",
                  g->what, why, strerror(g->last_err), ACCEPT_GUARD_RETRY_MS);
    else
        log_warnx("%s: reducing accept rate: %s (%s); backed off %lu times "
                  "in the last %llu s", g->what, why, strerror(g->last_err),
                  g->unlogged,
                  (unsigned long long)((now - g->logged_ms) / 1000));
    g->logged_ms = now;
    g->unlogged = 0;
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct accept_guard *g = arg;
    uint64_t now = now_ms();

    (void)fd;
    (void)what;
    if (g->unlogged > 0 && now - g->logged_ms >= ACCEPT_GUARD_LOG_MS)
        log_backoff(g, now);
    if (!g->held)
        evconnlistener_enable(g->l);
}

static void
error_cb(struct evconnlistener *l, void *arg)
{
    struct accept_guard *g = guard_of(l);
    struct timeval tv = { 0, ACCEPT_GUARD_RETRY_MS * 1000 };
    uint64_t now = now_ms();

    (void)arg;
    g->last_err = EVUTIL_SOCKET_ERROR();
    evconnlistener_disable(l);
    evtimer_add(g->retry, &tv);
    g->backoffs++;
    g->unlogged++;
    if (g->logged_ms == 0 || now - g->logged_ms >= ACCEPT_GUARD_LOG_MS)
        log_backoff(g, now);
}

struct accept_guard *
accept_guard_new(struct event_base *base, int fd, evconnlistener_cb cb,
                 void *arg, const char *what)
{
    size_t slot = 0;

    while (slot < ACCEPT_GUARD_MAX && guards[slot] != NULL)
        slot++;
    if (slot == ACCEPT_GUARD_MAX) {
        log_errorx("%s: more than %d listeners", what, ACCEPT_GUARD_MAX);
        return NULL;
    }
    struct accept_guard *g = xcalloc(1, sizeof(*g));
    g->retry = evtimer_new(base, retry_cb, g);
    /* Backlog 0: 'fd' is listening already, with the caller's backlog
     * (listen_backlog); -1 would make libevent listen() again with 128. */
    if (g->retry != NULL)
        g->l = evconnlistener_new(base, cb, arg, LEV_OPT_CLOSE_ON_FREE |
                                                     LEV_OPT_CLOSE_ON_EXEC,
                                  0, fd);
    if (g->l == NULL) {
        if (g->retry != NULL)
            event_free(g->retry);
        free(g);
        return NULL;
    }
    snprintf(g->what, sizeof(g->what), "%s", what);
    evconnlistener_set_error_cb(g->l, error_cb);
    guards[slot] = g;
    return g;
}

struct evconnlistener *
accept_guard_listener(struct accept_guard *g)
{
    return g->l;
}

void
accept_guard_hold(struct accept_guard *g, bool held)
{
    g->held = held;
    if (held)
        evconnlistener_disable(g->l);
    else if (!evtimer_pending(g->retry, NULL))
        evconnlistener_enable(g->l);
}

unsigned long
accept_guard_backoffs(const struct accept_guard *g)
{
    return g->backoffs;
}

void
accept_guard_free(struct accept_guard *g, bool with_listener)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < ACCEPT_GUARD_MAX; i++)
        if (guards[i] == g)
            guards[i] = NULL;
    event_free(g->retry);
    if (with_listener)
        evconnlistener_free(g->l);
    free(g);
}
