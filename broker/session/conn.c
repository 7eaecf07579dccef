/*
 * SPDX-License-Identifier: Apache-2.0
 * Connections: reading and splitting frames, routing them to channel 0 or
 * a channel, output and its watermarks, timers (handshake, heartbeat,
 * close), and teardown through the reaper.
 */
#include "broker/session/conn.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "amqp/frame.h"
#include "amqp/reply.h"
#include "base/transport.h"
#include "broker/core/broker.h"
#include "broker/core/hooks.h"
#include "broker/core/queue.h"
#include "broker/core/stats.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/session/channel.h"
#include "broker/session/machine.h"
#include "broker/session/methods.h"
#include "tls/tls.h"

/* Before tune-ok, frames may be at most this large (RabbitMQ: 8192). */
#define PRE_TUNE_FRAME_MAX 8192

/*
 * One read asks for between READ_MIN and READ_MAX bytes: twice as much
 * after a read that filled its space, half as much after one that filled
 * less than a quarter, so an idle connection holds a small buffer and a
 * busy one reads 64 KiB messages in one call.
 */
#define READ_MIN (16 * 1024)
#define READ_MAX (256 * 1024)
/* At most this much is written per call, so one connection cannot hold
 * the loop for long. */
#define WRITE_MAX (256 * 1024)

static TAILQ_HEAD(, conn) conns = TAILQ_HEAD_INITIALIZER(conns);
static TAILQ_HEAD(, conn) dead = TAILQ_HEAD_INITIALIZER(dead);
static size_t nconns;
static size_t nopen;        /* in CONN_OPEN or later, not yet released */
static uint64_t next_id = 1;
static struct event *reaper;

/* ---- the four machines (conn.h) and whether the connection reads ---- */

#define CONN_AS_NAME(s) #s,
static const char *const state_names[] = { CONN_STATES(CONN_AS_NAME) };
static const char *const pause_names[] = { CONN_PAUSES(CONN_AS_NAME) };
static const char *const hold_names[] = { CONN_HOLDS(CONN_AS_NAME) };
static const char *const output_names[] = { CONN_OUTPUTS(CONN_AS_NAME) };
#undef CONN_AS_NAME

#define TO(s) MACHINE_TO(s)
/* Every live state may end: flushed, then dropped, or dropped now. */
#define ENDS (TO(CONN_FLUSHING) | TO(CONN_RELEASED))

static const uint16_t state_next[] = {
    [CONN_AWAIT_HEADER] = TO(CONN_START_SENT) | ENDS,
    [CONN_START_SENT] = TO(CONN_TUNE_SENT) | TO(CONN_CLOSING) | ENDS,
    /* From tune on the client may close (LINGERING). */
    [CONN_TUNE_SENT] = TO(CONN_AWAIT_OPEN) | TO(CONN_CLOSING) |
                       TO(CONN_LINGERING) | ENDS,
    [CONN_AWAIT_OPEN] = TO(CONN_OPEN) | TO(CONN_CLOSING) |
                        TO(CONN_LINGERING) | ENDS,
    [CONN_OPEN] = TO(CONN_CLOSING) | TO(CONN_LINGERING) | ENDS,
    /* A close that crosses ours is answered: LINGERING. */
    [CONN_CLOSING] = TO(CONN_CLOSING_DEAF) | TO(CONN_LINGERING) | ENDS,
    [CONN_CLOSING_DEAF] = ENDS,
    [CONN_FLUSHING] = TO(CONN_RELEASED),
    [CONN_LINGERING] = TO(CONN_RELEASED),
    [CONN_RELEASED] = 0,
};

static const uint16_t pause_next[] = {
    [CONN_RUNNING] = TO(CONN_FLOW) | TO(CONN_BLOCKING) | TO(CONN_BLOCKED),
    /* An alarm takes over a flow control pause. */
    [CONN_FLOW] = TO(CONN_RUNNING) | TO(CONN_BLOCKING) | TO(CONN_BLOCKED),
    [CONN_BLOCKING] = TO(CONN_RUNNING),
    [CONN_BLOCKED] = TO(CONN_RUNNING),
};

static const uint16_t hold_next[] = {
    [CONN_HOLD_NONE] = TO(CONN_HOLD_STORE) | TO(CONN_HOLD_GET) |
                       TO(CONN_HOLD_CONTENT),
    [CONN_HOLD_STORE] = TO(CONN_HOLD_NONE),
    [CONN_HOLD_GET] = TO(CONN_HOLD_NONE),
    [CONN_HOLD_CONTENT] = TO(CONN_HOLD_NONE),
};

static const uint16_t output_next[] = {
    [CONN_OUTPUT_FLOWING] = TO(CONN_OUTPUT_CONGESTED) |
                            TO(CONN_OUTPUT_STALLED),
    [CONN_OUTPUT_CONGESTED] = TO(CONN_OUTPUT_FLOWING) |
                              TO(CONN_OUTPUT_STALLED),
    [CONN_OUTPUT_STALLED] = TO(CONN_OUTPUT_FLOWING),
};
#undef ENDS
#undef TO

static const struct machine life = { "state", state_names, state_next };
static const struct machine pauses = { "pause", pause_names, pause_next };
static const struct machine holds = { "hold", hold_names, hold_next };
static const struct machine outputs = { "output", output_names,
                                        output_next };

/* The connection's state name for logs. */
static const char *
conn_state_name(enum conn_state s)
{
    return state_names[s];
}

/* Every setter's check and trace. */
static void
conn_move(struct conn *c, const struct machine *m, unsigned from,
          unsigned to)
{
    if (!machine_allows(m, from, to))
        fatalx("conn=%016" PRIx64 ": %s %s -> %s is not a transition", c->id,
               m->name, m->states[from], m->states[to]);
    if (log_enabled(LOG_LVL_DEBUG))   /* no varargs call otherwise */
        conn_log(c, LOG_LVL_DEBUG, "%s %s -> %s", m->name, m->states[from],
                 m->states[to]);
}

/*
 * Whether 'c' reads its socket: the one place that decides. While
 * lingering, always (to discard); deaf, flushing or released, never;
 * otherwise unless its publishing is paused or its input held. (The
 * input itself is bounded by read_ready, which reads no more than
 * input_max; a full input is handled before more is read.)
 */
static bool
wants_input(const struct conn *c)
{
    if (c->state == CONN_LINGERING)
        return true;
    if (c->state >= CONN_CLOSING_DEAF)
        return false;
    return c->pause == CONN_RUNNING && c->hold == CONN_HOLD_NONE &&
           c->output != CONN_OUTPUT_STALLED;
}

/* Tell the transport when that changes; every setter calls it. */
static void
update_reading(struct conn *c)
{
    bool on = wants_input(c);

    if (on != c->reading) {
        c->reading = on;
        transport_want_read(c->tp, on);
    }
}

/* Whether frames already read are handled now. */
static bool
handles_input(const struct conn *c)
{
    return !conn_is_closed(c) && c->pause < CONN_BLOCKING &&
           c->hold == CONN_HOLD_NONE && c->output != CONN_OUTPUT_STALLED;
}

