/* args — parsing, defaults, validation, help and JSON dump of the server
 * arguments, all driven by the table in args_table.h.
 *
 * DESIGN: every value, whether a default from the table, a YAML scalar or
 * a command-line token, goes through the same converter (tval_from_text),
 * so defaults are checked by the same rules as user input and the
 * "not supported yet unless equal to the default" test compares typed
 * values, not spellings ("--tp-size 01" equals the default 1).  Fields are
 * reached through offsetof() from the spec row; the struct itself is
 * generated from the table, so a new row needs no code here. */
#include "args/args.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

#define ARGS_SPEC_ROW(field_, kind_, flags_, def_, choices_, group_, status_, help_)             \
    {#field_,         ARGS_KIND_##kind_,       flags_, def_, choices_, ARGS_GROUP_##group_, \
     ARGS_STATUS_##status_, help_, offsetof(args_server, field_)},
const args_spec args_specs[ARG_COUNT] = {ARGS_TABLE(ARGS_SPEC_ROW)};
#undef ARGS_SPEC_ROW

#define ARGS_GROUP_TITLE(id, title) title,
const char *const args_group_titles[ARGS_GROUP_COUNT] = {ARGS_GROUPS(ARGS_GROUP_TITLE)};
#undef ARGS_GROUP_TITLE

/* A typed value in flight; owns s and l. */
typedef struct tval {
    bool none;
    char *s;
    int i;
    double f;
    bool b;
    json_t *l;
} tval;

static void tval_free(tval *v)
{
    free(v->s);
    json_decref(v->l);
    memset(v, 0, sizeof *v);
}

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static bool kind_is_list(enum args_kind k)
{
    return k == ARGS_KIND_LIST_STR || k == ARGS_KIND_LIST_INT || k == ARGS_KIND_LIST_FLOAT;
}

static bool kind_is_string(enum args_kind k)
{
    return k == ARGS_KIND_STR || k == ARGS_KIND_CHOICE || k == ARGS_KIND_JSON;
}

/* Full-string base-10 int; rejects INT_MIN (the None sentinel). */
static bool parse_int(const char *s, int *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v <= INT_MIN || v > INT_MAX) return false;
    *out = (int)v;
    return true;
}

static bool parse_float(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* YAML 1.1 / Python spellings of booleans. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return 1;
        if (!strcasecmp(s, no[i])) return 0;
    }
    return -1;
}

/* Is `s` one of "a|b|c"? */
static bool choice_ok(const char *choices, const char *s)
{
    size_t n = strlen(s);
    const char *p = choices;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, s, n)) return true;
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

static void choices_display(const char *choices, char *out, size_t n)
{
    snprintf(out, n, "{%s}", choices);
    for (char *c = out; *c; c++)
        if (*c == '|') *c = ',';
}

/* Convert one scalar list item. */
static json_t *list_item(enum args_kind k, const char *s)
{
    if (k == ARGS_KIND_LIST_STR) return json_string(s);
    if (k == ARGS_KIND_LIST_INT) {
        int v;
        return parse_int(s, &v) ? json_integer(v) : NULL;
    }
    double f;
    return parse_float(s, &f) ? json_real(f) : NULL;
}

/* Convert the text form of a value (n items for lists, 1 otherwise; for
 * BOOL n == 0 means "flag present") into `out`.  `disp` names the flag in
 * messages. */
