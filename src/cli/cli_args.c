/* cli_args — see cli_args.h. */
#include "cli/cli_args.h"

#include "cli/cli_dp_tp.h"

#include <stdio.h>
#include <string.h>

#include "kv/kv_radix.h"
#include "util/dtype.h"
#include "util/log.h"

int cli_args_parse(const char *name, const args_cmd *cmd, bool need_model, args_server *a, int argc,
                   char **argv)
{
    char err[ARGS_ERR_MAX];
    int rc = args_parse_cmd(a, cmd, argc, argv, err, sizeof err);
    if (rc == ARGS_HELP) {
        args_print_cmd_help(stdout, cmd);
        args_server_free(a);
        return 0;
    }
    if (rc != ARGS_OK) {
        fprintf(stderr, "sglc %s: %s\n", name, err);
        args_server_free(a);
        return 2;
    }
    if (need_model && !a->model_path) {
        fprintf(stderr, "sglc %s: --model-path is required (see sglc %s --help)\n", name, name);
        args_server_free(a);
        return 2;
    }
    if (!cmd->no_server_args && cli_dp_tp_check(name, a)) { /* replicas of several ranks: serve only */
        args_server_free(a);
        return 2;
    }
    if (!cmd->no_server_args && a->moe_a2a_backend && strcmp(a->moe_a2a_backend, "none")) {
        fprintf(stderr, "sglc %s: --moe-a2a-backend %s is not supported: it names a GPU all-to-all library; "
                        "sglc's expert parallelism combines with the all-reduce (--moe-a2a-backend none)\n",
                name, a->moe_a2a_backend);
        args_server_free(a);
        return 2;
    }
    if (!cmd->no_server_args && a->ep_dispatch_algorithm && strcmp(a->ep_dispatch_algorithm, "static")) {
        fprintf(stderr, "sglc %s: --ep-dispatch-algorithm %s is not supported yet: the copies of an expert "
                        "split its rows in fixed parts (static)\n", name, a->ep_dispatch_algorithm);
        args_server_free(a);
        return 2;
    }
    if (!cmd->no_server_args && a->ep_size != ARGS_INT_NONE && a->ep_size > 1 &&
        (a->tp_size == ARGS_INT_NONE || a->tp_size < a->ep_size || a->tp_size % a->ep_size)) {
        fprintf(stderr, "sglc %s: --ep-size %d must divide --tp-size %d (the expert-parallel ranks are the "
                        "tensor-parallel ones)\n", name, (int)a->ep_size,
                a->tp_size == ARGS_INT_NONE ? 1 : (int)a->tp_size);
        args_server_free(a);
        return 2;
    }
    if (!cmd->no_server_args && a->pp_max_micro_batch_size != ARGS_INT_NONE && a->pp_max_micro_batch_size < 1) {
        fprintf(stderr, "sglc %s: --pp-max-micro-batch-size %lld: at least 1 request per micro-batch\n", name,
                (long long)a->pp_max_micro_batch_size);
        args_server_free(a);
        return 2;
    }
    if (!cmd->no_server_args && a->pp_async_batch_depth != ARGS_INT_NONE && a->pp_async_batch_depth < 0) {
        fprintf(stderr, "sglc %s: --pp-async-batch-depth %lld: not negative\n", name,
                (long long)a->pp_async_batch_depth);
        args_server_free(a);
        return 2;
    }
    if (!cmd->no_server_args && a->log_level && log_level_parse(a->log_level) >= 0)
        log_set_level(log_level_parse(a->log_level));
    return -1;
}

