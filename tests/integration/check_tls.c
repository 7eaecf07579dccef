/*
 * SPDX-License-Identifier: Apache-2.0
 * AMQP over TLS with rabbitmq-c (its OpenSSL socket), against certificates
 * made for the test by tests/integration/tls-certs.sh: with and without
 * verifying the server, with a client certificate that verify_peer and
 * fail_if_no_peer_cert demand (and refused without one), and bodies from
 * empty to several TLS records long, which must come back byte for byte
 * (a read may leave decrypted bytes inside OpenSSL, and a delivery's
 * frames share records). tls.sh covers the rest with pika and openssl.
 */
#include <stdlib.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static char certs[128];
static char ca[192], cert[192], key[192], scert[192], skey[192];

static void
make_certs(void)
{
    const char *top = getenv("top_srcdir");
    char cmd[512];

    if (certs[0] != '\0')
        return;
    snprintf(certs, sizeof(certs), "/tmp/roost-tls-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(certs));
    snprintf(cmd, sizeof(cmd), "'%s/tests/integration/tls-certs.sh' '%s' "
             ">/dev/null", top ? top : ".", certs);
    ck_assert_msg(system(cmd) == 0, "tls-certs.sh failed: %s", cmd);
    snprintf(ca, sizeof(ca), "%s/ca.pem", certs);
    snprintf(cert, sizeof(cert), "%s/client.pem", certs);
    snprintf(key, sizeof(key), "%s/client.key", certs);
    snprintf(scert, sizeof(scert), "--set=ssl_options.certfile=%s/server.pem",
             certs);
    snprintf(skey, sizeof(skey), "--set=ssl_options.keyfile=%s/server.key",
             certs);
}

static void
remove_certs(void)
{
    char cmd[256];
    if (certs[0] == '\0')
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", certs);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", certs);
}

/* The TLS listener's port, from roostd's log. */
static int
tls_port(const struct harness *h)
{
    FILE *fp = fopen(h->log_path, "r");
    char line[512];
    int port = 0;

    ck_assert_ptr_nonnull(fp);
    while (fgets(line, sizeof(line), fp))
        if (strstr(line, "listening for AMQP over TLS on") != NULL) {
            const char *p = strstr(line, "(port ");
            if (p != NULL)
                port = atoi(p + 6);
        }
    fclose(fp);
    ck_assert_msg(port > 0, "no TLS listener in %s", h->log_path);
    return port;
}

/* Bodies around the record size (16 KiB) and several records long. */
static const size_t sizes[] = { 0, 1, 100, 16383, 16384, 16385, 40000,
                                131063, 300000 };

static uint8_t
pattern(size_t len, size_t i)
{
    return (uint8_t)((i * 131u) ^ (len * 7u) ^ (i >> 9));
}

static void
roundtrip(amqp_connection_state_t c)
{
    char q[256], name[64];
    struct h_event e;

    DECLARE_QUEUE(c, 1, h_name(name, sizeof(name), "tls"), false, true,
                  false, q);
    for (int round = 0; round < 5; round++)
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t len = sizes[k];
            uint8_t *b = malloc(len + 1);
            ck_assert_ptr_nonnull(b);
            for (size_t i = 0; i < len; i++)
                b[i] = pattern(len, i);
            h_publish_at(__FILE__, __LINE__, c, 1, "", q, b, len, false,
                         NULL);
            free(b);
        }
    for (int round = 0; round < 5; round++)
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t len = sizes[k], i = 0;
            ck_assert_int_eq(GET(c, 1, q, true, &e), 1);
            ck_assert_uint_eq(e.len, len);
            while (i < len && (uint8_t)e.body[i] == pattern(len, i))
                i++;
            ck_assert_msg(i == len, "body of %zu bytes differs at %zu", len,
                          i);
            h_event_free(&e);
        }
}

START_TEST(rabbitmq_c_verifying_the_server)
{
    struct harness h;

    SKIP_IF_REMOTE("configures a TLS listener");
    make_certs();
    if (!harness_start(&h, ARGS("--set=listeners.ssl.default=0", scert, skey)))
        return;
    /* rabbitmq-c checks the certificate's DNS names only. */
    struct hconn_opts o = { .tls = true, .tls_ca = ca, .host = "localhost",
                            .port = tls_port(&h) };
    amqp_connection_state_t c = h_connect_opts(&h, &o, NULL);
    roundtrip(c);
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(rabbitmq_c_without_verification)
{
    struct harness h;

    SKIP_IF_REMOTE("configures a TLS listener");
    make_certs();
    if (!harness_start(&h, ARGS("--set=listeners.ssl.default=0", scert, skey)))
        return;
    struct hconn_opts o = { .tls = true, .port = tls_port(&h) };
    amqp_connection_state_t c = h_connect_opts(&h, &o, NULL);
    roundtrip(c);
    h_close(c);
    harness_stop(&h);
}
END_TEST

START_TEST(rabbitmq_c_client_certificate)
{
    struct harness h;
    char cacert[256];
    amqp_rpc_reply_t r;

    SKIP_IF_REMOTE("configures a TLS listener");
    make_certs();
    snprintf(cacert, sizeof(cacert), "--set=ssl_options.cacertfile=%s", ca);
    if (!harness_start(&h, ARGS("--set=listeners.ssl.default=0", scert, skey,
                                cacert, "--set=ssl_options.verify=verify_peer",
                                "--set=ssl_options.fail_if_no_peer_cert=true")))
        return;
    int port = tls_port(&h);
    struct hconn_opts with = { .tls = true, .tls_ca = ca, .tls_cert = cert,
                               .host = "localhost",
                               .tls_key = key, .port = port };
    amqp_connection_state_t c = h_connect_opts(&h, &with, NULL);
    roundtrip(c);
    h_close(c);
    struct hconn_opts without = { .tls = true, .tls_ca = ca,
                                  .host = "localhost", .port = port };
    ck_assert_ptr_null(h_connect_opts(&h, &without, &r));
    ck_assert(harness_log_contains(&h, "TLS handshake failed"));
    harness_stop(&h);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = h_tcase(s, "tls", 60, false);
    tcase_add_test(tc, rabbitmq_c_verifying_the_server);
    tcase_add_test(tc, rabbitmq_c_without_verification);
    tcase_add_test(tc, rabbitmq_c_client_certificate);
    int rc = h_run(s);
    remove_certs();
    return rc;
}
