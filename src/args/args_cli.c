/* args_cli — the command line: `sglc CMD [options]` into args_server and
 * the command's own (extra) options.
 *
 * DESIGN: two passes over argv.  Pass 0 finds --help and --config only;
 * the --config file is loaded between the passes, so the command line
 * overrides it; pass 1 converts and stores everything through the core's
 * converter (args_tval_from_text / args_apply_tval, args.c).  Tokens
 * resolve as Python's argparse resolves them (allow_abbrev=True: unique
 * prefixes, "ambiguous option" with argparse's words, which tokens are
 * values), over one parser holding -h/--help, the server flags and the
 * command's extras (resolve_token below).  A server argument the command
 * does not take (args_cmd.only_shown) is refused, never accepted and
 * ignored.  After parsing, the IGNORED arguments given are named in one
 * warning line.  Depends on args.c (args_internal.h) and args_config.c. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "args/args.h"
#include "args/args_internal.h"
#include "util/log.h"

/* Most values one option takes from argv (nargs="+"). */
#define ARGS_MAX_VALUES 512

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

/* ---- option resolution, as Python's argparse (allow_abbrev=True) ----------
 *
 * The command's parser holds, in this order: -h, --help, the server flags
 * the command takes (table order, each row's flags in order; the order
 * SGLang's add_cli_args adds them), then the command's extras (added
 * after ServerArgs, as SGLang's bench scripts do).  An extra spelled like
 * a server flag shadows it.  A token resolves as CPython's
 * ArgumentParser._parse_optional / _get_option_tuples do (3.12.7+): exact
 * string, then exact text before '=', then every option string starting
 * with the text before '=' (one: that option; several: "ambiguous option:
 * TOKEN could match A, B"); a single-dash token matches "-h" by its first
 * two characters; a token that matches nothing is a value when it is
 * empty, does not start with '-', is "-", looks like a negative number
 * (-\.?\d) or holds a space, else an unknown option. */

enum tok_kind {
    TOK_VALUE,     /* argparse 'A' */
    TOK_DASHDASH,  /* "--": everything after it is positional */
    TOK_HELP,
    TOK_EXTRA,
    TOK_SERVER,
    TOK_UNTAKEN,   /* exact server flag the command does not take */
    TOK_UNKNOWN,
    TOK_ERROR      /* ambiguous, or -h with an explicit argument: message in err */
};

typedef struct tok_match {
    enum tok_kind kind;
    const args_extra *ex;
    const args_spec *sp;
    char opt[160];       /* the option string matched ("--tp-size"), or the token's name part */
    const char *explicit_val; /* text after '=' (or after "-h"), NULL when none */
} tok_match;

/* One option string of the parser, in argparse's order. */
typedef struct cand {
    const char *s; /* with its dashes for -h/--help and extras; without for server words */
    size_t len;
    bool bare;     /* s lacks the leading "--" (a server flag word) */
    const args_extra *ex;
    const args_spec *sp;
    bool help;
} cand;

/* Is the server flag word f (no dashes) also the name of an extra? */
static bool shadowed_by_extra(const args_extra *extra, const char *f, size_t len)
{
    for (const args_extra *e = extra; e && e->name; e++)
        if (!strncmp(e->name, "--", 2) && strlen(e->name + 2) == len && !strncmp(e->name + 2, f, len)) return true;
    return false;
}

/* Call fn on every option string of cmd's parser in order; stops when fn
 * returns true (and returns true). */
static bool for_each_cand(const args_cmd *cmd, bool (*fn)(const cand *, void *), void *ctx)
{
    static const char *const help_strs[] = {"-h", "--help"};
    for (int k = 0; k < 2; k++) {
        cand c = {.s = help_strs[k], .len = strlen(help_strs[k]), .help = true};
        if (fn(&c, ctx)) return true;
    }
    for (int i = 0; i < ARG_COUNT && !cmd->no_server_args; i++) {
        const args_spec *sp = &args_specs[i];
        if (!cmd_takes(cmd, sp)) continue;
        const char *cur = sp->flags;
        size_t len;
        const char *f;
        while ((f = args_next_flag(&cur, &len))) {
            if (shadowed_by_extra(cmd->extra, f, len)) continue;
            cand c = {.s = f, .len = len, .bare = true, .sp = sp};
            if (fn(&c, ctx)) return true;
        }
    }
    for (const args_extra *e = cmd->extra; e && e->name; e++) {
        cand c = {.s = e->name, .len = strlen(e->name), .ex = e};
        if (fn(&c, ctx)) return true;
    }
    return false;
}

