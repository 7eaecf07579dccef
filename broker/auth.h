/*
 * Users and SASL: PLAIN ("\0user\0password"), AMQPLAIN (a field table
 * without its length prefix, with LOGIN and PASSWORD) and EXTERNAL (the
 * name a verified TLS client certificate gives; the response is
 * ignored). For now users live
 * in memory: the default user from the configuration.
 */
#ifndef ROOST_BROKER_AUTH_H
#define ROOST_BROKER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "amqp/wire.h"

struct user {
    char *name;
    char *password;
};

/* Add (or replace) a user. */
void auth_add_user(const char *name, const char *password);
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
 * 'guest' logs in from a non-loopback address while loopback_users.guest
 * is set.
 */
int auth_check(struct amqp_bytes mechanism, struct amqp_bytes response,
               const char *offered, const char *external_user,
               bool from_loopback, char **user, bool *unsupported, char *why,
               size_t whylen);

#endif
