/* fuzz_score_request — /v1/score, /v1/rerank, /v1/classify and /classify
 * bodies (api_score.c) through api_handle in dry-run mode (no scheduler:
 * synthetic events answer every request), on two servers: a generation
 * model with --multi-item-scoring-delimiter (score's one-pass path) and a
 * Qwen3-Reranker-style chat template (rerank's decoder path), and an
 * embedding-mode classifier with 3 labels (rerank, classify).  Input:
 * byte 0 picks the route (low bits) and the server (bit 2), the rest is
 * the body.  Checks: no crash, no leak (ASan), exactly one answer with a
 * valid status, JSON answers parse.  Uses the TinyStories-656K tokenizer
 * when $SGLC_SHARED (default ../shared) has it. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "http/http.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

static api_server *g_gen, *g_cls;
static tok_tokenizer *g_tok;
static tmpl_chat g_chat; /* a Qwen3-Reranker-style template: the decoder rerank path */
static const char RERANK_TMPL[] =
    "<|im_start|>system\nNote that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<Instruct>: {{ instruct | default('find') }}\n<Query>: {{ messages[0]['content'] }}\n"
    "<Document>: {{ messages[1]['content'] }}\n";
static const char *const LABELS[] = {"negative", "neutral", "positive"};
static const char *const ROUTES[] = {"/v1/score", "/v1/rerank", "/v1/classify", "/classify"};

static void setup(void)
{
    log_set_level(LOG_CRITICAL);
    const char *sh = getenv("SGLC_SHARED");
    char dir[1024], err[256];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh ? sh : "../shared");
    g_tok = tok_load_dir(dir, NULL, err, sizeof err);
    int64_t V = g_tok ? (int64_t)tok_vocab_size(g_tok) : 2048;
    char *terr = NULL;
    if (tmpl_compile(RERANK_TMPL, sizeof RERANK_TMPL - 1, &g_chat.tmpl, &terr)) abort();
    g_chat.special = json_object();
    g_chat.source = (char *)RERANK_TMPL;
    api_config c = {.tok = g_tok, .chat = &g_chat, .served_model_name = "m", .model_path = "m", .architecture = "LlamaForCausalLM",
                    .context_length = 512, .vocab_size = V, .score = {.mi_on = true, .mi_delim = 13}};
    g_gen = api_create(&c, err, sizeof err);
    c.is_embedding = true;
    c.chat = NULL;
    c.architecture = "Qwen3ForSequenceClassification";
    c.score = (api_score_model){.n_labels = 3, .labels = LABELS};
    g_cls = api_create(&c, err, sizeof err);
    if (!g_gen || !g_cls) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_gen) setup();
    if (size < 1) return 0;
    const char *route = ROUTES[data[0] & 3];
    http_req *r = http_req_detached();
    if (!r) return 0;
    api_handle(data[0] & 4 ? g_cls : g_gen, r, "POST", route, (const char *)data + 1, size - 1);
    const char *body;
    size_t len;
    bool ended;
    int st = http_req_detached_result(r, &body, &len, &ended);
    if (!ended || st < 200 || st > 599) abort();
    if (len && (body[0] == '{' || body[0] == '[')) {
        json_t *j = json_loadb(body, len, 0, NULL);
        if (!j) abort();
        json_decref(j);
    }
    http_req_detached_free(r);
    return 0;
}
