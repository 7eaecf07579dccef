/*
 * SPDX-License-Identifier: Apache-2.0
 * AMQP reply codes (§1.2 of the 0-9-1 XML) and whether each is a soft
 * error, which closes a channel, or a hard one, which closes the
 * connection.
 */
#ifndef ROOST_AMQP_REPLY_H
#define ROOST_AMQP_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/spec_gen.h"

struct reply_info {
    uint16_t code;
    const char *name; /* "NOT_FOUND": the prefix of RabbitMQ's reply texts */
    bool hard;
};

extern const struct reply_info reply_infos[];
extern const size_t reply_info_count;

/* "NOT_FOUND" for 404; NULL for a code the specification does not name. */
const char *reply_name(uint16_t code);

/* True if 'code' is a connection (hard) error. Unknown codes count as
 * hard, since the only safe reaction to them is closing the connection. */
bool reply_is_hard(uint16_t code);

#endif
