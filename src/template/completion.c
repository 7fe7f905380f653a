/* completion — see completion.h. */
#include "template/completion.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct builtin {
    const char *name, *begin, *middle, *end;
    tmpl_fim_position pos;
} builtin;

/* SGLang's registered completion templates (names and tokens as there). */
static const builtin builtins[] = {
    {"deepseek_coder", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
     "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
     TMPL_FIM_MIDDLE},
    {"star_coder", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", TMPL_FIM_END},
    {"qwen_coder", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", TMPL_FIM_END},
};

static const char *const builtin_names[] = {"deepseek_coder", "star_coder", "qwen_coder", NULL};

const char *const *tmpl_completion_builtin_names(void) { return builtin_names; }

void tmpl_completion_free(tmpl_completion *c)
{
    if (!c) return;
    free(c->name);
    free(c->begin);
    free(c->middle);
    free(c->end);
    memset(c, 0, sizeof *c);
}

static int set_all(tmpl_completion *out, const char *name, const char *b, const char *m,
                   const char *e, tmpl_fim_position pos)
{
    out->name = strdup(name);
    out->begin = strdup(b);
    out->middle = strdup(m);
    out->end = strdup(e);
    out->pos = pos;
    if (!out->name || !out->begin || !out->middle || !out->end) {
        tmpl_completion_free(out);
        return -1;
    }
    return 0;
}

int tmpl_completion_load(const char *spec, tmpl_completion *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) {
        snprintf(err, errlen, "empty completion template name");
        return -1;
    }
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        const builtin *b = &builtins[i];
        if (!strcmp(spec, b->name)) {
            if (set_all(out, b->name, b->begin, b->middle, b->end, b->pos)) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            return 0;
        }
    }
    json_error_t je;
    json_t *root = json_load_file(spec, 0, &je);
    if (!root) {
        snprintf(err, errlen,
                 "completion template '%s' is neither a built-in (deepseek_coder, star_coder, "
                 "qwen_coder) nor a readable JSON file: %s",
                 spec, je.text);
        return -1;
    }
    const char *keys[4] = {"fim_begin_token", "fim_middle_token", "fim_end_token", "fim_position"};
    const char *vals[4];
    for (int k = 0; k < 4; k++) {
        json_t *v = json_object_get(root, keys[k]);
        if (!json_is_string(v)) {
            snprintf(err, errlen, "%s: \"%s\" must be a string", spec, keys[k]);
            json_decref(root);
            return -1;
        }
        vals[k] = json_string_value(v);
    }
    tmpl_fim_position pos;
    if (!strcmp(vals[3], "MIDDLE")) pos = TMPL_FIM_MIDDLE;
    else if (!strcmp(vals[3], "END")) pos = TMPL_FIM_END;
    else {
        snprintf(err, errlen, "%s: \"fim_position\" must be \"MIDDLE\" or \"END\", got \"%s\"", spec,
                 vals[3]);
        json_decref(root);
        return -1;
    }
    json_t *nm = json_object_get(root, "name");
    int rc = set_all(out, json_is_string(nm) ? json_string_value(nm) : spec, vals[0], vals[1],
                     vals[2], pos);
    json_decref(root);
    if (rc) snprintf(err, errlen, "out of memory");
    return rc;
}

char *tmpl_completion_prompt(const tmpl_completion *c, const char *prompt, size_t prompt_len,
                             const char *suffix, size_t suffix_len, size_t *out_len)
{
    const char *parts[5];
    size_t lens[5];
    int n = 0;
    if (suffix_len == 0) {
        parts[n] = prompt, lens[n++] = prompt_len;
    } else {
        const char *second = c->pos == TMPL_FIM_MIDDLE ? c->middle : c->end;
        const char *last = c->pos == TMPL_FIM_MIDDLE ? c->end : c->middle;
        parts[n] = c->begin, lens[n++] = strlen(c->begin);
        parts[n] = prompt, lens[n++] = prompt_len;
        parts[n] = second, lens[n++] = strlen(second);
        parts[n] = suffix, lens[n++] = suffix_len;
        parts[n] = last, lens[n++] = strlen(last);
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    char *s = malloc(total + 1);
    if (!s) return NULL;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(s + off, parts[i], lens[i]);
        off += lens[i];
    }
    s[off] = 0;
    if (out_len) *out_len = off;
    return s;
}
