/* tokenizer — Hugging Face tokenizer.json, exact, in C.
 *
 * DESIGN: a tok_tokenizer is built once from a model folder (tokenizer.json
 * plus tokenizer_config.json, special_tokens_map.json and
 * generation_config.json) and is then read-only: encode, decode and the
 * lookups never modify it, so any number of threads may share one.  All
 * per-call memory is allocated by the call and owned by the caller (tok_ids,
 * returned strings) or freed before the call returns.
 *
 * The pipeline is Hugging Face's: split on added tokens -> normalizer ->
 * pre-tokenizer -> model (BPE / WordPiece / Unigram) -> post-processor; and
 * for decoding: ids -> token strings -> decoder chain -> cleanup.  The
 * behaviour that the tests compare against is Hugging Face's tokenizer logic
 * (transformers.js / @huggingface/tokenizers, which follows the Rust crate),
 * plus one rule of Python transformers: Llama/Gemma tokenizer classes rebuild
 * the BOS/EOS template from add_bos_token / add_eos_token in
 * tokenizer_config.json (this matters for DeepSeek V3, whose tokenizer.json
 * has no BOS template but whose config says add_bos_token: true).
 *
 * Text in and out is UTF-8.  Invalid UTF-8 input is not an error: each
 * maximal invalid subsequence is replaced by U+FFFD before encoding (the
 * WHATWG / Python errors="replace" rule), because Hugging Face tokenizers only
 * ever see a decoded string (a Rust String or a JS string, which cannot hold
 * invalid UTF-8).  Decoding never produces invalid UTF-8: byte tokens that do
 * not form valid UTF-8 become U+FFFD, as HF does.
 */
#ifndef SGLC_TOKENIZER_H
#define SGLC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tok_tokenizer tok_tokenizer;

/* A growable array of token ids; the caller owns it (tok_ids_free). */
typedef struct tok_ids {
    int32_t *ids; /* (n) */
    size_t n, cap;
} tok_ids;

void tok_ids_free(tok_ids *v);
int tok_ids_push(tok_ids *v, int32_t id);

/* How decode behaves where HF's fast and slow tokenizers differ. */
typedef enum tok_mode {
    TOK_MODE_AUTO = 0, /* fast-tokenizer semantics (the tokenizers library) */
    TOK_MODE_SLOW = 1, /* slow-tokenizer decode: spaces_between_special_tokens honoured */
} tok_mode;

typedef struct tok_load_opts {
    tok_mode mode;
    bool no_fast_json; /* parse all of tokenizer.json with jansson (tests compare both paths) */
} tok_load_opts;

/* Load the tokenizer of a Hugging Face model folder.  On failure returns
 * NULL and writes a one-line reason to err (if given). */
tok_tokenizer *tok_load_dir(const char *dir, const tok_load_opts *opts, char *err, size_t errlen);

/* Load from in-memory JSON documents (tokenizer.json required, the others
 * may be NULL).  Used by tok_load_dir, tests and the fuzzer. */
tok_tokenizer *tok_load_json(const char *tokenizer_json, size_t len, const char *config_json,
                             const char *special_map_json, const char *gen_config_json,
                             const tok_load_opts *opts, char *err, size_t errlen);

void tok_destroy(tok_tokenizer *t);

/* Encode UTF-8 text (len bytes, need not be NUL-terminated, invalid UTF-8
 * replaced as described above).  Ids are appended to out.  Returns 0, or -1
 * on allocation failure / an internal regex error (logged). */
int tok_encode(const tok_tokenizer *t, const char *text, size_t len, bool add_special_tokens,
               tok_ids *out);

typedef struct tok_decode_opts {
    bool skip_special_tokens;
    bool spaces_between_special_tokens; /* only in TOK_MODE_SLOW, as HF */
} tok_decode_opts;

/* Decode ids into a malloc'd NUL-terminated UTF-8 string (*out, length in
 * *out_len if non-NULL).  Unknown ids (out of range) are an error: returns -1
 * and sets *out to NULL. */
int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, const tok_decode_opts *opts,
               char **out, size_t *out_len);

/* Lookups. */
size_t tok_vocab_size(const tok_tokenizer *t);        /* highest id + 1, added tokens included */
int32_t tok_bos_id(const tok_tokenizer *t);           /* -1 if none */
int32_t tok_eos_id(const tok_tokenizer *t);           /* first eos id, -1 if none */
size_t tok_eos_ids(const tok_tokenizer *t, const int32_t **ids); /* all eos ids (generation_config too) */
int32_t tok_pad_id(const tok_tokenizer *t);           /* -1 if none */
bool tok_add_bos(const tok_tokenizer *t);             /* does encode(add_special) start with BOS */
int32_t tok_token_to_id(const tok_tokenizer *t, const char *token, size_t len); /* -1 if absent */
/* Borrowed pointer into the tokenizer (valid until tok_destroy), NULL if the
 * id is unused; *len gets its length. */
const char *tok_id_to_token(const tok_tokenizer *t, int32_t id, size_t *len);
bool tok_is_special(const tok_tokenizer *t, int32_t id);
tok_mode tok_get_mode(const tok_tokenizer *t);
/* Encoding keeps a per-thread cache of recent words (2 MB a thread, freed
 * at thread exit).  This empties the calling thread's cache (benchmarks use
 * it to time cold starts). */
void tok_thread_cache_clear(void);
/* Retained heap bytes of a loaded tokenizer (for the benchmark). */
size_t tok_memory_bytes(const tok_tokenizer *t);

/* Incremental detokenizer for streaming.
 *
 * Feed ids one at a time (or a few); each call appends to *out the text that
 * is now final.  Invariant, checked by the tests: after any step the
 * concatenation of everything emitted is a prefix of tok_decode(all ids fed
 * so far), and after tok_stream_finish it is equal to it.  Emitted text is
 * always valid UTF-8: bytes of an unfinished character are held back, and so
 * is text a later token could still change (a trailing space that HF's
 * clean_up_tokenization_spaces may remove, a trailing strip).  The stream
 * borrows t, which must outlive it. */
typedef struct tok_stream tok_stream;

tok_stream *tok_stream_create(const tok_tokenizer *t, const tok_decode_opts *opts);
void tok_stream_destroy(tok_stream *s);
/* Appends new final text to a malloc'd string *out (NUL-terminated; caller
 * frees; may be empty).  Returns 0 or -1 (bad id / no memory). */
int tok_stream_push(tok_stream *s, const int32_t *ids, size_t n, char **out, size_t *out_len);
/* tok_stream_push, and also the decoded text held back after it (*held,
 * malloc'd, NUL-terminated; may be empty): everything emitted plus *held
 * is the decode of every id fed so far (as the window sees it).  For
 * matching stop strings as soon as their text is decoded, before it is
 * final. */
int tok_stream_push_held(tok_stream *s, const int32_t *ids, size_t n, char **out, size_t *out_len, char **held,
                         size_t *held_len);
/* End of stream: returns everything still held back. */
int tok_stream_finish(tok_stream *s, char **out, size_t *out_len);

#endif