/* We sent connection.close: only its close-ok (or the deadline) ends
 * the connection. */
static bool
sent_close(const struct conn *c)
{
    return c->state == CONN_CLOSING || c->state == CONN_CLOSING_DEAF;
}

static void set_pause(struct conn *c, enum conn_pause next);

void
conn_set_state(struct conn *c, enum conn_state next)
{
    enum conn_state from = c->state;

    conn_move(c, &life, from, next);
    c->state = next;
    if (next == CONN_OPEN)
        nopen++;
    if (from == CONN_OPEN) {
        nopen--;
        /* Only an open connection's publishing is paused. */
        if (c->pause != CONN_RUNNING)
            set_pause(c, CONN_RUNNING);
    }
    update_reading(c);
}

static void
set_hold(struct conn *c, enum conn_hold next)
{
    conn_move(c, &holds, c->hold, next);
    c->hold = next;
    update_reading(c);
}

static void
set_output(struct conn *c, enum conn_output next)
{
    conn_move(c, &outputs, c->output, next);
    c->output = next;
    update_reading(c);
}

size_t
conn_count(void)
{
    return nconns;
}

/* Channel numbers below this index an array; the others a map. */
#define CHAN_LOW 256

static struct channel *
chan_get(const struct conn *c, uint16_t n)
{
    if (n < c->channels_cap)
        return c->channels[n];
    if (n < CHAN_LOW || c->high_channels.count == 0)
        return NULL;
    return hmap_get(&c->high_channels, &n, sizeof(n));
}

/* Put 'ch' at number 'n' (NULL: none). */
static void
chan_set(struct conn *c, uint16_t n, struct channel *ch)
{
    if (n >= CHAN_LOW) {
        if (ch)
            hmap_put(&c->high_channels, &n, sizeof(n), ch);
        else
            hmap_del(&c->high_channels, &n, sizeof(n));
        return;
    }
    if (n >= c->channels_cap) {
        if (ch == NULL)
            return;
        uint32_t cap = c->channels_cap ? c->channels_cap : 8;
        while (cap <= n)
            cap *= 2;
        c->channels = xrealloc(c->channels, cap * sizeof(*c->channels));
        memset(c->channels + c->channels_cap, 0,
               (cap - c->channels_cap) * sizeof(*c->channels));
        c->channels_cap = cap;
    }
    c->channels[n] = ch;
}

/* The open channels: start with *pos = 0; NULL at the end. The set must
 * not change meanwhile. */
static struct channel *
chan_next(const struct conn *c, size_t *pos)
{
    while (*pos < c->channels_cap) {
        struct channel *ch = c->channels[(*pos)++];
        if (ch)
            return ch;
    }
    size_t hpos = *pos - c->channels_cap;
    struct hmap_slot *sl = hmap_next(&c->high_channels, &hpos);
    *pos = c->channels_cap + hpos;
    return sl ? sl->val : NULL;
}

size_t
conn_open_count(void)
{
    return nopen;
}

void
conn_totals(const char *user, struct conn_totals *t)
{
    struct conn *c;

    memset(t, 0, sizeof(*t));
    TAILQ_FOREACH(c, &conns, link) {
        if (c->state != CONN_OPEN || c->direct ||
            (user != NULL && (c->user == NULL || strcmp(c->user, user) != 0)))
            continue;
        t->connections++;
        size_t pos = 0;
        const struct channel *ch;
        while ((ch = chan_next(c, &pos)) != NULL) {
            t->channels++;
            t->consumers += ch->consumers.count;
        }
    }
}

void
conn_foreach(void (*fn)(struct conn *c, void *arg), void *arg)
{
    struct conn *c;
    TAILQ_FOREACH(c, &conns, link)
        if (c->state != CONN_AWAIT_HEADER && !c->direct)
            fn(c, arg);
}

void
conn_foreach_channel(struct conn *c, void (*fn)(struct channel *ch, void *arg),
                     void *arg)
{
    size_t pos = 0;
    struct channel *ch;
    while ((ch = chan_next(c, &pos)) != NULL)
        fn(ch, arg);
}

void
conn_name(const struct conn *c, char *out, size_t len)
{
    snprintf(out, len, "%s -> %s", c->peer, c->local);
}

struct conn *
conn_by_name(const char *name)
{
    struct conn *c;
    char n[160];
    TAILQ_FOREACH(c, &conns, link) {
        conn_name(c, n, sizeof(n));
        if (strcmp(n, name) == 0)
            return c;
    }
    return NULL;
}

void
conn_close_forced(struct conn *c, const char *reason)
{
    char esc[256];
    log_info("conn=%016" PRIx64 " %s: closed by the management API: %s",
             c->id, c->peer, log_escape(esc, sizeof(esc), reason,
                                        strlen(reason)));
    if (c->state == CONN_OPEN)
        conn_fail(c, AMQP_CONNECTION_FORCED, 0, "%s", reason);
    else if (c->state != CONN_CLOSING)
        conn_close_now(c, false);
}

void
conn_info(const struct conn *c, struct conn_info *out)
{
    memset(out, 0, sizeof(*out));
    switch (c->state) {
    case CONN_AWAIT_HEADER:
    case CONN_START_SENT:
        out->state = "starting";
        break;
    case CONN_TUNE_SENT:
        out->state = "tuning";
        break;
    case CONN_AWAIT_OPEN:
        out->state = "opening";
        break;
    case CONN_OPEN: {
        static const char *const api_names[] = {
            [CONN_RUNNING] = "running", [CONN_FLOW] = "flow",
            [CONN_BLOCKING] = "blocking", [CONN_BLOCKED] = "blocked",
        };
        out->state = api_names[c->pause];
        break;
    }
    default:
        out->state = "closing";
        break;
    }
    out->channels = c->nchannels;
    out->tls = strcmp(c->tp->ops->name, "tls") == 0;
    out->tls_info = transport_tls_info(c->tp);
    out->send_pend = evbuffer_get_length(c->out);
    out->series = c->series;
}

static void
sample_channel(struct channel *ch, void *arg)
{
    (void)arg;
    stats_sample(&ch->series, ch->ms.n, MS_COUNT);
}

/* The stats tick (stats.c): every connection and channel. */
static void
conn_sample_all(void)
{
    struct conn *c;
    TAILQ_FOREACH(c, &conns, link) {
        uint64_t v[CS_COUNT] = { c->recv_oct, c->send_oct };
        stats_sample(&c->series, v, CS_COUNT);
        conn_foreach_channel(c, sample_channel, NULL);
    }
}

size_t
conn_open_in(const struct vhost *vh)
{
    size_t n = 0;
    struct conn *c;
    TAILQ_FOREACH(c, &conns, link)
        n += c->state == CONN_OPEN && c->vh == vh;
    return n;
}

struct evbuffer *
conn_output(struct conn *c)
{
    return c->out;
}

