/*
 * SPDX-License-Identifier: Apache-2.0
 * roostd: command line, configuration, the event loop, signals, and an
 * orderly shutdown (every connection closed with 320 CONNECTION_FORCED).
 * Also the offline commands that work on a stopped broker's data
 * directory: --export-definitions and --check-data.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/closer.h"
#include "broker/core/alarm.h"
#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/defs.h"
#include "broker/core/dlreplay.h"
#include "broker/core/msg.h"
#include "broker/core/perm.h"
#include "broker/core/stats.h"
#include "broker/core/vhost.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/config.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/lib/version.h"
#include "broker/mgmt/mgmt.h"
#include "broker/mgmt/prom.h"
#include "broker/proc/cmdline.h"
#include "broker/proc/limits.h"
#include "broker/proc/manpage.h"
#include "broker/proc/notify.h"
#include "broker/proc/reload.h"
#include "broker/session/conn.h"
#include "broker/session/listener.h"
#include "broker/store/check.h"
#include "broker/store/store.h"
#include "tls/tls.h"

static struct event *shutdown_timer;
static uint64_t shutdown_deadline;

static void
usage(FILE *fp)
{
    cmdline_usage(fp);
}

static void
shutdown_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (conn_count() == 0 || now_ms() >= shutdown_deadline)
        event_base_loopexit(broker.base, NULL);
}

/* ---- listeners and TLS ---- */

static bool
list_set(const char *list)
{
    return list[0] != '\0' && !config_list_none(list);
}

/*
 * Every listener the configuration names, or none at all: roostd never
 * runs without one it was told to open. Returns the first one's port
 * (plain AMQP's if there is one), or -1 (logged).
 */
static int
open_listeners(void)
{
    const struct config *c = &broker.cfg;
    char addr[256], err[1024];
    size_t pos = 0;
    int first = -1, port;

    if (list_set(c->listeners_ssl) &&
        (broker.tls = reload_amqp_tls(c, err, sizeof(err))) == NULL) {
        log_errorx("TLS: %s", err);
        return -1;
    }
    if (c->listeners_tcp[0] == '\0') {
        first = listener_start(c->bind, c->port, c->listen_backlog, NULL);
        if (first < 0)
            return -1;
        mgmt_add_listener(false, c->bind, first);
    }
    while (config_list_next(c->listeners_tcp, &pos, addr, sizeof(addr))) {
        if ((port = listener_start_addr(addr, c->listen_backlog, NULL)) < 0)
            return -1;
        mgmt_add_listener_addr(false, addr, port);
        if (first < 0)
            first = port;
    }
    pos = 0;
    while (config_list_next(c->listeners_ssl, &pos, addr, sizeof(addr))) {
        port = listener_start_addr(addr, c->listen_backlog, broker.tls);
        if (port < 0)
            return -1;
        mgmt_add_listener_addr(true, addr, port);
        if (first < 0)
            first = port;
    }
    if (first < 0)
        log_errorx("no listener: listeners.tcp = none and no listeners.ssl");
    return first;
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        if (!broker.shutting_down)
            reload_run();
        return;
    }
    if (broker.shutting_down)
        return;
    broker.shutting_down = true;
    notify_send("STOPPING=1\nSTATUS=stopping: closing %zu connections",
                conn_count());
    log_info("received %s; closing %zu connections and stopping",
             sig == SIGTERM ? "SIGTERM" : "SIGINT", conn_count());
    listener_stop();
    mgmt_stop();
    dlreplay_free_all();
    prom_stop();
    conn_close_all("broker forced connection closure with reason 'shutdown'");
    shutdown_deadline = now_ms() + (uint64_t)broker.cfg.close_timeout_ms;
    struct timeval tv = { 0, 50 * 1000 };
    shutdown_timer = event_new(broker.base, -1, EV_PERSIST, shutdown_tick, NULL);
    event_add(shutdown_timer, &tv);
}

static int
apply_setting(struct config *cfg, const char *key, const char *value)
{
    char err[512];
    if (config_set(cfg, key, value, err, sizeof(err)) != 0) {
        fprintf(stderr, "roostd: %s\n", err);
        return -1;
    }
    /* A reload sets it again over the file. */
    reload_remember_setting(key, value);
    return 0;
}

/* What the command line asks for besides settings. */
struct cmdline {
    bool test_only;
    const char *config_file;    /* -c, or NULL */
    int config_flags;           /* for config_load_file */
    char warns[16384];          /* the file's, "path:line: message" lines */
    const char *export_file;    /* --export-definitions */
    const char *check_dir;      /* --check-data */
    bool accept_data_loss;      /* --accept-data-loss */
};

