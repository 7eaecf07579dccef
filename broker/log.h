/*
 * The broker's log: levels, timestamps, one line per event, to stderr or a
 * file that SIGHUP reopens. libevent's own messages are routed here.
 * Client-supplied strings must go through log_escape() before they reach a
 * log line.
 */
#ifndef ROOST_BROKER_LOG_H
#define ROOST_BROKER_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum log_level { LOG_LVL_DEBUG, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };

/* Parse "debug", "info", "warning"/"warn", "error"; -1 if unknown. */
int log_level_parse(const char *s);
const char *log_level_name(enum log_level l);

/* Log to 'path' (NULL or "-" for stderr) at 'level' and above. 0 or -1. */
int log_open(const char *path, enum log_level level);
void log_set_level(enum log_level level);
bool log_enabled(enum log_level level);

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
 * Escape up to 'len' bytes of client data for a log line: printable ASCII
 * stays, the rest becomes \xNN, and the result is cut at 'cap' - 1 bytes
 * with "..." when too long. Returns 'out'.
 */
char *log_escape(char *out, size_t cap, const void *data, size_t len);

#endif
