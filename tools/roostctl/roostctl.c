/*
 * roostctl: rabbitmqctl's user, vhost, tracing, permission, policy,
 * definitions and status commands, its list_* commands with their
 * columns, purge_queue, delete_queue and close_connection, done through
 * the management HTTP API
 * (RabbitMQ's paths and JSON), so it works against roostd and RabbitMQ
 * alike.
 *
 * This file owns the command line: the option and command tables, their
 * checks (all before anything is sent, as rabbitmqctl validates before it
 * contacts the node), help, and running one command. The commands are in
 * cmd_*.c, the shared API and output helpers in ctl.c, the HTTP client in
 * http.c. Exit codes are rabbitmqctl's; ctl.h lists them.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "http.h"
#include "xalloc.h"

/* Which commands take a command-specific option. */
enum {
    ACCEPT_VHOST_META = 1 << 0,   /* add_vhost's --description ... */
    ACCEPT_TABLE = 1 << 1,        /* --no-table-headers */
    ACCEPT_POLICY = 1 << 2,       /* --priority, --apply-to */
    ACCEPT_QUEUE_LIST = 1 << 3,   /* list_queues' --online ... */
    ACCEPT_IF = 1 << 4,           /* delete_queue's --if-empty ... */
    ACCEPT_DL_LIST = 1 << 5,      /* list_dead_letters' --offset */
    ACCEPT_DL_REPLAY = 1 << 6,    /* replay_dead_letters' --rate,
                                   * --exchange, --routing-key */
    ACCEPT_COUNT = 1 << 7         /* both's --count */
};

struct command {
    const char *group;
    const char *name;
    int (*run)(struct ctl *);
    int min_args, max_args;       /* max -1: any number */
    unsigned accepts;
    const char *args;             /* after the name in the usage line */
    const char *summary;
    const char *details;          /* "Arguments and Options", or NULL */
};

static int cmd_help(struct ctl *c);

