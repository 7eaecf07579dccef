/*
 * SPDX-License-Identifier: Apache-2.0
 * TLS with OpenSSL: the server context (tls_ctx_new, tls_ctx_swap) and
 * the TLS transport.
 *
 * The transport keeps the connection's wishes (call me when I can read,
 * when I can write) apart from what OpenSSL needs of the socket: a read
 * may need the socket writable (a handshake message to send), a write
 * may need it readable, and a read can leave decrypted bytes inside
 * OpenSSL while the socket has nothing more. Each of those re-arms the
 * right event (update_events) or calls the connection back at once.
 *
 * Writes copy up to 16 KiB of the output at a time, so that the frames a
 * delivery is made of go out in full-size records rather than one record
 * per frame. A handshake costs the loop about a millisecond with an RSA
 * key (much less with ECDSA): handshakes may take at most half of the
 * loop's time in every 10 ms, and a handshake over that budget waits a
 * millisecond, so a storm of new connections cannot starve open ones.
 */
#include "tls/tls.h"

#include "base/closer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define RECORD_MAX 16384
#define BUDGET_WINDOW_US 10000
#define BUDGET_US 5000

enum login_from { LOGIN_DN, LOGIN_CN, LOGIN_SAN };

/* How SASL EXTERNAL names the user (ssl_cert_login_from). */
struct login_rule {
    enum login_from from;
    int san_type;               /* GEN_DNS, ... */
    int san_index;
};

struct tls_ctx {
    SSL_CTX *ssl;
    int handshake_timeout_ms;
    struct login_rule login;
    char warning[4400];         /* tls_ctx_warning's */
};

/*
 * TLS 1.2 suites offered when ssl_options.ciphers names none: RabbitMQ's
 * recommended list, AEAD ciphers with forward secrecy only (ECDHE with
 * AES-GCM or ChaCha20-Poly1305), so no SHA-1 MAC, no CBC and no static
 * RSA key exchange. TLS 1.3's are all AEAD with forward secrecy:
 * OpenSSL's defaults stand.
 */
static const char tls12_default_ciphers[] =
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256";

/* ---- the context ---- */

static void
ssl_error(char *err, size_t errlen, const char *what, const char *file)
{
    char reason[256] = "unknown error";
    unsigned long e = ERR_peek_last_error();
    if (e != 0)
        ERR_error_string_n(e, reason, sizeof(reason));
    ERR_clear_error();
    if (file != NULL)
        snprintf(err, errlen, "%s %s: %s", what, file, reason);
    else
        snprintf(err, errlen, "%s: %s", what, reason);
}

/* Whether 'file' can be read, with the reason in 'err' if not. */
static bool
readable(const char *key, const char *file, char *err, size_t errlen)
{
    FILE *fp = fopen(file, "r");
    if (fp == NULL) {
        snprintf(err, errlen, "ssl_options.%s %s: %s", key, file,
                 strerror(errno));
        return false;
    }
    fclose(fp);
    return true;
}

static int
password_cb(char *buf, int size, int rwflag, void *userdata)
{
    const char *pw = userdata;
    (void)rwflag;
    size_t n = pw ? strlen(pw) : 0;
    if (n > (size_t)size)
        n = (size_t)size;
    if (n > 0)
        memcpy(buf, pw, n);
    return (int)n;
}

/* TLS versions from a list such as "tlsv1.2\ntlsv1.3\n". */
static int
set_versions(SSL_CTX *ctx, const char *list, char *err, size_t errlen)
{
    int lo = 0, hi = 0;
    const char *p = list;

    while (p != NULL && *p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        int v;
        if (n == 7 && strncmp(p, "tlsv1.2", 7) == 0) {
            v = TLS1_2_VERSION;
        } else if (n == 7 && strncmp(p, "tlsv1.3", 7) == 0) {
            v = TLS1_3_VERSION;
        } else {
            snprintf(err, errlen, "ssl_options.versions: '%.*s' is not "
                     "offered (tlsv1.2 and tlsv1.3 are; 1.0 and 1.1 are "
                     "refused)", (int)n, p);
            return -1;
        }
        if (lo == 0 || v < lo)
            lo = v;
        if (v > hi)
            hi = v;
        p = nl ? nl + 1 : NULL;
    }
    if (lo == 0) {
        lo = TLS1_2_VERSION;
        hi = TLS1_3_VERSION;
    }
    SSL_CTX_set_min_proto_version(ctx, lo);
    SSL_CTX_set_max_proto_version(ctx, hi);
    return 0;
}

