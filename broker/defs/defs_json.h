/*
 * SPDX-License-Identifier: Apache-2.0
 * RabbitMQ's definitions file: the JSON that `rabbitmqctl
 * export_definitions` and the management API's /api/definitions write,
 * and that RabbitMQ's `load_definitions` reads at start. Import reads one
 * into the broker's vhosts; export writes the broker's durable
 * definitions in the same format, so a file moves either way between
 * Roost and RabbitMQ.
 *
 * Roost imports users, vhosts, permissions, vhost limits (parameters of
 * component vhost-limits), policies, operator policies (parameters of
 * component operator_policy), exchanges, queues and bindings. Topic
 * permissions, other parameters and global parameters are counted and
 * reported as not imported (not implemented yet). Both run
 * on the event-loop thread.
 */
#ifndef ROOST_BROKER_DEFS_JSON_H
#define ROOST_BROKER_DEFS_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/*
 * Read the definitions file at 'path' and add what it defines to the
 * broker, with RabbitMQ's import semantics: an object that exists
 * already is kept as it is (so importing twice changes nothing), and the
 * predeclared exchanges (the default one and amq.*) are skipped. A
 * missing "vhost" means the default vhost. New objects are announced
 * through defs_changed(), so the store writes the durable ones; the
 * caller waits for the disk if it must.
 *
 * The whole file is checked before anything is applied: on -1 nothing
 * changed and 'err' holds "path:line:column: JSON error" or
 * "path: queues[3]: what is wrong". Logs what was imported and what was
 * not. 0 on success.
 */
int defs_json_import(const char *path, char *err, size_t errlen);

/* The same from 'text' (POST /api/definitions); 'name' stands for the
 * path in messages. */
int defs_json_import_text(const char *text, size_t len, const char *name,
                          char *err, size_t errlen);

/*
 * Write the broker's definitions to 'out' as a RabbitMQ definitions file:
 * what the store keeps (every vhost; durable exchanges other than the
 * predeclared ones; durable queues that are neither exclusive nor
 * auto-delete; the bindings between kept objects), sorted by vhost and
 * name so that the output is deterministic. "rabbit_version" is the
 * RabbitMQ version Roost follows. -1 with a message in 'err' if writing
 * failed; 'out' stays open.
 */
int defs_json_export(FILE *out, char *err, size_t errlen);

/* The same as a string (GET /api/definitions): the caller frees it with
 * free(). */
char *defs_json_export_text(void);

/* A JSON string of 'n' bytes; bytes that are not UTF-8 become '?'
 * (AMQP names need not be UTF-8; JSON strings must be). */
json_t *defs_json_str(const void *s, size_t n);

/* A field table as RabbitMQ's JSON shows arguments and headers. */
struct amqp_table;
json_t *defs_json_table(struct amqp_table t);

/* The JSON object 'obj' as a field table, with its length prefix, into
 * 'w' (strings as longstr, integers as signed 64-bit, reals as double).
 * -1 if it nests too deep or has a key longer than a shortstr. */
struct wire_wr;
int defs_json_put_table(struct wire_wr *w, json_t *obj);

/* A policy's JSON as RabbitMQ's API and definitions show it:
 * {vhost, name, pattern, apply-to, definition, priority}. */
struct policy;
json_t *defs_json_policy(const struct policy *p);

/* Tags kept comma separated, as a JSON list. */
json_t *defs_json_tags(const char *tags);

/*
 * Tags given as "a, b" or ["a", "b"] (RabbitMQ takes both; NULL or null:
 * none), trimmed and without empty ones, into 'out' comma separated. -1
 * with a reason in 'err' if 'v' is neither or they do not fit.
 */
int defs_json_parse_tags(const json_t *v, char *out, size_t cap, char *err,
                         size_t errlen);

#endif
