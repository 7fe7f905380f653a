/* tok_bytes — each token id's raw bytes, as the detokenizer emits them, for
 * the grammar engine's byte-level vocabulary (grammar_vocab_new).
 *
 * DESIGN: one table built once from a loaded tokenizer: byte-level BPE
 * pieces are mapped back through the inverse of GPT-2's bytes_to_unicode;
 * otherwise SentencePiece's U+2581 becomes a space and byte-fallback
 * pieces <0xAB> become that byte; added (non-special) tokens are their
 * content.  Special tokens and unused ids have no bytes.  The per-token
 * decoder steps that depend on context (Metaspace's dropped leading space
 * of the first token, clean_up_tokenization_spaces) are not applied: the
 * grammar sees what a token adds in the middle of a text. */
#ifndef SGLC_TOKENIZER_TOK_BYTES_H
#define SGLC_TOKENIZER_TOK_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef struct tok_bytes_table tok_bytes_table;

/* NULL on allocation failure.  Borrows nothing from t afterwards. */
tok_bytes_table *tok_bytes_build(const tok_tokenizer *t);
void tok_bytes_free(tok_bytes_table *b);
/* id's bytes (borrowed, valid until tok_bytes_free), NULL for special or
 * unused ids.  Matches grammar_token_bytes_fn with ctx = the table. */
const char *tok_bytes_get(void *table, int32_t id, size_t *len);
int32_t tok_bytes_vocab_size(const tok_bytes_table *b);

#endif
