/*
 * SPDX-License-Identifier: Apache-2.0
 * Commands that act on queues and connections: purge_queue, delete_queue
 * (on /api/queues/VHOST/NAME and its /contents) and close_connection (on
 * /api/connections/NAME), with rabbitmqctl's banners, texts and exit
 * codes. rabbitmqctl's close_connection takes an Erlang pid; roostctl
 * takes the connection's name, which its list_connections shows in the
 * pid column.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "xalloc.h"

int
cmd_purge_queue(struct ctl *c)
{
    const char *queue = c->argv[0];

    /* RabbitMQ 3.10 answers this DELETE with 406 if told JSON only. */
    static const char *const any[] = { "Accept", "*/*", NULL };

    ctl_banner(c, "Purging queue '%s' in vhost '%s' ...", queue, c->vhost);
    /* rabbitmqctl's text for a missing queue or vhost, and its 69 */
    return ctl_delete(c, ctl_path("/api/queues/%s/%s/contents", c->vhost,
                                  queue),
                      any, EX_UNAVAILABLE, "not_found", "purging the queue");
}

/* The queue's ready messages, for the message after deleting it: -1 with
 * 'rc' set if it cannot be read. */
static long long
ready_messages(struct ctl *c, const char *path, int *rc)
{
    struct ctl_answer a;
    long long n = -1;

    *rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    if (*rc != 0)
        return -1;
    if (a.status == 404) {
        *rc = ctl_fail(EX_USAGE, "Queue not found");
    } else if (a.status != 200 || !json_is_object(a.json)) {
        *rc = ctl_unexpected(&a, "reading the queue");
    } else {
        json_t *v = json_object_get(a.json, "messages_ready");
        n = json_is_integer(v) ? json_integer_value(v) : 0;
    }
    ctl_answer_clear(&a);
    return n;
}

int
cmd_delete_queue(struct ctl *c)
{
    const char *queue = c->argv[0];
    struct ctl_answer a;
    int rc;

    ctl_banner(c, "Deleting queue '%s' on vhost '%s'%s%s%s ...", queue,
               c->vhost, c->if_empty ? " if queue is empty" : "",
               c->if_empty && c->if_unused ? " and" : "",
               c->if_unused ? " if queue is unused" : "");
    char *path = ctl_path("/api/queues/%s/%s", c->vhost, queue);
    /* The API's DELETE answers 204 without the count rabbitmqctl prints:
     * it is read just before (one published in between is not in it). */
    long long n = ready_messages(c, path, &rc);
    if (rc != 0) {
        free(path);
        return rc;
    }
    char *del = xasprintf("%s%s%s%s%s", path,
                          c->if_empty || c->if_unused ? "?" : "",
                          c->if_empty ? "if-empty=true" : "",
                          c->if_empty && c->if_unused ? "&" : "",
                          c->if_unused ? "if-unused=true" : "");
    free(path);
    rc = ctl_call(c, EVHTTP_REQ_DELETE, del, NULL, &a);
    free(del);
    if (rc != 0)
        return rc;
    char buf[512];
    const char *reason = ctl_reason(&a, buf, sizeof(buf));
    if (a.status == 204 || a.status == 200) {
        /* printed even with -q, as rabbitmqctl does */
        if (c->json)
            printf("{\"message\":\"Queue was successfully deleted with %lld "
                   "ready messages\"}\n", n);
        else
            printf("Queue was successfully deleted with %lld ready "
                   "messages\n", n);
    } else if (a.status == 404) {
        rc = ctl_fail(EX_USAGE, "Queue not found");
    } else if (a.status == 400 && strstr(reason, "not empty") != NULL) {
        rc = ctl_fail(EX_USAGE, "Queue is not empty");
    } else if (a.status == 400 && strstr(reason, "in use") != NULL) {
        rc = ctl_fail(EX_USAGE, "Queue is in use");
    } else {
        rc = ctl_unexpected(&a, "deleting the queue");
    }
    ctl_answer_clear(&a);
    return rc;
}

int
cmd_close_connection(struct ctl *c)
{
    const char *name = c->argv[0], *why = c->argv[1];
    /* RabbitMQ's API takes the reason from this header and closes with
     * 320 CONNECTION_FORCED - <reason>. */
    const char *const headers[] = { "X-Reason", why, NULL };
    char missing[600];

    ctl_banner(c, "Closing connection %s, reason: %s...", name, why);
    snprintf(missing, sizeof(missing), "Connection '%s' does not exist",
             name);
    return ctl_delete(c, ctl_path("/api/connections/%s", name), headers,
                      EX_DATAERR, missing, "closing the connection");
}
