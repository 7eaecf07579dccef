/*
 * SPDX-License-Identifier: Apache-2.0
 * The broker's log: levels, timestamps, one line per event, to stderr or a
 * file that SIGHUP reopens. libevent's own messages are routed here.
 * Client-supplied strings must go through log_escape() before they reach a
 * log line.
 *
 * A line is plain text, or with RabbitMQ's log.console.formatter = json
 * (standard error) or log.file.formatter = json (a file) one JSON object:
 * "time", "level", "msg", and for a line about a connection, channel,
 * queue or message (log_event) their ids: "connection", "channel",
 * "vhost", "user", "queue", "message_id".
 */
#ifndef ROOST_BROKER_LOG_H
#define ROOST_BROKER_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_LVL_DEBUG, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };

/* Parse "debug", "info", "warning"/"warn", "error"; -1 if unknown. */
int log_level_parse(const char *s);
const char *log_level_name(enum log_level l);

/* Log to 'path' (NULL or "-" for stderr) at 'level' and above. 0 or -1. */
int log_open(const char *path, enum log_level level);
void log_set_level(enum log_level level);
bool log_enabled(enum log_level level);

/* Write each line as one JSON object (true) or as plain text. */
void log_set_json(bool on);

/* Reopen the log file after rotation (SIGHUP). */
void log_reopen(void);
void log_close(void);

#define LOG_PRINTF(a, b) __attribute__((format(printf, a, b)))

void log_debug(const char *fmt, ...) LOG_PRINTF(1, 2);
void log_info(const char *fmt, ...) LOG_PRINTF(1, 2);
void log_warnx(const char *fmt, ...) LOG_PRINTF(1, 2);
/* Like log_warnx, with ": strerror(errno)" appended. */
void log_warn(const char *fmt, ...) LOG_PRINTF(1, 2);
void log_errorx(const char *fmt, ...) LOG_PRINTF(1, 2);
/* Log and exit(1). */
void fatal(const char *fmt, ...) LOG_PRINTF(1, 2) __attribute__((noreturn));
void fatalx(const char *fmt, ...) LOG_PRINTF(1, 2) __attribute__((noreturn));

/*
 * What a line is about: any of these may be absent (NULL, 0). In plain
 * text the connection's id and address and the channel prefix the
 * message ("conn=... 127.0.0.1:5000 channel 1: "), which names the rest
 * itself; in JSON each is a key of its own. Client-supplied strings in
 * it (the queue name, the message id) are escaped (log_escape) first.
 */
struct log_ids {
    uint64_t conn;              /* plain text: conn=%016x */
    const char *peer;           /* plain text: after it */
    const char *connection;     /* RabbitMQ's name (conn_name) */
    unsigned channel;
    const char *vhost, *user, *queue, *message_id;
};

/* A line at 'level' about 'ids' (NULL: none). */
void log_event(enum log_level level, const struct log_ids *ids,
               const char *fmt, ...) LOG_PRINTF(3, 4);
void log_eventv(enum log_level level, const struct log_ids *ids,
                const char *fmt, va_list ap) LOG_PRINTF(3, 0);

/*
 * Escape up to 'len' bytes of client data for a log line: printable ASCII
 * stays, the rest becomes \xNN, and the result is cut at 'cap' - 1 bytes
 * with "..." when too long. Returns 'out'.
 */
char *log_escape(char *out, size_t cap, const void *data, size_t len);

#endif