/* Does candidate c equal (exact) or start with (prefix) text[0..n)? */
static bool cand_match(const cand *c, const char *text, size_t n, bool prefix)
{
    size_t full = c->len + (c->bare ? 2 : 0);
    if (prefix ? full < n : full != n) return false;
    if (!c->bare) return !strncmp(c->s, text, n);
    if (n < 2) return !strncmp("--", text, n);
    return !strncmp(text, "--", 2) && !strncmp(c->s, text + 2, n - 2);
}

static void cand_text(const cand *c, char *out, size_t n)
{
    snprintf(out, n, "%s%.*s", c->bare ? "--" : "", (int)c->len, c->s);
}

typedef struct search {
    const char *text;
    size_t n;
    bool prefix;
    /* single-dash short match: candidates equal to text[0..2) */
    bool short_pass;
    int count;
    cand first;
    bool first_short; /* the first match came from the short-option rule */
    char *list;       /* "A, B, C" of all matches (argparse's message) */
    size_t list_len, list_cap;
} search;

static bool search_fn(const cand *c, void *ctx)
{
    search *s = ctx;
    bool hit = false, is_short = false;
    if (s->short_pass && cand_match(c, s->text, 2, false)) hit = is_short = true;
    else if (cand_match(c, s->text, s->n, s->prefix)) hit = true;
    if (!hit) return false;
    if (!s->prefix && !s->short_pass) {
        s->first = *c;
        s->count = 1;
        return true; /* exact: one answer */
    }
    if (s->count++ == 0) s->first = *c, s->first_short = is_short;
    if (s->list) {
        char t[160];
        cand_text(c, t, sizeof t);
        int w = snprintf(s->list + s->list_len, s->list_cap - s->list_len, "%s%s", s->list_len ? ", " : "", t);
        if (w > 0) s->list_len += (size_t)w < s->list_cap - s->list_len ? (size_t)w : s->list_cap - s->list_len - 1;
    }
    return false;
}

static void match_from_cand(tok_match *m, const cand *c)
{
    m->kind = c->help ? TOK_HELP : c->ex ? TOK_EXTRA : TOK_SERVER;
    m->ex = c->ex;
    m->sp = c->sp;
    cand_text(c, m->opt, sizeof m->opt);
}

/* An exact server flag that cmd does not take ("server argument this
 * command does not use"), for the clearer message. */
static const args_spec *untaken_flag(const args_cmd *cmd, const char *text, size_t n)
{
    if (cmd->no_server_args || n < 3 || strncmp(text, "--", 2)) return NULL;
    for (int i = 0; i < ARG_COUNT; i++) {
        const char *cur = args_specs[i].flags;
        size_t len;
        const char *f;
        while ((f = args_next_flag(&cur, &len)))
            if (len == n - 2 && !strncmp(f, text + 2, len)) return cmd_takes(cmd, &args_specs[i]) ? NULL : &args_specs[i];
    }
    return NULL;
}

/* argparse's _negative_number_matcher: '-\.?\d' at the start. */
static bool looks_negative(const char *t)
{
    if (t[0] != '-') return false;
    const char *p = t + 1;
    if (*p == '.') p++;
    return isdigit((unsigned char)*p) != 0;
}

/* Resolve one argv token (see the block comment above).  For TOK_ERROR
 * the message is in err. */
static void resolve_token(const args_cmd *cmd, const char *tok, tok_match *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    size_t tlen = strlen(tok);
    if (!tlen || tok[0] != '-') {
        m->kind = TOK_VALUE;
        return;
    }
    if (!strcmp(tok, "--")) {
        m->kind = TOK_DASHDASH;
        return;
    }
    search s = {.text = tok, .n = tlen};
    if (for_each_cand(cmd, search_fn, &s)) {
        match_from_cand(m, &s.first);
        return;
    }
    const args_spec *un = untaken_flag(cmd, tok, tlen);
    if (tlen == 1) {
        m->kind = TOK_VALUE;
        return;
    }
    const char *eq = strchr(tok, '=');
    size_t nlen = eq ? (size_t)(eq - tok) : tlen;
    if (eq) {
        search e = {.text = tok, .n = nlen};
        if (for_each_cand(cmd, search_fn, &e)) {
            match_from_cand(m, &e.first);
            m->explicit_val = eq + 1;
            return;
        }
        if (!un) un = untaken_flag(cmd, tok, nlen);
    }
    if (un) {
        m->kind = TOK_UNTAKEN;
        m->sp = un;
        snprintf(m->opt, sizeof m->opt, "%.*s", (int)(nlen < 150 ? nlen : 150), tok);
        return;
    }
    char list[ARGS_ERR_MAX - 200];
    search p = {.text = tok, .n = nlen, .prefix = true, .short_pass = tok[1] != '-', .list = list,
                .list_cap = sizeof list};
    list[0] = 0;
    for_each_cand(cmd, search_fn, &p);
    if (p.count > 1) {
        m->kind = TOK_ERROR;
        args_errf(err, errlen, "ambiguous option: %s could match %s", tok, list);
        return;
    }
    if (p.count == 1) {
        match_from_cand(m, &p.first);
        /* the short-option rule ("-hX") gives the rest of the token as
         * the explicit argument; a long prefix, the text after '=' */
        m->explicit_val = p.first_short ? (tok[2] ? tok + 2 : NULL) : eq ? eq + 1 : NULL;
        return;
    }
    if (looks_negative(tok) || strchr(tok, ' ')) {
        m->kind = TOK_VALUE;
        return;
    }
    m->kind = TOK_UNKNOWN;
    snprintf(m->opt, sizeof m->opt, "%.*s", (int)(nlen < 150 ? nlen : 150), tok);
}

