/* fuzz_grammar_common — shared by fuzz_grammar_ebnf.c / fuzz_grammar_regex.c:
 * walk a compiled grammar along fuzz bytes and check, at each step, the
 * cached mask against the uncached walk and a brute-force accept/rollback
 * of every token of a small vocabulary (tokens splitting UTF-8 characters
 * included).  Any disagreement aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"

static const char *fz_tok[] = {
    "<eos>", "a", "b", "ab", "\"", "\",", "{", "}", " ", "1", "12", "\xC3", "\xA9", "\xC3\xA9", "\xE6\x97\xA5",
    "x\"", "[", "]", "\\", "\n", "abc", "-", ".", "0", "\xF0\x9F\x98\x80", "\xFF", ":", "{\"", "aa", "ba",
};

static const char *fz_bytes(void *ctx, int32_t id, size_t *len)
{
    (void)ctx;
    if (id <= 0 || id >= (int32_t)(sizeof fz_tok / sizeof *fz_tok)) return NULL;
    *len = strlen(fz_tok[id]);
    return fz_tok[id];
}

static void fz_check_masks(grammar_matcher *m, const grammar_vocab *v)
{
    uint32_t a[2] = {0}, b[2] = {0};
    grammar_matcher_fill_mask(m, a);
    gm_fill_mask_full(m, b);
    for (int32_t id = 0; id < grammar_vocab_size(v); id++) {
        int z = grammar_matcher_accept_token(m, id);
        if (z && grammar_matcher_rollback(m, 1) != 0) abort();
        int x = (a[id >> 5] >> (id & 31)) & 1, y = (b[id >> 5] >> (id & 31)) & 1;
        if (x != z || y != z) {
            fprintf(stderr, "mask mismatch token %d: cached %d full %d brute %d\n", id, x, y, z);
            abort();
        }
    }
}

static void fz_walk(const grammar *g, const uint8_t *walk, size_t n)
{
    static grammar_vocab *v;
    if (!v) {
        int32_t eos = 0;
        v = grammar_vocab_new((int32_t)(sizeof fz_tok / sizeof *fz_tok), fz_bytes, NULL, &eos, 1);
        if (!v) abort();
    }
    grammar_matcher *m = grammar_matcher_new(g, v);
    if (!m) return;
    fz_check_masks(m, v);
    if (n > 64) n = 64;
    for (size_t i = 0; i < n; i++) {
        if (!grammar_matcher_accept_bytes(m, (const char *)walk + i, 1)) continue; /* rejected: state unchanged */
        if (i % 4 == 0) fz_check_masks(m, v);
    }
    if (n && grammar_matcher_rollback(m, 1) == 0) fz_check_masks(m, v);
    grammar_matcher_free(m);
}