static const struct command commands[] = {
    { "Help", "help", cmd_help, 0, 1, 0, "[<command>]",
      "Displays usage information for a command", NULL },

    { "Users", "add_user", cmd_add_user, 1, 2, 0,
      "<username> [<password>]",
      "Creates a new user. This user will have no permissions for any "
      "virtual hosts by default.",
      "<username>\n\tSelf-explanatory\n\n"
      "<password>\n\tPassword this user will authenticate with. Without "
      "it, the first line of\n\tstandard input is read.\n" },
    { "Users", "change_password", cmd_change_password, 1, 2, 0,
      "<username> [<password>]", "Changes the user password",
      "<username>\n\tName of the user whose password should be changed\n\n"
      "<password>\n\tNew password to set. Without it, the first line of "
      "standard input is\n\tread.\n" },
    { "Users", "delete_user", cmd_delete_user, 1, 1, 0, "<username>",
      "Removes a user from the internal database",
      "<username>\n\tName of the user to delete.\n" },
    { "Users", "list_users", cmd_list_users, 0, 0, ACCEPT_TABLE,
      "[--no-table-headers]", "List user names and tags", NULL },
    { "Users", "set_user_tags", cmd_set_user_tags, 1, -1, 0,
      "<username> [<tag> ...]", "Sets user tags",
      "<username>\n\tName of the user to update\n\n"
      "<tag>\n\tSpace separated list of tags to set. No tags clears "
      "them. Its password\n\tis kept.\n" },

    { "Access Control", "clear_permissions", cmd_clear_permissions, 1, 1, 0,
      "[--vhost <vhost>] <username>",
      "Revokes user permissions for a vhost",
      "<username>\n\tName of the user whose permissions should be revoked\n"
      "\n-p <vhost>, --vhost <vhost>\n\tThe virtual host; \"/\" if not "
      "given.\n" },
    { "Access Control", "list_permissions", cmd_list_permissions, 0, 0,
      ACCEPT_TABLE, "[--vhost <vhost>] [--no-table-headers]",
      "Lists user permissions in a virtual host", NULL },
    { "Access Control", "list_user_permissions", cmd_list_user_permissions,
      1, 1, ACCEPT_TABLE, "[--no-table-headers] <username>",
      "Lists permissions of a user across all virtual hosts", NULL },
    { "Access Control", "list_vhosts", cmd_list, 0, -1, ACCEPT_TABLE,
      "[--no-table-headers] [<column> ...]", "Lists virtual hosts", NULL },
    { "Access Control", "set_permissions", cmd_set_permissions, 4, 4, 0,
      "[--vhost <vhost>] <username> <conf> <write> <read>",
      "Sets user permissions for a vhost",
      "<username>\n\tSelf-explanatory\n\n"
      "<conf>\n\tConfiguration permission pattern\n\n"
      "<write>\n\tWrite permission pattern\n\n"
      "<read>\n\tRead permission pattern\n\n"
      "-p <vhost>, --vhost <vhost>\n\tThe virtual host; \"/\" if not "
      "given.\n" },

    { "Virtual hosts", "add_vhost", cmd_add_vhost, 1, 1, ACCEPT_VHOST_META,
      "<vhost> [--description <description> --tags \"<tag1>,<tag2>,<...>\" "
      "--default-queue-type <quorum|classic|stream>]",
      "Creates a virtual host",
      "<vhost>\n\tVirtual host name. An existing one is left as it is.\n\n"
      "--description <description>\n\tVirtual host description\n\n"
      "--tags <tags>\n\tComma-separated list of tags\n\n"
      "--default-queue-type <quorum|classic|stream>\n\tQueue type to use "
      "if no type is explicitly provided by the client\n" },
    { "Virtual hosts", "delete_vhost", cmd_delete_vhost, 1, 1, 0, "<vhost>",
      "Deletes a virtual host", "<vhost>\n\tName of the virtual host to "
      "delete, with everything in it.\n" },
    /* rabbitmqctl 3.10 ignores positional arguments here. */
    { "Virtual hosts", "trace_off", cmd_trace_off, 0, -1, 0,
      "[--vhost <vhost>]", "Stops tracing (the firehose) in a vhost",
      "-p <vhost>, --vhost <vhost>\n\tThe virtual host; \"/\" if not "
      "given.\n" },
    { "Virtual hosts", "trace_on", cmd_trace_on, 0, -1, 0,
      "[--vhost <vhost>]", "Starts tracing (the firehose): publishes and "
      "deliveries copied to amq.rabbitmq.trace",
      "-p <vhost>, --vhost <vhost>\n\tThe virtual host; \"/\" if not "
      "given.\n" },

    { "Policies", "clear_operator_policy", cmd_clear_operator_policy, 1, 1,
      0, "[--vhost <vhost>] <name>", "Clears an operator policy",
      "<name>\n\tName of the operator policy to clear\n" },
    { "Policies", "clear_policy", cmd_clear_policy, 1, 1, 0,
      "[--vhost <vhost>] <name>", "Clears (removes) a policy",
      "<name>\n\tName of the policy to clear\n" },
    { "Policies", "list_operator_policies", cmd_list_operator_policies, 0, 0,
      ACCEPT_TABLE, "[--vhost <vhost>] [--no-table-headers]",
      "Lists operator policy overrides for a virtual host", NULL },
    { "Policies", "list_policies", cmd_list_policies, 0, 0, ACCEPT_TABLE,
      "[--vhost <vhost>] [--no-table-headers]",
      "Lists all policies in a virtual host", NULL },
    { "Policies", "set_operator_policy", cmd_set_operator_policy, 3, 3,
      ACCEPT_POLICY, "[--vhost <vhost>] [--priority <priority>] "
      "[--apply-to <apply-to>] <name> <pattern> <definition>",
      "Sets an operator policy that overrides a subset of arguments in user "
      "policies", "<name>\n\tPolicy name\n\n<pattern>\n\tRegular "
      "expression pattern that will be used to match queue,\n\texchanges, "
      "etc\n\n<definition>\n\tPolicy definition (arguments). Must be a "
      "valid JSON document\n\n--priority <priority>\n\tPolicy priority\n"
      "\n--apply-to <queues | exchanges | all>\n\tPolicy should only "
      "apply to queues, exchanges, or all entities (both\n\tof the "
      "above)\n" },
    { "Policies", "set_policy", cmd_set_policy, 3, 3, ACCEPT_POLICY,
      "[--vhost <vhost>] [--priority <priority>] [--apply-to <apply-to>] "
      "<name> <pattern> <definition>", "Sets or updates a policy",
      "<name>\n\tPolicy name\n\n<pattern>\n\tRegular expression pattern "
      "that will be used to match queues,\n\texchanges, etc\n\n"
      "<definition>\n\tPolicy definition (arguments). Must be a valid JSON "
      "document\n\n--priority <priority>\n\tPolicy priority\n\n"
      "--apply-to <queues | exchanges | all>\n\tPolicy should only apply "
      "to queues, exchanges, or all entities (both\n\tof the above)\n" },

    { "Dead letters (Roost)", "list_dead_letters", cmd_list_dead_letters,
      1, 1, ACCEPT_TABLE | ACCEPT_DL_LIST | ACCEPT_COUNT,
      "<queue> [--offset <n>] [--count <n>]",
      "Lists the dead-lettered messages of a queue without consuming them",
      "<queue>\n\tQueue to look into (usually a dead-letter queue)\n\n"
      "--offset <n>\n\tPosition to start from (default 0)\n\n"
      "--count <n>\n\tAt most this many, 1 to 1000 (default 50)\n" },
    { "Dead letters (Roost)", "replay_dead_letters", cmd_replay_dead_letters,
      1, 1, ACCEPT_DL_REPLAY | ACCEPT_COUNT,
      "<queue> [--rate <n>] [--count <n>] [--exchange <x> --routing-key <k>]",
      "Moves dead letters back to their original exchange and routing key "
      "(x-death), or to the ones given, and follows the replay",
      "<queue>\n\tQueue to replay from\n\n"
      "--rate <n>\n\tMessages a second (default 100; 0: as fast as "
      "possible)\n\n"
      "--count <n>\n\tAt most this many (default: all ready now)\n\n"
      "--exchange <x>\n\tExchange to send them to instead (\"\" or "
      "amq.default: the default one)\n\n"
      "--routing-key <k>\n\tRouting key to use instead\n" },
    { "Monitoring, observability and health checks", "list_bindings",
      cmd_list, 0, -1, ACCEPT_TABLE,
      "[--vhost <vhost>] [--no-table-headers] [<column> ...]",
      "Lists all bindings on a vhost", NULL },
    { "Monitoring, observability and health checks", "list_channels",
      cmd_list, 0, -1, ACCEPT_TABLE,
      "[--no-table-headers] [<column> ...]",
      "Lists all channels in the node", NULL },
    { "Monitoring, observability and health checks", "list_connections",
      cmd_list, 0, -1, ACCEPT_TABLE,
      "[--no-table-headers] [<column> ...]",
      "Lists AMQP 0.9.1 connections for the node", NULL },
    { "Monitoring, observability and health checks", "list_consumers",
      cmd_list, 0, -1, ACCEPT_TABLE,
      "[--vhost <vhost>] [--no-table-headers] [<column> ...]",
      "Lists all consumers for a vhost", NULL },
    { "Monitoring, observability and health checks", "list_exchanges",
      cmd_list, 0, -1, ACCEPT_TABLE,
      "[--vhost <vhost>] [--no-table-headers] [<column> ...]",
      "Lists exchanges", NULL },
    { "Monitoring, observability and health checks", "list_queues",
      cmd_list, 0, -1, ACCEPT_TABLE | ACCEPT_QUEUE_LIST,
      "[--vhost <vhost>] [--online] [--offline] [--local] "
      "[--no-table-headers] [<column>, ...]",
      "Lists queues and their properties",
      "--online\n\tlists only queues on online (reachable) nodes: all of "
      "them\n\n--offline\n\tlists only queues on offline (unreachable) "
      "nodes: none\n\n--local\n\tonly return queues hosted on the target "
      "node: all of them\n" },
    { "Monitoring, observability and health checks", "status", cmd_status,
      0, 0, 0, "", "Displays status of a node", NULL },

    { "Operations", "close_connection", cmd_close_connection, 2, 2, 0,
      "<connection name> <explanation>",
      "Instructs the broker to close the connection of that name",
      "<connection name>\n\tthe connection's name, as list_connections "
      "shows it in its name and\n\tpid columns (\"127.0.0.1:5000 -> "
      "127.0.0.1:5672\")\n\n<explanation>\n\treason for connection "
      "closure, which the client is told\n" },

    { "Queues", "delete_queue", cmd_delete_queue, 1, 1, ACCEPT_IF,
      "<queue_name> [--if-empty|-e] [--if-unused|-u]", "Deletes a queue",
      "<queue_name>\n\tname of the queue to delete\n\n--if-empty\n\t"
      "delete the queue if it is empty (has no messages ready for "
      "delivery)\n\n--if-unused\n\tdelete the queue only if it has no "
      "consumers\n" },
    { "Queues", "purge_queue", cmd_purge_queue, 1, 1, 0, "<queue>",
      "Purges a queue (removes all messages in it)",
      "<queue>\n\tName of the queue to purge\n" },

    { "Definitions", "export_definitions", cmd_export_definitions, 1, 1, 0,
      "<file_path | \"-\">",
      "Exports definitions in JSON",
      "<file_path>\n\tFile to write (mode 0600: it holds password hashes); "
      "\"-\" for\n\tstandard output.\n" },
    { "Definitions", "import_definitions", cmd_import_definitions, 0, 1, 0,
      "[<file_path | \"-\">]",
      "Imports definitions in JSON",
      "<file_path>\n\tFile to read; \"-\" or none for standard input. It "
      "must be valid JSON\n\tof at most 64 MiB.\n" },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

enum opt_id {
    O_HOST, O_PORT, O_USER, O_PASSWORD, O_TIMEOUT, O_NODE, O_LONGNAMES,
    O_QUIET, O_SILENT, O_VHOST, O_FORMATTER, O_NO_HEADERS, O_DESCRIPTION,
    O_TAGS, O_QUEUE_TYPE, O_PRIORITY, O_APPLY_TO, O_ONLINE, O_OFFLINE,
    O_LOCAL, O_IF_EMPTY, O_IF_UNUSED, O_OFFSET, O_COUNT, O_RATE,
    O_EXCHANGE, O_ROUTING_KEY, O_HELP
};

static const struct option_def {
    const char *name;
    char letter;                  /* 0: long form only */
    bool has_value;
    enum opt_id id;
    unsigned only;                /* 0: any command; else an ACCEPT_ bit */
} options[] = {
    { "host", 0, true, O_HOST, 0 },
    { "port", 0, true, O_PORT, 0 },
    { "username", 0, true, O_USER, 0 },
    { "password", 0, true, O_PASSWORD, 0 },
    { "timeout", 't', true, O_TIMEOUT, 0 },
    { "node", 'n', true, O_NODE, 0 },
    { "longnames", 'l', false, O_LONGNAMES, 0 },
    { "quiet", 'q', false, O_QUIET, 0 },
    { "silent", 's', false, O_SILENT, 0 },
    { "vhost", 'p', true, O_VHOST, 0 },
    { "formatter", 0, true, O_FORMATTER, 0 },
    { "no-table-headers", 0, false, O_NO_HEADERS, ACCEPT_TABLE },
    { "description", 0, true, O_DESCRIPTION, ACCEPT_VHOST_META },
    { "tags", 0, true, O_TAGS, ACCEPT_VHOST_META },
    { "default-queue-type", 0, true, O_QUEUE_TYPE, ACCEPT_VHOST_META },
    { "priority", 0, true, O_PRIORITY, ACCEPT_POLICY },
    { "apply-to", 0, true, O_APPLY_TO, ACCEPT_POLICY },
    { "online", 0, false, O_ONLINE, ACCEPT_QUEUE_LIST },
    { "offline", 0, false, O_OFFLINE, ACCEPT_QUEUE_LIST },
    { "local", 0, false, O_LOCAL, ACCEPT_QUEUE_LIST },
    { "if-empty", 'e', false, O_IF_EMPTY, ACCEPT_IF },
    { "if-unused", 'u', false, O_IF_UNUSED, ACCEPT_IF },
    { "offset", 0, true, O_OFFSET, ACCEPT_DL_LIST },
    { "count", 0, true, O_COUNT, ACCEPT_COUNT },
    { "rate", 0, true, O_RATE, ACCEPT_DL_REPLAY },
    { "exchange", 0, true, O_EXCHANGE, ACCEPT_DL_REPLAY },
    { "routing-key", 0, true, O_ROUTING_KEY, ACCEPT_DL_REPLAY },
    { "help", '?', false, O_HELP, 0 },
    { "help", 'h', false, O_HELP, 0 },
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

/* The command line, as parsed; values borrow argv. */
struct cmdline {
    const char *host, *port, *user, *password, *timeout, *node;
    const char *formatter;
    bool help;
    unsigned used;                /* ACCEPT_ bits of the options given */
    const char *bad_option;       /* first unknown option */
    const char *missing_value;    /* option given without its value */
    int npos;
    char **pos;                   /* positional arguments, command first */
};

static const char general_options[] =
    "General Options\n\n"
    "short  | long                 | description\n"
    "-------|----------------------|-----------------------------------------\n"
    "-?     | --help               | displays command help\n"
    "       | --host <host>        | management API host (ROOSTCTL_HOST,\n"
    "       |                      | default localhost)\n"
    "       | --port <port>        | management API port (ROOSTCTL_PORT,\n"
    "       |                      | default 15672)\n"
    "       | --username <user>    | API user (ROOSTCTL_USER, default guest)\n"
    "       | --password <pass>    | its password (ROOSTCTL_PASSWORD,\n"
    "       |                      | default guest)\n"
    "-n     | --node <name@host>   | rabbitmqctl's node: its host part is\n"
    "       |                      | used when --host is not given\n"
    "-t     | --timeout <n>        | seconds to wait for each answer\n"
    "       |                      | (default 30)\n"
    "-q     | --quiet              | suppress informational messages\n"
    "-s     | --silent             | suppress informational messages\n"
    "       |                      | and table header row\n"
    "-p     | --vhost <vhost>      | for commands that are scoped to a\n"
    "       |                      | virtual host, virtual host to use\n"
    "       | --formatter <f>      | table (default) or json\n";

static const char usage_prefix[] =
    "roostctl [--host <host>] [--port <port>] [--username <user>] "
    "[--password <password>] [--timeout <timeout>] [--quiet]";

static const struct command *
find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void
print_usage(FILE *f)
{
    const char *group = NULL;

    fprintf(f, "\nUsage\n\n%s <command> [<command options>]\n\n"
            "Does rabbitmqctl's work through the management HTTP API of "
            "roostd or\nRabbitMQ.\n\nAvailable commands:\n", usage_prefix);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (group == NULL || strcmp(group, commands[i].group) != 0) {
            group = commands[i].group;
            fprintf(f, "\n%s:\n\n", group);
        }
        fprintf(f, "   %-29s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(f, "\n%s\nUse 'roostctl help <command>' to learn more about a "
            "specific command\n", general_options);
}

static void
print_command_usage(FILE *f, const struct command *cmd)
{
    fprintf(f, "\nUsage\n\n%s %s%s%s\n", usage_prefix, cmd->name,
            *cmd->args ? " " : "", cmd->args);
}

static void
print_command_help(const struct command *cmd)
{
    print_command_usage(stdout, cmd);
    size_t n = strlen(cmd->summary);
    printf("\n%s%s\n\n", cmd->summary,
           n > 0 && cmd->summary[n - 1] == '.' ? "" : ".");
    if (cmd->details != NULL || ctl_has_columns(cmd->name)) {
        printf("\nArguments and Options\n\n");
        ctl_print_columns(cmd->name, stdout);
        printf("%s\n", cmd->details ? cmd->details : "");
    }
    printf("\n%s", general_options);
}

static int
cmd_help(struct ctl *c)
{
    if (c->argc == 0) {
        print_usage(stdout);
        return 0;
    }
    const struct command *cmd = find_command(c->argv[0]);
    if (cmd == NULL) {
        fprintf(stderr, "Error:\n\nCommand '%s' not found.\n", c->argv[0]);
        return EX_USAGE;
    }
    print_command_help(cmd);
    return 0;
}

/*
 * rabbitmqctl's argument errors: the problem, the arguments (the
 * --password value hidden), the command's usage; EX_USAGE.
 */
static int __attribute__((format(printf, 4, 5)))
usage_error(int argc, char **argv, const struct command *cmd,
            const char *fmt, ...)
{
    va_list ap;

    fputs("Error (argument validation): ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nArguments given:\n\t", stderr);
    for (int i = 1; i < argc; i++) {
        bool hide = i > 1 && strcmp(argv[i - 1], "--password") == 0;
        if (strncmp(argv[i], "--password=", 11) == 0)
            fputs("--password=...", stderr);
        else
            fputs(hide ? "..." : argv[i], stderr);
        fputc(i + 1 < argc ? ' ' : '\n', stderr);
    }
    if (cmd != NULL)
        print_command_usage(stderr, cmd);
    return EX_USAGE;
}

static const struct option_def *
find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strlen(options[i].name) == len &&
            strncmp(options[i].name, name, len) == 0)
            return &options[i];
    return NULL;
}

