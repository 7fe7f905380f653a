/* template_chat — chat templates as transformers applies them.
 *
 * DESIGN: a Hugging Face folder carries its chat template in
 * tokenizer_config.json ("chat_template": a string, or a list of
 * {"name", "template"} entries) or, in newer exports, chat_template.jinja /
 * chat_template.json and additional_chat_templates/NAME.jinja.
 * transformers renders it with messages, tools, documents,
 * add_generation_prompt and **kwargs, where kwargs are the tokenizer's
 * special tokens map (bos_token, eos_token, ... as plain strings, unset
 * ones left out) overlaid by the caller's chat_template_kwargs.  A
 * --chat-template override is a built-in name, a file, or inline source.
 *
 * Built-in templates (written for sglc, documented in docs/notes/tmpl.md):
 *   chatml   <|im_start|>role\ncontent<|im_end|>\n ... (+ assistant prompt)
 *   llama-2  [INST] ... [/INST] with <<SYS>> folded into the first turn
 *   zephyr   <|role|>\ncontent</s>\n ... (+ <|assistant|>) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "template/template.h"
#include "util/fileio.h"
#include "template/template_impl.h"
#include "util/log.h"

static const char CHATML[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static const char LLAMA2[] =
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set sys = messages[0]['content'] %}{% set turns = messages[1:] %}"
    "{% else %}{% set sys = none %}{% set turns = messages %}{% endif %}"
    "{% for m in turns %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% set text = m['content'] %}"
    "{% if loop.first and sys is not none %}"
    "{% set text = '<<SYS>>\\n' + sys + '\\n<</SYS>>\\n\\n' + text %}{% endif %}"
    "{% if m['role'] == 'user' %}{{ (bos_token or '') + '[INST] ' + text.strip() + ' [/INST]' }}"
    "{% else %}{{ ' ' + text.strip() + ' ' + (eos_token or '') }}{% endif %}"
    "{% endfor %}";

static const char ZEPHYR[] =
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + (eos_token or '</s>') + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

static const char *const BUILTIN_NAMES[] = {"chatml", "llama-2", "zephyr", NULL};

const char *const *tmpl_builtin_names(void) { return BUILTIN_NAMES; }

const char *tmpl_builtin_source(const char *name)
{
    if (!name) return NULL;
    if (!strcmp(name, "chatml")) return CHATML;
    if (!strcmp(name, "llama-2") || !strcmp(name, "llama2")) return LLAMA2;
    if (!strcmp(name, "zephyr")) return ZEPHYR;
    return NULL;
}

static char *xasprintf(const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(fmt) + (a ? strlen(a) : 0) + (b ? strlen(b) : 0) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, fmt, a ? a : "", b ? b : "");
    return s;
}


static const char *token_text(json_t *v)
{
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content")))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

/* Add the special tokens of one config object into `out`. */
static void collect_special(json_t *out, json_t *cfg)
{
    static const char *keys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                 "pad_token", "cls_token", "mask_token", NULL};
    if (!json_is_object(cfg)) return;
    for (int i = 0; keys[i]; i++) {
        json_t *v = json_object_get(cfg, keys[i]);
        if (!v) continue;
        const char *t = token_text(v);
        if (t && *t) json_object_set_new(out, keys[i], json_string(t));
        else json_object_del(out, keys[i]);
    }
    json_t *add = json_object_get(cfg, "additional_special_tokens");
    if (json_is_array(add)) {
        json_t *l = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(add, i, e) {
            const char *t = token_text(e);
            if (t) json_array_append_new(l, json_string(t));
        }
        if (json_array_size(l)) json_object_set_new(out, "additional_special_tokens", l);
        else {
            json_decref(l);
            json_object_del(out, "additional_special_tokens");
        }
    }
}

/* Pick the template source from the config's chat_template value. */
static char *pick_template(json_t *ct, const char *name, char **err)
{
    if (json_is_string(ct)) {
        if (name && strcmp(name, "default")) {
            *err = xasprintf("--hf-chat-template-name %s given, but the tokenizer has a single chat template%s", name, NULL);
            return NULL;
        }
        return strdup(json_string_value(ct));
    }
    if (!json_is_array(ct)) {
        *err = strdup("tokenizer_config.json: chat_template must be a string or a list of {name, template}");
        return NULL;
    }
    const char *want = name ? name : "default";
    size_t i;
    json_t *e;
    char names[512] = "";
    json_array_foreach(ct, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        const char *t = json_string_value(json_object_get(e, "template"));
        if (!n || !t) continue;
        if (!strcmp(n, want)) return strdup(t);
        if (strlen(names) + strlen(n) + 3 < sizeof names) {
            if (names[0]) strcat(names, ", ");
            strcat(names, n);
        }
    }
    *err = xasprintf("no chat template named '%s' in tokenizer_config.json (available: %s)", want, names);
    return NULL;
}

