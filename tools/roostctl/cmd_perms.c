/*
 * SPDX-License-Identifier: Apache-2.0
 * Permission commands: set_permissions, clear_permissions,
 * list_permissions, list_user_permissions, on /api/permissions. The API
 * says only "vhost_or_user_not_found" (400) or 404 where rabbitmqctl
 * tells a missing user (67) from a missing vhost (69), so on such an
 * answer we ask which one it is, user first as RabbitMQ checks them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"

static const char *const perm_cols[] = {
    "configure", "write", "read"
};

/* 1 if GET 'path' finds something, 0 if 404, or -(exit code). */
static int
exists(struct ctl *c, const char *path)
{
    struct ctl_answer a;
    int rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);

    if (rc != 0)
        return -rc;
    rc = a.status == 200 ? 1 : a.status == 404 ? 0
                                               : -ctl_unexpected(&a, path);
    ctl_answer_clear(&a);
    return rc;
}

/*
 * After a 400 or 404 on /api/permissions/V/U: 67 if the user is missing,
 * 69 if the vhost is, 0 if both exist (the permission alone is missing).
 */
static int
which_missing(struct ctl *c, const char *user, const char *vhost)
{
    char *path = ctl_path("/api/users/%s", user);
    int e = exists(c, path);

    free(path);
    if (e < 0)
        return -e;
    if (e == 0)
        return ctl_fail(EX_NOUSER, "User \"%s\" does not exist", user);
    path = ctl_path("/api/vhosts/%s", vhost);
    e = exists(c, path);
    free(path);
    if (e < 0)
        return -e;
    if (e == 0)
        return ctl_fail(EX_UNAVAILABLE, "Virtual host \"%s\" does not exist",
                        vhost);
    return 0;
}

int
cmd_set_permissions(struct ctl *c)
{
    const char *user = c->argv[0];
    struct ctl_answer a;

    ctl_banner(c, "Setting permissions for user \"%s\" in vhost \"%s\" ...",
               user, c->vhost);
    json_t *body = json_pack("{s:s, s:s, s:s}", "configure", c->argv[1],
                             "write", c->argv[2], "read", c->argv[3]);
    char *path = ctl_path("/api/permissions/%s/%s", c->vhost, user);
    int rc = ctl_call(c, EVHTTP_REQ_PUT, path, body, &a);
    free(path);
    json_decref(body);
    if (rc != 0)
        return rc;
    if (a.status == 400 || a.status == 404) {
        rc = which_missing(c, user, c->vhost);
        if (rc == 0) {
            /* Both exist: a bad regular expression, say. */
            char buf[512];
            rc = ctl_fail(EX_UNAVAILABLE, "%s",
                          ctl_reason(&a, buf, sizeof(buf)));
        }
    } else if (a.status != 201 && a.status != 204 && a.status != 200) {
        rc = ctl_unexpected(&a, "setting permissions");
    }
    ctl_answer_clear(&a);
    return rc;
}

int
cmd_clear_permissions(struct ctl *c)
{
    const char *user = c->argv[0];
    struct ctl_answer a;

    ctl_banner(c, "Clearing permissions for user \"%s\" in vhost \"%s\" ...",
               user, c->vhost);
    char *path = ctl_path("/api/permissions/%s/%s", c->vhost, user);
    int rc = ctl_call(c, EVHTTP_REQ_DELETE, path, NULL, &a);
    free(path);
    if (rc != 0)
        return rc;
    /* Clearing what is not set succeeds, as in rabbitmqctl. */
    if (a.status == 400 || a.status == 404)
        rc = which_missing(c, user, c->vhost);
    else if (a.status != 204 && a.status != 200)
        rc = ctl_unexpected(&a, "clearing permissions");
    ctl_answer_clear(&a);
    return rc;
}

/* GET 'path' (a list of permissions) and print it with 'first' as the
 * first column; a 404 means the 'kind' ("User") 'name' is missing. */
static int
list(struct ctl *c, const char *path, const char *first, int missing_code,
     const char *kind, const char *name)
{
    const char *cols[] = { first, perm_cols[0], perm_cols[1], perm_cols[2] };
    struct ctl_answer a;
    int rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);

    if (rc != 0)
        return rc;
    if (a.status == 404)
        rc = ctl_fail(missing_code, "%s \"%s\" does not exist", kind, name);
    else if (a.status != 200 || !json_is_array(a.json))
        rc = ctl_unexpected(&a, "listing permissions");
    else
        ctl_table(c, cols, 4, a.json);
    ctl_answer_clear(&a);
    return rc;
}

int
cmd_list_permissions(struct ctl *c)
{
    ctl_banner(c, "Listing permissions for vhost \"%s\" ...", c->vhost);
    char *path = ctl_path("/api/vhosts/%s/permissions", c->vhost);
    int rc = list(c, path, "user", EX_DATAERR, "Virtual host", c->vhost);
    free(path);
    return rc;
}

int
cmd_list_user_permissions(struct ctl *c)
{
    const char *user = c->argv[0];

    ctl_banner(c, "Listing permissions for user \"%s\" ...", user);
    char *path = ctl_path("/api/users/%s/permissions", user);
    /* rabbitmqctl exits 69 here, not 67: {error, {no_such_user, _}} */
    int rc = list(c, path, "vhost", EX_UNAVAILABLE, "User", user);
    free(path);
    return rc;
}