static int tval_from_text(const args_spec *sp, const char *disp, const char *const *vals, int n,
                          tval *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (sp->kind == ARGS_KIND_BOOL) {
        if (n == 0) {
            out->b = true;
            return ARGS_OK;
        }
        int b = n == 1 && vals[0] ? parse_bool(vals[0]) : -1;
        if (b < 0) {
            errf(err, errlen, "%s: expected true or false, got '%s'", disp, n >= 1 && vals[0] ? vals[0] : "");
            return ARGS_EUSAGE;
        }
        out->b = b;
        return ARGS_OK;
    }
    if (kind_is_list(sp->kind)) {
        out->l = json_array();
        if (!out->l) return ARGS_ENOMEM;
        for (int i = 0; i < n; i++) {
            json_t *it = vals[i] ? list_item(sp->kind, vals[i]) : NULL;
            if (!it) {
                errf(err, errlen, "%s: invalid %s list item '%s'", disp,
                     sp->kind == ARGS_KIND_LIST_INT ? "int" : "float", vals[i] ? vals[i] : "");
                tval_free(out);
                return ARGS_EUSAGE;
            }
            json_array_append_new(out->l, it);
        }
        return ARGS_OK;
    }
    if (n != 1 || !vals[0]) {
        errf(err, errlen, "%s expects exactly one value", disp);
        return ARGS_EUSAGE;
    }
    const char *s = vals[0];
    if (sp->choices && !choice_ok(sp->choices, s)) {
        char ch[512];
        choices_display(sp->choices, ch, sizeof ch);
        errf(err, errlen, "%s: invalid choice '%s' (choose from %s)", disp, s, ch);
        return ARGS_EUSAGE;
    }
    switch (sp->kind) {
    case ARGS_KIND_INT:
        if (!parse_int(s, &out->i)) {
            errf(err, errlen, "%s: invalid int value '%s'", disp, s);
            return ARGS_EUSAGE;
        }
        return ARGS_OK;
    case ARGS_KIND_FLOAT:
        if (!parse_float(s, &out->f)) {
            errf(err, errlen, "%s: invalid float value '%s'", disp, s);
            return ARGS_EUSAGE;
        }
        return ARGS_OK;
    case ARGS_KIND_JSON: {
        json_error_t je;
        json_t *j = json_loads(s, JSON_DECODE_ANY, &je);
        if (!j) {
            errf(err, errlen, "%s: invalid JSON (%s at line %d column %d)", disp, je.text, je.line,
                 je.column);
            return ARGS_EUSAGE;
        }
        json_decref(j);
        break;
    }
    default:
        break;
    }
    out->s = strdup(s);
    return out->s ? ARGS_OK : ARGS_ENOMEM;
}

/* The table default as a typed value; defaults are checked by the unit
 * tests, so failure here means a broken table row. */
static int tval_default(const args_spec *sp, tval *out)
{
    memset(out, 0, sizeof *out);
    if (!sp->def) {
        out->none = true;
        return ARGS_OK;
    }
    if (kind_is_list(sp->kind)) {
        out->l = json_loads(sp->def, 0, NULL);
        return json_is_array(out->l) ? ARGS_OK : ARGS_EUSAGE;
    }
    return tval_from_text(sp, sp->field, &sp->def, 1, out, NULL, 0);
}

static bool tval_equal(const args_spec *sp, const tval *x, const tval *y)
{
    switch (sp->kind) {
    case ARGS_KIND_BOOL: return x->b == y->b;
    case ARGS_KIND_INT: return x->none == y->none && (x->none || x->i == y->i);
    case ARGS_KIND_FLOAT: return x->none == y->none && (x->none || x->f == y->f);
    case ARGS_KIND_LIST_STR:
    case ARGS_KIND_LIST_INT:
    case ARGS_KIND_LIST_FLOAT:
        if (!x->l || !y->l) return !x->l && !y->l;
        return json_equal(x->l, y->l);
    default:
        if (!x->s || !y->s) return !x->s && !y->s;
        return !strcmp(x->s, y->s);
    }
}

/* Move `v` into the field (freeing what was there). */
static void field_store(args_server *a, const args_spec *sp, tval *v)
{
    char *base = (char *)a + sp->offset;
    switch (sp->kind) {
    case ARGS_KIND_BOOL: *(bool *)base = v->b; break;
    case ARGS_KIND_INT: *(int *)base = v->none ? ARGS_INT_NONE : v->i; break;
    case ARGS_KIND_FLOAT: *(double *)base = v->none ? NAN : v->f; break;
    case ARGS_KIND_LIST_STR:
    case ARGS_KIND_LIST_INT:
    case ARGS_KIND_LIST_FLOAT:
        json_decref(*(json_t **)base);
        *(json_t **)base = v->l;
        v->l = NULL;
        break;
    default:
        free(*(char **)base);
        *(char **)base = v->s;
        v->s = NULL;
        break;
    }
    tval_free(v);
}

