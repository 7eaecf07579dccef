/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A consumer thread: its own connection, basic.qos with --prefetch and
 * basic.consume on its queue, then every delivery until told to stop. It
 * reassembles each message only as far as its stamp, which gives the
 * latency and the sequence to check (seq.c), and acks it (unless
 * --autoack), --multi-ack messages at a time, gathered over plain TCP and
 * sent before it waits for more.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "tools/perf_clock.h"

static int
cons_send_ack(struct consumer *c, uint64_t tag, bool multiple)
{
    if (c->l.fd >= 0) {
        uint8_t f[21], *w = f;
        if (!outq_fits(&c->out, sizeof(f), 0) &&
            outq_flush(&c->l, &c->out, NULL, NULL) != 0)
            return -1;
        w = put8(w, AMQP_FRAME_METHOD);
        w = put16(w, CH);
        w = put32(w, 13);
        w = put32(w, AMQP_BASIC_ACK_METHOD);
        w = put64(w, tag);
        w = put8(w, multiple ? 1 : 0);
        put8(w, AMQP_FRAME_END);
        outq_copy(&c->out, f, sizeof(f));
        return 0;
    }
    if (amqp_basic_ack(c->l.st, CH, tag, multiple) != AMQP_STATUS_OK) {
        fail(EXIT_BROKER, "basic.ack failed (%s)", c->l.who);
        return -1;
    }
    return 0;
}

/* Acknowledges what is pending (the idle path of --multi-ack). */
static int
cons_ack_pending(struct consumer *c)
{
    if (c->pending > 0) {
        if (cons_send_ack(c, c->last_tag, c->pending > 1) != 0)
            return -1;
        c->pending = 0;
    }
    if (c->l.fd >= 0 && c->out.niov > 0)
        return outq_flush(&c->l, &c->out, NULL, NULL);
    return 0;
}

static int
cons_message(struct consumer *c, const uint8_t *stamp, size_t len,
             uint64_t tag, bool redelivered)
{
    uint64_t t = now_ns();
    uint64_t n = atomic_load_explicit(&c->received, memory_order_relaxed);

    atomic_store_explicit(&c->received, n + 1, memory_order_relaxed);
    atomic_store_explicit(&c->last_recv_ns, t, memory_order_relaxed);
    if (redelivered)
        c->redelivered++;
    if (len >= STAMP_LEN) {
        uint64_t ts, seq;
        unsigned pid;

        stamp_get(stamp, &ts, &pid, &seq);

        hist_add(c->lat, t > ts ? t - ts : 0);
        switch (seq_mark(&pqs[c->queue], c->last, pid, seq)) {
        case SEQ_NEW:
            break;
        case SEQ_DUPLICATE:
            c->dups++;
            break;
        case SEQ_REORDERED:
            c->reordered++;
            break;
        case SEQ_UNTRACKED:
            c->malformed++;
            break;
        }
    } else {
        c->malformed++;
    }
    if (!o.autoack) {
        c->pending++;
        c->last_tag = tag;
        if (c->pending >= (uint64_t)o.multi_ack) {
            if (cons_send_ack(c, tag, o.multi_ack > 1) != 0)
                return -1;
            c->pending = 0;
        }
    }
    return 0;
}

/* Connects, sets the prefetch and starts consuming its queue; 0 or -1. */
static int
cons_setup(struct consumer *c)
{
    char who[32];

    snprintf(who, sizeof(who), "consumer %u", c->id);
    c->lat = xcalloc(1, sizeof(*c->lat));
    c->last = xcalloc(MAX_PRODUCERS, sizeof(*c->last));
    if (link_open(&c->l, who) != 0)
        return -1;
    if (c->l.fd >= 0)
        outq_init(&c->out, 65536);
    if (o.prefetch > 0) {
        amqp_basic_qos(c->l.st, CH, 0, (uint16_t)o.prefetch, 0);
        if (rpc_check(&c->l, "basic.qos", EXIT_BROKER) != 0)
            return -1;
    }
    amqp_table_entry_t arg;
    amqp_table_t args = amqp_empty_table;
    if (o.stream_offset) {
        char *end;
        long long n = strtoll(o.stream_offset, &end, 10);
        arg.key = amqp_cstring_bytes("x-stream-offset");
        if (*end == '\0' && end != o.stream_offset) {
            arg.value.kind = AMQP_FIELD_KIND_I64;
            arg.value.value.i64 = n;
        } else {
            arg.value.kind = AMQP_FIELD_KIND_UTF8;
            arg.value.value.bytes = amqp_cstring_bytes(o.stream_offset);
        }
        args = (amqp_table_t){ 1, &arg };
    }
    amqp_basic_consume(c->l.st, CH, amqp_cstring_bytes(pqs[c->queue].name),
                       amqp_empty_bytes, 0, o.autoack, 0, args);
    return rpc_check(&c->l, "basic.consume", EXIT_BROKER);
}

