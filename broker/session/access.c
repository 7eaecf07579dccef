/*
 * SPDX-License-Identifier: Apache-2.0
 * The permission table: for each method, which permission it needs on
 * which of its arguments, in the order RabbitMQ checks them.
 */
#include "broker/session/access.h"

#include <stddef.h>
#include <string.h>

#include "broker/core/vhost.h"
#include "broker/lib/util.h"
#include "broker/session/channel.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"
#include "broker/session/reply_to.h"

enum {
    R_PASSIVE_FREE = 1,     /* a passive declare needs nothing */
    R_LAST_QUEUE = 2,       /* an empty name is the channel's last queue */
    R_SERVER_NAMED = 4,     /* an empty name: the handler checks the name
                             * it makes */
    R_REPLY_FREE = 8,       /* the direct reply-to pseudo-queue needs
                             * nothing (RabbitMQ checks none) */
};

/* Besides permissions, two refusals RabbitMQ makes among them, in its
 * order: no operation on the default exchange, no new queue named amq.* */
enum check { C_PERM, C_NOT_DEFAULT, C_NOT_RESERVED };

#define ARG(method, field) offsetof(union amqp_method_args, method.field)

static const struct rule {
    uint32_t method;
    enum check check;
    enum perm_kind kind;
    enum access_res res;
    size_t name;            /* the struct amqp_bytes naming the resource */
    size_t passive;         /* the bool, with R_PASSIVE_FREE */
    unsigned flags;
} rules[] = {
#define PERM(m, k, r, f, fl) { m, C_PERM, k, r, f, 0, fl }
#define DECLARE(m, c, k, r, f, p, fl) { m, c, k, r, f, p, R_PASSIVE_FREE | fl }
#define NOT_DEFAULT(m, f) { m, C_NOT_DEFAULT, 0, RES_EXCHANGE, f, 0, 0 }
    /* The hot one first. */
    PERM(AMQP_BASIC_PUBLISH, PERM_WRITE, RES_EXCHANGE,
         ARG(basic_publish, exchange), 0),
    PERM(AMQP_BASIC_CONSUME, PERM_READ, RES_QUEUE,
         ARG(basic_consume, queue), R_LAST_QUEUE | R_REPLY_FREE),
    PERM(AMQP_BASIC_GET, PERM_READ, RES_QUEUE,
         ARG(basic_get, queue), R_LAST_QUEUE),
    /* Even a passive declare of the default exchange is refused. */
    NOT_DEFAULT(AMQP_EXCHANGE_DECLARE, ARG(exchange_declare, exchange)),
    DECLARE(AMQP_EXCHANGE_DECLARE, C_PERM, PERM_CONFIGURE, RES_EXCHANGE,
            ARG(exchange_declare, exchange), ARG(exchange_declare, passive),
            0),
    NOT_DEFAULT(AMQP_EXCHANGE_DELETE, ARG(exchange_delete, exchange)),
    PERM(AMQP_EXCHANGE_DELETE, PERM_CONFIGURE, RES_EXCHANGE,
         ARG(exchange_delete, exchange), 0),
    /* Bindings: write on the destination, neither end the default
     * exchange, then read on the source. */
    PERM(AMQP_EXCHANGE_BIND, PERM_WRITE, RES_EXCHANGE,
         ARG(exchange_bind, destination), 0),
    NOT_DEFAULT(AMQP_EXCHANGE_BIND, ARG(exchange_bind, destination)),
    NOT_DEFAULT(AMQP_EXCHANGE_BIND, ARG(exchange_bind, source)),
    PERM(AMQP_EXCHANGE_BIND, PERM_READ, RES_EXCHANGE,
         ARG(exchange_bind, source), 0),
    PERM(AMQP_EXCHANGE_UNBIND, PERM_WRITE, RES_EXCHANGE,
         ARG(exchange_unbind, destination), 0),
    NOT_DEFAULT(AMQP_EXCHANGE_UNBIND, ARG(exchange_unbind, destination)),
    NOT_DEFAULT(AMQP_EXCHANGE_UNBIND, ARG(exchange_unbind, source)),
    PERM(AMQP_EXCHANGE_UNBIND, PERM_READ, RES_EXCHANGE,
         ARG(exchange_unbind, source), 0),
    /* A queue's name is checked before configure; a server-named one
     * after the server names it (handle_queue.c). */
    DECLARE(AMQP_QUEUE_DECLARE, C_NOT_RESERVED, 0, RES_QUEUE,
            ARG(queue_declare, queue), ARG(queue_declare, passive), 0),
    DECLARE(AMQP_QUEUE_DECLARE, C_PERM, PERM_CONFIGURE, RES_QUEUE,
            ARG(queue_declare, queue), ARG(queue_declare, passive),
            R_SERVER_NAMED),
    PERM(AMQP_QUEUE_BIND, PERM_WRITE, RES_QUEUE,
         ARG(queue_bind, queue), R_LAST_QUEUE),
    NOT_DEFAULT(AMQP_QUEUE_BIND, ARG(queue_bind, exchange)),
    PERM(AMQP_QUEUE_BIND, PERM_READ, RES_EXCHANGE,
         ARG(queue_bind, exchange), 0),
    PERM(AMQP_QUEUE_UNBIND, PERM_WRITE, RES_QUEUE,
         ARG(queue_unbind, queue), R_LAST_QUEUE),
    NOT_DEFAULT(AMQP_QUEUE_UNBIND, ARG(queue_unbind, exchange)),
    PERM(AMQP_QUEUE_UNBIND, PERM_READ, RES_EXCHANGE,
         ARG(queue_unbind, exchange), 0),
    PERM(AMQP_QUEUE_PURGE, PERM_READ, RES_QUEUE,
         ARG(queue_purge, queue), R_LAST_QUEUE),
    PERM(AMQP_QUEUE_DELETE, PERM_CONFIGURE, RES_QUEUE,
         ARG(queue_delete, queue), R_LAST_QUEUE),
#undef PERM
#undef DECLARE
#undef NOT_DEFAULT
};

