/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A producer thread: its own connection, confirm.select with --confirm,
 * then messages at --rate (or as fast as it can) until --duration,
 * --count or a stop. Over plain TCP it writes each message from a
 * template of its three frames, with the stamp written in, through the
 * gathered output; otherwise it calls amqp_basic_publish. With --confirm
 * it keeps at most that many messages unconfirmed, in a ring indexed by
 * delivery tag, and times each confirm.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "tools/perf_clock.h"

/* Body tails up to this many bytes are copied, longer ones referenced. */
#define COPY_TAIL_MAX 512

static void
tmpl_build(struct producer *p)
{
    size_t exl = strlen(xname), rkl = strlen(p->rkey);
    size_t mlen = 4 + 2 + 1 + exl + 1 + rkl + 1;
    size_t hlen = 2 + 2 + 8 + 2 + (o.persistent ? 1 : 0);
    size_t chunk = p->l.frame_max - 8;
    size_t left = o.size, nframes = (o.size + chunk - 1) / chunk;
    uint8_t *w;

    p->tmpl_len = (7 + mlen + 1) + (7 + hlen + 1) + nframes * 8 + o.size;
    p->tmpl = w = xcalloc(1, p->tmpl_len);
    /* basic.publish (0-9-1 §4.2.3 frame layout) */
    w = put8(w, AMQP_FRAME_METHOD);
    w = put16(w, CH);
    w = put32(w, (uint32_t)mlen);
    w = put32(w, AMQP_BASIC_PUBLISH_METHOD);
    w = put16(w, 0);
    w = put8(w, (uint8_t)exl);
    memcpy(w, xname, exl);
    w += exl;
    w = put8(w, (uint8_t)rkl);
    memcpy(w, p->rkey, rkl);
    w += rkl;
    w = put8(w, 0);             /* mandatory=false, immediate=false */
    w = put8(w, AMQP_FRAME_END);
    /* content header */
    w = put8(w, AMQP_FRAME_HEADER);
    w = put16(w, CH);
    w = put32(w, (uint32_t)hlen);
    w = put16(w, AMQP_BASIC_CLASS);
    w = put16(w, 0);
    w = put64(w, o.size);
    if (o.persistent) {
        w = put16(w, AMQP_BASIC_DELIVERY_MODE_FLAG);
        w = put8(w, AMQP_DELIVERY_PERSISTENT);
    } else {
        w = put16(w, 0);
    }
    w = put8(w, AMQP_FRAME_END);
    /* body frames; the body is zeros but for the stamp */
    p->stamp_off = (size_t)(w - p->tmpl) + 7;
    while (left > 0) {
        size_t n = left < chunk ? left : chunk;
        w = put8(w, AMQP_FRAME_BODY);
        w = put16(w, CH);
        w = put32(w, (uint32_t)n);
        w += n;
        w = put8(w, AMQP_FRAME_END);
        left -= n;
    }
    p->body = xcalloc(1, o.size);
}

static void
prod_ack(struct producer *p, uint64_t tag, bool multiple, bool nack,
         uint64_t now)
{
    uint64_t from = multiple ? p->low_tag : tag;
    size_t n = (size_t)o.confirm;

    if (tag >= p->next_tag) {
        fail(EXIT_BROKER, "broker confirmed delivery tag %" PRIu64
             " that was never published (%s)", tag, p->l.who);
        return;
    }
    for (uint64_t t = from < p->low_tag ? p->low_tag : from; t <= tag; t++) {
        struct confirm_slot *s = &p->ring[t % n];
        if (s->done)
            continue;
        s->done = true;
        if (nack)
            p->nacked++;
        else
            p->confirmed++;
        hist_add(p->clat, now > s->ts ? now - s->ts : 0);
    }
    while (p->low_tag < p->next_tag && p->ring[p->low_tag % n].done)
        p->low_tag++;
    p->last_confirm_ns = now;
}

/*
 * Handles what the broker sent a producer, waiting up to 'timeout_ms' for
 * the first frame and taking only what is already there after it.
 */
static int
prod_input(struct producer *p, int timeout_ms)
{
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

    for (;;) {
        amqp_frame_t f;
        int r = amqp_simple_wait_frame_noblock(p->l.st, &f, &tv);
        if (r == AMQP_STATUS_TIMEOUT)
            return 0;
        if (r != AMQP_STATUS_OK) {
            fail(EXIT_BROKER, "connection to the broker lost: %s (%s)",
                 amqp_error_string2(r), p->l.who);
            p->l.closed = true;
            return -1;
        }
        if (f.frame_type == AMQP_FRAME_METHOD) {
            amqp_method_t *m = &f.payload.method;
            switch (m->id) {
            case AMQP_BASIC_ACK_METHOD: {
                const amqp_basic_ack_t *a = m->decoded;
                prod_ack(p, a->delivery_tag, a->multiple, false, now_ns());
                break;
            }
            case AMQP_BASIC_NACK_METHOD: {
                const amqp_basic_nack_t *a = m->decoded;
                prod_ack(p, a->delivery_tag, a->multiple, true, now_ns());
                break;
            }
            case AMQP_CONNECTION_BLOCKED_METHOD:
                p->blocked++;
                break;
            default:
                if (link_handle_close(&p->l, "basic.publish", m,
                                      EXIT_BROKER))
                    return -1;
                break;          /* basic.return and its content, unblocked */
            }
        }
        amqp_maybe_release_buffers(p->l.st);
        if (atomic_load_explicit(&g_abort, memory_order_relaxed))
            return -1;
        tv.tv_sec = 0;
        tv.tv_usec = 0;
    }
}

