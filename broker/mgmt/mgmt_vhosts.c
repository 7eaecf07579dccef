/*
 * SPDX-License-Identifier: Apache-2.0
 * Virtual hosts in the management API: /api/vhosts[/NAME], their limits
 * (/api/vhost-limits[/VHOST[/NAME]]), as RabbitMQ 3.10's
 * rabbit_mgmt_wm_vhost*.erl and _limit*.erl answer them (the aliveness
 * test, over AMQP, is mgmt_queues.c's). Vhosts are made and deleted through
 * vhost.h; a change to one's description, tags or limits is announced
 * (defs_changed) so that the store records it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/defs.h"
#include "broker/core/perm.h"
#include "broker/core/vhost.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/mgmt/mgmt_int.h"

/* connection.open carries the vhost name as a shortstr. */
#define VHOST_NAME_MAX 255
#define TAGS_MAX 1024

static const char *const by_name[] = { "name", NULL };
static const char *const by_vhost[] = { "vhost", NULL };

/* ---- vhosts ---- */

/*
 * As rabbit_vhost:info with the message counts the management database
 * adds; Roost keeps no rates, so there are no "*_details". Roost has
 * one queue type: "default_queue_type" is RabbitMQ's "undefined" (none
 * chosen). "tracing": whether the firehose is on (trace.h).
 */
static json_t *
vhost_json(const struct vhost *vh)
{
    uint64_t queues, ready, unacked;

    vhost_totals(vh, &queues, &ready, &unacked);
    return json_pack(
        "{s:o, s:o, s:o, s:s, s:{s:o, s:o}, s:b, s:{s:s}, s:I, s:I, s:I}",
        "name", mgmt_str(vh->name), "description",
        mgmt_str(vh->description), "tags", defs_json_tags(vh->tags),
        "default_queue_type", "undefined", "metadata", "description",
        mgmt_str(vh->description), "tags", defs_json_tags(vh->tags),
        "tracing", vh->tracing, "cluster_state", broker_node_name(),
        "running", "messages",
        (json_int_t)(ready + unacked), "messages_ready", (json_int_t)ready,
        "messages_unacknowledged", (json_int_t)unacked);
}

struct vhost_list {
    const struct user *user;
    json_t *arr;
};

static void
add_vhost(struct vhost *vh, void *arg)
{
    struct vhost_list *l = arg;
    if (mgmt_is_visible_vhost(l->user, vh->name))
        json_array_append_new(l->arr, vhost_json(vh));
}

void
mgmt_vhosts(struct mgmt_req *r)
{
    struct vhost_list l = { r->user, json_array() };
    vhost_foreach(add_vhost, &l);
    mgmt_reply_list(r, l.arr, by_name);
}

/*
 * "tracing" as rabbit_mgmt_util:parse_bool reads it: true, false, "true"
 * or "false"; absent, 0; anything else -1, answered as RabbitMQ answers
 * it (400, reason ["not_boolean", VALUE]).
 */
static int
parse_tracing(struct mgmt_req *r, const json_t *v, int *out)
{
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;

    if (v == NULL)
        return 0;
    if (json_is_boolean(v) || (s && (strcmp(s, "true") == 0 ||
                                     strcmp(s, "false") == 0))) {
        *out = json_is_true(v) || (s && s[0] == 't');
        return 0;
    }
    mgmt_error_json(r, 400, "bad_request",
                    json_pack("[s, O]", "not_boolean", v));
    return -1;
}

/*
 * rabbit_vhost:put_vhost: "description" and "tags" replace what the
 * vhost had (absent: empty); "tracing", if given, switches the firehose
 * (trace_set), which is not stored: as RabbitMQ's, it is off after a
 * restart. A new vhost gives the user who made it full permissions in
 * it, as RabbitMQ does.
 */
static void
put_vhost(struct mgmt_req *r, const char *name)
{
    static const char *const all[PERM_KINDS] = { ".*", ".*", ".*" };
    json_t *o;
    char tags[TAGS_MAX], err[512];

    if (!mgmt_name_ok(r, "vhost", name, VHOST_NAME_MAX) ||
        mgmt_body_object(r, &o) != 0)
        return;
    json_t *d = json_object_get(o, "description");
    int tracing = -1;
    /* Read first, as RabbitMQ reads it: a bad value changes nothing. */
    if (parse_tracing(r, json_object_get(o, "tracing"), &tracing) != 0)
        goto out;
    if (d != NULL && !json_is_null(d) &&
        (!json_is_string(d) ||
         strlen(json_string_value(d)) != json_string_length(d))) {
        mgmt_bad_request(r, "description must be a string");
        goto out;
    }
    if (defs_json_parse_tags(json_object_get(o, "tags"), tags, sizeof(tags), err,
                        sizeof(err)) != 0) {
        mgmt_bad_request(r, "%s", err);
        goto out;
    }
    bool created = broker_vhost(name, strlen(name)) == NULL;
    struct vhost *vh = vhost_create(name, true);
    vhost_set_meta(vh, json_is_string(d) ? json_string_value(d) : "", tags,
                   false);
    if (tracing >= 0)
        trace_set(vh, tracing);
    if (created && perm_set(name, r->user->name, all, false, err,
                            sizeof(err)) != 0)
        fatalx("management API: '.*' refused: %s", err);
    mgmt_reply_created(r, created);
out:
    json_decref(o);
}

