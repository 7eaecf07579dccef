/*
 * SPDX-License-Identifier: Apache-2.0
 * TLS for AMQP listeners: a server context made from RabbitMQ's
 * ssl_options, reloaded on SIGHUP, and a transport (base/transport.h)
 * that speaks TLS on an accepted socket; and TLS bufferevents for the
 * management API's HTTPS listener (evhttp). The only place that
 * includes OpenSSL.
 */
#ifndef ROOST_TLS_TLS_H
#define ROOST_TLS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/transport.h"

struct bufferevent;
struct event_base;

/* RabbitMQ's ssl_options, as the configuration gives them. */
struct tls_options {
    const char *cacertfile;     /* "" = none */
    const char *certfile;
    const char *keyfile;
    const char *password;       /* of the key; "" = none */
    bool verify_peer;           /* verify = verify_peer */
    bool fail_if_no_peer_cert;
    const char *versions;       /* "tlsv1.2\ntlsv1.3\n"; "" = 1.2 and 1.3 */
    const char *ciphers;        /* one per line; none for TLS 1.2: AEAD
                                 * suites with forward secrecy; none for
                                 * TLS 1.3: OpenSSL's defaults */
    bool honor_cipher_order;
    int depth;
    bool reuse_sessions;
    bool client_renegotiation;
    bool secure_renegotiate;
    int handshake_timeout_ms;
    /* SASL EXTERNAL's user name (RabbitMQ's ssl_cert_login_from):
     * "distinguished_name", "common_name" or "subject_alternative_name"
     * (the san_index-th, from 0, of type san_type: "dns", "ip", "email",
     * "uri" or "other_name") */
    const char *login_from;
    const char *san_type;
    int san_index;
};

struct tls_ctx;

/* A context from 'o', or NULL with a message naming the file or the
 * option at fault in 'err'. */
struct tls_ctx *tls_ctx_new(const struct tls_options *o, char *err,
                            size_t errlen);

/* What the caller should warn about in the context 'c' (from
 * tls_ctx_new), "" if nothing: a private key file readable by its group
 * or others. tls/ does not log. */
const char *tls_ctx_warning(const struct tls_ctx *c);

/* A reload (SIGHUP): 'live' takes what 'fresh' (from tls_ctx_new) was
 * made with, and 'fresh' is freed. New connections use the new
 * certificates and key, open ones keep theirs. Making 'fresh' is what
 * can fail, so a reload prepares every context before it swaps any. */
void tls_ctx_swap(struct tls_ctx *live, struct tls_ctx *fresh);

void tls_ctx_free(struct tls_ctx *c);

/* TLS on accepted socket 'fd' (non-blocking), the handshake first; NULL
 * if out of memory (then 'fd' is still the caller's). */
struct transport *tls_transport_new(struct tls_ctx *c, struct event_base *base,
                                    int fd, transport_cb on_read,
                                    transport_cb on_write, void *arg);

/*
 * A bufferevent that will accept TLS on the socket evhttp gives it
 * (bufferevent_setfd), for evhttp_set_bevcb: it uses the context as it
 * is now (tls_ctx_swap affects later ones), and frees its SSL and
 * closes the socket when freed. NULL if out of memory.
 */
struct bufferevent *tls_bufferevent_new(struct tls_ctx *c,
                                        struct event_base *base);

#endif
