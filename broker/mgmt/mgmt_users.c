/*
 * SPDX-License-Identifier: Apache-2.0
 * Users and permissions in the management API: /api/users[/NAME
 * [/permissions]], /api/permissions[/VHOST/USER], as RabbitMQ 3.10's
 * rabbit_mgmt_wm_user*.erl and _permission*.erl answer them. Users are
 * read and changed only through auth.h, permissions through perm.h;
 * both announce their changes, so the store keeps them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/perm.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/util.h"
#include "broker/mgmt/mgmt_int.h"
#include "tls/hash.h"

#define TAGS_MAX 1024

static const char *const by_name[] = { "name", NULL };
static const char *const by_vhost_user[] = { "vhost", "user", NULL };

/* ---- users ---- */

/* As rabbit_mgmt_format:internal_user. Roost has no user limits: "{}". */
static json_t *
user_json(const struct user *u)
{
    char hash[4 * ((sizeof(u->hash) + 2) / 3) + 1];
    const char *alg = auth_alg_name(u->alg);

    tls_base64(u->hash, u->hash_len, hash);
    return json_pack("{s:o, s:s, s:s, s:o, s:{}}", "name", mgmt_str(u->name),
                     "password_hash", hash, "hashing_algorithm",
                     alg[0] ? alg : "rabbit_password_hashing_sha256", "tags",
                     defs_json_tags(u->tags), "limits");
}

static void
add_user(const struct user *u, void *arg)
{
    json_array_append_new(arg, user_json(u));
}

void
mgmt_users(struct mgmt_req *r)
{
    json_t *arr = json_array();
    auth_foreach_user(add_user, arr);
    mgmt_reply_list(r, arr, by_name);
}

void
mgmt_whoami(struct mgmt_req *r)
{
    mgmt_reply(r, 200, json_pack("{s:o, s:o}", "name",
                                 mgmt_str(r->user->name), "tags",
                                 defs_json_tags(r->user->tags)));
}

/* A JSON string with no NUL inside (a C string as given). */
static bool
is_cstring(const json_t *v)
{
    return json_is_string(v) &&
           strlen(json_string_value(v)) == json_string_length(v);
}

/* The tags of a PUT: "tags", or the older "administrator" flag. */
static int
put_tags(struct mgmt_req *r, json_t *o, char *tags, size_t cap)
{
    json_t *t = json_object_get(o, "tags");
    json_t *admin = json_object_get(o, "administrator");
    char err[256];

    if (t == NULL && admin == NULL) {
        mgmt_bad_request(r, "tags_not_present");
        return -1;
    }
    if (t == NULL) {
        bool on = json_is_true(admin) ||
                  (json_is_string(admin) &&
                   strcmp(json_string_value(admin), "true") == 0);
        snprintf(tags, cap, "%s", on ? "administrator" : "");
        return 0;
    }
    if (defs_json_parse_tags(t, tags, cap, err, sizeof(err)) != 0) {
        mgmt_bad_request(r, "%s", err);
        return -1;
    }
    return 0;
}

/*
 * rabbit_auth_backend_internal:put_user: "password" is hashed (SHA-256,
 * RabbitMQ's default), "password_hash" (base64 of salt and digest) is
 * kept as given with "hashing_algorithm"; neither clears the password.
 * A user without a password can log in only with EXTERNAL.
 */
static void
put_user(struct mgmt_req *r, const char *name)
{
    json_t *o;
    char tags[TAGS_MAX], err[512];
    uint8_t hash[4 + TLS_DIGEST_MAX];
    uint8_t alg = TLS_SHA256;
    int len = 0;

    if (!mgmt_name_ok(r, "user", name, MGMT_NAME_MAX) ||
        mgmt_body_object(r, &o) != 0)
        return;
    json_t *pw = json_object_get(o, "password");
    json_t *ph = json_object_get(o, "password_hash");
    json_t *ha = json_object_get(o, "hashing_algorithm");
    bool created = auth_user(name) == NULL;

    if (put_tags(r, o, tags, sizeof(tags)) != 0)
        goto out;
    if (pw != NULL && ph != NULL) {
        mgmt_bad_request(r, "both_password_and_password_hash_are_provided");
        goto out;
    }
    if (pw != NULL && !is_cstring(pw)) {
        mgmt_bad_request(r, "password must be a string");
        goto out;
    }
    if (ph != NULL && !is_cstring(ph)) {
        mgmt_bad_request(r, "password_hash must be a string");
        goto out;
    }
    if (ha != NULL && (!json_is_string(ha) ||
                       auth_alg_parse(json_string_value(ha), &alg) != 0)) {
        mgmt_bad_request(r, "hashing_algorithm must be "
                         "rabbit_password_hashing_sha256, _sha512 or _md5");
        goto out;
    }
    if (pw != NULL && json_string_length(pw) > 0) {
        auth_add_user(name, json_string_value(pw), tags);
        mgmt_reply_created(r, created);
        goto out;
    }
    if (ph != NULL && json_string_length(ph) > 0) {
        len = tls_unbase64(json_string_value(ph), hash, sizeof(hash));
        if (len < 0) {
            mgmt_error_json(r, 400, "bad_request",
                            json_pack("[s, O]", "not_base64", ph));
            goto out;
        }
    }
    /* A hash as given, or none: "password_hash": "", no password key,
     * or an empty password (which RabbitMQ would hash, and then refuse
     * at every login as blank). */
    if (auth_put_user(name, alg, hash, (size_t)len, tags, false, err,
                      sizeof(err)) != 0) {
        mgmt_bad_request(r, "%s", err);
        goto out;
    }
    mgmt_reply_created(r, created);
out:
    json_decref(o);
}