/* Cipher names one per line: TLS 1.3 suites (TLS_...) and the rest
 * (OpenSSL names) go to OpenSSL separately. */
static int
set_ciphers(SSL_CTX *ctx, const char *list, char *err, size_t errlen)
{
    size_t cap = strlen(list) + 2;
    char *v13 = calloc(1, cap), *v12 = calloc(1, cap);
    int rc = 0;

    if (v13 == NULL || v12 == NULL) {
        free(v13);
        free(v12);
        snprintf(err, errlen, "ssl_options.ciphers: out of memory");
        return -1;
    }
    for (const char *p = list; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *to = strncmp(p, "TLS_", 4) == 0 ? v13 : v12;
        if (n > 0) {
            if (*to != '\0')
                strcat(to, ":");
            strncat(to, p, n);
        }
        p = nl ? nl + 1 : p + n;
    }
    if (*v13 != '\0' && SSL_CTX_set_ciphersuites(ctx, v13) != 1) {
        ssl_error(err, errlen, "ssl_options.ciphers (TLS 1.3)", NULL);
        rc = -1;
    } else if (SSL_CTX_set_cipher_list(ctx, *v12 != '\0'
                                                ? v12
                                                : tls12_default_ciphers) != 1) {
        ssl_error(err, errlen, "ssl_options.ciphers", NULL);
        rc = -1;
    }
    free(v13);
    free(v12);
    return rc;
}

