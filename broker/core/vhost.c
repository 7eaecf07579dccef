/*
 * SPDX-License-Identifier: Apache-2.0
 * Virtual hosts and the exchanges every vhost starts with.
 */
#include "broker/core/vhost.h"
#include "broker/core/hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/broker.h"
#include "broker/core/defs.h"
#include "broker/core/exchange.h"
#include "broker/core/msg.h"
#include "broker/core/perm.h"
#include "broker/core/policy.h"
#include "broker/core/queue.h"
#include "broker/core/stats.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

/* As rabbit_vhost.erl declares them: all durable; the firehose's
 * exchange (trace.h) internal. */
static const struct {
    const char *name;
    const struct exchange_ops *ops;
    bool internal;
} predeclared[] = {
    { "amq.direct", &exchange_direct_ops, false },
    { "amq.fanout", &exchange_fanout_ops, false },
    { "amq.topic", &exchange_topic_ops, false },
    { "amq.headers", &exchange_headers_ops, false },
    { "amq.match", &exchange_headers_ops, false },
    { TRACE_EXCHANGE, &exchange_topic_ops, true },
};

struct vhost *
vhost_new(const char *name)
{
    struct vhost *vh = xcalloc(1, sizeof(*vh));
    struct amqp_table none = { NULL, 0 };

    vh->name = xstrdup(name);
    vh->description = xstrdup("");
    vh->tags = xstrdup("");
    vh->max_connections = -1;
    vh->max_queues = -1;
    /* The predeclared exchanges exist in every vhost: nothing to store. */
    defs_quiet(true);
    hmap_init(&vh->exchanges);
    hmap_init(&vh->queues);
    vh->default_x = exchange_new(vh, amqp_cstr(""), &exchange_direct_ops,
                                 true, false, false, none);
    vh->default_x->is_default = true;
    vhost_add_exchange(vh, vh->default_x);
    for (size_t i = 0; i < NELEMS(predeclared); i++)
        vhost_add_exchange(vh, exchange_new(vh, amqp_cstr(predeclared[i].name),
                                            predeclared[i].ops, true, false,
                                            predeclared[i].internal, none));
    defs_quiet(false);
    return vh;
}

void
vhost_free(struct vhost *vh)
{
    size_t pos = 0;
    struct hmap_slot *s;
    struct queue **qs = xmalloc((vh->queues.count + 1) * sizeof(*qs));
    size_t n = 0;

    while ((s = hmap_next(&vh->queues, &pos)) != NULL)
        qs[n++] = s->val;
    for (size_t i = 0; i < n; i++)
        queue_delete(qs[i]);
    free(qs);
    /* Exchanges: unbind everything first, then free, so that no binding
     * points at a freed exchange. */
    pos = 0;
    while ((s = hmap_next(&vh->exchanges, &pos)) != NULL) {
        struct exchange *x = s->val;
        x->auto_delete = false;
    }
    pos = 0;
    while ((s = hmap_next(&vh->exchanges, &pos)) != NULL) {
        struct exchange *x = s->val;
        while (!TAILQ_EMPTY(&x->bindings))
            binding_free(TAILQ_FIRST(&x->bindings));
    }
    pos = 0;
    while ((s = hmap_next(&vh->exchanges, &pos)) != NULL)
        exchange_free(s->val);
    hmap_destroy(&vh->exchanges);
    hmap_destroy(&vh->queues);
    policy_free_vhost(vh);
    free(vh->name);
    free(vh->description);
    free(vh->tags);
    free(vh);
}

struct vhost *
vhost_create(const char *name, bool quiet)
{
    struct vhost *vh = broker_vhost(name, strlen(name));
    if (vh != NULL)
        return vh;
    vh = vhost_new(name);
    hmap_put(&broker.vhosts, vh->name, strlen(vh->name), vh);
    if (!quiet)
        defs_changed(DEFS_VHOST_ADDED, vh);
    return vh;
}

void
vhost_set_meta(struct vhost *vh, const char *description, const char *tags,
               bool quiet)
{
    free(vh->description);
    free(vh->tags);
    vh->description = xstrdup(description);
    vh->tags = xstrdup(tags);
    if (!quiet)
        defs_changed(DEFS_VHOST_ADDED, vh);
}

bool
vhost_limit_named(const char *name, enum vhost_limit *l)
{
    if (strcmp(name, "max-connections") == 0)
        *l = VHOST_MAX_CONNECTIONS;
    else if (strcmp(name, "max-queues") == 0)
        *l = VHOST_MAX_QUEUES;
    else
        return false;
    return true;
}

static int64_t *
limit_of(struct vhost *vh, enum vhost_limit l)
{
    return l == VHOST_MAX_CONNECTIONS ? &vh->max_connections
                                      : &vh->max_queues;
}

int64_t
vhost_limit(const struct vhost *vh, enum vhost_limit l)
{
    return *limit_of((struct vhost *)vh, l);
}

