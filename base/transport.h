/*
 * SPDX-License-Identifier: Apache-2.0
 * The transport seam: everything a connection does with its socket goes
 * through a struct transport, so that conn.c never knows whether it
 * speaks plain TCP (transport_tcp.c) or TLS (tls/). A transport owns the
 * socket and its events; the connection asks it to tell when it can read
 * or write (transport_want_read/write), and the transport calls the
 * connection's callbacks back. A TLS transport may need the socket
 * writable to read, or have bytes decrypted and waiting while the socket
 * is not readable: the callbacks mean "try now", not "the socket is
 * ready", and reads and writes may still answer "again".
 */
#ifndef ROOST_BROKER_TRANSPORT_H
#define ROOST_BROKER_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct evbuffer;
struct event_base;
struct transport;

/* What reads and writes answer besides a byte count. */
enum {
    TRANSPORT_EOF = 0,          /* read: the peer closed */
    TRANSPORT_AGAIN = -1,       /* nothing now; a callback will come */
    TRANSPORT_ERROR = -2,       /* gone (errno says why, where it can) */
};

typedef void (*transport_cb)(void *arg);

/*
 * What a TLS session was agreed on, in the words of RabbitMQ's
 * connection info (Erlang's ssl:connection_information): the protocol
 * ("tlsv1.3"), the suite split into key exchange ("ecdhe_rsa", "any" for
 * TLS 1.3), cipher ("aes_256_gcm") and MAC ("aead" for AEAD suites,
 * "sha384" for CBC ones), and the client certificate's subject and issuer
 * (RFC 4514, the last RDN first) and validity ("notBefore - notAfter",
 * ISO 8601 UTC). The peer_* strings are "" without a certificate. A
 * string too long for its field is cut short.
 */
struct transport_tls_info {
    char protocol[16];
    char key_exchange[32];
    char cipher[32];
    char hash[16];
    bool has_peer_cert;
    char peer_subject[512];
    char peer_issuer[512];
    char peer_validity[48];
};

struct transport_ops {
    const char *name;           /* "tcp", "tls" */
    /* Up to 'n' bytes into 'buf': how many, or TRANSPORT_EOF, _AGAIN,
     * _ERROR. */
    ssize_t (*read)(struct transport *t, void *buf, size_t n);
    /* Up to 'max' bytes from the front of 'out', drained as written: how
     * many (0 if none could go), or TRANSPORT_ERROR. */
    ssize_t (*write)(struct transport *t, struct evbuffer *out, size_t max);
    /* Call the read (write) callback whenever trying may get somewhere;
     * off: stop. */
    void (*want_read)(struct transport *t, bool on);
    void (*want_write)(struct transport *t, bool on);
    /* Whether the write callback is armed (the socket took all it could). */
    bool (*write_waiting)(const struct transport *t);
    /* Why the last read or write failed, or NULL: errno says. */
    const char *(*error)(const struct transport *t);
    /* The login name a verified client certificate gives (SASL
     * EXTERNAL), by the rule the transport was made with: false if there
     * is none (plain TCP, no certificate, not verified, no such name). */
    bool (*peer_login)(const struct transport *t, char *out, size_t len);
    /* The TLS session's details, taken once when the handshake ended and
     * valid while the transport is, or NULL (plain TCP, handshake not
     * done). NULL op: none. */
    const struct transport_tls_info *(*tls_info)(const struct transport *t);
    /* Close the socket and free the transport. */
    void (*free)(struct transport *t);
};

struct transport {
    const struct transport_ops *ops;
    int fd;
    transport_cb on_read, on_write;
    void *arg;
};

/* Plain TCP on connected socket 'fd' (non-blocking); NULL if out of
 * memory (then 'fd' is still the caller's). */
struct transport *transport_tcp_new(struct event_base *base, int fd,
                                    transport_cb on_read,
                                    transport_cb on_write, void *arg);

static inline ssize_t
transport_read(struct transport *t, void *buf, size_t n)
{
    return t->ops->read(t, buf, n);
}

static inline ssize_t
transport_write(struct transport *t, struct evbuffer *out, size_t max)
{
    return t->ops->write(t, out, max);
}

static inline void
transport_want_read(struct transport *t, bool on)
{
    t->ops->want_read(t, on);
}

static inline void
transport_want_write(struct transport *t, bool on)
{
    t->ops->want_write(t, on);
}

static inline bool
transport_write_waiting(const struct transport *t)
{
    return t->ops->write_waiting(t);
}

static inline const char *
transport_error(const struct transport *t)
{
    return t->ops->error(t);
}

static inline bool
transport_peer_login(const struct transport *t, char *out, size_t len)
{
    return t->ops->peer_login(t, out, len);
}

static inline const struct transport_tls_info *
transport_tls_info(const struct transport *t)
{
    return t->ops->tls_info != NULL ? t->ops->tls_info(t) : NULL;
}

static inline void
transport_free(struct transport *t)
{
    if (t != NULL)
        t->ops->free(t);
}

#endif