static const struct option_def *
find_short(char letter)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (options[i].letter == letter)
            return &options[i];
    return NULL;
}

static void
set_option(struct cmdline *cl, struct ctl *c, const struct option_def *o,
           const char *value)
{
    cl->used |= o->only;
    switch (o->id) {
    case O_HOST: cl->host = value; break;
    case O_PORT: cl->port = value; break;
    case O_USER: cl->user = value; break;
    case O_PASSWORD: cl->password = value; break;
    case O_TIMEOUT: cl->timeout = value; break;
    case O_NODE: cl->node = value; break;
    case O_LONGNAMES: break;      /* meaningless over HTTP */
    case O_QUIET: c->quiet = true; break;
    case O_SILENT: c->quiet = c->no_headers = true; break;
    case O_VHOST: c->vhost = value; break;
    case O_FORMATTER: cl->formatter = value; break;
    case O_NO_HEADERS: c->no_headers = true; break;
    case O_DESCRIPTION: c->description = value; break;
    case O_TAGS: c->tags = value; break;
    case O_QUEUE_TYPE: c->default_queue_type = value; break;
    case O_PRIORITY: c->priority = value; break;
    case O_APPLY_TO: c->apply_to = value; break;
    case O_ONLINE: break;         /* one node: every queue is online */
    case O_OFFLINE: c->offline = true; break;
    case O_LOCAL: break;          /* and local */
    case O_IF_EMPTY: c->if_empty = true; break;
    case O_IF_UNUSED: c->if_unused = true; break;
    case O_OFFSET: c->offset = value; break;
    case O_COUNT: c->count = value; break;
    case O_RATE: c->rate = value; break;
    case O_EXCHANGE: c->exchange = value; break;
    case O_ROUTING_KEY: c->routing_key = value; break;
    case O_HELP: cl->help = true; break;
    }
}

