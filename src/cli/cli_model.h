/* cli_model — model loading shared by the commands that run the engine
 * (serve, generate, bench-one-batch, bench-offline).
 *
 * DESIGN: the options come from the parsed server arguments
 * (cli_model_opts_from_args in cli_args.h, one mapping for every command);
 * this file resolves hub ids, loads the model and tokenizer and picks the
 * KV dtype and thread count.  Sampling is not here: every command
 * samples through src/sampling/ (generate as the scheduler does).
 */
#ifndef SGLC_CLI_MODEL_H
#define SGLC_CLI_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli_dist.h"
#include "model/model.h"
#include "model/model_ep.h"
#include "tokenizer/tokenizer.h"

typedef struct cli_model_opts {
    model_load_opts load;
    int kv_dtype;          /* -1 auto (bf16 when weights are bf16, else f32); -2 refused (fp4_e2m1) */
    const char *kv_scales_path; /* --quantization-param-path: per-layer KV scales (SGLang's JSON) */
    int threads;           /* 0 = all cores */
    int trust_remote_code; /* accepted, no effect */
    int pack_threads;      /* threads packing one large weight at load (--model-loader-extra-config
                            * enable_multithread_load / num_threads); 0 = the compute threads */
    bool fp32_lm_head;     /* --enable-fp32-lm-head: refuse the debug switch SGLC_BF16_DOT=1, the one
                            * way sglc would round the LM head's activations to bf16 */
    const char *revision;     /* --revision: hub branch/tag/commit (NULL = main) */
    const char *download_dir; /* --download-dir: hub cache root (NULL = $HF_HOME/hub) */
    cli_dist_opts dist;    /* --tp-size, --nnodes, --node-rank, --dist-timeout (cli_dist.h) */
    model_ep_opts ep;      /* --ep-size, --ep-num-redundant-experts, --init-expert-location, EPLB */
    const char *erec_mode; /* --expert-distribution-recorder-mode (NULL = off) */
    int erec_buffer;       /* --expert-distribution-recorder-buffer-size (0 = 1000) */
    bool erec_metrics;     /* --enable-expert-distribution-metrics */
} cli_model_opts;

void cli_model_opts_init(cli_model_opts *o);

/* Load the model (kernels_init + model_load) and log the kernel ISA.
 * A --model-path that is not a local folder is resolved through the
 * Hugging Face hub cache (downloaded on first use, see hub/hub.h).
 * NULL on failure after printing the error. */
model *cli_model_load(const cli_model_opts *o);
/* serve --dp-size n with --tp-size / --pp-size (cli_dp_tp.h): n groups of
 * ranks (cli_dist_start_groups) and n run states over this rank's one
 * shard (loaded once; out[k] drives replica k's group, model_share_group).
 * n = 1 is cli_model_load.  A worker rank never returns: it serves every
 * group (a thread each) until rank 0 shuts them down.  0, or -1 after
 * printing the error (nothing left loaded). */
int cli_model_load_replicas(const cli_model_opts *o, int n, model **out);
/* The local folder the last cli_model_load read (after hub resolution);
 * "" before any load.  Points into static storage. */
const char *cli_model_dir(void);
/* The tokenizer of a folder, for commands where it is optional (dummy-weight
 * config folders have none: ids in, ids out).  When !required and dir has
 * no tokenizer.json, *out = NULL and 0 is returned.  -1 after printing the
 * error. */
int cli_tokenizer_load(const char *dir, bool required, tok_tokenizer **out);
dtype cli_kv_dtype(const cli_model_opts *o, const model *m);
/* Read --quantization-param-path's per-layer KV scales into m (see
 * cli_model.c).  0, or -1 with the reason. */
int cli_kv_scales_load(model *m, const char *path, int kv_dtype, char *err, size_t errlen);
/* Compute threads of this rank: --threads (or every core) / --tp-size
 * (x --pp-size; x --dp-size too when a replica has several ranks). */
int cli_threads(const cli_model_opts *o);

#endif
