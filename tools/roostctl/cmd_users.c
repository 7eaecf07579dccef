/*
 * SPDX-License-Identifier: Apache-2.0
 * User commands: add_user, delete_user, change_password, set_user_tags,
 * list_users, on /api/users. The API's PUT both creates and replaces a
 * user, and a PUT without a password clears it, so add_user asks first
 * (rabbitmqctl refuses an existing user) and set_user_tags sends the
 * user's password hash back with the new tags.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "ctl.h"
#include "xalloc.h"

#define PASSWORD_MAX 4096

/*
 * rabbitmqctl reads a password from stdin when the argument is missing:
 * the first line, without its newline, echo off on a terminal. NULL if
 * there is none.
 */
static char *
read_password(void)
{
    struct termios old, quiet;
    bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
    char buf[PASSWORD_MAX + 2];

    if (tty) {
        fputs("Password: ", stderr);
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    char *line = fgets(buf, sizeof(buf), stdin);
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fputc('\n', stderr);
    }
    if (line == NULL)
        return NULL;
    buf[strcspn(buf, "\r\n")] = '\0';
    if (buf[0] == '\0')
        return NULL;
    return xstrdup(buf);
}

static void
wipe_free(char *s)
{
    if (s != NULL) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

/* GET /api/users/U into 'a'; 0 if it exists, else the exit code (67 for a
 * missing user). */
static int
get_user(struct ctl *c, const char *user, struct ctl_answer *a)
{
    char *path = ctl_path("/api/users/%s", user);
    int rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, a);

    free(path);
    if (rc != 0)
        return rc;
    if (a->status == 404) {
        ctl_answer_clear(a);
        return ctl_fail(EX_NOUSER, "User \"%s\" does not exist", user);
    }
    if (a->status != 200 || !json_is_object(a->json)) {
        rc = ctl_unexpected(a, "reading the user");
        ctl_answer_clear(a);
        return rc;
    }
    return 0;
}

/* PUT /api/users/U with 'body'; 0 or the exit code. */
static int
put_user(struct ctl *c, const char *user, const json_t *body)
{
    struct ctl_answer a;
    char *path = ctl_path("/api/users/%s", user);
    int rc = ctl_call(c, EVHTTP_REQ_PUT, path, body, &a);

    free(path);
    if (rc != 0)
        return rc;
    if (a.status != 201 && a.status != 204 && a.status != 200)
        rc = ctl_unexpected(&a, "writing the user");
    ctl_answer_clear(&a);
    return rc;
}

/* The API takes tags as a comma-separated string ("" for none). */
static json_t *
tags_string(const json_t *tags)
{
    json_t *arr = ctl_tags_array(tags);
    char *s = NULL;
    size_t len = 0, i;
    json_t *t;

    json_array_foreach(arr, i, t) {
        if (!json_is_string(t))
            continue;
        size_t n = json_string_length(t);
        char *ns = realloc(s, len + n + 2);
        if (ns == NULL)
            xalloc_fail();
        s = ns;
        if (len)
            s[len++] = ',';
        memcpy(s + len, json_string_value(t), n);
        len += n;
    }
    json_t *out = json_stringn(s ? s : "", len);
    free(s);
    json_decref(arr);
    return out;
}

int
cmd_add_user(struct ctl *c)
{
    const char *user = c->argv[0];
    char *password = c->argc > 1 ? xstrdup(c->argv[1]) : read_password();
    struct ctl_answer a;
    int rc;

    if (password == NULL)
        return ctl_fail(EX_DATAERR, "Password is not provided via argument "
                        "or stdin");
    ctl_banner(c, "Adding user \"%s\" ...", user);
    char *path = ctl_path("/api/users/%s", user);
    rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    free(path);
    if (rc != 0)
        goto out;
    if (a.status == 200) {
        rc = ctl_fail(EX_SOFTWARE, "User \"%s\" already exists", user);
    } else if (a.status != 404) {
        rc = ctl_unexpected(&a, "looking the user up");
    } else {
        json_t *body = json_pack("{s:s, s:s}", "password", password,
                                 "tags", "");
        rc = put_user(c, user, body);
        json_decref(body);
        if (rc == 0)
            ctl_info(c, "Done. Don't forget to grant the user permissions "
                     "to some virtual hosts! See 'roostctl help "
                     "set_permissions' to learn more.");
    }
    ctl_answer_clear(&a);
out:
    wipe_free(password);
    return rc;
}

