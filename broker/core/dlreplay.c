/*
 * SPDX-License-Identifier: Apache-2.0
 * Replays of dead letters (dlreplay.h): one timer per running replay.
 * Each tick moves what the rate allows since the replay began (at most
 * MOVES_PER_TURN, so that a fast replay leaves the loop to others),
 * one queue_move_next at a time; a paged message waits for its read
 * (the cursor calls back), one whose record is still being written for
 * the next sync.
 */
#include "broker/core/dlreplay.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "broker/core/broker.h"
#include "broker/core/deadletter.h"
#include "broker/core/exchange.h"
#include "broker/core/msg.h"
#include "broker/core/perm.h"
#include "broker/core/queue.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

#define MOVES_PER_TURN 256
/* A message whose record is being written: try again this much later. */
#define NOT_WRITTEN_RETRY_MS 2

struct replay {
    struct dlreplay pub;
    struct queue *q;            /* a reference while running */
    struct queue_cursor *cur;
    struct event *timer;
    int64_t started;            /* monotonic ms */
    bool said_internal;         /* logged skipping an internal target */
    TAILQ_ENTRY(replay) link;
};

static TAILQ_HEAD(, replay) replays = TAILQ_HEAD_INITIALIZER(replays);
static size_t nrunning, nfinished;

const char *
dlreplay_state_name(enum dlreplay_state s)
{
    static const char *const names[] = {
#define AS_NAME(s, name) name,
        DLREPLAY_STATES(AS_NAME)
#undef AS_NAME
    };
    return names[s];
}

static void
replay_free(struct replay *r)
{
    queue_cursor_free(r->cur);
    if (r->q)
        queue_unref(r->q);
    if (r->timer)
        event_free(r->timer);
    free(r->pub.vhost);
    free(r->pub.queue);
    free(r->pub.user);
    free(r->pub.exchange);
    free(r->pub.rkey);
    free(r->pub.error);
    free(r);
}

/* The only place a replay's state changes: from running to 'next'. */
static void
set_state(struct replay *r, enum dlreplay_state next, const char *why)
{
    if (r->pub.state != DLREPLAY_RUNNING)
        return;
    log_info("replay %s of queue '%s' in vhost '%s': %s -> %s (%llu moved, "
             "%llu skipped)%s%s", r->pub.id, r->pub.queue, r->pub.vhost,
             dlreplay_state_name(r->pub.state), dlreplay_state_name(next),
             (unsigned long long)r->pub.moved,
             (unsigned long long)r->pub.skipped, why ? ": " : "",
             why ? why : "");
    r->pub.state = next;
    if (why)
        r->pub.error = xstrdup(why);
    queue_cursor_free(r->cur);
    r->cur = NULL;
    queue_unref(r->q);
    r->q = NULL;
    if (r->timer)
        evtimer_del(r->timer);
    nrunning--;
    nfinished++;
    /* Keep the last DLREPLAY_KEPT_MAX finished ones. */
    struct replay *o, *next_o;
    for (o = TAILQ_FIRST(&replays); o && nfinished > DLREPLAY_KEPT_MAX;
         o = next_o) {
        next_o = TAILQ_NEXT(o, link);
        if (o->pub.state == DLREPLAY_RUNNING || o == r)
            continue;
        TAILQ_REMOVE(&replays, o, link);
        replay_free(o);
        nfinished--;
    }
}

static void
arm(struct replay *r, int64_t ms)
{
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    evtimer_add(r->timer, &tv);
}

/* publishable_exchange's reason for an internal exchange. */
static const char is_internal[] = "is internal";

/*
 * The exchange called 'name' in the queue's vhost ("" the default one)
 * if the replay may publish to it as its user would: it exists, the user
 * may write to it (the permission a publish to it needs) and it is not
 * internal (0-9-1 basic.publish refuses those, ACCESS_REFUSED: a replay
 * must not forge, say, the firehose's events in amq.rabbitmq.trace).
 * NULL otherwise, with what stands in the way in '*why'.
 */
static struct exchange *
publishable_exchange(struct replay *r, struct amqp_bytes name,
                     const char **why)
{
    struct vhost *vh = r->q->vh;
    struct exchange *x = name.len == 0 ? vh->default_x
                                       : vhost_exchange(vh, name);
    if (x == NULL) {
        *why = "is gone";
        return NULL;
    }
    const struct perm *p = perm_get(vh->name, r->pub.user);
    if (name.len == 0)
        name = amqp_cstr("amq.default");
    if (p == NULL || !perm_allows(p, PERM_WRITE, (const char *)name.ptr,
                                  name.len)) {
        *why = "may no longer be written to by the user";
        return NULL;
    }
    if (x->internal) {
        *why = is_internal;
        return NULL;
    }
    return x;
}

/* queue_move_fn: where a message goes. */
static struct exchange *
target(const struct msg *m, struct amqp_bytes *rkey, void *arg)
{
    struct replay *r = arg;
    struct deadletter_death d;
    bool died = deadletter_first_death(m, &d);
    struct amqp_bytes xn;

    if (r->pub.exchange)
        xn = amqp_cstr(r->pub.exchange);
    else if (died)
        xn = d.exchange;
    else
        return NULL;
    if (r->pub.rkey)
        *rkey = amqp_cstr(r->pub.rkey);
    else if (died && d.has_rkey)
        *rkey = d.rkey;
    else
        *rkey = (struct amqp_bytes){ (const uint8_t *)msg_rkey(m),
                                     msg_rkey_len(m) };
    const char *why;
    struct exchange *x = publishable_exchange(r, xn, &why);
    /* Left in place and counted as skipped. An internal target is worth
     * a line, once a replay (an x-death naming one was likely forged to
     * aim there); the others are routine. */
    if (x == NULL && why == is_internal && !r->said_internal) {
        char esc[300];
        r->said_internal = true;
        log_warnx("replay %s of queue '%s' in vhost '%s': skipping messages "
                  "whose target is the internal exchange '%s'", r->pub.id,
                  r->pub.queue, r->pub.vhost,
                  log_escape(esc, sizeof(esc), xn.ptr, xn.len));
    }
    return x;
}