/* resolve_token, then argparse's rule for -h/--help given an explicit
 * argument (CPython 3.10-3.12 consume_optional): a single-dash -hX reads
 * X as more single-dash flags, so "-hh" is the help and "-hx" is
 * "ignored explicit argument 'x'" (what is left after the h's); after
 * '=' ("-h=3") or on --help the argument is refused as a whole. */
static void resolve(const args_cmd *cmd, const char *tok, tok_match *m, char *err, size_t errlen)
{
    resolve_token(cmd, tok, m, err, errlen);
    if (m->kind != TOK_HELP || !m->explicit_val) return;
    const char *rest = m->explicit_val;
    if (tok[1] != '-' && rest == tok + 2) { /* the short-option rule, not after '=' */
        rest += strspn(rest, "h");
        if (!*rest) {
            m->explicit_val = NULL;
            return;
        }
    }
    m->kind = TOK_ERROR;
    args_errf(err, errlen, "argument -h/--help: ignored explicit argument '%s'", rest);
}

/* Is argv token t a value (argparse 'A') for this command? */
static bool is_value_token(const args_cmd *cmd, const char *t)
{
    tok_match m;
    resolve(cmd, t, &m, NULL, 0);
    return m.kind == TOK_VALUE;
}

/* Gather the values of an option from argv after index *i: the explicit
 * one (inl) if any; else for lists every following value token (argparse
 * nargs="+", "*" for the uvicorn prefixes), for other kinds the next
 * token, which must be a value.  -1 with err set when a value is missing. */
static int take_values(const args_cmd *cmd, int argc, char **argv, int *i, const char *inl, bool list,
                       bool zero_ok, const char *disp, const char **vals, int *n, char *err, size_t errlen)
{
    *n = 0;
    if (inl) {
        vals[(*n)++] = inl;
        return 0;
    }
    if (list) {
        while (*i + 1 < argc && *n < ARGS_MAX_VALUES && is_value_token(cmd, argv[*i + 1])) vals[(*n)++] = argv[++*i];
        if (*n == 0 && !zero_ok) {
            args_errf(err, errlen, "%s expects at least one value", disp);
            return -1;
        }
        return 0;
    }
    if (*i + 1 < argc && is_value_token(cmd, argv[*i + 1])) {
        vals[(*n)++] = argv[++*i];
        return 0;
    }
    args_errf(err, errlen, "%s expects a value", disp);
    return -1;
}

/* One pass over argv.  Pass 0 only looks for --help and --config, as
 * argparse consumes them in order: it stops (ARGS_OK) at the first token
 * that pass 1 will refuse as ambiguous, so `--ambiguous -h` is an error
 * and `-h --ambiguous` shows the help; values of known options are
 * skipped.  Pass 1 applies everything.  *config_path receives the
 * --config value.  With cmd->no_server_args only the extras are known. */
