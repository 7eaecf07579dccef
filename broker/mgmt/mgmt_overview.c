/*
 * SPDX-License-Identifier: Apache-2.0
 * The broker as a whole in the management API: /api/overview,
 * /api/health/checks/alarms and definitions (/api/definitions[/VHOST]),
 * as RabbitMQ 3.10's rabbit_mgmt_wm_overview.erl,
 * _health_check_alarms.erl and _definitions.erl answer them. Totals come
 * from the read functions of vhost.h and conn.h, alarms from alarm.h,
 * definitions from defs_json.h (which writes and reads RabbitMQ's
 * format; this file only cuts a whole export down to one vhost, or
 * points an upload at one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/alarm.h"
#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/queue.h"
#include "broker/core/stats.h"
#include "broker/core/store.h"
#include "broker/core/vhost.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/log.h"
#include "broker/lib/version.h"
#include "broker/mgmt/mgmt_int.h"
#include "broker/session/conn.h"

/* ---- overview ---- */

/* The exchange types Roost implements, as RabbitMQ describes them. */
json_t *
mgmt_exchange_types_json(void)
{
    static const char *const types[] = { "direct", "fanout", "headers",
                                         "topic", "x-delayed-message" };
    json_t *arr = json_array();
    char desc[80];
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strcmp(types[i], "x-delayed-message") == 0)
            snprintf(desc, sizeof(desc), "Delayed Message Exchange");
        else
            snprintf(desc, sizeof(desc), "AMQP %s exchange, as per the AMQP "
                     "specification", types[i]);
        json_array_append_new(arr, json_pack("{s:s, s:s, s:b}", "name",
                                             types[i], "description", desc,
                                             "enabled", 1));
    }
    return arr;
}

struct totals {
    const struct user *user;    /* NULL: every vhost */
    uint64_t queues, exchanges, ready, unacked;
    double rate[QS_COUNT];      /* sums of the queues' rates */
};

static void
add_queue_rates(struct queue *q, void *arg)
{
    struct totals *t = arg;
    struct queue_info qi;
    queue_info(q, &qi);
    t->rate[QS_READY] += stats_rate(qi.series, QS_READY);
    t->rate[QS_UNACKED] += stats_rate(qi.series, QS_UNACKED);
}

static void
add_totals(struct vhost *vh, void *arg)
{
    struct totals *t = arg;
    uint64_t q, ready, unacked;

    if (t->user != NULL && !mgmt_is_visible_vhost(t->user, vh->name))
        return;
    vhost_totals(vh, &q, &ready, &unacked);
    t->queues += q;
    t->ready += ready;
    t->unacked += unacked;
    t->exchanges += vhost_exchange_count(vh);
    vhost_foreach_queue(vh, add_queue_rates, t);
}

/*
 * A monitor (monitoring or administrator) sees every vhost and
 * connection, and the node with its listeners; another management user
 * the totals of its own vhosts and connections. The broker's history
 * (?lengths_age=, ?msg_rates_age=) is the whole broker's, as RabbitMQ's
 * global samples; a user who is not a monitor gets none (its totals are
 * only its vhosts'). No "churn_rates", nor Erlang's versions.
 */