/*
 * Options go anywhere, as with rabbitmqctl: "--name value", "--name=value",
 * "-x value", "-xvalue"; "--" ends them (for a password that starts with
 * "-"). The rest are positional, the command first.
 */
static void
parse(int argc, char **argv, struct cmdline *cl, struct ctl *c)
{
    cl->pos = xmalloc(sizeof(char *) * (size_t)argc);
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        const struct option_def *o = NULL;
        const char *value = NULL;

        if (strcmp(a, "--") == 0) {
            while (++i < argc)
                cl->pos[cl->npos++] = argv[i];
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            cl->pos[cl->npos++] = a;
            continue;
        }
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            o = find_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
            if (eq != NULL && o != NULL && o->has_value)
                value = eq + 1;
            else if (eq != NULL)
                o = NULL;
        } else {
            o = find_short(a[1]);
            if (o != NULL && a[2] != '\0') {
                if (o->has_value)
                    value = a + 2;
                else
                    o = NULL;
            }
        }
        if (o == NULL) {
            if (cl->bad_option == NULL)
                cl->bad_option = a;
            continue;
        }
        if (o->has_value && value == NULL) {
            if (i + 1 >= argc) {
                cl->missing_value = a;
                continue;
            }
            value = argv[++i];
        }
        set_option(cl, c, o, value);
    }
}

