/*
 * SPDX-License-Identifier: Apache-2.0
 * Connections, channels and the node in the management API, as RabbitMQ
 * 3.10's rabbit_mgmt_wm_connection*.erl, _channel*.erl, _node*.erl and
 * the health checks (rabbit_mgmt_wm_health_check_*.erl) answer them,
 * read through conn_foreach, conn_info, channel_info, alarm.h and
 * stats.h. A connection is closed (DELETE) with conn_close_forced.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "amqp/table.h"
#include "base/transport.h"
#include "broker/core/alarm.h"
#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/stats.h"
#include "broker/core/vhost.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/util.h"
#include "broker/mgmt/mgmt_int.h"
#include "broker/session/channel.h"
#include "broker/session/conn.h"
#include "broker/session/listener.h"

void
mgmt_set_addr(json_t *o, const char *hkey, const char *pkey, const char *addr)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL) {
        json_object_set_new(o, hkey, mgmt_str(addr));
        json_object_set_new(o, pkey, json_null());
        return;
    }
    const char *h = addr;
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    json_object_set_new(o, hkey, defs_json_str(h, n));
    json_object_set_new(o, pkey, json_integer(atoi(colon + 1)));
}

static bool
is_own(const struct mgmt_req *r, const struct conn *c)
{
    return c->user != NULL && strcmp(c->user, mgmt_user_name(r)) == 0;
}

/* Who may see a connection: its own user, or a monitor. */
static bool
visible(const struct mgmt_req *r, const struct conn *c)
{
    return mgmt_is_monitor(r->user) || is_own(r, c);
}

static json_t *
conn_json(const struct conn *c)
{
    struct conn_info ci;
    char name[160];
    conn_info(c, &ci);
    conn_name(c, name, sizeof(name));
    json_t *o = json_pack(
        "{s:o, s:s, s:s, s:s, s:s, s:o, s:o, s:i, s:i, s:i, s:i, s:I, s:b,"
        " s:s}",
        "name", mgmt_str(name), "node", broker_node_name(), "type",
        "network", "protocol", "AMQP 0-9-1", "state", ci.state, "user",
        mgmt_str(c->user ? c->user : ""), "vhost",
        c->vh ? mgmt_str(c->vh->name) : json_null(), "channels",
        (int)ci.channels, "channel_max", c->channel_max, "frame_max",
        (int)c->frame_max, "timeout", c->heartbeat, "connected_at",
        (json_int_t)c->connected_at, "ssl", ci.tls, "auth_mechanism",
        c->auth_mechanism);
    json_object_set_new(o, "user_who_performed_action",
                        mgmt_str(c->user ? c->user : ""));
    mgmt_set_addr(o, "peer_host", "peer_port", c->peer);
    mgmt_set_addr(o, "host", "port", c->local);
    mgmt_set_count(o, "recv_oct", c->recv_oct,
                   stats_rate(ci.series, CS_RECV_OCT));
    mgmt_set_count(o, "send_oct", c->send_oct,
                   stats_rate(ci.series, CS_SEND_OCT));
    json_object_set_new(o, "recv_cnt", json_integer((json_int_t)c->recv_cnt));
    json_object_set_new(o, "send_cnt", json_integer((json_int_t)c->send_cnt));
    json_object_set_new(o, "send_pend", json_integer((json_int_t)ci.send_pend));
    json_object_set_new(o, "client_properties",
                        c->client_props
                            ? defs_json_table((struct amqp_table){
                                  c->client_props, c->client_props_len })
                            : json_object());
    /* RabbitMQ names a connection by what the client called it, when it
     * did (client_properties.connection_name), in user_provided_name */
    struct amqp_field f;
    if (c->client_props &&
        table_get((struct amqp_table){ c->client_props,
                                       c->client_props_len },
                  "connection_name", &f) &&
        f.kind == AMQP_FIELD_LONGSTR)
        json_object_set_new(o, "user_provided_name",
                            defs_json_str((const char *)f.v.str.ptr,
                                          f.v.str.len));
    /* RabbitMQ's TLS details (rabbit_reader's ssl_info and cert_info):
     * "" without TLS; the certificate's null without one, or before the
     * handshake ends */
    const struct transport_tls_info *ti = ci.tls_info;
    const struct {
        const char *key, *val;
    } ssl[] = {
        { "ssl_protocol", ti ? ti->protocol : NULL },
        { "ssl_key_exchange", ti ? ti->key_exchange : NULL },
        { "ssl_cipher", ti ? ti->cipher : NULL },
        { "ssl_hash", ti ? ti->hash : NULL },
    }, cert[] = {
        { "peer_cert_subject", ti && ti->has_peer_cert ? ti->peer_subject
                                                       : NULL },
        { "peer_cert_issuer", ti && ti->has_peer_cert ? ti->peer_issuer
                                                      : NULL },
        { "peer_cert_validity", ti && ti->has_peer_cert ? ti->peer_validity
                                                        : NULL },
    };
    for (size_t i = 0; i < NELEMS(ssl); i++)
        json_object_set_new(o, ssl[i].key,
                            !ci.tls ? json_string("")
                            : ssl[i].val ? mgmt_str(ssl[i].val)
                                         : json_null());
    for (size_t i = 0; i < NELEMS(cert); i++)
        json_object_set_new(o, cert[i].key,
                            cert[i].val ? mgmt_str(cert[i].val) : json_null());
    return o;
}

