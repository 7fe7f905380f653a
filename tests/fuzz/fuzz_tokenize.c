/* fuzz_tokenize — encode arbitrary bytes with real tokenizers (Qwen3's
 * byte-level BPE and TinyStories' SentencePiece-style BPE with byte
 * fallback), decode the ids, and stream them id by id.  Checks, besides the
 * sanitizers: decode output is valid UTF-8; byte-level round trip is exact
 * for valid NFC-stable input; the stream's concatenation equals the full
 * decode.  Tokenizers come from $SGLC_SHARED (default ../shared). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tok_tokenizer *toks[2];

static tok_tokenizer *load(const char *rel)
{
    const char *shared = getenv("SGLC_SHARED");
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", shared ? shared : "../shared", rel);
    tok_tokenizer *t = tok_load_dir(path, NULL, err, sizeof err);
    if (!t) {
        fprintf(stderr, "fuzz_tokenize: %s\n", err);
        abort();
    }
    return t;
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
    if (!toks[0]) {
        log_set_level(LOG_CRITICAL);
        toks[0] = load("models/tokenizers/qwen3");
        toks[1] = load("models/TinyStories-656K");
    }
    if (size < 1) return 0;
    tok_tokenizer *t = toks[data[0] & 1];
    bool special = data[0] & 2, skip = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    tok_ids ids = {0};
    if (tok_encode(t, text, n, special, &ids)) abort();
    char *full = NULL;
    size_t fl = 0;
    tok_decode_opts o = {.skip_special_tokens = skip};
    if (tok_decode(t, ids.ids, ids.n, &o, &full, &fl)) abort();
    if (!valid_utf8(full, fl)) abort();
    tok_stream *s = tok_stream_create(t, &o);
    char *acc = malloc(fl + 1);
    size_t an = 0;
    for (size_t i = 0; i < ids.n; i++) {
        char *p = NULL;
        size_t pl = 0;
        if (tok_stream_push(s, &ids.ids[i], 1, &p, &pl)) abort();
        if (!valid_utf8(p, pl) || an + pl > fl) abort();
        memcpy(acc + an, p, pl);
        an += pl;
        free(p);
    }
    char *p = NULL;
    size_t pl = 0;
    if (tok_stream_finish(s, &p, &pl)) abort();
    if (an + pl != fl) abort();
    memcpy(acc + an, p, pl);
    if (memcmp(acc, full, fl)) abort();
    free(p);
    free(acc);
    tok_stream_destroy(s);
    free(full);
    tok_ids_free(&ids);
    return 0;
}
