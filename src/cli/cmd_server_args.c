/* cmd_server_args — `sglc server-args ARGS`: parse the server arguments
 * exactly as `sglc serve` will (defaults, --config, command line), apply
 * SGLang's derived defaults, and print the effective arguments as the JSON
 * object /get_server_info reports.  Useful to check a command line or a
 * config file without loading a model, and for tests. */
#include <jansson.h>
#include <stdio.h>

#include "args/args.h"
#include "cli/cli.h"
#include "util/log.h"

int cmd_server_args(int argc, char **argv)
{
    bool compact = false;
    const args_extra extra[] = {
        {.name = "--compact", .help = "Print the JSON on one line.", .flag = &compact},
        {0},
    };
    args_server a;
    char err[ARGS_ERR_MAX];
    int rc = args_parse(&a, argc, argv, extra, err, sizeof err);
    if (rc == ARGS_HELP) {
        args_print_help(stdout, "usage: sglc server-args [SERVER ARGS] [--compact]", extra);
        args_server_free(&a);
        return 0;
    }
    if (rc != ARGS_OK) {
        fprintf(stderr, "sglc server-args: error: %s\n", err);
        args_server_free(&a);
        return 2;
    }
    int status = 1;
    json_t *j = NULL;
    if (args_finalize(&a) == ARGS_OK && (j = args_to_json(&a))) {
        size_t flags = JSON_REAL_PRECISION(17) | (compact ? JSON_COMPACT : JSON_INDENT(2));
        if (json_dumpf(j, stdout, flags) == 0) {
            fputc('\n', stdout);
            status = 0;
        }
    } else {
        log_error("out of memory");
    }
    json_decref(j);
    args_server_free(&a);
    return status;
}
