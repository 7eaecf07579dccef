/*
 * SPDX-License-Identifier: Apache-2.0
 * Results of the codec. Every malformed input has its own status so that
 * a log line can say exactly what was wrong; status_reply_code() maps each
 * one to the AMQP reply code the broker answers with.
 */
#ifndef ROOST_AMQP_STATUS_H
#define ROOST_AMQP_STATUS_H

#include <stdint.h>

#define AMQP_STATUSES(X) \
    X(AMQP_OK, 200, "ok") \
    X(AMQP_INCOMPLETE, 0, "more input needed") \
    X(AMQP_E_PROTOCOL_HEADER, 0, "not an AMQP protocol header") \
    X(AMQP_E_PROTOCOL_VERSION, 0, "unsupported AMQP protocol version") \
    X(AMQP_E_FRAME_TYPE, 501, "unknown frame type") \
    X(AMQP_E_FRAME_END, 501, "frame does not end with 0xCE") \
    X(AMQP_E_FRAME_TOO_LARGE, 501, "frame larger than frame_max") \
    X(AMQP_E_HEARTBEAT_CHANNEL, 505, "heartbeat frame on a channel other than 0") \
    X(AMQP_E_HEARTBEAT_SIZE, 501, "heartbeat frame with a payload") \
    X(AMQP_E_METHOD_SHORT, 501, "method frame shorter than its class and method ids") \
    X(AMQP_E_TRUNCATED, 501, "field runs past the end of the frame") \
    X(AMQP_E_TRAILING, 501, "bytes left over after the last field") \
    X(AMQP_E_UTF8, 501, "Malformed UTF-8 in shortstr") \
    X(AMQP_E_FIELD_TYPE, 501, "unknown field value type") \
    X(AMQP_E_TABLE_DEPTH, 501, "field tables nested too deeply") \
    X(AMQP_E_TABLE_SIZE, 501, "field table too large") \
    X(AMQP_E_UNKNOWN_CLASS, 540, "unknown class") \
    X(AMQP_E_UNKNOWN_METHOD, 540, "unknown method") \
    X(AMQP_E_HEADER_SHORT, 501, "content header shorter than its fixed part") \
    X(AMQP_E_HEADER_CLASS, 505, "content header for a class without content") \
    X(AMQP_E_HEADER_WEIGHT, 505, "content header weight is not zero") \
    X(AMQP_E_PROPERTY_FLAGS, 501, "unknown content property flag") \
    X(AMQP_E_VALUE, 502, "value too long for its field") \
    X(AMQP_E_OVERFLOW, 0, "output buffer too small")

enum amqp_status {
#define AMQP_STATUS_ENUM(name, code, text) name,
    AMQP_STATUSES(AMQP_STATUS_ENUM)
#undef AMQP_STATUS_ENUM
};

/* The enumerator's name, e.g. "AMQP_E_FRAME_END". Never NULL. */
const char *status_name(enum amqp_status s);

/* A short description for logs. Never NULL. */
const char *status_text(enum amqp_status s);

/*
 * The AMQP reply code to close the connection with when input fails with
 * 's', as RabbitMQ answers the same input: 501 FRAME_ERROR for anything it
 * cannot decode, 505 UNEXPECTED_FRAME for a well-formed frame in the wrong
 * place, 540 NOT_IMPLEMENTED for unknown classes and methods. AMQP_OK gives
 * 200; statuses that are not protocol errors (AMQP_INCOMPLETE, the protocol
 * header ones, AMQP_E_OVERFLOW) give 0.
 */
uint16_t status_reply_code(enum amqp_status s);

#endif
