/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of class connection, on channel 0: the handshake (start-ok,
 * tune-ok, open), update-secret and the close handshake started by the
 * client. Which of them a state accepts is the method table's
 * (methods.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "amqp/table.h"
#include "base/transport.h"
#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/lib/version.h"
#include "broker/session/access.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"

/*
 * connection.start's server properties. kombu (and so Celery) decides the
 * 'global' flag of basic.qos from product and version: only RabbitMQ 3.3
 * or later gets global=True, because only there does global=false mean
 * "per consumer". Roost implements RabbitMQ's meaning, so by default it
 * says so the one way kombu understands (server_properties.rabbitmq);
 * "information" and "roost_version" still name Roost.
 * docs/compatibility.md has the details.
 */
void
conn_send_start(struct conn *c)
{
    uint8_t buf[2048];
    struct wire_wr w;
    struct amqp_method m = { .id = AMQP_CONNECTION_START };
    size_t outer, caps;

    wire_wr_init(&w, buf, sizeof(buf));
    outer = table_begin(&w);
    (void)table_put_key(&w, amqp_cstr("capabilities"));
    wire_put_u8(&w, AMQP_FIELD_TABLE);
    caps = table_begin(&w);
    (void)table_put_bool(&w, "publisher_confirms", true);
    (void)table_put_bool(&w, "exchange_exchange_bindings", true);
    (void)table_put_bool(&w, "basic.nack", true);
    (void)table_put_bool(&w, "consumer_cancel_notify", true);
    (void)table_put_bool(&w, "connection.blocked", true);
    (void)table_put_bool(&w, "consumer_priorities", true);
    (void)table_put_bool(&w, "direct_reply_to", true);
    (void)table_put_bool(&w, "authentication_failure_close", true);
    (void)table_put_bool(&w, "per_consumer_qos", true);
    table_end(&w, caps);
    if (broker.cfg.announce_rabbitmq) {
        (void)table_put_str(&w, "product", "RabbitMQ");
        (void)table_put_str(&w, "version", ROOST_RABBITMQ_VERSION);
    } else {
        (void)table_put_str(&w, "product", ROOST_PRODUCT);
        (void)table_put_str(&w, "version", ROOST_VERSION);
    }
    /* A lone RabbitMQ node's cluster is named after the node. */
    (void)table_put_str(&w, "cluster_name", broker_node_name());
    (void)table_put_str(&w, "roost_version", ROOST_VERSION);
    (void)table_put_str(&w, "platform", "C/libevent");
    (void)table_put_str(&w, "copyright", "Copyright (c) the Roost maintainers");
    (void)table_put_str(&w, "information",
                        "Roost " ROOST_VERSION ", an AMQP 0-9-1 broker "
                        "compatible with RabbitMQ. Licensed under the Apache "
                        "License 2.0");
    table_end(&w, outer);
    if (wire_wr_overflowed(&w))
        fatalx("server properties do not fit in %zu bytes", sizeof(buf));

    m.a.connection_start.version_major = 0;
    m.a.connection_start.version_minor = 9;
    m.a.connection_start.server_properties.ptr = buf + 4;
    m.a.connection_start.server_properties.len = w.len - 4;
    char name[1024], offered[128];
    auth_offered(transport_peer_login(c->tp, name, sizeof(name)), offered,
                 sizeof(offered));
    m.a.connection_start.mechanisms = amqp_cstr(offered);
    m.a.connection_start.locales = amqp_cstr("en_US");
    conn_send_method(c, 0, &m);
}

static void
read_capabilities(struct conn *c, struct amqp_table props)
{
    struct amqp_field caps, v;

    if (!table_get(props, "capabilities", &caps) ||
        caps.kind != AMQP_FIELD_TABLE)
        return;
    c->cap_consumer_cancel_notify =
        table_get(caps.v.table, "consumer_cancel_notify", &v) &&
        v.kind == AMQP_FIELD_BOOL && v.v.b;
    c->cap_auth_failure_close =
        table_get(caps.v.table, "authentication_failure_close", &v) &&
        v.kind == AMQP_FIELD_BOOL && v.v.b;
    c->cap_connection_blocked =
        table_get(caps.v.table, "connection.blocked", &v) &&
        v.kind == AMQP_FIELD_BOOL && v.v.b;
}

void
handle_connection_start_ok(struct conn *c, const struct amqp_method *m)
{
    const struct amqp_connection_start_ok *a = &m->a.connection_start_ok;
    char why[320], mech[64];
    bool unsupported;
    char *user = NULL;

    read_capabilities(c, a->client_properties);
    if (a->client_properties.len <= CLIENT_PROPS_MAX && c->client_props == NULL) {
        c->client_props = xmalloc(a->client_properties.len + 1);
        memcpy(c->client_props, a->client_properties.ptr,
               a->client_properties.len);
        c->client_props_len = (uint32_t)a->client_properties.len;
    }
    log_escape(mech, sizeof(mech), a->mechanism.ptr, a->mechanism.len);
    snprintf(c->auth_mechanism, sizeof(c->auth_mechanism), "%s", mech);
    char name[1024], offered[128];
    bool external = transport_peer_login(c->tp, name, sizeof(name));
    auth_offered(external, offered, sizeof(offered));
    if (auth_check(a->mechanism, a->response, offered,
                   external ? name : NULL, c->peer_is_loopback, &user,
                   &unsupported, why, sizeof(why)) != 0) {
        conn_log(c, LOG_LVL_WARN, "login refused (%s, mechanism %s)", why,
                 mech);
        if (unsupported) {
            conn_fail(c, AMQP_ACCESS_REFUSED, AMQP_CONNECTION_START_OK,
                      "unsupported authentication mechanism '%s'", mech);
        } else if (c->cap_auth_failure_close) {
            conn_fail(c, AMQP_ACCESS_REFUSED, 0,
                      "Login was refused using authentication mechanism %s. "
                      "For details see the broker logfile.", mech);
        } else {
            /* As RabbitMQ: a client that did not ask for a close on
             * authentication failure just sees the socket close. */
            conn_close_now(c, false);
        }
        return;
    }
    c->user = user;

    struct amqp_method tune = { .id = AMQP_CONNECTION_TUNE };
    tune.a.connection_tune.channel_max = (uint16_t)broker.cfg.channel_max;
    tune.a.connection_tune.frame_max = (uint32_t)broker.cfg.frame_max;
    tune.a.connection_tune.heartbeat = (uint16_t)broker.cfg.heartbeat;
    conn_set_state(c, CONN_TUNE_SENT);
    conn_send_method(c, 0, &tune);
}

/*
 * 0-9-1 (connection.tune-ok): a client asking for more channels or larger
 * frames than offered must see the connection closed "without attempting
 * a negotiated close", which is what RabbitMQ does too; 0 means "no limit
 * of the client's own", so the server's offer stands.
 */
static void
tune_refused(struct conn *c, const char *what, uint32_t got, uint32_t limit)
{
    conn_log(c, LOG_LVL_WARN, "tune-ok %s=%u outside what was offered (%u); "
             "closing the socket", what, got, limit);
    conn_close_now(c, false);
}

void
handle_connection_tune_ok(struct conn *c, const struct amqp_method *m)
{
    const struct amqp_connection_tune_ok *a = &m->a.connection_tune_ok;
    uint32_t server_frame_max = (uint32_t)broker.cfg.frame_max;
    uint16_t server_channel_max = (uint16_t)broker.cfg.channel_max;

    if (a->frame_max != 0 && a->frame_max < AMQP_FRAME_MIN_SIZE) {
        tune_refused(c, "frame_max", a->frame_max, AMQP_FRAME_MIN_SIZE);
        return;
    }
    if (a->frame_max > server_frame_max) {
        tune_refused(c, "frame_max", a->frame_max, server_frame_max);
        return;
    }
    if (a->channel_max > server_channel_max) {
        tune_refused(c, "channel_max", a->channel_max, server_channel_max);
        return;
    }
    c->frame_max = a->frame_max ? a->frame_max : server_frame_max;
    c->channel_max = a->channel_max ? a->channel_max : server_channel_max;
    c->heartbeat = a->heartbeat;
    conn_set_state(c, CONN_AWAIT_OPEN);
    conn_tuned(c);
}

/*
 * As RabbitMQ 3.10 answers it for its internal users, whose credentials
 * never expire: update-secret-ok, the new secret not checked, so that
 * clients that refresh credentials (OAuth 2 tokens elsewhere) go on.
 */
void
handle_connection_update_secret(struct conn *c, const struct amqp_method *m)
{
    const struct amqp_connection_update_secret *a =
        &m->a.connection_update_secret;
    char reason[256];
    struct amqp_method ok = { .id = AMQP_CONNECTION_UPDATE_SECRET_OK };

    log_escape(reason, sizeof(reason), a->reason.ptr, a->reason.len);
    conn_log(c, LOG_LVL_INFO, "user '%s' updated secret, reason: %s",
             c->user ? c->user : "", reason);
    conn_send_method(c, 0, &ok);
}

void
handle_connection_open(struct conn *c, const struct amqp_method *m)
{
    const struct amqp_connection_open *a = &m->a.connection_open;
    char name[300];
    struct vhost *vh = broker_vhost((const char *)a->virtual_host.ptr,
                                    a->virtual_host.len);

    if (vh == NULL) {
        log_escape(name, sizeof(name), a->virtual_host.ptr,
                   a->virtual_host.len);
        conn_fail(c, AMQP_NOT_ALLOWED, AMQP_CONNECTION_OPEN,
                  "vhost %s not found", name);
        return;
    }
    /* As RabbitMQ: the connection limits (the broker's, then the
     * vhost's max-connections), then the user's access to the vhost. */
    int64_t limit = -1;
    if (conn_open_count() >= (size_t)broker.cfg.connection_max)
        limit = broker.cfg.connection_max;
    else if (vh->max_connections >= 0 &&
             conn_open_in(vh) >= (size_t)vh->max_connections)
        limit = vh->max_connections;
    if (limit >= 0) {
        conn_fail(c, AMQP_NOT_ALLOWED, AMQP_CONNECTION_OPEN,
                  "access to vhost '%s' refused for user '%s': connection "
                  "limit (%lld) is reached", vh->name, c->user,
                  (long long)limit);
        return;
    }
    if (!access_vhost(c, vh->name)) {
        conn_fail(c, AMQP_NOT_ALLOWED, AMQP_CONNECTION_OPEN,
                  "access to vhost '%s' refused for user '%s'", vh->name,
                  c->user);
        return;
    }
    c->vh = vh;
    struct amqp_method ok = { .id = AMQP_CONNECTION_OPEN_OK };
    conn_send_method(c, 0, &ok);
    conn_set_state(c, CONN_OPEN);
    conn_opened(c);
    conn_log(c, LOG_LVL_INFO, "user '%s' opened vhost '%s'", c->user,
             vh->name);
}

void
handle_connection_close(struct conn *c, const struct amqp_method *m)
{
    const struct amqp_connection_close *a = &m->a.connection_close;
    char text[300];
    log_escape(text, sizeof(text), a->reply_text.ptr, a->reply_text.len);
    conn_log(c, LOG_LVL_INFO, "client closed the connection (%u %s)",
             a->reply_code, text);
    struct amqp_method ok = { .id = AMQP_CONNECTION_CLOSE_OK };
    conn_send_method(c, 0, &ok);
    conn_linger(c);
}
