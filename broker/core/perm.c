/*
 * SPDX-License-Identifier: Apache-2.0
 * Permissions: a map from "vhost\0user" to its three compiled patterns.
 */
#include "broker/core/perm.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/defs.h"
#include "broker/lib/hmap.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

const char *const perm_kind_name[PERM_KINDS] = {
    [PERM_CONFIGURE] = "configure",
    [PERM_WRITE] = "write",
    [PERM_READ] = "read",
};

unsigned perm_epoch;

static struct hmap perms;
static pcre2_match_data *md;        /* shared: the loop thread's alone */
static pcre2_match_context *mctx;   /* the limits below */

/*
 * A match gives up past these. PCRE2's own defaults (ten million steps)
 * let one pattern that backtracks without end, such as ^(a|aa)+$ over
 * "aaa...ab", hold the loop thread, and every client with it, for a
 * tenth of a second a name. Names are at most 255 bytes, and an honest
 * pattern needs a few hundred steps on one; at these limits the worst
 * costs about a millisecond.
 */
#define RE_MATCH_LIMIT 100000
#define RE_DEPTH_LIMIT 5000

/* The key of a user's permissions in a vhost: "vhost\0user". */
static size_t
perm_key(char *out, size_t outlen, const char *vhost, const char *user)
{
    size_t v = strlen(vhost), u = strlen(user);
    if (v + 1 + u > outlen)
        return 0;
    memcpy(out, vhost, v);
    out[v] = '\0';
    memcpy(out + v + 1, user, u);
    return v + 1 + u;
}

static void
perm_free(struct perm *p)
{
    for (int k = 0; k < PERM_KINDS; k++) {
        pcre2_code_free(p->re[k]);
        free(p->pattern[k]);
    }
    free(p->vhost);
    free(p->user);
    free(p);
}

/* Where PCRE2 words an error otherwise than the PCRE that Erlang's re
 * (and so RabbitMQ) reports it with: the common ones in Erlang's words. */
static const struct {
    int code;
    const char *msg;
} erlang_words[] = {
    { PCRE2_ERROR_MISSING_CLOSING_PARENTHESIS, "missing )" },
    { PCRE2_ERROR_UNMATCHED_CLOSING_PARENTHESIS, "unmatched parentheses" },
    { PCRE2_ERROR_QUANTIFIER_INVALID, "nothing to repeat" },
};

void *
perm_re_compile(const char *src, char *msg, size_t msglen, size_t *at)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED,
                                   0, &code, &off, NULL);
    if (re == NULL) {
        PCRE2_UCHAR m[120];
        pcre2_get_error_message(code, m, sizeof(m));
        snprintf(msg, msglen, "%s", (const char *)m);
        for (size_t i = 0; i < NELEMS(erlang_words); i++)
            if (erlang_words[i].code == code)
                snprintf(msg, msglen, "%s", erlang_words[i].msg);
        *at = (size_t)off;
        return NULL;
    }
    /* Compiled to machine code where PCRE2 can (faster, and the match
     * limit holds there too); where it cannot, interpreted. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

enum perm_re_result
perm_re_run(const void *re, const char *s, size_t len)
{
    /* Nothing is captured: one pair is room enough (a match with more
     * groups returns 0, still a match). */
    if (md == NULL) {
        md = pcre2_match_data_create(1, NULL);
        mctx = pcre2_match_context_create(NULL);
        if (md == NULL || mctx == NULL)
            fatalx("out of memory");
        pcre2_set_match_limit(mctx, RE_MATCH_LIMIT);
        pcre2_set_depth_limit(mctx, RE_DEPTH_LIMIT);
    }
    int rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, md, mctx);
    if (rc >= 0)
        return PERM_RE_YES;
    /* The limits, the JIT's stack, or memory: given up, not answered. */
    return rc == PCRE2_ERROR_NOMATCH ? PERM_RE_NO : PERM_RE_LIMIT;
}

bool
perm_re_match(const void *re, const char *s, size_t len)
{
    return perm_re_run(re, s, len) == PERM_RE_YES;
}

