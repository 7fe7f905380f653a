/* grammar_serve — what the serving path needs around the engine
 * (grammar.h): one compile entry point for every request kind (the
 * grammar queue's compile function), SGLang's structural_tag format as
 * EBNF, and a grammar vocabulary built from a loaded tokenizer.
 *
 * DESIGN
 *   grammar_key (kind, text, options)
 *     json            grammar_schema_to_ebnf (strict from the key, the
 *                     server's whitespace options) -> grammar_compile_ebnf
 *     regex           grammar_compile_regex
 *     ebnf            grammar_compile_ebnf (start rule "root")
 *     structural_tag  grammar_structural_tag_to_ebnf -> grammar_compile_ebnf
 *
 * structural_tag: SGLang's legacy {"structures", "triggers"} form and
 * xgrammar's {"format": ...} form (const_string, json_schema, grammar,
 * regex, any_text, sequence, or, tag, triggered_tags,
 * tags_with_separator); see grammar_stag.c for the construction.
 *
 * Ownership: results are the caller's (grammar_free, grammar_vocab_free,
 * the strbuf). */
#ifndef SGLC_GRAMMAR_GRAMMAR_SERVE_H
#define SGLC_GRAMMAR_GRAMMAR_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "grammar/grammar_cache.h"
#include "tokenizer/tokenizer.h"
#include "util/strbuf.h"

/* The grammar queue's compile function: ctx is a const grammar_json_opts
 * * (the server's whitespace options; strict comes from the key).  A
 * `grammar *` (bytes = grammar_bytes), or NULL with the reason. */
void *grammar_compile_key(void *ctx, const grammar_key *key, size_t *bytes, char *err, size_t errlen);
/* grammar_free for the cache (void * signature). */
void grammar_free_value(void *g);

/* SGLang's structural_tag JSON (either form) -> EBNF (rule "root")
 * appended to out (grammar_stag.c).  0, or -1 with the reason. */
int grammar_structural_tag_to_ebnf(const char *json, size_t len, const grammar_json_opts *o, strbuf *out,
                                   char *err, size_t errlen);

/* Append ebnf's text to out with every rule name prefixed by prefix
 * (strings, character classes and comments untouched).  0 or -1. */
int grammar_ebnf_prefix_rules(const char *ebnf, size_t len, const char *prefix, strbuf *out);

/* A vocabulary for the model's logits (n_vocab rows) from a tokenizer,
 * through tok_bytes (tokenizer/tok_bytes.h): ids the tokenizer does not
 * know and special ids are never allowed, except the end ids (eos).
 * NULL on failure (logged). */
grammar_vocab *grammar_vocab_from_tok(const tok_tokenizer *t, int32_t n_vocab, const int32_t *end_ids,
                                      size_t n_end);

#endif
