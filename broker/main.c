/*
 * roostd: command line, configuration, the event loop, signals, and an
 * orderly shutdown (every connection closed with 320 CONNECTION_FORCED).
 */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/alarm.h"
#include "broker/auth.h"
#include "broker/broker.h"
#include "broker/config.h"
#include "broker/conn.h"
#include "broker/defs.h"
#include "broker/listener.h"
#include "broker/log.h"
#include "broker/msg.h"
#include "broker/store/store.h"
#include "broker/util.h"
#include "broker/version.h"
#include "broker/vhost.h"

struct broker broker;

static struct event *shutdown_timer;
static uint64_t shutdown_deadline;

struct vhost *
broker_vhost(const char *name, size_t len)
{
    return hmap_get(&broker.vhosts, name, len);
}

static void
usage(FILE *fp)
{
    fprintf(fp,
            "usage: roostd [options]\n"
            "  -c, --config FILE     configuration file (key = value lines)\n"
            "      --port N          AMQP port (default 5672; 0 picks a free one)\n"
            "      --bind ADDR       listen address (default: all IPv4 and IPv6)\n"
            "      --data-dir DIR    data directory (default ./data)\n"
            "      --log-level LVL   debug, info, warning or error\n"
            "      --log-file FILE   log file (default standard error)\n"
            "      --set KEY=VALUE   set any configuration key\n"
            "  -t, --test-config     check the configuration and exit\n"
            "      --dump-config     print every key with its default (roost.conf)\n"
            "      --version         print the version and exit\n"
            "  -h, --help            this help\n");
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

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGHUP) {
        log_reopen();
        return;
    }
    if (broker.shutting_down)
        return;
    broker.shutting_down = true;
    log_info("received %s; closing %zu connections and stopping",
             sig == SIGTERM ? "SIGTERM" : "SIGINT", conn_count());
    listener_stop();
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
    return 0;
}

static int
parse_args(int argc, char **argv, struct config *cfg, bool *test_only)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "port", required_argument, NULL, 'p' },
        { "bind", required_argument, NULL, 'b' },
        { "data-dir", required_argument, NULL, 'd' },
        { "log-level", required_argument, NULL, 'l' },
        { "log-file", required_argument, NULL, 'L' },
        { "set", required_argument, NULL, 's' },
        { "test-config", no_argument, NULL, 't' },
        { "dump-config", no_argument, NULL, 'D' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *config_file = NULL;
    int ch;

    /* First pass: the file, so that command-line settings override it. */
    while ((ch = getopt_long(argc, argv, "c:th", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            config_file = optarg;
            break;
        case 'V':
            printf("%s %s\n", ROOST_PRODUCT, ROOST_VERSION);
            exit(0);
        case 'D':
            config_dump(stdout);
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
    if (config_file) {
        char errs[4096];
        if (config_load_file(cfg, config_file, errs, sizeof(errs)) != 0) {
            fprintf(stderr, "%s", errs);
            return -1;
        }
    }
    optind = 1;
    while ((ch = getopt_long(argc, argv, "c:th", opts, NULL)) != -1) {
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
        case 't':
            *test_only = true;
            break;
        default:
            break;
        }
        if (rc != 0)
            return -1;
    }
    char err[512];
    if (config_validate(cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "roostd: %s\n", err);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    bool test_only = false;
    struct event *sigs[3];
    int signums[3] = { SIGTERM, SIGINT, SIGHUP };

    config_defaults(&broker.cfg);
    if (parse_args(argc, argv, &broker.cfg, &test_only) != 0) {
        config_free(&broker.cfg);
        return 2;
    }
    if (test_only) {
        printf("configuration ok\n");
        config_free(&broker.cfg);
        return 0;
    }
    if (log_open(broker.cfg.log_file, (enum log_level)broker.cfg.log_level) != 0)
        return 1;
    if (mkdir(broker.cfg.data_dir, 0750) != 0 && errno != EEXIST)
        fatal("cannot create data directory %s", broker.cfg.data_dir);
    signal(SIGPIPE, SIG_IGN);
    /* Message bodies come and go at high rates: keep freed heap memory
     * for reuse instead of returning it to the kernel after every large
     * free, and serve bodies up to 1 MiB from the heap. */
    mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
    mallopt(M_MMAP_THRESHOLD, 1024 * 1024);

    broker.base = event_base_new();
    if (broker.base == NULL)
        fatalx("cannot create the event loop");
    hmap_init(&broker.vhosts);
    hmap_init(&broker.users);
    auth_add_user(broker.cfg.default_user, broker.cfg.default_pass);
    char err[1024];
    if (store_open(broker.cfg.data_dir, &broker.cfg, err, sizeof(err)) != 0) {
        log_warnx("%s", err);
        return 1;
    }
    /* Durable definitions and messages first; the default vhost exists
     * whether or not the data directory knew it. */
    if (store_recover() != 0)
        return 1;
    if (broker_vhost(broker.cfg.default_vhost,
                     strlen(broker.cfg.default_vhost)) == NULL) {
        struct vhost *vh = vhost_new(broker.cfg.default_vhost);
        hmap_put(&broker.vhosts, vh->name, strlen(vh->name), vh);
        defs_changed(DEFS_VHOST_ADDED, vh);
    }

    for (int i = 0; i < 3; i++) {
        sigs[i] = evsignal_new(broker.base, signums[i], signal_cb, NULL);
        event_add(sigs[i], NULL);
    }
    log_info("%s %s starting (pid %d)", ROOST_PRODUCT, ROOST_VERSION,
             (int)getpid());
    alarm_init();
    broker.port = listener_start(broker.cfg.bind, broker.cfg.port,
                                 broker.cfg.listen_backlog);
    if (broker.port < 0)
        return 1;
    log_info("server startup complete; ready for connections on port %d",
             broker.port);

    event_base_dispatch(broker.base);

    listener_stop();
    alarm_shutdown();
    conn_free_all();
    /* Everything pending is synced; the teardown below deletes nothing
     * on disk. */
    store_close();
    for (int i = 0; i < 3; i++)
        event_free(sigs[i]);
    if (shutdown_timer)
        event_free(shutdown_timer);
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL)
        vhost_free(s->val);
    hmap_destroy(&broker.vhosts);
    msg_pool_free();
    auth_free_users();
    event_base_free(broker.base);
    config_free(&broker.cfg);
    log_info("stopped");
    log_close();
    return 0;
}
