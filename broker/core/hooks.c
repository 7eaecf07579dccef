/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The session hooks (hooks.h) before the session fills them: nothing to
 * close, unblock, sample or count.
 */
#include "broker/core/hooks.h"

#include <stddef.h>

static void
no_close_vhost(struct vhost *vh, const char *reason)
{
    (void)vh;
    (void)reason;
}

static void
no_close_user(const char *name, const char *reason)
{
    (void)name;
    (void)reason;
}

static void
no_disown(struct conn *owner, struct queue *q)
{
    (void)owner;
    (void)q;
}

static void
no_op(void)
{
}

static uint64_t
zero(void)
{
    return 0;
}

static void
no_stats(struct msg_stats *out)
{
    (void)out;
}

static void
no_unacked(void (*fn)(struct queue *q, struct qentry *e, void *arg),
           void *arg)
{
    (void)fn;
    (void)arg;
}

struct session_hooks session_hooks = {
    .close_vhost = no_close_vhost,
    .close_user = no_close_user,
    .disown_queue = no_disown,
    .unblock_publishers = no_op,
    .buffer_bytes = zero,
    .count = zero,
    .sample_all = no_op,
    .add_channel_stats = no_stats,
    .foreach_unacked = no_unacked,
};