/* Apply a converted value: the support-status gate, then store. */
static int apply_tval(args_server *a, const args_spec *sp, const char *disp, tval *v,
                      enum args_source src, char *err, size_t errlen)
{
    if (sp->status == ARGS_STATUS_NOT_YET) {
        tval d;
        int rc = tval_default(sp, &d);
        bool same = rc == ARGS_OK && tval_equal(sp, v, &d);
        tval_free(&d);
        if (!same) {
            errf(err, errlen, "%s is not supported by sglc yet", disp);
            tval_free(v);
            return ARGS_EUSAGE;
        }
    } else if (sp->status == ARGS_STATUS_IGNORED) {
        log_warn("%s is accepted but has no effect: %s", disp, sp->help);
    }
    field_store(a, sp, v);
    a->source[sp - args_specs] = (unsigned char)src;
    return ARGS_OK;
}

int args_server_init(args_server *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < ARG_COUNT; i++) {
        const args_spec *sp = &args_specs[i];
        tval v;
        int rc = tval_default(sp, &v);
        if (rc != ARGS_OK) {
            log_error("bad default '%s' for %s in args_table.h", sp->def ? sp->def : "", sp->field);
            tval_free(&v);
            args_server_free(a);
            return rc == ARGS_ENOMEM ? ARGS_ENOMEM : ARGS_EUSAGE;
        }
        field_store(a, sp, &v);
    }
    return ARGS_OK;
}

void args_server_free(args_server *a)
{
    for (int i = 0; i < ARG_COUNT; i++) {
        const args_spec *sp = &args_specs[i];
        char *base = (char *)a + sp->offset;
        if (kind_is_string(sp->kind)) {
            free(*(char **)base);
            *(char **)base = NULL;
        } else if (kind_is_list(sp->kind)) {
            json_decref(*(json_t **)base);
            *(json_t **)base = NULL;
        }
    }
}

/* Does `name` (without leading dashes, any of '-'/'_') match the flag
 * word `flag` (without dashes)?  Underscores and dashes are equivalent. */
static bool name_eq(const char *name, const char *flag, size_t flen)
{
    size_t i = 0;
    for (; i < flen && name[i]; i++) {
        char c = name[i] == '_' ? '-' : name[i];
        char d = flag[i] == '_' ? '-' : flag[i];
        if (c != d) return false;
    }
    return i == flen && !name[i];
}

/* Iterate the flags of a spec: returns the next flag word (without "--")
 * and its length, or NULL. */
static const char *next_flag(const char **cursor, size_t *len)
{
    const char *p = *cursor;
    while (*p == ' ') p++;
    if (!*p) return NULL;
    while (*p == '-') p++;
    const char *e = p;
    while (*e && *e != ' ') e++;
    *len = (size_t)(e - p);
    *cursor = e;
    return p;
}

const args_spec *args_find(const char *name)
{
    if (!name) return NULL;
    while (*name == '-') name++;
    if (!*name) return NULL;
    for (int i = 0; i < ARG_COUNT; i++) {
        const args_spec *sp = &args_specs[i];
        if (name_eq(name, sp->field, strlen(sp->field))) return sp;
        const char *cur = sp->flags;
        size_t len;
        const char *f;
        while ((f = next_flag(&cur, &len)))
            if (name_eq(name, f, len)) return sp;
    }
    return NULL;
}

/* Command-line lookup: exact spelling of one of the flags, "--x-y". */
static const args_spec *find_cli_flag(const char *tok, size_t toklen)
{
    if (toklen < 3 || tok[0] != '-' || tok[1] != '-') return NULL;
    for (int i = 0; i < ARG_COUNT; i++) {
        const char *cur = args_specs[i].flags;
        size_t len;
        const char *f;
        while ((f = next_flag(&cur, &len)))
            if (len == toklen - 2 && !strncmp(f, tok + 2, len)) return &args_specs[i];
    }
    return NULL;
}

static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    if (na > 80 || nb > 80) return 999;
    size_t row[81];
    for (size_t j = 0; j <= nb; j++) row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* "; did you mean '--x'?" for a near miss among the server flags (when
 * `server`) and the extra options, else "". */
