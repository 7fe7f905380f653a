/* args_print — what the server arguments look like to a person or a
 * program: the --help text (wrapped at 79 columns, SGLang's order of
 * groups) and the JSON dump (args_to_json: one key per table row).
 *
 * DESIGN: read-only over the table and a parsed args_server; no parsing
 * here.  Depends on args.c (args_internal.h) only. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "args/args.h"
#include "args/args_internal.h"

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
            args_choices_display(sp->choices, buf, n);
            return buf;
        }
        return "INT";
    case ARGS_KIND_FLOAT: return "FLOAT";
    case ARGS_KIND_JSON: return "JSON";
    case ARGS_KIND_LIST_STR: return "STR [STR ...]";
    case ARGS_KIND_LIST_INT: return "INT [INT ...]";
    case ARGS_KIND_LIST_FLOAT: return "FLOAT [FLOAT ...]";
    case ARGS_KIND_CHOICE:
        args_choices_display(sp->choices, buf, n);
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
    while ((fl = args_next_flag(&cur, &len))) {
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
            args_choices_display(e->choices, mv, sizeof mv);
            m = mv;
        }
        if (!m && args_extra_takes_value(e)) m = e->ival || e->ilist ? "INT" : e->fval ? "FLOAT" : "STR";
        fprintf(f, "  %s%s%s%s\n", e->name, m ? " " : "", m ? m : "", e->ilist ? " [...]" : "");
        char text[1024];
        if (e->def) snprintf(text, sizeof text, "%s [default: %s]", e->help ? e->help : "", e->def);
        else snprintf(text, sizeof text, "%s", e->help ? e->help : "");
        if (*text) print_wrapped(f, text, 8);
    }
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
                      "default is an error. Arguments marked (ignored) are accepted and have no effect. "
                      "As with SGLang's argparse parser, an option may be shortened to a unique prefix "
                      "(--tp, --mem-frac).",
                      0);
    }
    print_extras(f, cmd->extra);
    fprintf(f, "\n  -h, --help\n        Show this help message and exit.\n");
    if (cmd->no_server_args) return;
    if (cmd->shown) {
        fprintf(f, cmd->only_shown ? "\nServer arguments this command takes (only these):\n"
                                   : "\nServer arguments used by this command:\n");
        for (const int *id = cmd->shown; *id != ARG_COUNT; id++) print_spec(f, &args_specs[*id]);
        if (!cmd->only_shown && !args_id_listed(cmd->shown, ARG_ID_config)) print_spec(f, &args_specs[ARG_ID_config]);
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
