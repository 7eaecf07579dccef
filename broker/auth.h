/*
 * Users and SASL: PLAIN ("\0user\0password") and AMQPLAIN (a field table
 * without its length prefix, with LOGIN and PASSWORD). For now users live
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

/* The mechanisms offered in connection.start. */
#define AUTH_MECHANISMS "AMQPLAIN PLAIN"

/*
 * Check a start-ok response. On success returns 0 and the user's name in
 * 'user' (a new string). -1 with the reason in 'why' (for the log) when the
 * mechanism is unknown (*unsupported set), the response is malformed, the
 * user is unknown, the password is wrong, or 'guest' logs in from a
 * non-loopback address while loopback_users.guest is set.
 */
int auth_check(struct amqp_bytes mechanism, struct amqp_bytes response,
               bool from_loopback, char **user, bool *unsupported, char *why,
               size_t whylen);

#endif
