/* fuzz_structural_tag — structural_tag JSON, both SGLang's legacy form
 * and xgrammar's "format" form (grammar_stag.c), -> EBNF
 * (grammar_structural_tag_to_ebnf), then the EBNF through the engine's
 * compiler, and the OpenAI response_format mapping (api_oai_grammar_params)
 * of the same bytes as a request body.  Checks: no crash, no leak (ASan),
 * an error always says why, and EBNF we generate always compiles (a
 * compile failure of our own output is a bug, not bad input) unless the
 * input carries a "grammar" format (the user's EBNF may be wrong). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_job.h"
#include "grammar/grammar.h"
#include "grammar/grammar_serve.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_CRITICAL);
    char err[1024] = "";
    strbuf sb = {0};
    grammar_json_opts o = {NULL, 0, 0};
    if (grammar_structural_tag_to_ebnf((const char *)data, size, &o, &sb, err, sizeof err) == 0) {
        if (sb.oom) abort();
        char e2[1024] = "";
        grammar *g = grammar_compile_ebnf(sb.p, sb.len, "root", e2, sizeof e2);
        if (!g && !memmem(data, size, "\"grammar\"", 9)) {
            fprintf(stderr, "our EBNF does not compile: %s\n%s\n", e2, sb.p);
            abort();
        }
        grammar_free(g);
    } else if (!err[0]) {
        abort();
    }
    free(sb.p);
    /* the prefix renamer over arbitrary text: never fails but on memory */
    strbuf pb = {0};
    if (grammar_ebnf_prefix_rules((const char *)data, size, "p-", &pb)) abort();
    free(pb.p);
    json_t *body = json_loadb((const char *)data, size, 0, NULL);
    if (json_is_object(body)) {
        json_t *sp = json_object();
        bool strict = false;
        err[0] = 0;
        if (api_oai_grammar_params(body, sp, &strict, err, sizeof err) && !err[0]) abort();
        json_decref(sp);
    }
    json_decref(body);
    return 0;
}