/* The message being received: its deliver, then as far as its stamp. */
struct delivery {
    bool in_msg;                /* between basic.deliver and the last body */
    bool redelivered;
    uint64_t tag;
    uint64_t body_left, got;    /* body bytes still to come, and come */
    uint8_t stamp[STAMP_LEN];
};

/* A method frame; -1 when the consumer must stop (after fail()). */
static int
cons_method(struct consumer *c, struct delivery *d, const amqp_method_t *m)
{
    switch (m->id) {
    case AMQP_BASIC_DELIVER_METHOD: {
        const amqp_basic_deliver_t *dm = m->decoded;
        d->tag = dm->delivery_tag;
        d->redelivered = dm->redelivered;
        d->in_msg = true;
        d->body_left = 0;
        d->got = 0;
        return 0;
    }
    case AMQP_BASIC_CANCEL_METHOD:
        fail(EXIT_BROKER, "the broker cancelled the consumer on "
             "queue %s (%s)", pqs[c->queue].name, c->l.who);
        return -1;
    default:
        return link_handle_close(&c->l, "basic.consume", m, EXIT_BROKER)
                   ? -1 : 0;
    }
}

/* Any frame; -1 when the consumer must stop (after fail()). */
static int
cons_frame(struct consumer *c, struct delivery *d, const amqp_frame_t *f)
{
    switch (f->frame_type) {
    case AMQP_FRAME_METHOD:
        return cons_method(c, d, &f->payload.method);
    case AMQP_FRAME_HEADER:
        if (!d->in_msg)
            return 0;
        d->body_left = f->payload.properties.body_size;
        if (d->body_left == 0) {
            d->in_msg = false;
            return cons_message(c, d->stamp, 0, d->tag, d->redelivered);
        }
        return 0;
    case AMQP_FRAME_BODY: {
        amqp_bytes_t b = f->payload.body_fragment;
        if (!d->in_msg)
            return 0;
        if (d->got < STAMP_LEN) {
            size_t n = STAMP_LEN - d->got < b.len ? STAMP_LEN - d->got
                                                  : b.len;
            memcpy(d->stamp + d->got, b.bytes, n);
        }
        d->got += b.len;
        d->body_left = b.len < d->body_left ? d->body_left - b.len : 0;
        if (d->body_left == 0) {
            d->in_msg = false;
            return cons_message(c, d->stamp, d->got, d->tag,
                                d->redelivered);
        }
        return 0;
    }
    default:
        return 0;
    }
}

void *
consumer_main(void *arg)
{
    struct consumer *c = arg;
    struct delivery d;

    memset(&d, 0, sizeof(d));
    if (cons_setup(c) != 0 || !ready_and_wait())
        goto out;
    while (!atomic_load_explicit(&g_stop_consumers, memory_order_relaxed) &&
           !atomic_load_explicit(&g_abort, memory_order_relaxed)) {
        amqp_frame_t f;
        struct timeval tv = { 0, 100000 };
        int r;

        /* About to block: send the acks gathered from the last read. */
        if (c->l.fd >= 0 && c->out.niov > 0 &&
            !amqp_data_in_buffer(c->l.st) &&
            outq_flush(&c->l, &c->out, NULL, NULL) != 0)
            goto out;
        r = amqp_simple_wait_frame_noblock(c->l.st, &f, &tv);
        if (r == AMQP_STATUS_TIMEOUT) {
            if (cons_ack_pending(c) != 0)
                goto out;
            continue;
        }
        if (r != AMQP_STATUS_OK) {
            fail(EXIT_BROKER, "connection to the broker lost: %s (%s)",
                 amqp_error_string2(r), c->l.who);
            c->l.closed = true;
            goto out;
        }
        if (cons_frame(c, &d, &f) != 0)
            goto out;
        amqp_maybe_release_buffers(c->l.st);
    }
    if (!atomic_load(&g_abort))
        (void)cons_ack_pending(c);
out:
    atomic_store(&c->finished, true);
    return NULL;
}

void
consumer_free(struct consumer *c)
{
    free(c->out.stage);
    free(c->lat);
    free(c->last);
}
