/*
 * Virtual hosts and the exchanges every vhost starts with.
 */
#include "broker/vhost.h"

#include <stdlib.h>
#include <string.h>

#include "broker/defs.h"
#include "broker/exchange.h"
#include "broker/queue.h"
#include "broker/util.h"

static const struct {
    const char *name;
    const struct exchange_ops *ops;
} predeclared[] = {
    { "amq.direct", &exchange_direct_ops },
    { "amq.fanout", &exchange_fanout_ops },
    { "amq.topic", &exchange_topic_ops },
    { "amq.headers", &exchange_headers_ops },
    { "amq.match", &exchange_headers_ops },
};

struct vhost *
vhost_new(const char *name)
{
    struct vhost *vh = xcalloc(1, sizeof(*vh));
    struct amqp_table none = { NULL, 0 };

    vh->name = xstrdup(name);
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
                                            false, none));
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
    free(vh->name);
    free(vh);
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
    defs_changed(DEFS_QUEUE_ADDED, q);
}

void
vhost_remove_queue(struct vhost *vh, struct queue *q)
{
    defs_changed(DEFS_QUEUE_REMOVED, q);
    hmap_del(&vh->queues, q->name, q->name_len);
}
