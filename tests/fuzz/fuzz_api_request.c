/* fuzz_api_request — HTTP request bodies through the API layer (api_handle)
 * in dry-run mode (no scheduler: synthetic events answer every request),
 * on a detached http request.  Input: first byte picks the route, the rest
 * is the body.  Checks: no crash, no leak (ASan), every request gets
 * exactly one answer with a valid status, JSON answers parse, streams end
 * with data: [DONE].  Uses the TinyStories-656K tokenizer when
 * $SGLC_SHARED (default ../shared) has it, else runs without one.  Request
 * logging is on (lines to /dev/null) and metrics are kept, so the logging
 * and metrics hooks, /configure_logging and /metrics are fuzzed too. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "api/api.h"
#include "api/api_ops.h"
#include "http/http.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

static api_server *g_api;
static tok_tokenizer *g_tok;
static tmpl_chat g_chat;
static api_reqlog *g_log;    /* request log on, lines to /dev/null */
static api_metrics *g_metrics;
static char g_dir[64], g_link[700]; /* removed at exit */

static void cleanup(void)
{
    unlink(g_link);
    rmdir(g_dir);
}

static const char *const ROUTES[] = {"/generate", "/v1/completions", "/v1/chat/completions",
                                     "/tokenize", "/detokenize", "/abort_request",
                                     "/health_generate", "/v1/models/x", "/get_load",
                                     "/configure_logging", "/metrics", "/pause_generation", "/continue_generation",
                                     "/update_weights_from_disk", "/flush_cache"};

static void setup(void)
{
    log_set_level(LOG_CRITICAL);
    const char *sh = getenv("SGLC_SHARED");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh ? sh : "../shared");
    char err[256];
    g_tok = tok_load_dir(dir, NULL, err, sizeof err);
    char *terr = NULL;
    const char *src = tmpl_builtin_source("chatml");
    if (tmpl_compile(src, strlen(src), &g_chat.tmpl, &terr)) abort();
    g_chat.special = json_object();
    /* request logging on (level 3) into a folder whose log file is /dev/null */
    char ldir[] = "/tmp/sglc_fuzz_req_XXXXXX";
    if (!mkdtemp(ldir)) abort();
    char host[256] = "localhost", lpath[600];
    gethostname(host, sizeof host - 1);
    snprintf(lpath, sizeof lpath, "%s/%s_0.log", ldir, host);
    if (symlink("/dev/null", lpath)) abort();
    snprintf(g_dir, sizeof g_dir, "%s", ldir);
    snprintf(g_link, sizeof g_link, "%s", lpath);
    atexit(cleanup);
    json_t *lt = json_pack("[s]", ldir);
    g_log = api_reqlog_create(true, 3, "text", lt, err, sizeof err);
    json_decref(lt);
    g_metrics = api_metrics_create("m", NULL, err, sizeof err);
    if (!g_log || !g_metrics) abort();
    api_config c = {.tok = g_tok, .chat = &g_chat, .served_model_name = "m", .model_path = "m",
                    .reqlog = g_log, .metrics = g_metrics,
                    .architecture = "LlamaForCausalLM", .context_length = 512,
                    .vocab_size = g_tok ? (int64_t)tok_vocab_size(g_tok) : 2048};
    g_api = api_create(&c, err, sizeof err);
    if (!g_api) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_api) setup();
    if (size < 1) return 0;
    const char *route = ROUTES[data[0] % (sizeof ROUTES / sizeof ROUTES[0])];
    http_req *r = http_req_detached();
    if (!r) return 0;
    api_handle(g_api, r, strcmp(route, "/metrics") ? "POST" : "GET", route, (const char *)data + 1, size - 1);
    log_set_level(LOG_CRITICAL); /* /configure_logging may have changed it */
    const char *body;
    size_t len;
    bool ended;
    int st = http_req_detached_result(r, &body, &len, &ended);
    if (!ended || st < 200 || st > 599) abort();
    if (len && body[0] == '{') {
        json_t *j = json_loadb(body, len, 0, NULL);
        if (!j) abort();
        json_decref(j);
    }
    if (len >= 6 && !memcmp(body, "data: ", 6)) {
        static const char done[] = "data: [DONE]\n\n";
        if (len < sizeof done - 1 || memcmp(body + len - (sizeof done - 1), done, sizeof done - 1)) abort();
    }
    http_req_detached_free(r);
    return 0;
}
