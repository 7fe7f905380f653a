/* args — SGLang server arguments: parsing, --config YAML, --help, JSON dump.
 *
 * DESIGN: one table (args_table.h) drives everything.  `args_server` has
 * one typed field per row, named by SGLang's key, so consumers read
 * `a->context_length`, `a->model_path`.  Parsing order follows SGLang:
 * defaults, then the YAML file named by --config, then the command line
 * (the command line wins).  Arguments whose feature sglc lacks are
 * rejected with "--foo is not supported by sglc yet" (ARGS_EUSAGE, the
 * command exits 2), unless given with their default value (e.g.
 * `--tp-size 1`), which asks for what sglc does anyway.
 *
 * None: SGLang's Optional arguments default to None.  Strings and lists
 * hold NULL, ints hold ARGS_INT_NONE (INT_MIN, never a valid value: the
 * parser rejects it), floats hold NaN (test with args_float_is_none).
 *
 * Ownership: an args_server owns every string (malloc'd) and list (jansson
 * array, one reference) in it; args_server_free releases them.  Structs are
 * filled only by args_parse / args_server_init (never memcpy one). */
#ifndef SGLC_ARGS_H
#define SGLC_ARGS_H

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "args/args_table.h"

struct json_t;

#define ARGS_INT_NONE INT_MIN
static inline bool args_float_is_none(double v) { return isnan(v); }

/* Status codes.  ARGS_HELP: --help/-h was given (print args_print_help,
 * exit 0).  ARGS_EUSAGE: bad command line or config (message in err,
 * exit 2).  ARGS_EIO: config file unreadable (exit 2 as well). */
/* An err buffer of this size holds every message in full (argparse's
 * "ambiguous option" lists each candidate). */
#define ARGS_ERR_MAX 8192

enum args_status { ARGS_OK = 0, ARGS_HELP = 1, ARGS_EUSAGE = -2, ARGS_EIO = -3, ARGS_ENOMEM = -4 };

enum args_kind {
    ARGS_KIND_STR,
    ARGS_KIND_INT,
    ARGS_KIND_FLOAT,
    ARGS_KIND_BOOL,
    ARGS_KIND_CHOICE,
    ARGS_KIND_JSON,
    ARGS_KIND_LIST_STR,
    ARGS_KIND_LIST_INT,
    ARGS_KIND_LIST_FLOAT,
};

enum args_support { ARGS_STATUS_SUPPORTED, ARGS_STATUS_NOT_YET, ARGS_STATUS_IGNORED };

#define ARGS_GROUP_ENUM(id, title) ARGS_GROUP_##id,
enum args_group { ARGS_GROUPS(ARGS_GROUP_ENUM) ARGS_GROUP_COUNT };
#undef ARGS_GROUP_ENUM

#define ARGS_ID_ENUM(field, ...) ARG_ID_##field,
enum args_id { ARGS_TABLE(ARGS_ID_ENUM) ARG_COUNT };
#undef ARGS_ID_ENUM

/* Where a field's value came from. */
enum args_source { ARGS_SRC_DEFAULT = 0, ARGS_SRC_CONFIG = 1, ARGS_SRC_CLI = 2 };

#define ARGS_CTYPE_STR char *
#define ARGS_CTYPE_INT int
#define ARGS_CTYPE_FLOAT double
#define ARGS_CTYPE_BOOL bool
#define ARGS_CTYPE_CHOICE char *
#define ARGS_CTYPE_JSON char *
#define ARGS_CTYPE_LIST_STR struct json_t *
#define ARGS_CTYPE_LIST_INT struct json_t *
#define ARGS_CTYPE_LIST_FLOAT struct json_t *

#define ARGS_FIELD_DECL(field, kind, ...) ARGS_CTYPE_##kind field;
typedef struct args_server {
    ARGS_TABLE(ARGS_FIELD_DECL)
    unsigned char source[ARG_COUNT]; /* enum args_source, indexed by enum args_id */
} args_server;
#undef ARGS_FIELD_DECL

/* One row of the table, for code that walks all arguments. */
typedef struct args_spec {
    const char *field;   /* SGLang key, e.g. "context_length" */
    enum args_kind kind;
    const char *flags;   /* "--model-path --model": primary first */
    const char *def;     /* default as typed on the command line; NULL = None */
    const char *choices; /* "a|b|c" or NULL */
    enum args_group group;
    enum args_support status;
    const char *help;
    size_t offset; /* of the field in args_server */
} args_spec;

extern const args_spec args_specs[ARG_COUNT];
extern const char *const args_group_titles[ARGS_GROUP_COUNT];

/* Subcommand-specific options parsed alongside the server arguments (e.g.
 * generate's --prompt).  An array terminated by a row whose name is NULL.
 * Exactly one destination is set per row; it says the kind:
 *   value   string (borrowed from argv); `choices` "a|b" restricts it
 *   flag    no value; set to true when given
 *   ival    integer, checked against [lo, hi]
 *   fval    finite float, checked against [lo, hi]
 *   ilist   one or more integers (nargs="+"), each in [lo, hi]; at most
 *           max_ilist, count in *n_ilist
 * Bounds are checked when lo < hi; hi >= ARGS_NO_MAX reads "at least lo".
 * Conversion errors read like the server arguments' ("--x: invalid int
 * value 'y'", "--x must be in [a, b], got 'y'"), so every command words
 * them the same.  Write rows with designated initialisers and end the
 * array with {0}. */
