/*
 * SPDX-License-Identifier: Apache-2.0
 * The management API's server: the HTTP and HTTPS listeners (evhttp on
 * the broker's event loop), the route table, basic auth with RabbitMQ's
 * tag rules, and JSON answers in RabbitMQ's shapes. The resources
 * themselves are answered in mgmt_users.c, mgmt_vhosts.c,
 * mgmt_overview.c, mgmt_policies.c, mgmt_queues.c, mgmt_conns.c and
 * mgmt_deadletters.c; paths outside /api/ are the web page's files
 * (mgmt_www.c).
 *
 * Before anything else, mgmt_guard.c sets the security headers and
 * refuses a Host that is not this server's (421) and a write from
 * another origin (403). Then every API request is checked in the order
 * RabbitMQ's cowboy_rest does it, so that clients see the same status
 * for the same mistake: the path (404), the method (405; OPTIONS answers
 * the allowed ones), the credentials (401), the user's tags (401), the
 * body's content type where RabbitMQ asks for JSON (415; Roost also
 * wants JSON for any other PUT or POST with a body or a type), then the
 * resource.
 *
 * What a peer controls is bounded before it costs anything: evhttp
 * refuses headers over HEADERS_MAX and bodies over
 * management.http.max_body_size (413), and closes a connection idle or
 * slow for management.tcp.idle_timeout; a path has at most SEGS_MAX
 * segments; credentials are decoded into a fixed buffer.
 */
#include "broker/mgmt/mgmt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/perm.h"
#include "broker/core/stats.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/accept_guard.h"
#include "broker/lib/log.h"
#include "broker/lib/port_holder.h"
#include "broker/lib/util.h"
#include "broker/mgmt/http_guard.h"
#include "broker/mgmt/mgmt_int.h"
#include "tls/hash.h"
#include "tls/tls.h"

#define HEADERS_MAX (64 * 1024)
#define SEGS_MAX 8
#define LISTENERS_MAX 16
#define REALM "Basic realm=\"RabbitMQ Management\""

/* ---- routes ---- */

enum route_auth {
    AUTH_MGMT,              /* any management user */
    AUTH_ADMIN,             /* administrator */
    AUTH_VHOST,             /* admin, or a user with permissions in arg[0] */
    AUTH_VHOST_VISIBLE,     /* admin, or a user who sees vhost arg[0] */
    AUTH_POLICY,            /* AUTH_VHOST, and a policymaker */
    AUTH_MONITOR,           /* administrator or monitoring */
};

#define M_GET (1u << 0)
#define M_POST (1u << 1)
#define M_PUT (1u << 2)
#define M_DELETE (1u << 3)

struct route {
    const char *path;       /* after "/api/"; '*' takes one name */
    unsigned methods;
    enum route_auth auth;
    bool json_body;         /* PUT and POST need application/json (415) */
    void (*fn)(struct mgmt_req *r);
};

/* RabbitMQ's dispatcher (rabbit_mgmt_dispatcher.erl), the part Roost
 * answers, with each resource's methods and is_authorized rule. */
static const struct route routes[] = {
    { "overview", M_GET, AUTH_MGMT, false, mgmt_overview },
    { "whoami", M_GET, AUTH_MGMT, false, mgmt_whoami },
    { "users", M_GET, AUTH_ADMIN, false, mgmt_users },
    { "users/*", M_GET | M_PUT | M_DELETE, AUTH_ADMIN, false, mgmt_user },
    { "users/*/permissions", M_GET, AUTH_ADMIN, false,
      mgmt_user_permissions },
    { "vhosts", M_GET, AUTH_MGMT, false, mgmt_vhosts },
    { "vhosts/*", M_GET | M_PUT | M_DELETE, AUTH_ADMIN, false, mgmt_vhost },
    { "vhosts/*/permissions", M_GET, AUTH_ADMIN, false,
      mgmt_vhost_permissions },
    { "permissions", M_GET, AUTH_ADMIN, false, mgmt_permissions },
    { "permissions/*/*", M_GET | M_PUT | M_DELETE, AUTH_ADMIN, false,
      mgmt_permission },
    { "vhost-limits", M_GET, AUTH_MGMT, false, mgmt_vhost_limits_all },
    { "vhost-limits/*", M_GET, AUTH_VHOST_VISIBLE, false,
      mgmt_vhost_limits },
    { "vhost-limits/*/*", M_PUT | M_DELETE, AUTH_ADMIN, true,
      mgmt_vhost_limit },
    { "definitions", M_GET | M_POST, AUTH_ADMIN, true, mgmt_definitions },
    { "all-configuration", M_GET | M_POST, AUTH_ADMIN, true,
      mgmt_definitions },
    { "definitions/*", M_GET | M_POST, AUTH_ADMIN, true,
      mgmt_definitions_vhost },
    { "aliveness-test/*", M_GET, AUTH_VHOST, false, mgmt_aliveness },
    { "health/checks/alarms", M_GET, AUTH_MGMT, false, mgmt_alarms },
    { "policies", M_GET, AUTH_MGMT, false, mgmt_policies },
    { "policies/*", M_GET, AUTH_VHOST, false, mgmt_policies_vhost },
    { "policies/*/*", M_GET | M_PUT | M_DELETE, AUTH_POLICY, false,
      mgmt_policy },
    { "operator-policies", M_GET, AUTH_MGMT, false, mgmt_operator_policies },
    { "operator-policies/*", M_GET, AUTH_VHOST, false,
      mgmt_operator_policies_vhost },
    { "operator-policies/*/*", M_GET | M_PUT | M_DELETE, AUTH_ADMIN, false,
      mgmt_operator_policy },
    { "queues", M_GET, AUTH_MGMT, false, mgmt_queues },
    { "queues/*", M_GET, AUTH_VHOST_VISIBLE, false, mgmt_queues },
    { "queues/*/*", M_GET | M_PUT | M_DELETE, AUTH_VHOST, true, mgmt_queue },
    { "queues/*/*/contents", M_DELETE, AUTH_VHOST, false,
      mgmt_queue_contents },
    { "queues/*/*/get", M_POST, AUTH_VHOST, true, mgmt_queue_get },
    { "queues/*/*/bindings", M_GET, AUTH_VHOST, false, mgmt_queue_bindings },
    { "queues/*/*/offsets/*", M_GET | M_PUT | M_DELETE, AUTH_VHOST, true,
      mgmt_stream_offset },
    { "exchanges", M_GET, AUTH_MGMT, false, mgmt_exchanges },
    { "exchanges/*", M_GET, AUTH_VHOST_VISIBLE, false, mgmt_exchanges },
    { "exchanges/*/*", M_GET | M_PUT | M_DELETE, AUTH_VHOST, true,
      mgmt_exchange },
    { "exchanges/*/*/publish", M_POST, AUTH_VHOST, true,
      mgmt_exchange_publish },
    { "exchanges/*/*/bindings/source", M_GET, AUTH_VHOST, false,
      mgmt_exchange_bindings_source },
    { "exchanges/*/*/bindings/destination", M_GET, AUTH_VHOST, false,
      mgmt_exchange_bindings_destination },
    { "bindings", M_GET, AUTH_MGMT, false, mgmt_bindings },
    { "bindings/*", M_GET, AUTH_VHOST_VISIBLE, false, mgmt_bindings },
    { "bindings/*/e/*/q/*", M_GET | M_POST, AUTH_VHOST, true,
      mgmt_bindings_eq },
    { "bindings/*/e/*/e/*", M_GET | M_POST, AUTH_VHOST, true,
      mgmt_bindings_ee },
    { "bindings/*/e/*/q/*/*", M_GET | M_DELETE, AUTH_VHOST, false,
      mgmt_binding_eq },
    { "bindings/*/e/*/e/*/*", M_GET | M_DELETE, AUTH_VHOST, false,
      mgmt_binding_ee },
    { "consumers", M_GET, AUTH_MGMT, false, mgmt_consumers },
    { "connections", M_GET, AUTH_MGMT, false, mgmt_connections },
    { "connections/*", M_GET | M_DELETE, AUTH_MGMT, false, mgmt_connection },
    { "connections/*/channels", M_GET, AUTH_MGMT, false,
      mgmt_connection_channels },
    { "vhosts/*/connections", M_GET, AUTH_VHOST_VISIBLE, false,
      mgmt_vhost_connections },
    { "channels", M_GET, AUTH_MGMT, false, mgmt_channels },
    { "channels/*", M_GET, AUTH_MGMT, false, mgmt_channel },
    { "vhosts/*/channels", M_GET, AUTH_VHOST_VISIBLE, false,
      mgmt_vhost_channels },
    { "nodes", M_GET, AUTH_MONITOR, false, mgmt_nodes },
    { "nodes/*", M_GET, AUTH_MONITOR, false, mgmt_node },
    { "health/checks/local-alarms", M_GET, AUTH_MGMT, false, mgmt_alarms },
    { "health/checks/virtual-hosts", M_GET, AUTH_MGMT, false,
      mgmt_health_virtual_hosts },
    { "health/checks/port-listener/*", M_GET, AUTH_MGMT, false,
      mgmt_health_port_listener },
    { "health/checks/protocol-listener/*", M_GET, AUTH_MGMT, false,
      mgmt_health_protocol_listener },
    { "health/checks/node-is-mirror-sync-critical", M_GET, AUTH_MGMT, false,
      mgmt_health_critical },
    { "health/checks/node-is-quorum-critical", M_GET, AUTH_MGMT, false,
      mgmt_health_critical },
    { "consumers/*", M_GET, AUTH_VHOST_VISIBLE, false, mgmt_consumers },
    /* Roost's own: dead-letter tools (mgmt_deadletters.c) */
    { "queues/*/*/browse", M_GET, AUTH_VHOST, false, mgmt_queue_browse },
    { "queues/*/*/dead-letters", M_GET, AUTH_VHOST, false,
      mgmt_queue_dead_letters },
    { "queues/*/*/replay", M_POST, AUTH_VHOST, true, mgmt_queue_replay },
    { "replays", M_GET, AUTH_MGMT, false, mgmt_replays },
    { "replays/*", M_GET | M_DELETE, AUTH_MGMT, false, mgmt_replay },
};

