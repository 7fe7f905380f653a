/* cmd_chat_template — `sglc chat-template`: render chat prompts from JSON
 * lines, so chat templates can be checked without a model.
 *
 * Input (stdin), one JSON object per line:
 *   {"messages": [...], "tools": [...], "documents": [...],
 *    "add_generation_prompt": true, "continue_final_message": false,
 *    "chat_template_kwargs": {...}}
 * Output (stdout), one line per input line:
 *   {"prompt": "..."}   or   {"error": "..."}
 * add_generation_prompt defaults to false (transformers' default); tools and
 * documents default to None.  Messages are passed as given (no SGLang
 * content flattening); --content-format prints what SGLang would detect.  Exit status 0 when every line was read (even
 * if some rendered errors), 2 for bad arguments, 1 when the template could
 * not be loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "template/template.h"

static void emit(const char *key, const char *val, size_t len)
{
    json_t *o = json_object();
    json_t *v = json_stringn(val, len); /* NULL when val is not valid UTF-8 */
    json_object_set_new(o, key, v ? v : json_string("(output is not valid UTF-8)"));
    char *s = json_dumps(o, JSON_COMPACT);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    json_decref(o);
    fflush(stdout);
}

/* Python's bool() of a JSON value (the reference does bool(value)) */
static int json_truthy(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_TRUE: return 1;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0.0;
    case JSON_STRING: return json_string_length(v) != 0;
    case JSON_ARRAY: return json_array_size(v) != 0;
    case JSON_OBJECT: return json_object_size(v) != 0;
    default: return 0;
    }
}

static void render_line(const tmpl_chat *c, const char *line)
{
    json_error_t je;
    json_t *req = json_loads(line, JSON_ALLOW_NUL, &je);
    if (!req || !json_is_object(req)) {
        char msg[300];
        snprintf(msg, sizeof msg, "invalid request JSON: %s", req ? "not an object" : je.text);
        emit("error", msg, strlen(msg));
        json_decref(req);
        return;
    }
    json_t *messages = json_object_get(req, "messages");
    json_t *tools = json_object_get(req, "tools");
    json_t *docs = json_object_get(req, "documents");
    json_t *agp = json_object_get(req, "add_generation_prompt");
    json_t *kw = json_object_get(req, "chat_template_kwargs");
    json_t *cfm = json_object_get(req, "continue_final_message");
    if (!json_is_array(messages)) {
        emit("error", "\"messages\" must be a list", strlen("\"messages\" must be a list"));
    } else if (kw && !json_is_object(kw) && !json_is_null(kw)) {
        emit("error", "\"chat_template_kwargs\" must be an object", strlen("\"chat_template_kwargs\" must be an object"));
    } else {
        char *out = NULL, *err = NULL;
        size_t out_len = 0;
        if (tools && json_is_null(tools)) tools = NULL;
        if (docs && json_is_null(docs)) docs = NULL;
        if (tmpl_chat_prompt(c, messages, tools, docs, agp && json_truthy(agp), cfm && json_truthy(cfm), kw, &out,
                             &out_len, &err) == 0)
            emit("prompt", out, out_len);
        else emit("error", err ? err : "render failed", strlen(err ? err : "render failed"));
        free(out);
        free(err);
    }
    json_decref(req);
}

int cmd_chat_template(int argc, char **argv)
{
    bool print_format = false;
    const args_extra extra[] = {
        {.name = "--content-format",
         .help = "Print the content format the template expects (string|openai, SGLang's detection) "
                 "and exit.",
         .flag = &print_format},
        {0},
    };
    /* the template arguments are the server's (same meaning as in serve);
     * --model-path stands in for the tokenizer folder */
    static const int shown[] = {ARG_ID_tokenizer_path, ARG_ID_model_path, ARG_ID_chat_template,
                                ARG_ID_hf_chat_template_name, ARG_COUNT};
    char about[1024];
    int off = snprintf(about, sizeof about, "Reads JSON lines {\"messages\", \"tools\", \"documents\", "
                                            "\"add_generation_prompt\", \"continue_final_message\", "
                                            "\"chat_template_kwargs\"} on stdin, writes {\"prompt\"} or "
                                            "{\"error\"} per line. Built-in templates:");
    for (const char *const *n = tmpl_builtin_names(); *n && off > 0 && (size_t)off < sizeof about; n++)
        off += snprintf(about + off, sizeof about - (size_t)off, " %s%s", *n, n[1] ? "," : ".");
    const args_cmd cmd = {
        .usage = "usage: sglc chat-template [--tokenizer-path DIR] [--chat-template T] "
                 "[--hf-chat-template-name NAME]",
        .about = about,
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("chat-template", &cmd, false, &a, argc, argv);
    if (prc >= 0) return prc;
    const char *dir = a.tokenizer_path ? a.tokenizer_path : a.model_path;
    if (!dir && !a.chat_template) {
        fprintf(stderr, "sglc chat-template: give --tokenizer-path or --chat-template (see sglc chat-template --help)\n");
        args_server_free(&a);
        return 2;
    }
    tmpl_chat c;
    char *err = NULL;
    int lrc = tmpl_chat_load(&c, dir, a.chat_template, a.hf_chat_template_name, &err);
    args_server_free(&a); /* the loader copied what it needs */
    if (lrc) {
        fprintf(stderr, "sglc chat-template: %s\n", err ? err : "cannot load the chat template");
        free(err);
        return 1;
    }
    if (print_format) {
        puts(tmpl_detect_content_format(c.tmpl) == TMPL_CONTENT_OPENAI ? "openai" : "string");
        tmpl_chat_free(&c);
        return 0;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        render_line(&c, line);
    }
    free(line);
    tmpl_chat_free(&c);
    return 0;
}
