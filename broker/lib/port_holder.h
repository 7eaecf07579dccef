/* SPDX-License-Identifier: Apache-2.0 */
#ifndef ROOST_PORT_HOLDER_H
#define ROOST_PORT_HOLDER_H

#include <stdbool.h>
#include <stddef.h>

/* Who listens on TCP 'port' (IPv4 or IPv6, any address), read from
 * /proc/net/tcp{,6} and the descriptors under /proc: writes
 * "NAME (pid N)" into 'out' and returns true; false when no listener is
 * found or its process cannot be seen (another user's, without root),
 * and then 'out' says which of the two it is. */
bool port_holder(int port, char *out, size_t len);

#endif