int
cmd_delete_user(struct ctl *c)
{
    const char *user = c->argv[0];
    char missing[600];

    ctl_banner(c, "Deleting user \"%s\" ...", user);
    snprintf(missing, sizeof(missing), "User \"%s\" does not exist", user);
    return ctl_delete(c, ctl_path("/api/users/%s", user), NULL, EX_NOUSER,
                      missing, "deleting the user");
}

int
cmd_change_password(struct ctl *c)
{
    const char *user = c->argv[0];
    struct ctl_answer a;
    int rc;

    ctl_banner(c, "Changing password for user \"%s\" ...", user);
    char *password = c->argc > 1 ? xstrdup(c->argv[1]) : read_password();
    /* rabbitmqctl gives 70 here, where add_user gives 65 */
    if (password == NULL)
        return ctl_fail(EX_SOFTWARE, "Password is not provided via argument "
                        "or stdin");
    rc = get_user(c, user, &a);
    if (rc == 0) {
        json_t *body = json_object();
        json_object_set_new(body, "password", json_string(password));
        json_object_set_new(body, "tags",
                            tags_string(json_object_get(a.json, "tags")));
        rc = put_user(c, user, body);
        json_decref(body);
        ctl_answer_clear(&a);
    }
    wipe_free(password);
    return rc;
}

int
cmd_set_user_tags(struct ctl *c)
{
    const char *user = c->argv[0];
    struct ctl_answer a;
    json_t *tags = json_array();

    for (int i = 1; i < c->argc; i++)
        json_array_append_new(tags, json_string(c->argv[i]));
    char *shown = NULL;
    size_t len = 0, cap = 0;
    ctl_render(tags, &shown, &len, &cap);
    ctl_banner(c, "Setting tags for user \"%s\" to %s ...", user, shown);
    free(shown);

    int rc = get_user(c, user, &a);
    if (rc == 0) {
        /* Keep the password: a PUT without one clears it. */
        json_t *body = json_object();
        const json_t *hash = json_object_get(a.json, "password_hash");
        const json_t *alg = json_object_get(a.json, "hashing_algorithm");
        if (json_is_string(hash))
            json_object_set(body, "password_hash", (json_t *)hash);
        if (json_is_string(hash) && json_is_string(alg))
            json_object_set(body, "hashing_algorithm", (json_t *)alg);
        json_object_set_new(body, "tags", tags_string(tags));
        rc = put_user(c, user, body);
        json_decref(body);
        ctl_answer_clear(&a);
    }
    json_decref(tags);
    return rc;
}

int
cmd_list_users(struct ctl *c)
{
    static const char *const cols[] = { "user", "tags" };
    struct ctl_answer a;
    size_t i;
    json_t *u;

    ctl_banner(c, "Listing users ...");
    int rc = ctl_call(c, EVHTTP_REQ_GET, "/api/users", NULL, &a);
    if (rc != 0)
        return rc;
    if (a.status != 200 || !json_is_array(a.json)) {
        rc = ctl_unexpected(&a, "listing users");
        ctl_answer_clear(&a);
        return rc;
    }
    json_t *rows = json_array();
    json_array_foreach(a.json, i, u) {
        json_array_append_new(rows, json_pack("{s:O?, s:o}",
            "user", json_object_get(u, "name"),
            "tags", ctl_tags_array(json_object_get(u, "tags"))));
    }
    ctl_table(c, cols, 2, rows);
    json_decref(rows);
    ctl_answer_clear(&a);
    return 0;
}
