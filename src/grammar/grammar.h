/* grammar — sglc's constrained-decoding engine: compile a grammar once,
 * then per request walk it byte by byte and give the sampler a token mask.
 *
 * CONTRACT (the seam the schema compiler, the scheduler, the API and the
 * tool-call forcing code are written against; the engine behind it is
 * grammar.c and its parts):
 *
 *   - Every input language becomes one EBNF grammar in the GBNF-style
 *     syntax SGLang / llama.cpp accept (`root ::= ...`, "literals", [char
 *     classes], ( ) | * + ? {m,n}, rule references, comments with #).
 *     JSON Schema is translated to that text by grammar_json_schema.c
 *     (grammar_schema_to_ebnf), a regular expression by
 *     grammar_regex_to_ebnf; so one compiler and one matcher serve all.
 *   - A compiled grammar (grammar) is immutable and shared: many matchers
 *     (one per request) may walk it from many threads at once.
 *   - A vocabulary (grammar_vocab) is built once per tokenizer: each
 *     token id's bytes (byte-level: a token may hold part of a UTF-8
 *     character), plus which ids are special (never allowed by a grammar,
 *     except the end tokens when the grammar may end).
 *   - A matcher (grammar_matcher) is one request's position in the
 *     grammar: owned by that request, used by one thread at a time.
 *
 * Masks are bitsets of ceil(vocab / 32) uint32_t words, bit (id % 32) of
 * word (id / 32) set = allowed.
 */
#ifndef SGLC_GRAMMAR_GRAMMAR_H
#define SGLC_GRAMMAR_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

typedef struct grammar grammar;
typedef struct grammar_vocab grammar_vocab;
typedef struct grammar_matcher grammar_matcher;

/* ---- compiling --------------------------------------------------------- */

/* Compile EBNF text whose start rule is `root` (NULL = "root").  NULL on
 * error with the reason in err (line and column of a syntax error, an
 * undefined rule's name, ...). */
grammar *grammar_compile_ebnf(const char *text, size_t len, const char *root, char *err, size_t errlen);
/* A regular expression (the whole output must match), as users write
 * them: literals and escapes, ., [classes] with ranges and negation, \d \w
 * \s and their negations, groups (capturing, (?:...)), |, * + ? {m} {m,}
 * {m,n}, anchors ^ $ at the ends.  NULL on error with the reason. */
grammar *grammar_compile_regex(const char *re, size_t len, char *err, size_t errlen);
/* The same regex as a GBNF expression (no rule name, no `::=`), appended
 * to out, for embedding in a larger grammar (JSON Schema `pattern`);
 * helper rules it needs are appended to rules_out (may be the same
 * strbuf only if the caller splits them; NULL = inline everything).
 * name_prefix keeps helper rule names unique.  0, or -1 with err. */
int grammar_regex_to_ebnf(const char *re, size_t len, const char *name_prefix, strbuf *out,
                          strbuf *rules_out, char *err, size_t errlen);
void grammar_free(grammar *g);
/* Approximate bytes the compiled grammar holds (for the cache's bound),
 * including the token classifications its matchers have cached in it so
 * far (they grow as masks are filled: about 16-19 KB per new context). */
size_t grammar_bytes(const grammar *g);

/* ---- vocabulary -------------------------------------------------------- */

/* token_bytes(ctx, id, &len) gives id's bytes as the detokenizer would
 * emit them (byte-level BPE decoded to raw bytes; SentencePiece with its
 * ▁ as a space; byte-fallback <0xAB> tokens as that byte); NULL = the id
 * is special or unused.  end_ids: tokens that end the output (eos). */
typedef const char *(*grammar_token_bytes_fn)(void *ctx, int32_t id, size_t *len);
grammar_vocab *grammar_vocab_new(int32_t vocab_size, grammar_token_bytes_fn token_bytes, void *ctx,
                                 const int32_t *end_ids, size_t n_end);