/*
 * Output is written once per loop turn: conn_output_added() queues the
 * connection, and flush_cb, activated at the same time, runs after every
 * callback that was ready in this turn, so all the deliveries a turn
 * makes for one connection leave in one writev.
 */
static TAILQ_HEAD(, conn) to_flush = TAILQ_HEAD_INITIALIZER(to_flush);
static struct event *flusher;

/* Publishers paused by flow control, and the timer that bounds a pause
 * when no consumer connection drains (one stuck peer must not stall
 * publishers until its heartbeat times out). */
static TAILQ_HEAD(, conn) flow_paused = TAILQ_HEAD_INITIALIZER(flow_paused);
static struct event *flow_timer;
#define FLOW_MAX_PAUSE_MS 250
static void flow_resume_all(void);

/* The pause's setter: a connection paused by flow control is on the
 * paused list, and the timer bounds its pause. */
static void
set_pause(struct conn *c, enum conn_pause next)
{
    struct timeval tv = { 0, FLOW_MAX_PAUSE_MS * 1000 };

    conn_move(c, &pauses, c->pause, next);
    if (c->pause == CONN_FLOW)
        TAILQ_REMOVE(&flow_paused, c, flow_link);
    if (next == CONN_FLOW) {
        TAILQ_INSERT_TAIL(&flow_paused, c, flow_link);
        if (!evtimer_pending(flow_timer, NULL))
            evtimer_add(flow_timer, &tv);
    }
    c->pause = next;
    update_reading(c);
}

/* An output reference to a lent body: what to release once written. */
struct lent {
    struct conn *c;
    struct inblock *b;          /* the block it lies in, or */
    struct msg *m;              /* the message whose body it is */
    size_t extra;               /* what it added to c->out_pinned */
};

static void
lent_done(const void *data, size_t len, void *arg)
{
    struct lent *l = arg;
    (void)data;
    l->c->out_pinned -= l->extra;
    l->c->out_shared -= len;
    if (l->b != NULL)
        inblock_unref(l->b);
    else
        msg_unref(l->m);
    free(l);
}

void
conn_output_lend(struct conn *c, const uint8_t *data, size_t len,
                 struct inblock *b, struct msg *m)
{
    struct lent *l = xmalloc(sizeof(*l));

    l->c = c;
    l->b = b != NULL ? inblock_ref(b) : NULL;
    l->m = b == NULL ? msg_ref(m) : NULL;
    l->extra = 0;
    /* The rest of a block is counted with the first of a run of
     * references to it; the output drains in order, so what this leaves
     * uncounted is never more than one block. */
    if (b != NULL) {
        l->extra = b != c->last_lent && b->cap > len ? b->cap - len : 0;
        c->last_lent = b;
    }
    c->out_pinned += l->extra;
    c->out_shared += len;
    if (evbuffer_add_reference(c->out, data, len, lent_done, l) != 0) {
        evbuffer_add(c->out, data, len);
        lent_done(data, len, l);
    }
}

/* Output bytes as the watermarks see them. */
static size_t
output_weight(const struct conn *c)
{
    return evbuffer_get_length(c->out) + c->out_pinned;
}

void
conn_output_added(struct conn *c)
{
    c->last_send_ms = now_ms();
    size_t weight = output_weight(c);
    if (c->output == CONN_OUTPUT_FLOWING &&
        weight > (size_t)broker.cfg.consumer_output_high_watermark) {
        set_output(c, CONN_OUTPUT_CONGESTED);
        /* A congested connection is never paused (conn_flow): it may be
         * a client that reads only between its writes. */
        if (c->pause == CONN_FLOW)
            set_pause(c, CONN_RUNNING);
    }
    if (c->output != CONN_OUTPUT_STALLED && weight > CONN_OUTPUT_HARD_MAX) {
        conn_log(c, LOG_LVL_INFO, "output of %zu bytes over %zu: not read "
                 "until it drains below %lld", weight, CONN_OUTPUT_HARD_MAX,
                 (long long)broker.cfg.consumer_output_low_watermark);
        set_output(c, CONN_OUTPUT_STALLED);
    }
    if (!c->flush_queued && c->state != CONN_RELEASED) {
        c->flush_queued = true;
        TAILQ_INSERT_TAIL(&to_flush, c, flush_link);
        event_active(flusher, EV_TIMEOUT, 0);
    }
}

void
conn_send_method(struct conn *c, uint16_t channel, const struct amqp_method *m)
{
    uint8_t stack[4096];
    struct wire_wr w;
    enum amqp_status st;

    if (conn_is_closed(c))
        return;
    wire_wr_init(&w, stack, sizeof(stack));
    st = method_frame_put(&w, channel, m);
    if (st == AMQP_E_OVERFLOW) {
        uint8_t *heap = xmalloc(w.len);
        wire_wr_init(&w, heap, w.len);
        st = method_frame_put(&w, channel, m);
        if (st == AMQP_OK)
            evbuffer_add(conn_output(c), heap, w.len);
        free(heap);
    } else if (st == AMQP_OK) {
        evbuffer_add(conn_output(c), stack, w.len);
    }
    if (st != AMQP_OK)
        fatalx("conn=%016" PRIx64 " cannot encode %s: %s", c->id,
               method_name(m->id), status_text(st));
    conn_output_added(c);
}

static void
close_channels(struct conn *c)
{
    for (uint32_t i = 0; i < c->channels_cap; i++) {
        if (c->channels[i]) {
            struct channel *ch = c->channels[i];
            c->channels[i] = NULL;
            channel_free(ch);
        }
    }
    size_t pos = 0;
    struct hmap_slot *sl;
    while ((sl = hmap_next(&c->high_channels, &pos)) != NULL)
        channel_free(sl->val);
    hmap_destroy(&c->high_channels);
    hmap_init(&c->high_channels);
    c->nchannels = 0;
}

static void
shutdown_channels(struct conn *c)
{
    size_t pos = 0;
    struct channel *ch;
    while ((ch = chan_next(c, &pos)) != NULL)
        channel_shutdown(ch);
}

static void
delete_exclusive_queues(struct conn *c)
{
    while (c->nexcl > 0) {
        struct queue *q = c->excl[c->nexcl - 1];
        c->nexcl--;
        q->owner = NULL;
        if (!q->deleted)
            queue_delete(q);
    }
}

void
conn_confirm_dirty(struct conn *c, uint16_t number)
{
    if (c->ndirty == c->dirty_cap) {
        c->dirty_cap = c->dirty_cap ? c->dirty_cap * 2 : 8;
        c->confirm_dirty = xrealloc(c->confirm_dirty,
                                    c->dirty_cap * sizeof(*c->confirm_dirty));
    }
    c->confirm_dirty[c->ndirty++] = number;
}

/* Confirms are batched per read: one basic.ack (multiple) per channel for
 * everything that became confirmable while the input was processed. */
static void
flush_confirms(struct conn *c)
{
    for (size_t i = 0; i < c->ndirty; i++) {
        struct channel *ch = chan_get(c, c->confirm_dirty[i]);
        if (ch)
            channel_flush_confirms(ch);
    }
    c->ndirty = 0;
}

