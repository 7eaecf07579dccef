/*
 * SPDX-License-Identifier: Apache-2.0
 * The consumer names of streams (broker/core/stream.h) on disk: one
 * small file per stream, dir/offsets/<queue id>, of J_OFFSET records
 * (journal.h), each save replacing the whole file (written beside it,
 * synced, renamed over it, the directory synced) on the pager thread.
 * A crash leaves the last file renamed in, whole: never a later offset
 * than was saved. A stream's file goes with the stream.
 */
#ifndef ROOST_BROKER_STORE_OFFSETS_H
#define ROOST_BROKER_STORE_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "broker/core/store.h"

struct queue;

/* The job that writes 'v' (all 'n' names of stream 'sid'), or deletes
 * its file; 'done' frees it (and logs a failure). */
struct pager_job *offsets_save_job(uint32_t sid, const struct stream_offset *v,
                                   size_t n);
struct pager_job *offsets_forget_job(uint32_t sid);

/* On the pager thread: run such a job over data directory 'dir'. */
void offsets_run(struct pager_job *j, const char *dir);

/* Recovery: hand each stream its names (stream_restore_offset), 'find'
 * naming the stream of a queue id (NULL if none: its file is a
 * leftover, deleted); a record that does not check out is skipped and
 * logged. Returns how many names were restored. */
size_t offsets_load(const char *dir,
                    struct queue *(*find)(uint32_t sid, void *arg), void *arg);

#endif
