/*
 * SPDX-License-Identifier: Apache-2.0
 * Listening sockets. With no bind address we open one IPv6 socket with
 * IPV6_V6ONLY off, which takes IPv4 too; where IPv6 is unavailable we
 * fall back to IPv4 alone.
 */
#include "broker/session/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/core/broker.h"
#include "broker/lib/accept_guard.h"
#include "broker/lib/log.h"
#include "broker/lib/port_holder.h"
#include "broker/session/conn.h"

#define MAX_LISTENERS 16

static struct accept_guard *listeners[MAX_LISTENERS];
static int nlisteners;

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
          int salen, void *arg)
{
    (void)l;
    if (broker.shutting_down) {
        close(fd);
        return;
    }
    conn_accept(fd, sa, salen, arg);
}

static int
listen_on(const struct sockaddr *sa, socklen_t salen, int backlog, bool v6only_off)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, zero = 0;

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa->sa_family == AF_INET6 && v6only_off)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, sa, salen) != 0 || listen(fd, backlog) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static int
bound_port(int fd, char *desc, size_t desclen)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = -1;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
        snprintf(desc, desclen, "[%s]:%d", host, port);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
        snprintf(desc, desclen, "%s:%d", host, port);
    }
    return port;
}

int
listener_start(const char *bind_addr, int port, int backlog,
               struct tls_ctx *tls)
{
    struct addrinfo hints, *res = NULL;
    char portstr[16], desc[80];
    int fd = -1, rc;

    snprintf(portstr, sizeof(portstr), "%d", port);
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    if (bind_addr == NULL || bind_addr[0] == '\0') {
        struct sockaddr_in6 in6;
        memset(&in6, 0, sizeof(in6));
        in6.sin6_family = AF_INET6;
        in6.sin6_addr = in6addr_any;
        in6.sin6_port = htons((uint16_t)port);
        fd = listen_on((struct sockaddr *)&in6, sizeof(in6), backlog, true);
        if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
            struct sockaddr_in in;
            memset(&in, 0, sizeof(in));
            in.sin_family = AF_INET;
            in.sin_addr.s_addr = htonl(INADDR_ANY);
            in.sin_port = htons((uint16_t)port);
            fd = listen_on((struct sockaddr *)&in, sizeof(in), backlog, false);
        }
    } else {
        rc = getaddrinfo(bind_addr, portstr, &hints, &res);
        if (rc != 0) {
            log_errorx("cannot resolve bind address '%s': %s", bind_addr,
                       gai_strerror(rc));
            return -1;
        }
        fd = listen_on(res->ai_addr, res->ai_addrlen, backlog, false);
        freeaddrinfo(res);
    }
    if (fd < 0 && errno == EADDRINUSE) {
        char who[128];
        port_holder(port, who, sizeof(who));
        log_errorx("AMQP%s listener: port %d on %s is in use by %s; choose "
                   "another with %s", tls ? " over TLS" : "", port,
                   bind_addr && bind_addr[0] ? bind_addr : "all addresses",
                   who, tls ? "listeners.ssl.default = PORT"
                            : "--port PORT (or port, listeners.tcp.default)");
        return -1;
    }
    if (fd < 0) {
        log_warn("cannot listen on %s port %d",
                 bind_addr && bind_addr[0] ? bind_addr : "all addresses", port);
        return -1;
    }
    if (nlisteners == MAX_LISTENERS) {
        close(fd);
        log_errorx("more than %d listeners", MAX_LISTENERS);
        return -1;
    }
    int bound = bound_port(fd, desc, sizeof(desc));
    char what[128];
    snprintf(what, sizeof(what), "AMQP%s listener %s", tls ? " over TLS" : "",
             desc);
    struct accept_guard *l = accept_guard_new(broker.base, fd, accept_cb, tls,
                                              what);
    if (l == NULL) {
        close(fd);
        log_errorx("cannot create a listener");
        return -1;
    }
    listeners[nlisteners++] = l;
    log_info("listening for AMQP%s on %s (port %d)", tls ? " over TLS" : "",
             desc, bound);
    return bound;
}

int
listener_start_addr(const char *addr, int backlog, struct tls_ctx *tls)
{
    char host[256] = "";
    const char *colon = strrchr(addr, ':');
    const char *portstr = colon ? colon + 1 : addr;
    char *end;
    long port = strtol(portstr, &end, 10);

    if (*portstr == '\0' || *end != '\0' || port < 0 || port > 65535) {
        log_errorx("listener address '%s' is not PORT or HOST:PORT", addr);
        return -1;
    }
    if (colon != NULL) {
        size_t n = (size_t)(colon - addr);
        /* [v6]:port */
        if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
            addr++;
            n -= 2;
        }
        if (n >= sizeof(host)) {
            log_errorx("listener address '%s' is too long", addr);
            return -1;
        }
        memcpy(host, addr, n);
        host[n] = '\0';
    }
    return listener_start(host, (int)port, backlog, tls);
}

void
listener_stop(void)
{
    for (int i = 0; i < nlisteners; i++)
        accept_guard_free(listeners[i], true);
    nlisteners = 0;
}
