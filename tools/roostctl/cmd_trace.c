/*
 * SPDX-License-Identifier: Apache-2.0
 * trace_on and trace_off: the firehose of a vhost, switched through
 * PUT /api/vhosts/VHOST {"tracing": ...}, as RabbitMQ's management UI
 * switches it. That PUT also sets the description and tags (absent:
 * empty), so they are read first and sent back as they were.
 *
 * rabbitmqctl's rabbit_trace:start/stop accept any vhost name, even one
 * that does not exist, and answer "Trace enabled for vhost NAME" all the
 * same; so does this, without creating the vhost (the API's PUT would).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "xalloc.h"

/* "a,b" from the answer's tags (an array, or already a string; none:
 * ""). Free it. */
static char *
tags_text(const json_t *tags)
{
    size_t i, n = 1;
    const json_t *t;

    if (json_is_string(tags))
        return xstrdup(json_string_value(tags));
    json_array_foreach(tags, i, t)
        if (json_is_string(t))
            n += json_string_length(t) + 1;
    char *s = xmalloc(n);
    s[0] = '\0';
    json_array_foreach(tags, i, t) {
        if (!json_is_string(t))
            continue;
        if (*s)
            strcat(s, ",");
        strcat(s, json_string_value(t));
    }
    return s;
}

/* The node's name from a vhost's "cluster_state" ({"NODE": "running"}),
 * or "". */
static const char *
node_of(const json_t *vhost)
{
    const json_t *cs = json_object_get(vhost, "cluster_state");
    void *it = json_is_object(cs) ? json_object_iter((json_t *)cs) : NULL;

    return it ? json_object_iter_key(it) : "";
}

/* rabbitmqctl's result: the line (even with -q), or with --formatter
 * json {"node", "result", "value"}. */
static void
result(const struct ctl *c, const char *node, const char *text)
{
    if (!c->json) {
        printf("%s\n", text);
        return;
    }
    json_t *o = json_pack("{s:s, s:s, s:s}", "node", node, "result", "ok",
                          "value", text);
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s ? s : "");
    free(s);
    json_decref(o);
}

static int
set_tracing(struct ctl *c, bool on)
{
    const char *vhost = c->vhost;
    struct ctl_answer a;
    char text[600], node[256] = "";

    ctl_banner(c, "%s tracing for vhost \"%s\" ...",
               on ? "Starting" : "Stopping", vhost);
    char *path = ctl_path("/api/vhosts/%s", vhost);
    int rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    if (rc != 0)
        goto out;
    if (a.status == 200 && json_is_object(a.json)) {
        snprintf(node, sizeof(node), "%s", node_of(a.json));
        const json_t *d = json_object_get(a.json, "description");
        char *tags = tags_text(json_object_get(a.json, "tags"));
        json_t *body = json_pack("{s:s, s:s, s:b}", "description",
                                 json_is_string(d) ? json_string_value(d)
                                                   : "",
                                 "tags", tags, "tracing", on);
        free(tags);
        ctl_answer_clear(&a);
        rc = ctl_call(c, EVHTTP_REQ_PUT, path, body, &a);
        json_decref(body);
        if (rc == 0 && a.status != 204 && a.status != 201 && a.status != 200)
            rc = ctl_unexpected(&a, on ? "starting tracing"
                                       : "stopping tracing");
    } else if (a.status != 404) {
        rc = ctl_unexpected(&a, "looking the vhost up");
    }
    if (rc == 0) {
        snprintf(text, sizeof(text), "Trace %s for vhost %s",
                 on ? "enabled" : "disabled", vhost);
        result(c, node, text);
    }
out:
    ctl_answer_clear(&a);
    free(path);
    return rc;
}

int
cmd_trace_on(struct ctl *c)
{
    return set_tracing(c, true);
}

int
cmd_trace_off(struct ctl *c)
{
    return set_tracing(c, false);
}