/* ---- the servers ---- */

struct server {
    struct http_listener l;
    bool tls;
    char ip[INET6_ADDRSTRLEN];  /* as bound; "::" for all addresses */
    int port;
};

static struct server servers[2];        /* HTTP, HTTPS */
static struct tls_ctx *https_ctx;

/* The AMQP listeners, for the overview. */
static struct amqp_listener {
    bool tls;
    char ip[INET6_ADDRSTRLEN + 2];
    int port;
} amqp_listeners[LISTENERS_MAX];
static size_t n_amqp_listeners;

void
mgmt_add_listener(bool tls, const char *host, int port)
{
    if (n_amqp_listeners == LISTENERS_MAX)
        return;
    struct amqp_listener *l = &amqp_listeners[n_amqp_listeners++];
    l->tls = tls;
    l->port = port;
    /* RabbitMQ says "::" for all addresses. */
    snprintf(l->ip, sizeof(l->ip), "%s", host[0] ? host : "::");
}

void
mgmt_add_listener_addr(bool tls, const char *addr, int port)
{
    /* As listener_start_addr: the host is what precedes the last colon,
     * in brackets for IPv6. */
    const char *colon = strrchr(addr, ':');
    char host[INET6_ADDRSTRLEN + 2] = "";
    size_t n = colon ? (size_t)(colon - addr) : 0;

    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (n < sizeof(host)) {
        memcpy(host, addr, n);
        host[n] = '\0';
    }
    mgmt_add_listener(tls, host, port);
}

json_t *
mgmt_listeners_json(void)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n_amqp_listeners; i++) {
        const struct amqp_listener *l = &amqp_listeners[i];
        json_array_append_new(arr, json_pack(
            "{s:s, s:s, s:s, s:i}", "node", broker_node_name(),
            "protocol", l->tls ? "amqp/ssl" : "amqp", "ip_address", l->ip,
            "port", l->port));
    }
    for (size_t i = 0; i < NELEMS(servers); i++) {
        const struct server *s = &servers[i];
        if (s->l.http == NULL)
            continue;
        json_array_append_new(arr, json_pack(
            "{s:s, s:s, s:s, s:i}", "node", broker_node_name(),
            "protocol", s->tls ? "https" : "http", "ip_address", s->ip,
            "port", s->port));
    }
    return arr;
}

bool
mgmt_has_listener_port(int port)
{
    for (size_t i = 0; i < n_amqp_listeners; i++)
        if (amqp_listeners[i].port == port)
            return true;
    for (size_t i = 0; i < NELEMS(servers); i++)
        if (servers[i].l.http != NULL && servers[i].port == port)
            return true;
    return false;
}

bool
mgmt_has_listener_kind(bool tls)
{
    for (size_t i = 0; i < n_amqp_listeners; i++)
        if (amqp_listeners[i].tls == tls)
            return true;
    return false;
}

json_t *
mgmt_contexts_json(void)
{
    json_t *arr = json_array();
    char port[16];
    for (size_t i = 0; i < NELEMS(servers); i++) {
        const struct server *s = &servers[i];
        if (s->l.http == NULL)
            continue;
        /* RabbitMQ gives the port of a context as a string. */
        snprintf(port, sizeof(port), "%d", s->port);
        json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:s}", "node",
                              broker_node_name(), "description",
                              "RabbitMQ Management", "path", "/", "ip",
                              s->ip, "port", port);
        if (s->tls)
            json_object_set_new(c, "protocol", json_string("https"));
        json_array_append_new(arr, c);
    }
    return arr;
}

/* ---- answers ---- */

static void
add_header(struct mgmt_req *r, const char *key, const char *value)
{
    evhttp_add_header(evhttp_request_get_output_headers(r->ev), key, value);
}

static void
answer(struct mgmt_req *r, int code, struct evbuffer *body)
{
    if (r->answered)
        fatalx("management API: a request answered twice");
    r->answered = true;
    /* evhttp names the codes it knows; mgmt_guard's is newer. */
    evhttp_send_reply(r->ev, code, code == 421 ? "Misdirected Request" : NULL,
                      body);
}

void
mgmt_add_header(struct mgmt_req *r, const char *key, const char *value)
{
    add_header(r, key, value);
}

void
mgmt_answer(struct mgmt_req *r, int code, struct evbuffer *body)
{
    answer(r, code, body);
}

json_t *
mgmt_str(const char *s)
{
    return defs_json_str(s, strlen(s));
}

bool
mgmt_name_ok(struct mgmt_req *r, const char *what, const char *name,
             size_t max)
{
    json_t *v = json_string(name);
    json_decref(v);
    if (v == NULL) {
        mgmt_bad_request(r, "%s name is not UTF-8", what);
        return false;
    }
    if (strlen(name) > max) {
        mgmt_bad_request(r, "%s name is longer than %zu bytes", what, max);
        return false;
    }
    return true;
}

/* The query's "columns": keep the top-level keys they name (RabbitMQ
 * keeps a nested object whole when one of its keys is named). */
static json_t *
cut_columns(json_t *o, const char *columns)
{
    if (!json_is_object(o))
        return o;
    json_t *out = json_object();
    const char *p = columns;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        size_t top = strcspn(p, ".,");
        char *key = xstrndup(p, top);
        json_t *v = json_object_get(o, key);
        if (v != NULL)
            json_object_set(out, key, v);
        free(key);
        p += n;
        if (*p == ',')
            p++;
    }
    json_decref(o);
    return out;
}

