/*
 * SPDX-License-Identifier: Apache-2.0
 * Digests and random bytes from OpenSSL, for RabbitMQ's password hashes
 * (broker/core/auth.c): the only reason code outside tls/ needs them, and
 * tls/ is where OpenSSL is included.
 */
#ifndef ROOST_TLS_HASH_H
#define ROOST_TLS_HASH_H

#include <stddef.h>
#include <stdint.h>

enum tls_digest { TLS_SHA256, TLS_SHA512, TLS_MD5 };

#define TLS_DIGEST_MAX 64

/* The digest of 'a' then 'b' into 'out' (TLS_DIGEST_MAX bytes); returns
 * its length (32, 64 or 16), or 0 on failure. */
size_t tls_digest2(enum tls_digest d, const void *a, size_t alen,
                   const void *b, size_t blen, uint8_t *out);

/* The length of a digest. */
size_t tls_digest_len(enum tls_digest d);

/* 'n' cryptographically random bytes; 0, or -1 on failure. */
int tls_random(void *out, size_t n);

/* Base64 (no newlines) of 'n' bytes into 'out' (4 * ceil(n / 3) + 1
 * bytes); and back: the number of bytes decoded into 'out' (at most
 * 'cap'), or -1 if 'in' is not base64 or does not fit. */
void tls_base64(const uint8_t *in, size_t n, char *out);
int tls_unbase64(const char *in, uint8_t *out, size_t cap);

#endif