void cli_model_opts_from_args(cli_model_opts *mo, const args_server *a, long long threads)
{
    cli_model_opts_init(mo);
    mo->load.model_path = a->model_path;
    mo->load.dtype = (!a->dtype || !strcmp(a->dtype, "auto")) ? -1 : dtype_parse(a->dtype);
    if (a->load_format && !strcmp(a->load_format, "dummy")) mo->load.load_format = MODEL_LOAD_DUMMY;
    else if (a->load_format && !strcmp(a->load_format, "safetensors"))
        mo->load.load_format = MODEL_LOAD_SAFETENSORS;
    else if ((a->load_format && !strcmp(a->load_format, "gguf")) ||
             (a->quantization && !strcmp(a->quantization, "gguf")))
        mo->load.load_format = MODEL_LOAD_GGUF;
    mo->load.override_json = a->json_model_override_args;
    mo->load.quantization = a->quantization;
    mo->load.context_length = a->context_length != ARGS_INT_NONE ? a->context_length : 0;
    mo->load.random_seed = a->random_seed != ARGS_INT_NONE ? (uint64_t)a->random_seed : 0;
    const char *kd = a->kv_cache_dtype;
    mo->kv_dtype = !kd || !strcmp(kd, "auto")               ? -1
                   : !strcmp(kd, "bfloat16") || !strcmp(kd, "bf16") ? DTYPE_BF16
                   : !strcmp(kd, "fp8_e4m3")               ? DTYPE_F8_E4M3
                   : !strcmp(kd, "fp8_e5m2")               ? DTYPE_F8_E5M2
                   : !strcmp(kd, "float32")                ? DTYPE_F32
                   : !strcmp(kd, "int8")                   ? DTYPE_I8 /* sglc's own */
                                                          : -2; /* fp4_e2m1: refused at load */
    mo->kv_scales_path = a->quantization_param_path;
    mo->threads = threads > 0 ? (int)threads : 0;
    mo->revision = a->revision;
    mo->download_dir = a->download_dir;
    mo->fp32_lm_head = a->enable_fp32_lm_head;
    mo->dist.tp_size = a->tp_size != ARGS_INT_NONE && a->tp_size > 0 ? (int)a->tp_size : 1;
    mo->dist.dp_size = a->dp_size != ARGS_INT_NONE && a->dp_size > 1 ? (int)a->dp_size : 1;
    mo->dist.pp_size = a->pp_size != ARGS_INT_NONE && a->pp_size > 1 ? (int)a->pp_size : 1;
    mo->dist.pp_micro = a->pp_max_micro_batch_size != ARGS_INT_NONE && a->pp_max_micro_batch_size > 0
                            ? (int)a->pp_max_micro_batch_size : 0;
    mo->dist.nnodes = a->nnodes != ARGS_INT_NONE && a->nnodes > 0 ? (int)a->nnodes : 1;
    mo->dist.node_rank = a->node_rank != ARGS_INT_NONE ? (int)a->node_rank : 0;
    mo->dist.init_addr = a->dist_init_addr && *a->dist_init_addr ? a->dist_init_addr : NULL;
    mo->dist.timeout_s = a->dist_timeout != ARGS_INT_NONE && a->dist_timeout > 0 ? (int)a->dist_timeout : 0;
    mo->dist.base_group = a->base_gpu_id != ARGS_INT_NONE && a->base_gpu_id > 0 ? (int)a->base_gpu_id : 0;
    mo->dist.group_step = a->gpu_id_step != ARGS_INT_NONE ? (int)a->gpu_id_step : 1;
    /* expert parallelism and the recorder (model_ep.h; combinations checked at load) */
    mo->ep.ep_size = a->ep_size != ARGS_INT_NONE && a->ep_size > 1 ? (int)a->ep_size : 1;
    mo->ep.n_redundant = a->ep_num_redundant_experts != ARGS_INT_NONE ? (int)a->ep_num_redundant_experts : 0;
    mo->ep.init_location = a->init_expert_location;
    mo->ep.eplb_every = !a->enable_eplb ? 0
                        : a->eplb_rebalance_num_iterations != ARGS_INT_NONE && a->eplb_rebalance_num_iterations > 0
                            ? (int)a->eplb_rebalance_num_iterations : 1000;
    mo->ep.eplb_algorithm = a->eplb_algorithm;
    mo->ep.eplb_layers_per_chunk = a->eplb_rebalance_layers_per_chunk != ARGS_INT_NONE &&
                                           a->eplb_rebalance_layers_per_chunk > 0
                                       ? (int)a->eplb_rebalance_layers_per_chunk : 0;
    mo->ep.eplb_min_util = args_float_is_none(a->eplb_min_rebalancing_utilization_threshold)
                               ? 1.0 : a->eplb_min_rebalancing_utilization_threshold;
    /* SGLang: --enable-eplb sets the recorder mode to stat when none is given */
    mo->erec_mode = a->expert_distribution_recorder_mode ? a->expert_distribution_recorder_mode
                    : a->enable_eplb                      ? "stat"
                                                          : NULL;
    mo->erec_buffer = a->expert_distribution_recorder_buffer_size != ARGS_INT_NONE
                          ? (int)a->expert_distribution_recorder_buffer_size : 0;
    mo->erec_metrics = a->enable_expert_distribution_metrics;
    for (size_t i = 0; a->numa_node && i < json_array_size(a->numa_node) && i < CLI_DIST_MAX_RANKS; i++)
        mo->dist.numa[mo->dist.n_numa++] = (int)json_integer_value(json_array_get(a->numa_node, i));
    /* SGLang's DefaultModelLoader keys (checked by args_validate):
     * enable_multithread_load true: num_threads (default 8, SGLang's) pack
     * each large weight; false: one thread; absent: the compute threads
     * (0 here, cli_threads at load; sglc's default: the repack / pack at
     * load is compute, unlike SGLang's multithreaded shard reading) */
    json_t *xc = a->model_loader_extra_config ? json_loads(a->model_loader_extra_config, 0, NULL) : NULL;
    json_t *ml = json_object_get(xc, "enable_multithread_load"), *nt = json_object_get(xc, "num_threads");
    mo->pack_threads = json_is_true(ml) ? (json_is_integer(nt) ? (int)json_integer_value(nt) : 8) : ml ? 1 : 0;
    json_decref(xc);
}

