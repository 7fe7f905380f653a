/* grammar_serve — see grammar_serve.h: the compile entry point of the
 * grammar queue, rule renaming, and the tokenizer's vocabulary for the
 * engine (structural_tag -> EBNF is grammar_stag.c). */
#include "grammar/grammar_serve.h"

#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_bytes.h"
#include "util/errmsg.h"
#include "util/log.h"

/* ---- compile by key ------------------------------------------------------- */

void grammar_free_value(void *g) { grammar_free(g); }

void *grammar_compile_key(void *ctx, const grammar_key *k, size_t *bytes, char *err, size_t errlen)
{
    grammar_json_opts o = {.whitespace_pattern = NULL, .any_whitespace = 1, .strict = 0};
    if (ctx) o = *(const grammar_json_opts *)ctx;
    o.strict = (k->opts & GRAMMAR_OPT_STRICT) != 0;
    if (k->opts & GRAMMAR_OPT_COMPACT) o.any_whitespace = 0, o.whitespace_pattern = NULL;
    grammar *g = NULL;
    strbuf sb = {0};
    switch (k->kind) {
    case GRAMMAR_KIND_REGEX:
        g = grammar_compile_regex(k->text, k->len, err, errlen);
        break;
    case GRAMMAR_KIND_EBNF:
        g = grammar_compile_ebnf(k->text, k->len, "root", err, errlen);
        break;
    case GRAMMAR_KIND_JSON:
        if (grammar_schema_to_ebnf(k->text, k->len, &o, &sb, err, errlen) == 0) {
            if (sb.oom) errmsg_set(err, errlen, "out of memory");
            else g = grammar_compile_ebnf(sb.p ? sb.p : "", sb.len, "root", err, errlen);
        }
        break;
    case GRAMMAR_KIND_STRUCTURAL_TAG:
        if (grammar_structural_tag_to_ebnf(k->text, k->len, &o, &sb, err, errlen) == 0) {
            if (sb.oom) errmsg_set(err, errlen, "out of memory");
            else g = grammar_compile_ebnf(sb.p ? sb.p : "", sb.len, "root", err, errlen);
        }
        break;
    default:
        errmsg_set(err, errlen, "unknown grammar kind %d", (int)k->kind);
    }
    free(sb.p);
    if (g && bytes) *bytes = grammar_bytes(g);
    return g;
}

/* ---- EBNF text helpers ---------------------------------------------------- */

static bool ident_start(int c) { return isalpha(c) || c == '_'; }
static bool ident_char(int c) { return isalnum(c) || c == '_' || c == '-'; }

int grammar_ebnf_prefix_rules(const char *s, size_t n, const char *prefix, strbuf *out)
{
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        size_t j = i + 1;
        if (c == '#') {
            while (j < n && s[j] != '\n') j++;
        } else if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            while (j < n && s[j] != close) j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            if (j < n) j++;
        } else if (ident_start((unsigned char)c)) {
            while (j < n && ident_char((unsigned char)s[j])) j++;
            strbuf_puts(out, prefix);
        }
        strbuf_put(out, s + i, j - i);
        i = j;
    }
    return out->oom ? -1 : 0;
}

/* ---- the tokenizer's vocabulary ------------------------------------------ */

grammar_vocab *grammar_vocab_from_tok(const tok_tokenizer *t, int32_t n_vocab, const int32_t *end_ids, size_t n_end)
{
    /* tok_bytes: each id's raw bytes (byte-level map, U+2581, <0xAB>,
     * added tokens' content; special ids none); ids past the tokenizer
     * (padded LM-head rows) have none either */
    tok_bytes_table *tb = tok_bytes_build(t);
    grammar_vocab *gv = tb ? grammar_vocab_new(n_vocab, tok_bytes_get, tb, end_ids, n_end) : NULL;
    tok_bytes_free(tb); /* grammar_vocab_new copied the bytes */
    if (!gv) log_error("cannot build the grammar vocabulary");
    return gv;
}
