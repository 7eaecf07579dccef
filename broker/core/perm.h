/*
 * SPDX-License-Identifier: Apache-2.0
 * Permissions as RabbitMQ has them: per user and vhost, three regular
 * expressions (configure, write, read) matched, unanchored, against a
 * resource's name; an empty pattern means "^$". Patterns are PCRE
 * (PCRE2), as Erlang's re reads them. A user with no permissions in a
 * vhost cannot open it. Permissions are definitions: the store keeps
 * them, export and import carry them.
 */
#ifndef ROOST_BROKER_PERM_H
#define ROOST_BROKER_PERM_H

#include <stdbool.h>
#include <stddef.h>

enum perm_kind { PERM_CONFIGURE, PERM_WRITE, PERM_READ, PERM_KINDS };

/* RabbitMQ's names: "configure", "write", "read". */
extern const char *const perm_kind_name[PERM_KINDS];

struct perm {
    char *vhost;
    char *user;
    char *pattern[PERM_KINDS];  /* as given */
    void *re[PERM_KINDS];       /* compiled (pcre2_code) */
};

/*
 * Set (or replace) a user's permissions in a vhost, announced unless
 * 'quiet'. 0, or -1 with the reason in 'err' when a pattern does not
 * compile (nothing changes then). The user and vhost are not checked
 * here: the callers say which must exist.
 */
int perm_set(const char *vhost, const char *user, const char *const
             pattern[PERM_KINDS], bool quiet, char *err, size_t errlen);

/* Whether 'pattern' compiles; -1 with the reason in 'err' if not. */
int perm_pattern_ok(const char *pattern, char *err, size_t errlen);

/* Remove them (announced unless 'quiet'); false if there were none. */
bool perm_clear(const char *vhost, const char *user, bool quiet);

/* A user's permissions in a vhost, or NULL. */
const struct perm *perm_get(const char *vhost, const char *user);

/* How many there are. */
size_t perm_count(void);

/* Every permission, in no particular order. */
void perm_foreach(void (*fn)(const struct perm *p, void *arg), void *arg);

/* Drop every permission of a user, or in a vhost, as their deletion does
 * (announced unless 'quiet'). */
void perm_drop_user(const char *user, bool quiet);
void perm_drop_vhost(const char *vhost, bool quiet);

/* Whether 'p' (may be NULL: nothing is allowed) allows 'kind' on the
 * resource 'name'. */
bool perm_allows(const struct perm *p, enum perm_kind kind, const char *name,
                 size_t len);

/*
 * The pattern engine permissions and policies share: PCRE2, as Erlang's
 * re reads a pattern. perm_re_compile returns a compiled 'src', or NULL
 * with PCRE2's message in 'msg' and the offset of the error in '*at'.
 * perm_re_run matches unanchored, within a bound on its work (perm.c):
 * past it the answer is PERM_RE_LIMIT, neither yes nor no. perm_re_match
 * is perm_re_run == PERM_RE_YES: a pattern past the bound matches
 * nothing (so a permission it would give is refused). perm_re_free(NULL)
 * is a no-op.
 */
enum perm_re_result { PERM_RE_NO, PERM_RE_YES, PERM_RE_LIMIT };

void *perm_re_compile(const char *src, char *msg, size_t msglen, size_t *at);
enum perm_re_result perm_re_run(const void *re, const char *s, size_t len);
bool perm_re_match(const void *re, const char *s, size_t len);
void perm_re_free(void *re);

/* Bumped by every change, so that connections may cache a lookup. */
extern unsigned perm_epoch;

void perm_free_all(void);

#endif