void cli_sched_args_from_args(sched_args *sa, const args_server *a)
{
    sched_args_init(sa);
    if (a->page_size != ARGS_INT_NONE) sa->page_size = a->page_size;
    if (a->max_total_tokens != ARGS_INT_NONE) sa->max_total_tokens = a->max_total_tokens;
    if (!args_float_is_none(a->mem_fraction_static)) sa->mem_fraction_static = a->mem_fraction_static;
    if (a->max_running_requests != ARGS_INT_NONE) sa->max_running_requests = a->max_running_requests;
    if (a->max_queued_requests != ARGS_INT_NONE) sa->max_queued_requests = a->max_queued_requests;
    if (a->max_prefill_tokens != ARGS_INT_NONE) sa->max_prefill_tokens = a->max_prefill_tokens;
    if (a->chunked_prefill_size != ARGS_INT_NONE) sa->chunked_prefill_size = a->chunked_prefill_size;
    if (a->prefill_max_requests != ARGS_INT_NONE) sa->prefill_max_requests = a->prefill_max_requests;
    if (!args_float_is_none(a->schedule_conservativeness))
        sa->schedule_conservativeness = a->schedule_conservativeness;
    int pol = a->schedule_policy ? sched_policy_parse(a->schedule_policy) : -1;
    if (pol >= 0) sa->schedule_policy = (sched_policy)pol;
    sa->disable_radix_cache = a->disable_radix_cache;
    int ev = a->radix_eviction_policy ? kv_evict_policy_parse(a->radix_eviction_policy) : -1;
    if (ev >= 0) sa->radix_eviction_policy = ev;
    sa->enable_mixed_chunk = a->enable_mixed_chunk;
    sa->enable_priority_scheduling = a->enable_priority_scheduling;
    sa->schedule_low_priority_values_first = a->schedule_low_priority_values_first;
    if (a->priority_scheduling_preemption_threshold != ARGS_INT_NONE)
        sa->priority_scheduling_preemption_threshold = a->priority_scheduling_preemption_threshold;
    sa->abort_on_priority_when_disabled = a->abort_on_priority_when_disabled;
    sa->disable_priority_preemption = a->disable_priority_preemption;
    if (a->default_priority_value != ARGS_INT_NONE && !a->enable_priority_scheduling)
        log_warn("--default-priority-value is ignored without --enable-priority-scheduling");
    if (a->default_priority_value != ARGS_INT_NONE) {
        sa->has_default_priority = true;
        sa->default_priority_value = a->default_priority_value;
    }
    sa->log_time_stats = a->enable_request_time_stats_logging;
    if (a->decode_log_interval != ARGS_INT_NONE) sa->decode_log_interval = a->decode_log_interval;
    if (a->stream_interval != ARGS_INT_NONE) sa->stream_interval = a->stream_interval;
    /* hybrid Mamba2 models (kv/mamba_state.h; checked by sched_create when the model has them) */
    if (a->max_mamba_cache_size != ARGS_INT_NONE) sa->max_mamba_cache_size = (int)a->max_mamba_cache_size;
    if (a->mamba_ssm_dtype)
        sa->mamba_ssm_dtype = !strcmp(a->mamba_ssm_dtype, "bfloat16") ? DTYPE_BF16
                              : !strcmp(a->mamba_ssm_dtype, "float16") ? DTYPE_F16 : DTYPE_F32;
    if (!args_float_is_none(a->mamba_full_memory_ratio)) sa->mamba_full_memory_ratio = a->mamba_full_memory_ratio;
    if (a->mamba_scheduler_strategy)
        sa->mamba_strategy = !strcmp(a->mamba_scheduler_strategy, "extra_buffer") ? SCHED_MAMBA_EXTRA_BUFFER
                             : !strcmp(a->mamba_scheduler_strategy, "no_buffer") ? SCHED_MAMBA_NO_BUFFER
                                                                                 : SCHED_MAMBA_AUTO;
    if (a->mamba_track_interval != ARGS_INT_NONE) sa->mamba_track_interval = (int)a->mamba_track_interval;
}
