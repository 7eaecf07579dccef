/*
 * SPDX-License-Identifier: Apache-2.0
 * A blocking HTTP/1.1 client for one management API endpoint, on
 * libevent's evhttp: one request at a time over one kept-alive
 * connection, with basic authentication, a deadline per request and a
 * bound on the size of an answer. roostctl runs one command and exits, so
 * blocking is what it wants.
 */
#ifndef ROOSTCTL_HTTP_H
#define ROOSTCTL_HTTP_H

#include <stddef.h>

#include <event2/http.h>

struct http_client;

enum http_error {
    HTTPC_OK,
    HTTPC_ERR_CONNECT,   /* name not resolved, or no address accepted */
    HTTPC_ERR_TIMEOUT,   /* no complete answer before the deadline */
    HTTPC_ERR_TOO_LARGE, /* the answer is over the size bound */
    HTTPC_ERR_PROTOCOL   /* closed early, or not HTTP */
};

struct http_response {
    int status;
    char *body;         /* NUL-terminated; owned, see http_response_clear */
    size_t len;
};

/*
 * A client for http://host:port/ (nothing is sent yet). 'host' and the
 * credentials are copied. Every request must be answered within
 * 'timeout_s' seconds, and an answer larger than 'max_response' bytes is
 * refused. Free it with http_client_free().
 */
struct http_client *http_client_new(const char *host, int port,
                                    const char *user, const char *password,
                                    int timeout_s, size_t max_response);
void http_client_free(struct http_client *hc);

/* "http://host:port", for messages; borrowed from 'hc'. */
const char *http_client_url(const struct http_client *hc);

/*
 * Send one request ('body' of 'len' bytes as application/json, or NULL;
 * 'headers' NULL or name/value pairs ending with a NULL name, borrowed)
 * and wait for its answer. The first request connects. On HTTPC_OK, 'out'
 * holds the answer, whatever its status, until http_response_clear();
 * otherwise 'err' says what went wrong, in words.
 */
enum http_error http_request(struct http_client *hc,
                             enum evhttp_cmd_type method, const char *path,
                             const char *body, size_t len,
                             const char *const *headers,
                             struct http_response *out,
                             char *err, size_t errlen);
void http_response_clear(struct http_response *r);

#endif
