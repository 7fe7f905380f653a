/* grammar_schema_stub — TEMPORARY: a weak grammar_schema_to_ebnf so the
 * grammar branch links before the JSON Schema compiler
 * (grammar_json_schema.c, the `schema` task) is merged.  The real, strong
 * definition replaces it; delete this file when it lands. */
#include <stdio.h>

#include "grammar/grammar.h"

__attribute__((weak)) int grammar_schema_to_ebnf(const char *schema, size_t len, const grammar_json_opts *o,
                                                 strbuf *out, char *err, size_t errlen)
{
    (void)schema, (void)len, (void)o, (void)out;
    if (err && errlen) snprintf(err, errlen, "the JSON Schema compiler is not built into this binary yet");
    return -1;
}