#define ARGS_NO_MAX 1e18
typedef struct args_extra {
    const char *name;    /* "--prompt" */
    const char *metavar; /* "TEXT", or NULL for a flag */
    const char *help;
    const char **value;
    bool *flag;
    long long *ival;
    double *fval;
    int *ilist;         /* (max_ilist) */
    int *n_ilist;
    int max_ilist;
    double lo, hi;
    const char *choices; /* for value: "a|b|c", or NULL */
    const char *def;     /* default shown by --help, or NULL */
} args_extra;

/* A command's whole argument surface: its own options, and whether it
 * takes the server arguments (every command that runs the engine does, as
 * SGLang's bench_one_batch / bench_offline_throughput add ServerArgs to
 * their parser; a pure client such as bench-serving does not).
 * `shown`, when set, is the list of server arguments --help prints in
 * full for this command (those it uses), ARG_COUNT-terminated; the rest
 * are still accepted and named by a pointer to `sglc serve --help`.
 * NULL shows all of them by group, as `sglc serve --help` does.
 * only_shown: the command takes just the `shown` server arguments (a tool
 * such as `sglc tokenize` that reads --tokenizer-path with the table's
 * meaning and checks); any other is an unrecognized argument. */
typedef struct args_cmd {
    const char *usage; /* "usage: sglc generate ..." (may span lines) */
    const char *about; /* a paragraph after the usage, or NULL */
    const args_extra *extra;
    bool no_server_args;
    const int *shown; /* enum args_id values, ARG_COUNT-terminated */
    bool only_shown;
} args_cmd;

/* Fill every field with its default; source = DEFAULT.  Returns ARGS_OK
 * or ARGS_ENOMEM. */
int args_server_init(args_server *a);
/* Release owned strings and lists; the struct may be init'ed again. */
void args_server_free(args_server *a);

/* Parse argv[1..argc-1] (argv[0] is the command name) into a fresh `a`:
 * defaults, then --config FILE, then the command line, then
 * args_validate.  Options in `cmd->extra` are tried before the server
 * arguments.  Returns ARGS_OK, ARGS_HELP, or an error with a one-line
 * message in err.  Call args_server_free(a) afterwards in every case
 * (with no_server_args `a` still holds the defaults). */
int args_parse_cmd(args_server *a, const args_cmd *cmd, int argc, char **argv, char *err,
                   size_t errlen);
/* args_parse_cmd with just extra options (`extra` may be NULL). */
int args_parse(args_server *a, int argc, char **argv, const args_extra *extra, char *err,
               size_t errlen);

/* Apply one YAML document (a mapping of argument name -> value) to `a`,
 * as --config does; `origin` names the source in messages.  Values set
 * here get source CONFIG.  Returns ARGS_OK or ARGS_EUSAGE with err set. */
int args_load_config_string(args_server *a, const char *text, size_t len, const char *origin,
                            char *err, size_t errlen);
int args_load_config_file(args_server *a, const char *path, char *err, size_t errlen);

/* Set one argument by flag name ("--port" or "port"/"context-length" as in
 * YAML keys) from its text form, with the same checks as the command line.
 * `value` is ignored for BOOL ("true"/"false" accepted).  For lists, pass
 * the items.  Used by the parsers and by tests. */
int args_set(args_server *a, const char *name, const char *const *values, int n_values,
             enum args_source src, char *err, size_t errlen);

/* Set an argument to None (a YAML null), with the same support-status
 * gate; `disp` names it in messages.  BOOL has no None (ARGS_EUSAGE). */
int args_set_none(args_server *a, const args_spec *sp, const char *disp, enum args_source src,
                  char *err, size_t errlen);

/* Range checks across fields (port, fractions, sizes).  ARGS_OK or
 * ARGS_EUSAGE with err set. */
int args_validate(const args_server *a, char *err, size_t errlen);

/* SGLang's post-processing of derived defaults: tokenizer_path and
 * served_model_name default to model_path, random_seed is drawn when
 * None.  Call after args_parse, before serving. */
int args_finalize(args_server *a);

/* Every field as a new JSON object keyed by SGLang's names (what
 * /get_server_info returns for the arguments): None -> null.  Caller owns
 * the reference; NULL on allocation failure. */
struct json_t *args_to_json(const args_server *a);

/* `sglc CMD --help` text: usage line, the extra options, then every server
 * argument by group, "(not yet)" / "(ignored)" marked. */
void args_print_help(FILE *f, const char *usage_line, const args_extra *extra);
/* The same for a command: usage, about, its options, then the server
 * arguments as cmd->shown / no_server_args say. */
void args_print_cmd_help(FILE *f, const args_cmd *cmd);

/* Lookup by flag or key spelling ("--tp-size", "tp_size", "tp-size",
 * "tensor-parallel-size"); NULL when unknown. */
const args_spec *args_find(const char *name);

static inline bool args_is_explicit(const args_server *a, enum args_id id)
{
    return a->source[id] != ARGS_SRC_DEFAULT;
}

#endif
