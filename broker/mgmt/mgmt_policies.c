/*
 * SPDX-License-Identifier: Apache-2.0
 * Policies and operator policies in the management API:
 * /api/policies[/VHOST[/NAME]] and /api/operator-policies[/VHOST[/NAME]],
 * as RabbitMQ 3.10's rabbit_mgmt_wm_policies.erl, _policy.erl and their
 * operator twins answer them. Policies are read and changed only through
 * policy.h, which announces each change, so the store keeps them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/broker.h"
#include "broker/core/policy.h"
#include "broker/core/vhost.h"
#include "broker/defs/defs_json.h"
#include "broker/mgmt/mgmt_int.h"

static const char *const by_vhost_name[] = { "vhost", "name", NULL };

struct policy_list {
    const struct mgmt_req *r;
    enum policy_kind kind;
    json_t *arr;
};

static void
add_policy(const struct policy *p, void *arg)
{
    json_array_append_new(((struct policy_list *)arg)->arr, defs_json_policy(p));
}

static void
add_vhost_policies(struct vhost *vh, void *arg)
{
    struct policy_list *l = arg;
    /* As RabbitMQ: those of the vhosts the user may log in to. */
    if (mgmt_is_admin(l->r->user) || mgmt_is_login_vhost(l->r->user, vh->name))
        policy_foreach(vh, l->kind, add_policy, l);
}

static void
list_all(struct mgmt_req *r, enum policy_kind kind)
{
    struct policy_list l = { r, kind, json_array() };
    vhost_foreach(add_vhost_policies, &l);
    mgmt_reply_list(r, l.arr, by_vhost_name);
}

static void
list_vhost(struct mgmt_req *r, enum policy_kind kind)
{
    struct vhost *vh = broker_vhost(r->arg[0], strlen(r->arg[0]));
    if (vh == NULL) {
        mgmt_not_found(r);
        return;
    }
    struct policy_list l = { r, kind, json_array() };
    policy_foreach(vh, l.kind, add_policy, &l);
    mgmt_reply_list(r, l.arr, by_vhost_name);
}

/* RabbitMQ's policy resource escapes its reason for HTML (<< becomes
 * &lt;&lt;); the operator policy resource does not. */
static void
escape_html(char *out, size_t cap, const char *in)
{
    size_t n = 0;
    for (; *in && n + 7 < cap; in++) {
        const char *e = *in == '<' ? "&lt;" : *in == '>' ? "&gt;"
                      : *in == '&' ? "&amp;" : NULL;
        if (e) {
            memcpy(out + n, e, strlen(e));
            n += strlen(e);
        } else {
            out[n++] = *in;
        }
    }
    out[n] = '\0';
}

static void
put_policy(struct mgmt_req *r, struct vhost *vh, enum policy_kind kind,
           const char *name)
{
    static const char *const required[] = { "pattern", "definition", NULL };
    char err[2048], esc[sizeof(err) * 5];
    json_t *o;

    if (mgmt_body_object(r, &o) != 0)
        return;
    if (mgmt_require(r, o, required) != 0)
        goto out;
    int rc = policy_set(vh, kind, name, json_object_get(o, "pattern"),
                        json_object_get(o, "apply-to"),
                        json_object_get(o, "priority"),
                        json_object_get(o, "definition"), false, err,
                        sizeof(err));
    if (rc < 0) {
        if (kind == POLICY_USER) {
            escape_html(esc, sizeof(esc), err);
            mgmt_bad_request(r, "Validation failed\n\n%s", esc);
        } else {
            mgmt_bad_request(r, "Validation failed\n\n%s", err);
        }
        goto out;
    }
    mgmt_reply_created(r, rc == 1);
out:
    json_decref(o);
}

static void
one(struct mgmt_req *r, enum policy_kind kind)
{
    struct vhost *vh = broker_vhost(r->arg[0], strlen(r->arg[0]));
    const struct policy *p = vh ? policy_get(vh, kind, r->arg[1]) : NULL;

    switch (r->method) {
    case EVHTTP_REQ_PUT:
        if (vh == NULL)
            mgmt_error(r, 404, "not_found", "vhost_not_found");
        else if (mgmt_name_ok(r, "policy", r->arg[1], 255))
            put_policy(r, vh, kind, r->arg[1]);
        return;
    case EVHTTP_REQ_DELETE:
        if (p == NULL)
            mgmt_not_found(r);
        else {
            policy_clear(vh, kind, r->arg[1], false);
            mgmt_reply(r, 204, NULL);
        }
        return;
    default:
        if (p == NULL)
            mgmt_not_found(r);
        else
            mgmt_reply(r, 200, defs_json_policy(p));
        return;
    }
}

void
mgmt_policies(struct mgmt_req *r)
{
    list_all(r, POLICY_USER);
}

void
mgmt_policies_vhost(struct mgmt_req *r)
{
    list_vhost(r, POLICY_USER);
}

void
mgmt_policy(struct mgmt_req *r)
{
    one(r, POLICY_USER);
}

void
mgmt_operator_policies(struct mgmt_req *r)
{
    list_all(r, POLICY_OPERATOR);
}

void
mgmt_operator_policies_vhost(struct mgmt_req *r)
{
    list_vhost(r, POLICY_OPERATOR);
}

void
mgmt_operator_policy(struct mgmt_req *r)
{
    one(r, POLICY_OPERATOR);
}