void
conn_own_queue(struct conn *c, struct queue *q)
{
    if (c->nexcl == c->excl_cap) {
        c->excl_cap = c->excl_cap ? c->excl_cap * 2 : 4;
        c->excl = xrealloc(c->excl, c->excl_cap * sizeof(*c->excl));
    }
    c->excl[c->nexcl++] = q;
}

/* The end of 'c's exclusive ownership of 'q' (conn_own_queue). */
static void
conn_disown_queue(struct conn *c, struct queue *q)
{
    for (size_t i = 0; i < c->nexcl; i++)
        if (c->excl[i] == q) {
            c->excl[i] = c->excl[--c->nexcl];
            return;
        }
}

static void
reap_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    struct conn *c;
    while ((c = TAILQ_FIRST(&dead)) != NULL) {
        TAILQ_REMOVE(&dead, c, link);
        inbuf_release(&c->in);
        evbuffer_free(c->out);
        transport_free(c->tp);
        free(c->channels);
        hmap_destroy(&c->high_channels);
        free(c->excl);
        free(c->confirm_dirty);
        free(c->user);
        free(c->client_props);
        stats_series_free(&c->series);
        free(c);
    }
}

/*
 * Drop the socket: channels are closed (requeueing their unacked
 * messages) and exclusive queues deleted right away; the memory goes to
 * the reaper, since we may be inside one of this connection's callbacks.
 */
static void
conn_release(struct conn *c)
{
    if (c->state == CONN_RELEASED)
        return;
    store_unwait(&c->store_w);
    conn_set_state(c, CONN_RELEASED);
    if (c->hold != CONN_HOLD_NONE)
        set_hold(c, CONN_HOLD_NONE);
    close_channels(c);
    delete_exclusive_queues(c);
    transport_want_write(c->tp, false);
    /* Its consumers may be what paused others. */
    if (c->output == CONN_OUTPUT_CONGESTED)
        flow_resume_all();
    if (c->flush_queued) {
        TAILQ_REMOVE(&to_flush, c, flush_link);
        c->flush_queued = false;
    }
    if (c->timer) {
        event_free(c->timer);
        c->timer = NULL;
    }
    TAILQ_REMOVE(&conns, c, link);
    nconns--;
    if (!c->direct) {
        stats_churn.conns_closed++;
        stats_churn.conn_recv_gone += c->recv_oct;
        stats_churn.conn_send_gone += c->send_oct;
    }
    TAILQ_INSERT_TAIL(&dead, c, link);
    event_active(reaper, EV_TIMEOUT, 0);
}

static void timer_every(struct conn *c, unsigned ms);

/* Drop the connection at 'close_timeout' from now at the latest. */
static void
set_close_deadline(struct conn *c)
{
    uint64_t at = now_ms() + (uint64_t)broker.cfg.close_timeout_ms;
    if (c->deadline_ms == 0 || at < c->deadline_ms)
        c->deadline_ms = at;
    timer_every(c, 100);
}

void
conn_close_now(struct conn *c, bool flush)
{
    if (c->state == CONN_RELEASED)
        return;
    if (flush && evbuffer_get_length(conn_output(c)) > 0) {
        /* The write callback releases the connection once the output is
         * empty; the close timer drops it if the peer stops reading. */
        conn_set_state(c, CONN_FLUSHING);
        shutdown_channels(c);
        set_close_deadline(c);
        return;
    }
    conn_release(c);
}

void
conn_linger(struct conn *c)
{
    if (c->state == CONN_RELEASED)
        return;
    conn_set_state(c, CONN_LINGERING);
    shutdown_channels(c);
    set_close_deadline(c);
}

static void
send_close(struct conn *c, uint16_t code, uint32_t method_id, const char *text)
{
    struct amqp_method m = { .id = AMQP_CONNECTION_CLOSE };
    m.a.connection_close.reply_code = code;
    m.a.connection_close.reply_text = amqp_cstr(text);
    m.a.connection_close.class_id = method_class(method_id);
    m.a.connection_close.method_id = method_index(method_id);
    conn_send_method(c, 0, &m);
}

void
reply_format(char *out, size_t outlen, uint16_t code, const char *fmt,
             va_list ap)
{
    char text[1024];
    const char *name = reply_name(code);
    int n = snprintf(text, sizeof(text), "%s - ", name ? name : "ERROR");
    if (n < 0 || (size_t)n >= sizeof(text))
        n = 0;
    vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
    if (strlen(text) > 255)
        memcpy(text + 252, "...", 4);
    snprintf(out, outlen, "%s", text);
}

void
conn_fail(struct conn *c, uint16_t code, uint32_t method_id, const char *fmt,
          ...)
{
    char text[256];
    va_list ap;

    if (conn_is_closing(c))
        return;
    va_start(ap, fmt);
    reply_format(text, sizeof(text), code, fmt, ap);
    va_end(ap);
    conn_log(c, LOG_LVL_WARN, "closing connection: %s", text);
    send_close(c, code, method_id, text);
    /* The close-ok must be read, also from a connection that flow control
     * or an alarm stopped reading: leaving CONN_OPEN ends the pause. */
    conn_set_state(c, CONN_CLOSING);
    shutdown_channels(c);
    set_close_deadline(c);
}

void
conn_fail_decode(struct conn *c, const struct frame *f, enum amqp_status st)
{
    /* As RabbitMQ: the close names the method whose arguments did not
     * decode; for a name that is not UTF-8 it names none, except on
     * channel 0. */
    uint32_t id = f->size >= 4 ? AMQP_METHOD_ID(wire_load16(f->payload),
                                                wire_load16(f->payload + 2))
                               : 0;
    if (st == AMQP_E_UTF8)
        conn_fail(c, status_reply_code(st), f->channel == 0 ? id : 0, "%s",
                  status_text(st));
    else
        conn_fail(c, status_reply_code(st), id,
                  "cannot decode method frame: %s", status_text(st));
}

/* Close the connections on 'vh', or of 'user' (both NULL: all). */
static void
close_where(const struct vhost *vh, const char *user, const char *reason)
{
    struct conn *c, *next;
    for (c = TAILQ_FIRST(&conns); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if ((vh != NULL && c->vh != vh) ||
            (user != NULL && (c->user == NULL || strcmp(c->user, user) != 0)))
            continue;
        if (c->state == CONN_OPEN) {
            conn_fail(c, AMQP_CONNECTION_FORCED, 0, "%s", reason);
            /* Only its close-ok is awaited now: nothing uses the vhost. */
            if (vh != NULL)
                c->vh = NULL;
        } else if (!sent_close(c)) {
            conn_close_now(c, false);
        } else if (vh != NULL) {
            c->vh = NULL;
        }
    }
}

void
conn_close_all(const char *reason)
{
    close_where(NULL, NULL, reason);
}