/* A whole decimal number in [lo, hi], or -1. */
static long
parse_number(const char *s, long lo, long hi)
{
    char *end;

    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    return v;
}

static const char *
env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? v : dflt;
}

/* Check what the command line asks for; 0 or EX_USAGE. */
static int
check(int argc, char **argv, const struct cmdline *cl,
      const struct command *cmd, struct ctl *c)
{
    if (cl->bad_option != NULL)
        return usage_error(argc, argv, cmd, "Invalid options for this "
                           "command:\n%s", cl->bad_option);
    if ((cl->used & ~cmd->accepts) != 0) {
        for (size_t i = 0; i < NOPTIONS; i++)
            if (options[i].only & cl->used & ~cmd->accepts)
                return usage_error(argc, argv, cmd, "Invalid options for "
                                   "this command:\n--%s", options[i].name);
    }
    if (cl->missing_value != NULL)
        return usage_error(argc, argv, cmd, "option %s needs a value",
                           cl->missing_value);
    if (c->argc < cmd->min_args)
        return usage_error(argc, argv, cmd, "not enough arguments.");
    if (cmd->max_args >= 0 && c->argc > cmd->max_args)
        return usage_error(argc, argv, cmd, "too many arguments.");
    if (cl->formatter != NULL) {
        if (strcmp(cl->formatter, "json") == 0)
            c->json = true;
        else if (strcmp(cl->formatter, "table") != 0)
            return usage_error(argc, argv, cmd, "formatter '%s' is not "
                               "supported (json or table)", cl->formatter);
    }
    /* rabbitmqctl's --priority is an integer. */
    if (c->priority != NULL &&
        parse_number(c->priority, LONG_MIN + 1, LONG_MAX) == -1 &&
        strcmp(c->priority, "-1") != 0)
        return usage_error(argc, argv, cmd, "Invalid options for this "
                           "command:\n--priority : %s", c->priority);
    char *unknown = ctl_unknown_columns(cmd->name, c->argc, c->argv);
    if (unknown != NULL) {
        int rc = usage_error(argc, argv, cmd, "Info key(s) %s are not "
                             "supported", unknown);
        free(unknown);
        return rc;
    }
    return 0;
}