static SSL_CTX *
make_ctx(const struct tls_options *o, char *err, size_t errlen)
{
    SSL_CTX *ctx;

    if (o->certfile[0] == '\0' || o->keyfile[0] == '\0') {
        snprintf(err, errlen, "a TLS listener needs ssl_options.certfile "
                 "and ssl_options.keyfile");
        return NULL;
    }
    if (!readable("certfile", o->certfile, err, errlen) ||
        !readable("keyfile", o->keyfile, err, errlen) ||
        (o->cacertfile[0] != '\0' &&
         !readable("cacertfile", o->cacertfile, err, errlen)))
        return NULL;
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        ssl_error(err, errlen, "cannot make a TLS context", NULL);
        return NULL;
    }
    if (set_versions(ctx, o->versions, err, errlen) != 0 ||
        set_ciphers(ctx, o->ciphers, err, errlen) != 0)
        goto fail;
    /* A peer that closes without close_notify has closed (pika does
     * after connection.close-ok), not failed. */
    uint64_t opts = SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF;
    if (!o->client_renegotiation)
        opts |= SSL_OP_NO_RENEGOTIATION;
    if (o->honor_cipher_order)
        opts |= SSL_OP_CIPHER_SERVER_PREFERENCE;
    if (!o->reuse_sessions)
        opts |= SSL_OP_NO_TICKET;
    if (!o->secure_renegotiate)
        opts |= SSL_OP_ALLOW_UNSAFE_LEGACY_RENEGOTIATION;
    SSL_CTX_set_options(ctx, opts);
    SSL_CTX_set_session_cache_mode(ctx, o->reuse_sessions
                                            ? SSL_SESS_CACHE_SERVER
                                            : SSL_SESS_CACHE_OFF);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"roost", 5);
    /* Read what the socket has, not a record header and then its body:
     * two read(2)s per record otherwise. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS |
                              SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)o->password);
    if (SSL_CTX_use_certificate_chain_file(ctx, o->certfile) != 1) {
        ssl_error(err, errlen, "cannot load ssl_options.certfile",
                  o->certfile);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o->keyfile, SSL_FILETYPE_PEM) != 1) {
        ssl_error(err, errlen, "cannot load ssl_options.keyfile", o->keyfile);
        goto fail;
    }
    /* The password is needed only to load the key. */
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "ssl_options.keyfile %s does not match "
                 "ssl_options.certfile %s", o->keyfile, o->certfile);
        ERR_clear_error();
        goto fail;
    }
    if (o->cacertfile[0] != '\0') {
        if (SSL_CTX_load_verify_locations(ctx, o->cacertfile, NULL) != 1) {
            ssl_error(err, errlen, "cannot load ssl_options.cacertfile",
                      o->cacertfile);
            goto fail;
        }
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->cacertfile);
        if (names != NULL)
            SSL_CTX_set_client_CA_list(ctx, names);
    }
    if (o->verify_peer) {
        if (o->cacertfile[0] == '\0') {
            snprintf(err, errlen, "ssl_options.verify = verify_peer needs "
                     "ssl_options.cacertfile");
            goto fail;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
                                    (o->fail_if_no_peer_cert
                                         ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                                         : 0), NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    SSL_CTX_set_verify_depth(ctx, o->depth);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

static int
login_rule(const struct tls_options *o, struct login_rule *r, char *err,
           size_t errlen)
{
    static const struct { const char *name; int type; } sans[] = {
        { "dns", GEN_DNS }, { "ip", GEN_IPADD }, { "email", GEN_EMAIL },
        { "uri", GEN_URI }, { "other_name", GEN_OTHERNAME },
    };
    const char *from = o->login_from ? o->login_from : "distinguished_name";

    if (strcmp(from, "distinguished_name") == 0)
        r->from = LOGIN_DN;
    else if (strcmp(from, "common_name") == 0)
        r->from = LOGIN_CN;
    else if (strcmp(from, "subject_alternative_name") == 0)
        r->from = LOGIN_SAN;
    else {
        snprintf(err, errlen, "ssl_cert_login_from: '%s' is not "
                 "distinguished_name, common_name or "
                 "subject_alternative_name", from);
        return -1;
    }
    r->san_type = -1;
    for (size_t i = 0; i < sizeof(sans) / sizeof(sans[0]); i++)
        if (o->san_type && strcmp(o->san_type, sans[i].name) == 0)
            r->san_type = sans[i].type;
    if (r->san_type < 0) {
        snprintf(err, errlen, "ssl_cert_login_san_type: '%s' is not dns, "
                 "ip, email, uri or other_name",
                 o->san_type ? o->san_type : "");
        return -1;
    }
    r->san_index = o->san_index;
    return 0;
}

struct tls_ctx *
tls_ctx_new(const struct tls_options *o, char *err, size_t errlen)
{
    struct login_rule rule;
    if (login_rule(o, &rule, err, errlen) != 0)
        return NULL;
    SSL_CTX *ssl = make_ctx(o, err, errlen);
    if (ssl == NULL)
        return NULL;
    struct tls_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        SSL_CTX_free(ssl);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->ssl = ssl;
    c->handshake_timeout_ms = o->handshake_timeout_ms;
    c->login = rule;
    /* A key others can read is a key others may have. */
    struct stat sb;
    if (stat(o->keyfile, &sb) == 0 && (sb.st_mode & (S_IRWXG | S_IRWXO)))
        snprintf(c->warning, sizeof(c->warning), "the private key %s is "
                 "readable or writable by its group or others (mode %04o): "
                 "make it 0600 or 0400", o->keyfile,
                 (unsigned)(sb.st_mode & 07777));
    return c;
}

const char *
tls_ctx_warning(const struct tls_ctx *c)
{
    return c->warning;
}

void
tls_ctx_swap(struct tls_ctx *live, struct tls_ctx *fresh)
{
    /* Open connections hold references to the old SSL_CTX. */
    SSL_CTX_free(live->ssl);
    *live = *fresh;
    free(fresh);
}

void
tls_ctx_free(struct tls_ctx *c)
{
    if (c == NULL)
        return;
    SSL_CTX_free(c->ssl);
    free(c);
}

/* ---- the handshake budget ---- */

static uint64_t
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t window_start, window_used;

static bool
budget_left(uint64_t now)
{
    if (now - window_start >= BUDGET_WINDOW_US) {
        window_start = now;
        window_used = 0;
    }
    return window_used < BUDGET_US;
}

/* ---- the transport ---- */

struct tls {
    struct transport t;
    SSL *ssl;
    struct event *rev, *wev, *timer, *retry;
    bool want_r, want_w;        /* the connection's */
    bool read_wants_write;      /* the last SSL_read */
    bool write_wants_read;      /* the last SSL_write */
    bool armed_r, armed_w;
    bool handshaken, deferred, timed_out, fatal;
    size_t retry_len;           /* a write to repeat with this length */
    struct login_rule login;    /* the context's when it was made */
    char error[200];
    struct transport_tls_info info;     /* once handshaken */
};

static void take_info(struct tls *p);

static void
update_events(struct tls *p)
{
    bool r = !p->deferred &&
             ((p->want_r && !p->read_wants_write) || p->write_wants_read);
    bool w = !p->deferred &&
             ((p->want_w && !p->write_wants_read) || p->read_wants_write);
    if (r != p->armed_r) {
        if (r)
            event_add(p->rev, NULL);
        else
            event_del(p->rev);
        p->armed_r = r;
    }
    if (w != p->armed_w) {
        if (w)
            event_add(p->wev, NULL);
        else
            event_del(p->wev);
        p->armed_w = w;
    }
}

/* A failed call: why, for the connection's log line. */
static ssize_t
failed(struct tls *p, int ret, int err)
{
    unsigned long e = ERR_peek_last_error();
    char reason[160] = "";

    p->fatal = true;
    if (e != 0)
        ERR_error_string_n(e, reason, sizeof(reason));
    ERR_clear_error();
    if (err == SSL_ERROR_SYSCALL && e == 0 && ret == 0)
        return TRANSPORT_EOF;   /* the peer closed without close_notify */
    if (err == SSL_ERROR_SYSCALL && e == 0) {
        snprintf(p->error, sizeof(p->error), "%s", strerror(errno));
        return TRANSPORT_ERROR;
    }
    snprintf(p->error, sizeof(p->error), "TLS %s: %s",
             p->handshaken ? "error" : "handshake failed",
             reason[0] ? reason : "protocol error");
    errno = EPROTO;
    return TRANSPORT_ERROR;
}

static ssize_t
tls_read(struct transport *t, void *buf, size_t n)
{
    struct tls *p = (struct tls *)t;
    size_t got = 0;
    uint64_t start = 0;

    if (p->timed_out) {
        snprintf(p->error, sizeof(p->error), "TLS handshake timed out");
        errno = ETIMEDOUT;
        return TRANSPORT_ERROR;
    }
    if (p->fatal)
        return TRANSPORT_ERROR;
    if (!p->handshaken) {
        start = now_us();
        if (!budget_left(start)) {
            /* Later: open connections first. */
            p->deferred = true;
            update_events(p);
            struct timeval tv = { 0, 1000 };
            evtimer_add(p->retry, &tv);
            return TRANSPORT_AGAIN;
        }
    }
    p->read_wants_write = false;
    while (got < n) {
        size_t ask = n - got > (size_t)INT32_MAX ? (size_t)INT32_MAX : n - got;
        int r = SSL_read(p->ssl, (char *)buf + got, (int)ask);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        int err = SSL_get_error(p->ssl, r);
        if (err == SSL_ERROR_WANT_READ)
            break;
        if (err == SSL_ERROR_WANT_WRITE) {
            p->read_wants_write = true;
            break;
        }
        if (err == SSL_ERROR_ZERO_RETURN) {
            if (got == 0)
                return TRANSPORT_EOF;
            break;
        }
        if (got > 0)
            break;              /* the error again at the next read */
        return failed(p, r, err);
    }
    if (!p->handshaken) {
        window_used += now_us() - start;
        if (SSL_is_init_finished(p->ssl)) {
            p->handshaken = true;
            evtimer_del(p->timer);
            take_info(p);
        }
    }
    update_events(p);
    /* Bytes decrypted and waiting: no readable socket will say so. */
    if (got == n && SSL_has_pending(p->ssl))
        event_active(p->rev, EV_READ, 0);
    return got > 0 ? (ssize_t)got : TRANSPORT_AGAIN;
}

static ssize_t
tls_write(struct transport *t, struct evbuffer *out, size_t max)
{
    struct tls *p = (struct tls *)t;
    uint8_t rec[RECORD_MAX];
    size_t done = 0;

    if (p->fatal)
        return TRANSPORT_ERROR;
    p->write_wants_read = false;
    while (done < max) {
        size_t len = evbuffer_get_length(out), n = p->retry_len;
        if (len == 0)
            break;
        if (n == 0) {
            n = len < RECORD_MAX ? len : RECORD_MAX;
            if (n > max - done)
                n = max - done;
        }
        evbuffer_copyout(out, rec, n);
        int r = SSL_write(p->ssl, rec, (int)n);
        if (r > 0) {
            evbuffer_drain(out, (size_t)r);
            done += (size_t)r;
            p->retry_len = 0;
            continue;
        }
        int err = SSL_get_error(p->ssl, r);
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
            /* OpenSSL wants the same write again. */
            p->retry_len = n;
            p->write_wants_read = err == SSL_ERROR_WANT_READ;
            break;
        }
        return failed(p, r, err);
    }
    update_events(p);
    return (ssize_t)done;
}

static void
tls_want_read(struct transport *t, bool on)
{
    struct tls *p = (struct tls *)t;
    p->want_r = on;
    update_events(p);
}

static void
tls_want_write(struct transport *t, bool on)
{
    struct tls *p = (struct tls *)t;
    p->want_w = on;
    update_events(p);
}

static bool
tls_write_waiting(const struct transport *t)
{
    const struct tls *p = (const struct tls *)t;
    return p->armed_w && p->want_w;
}

static const char *
tls_error(const struct transport *t)
{
    const struct tls *p = (const struct tls *)t;
    return p->error[0] ? p->error : NULL;
}

/* 'nm' as RFC 4514 writes it, the last RDN (the CN) first, which is how
 * RabbitMQ names an EXTERNAL user by default and shows a peer's subject
 * and issuer (rabbit_cert_info). False if it does not fit in 'len' (then
 * 'out' holds as much as fits) or it cannot be printed ('out' is ""). */
static bool
print_dn(const X509_NAME *nm, char *out, size_t len)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *p;
    long n;
    bool ok = false;

    out[0] = '\0';
    if (b == NULL)
        return false;
    if (X509_NAME_print_ex(b, nm, 0,
                           XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0 &&
        (n = BIO_get_mem_data(b, &p)) >= 0) {
        ok = (size_t)n < len;
        size_t k = ok ? (size_t)n : len - 1;
        memcpy(out, p, k);
        out[k] = '\0';
    }
    BIO_free(b);
    return ok;
}

static bool
name_dn(X509 *x, char *out, size_t len)
{
    return print_dn(X509_get_subject_name(x), out, len) && out[0] != '\0';
}

static bool
copy_asn1(const ASN1_STRING *s, char *out, size_t len)
{
    unsigned char *u = NULL;
    int n = ASN1_STRING_to_UTF8(&u, s);
    bool ok = n >= 0 && (size_t)n < len && memchr(u, 0, (size_t)n) == NULL;
    if (ok) {
        memcpy(out, u, (size_t)n);
        out[n] = '\0';
    }
    OPENSSL_free(u);
    return ok;
}

static bool
name_cn(X509 *x, char *out, size_t len)
{
    X509_NAME *nm = X509_get_subject_name(x);
    int i = X509_NAME_get_index_by_NID(nm, NID_commonName, -1);
    if (i < 0)
        return false;
    return copy_asn1(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(nm, i)),
                     out, len);
}