/* Close (320 CONNECTION_FORCED, 'reason') the connections open on 'vh',
 * and let go of it: their channels are shut at once. */
static void
conn_close_vhost(struct vhost *vh, const char *reason)
{
    close_where(vh, NULL, reason);
}

/* The same for the connections of 'user' (it was deleted). */
static void
conn_close_user(const char *user, const char *reason)
{
    close_where(NULL, user, reason);
}

void
conn_block(struct conn *c, const char *reason)
{
    if (c->pause >= CONN_BLOCKING || c->state != CONN_OPEN)
        return;
    set_pause(c, c->cap_connection_blocked ? CONN_BLOCKED : CONN_BLOCKING);
    conn_log(c, LOG_LVL_INFO, "blocked (%s)", reason);
    if (c->pause == CONN_BLOCKED) {
        struct amqp_method m = { .id = AMQP_CONNECTION_BLOCKED };
        m.a.connection_blocked.reason = amqp_cstr(reason);
        conn_send_method(c, 0, &m);
    }
}

static void process_input(struct conn *c);
static void write_now(struct conn *c);

static void
hold_durable(struct store_waiter *w)
{
    struct conn *c = (struct conn *)((char *)w -
                                      offsetof(struct conn, store_w));

    if (c->state == CONN_RELEASED)
        return;
    set_hold(c, CONN_HOLD_NONE);
    /* A connection closed meanwhile still flushes its last replies. */
    write_now(c);
    if (conn_is_closed(c))
        return;
    process_input(c);
}

void
conn_hold_for_store(struct conn *c)
{
    if (c->hold == CONN_HOLD_STORE || conn_is_closed(c))
        return;
    set_hold(c, CONN_HOLD_STORE);
    c->store_w.durable = hold_durable;
    store_wait(&c->store_w, store_open_batch());
}

void
conn_hold_input(struct conn *c)
{
    /* Held already when a basic.get waits again for its queue's head. */
    if (c->hold != CONN_HOLD_GET)
        set_hold(c, CONN_HOLD_GET);
}

void
conn_content_grew(struct conn *c, int64_t delta)
{
    c->unfinished += (uint64_t)delta;
    if (c->unfinished > CONN_UNFINISHED_MAX && c->hold == CONN_HOLD_NONE &&
        !conn_is_closed(c)) {
        conn_log(c, LOG_LVL_WARN, "unfinished contents hold %" PRIu64
                 " bytes, over %" PRIu64 " (twice max_message_size): not "
                 "read until they are published", c->unfinished,
                 CONN_UNFINISHED_MAX);
        set_hold(c, CONN_HOLD_CONTENT);
    } else if (c->unfinished <= CONN_UNFINISHED_MAX &&
               c->hold == CONN_HOLD_CONTENT) {
        /* Only a channel dropped while the connection is held gets here
         * (no frame is handled meanwhile): reading again is enough. */
        set_hold(c, CONN_HOLD_NONE);
    }
}

void
conn_release_input(struct conn *c)
{
    if (c->hold != CONN_HOLD_GET)
        return;
    set_hold(c, CONN_HOLD_NONE);
    if (conn_is_closed(c))
        return;
    process_input(c);
}

/* Every alarm cleared: read blocked connections again and send
 * connection.unblocked. */
static void
conn_unblock_all(void)
{
    struct conn *c, *next;
    for (c = TAILQ_FIRST(&conns); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->pause < CONN_BLOCKING)
            continue;
        bool told = c->pause == CONN_BLOCKED;
        c->last_recv_ms = now_ms();
        set_pause(c, CONN_RUNNING);
        if (told) {
            struct amqp_method m = { .id = AMQP_CONNECTION_UNBLOCKED };
            conn_send_method(c, 0, &m);
        }
        conn_log(c, LOG_LVL_INFO, "unblocked");
        /* Frames that arrived before the block are already buffered. */
        process_input(c);
    }
}

/* Bytes in every connection's output (inbuf_bytes_in_use() counts the
 * input). */
static uint64_t
conn_buffer_bytes(void)
{
    uint64_t n = 0;
    struct conn *c;
    TAILQ_FOREACH(c, &conns, link)
        n += evbuffer_get_length(c->out) - c->out_shared;
    return n;
}

/* Call 'fn' for every delivery any channel holds unacked (the store's
 * compaction finds the live entries that way). */
static void
conn_foreach_unacked(void (*fn)(struct queue *q, struct qentry *e, void *arg),
                     void *arg)
{
    struct conn *c;
    TAILQ_FOREACH(c, &conns, link) {
        size_t pos = 0;
        struct channel *ch;
        while ((ch = chan_next(c, &pos)) != NULL)
            channel_foreach_unacked(ch, fn, arg);
    }
}

/* ---- the core's hooks (broker/core/hooks.h) ---- */

static uint64_t
hook_count(void)
{
    return conn_count();
}

static void
add_channel(struct channel *ch, void *arg)
{
    msg_stats_add(arg, &ch->ms);
}

static void
add_conn(struct conn *c, void *arg)
{
    conn_foreach_channel(c, add_channel, arg);
}

static void
hook_add_channel_stats(struct msg_stats *out)
{
    conn_foreach(add_conn, out);
}

void
conn_install_hooks(void)
{
    session_hooks = (struct session_hooks){
        .close_vhost = conn_close_vhost,
        .close_user = conn_close_user,
        .disown_queue = conn_disown_queue,
        .unblock_publishers = conn_unblock_all,
        .buffer_bytes = conn_buffer_bytes,
        .count = hook_count,
        .sample_all = conn_sample_all,
        .add_channel_stats = hook_add_channel_stats,
        .foreach_unacked = conn_foreach_unacked,
    };
}

void
conn_free_all(void)
{
    struct conn *c;
    while ((c = TAILQ_FIRST(&conns)) != NULL)
        conn_release(c);
    reap_cb(-1, 0, NULL);
    if (reaper) {
        event_free(reaper);
        event_free(flusher);
        event_free(flow_timer);
        reaper = flusher = flow_timer = NULL;
    }
}

void
conn_channel_closed(struct conn *c, uint16_t number)
{
    if (chan_get(c, number)) {
        chan_set(c, number, NULL);
        c->nchannels--;
    }
}

/* A frame on a channel other than 0 while the connection is open. */
static void
channel_frame_in(struct conn *c, const struct frame *f)
{
    struct channel *ch = chan_get(c, f->channel);
    struct amqp_method m;

    if (ch) {
        channel_frame(ch, f);
        return;
    }
    if (f->type != AMQP_FRAME_METHOD) {
        conn_fail(c, AMQP_UNEXPECTED_FRAME, 0,
                  "expected method frame, got non method frame instead");
        return;
    }
    enum amqp_status st = method_decode(f->payload, f->size, &m);
    if (st != AMQP_OK) {
        conn_fail_decode(c, f, st);
        return;
    }
    if (m.id != AMQP_CHANNEL_OPEN) {
        conn_fail(c, AMQP_CHANNEL_ERROR, m.id, "expected 'channel.open'");
        return;
    }
    /* As RabbitMQ: channel_max bounds how many channels are open, not
     * their numbers (channel 65535 opens with channel_max 2). */
    if (c->nchannels >= c->channel_max) {
        conn_fail(c, AMQP_NOT_ALLOWED, 0,
                  "number of channels opened (%u) has reached the "
                  "negotiated channel_max (%u)", c->nchannels,
                  c->channel_max);
        return;
    }
    chan_set(c, f->channel, channel_new(c, f->channel));
    c->nchannels++;
    struct amqp_method ok = { .id = AMQP_CHANNEL_OPEN_OK };
    conn_send_method(c, f->channel, &ok);
}

