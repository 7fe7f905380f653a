/* api_embed — request parsing and answer helpers for the embedding routes
 * (SGLang's POST /encode and the OpenAI POST /v1/embeddings on a server
 * started with --is-embedding).
 *
 * DESIGN: pure functions (no scheduler, no HTTP), so the fuzzer reaches
 * every branch.  api_embed_parse turns either body into a list of inputs,
 * each a text or a token-id list; the route (api.c) tokenizes the texts,
 * submits one scheduler request per input and answers with
 * api_embed_*_json.  Messages are SGLang's (serving_embedding.py
 * _validate_request, tokenizer_manager._validate_for_matryoshka_dim).
 *
 * Ownership: api_embed_req owns its items, texts, id arrays and rids
 * (api_embed_req_free). */
#ifndef SGLC_API_EMBED_H
#define SGLC_API_EMBED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef struct api_embed_item {
    char *text;                 /* owned UTF-8 text, or NULL when ids are given */
    size_t text_len;
    int32_t *ids;               /* (n_ids) owned token ids, or NULL when text is given */
    int64_t n_ids;
} api_embed_item;

typedef struct api_embed_req {
    api_embed_item *items;      /* (n) owned */
    int n;
    bool single;                /* one string / one id list: the native route answers an object */
    bool base64;                /* encoding_format "base64" (OpenAI route) */
    bool has_dims;              /* `dimensions` given (not null) */
    int64_t dims;
    char **rids;                /* (n) owned or NULL: the request's rid(s) */
} api_embed_req;

/* What the served model allows for `dimensions` (Matryoshka). */
typedef struct api_embed_model {
    const char *model_path;     /* shown in messages */
    int hidden_size;
    bool is_matryoshka;         /* config.json is_matryoshka / matryoshka_dimensions */
    const int *mdims;           /* (n_mdims) allowed sizes, n_mdims 0 = any */
    int n_mdims;
} api_embed_model;

/* Parse a JSON body.  oai: the OpenAI EmbeddingRequest (input, model,
 * encoding_format, dimensions, user, rid); else SGLang's EmbeddingReqInput
 * (text | input_ids, rid, dimensions).  0, or -1 with a message in err
 * (out is then empty). */
int api_embed_parse(const json_t *body, bool oai, api_embed_req *out, char *err, size_t errlen);
void api_embed_req_free(api_embed_req *r);

/* SGLang's _validate_for_matryoshka_dim.  0 or -1 with the message. */
int api_embed_check_dims(const api_embed_model *m, int64_t dims, char *err, size_t errlen);

/* base64 of v as little-endian float32 (OpenAI's encoding_format
 * "base64").  malloc'd NUL-terminated string, NULL on OOM. */
char *api_embed_base64(const float *v, int n);

/* JSON array of v (new reference; NULL on OOM).  Values are written as
 * doubles of the float32s. */
json_t *api_embed_float_array(const float *v, int n);

#endif
