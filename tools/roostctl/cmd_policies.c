/*
 * SPDX-License-Identifier: Apache-2.0
 * Policy commands: set_policy, clear_policy, list_policies and their
 * operator twins set_operator_policy, clear_operator_policy,
 * list_operator_policies, on /api/policies and /api/operator-policies,
 * with rabbitmqctl's banners, table and exit codes (a missing vhost 65,
 * a refused policy or a missing one 69).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* What differs between the two kinds. */
static const struct kind {
    const char *api;            /* "policies" or "operator-policies" */
    const char *set_banner, *clear_banner, *list_banner;
} kinds[] = {
    { "policies", "Setting policy", "Clearing policy",
      "Listing policies" },
    { "operator-policies", "Setting operator policy override",
      "Clearing operator policy", "Listing operator policy overrides" },
};

/* rabbitmqctl prints a missing vhost without "Error:". */
static int
no_vhost(const char *vhost)
{
    fflush(stdout);
    fprintf(stderr, "Virtual host '%s' does not exist\n", vhost);
    return EX_DATAERR;
}

/* The API's reason without the HTML escapes RabbitMQ's policy resource
 * adds, as rabbitmqctl shows it. */
static void
unescape_html(char *s)
{
    static const struct { const char *from; char to; } e[] = {
        { "&lt;", '<' }, { "&gt;", '>' }, { "&amp;", '&' },
    };
    char *out = s;
    while (*s) {
        size_t i;
        for (i = 0; i < sizeof(e) / sizeof(e[0]); i++)
            if (strncmp(s, e[i].from, strlen(e[i].from)) == 0)
                break;
        if (i < sizeof(e) / sizeof(e[0])) {
            *out++ = e[i].to;
            s += strlen(e[i].from);
        } else {
            *out++ = *s++;
        }
    }
    *out = '\0';
}

static int
set(struct ctl *c, const struct kind *k)
{
    const char *name = c->argv[0], *pattern = c->argv[1], *def = c->argv[2];
    const char *prio = c->priority ? c->priority : "0";
    struct ctl_answer a;

    ctl_banner(c, "%s \"%s\" for pattern \"%s\" to \"%s\" with priority "
               "\"%s\" for vhost \"%s\" ...", k->set_banner, name, pattern,
               def, prio, c->vhost);
    json_t *definition = json_loads(def, JSON_DECODE_ANY, NULL);
    if (definition == NULL)
        return ctl_fail(EX_UNAVAILABLE, "JSON decoding error. Reason: badarg");
    json_t *body = json_pack("{s:s, s:o, s:I}", "pattern", pattern,
                             "definition", definition, "priority",
                             (json_int_t)strtoll(prio, NULL, 10));
    if (c->apply_to != NULL)
        json_object_set_new(body, "apply-to", json_string(c->apply_to));
    char *path = ctl_path("/api/%s/%s/%s", k->api, c->vhost, name);
    int rc = ctl_call(c, EVHTTP_REQ_PUT, path, body, &a);
    free(path);
    json_decref(body);
    if (rc != 0)
        return rc;
    if (a.status == 404) {
        rc = no_vhost(c->vhost);
    } else if (a.status == 400) {
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", ctl_reason(&a, buf, sizeof(buf)));
        unescape_html(buf);
        rc = ctl_fail(EX_UNAVAILABLE, "%s", buf);
    } else if (a.status != 201 && a.status != 204 && a.status != 200) {
        rc = ctl_unexpected(&a, "setting the policy");
    }
    ctl_answer_clear(&a);
    return rc;
}

static int
clear(struct ctl *c, const struct kind *k)
{
    const char *name = c->argv[0];

    ctl_banner(c, "%s \"%s\" on vhost \"%s\" ...", k->clear_banner, name,
               c->vhost);
    /* A missing vhost, as a missing policy: "Parameter does not exist". */
    return ctl_delete(c, ctl_path("/api/%s/%s/%s", k->api, c->vhost, name),
                      NULL, EX_UNAVAILABLE, "Parameter does not exist",
                      "clearing the policy");
}

/* rabbitmqctl shows a definition as compact JSON, keys sorted. */
static void
definitions_as_text(json_t *rows)
{
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        json_t *d = json_object_get(row, "definition");
        char *s = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (s != NULL)
            json_object_set_new(row, "definition", json_string(s));
        free(s);
    }
}

static int
list(struct ctl *c, const struct kind *k)
{
    static const char *const cols[] = {
        "vhost", "name", "pattern", "apply-to", "definition", "priority",
    };
    struct ctl_answer a;

    ctl_banner(c, "%s for vhost \"%s\" ...", k->list_banner, c->vhost);
    char *path = ctl_path("/api/%s/%s", k->api, c->vhost);
    int rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    free(path);
    if (rc != 0)
        return rc;
    if (a.status == 404) {
        rc = no_vhost(c->vhost);
    } else if (a.status != 200 || !json_is_array(a.json)) {
        rc = ctl_unexpected(&a, "listing policies");
    } else {
        definitions_as_text(a.json);
        ctl_table(c, cols, sizeof(cols) / sizeof(cols[0]), a.json);
    }
    ctl_answer_clear(&a);
    return rc;
}

int
cmd_set_policy(struct ctl *c)
{
    return set(c, &kinds[0]);
}

int
cmd_clear_policy(struct ctl *c)
{
    return clear(c, &kinds[0]);
}

int
cmd_list_policies(struct ctl *c)
{
    return list(c, &kinds[0]);
}

int
cmd_set_operator_policy(struct ctl *c)
{
    return set(c, &kinds[1]);
}

int
cmd_clear_operator_policy(struct ctl *c)
{
    return clear(c, &kinds[1]);
}

int
cmd_list_operator_policies(struct ctl *c)
{
    return list(c, &kinds[1]);
}