static bool
name_san(X509 *x, const struct login_rule *r, char *out, size_t len)
{
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL,
                                            NULL);
    int seen = 0;
    bool ok = false;

    for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type != r->san_type || seen++ != r->san_index)
            continue;
        if (g->type == GEN_IPADD) {
            const ASN1_OCTET_STRING *ip = g->d.iPAddress;
            ok = ip->length == 4 &&
                 snprintf(out, len, "%u.%u.%u.%u", ip->data[0], ip->data[1],
                          ip->data[2], ip->data[3]) < (int)len;
        } else if (g->type == GEN_OTHERNAME) {
            const ASN1_TYPE *v = g->d.otherName->value;
            ok = v->type == V_ASN1_UTF8STRING &&
                 copy_asn1(v->value.utf8string, out, len);
        } else {
            ok = copy_asn1(g->d.ia5, out, len);
        }
        break;
    }
    GENERAL_NAMES_free(names);
    return ok;
}

static bool
tls_peer_login(const struct transport *t, char *out, size_t len)
{
    const struct tls *p = (const struct tls *)t;
    X509 *x = SSL_get0_peer_certificate(p->ssl);

    if (x == NULL || !p->handshaken ||
        SSL_get_verify_result(p->ssl) != X509_V_OK)
        return false;
    switch (p->login.from) {
    case LOGIN_DN:
        return name_dn(x, out, len);
    case LOGIN_CN:
        return name_cn(x, out, len);
    case LOGIN_SAN:
        return name_san(x, &p->login, out, len);
    }
    return false;
}

