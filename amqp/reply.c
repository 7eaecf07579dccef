/*
 * SPDX-License-Identifier: Apache-2.0
 * Reply code lookups over the generated reply_infos table.
 */
#include "amqp/reply.h"

static const struct reply_info *
reply_find(uint16_t code)
{
    for (size_t i = 0; i < reply_info_count; i++)
        if (reply_infos[i].code == code)
            return &reply_infos[i];
    return NULL;
}

const char *
reply_name(uint16_t code)
{
    const struct reply_info *ri = reply_find(code);
    return ri ? ri->name : NULL;
}

bool
reply_is_hard(uint16_t code)
{
    const struct reply_info *ri = reply_find(code);
    return ri ? ri->hard : true;
}
