/*
 * SPDX-License-Identifier: Apache-2.0
 * SASL PLAIN, AMQPLAIN and EXTERNAL against the in-memory users.
 */
#include "broker/core/auth.h"
#include "broker/core/hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amqp/table.h"
#include "broker/core/broker.h"
#include "broker/core/defs.h"
#include "broker/core/perm.h"
#include "broker/lib/config.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "tls/hash.h"

static const char *const alg_names[] = {
    [TLS_SHA256] = "rabbit_password_hashing_sha256",
    [TLS_SHA512] = "rabbit_password_hashing_sha512",
    [TLS_MD5] = "rabbit_password_hashing_md5",
};

const char *
auth_alg_name(uint8_t alg)
{
    return alg < NELEMS(alg_names) ? alg_names[alg] : "";
}

int
auth_alg_parse(const char *name, uint8_t *alg)
{
    for (size_t i = 0; i < NELEMS(alg_names); i++)
        if (strcmp(name, alg_names[i]) == 0) {
            *alg = (uint8_t)i;
            return 0;
        }
    return -1;
}

static void
user_free(struct user *u)
{
    free(u->name);
    free(u->tags);
    free(u);
}

int
auth_put_user(const char *name, uint8_t alg, const uint8_t *hash, size_t len,
              const char *tags, bool quiet, char *err, size_t errlen)
{
    if (alg >= NELEMS(alg_names) ||
        (len != 0 && len != 4 + tls_digest_len((enum tls_digest)alg))) {
        snprintf(err, errlen, "user '%s': a password hash of %zu bytes is "
                 "not one of %s (salt and digest: %zu bytes)", name, len,
                 auth_alg_name(alg),
                 4 + tls_digest_len((enum tls_digest)alg));
        return -1;
    }
    struct user *u = xcalloc(1, sizeof(*u));
    u->name = xstrdup(name);
    u->alg = alg;
    u->hash_len = (uint8_t)len;
    if (len)
        memcpy(u->hash, hash, len);
    u->tags = xstrdup(tags ? tags : "");
    struct user *old = hmap_put(&broker.users, u->name, strlen(u->name), u);
    if (old)
        user_free(old);
    if (!quiet)
        defs_changed(DEFS_USER_ADDED, u);
    return 0;
}

void
auth_add_user(const char *name, const char *password, const char *tags)
{
    uint8_t hash[4 + TLS_DIGEST_MAX];
    char err[256];

    if (tls_random(hash, 4) != 0 ||
        tls_digest2(TLS_SHA256, hash, 4, password, strlen(password),
                    hash + 4) == 0)
        fatalx("cannot hash a password (OpenSSL)");
    if (auth_put_user(name, TLS_SHA256, hash, 4 + 32, tags, false, err,
                      sizeof(err)) != 0)
        fatalx("%s", err);
}

bool
auth_delete_user(const char *name, bool quiet)
{
    struct user *u = hmap_get(&broker.users, name, strlen(name));
    if (u == NULL)
        return false;
    /* RabbitMQ closes the user's connections and drops its permissions
     * with it. */
    char reason[400];
    snprintf(reason, sizeof(reason), "user '%s' is deleted", name);
    session_hooks.close_user(name, reason);
    perm_drop_user(name, quiet);
    if (!quiet)
        defs_changed(DEFS_USER_REMOVED, u);
    hmap_del(&broker.users, name, strlen(name));
    user_free(u);
    return true;
}

const struct user *
auth_user(const char *name)
{
    return hmap_get(&broker.users, name, strlen(name));
}

void
auth_foreach_user(void (*fn)(const struct user *u, void *arg), void *arg)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&broker.users, &pos)) != NULL)
        fn(s->val, arg);
}

/* Whether the comma-separated 'tags' has 'tag'. */
static bool
has_tag(const char *tags, const char *tag)
{
    size_t n = strlen(tag);
    for (const char *t = tags; *t != '\0';) {
        size_t k = strcspn(t, ",");
        if (k == n && memcmp(t, tag, n) == 0)
            return true;
        t += k + (t[k] == ',');
    }
    return false;
}

bool
auth_has_tag(const struct user *u, const char *tag)
{
    return has_tag(u->tags, tag);
}

bool
auth_may_claim(const char *user, struct amqp_bytes user_id)
{
    if (user == NULL)
        return false;
    if (amqp_bytes_eq(user_id, user))
        return true;
    const struct user *u = hmap_get(&broker.users, user, strlen(user));
    return u != NULL && has_tag(u->tags, "impersonator");
}

size_t
auth_user_count(void)
{
    return broker.users.count;
}

void
auth_free_users(void)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&broker.users, &pos)) != NULL)
        user_free(s->val);
    hmap_destroy(&broker.users);
}

/* Whether 'pass' is the user's password, in time that does not depend on
 * where the digests differ. */
static bool
password_ok(const struct user *u, struct amqp_bytes pass)
{
    uint8_t d[TLS_DIGEST_MAX];
    size_t n;

    /* RabbitMQ's internal users never log in with a blank password,
     * whatever their hash says. */
    if (u->hash_len < 4 || pass.len == 0)
        return false;
    n = tls_digest2((enum tls_digest)u->alg, u->hash, 4, pass.ptr, pass.len,
                    d);
    if (n == 0 || n != (size_t)u->hash_len - 4)
        return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(d[i] ^ u->hash[4 + i]);
    return diff == 0;
}

