/*
 * SPDX-License-Identifier: Apache-2.0
 * A client connection: the handshake state machine, frame reading,
 * heartbeats, output with watermarks, and the close handshake. A
 * connection owns its channels. Never freed from inside its own callbacks:
 * conn_close_now() hands it to the reaper.
 */
#ifndef ROOST_BROKER_CONN_H
#define ROOST_BROKER_CONN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "amqp/method.h"
#include "broker/core/inbuf.h"
#include "broker/core/store.h"
#include "broker/lib/hmap.h"
#include "broker/lib/log.h"

struct channel;
struct event;
struct evbuffer;
struct vhost;
struct user;
struct perm;
struct queue;
struct sockaddr;

/*
 * A connection is in one state of each of four machines, each changed
 * only by its setter, which refuses a move that is not a transition
 * (conn.c's tables) and traces it through conn_log.
 *
 * Its life (conn_set_state): the handshake, AWAIT_HEADER, START_SENT,
 * TUNE_SENT, AWAIT_OPEN, then OPEN on its vhost, then a way out: CLOSING
 * (we sent connection.close and read until close-ok), CLOSING_DEAF (the
 * same after input that could not be split into frames: nothing more is
 * read, the socket goes at the close deadline), FLUSHING (what is queued
 * is written, then the socket goes), LINGERING (we sent close-ok to the
 * client's close: read and discard until it closes the socket), RELEASED
 * (socket and channels gone; the reaper frees it).
 */
#define CONN_STATES(X)                                                       \
    X(CONN_AWAIT_HEADER) X(CONN_START_SENT) X(CONN_TUNE_SENT)                \
    X(CONN_AWAIT_OPEN) X(CONN_OPEN) X(CONN_CLOSING) X(CONN_CLOSING_DEAF)     \
    X(CONN_FLUSHING) X(CONN_LINGERING) X(CONN_RELEASED)

/* An open connection's publishing, paused or not (RabbitMQ's names):
 * RUNNING; FLOW, flow control (it fed a backed-up queue: not read until
 * a congested connection drains, at most FLOW_MAX_PAUSE_MS); BLOCKING
 * and BLOCKED, a resource alarm (it published during one: not read, and
 * its frames not handled, until every alarm clears), the client told
 * with connection.blocked (BLOCKED) or not (BLOCKING: it did not ask).
 * Any other life is RUNNING. */
#define CONN_PAUSES(X)                                                       \
    X(CONN_RUNNING) X(CONN_FLOW) X(CONN_BLOCKING) X(CONN_BLOCKED)

/* Input that waits, neither read nor handled: for the store's sync of a
 * reply already in the output, which is not written meanwhile
 * (conn_hold_for_store), for a basic.get's message to be read back
 * (conn_hold_input), or because the contents it has begun on its
 * channels hold more than CONN_UNFINISHED_MAX (conn_content_grew). */
#define CONN_HOLDS(X)                                                        \
    X(CONN_HOLD_NONE) X(CONN_HOLD_STORE) X(CONN_HOLD_GET) X(CONN_HOLD_CONTENT)

/* The output against its watermarks: CONGESTED over the high one (no
 * deliveries, never paused by flow control), STALLED over the hard bound,
 * CONN_OUTPUT_HARD_MAX (replies that are not deliveries, basic.get-ok
 * and basic.return among them, pile up there: the connection is no
 * longer read, nor blamed for silence), each until it drains below the
 * low one. */
#define CONN_OUTPUTS(X)                                                      \
    X(CONN_OUTPUT_FLOWING) X(CONN_OUTPUT_CONGESTED) X(CONN_OUTPUT_STALLED)
#define CONN_OUTPUT_HARD_MAX                                                 \
    ((size_t)broker.cfg.consumer_output_high_watermark * 4)

/* Sockets a broker holds beyond connection_max: those still in their
 * handshake, which do not count as connections yet. Past it, a new
 * socket is closed at once (logged once per 10 s). */
#define CONN_HANDSHAKE_SLACK 128

#define CONN_AS_ENUM(s) s,
enum conn_state { CONN_STATES(CONN_AS_ENUM) };
enum conn_pause { CONN_PAUSES(CONN_AS_ENUM) };
enum conn_hold { CONN_HOLDS(CONN_AS_ENUM) };
enum conn_output { CONN_OUTPUTS(CONN_AS_ENUM) };
#undef CONN_AS_ENUM

