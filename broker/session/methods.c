/*
 * SPDX-License-Identifier: Apache-2.0
 * The method table: one row for each method a client may send, and the
 * dispatch that reads it. A method with no row is one the broker sends
 * (or no one does): on a channel it is 503 "unexpected NAME". Channel 0
 * takes the rows of class connection in the states they name; a
 * channel, once open and not awaiting content, takes every other row,
 * after its permission checks. conn.c and channel.c decide what reaches
 * here (frame types, closing, channels not yet open); this file decides
 * which method runs.
 */
#include "broker/session/methods.h"

#include <stddef.h>
#include <stdint.h>

#include "broker/core/store.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/session/access.h"
#include "broker/session/channel.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"

enum {
    /* Of class connection, so channel 0 only, and handled by fn.conn;
     * the others by fn.channel, on a channel. */
    M_CHANNEL0 = 1 << 0,
    /* A content header and bodies follow: once its handler has taken it
     * (the channel is still open), the channel awaits them. */
    M_CONTENT = 1 << 1,
    /* May change a durable definition: its reply waits until the store
     * has synced it (conn_hold_for_store). */
    M_SYNCS_DEFS = 1 << 2,
};

/* The connection states a method is valid in, a bit each. */
#define M_IN(state) (1u << (state))
/* On an open connection, on its vhost: every method on a channel (conn.c
 * answers a frame on a channel before connection.open with 505). */
#define M_NEEDS_VHOST M_IN(CONN_OPEN)

struct method_row {
    uint32_t id;
    uint8_t flags;              /* M_* */
    uint8_t nperm;
    uint16_t states;            /* M_IN(...) */
    union {
        void (*conn)(struct conn *c, const struct amqp_method *m);
        void (*channel)(struct channel *ch, const struct amqp_method *m);
    } fn;
    const struct access_rule *perm;     /* nperm checks, in order */
};

/*
 * The permission checks, in the order RabbitMQ makes them (access.h,
 * docs/security.md): PERM needs a permission on a resource the method
 * names, NOT_DEFAULT refuses the default exchange, NOT_RESERVED a new
 * queue named amq.*; DECLARE's are skipped for a passive declare.
 */
#define ARG(method, field) offsetof(union amqp_method_args, method.field)
#define PERM(kind, res, method, field, flags)                                 \
    { ACCESS_PERM, kind, res, flags, ARG(method, field), 0 }
#define DECLARE(check, kind, res, method, field, flags)                       \
    { check, kind, res, ACCESS_PASSIVE_FREE | (flags), ARG(method, field),   \
      ARG(method, passive) }
#define NOT_DEFAULT(method, field)                                            \
    { ACCESS_NOT_DEFAULT, 0, RES_EXCHANGE, 0, ARG(method, field), 0 }

static const struct access_rule publish_perm[] = {
    PERM(PERM_WRITE, RES_EXCHANGE, basic_publish, exchange, 0),
};
static const struct access_rule consume_perm[] = {
    PERM(PERM_READ, RES_QUEUE, basic_consume, queue,
         ACCESS_LAST_QUEUE | ACCESS_REPLY_FREE),
};
static const struct access_rule get_perm[] = {
    PERM(PERM_READ, RES_QUEUE, basic_get, queue, ACCESS_LAST_QUEUE),
};
/* Even a passive declare of the default exchange is refused. */
static const struct access_rule exchange_declare_perm[] = {
    NOT_DEFAULT(exchange_declare, exchange),
    DECLARE(ACCESS_PERM, PERM_CONFIGURE, RES_EXCHANGE, exchange_declare,
            exchange, 0),
};
static const struct access_rule exchange_delete_perm[] = {
    NOT_DEFAULT(exchange_delete, exchange),
    PERM(PERM_CONFIGURE, RES_EXCHANGE, exchange_delete, exchange, 0),
};
/* Bindings: write on the destination, neither end the default exchange,
 * then read on the source. */
static const struct access_rule exchange_bind_perm[] = {
    PERM(PERM_WRITE, RES_EXCHANGE, exchange_bind, destination, 0),
    NOT_DEFAULT(exchange_bind, destination),
    NOT_DEFAULT(exchange_bind, source),
    PERM(PERM_READ, RES_EXCHANGE, exchange_bind, source, 0),
};
static const struct access_rule exchange_unbind_perm[] = {
    PERM(PERM_WRITE, RES_EXCHANGE, exchange_unbind, destination, 0),
    NOT_DEFAULT(exchange_unbind, destination),
    NOT_DEFAULT(exchange_unbind, source),
    PERM(PERM_READ, RES_EXCHANGE, exchange_unbind, source, 0),
};
/* A queue's name is checked before configure; a server-named one after
 * the server names it (handle_queue.c). */
