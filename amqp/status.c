/*
 * SPDX-License-Identifier: Apache-2.0
 * Names, texts and reply codes of the codec's statuses, all from the one
 * AMQP_STATUSES list in status.h.
 */
#include "amqp/status.h"

#include <stddef.h>

static const struct {
    const char *name;
    const char *text;
    uint16_t reply_code;
} statuses[] = {
#define AMQP_STATUS_ROW(name, code, text) { #name, text, code },
    AMQP_STATUSES(AMQP_STATUS_ROW)
#undef AMQP_STATUS_ROW
};

#define NSTATUSES (sizeof(statuses) / sizeof(statuses[0]))

const char *
status_name(enum amqp_status s)
{
    return (size_t)s < NSTATUSES ? statuses[s].name : "AMQP_E_?";
}

const char *
status_text(enum amqp_status s)
{
    return (size_t)s < NSTATUSES ? statuses[s].text : "unknown status";
}

uint16_t
status_reply_code(enum amqp_status s)
{
    return (size_t)s < NSTATUSES ? statuses[s].reply_code : 0;
}
