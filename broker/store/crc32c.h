/*
 * SPDX-License-Identifier: Apache-2.0
 * CRC32C (Castagnoli), the checksum of every record on disk. Neither
 * OpenSSL nor any library Debian packages for C provides it, so it is
 * here: the SSE4.2 instruction where the CPU has it, a table otherwise.
 */
#ifndef ROOST_BROKER_STORE_CRC32C_H
#define ROOST_BROKER_STORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue 'crc' (0 to start) over 'len' bytes. */
uint32_t crc32c(uint32_t crc, const void *p, size_t len);

#endif