static const char *const res_name[] = {
    [RES_EXCHANGE] = "exchange", [RES_QUEUE] = "queue",
};

/* The connection's permissions in its vhost, looked up again only after
 * a change to any. */
static const struct perm *
conn_perm(struct conn *c)
{
    if (c->perm_seen != perm_epoch + 1) {
        c->perm = perm_get(c->vh->name, c->user);
        c->perm_seen = perm_epoch + 1;
    }
    return c->perm;
}

bool
access_vhost(struct conn *c, const char *vhost)
{
    return perm_get(vhost, c->user) != NULL;
}

bool
access_allows(struct channel *ch, uint32_t method_id, enum perm_kind kind,
              enum access_res res, struct amqp_bytes name)
{
    struct access_memo *memo = &ch->access_memo;
    char esc[300];

    if (res == RES_EXCHANGE && name.len == 0)
        name = amqp_cstr("amq.default");
    /* A publisher sends to the same exchange again and again: remember
     * the last name allowed until permissions change. */
    if (memo->epoch == perm_epoch + 1 && memo->kind == kind &&
        memo->res == res && memo->len == name.len &&
        memcmp(memo->name, name.ptr, name.len) == 0)
        return true;
    if (perm_allows(conn_perm(ch->conn), kind, (const char *)name.ptr,
                    name.len)) {
        if (name.len <= sizeof(memo->name)) {
            memcpy(memo->name, name.ptr, name.len);
            memo->len = (uint8_t)name.len;
            memo->kind = (uint8_t)kind;
            memo->res = (uint8_t)res;
            memo->epoch = perm_epoch + 1;
        }
        return true;
    }
    channel_fail(ch, AMQP_ACCESS_REFUSED, method_id,
                 "access to %s '%s' in vhost '%s' refused for user '%s'",
                 res_name[res], channel_esc(esc, sizeof(esc), name),
                 ch->conn->vh->name, ch->conn->user);
    return false;
}

/* The refusals that are not permissions; true if 'name' passes. */
static bool
name_allowed(struct channel *ch, const struct rule *r, struct amqp_bytes name)
{
    char esc[300];

    if (r->check == C_NOT_DEFAULT && name.len == 0) {
        channel_fail(ch, AMQP_ACCESS_REFUSED, r->method,
                     "operation not permitted on the default exchange");
        return false;
    }
    if (r->check == C_NOT_RESERVED && name.len >= 4 &&
        memcmp(name.ptr, "amq.", 4) == 0) {
        channel_fail(ch, AMQP_ACCESS_REFUSED, r->method,
                     "queue name '%s' contains reserved prefix 'amq.*'",
                     channel_esc(esc, sizeof(esc), name));
        return false;
    }
    return true;
}

bool
access_method(struct channel *ch, const struct amqp_method *m)
{
    const char *args = (const char *)&m->a;

    for (size_t i = 0; i < NELEMS(rules); i++) {
        const struct rule *r = &rules[i];
        if (r->method != m->id)
            continue;
        if ((r->flags & R_PASSIVE_FREE) && *(const bool *)(args + r->passive))
            continue;
        struct amqp_bytes name = *(const struct amqp_bytes *)(args + r->name);
        if (r->check != C_PERM) {
            if (!name_allowed(ch, r, name))
                return false;
            continue;
        }
        if (name.len == 0 && (r->flags & R_SERVER_NAMED))
            continue;
        if ((r->flags & R_REPLY_FREE) && reply_to_is_pseudo(name))
            continue;
        if (name.len == 0 && (r->flags & R_LAST_QUEUE))
            name = channel_last_queue(ch);
        if (!access_allows(ch, m->id, r->kind, r->res, name))
            return false;
    }
    return true;
}
