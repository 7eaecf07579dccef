/*
 * SPDX-License-Identifier: Apache-2.0
 * What keeps a browser from being turned against the management listener
 * (the API and the web page alike): checked for every request before its
 * path is looked at.
 *
 * - Every answer carries a Content-Security-Policy (the page's own files
 *   only, no inline script, no framing), X-Content-Type-Options: nosniff,
 *   X-Frame-Options: DENY, and the referrer and resource policies.
 * - DNS rebinding: a page on evil.example whose name is made to resolve
 *   to 127.0.0.1 reaches the listener with "Host: evil.example". The Host
 *   must be one of the listener's own names: localhost, the machine's
 *   host name, an IP address of the listener (loopback, the bound
 *   address, the address the connection came in on) or a name in
 *   management.allowed_hosts. Else 421 with a JSON error. An IP address
 *   is never a rebinding (a page whose origin is that address is served
 *   by that address), so only names need listing. A request without a
 *   Host (HTTP/1.0 clients; no browser) passes.
 * - Cross-site requests: a write (anything but GET and HEAD) whose Origin
 *   is not this server's (the scheme, and the Host it was sent to) is
 *   refused with 403 before it is routed. Browsers send Origin with every
 *   cross-origin write; other clients send none.
 *
 * The rest of the rule "writes need the Authorization header and JSON" is
 * mgmt.c's: every route asks for basic auth (no cookie is ever read), and
 * a write with a body must say application/json (415), which an HTML
 * form cannot send. Refusals are logged, at most once a minute, so that
 * a page hammering the listener cannot fill the log.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "broker/core/broker.h"
#include "broker/lib/config.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/mgmt/mgmt_int.h"

#define HOST_MAX 256
#define LOG_EVERY_MS 60000

/* One policy for every answer: JSON needs none, and one string is
 * simpler to check than two. */
#define CSP "default-src 'self'; script-src 'self'; style-src 'self'; " \
            "img-src 'self'; connect-src 'self'; object-src 'none'; "   \
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

static char hostname[HOST_MAX];     /* gethostname() */
static size_t short_len;            /* its first label's length */
static uint64_t last_logged;

void
mgmt_guard_init(void)
{
    if (gethostname(hostname, sizeof(hostname)) != 0)
        hostname[0] = '\0';
    hostname[sizeof(hostname) - 1] = '\0';
    short_len = strcspn(hostname, ".");
}

/* ---- parsing "name", "name:port", "[v6]", "[v6]:port" ---- */

struct authority {
    char host[HOST_MAX];        /* without brackets or a trailing dot */
    bool v6;                    /* it was in brackets */
    int port;                   /* -1: not given */
};

/* 0, or -1 if 'a' is not a host with an optional port. */
static int
parse_authority(const char *a, struct authority *out)
{
    const char *end;
    size_t n;

    out->v6 = a[0] == '[';
    out->port = -1;
    if (out->v6) {
        end = strchr(a, ']');
        if (end == NULL)
            return -1;
        a++;
        n = (size_t)(end - a);
        end++;
    } else {
        n = strcspn(a, ":");
        end = a + n;
    }
    if (n == 0 || n >= sizeof(out->host))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)a[i];
        if (!isalnum(c) && strchr(out->v6 ? ":.%" : ".-_", c) == NULL)
            return -1;
    }
    memcpy(out->host, a, n);
    out->host[n] = '\0';
    if (!out->v6 && n > 1 && out->host[n - 1] == '.')
        out->host[n - 1] = '\0';
    if (*end == ':') {
        char *stop;
        long p = strtol(end + 1, &stop, 10);
        if (end[1] == '\0' || !isdigit((unsigned char)end[1]) ||
            *stop != '\0' || p > 65535)
            return -1;
        out->port = (int)p;
    } else if (*end != '\0') {
        return -1;
    }
    return 0;
}

/* ---- Host ---- */

/* 'host' as an address (IPv4-mapped IPv6 read as IPv4) into 'out'
 * (16 bytes); its length, 0 if it is not an address. */
static size_t
parse_ip(const char *host, bool v6, uint8_t *out)
{
    struct in6_addr a6;
    if (!v6)
        return inet_pton(AF_INET, host, out) == 1 ? 4 : 0;
    if (inet_pton(AF_INET6, host, &a6) != 1)
        return 0;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
        memcpy(out, &a6.s6_addr[12], 4);
        return 4;
    }
    memcpy(out, &a6, 16);
    return 16;
}

/* The address the connection came in on, as parse_ip gives it. */
static size_t
local_ip(struct evhttp_request *ev, uint8_t *out)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(ev);
    struct bufferevent *bev =
        evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char text[INET6_ADDRSTRLEN];

    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET) {
        memcpy(out, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        return 4;
    }
    if (ss.ss_family != AF_INET6)
        return 0;
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, text,
              sizeof(text));
    return parse_ip(text, true, out);
}

static bool
is_same_ip(const uint8_t *a, size_t alen, const char *text)
{
    uint8_t b[16];
    size_t blen = parse_ip(text, strchr(text, ':') != NULL, b);
    return alen != 0 && alen == blen && memcmp(a, b, alen) == 0;
}