void
mgmt_reply(struct mgmt_req *r, int code, json_t *body)
{
    struct evbuffer *buf = NULL;
    const char *columns = evhttp_find_header(&r->query, "columns");

    if (body != NULL) {
        /* a page (paginate) cuts its items */
        json_t *list = json_is_array(body) ? body
                     : json_object_get(body, "items");
        if (columns != NULL && json_is_array(list)) {
            for (size_t i = 0; i < json_array_size(list); i++) {
                json_t *item = json_incref(json_array_get(list, i));
                json_array_set_new(list, i, cut_columns(item, columns));
            }
        } else if (columns != NULL) {
            body = cut_columns(body, columns);
        }
        char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(body);
        if (text == NULL)
            fatalx("management API: out of memory");
        buf = evbuffer_new();
        evbuffer_add(buf, text, strlen(text));
        free(text);
        add_header(r, "Content-Type", "application/json");
    }
    add_header(r, "Cache-Control", "no-cache");
    add_header(r, "Vary", "accept, accept-encoding, origin");
    answer(r, code, buf);
    if (buf != NULL)
        evbuffer_free(buf);
}

void
mgmt_reply_text(struct mgmt_req *r, int code, const char *body, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add(buf, body, len);
    add_header(r, "Content-Type", "application/json");
    add_header(r, "Cache-Control", "no-cache");
    add_header(r, "Vary", "accept, accept-encoding, origin");
    answer(r, code, buf);
    evbuffer_free(buf);
}

void
mgmt_reply_created(struct mgmt_req *r, bool created)
{
    mgmt_reply(r, created ? 201 : 204, NULL);
}

void
mgmt_error_json(struct mgmt_req *r, int code, const char *error,
                json_t *reason)
{
    struct evbuffer *buf = evbuffer_new();
    json_t *o = json_pack("{s:s, s:o}", "error", error, "reason", reason);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text == NULL)
        fatalx("management API: out of memory");
    evbuffer_add(buf, text, strlen(text));
    free(text);
    add_header(r, "Content-Type", "application/json");
    add_header(r, "Vary", "accept, accept-encoding, origin");
    answer(r, code, buf);
    evbuffer_free(buf);
}

void
mgmt_error(struct mgmt_req *r, int code, const char *error,
           const char *reason)
{
    mgmt_error_json(r, code, error, mgmt_str(reason));
}

void
mgmt_bad_request(struct mgmt_req *r, const char *fmt, ...)
{
    char reason[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    mgmt_error(r, 400, "bad_request", reason);
}

void
mgmt_not_found(struct mgmt_req *r)
{
    mgmt_error(r, 404, "Object Not Found", "Not Found");
}

/* An answer with no body but 'code' (and the headers set before). */
static void
reply_empty(struct mgmt_req *r, int code)
{
    add_header(r, "Content-Length", "0");
    answer(r, code, NULL);
}

struct vhost *
mgmt_req_vhost(struct mgmt_req *r)
{
    struct vhost *vh = broker_vhost(r->arg[0], strlen(r->arg[0]));
    if (vh == NULL)
        mgmt_error(r, 404, "not_found", "vhost_not_found");
    return vh;
}

const char *
mgmt_user_name(const struct mgmt_req *r)
{
    return r->user->name;
}

/* ---- counters and rates ---- */

json_t *
mgmt_rate(double r)
{
    return json_pack("{s:f}", "rate", r);
}

void
mgmt_set_count(json_t *o, const char *key, uint64_t n, double rate)
{
    char k[64];
    json_object_set_new(o, key, json_integer((json_int_t)n));
    if (stats_rates_mode() == RATES_NONE)
        return;
    snprintf(k, sizeof(k), "%s_details", key);
    json_object_set_new(o, k, mgmt_rate(rate));
}

json_t *
mgmt_msg_stats(const struct msg_stats *ms, unsigned keys,
               const struct stats_series *s)
{
    static const int deliver_get[] = { MS_DELIVER, MS_DELIVER_NO_ACK, MS_GET,
                                       MS_GET_NO_ACK };
    json_t *o = json_object();
    for (int i = 0; i < MS_COUNT; i++)
        if (keys & (1u << i))
            mgmt_set_count(o, msg_stat_names[i], ms->n[i], stats_rate(s, i));
    if (keys & (1u << MS_DELIVER)) {
        uint64_t n = 0;
        double rate = 0;
        for (size_t i = 0; i < NELEMS(deliver_get); i++) {
            n += ms->n[deliver_get[i]];
            rate += stats_rate(s, deliver_get[i]);
        }
        mgmt_set_count(o, "deliver_get", n, rate);
    }
    return o;
}

/* ---- history ---- */

/* ?KEY=N with N a whole number of seconds; 0 when absent or not one. */
static uint64_t
query_seconds(struct mgmt_req *r, const char *key)
{
    const char *v = evhttp_find_header(&r->query, key);
    char *end;
    if (v == NULL || *v < '0' || *v > '9')
        return 0;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    return *end || errno ? 0 : (uint64_t)n;
}

void
mgmt_history_req(struct mgmt_req *r, struct mgmt_history_req *out)
{
    out->lengths_age = query_seconds(r, "lengths_age");
    out->lengths_incr = query_seconds(r, "lengths_incr");
    out->rates_age = query_seconds(r, "msg_rates_age");
    out->rates_incr = query_seconds(r, "msg_rates_incr");
}

/* The samples of 'cols' (one column, or two summed) into o[key_details]
 * (made when missing). */
static void
add_samples(json_t *o, const char *key, const struct history *h,
            const int *cols, size_t ncols, const uint64_t *now,
            uint64_t age, uint64_t incr)
{
    struct history_sample a[128], b[128];
    char k[64];
    size_t n = 0;
    uint64_t v_now = 0;
    for (size_t c = 0; c < ncols; c++) {
        size_t m = history_samples(h, cols[c], now[cols[c]],
                                   broker.cfg.collect_statistics_interval,
                                   age, incr, c ? b : a, NELEMS(a));
        if (c == 0)
            n = m;
        for (size_t i = 0; c > 0 && i < n && i < m; i++)
            a[i].value += b[i].value;
        v_now += now[cols[c]];
    }
    snprintf(k, sizeof(k), "%s_details", key);
    json_t *d = json_object_get(o, k);
    if (d == NULL) {
        json_object_set_new(o, key, json_integer((json_int_t)v_now));
        json_object_set_new(o, k, d = mgmt_rate(0));
    }
    json_t *samples = json_array();
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(samples, json_pack(
            "{s:I, s:I}", "sample", (json_int_t)a[i].value, "timestamp",
            (json_int_t)a[i].ts_ms));
        sum += (double)a[i].value;
    }
    json_object_set_new(d, "samples", samples);
    json_object_set_new(d, "avg", json_real(n ? sum / (double)n : 0.0));
    double span = n > 1 ? (double)(a[0].ts_ms - a[n - 1].ts_ms) : 0;
    json_object_set_new(d, "avg_rate", json_real(
        span > 0 ? ((double)a[0].value - (double)a[n - 1].value) * 1000.0 /
                       span
                 : 0.0));
}

void
mgmt_add_history(json_t *lengths, json_t *ms, const struct history *h,
                 const uint64_t *now, const struct mgmt_history_req *hr)
{
    static const int both[] = { HC_READY, HC_UNACKED };
    static const struct { const char *key; int col; } rates[] = {
        { "publish", HC_PUBLISH }, { "deliver_get", HC_DELIVER_GET },
        { "ack", HC_ACK }, { "redeliver", HC_REDELIVER },
        { "dead_letter", HC_DEAD_LETTER },
    };
    if (stats_rates_mode() == RATES_NONE)
        return;
    if (hr->lengths_age && lengths) {
        add_samples(lengths, "messages", h, both, 2, now, hr->lengths_age,
                    hr->lengths_incr);
        add_samples(lengths, "messages_ready", h, &both[0], 1, now,
                    hr->lengths_age, hr->lengths_incr);
        add_samples(lengths, "messages_unacknowledged", h, &both[1], 1, now,
                    hr->lengths_age, hr->lengths_incr);
    }
    if (hr->rates_age && ms)
        for (size_t i = 0; i < NELEMS(rates); i++)
            add_samples(ms, rates[i].key, h, &rates[i].col, 1, now,
                        hr->rates_age, hr->rates_incr);
}

/* ---- answers that come later ---- */

