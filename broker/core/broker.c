/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The broker's process-wide state (broker.h): the registries of vhosts
 * and users, and the node's name.
 */
#include "broker/core/broker.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "broker/core/auth.h"
#include "broker/core/inbuf.h"
#include "broker/core/msg.h"
#include "broker/core/perm.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"

struct broker broker;

void
broker_core_init(struct event_base *base)
{
    broker.base = base;
    hmap_init(&broker.vhosts);
    hmap_init(&broker.users);
}

void
broker_core_free(void)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&broker.vhosts, &pos)) != NULL)
        vhost_free(s->val);
    hmap_destroy(&broker.vhosts);
    msg_pool_free();
    inbuf_spares_free();
    auth_free_users();
    perm_free_all();
}

const char *
broker_role_name(enum node_role role)
{
    static const char *const names[] = {
        [NODE_STANDALONE] = "standalone",
        [NODE_LEADER] = "leader",
        [NODE_FOLLOWER] = "follower",
    };
    return names[role];
}

void
broker_set_role(enum node_role role)
{
    /* allowed[from][to] */
    static const bool allowed[3][3] = {
        [NODE_STANDALONE] = { [NODE_STANDALONE] = true },
        [NODE_LEADER] = { [NODE_FOLLOWER] = true },
        [NODE_FOLLOWER] = { [NODE_LEADER] = true },
    };
    if (!allowed[broker.role][role])
        fatalx("node role: %s to %s is not a transition",
               broker_role_name(broker.role), broker_role_name(role));
    if (role != broker.role)
        log_info("node role: %s, was %s", broker_role_name(role),
                 broker_role_name(broker.role));
    broker.role = role;
}

struct vhost *
broker_vhost(const char *name, size_t len)
{
    return hmap_get(&broker.vhosts, name, len);
}

const char *
broker_node_name(void)
{
    static char node[300];
    char host[256];

    if (node[0] != '\0')
        return node;
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    /* RabbitMQ's node names use the short host name. */
    host[strcspn(host, ".")] = '\0';
    snprintf(node, sizeof(node), "%s@%s",
             broker.cfg.announce_rabbitmq ? "rabbit" : "roost", host);
    return node;
}