static void suggest(const char *name, size_t nlen, bool server, const args_extra *extra, char *out,
                    size_t n)
{
    out[0] = 0;
    while (nlen && *name == '-') name++, nlen--;
    size_t limit = nlen / 4 > 2 ? nlen / 4 : 2;
    size_t best = 999;
    const char *bf = NULL;
    size_t blen = 0;
    for (int i = 0; server && i < ARG_COUNT; i++) {
        const char *cur = args_specs[i].flags;
        size_t len;
        const char *f;
        while ((f = next_flag(&cur, &len))) {
            if (len > nlen + limit || nlen > len + limit) continue; /* distance > limit anyway */
            size_t d = edit_distance(name, nlen, f, len);
            if (d < best) best = d, bf = f, blen = len;
        }
    }
    for (const args_extra *e = extra; e && e->name; e++) {
        const char *f = e->name + strspn(e->name, "-");
        size_t d = edit_distance(name, nlen, f, strlen(f));
        if (d < best) best = d, bf = f, blen = strlen(f);
    }
    if (bf && best <= limit) snprintf(out, n, "; did you mean '--%.*s'?", (int)blen, bf);
}

int args_set(args_server *a, const char *name, const char *const *values, int n_values,
             enum args_source src, char *err, size_t errlen)
{
    const args_spec *sp = args_find(name);
    if (!sp) {
        char sug[128];
        suggest(name, strlen(name), true, NULL, sug, sizeof sug);
        errf(err, errlen, "unrecognized argument '%s'%s", name, sug);
        return ARGS_EUSAGE;
    }
    char disp[160];
    const char *bare = name + strspn(name, "-");
    snprintf(disp, sizeof disp, "--%s", bare);
    for (char *c = disp; *c; c++)
        if (*c == '_') *c = '-';
    tval v;
    int rc = tval_from_text(sp, disp, values, n_values, &v, err, errlen);
    if (rc != ARGS_OK) return rc;
    return apply_tval(a, sp, disp, &v, src, err, errlen);
}

int args_set_none(args_server *a, const args_spec *sp, const char *disp, enum args_source src,
                  char *err, size_t errlen)
{
    if (sp->kind == ARGS_KIND_BOOL) {
        errf(err, errlen, "%s: expected true or false, got null", disp);
        return ARGS_EUSAGE;
    }
    tval v;
    memset(&v, 0, sizeof v);
    v.none = true;
    return apply_tval(a, sp, disp, &v, src, err, errlen);
}

/* "--x must be in [lo, hi], got 'v'" (or "at least lo"). */
static void extra_range_err(const args_extra *e, const char *v, char *err, size_t errlen)
{
    if (e->hi >= ARGS_NO_MAX) errf(err, errlen, "%s must be at least %.17g, got '%s'", e->name, e->lo, v);
    else errf(err, errlen, "%s must be in [%.17g, %.17g], got '%s'", e->name, e->lo, e->hi, v);
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
            errf(err, errlen, "%s takes at most %d values", e->name, e->max_ilist);
            return ARGS_EUSAGE;
        }
        for (int k = 0; k < n; k++) {
            long long x;
            if (!parse_ll(vals[k], &x) || x < INT_MIN || x > INT_MAX) {
                errf(err, errlen, "%s: invalid int value '%s'", e->name, vals[k]);
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
            errf(err, errlen, "%s: invalid int value '%s'", e->name, v);
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
        if (!parse_float(v, &x)) {
            errf(err, errlen, "%s: invalid float value '%s'", e->name, v);
            return ARGS_EUSAGE;
        }
        if (!extra_in_range(e, x)) {
            extra_range_err(e, v, err, errlen);
            return ARGS_EUSAGE;
        }
        *e->fval = x;
        return ARGS_OK;
    }
    if (e->choices && !choice_ok(e->choices, v)) {
        char ch[512];
        choices_display(e->choices, ch, sizeof ch);
        errf(err, errlen, "%s: invalid choice '%s' (choose from %s)", e->name, v, ch);
        return ARGS_EUSAGE;
    }
    if (e->value) *e->value = v;
    return ARGS_OK;
}

static bool extra_takes_value(const args_extra *e) { return e->metavar || e->value || e->ival || e->fval || e->ilist; }

/* One pass over argv.  Pass 0 only looks for --help and --config (values
 * of known options are skipped so `--prompt --help` is a prompt); pass 1
 * applies everything.  *config_path receives the --config value.  With
 * !server only the extra options are known. */
