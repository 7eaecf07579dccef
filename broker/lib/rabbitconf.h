/*
 * SPDX-License-Identifier: Apache-2.0
 * RabbitMQ's configuration keys that Roost does not implement: whether a
 * key is RabbitMQ's at all (its 3.10 schemas, rabbitconf_keys.inc), and
 * for one that is, whether skipping it changes nothing a single node
 * does (a warning) or drops what the operator asked for (a refusal),
 * with the reason. config.c asks this only for keys that are not in its
 * own option table.
 */
#ifndef ROOST_BROKER_RABBITCONF_H
#define ROOST_BROKER_RABBITCONF_H

#include <stdbool.h>
#include <stddef.h>

enum rabbit_verdict {
    RABBIT_UNKNOWN,     /* not a RabbitMQ key either: an error */
    RABBIT_IGNORED,     /* no effect on one node: skipped with a warning */
    RABBIT_REFUSED,     /* skipping it would drop what was asked */
};

/*
 * Classify 'key' set to 'value'. For RABBIT_IGNORED and RABBIT_REFUSED,
 * '*reason' is set to a static sentence saying why.
 */
enum rabbit_verdict rabbitconf_classify(const char *key, const char *value,
                                        const char **reason);

/* RabbitMQ's keys, as patterns ("*" stands for one NAME segment), for
 * the test that every one of them is classified. */
extern const char *const rabbitconf_keys[];
extern const size_t rabbitconf_nkeys;

/* Whether a rule other than the catch-all covers 'key' (for that test). */
bool rabbitconf_has_rule(const char *key);

/* The rules' patterns, "*" written "NAME" (for the test that
 * docs/configuration.md lists every one). */
size_t rabbitconf_nrules(void);
void rabbitconf_rule_pattern(size_t i, char *out, size_t len);

/* 'key' matches 'pattern': "*" matches one dot-free segment, and a
 * pattern ending in "." any key that goes on after it. */
bool rabbitconf_match(const char *pattern, const char *key);

#endif
