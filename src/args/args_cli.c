/* args_cli — the command line: `sglc CMD [options]` into args_server and
 * the command's own (extra) options.
 *
 * DESIGN: two passes over argv.  Pass 0 finds --help and --config only;
 * the --config file is loaded between the passes, so the command line
 * overrides it; pass 1 converts and stores everything through the core's
 * converter (args_tval_from_text / args_apply_tval, args.c).  A
 * subcommand's extra options are matched first; a server argument the
 * command does not take (args_cmd.only_shown) is refused, never accepted
 * and ignored.  Depends on args.c (args_internal.h) and args_config.c. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "args/args.h"
#include "args/args_internal.h"
#include "util/log.h"

/* Command-line lookup: exact spelling of one of the flags, "--x-y". */
static const args_spec *find_cli_flag(const char *tok, size_t toklen)
{
    if (toklen < 3 || tok[0] != '-' || tok[1] != '-') return NULL;
    for (int i = 0; i < ARG_COUNT; i++) {
        const char *cur = args_specs[i].flags;
        size_t len;
        const char *f;
        while ((f = args_next_flag(&cur, &len)))
            if (len == toklen - 2 && !strncmp(f, tok + 2, len)) return &args_specs[i];
    }
    return NULL;
}

/* "--x must be in [lo, hi], got 'v'" (or "at least lo"). */
static void extra_range_err(const args_extra *e, const char *v, char *err, size_t errlen)
{
    if (e->hi >= ARGS_NO_MAX) args_errf(err, errlen, "%s must be at least %.17g, got '%s'", e->name, e->lo, v);
    else args_errf(err, errlen, "%s must be in [%.17g, %.17g], got '%s'", e->name, e->lo, e->hi, v);
}

static bool extra_in_range(const args_extra *e, double x)
{
    return !(e->lo < e->hi) || (x >= e->lo && x <= e->hi);
}