static bool id_listed(const int *ids, int id);

/* May this command take server argument sp on its command line? */
static bool cmd_takes(const args_cmd *cmd, const args_spec *sp)
{
    if (cmd->no_server_args) return false;
    return !cmd->only_shown || (cmd->shown && id_listed(cmd->shown, (int)(sp - args_specs)));
}

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
            errf(err, errlen, "unexpected argument '%s' (options start with --)", tok);
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
                    errf(err, errlen, "%s expects at least one value", ex->name);
                    return ARGS_EUSAGE;
                }
            } else if (extra_takes_value(ex)) {
                if (inl) {
                    vals[n++] = inl;
                } else {
                    if (i + 1 >= argc) {
                        errf(err, errlen, "%s expects a value", ex->name);
                        return ARGS_EUSAGE;
                    }
                    vals[n++] = argv[++i];
                }
            } else if (inl) {
                errf(err, errlen, "%s takes no value", ex->name);
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
            errf(err, errlen, "%s is a server argument this command does not use (see its --help; "
                              "`sglc serve` takes it)", disp);
            return ARGS_EUSAGE;
        }
        if (!sp) {
            if (pass == 0) continue;
            char sug[128];
            suggest(tok, nlen, server && !cmd->only_shown, extra, sug, sizeof sug);
            errf(err, errlen, "unrecognized argument '%s'%s", disp, sug);
            return ARGS_EUSAGE;
        }
        const char *vals[512];
        int n = 0;
        if (sp->kind == ARGS_KIND_BOOL) {
            if (inl) {
                errf(err, errlen, "%s takes no value", disp);
                return ARGS_EUSAGE;
            }
        } else if (kind_is_list(sp->kind)) {
            if (inl) {
                vals[n++] = inl;
            } else {
                while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && strcmp(argv[i + 1], "-h") &&
                       n < 512)
                    vals[n++] = argv[++i];
            }
            /* SGLang's nargs="*" lists take zero values (to override a --config value) */
            if (n == 0 && sp != &args_specs[ARG_ID_uvicorn_access_log_exclude_prefixes]) {
                errf(err, errlen, "%s expects at least one value", disp);
                return ARGS_EUSAGE;
            }
        } else {
            if (inl) {
                vals[n++] = inl;
            } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
                vals[n++] = argv[++i];
            } else {
                errf(err, errlen, "%s expects a value", disp);
                return ARGS_EUSAGE;
            }
        }
        if (sp == &args_specs[ARG_ID_config]) {
            if (pass == 0) {
                if (*config_path) {
                    errf(err, errlen, "--config given more than once");
                    return ARGS_EUSAGE;
                }
                *config_path = vals[0];
            }
        }
        if (pass == 0) continue;
        tval v;
        int rc = tval_from_text(sp, disp, vals, n, &v, err, errlen);
        if (rc != ARGS_OK) return rc;
        rc = apply_tval(a, sp, disp, &v, ARGS_SRC_CLI, err, errlen);
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
        errf(err, errlen, "cannot initialise the argument defaults");
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

/* --model-loader-extra-config: SGLang's DefaultModelLoader accepts only
 * enable_multithread_load (bool) and num_threads (int); others are
 * "Unexpected extra config keys for load format ...". */
static int args_validate_loader_config(const char *text, char *err, size_t errlen)
{
    json_t *o = json_loads(text, 0, NULL);
    int rc = 0;
    if (!json_is_object(o)) {
        errf(err, errlen, "--model-loader-extra-config must be a JSON object");
        rc = -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (rc) break;
        if (strcmp(k, "enable_multithread_load") && strcmp(k, "num_threads")) {
            errf(err, errlen, "--model-loader-extra-config: Unexpected extra config keys for load format auto: {'%s'}",
                 k);
            rc = -1;
        } else if (!strcmp(k, "enable_multithread_load") && !json_is_boolean(v)) {
            errf(err, errlen, "--model-loader-extra-config: enable_multithread_load must be true or false");
            rc = -1;
        } else if (!strcmp(k, "num_threads") &&
                   (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 256)) {
            errf(err, errlen, "--model-loader-extra-config: num_threads must be an integer in [1, 256]");
            rc = -1;
        }
    }
    json_decref(o);
    return rc;
}

