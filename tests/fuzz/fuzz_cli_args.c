/* fuzz_cli_args — a command line through args_parse_cmd: the input is
 * split at NUL/newline bytes into argv tokens and parsed for a command
 * with every kind of option (string with choices, flag, bounded int and
 * float, int list) plus the server arguments, then as a client without
 * server arguments, then as a tool taking only two of them.  Must return a status (never crash, leak or
 * overflow a buffer); an int list never holds more than its capacity;
 * an "ambiguous option" message lists its candidates in full (the
 * ARGS_ERR_MAX buffer).  --config and every abbreviation of it are
 * dropped (they would read files). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args/args.h"
#include "util/log.h"

#define MAX_TOK 96

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_CRITICAL);
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[MAX_TOK + 2];
    int argc = 0;
    argv[argc++] = "fuzz";
    char *p = buf, *end = buf + size;
    while (p <= end && argc < MAX_TOK) {
        char *q = p;
        while (q < end && *q && *q != '\n') q++;
        *q = 0;
        size_t nl = strcspn(p, "=");
        bool config_prefix = nl >= 3 && nl <= 8 && !strncmp(p, "--config", nl);
        if (strncmp(p, "--config", 8) != 0 && !config_prefix) argv[argc++] = p;
        p = q + 1;
    }
    argv[argc] = NULL;

    long long n = 0;
    double r = 0;
    int list[4];
    int n_list = 0;
    const char *mode = NULL, *text = NULL;
    bool flag = false;
    const args_extra ex[] = {
        {.name = "--n", .metavar = "N", .ival = &n, .lo = -5, .hi = 100},
        {.name = "--r", .metavar = "R", .fval = &r, .lo = 0, .hi = ARGS_NO_MAX},
        {.name = "--list", .metavar = "B", .ilist = list, .n_ilist = &n_list, .max_ilist = 4, .lo = 1,
         .hi = 1 << 24},
        {.name = "--mode", .value = &mode, .choices = "a|b"},
        {.name = "--text", .metavar = "T", .value = &text},
        {.name = "--flag", .flag = &flag},
        {0},
    };
    static const int shown[] = {ARG_ID_tokenizer_path, ARG_ID_tokenizer_mode, ARG_COUNT};
    char err[ARGS_ERR_MAX];
    for (int pass = 0; pass < 3; pass++) {
        args_cmd cmd = {.extra = ex, .no_server_args = pass == 1, .shown = pass == 2 ? shown : NULL,
                        .only_shown = pass == 2};
        args_server a;
        int rc = args_parse_cmd(&a, &cmd, argc, argv, err, sizeof err);
        if (rc == ARGS_OK && (n_list < 0 || n_list > 4)) abort();
        if (rc == ARGS_EUSAGE && !strncmp(err, "ambiguous option: ", 18) && !strstr(err, " could match ")) abort();
        if (rc == ARGS_EUSAGE && !memchr(err, 0, sizeof err)) abort();
        args_server_free(&a);
    }
    free(buf);
    return 0;
}
