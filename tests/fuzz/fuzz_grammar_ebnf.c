/* fuzz_grammar_ebnf — the EBNF compiler on fuzz text (up to the first NUL
 * byte), then a walk along the bytes after it with mask checks
 * (fuzz_grammar_common.h).  Must never crash or hang: compile work is
 * capped in grammar_fsm.c and nesting in grammar_ebnf.c. */
#include <stdint.h>

#include "fuzz_grammar_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    char err[256];
    grammar *g = grammar_compile_ebnf((const char *)data, glen, NULL, err, sizeof err);
    if (!g) {
        if (!err[0]) abort(); /* every failure has a reason */
        return 0;
    }
    if (grammar_bytes(g) == 0) abort();
    if (nul) fz_walk(g, nul + 1, size - glen - 1);
    grammar_free(g);
    return 0;
}