static int
prod_input_cb(void *arg)
{
    return prod_input(arg, 0);
}

static bool
readable(struct link *l)
{
    struct pollfd pfd = { amqp_get_sockfd(l->st), POLLIN, 0 };
    return amqp_data_in_buffer(l->st) || poll(&pfd, 1, 0) > 0;
}

static int
prod_flush(struct producer *p)
{
    if (p->out.niov > 0 && outq_flush(&p->l, &p->out, prod_input_cb, p) != 0)
        return -1;
    /*
     * Look for confirms (each time) or a close from the broker (every
     * 10 ms is soon enough): one poll() when nothing came.
     */
    if (o.confirm == 0) {
        uint64_t t = now_ns();
        if (t - p->last_check_ns < 10000000)
            return 0;
        p->last_check_ns = t;
    }
    if (readable(&p->l))
        return prod_input(p, 0);
    return 0;
}

static int
prod_publish(struct producer *p, uint64_t seq)
{
    uint64_t ts = now_ns();

    if (p->l.fd >= 0) {
        size_t head = p->stamp_off + STAMP_LEN;
        size_t tail = p->tmpl_len - head;
        bool copy_tail = tail <= COPY_TAIL_MAX;
        uint8_t *s;

        if (!outq_fits(&p->out, head + (copy_tail ? tail : 0),
                       copy_tail ? 0 : 1) && prod_flush(p) != 0)
            return -1;
        s = p->out.stage + p->out.used + p->stamp_off;
        outq_copy(&p->out, p->tmpl, head);
        stamp_put(s, ts, p->id, seq);
        if (copy_tail)
            outq_copy(&p->out, p->tmpl + head, tail);
        else
            outq_ref(&p->out, p->tmpl + head, tail);
        if (p->out.first_ns == 0)
            p->out.first_ns = ts;
    } else {
        amqp_basic_properties_t props;
        amqp_bytes_t body = { o.size, p->body };
        int r;

        memset(&props, 0, sizeof(props));
        if (o.persistent) {
            props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
            props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
        }
        stamp_put(p->body, ts, p->id, seq);
        r = amqp_basic_publish(p->l.st, CH, amqp_cstring_bytes(xname),
                               amqp_cstring_bytes(p->rkey), 0, 0, &props,
                               body);
        if (r != AMQP_STATUS_OK) {
            (void)prod_input(p, 0);
            fail(EXIT_BROKER, "basic.publish failed: %s (%s)",
                 amqp_error_string2(r), p->l.who);
            return -1;
        }
    }
    if (o.confirm > 0) {
        struct confirm_slot *s = &p->ring[p->next_tag % (size_t)o.confirm];
        s->ts = ts;
        s->done = false;
        p->next_tag++;
    }
    p->last_send_ns = ts;
    return 0;
}

/* Connects, asks for confirms and builds the message; 0 or -1. */
static int
prod_setup(struct producer *p)
{
    char who[32];

    snprintf(who, sizeof(who), "producer %u", p->id);
    if (link_open(&p->l, who) != 0)
        return -1;
    if (o.confirm > 0) {
        amqp_confirm_select(p->l.st, CH);
        if (rpc_check(&p->l, "confirm.select", EXIT_BROKER) != 0)
            return -1;
        p->ring = xcalloc((size_t)o.confirm, sizeof(*p->ring));
        p->clat = xcalloc(1, sizeof(*p->clat));
    }
    p->next_tag = p->low_tag = 1;
    tmpl_build(p);
    if (p->l.fd >= 0)
        outq_init(&p->out, o.batch + p->tmpl_len + COPY_TAIL_MAX + 64);
    return 0;
}

/* What the send loop does next. */
enum step {
    STEP_SEND,                  /* publish the next message */
    STEP_AGAIN,                 /* look at the stop conditions again */
    STEP_STOP,                  /* stop sending, wait for the confirms */
    STEP_FAIL,                  /* a failure was recorded */
};

/*
 * Token bucket on an absolute schedule: message k is due at
 * base + k * period, so sleeping late never accumulates drift. A
 * producer held back (by the broker) for longer than the bucket depth
 * (50 ms, at least one message) gives up the excess instead of
 * bursting to catch up.
 */
struct pace {
    double period_ns;           /* 0: --rate 0, unlimited */
    uint64_t base_ns, base_seq; /* message base_seq is due at base_ns */
    uint64_t burst_ns;          /* the bucket's depth */
    uint64_t stop_ns;           /* --duration's end, 0 = none */
};

