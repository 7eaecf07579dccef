/*
 * SPDX-License-Identifier: Apache-2.0
 * The pager thread: reads paged message records back from the journal
 * (dir/msgs) and the scratch area (dir/scratch), and writes transient
 * messages to the scratch area, so that the event loop never waits for
 * a read. It is not the I/O thread: that one must keep syncing while a
 * backlog is read back. Jobs run one at a time, in the order given; each
 * comes back to the loop, done, through a pipe the loop watches.
 *
 * The scratch area is never synced and holds nothing a restart needs:
 * it is wiped when the store opens.
 */
#ifndef ROOST_BROKER_STORE_PAGER_H
#define ROOST_BROKER_STORE_PAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "broker/core/store.h"   /* struct pager_job */
#include "broker/store/record.h"

/* Start the thread on data directory 'dir'; empties dir/scratch. */
int pager_start(const char *dir);


/* Hand over a job; 'done' is called on the loop thread once it ran. */
void pager_submit(struct pager_job *j);

/* Stop the thread once it ran every job it was given, and hand those
 * back ('done'); then empty the scratch area. */
void pager_stop(void);

/* The scratch area's directory ("dir/scratch"). */
const char *pager_scratch_dir(void);

#endif