static const struct access_rule queue_declare_perm[] = {
    DECLARE(ACCESS_NOT_RESERVED, 0, RES_QUEUE, queue_declare, queue, 0),
    DECLARE(ACCESS_PERM, PERM_CONFIGURE, RES_QUEUE, queue_declare, queue,
            ACCESS_SERVER_NAMED),
};
static const struct access_rule queue_bind_perm[] = {
    PERM(PERM_WRITE, RES_QUEUE, queue_bind, queue, ACCESS_LAST_QUEUE),
    NOT_DEFAULT(queue_bind, exchange),
    PERM(PERM_READ, RES_EXCHANGE, queue_bind, exchange, 0),
};
static const struct access_rule queue_unbind_perm[] = {
    PERM(PERM_WRITE, RES_QUEUE, queue_unbind, queue, ACCESS_LAST_QUEUE),
    NOT_DEFAULT(queue_unbind, exchange),
    PERM(PERM_READ, RES_EXCHANGE, queue_unbind, exchange, 0),
};
static const struct access_rule queue_purge_perm[] = {
    PERM(PERM_READ, RES_QUEUE, queue_purge, queue, ACCESS_LAST_QUEUE),
};
static const struct access_rule queue_delete_perm[] = {
    PERM(PERM_CONFIGURE, RES_QUEUE, queue_delete, queue, ACCESS_LAST_QUEUE),
};

#undef ARG
#undef PERM
#undef DECLARE
#undef NOT_DEFAULT

/* A method of channel 0, valid in 'states'. */
#define CONN(id, fn, states) { id, M_CHANNEL0, 0, states, { .conn = fn }, NULL }
/* A method on a channel, with 'flags', without or with permission
 * checks. */
#define CHAN(id, fn, flags)                                                   \
    { id, flags, 0, M_NEEDS_VHOST, { .channel = fn }, NULL }
#define CHAN_PERM(id, fn, flags, perm)                                        \
    { id, flags, NELEMS(perm), M_NEEDS_VHOST, { .channel = fn }, perm }

static const struct method_row rows[] = {
    /* The handshake, one method a state; close from tune on. */
    CONN(AMQP_CONNECTION_START_OK, handle_connection_start_ok,
         M_IN(CONN_START_SENT)),
    CONN(AMQP_CONNECTION_TUNE_OK, handle_connection_tune_ok,
         M_IN(CONN_TUNE_SENT)),
    CONN(AMQP_CONNECTION_OPEN, handle_connection_open,
         M_IN(CONN_AWAIT_OPEN)),
    CONN(AMQP_CONNECTION_CLOSE, handle_connection_close,
         M_IN(CONN_TUNE_SENT) | M_IN(CONN_AWAIT_OPEN) | M_NEEDS_VHOST),
    CONN(AMQP_CONNECTION_UPDATE_SECRET, handle_connection_update_secret,
         M_NEEDS_VHOST),

    CHAN(AMQP_CHANNEL_OPEN, handle_channel_open, 0),
    CHAN(AMQP_CHANNEL_FLOW, handle_channel_flow, 0),
    CHAN(AMQP_CHANNEL_FLOW_OK, handle_channel_flow_ok, 0),
    CHAN(AMQP_CHANNEL_CLOSE, handle_channel_close, 0),
    CHAN(AMQP_CHANNEL_CLOSE_OK, handle_channel_close_ok, 0),
    CHAN(AMQP_ACCESS_REQUEST, handle_access_request, 0),

    CHAN_PERM(AMQP_EXCHANGE_DECLARE, handle_exchange_declare, M_SYNCS_DEFS,
              exchange_declare_perm),
    CHAN_PERM(AMQP_EXCHANGE_DELETE, handle_exchange_delete, M_SYNCS_DEFS,
              exchange_delete_perm),
    CHAN_PERM(AMQP_EXCHANGE_BIND, handle_exchange_bind, M_SYNCS_DEFS,
              exchange_bind_perm),
    CHAN_PERM(AMQP_EXCHANGE_UNBIND, handle_exchange_unbind, M_SYNCS_DEFS,
              exchange_unbind_perm),

    CHAN_PERM(AMQP_QUEUE_DECLARE, handle_queue_declare, M_SYNCS_DEFS,
              queue_declare_perm),
    CHAN_PERM(AMQP_QUEUE_BIND, handle_queue_bind, M_SYNCS_DEFS,
              queue_bind_perm),
    CHAN_PERM(AMQP_QUEUE_UNBIND, handle_queue_unbind, M_SYNCS_DEFS,
              queue_unbind_perm),
    CHAN_PERM(AMQP_QUEUE_PURGE, handle_queue_purge, M_SYNCS_DEFS,
              queue_purge_perm),
    CHAN_PERM(AMQP_QUEUE_DELETE, handle_queue_delete, M_SYNCS_DEFS,
              queue_delete_perm),

    CHAN(AMQP_BASIC_QOS, handle_basic_qos, 0),
    CHAN_PERM(AMQP_BASIC_CONSUME, handle_basic_consume, 0, consume_perm),
    CHAN(AMQP_BASIC_CANCEL, handle_basic_cancel, 0),
    CHAN_PERM(AMQP_BASIC_PUBLISH, handle_basic_publish, M_CONTENT,
              publish_perm),
    CHAN_PERM(AMQP_BASIC_GET, handle_basic_get, 0, get_perm),
    CHAN(AMQP_BASIC_ACK, handle_basic_ack, 0),
    CHAN(AMQP_BASIC_NACK, handle_basic_nack, 0),
    CHAN(AMQP_BASIC_REJECT, handle_basic_reject, 0),
    CHAN(AMQP_BASIC_RECOVER_ASYNC, handle_basic_recover, 0),
    CHAN(AMQP_BASIC_RECOVER, handle_basic_recover, 0),

    CHAN(AMQP_TX_SELECT, handle_tx_select, 0),
    CHAN(AMQP_TX_COMMIT, handle_tx_commit, 0),
    CHAN(AMQP_TX_ROLLBACK, handle_tx_rollback, 0),
    CHAN(AMQP_CONFIRM_SELECT, handle_confirm_select, 0),
};

