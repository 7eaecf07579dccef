/*
 * SPDX-License-Identifier: Apache-2.0
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

#include "base/roff.h"
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

    { "Streams", "stream_status", cmd_stream_status, 1, 1, ACCEPT_TABLE,
      "[--vhost <vhost>] [--no-table-headers] <stream>",
      "Displays the status of a stream (rabbitmq-streams' columns)",
      "<stream>\n\tname of the stream\n" },
    { "Streams", "list_stream_offsets", cmd_list_stream_offsets, 1, 1,
      ACCEPT_TABLE, "[--vhost <vhost>] [--no-table-headers] <stream>",
      "Lists a stream's consumer names (x-stream-consumer-name) and their "
      "committed offsets", "<stream>\n\tname of the stream\n" },
    { "Streams", "set_stream_offset", cmd_set_stream_offset, 3, 3, 0,
      "[--vhost <vhost>] <stream> <name> <offset | first | last | next>",
      "Sets a consumer name's committed offset (none of its consumers may "
      "be attached)",
      "<stream>\n\tname of the stream\n\n<name>\n\tthe consumer name "
      "(made if new)\n\n<offset>\n\tan offset, or first, last or next\n" },
    { "Streams", "delete_stream_offset", cmd_delete_stream_offset, 2, 2, 0,
      "[--vhost <vhost>] <stream> <name>",
      "Forgets a consumer name (none of its consumers may be attached)",
      "<stream>\n\tname of the stream\n\n<name>\n\tthe consumer name\n" },

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
    O_EXCHANGE, O_ROUTING_KEY, O_HELP, O_MAN_PAGE
};

/*
 * Every option: the parser, the General Options of the help and the
 * OPTIONS of roostctl(8) all read this table. The options of one
 * command ('only' set) are described with the command too.
 */
