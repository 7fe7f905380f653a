/* fuzz_embed_request — the embedding routes on outside input.
 *   byte 0 picks the target:
 *     0-3  an HTTP body through api_handle on an --is-embedding API in
 *          dry-run mode (no scheduler: synthetic events carry a 4-value
 *          vector): /encode, /v1/embeddings, /generate (must be 400),
 *          /v1/completions (must be 400).  Checks: exactly one answer
 *          with a valid status, JSON answers parse.  With the
 *          TinyStories-656K tokenizer when $SGLC_SHARED has it.
 *     4    api_embed_parse (byte 1 picks the OpenAI or native form) on
 *          the rest, then api_embed_check_dims on its dimensions: parsed
 *          inputs are consistent (text xor ids, n >= 1, rids per input)
 *     5    api_embed_base64 of the rest as floats: length 4 * ceil(n*4/3)
 *          and only base64 characters. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_embed.h"
#include "http/http.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

static api_server *g_api;
static tok_tokenizer *g_tok;
static const int g_mdims[2] = {2, 3};

static const char *const ROUTES[] = {"/encode", "/v1/embeddings", "/generate", "/v1/completions"};

static void setup(void)
{
    log_set_level(LOG_CRITICAL);
    const char *sh = getenv("SGLC_SHARED");
    char dir[1024], err[256];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", sh ? sh : "../shared");
    g_tok = tok_load_dir(dir, NULL, err, sizeof err);
    api_config c = {.tok = g_tok, .served_model_name = "m", .model_path = "m", .architecture = "LlamaForCausalLM",
                    .context_length = 512, .vocab_size = g_tok ? (int64_t)tok_vocab_size(g_tok) : 2048,
                    .is_embedding = true,
                    .embed = {.model_path = "m", .hidden_size = 4, .is_matryoshka = true, .mdims = g_mdims,
                              .n_mdims = 2}};
    g_api = api_create(&c, err, sizeof err);
    if (!g_api) abort();
}

static void fuzz_route(int which, const uint8_t *data, size_t size)
{
    const char *route = ROUTES[which];
    http_req *r = http_req_detached();
    if (!r) return;
    api_handle(g_api, r, "POST", route, (const char *)data, size);
    const char *body;
    size_t len;
    bool ended;
    int st = http_req_detached_result(r, &body, &len, &ended);
    if (!ended || st < 200 || st > 599) abort();
    if (which >= 2 && st != 400) abort(); /* generation routes on an embedding server */
    if (len && (body[0] == '{' || body[0] == '[')) {
        json_t *j = json_loadb(body, len, 0, NULL);
        if (!j) abort();
        json_decref(j);
    }
    http_req_detached_free(r);
}

static void fuzz_parse(const uint8_t *data, size_t size)
{
    if (size < 1) return;
    bool oai = data[0] & 1;
    json_t *j = json_loadb((const char *)data + 1, size - 1, 0, NULL);
    if (!j) return;
    api_embed_req q;
    char err[512];
    if (api_embed_parse(j, oai, &q, err, sizeof err) == 0) {
        if (q.n < 1) abort();
        for (int i = 0; i < q.n; i++) {
            const api_embed_item *it = &q.items[i];
            if (!it->text == !it->ids) abort();
            if (it->ids && it->n_ids < (oai && q.single ? 1 : 1)) abort();
            for (int64_t k = 0; it->ids && k < it->n_ids; k++)
                if (it->ids[k] < 0) abort();
            if (q.rids && !q.rids[i]) abort();
        }
        api_embed_model m = {.model_path = "m", .hidden_size = 8, .is_matryoshka = (data[0] & 2) != 0,
                             .mdims = g_mdims, .n_mdims = (data[0] & 4) ? 2 : 0};
        if (q.has_dims && api_embed_check_dims(&m, q.dims, err, sizeof err) == 0 &&
            (q.dims < 1 || q.dims > 8 || !m.is_matryoshka))
            abort();
        api_embed_req_free(&q);
    } else if (!err[0]) {
        abort();
    }
    json_decref(j);
}

static void fuzz_base64(const uint8_t *data, size_t size)
{
    int n = (int)(size / 4);
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!v) return;
    if (n) memcpy(v, data, (size_t)n * 4);
    char *b = api_embed_base64(v, n);
    if (b) {
        size_t want = ((size_t)n * 4 + 2) / 3 * 4;
        if (strlen(b) != want) abort();
        for (size_t i = 0; i < want; i++)
            if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", b[i])) abort();
    }
    free(b);
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_api) setup();
    if (size < 1) return 0;
    int t = data[0] % 6;
    if (t < 4) fuzz_route(t, data + 1, size - 1);
    else if (t == 4) fuzz_parse(data + 1, size - 1);
    else fuzz_base64(data + 1, size - 1);
    return 0;
}
