/*
 * SPDX-License-Identifier: Apache-2.0
 * Logging. Lines look like
 *   2026-11-29T20:30:01.123Z info  listening on [::]:5672
 * or, in JSON (RabbitMQ's rabbit_logger_json_fmt keys, its default
 * rfc3339_space time),
 *   {"time":"2026-11-29 20:30:01.123456+00:00","level":"info",
 *    "msg":"listening on [::]:5672"}
 * The log state is process-wide: roostd has one log.
 */
#include "broker/lib/log.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static FILE *log_fp;
static char *log_path;
static enum log_level log_min = LOG_LVL_INFO;
static bool log_json;

static const char *const level_names[] = { "debug", "info", "warning", "error" };

int
log_level_parse(const char *s)
{
    if (strcmp(s, "warn") == 0)
        return LOG_LVL_WARN;
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (strcmp(s, level_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *
log_level_name(enum log_level l)
{
    return level_names[l];
}

static void
libevent_log(int severity, const char *msg)
{
    if (severity >= EVENT_LOG_WARN)
        log_warnx("libevent: %s", msg);
    else
        log_debug("libevent: %s", msg);
}

int
log_open(const char *path, enum log_level level)
{
    log_min = level;
    event_set_log_callback(libevent_log);
    free(log_path);
    log_path = NULL;
    if (path == NULL || strcmp(path, "-") == 0 || path[0] == '\0') {
        log_fp = stderr;
        return 0;
    }
    FILE *fp = fopen(path, "a");
    if (fp == NULL) {
        log_fp = stderr;
        log_warn("cannot open log file %s", path);
        return -1;
    }
    setvbuf(fp, NULL, _IOLBF, 0);
    log_fp = fp;
    log_path = strdup(path);
    return 0;
}

void
log_set_level(enum log_level level)
{
    log_min = level;
}

void
log_set_json(bool on)
{
    log_json = on;
}

bool
log_enabled(enum log_level level)
{
    return level >= log_min;
}

void
log_reopen(void)
{
    if (log_path == NULL)
        return;
    FILE *fp = fopen(log_path, "a");
    if (fp == NULL) {
        log_warn("cannot reopen log file %s", log_path);
        return;
    }
    setvbuf(fp, NULL, _IOLBF, 0);
    fclose(log_fp);
    log_fp = fp;
    log_info("log file reopened");
}

void
log_close(void)
{
    if (log_fp && log_fp != stderr)
        fclose(log_fp);
    log_fp = NULL;
    free(log_path);
    log_path = NULL;
}

/*
 * Append 'msg' to 'line' (holding 'n' of 'cap' bytes) with every control
 * byte, DEL among them, written as \xNN: a name that reached a format
 * without log_escape still cannot break the line or a terminal. The rest
 * (log_escape's own "\x", UTF-8) is copied as it is. Returns the new
 * length.
 */
static size_t
append_safe(char *line, size_t n, size_t cap, const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            if (n + 1 >= cap)
                break;
            line[n++] = (char)*p;
        } else {
            if (n + 5 >= cap)
                break;
            n += (size_t)snprintf(line + n, cap - n, "\\x%02x", *p);
        }
    }
    line[n] = '\0';
    return n;
}

static void
write_text(FILE *fp, const struct timeval *tv, enum log_level level,
           const char *msg, const struct log_ids *ids)
{
    char line[2048], prefix[160];
    struct tm tm;
    size_t n;

    gmtime_r(&tv->tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03dZ %-7s ",
                          (int)(tv->tv_usec / 1000), level_names[level]);
    if (ids != NULL && ids->conn != 0) {
        snprintf(prefix, sizeof(prefix), "conn=%016" PRIx64 "%s%s", ids->conn,
                 ids->peer ? " " : "", ids->peer ? ids->peer : "");
        n = append_safe(line, n, sizeof(line), prefix);
        if (ids->channel != 0) {
            snprintf(prefix, sizeof(prefix), " channel %u", ids->channel);
            n = append_safe(line, n, sizeof(line), prefix);
        }
        n = append_safe(line, n, sizeof(line), ": ");
    }
    append_safe(line, n, sizeof(line), msg);
    fprintf(fp, "%s\n", line);
}

/* A JSON string of 's': jansson escapes control bytes; bytes that are
 * not UTF-8 (a format that took client data unescaped) become \xNN. */
static json_t *
json_text(const char *s)
{
    json_t *v = json_string(s);
    if (v != NULL)
        return v;
    char buf[4 * 2048 + 1];
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s;
         *p && k + 5 < sizeof(buf); p++) {
        if (*p < 0x80)
            buf[k++] = (char)*p;
        else
            k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\x%02x", *p);
    }
    buf[k] = '\0';
    return json_string(buf);
}