void
mgmt_vhost(struct mgmt_req *r)
{
    const char *name = r->arg[0];
    struct vhost *vh = broker_vhost(name, strlen(name));

    switch (r->method) {
    case EVHTTP_REQ_PUT:
        put_vhost(r, name);
        return;
    case EVHTTP_REQ_DELETE:
        if (vh == NULL)
            mgmt_not_found(r);
        else {
            vhost_delete(name);
            mgmt_reply(r, 204, NULL);
        }
        return;
    default:
        if (vh == NULL)
            mgmt_not_found(r);
        else
            mgmt_reply(r, 200, vhost_json(vh));
        return;
    }
}

/* ---- limits ---- */

/* The vhost-limits value, as RabbitMQ keeps it: the limits set, or NULL
 * when none is. */
static json_t *
limits_json(const struct vhost *vh)
{
    if (vh->max_connections < 0 && vh->max_queues < 0)
        return NULL;
    json_t *v = json_object();
    if (vh->max_connections >= 0)
        json_object_set_new(v, "max-connections",
                            json_integer(vh->max_connections));
    if (vh->max_queues >= 0)
        json_object_set_new(v, "max-queues", json_integer(vh->max_queues));
    return v;
}

static void
add_limits(json_t *arr, const struct vhost *vh)
{
    json_t *v = limits_json(vh);
    if (v != NULL)
        json_array_append_new(arr, json_pack("{s:o, s:o}", "vhost",
                                             mgmt_str(vh->name), "value", v));
}

static void
add_visible_limits(struct vhost *vh, void *arg)
{
    struct vhost_list *l = arg;
    if (mgmt_is_visible_vhost(l->user, vh->name))
        add_limits(l->arr, vh);
}

void
mgmt_vhost_limits_all(struct mgmt_req *r)
{
    struct vhost_list l = { r->user, json_array() };
    vhost_foreach(add_visible_limits, &l);
    mgmt_reply_list(r, l.arr, by_vhost);
}

void
mgmt_vhost_limits(struct mgmt_req *r)
{
    const struct vhost *vh = broker_vhost(r->arg[0], strlen(r->arg[0]));
    if (vh == NULL) {
        mgmt_not_found(r);
        return;
    }
    json_t *arr = json_array();
    add_limits(arr, vh);
    mgmt_reply_list(r, arr, by_vhost);
}

/* RabbitMQ's validation message for a vhost-limits value: an unknown
 * limit, or a value that is not an integer. */
static void
limit_invalid(struct mgmt_req *r, bool unknown, const char *name,
              const json_t *value)
{
    char *v = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
    char msg[600];
    if (unknown)
        snprintf(msg, sizeof(msg), "Unrecognised terms [{<<\"%.200s\">>,"
                 "%.200s}] in limits", name, v ? v : "?");
    else
        snprintf(msg, sizeof(msg), "%s should be a number, actually was "
                 "%.200s", name, v ? v : "?");
    free(v);
    mgmt_bad_request(r, "Validation failed\n\n%s\n", msg);
}

static void
put_limit(struct mgmt_req *r, struct vhost *vh, const char *name)
{
    static const char *const keys[] = { "value", NULL };
    json_t *o;

    if (mgmt_body_object(r, &o) != 0)
        return;
    if (mgmt_require(r, o, keys) != 0)
        goto out;
    json_t *v = json_object_get(o, "value");
    enum vhost_limit l;
    if (!vhost_limit_named(name, &l)) {
        limit_invalid(r, true, name, v);
        goto out;
    }
    if (!json_is_integer(v)) {
        limit_invalid(r, false, name, v);
        goto out;
    }
    /* RabbitMQ keeps a negative limit and applies none; Roost keeps -1
     * for none. */
    vhost_set_limit(vh, l, (int64_t)json_integer_value(v), false);
    mgmt_reply(r, 204, NULL);
out:
    json_decref(o);
}

void
mgmt_vhost_limit(struct mgmt_req *r)
{
    struct vhost *vh = broker_vhost(r->arg[0], strlen(r->arg[0]));

    if (vh == NULL) {
        mgmt_error(r, 404, "not_found", "vhost_not_found");
        return;
    }
    if (r->method == EVHTTP_REQ_PUT) {
        put_limit(r, vh, r->arg[1]);
        return;
    }
    enum vhost_limit l;
    if (vhost_limit_named(r->arg[1], &l) && vhost_limit(vh, l) >= 0)
        vhost_set_limit(vh, l, -1, false);
    mgmt_reply(r, 204, NULL);
}
