/*
 * SPDX-License-Identifier: Apache-2.0
 * The management API client (see http.h). Before evhttp sees the host,
 * we resolve it ourselves and try each address with a plain connect():
 * "localhost" is often ::1 first while the broker listens on 127.0.0.1
 * only, and evhttp would try just the first address and report a refused
 * connection as a bare EOF. The address that accepted is the one evhttp
 * then uses, so a refused or unreachable broker is reported with its
 * errno, and an HTTP failure always means the broker answered badly.
 */
#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "xalloc.h"

/* Headers of a management API answer are a few hundred bytes. */
#define HTTP_MAX_HEADERS (64 * 1024)

struct http_client {
    struct event_base *base;
    struct evhttp_connection *conn;  /* NULL until the first request */
    char *host;                      /* as the user gave it */
    int port;
    char *host_header;               /* "host:port", "[v6]:port" */
    char *url;                       /* "http://host:port" */
    char *authorization;             /* "Basic ..." */
    int timeout_s;
    size_t max_response;
};

/* One request in flight; lives on http_request()'s stack. */
struct exchange {
    struct http_response *out;
    size_t max_response;
    enum http_error err;
    const char *why;                 /* for err, a static string */
    bool done;
};

static char *
base64(const char *in, size_t len)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)in;
    char *out = xmalloc((len + 2) / 3 * 4 + 1);
    char *o = out;

    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < len)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < len)
            v |= p[i + 2];
        *o++ = tab[(v >> 18) & 63];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < len ? tab[(v >> 6) & 63] : '=';
        *o++ = i + 2 < len ? tab[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

struct http_client *
http_client_new(const char *host, int port, const char *user,
                const char *password, int timeout_s, size_t max_response)
{
    struct http_client *hc = xmalloc(sizeof(*hc));
    bool v6 = strchr(host, ':') != NULL;

    memset(hc, 0, sizeof(*hc));
    hc->base = event_base_new();
    if (hc->base == NULL)
        xalloc_fail();
    hc->host = xstrdup(host);
    hc->port = port;
    hc->host_header = xasprintf(v6 ? "[%s]:%d" : "%s:%d", host, port);
    hc->url = xasprintf("http://%s", hc->host_header);
    char *cred = xasprintf("%s:%s", user, password);
    char *b64 = base64(cred, strlen(cred));
    hc->authorization = xasprintf("Basic %s", b64);
    memset(cred, 0, strlen(cred));
    free(cred);
    free(b64);
    hc->timeout_s = timeout_s;
    hc->max_response = max_response;
    return hc;
}

void
http_client_free(struct http_client *hc)
{
    if (hc == NULL)
        return;
    if (hc->conn != NULL)
        evhttp_connection_free(hc->conn);
    event_base_free(hc->base);
    free(hc->host);
    free(hc->host_header);
    free(hc->url);
    memset(hc->authorization, 0, strlen(hc->authorization));
    free(hc->authorization);
    free(hc);
}

const char *
http_client_url(const struct http_client *hc)
{
    return hc->url;
}

static long
ms_left(const struct timespec *deadline)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (deadline->tv_sec - now.tv_sec) * 1000 +
              (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return ms > 0 ? ms : 0;
}

/*
 * Try one address with a non-blocking connect; 0 if it accepted, else -1
 * with errno set (ETIMEDOUT when the deadline passed).
 */
static int
try_connect(const struct addrinfo *ai, const struct timespec *deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd == -1)
        return -1;
    int rc = -1;
    int flags = fcntl(fd, F_GETFL);
    if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1)
        goto out;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        rc = 0;
        goto out;
    }
    if (errno != EINPROGRESS)
        goto out;
    struct pollfd pfd = { .fd = fd, .events = POLLOUT };
    int n;
    do {
        n = poll(&pfd, 1, (int)ms_left(deadline));
    } while (n == -1 && errno == EINTR);
    if (n == 0) {
        errno = ETIMEDOUT;
        goto out;
    }
    if (n == -1)
        goto out;
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == -1)
        goto out;
    if (soerr != 0) {
        errno = soerr;
        goto out;
    }
    rc = 0;
out:;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* Find an address of the host that accepts, and open evhttp on it. */
static int
http_connect(struct http_client *hc, char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
    struct addrinfo *res;
    char port[16];
    struct timespec deadline;

    snprintf(port, sizeof(port), "%d", hc->port);
    int g = getaddrinfo(hc->host, port, &hints, &res);
    if (g != 0) {
        snprintf(err, errlen, "cannot resolve host '%s': %s", hc->host,
                 gai_strerror(g));
        return -1;
    }
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += hc->timeout_s;
    char addr[NI_MAXHOST] = "";
    int last = 0;
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        if (try_connect(ai, &deadline) == 0) {
            if (getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr),
                            NULL, 0, NI_NUMERICHOST) != 0)
                addr[0] = '\0';
            break;
        }
        last = errno;
        if (ms_left(&deadline) == 0)
            break;
    }
    freeaddrinfo(res);
    if (addr[0] == '\0') {
        snprintf(err, errlen, "cannot connect to %s:%d: %s", hc->host,
                 hc->port, last ? strerror(last) : "no usable address");
        return -1;
    }
    hc->conn = evhttp_connection_base_new(hc->base, NULL, addr,
                                          (unsigned short)hc->port);
    if (hc->conn == NULL)
        xalloc_fail();
    evhttp_connection_set_timeout(hc->conn, hc->timeout_s);
    evhttp_connection_set_retries(hc->conn, 0);
    evhttp_connection_set_max_headers_size(hc->conn, HTTP_MAX_HEADERS);
    evhttp_connection_set_max_body_size(hc->conn,
                                        (ev_ssize_t)hc->max_response);
    return 0;
}

