/*
 * SPDX-License-Identifier: Apache-2.0
 * SIGHUP: the configuration read again, as at start (the defaults, the
 * file roostd was started with, then the same command-line settings over
 * it), with the certificates it names. Everything is read and checked
 * first: a file that does not parse, a value out of bounds, a
 * certificate or key that does not load, and nothing at all changes.
 * Only then are the options marked reloadable in the option table
 * applied (the log level, the memory and disk watermarks, the limits,
 * the TLS options and certificates); any other option that changed is
 * logged as needing a restart and keeps its running value.
 */
#include "broker/proc/reload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/alarm.h"
#include "broker/core/broker.h"
#include "broker/lib/config.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/mgmt/mgmt.h"
#include "broker/proc/limits.h"
#include "broker/proc/notify.h"
#include "tls/tls.h"

/* How the running configuration was made, to make it again. */
static struct {
    char *file;                 /* NULL: no file */
    int flags;                  /* config_load_file's */
    char **settings;            /* command-line "key", "value" pairs */
    size_t nsettings;           /* pairs */
} origin;

void
reload_remember_file(const char *path, int flags)
{
    free(origin.file);
    origin.file = path ? xstrdup(path) : NULL;
    origin.flags = flags;
}

void
reload_remember_setting(const char *key, const char *value)
{
    origin.settings = xrealloc(origin.settings,
                               (origin.nsettings + 1) * 2 * sizeof(char *));
    origin.settings[origin.nsettings * 2] = xstrdup(key);
    origin.settings[origin.nsettings * 2 + 1] = xstrdup(value);
    origin.nsettings++;
}

void
reload_forget(void)
{
    for (size_t i = 0; i < origin.nsettings * 2; i++)
        free(origin.settings[i]);
    free(origin.settings);
    free(origin.file);
    memset(&origin, 0, sizeof(origin));
}

/* The values of an OPT_LIST, one per line (malloc'd). */
static char *
list_values(const char *list)
{
    char *out = xstrdup(""), v[1024];
    size_t pos = 0, len = 0;
    while (config_list_next(list, &pos, v, sizeof(v))) {
        size_t n = strlen(v);
        out = xrealloc(out, len + n + 2);
        memcpy(out + len, v, n);
        out[len + n] = '\n';
        len += n + 1;
        out[len] = '\0';
    }
    return out;
}

struct tls_ctx *
reload_amqp_tls(const struct config *c, char *err, size_t errlen)
{
    char *versions = list_values(c->ssl_versions);
    char *ciphers = list_values(c->ssl_ciphers);
    struct tls_options o = {
        .cacertfile = c->ssl_cacertfile,
        .certfile = c->ssl_certfile,
        .keyfile = c->ssl_keyfile,
        .password = c->ssl_password,
        .verify_peer = strcmp(c->ssl_verify, "verify_peer") == 0,
        .fail_if_no_peer_cert = c->ssl_fail_if_no_peer_cert,
        .versions = versions,
        .ciphers = ciphers,
        .honor_cipher_order = c->ssl_honor_cipher_order,
        .depth = c->ssl_depth,
        .reuse_sessions = c->ssl_reuse_sessions,
        .client_renegotiation = c->ssl_client_renegotiation,
        .secure_renegotiate = c->ssl_secure_renegotiate,
        .handshake_timeout_ms = c->ssl_handshake_timeout_ms,
        .login_from = c->ssl_cert_login_from,
        .san_type = c->ssl_cert_login_san_type,
        .san_index = c->ssl_cert_login_san_index,
    };
    struct tls_ctx *t = tls_ctx_new(&o, err, errlen);
    if (t && tls_ctx_warning(t)[0] != '\0')
        log_warnx("ssl_options.keyfile: %s", tls_ctx_warning(t));
    free(versions);
    free(ciphers);
    return t;
}

/* The configuration as at start, into 'c'; the number of errors, each
 * a line in 'errs'. Warnings (RabbitMQ keys skipped) are logged. */