static int
parse_plain(struct amqp_bytes r, struct amqp_bytes *login,
            struct amqp_bytes *pass)
{
    /* [authzid] \0 authcid \0 passwd */
    const uint8_t *z1 = memchr(r.ptr, 0, r.len);
    if (z1 == NULL)
        return -1;
    const uint8_t *rest = z1 + 1;
    size_t restlen = r.len - (size_t)(rest - r.ptr);
    const uint8_t *z2 = memchr(rest, 0, restlen);
    if (z2 == NULL)
        return -1;
    login->ptr = rest;
    login->len = (size_t)(z2 - rest);
    pass->ptr = z2 + 1;
    pass->len = restlen - login->len - 1;
    return 0;
}

static int
parse_amqplain(struct amqp_bytes r, struct amqp_bytes *login,
               struct amqp_bytes *pass)
{
    struct amqp_table t = { r.ptr, r.len };
    struct amqp_field v;

    if (table_validate(r.ptr, r.len, 1) != AMQP_OK)
        return -1;
    if (!table_get(t, "LOGIN", &v) || v.kind != AMQP_FIELD_LONGSTR)
        return -1;
    *login = v.v.str;
    if (!table_get(t, "PASSWORD", &v) || v.kind != AMQP_FIELD_LONGSTR)
        return -1;
    *pass = v.v.str;
    return 0;
}

void
auth_offered(bool external, char *out, size_t len)
{
    /* In RabbitMQ's order: it lists them sorted. */
    static const char *const known[] = { "AMQPLAIN", "EXTERNAL", "PLAIN" };
    const char *list = broker.cfg.auth_mechanisms;
    char mech[64];
    size_t w = 0;

    out[0] = '\0';
    if (list[0] == '\0') {
        snprintf(out, len, "%s", AUTH_MECHANISMS);
        return;
    }
    for (size_t i = 0; i < NELEMS(known); i++) {
        bool named = false;
        for (size_t pos = 0;
             !named && config_list_next(list, &pos, mech, sizeof(mech));)
            named = strcmp(mech, known[i]) == 0;
        if (!named || (strcmp(known[i], "EXTERNAL") == 0 && !external))
            continue;
        int k = snprintf(out + w, len - w, "%s%s", w ? " " : "", known[i]);
        if (k < 0 || (size_t)k >= len - w)
            break;
        w += (size_t)k;
    }
}

/* Whether 'mechanism' is a word of 'offered'. */
static bool
was_offered(struct amqp_bytes mechanism, const char *offered)
{
    const char *p = offered;
    while (*p != '\0') {
        size_t n = strcspn(p, " ");
        if (n == mechanism.len && n > 0 && memcmp(p, mechanism.ptr, n) == 0)
            return true;
        p += n;
        p += strspn(p, " ");
    }
    return false;
}

/* RabbitMQ's loopback_users: by default guest alone; once any entry is
 * set, the users set to true. */
bool
auth_loopback_only(const char *name)
{
    const char *list = broker.cfg.loopback_users;
    char v[8];

    if (config_list_none(list))
        return false;
    if (list[0] == '\0')
        return strcmp(name, "guest") == 0;
    return config_list_get(list, name, v, sizeof(v)) && strcmp(v, "true") == 0;
}

const struct user *
auth_login(const char *name, struct amqp_bytes password)
{
    const struct user *u = auth_user(name);
    return u != NULL && password_ok(u, password) ? u : NULL;
}

int
auth_check(struct amqp_bytes mechanism, struct amqp_bytes response,
           const char *offered, const char *external_user,
           bool from_loopback, char **user, bool *unsupported, char *why,
           size_t whylen)
{
    struct amqp_bytes login = { NULL, 0 }, pass = { NULL, 0 };
    bool external = amqp_bytes_eq(mechanism, "EXTERNAL");
    int rc = 0;

    *unsupported = false;
    if (!was_offered(mechanism, offered) ||
        (external && external_user == NULL)) {
        *unsupported = true;
        snprintf(why, whylen, "unsupported authentication mechanism");
        return -1;
    }
    if (amqp_bytes_eq(mechanism, "PLAIN"))
        rc = parse_plain(response, &login, &pass);
    else if (amqp_bytes_eq(mechanism, "AMQPLAIN"))
        rc = parse_amqplain(response, &login, &pass);
    else
        login = amqp_cstr(external_user);
    if (rc != 0) {
        snprintf(why, whylen, "malformed %s response",
                 amqp_bytes_eq(mechanism, "PLAIN") ? "PLAIN" : "AMQPLAIN");
        return -1;
    }
    struct user *u = hmap_get(&broker.users, login.ptr, login.len);
    if (u == NULL && external) {
        snprintf(why, whylen, "no user '%.*s' (the client certificate's "
                 "name)", (int)(login.len > 200 ? 200 : login.len), login.ptr);
        return -1;
    }
    if (u == NULL || (!external && !password_ok(u, pass))) {
        /* RabbitMQ's words; the name as the client sent it, escaped */
        char name[256];
        log_escape(name, sizeof(name), login.ptr, login.len);
        snprintf(why, whylen, "user '%s' - %s", name,
                 u && pass.len == 0 ? "blank password (refused for every "
                 "user, as RabbitMQ does)" : "invalid credentials");
        return -1;
    }
    if (!from_loopback && auth_loopback_only(u->name)) {
        snprintf(why, whylen, "user '%.200s' can only connect via localhost",
                 u->name);
        return -1;
    }
    *user = xstrdup(u->name);
    return 0;
}
