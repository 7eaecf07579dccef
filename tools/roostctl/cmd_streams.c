/*
 * SPDX-License-Identifier: Apache-2.0
 * Streams, through /api/queues/VHOST/STREAM and its /offsets/NAME:
 * stream_status (rabbitmq-streams' columns, one row: a Roost stream has
 * one member, which writes; every offset it shows is synced), and a
 * stream's consumer names (x-stream-consumer-name): list_stream_offsets,
 * set_stream_offset and delete_stream_offset, Roost's own (RabbitMQ
 * keeps no offsets for AMQP 0-9-1 consumers).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* The stream's queue object, or an exit code (and NULL). */
static json_t *
get_stream(struct ctl *c, int *rc)
{
    const char *stream = c->argv[0];
    struct ctl_answer a;

    char *path = ctl_path("/api/queues/%s/%s", c->vhost, stream);
    *rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    free(path);
    if (*rc != 0)
        return NULL;
    json_t *q = NULL;
    if (a.status == 404)
        *rc = ctl_fail(EX_USAGE, "Queue not found");
    else if (a.status != 200)
        *rc = ctl_unexpected(&a, "reading the stream");
    else if (!json_is_object(json_object_get(a.json, "stream")))
        *rc = ctl_fail(EX_USAGE, "Queue '%s' in vhost '%s' is not a stream",
                       stream, c->vhost);
    else
        q = json_incref(a.json);
    ctl_answer_clear(&a);
    return q;
}

int
cmd_stream_status(struct ctl *c)
{
    static const char *const cols[] = { "role", "node", "offset",
                                        "committed_offset", "first_offset",
                                        "readers", "segments", "messages",
                                        "bytes" };
    int rc;

    ctl_banner(c, "Status of stream '%s' in vhost '%s' ...", c->argv[0],
               c->vhost);
    json_t *q = get_stream(c, &rc);
    if (q == NULL)
        return rc;
    json_t *s = json_object_get(q, "stream");
    json_t *last = json_object_get(s, "last_offset");
    json_t *row = json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}",
                            "role", "writer", "node",
                            json_object_get(q, "node"), "offset", last,
                            "committed_offset", last, "first_offset",
                            json_object_get(s, "first_offset"), "readers",
                            json_object_get(q, "consumers"), "segments",
                            json_object_get(s, "segments"), "messages",
                            json_object_get(q, "messages"), "bytes",
                            json_object_get(s, "bytes"));
    json_t *rows = json_pack("[o]", row);
    ctl_table(c, cols, sizeof(cols) / sizeof(cols[0]), rows);
    json_decref(rows);
    json_decref(q);
    return 0;
}

int
cmd_list_stream_offsets(struct ctl *c)
{
    static const char *const cols[] = { "name", "offset", "lag",
                                        "consumers", "updated_at" };
    int rc;

    ctl_banner(c, "Listing consumer offsets of stream '%s' in vhost '%s' ...",
               c->argv[0], c->vhost);
    json_t *q = get_stream(c, &rc);
    if (q == NULL)
        return rc;
    ctl_table(c, cols, sizeof(cols) / sizeof(cols[0]),
              json_object_get(q, "consumer_offsets"));
    json_decref(q);
    return 0;
}

int
cmd_set_stream_offset(struct ctl *c)
{
    const char *stream = c->argv[0], *name = c->argv[1], *to = c->argv[2];
    struct ctl_answer a;
    char *end, reason[512];

    long long n = strtoll(to, &end, 10);
    json_t *off = *end == '\0' && end != to && n >= 0 ? json_integer(n)
                                                      : json_string(to);
    json_t *body = json_pack("{s:o}", "offset", off);
    ctl_banner(c, "Setting consumer offset '%s' of stream '%s' in vhost "
               "'%s' to %s ...", name, stream, c->vhost, to);
    char *path = ctl_path("/api/queues/%s/%s/offsets/%s", c->vhost, stream,
                          name);
    int rc = ctl_call(c, EVHTTP_REQ_PUT, path, body, &a);
    free(path);
    json_decref(body);
    if (rc != 0)
        return rc;
    if (a.status == 404)
        rc = ctl_fail(EX_USAGE, "Queue not found");
    else if (a.status == 400 || a.status == 409)
        rc = ctl_fail(EX_USAGE, "%s", ctl_reason(&a, reason, sizeof(reason)));
    else if (a.status != 204 && a.status != 201)
        rc = ctl_unexpected(&a, "setting the offset");
    ctl_answer_clear(&a);
    return rc;
}

int
cmd_delete_stream_offset(struct ctl *c)
{
    const char *stream = c->argv[0], *name = c->argv[1];

    ctl_banner(c, "Deleting consumer offset '%s' of stream '%s' in vhost "
               "'%s' ...", name, stream, c->vhost);
    return ctl_delete(c, ctl_path("/api/queues/%s/%s/offsets/%s", c->vhost,
                                  stream, name),
                      NULL, EX_USAGE, "Consumer offset not found",
                      "deleting the offset");
}