struct mgmt_req *
mgmt_defer(struct mgmt_req *r)
{
    struct mgmt_req *d = xcalloc(1, sizeof(*d));
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->ev);
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;

    d->ev = r->ev;
    d->method = r->method;
    d->deferred = true;
    for (int i = 0; i < 4; i++)
        d->arg[i] = r->arg[i] ? xstrdup(r->arg[i]) : NULL;
    TAILQ_INIT(&d->query);
    if (query != NULL && evhttp_parse_query_str(query, &d->query) != 0)
        evhttp_clear_headers(&d->query);
    r->answered = true;     /* by the copy */
    return d;
}

void
mgmt_req_free(struct mgmt_req *d)
{
    if (!d->answered)
        fatalx("management API: a deferred request was never answered");
    for (int i = 0; i < 4; i++)
        free((char *)d->arg[i]);
    evhttp_clear_headers(&d->query);
    free(d);
}

/* ---- sorting lists ---- */

static const char *const *sort_keys;
static bool sort_reverse;

/* Order as Erlang's terms: numbers before strings; absent first. */
static int
cmp_json(const json_t *a, const json_t *b)
{
    int ra = a == NULL ? 0 : json_is_number(a) ? 1 : json_is_string(a) ? 2 : 3;
    int rb = b == NULL ? 0 : json_is_number(b) ? 1 : json_is_string(b) ? 2 : 3;
    if (ra != rb || ra == 0 || ra == 3)
        return ra - rb;
    if (ra == 1) {
        double x = json_number_value(a), y = json_number_value(b);
        return x < y ? -1 : x > y;
    }
    return strcmp(json_string_value(a), json_string_value(b));
}

static int
cmp_items(const void *pa, const void *pb)
{
    const json_t *a = *(const json_t *const *)pa;
    const json_t *b = *(const json_t *const *)pb;
    for (size_t i = 0; sort_keys[i] != NULL; i++) {
        int c = cmp_json(json_object_get(a, sort_keys[i]),
                         json_object_get(b, sort_keys[i]));
        if (c != 0)
            return sort_reverse ? -c : c;
    }
    return 0;
}

/* A decimal query parameter: -1 absent, -2 not a positive number. */
static long
query_number(struct mgmt_req *r, const char *name)
{
    const char *v = evhttp_find_header(&r->query, name);
    char *end;
    if (v == NULL)
        return -1;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno != 0 || n < 0)
        return -2;
    return n;
}

/* Case-insensitive substring, as RabbitMQ's name filter without
 * use_regex. */
static bool
name_has(const char *name, const char *part)
{
    size_t n = strlen(part);
    for (const char *p = name; *p; p++)
        if (strncasecmp(p, part, n) == 0)
            return true;
    return n == 0;
}

struct page {
    long page, size;
    const char *name;           /* the filter, or NULL */
    void *re;                   /* with use_regex */
    /* The filter's budget: a regular expression past its match limit on
     * a name (perm_re_run), or a filter that took more than
     * PAGE_FILTER_MS in all, ends the request with a 400 (page_over). */
    const char *over;           /* why it ended, or NULL */
    size_t tested;
    int64_t started_ms;
};

#define PAGE_FILTER_MS 250

/*
 * The page the query asks for (RabbitMQ's rabbit_mgmt_util:paginate):
 * "page", of "page_size" items (100, at most 500), of the list filtered
 * by "name" (a substring, or with use_regex=true a regular expression).
 * 0 none, 1 one (in 'pg'; free pg->re with perm_re_free), -1 answered
 * with RabbitMQ's 400.
 */
static int
page_args(struct mgmt_req *r, struct page *pg)
{
    long page = query_number(r, "page"), size = query_number(r, "page_size");
    const char *name = evhttp_find_header(&r->query, "name");
    const char *regex = evhttp_find_header(&r->query, "use_regex");
    char msg[256];
    size_t at;

    memset(pg, 0, sizeof(*pg));
    if (page == -1)
        return 0;
    if (page == -2 || size == -2) {
        mgmt_bad_request(r, "Pagination parameters are invalid");
        return -1;
    }
    if (page < 1 || size == 0 || size > 500) {
        char reason[160], sz[24] = "undefined";
        if (size >= 0)
            snprintf(sz, sizeof(sz), "%ld", size);
        snprintf(reason, sizeof(reason), "Invalid pagination parameters: "
                 "page number %ld, page size %s", page, sz);
        mgmt_error(r, 400, "invalid_pagination_parameters", reason);
        return -1;
    }
    pg->page = page;
    pg->size = size < 0 ? 100 : size;
    pg->name = name != NULL && name[0] != '\0' ? name : NULL;
    if (pg->name != NULL && regex != NULL && strcmp(regex, "true") == 0 &&
        (pg->re = perm_re_compile(name, msg, sizeof(msg), &at)) == NULL) {
        mgmt_bad_request(r, "Pagination parameters are invalid");
        return -1;
    }
    return 1;
}

static bool
page_keeps(struct page *pg, const char *name)
{
    if (pg->name == NULL)
        return true;
    if (name == NULL || pg->over != NULL)
        return false;
    if (pg->re == NULL)
        return name_has(name, pg->name);
    if (pg->tested++ % 64 == 0) {
        if (pg->started_ms == 0)
            pg->started_ms = mono_ms();
        else if (mono_ms() - pg->started_ms > PAGE_FILTER_MS)
            pg->over = "took too long";
    }
    enum perm_re_result m = perm_re_run(pg->re, name, strlen(name));
    if (m == PERM_RE_LIMIT)
        pg->over = "exceeds its match limit";
    return m == PERM_RE_YES;
}

/* Whether the filter's budget ran out: then answered with a 400. */
static bool
page_over(struct mgmt_req *r, const struct page *pg)
{
    if (pg->over == NULL)
        return false;
    mgmt_bad_request(r, "Pagination parameters are invalid: the name's "
                     "regular expression %s", pg->over);
    return true;
}

/* Where page 'pg' of 'filtered' items starts, or -1 having answered
 * page_out_of_range. */
static long
page_start(struct mgmt_req *r, const struct page *pg, size_t filtered)
{
    size_t pages = (filtered + (size_t)pg->size - 1) / (size_t)pg->size;
    if ((size_t)pg->page > (pages ? pages : 1)) {
        char reason[160];
        snprintf(reason, sizeof(reason), "Page out of range, page: %ld page "
                 "size: %ld, len: %zu", pg->page, pg->size, filtered);
        mgmt_error(r, 400, "page_out_of_range", reason);
        return -1;
    }
    return (pg->page - 1) * pg->size;
}

static json_t *
page_json(const struct page *pg, json_t *items, size_t filtered,
          size_t total)
{
    size_t pages = (filtered + (size_t)pg->size - 1) / (size_t)pg->size;
    return json_pack("{s:I, s:I, s:o, s:I, s:I, s:I, s:I}",
                     "filtered_count", (json_int_t)filtered,
                     "item_count", (json_int_t)json_array_size(items),
                     "items", items, "page", (json_int_t)pg->page,
                     "page_count", (json_int_t)pages,
                     "page_size", (json_int_t)pg->size,
                     "total_count", (json_int_t)total);
}

/* A list cut to the query's page: 0 with the page in '*out' (or, with
 * none asked for, 'arr' itself), -1 after an error. */
static int
paginate(struct mgmt_req *r, json_t *arr, json_t **out)
{
    struct page pg;
    int k = page_args(r, &pg);

    *out = arr;
    if (k <= 0)
        return k;
    size_t total = json_array_size(arr);
    json_t *kept = json_array();
    for (size_t i = 0; i < total; i++) {
        json_t *item = json_array_get(arr, i);
        if (page_keeps(&pg, json_string_value(json_object_get(item, "name"))))
            json_array_append(kept, item);
    }
    perm_re_free(pg.re);
    if (page_over(r, &pg)) {
        json_decref(kept);
        return -1;
    }
    size_t filtered = json_array_size(kept);
    long start = page_start(r, &pg, filtered);
    if (start < 0) {
        json_decref(kept);
        return -1;
    }
    json_t *items = json_array();
    for (size_t i = (size_t)start;
         i < filtered && i < (size_t)start + (size_t)pg.size; i++)
        json_array_append(items, json_array_get(kept, i));
    json_decref(kept);
    json_decref(arr);
    *out = page_json(&pg, items, filtered, total);
    return 0;
}