/* The host: --host, ROOSTCTL_HOST, the host part of -n name@host, or
 * localhost. */
static char *
pick_host(const struct cmdline *cl)
{
    if (cl->host != NULL)
        return xstrdup(cl->host);
    const char *env = env_or("ROOSTCTL_HOST", NULL);
    if (env != NULL)
        return xstrdup(env);
    const char *at = cl->node ? strchr(cl->node, '@') : NULL;
    if (at != NULL && at[1] != '\0')
        return xstrdup(at + 1);
    return xstrdup("localhost");
}

int
main(int argc, char **argv)
{
    struct ctl c = { .vhost = "/" };
    struct cmdline cl = { 0 };
    const struct command *cmd = NULL;
    int rc;

    /* A broker closing the connection must not kill us mid-write. */
    signal(SIGPIPE, SIG_IGN);
    parse(argc, argv, &cl, &c);

    if (cl.npos == 0) {
        if (cl.help && cl.bad_option == NULL) {
            print_usage(stdout);
            rc = 0;
        } else {
            print_usage(stderr);
            rc = EX_USAGE;
        }
        goto out;
    }
    cmd = find_command(cl.pos[0]);
    if (cmd == NULL) {
        fprintf(stderr, "\nCommand '%s' not found.\n", cl.pos[0]);
        print_usage(stderr);
        rc = EX_USAGE;
        goto out;
    }
    if (cl.help) {
        print_command_help(cmd);
        rc = 0;
        goto out;
    }
    c.command = cmd->name;
    c.argc = cl.npos - 1;
    c.argv = cl.pos + 1;
    rc = check(argc, argv, &cl, cmd, &c);
    if (rc != 0 || cmd->run == cmd_help) {
        if (rc == 0)
            rc = cmd_help(&c);
        goto out;
    }

    const char *port_s = cl.port ? cl.port : env_or("ROOSTCTL_PORT", "15672");
    long port = parse_number(port_s, 1, 65535);
    if (port < 0) {
        rc = usage_error(argc, argv, cmd, "port '%s' is not a number from "
                         "1 to 65535", port_s);
        goto out;
    }
    long timeout = CTL_DEFAULT_TIMEOUT;
    if (cl.timeout != NULL) {
        timeout = parse_number(cl.timeout, 1, INT_MAX / 1000);
        if (timeout < 0) {
            rc = usage_error(argc, argv, cmd, "timeout '%s' is not a "
                             "number of seconds", cl.timeout);
            goto out;
        }
    }
    c.timeout = (int)timeout;
    char *host = pick_host(&cl);
    c.http = http_client_new(host, (int)port,
        cl.user ? cl.user : env_or("ROOSTCTL_USER", "guest"),
        cl.password ? cl.password : env_or("ROOSTCTL_PASSWORD", "guest"),
        (int)timeout, CTL_MAX_BODY);
    free(host);
    rc = cmd->run(&c);
    http_client_free(c.http);
out:
    free(c.banner);
    free(cl.pos);
    if (fflush(stdout) != 0 && rc == 0)
        rc = EX_IOERR;
    return rc;
}
