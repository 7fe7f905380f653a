/* cli_args — one command-line surface for every command.
 *
 * DESIGN: every command parses with args_parse_cmd (src/args): SGLang's
 * server arguments come from the one table in args_table.h (same names,
 * defaults, checks and messages as `sglc serve`, --config FILE included),
 * and the command's own options (--prompt, --batch-size, --dataset-name
 * ...) are args_extra rows tried first.  A command that runs the engine
 * takes every server argument, as SGLang's bench_one_batch and
 * bench_offline_throughput add ServerArgs to their parsers; its --help
 * prints its own options, then the server arguments it uses in full
 * (the *_ARG_IDS lists below), then a pointer to `sglc serve --help`.
 * bench-serving is a client and takes none (args_cmd.no_server_args).
 *
 * The parsed args_server then maps onto the model loader and the
 * scheduler by the two functions here, which `serve` uses too, so a
 * server argument means the same thing in every command. */
#ifndef SGLC_CLI_ARGS_H
#define SGLC_CLI_ARGS_H

#include <stdbool.h>

#include "args/args.h"
#include "cli/cli_model.h"
#include "sched/sched.h"

/* sglc's own option of every engine command (not an SGLang argument). */
#define CLI_EXTRA_THREADS(p)                                                                     \
    {.name = "--threads", .metavar = "N", .help = "Compute threads (sglc's own option).",       \
     .ival = (p), .lo = 1, .hi = 4096, .def = "all cores"}

/* Server arguments that the model-loading path reads (cli_model_opts_from_args). */
#define CLI_MODEL_ARG_IDS                                                                        \
    ARG_ID_model_path, ARG_ID_revision, ARG_ID_download_dir, ARG_ID_load_format, ARG_ID_dtype,    \
        ARG_ID_kv_cache_dtype, ARG_ID_quantization_param_path, ARG_ID_context_length, ARG_ID_json_model_override_args,            \
        ARG_ID_random_seed, ARG_ID_trust_remote_code, ARG_ID_log_level, ARG_ID_enable_fp32_lm_head, \
        ARG_ID_model_loader_extra_config, ARG_ID_quantization, ARG_ID_tp_size, ARG_ID_nnodes,       \
        ARG_ID_node_rank, ARG_ID_dist_init_addr, ARG_ID_dist_timeout, ARG_ID_pp_size, ARG_ID_pp_max_micro_batch_size, ARG_ID_pp_async_batch_depth, ARG_ID_base_gpu_id, ARG_ID_gpu_id_step, ARG_ID_numa_node, \
        ARG_ID_ep_size, ARG_ID_moe_a2a_backend, ARG_ID_ep_num_redundant_experts, ARG_ID_init_expert_location, \
        ARG_ID_enable_eplb, ARG_ID_eplb_algorithm, ARG_ID_eplb_rebalance_num_iterations, ARG_ID_ep_dispatch_algorithm, \
        ARG_ID_eplb_min_rebalancing_utilization_threshold, ARG_ID_eplb_rebalance_layers_per_chunk, \
        ARG_ID_expert_distribution_recorder_mode, ARG_ID_expert_distribution_recorder_buffer_size,        \
        ARG_ID_enable_expert_distribution_metrics
/* Server arguments that the scheduler reads (cli_sched_args_from_args). */
#define CLI_SCHED_ARG_IDS                                                                        \
    ARG_ID_page_size, ARG_ID_max_total_tokens, ARG_ID_mem_fraction_static,                        \
        ARG_ID_max_running_requests, ARG_ID_max_queued_requests, ARG_ID_max_prefill_tokens,       \
        ARG_ID_chunked_prefill_size, ARG_ID_prefill_max_requests, ARG_ID_schedule_policy,         \
        ARG_ID_schedule_conservativeness, ARG_ID_disable_radix_cache,                             \
        ARG_ID_radix_eviction_policy, ARG_ID_enable_mixed_chunk,                                  \
        ARG_ID_enable_priority_scheduling, ARG_ID_schedule_low_priority_values_first,             \
        ARG_ID_priority_scheduling_preemption_threshold, ARG_ID_abort_on_priority_when_disabled,  \
        ARG_ID_disable_priority_preemption, ARG_ID_default_priority_value,                        \
        ARG_ID_decode_log_interval, ARG_ID_enable_request_time_stats_logging, ARG_ID_stream_interval, \
        ARG_ID_max_mamba_cache_size, ARG_ID_mamba_ssm_dtype, ARG_ID_mamba_full_memory_ratio,       \
        ARG_ID_mamba_scheduler_strategy, ARG_ID_mamba_track_interval