static int walk_argv(args_server *a, int argc, char **argv, const args_cmd *cmd, int pass,
                     const char **config_path, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *tok = argv[i];
        tok_match m;
        char rerr[ARGS_ERR_MAX];
        rerr[0] = 0;
        resolve(cmd, tok, &m, rerr, sizeof rerr);
        switch (m.kind) {
        case TOK_HELP:
            if (pass == 0) return ARGS_HELP;
            continue;
        case TOK_ERROR:
            if (pass == 0) return ARGS_OK;
            args_errf(err, errlen, "%s", rerr);
            return ARGS_EUSAGE;
        case TOK_DASHDASH: {
            if (pass == 0) return ARGS_OK; /* what follows is positional, "-h" too */
            /* argparse: all that follows is positional; sglc takes none */
            char rest[512];
            size_t used = 0;
            rest[0] = 0;
            for (int k = i; k < argc && used + 1 < sizeof rest; k++) {
                int w = snprintf(rest + used, sizeof rest - used, "%s%s", k > i ? " " : "", argv[k]);
                if (w < 0) break;
                used += (size_t)w;
            }
            args_errf(err, errlen, "unrecognized arguments: %s", rest);
            return ARGS_EUSAGE;
        }
        case TOK_VALUE:
            if (pass == 0) continue;
            args_errf(err, errlen, "unexpected argument '%s' (options start with --)", tok);
            return ARGS_EUSAGE;
        case TOK_UNTAKEN:
            if (pass == 0) continue;
            /* a server argument this command has no use for: refused, never
             * accepted and ignored */
            args_errf(err, errlen, "%s is a server argument this command does not use (see its --help; "
                              "`sglc serve` takes it)", m.opt);
            return ARGS_EUSAGE;
        case TOK_UNKNOWN: {
            if (pass == 0) continue;
            char sug[128];
            args_suggest(m.opt, strlen(m.opt), !cmd->no_server_args && !cmd->only_shown, cmd->extra, sug,
                         sizeof sug);
            args_errf(err, errlen, "unrecognized argument '%s'%s", m.opt, sug);
            return ARGS_EUSAGE;
        }
        case TOK_EXTRA: {
            const args_extra *ex = m.ex;
            const char *vals[ARGS_MAX_VALUES];
            int n = 0;
            if (ex->ilist || args_extra_takes_value(ex)) {
                if (take_values(cmd, argc, argv, &i, m.explicit_val, ex->ilist != NULL, false, ex->name, vals, &n,
                                err, errlen))
                    return pass == 0 ? ARGS_OK : ARGS_EUSAGE;
            } else if (m.explicit_val) {
                if (pass == 0) return ARGS_OK;
                args_errf(err, errlen, "%s takes no value", ex->name);
                return ARGS_EUSAGE;
            }
            if (pass == 1) {
                int rc = extra_store(ex, vals, n, err, errlen);
                if (rc != ARGS_OK) return rc;
            }
            continue;
        }
        case TOK_SERVER:
            break;
        }
        const args_spec *sp = m.sp;
        const char *disp = m.opt;
        const char *vals[ARGS_MAX_VALUES];
        int n = 0;
        if (sp->kind == ARGS_KIND_BOOL) {
            if (m.explicit_val) {
                if (pass == 0) return ARGS_OK;
                args_errf(err, errlen, "%s takes no value", disp);
                return ARGS_EUSAGE;
            }
        } else {
            /* SGLang's nargs="*" lists take zero values (to override a --config value) */
            bool star = sp == &args_specs[ARG_ID_uvicorn_access_log_exclude_prefixes];
            if (take_values(cmd, argc, argv, &i, m.explicit_val, args_kind_is_list(sp->kind), star, disp, vals, &n,
                            err, errlen))
                return pass == 0 ? ARGS_OK : ARGS_EUSAGE;
        }
        if (sp == &args_specs[ARG_ID_config] && pass == 0) {
            if (*config_path) {
                args_errf(err, errlen, "--config given more than once");
                return ARGS_EUSAGE;
            }
            *config_path = vals[0];
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

/* Is this process a tensor-parallel rank other than 0?  Ranks re-parse
 * the same command line (src/cli/cli_dist.c sets SGLC_DIST_RANK in the
 * ranks it starts; mpirun sets OMPI_COMM_WORLD_RANK / PMI_RANK). */
static bool secondary_rank(void)
{
    static const char *const vars[] = {"SGLC_DIST_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v && strcmp(v, "0")) return true;
    }
    return false;
}

/* One warning line naming every IGNORED argument given (command line or
 * --config), unless --log-level asks for errors only; rank 0 alone says
 * it.  Their --help entries say why each has no effect. */
static void warn_ignored(const args_server *a)
{
    if (a->log_level && (!strcmp(a->log_level, "error") || !strcmp(a->log_level, "critical"))) return;
    if (secondary_rank()) return;
    char names[1024];
    size_t used = 0;
    int count = 0;
    names[0] = 0;
    for (int id = 0; id < ARG_COUNT; id++) {
        const args_spec *sp = &args_specs[id];
        if (sp->status != ARGS_STATUS_IGNORED || a->source[id] == ARGS_SRC_DEFAULT) continue;
        int w = snprintf(names + used, sizeof names - used, "%s%.*s", count ? ", " : "",
                         (int)strcspn(sp->flags, " "), sp->flags);
        if (w < 0 || (size_t)w >= sizeof names - used) break;
        used += (size_t)w;
        count++;
    }
    if (count)
        log_warn("accepted with no effect on this CPU build (see --help for why): %s", names);
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
    rc = args_validate(a, err, errlen);
    if (rc == ARGS_OK) warn_ignored(a);
    return rc;
}

int args_parse(args_server *a, int argc, char **argv, const args_extra *extra, char *err,
               size_t errlen)
{
    const args_cmd cmd = {.extra = extra};
    return args_parse_cmd(a, &cmd, argc, argv, err, errlen);
}
