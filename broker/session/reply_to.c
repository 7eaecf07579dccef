/*
 * SPDX-License-Identifier: Apache-2.0
 * Direct reply-to: addresses are "amq.rabbitmq.reply-to." and 22 random
 * base64url characters, a map from them to the channel that consumes
 * its replies. The channel keeps its reply consumer's tag and address.
 */
#include "broker/session/reply_to.h"

#include <stdlib.h>
#include <string.h>

#include "broker/core/msg.h"
#include "broker/core/reheader.h"
#include "broker/lib/hmap.h"
#include "broker/lib/util.h"
#include "broker/session/channel.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"

#define PREFIX REPLY_TO "."

static struct hmap addresses;   /* address -> struct channel */

bool
reply_to_is_pseudo(struct amqp_bytes name)
{
    return amqp_bytes_eq(name, REPLY_TO);
}

bool
reply_to_is_address(struct amqp_bytes name)
{
    return name.len > strlen(PREFIX) &&
           memcmp(name.ptr, PREFIX, strlen(PREFIX)) == 0;
}

void
reply_to_consume(struct channel *ch, const struct amqp_basic_consume *a)
{
    const uint32_t mid = AMQP_BASIC_CONSUME;
    char gen[64];
    struct amqp_bytes tag = a->consumer_tag;

    if (!a->no_ack) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                     "reply consumer cannot acknowledge");
        return;
    }
    if (ch->reply_tag != NULL) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                     "reply consumer already set");
        return;
    }
    if (tag.len == 0) {
        channel_gen_name(gen, sizeof(gen), "amq.ctag-");
        tag = amqp_cstr(gen);
    }
    ch->reply_tag = xstrndup(tag.ptr, tag.len);
    channel_gen_name(ch->reply_addr, sizeof(ch->reply_addr), PREFIX);
    hmap_put(&addresses, ch->reply_addr, strlen(ch->reply_addr), ch);
    if (!a->nowait) {
        struct amqp_method m = { .id = AMQP_BASIC_CONSUME_OK };
        m.a.basic_consume_ok.consumer_tag = tag;
        channel_send(ch, &m);
    }
}

void
reply_to_channel_gone(struct channel *ch)
{
    if (ch->reply_tag == NULL)
        return;
    hmap_del(&addresses, ch->reply_addr, strlen(ch->reply_addr));
    free(ch->reply_tag);
    ch->reply_tag = NULL;
    ch->reply_addr[0] = '\0';
    if (addresses.count == 0)
        hmap_destroy(&addresses);
}

bool
reply_to_cancel(struct channel *ch, struct amqp_bytes tag)
{
    if (ch->reply_tag == NULL || !amqp_bytes_eq(tag, ch->reply_tag))
        return false;
    reply_to_channel_gone(ch);
    return true;
}

/* The properties with reply_to replaced (reheader.h); the headers
 * table as it was. */
static bool
with_address(struct wire_wr *w, struct content_header *h, void *arg)
{
    const struct channel *ch = arg;
    struct amqp_table t = h->props.headers;
    wire_put_u32(w, (uint32_t)t.len);
    wire_put_raw(w, t.ptr, t.len);
    h->props.reply_to = amqp_cstr(ch->reply_addr);
    return true;
}

bool
reply_to_rewrite(struct channel *ch, const struct content_header *h,
                 const uint8_t *hdr, size_t len, uint8_t **out,
                 size_t *out_len)
{
    (void)h;
    if (ch->reply_tag == NULL) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                     "fast reply consumer does not exist");
        return false;
    }
    *out = reheader_bytes(hdr, len, with_address, ch, out_len);
    return *out != NULL;
}

bool
reply_to_deliver(struct amqp_bytes rkey, struct msg *m)
{
    struct channel *ch = hmap_get(&addresses, rkey.ptr, rkey.len);
    if (ch == NULL || ch->state != CH_OPEN)
        return false;
    struct amqp_method d = { .id = AMQP_BASIC_DELIVER };
    d.a.basic_deliver.consumer_tag = amqp_cstr(ch->reply_tag);
    d.a.basic_deliver.delivery_tag = ch->next_tag++;
    d.a.basic_deliver.redelivered = false;
    d.a.basic_deliver.exchange = amqp_cstr("");
    d.a.basic_deliver.routing_key = rkey;
    channel_send_content(ch, &d, m);
    return true;
}

bool
reply_to_exists(struct amqp_bytes name)
{
    return reply_to_is_pseudo(name) ||
           hmap_get(&addresses, name.ptr, name.len) != NULL;
}
