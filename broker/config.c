/*
 * The option table and the configuration file parser. conf/roost.conf
 * documents every option; a test keeps the two in step.
 */
#include "broker/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/log.h"
#include "broker/util.h"
#include "broker/version.h"

#define OPT(name, type, def, min, max, reload, field, help) \
    { name, type, def, min, max, reload, offsetof(struct config, field), help }

const struct opt_def config_opts[] = {
    OPT("port", OPT_INT, "5672", 0, 65535, false, port,
        "AMQP listener port; 0 picks a free port and logs it"),
    OPT("bind", OPT_STRING, "", 0, 0, false, bind,
        "address to listen on; empty means all IPv4 and IPv6 addresses"),
    OPT("listen_backlog", OPT_INT, "128", 1, 65535, false, listen_backlog,
        "TCP listen backlog"),
    OPT("data_dir", OPT_STRING, "./data", 0, 0, false, data_dir,
        "directory for definitions and persistent messages"),
    OPT("load_definitions", OPT_STRING, "", 0, 0, false, load_definitions,
        "RabbitMQ definitions file (JSON) whose vhosts, exchanges, queues "
        "and bindings are added at start, after the data directory is "
        "recovered; existing ones are kept; empty: none"),
    OPT("log.file", OPT_STRING, "-", 0, 0, false, log_file,
        "log file; - is standard error; SIGHUP reopens it"),
    OPT("log.level", OPT_LOG_LEVEL, "info", 0, 0, false, log_level,
        "debug, info, warning or error"),
    OPT("channel_max", OPT_INT, "2047", 1, 65535, false, channel_max,
        "highest channel number a client may open (offered in connection.tune)"),
    OPT("frame_max", OPT_INT, "131072", 4096, 16777216, false, frame_max,
        "largest frame in bytes (offered in connection.tune)"),
    OPT("heartbeat", OPT_INT, "60", 0, 65535, false, heartbeat,
        "heartbeat interval in seconds offered in connection.tune; 0 disables"),
    OPT("handshake_timeout", OPT_INT, "10000", 100, 3600000, false,
        handshake_timeout_ms,
        "milliseconds a client has from connecting to connection.open"),
    OPT("close_timeout", OPT_INT, "3000", 10, 600000, false, close_timeout_ms,
        "milliseconds to wait for close-ok before dropping the socket"),
    OPT("max_message_size", OPT_INT64, "134217728", 1, 536870912, false,
        max_message_size,
        "largest message body in bytes; larger publishes get 406 (channel)"),
    OPT("default_user", OPT_STRING, "guest", 0, 0, false, default_user,
        "user created at first start"),
    OPT("default_pass", OPT_STRING, "guest", 0, 0, false, default_pass,
        "password of the default user"),
    OPT("default_vhost", OPT_STRING, "/", 0, 0, false, default_vhost,
        "virtual host created at first start"),
    OPT("server_properties.rabbitmq", OPT_BOOL, "true", 0, 0, false,
        announce_rabbitmq,
        "true: connection.start says product RabbitMQ, version "
        ROOST_RABBITMQ_VERSION " (the behaviour Roost follows), so kombu "
        "and Celery pick the basic.qos semantics Roost implements; false: "
        "product Roost"),
    OPT("loopback_users.guest", OPT_BOOL, "true", 0, 0, false, loopback_guest,
        "true: user guest may log in only from a loopback address"),
    OPT("consumer_output_high_watermark", OPT_INT64, "4194304", 4096,
        1073741824, false, consumer_output_high_watermark,
        "bytes of unsent output above which a connection gets no deliveries"),
    OPT("consumer_output_low_watermark", OPT_INT64, "1048576", 0, 1073741824,
        false, consumer_output_low_watermark,
        "bytes of unsent output below which deliveries resume"),
    OPT("flow_control.queue_length", OPT_INT64, "10000", 0, 1000000000, false,
        flow_queue_length,
        "ready messages above which a queue whose consumers' connections "
        "are congested pauses its publishers; 0: no limit by count"),
    OPT("flow_control.queue_bytes", OPT_INT64, "16777216", 0,
        INT64_C(1) << 50, false, flow_queue_bytes,
        "ready body bytes above which the same happens; 0: no limit by "
        "bytes (both 0: no flow control)"),
    OPT("connection_max", OPT_INT64, "65536", 1, 10000000, false,
        connection_max,
        "open connections allowed; connection.open beyond it gets 530"),
    OPT("consumer_max_per_channel", OPT_INT64, "65536", 1, 10000000, false,
        consumer_max_per_channel,
        "consumers one channel may have; basic.consume beyond it gets 530"),
    OPT("max_queues", OPT_INT64, "1000000", 1, 100000000, false, max_queues,
        "queues a vhost may hold; queue.declare beyond it gets 406"),
    OPT("vm_memory_high_watermark.relative", OPT_DOUBLE, "0.4", 0, 1, false,
        mem_high_watermark_relative,
        "fraction of RAM above which publishers are blocked (as RabbitMQ)"),
    OPT("vm_memory_high_watermark.absolute", OPT_INT64, "0", 0,
        INT64_C(1) << 50, false, mem_high_watermark_absolute,
        "bytes above which publishers are blocked; 0 uses the relative limit"),
    OPT("vm_memory_high_watermark_paging_ratio", OPT_DOUBLE, "0.5", 0, 10,
        false, mem_paging_ratio,
        "fraction of the memory high watermark above which queues keep "
        "a sixteenth of their window in memory and page transient "
        "messages to the scratch area too (as RabbitMQ)"),
    OPT("paging.window", OPT_INT64, "2048", 16, 100000000, false,
        paging_window,
        "messages each queue keeps in memory at its head; beyond it a "
        "message's body leaves memory once it is on disk (Roost's own)"),
    OPT("store.segment_size", OPT_INT64, "67108864", 65536,
        INT64_C(1) << 31, false, store_segment_size,
        "Bytes of journal per segment file (preallocated); a segment is "
        "deleted once none of its messages is left."),
    OPT("disk_free_limit.absolute", OPT_INT64, "50000000", 0,
        INT64_C(1) << 50, false, disk_free_limit,
        "free bytes on the data directory's filesystem below which "
        "publishers are blocked"),
};
const size_t config_nopts = NELEMS(config_opts);

