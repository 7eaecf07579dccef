/*
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

struct config {
    /* listener */
    int port;
    char *bind;                 /* "" = all IPv4 and IPv6 addresses */
    int listen_backlog;
    /* files */
    char *data_dir;
    char *load_definitions;     /* "" = none */
    char *log_file;             /* "-" = stderr */
    int log_level;              /* enum log_level */
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
    bool loopback_guest;        /* loopback_users.guest */
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
    /* resource alarms */
    double mem_high_watermark_relative;
    int64_t mem_high_watermark_absolute;    /* 0: use the relative one */
    int64_t disk_free_limit;
    double mem_paging_ratio;
    /* the store */
    int64_t store_segment_size;
    int64_t paging_window;
};

enum opt_type {
    OPT_INT, OPT_INT64, OPT_DOUBLE, OPT_BOOL, OPT_STRING, OPT_LOG_LEVEL
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

/*
 * Parse the file at 'path' into 'c' (which holds defaults or earlier
 * settings). Every error is appended to 'errs' as "path:line: message\n";
 * returns the number of errors. 'c' may be half-changed on error: parse
 * into a scratch copy and apply it only when this returns 0.
 */
int config_load_file(struct config *c, const char *path, char *errs,
                     size_t errlen);

/* Write conf/roost.conf: every option, its help, type, bounds and
 * default, commented out. */
void config_dump(FILE *fp);

/* Cross-option checks (low watermark below high, ...). 0 or -1 + message. */
int config_validate(const struct config *c, char *err, size_t errlen);

#endif
