/* tok_vocab_spec — a tokenizer from a GGUF-style vocabulary description.
 *
 * DESIGN: GGUF files carry their tokenizer as flat arrays under
 * tokenizer.ggml.* (token strings in id order, scores, token types, BPE
 * merges, a pre-tokenizer name, special ids and flags).  The gguf reader
 * fills a tok_vocab_spec from that metadata (borrowing its strings) and
 * tok_load_vocab_spec turns it into the same tok_tokenizer a Hugging Face
 * tokenizer.json of that model gives: it writes the equivalent
 * tokenizer.json (BPE model, the pre-tokenizer the `pre` name stands for,
 * the SentencePiece normalizer and decoder for "llama") and loads it with
 * tok_load_json, then sets the special ids from the spec.  The spec is
 * only read during the call; nothing is kept pointing into it.
 *
 * Models:
 *   "gpt2"  byte-level BPE with merges; `pre` names the pre-tokenizer
 *           (see tok_vocab_spec_pre_supported).
 *   "llama" SentencePiece BPE with byte fallback (<0xAB> tokens); when the
 *           merges are absent they are derived from the scores as Hugging
 *           Face's SentencePiece converter does (tok_vocab_spec_derive_merges).
 * Token types (llama.cpp's): 1 normal, 2 unknown, 3 control, 4 user-defined,
 * 5 unused, 6 byte (0 or anything else: normal).  Control and unknown
 * tokens become special added tokens; user-defined ones non-special added
 * tokens (for "llama", the converter's " " is turned back into "▁").
 */
#ifndef SGLC_TOK_VOCAB_SPEC_H
#define SGLC_TOK_VOCAB_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

enum {
    TOK_TYPE_UNDEFINED = 0, TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4, TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6,
};

typedef struct tok_vocab_spec {
    const char *model;            /* tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece) */
    const char *pre;              /* tokenizer.ggml.pre: "llama-bpe", "qwen2", "default", "deepseek-v3", ... (NULL = default) */
    size_t n_tokens;
    const char *const *tokens; const size_t *token_lens;   /* (n_tokens) id order; token_lens NULL = strlen */
    const float *scores;          /* (n_tokens) may be NULL */
    const int32_t *token_types;   /* (n_tokens) may be NULL; 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte */
    size_t n_merges;
    const char *const *merges; const size_t *merge_lens;   /* (n_merges) "a b", may be 0; merge_lens NULL = strlen */
    int32_t bos_id, eos_id, unk_id, pad_id, eot_id, eom_id;   /* -1 = none */
    int add_bos, add_eos;         /* -1 = not given (model default) */
    int add_space_prefix;         /* -1 = not given */
    const char *chat_template;    /* may be NULL; not used by the loader (the caller hands it to template/) */
} tok_vocab_spec;

/* Build a tokenizer from s.  Returns NULL with a one-line reason in err on
 * an unknown model or pre-tokenizer name (named in the message), missing
 * arrays, a NULL token or merge, a merge without a space, or more than 16M
 * tokens.  Bytes of a token that are not valid UTF-8 become U+FFFD (a
 * Hugging Face vocabulary holds text).  Special ids outside [0, n_tokens)
 * are ignored with a warning (llama.cpp does the same).  eos_id, eot_id and
 * eom_id all become end-of-sequence ids (tok_eos_id is eos_id).  Defaults
 * when the spec says -1: add_bos on for "llama" and for the Llama 3 /
 * Tekken pre-tokenizers, else off; add_eos off; add_space_prefix on. */
tok_tokenizer *tok_load_vocab_spec(const tok_vocab_spec *s, char *err, size_t errlen);

/* 1 if `pre` (NULL = default) is a pre-tokenizer name this loader knows
 * for model "gpt2", else 0. */
int tok_vocab_spec_pre_supported(const char *pre);

/* SentencePiece merges from scores, as Hugging Face's converter derives
 * them: for every normal or user-defined piece, each split into two
 * normal/user-defined pieces (at UTF-8 character boundaries), ordered:
 * user-defined pieces first (SentencePiece matches them before any merge;
 * the converter's -1000 score for them is not their rank), then by the
 * piece's score (highest first; scores NULL = descending by id), then by
 * piece id, then by the two parts' ids.  *pairs gets 2 * *n ids (left,
 * right), malloc'd, caller frees.  Returns 0 or -1 (out of memory / bad
 * spec, reason in err). */
int tok_vocab_spec_derive_merges(const tok_vocab_spec *s, int32_t **pairs, size_t *n, char *err, size_t errlen);

#endif