/* ---- what the session was agreed on (struct transport_tls_info) ---- */

/* The names are Erlang's atoms (ssl_cipher_format.erl), which RabbitMQ
 * shows; an OpenSSL name without one is shown lower-cased. */
struct nid_name {
    int nid;
    const char *name;
};

#define LOOKUP(t, nid) nid_lookup((t), sizeof(t) / sizeof((t)[0]), (nid))

static const char *
nid_lookup(const struct nid_name *t, size_t n, int nid)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].nid == nid)
            return t[i].name;
    return NULL;
}

static void
lower_copy(char *out, size_t len, const char *s)
{
    size_t i = 0;
    for (; s != NULL && s[i] != '\0' && i + 1 < len; i++) {
        char ch = s[i];
        out[i] = ch == '-' ? '_' : (ch >= 'A' && ch <= 'Z') ? ch - 'A' + 'a'
                                                             : ch;
    }
    out[i] = '\0';
}

/* 'atom' if there is one, else OpenSSL's name 'other' lower-cased. */
static void
name_or(char *out, size_t len, const char *atom, const char *other)
{
    if (atom != NULL)
        snprintf(out, len, "%s", atom);
    else
        lower_copy(out, len, other);
}

static void
name_protocol(const SSL *ssl, char *out, size_t len)
{
    /* not NIDs, but the same kind of table */
    static const struct nid_name versions[] = {
        { TLS1_3_VERSION, "tlsv1.3" }, { TLS1_2_VERSION, "tlsv1.2" },
        { TLS1_1_VERSION, "tlsv1.1" }, { TLS1_VERSION, "tlsv1" },
    };
    name_or(out, len, LOOKUP(versions, SSL_version(ssl)),
            SSL_get_version(ssl));
}