void
mgmt_user(struct mgmt_req *r)
{
    const char *name = r->arg[0];
    const struct user *u = auth_user(name);

    switch (r->method) {
    case EVHTTP_REQ_PUT:
        put_user(r, name);
        return;
    case EVHTTP_REQ_DELETE:
        if (u == NULL)
            mgmt_not_found(r);
        else {
            auth_delete_user(name, false);
            mgmt_reply(r, 204, NULL);
        }
        return;
    default:
        if (u == NULL)
            mgmt_not_found(r);
        else
            mgmt_reply(r, 200, user_json(u));
        return;
    }
}

/* ---- permissions ---- */

static json_t *
perm_json(const struct perm *p)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "user", mgmt_str(p->user),
                     "vhost", mgmt_str(p->vhost), "configure",
                     mgmt_str(p->pattern[PERM_CONFIGURE]), "write",
                     mgmt_str(p->pattern[PERM_WRITE]), "read",
                     mgmt_str(p->pattern[PERM_READ]));
}

/* Collect the permissions of one user or vhost (NULL: any). */
struct perm_filter {
    const char *user, *vhost;
    json_t *arr;
};

static void
add_perm(const struct perm *p, void *arg)
{
    struct perm_filter *f = arg;
    if ((f->user == NULL || strcmp(p->user, f->user) == 0) &&
        (f->vhost == NULL || strcmp(p->vhost, f->vhost) == 0))
        json_array_append_new(f->arr, perm_json(p));
}

static void
reply_perms(struct mgmt_req *r, const char *user, const char *vhost)
{
    struct perm_filter f = { user, vhost, json_array() };
    perm_foreach(add_perm, &f);
    mgmt_reply_list(r, f.arr, by_vhost_user);
}

void
mgmt_permissions(struct mgmt_req *r)
{
    reply_perms(r, NULL, NULL);
}

void
mgmt_user_permissions(struct mgmt_req *r)
{
    if (auth_user(r->arg[0]) == NULL)
        mgmt_not_found(r);
    else
        reply_perms(r, r->arg[0], NULL);
}

void
mgmt_vhost_permissions(struct mgmt_req *r)
{
    if (broker_vhost(r->arg[0], strlen(r->arg[0])) == NULL)
        mgmt_not_found(r);
    else
        reply_perms(r, NULL, r->arg[0]);
}

static void
put_permission(struct mgmt_req *r, const char *vhost, const char *user)
{
    static const char *const keys[] = { "configure", "write", "read", NULL };
    const char *pattern[PERM_KINDS];
    json_t *o;
    char err[512];

    if (mgmt_body_object(r, &o) != 0)
        return;
    if (mgmt_require(r, o, keys) != 0)
        goto out;
    for (int k = 0; k < PERM_KINDS; k++) {
        json_t *v = json_object_get(o, perm_kind_name[k]);
        if (!is_cstring(v)) {
            mgmt_bad_request(r, "%s must be a string", perm_kind_name[k]);
            goto out;
        }
        pattern[k] = json_string_value(v);
    }
    if (broker_vhost(vhost, strlen(vhost)) == NULL || auth_user(user) == NULL) {
        mgmt_bad_request(r, "vhost_or_user_not_found");
        goto out;
    }
    bool created = perm_get(vhost, user) == NULL;
    if (perm_set(vhost, user, pattern, false, err, sizeof(err)) != 0) {
        mgmt_bad_request(r, "%s", err);
        goto out;
    }
    mgmt_reply_created(r, created);
out:
    json_decref(o);
}

void
mgmt_permission(struct mgmt_req *r)
{
    const char *vhost = r->arg[0], *user = r->arg[1];
    const struct perm *p = perm_get(vhost, user);

    switch (r->method) {
    case EVHTTP_REQ_PUT:
        put_permission(r, vhost, user);
        return;
    case EVHTTP_REQ_DELETE:
        if (p == NULL)
            mgmt_not_found(r);
        else {
            perm_clear(vhost, user, false);
            mgmt_reply(r, 204, NULL);
        }
        return;
    default:
        if (p == NULL)
            mgmt_not_found(r);
        else
            mgmt_reply(r, 200, perm_json(p));
        return;
    }
}