int tmpl_chat_load(tmpl_chat *c, const char *dir, const char *override, const char *name, char **err)
{
    memset(c, 0, sizeof *c);
    *err = NULL;
    c->special = json_object();
    if (!c->special) {
        *err = strdup("out of memory");
        return -1;
    }
    json_t *cfg = NULL;
    if (dir) {
        char *p = xasprintf("%s/%s", dir, "special_tokens_map.json");
        json_t *stm = p ? json_load_file(p, JSON_DECODE_INT_AS_REAL, NULL) : NULL;
        free(p);
        collect_special(c->special, stm);
        json_decref(stm);
        p = xasprintf("%s/%s", dir, "tokenizer_config.json");
        json_error_t je;
        cfg = p ? json_load_file(p, JSON_DECODE_INT_AS_REAL, &je) : NULL;
        if (!cfg && !override) {
            *err = xasprintf("cannot read %s: %s", p ? p : dir, je.text);
            free(p);
            tmpl_chat_free(c);
            return -1;
        }
        free(p);
        collect_special(c->special, cfg);
    }
    char *src = NULL;
    if (override) {
        const char *b = tmpl_builtin_source(override);
        size_t n;
        if (b) src = strdup(b);
        else if ((src = fileio_read(override, 0, &n))) {
        } else if (strstr(override, "{{") || strstr(override, "{%") || strstr(override, "{#"))
            src = strdup(override);
        else {
            *err = xasprintf("--chat-template '%s' is not a built-in name (chatml, llama-2, zephyr), a readable file, or a template%s", override, NULL);
            json_decref(cfg);
            tmpl_chat_free(c);
            return -1;
        }
    } else {
        json_t *ct = cfg ? json_object_get(cfg, "chat_template") : NULL;
        if (name && strcmp(name, "default") && dir) {
            /* newer exports keep named templates as additional_chat_templates/NAME.jinja */
            char *p = strchr(name, '/') ? NULL : xasprintf("%s/additional_chat_templates/%s.jinja", dir, name);
            src = p ? fileio_read(p, 0, NULL) : NULL;
            free(p);
        }
        if (src) {
        } else if (ct && !json_is_null(ct)) src = pick_template(ct, name, err);
        else if (dir) {
            /* newer exports: chat_template.jinja, or chat_template.json {"chat_template": ...} */
            char *p = xasprintf("%s/%s", dir, "chat_template.jinja");
            src = p ? fileio_read(p, 0, NULL) : NULL;
            free(p);
            if (!src) {
                p = xasprintf("%s/%s", dir, "chat_template.json");
                json_t *j = p ? json_load_file(p, 0, NULL) : NULL;
                free(p);
                json_t *t = json_object_get(j, "chat_template");
                if (t && !json_is_null(t)) src = pick_template(t, name, err);
                json_decref(j);
            }
            if (!src && !*err)
                *err = xasprintf("%s has no chat template (no chat_template in tokenizer_config.json, no "
                                 "chat_template.jinja/.json); pass --chat-template%s", dir, NULL);
        } else *err = strdup("no chat template given");
    }
    json_decref(cfg);
    if (!src) {
        if (!*err) *err = strdup("out of memory");
        tmpl_chat_free(c);
        return -1;
    }
    c->source = src;
    char *cerr = NULL;
    if (tmpl_compile(src, strlen(src), &c->tmpl, &cerr)) {
        *err = xasprintf("chat template syntax error: %s%s", cerr ? cerr : "?", NULL);
        free(cerr);
        tmpl_chat_free(c);
        return -1;
    }
    return 0;
}

void tmpl_chat_free(tmpl_chat *c)
{
    if (!c) return;
    tmpl_destroy(c->tmpl);
    json_decref(c->special);
    free(c->source);
    memset(c, 0, sizeof *c);
}