void
mgmt_reply_list(struct mgmt_req *r, json_t *arr, const char *const *sort)
{
    const char *key = evhttp_find_header(&r->query, "sort");
    const char *rev = evhttp_find_header(&r->query, "sort_reverse");
    const char *by[2] = { key, NULL };
    size_t n = json_array_size(arr);
    json_t **items = xcalloc(n + 1, sizeof(*items));

    for (size_t i = 0; i < n; i++)
        items[i] = json_incref(json_array_get(arr, i));
    sort_keys = key != NULL && key[0] != '\0' ? by : sort;
    sort_reverse = rev != NULL && strcmp(rev, "true") == 0;
    qsort(items, n, sizeof(*items), cmp_items);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, items[i]);
    free(items);
    json_t *out;
    if (paginate(r, arr, &out) != 0) {
        json_decref(arr);
        return;
    }
    mgmt_reply(r, 200, out);
}

/* ---- long lists, a slice at a time ---- */

/*
 * A list of items the API renders only as far as it must (queues: a
 * broker may have 100,000): filtered by name and sorted on small keys
 * taken from each item once, cut to its page, and rendered; a whole
 * list goes out as a chunked reply, STREAM_SLICE items a loop turn,
 * the next slice when the last one was written, so that neither the
 * loop nor the memory of a slow client's output holds more than a slice.
 */
#define STREAM_SLICE 64

struct sort_item {
    void *item;
    const char *str;            /* the first sort key's value as text */
    double num;                 /* ... or as a number */
    const char *str2;           /* the second key, text */
    /* the keys' first 8 bytes, big-endian: most comparisons end there,
     * without touching the items (100,000 cache misses otherwise) */
    uint64_t pre, pre2;
};

static uint64_t
prefix(const char *s)
{
    uint64_t p = 0;
    int i = 0;
    for (; s != NULL && i < 8 && s[i] != '\0'; i++)
        p = (p << 8) | (uint8_t)s[i];
    return i == 0 ? 0 : p << (8 * (8 - i));
}

/* Compare two texts whose prefixes are 'pa' and 'pb'. */
static int
cmp_text(const char *a, const char *b, uint64_t pa, uint64_t pb)
{
    if (pa != pb)
        return pa < pb ? -1 : 1;
    return strcmp(a ? a : "", b ? b : "");
}

struct stream {
    struct mgmt_req *r;         /* deferred */
    const struct mgmt_list_ops *ops;
    struct sort_item *v;
    size_t n, next;
    char *columns;
    struct event *ev;
    bool emitted;               /* an item went out: the next needs ',' */
};

static int
cmp_sort_items(const void *pa, const void *pb)
{
    const struct sort_item *a = pa, *b = pb;
    int c;
    if (a->str != NULL || b->str != NULL)
        c = cmp_text(a->str, b->str, a->pre, b->pre);
    else
        c = a->num < b->num ? -1 : a->num > b->num;
    if (c == 0 && (a->str2 != NULL || b->str2 != NULL))
        c = cmp_text(a->str2, b->str2, a->pre2, b->pre2);
    return sort_reverse ? -c : c;
}

/* What an item rendered to (an object, several in an array, or NULL)
 * onto 'list'; 'o' is stolen. */
static void
add_rendered(json_t *list, json_t *o)
{
    if (o == NULL)
        return;
    if (json_is_array(o))
        json_array_extend(list, o);
    else
        json_array_append(list, o);
    json_decref(o);
}

static void stream_slice(evutil_socket_t fd, short what, void *arg);

static void
stream_written(struct evhttp_connection *evcon, void *arg)
{
    struct stream *st = arg;
    (void)evcon;
    event_active(st->ev, EV_TIMEOUT, 0);
}

static void
stream_end(struct stream *st)
{
    for (size_t i = st->next; i < st->n; i++)
        st->ops->release(st->v[i].item);
    free(st->v);
    free(st->columns);
    event_free(st->ev);
    mgmt_req_free(st->r);
    free(st);
}

static void
stream_slice(evutil_socket_t fd, short what, void *arg)
{
    struct stream *st = arg;
    struct evbuffer *buf = evbuffer_new();
    (void)fd;
    (void)what;
    size_t end = st->next + STREAM_SLICE < st->n ? st->next + STREAM_SLICE
                                                : st->n;
    for (; st->next < end; st->next++) {
        void *item = st->v[st->next].item;
        json_t *list = json_array();
        add_rendered(list, st->ops->render(item));
        st->ops->release(item);
        for (size_t k = 0; k < json_array_size(list); k++) {
            json_t *o = json_incref(json_array_get(list, k));
            if (st->columns)
                o = cut_columns(o, st->columns);
            char *text = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
            json_decref(o);
            if (text == NULL)
                fatalx("management API: out of memory");
            if (st->emitted)
                evbuffer_add(buf, ",", 1);
            evbuffer_add(buf, text, strlen(text));
            st->emitted = true;
            free(text);
        }
        json_decref(list);
    }
    if (st->next == st->n) {
        evbuffer_add(buf, "]", 1);
        evhttp_send_reply_chunk(st->r->ev, buf);
        evbuffer_free(buf);
        evhttp_send_reply_end(st->r->ev);
        st->r->answered = true;
        stream_end(st);
        return;
    }
    evhttp_send_reply_chunk_with_cb(st->r->ev, buf, stream_written, st);
    evbuffer_free(buf);
}

/* One page of the items: filtered, sorted, and only it rendered. */
static void
reply_page(struct mgmt_req *r, struct sort_item *v, size_t n,
           const struct mgmt_list_ops *ops)
{
    struct page pg;
    size_t kept = 0, total = n;

    if (page_args(r, &pg) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL;
        double ignored;
        (void)ops->sort_key(v[i].item, "name", &name, &ignored);
        if (page_keeps(&pg, name))
            v[kept++] = v[i];
        else
            ops->release(v[i].item);
    }
    n = kept;
    if (page_over(r, &pg))
        goto out;
    qsort(v, n, sizeof(*v), cmp_sort_items);
    long start = page_start(r, &pg, n);
    if (start < 0)
        goto out;
    json_t *items = json_array();
    for (size_t i = (size_t)start; i < n && i < (size_t)(start + pg.size);
         i++) {
        add_rendered(items, ops->render(v[i].item));
    }
    mgmt_reply(r, 200, page_json(&pg, items, n, total));
out:
    for (size_t i = 0; i < n; i++)
        ops->release(v[i].item);
    perm_re_free(pg.re);
    free(v);
}

void
mgmt_reply_items(struct mgmt_req *r, void **items, size_t n,
                 const struct mgmt_list_ops *ops, const char *const *sort)
{
    const char *key = evhttp_find_header(&r->query, "sort");
    const char *rev = evhttp_find_header(&r->query, "sort_reverse");
    const char *page = evhttp_find_header(&r->query, "page");
    const char *by[2] = { key, NULL };
    const char *const *keys = key != NULL && key[0] != '\0' ? by : sort;
    struct sort_item *v = xcalloc(n + 1, sizeof(*v));
    bool sortable = true;

    sort_reverse = rev != NULL && strcmp(rev, "true") == 0;
    for (size_t i = 0; i < n && sortable; i++) {
        v[i].item = items[i];
        sortable = ops->sort_key(items[i], keys[0], &v[i].str, &v[i].num);
        if (sortable && keys[1] != NULL) {
            double ignored;
            sortable = ops->sort_key(items[i], keys[1], &v[i].str2, &ignored);
        }
        v[i].pre = prefix(v[i].str);
        v[i].pre2 = prefix(v[i].str2);
    }
    /* A key the items cannot give cheaply: as any list. */
    if (!sortable) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            add_rendered(arr, ops->render(items[i]));
            ops->release(items[i]);
        }
        free(v);
        mgmt_reply_list(r, arr, sort);
        return;
    }
    if (page != NULL) {
        reply_page(r, v, n, ops);
        return;
    }
    qsort(v, n, sizeof(*v), cmp_sort_items);
    struct stream *st = xcalloc(1, sizeof(*st));
    const char *columns = evhttp_find_header(&r->query, "columns");
    st->columns = columns ? xstrdup(columns) : NULL;
    st->ops = ops;
    st->v = v;
    st->n = n;
    st->r = mgmt_defer(r);
    st->ev = event_new(broker.base, -1, 0, stream_slice, st);
    add_header(st->r, "Content-Type", "application/json");
    add_header(st->r, "Cache-Control", "no-cache");
    add_header(st->r, "Vary", "accept, accept-encoding, origin");
    evhttp_send_reply_start(st->r->ev, 200, "OK");
    struct evbuffer *open = evbuffer_new();
    evbuffer_add(open, "[", 1);
    evhttp_send_reply_chunk_with_cb(st->r->ev, open, stream_written, st);
    evbuffer_free(open);
}