static void
tick(evutil_socket_t fd, short what, void *arg)
{
    struct replay *r = arg;
    (void)fd;
    (void)what;

    if (r->pub.state != DLREPLAY_RUNNING)
        return;
    if (r->q->deleted) {
        set_state(r, DLREPLAY_CANCELLED, "the queue was deleted");
        return;
    }
    const char *why;
    if (r->pub.exchange && publishable_exchange(
            r, amqp_cstr(r->pub.exchange), &why) == NULL) {
        char text[400];
        snprintf(text, sizeof(text), "the exchange '%s' %s",
                 r->pub.exchange, why);
        set_state(r, DLREPLAY_FAILED, text);
        return;
    }
    for (int n = 0; r->pub.moved + r->pub.skipped < r->pub.total; n++) {
        if (n == MOVES_PER_TURN) {
            arm(r, 0);
            return;
        }
        if (r->pub.rate > 0) {
            /* The k-th move (from 0) is due at k / rate seconds. */
            int64_t due = r->started +
                          (int64_t)(r->pub.moved * 1000 / r->pub.rate);
            int64_t now = mono_ms();
            if (due > now) {
                arm(r, due - now);
                return;
            }
        }
        switch (queue_move_next(r->q, r->cur, target, r)) {
        case QUEUE_MOVED:
            r->pub.moved++;
            break;
        case QUEUE_PASSED:
            r->pub.skipped++;
            break;
        case QUEUE_READING:
            return;             /* cursor_ready goes on */
        case QUEUE_NOT_WRITTEN:
            arm(r, NOT_WRITTEN_RETRY_MS);
            return;
        case QUEUE_END:
            set_state(r, r->q->deleted ? DLREPLAY_CANCELLED : DLREPLAY_DONE,
                      r->q->deleted ? "the queue was deleted" : NULL);
            return;
        }
    }
    set_state(r, DLREPLAY_DONE, NULL);
}

static void
cursor_ready(void *arg)
{
    struct replay *r = arg;
    if (r->pub.state == DLREPLAY_RUNNING && !broker.shutting_down)
        arm(r, 0);
}

struct dlreplay *
dlreplay_start(struct queue *q, uint32_t rate, uint64_t count,
               const char *exchange, const char *rkey, const char *user,
               enum dlreplay_refusal *why)
{
    struct replay *o;

    *why = DLREPLAY_OK;
    if (nrunning >= DLREPLAY_RUNNING_MAX) {
        *why = DLREPLAY_TOO_MANY;
        return NULL;
    }
    TAILQ_FOREACH(o, &replays, link)
        if (o->q == q) {
            *why = DLREPLAY_QUEUE_BUSY;
            return NULL;
        }
    struct replay *r = xcalloc(1, sizeof(*r));
    uint8_t rnd[8];
    arc4random_buf(rnd, sizeof(rnd));
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(r->pub.id + 2 * i, 3, "%02x", rnd[i]);
    r->pub.vhost = xstrdup(q->vh->name);
    r->pub.queue = xstrdup(q->name);
    r->pub.user = xstrdup(user);
    r->pub.state = DLREPLAY_RUNNING;
    r->pub.total = count ? count : queue_ready_count(q);
    r->pub.rate = rate;
    r->pub.exchange = exchange ? xstrdup(exchange) : NULL;
    r->pub.rkey = rkey ? xstrdup(rkey) : NULL;
    r->q = queue_ref(q);
    r->cur = queue_cursor_new(q, cursor_ready, r);
    r->timer = evtimer_new(broker.base, tick, r);
    r->started = mono_ms();
    TAILQ_INSERT_TAIL(&replays, r, link);
    nrunning++;
    log_info("replay %s of queue '%s' in vhost '%s' started by '%s': %llu "
             "messages at %u/s to %s", r->pub.id, q->name, q->vh->name, user,
             (unsigned long long)r->pub.total, rate,
             exchange ? "a chosen exchange" : "their x-death exchanges");
    arm(r, 0);
    return &r->pub;
}

struct dlreplay *
dlreplay_find(const char *id)
{
    struct replay *r;
    TAILQ_FOREACH(r, &replays, link)
        if (strcmp(r->pub.id, id) == 0)
            return &r->pub;
    return NULL;
}

void
dlreplay_foreach(void (*fn)(struct dlreplay *d, void *arg), void *arg)
{
    struct replay *r;
    TAILQ_FOREACH(r, &replays, link)
        fn(&r->pub, arg);
}

void
dlreplay_cancel(struct dlreplay *d, const char *why)
{
    set_state((struct replay *)d, DLREPLAY_CANCELLED, why);
}

void
dlreplay_free_all(void)
{
    struct replay *r;
    while ((r = TAILQ_FIRST(&replays)) != NULL) {
        set_state(r, DLREPLAY_CANCELLED, "shutdown");
        TAILQ_REMOVE(&replays, r, link);
        replay_free(r);
    }
    nrunning = nfinished = 0;
}
