/* cli_spec — see cli_spec.h. */
#include "cli/cli_spec.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spec/spec_eagle.h"
#include "util/log.h"

int cli_spec_args_from_args(cli_spec *c, const args_server *a, const char *name)
{
    memset(c, 0, sizeof *c);
    spec_args_init(&c->args);
    /* in (0, 1]: args_validate; none = SGLang's default 1.0 */
    c->accept_single = args_float_is_none(a->speculative_accept_threshold_single) ? 1.0 : a->speculative_accept_threshold_single;
    c->accept_acc = args_float_is_none(a->speculative_accept_threshold_acc) ? 1.0 : a->speculative_accept_threshold_acc;
    if (!a->speculative_algorithm) return 0;
    int algo = spec_algo_parse(a->speculative_algorithm);
    if (algo < 0) {
        fprintf(stderr, "sglc %s: --speculative-algorithm %s is not supported by sglc (EAGLE, EAGLE3, NEXTN, STANDALONE and NGRAM are)\n",
                name, a->speculative_algorithm);
        return -1;
    }
    c->args.algo = (spec_algo)algo;
    bool eagle = algo == SPEC_ALGO_EAGLE || algo == SPEC_ALGO_EAGLE3;
    if (eagle && a->speculative_eagle_topk != ARGS_INT_NONE &&
        (a->speculative_eagle_topk < 1 || a->speculative_eagle_topk > SPEC_EAGLE_TOPK_MAX)) {
        fprintf(stderr, "sglc %s: --speculative-eagle-topk must be between 1 and %d (got %d)\n", name,
                SPEC_EAGLE_TOPK_MAX, a->speculative_eagle_topk);
        return -1;
    }
    if (algo == SPEC_ALGO_STANDALONE && a->speculative_eagle_topk != ARGS_INT_NONE && a->speculative_eagle_topk != 1) {
        fprintf(stderr, "sglc %s: --speculative-eagle-topk %d with STANDALONE is not supported by sglc yet (its drafts "
                        "are chains; EAGLE / EAGLE3 draft trees)\n", name, a->speculative_eagle_topk);
        return -1;
    }
    if (a->speculative_token_map) {
        /* SGLang: EAGLE3 heads have their map (d2t), the flag is ignored with a warning */
        if (algo == SPEC_ALGO_EAGLE3) {
            log_warn("--speculative-token-map %s is ignored: EAGLE3 heads carry their own token map (d2t)",
                     a->speculative_token_map);
        } else if (algo != SPEC_ALGO_EAGLE) {
            fprintf(stderr, "sglc %s: --speculative-token-map applies to --speculative-algorithm EAGLE / NEXTN heads, not %s\n",
                    name, a->speculative_algorithm);
            return -1;
        } else {
            /* read now for a usage error before the model loads; read again by
             * cli_spec_setup (the commands copy a checked cli_spec per replica) */
            char err[512];
            c->token_map_path = a->speculative_token_map;
            spec_tokmap *tm = spec_tokmap_load(c->token_map_path, err, sizeof err);
            if (!tm) {
                /* SGLang downloads a path that is not local from the hub; sglc reads local files only */
                fprintf(stderr, "sglc %s: --speculative-token-map %s: %s%s\n", name, c->token_map_path, err,
                        access(c->token_map_path, F_OK) ? " (a local file is needed: hub paths are not downloaded)" : "");
                return -1;
            }
            spec_tokmap_destroy(tm);
        }
    }
    if (algo == SPEC_ALGO_STANDALONE || eagle) {
        const char *an = a->speculative_algorithm;
        c->draft_path = a->speculative_draft_model_path;
        c->draft_dummy = a->speculative_draft_load_format && !strcmp(a->speculative_draft_load_format, "dummy");
        c->draft_quant = a->speculative_draft_model_quantization;
        c->draft_revision = a->speculative_draft_model_revision; /* hub id: like --revision for the target */
        if (eagle && (c->draft_dummy || c->draft_quant)) {
            fprintf(stderr, "sglc %s: --speculative-algorithm %s reads the head's folder as it is: --speculative-draft-%s is "
                            "not supported with it yet\n",
                    name, an, c->draft_dummy ? "load-format dummy" : "model-quantization");
            return -1;
        }
        if (a->tp_size != ARGS_INT_NONE && a->tp_size > 1) {
            fprintf(stderr, "sglc %s: --speculative-algorithm %s with --tp-size > 1 is not supported by sglc yet\n", name,
                    an);
            return -1;
        }
        if (!c->draft_path) {
            fprintf(stderr, "sglc %s: --speculative-algorithm %s needs --speculative-draft-model-path\n", name, an);
            return -1;
        }
        if ((c->draft_path[0] == '/' || c->draft_path[0] == '.') && access(c->draft_path, R_OK) != 0) {
            fprintf(stderr, "sglc %s: --speculative-draft-model-path %s: no such file or directory\n", name,
                    c->draft_path);
            return -1;
        }
        /* SGLang (topk 1): num_draft_tokens = num_steps + 1; default 3 steps */
        int steps = a->speculative_num_steps != ARGS_INT_NONE ? a->speculative_num_steps : 3;
        if (steps < 1 || steps > 63) {
            fprintf(stderr, "sglc %s: --speculative-num-steps must be between 1 and 63 (got %d)\n", name, steps);
            return -1;
        }
        bool tree = eagle && a->speculative_eagle_topk != ARGS_INT_NONE && a->speculative_eagle_topk > 1;
        if (!tree && a->speculative_num_draft_tokens != ARGS_INT_NONE && a->speculative_num_draft_tokens != steps + 1 &&
            a->speculative_num_steps != ARGS_INT_NONE)
            log_warn("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 (%d)", steps + 1);
        c->args.num_draft_tokens = a->speculative_num_steps == ARGS_INT_NONE && a->speculative_num_draft_tokens != ARGS_INT_NONE
                                       ? a->speculative_num_draft_tokens
                                       : steps + 1;
        if (eagle) {
            /* SGLang: none of steps / topk / draft tokens given -> chosen from the target's
             * architecture (cli_spec_setup); topk > 1: a tree of num_draft_tokens - 1 nodes,
             * num_steps deep (SGLang requires the three then; sglc takes 8 draft tokens) */
            c->eagle_auto = a->speculative_num_steps == ARGS_INT_NONE && a->speculative_eagle_topk == ARGS_INT_NONE &&
                            a->speculative_num_draft_tokens == ARGS_INT_NONE;
            c->args.eagle_topk = a->speculative_eagle_topk != ARGS_INT_NONE ? a->speculative_eagle_topk : 1;
            c->args.eagle_steps = steps;
            if (c->args.eagle_topk > 1)
                c->args.num_draft_tokens =
                    a->speculative_num_draft_tokens != ARGS_INT_NONE ? a->speculative_num_draft_tokens : 8;
        }
        if (c->args.num_draft_tokens < 1 || c->args.num_draft_tokens > 64) {
            fprintf(stderr, "sglc %s: --speculative-num-draft-tokens must be between 1 and 64 (got %d)\n", name,
                    c->args.num_draft_tokens);
            return -1;
        }
        return 0;
    }
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

int cli_spec_setup(cli_spec *c, sched *s, model *m, const cli_model_opts *mo)
{
    if (c->args.algo == SPEC_ALGO_NONE) return 0;
    if (model_get_config(m)->n_mamba) { /* verification would need the state before the rejected drafts */
        fprintf(stderr, "error: speculative decoding is not supported for %s: its Mamba2 states cannot be "
                "rolled back to the accepted draft tokens\n", model_get_config(m)->architecture);
        return -1;
    }
    char err[512];
    if (c->args.algo == SPEC_ALGO_EAGLE || c->args.algo == SPEC_ALGO_EAGLE3) {
        sched_stats st;
        sched_get_stats(s, &st);
        c->args.eagle_path = c->draft_path;
        c->args.target_model = sched_model(s);
        c->args.target_slots = st.max_total_num_tokens;
        c->args.draft_kv_tokens = st.max_total_num_tokens < 65536 ? st.max_total_num_tokens : 65536;
        if (c->token_map_path && !(c->token_map = spec_tokmap_load(c->token_map_path, err, sizeof err))) {
            fprintf(stderr, "error: --speculative-token-map %s: %s\n", c->token_map_path, err);
            return -1;
        }
        if (c->token_map && spec_tokmap_bind(c->token_map, model_get_config(m)->vocab_size, err, sizeof err)) {
            fprintf(stderr, "error: --speculative-token-map %s: %s\n", c->token_map_path, err);
            return -1;
        }
        c->args.token_map = c->token_map;
        if (c->eagle_auto) { /* SGLang's _auto_choose_speculative_params (arg_groups/speculative_hook.py):
                              * (steps, topk, draft tokens) = (5, 4, 8) for Llama and Grok-1, else (3, 1, 4) */
            const char *arch = model_get_config(m)->architecture;
            bool llama = !strcmp(arch, "LlamaForCausalLM") || !strcmp(arch, "Grok1ForCausalLM") ||
                         !strcmp(arch, "Grok1VForCausalLM");
            c->args.eagle_steps = llama ? 5 : 3;
            c->args.eagle_topk = llama ? 4 : 1;
            c->args.num_draft_tokens = llama ? 8 : 4;
        }
    }
    if (c->args.algo == SPEC_ALGO_STANDALONE) {
        cli_model_opts dmo = *mo;
        dmo.load.model_path = c->draft_path;
        dmo.load.load_format = c->draft_dummy ? MODEL_LOAD_DUMMY : MODEL_LOAD_AUTO;
        dmo.load.override_json = NULL;
        dmo.load.context_length = 0;
        dmo.load.quantization = c->draft_quant; /* e.g. w8a8_int8 of the target itself: self-speculation */
        dmo.revision = c->draft_revision;
        dmo.dist.tp_size = 1; /* the draft runs in this process only (tp > 1 refused above) */
        c->draft = cli_model_load(&dmo);
        if (!c->draft) {
            fprintf(stderr, "error: --speculative-draft-model-path %s: the draft model did not load\n", c->draft_path);
            return -1;
        }
        sched_stats st;
        sched_get_stats(s, &st);
        c->args.draft_model = c->draft;
        c->args.target_vocab = model_get_config(m)->vocab_size;
        c->args.draft_kv_tokens = st.max_total_num_tokens < 65536 ? st.max_total_num_tokens : 65536;
        c->args.draft_threads = 1;
    }
    c->drafter = spec_drafter_create(&c->args, err, sizeof err);
    if (!c->drafter) {
        fprintf(stderr, "error: speculative decoding: %s\n", err);
        return -1;
    }
    spec_drafter_attach(c->drafter, s);
    sched_set_spec_accept(s, c->accept_single, c->accept_acc);
    if (c->accept_single < 1.0 || c->accept_acc < 1.0)
        log_info("speculative decoding: accept thresholds single %g, acc %g: sampled requests accept more drafts, "
                 "their output no longer follows the target distribution exactly (greedy ones unchanged)",
                 c->accept_single, c->accept_acc);
    if (c->args.algo == SPEC_ALGO_EAGLE || c->args.algo == SPEC_ALGO_EAGLE3) {
        if (c->args.eagle_topk > 1)
            log_info("speculative decoding: %s, head %s, draft trees of up to %d nodes (%d steps, topk %d, greedy%s)",
                     c->args.algo == SPEC_ALGO_EAGLE3 ? "EAGLE3" : "EAGLE", c->draft_path, c->args.num_draft_tokens - 1,
                     c->args.eagle_steps, c->args.eagle_topk, c->eagle_auto ? "; SGLang's defaults for the target" : "");
        else
            log_info("speculative decoding: %s, head %s, %d draft tokens per step (chain, topk 1, greedy)",
                     c->args.algo == SPEC_ALGO_EAGLE3 ? "EAGLE3" : "EAGLE", c->draft_path, c->args.num_draft_tokens - 1);
        return 0;
    }
    if (c->args.algo == SPEC_ALGO_STANDALONE) {
        log_info("speculative decoding: STANDALONE, draft model %s, %d draft tokens per step (greedy), draft KV %lld "
                 "tokens",
                 c->draft_path, c->args.num_draft_tokens - 1, (long long)c->args.draft_kv_tokens);
        return 0;
    }
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
    model_free(c->draft);
    c->draft = NULL;
    spec_tokmap_destroy(c->token_map);
    c->token_map = NULL;
}
