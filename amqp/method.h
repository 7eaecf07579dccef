/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of every class in the 0-9-1 specification with RabbitMQ's
 * extensions, as C structs with named fields (spec_gen.h), and their
 * encoding and decoding. A method frame's payload is class id, method id,
 * then the arguments (§4.2.4).
 */
#ifndef ROOST_AMQP_METHOD_H
#define ROOST_AMQP_METHOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/codec.h"
#include "amqp/spec_gen.h"
#include "amqp/status.h"
#include "amqp/wire.h"

struct method_info {
    uint32_t id;          /* AMQP_METHOD_ID(class, method) */
    const char *name;     /* "basic.publish" */
    bool synchronous;     /* expects a reply */
    bool has_content;     /* followed by a content header and bodies */
    uint8_t nfields;
    const struct codec_field *fields;
    size_t size;          /* of its argument struct */
};

struct class_info {
    uint16_t id;
    const char *name;
};

/* Generated tables (spec_gen.c). */
extern const struct method_info method_infos[];
extern const size_t method_info_count;
extern const struct class_info class_infos[];
extern const size_t class_info_count;

struct amqp_method {
    uint32_t id;
    union amqp_method_args a;
};

static inline uint16_t
method_class(uint32_t id)
{
    return (uint16_t)(id >> 16);
}

static inline uint16_t
method_index(uint32_t id)
{
    return (uint16_t)id;
}

/* The description of a method, or NULL if the id is unknown. */
const struct method_info *method_info_find(uint32_t id);

/* True if 'class_id' is a class of the specification. */
bool class_is_known(uint16_t class_id);

/* "basic.publish", or "unknown" for an unknown id. Never NULL. */
const char *method_name(uint32_t id);

/*
 * Decode a method frame's payload. On AMQP_OK, strings and tables in
 * out->a borrow 'payload'. Errors: AMQP_E_METHOD_SHORT (no room for the
 * ids), AMQP_E_UNKNOWN_CLASS, AMQP_E_UNKNOWN_METHOD, AMQP_E_TRUNCATED,
 * AMQP_E_TRAILING, table errors, and AMQP_E_UTF8 for a shortstr that is
 * not UTF-8 (checked as RabbitMQ 3.10 checks it: in every method but
 * basic.publish, whose exchange and routing key it takes as they come).
 * Never allocates.
 */
enum amqp_status method_decode(const uint8_t *payload, size_t len,
                               struct amqp_method *out);

/*
 * Encode a method (ids and arguments) into 'w'. AMQP_E_VALUE for a
 * shortstr longer than 255; AMQP_E_OVERFLOW when 'w' ran out of room
 * (w->len then tells how much was needed).
 */
enum amqp_status method_encode(const struct amqp_method *m, struct wire_wr *w);

/* Encode a whole method frame on 'channel'. */
enum amqp_status method_frame_put(struct wire_wr *w, uint16_t channel,
                                  const struct amqp_method *m);

#endif
