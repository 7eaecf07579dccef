/*
 * SPDX-License-Identifier: Apache-2.0
 * `roostd --check-data DIR`: verify a data directory offline and say
 * what it holds, without changing it (docs/storage.md has the format).
 */
#ifndef ROOST_BROKER_STORE_CHECK_H
#define ROOST_BROKER_STORE_CHECK_H

#include <stdio.h>

/*
 * Lock 'dir' as roostd does (a running broker's directory is refused,
 * naming its pid), read defs.snap, defs.log and every journal segment with
 * the record reader, and print to 'out', per file, its records by type and
 * every torn tail or corrupt record with its offset; then what recovery
 * would rebuild: vhosts, exchanges, queues and bindings, and messages
 * and their queue entries.
 *
 * The definitions are replayed into broker.vhosts exactly as recovery
 * replays them, and freed again before returning: broker.vhosts must be
 * empty and broker.base must exist (queue timers). Returns 0 if nothing
 * is corrupt, 1 if something is, 2 if the directory cannot be checked
 * (the reason is written to stderr).
 */
int store_check_data(const char *dir, FILE *out);

#endif
