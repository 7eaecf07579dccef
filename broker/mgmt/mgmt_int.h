/*
 * SPDX-License-Identifier: Apache-2.0
 * Inside the management API: what mgmt.c (the server, routing, auth and
 * replies) gives the files that answer each family of resources
 * (mgmt_users.c, mgmt_vhosts.c, mgmt_overview.c, mgmt_policies.c,
 * mgmt_queues.c, mgmt_conns.c, mgmt_deadletters.c), and what guards the
 * listener and serves the web page (mgmt_guard.c, mgmt_www.c). Not for
 * use outside broker/mgmt/.
 *
 * A handler gets a request that matched its route, passed the method
 * and authorization checks, and (for PUT and POST) had its body bounded
 * by management.http.max_body_size. It must answer exactly once, with
 * mgmt_reply or one of the error helpers, before returning.
 */
#ifndef ROOST_BROKER_MGMT_MGMT_INT_H
#define ROOST_BROKER_MGMT_MGMT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "broker/core/perm.h"

struct consumer;
struct user;

/* Longest name (user, vhost, limit) a path segment may carry. */
#define MGMT_NAME_MAX 4096

struct mgmt_req {
    struct evhttp_request *ev;
    enum evhttp_cmd_type method;    /* HEAD is answered as GET */
    const struct user *user;        /* who asks (basic auth) */
    const char *arg[4];             /* the segments the route's '*' took,
                                     * percent-decoded, NUL-free */
    struct evkeyvalq query;         /* the query string, decoded */
    bool answered;
    bool deferred;                  /* a copy made by mgmt_defer */
};

/*
 * Keep 'r' for an answer that comes later (an AMQP reply from the
 * broker, a sync): the copy has its own arguments and query and no
 * user (who asked was checked already). Answer it once, then free it
 * with mgmt_req_free. evhttp keeps the request until it is answered,
 * even if the client has gone meanwhile.
 */
struct mgmt_req *mgmt_defer(struct mgmt_req *r);
void mgmt_req_free(struct mgmt_req *d);

/* ---- answers ---- */

/* Add a header to the answer (before it is sent). */
void mgmt_add_header(struct mgmt_req *r, const char *key, const char *value);

/* Send the answer: 'code' with 'body' (NULL: none; not taken, the caller
 * frees it), once per request (a second answer is fatal). */
void mgmt_answer(struct mgmt_req *r, int code, struct evbuffer *body);

/* Answer 'code' with 'body' (a reference is stolen; NULL: no body) as
 * JSON, with RabbitMQ's headers. An object or a list of objects is cut
 * to the query's "columns" (the top-level keys they name). */
void mgmt_reply(struct mgmt_req *r, int code, json_t *body);

/* Answer 200 with the list 'arr' (stolen), sorted by 'sort' keys (NULL
 * terminated) unless the query's "sort" (and "sort_reverse") says. */
void mgmt_reply_list(struct mgmt_req *r, json_t *arr,
                     const char *const *sort);

/*
 * A list that may be long (queues): the items (references the list
 * takes over) are rendered only as needed: with a page as any list
 * (mgmt_reply_list), else sorted by the keys 'sort_key' gives and
 * written out a slice at a time, the loop free in between.
 */
struct mgmt_list_ops {
    /* The item's JSON (an array: several), or NULL to leave it out
     * (gone meanwhile). */
    json_t *(*render)(void *item);
    void (*release)(void *item);
    /* The value of sort key 'key' as text ('*str') or a number; false
     * for a key it cannot give cheaply. */
    bool (*sort_key)(void *item, const char *key, const char **str,
                     double *num);
};
void mgmt_reply_items(struct mgmt_req *r, void **items, size_t n,
                      const struct mgmt_list_ops *ops,
                      const char *const *sort);

/* Answer 'code' with text 'body' of 'len' bytes as JSON as it is (the
 * definitions export). */
void mgmt_reply_text(struct mgmt_req *r, int code, const char *body,
                     size_t len);

/* {"error": 'error', "reason": 'reason'} with 'code'. */
void mgmt_error(struct mgmt_req *r, int code, const char *error,
                const char *reason);
/* The same with any JSON as the reason (stolen). */
void mgmt_error_json(struct mgmt_req *r, int code, const char *error,
                     json_t *reason);

