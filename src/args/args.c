/* args — the core of the server arguments: the table's rows, the typed
 * value converter, defaults, args_set (the entry point of every source:
 * command line, YAML, tests), validation and finalisation.
 *
 * DESIGN: every value, whether a default from the table, a YAML scalar or
 * a command-line token, goes through the same converter (args_tval_from_text),
 * so defaults are checked by the same rules as user input and the
 * "not supported yet unless equal to the default" test compares typed
 * values, not spellings ("--tp-size 01" equals the default 1).  Fields are
 * reached through offsetof() from the spec row; the struct itself is
 * generated from the table, so a new row needs no code here.
 *
 * Files of the module, each depending only on those below it:
 *   args_cli.c     the command line (argv walk, subcommand extras)
 *   args_config.c  --config YAML files
 *   args_print.c   --help text and the JSON dump
 *   args.c         this file; args_internal.h is its interface to the
 *                  three above (not for use outside src/args/). */
#include "args/args.h"
#include "args/args_internal.h"

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

static void tval_free(args_tval *v)
{
    free(v->s);
    json_decref(v->l);
    memset(v, 0, sizeof *v);
}

void args_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

bool args_kind_is_list(enum args_kind k)
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

bool args_parse_float(const char *s, double *out)
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
bool args_choice_ok(const char *choices, const char *s)
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

void args_choices_display(const char *choices, char *out, size_t n)
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
    return args_parse_float(s, &f) ? json_real(f) : NULL;
}

/* Convert the text form of a value (n items for lists, 1 otherwise; for
 * BOOL n == 0 means "flag present") into `out`.  `disp` names the flag in
 * messages. */
