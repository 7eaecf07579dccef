/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The one place that announces definition changes (defs.h): each goes
 * to every listener, in the order they registered.
 */
#include "broker/core/defs.h"

#include <stddef.h>

#include "broker/lib/log.h"

static int quiet;
static struct {
    defs_listener_fn *fn;
    void *arg;
} listeners[DEFS_MAX_LISTENERS];
static size_t nlisteners;

void
defs_changed(enum defs_event ev, const void *obj)
{
    if (quiet != 0)
        return;
    for (size_t i = 0; i < nlisteners; i++)
        listeners[i].fn(ev, obj, listeners[i].arg);
}

void
defs_listen(defs_listener_fn *fn, void *arg)
{
    if (nlisteners == DEFS_MAX_LISTENERS)
        fatalx("defs_listen: more than %d listeners", DEFS_MAX_LISTENERS);
    listeners[nlisteners].fn = fn;
    listeners[nlisteners].arg = arg;
    nlisteners++;
}

void
defs_unlisten(defs_listener_fn *fn, void *arg)
{
    for (size_t i = 0; i < nlisteners; i++)
        if (listeners[i].fn == fn && listeners[i].arg == arg) {
            for (nlisteners--; i < nlisteners; i++)
                listeners[i] = listeners[i + 1];
            return;
        }
}

void
defs_quiet(bool on)
{
    quiet += on ? 1 : -1;
}