/* 400 {"error": "bad_request", "reason": ...}. */
void mgmt_bad_request(struct mgmt_req *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* 404 {"error": "Object Not Found", "reason": "Not Found"}. */
void mgmt_not_found(struct mgmt_req *r);

/* 201 (the object is new) or 204, no body. */
void mgmt_reply_created(struct mgmt_req *r, bool created);

/* ---- request bodies ---- */

/*
 * The body as a JSON object, read as RabbitMQ does: an empty body,
 * "null" and "undefined" are {}; a body that is not JSON, or not an
 * object, gets 400 (answered here) and -1. On 0 '*out' is a new
 * reference.
 */
int mgmt_body_object(struct mgmt_req *r, json_t **out);

/* The body's bytes (NULL terminated by evhttp's buffer pull-up). */
const char *mgmt_body(struct mgmt_req *r, size_t *len);

/*
 * Missing required keys: RabbitMQ's 400 "[{key_missing,read}]" for the
 * 'keys' (NULL terminated) that 'o' lacks. Answers and returns -1 if any
 * is missing.
 */
int mgmt_require(struct mgmt_req *r, json_t *o, const char *const *keys);

/* ---- who may see what (RabbitMQ's tags) ---- */

bool mgmt_is_admin(const struct user *u);
/* The vhost of the path's first name, or NULL having answered
 * RabbitMQ's 404 {"error":"not_found","reason":"vhost_not_found"}. */
struct vhost;
struct vhost *mgmt_req_vhost(struct mgmt_req *r);
/* The name of who asks. */
const char *mgmt_user_name(const struct mgmt_req *r);
/* administrator or monitoring */
bool mgmt_is_monitor(const struct user *u);
/* A vhost the user may log in to (has permissions in). */
bool mgmt_is_login_vhost(const struct user *u, const char *vhost);
/* A vhost the user sees: every one for a monitor, else its login ones. */
bool mgmt_is_visible_vhost(const struct user *u, const char *vhost);

/* ---- shapes ---- */

/* A JSON string of 's'; bytes that are not UTF-8 become '?' (names
 * made over AMQP need not be UTF-8). */
json_t *mgmt_str(const char *s);

/*
 * Whether 'name' (from a path segment) may name a new user or vhost:
 * UTF-8 (JSON carries it) and at most 'max' bytes. If not, answers 400
 * and returns false.
 */
bool mgmt_name_ok(struct mgmt_req *r, const char *what, const char *name,
                  size_t max);

/* Tags: defs_json_tags and defs_json_parse_tags (defs_json.h). */

/* ---- counters (stats.h) ---- */

struct msg_stats;
struct stats_series;

/* {"rate": r} */
json_t *mgmt_rate(double r);
/* o[key] = n, and o[key_details] = {"rate": rate} unless rates_mode is
 * none. */
void mgmt_set_count(json_t *o, const char *key, uint64_t n, double rate);
/* RabbitMQ's message_stats: the counters in 'keys' (MS_KEYS_*) with
 * their rates from 's' (its first MS_COUNT values), and deliver_get
 * where deliveries are counted. */
json_t *mgmt_msg_stats(const struct msg_stats *ms, unsigned keys,
                       const struct stats_series *s);

/* ---- history (history.h) ---- */

/* The samples a request asks for, in seconds: RabbitMQ's
 * ?lengths_age=&lengths_incr= (depths) and ?msg_rates_age=&
 * msg_rates_incr= (message_stats); an age of 0: none. */
struct mgmt_history_req {
    uint64_t lengths_age, lengths_incr, rates_age, rates_incr;
};
void mgmt_history_req(struct mgmt_req *r, struct mgmt_history_req *out);

struct history;
/*
 * Add the samples of 'h' that 'hr' asks for: to the *_details of the
 * depths in 'lengths' (messages, messages_ready,
 * messages_unacknowledged) and of the counters in 'ms' (publish,
 * deliver_get, ack, redeliver, and Roost's dead_letter, which is added),
 * as {"rate", "samples": [{"sample", "timestamp"}...] newest first,
 * "avg", "avg_rate"}. 'now' is the values now (HC_*).
 */
void mgmt_add_history(json_t *lengths, json_t *ms, const struct history *h,
                      const uint64_t *now, const struct mgmt_history_req *hr);


/* ---- messages (mgmt_queues.c) ---- */

struct amqp_basic_props;
struct consumer;
/* Content properties as RabbitMQ's /get shows them. */
json_t *mgmt_props_json(const struct amqp_basic_props *p);
/* "payload", "payload_bytes" and "payload_encoding" of a body into 'o':
 * a string if it is UTF-8 text (unless 'base64_always'), else base64;
 * cut to 'truncate' bytes unless that is negative. */
void mgmt_payload_json(json_t *o, const uint8_t *body, size_t len,
                       long truncate, bool base64_always);
/* A consumer as /api/consumers shows it. */
json_t *mgmt_consumer_json(struct consumer *c);

/* The most messages one /get takes. */
#define MGMT_GET_MAX 10000

/* ---- the handlers (one per resource) ---- */

void mgmt_overview(struct mgmt_req *r);
void mgmt_whoami(struct mgmt_req *r);
void mgmt_alarms(struct mgmt_req *r);
void mgmt_definitions(struct mgmt_req *r);
void mgmt_definitions_vhost(struct mgmt_req *r);

void mgmt_users(struct mgmt_req *r);
void mgmt_user(struct mgmt_req *r);
void mgmt_user_permissions(struct mgmt_req *r);
void mgmt_permissions(struct mgmt_req *r);
void mgmt_permission(struct mgmt_req *r);

void mgmt_vhosts(struct mgmt_req *r);
void mgmt_vhost(struct mgmt_req *r);
void mgmt_vhost_permissions(struct mgmt_req *r);
void mgmt_vhost_limits_all(struct mgmt_req *r);
void mgmt_vhost_limits(struct mgmt_req *r);
void mgmt_vhost_limit(struct mgmt_req *r);

void mgmt_policies(struct mgmt_req *r);
void mgmt_policies_vhost(struct mgmt_req *r);
void mgmt_policy(struct mgmt_req *r);
void mgmt_operator_policies(struct mgmt_req *r);
void mgmt_operator_policies_vhost(struct mgmt_req *r);
void mgmt_operator_policy(struct mgmt_req *r);

/* The queue the path names (arg[0], arg[1]); 404 if there is none. */
struct queue *mgmt_path_queue(struct mgmt_req *r);
/* The user's 'kind' permission on 'name' in the queue's vhost, as an
 * AMQP client would need it (administrators too); 401 if not. */
bool mgmt_allowed(struct mgmt_req *r, const struct queue *q,
                  enum perm_kind kind, const char *what, const char *name);

/* A stream's consumer names (mgmt_streams.c). */
json_t *mgmt_stream_offsets_json(const struct queue *q);
/* Its "stream" object, and a consumer's offset and lag added to 'o'. */
json_t *mgmt_stream_json(const struct queue *q);
void mgmt_stream_consumer_json(json_t *o, const struct consumer *c);
void mgmt_stream_offset(struct mgmt_req *r);

/* Roost's dead-letter tools (mgmt_deadletters.c). */
void mgmt_queue_browse(struct mgmt_req *r);
void mgmt_queue_dead_letters(struct mgmt_req *r);
void mgmt_queue_replay(struct mgmt_req *r);
void mgmt_replays(struct mgmt_req *r);
void mgmt_replay(struct mgmt_req *r);
/* Answer 503 to the browses waiting for reads (at shutdown). */
void mgmt_deadletters_stop(void);

void mgmt_queues(struct mgmt_req *r);
void mgmt_queue(struct mgmt_req *r);
void mgmt_queue_contents(struct mgmt_req *r);
void mgmt_queue_get(struct mgmt_req *r);
void mgmt_queue_bindings(struct mgmt_req *r);
void mgmt_exchanges(struct mgmt_req *r);
void mgmt_exchange(struct mgmt_req *r);
void mgmt_exchange_publish(struct mgmt_req *r);
void mgmt_exchange_bindings_source(struct mgmt_req *r);
void mgmt_exchange_bindings_destination(struct mgmt_req *r);
void mgmt_bindings(struct mgmt_req *r);
void mgmt_bindings_eq(struct mgmt_req *r);
void mgmt_bindings_ee(struct mgmt_req *r);
void mgmt_binding_eq(struct mgmt_req *r);
void mgmt_binding_ee(struct mgmt_req *r);
void mgmt_consumers(struct mgmt_req *r);
void mgmt_aliveness(struct mgmt_req *r);

/* ---- around the API (mgmt_guard.c, mgmt_www.c) ---- */

/* Call once before serving: notes the machine's host name. */
void mgmt_guard_init(void);

/*
 * Before any route: the security headers on the answer, the Host (one
 * of this server's names, DNS rebinding) and, for anything but GET and
 * HEAD, the Origin (this server's, cross-site requests). 0, or answered
 * (421, 403) and -1. 'bound_ip' is the listener's address ("::" or
 * "0.0.0.0" for all).
 */
int mgmt_guard(struct mgmt_req *r, const char *bound_ip);

/* The Host part of it, for the Prometheus listener too: 0 if the
 * request's Host is one of this server's names (or it has none), or -1
 * with why in 'reason' (logged at most once a minute). */
int mgmt_host_check(struct evhttp_request *ev, const char *bound_ip,
                    char *reason, size_t len);

/* Answer a path outside /api/ with the web page's file there, or 404. */
void mgmt_www(struct mgmt_req *r, const char *path);

/* For the overview: the listeners noted (mgmt_add_listener) and the
 * API's own, as RabbitMQ lists them. */
json_t *mgmt_listeners_json(void);
json_t *mgmt_contexts_json(void);
/* Whether an AMQP or HTTP listener has 'port'; an AMQP one over TLS
 * ('tls') or not. */
bool mgmt_has_listener_port(int port);
bool mgmt_has_listener_kind(bool tls);
/* o[hkey] and o[pkey]: the host and port of "127.0.0.1:5672" or
 * "[::1]:5672". */
void mgmt_set_addr(json_t *o, const char *hkey, const char *pkey,
                   const char *addr);
/* The exchange types, as RabbitMQ describes them. */
json_t *mgmt_exchange_types_json(void);
/* The process's resident memory (from /proc/self), for the node and
 * /metrics; its open descriptors: stats_open_fds. */
uint64_t mgmt_rss_bytes(void);

/*
 * A listening socket (non-blocking, close-on-exec) on 'ip' ("" for all
 * addresses) and 'port' (0: a free one), with the address it is bound to
 * in 'bound' ("::" style, no brackets) and '*bound_port'; -1 with errno.
 * The management API's listeners and /metrics' (prom.c) share it.
 */
int mgmt_listen(const char *ip, int port, char *bound, size_t len,
                int *bound_port);

/*
 * An HTTP server of the management API or Prometheus: its evhttp,
 * accepting on a guarded listener (lib/accept_guard.h: it backs off when
 * accept fails), each connection through an HTTP guard (http_guard.h:
 * a cap on connections, a deadline on requests, a body limit by route).
 * mgmt_accept makes 'l->http' accept on the listening socket 'fd' with
 * 'lim', named 'what' in the log: 0, or -1 with 'fd' closed and
 * 'l->http' freed (logged). mgmt_unlisten frees what it holds, in the
 * order they need.
 */
struct http_listener {
    struct evhttp *http;
    struct accept_guard *accept;
    struct http_guard *guard;
};
struct http_guard_limits;
int mgmt_accept(struct http_listener *l, int fd, const char *what,
                const struct http_guard_limits *lim);
void mgmt_unlisten(struct http_listener *l);

void mgmt_connections(struct mgmt_req *r);
void mgmt_vhost_connections(struct mgmt_req *r);
void mgmt_connection(struct mgmt_req *r);
void mgmt_connection_channels(struct mgmt_req *r);
void mgmt_channels(struct mgmt_req *r);
void mgmt_vhost_channels(struct mgmt_req *r);
void mgmt_channel(struct mgmt_req *r);
void mgmt_nodes(struct mgmt_req *r);
void mgmt_node(struct mgmt_req *r);
void mgmt_health_virtual_hosts(struct mgmt_req *r);
void mgmt_health_port_listener(struct mgmt_req *r);
void mgmt_health_protocol_listener(struct mgmt_req *r);
void mgmt_health_critical(struct mgmt_req *r);

#endif