/* The line after the one at 'w' (its NUL if it is the last). */
static const char *
next_line(const char *w)
{
    w += strcspn(w, "\n");
    return *w == '\n' ? w + 1 : w;
}

static int
parse_args(int argc, char **argv, struct config *cfg, struct cmdline *cl)
{
    const struct option *opts = cmdline_longopts();
    const char *shortopts = cmdline_shortopts();
    int ch;

    /* First pass: the file, so that command-line settings override it. */
    while ((ch = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            cl->config_file = optarg;
            break;
        case 'U':
            cl->config_flags |= CONFIG_IGNORE_UNSUPPORTED;
            break;
        case 'V':
            printf("%s %s\n", ROOST_PRODUCT, ROOST_VERSION);
            exit(0);
        case 'D':
            config_dump(stdout);
            exit(0);
        case 'M':
            if (manpage_write(stdout, optarg) != 0) {
                fprintf(stderr, "roostd: no man page '%s' (roostd.8 or "
                        "roost.conf.5)\n", optarg);
                return -1;
            }
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        case '?':
            usage(stderr);
            return -1;
        default:
            break;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "roostd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (cl->config_file) {
        char errs[16384];
        int nerr = config_load_file(cfg, cl->config_file, cl->config_flags,
                                    errs, sizeof(errs), cl->warns,
                                    sizeof(cl->warns));
        /* Standard error now; the log too once it is open (main). */
        for (const char *w = cl->warns; *w != '\0'; w = next_line(w))
            fprintf(stderr, "roostd: warning: %.*s\n", (int)strcspn(w, "\n"),
                    w);
        if (nerr != 0) {
            fprintf(stderr, "%s", errs);
            return -1;
        }
    }
    reload_remember_file(cl->config_file, cl->config_flags);
    optind = 1;
    while ((ch = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        int rc = 0;
        switch (ch) {
        case 'p':
            rc = apply_setting(cfg, "port", optarg);
            break;
        case 'b':
            rc = apply_setting(cfg, "bind", optarg);
            break;
        case 'd':
            rc = apply_setting(cfg, "data_dir", optarg);
            break;
        case 'l':
            rc = apply_setting(cfg, "log.level", optarg);
            break;
        case 'L':
            rc = apply_setting(cfg, "log.file", optarg);
            break;
        case 's': {
            char *eq = strchr(optarg, '=');
            if (eq == NULL) {
                fprintf(stderr, "roostd: --set wants KEY=VALUE, got '%s'\n",
                        optarg);
                return -1;
            }
            *eq = '\0';
            rc = apply_setting(cfg, optarg, eq + 1);
            *eq = '=';
            break;
        }
        case 'I':
            rc = apply_setting(cfg, "load_definitions", optarg);
            break;
        case 'E':
            cl->export_file = optarg;
            break;
        case 'K':
            cl->check_dir = optarg;
            break;
        case 'A':
            cl->accept_data_loss = true;
            break;
        case 't':
            cl->test_only = true;
            break;
        default:
            break;
        }
        if (rc != 0)
            return -1;
    }
    if (cl->export_file && cl->check_dir) {
        fprintf(stderr, "roostd: --export-definitions and --check-data are "
                "separate commands\n");
        return -1;
    }
    char err[512];
    if (config_validate(cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "roostd: %s\n", err);
        return -1;
    }
    return 0;
}

/* The broker's state without the store: what every mode starts with. */
static void
broker_init(void)
{
    struct event_base *base = event_base_new();
    if (base == NULL)
        fatalx("cannot create the event loop");
    broker_core_init(base);
    conn_install_hooks();
}

/* In reverse: the store first (it syncs what is pending, and nothing
 * after it is recorded, so the teardown of the vhosts deletes nothing on
 * disk), then the definitions, then the rest. */
static void
broker_teardown(void)
{
    store_close();
    broker_core_free();
    event_base_free(broker.base);
    config_free(&broker.cfg);
}

static bool import_synced;

static void
import_durable(struct store_waiter *w)
{
    (void)w;
    import_synced = true;
}

/*
 * Import the definitions file 'path' and wait until what it added is on
 * disk: the listener opens only after, so no client sees an imported
 * object that a crash could lose. -1 (logged) stops the start.
 */
static int
import_definitions(const char *path)
{
    char err[1536];
    struct store_waiter w = { .durable = import_durable };

    if (defs_json_import(path, err, sizeof(err)) != 0) {
        log_errorx("cannot import definitions: %s", err);
        return -1;
    }
    if (!store_has_pending())
        return 0;
    import_synced = false;
    store_wait(&w, store_open_batch());
    while (!import_synced && !store_is_failed())
        event_base_loop(broker.base, EVLOOP_ONCE);
    store_unwait(&w);
    if (!import_synced) {
        log_errorx("cannot import definitions: %s: the store cannot write "
                   "them", path);
        return -1;
    }
    return 0;
}

/*
 * --export-definitions: recover the data directory as a start would
 * (store_open refuses a directory another roostd holds, naming its pid),
 * write the definitions, and put everything away as a stop would.
 */
static int
export_definitions(const char *file)
{
    const char *dir = broker.cfg.data_dir;
    char err[1024], path[4200], tmp[4300];
    struct stat sb;
    int rc = 1;

    snprintf(path, sizeof(path), "%s/FORMAT", dir);
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "roostd: cannot export definitions: %s is not a "
                "Roost data directory (%s: %s)\n", dir, path, strerror(errno));
        config_free(&broker.cfg);
        return 1;
    }
    broker_init();
    if (store_open(dir, &broker.cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "roostd: cannot export definitions: %s\n", err);
        broker_teardown();
        return 1;
    }
    if (store_recover() != 0) {
        /* As at start: a store that did not recover is not closed (it
         * has nothing to write, and its thread may not run). */
        fprintf(stderr, "roostd: cannot export definitions: the data in %s "
                "cannot be read\n", dir);
        return 1;
    }
    bool to_stdout = strcmp(file, "-") == 0;
    /* A file appears whole or not at all, and, as it holds password
     * hashes, readable by its owner only: the temporary file is made
     * 0600 (fchmod: one left by an earlier run keeps its mode through
     * open) and renamed over the target, whose mode goes with it. */
    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    FILE *fp = stdout;
    if (!to_stdout) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0 && fchmod(fd, 0600) != 0) {
            close(fd);
            fd = -1;
        }
        fp = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (fp == NULL && fd >= 0)
            close(fd);
    }
    if (fp == NULL) {
        fprintf(stderr, "roostd: cannot write %s: %s\n", tmp, strerror(errno));
    } else if (defs_json_export(fp, err, sizeof(err)) != 0) {
        fprintf(stderr, "roostd: %s: %s\n", file, err);
        if (!to_stdout) {
            fclose(fp);
            unlink(tmp);
        }
    } else if (!to_stdout && (fclose(fp) != 0 || rename(tmp, file) != 0)) {
        fprintf(stderr, "roostd: cannot write %s: %s\n", file,
                strerror(errno));
        unlink(tmp);
    } else {
        rc = 0;
    }
    broker_teardown();
    return rc;
}

