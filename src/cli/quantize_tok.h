/* quantize_tok — `sglc quantize`: the tokenizer of a Hugging Face folder
 * as GGUF tokenizer.ggml.* metadata, and its chat template.
 *
 * DESIGN: tokenizer.json's BPE model is written the way llama.cpp's
 * converter does: a byte-level vocabulary (pre-tokenizer ByteLevel) as
 * model "gpt2" with its merges and a pre-tokenizer name recognized from
 * the split regex (deepseek-v3: \p{N}{1,3} and a CJK split; llama-bpe:
 * Llama 3's \p{N}{1,3}; qwen2: single digits with the case-insensitive
 * contractions; gpt-2: GPT-2's; else "default"); a
 * SentencePiece-style BPE (a Prepend "▁" normalizer with byte fallback,
 * TinyStories) as model "llama" with scores = -(rank of the merge that
 * makes the token), so score-driven SPM merging follows the merge order.
 * Token types: added tokens CONTROL (special) or USER_DEFINED, <0xXX>
 * BYTE (llama), the unk token UNKNOWN, ids with no token UNUSED
 * ("[PADn]").  bos / eos / unk / pad ids and add_bos / add_eos come from
 * tokenizer_config.json (else config.json and the post-processor), the
 * chat template from tokenizer_config.json or chat_template.jinja.  A
 * folder without tokenizer.json gets only the ids from config.json.
 */
#ifndef SGLC_CLI_QUANTIZE_TOK_H
#define SGLC_CLI_QUANTIZE_TOK_H

#include <stddef.h>

#include "model/config.h"
#include "model/gguf.h"

/* Add the tokenizer metadata of folder dir to w.  0, or -1 with err. */
int quantize_tok_meta(gguf_writer *w, const char *dir, const model_config *c, char *err,
                      size_t errlen);

/* Tokens in DIR/tokenizer.json (largest id + 1, added tokens too), or -1. */
int quantize_tok_vocab_size(const char *dir);

#endif
