/*
 * SPDX-License-Identifier: Apache-2.0
 * The management API's AMQP session (mgmt_amqp.h): a direct connection
 * behind a transport of its own, whose write takes the broker's output
 * into 'got', where it is split into frames (amqp/frame.h) and decoded.
 */
#include "broker/mgmt/mgmt_amqp.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "amqp/frame.h"
#include "amqp/wire.h"
#include "base/transport.h"
#include "broker/core/broker.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/session/conn.h"

/* The transport the direct connection writes to; the connection owns
 * and frees it, the session may be gone by then ('s' NULL). */
struct direct_tp {
    struct transport t;
    struct mgmt_amqp *s;
    /* the output is written WRITE_MAX at a time: more to write calls the
     * connection's write callback again from the loop */
    struct event *wev;
    bool write_armed;
};

struct mgmt_amqp {
    struct conn *c;
    struct direct_tp *tp;
    struct evbuffer *in;        /* frames queued to send */
    struct evbuffer *got;       /* output not yet split */
    struct event *parse_ev, *done_ev, *timer;
    unsigned expect;            /* replies still awaited */
    bool confirm;               /* confirm.select queued */
    struct mgmt_amqp_reply *replies;
    size_t n, cap;
    uint64_t body_bytes;        /* of every reply, MGMT_AMQP_BODY_MAX */
    int error;
    char text[512];
    bool over;
    void (*done)(struct mgmt_amqp *s, void *arg);
    void *arg;
};

/* ---- the transport ---- */

static ssize_t
direct_read(struct transport *t, void *buf, size_t n)
{
    (void)t;
    (void)buf;
    (void)n;
    return TRANSPORT_AGAIN;
}

static ssize_t
direct_write(struct transport *t, struct evbuffer *out, size_t max)
{
    struct mgmt_amqp *s = ((struct direct_tp *)t)->s;
    size_t len = evbuffer_get_length(out);
    if (len > max)
        len = max;
    if (s == NULL) {
        evbuffer_drain(out, len);
    } else {
        evbuffer_remove_buffer(out, s->got, len);
        event_active(s->parse_ev, EV_TIMEOUT, 0);
    }
    return (ssize_t)len;
}

static void
direct_want_read(struct transport *t, bool on)
{
    (void)t;
    (void)on;
}

static void
direct_want_write(struct transport *t, bool on)
{
    struct direct_tp *d = (struct direct_tp *)t;
    d->write_armed = on;
    if (on)
        event_active(d->wev, EV_WRITE, 0);
}

static void
direct_writable(evutil_socket_t fd, short what, void *arg)
{
    struct direct_tp *d = arg;
    (void)fd;
    (void)what;
    if (!d->write_armed)
        return;
    d->write_armed = false;
    d->t.on_write(d->t.arg);
}

static bool
direct_write_waiting(const struct transport *t)
{
    return ((const struct direct_tp *)t)->write_armed;
}

static const char *
direct_error(const struct transport *t)
{
    (void)t;
    return NULL;
}

static bool
direct_peer_login(const struct transport *t, char *out, size_t len)
{
    (void)t;
    (void)out;
    (void)len;
    return false;
}

static void
direct_free(struct transport *t)
{
    struct direct_tp *d = (struct direct_tp *)t;
    if (d->s) {
        d->s->tp = NULL;
        d->s->c = NULL;     /* the connection is being freed */
    }
    event_free(d->wev);
    free(d);
}

static const struct transport_ops direct_ops = {
    .name = "direct",
    .read = direct_read,
    .write = direct_write,
    .want_read = direct_want_read,
    .want_write = direct_want_write,
    .write_waiting = direct_write_waiting,
    .error = direct_error,
    .peer_login = direct_peer_login,
    .free = direct_free,
};

/* ---- the end ---- */

/* The callback runs from the loop, never inside parsing: it frees the
 * session. */
static void
finish(struct mgmt_amqp *s, int error, const char *text)
{
    if (s->over)
        return;
    s->over = true;
    s->error = error;
    snprintf(s->text, sizeof(s->text), "%s", text ? text : "");
    evtimer_del(s->timer);
    event_active(s->done_ev, EV_TIMEOUT, 0);
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
    struct mgmt_amqp *s = arg;
    (void)fd;
    (void)what;
    s->done(s, s->arg);
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    finish(arg, -1, "timeout");
}

/* ---- replies ---- */

static struct mgmt_amqp_reply *
last_open(struct mgmt_amqp *s)
{
    if (s->n == 0)
        return NULL;
    struct mgmt_amqp_reply *r = &s->replies[s->n - 1];
    return r->has_content && (r->header_bytes == NULL || r->body_want > 0)
               ? r : NULL;
}

