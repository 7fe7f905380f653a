/* cli_spec — speculative decoding for the commands that run the scheduler
 * (serve, generate --requests, bench-offline), from
 * --speculative-algorithm, --speculative-num-draft-tokens and the
 * --speculative-ngram-* arguments.
 *
 * DESIGN: cli_spec_args_from_args checks the arguments before anything
 * is loaded (a bad value is a usage error, exit 2); cli_spec_setup builds
 * the drafter (src/spec) and installs it as the scheduler's draft hook
 * before sched_start; STANDALONE loads the draft model
 * (--speculative-draft-model-path, --speculative-draft-load-format) with
 * the target's dtype and threads and refuses one of another vocabulary.
 * EAGLE / EAGLE3 / NEXTN load a head (spec_eagle.h; topk > 1 drafts trees);
 * EAGLE / NEXTN read --speculative-token-map (spec_tokmap.h) before the
 * model loads.
 *
 * Ownership: cli_spec owns the drafter; free it after the scheduler
 * (which borrows it). */
#ifndef SGLC_CLI_SPEC_H
#define SGLC_CLI_SPEC_H

#include "args/args.h"
#include "cli/cli_model.h"
#include "sched/sched.h"
#include "spec/spec.h"

/* The server arguments these commands read for it (their --help lists). */
#define CLI_SPEC_ARG_IDS                                                                        \
    ARG_ID_speculative_algorithm, ARG_ID_speculative_num_draft_tokens,                          \
        ARG_ID_speculative_ngram_min_match_window_size, ARG_ID_speculative_ngram_max_match_window_size, \
        ARG_ID_speculative_ngram_min_bfs_breadth, ARG_ID_speculative_ngram_max_bfs_breadth,     \
        ARG_ID_speculative_ngram_match_type, ARG_ID_speculative_ngram_max_trie_depth,           \
        ARG_ID_speculative_ngram_capacity, ARG_ID_speculative_draft_model_path,                  \
        ARG_ID_speculative_draft_load_format, ARG_ID_speculative_num_steps,                      \
        ARG_ID_speculative_draft_model_quantization, ARG_ID_speculative_draft_model_revision,        \
        ARG_ID_speculative_accept_threshold_single, ARG_ID_speculative_accept_threshold_acc,    \
        ARG_ID_speculative_attention_mode, ARG_ID_speculative_draft_attention_backend,           \
        ARG_ID_speculative_moe_runner_backend, ARG_ID_speculative_moe_a2a_backend,               \
        ARG_ID_speculative_eagle_topk, ARG_ID_speculative_token_map

typedef struct cli_spec {
    spec_args args;
    const char *draft_path;      /* STANDALONE: --speculative-draft-model-path (borrowed from the args) */
    bool draft_dummy;            /* --speculative-draft-load-format dummy */
    const char *draft_revision;  /* --speculative-draft-model-revision (borrowed), NULL = main */
    const char *draft_quant;     /* --speculative-draft-model-quantization (borrowed), NULL = none */
    bool eagle_auto;             /* EAGLE: no steps / topk / draft tokens given: SGLang's choice by the target's
                                  * architecture at setup (LlamaForCausalLM 5, 4, 8; others 3, 1, 4) */
    double accept_single, accept_acc; /* --speculative-accept-threshold-single / -acc (sched_set_spec_accept) */
    model *draft;                /* STANDALONE: owned draft model */
    const char *token_map_path;  /* EAGLE: --speculative-token-map (borrowed from the args) */
    spec_tokmap *token_map;      /* EAGLE: owned, read and bound by cli_spec_setup (NULL until then: a
                                  * checked cli_spec may be copied per replica) */
    spec_drafter *drafter;       /* owned, NULL = no speculative decoding */
} cli_spec;

/* Fill c->args from a and check them.  0 (also when no algorithm is
 * given), or -1 with "sglc NAME: ..." printed (a usage error). */
int cli_spec_args_from_args(cli_spec *c, const args_server *a, const char *name);
/* Build the drafter of c->args (STANDALONE: load the draft model with
 * target m's options mo) and install it on s.  0, or -1 with the reason
 * printed. */
int cli_spec_setup(cli_spec *c, sched *s, model *m, const cli_model_opts *mo);
void cli_spec_free(cli_spec *c);

#endif
