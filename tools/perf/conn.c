/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The connections: opening one (TCP or TLS, login, channel 1) from the
 * options, closing it, and turning what goes wrong into a failure with the
 * right exit status and a message that names the connection, the broker's
 * reply code with its name, and its text.
 */
#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf.h"

#define RPC_TIMEOUT_S 60

static const char *
reply_name(unsigned code)
{
    switch (code) {
    case 200: return "REPLY_SUCCESS";
    case 311: return "CONTENT_TOO_LARGE";
    case 312: return "NO_ROUTE";
    case 313: return "NO_CONSUMERS";
    case 320: return "CONNECTION_FORCED";
    case 402: return "INVALID_PATH";
    case 403: return "ACCESS_REFUSED";
    case 404: return "NOT_FOUND";
    case 405: return "RESOURCE_LOCKED";
    case 406: return "PRECONDITION_FAILED";
    case 501: return "FRAME_ERROR";
    case 502: return "SYNTAX_ERROR";
    case 503: return "COMMAND_INVALID";
    case 504: return "CHANNEL_ERROR";
    case 505: return "UNEXPECTED_FRAME";
    case 506: return "RESOURCE_ERROR";
    case 530: return "NOT_ALLOWED";
    case 540: return "NOT_IMPLEMENTED";
    case 541: return "INTERNAL_ERROR";
    default: return "UNKNOWN";
    }
}

/*
 * The broker closed the connection or the channel while 'what' ran:
 * answer with the close-ok it expects and record the failure. 540 means
 * "not implemented" and gets its own exit status so that scripts can tell
 * a missing feature from a broken run.
 */
static void
server_closed(struct link *l, const char *what, bool conn_level,
              uint16_t code, amqp_bytes_t text, int other_exit)
{
    const char *name = reply_name(code);
    char t[512];
    int n = (int)(text.len < 400 ? text.len : 400);

    /* RabbitMQ and Roost both start the text with the code's name. */
    if (text.len >= strlen(name) && memcmp(text.bytes, name, strlen(name)) == 0)
        snprintf(t, sizeof(t), "%u %.*s", code, n, (const char *)text.bytes);
    else
        snprintf(t, sizeof(t), "%u %s - %.*s", code, name, n,
                 (const char *)text.bytes);
    if (code == 540)
        fail(EXIT_REFUSED, "%s refused: %s (%s)", what, t, l->who);
    else if (code == 403 || code == 530 || code == 402)
        fail(other_exit == EXIT_CONNECT ? EXIT_CONNECT : EXIT_BROKER,
             "%s refused: %s (%s)", what, t, l->who);
    else
        fail(other_exit, "%s failed: broker closed the %s: %s (%s)", what,
             conn_level ? "connection" : "channel", t, l->who);

    if (conn_level) {
        amqp_connection_close_ok_t ok;
        memset(&ok, 0, sizeof(ok));
        amqp_send_method(l->st, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        l->closed = true;
    } else {
        amqp_channel_close_ok_t ok;
        memset(&ok, 0, sizeof(ok));
        amqp_send_method(l->st, CH, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    }
}

bool
link_handle_close(struct link *l, const char *what, const amqp_method_t *m,
                  int conn_exit)
{
    if (m->id == AMQP_CONNECTION_CLOSE_METHOD) {
        const amqp_connection_close_t *c = m->decoded;
        server_closed(l, what, true, c->reply_code, c->reply_text, conn_exit);
        return true;
    }
    if (m->id == AMQP_CHANNEL_CLOSE_METHOD) {
        const amqp_channel_close_t *c = m->decoded;
        server_closed(l, what, false, c->reply_code, c->reply_text,
                      EXIT_BROKER);
        return true;
    }
    return false;
}

int
rpc_check(struct link *l, const char *what, int lib_exit)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(l->st);

    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return 0;
    case AMQP_RESPONSE_NONE:
        fail(EXIT_BROKER, "%s failed: no reply from the broker (%s)", what,
             l->who);
        break;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        fail(lib_exit, "%s failed: %s (%s)", what,
             amqp_error_string2(r.library_error), l->who);
        l->closed = true;
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (!link_handle_close(l, what, &r.reply, lib_exit))
            fail(EXIT_BROKER, "%s failed: unexpected method 0x%08x (%s)",
                 what, r.reply.id, l->who);
        break;
    }
    return -1;
}

/*
 * rabbitmq-c reports a refused or unreachable address as "a socket error
 * occurred" and loses errno on the way; one plain connect() tells why.
 */