/* SGLang's _handle_ssl_validation: key and certificate come together, the
 * password and CA bundle need them, every file named must exist. */
static int args_validate_ssl(const args_server *a, char *err, size_t errlen)
{
    if (a->ssl_keyfile && !a->ssl_certfile) {
        errf(err, errlen, "--ssl-keyfile requires --ssl-certfile to be specified as well.");
        return ARGS_EUSAGE;
    }
    if (a->ssl_certfile && !a->ssl_keyfile) {
        errf(err, errlen, "--ssl-certfile requires --ssl-keyfile to be specified as well.");
        return ARGS_EUSAGE;
    }
    if (!a->ssl_certfile && (a->ssl_ca_certs || a->ssl_keyfile_password)) {
        errf(err, errlen, "%s requires --ssl-certfile and --ssl-keyfile.",
             a->ssl_ca_certs ? "--ssl-ca-certs" : "--ssl-keyfile-password");
        return ARGS_EUSAGE;
    }
    struct {
        const char *path, *what, *flag;
    } files[] = {{a->ssl_keyfile, "SSL key file", "--ssl-keyfile"},
                 {a->ssl_certfile, "SSL certificate file", "--ssl-certfile"},
                 {a->ssl_ca_certs, "SSL CA certificates file", "--ssl-ca-certs"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct stat st;
        if (files[i].path && (stat(files[i].path, &st) || !S_ISREG(st.st_mode))) {
            errf(err, errlen, "%s not found: '%s'. Please check the %s path.", files[i].what, files[i].path,
                 files[i].flag);
            return ARGS_EUSAGE;
        }
    }
    return ARGS_OK;
}

int args_validate(const args_server *a, char *err, size_t errlen)
{
    if (a->port < 1 || a->port > 65535) {
        errf(err, errlen, "--port must be in 1..65535, got %d", a->port);
        return ARGS_EUSAGE;
    }
    if (!args_float_is_none(a->mem_fraction_static) &&
        !(a->mem_fraction_static > 0 && a->mem_fraction_static <= 1)) {
        errf(err, errlen, "--mem-fraction-static must be in (0, 1], got %g", a->mem_fraction_static);
        return ARGS_EUSAGE;
    }
    struct {
        int v;
        const char *name;
    } pos[] = {
        {a->context_length, "--context-length"},
        {a->max_total_tokens, "--max-total-tokens"},
        {a->page_size, "--page-size"},
        {a->max_prefill_tokens, "--max-prefill-tokens"},
        {a->max_running_requests, "--max-running-requests"},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        if (pos[i].v != ARGS_INT_NONE && pos[i].v < 1) {
            errf(err, errlen, "%s must be at least 1, got %d", pos[i].name, pos[i].v);
            return ARGS_EUSAGE;
        }
    }
    struct {
        int v;
        int lo;
        const char *name;
    } lows[] = {
        {a->prefill_max_requests, 1, "--prefill-max-requests"},
        {a->max_queued_requests, 1, "--max-queued-requests"},
        {a->stream_interval, 1, "--stream-interval"},
        {a->decode_log_interval, 1, "--decode-log-interval"},
        {a->priority_scheduling_preemption_threshold, 0, "--priority-scheduling-preemption-threshold"},
    };
    for (size_t i = 0; i < sizeof lows / sizeof lows[0]; i++) {
        if (lows[i].v != ARGS_INT_NONE && lows[i].v < lows[i].lo) {
            errf(err, errlen, "%s must be at least %d, got %d", lows[i].name, lows[i].lo, lows[i].v);
            return ARGS_EUSAGE;
        }
    }
    if (!args_float_is_none(a->schedule_conservativeness) && a->schedule_conservativeness < 0) {
        errf(err, errlen, "--schedule-conservativeness must be at least 0, got %g",
             a->schedule_conservativeness);
        return ARGS_EUSAGE;
    }
    if (a->chunked_prefill_size != ARGS_INT_NONE && a->chunked_prefill_size != -1 &&
        a->chunked_prefill_size < 1) {
        errf(err, errlen, "--chunked-prefill-size must be -1 (off) or at least 1, got %d",
             a->chunked_prefill_size);
        return ARGS_EUSAGE;
    }
    if (a->model_loader_extra_config && args_validate_loader_config(a->model_loader_extra_config, err, errlen))
        return ARGS_EUSAGE;
    if (a->export_metrics_to_file && !a->export_metrics_to_file_dir) {
        errf(err, errlen, "--export-metrics-to-file-dir is required when --export-metrics-to-file is set");
        return ARGS_EUSAGE;
    }
    return args_validate_ssl(a, err, errlen);
}

int args_finalize(args_server *a)
{
    if (a->model_path && !a->tokenizer_path) {
        a->tokenizer_path = strdup(a->model_path);
        if (!a->tokenizer_path) return ARGS_ENOMEM;
    }
    if (a->model_path && !a->served_model_name) {
        a->served_model_name = strdup(a->model_path);
        if (!a->served_model_name) return ARGS_ENOMEM;
    }
    if (a->random_seed == ARGS_INT_NONE) {
        /* SGLang: random.randint(0, 1 << 30) */
        unsigned r;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
        a->random_seed = (int)(r % ((1u << 30) + 1));
    }
    return ARGS_OK;
}

json_t *args_to_json(const args_server *a)
{
    json_t *o = json_object();
    if (!o) return NULL;
    for (int i = 0; i < ARG_COUNT; i++) {
        const args_spec *sp = &args_specs[i];
        const char *base = (const char *)a + sp->offset;
        json_t *v;
        switch (sp->kind) {
        case ARGS_KIND_BOOL: v = json_boolean(*(const bool *)base); break;
        case ARGS_KIND_INT: {
            int x = *(const int *)base;
            v = x == ARGS_INT_NONE ? json_null() : json_integer(x);
            break;
        }
        case ARGS_KIND_FLOAT: {
            double x = *(const double *)base;
            v = args_float_is_none(x) ? json_null() : json_real(x);
            break;
        }
        case ARGS_KIND_LIST_STR:
        case ARGS_KIND_LIST_INT:
        case ARGS_KIND_LIST_FLOAT: {
            json_t *l = *(json_t *const *)base;
            v = l ? json_deep_copy(l) : json_null();
            break;
        }
        default: {
            const char *s = *(char *const *)base;
            v = s ? json_string(s) : json_null();
            break;
        }
        }
        if (!v || json_object_set_new(o, sp->field, v)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* Print `text` wrapped at 79 columns with `indent` spaces. */
static void print_wrapped(FILE *f, const char *text, int indent)
{
    const int width = 79;
    int col = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        const char *w = p;
        while (*p && *p != ' ') p++;
        int wl = (int)(p - w);
        if (!wl) break;
        if (col == 0) {
            col = fprintf(f, "%*s", indent, "");
        } else if (col + 1 + wl > width) {
            fputc('\n', f);
            col = fprintf(f, "%*s", indent, "");
        } else {
            fputc(' ', f);
            col++;
        }
        col += fprintf(f, "%.*s", wl, w);
    }
    if (col) fputc('\n', f);
}

static const char *metavar_of(const args_spec *sp, char *buf, size_t n)
{
    switch (sp->kind) {
    case ARGS_KIND_BOOL: return "";
    case ARGS_KIND_INT:
        if (sp->choices) {
            choices_display(sp->choices, buf, n);
            return buf;
        }
        return "INT";
    case ARGS_KIND_FLOAT: return "FLOAT";
    case ARGS_KIND_JSON: return "JSON";
    case ARGS_KIND_LIST_STR: return "STR [STR ...]";
    case ARGS_KIND_LIST_INT: return "INT [INT ...]";
    case ARGS_KIND_LIST_FLOAT: return "FLOAT [FLOAT ...]";
    case ARGS_KIND_CHOICE:
        choices_display(sp->choices, buf, n);
        return buf;
    default: return "STR";
    }
}

/* One server argument: flags, metavar, marks, then the wrapped help. */
static void print_spec(FILE *f, const args_spec *sp)
{
    char mv[512];
    const char *m = metavar_of(sp, mv, sizeof mv);
    fprintf(f, " ");
    const char *cur = sp->flags;
    size_t len;
    const char *fl;
    bool first = true;
    while ((fl = next_flag(&cur, &len))) {
        fprintf(f, "%s --%.*s", first ? "" : ",", (int)len, fl);
        first = false;
    }
    if (*m) fprintf(f, " %s", m);
    if (sp->status == ARGS_STATUS_NOT_YET) fprintf(f, "  (not yet)");
    if (sp->status == ARGS_STATUS_IGNORED) fprintf(f, "  (ignored)");
    fputc('\n', f);
    char text[1024];
    const char *d = sp->def ? sp->def : "None";
    if (sp->kind == ARGS_KIND_BOOL) d = !strcmp(sp->def, "true") ? "True" : "False";
    snprintf(text, sizeof text, "%s [default: %s]", sp->help, *d ? d : "''");
    print_wrapped(f, text, 8);
}

static void print_extras(FILE *f, const args_extra *extra)
{
    if (!extra || !extra->name) return;
    fprintf(f, "\nCommand options:\n");
    for (const args_extra *e = extra; e->name; e++) {
        char mv[512];
        const char *m = e->metavar;
        if (!m && e->choices) {
            choices_display(e->choices, mv, sizeof mv);
            m = mv;
        }
        if (!m && extra_takes_value(e)) m = e->ival || e->ilist ? "INT" : e->fval ? "FLOAT" : "STR";
        fprintf(f, "  %s%s%s%s\n", e->name, m ? " " : "", m ? m : "", e->ilist ? " [...]" : "");
        char text[1024];
        if (e->def) snprintf(text, sizeof text, "%s [default: %s]", e->help ? e->help : "", e->def);
        else snprintf(text, sizeof text, "%s", e->help ? e->help : "");
        if (*text) print_wrapped(f, text, 8);
    }
}

static bool id_listed(const int *ids, int id)
{
    for (; *ids != ARG_COUNT; ids++)
        if (*ids == id) return true;
    return false;
}

void args_print_cmd_help(FILE *f, const args_cmd *cmd)
{
    fprintf(f, "%s\n\n", cmd->usage ? cmd->usage : "usage: sglc COMMAND [OPTIONS]");
    if (cmd->about) print_wrapped(f, cmd->about, 0);
    if (!cmd->no_server_args) {
        if (cmd->about) fputc('\n', f);
        print_wrapped(f,
                      "Server arguments follow SGLang's names, defaults and meaning. Arguments marked "
                      "(not yet) are not implemented by sglc: passing one with a value other than its "
                      "default is an error. Arguments marked (ignored) are accepted and have no effect.",
                      0);
    }
    print_extras(f, cmd->extra);
    fprintf(f, "\n  -h, --help\n        Show this help message and exit.\n");
    if (cmd->no_server_args) return;
    if (cmd->shown) {
        fprintf(f, cmd->only_shown ? "\nServer arguments this command takes (only these):\n"
                                   : "\nServer arguments used by this command:\n");
        for (const int *id = cmd->shown; *id != ARG_COUNT; id++) print_spec(f, &args_specs[*id]);
        if (!cmd->only_shown && !id_listed(cmd->shown, ARG_ID_config)) print_spec(f, &args_specs[ARG_ID_config]);
        if (cmd->only_shown) {
            fputc('\n', f);
            print_wrapped(f, "Other server arguments are refused here: `sglc serve --help` lists them all.", 0);
            return;
        }
        fputc('\n', f);
        print_wrapped(f,
                      "Every other server argument of `sglc serve --help` is accepted as well, "
                      "with the same default and checks (as SGLang's offline scripts take "
                      "ServerArgs); those not listed here have no effect on this command.",
                      0);
        return;
    }
    for (int g = 0; g < ARGS_GROUP_COUNT; g++) {
        fprintf(f, "\n%s:\n", args_group_titles[g]);
        for (int i = 0; i < ARG_COUNT; i++)
            if ((int)args_specs[i].group == g) print_spec(f, &args_specs[i]);
    }
}

void args_print_help(FILE *f, const char *usage_line, const args_extra *extra)
{
    const args_cmd cmd = {.usage = usage_line, .extra = extra};
    args_print_cmd_help(f, &cmd);
}