/* ---- request bodies ---- */

const char *
mgmt_body(struct mgmt_req *r, size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(r->ev);
    *len = evbuffer_get_length(in);
    if (*len == 0)
        return "";
    return (const char *)evbuffer_pullup(in, -1);
}

int
mgmt_body_object(struct mgmt_req *r, json_t **out)
{
    size_t len;
    const char *text = mgmt_body(r, &len);
    json_error_t jerr;

    *out = NULL;
    /* Some clients send "null" for no body (rabbit_mgmt_util:decode). */
    if (len == 0 || (len == 4 && memcmp(text, "null", 4) == 0) ||
        (len == 9 && memcmp(text, "undefined", 9) == 0)) {
        *out = json_object();
        return 0;
    }
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (v == NULL || json_is_array(v) || json_is_number(v)) {
        json_decref(v);
        mgmt_bad_request(r, "not_json");
        return -1;
    }
    if (json_is_string(v)) {
        json_decref(v);
        mgmt_bad_request(r, "invalid payload: the request body "
                         "JSON-decoded to a string. Is the input "
                         "doubly-JSON-encoded?");
        return -1;
    }
    if (!json_is_object(v)) {       /* true, false */
        json_decref(v);
        v = json_object();
    }
    *out = v;
    return 0;
}

int
mgmt_require(struct mgmt_req *r, json_t *o, const char *const *keys)
{
    char reason[256] = "[";
    size_t n = 1;

    for (size_t i = 0; keys[i] != NULL; i++) {
        json_t *v = json_object_get(o, keys[i]);
        if (v != NULL && !json_is_null(v))
            continue;
        n += (size_t)snprintf(reason + n, sizeof(reason) - n,
                              "%s{key_missing,%s}", n > 1 ? "," : "",
                              keys[i]);
        if (n >= sizeof(reason))
            n = sizeof(reason) - 1;
    }
    if (n == 1)
        return 0;
    snprintf(reason + n, sizeof(reason) - n, "]");
    mgmt_bad_request(r, "%s", reason);
    return -1;
}

/* ---- who may see what ---- */

bool
mgmt_is_admin(const struct user *u)
{
    return auth_has_tag(u, "administrator");
}

bool
mgmt_is_monitor(const struct user *u)
{
    return mgmt_is_admin(u) || auth_has_tag(u, "monitoring");
}

static bool
is_policymaker(const struct user *u)
{
    return mgmt_is_admin(u) || auth_has_tag(u, "policymaker");
}

static bool
is_mgmt_user(const struct user *u)
{
    return is_policymaker(u) || mgmt_is_monitor(u) ||
           auth_has_tag(u, "management");
}

bool
mgmt_is_login_vhost(const struct user *u, const char *vhost)
{
    return perm_get(vhost, u->name) != NULL;
}

bool
mgmt_is_visible_vhost(const struct user *u, const char *vhost)
{
    return mgmt_is_monitor(u) || mgmt_is_login_vhost(u, vhost);
}

/* ---- basic auth ---- */

static bool
peer_is_loopback(struct evhttp_request *ev)
{
    char *addr = NULL;
    ev_uint16_t port;
    struct in_addr a4;
    struct in6_addr a6;

    evhttp_connection_get_peer(evhttp_request_get_connection(ev), &addr,
                               &port);
    if (addr == NULL)
        return false;
    if (inet_pton(AF_INET, addr, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) != 1)
        return false;
    if (IN6_IS_ADDR_LOOPBACK(&a6))
        return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

/* A 401 and -1: 'reason' NULL means no credentials (an empty body). */
static int
refuse(struct mgmt_req *r, const char *name, const char *error,
       const char *reason, bool realm)
{
    char who[128];
    if (name != NULL)
        log_warnx("HTTP access denied: user '%s' - %s",
                  log_escape(who, sizeof(who), name, strlen(name)), reason);
    if (realm)
        add_header(r, "WWW-Authenticate", REALM);
    if (reason == NULL)
        reply_empty(r, 401);
    else
        mgmt_error(r, 401, error, reason);
    return -1;
}

/*
 * rabbit_mgmt_util:is_authorized: the credentials, loopback_users, the
 * management tags, then the route's own rule. 0, or answered and -1.
 */
static int
authorize(struct mgmt_req *r, const struct route *rt)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->ev),
                                       "Authorization");
    char cred[768];
    uint8_t raw[sizeof(cred)];

    if (h == NULL || strncasecmp(h, "Basic ", 6) != 0)
        return refuse(r, NULL, NULL, NULL, true);
    h += 6;
    h += strspn(h, " ");
    size_t n = strcspn(h, " \t");
    if (n >= sizeof(cred))
        return refuse(r, NULL, NULL, NULL, true);
    memcpy(cred, h, n);
    cred[n] = '\0';
    int len = tls_unbase64(cred, raw, sizeof(raw) - 1);
    if (len < 0)
        return refuse(r, NULL, NULL, NULL, true);
    raw[len] = '\0';
    char *colon = memchr(raw, ':', (size_t)len);
    if (colon == NULL || memchr(raw, '\0', (size_t)len) != NULL)
        return refuse(r, NULL, NULL, NULL, true);
    *colon = '\0';
    const char *name = (const char *)raw, *pass = colon + 1;
    size_t plen = (size_t)len - (size_t)(pass - (const char *)raw);
    /* auth_login refuses a blank password, as RabbitMQ does. */
    const struct user *u = auth_login(name, (struct amqp_bytes){
                                                (const uint8_t *)pass, plen});
    if (u == NULL)
        return refuse(r, name, "not_authorized", "Login failed", true);
    if (auth_loopback_only(name) && !peer_is_loopback(r->ev))
        return refuse(r, name, "not_authorised",
                      "User can only log in via localhost", false);
    if (!is_mgmt_user(u))
        return refuse(r, name, "not_authorised", "Not management user",
                      false);
    r->user = u;
    switch (rt->auth) {
    case AUTH_MGMT:
        return 0;
    case AUTH_ADMIN:
        if (mgmt_is_admin(u))
            return 0;
        return refuse(r, name, "not_authorised", "Not administrator user",
                      false);
    case AUTH_MONITOR:
        if (mgmt_is_monitor(u))
            return 0;
        return refuse(r, name, "not_authorised", "Not monitor user", false);
    case AUTH_POLICY:
        /* Even to read one, as RabbitMQ 3.10.8 answers. */
        if (!is_policymaker(u))
            return refuse(r, name, "not_authorised",
                          "User not authorised to access object", false);
        /* fall through */
    case AUTH_VHOST:
    case AUTH_VHOST_VISIBLE:
        /* A vhost that does not exist passes: the handler says 404. */
        if (mgmt_is_admin(u) ||
            broker_vhost(r->arg[0], strlen(r->arg[0])) == NULL ||
            (rt->auth != AUTH_VHOST_VISIBLE
                 ? mgmt_is_login_vhost(u, r->arg[0])
                 : mgmt_is_visible_vhost(u, r->arg[0])))
            return 0;
        return refuse(r, name, "not_authorised",
                      "User not authorised to access virtual host", false);
    }
    return refuse(r, name, "not_authorised", "Access refused.", false);
}

/* ---- routing ---- */

static int
hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode 'n' bytes at 'p' (a path segment: '+' stays '+'). A
 * new string, or NULL if an escape is malformed; '*nul' if it decodes a
 * NUL byte. */