static bool parse_ll(const char *s, long long *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

/* Convert and store the n values of extra option e (pass 1). */
static int extra_store(const args_extra *e, const char *const *vals, int n, char *err, size_t errlen)
{
    if (e->flag) {
        *e->flag = true;
        return ARGS_OK;
    }
    if (e->ilist) {
        if (n > e->max_ilist) {
            args_errf(err, errlen, "%s takes at most %d values", e->name, e->max_ilist);
            return ARGS_EUSAGE;
        }
        for (int k = 0; k < n; k++) {
            long long x;
            if (!parse_ll(vals[k], &x) || x < INT_MIN || x > INT_MAX) {
                args_errf(err, errlen, "%s: invalid int value '%s'", e->name, vals[k]);
                return ARGS_EUSAGE;
            }
            if (!extra_in_range(e, (double)x)) {
                extra_range_err(e, vals[k], err, errlen);
                return ARGS_EUSAGE;
            }
            e->ilist[k] = (int)x;
        }
        if (e->n_ilist) *e->n_ilist = n;
        return ARGS_OK;
    }
    const char *v = vals[0];
    if (e->ival) {
        long long x;
        if (!parse_ll(v, &x)) {
            args_errf(err, errlen, "%s: invalid int value '%s'", e->name, v);
            return ARGS_EUSAGE;
        }
        if (!extra_in_range(e, (double)x)) {
            extra_range_err(e, v, err, errlen);
            return ARGS_EUSAGE;
        }
        *e->ival = x;
        return ARGS_OK;
    }
    if (e->fval) {
        double x;
        if (!args_parse_float(v, &x)) {
            args_errf(err, errlen, "%s: invalid float value '%s'", e->name, v);
            return ARGS_EUSAGE;
        }
        if (!extra_in_range(e, x)) {
            extra_range_err(e, v, err, errlen);
            return ARGS_EUSAGE;
        }
        *e->fval = x;
        return ARGS_OK;
    }
    if (e->choices && !args_choice_ok(e->choices, v)) {
        char ch[512];
        args_choices_display(e->choices, ch, sizeof ch);
        args_errf(err, errlen, "%s: invalid choice '%s' (choose from %s)", e->name, v, ch);
        return ARGS_EUSAGE;
    }
    if (e->value) *e->value = v;
    return ARGS_OK;
}



/* May this command take server argument sp on its command line? */
static bool cmd_takes(const args_cmd *cmd, const args_spec *sp)
{
    if (cmd->no_server_args) return false;
    return !cmd->only_shown || (cmd->shown && args_id_listed(cmd->shown, (int)(sp - args_specs)));
}

/* One pass over argv.  Pass 0 only looks for --help and --config (values
 * of known options are skipped so `--prompt --help` is a prompt); pass 1
 * applies everything.  *config_path receives the --config value.  With
 * !server only the extra options are known. */
static int walk_argv(args_server *a, int argc, char **argv, const args_cmd *cmd, int pass,
                     const char **config_path, char *err, size_t errlen)
{
    const args_extra *extra = cmd->extra;
    const bool server = !cmd->no_server_args;
    for (int i = 1; i < argc; i++) {
        const char *tok = argv[i];
        if (!strcmp(tok, "-h") || !strcmp(tok, "--help")) {
            if (pass == 0) return ARGS_HELP;
            continue;
        }
        if (tok[0] != '-' || !tok[1] || !strcmp(tok, "--") || tok[1] != '-') {
            if (pass == 0) continue;
            args_errf(err, errlen, "unexpected argument '%s' (options start with --)", tok);
            return ARGS_EUSAGE;
        }
        const char *eq = strchr(tok, '=');
        size_t nlen = eq ? (size_t)(eq - tok) : strlen(tok);
        const char *inl = eq ? eq + 1 : NULL;

        /* subcommand extras first */
        const args_extra *ex = NULL;
        for (const args_extra *e = extra; e && e->name; e++)
            if (strlen(e->name) == nlen && !strncmp(e->name, tok, nlen)) ex = e;
        if (ex) {
            const char *vals[512];
            int n = 0;
            vals[0] = NULL;
            if (ex->ilist) {
                if (inl) {
                    vals[n++] = inl;
                } else {
                    while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && strcmp(argv[i + 1], "-h") &&
                           n < 512)
                        vals[n++] = argv[++i];
                }
                if (n == 0) {
                    args_errf(err, errlen, "%s expects at least one value", ex->name);
                    return ARGS_EUSAGE;
                }
            } else if (args_extra_takes_value(ex)) {
                if (inl) {
                    vals[n++] = inl;
                } else {
                    if (i + 1 >= argc) {
                        args_errf(err, errlen, "%s expects a value", ex->name);
                        return ARGS_EUSAGE;
                    }
                    vals[n++] = argv[++i];
                }
            } else if (inl) {
                args_errf(err, errlen, "%s takes no value", ex->name);
                return ARGS_EUSAGE;
            }
            if (pass == 1) {
                int rc = extra_store(ex, vals, n, err, errlen);
                if (rc != ARGS_OK) return rc;
            }
            continue;
        }

        const args_spec *sp = server ? find_cli_flag(tok, nlen) : NULL;
        char disp[160];
        snprintf(disp, sizeof disp, "%.*s", (int)(nlen < 150 ? nlen : 150), tok);
        if (sp && !cmd_takes(cmd, sp)) {
            if (pass == 0) continue;
            /* a server argument this command has no use for: refused, never
             * accepted and ignored */
            args_errf(err, errlen, "%s is a server argument this command does not use (see its --help; "
                              "`sglc serve` takes it)", disp);
            return ARGS_EUSAGE;
        }
        if (!sp) {
            if (pass == 0) continue;
            char sug[128];
            args_suggest(tok, nlen, server && !cmd->only_shown, extra, sug, sizeof sug);
            args_errf(err, errlen, "unrecognized argument '%s'%s", disp, sug);
            return ARGS_EUSAGE;
        }
        const char *vals[512];
        int n = 0;
        if (sp->kind == ARGS_KIND_BOOL) {
            if (inl) {
                args_errf(err, errlen, "%s takes no value", disp);
                return ARGS_EUSAGE;
            }
        } else if (args_kind_is_list(sp->kind)) {
            if (inl) {
                vals[n++] = inl;
            } else {
                while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && strcmp(argv[i + 1], "-h") &&
                       n < 512)
                    vals[n++] = argv[++i];
            }
            /* SGLang's nargs="*" lists take zero values (to override a --config value) */
            if (n == 0 && sp != &args_specs[ARG_ID_uvicorn_access_log_exclude_prefixes]) {
                args_errf(err, errlen, "%s expects at least one value", disp);
                return ARGS_EUSAGE;
            }
        } else {
            if (inl) {
                vals[n++] = inl;
            } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
                vals[n++] = argv[++i];
            } else {
                args_errf(err, errlen, "%s expects a value", disp);
                return ARGS_EUSAGE;
            }
        }
        if (sp == &args_specs[ARG_ID_config]) {
            if (pass == 0) {
                if (*config_path) {
                    args_errf(err, errlen, "--config given more than once");
                    return ARGS_EUSAGE;
                }
                *config_path = vals[0];
            }
        }
        if (pass == 0) continue;
        args_tval v;
        int rc = args_tval_from_text(sp, disp, vals, n, &v, err, errlen);
        if (rc != ARGS_OK) return rc;
        rc = args_apply_tval(a, sp, disp, &v, ARGS_SRC_CLI, err, errlen);
        if (rc != ARGS_OK) return rc;
    }
    return ARGS_OK;
}

int args_parse_cmd(args_server *a, const args_cmd *cmd, int argc, char **argv, char *err,
                   size_t errlen)
{
    if (err && errlen) err[0] = 0;
    int rc = args_server_init(a);
    if (rc != ARGS_OK) {
        args_errf(err, errlen, "cannot initialise the argument defaults");
        return rc;
    }
    const char *config_path = NULL;
    rc = walk_argv(a, argc, argv, cmd, 0, &config_path, err, errlen);
    if (rc != ARGS_OK) return rc;
    if (config_path) {
        rc = args_load_config_file(a, config_path, err, errlen);
        if (rc != ARGS_OK) return rc;
    }
    rc = walk_argv(a, argc, argv, cmd, 1, &config_path, err, errlen);
    if (rc != ARGS_OK) return rc;
    /* a --config file is usually written for `sglc serve`: keys this
     * command does not use are named once, then have no effect */
    if (config_path && cmd->only_shown)
        for (int id = 0; id < ARG_COUNT; id++)
            if (a->source[id] == ARGS_SRC_CONFIG && !cmd_takes(cmd, &args_specs[id]))
                log_warn("--config %s: '%s' is not used by this command", config_path, args_specs[id].field);
    return args_validate(a, err, errlen);
}

int args_parse(args_server *a, int argc, char **argv, const args_extra *extra, char *err,
               size_t errlen)
{
    const args_cmd cmd = {.extra = extra};
    return args_parse_cmd(a, &cmd, argc, argv, err, errlen);
}