int args_tval_from_text(const args_spec *sp, const char *disp, const char *const *vals, int n,
                        args_tval *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (sp->kind == ARGS_KIND_BOOL) {
        if (n == 0) {
            out->b = true;
            return ARGS_OK;
        }
        int b = n == 1 && vals[0] ? parse_bool(vals[0]) : -1;
        if (b < 0) {
            args_errf(err, errlen, "%s: expected true or false, got '%s'", disp, n >= 1 && vals[0] ? vals[0] : "");
            return ARGS_EUSAGE;
        }
        out->b = b;
        return ARGS_OK;
    }
    if (args_kind_is_list(sp->kind)) {
        out->l = json_array();
        if (!out->l) return ARGS_ENOMEM;
        for (int i = 0; i < n; i++) {
            json_t *it = vals[i] ? list_item(sp->kind, vals[i]) : NULL;
            if (!it) {
                args_errf(err, errlen, "%s: invalid %s list item '%s'", disp,
                     sp->kind == ARGS_KIND_LIST_INT ? "int" : "float", vals[i] ? vals[i] : "");
                tval_free(out);
                return ARGS_EUSAGE;
            }
            json_array_append_new(out->l, it);
        }
        return ARGS_OK;
    }
    if (n != 1 || !vals[0]) {
        args_errf(err, errlen, "%s expects exactly one value", disp);
        return ARGS_EUSAGE;
    }
    const char *s = vals[0];
    if (sp->choices && !args_choice_ok(sp->choices, s)) {
        char ch[512];
        args_choices_display(sp->choices, ch, sizeof ch);
        args_errf(err, errlen, "%s: invalid choice '%s' (choose from %s)", disp, s, ch);
        return ARGS_EUSAGE;
    }
    switch (sp->kind) {
    case ARGS_KIND_INT:
        if (!parse_int(s, &out->i)) {
            args_errf(err, errlen, "%s: invalid int value '%s'", disp, s);
            return ARGS_EUSAGE;
        }
        return ARGS_OK;
    case ARGS_KIND_FLOAT:
        if (!args_parse_float(s, &out->f)) {
            args_errf(err, errlen, "%s: invalid float value '%s'", disp, s);
            return ARGS_EUSAGE;
        }
        return ARGS_OK;
    case ARGS_KIND_JSON: {
        json_error_t je;
        json_t *j = json_loads(s, JSON_DECODE_ANY, &je);
        if (!j) {
            args_errf(err, errlen, "%s: invalid JSON (%s at line %d column %d)", disp, je.text, je.line,
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
static int tval_default(const args_spec *sp, args_tval *out)
{
    memset(out, 0, sizeof *out);
    if (!sp->def) {
        out->none = true;
        return ARGS_OK;
    }
    if (args_kind_is_list(sp->kind)) {
        out->l = json_loads(sp->def, 0, NULL);
        return json_is_array(out->l) ? ARGS_OK : ARGS_EUSAGE;
    }
    return args_tval_from_text(sp, sp->field, &sp->def, 1, out, NULL, 0);
}

static bool tval_equal(const args_spec *sp, const args_tval *x, const args_tval *y)
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
static void field_store(args_server *a, const args_spec *sp, args_tval *v)
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
int args_apply_tval(args_server *a, const args_spec *sp, const char *disp, args_tval *v,
                    enum args_source src, char *err, size_t errlen)
{
    if (sp->status == ARGS_STATUS_NOT_YET) {
        args_tval d;
        int rc = tval_default(sp, &d);
        bool same = rc == ARGS_OK && tval_equal(sp, v, &d);
        tval_free(&d);
        if (!same) {
            /* a row whose help carries "(not yet: why)" says why */
            const char *why = sp->help ? strstr(sp->help, "(not yet: ") : NULL;
            if (why)
                args_errf(err, errlen, "%s is not supported by sglc yet (%s", disp, why + strlen("(not yet: "));
            else
                args_errf(err, errlen, "%s is not supported by sglc yet", disp);
            tval_free(v);
            return ARGS_EUSAGE;
        }
    }
    /* IGNORED: stored and named once by args_parse_cmd's warning line */
    field_store(a, sp, v);
    a->source[sp - args_specs] = (unsigned char)src;
    return ARGS_OK;
}

int args_server_init(args_server *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < ARG_COUNT; i++) {
        const args_spec *sp = &args_specs[i];
        args_tval v;
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
        } else if (args_kind_is_list(sp->kind)) {
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
const char *args_next_flag(const char **cursor, size_t *len)
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
        while ((f = args_next_flag(&cur, &len)))
            if (name_eq(name, f, len)) return sp;
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
void args_suggest(const char *name, size_t nlen, bool server, const args_extra *extra, char *out, size_t n)
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
        while ((f = args_next_flag(&cur, &len))) {
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
        args_suggest(name, strlen(name), true, NULL, sug, sizeof sug);
        args_errf(err, errlen, "unrecognized argument '%s'%s", name, sug);
        return ARGS_EUSAGE;
    }
    char disp[160];
    const char *bare = name + strspn(name, "-");
    snprintf(disp, sizeof disp, "--%s", bare);
    for (char *c = disp; *c; c++)
        if (*c == '_') *c = '-';
    args_tval v;
    int rc = args_tval_from_text(sp, disp, values, n_values, &v, err, errlen);
    if (rc != ARGS_OK) return rc;
    return args_apply_tval(a, sp, disp, &v, src, err, errlen);
}

int args_set_none(args_server *a, const args_spec *sp, const char *disp, enum args_source src,
                  char *err, size_t errlen)
{
    if (sp->kind == ARGS_KIND_BOOL) {
        args_errf(err, errlen, "%s: expected true or false, got null", disp);
        return ARGS_EUSAGE;
    }
    args_tval v;
    memset(&v, 0, sizeof v);
    v.none = true;
    return args_apply_tval(a, sp, disp, &v, src, err, errlen);
}

/* --model-loader-extra-config: SGLang's DefaultModelLoader accepts only
 * enable_multithread_load (bool) and num_threads (int); others are
 * "Unexpected extra config keys for load format ...". */
static int args_validate_loader_config(const char *text, char *err, size_t errlen)
{
    json_t *o = json_loads(text, 0, NULL);
    int rc = 0;
    if (!json_is_object(o)) {
        args_errf(err, errlen, "--model-loader-extra-config must be a JSON object");
        rc = -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (rc) break;
        if (strcmp(k, "enable_multithread_load") && strcmp(k, "num_threads")) {
            args_errf(err, errlen, "--model-loader-extra-config: Unexpected extra config keys for load format auto: {'%s'}",
                 k);
            rc = -1;
        } else if (!strcmp(k, "enable_multithread_load") && !json_is_boolean(v)) {
            args_errf(err, errlen, "--model-loader-extra-config: enable_multithread_load must be true or false");
            rc = -1;
        } else if (!strcmp(k, "num_threads") &&
                   (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 256)) {
            args_errf(err, errlen, "--model-loader-extra-config: num_threads must be an integer in [1, 256]");
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
        args_errf(err, errlen, "--ssl-keyfile requires --ssl-certfile to be specified as well.");
        return ARGS_EUSAGE;
    }
    if (a->ssl_certfile && !a->ssl_keyfile) {
        args_errf(err, errlen, "--ssl-certfile requires --ssl-keyfile to be specified as well.");
        return ARGS_EUSAGE;
    }
    if (!a->ssl_certfile && (a->ssl_ca_certs || a->ssl_keyfile_password)) {
        args_errf(err, errlen, "%s requires --ssl-certfile and --ssl-keyfile.",
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
            args_errf(err, errlen, "%s not found: '%s'. Please check the %s path.", files[i].what, files[i].path,
                 files[i].flag);
            return ARGS_EUSAGE;
        }
    }
    return ARGS_OK;
}

/* --quantization: the methods sglc loads (SGLang's names); SGLang's others
 * are refused here, before any loading. */
static int args_validate_quantization(const args_server *a, char *err, size_t errlen)
{
    static const char *const ok[] = {"awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors",
                                     "fp8", "w8a8_int8", "w8a8_fp8", "gguf"};
    if (!a->quantization) return 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(a->quantization, ok[i])) return 0;
    args_errf(err, errlen,
              "--quantization %s is not supported by sglc (supported: awq, awq_marlin, gptq, "
              "gptq_marlin, compressed-tensors, fp8, w8a8_int8, w8a8_fp8, gguf)",
              a->quantization);
    return ARGS_EUSAGE;
}

int args_validate(const args_server *a, char *err, size_t errlen)
{
    if (a->device && strcmp(a->device, "cpu")) {
        args_errf(err, errlen, "--device %s: this build of sglc serves CPUs only (use --device cpu, or leave it out)",
                  a->device);
        return ARGS_EUSAGE;
    }
    if (a->port < 1 || a->port > 65535) {
        args_errf(err, errlen, "--port must be in 1..65535, got %d", a->port);
        return ARGS_EUSAGE;
    }
    if (!args_float_is_none(a->mem_fraction_static) &&
        !(a->mem_fraction_static > 0 && a->mem_fraction_static <= 1)) {
        args_errf(err, errlen, "--mem-fraction-static must be in (0, 1], got %g", a->mem_fraction_static);
        return ARGS_EUSAGE;
    }
    struct {
        double v;
        const char *name;
    } unit[] = {
        {a->speculative_accept_threshold_single, "--speculative-accept-threshold-single"},
        {a->speculative_accept_threshold_acc, "--speculative-accept-threshold-acc"},
    };
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
        if (!args_float_is_none(unit[i].v) && !(unit[i].v > 0 && unit[i].v <= 1)) {
            args_errf(err, errlen, "%s must be in (0, 1], got %g", unit[i].name, unit[i].v);
            return ARGS_EUSAGE;
        }
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
            args_errf(err, errlen, "%s must be at least 1, got %d", pos[i].name, pos[i].v);
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
            args_errf(err, errlen, "%s must be at least %d, got %d", lows[i].name, lows[i].lo, lows[i].v);
            return ARGS_EUSAGE;
        }
    }
    if (!args_float_is_none(a->schedule_conservativeness) && a->schedule_conservativeness < 0) {
        args_errf(err, errlen, "--schedule-conservativeness must be at least 0, got %g",
             a->schedule_conservativeness);
        return ARGS_EUSAGE;
    }
    if (a->chunked_prefill_size != ARGS_INT_NONE && a->chunked_prefill_size != -1 &&
        a->chunked_prefill_size < 1) {
        args_errf(err, errlen, "--chunked-prefill-size must be -1 (off) or at least 1, got %d",
             a->chunked_prefill_size);
        return ARGS_EUSAGE;
    }
    if (a->model_loader_extra_config && args_validate_loader_config(a->model_loader_extra_config, err, errlen))
        return ARGS_EUSAGE;
    if (a->export_metrics_to_file && !a->export_metrics_to_file_dir) {
        args_errf(err, errlen, "--export-metrics-to-file-dir is required when --export-metrics-to-file is set");
        return ARGS_EUSAGE;
    }
    if (args_validate_quantization(a, err, errlen)) return ARGS_EUSAGE;
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

bool args_id_listed(const int *ids, int id)
{
    for (; *ids != ARG_COUNT; ids++)
        if (*ids == id) return true;
    return false;
}

bool args_extra_takes_value(const args_extra *e) { return e->metavar || e->value || e->ival || e->fval || e->ilist; }