static const struct opt_def *
opt_find(const char *name)
{
    for (size_t i = 0; i < config_nopts; i++)
        if (strcmp(config_opts[i].name, name) == 0)
            return &config_opts[i];
    return NULL;
}

static int
parse_int64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int
config_set(struct config *c, const char *key, const char *value, char *err,
           size_t errlen)
{
    const struct opt_def *o = opt_find(key);
    void *field;
    int64_t v;

    if (o == NULL) {
        snprintf(err, errlen, "unknown key '%s'", key);
        return -1;
    }
    field = (char *)c + o->offset;
    switch (o->type) {
    case OPT_INT:
    case OPT_INT64:
        if (parse_int64(value, &v) != 0) {
            snprintf(err, errlen, "%s: '%s' is not an integer", key, value);
            return -1;
        }
        if (v < o->min || v > o->max) {
            snprintf(err, errlen, "%s: %lld is outside %lld..%lld", key,
                     (long long)v, (long long)o->min, (long long)o->max);
            return -1;
        }
        if (o->type == OPT_INT)
            *(int *)field = (int)v;
        else
            *(int64_t *)field = v;
        return 0;
    case OPT_DOUBLE: {
        char *end;
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end != '\0') {
            snprintf(err, errlen, "%s: '%s' is not a number", key, value);
            return -1;
        }
        if (d < (double)o->min || d > (double)o->max) {
            snprintf(err, errlen, "%s: %g is outside %lld..%lld", key, d,
                     (long long)o->min, (long long)o->max);
            return -1;
        }
        *(double *)field = d;
        return 0;
    }
    case OPT_BOOL:
        if (strcmp(value, "true") == 0)
            *(bool *)field = true;
        else if (strcmp(value, "false") == 0)
            *(bool *)field = false;
        else {
            snprintf(err, errlen, "%s: '%s' is not true or false", key, value);
            return -1;
        }
        return 0;
    case OPT_STRING:
        free(*(char **)field);
        *(char **)field = xstrdup(value);
        return 0;
    case OPT_LOG_LEVEL: {
        int l = log_level_parse(value);
        if (l < 0) {
            snprintf(err, errlen,
                     "%s: '%s' is not debug, info, warning or error", key,
                     value);
            return -1;
        }
        *(int *)field = l;
        return 0;
    }
    }
    return -1;
}

