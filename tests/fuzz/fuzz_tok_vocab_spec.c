/* fuzz_tok_vocab_spec — tokenizers from random GGUF-style vocabularies.
 *
 * The input is read as: a header (model, pre name, which arrays exist,
 * special ids as raw bytes so they can be negative or out of range,
 * add_bos/add_eos/add_space_prefix, a "huge count" flag), then token
 * strings separated by 0x00 (any bytes: empty, invalid UTF-8, duplicates),
 * each one's first byte choosing its type and score.  Merges are built from
 * pairs of those strings, some with no space.  Any spec must either load
 * (then encode, decode and stream without a sanitizer report, decode
 * giving valid UTF-8) or fail with a message; never crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_vocab_spec.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOK 400

static const char *PRES[] = {NULL, "default", "llama-bpe", "qwen2", "deepseek-v3", "gpt-4o", "tekken",
                             "starcoder", "qwen35", "no-such-pre", ""};
static const char *MODELS[] = {"llama", "gpt2", "bert", NULL};

static int32_t sid(uint8_t b, size_t n)
{
    if (b == 0xFF) return -1;
    if (b == 0xFE) return (int32_t)n;         /* just out of range */
    if (b == 0xFD) return INT32_MAX;
    if (b == 0xFC) return -12345;
    return n ? (int32_t)(b % (n + 2)) : 0;    /* in range, or a little over */
}

static bool valid_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) { i++; continue; }
        size_t l = (u[i] >= 0xF0) ? 4 : (u[i] >= 0xE0) ? 3 : (u[i] >= 0xC2) ? 2 : 0;
        if (!l || i + l > n) return false;
        for (size_t k = 1; k < l; k++)
            if ((u[i + k] & 0xC0) != 0x80) return false;
        i += l;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_CRITICAL);
    if (size < 12) return 0;
    const uint8_t *h = data;
    /* a copy with a NUL after the last token, so every string is terminated
     * (the spec allows token_lens == NULL: strlen) */
    uint8_t *body = malloc(size - 12 + 1);
    if (!body) return 0;
    memcpy(body, data + 12, size - 12);
    body[size - 12] = 0;
    const uint8_t *p = body, *end = body + (size - 12);
    const char *tok[MAX_TOK];
    size_t lens[MAX_TOK];
    float scores[MAX_TOK];
    int32_t types[MAX_TOK];
    size_t n = 0;
    while (p < end && n < MAX_TOK) {
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        size_t l = z ? (size_t)(z - p) : (size_t)(end - p);
        tok[n] = (const char *)p;
        lens[n] = l;
        uint8_t c = l ? p[0] : 0;
        types[n] = (int32_t)(c % 9) - 1;            /* -1..7: includes values outside 1..6 */
        scores[n] = (c & 0x80) ? -(float)n : (float)(int8_t)c;
        n++;
        p += l + (z ? 1 : 0);
    }
    /* merges: "a b" from neighbouring tokens; every 5th has no space */
    char *mbuf[MAX_TOK];
    const char *merges[MAX_TOK];
    size_t n_merges = (h[3] & 1) ? n / 2 : 0;
    for (size_t i = 0; i < n_merges; i++) {
        size_t a = (2 * i) % n, b = (2 * i + 1) % n;
        mbuf[i] = malloc(lens[a] + lens[b] + 2);
        memcpy(mbuf[i], tok[a], lens[a]);
        size_t o = lens[a];
        if (i % 5 != 4) mbuf[i][o++] = ' ';
        memcpy(mbuf[i] + o, tok[b], lens[b]);
        o += lens[b];
        mbuf[i][o] = 0;
        merges[i] = mbuf[i];
    }
    size_t merge_lens[MAX_TOK];
    for (size_t i = 0; i < n_merges; i++) merge_lens[i] = strlen(merges[i]); /* a NUL inside cuts it short */
    tok_vocab_spec s = {
        .model = MODELS[h[0] % 4],
        .pre = PRES[h[1] % (sizeof PRES / sizeof PRES[0])],
        .n_tokens = (h[2] & 0x40) ? (size_t)1 << 33 : n, /* a huge claimed count must fail before any read */
        .tokens = (h[2] & 0x80) ? NULL : tok,
        .token_lens = (h[2] & 1) ? NULL : lens,
        .scores = (h[2] & 2) ? scores : NULL,
        .token_types = (h[2] & 4) ? types : NULL,
        .n_merges = n_merges,
        .merges = n_merges ? merges : NULL,
        .merge_lens = (h[3] & 2) ? merge_lens : NULL,
        .bos_id = sid(h[4], n), .eos_id = sid(h[5], n), .unk_id = sid(h[6], n),
        .pad_id = sid(h[7], n), .eot_id = sid(h[8], n), .eom_id = sid(h[9], n),
        .add_bos = (int)(h[10] % 3) - 1, .add_eos = (int)((h[10] / 3) % 3) - 1,
        .add_space_prefix = (int)(h[11] % 3) - 1,
    };
    if (!s.token_lens)
        for (size_t i = 0; i < n; i++) lens[i] = strlen(tok[i]); /* tokens are cut at the NUL anyway */
    char err[512] = "";
    tok_tokenizer *t = tok_load_vocab_spec(&s, err, sizeof err);
    if (!t) {
        if (!err[0]) abort(); /* a failure must say why */
    } else {
        static const char text[] = "Hello, world! 你好 <s> 12345 \xF0\x9F\x98\x80 a\xFF  \n\t";
        tok_ids ids = {0};
        for (int pass = 0; pass < 2; pass++) {
            const char *in = pass ? (const char *)data + 12 : text;
            size_t len = pass ? size - 12 : sizeof text - 1;
            ids.n = 0;
            if (tok_encode(t, in, len, pass == 0, &ids)) continue;
            for (size_t i = 0; i < ids.n; i++)
                if (ids.ids[i] < 0 || (size_t)ids.ids[i] >= tok_vocab_size(t)) abort();
            char *out = NULL;
            size_t ol = 0;
            tok_decode_opts o = {.skip_special_tokens = pass == 1};
            if (tok_decode(t, ids.ids, ids.n, &o, &out, &ol) == 0) {
                if (!valid_utf8(out, ol)) abort();
                free(out);
            }
            tok_stream *st = tok_stream_create(t, &o);
            for (size_t i = 0; st && i < ids.n; i++) {
                char *piece = NULL;
                if (tok_stream_push(st, &ids.ids[i], 1, &piece, NULL) == 0) free(piece);
            }
            if (st) {
                char *rest = NULL;
                if (tok_stream_finish(st, &rest, NULL) == 0) free(rest);
                tok_stream_destroy(st);
            }
        }
        tok_ids_free(&ids);
        tok_destroy(t);
    }
    for (size_t i = 0; i < n_merges; i++) free(mbuf[i]);
    free(body);
    return 0;
}