/* Parse the command line of command `name` ("generate": messages read
 * "sglc generate: ...").  Returns -1 to go on, the caller then owning *a
 * (args_server_free); otherwise the exit status to return at once, *a
 * already freed: 0 after --help was printed to stdout, 2 after a usage
 * error was printed to stderr.  need_model: --model-path is required.
 * Applies --log-level. */
int cli_args_parse(const char *name, const args_cmd *cmd, bool need_model, args_server *a, int argc,
                   char **argv);

/* The model options that `a` asks for (strings borrowed from `a`);
 * threads <= 0 = all cores.  --random-seed None seeds dummy weights
 * with 0. */
void cli_model_opts_from_args(cli_model_opts *mo, const args_server *a, long long threads);

/* The scheduler arguments that `a` asks for; None keeps the engine's
 * default (sched_args_init).  kv dtype, threads and seed come from the
 * model options (cli_sched_create). */
void cli_sched_args_from_args(sched_args *sa, const args_server *a);

/* ---- synthetic datasets of bench-offline and bench-serving -------------- */

/* Options of SGLang's bench_serving dataset generators that both
 * benchmark commands share; names and defaults as in bench_serving.py. */
typedef struct cli_dataset_opts {
    const char *name; /* --dataset-name (each command lists its choices) */
    long long num_prompts, random_input_len, random_output_len;
    double random_range_ratio;
    long long gsp_num_groups, gsp_prompts_per_group, gsp_system_prompt_len, gsp_question_len,
        gsp_output_len;
    long long seed;
    bool disable_ignore_eos;
} cli_dataset_opts;

#define CLI_DATASET_OPTS_INIT                                                                    \
    {.name = "random", .num_prompts = 1000, .random_input_len = 1024, .random_output_len = 1024,  \
     .random_range_ratio = 0.0, .gsp_num_groups = 64, .gsp_prompts_per_group = 16,               \
     .gsp_system_prompt_len = 2048, .gsp_question_len = 128, .gsp_output_len = 256, .seed = 1}

/* The args_extra rows of those options (d: cli_dataset_opts *), to splice
 * into a command's table. */
#define CLI_DATASET_EXTRAS(d)                                                                    \
    {.name = "--num-prompts", .metavar = "N", .help = "Number of prompts (random datasets).",    \
     .ival = &(d)->num_prompts, .lo = 1, .hi = 1 << 30, .def = "1000"},                          \
    {.name = "--random-input-len", .metavar = "N", .help = "Input tokens per request.",          \
     .ival = &(d)->random_input_len, .lo = 1, .hi = 1 << 30, .def = "1024"},                     \
    {.name = "--random-output-len", .metavar = "N", .help = "Output tokens per request.",        \
     .ival = &(d)->random_output_len, .lo = 1, .hi = 1 << 30, .def = "1024"},                    \
    {.name = "--random-range-ratio", .metavar = "R",                                             \
     .help = "Lengths uniform in [len * R, len].", .fval = &(d)->random_range_ratio, .lo = 0,    \
     .hi = 1, .def = "0.0"},                                                                     \
    {.name = "--gsp-num-groups", .metavar = "N", .help = "generated-shared-prefix: groups.",     \
     .ival = &(d)->gsp_num_groups, .lo = 1, .hi = 1 << 30, .def = "64"},                         \
    {.name = "--gsp-prompts-per-group", .metavar = "N",                                          \
     .help = "generated-shared-prefix: prompts per group.", .ival = &(d)->gsp_prompts_per_group, \
     .lo = 1, .hi = 1 << 30, .def = "16"},                                                       \
    {.name = "--gsp-system-prompt-len", .metavar = "N",                                          \
     .help = "generated-shared-prefix: tokens of the shared system prompt.",                     \
     .ival = &(d)->gsp_system_prompt_len, .lo = 0, .hi = 1 << 30, .def = "2048"},                \
    {.name = "--gsp-question-len", .metavar = "N",                                               \
     .help = "generated-shared-prefix: tokens of each question.", .ival = &(d)->gsp_question_len, \
     .lo = 1, .hi = 1 << 30, .def = "128"},                                                      \
    {.name = "--gsp-output-len", .metavar = "N",                                                 \
     .help = "generated-shared-prefix: output tokens per request.",                              \
     .ival = &(d)->gsp_output_len, .lo = 1, .hi = 1 << 30, .def = "256"},                        \
    {.name = "--seed", .metavar = "N", .help = "Seed of the dataset.", .ival = &(d)->seed,       \
     .lo = 0, .hi = 1 << 30, .def = "1"},                                                        \
    {.name = "--disable-ignore-eos", .help = "Let requests stop at EOS.",                        \
     .flag = &(d)->disable_ignore_eos}

#endif