static void
pace_init(struct pace *pc)
{
    memset(pc, 0, sizeof(*pc));
    pc->period_ns = o.rate > 0 ? 1e9 / o.rate : 0;
    pc->base_ns = g_start_ns;
    /* Stop on time here rather than when the monitor looks (20 ms). */
    if (o.duration > 0)
        pc->stop_ns = g_start_ns + (uint64_t)(o.duration * 1e9);
    if (pc->period_ns > 0)
        pc->burst_ns = (uint64_t)(pc->period_ns > 5e7 ? pc->period_ns : 5e7);
}

/* Is message 'seq' due? If not yet, flushes and sleeps until it is. */
static enum step
pace_wait(struct producer *p, struct pace *pc, uint64_t seq)
{
    uint64_t due, t;

    if (pc->period_ns <= 0)
        return STEP_SEND;
    due = pc->base_ns + (uint64_t)((double)(seq - pc->base_seq) *
                                   pc->period_ns);
    t = now_ns();
    if (pc->stop_ns != 0 && due >= pc->stop_ns)
        return STEP_STOP;
    if (t < due) {
        if (prod_flush(p) != 0)
            return STEP_FAIL;
        /* sleep in slices so that a stop is seen in time */
        while ((t = now_ns()) < due &&
               !atomic_load(&g_stop_producers) &&
               !atomic_load(&g_abort))
            sleep_until(due - t > 100000000 ? t + 100000000 : due);
        return STEP_AGAIN;
    }
    if (t - due > pc->burst_ns) {
        pc->base_ns = t - pc->burst_ns;
        pc->base_seq = seq;
    }
    return STEP_SEND;
}

/* With --confirm: waits for room among the unconfirmed messages. */
static enum step
prod_window(struct producer *p)
{
    if (o.confirm == 0)
        return STEP_SEND;
    while (p->next_tag - p->low_tag >= (uint64_t)o.confirm) {
        /* The flush may read the confirm we wait for; block only
         * if it did not. */
        if (prod_flush(p) != 0)
            return STEP_FAIL;
        if (p->next_tag - p->low_tag >= (uint64_t)o.confirm &&
            prod_input(p, 100) != 0)
            return STEP_FAIL;
        if (atomic_load(&g_stop_producers) || atomic_load(&g_abort))
            break;
    }
    if (p->next_tag - p->low_tag >= (uint64_t)o.confirm)
        return STEP_STOP;
    return STEP_SEND;
}

/*
 * After a message: flushes a full batch, or one whose oldest message
 * waited 1 ms; unbatched, looks for a close or confirms every 256.
 */
static int
prod_sent(struct producer *p, uint64_t seq)
{
    if (p->l.fd >= 0 && (p->out.bytes >= o.batch ||
                         p->last_send_ns - p->out.first_ns > 1000000))
        return prod_flush(p);
    if (p->l.fd < 0 && (seq & 255) == 0 && readable(&p->l))
        return prod_input(p, 0);
    return 0;
}

/* Waits for the last confirms, as long as they keep coming. */
static int
prod_drain_confirms(struct producer *p)
{
    uint64_t last = now_ns(), low = p->low_tag;

    while (p->low_tag < p->next_tag && !atomic_load(&g_abort)) {
        if (prod_input(p, 100) != 0)
            return -1;
        if (p->low_tag != low) {
            low = p->low_tag;
            last = now_ns();
        } else if (now_ns() - last > (uint64_t)(o.drain_timeout * 1e9)) {
            break;
        }
    }
    return 0;
}

void *
producer_main(void *arg)
{
    struct producer *p = arg;
    struct pace pc;
    uint64_t seq = 0;

    if (prod_setup(p) != 0 || !ready_and_wait())
        goto out;
    pace_init(&pc);
    for (;;) {
        enum step s;

        if (atomic_load_explicit(&g_stop_producers, memory_order_relaxed) ||
            atomic_load_explicit(&g_abort, memory_order_relaxed) ||
            (pc.stop_ns != 0 && p->last_send_ns >= pc.stop_ns))
            break;
        if (o.count > 0 && seq >= o.count)
            break;
        s = pace_wait(p, &pc, seq);
        if (s == STEP_AGAIN)
            continue;
        if (s == STEP_SEND)
            s = prod_window(p);
        if (s == STEP_STOP)
            break;
        if (s == STEP_FAIL || prod_publish(p, seq) != 0)
            goto out;
        seq++;
        atomic_store_explicit(&p->published, seq, memory_order_relaxed);
        if (prod_sent(p, seq) != 0)
            goto out;
    }
    if (prod_flush(p) != 0)
        goto out;
    if (o.confirm > 0)
        (void)prod_drain_confirms(p);
out:
    atomic_store(&p->finished, true);
    return NULL;
}

void
producer_free(struct producer *p)
{
    free(p->tmpl);
    free(p->body);
    free(p->out.stage);
    free(p->ring);
    free(p->clat);
}
