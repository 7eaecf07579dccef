/*
 * SPDX-License-Identifier: Apache-2.0
 * The helpers every command uses (see ctl.h): calling the API and turning
 * its failures into rabbitmqctl's exit codes, building percent-encoded
 * paths, and printing banners, errors and tables the way rabbitmqctl
 * prints them.
 */
#include "ctl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "xalloc.h"

void
ctl_answer_clear(struct ctl_answer *a)
{
    json_decref(a->json);
    a->json = NULL;
    a->status = 0;
}

static void
print_banner(struct ctl *c)
{
    if (c->banner == NULL)
        return;
    if (!c->quiet && !c->json) {
        fputs(c->banner, stdout);
        fputc('\n', stdout);
    }
    free(c->banner);
    c->banner = NULL;
}

void
ctl_banner(struct ctl *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    free(c->banner);
    c->banner = xmalloc((size_t)(n > 0 ? n : 0) + 1);
    va_start(ap, fmt);
    vsnprintf(c->banner, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
    va_end(ap);
    if (c->contacted)
        print_banner(c);
}

void
ctl_info(const struct ctl *c, const char *fmt, ...)
{
    va_list ap;

    if (c->quiet || c->json)
        return;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

int
ctl_fail(int code, const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fputs("Error:\n", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

/*
 * RabbitMQ encodes Erlang strings in error reasons as lists of character
 * codes ("(" is [40]): show those as strings. Returns a new reference.
 */
static json_t *
readable(const json_t *v)
{
    size_t i;
    json_t *e;
    bool chars = json_array_size(v) > 0;

    if (!json_is_array(v))
        return json_incref((json_t *)v);
    json_array_foreach(v, i, e) {
        json_int_t ch = json_is_integer(e) ? json_integer_value(e) : 0;
        chars = chars && ch >= 32 && ch < 127;
    }
    if (chars) {
        char *s = xmalloc(json_array_size(v) + 1);
        json_array_foreach(v, i, e) s[i] = (char)json_integer_value(e);
        json_t *out = json_stringn(s, json_array_size(v));
        free(s);
        return out;
    }
    json_t *out = json_array();
    json_array_foreach(v, i, e) json_array_append_new(out, readable(e));
    return out;
}

const char *
ctl_reason(const struct ctl_answer *a, char *buf, size_t len)
{
    const json_t *r = NULL;

    if (json_is_object(a->json)) {
        r = json_object_get(a->json, "reason");
        if (r == NULL)
            r = json_object_get(a->json, "error");
    }
    if (r == NULL)
        return "";
    if (json_is_string(r))
        return json_string_value(r);
    json_t *shown = readable(r);
    char *s = json_dumps(shown, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, len, "%s", s ? s : "");
    free(s);
    json_decref(shown);
    return buf;
}

int
ctl_unexpected(const struct ctl_answer *a, const char *what)
{
    char buf[512];
    const char *reason = ctl_reason(a, buf, sizeof(buf));

    return ctl_fail(EX_UNAVAILABLE, "%s: the management API answered "
                    "HTTP %d%s%s", what, a->status, *reason ? ": " : "",
                    reason);
}

int
ctl_delete(struct ctl *c, char *path, const char *const *headers,
           int missing_code, const char *missing, const char *what)
{
    struct ctl_answer a;
    int rc = ctl_call_raw(c, EVHTTP_REQ_DELETE, path, NULL, 0, headers, &a,
                          NULL, NULL);
    free(path);
    if (rc != 0)
        return rc;
    if (a.status == 404)
        rc = ctl_fail(missing_code, "%s", missing);
    else if (a.status != 204 && a.status != 200)
        rc = ctl_unexpected(&a, what);
    ctl_answer_clear(&a);
    return rc;
}

int
ctl_call_raw(struct ctl *c, enum evhttp_cmd_type method, const char *path,
             const char *body, size_t len, const char *const *headers,
             struct ctl_answer *a, char **raw, size_t *rawlen)
{
    struct http_response r;
    char err[512];

    memset(a, 0, sizeof(*a));
    enum http_error e = http_request(c->http, method, path, body, len,
                                     headers, &r, err, sizeof(err));
    switch (e) {
    case HTTPC_OK:
        break;
    case HTTPC_ERR_CONNECT:
        fflush(stdout);
        fprintf(stderr, "Error: unable to perform an operation on the "
                "management API at %s/: %s.\n\n"
                "Is the broker running, with its management API on that "
                "port?\n(roostd: management.tcp.port; roostctl: --host, "
                "--port or ROOSTCTL_HOST, ROOSTCTL_PORT)\n",
                http_client_url(c->http), err);
        return EX_UNAVAILABLE;
    case HTTPC_ERR_TIMEOUT:
        fflush(stdout);
        fprintf(stderr, "Error: operation timed out: %s (see --timeout)\n",
                err);
        return EX_TEMPFAIL;
    default:
        fflush(stdout);
        fprintf(stderr, "Error: %s\n", err);
        return EX_UNAVAILABLE;
    }
    a->status = r.status;
    if (r.len > 0)
        a->json = json_loadb(r.body, r.len, JSON_DECODE_ANY, NULL);
    if (a->status == 401 || a->status == 403) {
        char buf[512];
        const char *reason = ctl_reason(a, buf, sizeof(buf));
        fflush(stdout);
        fprintf(stderr, "Error: the management API at %s/ refused the "
                "credentials (HTTP %d%s%s).\n(roostctl: --username, "
                "--password or ROOSTCTL_USER, ROOSTCTL_PASSWORD; the user "
                "needs the administrator tag)\n",
                http_client_url(c->http), a->status, *reason ? ": " : "",
                reason);
        ctl_answer_clear(a);
        http_response_clear(&r);
        return EX_UNAVAILABLE;
    }
    c->contacted = true;
    print_banner(c);
    if (raw != NULL) {
        *raw = r.body;
        *rawlen = r.len;
        r.body = NULL;
    }
    http_response_clear(&r);
    return 0;
}

int
ctl_call(struct ctl *c, enum evhttp_cmd_type method, const char *path,
         const json_t *body, struct ctl_answer *a)
{
    char *s = NULL;

    if (body != NULL) {
        s = json_dumps(body, JSON_COMPACT);
        if (s == NULL)
            xalloc_fail();
    }
    int rc = ctl_call_raw(c, method, path, s, s ? strlen(s) : 0, NULL, a,
                          NULL, NULL);
    free(s);
    return rc;
}

/* RFC 3986 §2.3: only unreserved characters stay as they are. */
static void
append_segment(char **out, size_t *len, size_t *cap, const char *seg)
{
    static const char hex[] = "0123456789ABCDEF";

    for (const unsigned char *p = (const unsigned char *)seg; *p; p++) {
        if (*len + 4 > *cap) {
            *cap = *cap * 2 + 16;
            char *n = realloc(*out, *cap);
            if (n == NULL)
                xalloc_fail();
            *out = n;
        }
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
            (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
            *p == '_' || *p == '~') {
            (*out)[(*len)++] = (char)*p;
        } else {
            (*out)[(*len)++] = '%';
            (*out)[(*len)++] = hex[*p >> 4];
            (*out)[(*len)++] = hex[*p & 15];
        }
    }
    (*out)[*len] = '\0';
}

void
ctl_append(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        char *p = realloc(*out, *cap);
        if (p == NULL)
            xalloc_fail();
        *out = p;
    }
    memcpy(*out + *len, s, n);
    *len += n;
    (*out)[*len] = '\0';
}

char *
ctl_path(const char *fmt, ...)
{
    char *out = NULL;
    size_t len = 0, cap = 0;
    va_list ap;

    ctl_append(&out, &len, &cap, "", 0);
    va_start(ap, fmt);
    for (const char *p = fmt; *p; p++) {
        const char *pct = strchr(p, '%');
        if (pct == NULL) {
            ctl_append(&out, &len, &cap, p, strlen(p));
            break;
        }
        ctl_append(&out, &len, &cap, p, (size_t)(pct - p));
        if (pct[1] != 's') {
            fputs("roostctl: bad path format\n", stderr);
            abort();
        }
        append_segment(&out, &len, &cap, va_arg(ap, const char *));
        p = pct + 1;
    }
    va_end(ap);
    return out;
}

/* A quoted string as Erlang prints one: " and \\ escaped. */
static void
append_quoted(char **out, size_t *len, size_t *cap, const char *s, size_t n)
{
    ctl_append(out, len, cap, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            ctl_append(out, len, cap, "\\", 1);
        ctl_append(out, len, cap, s + i, 1);
    }
    ctl_append(out, len, cap, "\"", 1);
}

/*
 * rabbitmqctl's two renderings: of its own values ('term' false: strings
 * bare, "[a, b]", "[{k, v}]") and of an AMQP table's ('term' true:
 * strings quoted, "[a,b]", "[{"k",v}]", no spaces).
 */
static void
render(const json_t *v, bool term, char **out, size_t *len, size_t *cap)
{
    char num[64];
    const char *key;
    const char *sep = term ? "," : ", ";
    json_t *val;
    size_t i;
    bool first = true;

    switch (json_typeof(v)) {
    case JSON_STRING:
        if (term)
            append_quoted(out, len, cap, json_string_value(v),
                          json_string_length(v));
        else
            ctl_append(out, len, cap, json_string_value(v),
                       json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
        ctl_append(out, len, cap, num, strlen(num));
        break;
    case JSON_REAL:
        /* As Erlang prints a float: the fewest digits that read back
         * as the same number (consumer_utilisation). */
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(num, sizeof(num), "%.*g", prec, json_real_value(v));
            if (strtod(num, NULL) == json_real_value(v))
                break;
        }
        ctl_append(out, len, cap, num, strlen(num));
        break;
    case JSON_TRUE:
        ctl_append(out, len, cap, "true", 4);
        break;
    case JSON_FALSE:
        ctl_append(out, len, cap, "false", 5);
        break;
    case JSON_NULL:
        ctl_append(out, len, cap, "undefined", 9);
        break;
    case JSON_ARRAY:
        ctl_append(out, len, cap, "[", 1);
        json_array_foreach(v, i, val) {
            if (!first)
                ctl_append(out, len, cap, sep, strlen(sep));
            first = false;
            render(val, term, out, len, cap);
        }
        ctl_append(out, len, cap, "]", 1);
        break;
    case JSON_OBJECT:
        /* An Erlang proplist, as rabbitmqctl shows cluster_state. */
        ctl_append(out, len, cap, "[", 1);
        json_object_foreach((json_t *)v, key, val) {
            if (!first)
                ctl_append(out, len, cap, sep, strlen(sep));
            first = false;
            ctl_append(out, len, cap, "{", 1);
            if (term)
                append_quoted(out, len, cap, key, strlen(key));
            else
                ctl_append(out, len, cap, key, strlen(key));
            ctl_append(out, len, cap, sep, strlen(sep));
            render(val, term, out, len, cap);
            ctl_append(out, len, cap, "}", 1);
        }
        ctl_append(out, len, cap, "]", 1);
        break;
    }
}

void
ctl_render(const json_t *v, char **out, size_t *len, size_t *cap)
{
    render(v, false, out, len, cap);
}

void
ctl_render_term(const json_t *v, char **out, size_t *len, size_t *cap)
{
    render(v, true, out, len, cap);
}

/*
 * rabbitmqctl's JSON formatter: "[", then one object a line with the
 * separating comma leading the next line, then "]".
 */
static void
table_json(const char *const *cols, size_t ncols, const json_t *rows)
{
    size_t i;
    json_t *row;

    if (json_array_size(rows) == 0) {
        puts("[]");
        return;
    }
    puts("[");
    json_array_foreach(rows, i, row) {
        json_t *o = json_object();
        for (size_t k = 0; k < ncols; k++) {
            json_t *v = json_object_get(row, cols[k]);
            json_object_set(o, cols[k], v ? v : json_null());
        }
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s%s\n", i ? "," : "", s ? s : "{}");
        free(s);
        json_decref(o);
    }
    puts("]");
}

void
ctl_table(const struct ctl *c, const char *const *cols, size_t ncols,
          const json_t *rows)
{
    size_t i;
    json_t *row;
    char *line = NULL;
    size_t len, cap = 0;

    if (c->json) {
        table_json(cols, ncols, rows);
        return;
    }
    /* rabbitmqctl prints an empty line, not even the header, for no rows */
    if (json_array_size(rows) == 0) {
        putchar('\n');
        return;
    }
    if (!c->no_headers) {
        for (size_t k = 0; k < ncols; k++)
            printf("%s%s", k ? "\t" : "", cols[k]);
        putchar('\n');
    }
    json_array_foreach(rows, i, row) {
        len = 0;
        ctl_append(&line, &len, &cap, "", 0);
        for (size_t k = 0; k < ncols; k++) {
            const json_t *v = json_object_get(row, cols[k]);
            if (k)
                ctl_append(&line, &len, &cap, "\t", 1);
            if (v != NULL)
                ctl_render(v, &line, &len, &cap);
        }
        puts(line);
    }
    free(line);
}

json_t *
ctl_tags_array(const json_t *tags)
{
    json_t *out = json_array();

    if (json_is_array(tags)) {
        size_t i;
        json_t *t;
        json_array_foreach(tags, i, t) json_array_append(out, t);
    } else if (json_is_string(tags)) {
        const char *s = json_string_value(tags);
        while (*s) {
            const char *comma = strchr(s, ',');
            size_t n = comma ? (size_t)(comma - s) : strlen(s);
            if (n > 0)
                json_array_append_new(out, json_stringn(s, n));
            s += n + (comma != NULL);
        }
    }
    return out;
}