void
perm_re_free(void *re)
{
    pcre2_code_free(re);
}

/* RabbitMQ reads an empty pattern as "^$". */
static pcre2_code *
compile(const char *pattern, char *err, size_t errlen)
{
    char msg[120];
    size_t at;
    pcre2_code *re = perm_re_compile(pattern[0] == '\0' ? "^$" : pattern,
                                     msg, sizeof(msg), &at);
    if (re == NULL)
        snprintf(err, errlen, "invalid regular expression '%s': %s at "
                 "position %zu", pattern, msg, at);
    return re;
}

int
perm_pattern_ok(const char *pattern, char *err, size_t errlen)
{
    pcre2_code *re = compile(pattern, err, errlen);
    pcre2_code_free(re);
    return re ? 0 : -1;
}

int
perm_set(const char *vhost, const char *user,
         const char *const pattern[PERM_KINDS], bool quiet, char *err,
         size_t errlen)
{
    char key[600];
    size_t klen = perm_key(key, sizeof(key), vhost, user);
    if (klen == 0) {
        snprintf(err, errlen, "vhost or user name too long");
        return -1;
    }
    struct perm *p = xcalloc(1, sizeof(*p));
    p->vhost = xstrdup(vhost);
    p->user = xstrdup(user);
    for (int k = 0; k < PERM_KINDS; k++) {
        p->pattern[k] = xstrdup(pattern[k]);
        if ((p->re[k] = compile(pattern[k], err, errlen)) == NULL) {
            perm_free(p);
            return -1;
        }
    }
    struct perm *old = hmap_put(&perms, key, klen, p);
    if (old != NULL)
        perm_free(old);
    perm_epoch++;
    if (!quiet)
        defs_changed(DEFS_PERM_ADDED, p);
    return 0;
}

bool
perm_clear(const char *vhost, const char *user, bool quiet)
{
    char key[600];
    size_t klen = perm_key(key, sizeof(key), vhost, user);
    struct perm *p = klen ? hmap_get(&perms, key, klen) : NULL;
    if (p == NULL)
        return false;
    if (!quiet)
        defs_changed(DEFS_PERM_REMOVED, p);
    hmap_del(&perms, key, klen);
    perm_free(p);
    perm_epoch++;
    return true;
}

const struct perm *
perm_get(const char *vhost, const char *user)
{
    char key[600];
    size_t klen = perm_key(key, sizeof(key), vhost, user);
    return klen ? hmap_get(&perms, key, klen) : NULL;
}

size_t
perm_count(void)
{
    return perms.count;
}

void
perm_foreach(void (*fn)(const struct perm *p, void *arg), void *arg)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&perms, &pos)) != NULL)
        fn(s->val, arg);
}

/* Clear every permission whose vhost (or user) is 'name'. */
static void
drop_where(bool by_user, const char *name, bool quiet)
{
    size_t pos = 0, n = 0;
    struct hmap_slot *s;
    struct perm **hit = xmalloc((perms.count + 1) * sizeof(*hit));

    while ((s = hmap_next(&perms, &pos)) != NULL) {
        struct perm *p = s->val;
        if (strcmp(by_user ? p->user : p->vhost, name) == 0)
            hit[n++] = p;
    }
    for (size_t i = 0; i < n; i++)
        perm_clear(hit[i]->vhost, hit[i]->user, quiet);
    free(hit);
}

void
perm_drop_user(const char *user, bool quiet)
{
    drop_where(true, user, quiet);
}

void
perm_drop_vhost(const char *vhost, bool quiet)
{
    drop_where(false, vhost, quiet);
}

bool
perm_allows(const struct perm *p, enum perm_kind kind, const char *name,
            size_t len)
{
    return p != NULL && perm_re_match(p->re[kind], name, len);
}

void
perm_free_all(void)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&perms, &pos)) != NULL)
        perm_free(s->val);
    hmap_destroy(&perms);
    pcre2_match_data_free(md);
    pcre2_match_context_free(mctx);
    md = NULL;
    mctx = NULL;
}
