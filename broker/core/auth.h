/*
 * SPDX-License-Identifier: Apache-2.0
 * Users and SASL: PLAIN ("\0user\0password"), AMQPLAIN (a field table
 * without its length prefix, with LOGIN and PASSWORD) and EXTERNAL (the
 * name a verified TLS client certificate gives; the response is
 * ignored). Users are definitions: the store keeps them.
 */
#ifndef ROOST_BROKER_AUTH_H
#define ROOST_BROKER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/wire.h"

/*
 * A user, with RabbitMQ's password hash: a 4-byte random salt, then the
 * digest of the salt and the password (rabbit_password_hashing_sha256,
 * _sha512 or _md5), so that a RabbitMQ definitions export loads and its
 * users log in with their passwords. 'hash_len' 0: no password (only
 * EXTERNAL logs in). Tags as RabbitMQ keeps them, comma separated.
 */
struct user {
    char *name;
    uint8_t alg;                /* enum tls_digest */
    uint8_t hash_len;
    uint8_t hash[4 + 64];
    char *tags;
};

/* RabbitMQ's names of the hashing algorithms, "" for none: */
const char *auth_alg_name(uint8_t alg);
/* and back: 0 and *alg, or -1. */
int auth_alg_parse(const char *name, uint8_t *alg);

/* Add (or replace) a user with 'password' hashed as RabbitMQ does by
 * default (SHA-256), and announce it (defs_changed). */
void auth_add_user(const char *name, const char *password, const char *tags);

/* Add (or replace) a user with a hash as it is stored (salt and digest;
 * the length checked against 'alg'), and announce it unless 'quiet'.
 * 0, or -1 with the reason in 'err'. */
int auth_put_user(const char *name, uint8_t alg, const uint8_t *hash,
                  size_t len, const char *tags, bool quiet, char *err,
                  size_t errlen);

/* Remove a user (announced unless 'quiet'); false if there was none. */
bool auth_delete_user(const char *name, bool quiet);

/*
 * Whether 'user' may publish with the user-id property 'user_id': its own
 * name, or any with the "impersonator" tag (RabbitMQ's rule).
 */
bool auth_may_claim(const char *user, struct amqp_bytes user_id);

/* How many users there are. */
size_t auth_user_count(void);

/* A user by name, or NULL. */
const struct user *auth_user(const char *name);

/* Every user, in no particular order. */
void auth_foreach_user(void (*fn)(const struct user *u, void *arg), void *arg);

/* Whether 'u' has 'tag' among its tags. */
bool auth_has_tag(const struct user *u, const char *tag);

/*
 * Whether 'name' is a user whose password is 'password' (HTTP basic
 * auth); the user, or NULL. Loopback_users is the caller's to apply
 * (auth_loopback_only).
 */
const struct user *auth_login(const char *name, struct amqp_bytes password);

/* Whether loopback_users holds 'name' to loopback connections. */
bool auth_loopback_only(const char *name);

void auth_free_users(void);

/* Offered when auth_mechanisms names none. */
#define AUTH_MECHANISMS "AMQPLAIN PLAIN"

/*
 * The mechanisms a connection is offered in connection.start, space
 * separated, into 'out': those auth_mechanisms names, sorted as RabbitMQ
 * lists them (or AUTH_MECHANISMS), EXTERNAL only if 'external' (a
 * verified client certificate gives a name).
 */
void auth_offered(bool external, char *out, size_t len);

/*
 * Check a start-ok response against what was offered ('offered', as
 * auth_offered wrote it); 'external_user' is the name the client
 * certificate gives (EXTERNAL), or NULL. On success returns 0 and the
 * user's name in 'user' (a new string). -1 with the reason in 'why' (for
 * the log) when the mechanism was not offered (*unsupported set), the
 * response is malformed, the user is unknown, the password is wrong, or
 * a user held to loopback (loopback_users) logs in from elsewhere.
 */
int auth_check(struct amqp_bytes mechanism, struct amqp_bytes response,
               const char *offered, const char *external_user,
               bool from_loopback, char **user, bool *unsupported, char *why,
               size_t whylen);

#endif