void
mgmt_overview(struct mgmt_req *r)
{
    bool monitor = mgmt_is_monitor(r->user);
    bool rabbit = broker.cfg.announce_rabbitmq;
    struct totals t = { monitor ? NULL : r->user, 0, 0, 0, 0, { 0 } };
    struct conn_totals ct;

    vhost_foreach(add_totals, &t);
    conn_totals(monitor ? NULL : r->user->name, &ct);
    json_t *o = json_pack(
        "{s:s, s:s, s:o, s:s, s:s, s:s, s:s}", "management_version",
        ROOST_RABBITMQ_VERSION, "rates_mode", broker.cfg.rates_mode,
        "exchange_types",
        mgmt_exchange_types_json(), "product_version",
        rabbit ? ROOST_RABBITMQ_VERSION : ROOST_VERSION, "product_name",
        rabbit ? "RabbitMQ" : ROOST_PRODUCT, "rabbitmq_version",
        ROOST_RABBITMQ_VERSION, "cluster_name", broker_node_name());
    /* Roost's own version, whatever it announces (docs/compatibility.md) */
    json_object_set_new(o, "roost_version", json_string(ROOST_VERSION));
    json_t *qt = json_object();
    mgmt_set_count(qt, "messages", t.ready + t.unacked,
                   t.rate[QS_READY] + t.rate[QS_UNACKED]);
    mgmt_set_count(qt, "messages_ready", t.ready, t.rate[QS_READY]);
    mgmt_set_count(qt, "messages_unacknowledged", t.unacked,
                   t.rate[QS_UNACKED]);
    json_object_set_new(o, "queue_totals", qt);
    /* The broker's message_stats (every channel's); a user who is not a
     * monitor sees them too, as RabbitMQ shows its vhosts' */
    struct msg_stats all;
    stats_overview(&all);
    json_t *ms = mgmt_msg_stats(&all, MS_KEYS_CHANNEL,
                                stats_overview_series());
    /* RabbitMQ's message store reads and writes: messages read back
     * from disk (paged in) and message records written */
    struct store_stats ss;
    store_get_stats(&ss);
    const struct stats_series *ns = stats_node_series();
    mgmt_set_count(ms, "disk_reads", ss.paged_in,
                   stats_rate(ns, NODE_DISK_READS));
    mgmt_set_count(ms, "disk_writes", ss.msgs_written,
                   stats_rate(ns, NODE_DISK_WRITES));
    if (monitor) {
        struct mgmt_history_req hr;
        uint64_t now[HC_COUNT];
        mgmt_history_req(r, &hr);
        stats_broker_values(now);
        mgmt_add_history(qt, ms, stats_history(), now, &hr);
    }
    json_object_set_new(o, "message_stats", ms);
    json_object_set_new(o, "disable_stats", json_false());
    json_object_set_new(o, "enable_queue_totals", json_false());
    json_object_set_new(o, "release_series_support_status",
                        json_string("supported"));
    /* How far back the samples reach (seconds), as RabbitMQ lists its
     * policies: the broker's (global), a queue's (basic), and no
     * per-pair samples (detailed: the rate of the last interval) */
    uint64_t g[HISTORY_TIERS], b[HISTORY_TIERS];
    uint64_t iv = broker.cfg.collect_statistics_interval;
    history_ages(HISTORY_BROKER, iv, g);
    history_ages(HISTORY_QUEUE, iv, b);
    json_object_set_new(o, "sample_retention_policies", json_pack(
        "{s:[I,I,I], s:[I,I,I], s:[I]}", "global", (json_int_t)(g[0] / 1000),
        (json_int_t)(g[1] / 1000), (json_int_t)(g[2] / 1000), "basic",
        (json_int_t)(b[0] / 1000), (json_int_t)(b[1] / 1000),
        (json_int_t)(b[2] / 1000), "detailed", (json_int_t)(iv / 1000)));
    json_object_set_new(o, "statistics_db_event_queue", json_integer(0));
    json_object_set_new(o, "object_totals", json_pack(
        "{s:I, s:I, s:I, s:I, s:I}", "channels", (json_int_t)ct.channels,
        "connections", (json_int_t)ct.connections, "consumers",
        (json_int_t)ct.consumers, "exchanges", (json_int_t)t.exchanges,
        "queues", (json_int_t)t.queues));
    if (monitor) {
        json_object_set_new(o, "node", json_string(broker_node_name()));
        json_object_set_new(o, "listeners", mgmt_listeners_json());
        json_object_set_new(o, "contexts", mgmt_contexts_json());
    }
    mgmt_reply(r, 200, o);
}

/* ---- health checks ---- */