struct walk {
    struct mgmt_req *r;
    json_t *arr;
    const struct vhost *vh;     /* NULL: all */
    const struct conn *only;    /* NULL: all */
};

static void
add_conn(struct conn *c, void *arg)
{
    struct walk *w = arg;
    if (!visible(w->r, c) || (w->vh != NULL && c->vh != w->vh))
        return;
    json_array_append_new(w->arr, conn_json(c));
}

static const char *const by_name[] = { "name", NULL };


void
mgmt_connections(struct mgmt_req *r)
{
    struct walk w = { r, json_array(), NULL, NULL };
    conn_foreach(add_conn, &w);
    mgmt_reply_list(r, w.arr, by_name);
}

void
mgmt_vhost_connections(struct mgmt_req *r)
{
    struct walk w = { r, json_array(), NULL, NULL };
    if ((w.vh = mgmt_req_vhost(r)) == NULL) {
        json_decref(w.arr);
        return;
    }
    conn_foreach(add_conn, &w);
    mgmt_reply_list(r, w.arr, by_name);
}

/* The connection of arg[0] the user may see, or NULL having answered
 * 404. */
static struct conn *
req_conn(struct mgmt_req *r)
{
    struct conn *c = conn_by_name(r->arg[0]);
    if (c == NULL || c->direct || !visible(r, c)) {
        mgmt_not_found(r);
        return NULL;
    }
    return c;
}

/* The longest reason given to a connection closed from the API. */
#define REASON_MAX 200

