/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * What the core and the store ask of the session above them. The core
 * never includes a session header (docs/architecture.md, the rule): the
 * session fills this table once at start (conn_install_hooks), and the
 * core calls through it. Until then (unit tests that drive the core
 * alone) every hook does nothing and counts 0.
 */
#ifndef ROOST_BROKER_HOOKS_H
#define ROOST_BROKER_HOOKS_H

#include <stdint.h>

struct conn;
struct msg_stats;
struct qentry;
struct queue;
struct vhost;

struct session_hooks {
    /* close every connection to 'vh', or of user 'name', with
     * connection.close 320 and 'reason' */
    void (*close_vhost)(struct vhost *vh, const char *reason);
    void (*close_user)(const char *name, const char *reason);
    /* 'q', exclusive to 'owner', is deleted */
    void (*disown_queue)(struct conn *owner, struct queue *q);
    /* the alarms cleared: blocked publishers go on */
    void (*unblock_publishers)(void);
    /* bytes held in every connection's output */
    uint64_t (*buffer_bytes)(void);
    /* open connections */
    uint64_t (*count)(void);
    /* the stats tick: each connection and channel samples its rates */
    void (*sample_all)(void);
    /* every open channel's message counters, added into 'out' */
    void (*add_channel_stats)(struct msg_stats *out);
    /* 'fn' for each delivery a channel holds unacked (compaction) */
    void (*foreach_unacked)(void (*fn)(struct queue *q, struct qentry *e,
                                       void *arg), void *arg);
};

extern struct session_hooks session_hooks;

#endif
