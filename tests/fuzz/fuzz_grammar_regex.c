/* fuzz_grammar_regex — the regex compiler on fuzz text (up to the first
 * NUL byte), then a walk along the bytes after it with mask checks; the
 * regex's EBNF translation (grammar_regex_to_ebnf) must compile too and
 * agree with the regex on the walk bytes. */
#include <stdint.h>

#include "fuzz_grammar_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2048) return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t rlen = nul ? (size_t)(nul - data) : size;
    char err[256];
    grammar *g = grammar_compile_regex((const char *)data, rlen, err, sizeof err);
    if (!g) {
        if (!err[0]) abort();
        return 0;
    }
    const uint8_t *walk = nul ? nul + 1 : NULL;
    size_t wn = nul ? size - rlen - 1 : 0;
    if (walk) fz_walk(g, walk, wn);
    strbuf b = {0};
    strbuf_puts(&b, "root ::= ");
    if (grammar_regex_to_ebnf((const char *)data, rlen, "r", &b, NULL, err, sizeof err) != 0) abort();
    char *txt = strbuf_take(&b);
    if (!txt) abort();
    grammar *g2 = grammar_compile_ebnf(txt, strlen(txt), NULL, err, sizeof err);
    if (!g2 && !strstr(err, "too large")) {
        fprintf(stderr, "regex -> EBNF does not compile: %s\n%s\n", err, txt);
        abort();
    }
    if (g2 && walk) {
        grammar_matcher *m1 = grammar_matcher_new(g, NULL), *m2 = grammar_matcher_new(g2, NULL);
        if (m1 && m2) {
            int a1 = grammar_matcher_accept_bytes(m1, (const char *)walk, wn) && grammar_matcher_can_end(m1);
            int a2 = grammar_matcher_accept_bytes(m2, (const char *)walk, wn) && grammar_matcher_can_end(m2);
            if (a1 != a2) {
                fprintf(stderr, "regex and its EBNF disagree: %d vs %d\n%s\n", a1, a2, txt);
                abort();
            }
        }
        grammar_matcher_free(m1);
        grammar_matcher_free(m2);
    }
    grammar_free(g2);
    free(txt);
    grammar_free(g);
    return 0;
}