/* While closing, only close-ok (or a crossing close) matters. */
static void
closing_frame_in(struct conn *c, const struct frame *f)
{
    struct amqp_method m;

    if (f->channel != 0 || f->type != AMQP_FRAME_METHOD ||
        method_decode(f->payload, f->size, &m) != AMQP_OK)
        return;
    if (m.id == AMQP_CONNECTION_CLOSE_OK) {
        conn_close_now(c, true);
    } else if (m.id == AMQP_CONNECTION_CLOSE) {
        struct amqp_method ok = { .id = AMQP_CONNECTION_CLOSE_OK };
        conn_send_method(c, 0, &ok);
        conn_linger(c);
    }
}

static void
frame_in(struct conn *c, const struct frame *f)
{
    struct amqp_method m;

    if (sent_close(c)) {
        closing_frame_in(c, f);
        return;
    }
    if (f->type == AMQP_FRAME_HEARTBEAT)
        return;
    if (f->channel != 0) {
        if (c->state != CONN_OPEN)
            conn_fail(c, AMQP_UNEXPECTED_FRAME, 0,
                      "frame on channel %u before connection.open",
                      f->channel);
        else
            channel_frame_in(c, f);
        return;
    }
    if (f->type != AMQP_FRAME_METHOD) {
        conn_fail(c, AMQP_UNEXPECTED_FRAME, 0,
                  "expected method frame, got non method frame instead");
        return;
    }
    enum amqp_status st = method_decode(f->payload, f->size, &m);
    if (st != AMQP_OK) {
        conn_fail_decode(c, f, st);
        return;
    }
    methods_conn(c, &m);
}

static bool
read_protocol_header(struct conn *c, struct inbuf *in)
{
    size_t len = inbuf_len(in) < 8 ? inbuf_len(in) : 8;
    const uint8_t *p = len ? inbuf_data(in) : NULL;
    enum amqp_status st = protocol_header_check(p, len);

    if (st == AMQP_INCOMPLETE)
        return false;
    if (st != AMQP_OK) {
        char esc[64];
        conn_log(c, LOG_LVL_WARN, "bad protocol header \"%s\" (%s); "
                 "answering with 0-9-1's and closing",
                 log_escape(esc, sizeof(esc), p, len), status_text(st));
        /* 0-9-1 §4.2.2: answer with the header we accept, then close. */
        evbuffer_add(conn_output(c), amqp_protocol_header,
                     AMQP_PROTOCOL_HEADER_LEN);
        conn_output_added(c);
        conn_close_now(c, true);
        return false;
    }
    inbuf_drain(in, 8);
    conn_set_state(c, CONN_START_SENT);
    conn_send_start(c);
    return true;
}

/*
 * Split and handle every whole frame in the input. Frames are decoded in
 * place: the input is contiguous (inbuf.h), and a large body is lent to
 * its message from there.
 */
static void
process_input(struct conn *c)
{
    struct inbuf *in = &c->in;
    struct frame f;

    c->last_recv_ms = loop_ms = now_ms();
    if (c->state == CONN_AWAIT_HEADER && !read_protocol_header(c, in))
        return;
    while (handles_input(c)) {
        size_t len = inbuf_len(in);
        if (len < AMQP_FRAME_HEADER_LEN)
            break;
        /* RabbitMQ accepts payloads of up to frame_max bytes, eight more
         * than 0-9-1 allows; clients that are off by eight work with it,
         * so they must work with us. */
        uint32_t frame_max = (c->state < CONN_AWAIT_OPEN ? PRE_TUNE_FRAME_MAX
                                                         : c->frame_max) +
                             AMQP_FRAME_OVERHEAD;
        const uint8_t *p = inbuf_data(in);
        enum amqp_status st = frame_decode(p, len, frame_max, &f);
        if (st == AMQP_INCOMPLETE)
            break;
        if (st != AMQP_OK) {
            /* Closing already: what is queued (the connection.close and
             * the replies before it) still goes out, then the socket. */
            if (sent_close(c)) {
                conn_close_now(c, true);
                break;
            }
            conn_fail(c, status_reply_code(st), 0,
                      "%s (frame type %u, channel %u, size %u)",
                      status_text(st), p[0], wire_load16(p + 1),
                      frame_peek_size(p));
            /* The stream cannot be split any further: stop reading and
             * drop the socket at the close timeout. */
            conn_set_state(c, CONN_CLOSING_DEAF);
            inbuf_drain(in, len);
            break;
        }
        frame_in(c, &f);
        inbuf_drain(in, f.wire_len);
    }
    if (conn_is_closed(c))
        inbuf_drain(in, inbuf_len(in));
    else
        flush_confirms(c);
    /* An emptied input holds no memory (inbuf.h). */
    inbuf_trim(in);
}

bool
conn_is_draining_slowly(const struct conn *c)
{
    return c->output == CONN_OUTPUT_CONGESTED &&
           now_ms() - c->wrote_ms < CONN_STUCK_MS;
}

void
conn_flow(struct conn *c)
{
    if (c->pause != CONN_RUNNING || c->output == CONN_OUTPUT_CONGESTED ||
        c->state != CONN_OPEN)
        return;
    set_pause(c, CONN_FLOW);
}

/* Read every paused publisher again; each pauses anew if it publishes to
 * a queue that is still backed up. */
static void
flow_resume_all(void)
{
    struct conn *c;

    while ((c = TAILQ_FIRST(&flow_paused)) != NULL) {
        c->last_recv_ms = now_ms();
        set_pause(c, CONN_RUNNING);
    }
    evtimer_del(flow_timer);
}

static void
flow_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    flow_resume_all();
}

static void socket_gone(struct conn *c, bool eof);

/*
 * The socket is readable. conn.c does its own reading and writing rather
 * than use a bufferevent: libevent 2.1 reads at most 4 KiB per call
 * whatever bufferevent_set_max_single_read says (EVBUFFER_MAX_READ),
 * three system calls per 4 KiB, and writes only on the next loop turn.
 */