struct transport;

struct conn {
    uint64_t id;
    enum conn_state state;      /* the four machines (above) */
    enum conn_pause pause;
    enum conn_hold hold;
    enum conn_output output;
    bool reading;               /* what the transport was last told
                                 * (conn.c's update_reading) */
    struct transport *tp;       /* the socket, TCP or TLS (transport.h) */
    struct inbuf in;            /* input not yet split into frames */
    struct evbuffer *out;       /* output not yet written */
    TAILQ_ENTRY(conn) flush_link; /* queued to write at the end of the turn */
    bool flush_queued;          /* on that list */
    size_t read_size;           /* bytes to ask for in the next read */
    size_t input_max;           /* input held before reading pauses */
    uint64_t unfinished;        /* conn_content_grew's bytes */
    char peer[64];              /* "127.0.0.1:53422" */
    char local[64];             /* the address it reached: "127.0.0.1:5672" */
    bool peer_is_loopback;
    /* negotiated */
    uint16_t channel_max;
    uint32_t frame_max;
    uint16_t heartbeat;
    /* client capabilities from start-ok */
    bool cap_consumer_cancel_notify;
    bool cap_auth_failure_close;
    bool cap_connection_blocked;
    char *user;
    struct vhost *vh;
    const struct perm *perm;    /* the user's in 'vh' (access.c) */
    unsigned perm_seen;         /* perm_epoch + 1 when looked up; 0: not */
    /* channels by number (conn.c: chan_get, chan_set, chan_next): the
     * numbers below CHAN_LOW in an array as long as the highest of them,
     * the others (any up to 65535, rare) in a map; at most channel_max
     * open, so neither outgrows it */
    struct channel **channels;
    uint32_t channels_cap;      /* at most CHAN_LOW */
    struct hmap high_channels;  /* 2-byte number -> struct channel */
    uint32_t nchannels;
    /* liveness */
    uint64_t last_recv_ms;
    uint64_t last_send_ms;
    /* counters (stats.h), read through conn_info */
    uint64_t recv_oct, send_oct, recv_cnt, send_cnt;
    uint64_t connected_at;      /* wall clock ms */
    struct stats_series *series;
    /* start-ok's client_properties, for the management API (NULL: none,
     * or over CLIENT_PROPS_MAX) */
    uint8_t *client_props;
    uint32_t client_props_len;
    char auth_mechanism[64];
    struct event *timer;        /* handshake, heartbeat and close timeouts */
    unsigned tick_ms;           /* the timer's period */
    uint64_t deadline_ms;       /* handshake or close deadline; 0 = none */
    /* input block bytes, beyond the output's own, that output references
     * to lent bodies keep alive (counted once per run of references to
     * the same block); they count against the watermarks */
    size_t out_pinned;
    size_t out_shared;          /* output bytes that are references to
                                 * bodies (conn_output_lend) */
    const struct inblock *last_lent;
    uint64_t wrote_ms;          /* last write that the socket took */
    TAILQ_ENTRY(conn) flow_link;    /* paused by flow control (CONN_FLOW) */
    /* CONN_HOLD_STORE: a reply that must follow a sync (durable
     * declare-ok, tx.commit-ok) waits in the output for this batch */
    struct store_waiter store_w;
    bool direct;                /* inside the broker (conn_direct_new) */
    /* channels with publisher confirms to send at the end of this read */
    uint16_t *confirm_dirty;
    size_t ndirty, dirty_cap;
    /* exclusive queues this connection owns (deleted when it closes) */
    struct queue **excl;
    size_t nexcl, excl_cap;
    TAILQ_ENTRY(conn) link;
};

struct tls_ctx;
struct transport_tls_info;
/* A new connection on accepted socket 'fd' (takes ownership), over TLS
 * with 'tls'. */
void conn_accept(int fd, const struct sockaddr *sa, int salen,
                 struct tls_ctx *tls);

/* Send a method frame on 'channel'. */
void conn_send_method(struct conn *c, uint16_t channel,
                      const struct amqp_method *m);

/* The output buffer, for deliveries. Whoever adds to it must call
 * conn_output_added() before returning to the loop. */
