/*
 * SPDX-License-Identifier: Apache-2.0
 * The neutral interface of the differential test between Roost's codec and
 * rabbitmq-c's. Both libraries use amqp_/AMQP_ names (AMQP_FRAME_ERROR is a
 * macro in rabbitmq-c's amqp_framing.h and an enumerator in our spec_gen.h),
 * so no translation unit may include both: check_diff.c includes only our
 * headers, rmq_bridge.c and the generated rmq_bridge_gen.c only rabbitmq-c's,
 * and this header, which names neither library's types, is all they share.
 *
 * Values cross the boundary as plain C: a method's arguments or a content
 * header's properties are an array of struct dv in specification order, and
 * a field table is its wire encoding (struct dv) or a neutral tree
 * (struct dfield). What rabbitmq-c decodes is copied into a caller's arena,
 * so nothing returned borrows rabbitmq-c's memory pools, which the bridge
 * empties before returning.
 *
 * Bridge functions return 0 on success or a negative status: rabbitmq-c's
 * own (amqp_status_enum) or one of the RMQ_E_* codes below.
 */
#ifndef ROOST_TESTS_RMQ_BRIDGE_H
#define ROOST_TESTS_RMQ_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- method arguments and properties ---- */

/* Argument and property types, as the specification names them. */
enum dv_type {
    DV_OCTET = 1,
    DV_SHORT,
    DV_LONG,
    DV_LONGLONG,
    DV_TIMESTAMP,
    DV_BIT,
    DV_SHORTSTR,
    DV_LONGSTR,
    DV_TABLE,
};

/*
 * One argument or property. Numbers are in 'u' (bits are 0 or 1); strings
 * are ptr/len; a table is its whole wire encoding, 4-byte length prefix
 * included, in ptr/len (what the bridge returns is rabbitmq-c's re-encoding
 * of the table it decoded).
 */
struct dv {
    int type; /* enum dv_type */
    uint64_t u;
    const uint8_t *ptr;
    size_t len;
};

/* The caller's buffer that decoded strings and tables are copied into. */
struct dv_arena {
    uint8_t *buf;
    size_t cap;
    size_t used;
};

/* Statuses of the bridge itself; rabbitmq-c's are all above -1000. */
#define RMQ_E_NO_ROOM (-1000)   /* output buffer or arena too small */
#define RMQ_E_NO_STRUCT (-1001) /* rabbitmq-c decoded a method its headers
                                   declare no struct for */

#define RMQ_MAX_FIELDS 16

struct rmq_field {
    const char *name; /* as in the specification, e.g. "routing-key" */
    int type;         /* enum dv_type */
};

/* A method as rabbitmq-c sees it (generated from the specification). */
struct rmq_method_desc {
    uint32_t id;      /* class << 16 | method */
    const char *name; /* "basic.publish" */
    bool supported;   /* rabbitmq-c's headers define the method */
    uint8_t nfields;
    struct rmq_field fields[RMQ_MAX_FIELDS];
};

/* Every method of the specification, in its order (rmq_bridge_gen.c). */
extern const struct rmq_method_desc rmq_methods[];
extern const size_t rmq_method_count;

/* The description of method 'id', or NULL. */
const struct rmq_method_desc *rmq_method_find(uint32_t id);

/*
 * Fill rabbitmq-c's struct for method 'id' from 'in' (one value per field,
 * tables decoded with amqp_decode_table) and encode it with
 * amqp_encode_method into 'buf': the arguments only, without class and
 * method ids. On 0, *len is the encoded length. A method without a struct
 * in rabbitmq-c's headers is passed to amqp_encode_method zeroed, so the
 * library itself says what it makes of the id.
 */
int rmq_method_encode(uint32_t id, const struct dv *in, uint8_t *buf,
                      size_t cap, size_t *len);

/*
 * Decode arguments of method 'id' with amqp_decode_method and dump
 * rabbitmq-c's struct into out[0 .. nfields-1], copying strings and
 * re-encoded tables into 'a'.
 */
