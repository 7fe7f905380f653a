/* api_lora — the LoRA parts of the HTTP API (issue 14): /load_lora_adapter,
 * /unload_lora_adapter, adapters in /v1/models, and the adapter an OpenAI
 * request picks through `model` (see api_job.h for the entry points).
 *
 * DESIGN: the registry is the process's (lora_global, made by cli_lora at
 * start-up); these routes only call it.  A load runs on the HTTP worker
 * that carries the request (api_tokq), never on the scheduler thread, so
 * requests keep running while an adapter loads (SGLang's overlap loading);
 * a running request holds its adapter, so an unload never disturbs it.
 *
 * Answers as SGLang's LoadLoRAAdapterReqOutput: {"success", "error_message",
 * "loaded_adapters": {name: path}}, 200 on success, 400 otherwise.
 *
 * OpenAI routes (SGLang's serving_base): "model": "BASE:ADAPTER" picks
 * ADAPTER (split at the first ':', both sides stripped; an empty adapter
 * means none), else an explicit "lora_path": a string, or a list with one
 * entry (string or null) per prompt (a /v1/completions prompt list; one
 * for a chat); an adapter asked for while LoRA is off is a 400 naming it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api_impl.h"
#include "api/api_job.h"
#include "lora/lora.h"
#include "util/log.h"

static json_t *loaded_map(lora_registry *reg)
{
    json_t *m = json_object();
    lora_adapter **v;
    int n = reg ? lora_registry_list(reg, &v) : 0;
    for (int i = 0; i < n; i++) json_object_set_new(m, v[i]->name, json_string(v[i]->path));
    if (n >= 0 && reg) lora_registry_list_free(v, n);
    return m;
}

static void lora_answer(http_req *r, lora_registry *reg, const char *err)
{
    json_t *o = json_pack("{s:b,s:s?,s:o}", "success", err == NULL, "error_message", err, "loaded_adapters",
                          loaded_map(reg));
    api_respond_json(r, err ? 400 : 200, o);
}

bool api_lora_route(http_req *r, const char *method, const char *path, const char *body, size_t body_len)
{
    bool load = !strcmp(path, "/load_lora_adapter"), unload = !strcmp(path, "/unload_lora_adapter");
    if (!load && !unload) return false;
    if (strcmp(method, "POST") && strcmp(method, "PUT")) {
        api_respond_json(r, 405, json_pack("{s:s}", "detail", "Method Not Allowed"));
        return true;
    }
    lora_registry *reg = lora_global();
    if (!reg) {
        lora_answer(r, NULL, "LoRA is not enabled. Please set `--enable-lora` to enable LoRA.");
        return true;
    }
    json_error_t je;
    json_t *o = body && body_len ? json_loadb(body, body_len, 0, &je) : NULL;
    const char *name = json_string_value(json_object_get(o, "lora_name"));
    const char *lpath = json_string_value(json_object_get(o, "lora_path"));
    json_t *pin = json_object_get(o, "pinned");
    char err[1400];
    if (!json_is_object(o) || !name || (load && !lpath) || (pin && !json_is_boolean(pin) && !json_is_null(pin))) {
        lora_answer(r, reg, load ? "The body must be a JSON object with string lora_name and lora_path "
                                   "(and boolean pinned)"
                                 : "The body must be a JSON object with a string lora_name");
        json_decref(o);
        return true;
    }
    int rc;
    if (load) {
        log_info("Start load Lora adapter. Lora name=%s, path=%s", name, lpath);
        rc = lora_registry_load(reg, name, lpath, json_is_true(pin), err, sizeof err);
    } else {
        log_info("Start unload Lora adapter. Lora name=%s", name);
        rc = lora_registry_unload(reg, name, err, sizeof err);
    }
    lora_answer(r, reg, rc ? err : NULL);
    json_decref(o);
    return true;
}

void api_lora_models(json_t *data, const char *served, const char *only)
{
    lora_registry *reg = lora_global();
    lora_adapter **v;
    int n = reg ? lora_registry_list(reg, &v) : -1;
    for (int i = 0; i < n; i++) {
        if (only && strcmp(only, v[i]->name)) continue;
        json_array_append_new(data, json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:n}", "id", v[i]->name, "object",
                                              "model", "created", (json_int_t)time(NULL), "owned_by", "sglang",
                                              "root", v[i]->path, "parent", served, "max_model_len"));
    }
    if (n >= 0) lora_registry_list_free(v, n);
}

/* Copy of s[0, n) without surrounding white space. */
static char *strip_dup(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

int api_lora_pick_openai(const json_t *body, int i, int n_prompt, lora_adapter **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *model = json_string_value(json_object_get(body, "model"));
    const char *colon = model ? strchr(model, ':') : NULL;
    char *name = colon ? strip_dup(colon + 1, strlen(colon + 1)) : NULL;
    if (name && !*name) free(name), name = NULL;
    if (!name) {
        const json_t *lp = json_object_get(body, "lora_path");
        if (json_is_array(lp)) { /* one entry per prompt (SGLang indexes lora_path[i]) */
            if ((int)json_array_size(lp) != n_prompt) {
                snprintf(err, errlen, "lora_path must be a string, or a list with one entry per prompt "
                         "(%zu entries for %d prompts)", json_array_size(lp), n_prompt);
                return -1;
            }
            lp = json_array_get(lp, (size_t)i);
            if (!json_is_null(lp) && !json_is_string(lp)) {
                snprintf(err, errlen, "lora_path[%d] must be a string or null", i);
                return -1;
            }
        }
        if (json_is_string(lp) && json_string_length(lp)) name = strip_dup(json_string_value(lp), json_string_length(lp));
        else if (lp && !json_is_null(lp) && !json_is_string(lp)) {
            snprintf(err, errlen, "lora_path must be a string, or a list with one entry per prompt");
            return -1;
        }
    }
    if (!name) return 0;
    int rc = 0;
    if (!lora_global()) {
        snprintf(err, errlen,
                 "LoRA adapter '%s' was requested, but LoRA is not enabled. Please launch the server with "
                 "--enable-lora flag and preload adapters using --lora-paths or /load_lora_adapter endpoint.",
                 name);
        rc = -1;
    } else {
        rc = lora_resolve(name, out, err, errlen);
    }
    free(name);
    return rc;
}