/* Erlang joins key exchange and authentication: ecdhe_rsa, dhe_dss;
 * anonymous ones are ecdh_anon and dh_anon. */
static void
name_kx(const SSL_CIPHER *c, char *out, size_t len)
{
    static const struct nid_name kx[] = {
        { NID_kx_any, "any" }, { NID_kx_rsa, "rsa" },
        { NID_kx_ecdhe, "ecdhe" }, { NID_kx_dhe, "dhe" },
        { NID_kx_psk, "psk" }, { NID_kx_ecdhe_psk, "ecdhe_psk" },
        { NID_kx_dhe_psk, "dhe_psk" }, { NID_kx_rsa_psk, "rsa_psk" },
        { NID_kx_srp, "srp" },
    };
    static const struct nid_name auth[] = {
        { NID_auth_rsa, "rsa" }, { NID_auth_ecdsa, "ecdsa" },
        { NID_auth_dss, "dss" }, { NID_auth_null, "anon" },
    };
    int kn = SSL_CIPHER_get_kx_nid(c);
    const char *k = LOOKUP(kx, kn);
    const char *a = LOOKUP(auth, SSL_CIPHER_get_auth_nid(c));

    if (k == NULL)
        name_or(out, len, NULL, OBJ_nid2sn(kn));
    else if (a != NULL && strcmp(a, "anon") == 0 && kn != NID_kx_srp)
        snprintf(out, len, "%s_anon", kn == NID_kx_ecdhe ? "ecdh" : "dh");
    else if ((kn == NID_kx_ecdhe || kn == NID_kx_dhe || kn == NID_kx_srp) &&
             a != NULL)
        snprintf(out, len, "%s_%s", k, a);
    else
        snprintf(out, len, "%s", k);
}