void
mgmt_connection(struct mgmt_req *r)
{
    struct conn *c = req_conn(r);
    if (c == NULL)
        return;
    if (r->method != EVHTTP_REQ_DELETE) {
        mgmt_reply(r, 200, conn_json(c));
        return;
    }
    /* rabbit_mgmt_util:is_authorized_user: seeing it is not closing it;
     * that takes an administrator or its own user (a monitor may only
     * look). */
    if (!mgmt_is_admin(r->user) && !is_own(r, c)) {
        mgmt_error(r, 401, "not_authorised",
                   "User not authorised to access object");
        return;
    }
    /* RabbitMQ's UI sends the reason in X-Reason. It goes into the
     * close's reply-text, which clients decode as UTF-8: refused if it
     * is not, and cut at a character's start to fit a short string with
     * its "CONNECTION_FORCED - " before it. */
    const char *why = evhttp_find_header(
        evhttp_request_get_input_headers(r->ev), "X-Reason");
    json_t *valid = why ? json_string(why) : NULL;
    json_decref(valid);
    if (why != NULL && valid == NULL) {
        mgmt_bad_request(r, "X-Reason is not UTF-8");
        return;
    }
    const char *src = why && *why ? why : "Closed via management plugin";
    size_t n = strlen(src);
    if (n > REASON_MAX) {
        n = REASON_MAX;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;            /* src[n], a continuation, starts nothing */
    }
    char reason[REASON_MAX + 1];
    memcpy(reason, src, n);
    reason[n] = '\0';
    for (char *p = reason; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    conn_close_forced(c, reason);
    mgmt_reply(r, 204, NULL);
}

/* ---- channels ---- */

static void
add_consumer_of(struct consumer *c, void *arg)
{
    json_array_append_new(arg, mgmt_consumer_json(c));
}

static json_t *
channel_json(struct channel *ch)
{
    struct channel_info ci;
    char cname[160], name[180];
    struct conn *c = ch->conn;
    channel_info(ch, &ci);
    conn_name(c, cname, sizeof(cname));
    snprintf(name, sizeof(name), "%s (%u)", cname, ch->number);
    json_t *cd = json_pack("{s:o}", "name", mgmt_str(cname));
    mgmt_set_addr(cd, "peer_host", "peer_port", c->peer);
    json_t *o = json_pack(
        "{s:o, s:s, s:i, s:o, s:o, s:s, s:o, s:i, s:i, s:i, s:I, s:I, s:b,"
        " s:b, s:I, s:i}",
        "name", mgmt_str(name), "node", broker_node_name(), "number",
        ch->number, "user", mgmt_str(c->user ? c->user : ""), "vhost",
        c->vh ? mgmt_str(c->vh->name) : json_null(), "state",
        ch->state == CH_OPEN ? "running" : "closing", "connection_details",
        cd, "consumer_count", (int)ci.consumers, "prefetch_count",
        (int)ch->prefetch_consumer, "global_prefetch_count",
        (int)ch->prefetch_channel, "messages_unacknowledged",
        (json_int_t)ci.unacked, "messages_unconfirmed",
        (json_int_t)ci.unconfirmed, "confirm", ch->confirm, "transactional",
        ch->tx, "messages_uncommitted", (json_int_t)ci.uncommitted,
        "acks_uncommitted", 0);
    json_object_set_new(o, "user_who_performed_action",
                        mgmt_str(c->user ? c->user : ""));
    json_object_set_new(o, "message_stats",
                        mgmt_msg_stats(&ch->ms, MS_KEYS_CHANNEL, ci.series));
    return o;
}

static void
add_channel(struct channel *ch, void *arg)
{
    json_array_append_new(arg, channel_json(ch));
}

static void
add_conn_channels(struct conn *c, void *arg)
{
    struct walk *w = arg;
    if (!visible(w->r, c) || (w->vh != NULL && c->vh != w->vh) ||
        (w->only != NULL && c != w->only))
        return;
    conn_foreach_channel(c, add_channel, w->arr);
}

void
mgmt_channels(struct mgmt_req *r)
{
    struct walk w = { r, json_array(), NULL, NULL };
    conn_foreach(add_conn_channels, &w);
    mgmt_reply_list(r, w.arr, by_name);
}

void
mgmt_vhost_channels(struct mgmt_req *r)
{
    struct walk w = { r, json_array(), NULL, NULL };
    if ((w.vh = mgmt_req_vhost(r)) == NULL) {
        json_decref(w.arr);
        return;
    }
    conn_foreach(add_conn_channels, &w);
    mgmt_reply_list(r, w.arr, by_name);
}

void
mgmt_connection_channels(struct mgmt_req *r)
{
    struct conn *c = req_conn(r);
    if (c == NULL)
        return;
    struct walk w = { r, json_array(), NULL, c };
    conn_foreach(add_conn_channels, &w);
    mgmt_reply_list(r, w.arr, by_name);
}

struct find_chan {
    const char *name;
    struct channel *found;
};

static void
match_channel(struct channel *ch, void *arg)
{
    struct find_chan *f = arg;
    char cname[160], name[180];
    conn_name(ch->conn, cname, sizeof(cname));
    snprintf(name, sizeof(name), "%s (%u)", cname, ch->number);
    if (strcmp(name, f->name) == 0)
        f->found = ch;
}

static void
match_conn_channel(struct conn *c, void *arg)
{
    conn_foreach_channel(c, match_channel, arg);
}

void
mgmt_channel(struct mgmt_req *r)
{
    struct find_chan f = { r->arg[0], NULL };
    conn_foreach(match_conn_channel, &f);
    if (f.found == NULL || !visible(r, f.found->conn)) {
        mgmt_not_found(r);
        return;
    }
    json_t *o = channel_json(f.found);
    json_t *cs = json_array();
    channel_foreach_consumer(f.found, add_consumer_of, cs);
    json_object_set_new(o, "consumer_details", cs);
    json_object_set_new(o, "deliveries", json_array());
    json_object_set_new(o, "publishes", json_array());
    mgmt_reply(r, 200, o);
}

/* ---- the node ---- */

uint64_t
mgmt_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The node, as /api/nodes/NAME shows it (with its memory by kind). */
static json_t *
mgmt_node_json(bool memory)
{
    struct rlimit rl = { 0, 0 };
    getrlimit(RLIMIT_NOFILE, &rl);
    struct mem_kinds mk;
    alarm_memory_kinds(&mk);
    uint64_t used = alarm_memory_used();
    json_t *o = json_pack(
        "{s:s, s:s, s:b, s:I, s:I, s:b, s:I, s:I, s:b, s:I, s:I, s:I, s:I,"
        " s:I, s:i, s:I, s:s, s:[], s:s}",
        "name", broker_node_name(), "type", "disc", "running", 1, "mem_used",
        (json_int_t)used, "mem_limit", (json_int_t)alarm_memory_limit(),
        "mem_alarm", alarm_memory_set(), "disk_free",
        (json_int_t)alarm_disk_free(), "disk_free_limit",
        (json_int_t)broker.cfg.disk_free_limit, "disk_free_alarm",
        alarm_disk_set(), "fd_used", (json_int_t)stats_open_fds(), "fd_total",
        (json_int_t)rl.rlim_cur, "sockets_used",
        (json_int_t)conn_count(), "sockets_total",
        (json_int_t)broker.cfg.connection_max, "uptime",
        (json_int_t)(now_ms() - broker.started_ms), "processors",
        (int)sysconf(_SC_NPROCESSORS_ONLN), "os_pid", (json_int_t)getpid(),
        "rates_mode", broker.cfg.rates_mode, "partitions", "net_ticktime",
        "60");
    json_object_set_new(o, "mem_rss",
                        json_integer((json_int_t)mgmt_rss_bytes()));
    json_object_set_new(o, "exchange_types", mgmt_exchange_types_json());
    json_object_set_new(o, "contexts", mgmt_contexts_json());
    json_object_set_new(o, "being_drained", json_false());
    /* the rates of the figures the stats tick samples */
    static const struct { const char *key; int i; } rates[] = {
        { "mem_used_details", NODE_MEM_USED },
        { "fd_used_details", NODE_FD_USED },
        { "sockets_used_details", NODE_SOCKETS_USED },
        { "disk_free_details", NODE_DISK_FREE },
    };
    if (stats_rates_mode() != RATES_NONE)
        for (size_t i = 0; i < NELEMS(rates); i++)
            json_object_set_new(o, rates[i].key,
                                mgmt_rate(stats_rate(stats_node_series(),
                                                     (size_t)rates[i].i)));
    if (memory)
        json_object_set_new(o, "memory", json_pack(
            "{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "messages",
            (json_int_t)mk.messages, "input_blocks",
            (json_int_t)mk.input_blocks, "queue_entries",
            (json_int_t)mk.queue_entries, "output_buffers",
            (json_int_t)mk.output_buffers, "http_requests",
            (json_int_t)mk.http_requests, "total_counted", (json_int_t)used,
            "rss", (json_int_t)mgmt_rss_bytes()));
    return o;
}

void
mgmt_nodes(struct mgmt_req *r)
{
    json_t *arr = json_array();
    json_array_append_new(arr, mgmt_node_json(false));
    mgmt_reply_list(r, arr, by_name);
}

void
mgmt_node(struct mgmt_req *r)
{
    if (strcmp(r->arg[0], broker_node_name()) != 0) {
        mgmt_not_found(r);
        return;
    }
    const char *mem = evhttp_find_header(&r->query, "memory");
    mgmt_reply(r, 200, mgmt_node_json(mem && strcmp(mem, "true") == 0));
}

/* ---- health checks (rabbit_mgmt_wm_health_check_*.erl) ---- */

static void
health_ok(struct mgmt_req *r)
{
    mgmt_reply(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void
health_failed(struct mgmt_req *r, const char *reason)
{
    mgmt_reply(r, 503, json_pack("{s:s, s:s}", "status", "failed", "reason",
                                 reason));
}

void
mgmt_health_virtual_hosts(struct mgmt_req *r)
{
    health_ok(r);   /* every vhost of a running Roost is up */
}

void
mgmt_health_port_listener(struct mgmt_req *r)
{
    char *end;
    long port = strtol(r->arg[0], &end, 10);
    char reason[160];
    if (*end != '\0' || port <= 0 || port > 65535) {
        mgmt_bad_request(r, "invalid port");
        return;
    }
    if (mgmt_has_listener_port((int)port)) {
        mgmt_reply(r, 200, json_pack("{s:s, s:i}", "status", "ok", "port",
                                     (int)port));
        return;
    }
    snprintf(reason, sizeof(reason), "No active listener on port %ld", port);
    mgmt_reply(r, 503, json_pack("{s:s, s:s, s:i}", "status", "failed",
                                 "reason", reason, "missing", (int)port));
}

void
mgmt_health_protocol_listener(struct mgmt_req *r)
{
    const char *p = r->arg[0];
    bool tls = strcmp(p, "amqp/ssl") == 0 || strcmp(p, "amqps") == 0;
    char reason[300];
    if (strcmp(p, "amqp") != 0 && strcmp(p, "amqp091") != 0 &&
        strcmp(p, "amqp0-9-1") != 0 && !tls && strcmp(p, "http") != 0) {
        snprintf(reason, sizeof(reason), "No active listener for protocol "
                 "%s", p);
        health_failed(r, reason);
        return;
    }
    if (strcmp(p, "http") == 0 || mgmt_has_listener_kind(tls)) {
        mgmt_reply(r, 200, json_pack("{s:s, s:s}", "status", "ok",
                                     "protocol", p));
        return;
    }
    snprintf(reason, sizeof(reason), "No active listener for protocol %s", p);
    health_failed(r, reason);
}

/* A single node is never critical for mirrors or quorum. */
void
mgmt_health_critical(struct mgmt_req *r)
{
    health_ok(r);
}