int tmpl_chat_render(const tmpl_chat *c, const json_t *messages, const json_t *tools,
                     const json_t *documents, int add_generation_prompt, const json_t *kwargs,
                     char **out, size_t *out_len, char **err)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    *err = NULL;
    json_t *vars = json_deep_copy(c->special);
    if (!vars) {
        *err = strdup("out of memory");
        return -1;
    }
    if (kwargs && json_is_object(kwargs)) {
        static const char *reserved[] = {"messages", "tools", "documents", "add_generation_prompt", NULL};
        for (int i = 0; reserved[i]; i++)
            if (json_object_get(kwargs, reserved[i])) {
                *err = xasprintf("chat_template_kwargs may not set '%s' (pass it as a request field)%s", reserved[i], NULL);
                json_decref(vars);
                return -1;
            }
        json_object_update(vars, (json_t *)kwargs);
    }
    json_object_set_new(vars, "messages", messages ? json_incref((json_t *)messages) : json_array());
    json_object_set_new(vars, "tools", tools ? json_incref((json_t *)tools) : json_null());
    json_object_set_new(vars, "documents", documents ? json_incref((json_t *)documents) : json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt));
    int rc = tmpl_render(c->tmpl, vars, NULL, out, out_len, err);
    json_decref(vars);
    return rc;
}

/* ---- content format (SGLang) -------------------------------------------------- */
static int is_name_node(const tnode *n, const char *name)
{
    return n && n->kind == TN_NAME && !strcmp(n->name, name);
}

/* n is var["key"] / var.key, possibly through filters, tests or a slice */
static int is_content_access(const tnode *n, const char *var)
{
    while (n && (n->kind == TN_FILTER || n->kind == TN_TEST || n->kind == TN_SLICE)) n = n->a;
    if (!n) return 0;
    if (n->kind == TN_GETATTR) return is_name_node(n->a, var) && !strcmp(n->name, "content");
    if (n->kind == TN_GETITEM)
        return is_name_node(n->a, var) && n->b && n->b->kind == TN_LIT && n->b->lit->type == TV_STR &&
               n->b->lit->u.str.len == 7 && !memcmp(n->b->lit->u.str.s, "content", 7);
    return 0;
}

static int has_content_loop(const tnode *n)
{
    if (!n) return 0;
    if (n->kind == TN_FOR && n->op == 0 &&
        (is_content_access(n->a, "message") || is_content_access(n->a, "msg") || is_content_access(n->a, "m")))
        return 1;
    if (has_content_loop(n->a) || has_content_loop(n->b) || has_content_loop(n->c) || has_content_loop(n->d))
        return 1;
    for (size_t i = 0; i < n->n1; i++)
        if (has_content_loop(n->l1[i])) return 1;
    if (n->kind != TN_COMPARE)
        for (size_t i = 0; i < n->n2; i++)
            if (has_content_loop(n->l2[i])) return 1;
    return 0;
}

tmpl_content_format tmpl_detect_content_format(const tmpl_template *t)
{
    return t && has_content_loop(t->root) ? TMPL_CONTENT_OPENAI : TMPL_CONTENT_STRING;
}

json_t *tmpl_process_message(const json_t *msg, tmpl_content_format fmt, json_t *media)
{
    if (!json_is_object(msg)) return NULL;
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)msg, k, v) {
        if (!json_is_null(v)) json_object_set(out, k, v);
    }
    json_t *content = json_object_get(msg, "content");
    if (!json_is_array(content)) return out;
    size_t i;
    json_t *part;
    if (fmt == TMPL_CONTENT_STRING) {
        /* text parts joined by one space */
        size_t len = 0;
        json_array_foreach(content, i, part) {
            json_t *text = json_object_get(part, "text");
            if (json_is_string(json_object_get(part, "type")) &&
                !strcmp(json_string_value(json_object_get(part, "type")), "text") && json_is_string(text))
                len += json_string_length(text) + 1;
        }
        char *buf = malloc(len + 1), *p = buf;
        if (!buf) {
            json_decref(out);
            return NULL;
        }
        int first = 1;
        json_array_foreach(content, i, part) {
            json_t *text = json_object_get(part, "text");
            if (json_is_string(json_object_get(part, "type")) &&
                !strcmp(json_string_value(json_object_get(part, "type")), "text") && json_is_string(text)) {
                if (!first) *p++ = ' ';
                memcpy(p, json_string_value(text), json_string_length(text));
                p += json_string_length(text);
                first = 0;
            }
        }
        json_object_set_new(out, "content", json_stringn(buf, (size_t)(p - buf)));
        free(buf);
        return out;
    }
    json_t *parts = json_array();
    json_array_foreach(content, i, part) {
        if (!json_is_object(part)) continue;
        const char *type = json_string_value(json_object_get(part, "type"));
        static const char *const kinds[][2] = {{"image_url", "image"}, {"video_url", "video"}, {"audio_url", "audio"}};
        int done = 0;
        for (int kk = 0; type && kk < 3 && !done; kk++) {
            if (strcmp(type, kinds[kk][0])) continue;
            json_t *u = json_object_get(part, kinds[kk][0]);
            json_t *url = json_is_object(u) ? json_object_get(u, "url") : u;
            if (media) json_array_append_new(media, json_pack("{s:s, s:O?}", "type", kinds[kk][1], "url", url));
            json_array_append_new(parts, json_pack("{s:s}", "type", kinds[kk][1]));
            done = 1;
        }
        if (!done) json_array_append(parts, part);
    }
    json_object_set_new(out, "content", parts);
    return out;
}

