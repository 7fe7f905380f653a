/* cmd_tokenize — `sglc tokenize` and `sglc detokenize`: JSON lines in, JSON
 * lines out, so a tokenizer can be checked (and scripted) without a model.
 *
 *   sglc tokenize --tokenizer-path DIR      {"text": "...", "add_special_tokens": true}  -> {"ids": [...]}
 *   sglc detokenize --tokenizer-path DIR    {"ids": [...], "skip_special_tokens": true}  -> {"text": "..."}
 *
 * A line that cannot be handled gets {"error": "..."} and the next line is
 * read: one bad request never stops the stream.  --tokenizer-mode auto|slow
 * is accepted as in SGLang; "slow" means decode with the slow tokenizer's
 * rule for spaces_between_special_tokens (on by default, as SGLang), since
 * HF's fast tokenizers ignore that option; encoding is the same in both. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_gguf.h"
#include "model/gguf_model.h"
#include "tokenizer/tokenizer.h"

static void emit(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    fflush(stdout);
    json_decref(o);
}

static void emit_error(const char *msg) { emit(json_pack("{s:s}", "error", msg)); }

static bool opt_bool(json_t *o, const char *k, bool def, bool *bad)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return def;
    if (!json_is_boolean(v)) { *bad = true; return def; }
    return json_is_true(v);
}

static void do_tokenize(const tok_tokenizer *t, json_t *req)
{
    json_t *text = json_object_get(req, "text");
    if (!json_is_string(text)) { emit_error("\"text\" must be a string"); return; }
    bool bad = false;
    bool add = opt_bool(req, "add_special_tokens", true, &bad);
    if (bad) { emit_error("\"add_special_tokens\" must be a boolean"); return; }
    tok_ids ids = {0};
    if (tok_encode(t, json_string_value(text), json_string_length(text), add, &ids)) {
        tok_ids_free(&ids);
        emit_error("encoding failed");
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < ids.n; i++) json_array_append_new(arr, json_integer(ids.ids[i]));
    tok_ids_free(&ids);
    emit(json_pack("{s:o}", "ids", arr));
}

static void do_detokenize(const tok_tokenizer *t, json_t *req)
{
    json_t *arr = json_object_get(req, "ids");
    if (!json_is_array(arr)) { emit_error("\"ids\" must be an array of integers"); return; }
    bool bad = false;
    tok_decode_opts o = {
        .skip_special_tokens = opt_bool(req, "skip_special_tokens", true, &bad),
        .spaces_between_special_tokens = opt_bool(req, "spaces_between_special_tokens", true, &bad),
    };
    if (bad) { emit_error("\"skip_special_tokens\" / \"spaces_between_special_tokens\" must be booleans"); return; }
    size_t n = json_array_size(arr);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) { emit_error("out of memory"); return; }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || (size_t)json_integer_value(v) >= tok_vocab_size(t)) {
            char msg[128];
            snprintf(msg, sizeof msg, "ids[%zu] is not a token id in [0, %zu)", i, tok_vocab_size(t));
            free(ids);
            emit_error(msg);
            return;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t len = 0;
    int rc = tok_decode(t, ids, n, &o, &text, &len);
    free(ids);
    if (rc) { emit_error("decoding failed (unused token id?)"); return; }
    emit(json_pack("{s:s%}", "text", text, len));
    free(text);
}

static int run(int argc, char **argv, bool tokenize)
{
    const char *cmd = tokenize ? "tokenize" : "detokenize";
    /* --tokenizer-path / --tokenizer-mode are the server arguments (the
     * table's meaning and checks); --model-path stands in for the
     * tokenizer path as in SGLang */
    static const int shown[] = {ARG_ID_tokenizer_path, ARG_ID_tokenizer_mode, ARG_ID_model_path, ARG_COUNT};
    const args_extra extra[] = {{0}};
    const args_cmd c = {
        .usage = tokenize ? "usage: sglc tokenize --tokenizer-path DIR|FILE.gguf [--tokenizer-mode auto|slow]"
                          : "usage: sglc detokenize --tokenizer-path DIR [--tokenizer-mode auto|slow]",
        .about = "Reads JSON lines on stdin, writes one JSON line per input line. tokenize: "
                 "{\"text\": \"...\", \"add_special_tokens\": true} -> {\"ids\": [...]}; detokenize: "
                 "{\"ids\": [...], \"skip_special_tokens\": true, \"spaces_between_special_tokens\": "
                 "true} -> {\"text\": \"...\"}. --tokenizer-mode slow: decode as HF's slow tokenizers "
                 "do (spaces_between_special_tokens honoured); encoding is identical in both modes.",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse(cmd, &c, false, &a, argc, argv);
    if (prc >= 0) return prc;
    const char *path = a.tokenizer_path ? a.tokenizer_path : a.model_path;
    if (!path) {
        fprintf(stderr, "sglc %s: --tokenizer-path is required (see sglc %s --help)\n", cmd, cmd);
        args_server_free(&a);
        return 2;
    }
    tok_load_opts lo = {.mode = a.tokenizer_mode && !strcmp(a.tokenizer_mode, "slow") ? TOK_MODE_SLOW : TOK_MODE_AUTO};
    char err[512];
    char gguf[4096];
    tok_tokenizer *t = NULL;
    if (gguf_model_path(path, 0, gguf, sizeof gguf, err, sizeof err) == 1) { /* a GGUF file's vocabulary */
        args_server_free(&a);
        if (cli_tokenizer_load_gguf(gguf, true, &t)) return 1;
    } else {
        t = tok_load_dir(path, &lo, err, sizeof err);
        args_server_free(&a); /* path is not read after the load */
        if (!t) { fprintf(stderr, "sglc %s: %s\n", cmd, err); return 1; }
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (!len) continue;
        json_error_t je;
        json_t *req = json_loadb(line, len, 0, &je);
        if (!req || !json_is_object(req)) {
            char msg[300];
            snprintf(msg, sizeof msg, "bad JSON line: %s", req ? "not an object" : je.text);
            emit_error(msg);
            json_decref(req);
            continue;
        }
        if (tokenize) do_tokenize(t, req);
        else do_detokenize(t, req);
        json_decref(req);
    }
    free(line);
    tok_destroy(t);
    return 0;
}

int cmd_tokenize(int argc, char **argv) { return run(argc, argv, true); }
int cmd_detokenize(int argc, char **argv) { return run(argc, argv, false); }
