/*
 * SPDX-License-Identifier: Apache-2.0
 * roostd's configuration: one table of options (name, type, default,
 * bounds, reloadable, help), a file of `key = value` lines in the style of
 * rabbitmq.conf, and `--set key=value` overrides. The whole input is parsed
 * and validated before anything is applied; errors are collected as
 * "file:line: message".
 */
#ifndef ROOST_BROKER_CONFIG_H
#define ROOST_BROKER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_MAX_OPTS 128

struct config {
    /* listener */
    int port;
    char *bind;                 /* "" = all IPv4 and IPv6 addresses */
    int listen_backlog;
    /* RabbitMQ's listeners.tcp.NAME and listeners.ssl.NAME (lists, see
     * OPT_LIST): "" = none (TCP: then port and bind) */
    char *listeners_tcp;
    char *listeners_ssl;
    /* ssl_options.* (tls/tls.h) */
    char *ssl_cacertfile;
    char *ssl_certfile;
    char *ssl_keyfile;
    char *ssl_password;
    char *ssl_verify;           /* verify_none or verify_peer */
    bool ssl_fail_if_no_peer_cert;
    char *ssl_versions;         /* list */
    char *ssl_ciphers;          /* list */
    bool ssl_honor_cipher_order;
    int ssl_depth;
    bool ssl_reuse_sessions;
    bool ssl_client_renegotiation;
    bool ssl_secure_renegotiate;
    int ssl_handshake_timeout_ms;
    /* SASL */
    char *auth_mechanisms;      /* list; empty: AMQPLAIN and PLAIN */
    char *ssl_cert_login_from;
    char *ssl_cert_login_san_type;
    int ssl_cert_login_san_index;
    /* files */
    char *data_dir;
    char *load_definitions;     /* "" = none */
    /* RabbitMQ's log keys, as given (see config_resolve_log in
     * config.c): log.file ("-": stderr, "false": none, else a file,
     * relative to log_dir), log.console, and levels (-1: not given,
     * CONFIG_LOG_NONE: "none"); log.level is log.default.level. */
    char *log_file_opt;
    char *log_dir;
    bool log_console;
    int log_default_level;
    int log_file_level;
    int log_console_level;
    /* What they come to: Roost's one log output ("-" = stderr) and its
     * level (enum log_level). */
    char *log_file;
    int log_level;
    char *log_console_formatter;  /* "plaintext" or "json": on stderr */
    char *log_file_formatter;     /* the same, in a log file */
    /* protocol limits offered in connection.tune */
    int channel_max;
    int frame_max;
    int heartbeat;
    int handshake_timeout_ms;
    int close_timeout_ms;
    int64_t max_message_size;
    /* users */
    char *default_user;
    char *default_pass;
    char *default_vhost;
    char *default_perm_configure;   /* default_permissions.* */
    char *default_perm_write;
    char *default_perm_read;
    char *default_user_tags;    /* list: default_user_tags.TAG = true|false */
    char *loopback_users;       /* list: loopback_users.NAME = true|false */
    bool announce_rabbitmq;     /* server_properties.rabbitmq */
    int64_t flow_queue_length;  /* flow_control.queue_length */
    int64_t flow_queue_bytes;   /* flow_control.queue_bytes */
    /* buffers */
    int64_t consumer_output_high_watermark;
    int64_t consumer_output_low_watermark;
    /* limits */
    int64_t connection_max;
    int64_t consumer_max_per_channel;
    int64_t max_queues;
    int64_t delayed_max_messages;   /* delayed_message.max_messages */
    int64_t stream_offset_retention;    /* stream.offset_retention, ms */
    int64_t stream_names_max;       /* stream.consumer_names_max */
    int64_t consumer_timeout;   /* ms an unacked delivery may wait; 0: none */
    /* resource alarms */
    double mem_high_watermark_relative;
    int64_t mem_absolute_opt;   /* vm_memory_high_watermark.absolute */
    int64_t disk_absolute_opt;  /* disk_free_limit.absolute */
    double disk_free_relative;  /* disk_free_limit.relative */
    /* What they come to (as RabbitMQ, .relative wins when both are
     * set): 0 = use the relative one; the disk limit in bytes. */
    int64_t mem_high_watermark_absolute;
    int64_t disk_free_limit;
    double mem_paging_ratio;
    /* the store */
    int64_t store_segment_size;
    int64_t paging_window;
    /* the management HTTP API (broker/mgmt/) */
    int mgmt_tcp_port;
    bool mgmt_tcp_port_given;   /* set other than by config_defaults */
    char *mgmt_tcp_ip;
    int mgmt_ssl_port;          /* -1: no HTTPS */
    char *mgmt_ssl_ip;
    char *mgmt_ssl_cacertfile;
    char *mgmt_ssl_certfile;
    char *mgmt_ssl_keyfile;
    char *mgmt_ssl_password;
    int64_t mgmt_max_body_size;
    int mgmt_idle_timeout_ms;
    int mgmt_request_timeout_ms;
    int mgmt_max_connections;
    /* statistics (stats.c) */
    int collect_statistics_interval;
    char *rates_mode;
    char *mgmt_allowed_hosts;   /* list: more names the Host may say */
    /* Prometheus metrics (broker/mgmt/prom.c) */
    int prom_tcp_port;          /* -1: none */
    bool prom_tcp_port_given;   /* set other than by config_defaults */
    char *prom_tcp_ip;
    char *prom_path;
    bool prom_per_object;
    int64_t prom_max_series;
    /* Which options were set other than by config_defaults, by index
     * into config_opts. */
    unsigned char given[CONFIG_MAX_OPTS];
};