/* ---- continue_final_message (transformers) --------------------------------- */
/* [*b, *e) = s without Python whitespace on the chosen sides */
static void py_trim(const char *s, size_t n, int left, int right, size_t *b, size_t *e)
{
    size_t i = 0, j = n;
    while (left && i < j) {
        size_t k = i;
        if (!tpy_isspace(tutf8_next(s, n, &k))) break;
        i = k;
    }
    while (right && j > i) {
        size_t st = j - 1;
        while (st > i && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
        size_t k = st;
        if (!tpy_isspace(tutf8_next(s, j, &k)) || k != j) break;
        j = st;
    }
    *b = i;
    *e = j;
}

int tmpl_continue_final_message(const json_t *messages, char *prompt, size_t *len, char **err)
{
    *err = NULL;
    size_t n = json_array_size(messages);
    const json_t *content = n ? json_object_get(json_array_get(messages, n - 1), "content") : NULL;
    if (json_is_array(content)) {
        const json_t *text = NULL;
        for (size_t i = json_array_size(content); i-- > 0 && !text;) {
            const json_t *blk = json_array_get(content, i);
            if (json_is_object(blk) && json_object_get(blk, "text")) text = json_object_get(blk, "text");
        }
        if (!text) {
            *err = strdup("continue_final_message is set but we could not find any text to continue in the final message!");
            return -1;
        }
        content = text;
    }
    if (!json_is_string(content)) {
        *err = strdup("continue_final_message is set but the final message content is not a string");
        return -1;
    }
    const char *fm = json_string_value(content);
    size_t fl = json_string_length(content), sb, se, lb, le;
    py_trim(fm, fl, 1, 1, &sb, &se);
    py_trim(fm, fl, 1, 0, &lb, &le);
    /* rindex of the stripped final message */
    size_t sl = se - sb, loc = (size_t)-1;
    for (size_t i = *len >= sl ? *len - sl + 1 : 0; i-- > 0;)
        if (!memcmp(prompt + i, fm + sb, sl)) {
            loc = i;
            break;
        }
    if (loc == (size_t)-1) {
        *err = strdup("continue_final_message is set but the final message does not appear in the chat after "
                      "applying the chat template! This can happen if the chat template deletes portions of the "
                      "final message. Please verify the chat template and final message in your chat to ensure "
                      "they are compatible.");
        return -1;
    }
    size_t ll = le - lb; /* bytes of final.lstrip() */
    if (loc + ll <= *len && ll == fl && !memcmp(prompt + loc, fm, fl)) *len = loc + ll;
    else *len = loc + sl;
    prompt[*len] = 0;
    return 0;
}

/* transformers' ValueError for continue_final_message with add_generation_prompt */
static const char tmpl_continue_agp_error[] =
    "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you "
    "want the model to continue the final message, and add_generation_prompt when you want to add a header that "
    "will prompt it to generate a new assistant message instead.";

int tmpl_chat_prompt(const tmpl_chat *c, const json_t *messages, const json_t *tools,
                     const json_t *documents, int add_generation_prompt, int continue_final_message,
                     const json_t *kwargs, char **out, size_t *out_len, char **err)
{
    *out = NULL;
    *err = NULL;
    if (continue_final_message && add_generation_prompt) {
        *err = strdup(tmpl_continue_agp_error);
        return -1;
    }
    size_t len = 0;
    if (tmpl_chat_render(c, messages, tools, documents, add_generation_prompt, kwargs, out, &len, err)) return -1;
    if (continue_final_message && tmpl_continue_final_message(messages, *out, &len, err)) {
        free(*out);
        *out = NULL;
        return -1;
    }
    if (out_len) *out_len = len;
    return 0;
}