static void
name_cipher(const SSL_CIPHER *c, char *out, size_t len)
{
    static const struct nid_name ciphers[] = {
        { NID_aes_128_gcm, "aes_128_gcm" },
        { NID_aes_256_gcm, "aes_256_gcm" },
        { NID_aes_128_ccm, "aes_128_ccm" },
        { NID_aes_256_ccm, "aes_256_ccm" },
        { NID_chacha20_poly1305, "chacha20_poly1305" },
        { NID_aes_128_cbc, "aes_128_cbc" },
        { NID_aes_256_cbc, "aes_256_cbc" },
        { NID_des_ede3_cbc, "3des_ede_cbc" },
        { NID_rc4, "rc4_128" },
        { NID_undef, "null" },
    };
    int n = SSL_CIPHER_get_cipher_nid(c);
    name_or(out, len, LOOKUP(ciphers, n), OBJ_nid2sn(n));
}

/* Erlang's mac: aead for AEAD suites (all of TLS 1.3), else the HMAC's
 * hash, sha for SHA-1. */
static void
name_mac(const SSL_CIPHER *c, char *out, size_t len)
{
    static const struct nid_name macs[] = {
        { NID_sha1, "sha" }, { NID_sha256, "sha256" },
        { NID_sha384, "sha384" }, { NID_md5, "md5" },
    };
    if (SSL_CIPHER_is_aead(c)) {
        snprintf(out, len, "aead");
        return;
    }
    int n = SSL_CIPHER_get_digest_nid(c);
    name_or(out, len, LOOKUP(macs, n), OBJ_nid2sn(n));
}

