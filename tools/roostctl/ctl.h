/*
 * SPDX-License-Identifier: Apache-2.0
 * What roostctl's commands share: the parsed command line, calls to the
 * management API with rabbitmqctl's error handling, and rabbitmqctl's
 * output (banners, tab-separated tables or JSON, "Error:" on stderr).
 *
 * Every command is a function that returns the process's exit status,
 * one of rabbitmqctl's sysexits codes:
 *   0            done
 *   EX_USAGE     64, bad command line (checked before the API is asked)
 *   EX_DATAERR   65, a bad argument or file, or a missing vhost
 *   EX_NOUSER    67, no such user
 *   EX_UNAVAILABLE 69, broker unreachable, credentials refused, or any
 *                error the API reports (rabbitmqctl's generic {error, _})
 *   EX_SOFTWARE  70, e.g. "user already exists"
 *   EX_TEMPFAIL  75, timed out
 * Helpers that fail print why (once, on stderr) and return that code, so a
 * command just passes it up.
 */
#ifndef ROOSTCTL_CTL_H
#define ROOSTCTL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sysexits.h>

#include <event2/http.h>
#include <jansson.h>

struct http_client;

/* Bound on an API answer and on a definitions file read for import. */
#define CTL_MAX_BODY (64u * 1024 * 1024)
#define CTL_DEFAULT_TIMEOUT 30

struct ctl {
    struct http_client *http;
    const char *vhost;          /* -p; "/" by default */
    bool quiet;                 /* -q: no banners or informational lines */
    bool no_headers;            /* -s or --no-table-headers */
    bool json;                  /* --formatter json */
    /* add_vhost's options, NULL when absent */
    const char *description, *tags, *default_queue_type;
    /* set_policy's options, NULL when absent ('priority' is checked) */
    const char *priority, *apply_to;
    /* delete_queue's --if-empty, --if-unused; list_queues' --offline */
    bool if_empty, if_unused, offline;
    int timeout;                /* seconds per answer, for banners */
    const char *command;        /* its name, "list_queues" */
    /* the dead-letter commands' options, NULL when absent */
    const char *offset, *count, *rate, *exchange, *routing_key;
    /* the command's positional arguments */
    int argc;
    char **argv;
    /* set once the API has answered: banners are printed only then */
    bool contacted;
    char *banner;               /* pending, see ctl_banner() */
};

/* An answer from the API. 'json' is the parsed body, or NULL. */
struct ctl_answer {
    int status;
    json_t *json;
};
void ctl_answer_clear(struct ctl_answer *a);

/*
 * Send one request ('body' borrowed, NULL for none). Returns 0 with 'a'
 * holding any answer but 401/403; otherwise prints why (unreachable,
 * timed out, credentials refused) and returns the exit code. The first
 * answer prints the pending banner: rabbitmqctl prints nothing when it
 * cannot reach the node.
 */
int ctl_call(struct ctl *c, enum evhttp_cmd_type method, const char *path,
             const json_t *body, struct ctl_answer *a);
/* As ctl_call, with a raw body of 'len' bytes and 'headers', NULL or
 * name/value pairs ending with a NULL name, added to the request. */
int ctl_call_raw(struct ctl *c, enum evhttp_cmd_type method,
                 const char *path, const char *body, size_t len,
                 const char *const *headers, struct ctl_answer *a,
                 char **raw, size_t *rawlen);

/*
 * A new "/api/..." path from 'fmt', where every %s is replaced by its
 * argument percent-encoded as one path segment ("/" is %2F). Only %s is
 * allowed. Free it.
 */
char *ctl_path(const char *fmt, ...);

/*
 * The "Adding user ..." line: printed on stdout when the API first
 * answers (at once if it already has), unless -q, -s or --formatter json.
 */
