/*
 * SPDX-License-Identifier: Apache-2.0
 * Field tables and field arrays (§4.2.5.5), with the value types RabbitMQ
 * and its clients put on the wire. RabbitMQ's list differs from the 0-9-1
 * PDF ('s' is a signed short, 'u' unsigned; 'I' signed and 'i' unsigned
 * long; 'l' a signed long long; 'x' a byte array; no 'U'), and we follow
 * RabbitMQ:
 *
 *   t bool   b int8   B uint8   s int16   u uint16   I int32   i uint32
 *   l int64  f float  d double  D decimal S longstr  x bytes   A array
 *   T timestamp       F table   V void
 *
 * and 'L', which rabbitmq-c writes for an unsigned long long and RabbitMQ
 * 3.10 reads as a signed one, like 'l': so do we (into .v.i), and we write
 * it back as 'L' with the same eight bytes.
 *
 * A table is validated once, when it is read (types, lengths, nesting
 * depth, total size), and then stays in its encoded form: iterating it
 * borrows the bytes and cannot fail. Nothing here allocates.
 */
#ifndef ROOST_AMQP_TABLE_H
#define ROOST_AMQP_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/status.h"
#include "amqp/wire.h"

/* Tables and arrays may nest this deep (the outermost table is depth 1). */
#define TABLE_MAX_DEPTH 16

/* No encoded table or array is accepted above this size, whatever the
 * frame size allows. */
#define TABLE_MAX_SIZE (16u * 1024 * 1024)

enum amqp_field_kind {
    AMQP_FIELD_BOOL = 't',
    AMQP_FIELD_I8 = 'b',
    AMQP_FIELD_U8 = 'B',
    AMQP_FIELD_I16 = 's',
    AMQP_FIELD_U16 = 'u',
    AMQP_FIELD_I32 = 'I',
    AMQP_FIELD_U32 = 'i',
    AMQP_FIELD_I64 = 'l',
    AMQP_FIELD_L64 = 'L',   /* read as signed, as RabbitMQ does */
    AMQP_FIELD_FLOAT = 'f',
    AMQP_FIELD_DOUBLE = 'd',
    AMQP_FIELD_DECIMAL = 'D',
    AMQP_FIELD_LONGSTR = 'S',
    AMQP_FIELD_BYTES = 'x',
    AMQP_FIELD_ARRAY = 'A',
    AMQP_FIELD_TIMESTAMP = 'T',
    AMQP_FIELD_TABLE = 'F',
    AMQP_FIELD_VOID = 'V',
};

/*
 * One decoded value. Signed integers widen into 'i', unsigned ones and
 * timestamps into 'u'; strings, tables and arrays borrow the input.
 */
struct amqp_field {
    enum amqp_field_kind kind;
    union {
        bool b;
        int64_t i;
        uint64_t u;
        float f;
        double d;
        struct {
            uint8_t scale;
            uint32_t value;
        } decimal;
        struct amqp_bytes str; /* 'S' and 'x' */
        struct amqp_table table;
        struct amqp_array array;
    } v;
};

/* True if 'kind' is one of the field types above. */
bool field_kind_is_valid(uint8_t kind);

/*
 * Read a length-prefixed table from 'r' and validate it; 'depth' is the
 * nesting level of the table being read (1 for a method argument).
 * On AMQP_OK, 'out' borrows r's buffer.
 */
enum amqp_status wire_get_table(struct wire_rd *r, unsigned depth,
                                struct amqp_table *out);

/* Validate 'len' bytes of table entries (no length prefix). */
enum amqp_status table_validate(const uint8_t *buf, size_t len,
                                unsigned depth);

/* Validate 'len' bytes of array values (no length prefix). */
enum amqp_status array_validate(const uint8_t *buf, size_t len,
                                unsigned depth);

/* Iteration over a validated table or array. */
struct table_iter {
    const uint8_t *p;
    const uint8_t *end;
};

void table_iter_init(struct table_iter *it, struct amqp_table t);
void array_iter_init(struct table_iter *it, struct amqp_array a);

/* The next entry of a table; false at the end. */
bool table_next(struct table_iter *it, struct amqp_bytes *key,
                struct amqp_field *val);

/* The next value of an array; false at the end. */
bool array_next(struct table_iter *it, struct amqp_field *val);

/* The first entry named 'key'; false if there is none. */
bool table_get(struct amqp_table t, const char *key, struct amqp_field *val);

/* Number of entries (or values). */
size_t table_count(struct amqp_table t);
size_t array_count(struct amqp_array a);

/*
 * What a value is, whatever its kind: the one place outside the codec's
 * reading and writing that switches on field kinds.
 */

/* An integer of any width, signed or not, as an int64 (every kind fits);
 * false for other kinds. */
bool field_as_int(const struct amqp_field *v, int64_t *out);

/* A float, double or decimal as a double; false for other kinds. */
bool field_as_real(const struct amqp_field *v, double *out);

/* A string, bool or integer as text: strings as they are (borrowed),
 * booleans "true" or "false", integers in decimal (written into 'buf');
 * false for other kinds. */
bool field_text(const struct amqp_field *v, char *buf, size_t len,
                struct amqp_bytes *out);

/* RabbitMQ's name of a kind, as its error texts show it ("signedint",
 * "longstr", "unsignedbyte", ...). */
const char *field_type_name(enum amqp_field_kind kind);

/* Whether two values are equal as RabbitMQ compares header values:
 * integers by value whatever their widths, other kinds only with the
 * same kind (floats bit for bit, tables entry by entry in any order). */
bool field_values_equal(const struct amqp_field *a,
                        const struct amqp_field *b);

/* Whether two tables have the same entries with equal values, in any
 * order. */
bool table_values_equal(struct amqp_table a, struct amqp_table b);

/*
 * Writing. A table is written as table_begin(), entries, table_end(); the
 * length prefix is filled in at the end. Keys longer than 255 bytes give
 * AMQP_E_VALUE and write nothing.
 */
size_t table_begin(struct wire_wr *w);
void table_end(struct wire_wr *w, size_t mark);
enum amqp_status table_put_key(struct wire_wr *w, struct amqp_bytes key);

/* Write one value with its type octet; tables and arrays are copied from
 * their encoded bytes. */
void field_put(struct wire_wr *w, const struct amqp_field *val);

/* Write a whole validated table with its length prefix. */
void wire_put_table(struct wire_wr *w, struct amqp_table t);

/* The same without its entries named 'skip' (a header no one may see). */
void wire_put_table_without(struct wire_wr *w, struct amqp_table t,
                            const char *skip);

/* Convenience writers for the common entry types. */
enum amqp_status table_put_bool(struct wire_wr *w, const char *key, bool v);
enum amqp_status table_put_str(struct wire_wr *w, const char *key,
                               const char *v);
/* A longstr of any bytes. */
enum amqp_status table_put_bytes(struct wire_wr *w, const char *key,
                                 struct amqp_bytes v);
enum amqp_status table_put_i64(struct wire_wr *w, const char *key, int64_t v);

#endif
