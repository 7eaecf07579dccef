/*
 * SPDX-License-Identifier: Apache-2.0
 * Virtual host commands: add_vhost, delete_vhost, on /api/vhosts
 * (list_vhosts is with the other lists, in cmd_lists.c). rabbitmqctl's
 * add_vhost leaves an existing vhost as it is (exit 0, description
 * unchanged), while the API's PUT would update it, so add_vhost asks
 * first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

int
cmd_add_vhost(struct ctl *c)
{
    const char *vhost = c->argv[0];
    struct ctl_answer a;

    ctl_banner(c, "Adding vhost \"%s\" ...", vhost);
    char *path = ctl_path("/api/vhosts/%s", vhost);
    int rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    if (rc != 0)
        goto out;
    if (a.status == 200)
        goto out;
    if (a.status != 404) {
        rc = ctl_unexpected(&a, "looking the vhost up");
        goto out;
    }
    ctl_answer_clear(&a);
    json_t *body = json_object();
    if (c->description != NULL)
        json_object_set_new(body, "description",
                            json_string(c->description));
    if (c->tags != NULL)
        json_object_set_new(body, "tags", json_string(c->tags));
    if (c->default_queue_type != NULL)
        json_object_set_new(body, "default_queue_type",
                            json_string(c->default_queue_type));
    rc = ctl_call(c, EVHTTP_REQ_PUT, path, body, &a);
    json_decref(body);
    if (rc == 0 && a.status != 201 && a.status != 204 && a.status != 200)
        rc = ctl_unexpected(&a, "adding the vhost");
out:
    ctl_answer_clear(&a);
    free(path);
    return rc;
}

int
cmd_delete_vhost(struct ctl *c)
{
    const char *vhost = c->argv[0];
    char missing[600];

    ctl_banner(c, "Deleting vhost \"%s\" ...", vhost);
    snprintf(missing, sizeof(missing), "Virtual host \"%s\" does not exist",
             vhost);
    return ctl_delete(c, ctl_path("/api/vhosts/%s", vhost), NULL,
                      EX_DATAERR, missing, "deleting the vhost");
}