int rmq_method_decode(uint32_t id, const uint8_t *args, size_t len,
                      struct dv *out, struct dv_arena *a);

/* The 14 basic properties in flag order: property i has flag 1 << (15-i). */
#define RMQ_PROP_COUNT 14
extern const struct rmq_field rmq_basic_props[RMQ_PROP_COUNT];

/*
 * amqp_encode_properties for class basic: rabbitmq-c writes the property
 * flag words and the properties present, not the class id, weight and body
 * size of the content header frame. 'flags' is rabbitmq-c's _flags.
 */
int rmq_props_encode(uint32_t flags, const struct dv *in, uint8_t *buf,
                     size_t cap, size_t *len);

/*
 * amqp_decode_properties for class basic over flag words and properties.
 * *flags is rabbitmq-c's _flags; absent properties come back zero.
 */
int rmq_props_decode(const uint8_t *p, size_t len, uint32_t *flags,
                     struct dv *out, struct dv_arena *a);

/* ---- canonical text of tables ---- */

/*
 * Both sides describe a decoded table in one text form and the test
 * compares strings:
 *
 *   table  {"key":K:value,"key":K:value}     in wire order, duplicates kept
 *   array  [K:value,K:value]
 *
 * where K is the type octet and value is: t 0 or 1; b s I l signed decimal;
 * B u i T L unsigned decimal; f and d the bits in hex (0x3fc00000), so that
 * -0.0 and NaN payloads compare exactly; D scale/value; S and x a quoted
 * string; V nothing (K:). Quoted strings and keys escape '"', '\' and any
 * byte outside 0x20..0x7e as \xHH.
 *
 * The text is built in a caller's buffer; 'len' keeps counting past 'cap'
 * (the text is then cut), so a caller checks canon_ok().
 */
struct canon {
    char *buf;
    size_t cap;
    size_t len;
};

void canon_init(struct canon *c, char *buf, size_t cap);
bool canon_ok(const struct canon *c);
void canon_char(struct canon *c, char ch);
/* A quoted, escaped string. */
void canon_quoted(struct canon *c, const uint8_t *p, size_t n);
/* "K:", the prefix of every value. */
void canon_kind(struct canon *c, uint8_t kind);
/* "K:" and a scalar value as above ('S', 'x', 'F', 'A' are not scalars). */
void canon_scalar(struct canon *c, uint8_t kind, uint64_t u, uint8_t scale);

/* ---- field tables ---- */

/*
 * One entry of a table (key used) or one value of an array (key unused),
 * described without either library's types. 'kind' is the type octet. 'u'
 * holds integers as two's complement of the value (so 'b' -1 is
 * UINT64_MAX), booleans, timestamps, the bits of a float or double, and a
 * decimal's value; 'scale' a decimal's scale; ptr/len the bytes of 'S' and
 * 'x'; items/nitems the contents of 'F' and 'A'.
 */
struct dfield {
    const char *key;
    size_t keylen;
    uint8_t kind;
    uint64_t u;
    uint8_t scale;
    const uint8_t *ptr;
    size_t len;
    const struct dfield *items;
    size_t nitems;
};

/*
 * Build the table 'items' as rabbitmq-c structures (amqp_table_t and
 * friends, nested ones too) and encode it with amqp_encode_table into
 * 'buf', length prefix included.
 */
int rmq_table_encode(const struct dfield *items, size_t n, uint8_t *buf,
                     size_t cap, size_t *len);

/*
 * Decode an encoded table (length prefix included) with amqp_decode_table,
 * set *used to the bytes it consumed, and write its canonical text (below)
 * into 'c'.
 */
int rmq_table_canon(const uint8_t *wire, size_t len, size_t *used,
                    struct canon *c);

/* True if 'st' is rabbitmq-c's AMQP_STATUS_UNKNOWN_METHOD. */
bool rmq_is_unknown_method(int st);

/* rabbitmq-c's text for a status, or the bridge's own. Never NULL. */
const char *rmq_strerror(int st);

#endif