static void
set_text(json_t *o, const char *key, const char *v)
{
    if (v != NULL)
        json_object_set_new(o, key, json_text(v));
}

static void
write_json(FILE *fp, const struct timeval *tv, enum log_level level,
           const char *msg, const struct log_ids *ids)
{
    char when[64];
    struct tm tm;
    json_t *o = json_object();

    gmtime_r(&tv->tv_sec, &tm);
    size_t n = strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(when + n, sizeof(when) - n, ".%06ld+00:00", (long)tv->tv_usec);
    set_text(o, "time", when);
    set_text(o, "level", level_names[level]);
    set_text(o, "msg", msg);
    if (ids != NULL) {
        set_text(o, "connection", ids->connection);
        if (ids->channel != 0)
            json_object_set_new(o, "channel", json_integer(ids->channel));
        set_text(o, "vhost", ids->vhost);
        set_text(o, "user", ids->user);
        set_text(o, "queue", ids->queue);
        set_text(o, "message_id", ids->message_id);
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (line == NULL) {
        /* Out of memory: the line still goes out, as text. */
        write_text(fp, tv, level, msg, ids);
        return;
    }
    fprintf(fp, "%s\n", line);
    free(line);
}

static void
log_vwrite(enum log_level level, const struct log_ids *ids, const char *fmt,
           va_list ap, int err)
{
    char msg[2048];
    struct timeval tv;

    if (level < log_min)
        return;
    gettimeofday(&tv, NULL);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (err && n >= 0 && (size_t)n < sizeof(msg))
        snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(err));
    FILE *fp = log_fp ? log_fp : stderr;
    if (log_json)
        write_json(fp, &tv, level, msg, ids);
    else
        write_text(fp, &tv, level, msg, ids);
}

#define LOG_BODY(level, err)                                                 \
    do {                                                                     \
        va_list ap;                                                          \
        va_start(ap, fmt);                                                   \
        log_vwrite(level, NULL, fmt, ap, err);                               \
        va_end(ap);                                                          \
    } while (0)

void log_debug(const char *fmt, ...) { LOG_BODY(LOG_LVL_DEBUG, 0); }
void log_info(const char *fmt, ...) { LOG_BODY(LOG_LVL_INFO, 0); }
void log_warnx(const char *fmt, ...) { LOG_BODY(LOG_LVL_WARN, 0); }
void log_errorx(const char *fmt, ...) { LOG_BODY(LOG_LVL_ERROR, 0); }

void
log_event(enum log_level level, const struct log_ids *ids, const char *fmt,
          ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, ids, fmt, ap, 0);
    va_end(ap);
}

void
log_eventv(enum log_level level, const struct log_ids *ids, const char *fmt,
           va_list ap)
{
    log_vwrite(level, ids, fmt, ap, 0);
}

void
log_warn(const char *fmt, ...)
{
    int err = errno;
    LOG_BODY(LOG_LVL_WARN, err);
}

void
fatal(const char *fmt, ...)
{
    int err = errno;
    LOG_BODY(LOG_LVL_ERROR, err);
    exit(1);
}

void
fatalx(const char *fmt, ...)
{
    LOG_BODY(LOG_LVL_ERROR, 0);
    exit(1);
}

char *
log_escape(char *out, size_t cap, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t k = 0;

    if (cap == 0)
        return out;
    for (size_t i = 0; i < len; i++) {
        if (k + 8 >= cap) {
            if (cap >= 4) {
                k = k < cap - 4 ? k : cap - 4;
                memcpy(out + k, "...", 3);
                k += 3;
            }
            break;
        }
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
            out[k++] = (char)p[i];
        else
            k += (size_t)snprintf(out + k, cap - k, "\\x%02x", p[i]);
    }
    out[k] = '\0';
    return out;
}