/* "2026-01-01T00:00:00Z", or "" if 't' cannot be read. */
static size_t
print_time(const ASN1_TIME *t, char *out, size_t len)
{
    struct tm tm;
    out[0] = '\0';
    if (t == NULL || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Once, when the handshake has ended: the API reads it for every
 * request, and the session does not change (no renegotiation). */
static void
take_info(struct tls *p)
{
    struct transport_tls_info *in = &p->info;
    const SSL_CIPHER *c = SSL_get_current_cipher(p->ssl);
    X509 *x = SSL_get0_peer_certificate(p->ssl);

    memset(in, 0, sizeof(*in));
    name_protocol(p->ssl, in->protocol, sizeof(in->protocol));
    if (c != NULL) {
        name_kx(c, in->key_exchange, sizeof(in->key_exchange));
        name_cipher(c, in->cipher, sizeof(in->cipher));
        name_mac(c, in->hash, sizeof(in->hash));
    }
    if (x == NULL)
        return;
    in->has_peer_cert = true;
    (void)print_dn(X509_get_subject_name(x), in->peer_subject,
                   sizeof(in->peer_subject));
    (void)print_dn(X509_get_issuer_name(x), in->peer_issuer,
                   sizeof(in->peer_issuer));
    char from[24], to[24];
    if (print_time(X509_get0_notBefore(x), from, sizeof(from)) > 0 &&
        print_time(X509_get0_notAfter(x), to, sizeof(to)) > 0)
        snprintf(in->peer_validity, sizeof(in->peer_validity), "%s - %s",
                 from, to);
}

static const struct transport_tls_info *
tls_tls_info(const struct transport *t)
{
    const struct tls *p = (const struct tls *)t;
    return p->handshaken ? &p->info : NULL;
}

static void
tls_free(struct transport *t)
{
    struct tls *p = (struct tls *)t;
    /* A close_notify if the session is sound; no waiting for the peer's. */
    if (p->handshaken && !p->fatal)
        (void)SSL_shutdown(p->ssl);
    ERR_clear_error();
    SSL_free(p->ssl);
    event_free(p->rev);
    event_free(p->wev);
    event_free(p->timer);
    event_free(p->retry);
    closer_close(t->fd);
    free(p);
}

static const struct transport_ops tls_ops = {
    .name = "tls",
    .read = tls_read,
    .write = tls_write,
    .want_read = tls_want_read,
    .want_write = tls_want_write,
    .write_waiting = tls_write_waiting,
    .error = tls_error,
    .peer_login = tls_peer_login,
    .tls_info = tls_tls_info,
    .free = tls_free,
};

static void
readable_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tls *p = arg;
    (void)fd;
    (void)what;
    if (p->write_wants_read) {
        p->write_wants_read = false;
        update_events(p);
        p->t.on_write(p->t.arg);
    }
    if (p->want_r)
        p->t.on_read(p->t.arg);
}

static void
writable_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tls *p = arg;
    (void)fd;
    (void)what;
    if (p->read_wants_write) {
        p->read_wants_write = false;
        update_events(p);
        p->t.on_read(p->t.arg);
    }
    if (p->want_w)
        p->t.on_write(p->t.arg);
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tls *p = arg;
    (void)fd;
    (void)what;
    if (p->handshaken)
        return;
    p->timed_out = true;
    p->t.on_read(p->t.arg);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tls *p = arg;
    (void)fd;
    (void)what;
    p->deferred = false;
    update_events(p);
    if (p->want_r)
        p->t.on_read(p->t.arg);
}

struct transport *
tls_transport_new(struct tls_ctx *c, struct event_base *base, int fd,
                  transport_cb on_read, transport_cb on_write, void *arg)
{
    struct tls *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->t = (struct transport){ &tls_ops, fd, on_read, on_write, arg };
    p->ssl = SSL_new(c->ssl);
    p->rev = event_new(base, fd, EV_READ | EV_PERSIST, readable_cb, p);
    p->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, writable_cb, p);
    p->timer = evtimer_new(base, timeout_cb, p);
    p->retry = evtimer_new(base, retry_cb, p);
    if (p->ssl == NULL || p->rev == NULL || p->wev == NULL ||
        p->timer == NULL || p->retry == NULL || SSL_set_fd(p->ssl, fd) != 1) {
        if (p->ssl)
            SSL_free(p->ssl);
        if (p->rev)
            event_free(p->rev);
        if (p->wev)
            event_free(p->wev);
        if (p->timer)
            event_free(p->timer);
        if (p->retry)
            event_free(p->retry);
        ERR_clear_error();
        free(p);
        return NULL;
    }
    SSL_set_accept_state(p->ssl);
    p->login = c->login;
    struct timeval tv = { c->handshake_timeout_ms / 1000,
                          (c->handshake_timeout_ms % 1000) * 1000 };
    evtimer_add(p->timer, &tv);
    return &p->t;
}

/* ---- bufferevents for evhttp ---- */

struct bufferevent *
tls_bufferevent_new(struct tls_ctx *c, struct event_base *base)
{
    SSL *ssl = SSL_new(c->ssl);
    if (ssl == NULL) {
        ERR_clear_error();
        return NULL;
    }
    /* Without read-ahead: bufferevent_openssl asks SSL_pending() whether
     * to read on, which does not count records read ahead but not yet
     * decrypted, so a request that arrives with the client's Finished
     * would wait in OpenSSL for more bytes that never come. */
    SSL_set_read_ahead(ssl, 0);
    /* The socket comes later (evhttp sets it). BEV_OPT_CLOSE_ON_FREE:
     * freeing it (or failing to make it) frees 'ssl', and freeing it
     * closes the socket. */
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        ERR_clear_error();
        return NULL;
    }
    /* A client that closes without close_notify has closed. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}