/* An entry of management.allowed_hosts: a name or an address, with or
 * without brackets; "*" takes any Host. */
static bool
is_listed(const struct authority *h)
{
    const char *list = broker.cfg.mgmt_allowed_hosts;
    char v[HOST_MAX + 2];
    size_t pos = 0;

    while (config_list_next(list, &pos, v, sizeof(v))) {
        struct authority e;
        if (strcmp(v, "*") == 0)
            return true;
        if (parse_authority(v, &e) == 0 && strcasecmp(e.host, h->host) == 0)
            return true;
    }
    return false;
}

static bool
is_own_host(struct evhttp_request *ev, const struct authority *h,
            const char *bound_ip)
{
    uint8_t ip[16];
    size_t n = parse_ip(h->host, h->v6, ip);

    if (n != 0) {
        uint8_t local[16];
        size_t ln = local_ip(ev, local);
        if (is_same_ip(ip, n, "127.0.0.1") || is_same_ip(ip, n, "::1") ||
            is_same_ip(ip, n, bound_ip) ||
            (ln == n && memcmp(ip, local, n) == 0))
            return true;
    } else if (!h->v6) {
        if (strcasecmp(h->host, "localhost") == 0 ||
            (hostname[0] != '\0' && strcasecmp(h->host, hostname) == 0) ||
            (short_len > 0 && strlen(h->host) == short_len &&
             strncasecmp(h->host, hostname, short_len) == 0))
            return true;
    }
    return is_listed(h);
}

/* ---- Origin ---- */

/* Whether 'origin' is "http(s)://" and the Host 'h' the request was
 * sent to. A Host without a port takes the origin's default one: behind
 * a proxy that ends TLS, the page is https:// while roostd speaks HTTP. */
static bool
is_own_origin(const char *origin, const struct authority *h)
{
    struct authority o;
    int dflt;

    if (strncasecmp(origin, "http://", 7) == 0) {
        origin += 7;
        dflt = 80;
    } else if (strncasecmp(origin, "https://", 8) == 0) {
        origin += 8;
        dflt = 443;
    } else {
        return false;       /* "null", another scheme */
    }
    if (parse_authority(origin, &o) != 0 || o.v6 != h->v6 ||
        strcasecmp(o.host, h->host) != 0)
        return false;
    if (o.port < 0)
        o.port = dflt;
    if (h->port < 0)
        return o.port == dflt;
    return o.port == h->port;
}

/* ---- the check ---- */

static void
log_refusal(const char *what, const char *value, const char *why)
{
    char esc[128];
    uint64_t now = now_ms();

    if (last_logged != 0 && now - last_logged < LOG_EVERY_MS)
        return;
    last_logged = now;
    log_warnx("management API or Prometheus: refused a request with %s '%s' (%s; "
              "refusals are logged at most once a minute)", what,
              log_escape(esc, sizeof(esc), value, strlen(value)), why);
}

int
mgmt_host_check(struct evhttp_request *ev, const char *bound_ip,
                char *reason, size_t len)
{
    const char *host = evhttp_find_header(evhttp_request_get_input_headers(ev),
                                          "Host");
    struct authority h;

    if (host == NULL ||
        (parse_authority(host, &h) == 0 && is_own_host(ev, &h, bound_ip)))
        return 0;
    log_refusal("Host", host, "not a name of this server: see "
                "management.allowed_hosts");
    snprintf(reason, len, "Host '%.*s' is not a name of this server (add it "
             "to management.allowed_hosts)", HOST_MAX, host);
    return -1;
}

int
mgmt_guard(struct mgmt_req *r, const char *bound_ip)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(r->ev);
    const char *host = evhttp_find_header(in, "Host");
    const char *origin = evhttp_find_header(in, "Origin");
    struct authority h;
    char reason[HOST_MAX + 200];

    mgmt_add_header(r, "Content-Security-Policy", CSP);
    mgmt_add_header(r, "X-Content-Type-Options", "nosniff");
    mgmt_add_header(r, "X-Frame-Options", "DENY");
    mgmt_add_header(r, "Referrer-Policy", "same-origin");
    mgmt_add_header(r, "Cross-Origin-Resource-Policy", "same-origin");

    if (mgmt_host_check(r->ev, bound_ip, reason, sizeof(reason)) != 0) {
        mgmt_error(r, 421, "misdirected_request", reason);
        return -1;
    }
    if (r->method == EVHTTP_REQ_GET || r->method == EVHTTP_REQ_HEAD ||
        origin == NULL)
        return 0;
    if (host != NULL && parse_authority(host, &h) == 0 &&
        is_own_origin(origin, &h))
        return 0;
    log_refusal("Origin", origin, "a write from another site");
    snprintf(reason, sizeof(reason), "cross-origin request refused: Origin "
             "'%.*s' is not this server's", HOST_MAX, origin);
    mgmt_error(r, 403, "forbidden", reason);
    return -1;
}