static const struct option_def {
    const char *name;
    char letter;                  /* 0: long form only */
    bool has_value;
    enum opt_id id;
    unsigned only;                /* 0: any command; else an ACCEPT_ bit */
    const char *arg;              /* the value's name in help */
    const char *help;             /* NULL: a second letter of the above */
} options[] = {
    { "help", '?', false, O_HELP, 0, NULL, "displays command help" },
    { "help", 'h', false, O_HELP, 0, NULL, NULL },
    { "host", 0, true, O_HOST, 0, "<host>",
      "management API host (ROOSTCTL_HOST, default localhost)" },
    { "port", 0, true, O_PORT, 0, "<port>",
      "management API port (ROOSTCTL_PORT, default 15672)" },
    { "username", 0, true, O_USER, 0, "<user>",
      "API user (ROOSTCTL_USER, default guest)" },
    { "password", 0, true, O_PASSWORD, 0, "<pass>",
      "its password (ROOSTCTL_PASSWORD, default guest)" },
    { "node", 'n', true, O_NODE, 0, "<name@host>",
      "rabbitmqctl's node: its host part is used when --host is not "
      "given" },
    { "longnames", 'l', false, O_LONGNAMES, 0, NULL,
      "accepted for rabbitmqctl's sake; node names do not matter over "
      "HTTP" },
    { "timeout", 't', true, O_TIMEOUT, 0, "<n>",
      "seconds to wait for each answer (default 30)" },
    { "quiet", 'q', false, O_QUIET, 0, NULL,
      "suppress informational messages" },
    { "silent", 's', false, O_SILENT, 0, NULL,
      "suppress informational messages and table header row" },
    { "vhost", 'p', true, O_VHOST, 0, "<vhost>",
      "for commands that are scoped to a virtual host, virtual host to "
      "use" },
    { "formatter", 0, true, O_FORMATTER, 0, "<f>", "table (default) or json" },
    { "man-page", 0, false, O_MAN_PAGE, 0, NULL,
      "print roostctl(8) as roff and exit" },
    { "no-table-headers", 0, false, O_NO_HEADERS, ACCEPT_TABLE, NULL,
      "list commands: no header line" },
    { "description", 0, true, O_DESCRIPTION, ACCEPT_VHOST_META, "<text>",
      "add_vhost: the vhost's description" },
    { "tags", 0, true, O_TAGS, ACCEPT_VHOST_META, "<tags>",
      "add_vhost: its tags, comma-separated" },
    { "default-queue-type", 0, true, O_QUEUE_TYPE, ACCEPT_VHOST_META,
      "<type>", "add_vhost: its default queue type" },
    { "priority", 0, true, O_PRIORITY, ACCEPT_POLICY, "<n>",
      "set_policy: the policy's priority (an integer)" },
    { "apply-to", 0, true, O_APPLY_TO, ACCEPT_POLICY, "<kind>",
      "set_policy: queues, exchanges or all" },
    { "online", 0, false, O_ONLINE, ACCEPT_QUEUE_LIST, NULL,
      "list_queues: queues on reachable nodes (all of them)" },
    { "offline", 0, false, O_OFFLINE, ACCEPT_QUEUE_LIST, NULL,
      "list_queues: queues on unreachable nodes (none)" },
    { "local", 0, false, O_LOCAL, ACCEPT_QUEUE_LIST, NULL,
      "list_queues: queues on this node (all of them)" },
    { "if-empty", 'e', false, O_IF_EMPTY, ACCEPT_IF, NULL,
      "delete_queue: only if it has no messages ready" },
    { "if-unused", 'u', false, O_IF_UNUSED, ACCEPT_IF, NULL,
      "delete_queue: only if it has no consumers" },
    { "offset", 0, true, O_OFFSET, ACCEPT_DL_LIST, "<n>",
      "list_dead_letters: position to start from" },
    { "count", 0, true, O_COUNT, ACCEPT_COUNT, "<n>",
      "list_dead_letters, replay_dead_letters: at most this many" },
    { "rate", 0, true, O_RATE, ACCEPT_DL_REPLAY, "<n>",
      "replay_dead_letters: messages a second" },
    { "exchange", 0, true, O_EXCHANGE, ACCEPT_DL_REPLAY, "<x>",
      "replay_dead_letters: exchange to send them to instead" },
    { "routing-key", 0, true, O_ROUTING_KEY, ACCEPT_DL_REPLAY, "<k>",
      "replay_dead_letters: routing key to use instead" },
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

/* The command line, as parsed; values borrow argv. */
struct cmdline {
    const char *host, *port, *user, *password, *timeout, *node;
    const char *formatter;
    bool help;
    bool man_page;
    unsigned used;                /* ACCEPT_ bits of the options given */
    const char *bad_option;       /* first unknown option */
    const char *missing_value;    /* option given without its value */
    int npos;
    char **pos;                   /* positional arguments, command first */
};

/* The help's table of the options every command takes, from options[]:
 * "short | long | description", the description wrapped in its column. */
#define DESC_WIDTH 40

static void
print_general_options(FILE *f)
{
    fputs("General Options\n\n"
          "short  | long                 | description\n"
          "-------|----------------------|-----------------------------------"
          "------\n", f);
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct option_def *o = &options[i];
        char shortname[8] = "", longname[64];

        if (o->only != 0 || o->help == NULL)
            continue;
        if (o->letter != 0)
            snprintf(shortname, sizeof(shortname), "-%c", o->letter);
        snprintf(longname, sizeof(longname), "--%s%s%s", o->name,
                 o->arg ? " " : "", o->arg ? o->arg : "");
        /* The first line with the names, the rest of the words under the
         * description column. */
        const char *w = o->help;
        bool first_line = true;
        while (*w != '\0') {
            int col = 0;
            fprintf(f, "%-6s | %-20s |", first_line ? shortname : "",
                    first_line ? longname : "");
            first_line = false;
            do {
                size_t n = strcspn(w, " ");
                if (col > 0 && col + 1 + (int)n > DESC_WIDTH)
                    break;
                fprintf(f, " %.*s", (int)n, w);
                col += 1 + (int)n;
                w += n;
                while (*w == ' ')
                    w++;
            } while (*w != '\0');
            fputc('\n', f);
        }
    }
}

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
    fputc('\n', f);
    print_general_options(f);
    fprintf(f, "\nUse 'roostctl help <command>' to learn more about a "
            "specific command\n");
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
    printf("\n");
    print_general_options(stdout);
}

/*
 * A command's "Arguments and Options": paragraphs "term\n\tdescription"
 * (the description may go on over "\n\t" lines), each a tagged
 * paragraph, indented under the command.
 */