static int
load(struct config *c, char *errs, size_t errlen)
{
    char warns[4096] = "", err[512];
    int nerr = 0;

    config_defaults(c);
    errs[0] = '\0';
    if (origin.file != NULL)
        nerr = config_load_file(c, origin.file, origin.flags, errs, errlen,
                                warns, sizeof(warns));
    for (size_t i = 0; i < origin.nsettings && nerr == 0; i++)
        if (config_set(c, origin.settings[i * 2], origin.settings[i * 2 + 1],
                       err, sizeof(err)) != 0) {
            snprintf(errs, errlen, "--set %s\n", err);
            nerr++;
        }
    if (nerr == 0 && config_validate(c, err, sizeof(err)) != 0) {
        snprintf(errs, errlen, "%s\n", err);
        nerr++;
    }
    for (char *line = strtok(warns, "\n"); line; line = strtok(NULL, "\n"))
        log_warnx("reload: %s", line);
    return nerr;
}

static void *
field_of(const struct config *c, const struct opt_def *o)
{
    return (char *)c + o->offset;
}

static bool
opt_equal(const struct opt_def *o, const struct config *a,
          const struct config *b)
{
    const void *x = field_of(a, o), *y = field_of(b, o);

    switch (o->type) {
    case OPT_INT:
    case OPT_LOG_LEVEL:
    case OPT_BYTESIZE:
        return *(const int *)x == *(const int *)y;
    case OPT_INT64:
    case OPT_BYTES:
        return *(const int64_t *)x == *(const int64_t *)y;
    case OPT_DOUBLE:
        return *(const double *)x == *(const double *)y;
    case OPT_BOOL:
        return *(const bool *)x == *(const bool *)y;
    case OPT_STRING:
    case OPT_LIST:
        return strcmp(*(char *const *)x, *(char *const *)y) == 0;
    }
    return true;
}

/* The running value takes the new one (pointers swap: 'from' is freed
 * with the old ones). */
static void
opt_take(const struct opt_def *o, struct config *to, struct config *from)
{
    void *x = field_of(to, o), *y = field_of(from, o);

    switch (o->type) {
    case OPT_INT:
    case OPT_LOG_LEVEL:
    case OPT_BYTESIZE:
        *(int *)x = *(int *)y;
        break;
    case OPT_INT64:
    case OPT_BYTES:
        *(int64_t *)x = *(int64_t *)y;
        break;
    case OPT_DOUBLE:
        *(double *)x = *(double *)y;
        break;
    case OPT_BOOL:
        *(bool *)x = *(bool *)y;
        break;
    case OPT_STRING:
    case OPT_LIST: {
        char *t = *(char **)x;
        *(char **)x = *(char **)y;
        *(char **)y = t;
        break;
    }
    }
}

/* A value as the log shows it: secrets are not shown. */
static void
opt_text(const struct opt_def *o, const struct config *c, char *out,
         size_t len)
{
    const void *x = field_of(c, o);

    if (strstr(o->name, "pass") != NULL) {
        snprintf(out, len, "(not shown)");
        return;
    }
    switch (o->type) {
    case OPT_INT:
    case OPT_BYTESIZE:
        snprintf(out, len, "%d", *(const int *)x);
        break;
    case OPT_LOG_LEVEL: {
        int l = *(const int *)x;
        snprintf(out, len, "%s", l == CONFIG_LOG_NONE ? "none"
                                 : l < 0 ? "(not set)"
                                         : log_level_name((enum log_level)l));
        break;
    }
    case OPT_INT64:
    case OPT_BYTES:
        snprintf(out, len, "%lld", (long long)*(const int64_t *)x);
        break;
    case OPT_DOUBLE:
        snprintf(out, len, "%g", *(const double *)x);
        break;
    case OPT_BOOL:
        snprintf(out, len, "%s", *(const bool *)x ? "true" : "false");
        break;
    case OPT_STRING:
        snprintf(out, len, "'%s'", *(char *const *)x);
        break;
    case OPT_LIST: {
        /* "NAME\tVALUE\n" lines as NAME=VALUE, ... */
        size_t n = 0;
        out[0] = '\0';
        for (const char *p = *(char *const *)x; *p && n + 1 < len; p++)
            out[n++] = *p == '\t' ? '=' : *p == '\n' ? (p[1] ? ',' : '\0')
                                                     : *p;
        out[n < len ? n : len - 1] = '\0';
        if (out[0] == '\0')
            snprintf(out, len, "(none set)");
        break;
    }
    }
}