void
vhost_set_limit(struct vhost *vh, enum vhost_limit l, int64_t value,
                bool quiet)
{
    *limit_of(vh, l) = value < 0 ? -1 : value;
    if (!quiet)
        defs_changed(DEFS_VHOST_ADDED, vh);
}

bool
vhost_delete(const char *name)
{
    struct vhost *vh = broker_vhost(name, strlen(name));
    char reason[400];

    if (vh == NULL)
        return false;
    /* Its connections first, as RabbitMQ does: their channels let go of
     * its queues (closing shuts them at once). */
    snprintf(reason, sizeof(reason), "vhost '%s' is deleted", name);
    session_hooks.close_vhost(vh, reason);
    perm_drop_vhost(name, false);
    /* Then everything in it, each deletion recorded as when a client
     * makes it, so that the store drops the queues' messages. */
    size_t pos = 0, n = 0;
    struct hmap_slot *s;
    struct queue **qs = xmalloc((vh->queues.count + 1) * sizeof(*qs));
    while ((s = hmap_next(&vh->queues, &pos)) != NULL)
        qs[n++] = s->val;
    for (size_t i = 0; i < n; i++)
        queue_delete(qs[i]);
    free(qs);
    defs_changed(DEFS_VHOST_REMOVED, vh);
    hmap_del(&broker.vhosts, vh->name, strlen(vh->name));
    /* The exchanges and bindings go with the vhost record: replaying
     * it frees them (store/defs_log.c). */
    defs_quiet(true);
    vhost_free(vh);
    defs_quiet(false);
    return true;
}

void
vhost_foreach(void (*fn)(struct vhost *vh, void *arg), void *arg)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL)
        fn(s->val, arg);
}

void
vhost_foreach_queue(struct vhost *vh, void (*fn)(struct queue *q, void *arg),
                    void *arg)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&vh->queues, &pos)) != NULL)
        fn(s->val, arg);
}

void
vhost_foreach_exchange(struct vhost *vh,
                       void (*fn)(struct exchange *x, void *arg), void *arg)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&vh->exchanges, &pos)) != NULL)
        fn(s->val, arg);
}

void
vhost_channel_gone(struct vhost *vh, const struct msg_stats *ms)
{
    msg_stats_add(&vh->channels_gone, ms);
}

static void
sample_queue(struct queue *q, void *arg)
{
    (void)arg;
    queue_sample(q);
}

static void
sample_exchange(struct exchange *x, void *arg)
{
    (void)arg;
    stats_sample(&x->series, x->ms.n, MS_COUNT);
}

static void
sample_vhost(struct vhost *vh, void *arg)
{
    vhost_foreach_queue(vh, sample_queue, arg);
    vhost_foreach_exchange(vh, sample_exchange, arg);
}

void
vhost_sample_all(void)
{
    vhost_foreach(sample_vhost, NULL);
}

size_t
vhost_exchange_count(const struct vhost *vh)
{
    return vh->exchanges.count;
}

void
vhost_totals(const struct vhost *vh, uint64_t *queues, uint64_t *ready,
             uint64_t *unacked)
{
    size_t pos = 0;
    struct hmap_slot *s;
    *queues = vh->queues.count;
    *ready = *unacked = 0;
    while ((s = hmap_next(&vh->queues, &pos)) != NULL) {
        const struct queue *q = s->val;
        *ready += queue_ready_count(q);
        *unacked += queue_unacked_count(q);
    }
}

struct exchange *
vhost_exchange(struct vhost *vh, struct amqp_bytes name)
{
    return hmap_get(&vh->exchanges, name.ptr, name.len);
}

struct queue *
vhost_queue(struct vhost *vh, struct amqp_bytes name)
{
    return hmap_get(&vh->queues, name.ptr, name.len);
}

void
vhost_add_exchange(struct vhost *vh, struct exchange *x)
{
    hmap_put(&vh->exchanges, x->name, x->name_len, x);
    defs_changed(DEFS_EXCHANGE_ADDED, x);
    if (vh->policies)
        policy_apply_exchange(x);
}

void
vhost_remove_exchange(struct vhost *vh, struct exchange *x)
{
    defs_changed(DEFS_EXCHANGE_REMOVED, x);
    hmap_del(&vh->exchanges, x->name, x->name_len);
}

void
vhost_add_queue(struct vhost *vh, struct queue *q)
{
    hmap_put(&vh->queues, q->name, q->name_len, q);
    stats_churn.queues_created++;
    defs_changed(DEFS_QUEUE_ADDED, q);
    if (vh->policies)
        policy_apply_queue(q);
}

void
vhost_remove_queue(struct vhost *vh, struct queue *q)
{
    defs_changed(DEFS_QUEUE_REMOVED, q);
    stats_churn.queues_deleted++;
    hmap_del(&vh->queues, q->name, q->name_len);
}

void
trace_set(struct vhost *vh, bool on)
{
    if (vh->tracing == on)
        log_info("Tracing is already %s for vhost '%s'",
                 on ? "enabled" : "disabled", vh->name);
    else
        log_info("%s tracing for vhost '%s'", on ? "Enabling" : "Disabling",
                 vh->name);
    vh->tracing = on;
}
