/*
 * The one place that announces definition changes: it hands each to the
 * store, which keeps the durable ones (store/defs_log.c).
 */
#include "broker/core/defs.h"

#include "broker/store/store_defs.h"

static int quiet;

void
defs_changed(enum defs_event ev, const void *obj)
{
    if (quiet == 0)
        store_defs_changed(ev, obj);
}

void
defs_quiet(bool on)
{
    quiet += on ? 1 : -1;
}