static void
on_error(enum evhttp_request_error e, void *arg)
{
    struct exchange *x = arg;

    if (x->done)
        return;
    switch (e) {
    case EVREQ_HTTP_TIMEOUT:
        x->err = HTTPC_ERR_TIMEOUT;
        x->why = "timed out";
        break;
    case EVREQ_HTTP_DATA_TOO_LONG:
        x->err = HTTPC_ERR_TOO_LARGE;
        x->why = "the answer is over the size limit";
        break;
    case EVREQ_HTTP_EOF:
        x->err = HTTPC_ERR_PROTOCOL;
        x->why = "the connection was closed before a complete answer";
        break;
    case EVREQ_HTTP_INVALID_HEADER:
        x->err = HTTPC_ERR_PROTOCOL;
        x->why = "the answer is not valid HTTP";
        break;
    default:
        x->err = HTTPC_ERR_PROTOCOL;
        x->why = "reading or sending failed";
        break;
    }
}

static void
on_done(struct evhttp_request *req, void *arg)
{
    struct exchange *x = arg;

    if (x->done)
        return;
    x->done = true;
    if (req == NULL || x->err != HTTPC_OK)
        goto failed;
    int status = evhttp_request_get_response_code(req);
    if (status == 0) {
        x->err = HTTPC_ERR_PROTOCOL;
        x->why = "no answer";
        return;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    if (len > x->max_response) {
        x->err = HTTPC_ERR_TOO_LARGE;
        x->why = "the answer is over the size limit";
        return;
    }
    x->out->status = status;
    x->out->len = len;
    x->out->body = xmalloc(len + 1);
    evbuffer_remove(in, x->out->body, len);
    x->out->body[len] = '\0';
    return;
failed:
    if (x->err == HTTPC_OK) {
        x->err = HTTPC_ERR_PROTOCOL;
        x->why = "the request failed";
    }
}

/* The whole exchange has a deadline, not only each read and write. */
static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct exchange *x = arg;

    (void)fd;
    (void)what;
    if (x->done)
        return;
    x->done = true;
    x->err = HTTPC_ERR_TIMEOUT;
    x->why = "timed out";
}

enum http_error
http_request(struct http_client *hc, enum evhttp_cmd_type method,
             const char *path, const char *body, size_t len,
             const char *const *headers, struct http_response *out,
             char *err, size_t errlen)
{
    struct exchange x = { .out = out, .max_response = hc->max_response };

    memset(out, 0, sizeof(*out));
    if (hc->conn == NULL && http_connect(hc, err, errlen) == -1)
        return HTTPC_ERR_CONNECT;

    struct evhttp_request *req = evhttp_request_new(on_done, &x);
    if (req == NULL)
        xalloc_fail();
    evhttp_request_set_error_cb(req, on_error);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", hc->host_header);
    evhttp_add_header(h, "Authorization", hc->authorization);
    evhttp_add_header(h, "User-Agent", "roostctl");
    bool accept = false;
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i += 2) {
        evhttp_add_header(h, headers[i], headers[i + 1]);
        accept = accept || evutil_ascii_strcasecmp(headers[i], "Accept") == 0;
    }
    if (!accept)
        evhttp_add_header(h, "Accept", "application/json");
    if (body != NULL) {
        char n[32];
        snprintf(n, sizeof(n), "%zu", len);
        evhttp_add_header(h, "Content-Type", "application/json");
        evhttp_add_header(h, "Content-Length", n);
        evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
    } else if (method == EVHTTP_REQ_PUT || method == EVHTTP_REQ_POST) {
        evhttp_add_header(h, "Content-Length", "0");
    }
    /* On failure evhttp has freed the request. */
    if (evhttp_make_request(hc->conn, req, method, path) == -1) {
        snprintf(err, errlen, "cannot send %s", path);
        return HTTPC_ERR_PROTOCOL;
    }

    struct timeval tv = { .tv_sec = hc->timeout_s };
    struct event *deadline = evtimer_new(hc->base, on_deadline, &x);
    if (deadline == NULL)
        xalloc_fail();
    evtimer_add(deadline, &tv);
    while (!x.done)
        event_base_loop(hc->base, EVLOOP_ONCE);
    event_free(deadline);

    if (x.err == HTTPC_OK)
        return HTTPC_OK;
    /* The request may still be queued: dropping the connection frees it
     * while 'x' is alive, and 'x.done' makes its callbacks no-ops. */
    evhttp_connection_free(hc->conn);
    hc->conn = NULL;
    http_response_clear(out);
    if (x.err == HTTPC_ERR_TIMEOUT)
        snprintf(err, errlen, "no answer from %s%s within %d seconds",
                 hc->url, path, hc->timeout_s);
    else if (x.err == HTTPC_ERR_TOO_LARGE)
        snprintf(err, errlen, "the answer to %s%s is over the limit of "
                 "%zu bytes", hc->url, path, hc->max_response);
    else
        snprintf(err, errlen, "%s%s: %s", hc->url, path, x.why);
    return x.err;
}

void
http_response_clear(struct http_response *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
    r->status = 0;
}