static const char *
connect_reason(void)
{
    struct addrinfo hints, *ai = NULL, *a;
    char port[16];
    static __thread char why[128];
    int err = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%d", o.port);
    if (getaddrinfo(o.host, port, &hints, &ai) != 0)
        return "hostname lookup failed";
    for (a = ai; a != NULL; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK,
                        a->ai_protocol);
        struct pollfd pfd;
        socklen_t len = sizeof(err);
        if (fd < 0)
            continue;
        err = 0;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                pfd.fd = fd;
                pfd.events = POLLOUT;
                err = poll(&pfd, 1, 3000) == 1 &&
                      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0
                          ? err : ETIMEDOUT;
            }
        }
        close(fd);
        if (err == 0)
            break;
    }
    freeaddrinfo(ai);
    if (err == 0)
        return "connected on a second try";
    snprintf(why, sizeof(why), "%s", strerror(err));
    return why;
}

/* OpenSSL set-up inside rabbitmq-c is not safe to run in parallel. */
static pthread_mutex_t tls_mu = PTHREAD_MUTEX_INITIALIZER;

/* A TLS socket with the options' certificates; call with tls_mu held.
 * NULL after fail(). */
static amqp_socket_t *
tls_socket(struct link *l, const char *who)
{
    amqp_socket_t *sock = amqp_ssl_socket_new(l->st);

    if (sock == NULL) {
        fail(EXIT_CONNECT, "cannot create a TLS socket (%s)", who);
        return NULL;
    }
    amqp_ssl_socket_set_verify_peer(sock, !o.insecure);
    amqp_ssl_socket_set_verify_hostname(sock, !o.insecure);
    if (o.cacert && amqp_ssl_socket_set_cacert(sock, o.cacert) != 0) {
        fail(EXIT_CONNECT, "cannot load CA certificate %s", o.cacert);
        return NULL;
    }
    if (o.cert &&
        amqp_ssl_socket_set_key(sock, o.cert, o.key ? o.key : o.cert) != 0) {
        fail(EXIT_CONNECT, "cannot load client certificate %s / key %s",
             o.cert, o.key ? o.key : o.cert);
        return NULL;
    }
    return sock;
}

/* Connects l->st's socket, TCP or TLS; 0, or -1 after fail(). */
static int
link_connect(struct link *l, const char *who)
{
    amqp_socket_t *sock;
    struct timeval tv = { 10, 0 };
    int r;

    if (o.tls) {
        pthread_mutex_lock(&tls_mu);
        sock = tls_socket(l, who);
        if (sock == NULL) {
            pthread_mutex_unlock(&tls_mu);
            return -1;
        }
    } else {
        sock = amqp_tcp_socket_new(l->st);
        if (sock == NULL) {
            fail(EXIT_USAGE, "out of memory");
            return -1;
        }
    }
    r = amqp_socket_open_noblock(sock, o.host, o.port, &tv);
    if (o.tls)
        pthread_mutex_unlock(&tls_mu);
    if (r != AMQP_STATUS_OK) {
        fail(EXIT_CONNECT, "cannot connect to %s:%d: %s (%s)", o.host, o.port,
             r == AMQP_STATUS_SOCKET_ERROR ? connect_reason()
                                           : amqp_error_string2(r), who);
        l->closed = true;
        return -1;
    }
    return 0;
}

/* Logs in with the options' credentials; 0, or -1 after fail(). */
static int
link_login(struct link *l, const char *who)
{
    amqp_rpc_reply_t lr = amqp_login(l->st, o.vhost, 0, o.frame_max, 0,
                                     AMQP_SASL_METHOD_PLAIN, o.user, o.pass);

    if (lr.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (lr.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
        lr.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const amqp_connection_close_t *m = lr.reply.decoded;
        server_closed(l, "login", true, m->reply_code, m->reply_text,
                      EXIT_CONNECT);
    } else if (lr.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        fail(EXIT_CONNECT, "login to %s:%d as '%s' failed: %s (%s)",
             o.host, o.port, o.user,
             amqp_error_string2(lr.library_error), who);
        l->closed = true;
    } else {
        fail(EXIT_CONNECT, "login to %s:%d failed (%s)", o.host,
             o.port, who);
    }
    return -1;
}

int
link_open(struct link *l, const char *who)
{
    struct timeval tv = { RPC_TIMEOUT_S, 0 };

    memset(l, 0, sizeof(*l));
    l->fd = -1;
    snprintf(l->who, sizeof(l->who), "%s", who);
    if ((l->st = amqp_new_connection()) == NULL) {
        fail(EXIT_USAGE, "out of memory");
        return -1;
    }
    if (link_connect(l, who) != 0)
        return -1;
    amqp_set_rpc_timeout(l->st, &tv);
    if (link_login(l, who) != 0)
        return -1;
    l->frame_max = (size_t)amqp_get_frame_max(l->st);
    if (!o.tls && o.batch > 0)
        l->fd = amqp_get_sockfd(l->st);
    amqp_channel_open(l->st, CH);
    return rpc_check(l, "channel.open", EXIT_BROKER);
}

void
link_close(struct link *l)
{
    if (l->st == NULL)
        return;
    if (!l->closed) {
        struct timeval tv = { 5, 0 };
        amqp_set_rpc_timeout(l->st, &tv);
        amqp_connection_close(l->st, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(l->st);
    l->st = NULL;
}
