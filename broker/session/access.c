/*
 * SPDX-License-Identifier: Apache-2.0
 * The permission checks: each method's rules (its row in methods.c) run
 * in order, the last resource allowed remembered per channel, and the
 * refusal with RabbitMQ's text.
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
name_allowed(struct channel *ch, uint32_t method_id,
             const struct access_rule *r, struct amqp_bytes name)
{
    char esc[300];

    if (r->check == ACCESS_NOT_DEFAULT && name.len == 0) {
        channel_fail(ch, AMQP_ACCESS_REFUSED, method_id,
                     "operation not permitted on the default exchange");
        return false;
    }
    if (r->check == ACCESS_NOT_RESERVED && name.len >= 4 &&
        memcmp(name.ptr, "amq.", 4) == 0) {
        channel_fail(ch, AMQP_ACCESS_REFUSED, method_id,
                     "queue name '%s' contains reserved prefix 'amq.*'",
                     channel_esc(esc, sizeof(esc), name));
        return false;
    }
    return true;
}

bool
access_method(struct channel *ch, const struct amqp_method *m,
              const struct access_rule *rules, size_t n)
{
    const char *args = (const char *)&m->a;

    for (size_t i = 0; i < n; i++) {
        const struct access_rule *r = &rules[i];
        if ((r->flags & ACCESS_PASSIVE_FREE) &&
            *(const bool *)(args + r->passive))
            continue;
        struct amqp_bytes name = *(const struct amqp_bytes *)(args + r->name);
        if (r->check != ACCESS_PERM) {
            if (!name_allowed(ch, m->id, r, name))
                return false;
            continue;
        }
        if (name.len == 0 && (r->flags & ACCESS_SERVER_NAMED))
            continue;
        if ((r->flags & ACCESS_REPLY_FREE) && reply_to_is_pseudo(name))
            continue;
        if (name.len == 0 && (r->flags & ACCESS_LAST_QUEUE))
            name = channel_last_queue(ch);
        if (!access_allows(ch, m->id, r->kind, r->res, name))
            return false;
    }
    return true;
}