static void
read_ready(void *arg)
{
    struct conn *c = arg;
    struct inbuf *in = &c->in;
    size_t held = inbuf_len(in), want = c->read_size;
    uint8_t *space;
    ssize_t n;

    /* The input holds at most two whole frames (conn_tuned). A full one
     * is handled before anything more is read: that can happen when
     * reading resumes for a connection that was blocked (conn_fail). A
     * connection reads only while it handles its input (wants_input), so
     * this empties it. */
    if (held >= c->input_max) {
        process_input(c);
        return;
    }
    if (want > c->input_max - held)
        want = c->input_max - held;
    /* A new block gets room for two reads, so a busy connection whose
     * messages hold the block copies a cut-short frame every other read
     * at most; and for the whole of a frame cut short, so a large frame
     * is copied once, not at every read. (process_input has already
     * refused a frame over frame_max, so it is under input_max.) */
    size_t hint = 2 * c->read_size;
    if (c->state != CONN_AWAIT_HEADER && held >= AMQP_FRAME_HEADER_LEN) {
        size_t frame = (size_t)frame_peek_size(inbuf_data(in)) +
                       AMQP_FRAME_OVERHEAD;
        if (frame <= c->input_max && frame + want > hint)
            hint = frame + want;
    }
    space = inbuf_space(in, want, hint);
    if (space == NULL) {
        conn_log(c, LOG_LVL_WARN, "no memory for input; dropping");
        conn_release(c);
        return;
    }
    /* Read no more than 'want', so that input_max is a hard bound. */
    n = transport_read(c->tp, space, want);
    if (n <= 0) {
        /* A read that brought nothing gives back the block it may have
         * taken: 10,000 peers that hang up at once then share one spare
         * block rather than allocate 10,000 until the reaper runs. */
        inbuf_trim(in);
        if (n != TRANSPORT_AGAIN)
            socket_gone(c, n == TRANSPORT_EOF);
        return;
    }
    inbuf_commit(in, (size_t)n);
    c->recv_oct += (uint64_t)n;
    c->recv_cnt++;
    /* Adapt only when the read asked for read_size: a read cut short by
     * input_max says nothing about the peer. */
    if (want == c->read_size) {
        if ((size_t)n == want && c->read_size < READ_MAX)
            c->read_size *= 2;
        else if ((size_t)n < c->read_size / 4 && c->read_size > READ_MIN)
            c->read_size /= 2;
    }
    process_input(c);
}

/*
 * Write what the output holds, up to WRITE_MAX bytes; wait for the socket
 * to be writable if some is left. Then: a closed connection whose output
 * is gone is released, and a congested one that drained below the low
 * watermark gets deliveries again.
 */
static void
write_now(struct conn *c)
{
    ssize_t n;
    size_t len;

    if (c->hold == CONN_HOLD_STORE) {
        transport_want_write(c->tp, false);
        return;
    }
    n = transport_write(c->tp, c->out, WRITE_MAX);
    if (n == TRANSPORT_ERROR) {
        socket_gone(c, false);
        return;
    }
    if (n > 0) {
        c->wrote_ms = now_ms();
        c->send_oct += (uint64_t)n;
        c->send_cnt++;
    }
    len = evbuffer_get_length(c->out);
    transport_want_write(c->tp, len > 0);
    if (conn_is_closed(c)) {
        if (len == 0 && c->state == CONN_FLUSHING)
            conn_release(c);
        return;
    }
    if (c->output != CONN_OUTPUT_FLOWING &&
        output_weight(c) <= (size_t)broker.cfg.consumer_output_low_watermark) {
        bool stalled = c->output == CONN_OUTPUT_STALLED;
        set_output(c, CONN_OUTPUT_FLOWING);
        /* What was read before it stalled is handled now. */
        if (stalled)
            process_input(c);
        size_t pos = 0;
        struct channel *ch;
        while (c->output == CONN_OUTPUT_FLOWING &&
               (ch = chan_next(c, &pos)) != NULL)
            channel_resume(ch);
        flow_resume_all();
    }
}

static void
write_ready(void *arg)
{
    write_now(arg);
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c;
    (void)fd;
    (void)what;
    (void)arg;

    while ((c = TAILQ_FIRST(&to_flush)) != NULL) {
        TAILQ_REMOVE(&to_flush, c, flush_link);
        c->flush_queued = false;
        /* Waiting for writability already: the socket is full. */
        if (!transport_write_waiting(c->tp))
            write_now(c);
    }
}

/* The peer closed the socket (eof), reset it, or it failed (errno). */
static void
socket_gone(struct conn *c, bool eof)
{
    /* A reset is a peer going away, as a plain close is. */
    if (!eof && (errno == ECONNRESET || errno == EPIPE))
        eof = true;
    if (eof) {
        if (c->state == CONN_OPEN)
            conn_log(c, LOG_LVL_WARN, "client closed the socket without "
                     "connection.close");
        else
            conn_log(c, LOG_LVL_DEBUG, "socket closed in %s",
                     conn_state_name(c->state));
    } else if (transport_error(c->tp) != NULL) {
        conn_log(c, LOG_LVL_WARN, "%s", transport_error(c->tp));
    } else {
        conn_log(c, LOG_LVL_WARN, "socket error: %s", strerror(errno));
    }
    conn_release(c);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    uint64_t now = now_ms();
    (void)fd;
    (void)what;

    if (c->deadline_ms && now < c->deadline_ms &&
        c->deadline_ms - now < c->tick_ms) {
        /* A tick a little early: the next one comes at the deadline. */
        uint64_t left = c->deadline_ms - now;
        struct timeval tv = { (time_t)(left / 1000),
                              (suseconds_t)(left % 1000) * 1000 };
        event_add(c->timer, &tv);
        return;
    }
    if (c->deadline_ms && now >= c->deadline_ms) {
        if (c->state < CONN_OPEN)
            conn_log(c, LOG_LVL_WARN, "handshake not finished within %d ms "
                     "(%s); dropping", broker.cfg.handshake_timeout_ms,
                     conn_state_name(c->state));
        else
            conn_log(c, LOG_LVL_INFO, "no close-ok within %d ms; dropping",
                     broker.cfg.close_timeout_ms);
        conn_release(c);
        return;
    }
    if (c->state != CONN_OPEN || c->heartbeat == 0)
        return;
    uint64_t hb = (uint64_t)c->heartbeat * 1000;
    /* A connection we stopped reading cannot be blamed for silence; any
     * other is dropped after two intervals without a byte from it, about
     * when RabbitMQ's receiver gives up. */
    if (c->pause == CONN_RUNNING && c->output != CONN_OUTPUT_STALLED &&
        now - c->last_recv_ms > 2 * hb) {
        conn_log(c, LOG_LVL_WARN, "missed heartbeats from client, timeout: "
                 "%us", c->heartbeat);
        conn_release(c);
        return;
    }
    /* As RabbitMQ: a heartbeat at every half interval in which nothing
     * else went out. A tick may come a little early, so half a tick of
     * slack keeps it from skipping a beat. */
    if (now - c->last_send_ms + c->tick_ms / 2 >= hb / 2) {
        uint8_t buf[8];
        struct wire_wr w;
        wire_wr_init(&w, buf, sizeof(buf));
        frame_put_heartbeat(&w);
        evbuffer_add(conn_output(c), buf, w.len);
        conn_output_added(c);
    }
}

