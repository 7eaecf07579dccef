/*
 * SPDX-License-Identifier: Apache-2.0
 * Definitions announce every change from one place: a vhost, exchange,
 * queue, binding, user, permission or policy was added (or replaced) or
 * removed, as one typed event (enum defs_event and the object) to every
 * listener registered with defs_listen: the store, which writes the
 * durable ones to disk (store/defs_log.c); replication and a change feed
 * later.
 * The objects are passed while still valid: an addition after it is
 * complete, a removal before it is freed.
 */
#ifndef ROOST_BROKER_DEFS_H
#define ROOST_BROKER_DEFS_H

#include <stdbool.h>

enum defs_event {
    DEFS_VHOST_ADDED, DEFS_VHOST_REMOVED,
    DEFS_EXCHANGE_ADDED, DEFS_EXCHANGE_REMOVED,
    DEFS_QUEUE_ADDED, DEFS_QUEUE_REMOVED,
    DEFS_BINDING_ADDED, DEFS_BINDING_REMOVED,
    DEFS_USER_ADDED, DEFS_USER_REMOVED,
    DEFS_PERM_ADDED, DEFS_PERM_REMOVED,
    DEFS_POLICY_ADDED, DEFS_POLICY_REMOVED,
};

/* 'obj' is a struct vhost, exchange, queue, binding, user, perm or
 * policy. */
void defs_changed(enum defs_event ev, const void *obj);

/* A listener of definition changes. At most DEFS_MAX_LISTENERS; one
 * more is a programming error (it aborts). */
#define DEFS_MAX_LISTENERS 8
typedef void defs_listener_fn(enum defs_event ev, const void *obj,
                              void *arg);
void defs_listen(defs_listener_fn *fn, void *arg);
/* Remove the listener 'fn' with 'arg' (nothing if it is not there). */
void defs_unlisten(defs_listener_fn *fn, void *arg);

/* While loading definitions (recovery, import), changes are not
 * announced: they are already on disk, or written once at the end. */
void defs_quiet(bool quiet);

#endif
