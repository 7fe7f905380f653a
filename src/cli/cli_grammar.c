/* cli_grammar — see cli_grammar.h. */
#include "cli/cli_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_serve.h"
#include "model/config.h"
#include "util/log.h"

int cli_grammar_setup(cli_grammar *g, const args_server *a, const tok_tokenizer *tok, sched *s, model *m)
{
    memset(g, 0, sizeof *g);
    if (a->grammar_backend && !strcmp(a->grammar_backend, "none")) {
        log_info("constrained decoding is off (--grammar-backend none)");
        return 0;
    }
    if (!tok) return 0; /* --skip-tokenizer-init: no token bytes, no grammars */
    const model_config *c = model_get_config(m);
    /* the end tokens are the scheduler's eos stop ids (the model's), so a
     * grammar that may end lets exactly the tokens that stop a request */
    int32_t ends[MODEL_MAX_EOS];
    size_t n_end = 0;
    for (int i = 0; i < c->n_eos && n_end < MODEL_MAX_EOS; i++) ends[n_end++] = c->eos_token_ids[i];
    g->vocab = grammar_vocab_from_tok(tok, c->vocab_size, ends, n_end);
    if (!g->vocab) {
        fprintf(stderr, "error: cannot build the grammar vocabulary from the tokenizer\n");
        return -1;
    }
    g->json.whitespace_pattern = a->constrained_json_whitespace_pattern;
    g->json.any_whitespace = !a->constrained_json_disable_any_whitespace;
    grammar_queue_opts qo = {.n_threads = 1, .cache_bytes = 0, .compile = grammar_compile_key,
                             .compile_ctx = &g->json, .free_value = grammar_free_value};
    g->queue = grammar_queue_create(&qo);
    if (!g->queue) {
        fprintf(stderr, "error: cannot start the grammar thread\n");
        cli_grammar_free(g);
        return -1;
    }
    const char *to = getenv("SGLANG_GRAMMAR_TIMEOUT");
    double timeout = to && *to ? atof(to) : 300.0;
    sched_set_grammar(s, g->queue, g->vocab, timeout > 0 ? timeout : 300.0);
    return 0;
}

void cli_grammar_free(cli_grammar *g)
{
    grammar_queue_destroy(g->queue);
    grammar_vocab_free(g->vocab);
    memset(g, 0, sizeof *g);
}