static void
reply_done(struct mgmt_amqp *s)
{
    if (s->expect > 0)
        s->expect--;
}

static void
text_of(char *out, size_t len, struct amqp_bytes t)
{
    snprintf(out, len, "%.*s", (int)t.len, (const char *)t.ptr);
}

/* One frame from the broker. */
static void
on_frame(struct mgmt_amqp *s, const struct frame *f)
{
    struct mgmt_amqp_reply *open = last_open(s);
    char text[300];

    if (f->type == AMQP_FRAME_HEADER && open && open->header_bytes == NULL) {
        open->header_bytes = xmalloc(f->size + 1);
        memcpy(open->header_bytes, f->payload, f->size);
        if (content_header_decode(open->header_bytes, f->size, &open->ch) !=
            AMQP_OK) {
            finish(s, -1, "bad content header from the broker");
            return;
        }
        if (open->ch.body_size > MGMT_AMQP_BODY_MAX - s->body_bytes) {
            finish(s, MGMT_AMQP_TOO_BIG, "the messages take more than "
                   "64 MiB: ask for fewer");
            return;
        }
        s->body_bytes += open->ch.body_size;
        open->body_want = open->ch.body_size;
        open->body = xmalloc(open->body_want + 1);
        if (open->body_want == 0)
            reply_done(s);
        return;
    }
    if (f->type == AMQP_FRAME_BODY && open && open->header_bytes) {
        size_t n = f->size < open->body_want ? f->size : open->body_want;
        memcpy(open->body + open->body_len, f->payload, n);
        open->body_len += n;
        open->body_want -= n;
        if (open->body_want == 0)
            reply_done(s);
        return;
    }
    if (f->type != AMQP_FRAME_METHOD)
        return;
    struct amqp_method m;
    uint8_t *copy = xmalloc(f->size + 1);
    memcpy(copy, f->payload, f->size);
    if (method_decode(copy, f->size, &m) != AMQP_OK) {
        free(copy);
        finish(s, -1, "bad method from the broker");
        return;
    }
    if (m.id == AMQP_CONNECTION_CLOSE) {
        text_of(text, sizeof(text), m.a.connection_close.reply_text);
        free(copy);
        finish(s, m.a.connection_close.reply_code, text);
        return;
    }
    if (m.id == AMQP_CHANNEL_CLOSE) {
        text_of(text, sizeof(text), m.a.channel_close.reply_text);
        free(copy);
        finish(s, m.a.channel_close.reply_code, text);
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->replies = xrealloc(s->replies, s->cap * sizeof(*s->replies));
    }
    struct mgmt_amqp_reply *r = &s->replies[s->n++];
    memset(r, 0, sizeof(*r));
    r->m = m;
    r->method_bytes = copy;
    const struct method_info *mi = method_info_find(m.id);
    r->has_content = mi && mi->has_content;
    /* basic.return comes before the confirm it goes with: it is no reply
     * of its own */
    if (m.id == AMQP_BASIC_RETURN)
        s->expect++;
    if (!r->has_content)
        reply_done(s);
}

static void
parse_cb(evutil_socket_t fd, short what, void *arg)
{
    struct mgmt_amqp *s = arg;
    (void)fd;
    (void)what;
    while (!s->over) {
        size_t len = evbuffer_get_length(s->got);
        if (len < AMQP_FRAME_HEADER_LEN)
            break;
        const uint8_t *p = evbuffer_pullup(s->got, (ssize_t)len);
        struct frame f;
        enum amqp_status st = frame_decode(p, len, UINT32_MAX / 2, &f);
        if (st == AMQP_INCOMPLETE)
            break;
        if (st != AMQP_OK) {
            finish(s, -1, "bad frame from the broker");
            break;
        }
        on_frame(s, &f);
        evbuffer_drain(s->got, f.wire_len);
    }
    if (!s->over && s->expect == 0)
        finish(s, 0, NULL);
}

/* ---- sending ---- */

static void
put_frames(struct mgmt_amqp *s, void (*fill)(struct wire_wr *w, void *arg),
           void *arg)
{
    struct wire_wr w;
    wire_wr_init(&w, NULL, 0);
    fill(&w, arg);
    size_t need = w.len;
    uint8_t *buf = xmalloc(need);
    wire_wr_init(&w, buf, need);
    fill(&w, arg);
    evbuffer_add(s->in, buf, need);
    free(buf);
}

static void
fill_method(struct wire_wr *w, void *arg)
{
    (void)method_frame_put(w, 1, arg);
}

struct content {
    const struct amqp_method *m;
    struct content_header *h;
    const uint8_t *body;
    size_t len;
};