void ctl_banner(struct ctl *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An informational line on stdout, unless -q, -s or json. */
void ctl_info(const struct ctl *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print "Error:\n<message>" on stderr and return 'code'. */
int ctl_fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An answer the command did not expect: print its status and reason,
 * return EX_UNAVAILABLE. */
int ctl_unexpected(const struct ctl_answer *a, const char *what);
/*
 * DELETE 'path' (made by ctl_path, freed here) with 'headers' (as
 * ctl_call_raw's); a 404 fails with 'missing_code' and 'missing' (a
 * message), another answer than 200 or 204 is unexpected (doing 'what').
 * 0 or the exit code.
 */
int ctl_delete(struct ctl *c, char *path, const char *const *headers,
               int missing_code, const char *missing, const char *what);

/* The API's "reason" (or "error") of an answer, or "": borrowed, or in
 * 'buf' when the reason is not a string. */
const char *ctl_reason(const struct ctl_answer *a, char *buf, size_t len);

/*
 * Print 'rows' (an array of objects) as rabbitmqctl does: tab-separated
 * columns 'cols' under a header line (unless -s), or with --formatter json
 * one object a line, keys in column order.
 */
void ctl_table(const struct ctl *c, const char *const *cols, size_t ncols,
               const json_t *rows);
/* rabbitmqctl's rendering of one value: strings bare, lists as [a, b],
 * maps as [{k, v}], missing as "". Appends to 'out' (a growing buffer). */
void ctl_render(const json_t *v, char **out, size_t *len, size_t *cap);
/* rabbitmqctl's rendering of an AMQP table (arguments, client
 * properties): [{"key",value},...], strings quoted, no spaces. */
void ctl_render_term(const json_t *v, char **out, size_t *len,
                     size_t *cap);
/* Append 'n' bytes of 's' to 'out' (a growing buffer, kept
 * NUL-terminated). */
void ctl_append(char **out, size_t *len, size_t *cap, const char *s,
                size_t n);

/* Tags as a JSON array, from an array or a comma-separated string. */
json_t *ctl_tags_array(const json_t *tags);

/* Commands (cmd_*.c). */
int cmd_add_user(struct ctl *c);
int cmd_delete_user(struct ctl *c);
int cmd_change_password(struct ctl *c);
int cmd_list_users(struct ctl *c);
int cmd_set_user_tags(struct ctl *c);
int cmd_add_vhost(struct ctl *c);
int cmd_delete_vhost(struct ctl *c);
int cmd_set_permissions(struct ctl *c);
int cmd_clear_permissions(struct ctl *c);
int cmd_list_permissions(struct ctl *c);
int cmd_list_user_permissions(struct ctl *c);
int cmd_export_definitions(struct ctl *c);
int cmd_import_definitions(struct ctl *c);
int cmd_status(struct ctl *c);
int cmd_set_policy(struct ctl *c);
int cmd_clear_policy(struct ctl *c);
int cmd_list_policies(struct ctl *c);
int cmd_set_operator_policy(struct ctl *c);
int cmd_clear_operator_policy(struct ctl *c);
int cmd_list_operator_policies(struct ctl *c);
int cmd_trace_on(struct ctl *c);
int cmd_trace_off(struct ctl *c);
/* list_vhosts, list_queues, ...: the one named by c->command */
int cmd_list(struct ctl *c);
int cmd_purge_queue(struct ctl *c);
int cmd_delete_queue(struct ctl *c);
int cmd_stream_status(struct ctl *c);
int cmd_list_stream_offsets(struct ctl *c);
int cmd_set_stream_offset(struct ctl *c);
int cmd_delete_stream_offset(struct ctl *c);
int cmd_close_connection(struct ctl *c);
int cmd_list_dead_letters(struct ctl *c);
int cmd_replay_dead_letters(struct ctl *c);

/*
 * For a command that takes rabbitmqctl's info keys as its arguments
 * (list_vhosts, list_queues, ...): NULL if every argument names one of
 * its columns, or if the command takes none; otherwise a new string, the
 * unknown ones sorted and comma-separated as rabbitmqctl names them
 * ("aa,zz"). roostctl.c asks before anything is sent. Free it.
 */
char *ctl_unknown_columns(const char *command, int argc,
                          char *const *argv);
/* Whether the command takes columns; print them for its help. */
bool ctl_has_columns(const char *command);
void ctl_print_columns(const char *command, FILE *f);

#endif
