/*
 * SPDX-License-Identifier: Apache-2.0
 * Telling systemd how roostd is doing (a unit of Type=notify): READY=1
 * once recovery is done and the listeners are up, RELOADING=1 and
 * READY=1 around a SIGHUP reload, STOPPING=1 at shutdown,
 * EXTEND_TIMEOUT_USEC while a long recovery runs, and WATCHDOG=1 from the
 * event loop when the unit has WatchdogSec. Nothing is sent unless
 * $NOTIFY_SOCKET is set.
 */
#ifndef ROOST_BROKER_NOTIFY_H
#define ROOST_BROKER_NOTIFY_H

#include <stdbool.h>

struct event_base;

/* Read $NOTIFY_SOCKET and $WATCHDOG_USEC. */
void notify_init(void);

/* Send one state: "KEY=VALUE" lines, printf-style. Failure is logged
 * once. */
void notify_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Recovery is under way ('status' says where): at most once a second,
 * ask for 30 s more of start timeout (and pet the watchdog). */
void notify_recovering(const char *status);

/* WATCHDOG=1 at half of $WATCHDOG_USEC, from the loop. */
void notify_watchdog_start(struct event_base *base);

void notify_shutdown(void);

#endif