void grammar_vocab_free(grammar_vocab *v);
int32_t grammar_vocab_size(const grammar_vocab *v);
/* Words of a mask for this vocabulary: (vocab + 31) / 32. */
size_t grammar_mask_words(const grammar_vocab *v);

/* ---- matching ---------------------------------------------------------- */

grammar_matcher *grammar_matcher_new(const grammar *g, const grammar_vocab *v);
void grammar_matcher_free(grammar_matcher *m);
/* Advance by one token.  1 accepted, 0 rejected (state unchanged).  An
 * end token is accepted only where the grammar may end, and terminates. */
int grammar_matcher_accept_token(grammar_matcher *m, int32_t id);
/* Advance by raw bytes (grammar-check's byte walk; jump-forward).  1 / 0. */
int grammar_matcher_accept_bytes(grammar_matcher *m, const char *bytes, size_t len);
/* The allowed next tokens into mask (grammar_mask_words words). */
void grammar_matcher_fill_mask(grammar_matcher *m, uint32_t *mask);
/* 1 when the text so far is a complete sentence of the grammar. */
int grammar_matcher_can_end(const grammar_matcher *m);
/* 1 after an end token was accepted (or nothing more can follow). */
int grammar_matcher_is_terminated(const grammar_matcher *m);
/* Undo the last n accepted tokens (speculative decoding); 0 or -1 when
 * fewer than n are remembered. */
int grammar_matcher_rollback(grammar_matcher *m, int n);
/* Back to the start. */
void grammar_matcher_reset(grammar_matcher *m);
/* Fewest bytes that complete the grammar from here (0 where it may end
 * now); -1 when it cannot end (or out of memory).  grammar_close.c */
int32_t grammar_matcher_min_bytes_to_end(grammar_matcher *m);
/* grammar_matcher_fill_mask narrowed to the tokens after which the
 * grammar can still complete in budget - 1 more bytes (so in budget - 1
 * more tokens): a request about to hit max_new_tokens still ends valid.
 * The plain mask when no token fits.  Costs an accept and a rollback per
 * allowed token: for the last steps of a budget only. */
void grammar_matcher_fill_mask_within(grammar_matcher *m, uint32_t *mask, int32_t budget);
/* One token of the plain mask against the same rule: 1 when the grammar
 * can still complete in budget - 1 more bytes after id (end tokens, and
 * any token when budget < 1, fit), else 0; the matcher is unchanged.
 * fill_mask_within keeps exactly the mask's tokens that fit (or the
 * whole mask when none does).  A sampler that needs only the chosen
 * token checks it alone: greedy takes the argmax of the plain mask and
 * drops it while it does not fit (sched_grammar). */
int grammar_matcher_token_fits(grammar_matcher *m, int32_t id, int32_t budget);

/* Apply a mask to a logits row: disallowed ids become -inf.  Word by
 * word: an all-ones word is skipped, an all-zero word is 32 stores. */
void grammar_apply_mask(float *logits, int32_t vocab, const uint32_t *mask);

/* ---- JSON Schema (grammar_json_schema.c) -------------------------------- */

typedef struct grammar_json_opts {
    /* --constrained-json-whitespace-pattern: a regex for the whitespace
     * allowed between tokens (NULL: SGLang/xgrammar's default, which
     * allows any whitespace; see any_whitespace). */
    const char *whitespace_pattern;
    /* 0 with --constrained-json-disable-any-whitespace: no whitespace
     * (compact separators ", " is not allowed either: "," and ":"). */
    int any_whitespace;
    /* 1 = additionalProperties defaults to false (OpenAI strict mode);
     * 0 = the spec's default, true. */
    int strict;
} grammar_json_opts;

/* JSON Schema text -> EBNF (rule "root").  schema "true"/{} and JSON mode
 * ("any JSON object": pass schema NULL) are supported.  0, or -1 with the
 * reason (an unsupported keyword that changes the language, a bad $ref). */
int grammar_schema_to_ebnf(const char *schema, size_t len, const grammar_json_opts *o, strbuf *out,
                           char *err, size_t errlen);

#endif