void
mgmt_alarms(struct mgmt_req *r)
{
    if (!alarm_is_set()) {
        mgmt_reply(r, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    json_t *alarms = json_array();
    if (alarm_memory_set())
        json_array_append_new(alarms, json_pack("{s:s, s:s}", "resource",
                                                "memory", "node",
                                                broker_node_name()));
    if (alarm_disk_set())
        json_array_append_new(alarms, json_pack("{s:s, s:s}", "resource",
                                                "disk", "node",
                                                broker_node_name()));
    mgmt_reply(r, 503, json_pack("{s:s, s:s, s:o}", "status", "failed",
                                 "reason",
                                 "There are alarms in effect in the cluster",
                                 "alarms", alarms));
}

/* ---- definitions ---- */

/* ?download=NAME: RabbitMQ offers the export as a file. */
static void
maybe_download(struct mgmt_req *r)
{
    const char *name = evhttp_find_header(&r->query, "download");
    char value[300];

    if (name == NULL || strlen(name) > 200 || strpbrk(name, "\r\n\"") != NULL)
        return;
    snprintf(value, sizeof(value), "attachment; filename=%s", name);
    evhttp_add_header(evhttp_request_get_output_headers(r->ev),
                      "Content-Disposition", value);
}

/* An uploaded body as JSON; 400 "failed_to_parse_json" (answered) and
 * NULL if it is not an object. */
static json_t *
upload(struct mgmt_req *r, const char **text, size_t *len)
{
    json_error_t jerr;

    *text = mgmt_body(r, len);
    if (*len == 0)
        return json_object();
    json_t *root = json_loadb(*text, *len, 0, &jerr);
    if (root == NULL) {
        char what[200];
        log_warnx("management API: definitions upload: %d:%d: %s",
                  jerr.line, jerr.column,
                  log_escape(what, sizeof(what), jerr.text,
                             strlen(jerr.text)));
        mgmt_bad_request(r, "failed_to_parse_json");
    }
    return root;
}

/* Import 'text' and answer: 204, or 400 with the importer's reason. */
static void
import(struct mgmt_req *r, const char *text, size_t len)
{
    char err[1536];

    if (defs_json_import_text(text, len, "definitions", err,
                              sizeof(err)) != 0) {
        log_warnx("management API: definitions not imported: %s", err);
        mgmt_bad_request(r, "%s", err);
        return;
    }
    mgmt_reply(r, 204, NULL);
}

void
mgmt_definitions(struct mgmt_req *r)
{
    const char *text;
    size_t len;

    if (r->method == EVHTTP_REQ_POST) {
        json_t *root = upload(r, &text, &len);
        if (root == NULL)
            return;
        json_decref(root);
        if (len == 0)
            mgmt_reply(r, 204, NULL);
        else
            import(r, text, len);
        return;
    }
    char *out = defs_json_export_text();
    maybe_download(r);
    mgmt_reply_text(r, 200, out, strlen(out));
    free(out);
}

/* The items of 'section' in 'from' whose "vhost" is 'vhost', into 'to'
 * (without their "vhost" if 'strip'). */
static void
keep_vhost(json_t *to, json_t *from, const char *section, const char *vhost,
           bool strip)
{
    json_t *arr = json_array(), *item, *src = json_object_get(from, section);
    size_t i;

    json_array_foreach(src, i, item) {
        json_t *v = json_object_get(item, "vhost");
        if (!json_is_string(v) || strcmp(json_string_value(v), vhost) != 0)
            continue;
        json_t *copy = json_copy(item);
        if (strip)
            json_object_del(copy, "vhost");
        json_array_append_new(arr, copy);
    }
    json_object_set_new(to, section, arr);
}

/* Point every item of 'section' in 'from' at 'vhost', into 'to'. */
static void
into_vhost(json_t *to, json_t *from, const char *section, const char *vhost)
{
    json_t *src = json_object_get(from, section), *item;
    size_t i;

    if (src == NULL)
        return;
    json_array_foreach(src, i, item)
        if (json_is_object(item))
            json_object_set_new(item, "vhost", json_string(vhost));
    json_object_set(to, section, src);
}

/*
 * One vhost's definitions (rabbit_mgmt_wm_definitions:vhost_definitions):
 * its parameters, policies, queues, exchanges and bindings, the last
 * three without "vhost". An upload goes into that vhost whatever its
 * items say; its users, vhosts and permissions are ignored, as RabbitMQ
 * ignores them.
 */
void
mgmt_definitions_vhost(struct mgmt_req *r)
{
    static const char *const sections[] = { "parameters", "policies",
                                            "queues", "exchanges",
                                            "bindings" };
    const char *vhost = r->arg[0];
    bool exists = broker_vhost(vhost, strlen(vhost)) != NULL;
    const char *text;
    size_t len;

    if (r->method == EVHTTP_REQ_POST) {
        if (!exists) {
            mgmt_error(r, 404, "not_found", "vhost_not_found");
            return;
        }
        json_t *root = upload(r, &text, &len);
        if (root == NULL)
            return;
        json_t *to = json_object();
        for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
            into_vhost(to, root, sections[i], vhost);
        char *out = json_dumps(to, JSON_COMPACT);
        json_decref(to);
        json_decref(root);
        if (out == NULL)
            fatalx("management API: out of memory");
        import(r, out, strlen(out));
        free(out);
        return;
    }
    if (!exists) {
        mgmt_bad_request(r, "vhost_not_found");
        return;
    }
    char *all = defs_json_export_text();
    json_t *root = json_loads(all, 0, NULL);
    free(all);
    if (root == NULL)
        fatalx("management API: the definitions export is not JSON");
    json_t *to = json_object();
    json_object_set(to, "rabbit_version",
                    json_object_get(root, "rabbit_version"));
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        keep_vhost(to, root, sections[i], vhost, i >= 2);
    json_decref(root);
    maybe_download(r);
    mgmt_reply(r, 200, to);
}
