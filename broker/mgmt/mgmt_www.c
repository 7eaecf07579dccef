/*
 * SPDX-License-Identifier: Apache-2.0
 * The web page's static files (www/, built into roostd as www_files.c)
 * on the management listener: every path outside /api/ is one of them or
 * 404. They need no login: the page asks for the user's name and
 * password itself and sends them with each API call.
 *
 * The files change only with roostd, so each carries an ETag (its CRC
 * and length) and "Cache-Control: no-cache": a browser keeps its copy and
 * asks each time, and the answer is a 304 without a body until roostd
 * is upgraded. The security headers (mgmt_guard.c) are already set.
 */
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "broker/mgmt/mgmt_int.h"
#include "broker/mgmt/www.h"

static const struct www_file *
find_file(const char *path)
{
    if (strcmp(path, "/") == 0)
        path = "/index.html";
    for (size_t i = 0; i < www_nfiles; i++)
        if (strcmp(www_files[i].path, path) == 0)
            return &www_files[i];
    return NULL;
}

/* Whether the request's If-None-Match names 'etag' ("*" or a list). */
static bool
is_unchanged(struct evhttp_request *ev, const char *etag)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(ev),
                                       "If-None-Match");
    size_t n = strlen(etag);

    if (h == NULL)
        return false;
    if (strcmp(h, "*") == 0)
        return true;
    for (const char *p = h; (p = strstr(p, etag)) != NULL; p += n)
        if ((p == h || p[-1] == ' ' || p[-1] == ',' || p[-1] == '/') &&
            (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
            return true;
    return false;
}

void
mgmt_www(struct mgmt_req *r, const char *path)
{
    const struct www_file *f = find_file(path != NULL ? path : "");

    if (f == NULL) {
        mgmt_not_found(r);
        return;
    }
    if (r->method == EVHTTP_REQ_OPTIONS || (r->method != EVHTTP_REQ_GET &&
                                            r->method != EVHTTP_REQ_HEAD)) {
        mgmt_add_header(r, "Allow", "HEAD, GET, OPTIONS");
        mgmt_add_header(r, "Content-Length", "0");
        mgmt_answer(r, r->method == EVHTTP_REQ_OPTIONS ? 200 : 405, NULL);
        return;
    }
    mgmt_add_header(r, "ETag", f->etag);
    mgmt_add_header(r, "Cache-Control", "no-cache");
    if (is_unchanged(r->ev, f->etag)) {
        mgmt_answer(r, 304, NULL);
        return;
    }
    mgmt_add_header(r, "Content-Type", f->type);
    struct evbuffer *body = evbuffer_new();
    /* The bytes are constant for the life of the program: lent, not
     * copied. */
    evbuffer_add_reference(body, f->data, f->len, NULL, NULL);
    mgmt_answer(r, 200, body);
    evbuffer_free(body);
}
