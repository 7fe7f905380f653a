/* fuzz_json_schema — random schema text -> grammar_schema_to_ebnf ->
 * grammar_compile_ebnf.  The first byte picks the options (whitespace
 * mode, strict); the rest is the schema.  Checks: no crash or leak (ASan),
 * a translation either fails with a reason or yields text the EBNF
 * compiler accepts, and the output stays under the translator's bound
 * (deep recursion, huge enums and large bounds do bounded work).
 * grammar_compile_ebnf is referenced weakly so the target builds before
 * the engine is linked in; with the engine present every translated
 * grammar is compiled too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "util/log.h"

extern grammar *grammar_compile_ebnf(const char *text, size_t len, const char *root, char *err, size_t errlen)
    __attribute__((weak));
extern void grammar_free(grammar *g) __attribute__((weak));

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    log_set_level(LOG_CRITICAL);
    if (size > 65536) size = 65536;
    grammar_json_opts o = {.any_whitespace = !(data[0] & 1), .strict = (data[0] >> 1) & 1};
    if ((data[0] >> 2) & 1) o.whitespace_pattern = (data[0] >> 3) & 1 ? "[ \\n]{0,3}" : "( |\\t)*";
    strbuf out = {0};
    char err[256];
    const char *schema = (data[0] >> 4) == 15 ? NULL : (const char *)data + 1; /* JSON mode now and then */
    int rc = grammar_schema_to_ebnf(schema, schema ? size - 1 : 0, &o, &out, err, sizeof err);
    if (rc != 0) {
        if (!err[0]) { fprintf(stderr, "fuzz_json_schema: failure without a reason\n"); abort(); }
    } else {
        if (!out.p || strncmp(out.p, "root ::= ", 9) != 0) { fprintf(stderr, "fuzz_json_schema: no root rule\n"); abort(); }
        if (out.len > (17u << 20)) { fprintf(stderr, "fuzz_json_schema: %zu bytes of grammar\n", out.len); abort(); }
        if (grammar_compile_ebnf) {
            char cerr[256];
            grammar *g = grammar_compile_ebnf(out.p, out.len, "root", cerr, sizeof cerr);
            if (!g && !strstr(cerr, "too large") && !strstr(cerr, "limit")) {
                fprintf(stderr, "fuzz_json_schema: translated grammar does not compile: %s\n%.2000s\n", cerr, out.p);
                abort();
            }
            if (g) grammar_free(g);
        }
    }
    free(out.p);
    return 0;
}