static char *
decode_segment(const char *p, size_t n, bool *nul)
{
    char *out = xmalloc(n + 1);
    size_t k = 0;

    *nul = false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') {
            out[k++] = p[i];
            continue;
        }
        int hi = i + 2 < n ? hexval((unsigned char)p[i + 1]) : -1;
        int lo = i + 2 < n ? hexval((unsigned char)p[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            free(out);
            return NULL;
        }
        out[k] = (char)(hi * 16 + lo);
        if (out[k] == '\0')
            *nul = true;
        k++;
        i += 2;
    }
    out[k] = '\0';
    return out;
}

/* The path's segments after "/api/", decoded, into 'seg'. Their number,
 * 0 when it is not under /api/ or has too many, -1 for a malformed
 * escape, -2 for a NUL. */
static int
split_path(const char *path, char **seg)
{
    int n = 0;

    if (path == NULL || strncmp(path, "/api/", 5) != 0)
        return 0;
    const char *p = path + 5;
    for (;;) {
        size_t len = strcspn(p, "/");
        if (p[len] == '\0' && len == 0 && n > 0)
            break;          /* one trailing slash: "/api/users/" */
        if (n == SEGS_MAX)
            return 0;
        bool nul;
        seg[n] = decode_segment(p, len, &nul);
        if (seg[n] == NULL)
            return -1;
        n++;
        if (nul)
            return -2;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    return n;
}

/* The route 'segs' match, with the names its '*'s take in 'arg'. */
static const struct route *
find_route(char **seg, int n, const char **arg)
{
    for (size_t i = 0; i < NELEMS(routes); i++) {
        const char *p = routes[i].path;
        int k = 0, nargs = 0;
        bool ok = true;
        while (ok && *p != '\0') {
            size_t len = strcspn(p, "/");
            if (k == n)
                ok = false;
            else if (len == 1 && *p == '*') {
                ok = seg[k][0] != '\0' && nargs < 4;
                if (ok)
                    arg[nargs++] = seg[k];
            } else {
                ok = strlen(seg[k]) == len && memcmp(seg[k], p, len) == 0;
            }
            k++;
            p += len;
            if (*p == '/')
                p++;
        }
        if (ok && k == n)
            return &routes[i];
    }
    return NULL;
}

static unsigned
method_bit(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
    case EVHTTP_REQ_HEAD:
        return M_GET;
    case EVHTTP_REQ_POST:
        return M_POST;
    case EVHTTP_REQ_PUT:
        return M_PUT;
    case EVHTTP_REQ_DELETE:
        return M_DELETE;
    default:
        return 0;
    }
}

/* RabbitMQ's "allow" header: HEAD, GET, POST, PUT, DELETE, OPTIONS. */
static void
add_allow(struct mgmt_req *r, unsigned methods)
{
    char allow[64] = "";
    if (methods & M_GET)
        strcat(allow, "HEAD, GET, ");
    if (methods & M_POST)
        strcat(allow, "POST, ");
    if (methods & M_PUT)
        strcat(allow, "PUT, ");
    if (methods & M_DELETE)
        strcat(allow, "DELETE, ");
    strcat(allow, "OPTIONS");
    add_header(r, "Allow", allow);
}

static bool
is_json_content(struct evhttp_request *ev)
{
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(ev),
                                        "Content-Type");
    if (ct == NULL)
        return false;
    ct += strspn(ct, " ");
    return strncasecmp(ct, "application/json", 16) == 0 &&
           (ct[16] == '\0' || ct[16] == ';' || ct[16] == ' ');
}

static bool
has_body_or_type(struct evhttp_request *ev)
{
    return evbuffer_get_length(evhttp_request_get_input_buffer(ev)) > 0 ||
           evhttp_find_header(evhttp_request_get_input_headers(ev),
                              "Content-Type") != NULL;
}

static void
dispatch(struct mgmt_req *r)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->ev);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    char *seg[SEGS_MAX] = { NULL };
    const struct route *rt = NULL;

    TAILQ_INIT(&r->query);
    int n = split_path(path, seg);
    /* A name cannot hold a NUL byte: no such object. */
    if (n == -2)
        n = 0;
    if (n == -1) {
        mgmt_bad_request(r, "malformed percent-encoding in the path");
        goto out;
    }
    if (n > 0)
        rt = find_route(seg, n, r->arg);
    if (rt == NULL) {
        mgmt_not_found(r);
        goto out;
    }
    /* A query that does not parse is ignored, as cowboy ignores what it
     * does not understand. */
    if (query != NULL && evhttp_parse_query_str(query, &r->query) != 0)
        evhttp_clear_headers(&r->query);
    if (r->method == EVHTTP_REQ_OPTIONS) {
        add_allow(r, rt->methods);
        reply_empty(r, 200);
        goto out;
    }
    if ((method_bit(r->method) & rt->methods) == 0) {
        add_allow(r, rt->methods);
        reply_empty(r, 405);
        goto out;
    }
    if (authorize(r, rt) != 0)
        goto out;
    if ((r->method == EVHTTP_REQ_PUT || r->method == EVHTTP_REQ_POST) &&
        !is_json_content(r->ev)) {
        if (rt->json_body) {
            reply_empty(r, 415);
            goto out;
        }
        /* Where RabbitMQ takes a body of any type, Roost still wants
         * JSON if there is a body or a type: an HTML form (which a
         * foreign page can post) always says another type. */
        if (has_body_or_type(r->ev)) {
            mgmt_error(r, 415, "unsupported_media_type",
                       "a request body must be sent with Content-Type: "
                       "application/json");
            goto out;
        }
    }
    rt->fn(r);
    if (!r->answered)
        fatalx("management API: %s left a request unanswered", rt->path);
out:
    for (int i = 0; i < SEGS_MAX; i++)
        free(seg[i]);
    evhttp_clear_headers(&r->query);
}

/* Whether 'path' is the API's ("/api", "/api/..."); everything else is
 * the web page's. */
static bool
is_api_path(const char *path)
{
    return path == NULL || strcmp(path, "/api") == 0 ||
           strncmp(path, "/api/", 5) == 0;
}

static void
request_cb(struct evhttp_request *ev, void *arg)
{
    const struct server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(ev);
    struct mgmt_req r = { .ev = ev };

    r.method = evhttp_request_get_command(ev);
    if (mgmt_guard(&r, s->ip) != 0)
        return;
    if (broker.shutting_down) {
        reply_empty(&r, 503);
        return;
    }
    if (!is_api_path(uri ? evhttp_uri_get_path(uri) : NULL))
        mgmt_www(&r, evhttp_uri_get_path(uri));
    else
        dispatch(&r);
}

/* ---- listening ---- */

static struct bufferevent *
https_bev(struct event_base *base)
{
    return tls_bufferevent_new(https_ctx, base);
}

/* A listening socket on 'ip' ("" for all addresses) and 'port', or -1
 * with errno. */
static int
listen_socket(const char *ip, int port)
{
    struct addrinfo hints = { 0 }, *res = NULL;
    char portstr[16];
    int fd, one = 1, zero = 0, rc;

    snprintf(portstr, sizeof(portstr), "%d", port);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    hints.ai_family = ip[0] == '\0' ? AF_INET6 : AF_UNSPEC;
    rc = getaddrinfo(ip[0] == '\0' ? NULL : ip, portstr, &hints, &res);
    if (rc != 0 && ip[0] == '\0') {
        hints.ai_family = AF_INET;
        rc = getaddrinfo(NULL, portstr, &hints, &res);
    }
    if (rc != 0) {
        errno = EADDRNOTAVAIL;
        return -1;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (res->ai_family == AF_INET6 && ip[0] == '\0')
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
            listen(fd, broker.cfg.listen_backlog) != 0) {
            int e = errno;
            close(fd);
            fd = -1;
            errno = e;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static void
bound_address(int fd, struct server *s)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    s->port = -1;
    snprintf(s->ip, sizeof(s->ip), "?");
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, s->ip, sizeof(s->ip));
        s->port = ntohs(a->sin6_port);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, s->ip, sizeof(s->ip));
        s->port = ntohs(a->sin_port);
    }
}