void
reload_run(void)
{
    struct config fresh;
    char errs[4096], err[1024], was[256], now[256];
    struct tls_ctx *amqp_tls = NULL, *https_tls = NULL;
    unsigned applied = 0, restart = 0;
    bool alarms = false, levels = false;

    notify_send("RELOADING=1\nSTATUS=reloading the configuration");
    log_reopen();
    log_info("reload: reading %s again", origin.file ? origin.file
                                                     : "the defaults");
    /* 1. Everything read and checked; nothing applied yet. */
    if (load(&fresh, errs, sizeof(errs)) != 0) {
        for (char *l = strtok(errs, "\n"); l; l = strtok(NULL, "\n"))
            log_errorx("reload: %s", l);
        log_errorx("reload: the configuration has errors; nothing changed");
        goto out;
    }
    if (broker.tls != NULL &&
        (amqp_tls = reload_amqp_tls(&fresh, err, sizeof(err))) == NULL) {
        log_errorx("reload: TLS (ssl_options.*): %s; nothing changed", err);
        goto out;
    }
    /* As at start: a connection_max that does not fit the descriptor
     * limit is lowered (said at start; here only if it then changed). */
    limits_fit_connections(&fresh, false);
    if (mgmt_tls_prepare(&fresh, &https_tls, err, sizeof(err)) != 0) {
        log_errorx("reload: management API HTTPS (management.ssl.*): %s; "
                   "nothing changed", err);
        tls_ctx_free(amqp_tls);
        amqp_tls = NULL;
        goto out;
    }
    /* 2. Applied: none of this can fail. */
    for (size_t i = 0; i < config_nopts; i++) {
        const struct opt_def *o = &config_opts[i];
        if (opt_equal(o, &broker.cfg, &fresh))
            continue;
        opt_text(o, &broker.cfg, was, sizeof(was));
        opt_text(o, &fresh, now, sizeof(now));
        if (!o->reloadable) {
            log_warnx("reload: %s changed (%s to %s): needs a restart; "
                      "keeping %s", o->name, was, now, was);
            restart++;
            continue;
        }
        opt_take(o, &broker.cfg, &fresh);
        log_info("reload: %s changed from %s to %s", o->name, was, now);
        applied++;
        if (strncmp(o->name, "log.", 4) == 0)
            levels = true;
        if (strncmp(o->name, "vm_memory_", 10) == 0 ||
            strncmp(o->name, "disk_free_limit", 15) == 0)
            alarms = true;
    }
    /* What those settings come to (config.c's resolve): the level of
     * the log output in use, the limits the alarms compare with. */
    if (levels && broker.cfg.log_level != fresh.log_level) {
        broker.cfg.log_level = fresh.log_level;
        log_set_level((enum log_level)broker.cfg.log_level);
    }
    if (alarms) {
        broker.cfg.mem_high_watermark_absolute =
            fresh.mem_high_watermark_absolute;
        broker.cfg.disk_free_limit = fresh.disk_free_limit;
        alarm_reconfigure();
    }
    if (amqp_tls != NULL) {
        tls_ctx_swap(broker.tls, amqp_tls);
        log_info("reload: TLS certificates and key loaded again; open "
                 "connections keep theirs");
    }
    mgmt_tls_commit(https_tls);
    log_info("reload: done: %u setting%s applied, %u need%s a restart",
             applied, applied == 1 ? "" : "s", restart,
             restart == 1 ? "s" : "");
out:
    config_free(&fresh);
    notify_send("READY=1\nSTATUS=ready for connections on port %d",
                broker.port);
}