static void
fill_content(struct wire_wr *w, void *arg)
{
    struct content *c = arg;
    (void)method_frame_put(w, 1, c->m);
    /* the header's size: encode it once aside */
    struct wire_wr hw;
    wire_wr_init(&hw, NULL, 0);
    (void)content_header_encode(c->h, &hw);
    frame_put_header(w, AMQP_FRAME_HEADER, 1, (uint32_t)hw.len);
    (void)content_header_encode(c->h, w);
    frame_put_end(w);
    const size_t max = CONN_DIRECT_FRAME_MAX - AMQP_FRAME_OVERHEAD;
    for (size_t off = 0; off < c->len; off += max) {
        size_t n = c->len - off < max ? c->len - off : max;
        frame_put(w, AMQP_FRAME_BODY, 1, c->body + off, (uint32_t)n);
    }
}

struct mgmt_amqp *
mgmt_amqp_open(const char *user, struct vhost *vh)
{
    struct mgmt_amqp *s = xcalloc(1, sizeof(*s));
    s->tp = xcalloc(1, sizeof(*s->tp));
    s->tp->t.ops = &direct_ops;
    s->tp->t.fd = -1;
    s->tp->s = s;
    s->tp->wev = event_new(broker.base, -1, 0, direct_writable, s->tp);
    s->in = evbuffer_new();
    s->got = evbuffer_new();
    s->parse_ev = event_new(broker.base, -1, 0, parse_cb, s);
    s->done_ev = event_new(broker.base, -1, 0, done_cb, s);
    s->timer = evtimer_new(broker.base, timeout_cb, s);
    s->c = conn_direct_new(&s->tp->t, user, vh);
    struct amqp_method open = { .id = AMQP_CHANNEL_OPEN };
    mgmt_amqp_method(s, &open);
    return s;
}

void
mgmt_amqp_method(struct mgmt_amqp *s, const struct amqp_method *m)
{
    put_frames(s, fill_method, (void *)m);
    const struct method_info *mi = method_info_find(m->id);
    if (mi && mi->synchronous && !(m->id == AMQP_BASIC_CONSUME &&
                                   m->a.basic_consume.nowait))
        s->expect++;
    if (m->id == AMQP_CONFIRM_SELECT)
        s->confirm = true;
}

void
mgmt_amqp_publish(struct mgmt_amqp *s, const struct amqp_basic_publish *p,
                  struct content_header *h, const void *body, size_t len)
{
    struct amqp_method m = { .id = AMQP_BASIC_PUBLISH };
    m.a.basic_publish = *p;
    h->class_id = AMQP_CLASS_BASIC;
    h->body_size = len;
    struct content c = { &m, h, body, len };
    put_frames(s, fill_content, &c);
    if (s->confirm)
        s->expect++;
}

void
mgmt_amqp_run(struct mgmt_amqp *s,
              void (*done)(struct mgmt_amqp *s, void *arg), void *arg)
{
    s->done = done;
    s->arg = arg;
    s->over = false;
    s->error = 0;
    s->text[0] = '\0';
    struct timeval tv = { MGMT_AMQP_TIMEOUT_MS / 1000,
                          (MGMT_AMQP_TIMEOUT_MS % 1000) * 1000 };
    evtimer_add(s->timer, &tv);
    mgmt_amqp_flush(s);
    /* Nothing to wait for: say so from the loop, as for the others. */
    if (s->expect == 0)
        event_active(s->parse_ev, EV_TIMEOUT, 0);
}

void
mgmt_amqp_flush(struct mgmt_amqp *s)
{
    size_t len = evbuffer_get_length(s->in);
    if (s->c != NULL && len > 0)
        conn_direct_input(s->c, evbuffer_pullup(s->in, (ssize_t)len), len);
    evbuffer_drain(s->in, len);
}

size_t
mgmt_amqp_nreplies(const struct mgmt_amqp *s)
{
    return s->n;
}

const struct mgmt_amqp_reply *
mgmt_amqp_get(const struct mgmt_amqp *s, size_t i)
{
    return &s->replies[i];
}

int
mgmt_amqp_error(const struct mgmt_amqp *s, const char **text)
{
    *text = s->text;
    return s->error;
}

void
mgmt_amqp_free(struct mgmt_amqp *s)
{
    if (s->tp)
        s->tp->s = NULL;
    if (s->c)
        conn_close_now(s->c, false);
    event_free(s->parse_ev);
    event_free(s->done_ev);
    event_free(s->timer);
    evbuffer_free(s->in);
    evbuffer_free(s->got);
    for (size_t i = 0; i < s->n; i++) {
        free(s->replies[i].method_bytes);
        free(s->replies[i].header_bytes);
        free(s->replies[i].body);
    }
    free(s->replies);
    free(s);
}