void
config_defaults(struct config *c)
{
    char err[256];

    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < config_nopts; i++)
        if (config_set(c, config_opts[i].name, config_opts[i].def, err,
                       sizeof(err)) != 0)
            fatalx("bad built-in default: %s", err);
}

void
config_free(struct config *c)
{
    for (size_t i = 0; i < config_nopts; i++)
        if (config_opts[i].type == OPT_STRING) {
            char **p = (char **)(void *)((char *)c + config_opts[i].offset);
            free(*p);
            *p = NULL;
        }
}

static char *
trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' ||
                     s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static void
append_err(char *errs, size_t errlen, const char *path, int line,
           const char *msg)
{
    size_t n = strlen(errs);
    if (n < errlen)
        snprintf(errs + n, errlen - n, "%s:%d: %s\n", path, line, msg);
}

int
config_load_file(struct config *c, const char *path, char *errs,
                 size_t errlen)
{
    FILE *fp = fopen(path, "r");
    char buf[4096], err[512];
    int line = 0, nerr = 0;

    if (errlen)
        errs[0] = '\0';
    if (fp == NULL) {
        snprintf(err, sizeof(err), "cannot open: %s", strerror(errno));
        append_err(errs, errlen, path, 0, err);
        return 1;
    }
    while (fgets(buf, sizeof(buf), fp)) {
        line++;
        if (strchr(buf, '\n') == NULL && !feof(fp)) {
            append_err(errs, errlen, path, line, "line too long");
            nerr++;
            int ch;
            while ((ch = fgetc(fp)) != EOF && ch != '\n')
                ;
            continue;
        }
        char *s = trim(buf);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            append_err(errs, errlen, path, line, "expected 'key = value'");
            nerr++;
            continue;
        }
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        if (config_set(c, key, value, err, sizeof(err)) != 0) {
            append_err(errs, errlen, path, line, err);
            nerr++;
        }
    }
    fclose(fp);
    return nerr;
}

void
config_dump(FILE *fp)
{
    static const char *const type_names[] = {
        [OPT_INT] = "integer", [OPT_INT64] = "integer", [OPT_DOUBLE] = "number",
        [OPT_BOOL] = "true|false", [OPT_STRING] = "string",
        [OPT_LOG_LEVEL] = "debug|info|warning|error",
    };

    fprintf(fp,
            "# roost.conf: every configuration key of roostd, with its default.\n"
            "# Generated by `roostd --dump-config`; a test keeps it in step.\n"
            "#\n"
            "# Format: one \"key = value\" per line, as in rabbitmq.conf; '#'\n"
            "# starts a comment line. Unknown keys and bad values stop roostd\n"
            "# at startup with \"file:line: message\"; `roostd -t -c FILE`\n"
            "# checks a file and exits. Any key can also be given on the\n"
            "# command line: --set key=value. Every key needs a restart today.\n");
    for (size_t i = 0; i < config_nopts; i++) {
        const struct opt_def *o = &config_opts[i];
        fprintf(fp, "\n# %s\n# type: %s", o->help, type_names[o->type]);
        if (o->type == OPT_INT || o->type == OPT_INT64 || o->type == OPT_DOUBLE)
            fprintf(fp, " (%lld..%lld)", (long long)o->min, (long long)o->max);
        fprintf(fp, "\n# %s =%s%s\n", o->name, o->def[0] ? " " : "", o->def);
    }
}

int
config_validate(const struct config *c, char *err, size_t errlen)
{
    if (c->consumer_output_low_watermark >= c->consumer_output_high_watermark) {
        snprintf(err, errlen,
                 "consumer_output_low_watermark must be below "
                 "consumer_output_high_watermark");
        return -1;
    }
    if (c->default_user[0] == '\0') {
        snprintf(err, errlen, "default_user must not be empty");
        return -1;
    }
    return 0;
}