#undef CONN
#undef CHAN
#undef CHAN_PERM

/*
 * Where a method's row is: by class / 10 (the classes are 10, 20, ...
 * 90, and confirm's 85 is the 8th) and method index (all below 128),
 * the row's index + 1; 0 for none. Made from the table on first use,
 * when it also checks what the table promises.
 */
#define CLASS_SLOTS 10
#define METHOD_SLOTS 128
static uint8_t slot[CLASS_SLOTS][METHOD_SLOTS];
static bool indexed;

static void
index_rows(void)
{
    _Static_assert(NELEMS(rows) < 256, "rows do not fit a slot");
    for (size_t i = 0; i < NELEMS(rows); i++) {
        const struct method_row *r = &rows[i];
        unsigned cls = method_class(r->id) / 10, m = method_index(r->id);
        bool conn_class = method_class(r->id) == AMQP_CLASS_CONNECTION;
        if (cls >= CLASS_SLOTS || m >= METHOD_SLOTS || slot[cls][m] != 0 ||
            conn_class != ((r->flags & M_CHANNEL0) != 0) ||
            (!conn_class && r->states != M_NEEDS_VHOST))
            fatalx("methods.c: the row of %s is wrong", method_name(r->id));
        slot[cls][m] = (uint8_t)(i + 1);
    }
    indexed = true;
}

static const struct method_row *
row_of(uint32_t id)
{
    unsigned cls = method_class(id) / 10, m = method_index(id);

    if (__builtin_expect(!indexed, 0))
        index_rows();
    if (cls >= CLASS_SLOTS || m >= METHOD_SLOTS || slot[cls][m] == 0)
        return NULL;
    const struct method_row *r = &rows[slot[cls][m] - 1];
    return r->id == id ? r : NULL;
}

/* What each handshake state awaits, for the close that names it. */
static const uint32_t awaited[] = {
    [CONN_START_SENT] = AMQP_CONNECTION_START_OK,
    [CONN_TUNE_SENT] = AMQP_CONNECTION_TUNE_OK,
    [CONN_AWAIT_OPEN] = AMQP_CONNECTION_OPEN,
};

void
methods_conn(struct conn *c, const struct amqp_method *m)
{
    const struct method_row *r = row_of(m->id);

    if (r != NULL && (r->flags & M_CHANNEL0) && (r->states & M_IN(c->state))) {
        r->fn.conn(c, m);
        return;
    }
    /* As RabbitMQ: on an open connection only close and update-secret
     * are valid; a second open, a close-ok nobody asked for, a handshake
     * method or another class's is 504. Before, each state awaits one
     * method. */
    if (c->state == CONN_OPEN)
        conn_fail(c, AMQP_CHANNEL_ERROR, m->id,
                  "unexpected method in connection state running");
    else
        conn_fail(c, AMQP_COMMAND_INVALID, m->id, "expected %s, got %s",
                  method_name(c->state < NELEMS(awaited) ? awaited[c->state]
                                                         : 0),
                  method_name(m->id));
}

void
methods_channel(struct channel *ch, const struct amqp_method *m)
{
    const struct method_row *r = row_of(m->id);
    struct conn *c = ch->conn;

    if (r == NULL || (r->flags & M_CHANNEL0)) {
        if (method_class(m->id) == AMQP_CLASS_CONNECTION)
            conn_fail(c, AMQP_COMMAND_INVALID, m->id,
                      "%s is not valid on a channel", method_name(m->id));
        else
            conn_fail(c, AMQP_COMMAND_INVALID, m->id, "unexpected %s",
                      method_name(m->id));
        return;
    }
    if (r->nperm > 0 && !access_method(ch, m, r->perm, r->nperm))
        return;
    if (r->flags & M_SYNCS_DEFS) {
        /* A durable definition is synced before its -ok goes out. */
        uint64_t before = store_defs_written();
        r->fn.channel(ch, m);
        if (store_defs_written() != before)
            conn_hold_for_store(c);
        return;
    }
    r->fn.channel(ch, m);
    /* A handler refuses a content method by closing the channel or the
     * connection; otherwise its content follows. */
    if ((r->flags & M_CONTENT) && ch->state == CH_OPEN)
        channel_await_content(ch);
}