static void
timer_every(struct conn *c, unsigned ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    c->tick_ms = ms;
    event_del(c->timer);
    event_add(c->timer, &tv);
}

void
conn_tuned(struct conn *c)
{
    /* Let the input hold two whole frames before reading stops. */
    size_t high = (size_t)c->frame_max * 2 + 4096;
    if (high < READ_MAX)
        high = READ_MAX;
    c->input_max = high;
}

void
conn_opened(struct conn *c)
{
    c->deadline_ms = 0;
    if (c->heartbeat) {
        /* Tick at half the interval (RabbitMQ sends at half the interval
         * too), at least every 5 s so the silence check stays close. */
        unsigned period = c->heartbeat * 1000u / 2;
        timer_every(c, period > 5000 ? 5000 : period);
    } else {
        event_del(c->timer);
    }
}

static bool
is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 =
            (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return true;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            return in6->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

static void
format_peer(char *out, size_t outlen, const struct sockaddr *sa)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        snprintf(out, outlen, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 =
            (const struct sockaddr_in6 *)(const void *)sa;
        port = ntohs(in6->sin6_port);
        /* A dual-stack listener's IPv4 peer, as RabbitMQ names it. */
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host,
                      sizeof(host));
            snprintf(out, outlen, "%s:%u", host, port);
            return;
        }
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(out, outlen, "[%s]:%u", host, port);
    } else {
        snprintf(out, outlen, "unknown");
    }
}

void
conn_log(struct conn *c, enum log_level level, const char *fmt, ...)
{
    struct log_ids ids;
    va_list ap;

    /* Nothing to do (no name to make) for a level that is off. */
    if (!log_enabled(level))
        return;
    char name[160];
    conn_log_ids(c, &ids, name, sizeof(name));
    va_start(ap, fmt);
    log_eventv(level, &ids, fmt, ap);
    va_end(ap);
}

void
conn_log_ids(struct conn *c, struct log_ids *ids, char *name, size_t len)
{
    memset(ids, 0, sizeof(*ids));
    ids->conn = c->id;
    ids->peer = c->peer;
    conn_name(c, name, len);
    ids->connection = name;
    ids->user = c->user;
    ids->vhost = c->vh ? c->vh->name : NULL;
}

void
conn_accept(int fd, const struct sockaddr *sa, int salen, struct tls_ctx *tls)
{
    struct conn *c;
    int one = 1;
    (void)salen;

    if (reaper == NULL) {
        reaper = event_new(broker.base, -1, 0, reap_cb, NULL);
        flusher = event_new(broker.base, -1, 0, flush_cb, NULL);
        flow_timer = evtimer_new(broker.base, flow_timer_cb, NULL);
    }
    /* Sockets still in the handshake count too, with some slack, so that
     * a flood of half-open connections cannot exhaust descriptors. */
    if (nconns >= (size_t)broker.cfg.connection_max + CONN_HANDSHAKE_SLACK) {
        static uint64_t last_log;
        if (now_ms() - last_log > 10000) {
            log_warnx("connection_max (%lld) reached: refusing new sockets",
                      (long long)broker.cfg.connection_max);
            last_log = now_ms();
        }
        close(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c = xcalloc(1, sizeof(*c));
    c->id = next_id++;
    c->state = CONN_AWAIT_HEADER;
    format_peer(c->peer, sizeof(c->peer), sa);
    c->peer_is_loopback = is_loopback(sa);
    struct sockaddr_storage here;
    socklen_t herelen = sizeof(here);
    if (getsockname(fd, (struct sockaddr *)&here, &herelen) == 0)
        format_peer(c->local, sizeof(c->local), (struct sockaddr *)&here);
    c->connected_at = wall_ms();
    c->frame_max = PRE_TUNE_FRAME_MAX;
    c->channel_max = (uint16_t)broker.cfg.channel_max;
    /* non-blocking: evconnlistener made it so */
    c->tp = tls ? tls_transport_new(tls, broker.base, fd, read_ready,
                                    write_ready, c)
                : transport_tcp_new(broker.base, fd, read_ready, write_ready,
                                    c);
    c->out = evbuffer_new();
    if (c->tp == NULL || c->out == NULL) {
        log_warnx("out of memory for the connection from %s", c->peer);
        if (c->out)
            evbuffer_free(c->out);
        if (c->tp)
            transport_free(c->tp);
        else
            close(fd);
        free(c);
        return;
    }
    c->read_size = READ_MIN;
    c->input_max = 64 * 1024;
    update_reading(c);
    c->last_recv_ms = c->last_send_ms = c->wrote_ms = now_ms();
    c->deadline_ms = c->last_recv_ms + (uint64_t)broker.cfg.handshake_timeout_ms;
    c->timer = event_new(broker.base, -1, EV_PERSIST, timer_cb, c);
    /* Until it is open a connection's timer has nothing to do but drop
     * it at the deadline: one tick then, not four a second (10,000
     * sockets in the handshake would cost 40,000 callbacks a second). */
    timer_every(c, (unsigned)broker.cfg.handshake_timeout_ms);
    TAILQ_INSERT_TAIL(&conns, c, link);
    nconns++;
    stats_churn.conns_opened++;
    conn_log(c, LOG_LVL_DEBUG, "accepted from %s", c->peer);
}

struct conn *
conn_direct_new(struct transport *tp, const char *user, struct vhost *vh)
{
    struct conn *c = xcalloc(1, sizeof(*c));

    if (reaper == NULL) {
        reaper = event_new(broker.base, -1, 0, reap_cb, NULL);
        flusher = event_new(broker.base, -1, 0, flush_cb, NULL);
        flow_timer = evtimer_new(broker.base, flow_timer_cb, NULL);
    }
    c->id = next_id++;
    c->direct = true;
    c->state = CONN_AWAIT_OPEN;
    snprintf(c->peer, sizeof(c->peer), "management API");
    snprintf(c->local, sizeof(c->local), "direct");
    c->peer_is_loopback = true;
    c->connected_at = wall_ms();
    c->frame_max = CONN_DIRECT_FRAME_MAX;
    c->channel_max = 1;
    c->tp = tp;
    tp->on_read = read_ready;
    tp->on_write = write_ready;
    tp->arg = c;
    c->out = evbuffer_new();
    c->user = xstrdup(user);
    c->vh = vh;
    c->read_size = READ_MIN;
    conn_tuned(c);
    c->last_recv_ms = c->last_send_ms = c->wrote_ms = now_ms();
    c->timer = event_new(broker.base, -1, EV_PERSIST, timer_cb, c);
    TAILQ_INSERT_TAIL(&conns, c, link);
    nconns++;
    conn_set_state(c, CONN_OPEN);
    return c;
}

void
conn_direct_input(struct conn *c, const void *data, size_t len)
{
    if (conn_is_closed(c))
        return;
    memcpy(inbuf_space(&c->in, len, len), data, len);
    inbuf_commit(&c->in, len);
    process_input(c);
}