/* --check-data: the store's offline check, on a broker with nothing in
 * it (the check replays the definitions into it and frees them). */
static int
check_data(const char *dir)
{
    broker_init();
    int rc = store_check_data(dir, stdout);
    fflush(stdout);
    broker_teardown();
    return rc;
}

int
main(int argc, char **argv)
{
    struct cmdline cl = { 0 };
    struct event *sigs[3];
    int signums[3] = { SIGTERM, SIGINT, SIGHUP };

    config_defaults(&broker.cfg);
    if (parse_args(argc, argv, &broker.cfg, &cl) != 0) {
        config_free(&broker.cfg);
        return 2;
    }
    if (cl.test_only) {
        printf("configuration ok\n");
        config_free(&broker.cfg);
        return 0;
    }
    if (log_open(broker.cfg.log_file, (enum log_level)broker.cfg.log_level) != 0)
        return 1;
    /* The configuration's warnings went to standard error: a log file
     * gets them too. */
    if (strcmp(broker.cfg.log_file, "-") != 0)
        for (const char *w = cl.warns; *w != '\0'; w = next_line(w))
            log_warnx("%.*s", (int)strcspn(w, "\n"), w);
    /* RabbitMQ's two outputs are one here: standard error is its
     * console, anything else its file. */
    bool console = broker.cfg.log_file[0] == '\0' ||
                   strcmp(broker.cfg.log_file, "-") == 0;
    log_set_json(strcmp(console ? broker.cfg.log_console_formatter
                                : broker.cfg.log_file_formatter,
                        "json") == 0);
    if (cl.check_dir) {
        int rc = check_data(cl.check_dir);
        log_close();
        return rc;
    }
    if (cl.export_file) {
        int rc = export_definitions(cl.export_file);
        log_close();
        return rc;
    }
    limits_raise_nofile();
    limits_fit_connections(&broker.cfg, true);
    if (mkdir(broker.cfg.data_dir, 0700) != 0 && errno != EEXIST)
        fatal("cannot create data directory %s", broker.cfg.data_dir);
    signal(SIGPIPE, SIG_IGN);
    /* Message bodies come and go at high rates: keep freed heap memory
     * for reuse instead of returning it to the kernel after every large
     * free, and serve bodies up to 1 MiB from the heap. */
    mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
    mallopt(M_MMAP_THRESHOLD, 1024 * 1024);

    broker_init();
    /* Under systemd (Type=notify): a long recovery keeps extending the
     * start timeout; READY=1 only once the listeners are open. */
    notify_init();
    store_on_recovery_progress(notify_recovering);
    char err[1024];
    if (store_open(broker.cfg.data_dir, &broker.cfg, err, sizeof(err)) != 0) {
        log_warnx("%s", err);
        return 1;
    }
    /* Durable definitions and messages first. */
    store_accept_data_loss(cl.accept_data_loss);
    if (store_recover() != 0)
        return 1;
    /* As RabbitMQ: the default vhost, the default user and its
     * permissions there are made once, at the data directory's first
     * start, and kept (or deleted) from then on: never again because
     * the definitions went missing. */
    if (store_is_new()) {
        const char *p[PERM_KINDS] = {
            [PERM_CONFIGURE] = broker.cfg.default_perm_configure,
            [PERM_WRITE] = broker.cfg.default_perm_write,
            [PERM_READ] = broker.cfg.default_perm_read,
        };
        char tags[1024];
        config_default_user_tags(&broker.cfg, tags, sizeof(tags));
        (void)vhost_create(broker.cfg.default_vhost, false);
        auth_add_user(broker.cfg.default_user, broker.cfg.default_pass, tags);
        if (perm_set(broker.cfg.default_vhost, broker.cfg.default_user, p,
                     false, err, sizeof(err)) != 0)
            fatalx("default_permissions: %s", err);
    } else if (auth_user_count() == 0) {
        log_warnx("the data directory %s has no users, and the default "
                  "user is made only at its first start: add one with "
                  "--import-definitions (load_definitions)",
                  broker.cfg.data_dir);
    }
    /* Then what the operator asked to load (RabbitMQ's load_definitions),
     * into the recovered broker: what exists is kept. */
    if (broker.cfg.load_definitions[0] != '\0' &&
        import_definitions(broker.cfg.load_definitions) != 0) {
        broker_teardown();
        log_close();
        return 1;
    }

    for (int i = 0; i < 3; i++) {
        sigs[i] = evsignal_new(broker.base, signums[i], signal_cb, NULL);
        event_add(sigs[i], NULL);
    }
    log_info("%s %s starting (pid %d)", ROOST_PRODUCT, ROOST_VERSION,
             (int)getpid());
    alarm_init();
    if (closer_start() != 0)
        log_warnx("cannot start the socket closer thread; sockets are "
                  "closed on the event loop");
    broker.started_ms = now_ms();
    int rc = 0;
    broker.port = open_listeners();
    /* The management API after the AMQP listeners, as RabbitMQ starts
     * its plugins after the broker. */
    if (broker.port < 0 || mgmt_start() != 0 || prom_start() != 0) {
        rc = 1;
    } else {
        log_info("server startup complete; ready for connections on port %d",
                 broker.port);
        notify_send("READY=1\nSTATUS=ready for connections on port %d\n"
                    "MAINPID=%d", broker.port, (int)getpid());
        notify_watchdog_start(broker.base);
        stats_start();
        event_base_dispatch(broker.base);
    }

    stats_stop();
    listener_stop();
    mgmt_stop();
    dlreplay_free_all();
    prom_stop();
    alarm_shutdown();
    conn_free_all();
    closer_stop();
    for (int i = 0; i < 3; i++)
        event_free(sigs[i]);
    if (shutdown_timer)
        event_free(shutdown_timer);
    broker_teardown();
    tls_ctx_free(broker.tls);
    notify_shutdown();
    reload_forget();
    log_info(rc ? "not started" : "stopped");
    log_close();
    return rc;
}