struct evbuffer *conn_output(struct conn *c);

/* Add 'len' bytes at 'data', a body lent by input block 'b' or the body
 * of message 'm' (one of them NULL), to the output by reference (no
 * copy). The block or message stays alive until they are written; they
 * count against the output watermarks, but not in the memory figure
 * (conn_buffer_bytes), where the block or message counts them once. */
void conn_output_lend(struct conn *c, const uint8_t *data, size_t len,
                      struct inblock *b, struct msg *m);

/* Called after output was added: tracks congestion and queues the
 * connection to be written at the end of this loop turn. */
void conn_output_added(struct conn *c);

/*
 * A connection exception (hard error): send connection.close with 'code'
 * and "NAME - text", stop processing input, close every channel, and drop
 * the socket after close-ok or the close timeout.
 */
void conn_fail(struct conn *c, uint16_t code, uint32_t method_id,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The method frame 'f' did not decode ('st'): conn_fail with the reply
 * code, text and method ids RabbitMQ closes with. */
struct frame;
void conn_fail_decode(struct conn *c, const struct frame *f,
                      enum amqp_status st);

/* Drop the socket now (after flushing what is queued if 'flush'). */
void conn_close_now(struct conn *c, bool flush);

/*
 * We sent close-ok to a client's connection.close: as RabbitMQ, keep
 * reading (and discarding) until the client closes the socket or the close
 * timeout passes, so that frames it sent before its close never meet a
 * reset socket.
 */
void conn_linger(struct conn *c);

/* "NAME - text" for a close's reply-text: at most 255 bytes, and cut as
 * RabbitMQ cuts it (252 bytes and "..."). */
void reply_format(char *out, size_t outlen, uint16_t code, const char *fmt,
                  va_list ap) __attribute__((format(printf, 4, 0)));

/* Close every connection with 320 CONNECTION_FORCED (shutdown). */
void conn_close_all(const char *reason);
/* Give the core its hooks into the session (broker/core/hooks.h): once,
 * at start, before anything can call them. */
void conn_install_hooks(void);

size_t conn_count(void);

/* Connections past connection.open. */
size_t conn_open_count(void);

/* Read function (the management API's): the connections past
 * connection.open of 'user' (NULL: of every user), their open channels
 * and those channels' consumers. */
struct conn_totals {
    uint64_t connections, channels, consumers;
};
void conn_totals(const char *user, struct conn_totals *t);

/*
 * A connection inside the broker, as RabbitMQ's management plugin opens
 * a "direct" one for what it does over AMQP (declare, delete, bind,
 * publish, get): open on 'vh' as 'user' (already authenticated), with no
 * socket. Its input is what conn_direct_input gives it; its output goes
 * to 'tp' (the caller's transport, whose write takes it, and which the
 * connection frees with it). Every method runs through the same code,
 * permission checks and errors as one from a client. Not listed by
 * conn_foreach. Drop it with conn_close_now.
 */
#define CONN_DIRECT_FRAME_MAX 131072
struct conn *conn_direct_new(struct transport *tp, const char *user,
                             struct vhost *vh);
void conn_direct_input(struct conn *c, const void *data, size_t len);

/* ---- read functions (the management API's and /metrics') ---- */

/* Client properties kept for the API, at most this many bytes. */
#define CLIENT_PROPS_MAX 4096

/* Each connection past its protocol header, in the order they came. */
void conn_foreach(void (*fn)(struct conn *c, void *arg), void *arg);
/* Each open channel of 'c'. */
void conn_foreach_channel(struct conn *c,
                          void (*fn)(struct channel *ch, void *arg),
                          void *arg);
/* RabbitMQ's name of a connection: "127.0.0.1:53422 -> 127.0.0.1:5672". */
void conn_name(const struct conn *c, char *out, size_t len);
/* The connection of that name, or NULL. */
struct conn *conn_by_name(const char *name);
/* Close 'c' from the management API: 320 CONNECTION_FORCED with
 * 'reason'. */
void conn_close_forced(struct conn *c, const char *reason);

/* What the API shows of a connection beyond its fields. */
struct conn_info {
    const char *state;          /* RabbitMQ's: starting, tuning, opening,
                                 * running, blocking, blocked, closing */
    uint32_t channels;
    bool tls;
    /* the TLS session's details, NULL without TLS or before the
     * handshake ends; valid while 'c' is */
    const struct transport_tls_info *tls_info;
    uint64_t send_pend;         /* output bytes not yet written */
    const struct stats_series *series;  /* CS_* rates */
};
enum { CS_RECV_OCT, CS_SEND_OCT, CS_COUNT };
void conn_info(const struct conn *c, struct conn_info *out);

/* How many are open on 'vh' (walks them all: for connection.open). */
size_t conn_open_in(const struct vhost *vh);

/* A publish arrived during a resource alarm: stop reading this
 * connection and tell the client (connection.blocked) if it asked. */
void conn_block(struct conn *c, const char *reason);

/* At exit: drop every connection and free them all. */
void conn_free_all(void);

/* The input block holding the frame being handled (see inbuf.h). */
static inline struct inblock *
conn_input_block(const struct conn *c)
{
    return c->in.blk;
}

/* Called when the channel is gone. */
void conn_channel_closed(struct conn *c, uint16_t number);

/* What was just answered must reach the disk before the client hears
 * of it: hold output and input until the store's open batch is durable. */
void conn_hold_for_store(struct conn *c);

/*
 * The bytes that the unfinished contents of 'c''s channels hold changed
 * by 'delta' (channel.c: a small body's allocation when its header
 * arrives, a large one's frames as they arrive, minus it all when the
 * content is published or dropped). Past CONN_UNFINISHED_MAX, twice
 * max_message_size, the connection is no longer read (CONN_HOLD_CONTENT)
 * until it is back under: only that client waits, and a heartbeat
 * timeout still ends it.
 */
#define CONN_UNFINISHED_MAX ((uint64_t)broker.cfg.max_message_size * 2)
void conn_content_grew(struct conn *c, int64_t delta);

/* Handle no further input until conn_release_input (a basic.get waits
 * for a read: queue_get_wait). */
void conn_hold_input(struct conn *c);
void conn_release_input(struct conn *c);

/* Queue a channel's confirms for the end of the current read. */
void conn_confirm_dirty(struct conn *c, uint16_t number);

/* Exclusive queue ownership. */
void conn_own_queue(struct conn *c, struct queue *q);

/* Send connection.start (handle_connection.c). */
void conn_send_start(struct conn *c);

/* Move to 'next', tracing the change. */
void conn_set_state(struct conn *c, enum conn_state next);

/* After tune-ok: apply the negotiated limits to the socket. */
void conn_tuned(struct conn *c);

/* A congested connection whose socket took nothing for this long is
 * stuck, not slow: flow control does not wait for it. */
#define CONN_STUCK_MS 1000

/* Whether 'c' is congested and still writing: a slow consumer that flow
 * control paces publishers to. */
bool conn_is_draining_slowly(const struct conn *c);

/* 'c' published to a backed-up queue (queue.h): stop reading it once the
 * frames already read are handled, until some congested connection
 * drains (or FLOW_MAX_PAUSE_MS passes). A connection that is congested
 * itself is never paused: it may be a client that consumes and publishes
 * on one socket and reads only between writes. */
void conn_flow(struct conn *c);

/* After connection.open: stop the handshake timer, start heartbeats. */
void conn_opened(struct conn *c);

/* The ids of a log line about 'c' (log.h's log_event), borrowed from
 * it, its name (conn_name) written to 'name' of 'len' bytes (160 hold
 * any). */
void conn_log_ids(struct conn *c, struct log_ids *ids, char *name,
                  size_t len);

/* A log line about 'c': "conn=ID PEER: ..." in plain text, with its
 * connection, vhost and user in JSON. */
void conn_log(struct conn *c, enum log_level level, const char *fmt, ...)
    LOG_PRINTF(3, 4);

/* Whether 'c' is past CONN_OPEN: closing (we sent connection.close) or
 * closed. */
static inline bool
conn_is_closing(const struct conn *c)
{
    return c->state >= CONN_CLOSING;
}

/* Whether 'c' is closed: nothing more is sent or handled (flushing,
 * lingering or released). */
static inline bool
conn_is_closed(const struct conn *c)
{
    return c->state >= CONN_FLUSHING;
}

#endif