static void
man_details(FILE *f, const char *details)
{
    fputs(".RS\n", f);
    while (*details != '\0') {
        const char *end = strstr(details, "\n\n");
        size_t len = end ? (size_t)(end - details) : strlen(details);
        size_t term = strcspn(details, "\n");
        if (term > len)
            term = len;
        char *text = xmalloc(len + 1);
        memcpy(text, details, len);
        text[len] = '\0';
        text[term] = '\0';
        fputs(".TP\n.B ", f);
        roff_line(f, text);
        /* The description: its "\n\t" continuations as spaces. */
        for (char *p = text + term + 1; p < text + len; p++)
            if (*p == '\n' || *p == '\t')
                *p = ' ';
        if (term < len)
            roff_line(f, text + term + 1 + strspn(text + term + 1, " "));
        free(text);
        details += len;
        while (*details == '\n')
            details++;
    }
    fputs(".RE\n", f);
}

/* roostctl(8), from commands[] and options[]. */
static void
print_man_page(FILE *f)
{
    const char *group = NULL;

    roff_header(f, "roostctl", "8", "System Administration",
                "rabbitmqctl's commands over the management HTTP API of "
                "Roost or RabbitMQ");
    fputs(".SH SYNOPSIS\n.B roostctl\n.RI [ options ]\n.I command\n"
          ".RI [ argument ...]\n", f);
    fputs(".SH DESCRIPTION\n.B roostctl\n", f);
    roff_line(f,
        "does the work of rabbitmqctl for the commands below, with the "
        "same names, arguments, messages, output and exit codes, so that "
        "scripts written for rabbitmqctl run unchanged. It talks to the "
        "broker's management HTTP API (RabbitMQ's paths and JSON), not to "
        "an Erlang node, and so works with roostd (whose API listens on "
        "management.tcp.port) and with RabbitMQ's management plugin alike.");
    fputs(".PP\n", f);
    roff_line(f,
        "Options may come before or after the command; -- ends them, for "
        "an argument that starts with a dash. Messages go to standard "
        "output once the broker has answered, errors to standard error. "
        "Tables are tab-separated under a header line of column names; "
        "roostctl help COMMAND lists a list command's columns.");

    fputs(".SH OPTIONS\n", f);
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct option_def *o = &options[i];
        if (o->help == NULL)
            continue;
        fputs(".TP\n", f);
        roff_option(f, o->letter, o->name, o->arg);
        /* The other letter of the same option (-? and -h). */
        for (size_t j = 0; j < NOPTIONS; j++)
            if (options[j].help == NULL && options[j].id == o->id)
                fprintf(f, ".PD 0\n.TP\n\\fB\\-%c\\fR\n.PD\n",
                        options[j].letter);
        roff_line(f, o->help);
    }

    fputs(".SH COMMANDS\n", f);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const struct command *cmd = &commands[i];
        if (group == NULL || strcmp(group, cmd->group) != 0) {
            group = cmd->group;
            roff_request(f, "SS", group);
        }
        fputs(".TP\n", f);
        roff_font(f, 'B', cmd->name);
        if (cmd->args[0] != '\0') {
            fputc(' ', f);
            roff_font(f, 'I', cmd->args);
        }
        fputc('\n', f);
        roff_line(f, cmd->summary);
        if (cmd->details != NULL)
            man_details(f, cmd->details);
    }

    fputs(".SH ENVIRONMENT\n", f);
    static const char *const env[][2] = {
        { "ROOSTCTL_HOST", "--host" }, { "ROOSTCTL_PORT", "--port" },
        { "ROOSTCTL_USER", "--username" },
        { "ROOSTCTL_PASSWORD", "--password" },
    };
    for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
        fprintf(f, ".TP\n.B %s\n", env[i][0]);
        fputs("The default of ", f);
        roff_text(f, env[i][1]);
        fputs(".\n", f);
    }
    fputs(".SH EXIT STATUS\n", f);
    roff_line(f,
        "rabbitmqctl's (sysexits): 0 on success, 64 for a bad command "
        "line, 65 for a bad argument or file or a missing vhost, 67 for "
        "no such user, 69 when the broker cannot be reached or refuses "
        "the credentials or the request, 70 for errors such as \"user "
        "already exists\", 74 when the output cannot be written, 75 on "
        "a timeout.");
    fputs(".SH SEE ALSO\n.BR roostd (8),\n.BR roost.conf (5),\n"
          ".BR rabbitmqctl (8)\n", f);
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
    case O_MAN_PAGE: cl->man_page = true; break;
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

    if (cl.man_page) {
        print_man_page(stdout);
        rc = 0;
        goto out;
    }
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