int
mgmt_listen(const char *ip, int port, char *bound, size_t len,
            int *bound_port)
{
    struct server s;
    int fd = listen_socket(ip, port);
    if (fd < 0)
        return -1;
    bound_address(fd, &s);
    snprintf(bound, len, "%s", s.ip);
    *bound_port = s.port;
    return fd;
}

int
mgmt_accept(struct http_listener *l, int fd, const char *what,
            const struct http_guard_limits *lim)
{
    l->accept = accept_guard_new(broker.base, fd, NULL, NULL, what);
    if (l->accept == NULL) {
        close(fd);
        log_errorx("%s: cannot create a listener", what);
        mgmt_unlisten(l);
        return -1;
    }
    if (evhttp_bind_listener(l->http, accept_guard_listener(l->accept)) ==
        NULL) {
        accept_guard_free(l->accept, true);
        l->accept = NULL;
        log_errorx("%s: cannot accept", what);
        mgmt_unlisten(l);
        return -1;
    }
    l->guard = http_guard_new(l->accept, lim, what);
    http_guard_attach(l->guard, l->http);
    return 0;
}

void
mgmt_unlisten(struct http_listener *l)
{
    /* The accept guard before the evhttp that owns its listener; the
     * HTTP guard after it, whose connections it counts as they go. */
    http_guard_stop(l->guard);
    accept_guard_free(l->accept, false);
    if (l->http != NULL)
        evhttp_free(l->http);
    http_guard_free(l->guard);
    *l = (struct http_listener){ 0 };
}

/* The routes whose body is a definitions file, which may be large. */
static bool
takes_definitions(const char *path)
{
    return strcmp(path, "/api/definitions") == 0 ||
           strncmp(path, "/api/definitions/", 17) == 0;
}

/* The HTTP guard's limits for the management API (over TLS: 'under'). */
static struct http_guard_limits
guard_limits(struct bufferevent *(*under)(struct event_base *))
{
    const struct config *c = &broker.cfg;
    int64_t small = c->mgmt_max_body_size < HTTP_GUARD_SMALL_BODY
                        ? c->mgmt_max_body_size : HTTP_GUARD_SMALL_BODY;
    return (struct http_guard_limits){
        .conn_max = (size_t)c->mgmt_max_connections,
        .request_ms = c->mgmt_request_timeout_ms,
        .small_body = small,
        .large_body = c->mgmt_max_body_size,
        .large = takes_definitions,
        .under = under,
    };
}

/* Start server 's' on 'ip' and 'port'. 0; 1 if the port is taken and
 * 'optional' (warned); -1 (logged). */
static int
start_server(struct server *s, bool tls, const char *ip, int port,
             bool optional)
{
    const struct config *c = &broker.cfg;
    const char *scheme = tls ? "https" : "http";
    const char *shown = ip[0] ? ip : "all addresses";
    struct timeval idle = { c->mgmt_idle_timeout_ms / 1000,
                            (c->mgmt_idle_timeout_ms % 1000) * 1000 };

    int fd = listen_socket(ip, port);
    if (fd < 0 && errno == EADDRINUSE) {
        const char *key = tls ? "management.ssl.port" : "management.tcp.port";
        char who[128];
        port_holder(port, who, sizeof(who));
        if (optional) {
            log_warnx("management API: port %d on %s is in use by %s; "
                      "running without the management API and the web "
                      "page (set %s to use another port)", port, shown, who,
                      key);
            return 1;
        }
        log_errorx("management API: port %d on %s is in use by %s; choose "
                   "another with %s", port, shown, who, key);
        return -1;
    }
    if (fd < 0) {
        log_warn("management API: cannot listen on %s port %d (%s)", shown,
                 port, tls ? "management.ssl.ip, management.ssl.port"
                           : "management.tcp.ip, management.tcp.port");
        return -1;
    }
    s->l.http = evhttp_new(broker.base);
    if (s->l.http == NULL) {
        close(fd);
        log_errorx("management API: cannot create the HTTP server");
        return -1;
    }
    s->tls = tls;
    evhttp_set_allowed_methods(s->l.http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS |
                                            EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(s->l.http, HEADERS_MAX);
    evhttp_set_max_body_size(s->l.http, c->mgmt_max_body_size);
    evhttp_set_timeout_tv(s->l.http, &idle);
    /* Read and drop the rest of a body that is too large, so that the
     * client gets its 413 rather than a reset. */
    evhttp_set_flags(s->l.http, EVHTTP_SERVER_LINGERING_CLOSE);
    /* Answers without a body have no type, as RabbitMQ's. */
    evhttp_set_default_content_type(s->l.http, NULL);
    evhttp_set_gencb(s->l.http, request_cb, s);
    bound_address(fd, s);
    char what[128];
    snprintf(what, sizeof(what), "management API listener %s:%d", s->ip,
             s->port);
    struct http_guard_limits lim = guard_limits(tls ? https_bev : NULL);
    if (mgmt_accept(&s->l, fd, what, &lim) != 0)
        return -1;
    if (strchr(s->ip, ':'))
        log_info("management API listening on %s://[%s]:%d/", scheme, s->ip,
                 s->port);
    else
        log_info("management API listening on %s://%s:%d/", scheme, s->ip,
                 s->port);
    return 0;
}

/* The HTTPS context from management.ssl.*. */
/* The HTTPS listener's context made from 'c', or NULL with 'err'. */
static struct tls_ctx *
https_make(const struct config *c, char *err, size_t errlen)
{
    struct tls_options o = {
        .cacertfile = c->mgmt_ssl_cacertfile,
        .certfile = c->mgmt_ssl_certfile,
        .keyfile = c->mgmt_ssl_keyfile,
        .password = c->mgmt_ssl_password,
        .versions = "",
        .ciphers = "",
        .depth = 10,
        .reuse_sessions = true,
        .secure_renegotiate = true,
        .handshake_timeout_ms = c->mgmt_idle_timeout_ms,
        .login_from = "distinguished_name",
        .san_type = "dns",
    };
    if (o.certfile[0] == '\0' || o.keyfile[0] == '\0') {
        snprintf(err, errlen, "management.ssl.port needs "
                 "management.ssl.certfile and management.ssl.keyfile");
        return NULL;
    }
    struct tls_ctx *t = tls_ctx_new(&o, err, errlen);
    if (t && tls_ctx_warning(t)[0] != '\0')
        log_warnx("management.ssl.keyfile: %s", tls_ctx_warning(t));
    return t;
}

int
mgmt_start(void)
{
    const struct config *c = &broker.cfg;
    char err[1024];

    mgmt_guard_init();
    if (start_server(&servers[0], false, c->mgmt_tcp_ip, c->mgmt_tcp_port,
                     !c->mgmt_tcp_port_given) < 0)
        return -1;
    if (c->mgmt_ssl_port < 0)
        return 0;
    https_ctx = https_make(c, err, sizeof(err));
    if (https_ctx == NULL) {
        log_errorx("management API: HTTPS (management.ssl.*): %s", err);
        return -1;
    }
    return start_server(&servers[1], true, c->mgmt_ssl_ip, c->mgmt_ssl_port,
                        false) < 0 ? -1 : 0;
}

void
mgmt_stop(void)
{
    /* Answer what waits before evhttp frees its requests. */
    mgmt_deadletters_stop();
    for (size_t i = 0; i < NELEMS(servers); i++) {
        mgmt_unlisten(&servers[i].l);
    }
    tls_ctx_free(https_ctx);
    https_ctx = NULL;
}

int
mgmt_tls_prepare(const struct config *c, struct tls_ctx **fresh, char *err,
                 size_t errlen)
{
    *fresh = NULL;
    if (https_ctx == NULL)
        return 0;
    *fresh = https_make(c, err, errlen);
    return *fresh != NULL ? 0 : -1;
}

void
mgmt_tls_commit(struct tls_ctx *fresh)
{
    if (fresh == NULL)
        return;
    tls_ctx_swap(https_ctx, fresh);
    log_info("management API: HTTPS certificate and key reloaded");
}
