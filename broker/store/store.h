/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The local store: durable definitions and persistent messages in the
 * data directory's segment journal (docs/storage.md has the format), one
 * implementation of the core's store table (broker/core/store.h, which
 * says what each entry does). What only the journal has is here: opening
 * a data directory and the pieces of it offline tools use.
 *
 * The store collects what changes into an open batch; whenever its I/O
 * thread is idle, the open batch is serialised and handed over, and the
 * thread appends it to the journal (and the definitions log), syncs, and
 * reports back. So many publishes share one fdatasync: the batch is
 * whatever arrived while the previous sync ran.
 */
#ifndef ROOST_BROKER_STORE_STORE_H
#define ROOST_BROKER_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/core/store.h"

struct config;

extern const struct store_ops store_journal_ops;

/*
 * Lock the data directory (flock: a second roostd gets -1 and a message
 * naming the holder's pid), check or write its format version, and start
 * the I/O thread; the journal is then the store in use (store_use).
 * -1 with a message in 'err' on failure.
 */
int store_open(const char *dir, const struct config *cfg, char *err,
               size_t errlen);

/* After store_recover: whether the data directory was new (no FORMAT,
 * no definitions, no journal), the one start at which the default
 * user is made. */
bool store_is_new(void);

/* --accept-data-loss: before store_recover, let recovery go on over
 * damaged or missing definitions (it stops the start otherwise),
 * dropping the journal's records they no longer hold. */
void store_accept_data_loss(bool yes);

/* A piece of store_open, for offline tools: lock 'dir' (returns the
 * lock's fd). */
int store_lock_dir(const char *dir, char *err, size_t errlen);

/* Called now and then while store_recover runs (each segment read, each
 * 64 Ki entries restored) with where it is: roostd tells systemd the
 * start is still going (notify.h). NULL: nobody. */
void store_on_recovery_progress(void (*cb)(const char *status));

/* Read the whole file 'path' into '*out' (with room for a NUL after
 * its '*len' bytes; the caller frees it). 1 if read, 0 if there is no
 * such file, -1 with errno if it cannot be read. */
int store_read_file(const char *path, uint8_t **out, size_t *len);

/* fsync directory 'dir' (what was made, renamed or deleted in it is
 * durable): 0, or -1 with errno. */
int store_sync_dir(const char *dir);

#endif
