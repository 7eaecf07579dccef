/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of class exchange: declare, delete, bind, unbind. Reply codes
 * and texts follow RabbitMQ 3.x.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "amqp/table.h"
#include "broker/core/delayed.h"
#include "broker/core/exchange.h"
#include "broker/core/vhost.h"
#include "broker/session/access.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"

static bool
is_reserved(struct amqp_bytes name)
{
    return name.len >= 4 && memcmp(name.ptr, "amq.", 4) == 0;
}

static const char *
yes_no(bool b)
{
    return b ? "true" : "false";
}

static void
inequivalent(struct channel *ch, uint32_t mid, const char *arg,
             const char *got, const char *cur, const char *name)
{
    channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                 "inequivalent arg '%s' for exchange '%s' in vhost '%s': "
                 "received '%s' but current is '%s'",
                 arg, name, ch->conn->vh->name, got, cur);
}

void
handle_exchange_declare(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_exchange_declare *a = &m->a.exchange_declare;
    const uint32_t mid = AMQP_EXCHANGE_DECLARE;
    struct vhost *vh = ch->conn->vh;
    char esc[300], type[300];
    struct exchange *x;
    const struct exchange_ops *ops;

    channel_esc(esc, sizeof(esc), a->exchange);
    if (a->passive) {
        if (channel_find_exchange(ch, mid, a->exchange))
            channel_reply(ch, AMQP_EXCHANGE_DECLARE_OK, a->nowait);
        return;
    }
    ops = exchange_ops_find(a->type);
    if (ops == NULL) {
        conn_fail(ch->conn, AMQP_COMMAND_INVALID, mid,
                  "unknown exchange type '%s'",
                  channel_esc(type, sizeof(type), a->type));
        return;
    }
    /* The default exchange is refused before (access.c). */
    x = vhost_exchange(vh, a->exchange);
    if (x == NULL) {
        if (is_reserved(a->exchange)) {
            channel_fail(ch, AMQP_ACCESS_REFUSED, mid,
                         "exchange name '%s' contains reserved prefix 'amq.*'",
                         esc);
            return;
        }
        /* Creating it: an alternate exchange needs read on this one and
         * write on that one, as in RabbitMQ. */
        struct amqp_field ae;
        if (table_get(a->arguments, "alternate-exchange", &ae) &&
            ae.kind == AMQP_FIELD_LONGSTR &&
            (!access_allows(ch, mid, PERM_READ, RES_EXCHANGE, a->exchange) ||
             !access_allows(ch, mid, PERM_WRITE, RES_EXCHANGE, ae.v.str)))
            return;
        char xerr[400];
        int code;
        if (ops->check_args &&
            (code = ops->check_args(a->arguments, xerr, sizeof(xerr))) != 0) {
            if (code == AMQP_COMMAND_INVALID)
                conn_fail(ch->conn, code, mid, "%s", xerr);
            else
                channel_fail(ch, code, mid, "%s", xerr);
            return;
        }
        x = exchange_new(vh, a->exchange, ops, a->durable, a->auto_delete,
                         a->internal, a->arguments);
        vhost_add_exchange(vh, x);
    } else {
        static const char *const keys[] = { "alternate-exchange", NULL };
        char what[700], err[1024];
        if (x->ops != ops)
            inequivalent(ch, mid, "type", channel_esc(type, sizeof(type), a->type),
                         x->ops->type, esc);
        else if (x->durable != a->durable)
            inequivalent(ch, mid, "durable", yes_no(a->durable),
                         yes_no(x->durable), esc);
        else if (x->auto_delete != a->auto_delete)
            inequivalent(ch, mid, "auto_delete", yes_no(a->auto_delete),
                         yes_no(x->auto_delete), esc);
        else if (x->internal != a->internal)
            inequivalent(ch, mid, "internal", yes_no(a->internal),
                         yes_no(x->internal), esc);
        else {
            snprintf(what, sizeof(what), "exchange '%s' in vhost '%s'", esc,
                     vh->name);
            if (args_equivalent(x->args, a->arguments, keys, what, err,
                                sizeof(err)))
                goto ok;
            channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
        }
        return;
    }
ok:
    channel_reply(ch, AMQP_EXCHANGE_DECLARE_OK, a->nowait);
}

void
handle_exchange_delete(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_exchange_delete *a = &m->a.exchange_delete;
    const uint32_t mid = AMQP_EXCHANGE_DELETE;
    char esc[300];
    struct exchange *x;

    /* The default exchange is refused before (access.c). */
    channel_esc(esc, sizeof(esc), a->exchange);
    if (is_reserved(a->exchange)) {
        channel_fail(ch, AMQP_ACCESS_REFUSED, mid,
                     "deletion of system exchange '%s' in vhost '%s' not "
                     "allowed", esc, ch->conn->vh->name);
        return;
    }
    x = vhost_exchange(ch->conn->vh, a->exchange);
    if (x && a->if_unused && x->nbindings > 0) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                     "exchange '%s' in vhost '%s' in use", esc,
                     ch->conn->vh->name);
        return;
    }
    if (x) {
        vhost_remove_exchange(ch->conn->vh, x);
        exchange_free(x);
    }
    /* As RabbitMQ 3.x: deleting an exchange that does not exist is ok. */
    channel_reply(ch, AMQP_EXCHANGE_DELETE_OK, a->nowait);
}

/* exchange.bind and exchange.unbind share their arguments' layout. */
_Static_assert(sizeof(struct amqp_exchange_bind) ==
                   sizeof(struct amqp_exchange_unbind) &&
               offsetof(struct amqp_exchange_bind, arguments) ==
                   offsetof(struct amqp_exchange_unbind, arguments) &&
               offsetof(struct amqp_exchange_bind, routing_key) ==
                   offsetof(struct amqp_exchange_unbind, routing_key),
               "exchange.bind and exchange.unbind differ");
void
handle_exchange_bind(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_exchange_bind *a = &m->a.exchange_bind;
    const uint32_t mid = AMQP_EXCHANGE_BIND;
    struct exchange *src, *dest;
    char err[256];

    /* The default exchange is refused before (access.c). */
    if ((dest = channel_find_exchange(ch, mid, a->destination)) == NULL)
        return;
    if ((src = channel_find_exchange(ch, mid, a->source)) == NULL)
        return;
    if (exchange_bind(src, NULL, dest, a->routing_key, a->arguments, err,
                      sizeof(err)) != 0) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
        return;
    }
    channel_reply(ch, AMQP_EXCHANGE_BIND_OK, a->nowait);
}

/* As RabbitMQ 3.10: unbinding what is not bound is unbind-ok, also when
 * either exchange is gone (clients unbind in their cleanup). */
void
handle_exchange_unbind(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_exchange_bind *a =
        (const struct amqp_exchange_bind *)&m->a.exchange_unbind;
    struct exchange *dest = vhost_exchange(ch->conn->vh, a->destination);
    struct exchange *src = vhost_exchange(ch->conn->vh, a->source);

    if (dest != NULL && src != NULL)
        (void)exchange_unbind(src, NULL, dest, a->routing_key, a->arguments);
    channel_reply(ch, AMQP_EXCHANGE_UNBIND_OK, a->nowait);
}
