/* cli_grammar — constrained decoding for the commands that run the
 * scheduler (serve, generate --requests, bench-offline): the grammar
 * vocabulary of the tokenizer, the grammar queue (its thread and cache)
 * and the scheduler hook, from --grammar-backend and
 * --constrained-json-*.
 *
 * DESIGN: --grammar-backend xgrammar | llguidance | outlines (SGLang's
 * names, kept so launch commands work) all select sglc's own engine
 * (src/grammar); none leaves the scheduler without a grammar queue, so
 * grammar requests get a 400.  The compile timeout is
 * SGLANG_GRAMMAR_TIMEOUT seconds (default 300, SGLang's).
 *
 * Ownership: cli_grammar owns the vocabulary and the queue; free it after
 * the scheduler (which borrows both). */
#ifndef SGLC_CLI_GRAMMAR_H
#define SGLC_CLI_GRAMMAR_H

#include "args/args.h"
#include "grammar/grammar.h"
#include "grammar/grammar_queue.h"
#include "sched/sched.h"
#include "tokenizer/tokenizer.h"

/* The server arguments these commands use for it (their --help lists). */
#define CLI_GRAMMAR_ARG_IDS                                                                   \
    ARG_ID_grammar_backend, ARG_ID_constrained_json_whitespace_pattern,                      \
        ARG_ID_constrained_json_disable_any_whitespace

typedef struct cli_grammar {
    grammar_vocab *vocab;        /* owned */
    grammar_queue *queue;        /* owned */
    grammar_json_opts json;      /* the compile function's context (strings borrowed from args) */
} cli_grammar;

/* Set up constrained decoding for s (model m's vocabulary, tokenizer tok)
 * unless --grammar-backend none or there is no tokenizer.  0, or -1 with
 * the reason printed. */
int cli_grammar_setup(cli_grammar *g, const args_server *a, const tok_tokenizer *tok, sched *s, model *m);
void cli_grammar_free(cli_grammar *g);

#endif
