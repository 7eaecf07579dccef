/*
 * SPDX-License-Identifier: Apache-2.0
 * Reloading the configuration on SIGHUP (reload.c): all of it read and
 * checked, with the certificates, before any of it is applied; what
 * cannot change while running is logged as needing a restart.
 */
#ifndef ROOST_BROKER_RELOAD_H
#define ROOST_BROKER_RELOAD_H

#include <stddef.h>

struct config;
struct tls_ctx;

/* How the running configuration was made: the file (NULL: none) and
 * config_load_file's flags, then each command-line setting in order. */
void reload_remember_file(const char *path, int flags);
void reload_remember_setting(const char *key, const char *value);
void reload_forget(void);

/* The AMQP TLS listeners' context made from 'c' (ssl_options.*), or
 * NULL with 'err'. */
struct tls_ctx *reload_amqp_tls(const struct config *c, char *err,
                                size_t errlen);

/* SIGHUP: read, check, apply (logged). */
void reload_run(void);

#endif
