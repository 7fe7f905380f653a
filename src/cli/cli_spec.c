/* cli_spec — see cli_spec.h. */
#include "cli/cli_spec.h"

#include <stdio.h>
#include <string.h>

#include "util/log.h"

int cli_spec_args_from_args(cli_spec *c, const args_server *a, const char *name)
{
    memset(c, 0, sizeof *c);
    spec_args_init(&c->args);
    if (!a->speculative_algorithm) return 0;
    int algo = spec_algo_parse(a->speculative_algorithm);
    if (algo < 0 || algo == SPEC_ALGO_STANDALONE) {
        fprintf(stderr, "sglc %s: --speculative-algorithm %s is not supported by sglc yet (NGRAM is)\n", name,
                a->speculative_algorithm);
        return -1;
    }
    c->args.algo = (spec_algo)algo;
    spec_ngram_params *p = &c->args.ngram;
    if (a->speculative_ngram_min_match_window_size != ARGS_INT_NONE)
        p->min_match_window = a->speculative_ngram_min_match_window_size;
    if (a->speculative_ngram_max_match_window_size != ARGS_INT_NONE)
        p->max_match_window = a->speculative_ngram_max_match_window_size;
    if (a->speculative_ngram_min_bfs_breadth != ARGS_INT_NONE) p->min_bfs_breadth = a->speculative_ngram_min_bfs_breadth;
    if (a->speculative_ngram_max_bfs_breadth != ARGS_INT_NONE) p->max_bfs_breadth = a->speculative_ngram_max_bfs_breadth;
    if (a->speculative_ngram_max_trie_depth != ARGS_INT_NONE) p->max_trie_depth = a->speculative_ngram_max_trie_depth;
    if (a->speculative_ngram_capacity != ARGS_INT_NONE) p->capacity = a->speculative_ngram_capacity;
    if (a->speculative_ngram_match_type) p->match_type = !strcmp(a->speculative_ngram_match_type, "PROB") ? SPEC_MATCH_PROB : SPEC_MATCH_BFS;
    /* SGLang: num_draft_tokens defaults to the max match window for NGRAM */
    c->args.num_draft_tokens = a->speculative_num_draft_tokens != ARGS_INT_NONE ? a->speculative_num_draft_tokens
                                                                                : p->max_match_window;
    char err[512];
    if (spec_ngram_params_check(p, err, sizeof err)) {
        fprintf(stderr, "sglc %s: %s\n", name, err);
        return -1;
    }
    if (c->args.num_draft_tokens < 1 || c->args.num_draft_tokens > 64) {
        fprintf(stderr, "sglc %s: --speculative-num-draft-tokens must be between 1 and 64 (got %d)\n", name,
                c->args.num_draft_tokens);
        return -1;
    }
    return 0;
}

int cli_spec_setup(cli_spec *c, sched *s)
{
    if (c->args.algo == SPEC_ALGO_NONE) return 0;
    char err[512];
    c->drafter = spec_drafter_create(&c->args, err, sizeof err);
    if (!c->drafter) {
        fprintf(stderr, "error: speculative decoding: %s\n", err);
        return -1;
    }
    spec_drafter_attach(c->drafter, s);
    log_info("speculative decoding: NGRAM, %d draft tokens per step (match window %d..%d, %s, trie depth %d, "
             "capacity %lld)",
             c->args.num_draft_tokens - 1, c->args.ngram.min_match_window, c->args.ngram.max_match_window,
             c->args.ngram.match_type == SPEC_MATCH_PROB ? "PROB" : "BFS", c->args.ngram.max_trie_depth,
             (long long)c->args.ngram.capacity);
    return 0;
}

void cli_spec_free(cli_spec *c)
{
    spec_drafter_destroy(c->drafter);
    c->drafter = NULL;
}