/* log.*.level = none (Roost then logs errors only). */
#define CONFIG_LOG_NONE 4

/*
 * OPT_LIST: RabbitMQ's numbered or named keys (listeners.ssl.default,
 * ssl_options.versions.1, ...): option "P" takes every key "P.NAME",
 * kept in the order first set as lines "NAME\tVALUE\n" (setting a NAME
 * again replaces its value). "P = none" empties the list and keeps it
 * empty (config_list_none).
 */
/*
 * OPT_BYTES: an int64 in bytes, with RabbitMQ's information units as its
 * memory and disk limits take them (2GB, 512MiB, 100k: kB/MB/GB are
 * powers of 1000; KiB/MiB/GiB and k/m/g powers of 1024).
 * OPT_BYTESIZE: an int in bytes with cuttlefish's "bytesize" units
 * (128KB: KB/MB/GB are powers of 1024), as frame_max takes them.
 */
enum opt_type {
    OPT_INT, OPT_INT64, OPT_DOUBLE, OPT_BOOL, OPT_STRING, OPT_LOG_LEVEL,
    OPT_LIST, OPT_BYTES, OPT_BYTESIZE
};

struct opt_def {
    const char *name;
    enum opt_type type;
    const char *def;        /* default, as it would be written in the file */
    int64_t min, max;       /* bounds for integers (and doubles) */
    bool reloadable;
    size_t offset;          /* into struct config */
    const char *help;
};

extern const struct opt_def config_opts[];
extern const size_t config_nopts;

/* Fill 'c' with every option's default. */
void config_defaults(struct config *c);
void config_free(struct config *c);

/*
 * Apply one "key = value" setting to 'c'. On error, writes a message to
 * 'err' and returns -1.
 */
int config_set(struct config *c, const char *key, const char *value,
               char *err, size_t errlen);

/* Whether 'key' is one of Roost's keys (an option, a list entry or an
 * alias of one). */
bool config_has_key(const char *key);

/*
 * Parse the file at 'path' into 'c' (which holds defaults or earlier
 * settings). Every error is appended to 'errs' and every warning to
 * 'warns' as "path:line: message\n"; returns the number of errors. 'c'
 * may be half-changed on error: parse into a scratch copy and apply it
 * only when this returns 0.
 *
 * A key of RabbitMQ's that Roost does not implement (rabbitconf.h) is
 * skipped with a warning when that changes nothing on a single node, and
 * is an error when it would drop what was asked, unless 'flags' has
 * CONFIG_IGNORE_UNSUPPORTED (then a warning too). A key that is neither
 * Roost's nor RabbitMQ's is an error.
 */
#define CONFIG_IGNORE_UNSUPPORTED 1
int config_load_file(struct config *c, const char *path, int flags,
                     char *errs, size_t errlen, char *warns, size_t warnlen);

/*
 * Walk an OPT_LIST value: returns the entry at '*pos' (advancing it) with
 * its value in 'value' (NUL-terminated, at most 'len' bytes), or false
 * at the end.
 */
bool config_list_next(const char *list, size_t *pos, char *value, size_t len);

/* The value of entry 'name' of an OPT_LIST, into 'value'; false if it
 * has none. */
bool config_list_get(const char *list, const char *name, char *value,
                     size_t len);

/* "P = none" was given. */
bool config_list_none(const char *list);

/* The default user's tags, comma-separated, into 'out': those of
 * default_user_tags.TAG = true (as RabbitMQ), "administrator" when none
 * is set. */
void config_default_user_tags(const struct config *c, char *out, size_t len);

/* Write conf/roost.conf: every option, its help, type, bounds and
 * default, commented out. */
void config_dump(FILE *fp);

/* Cross-option checks (low watermark below high, ...). 0 or -1 + message. */
int config_validate(const struct config *c, char *err, size_t errlen);

#endif
