/* args_table — every SGLang server argument, once.
 *
 * DESIGN: this X-macro list is the single source of truth for the server
 * arguments.  args.h expands it into the typed fields of `args_server`
 * (consumers read `a->context_length`), and args.c expands it into the
 * spec table that drives command-line parsing, `--config` YAML, `--help`
 * and the /get_server_info dump.  Names, groups, defaults and options come
 * from SGLang's server-argument table (shared/seed/ascend_npu_support_
 * features.txt) and python/sglang/srt/server_args.py; the field name is
 * SGLang's dataclass key (what /get_server_info prints).
 *
 * Columns of X(field, KIND, flags, default, choices, GROUP, STATUS, help):
 *   field    C field and JSON key (SGLang's key, underscores)
 *   KIND     STR, INT, FLOAT, BOOL (store-true flag), CHOICE (string from
 *            `choices`), JSON (string holding a JSON document), LIST_STR,
 *            LIST_INT, LIST_FLOAT (nargs="+", kept as a jansson array)
 *   flags    primary flag first, then aliases, space separated
 *   default  as it would be typed on the command line; NULL = None
 *            (strings NULL, ints ARGS_INT_NONE, floats NaN, lists NULL);
 *            BOOL: "false"/"true"; LIST: a JSON array text
 *   choices  "a|b|c" or NULL; also allowed on INT (checked as strings)
 *   STATUS   SUPPORTED  the engine honours it
 *            NOT_YET    rejected with "--foo is not supported by sglc yet"
 *                       (exit 2) unless given with its default value
 *            IGNORED    accepted, warned about, has no effect; the help
 *                       text says why
 *   Flipping an argument on when its feature lands is the one-word change
 *   NOT_YET -> SUPPORTED in its row.
 *
 * Groups (G(id, title)) print in this order in --help. */
#ifndef SGLC_ARGS_TABLE_H
#define SGLC_ARGS_TABLE_H

#define ARGS_GROUPS(G)                                                        \
    G(MODEL, "Model and tokenizer")                                          \
    G(HTTP, "HTTP server")                                                   \
    G(QUANT, "Quantization and data type")                                   \
    G(MEMSCHED, "Memory and scheduling")                                     \
    G(RUNTIME, "Runtime options")                                            \
    G(LOGGING, "Logging")                                                    \
    G(METRICS_EXPORT, "RequestMetricsExporter configuration")                \
    G(API, "API related")                                                    \
    G(DP, "Data parallelism")                                                \
    G(MULTINODE, "Multi-node distributed serving")                           \
    G(OVERRIDE, "Model override args")                                       \
    G(LORA, "LoRA")                                                          \
    G(KERNEL, "Kernel backends (attention, sampling, grammar, GEMM)")        \
    G(SPEC, "Speculative decoding")                                          \
    G(NGRAM, "Ngram speculative decoding")                                   \
    G(EP, "Expert parallelism")                                              \
    G(MAMBA, "Mamba cache")                                                  \
    G(HICACHE, "Hierarchical cache")                                         \
    G(LMCACHE, "LMCache")                                                    \
    G(OFFLOAD, "Offloading")                                                 \
    G(SCORING, "Args for multi-item scoring")                                \
    G(OPT, "Optimization/debug options")                                     \
    G(DYNTOK, "Dynamic batch tokenizer")                                     \
    G(DUMP, "Debug tensor dumps")                                            \
    G(PD, "PD disaggregation")                                               \
    G(EPD, "Encode prefill disaggregation")                                  \
    G(WLOADER, "Custom weight loader")                                       \
    G(PDMUX, "For PD-Multiplexing")                                          \
    G(MM, "For multi-modal")                                                 \
    G(DECRYPT, "For checkpoint decryption")                                  \
    G(HOOKS, "Forward hooks")                                                \
    G(CONFIG, "Configuration file support")                                  \
    G(OTHER, "Other")

/* clang-format off */
#define ARGS_TABLE(X) \
/* ---- Model and tokenizer ---- */ \
X(model_path, STR, "--model-path --model", NULL, NULL, MODEL, SUPPORTED, "The path of the model weights: a local folder or a Hugging Face repo id (downloaded into the hub cache).") \
X(tokenizer_path, STR, "--tokenizer-path", NULL, NULL, MODEL, SUPPORTED, "The path of the tokenizer (defaults to --model-path).") \
X(tokenizer_mode, CHOICE, "--tokenizer-mode", "auto", "auto|slow", MODEL, SUPPORTED, "Tokenizer mode; sglc has one tokenizer implementation, so both behave the same.") \
X(tokenizer_worker_num, INT, "--tokenizer-worker-num", "1", NULL, MODEL, SUPPORTED, "The worker num of the tokenizer manager. sglc: threads that parse request bodies, apply chat templates and tokenize, off the HTTP thread (N > 1: N requests at once); requests with bodies up to 64 KiB also have an express thread of their own, so small requests never wait behind large prompts.") \
X(skip_tokenizer_init, BOOL, "--skip-tokenizer-init", "false", NULL, MODEL, SUPPORTED, "Skip tokenizer init; requests must pass input_ids and get output ids back.") \
X(load_format, CHOICE, "--load-format", "auto", "auto|safetensors|dummy|gguf", MODEL, SUPPORTED, "The format of the model weights to load; 'dummy' initialises weights randomly (for profiling); 'gguf' reads a llama.cpp GGUF file (auto detects *.gguf).") \
X(model_loader_extra_config, JSON, "--model-loader-extra-config", "{}", NULL, MODEL, SUPPORTED, "Extra config for the model loader, as a JSON string: {\"enable_multithread_load\": true, \"num_threads\": 8} packs each large weight (>= 1 MiB) with num_threads threads (default 8); false: one thread; without the key: the compute threads (--threads).") \
X(trust_remote_code, BOOL, "--trust-remote-code", "false", NULL, MODEL, IGNORED, "Allow custom models defined on the Hub in their own modeling files. (no effect: sglc never runs remote code; its architectures are built in)") \
X(context_length, INT, "--context-length", NULL, NULL, MODEL, SUPPORTED, "The model's maximum context length (defaults to the value in config.json).") \
X(is_embedding, BOOL, "--is-embedding", "false", NULL, MODEL, SUPPORTED, "Whether to use a CausalLM as an embedding model (sglc serve: /encode and /v1/embeddings, last-token pooling, L2-normalized).") \
X(enable_multimodal, BOOL, "--enable-multimodal", "false", NULL, MODEL, NOT_YET, "Enable the multimodal functionality for the served model.") \
X(revision, STR, "--revision", NULL, NULL, MODEL, SUPPORTED, "The specific model version to use: a branch name, a tag name, or a commit id (hub downloads; default main).") \
X(model_impl, CHOICE, "--model-impl", "auto", "auto|sglang|transformers", MODEL, NOT_YET, "Which implementation of the model to use.") \
/* ---- HTTP server ---- */ \
X(host, STR, "--host", "127.0.0.1", NULL, HTTP, SUPPORTED, "The host of the HTTP server.") \
X(port, INT, "--port", "30000", NULL, HTTP, SUPPORTED, "The port of the HTTP server.") \
X(skip_server_warmup, BOOL, "--skip-server-warmup", "false", NULL, HTTP, SUPPORTED, "If set, skip warmup.") \
X(warmups, STR, "--warmups", NULL, NULL, HTTP, SUPPORTED, "Comma-separated custom warmup functions to run before the server starts.") \
X(nccl_port, INT, "--nccl-port", NULL, NULL, HTTP, IGNORED, "The port for NCCL distributed environment setup. (no effect on CPU: there is no NCCL on a CPU)") \
X(fastapi_root_path, STR, "--fastapi-root-path", "", NULL, HTTP, SUPPORTED, "App is behind a path-based routing proxy (root path prefix).") \
X(grpc_mode, BOOL, "--grpc-mode", "false", NULL, HTTP, NOT_YET, "Serve gRPC instead of HTTP.") \
X(ssl_keyfile, STR, "--ssl-keyfile", NULL, NULL, HTTP, SUPPORTED, "The SSL key file (PEM) for HTTPS; requires --ssl-certfile.") \
X(ssl_certfile, STR, "--ssl-certfile", NULL, NULL, HTTP, SUPPORTED, "The SSL certificate file (PEM, may hold the chain) for HTTPS; requires --ssl-keyfile.") \
X(ssl_ca_certs, STR, "--ssl-ca-certs", NULL, NULL, HTTP, SUPPORTED, "The CA certificates file (PEM) trusted for client certificates; as in SGLang (uvicorn's ssl_cert_reqs=CERT_NONE) a client certificate is asked for but not required.") \
X(ssl_keyfile_password, STR, "--ssl-keyfile-password", NULL, NULL, HTTP, SUPPORTED, "The password of an encrypted --ssl-keyfile (PKCS#8).") \
X(enable_ssl_refresh, BOOL, "--enable-ssl-refresh", "false", NULL, HTTP, NOT_YET, "Reload SSL certificates when the files change.") \
/* ---- Quantization and data type ---- */ \
X(dtype, CHOICE, "--dtype", "auto", "auto|float32|float16|bfloat16", QUANT, SUPPORTED, "Data type for model weights and activations; 'auto' uses the checkpoint's torch_dtype.") \
X(quantization, STR, "--quantization", NULL, NULL, QUANT, SUPPORTED, "The quantization method: awq / awq_marlin, gptq / gptq_marlin, compressed-tensors, fp8, w8a8_int8, w8a8_fp8 (Hugging Face checkpoints; detected from config.json's quantization_config when absent; w8a8_int8 and fp8 also quantize an unquantized checkpoint at load), gguf (a GGUF file's own block types).") \
X(quantization_param_path, STR, "--quantization-param-path", NULL, NULL, QUANT, SUPPORTED, "Path to the JSON file containing the KV cache scaling factors (kv_cache.scaling_factor per layer, SGLang's format); fp8 KV caches use them, others ignore them.") \
X(kv_cache_dtype, CHOICE, "--kv-cache-dtype", "auto", "auto|fp8_e5m2|fp8_e4m3|bf16|bfloat16|fp4_e2m1|float32|int8", QUANT, SUPPORTED, "Data type for KV cache storage; 'auto' uses the model data type. fp8_e4m3 / fp8_e5m2: one byte per value, scaled by --quantization-param-path (else 1.0), attention reads them directly. float32 and int8 are sglc's own, not SGLang's: int8 stores a byte per value and an f32 scale per token and KV head (absmax / 127, set when the token is written). fp4_e2m1 is refused (no CPU path).") \
X(enable_fp32_lm_head, BOOL, "--enable-fp32-lm-head", "false", NULL, QUANT, SUPPORTED, "Compute the LM head (logits) in fp32; sglc always does (f32 hidden states, weights widened to f32, f32 accumulation), so this only refuses the debug switch SGLC_BF16_DOT=1.") \
X(modelopt_quant, STR, "--modelopt-quant", NULL, NULL, QUANT, NOT_YET, "The ModelOpt quantization configuration.") \
X(modelopt_checkpoint_restore_path, STR, "--modelopt-checkpoint-restore-path", NULL, NULL, QUANT, NOT_YET, "Path to restore a previously saved ModelOpt quantized checkpoint.") \
X(modelopt_checkpoint_save_path, STR, "--modelopt-checkpoint-save-path", NULL, NULL, QUANT, NOT_YET, "Path to save the ModelOpt quantized checkpoint after quantization.") \
X(modelopt_export_path, STR, "--modelopt-export-path", NULL, NULL, QUANT, NOT_YET, "Path to export the quantized model in HuggingFace format.") \
X(quantize_and_serve, BOOL, "--quantize-and-serve", "false", NULL, QUANT, NOT_YET, "Quantize the model with ModelOpt and serve it immediately.") \
X(rl_quant_profile, STR, "--rl-quant-profile", NULL, NULL, QUANT, NOT_YET, "Path to the FlashRL quantization profile.") \
/* ---- Memory and scheduling ---- */ \
X(mem_fraction_static, FLOAT, "--mem-fraction-static", NULL, NULL, MEMSCHED, SUPPORTED, "The fraction of the memory used for static allocation (model weights and KV cache pool).") \
X(max_running_requests, INT, "--max-running-requests", NULL, NULL, MEMSCHED, SUPPORTED, "The maximum number of running requests.") \
X(prefill_max_requests, INT, "--prefill-max-requests", NULL, NULL, MEMSCHED, SUPPORTED, "The maximum number of requests in a prefill batch.") \
X(max_queued_requests, INT, "--max-queued-requests", NULL, NULL, MEMSCHED, SUPPORTED, "The maximum number of queued requests (excess is turned away with 503).") \
X(max_total_tokens, INT, "--max-total-tokens", NULL, NULL, MEMSCHED, SUPPORTED, "The maximum number of tokens in the memory pool (default: computed from --mem-fraction-static).") \
X(chunked_prefill_size, INT, "--chunked-prefill-size", NULL, NULL, MEMSCHED, SUPPORTED, "The maximum number of tokens in a chunk for chunked prefill; -1 disables chunked prefill.") \
X(max_prefill_tokens, INT, "--max-prefill-tokens", "16384", NULL, MEMSCHED, SUPPORTED, "The maximum number of tokens in a prefill batch.") \
X(schedule_policy, CHOICE, "--schedule-policy", "fcfs", "fcfs|lpm|dfs-weight|lof|random", MEMSCHED, SUPPORTED, "The scheduling policy of the requests (fcfs: first come first served; lpm: longest cached prefix first; dfs-weight: depth-first over the prefix tree; lof: longest output first; random).") \
X(enable_priority_scheduling, BOOL, "--enable-priority-scheduling", "false", NULL, MEMSCHED, SUPPORTED, "Enable priority scheduling.") \
X(disable_priority_preemption, BOOL, "--disable-priority-preemption", "false", NULL, MEMSCHED, SUPPORTED, "With --enable-priority-scheduling, order the queue by priority but never preempt running requests.") \
X(default_priority_value, INT, "--default-priority-value", NULL, NULL, MEMSCHED, SUPPORTED, "With --enable-priority-scheduling, the priority of requests that set none (default: the lowest priority).") \
X(schedule_low_priority_values_first, BOOL, "--schedule-low-priority-values-first", "false", NULL, MEMSCHED, SUPPORTED, "Schedule requests with lower priority values first.") \
X(priority_scheduling_preemption_threshold, INT, "--priority-scheduling-preemption-threshold", "10", NULL, MEMSCHED, SUPPORTED, "Minimum priority difference for a request to preempt a running one.") \
X(schedule_conservativeness, FLOAT, "--schedule-conservativeness", "1.0", NULL, MEMSCHED, SUPPORTED, "How conservative the schedule policy is; larger is more conservative.") \
X(page_size, INT, "--page-size", NULL, NULL, MEMSCHED, SUPPORTED, "The number of tokens in a page (default: chosen by the engine).") \
X(swa_full_tokens_ratio, FLOAT, "--swa-full-tokens-ratio", "0.8", NULL, MEMSCHED, NOT_YET, "Ratio of SWA layer KV tokens to full layer KV tokens.") \
X(disable_hybrid_swa_memory, BOOL, "--disable-hybrid-swa-memory", "false", NULL, MEMSCHED, NOT_YET, "Disable the hybrid SWA memory pool.") \
X(radix_eviction_policy, CHOICE, "--radix-eviction-policy", "lru", "lru|lfu", MEMSCHED, SUPPORTED, "The eviction policy of the radix tree.") \
X(enable_prefill_delayer, BOOL, "--enable-prefill-delayer", "false", NULL, MEMSCHED, NOT_YET, "Delay prefill batches to improve decode throughput.") \
X(prefill_delayer_max_delay_passes, INT, "--prefill-delayer-max-delay-passes", "30", NULL, MEMSCHED, NOT_YET, "Maximum forward passes a prefill may be delayed.") \
X(prefill_delayer_token_usage_low_watermark, FLOAT, "--prefill-delayer-token-usage-low-watermark", NULL, NULL, MEMSCHED, NOT_YET, "Token usage below which prefill is never delayed.") \
X(prefill_delayer_forward_passes_buckets, LIST_FLOAT, "--prefill-delayer-forward-passes-buckets", NULL, NULL, MEMSCHED, NOT_YET, "Histogram buckets for prefill delayer forward passes.") \
X(prefill_delayer_wait_seconds_buckets, LIST_FLOAT, "--prefill-delayer-wait-seconds-buckets", NULL, NULL, MEMSCHED, NOT_YET, "Histogram buckets for prefill delayer wait seconds.") \
X(abort_on_priority_when_disabled, BOOL, "--abort-on-priority-when-disabled", "false", NULL, MEMSCHED, SUPPORTED, "Abort requests that set a priority when priority scheduling is off.") \
X(enable_dynamic_chunking, BOOL, "--enable-dynamic-chunking", "false", NULL, MEMSCHED, NOT_YET, "Adapt the chunked prefill size dynamically.") \
/* ---- Runtime options ---- */ \
X(device, STR, "--device", NULL, NULL, RUNTIME, SUPPORTED, "The device to use. This build of sglc serves CPUs only: cpu (or leaving it out) is accepted, cuda, npu, xpu, hpu, mps, musa ... are refused.") \
X(tp_size, INT, "--tp-size --tensor-parallel-size", "1", NULL, RUNTIME, SUPPORTED, "The tensor parallelism size.") \
X(pp_size, INT, "--pp-size --pipeline-parallel-size", "1", NULL, RUNTIME, SUPPORTED, "The pipeline parallelism size.") \
X(attn_cp_size, INT, "--attn-cp-size --attention-context-parallel-size", "1", NULL, RUNTIME, NOT_YET, "The attention context parallelism size.") \
X(moe_dp_size, INT, "--moe-dp-size --moe-data-parallel-size", "1", NULL, RUNTIME, NOT_YET, "The MoE data parallelism size.") \
X(pp_max_micro_batch_size, INT, "--pp-max-micro-batch-size", NULL, NULL, RUNTIME, SUPPORTED, "The maximum micro batch size in pipeline parallelism: each forward's requests are split into micro-batches of at most this many, pipelined through the stages (stage p runs micro-batch i while p+1 runs i-1); unset: max(max_running_requests / pp_size, 1) as in SGLang (with sglc's default max_running_requests of 2048 or more: no split unless a batch is that large), and one micro-batch in generate / bench-one-batch. Smaller micro-batches help prefill, not decode: each re-reads the stage's weights. Outputs are the same for every value.") \
X(pp_async_batch_depth, INT, "--pp-async-batch-depth", "0", NULL, RUNTIME, IGNORED, "The async batch depth of pipeline parallelism. (no effect: sglc pipelines the micro-batches of one scheduler step and returns the step whole, so no later step is in flight)") \
X(stream_interval, INT, "--stream-interval", "1", NULL, RUNTIME, SUPPORTED, "The interval (in tokens) for streaming.") \
X(incremental_streaming_output, BOOL, "--incremental-streaming-output", "false", NULL, RUNTIME, SUPPORTED, "Stream output as disjoint segments.") \
X(enable_streaming_session, BOOL, "--enable-streaming-session", "false", NULL, RUNTIME, NOT_YET, "Enable streaming sessions.") \
X(use_ray, BOOL, "--use-ray", "false", NULL, RUNTIME, NOT_YET, "Launch the scheduler processes with Ray.") \
X(random_seed, INT, "--random-seed", NULL, NULL, RUNTIME, SUPPORTED, "The random seed (default: chosen at start-up).") \
X(constrained_json_whitespace_pattern, STR, "--constrained-json-whitespace-pattern", NULL, NULL, RUNTIME, SUPPORTED, "Regex pattern for syntactic whitespace allowed in JSON constrained output.") \
X(constrained_json_disable_any_whitespace, BOOL, "--constrained-json-disable-any-whitespace", "false", NULL, RUNTIME, SUPPORTED, "Disallow any whitespace in JSON constrained output.") \
X(watchdog_timeout, FLOAT, "--watchdog-timeout", "300", NULL, RUNTIME, SUPPORTED, "Watchdog timeout in seconds: a scheduler step (forward batch) taking longer ends the server (exit 1).") \
X(soft_watchdog_timeout, FLOAT, "--soft-watchdog-timeout", NULL, NULL, RUNTIME, SUPPORTED, "Soft watchdog timeout in seconds: log diagnostics about a step taking longer, keep running.") \
X(dist_timeout, INT, "--dist-timeout", NULL, NULL, RUNTIME, SUPPORTED, "Timeout for distributed initialization.") \
X(download_dir, STR, "--download-dir", NULL, NULL, RUNTIME, SUPPORTED, "Model download directory (the hub cache folder; default $HF_HOME/hub).") \
X(model_checksum, STR, "--model-checksum", NULL, NULL, RUNTIME, NOT_YET, "Model file integrity verification.") \
X(base_gpu_id, INT, "--base-gpu-id", "0", NULL, RUNTIME, SUPPORTED, "The base GPU ID to start allocating GPUs from. (CPU: the core group of tensor-parallel rank 0; a group is threads-per-rank cores)") \
X(gpu_id_step, INT, "--gpu-id-step", "1", NULL, RUNTIME, SUPPORTED, "The delta between consecutive GPU IDs. (CPU: between the core groups of consecutive ranks)") \
X(sleep_on_idle, BOOL, "--sleep-on-idle", "false", NULL, RUNTIME, SUPPORTED, "Reduce CPU usage when the server is idle: compute workers sleep as soon as the scheduler has no work instead of spinning a few ms first.") \
/* ---- Logging ---- */ \
X(log_level, CHOICE, "--log-level", "info", "debug|info|warning|error|critical", LOGGING, SUPPORTED, "The logging level of all loggers.") \
X(log_level_http, STR, "--log-level-http", NULL, NULL, LOGGING, SUPPORTED, "The logging level of the HTTP server (default: --log-level).") \
X(log_requests, BOOL, "--log-requests", "false", NULL, LOGGING, SUPPORTED, "Log metadata, inputs, outputs of all requests.") \
X(log_requests_level, INT, "--log-requests-level", "2", "0|1|2|3", LOGGING, SUPPORTED, "Verbosity of request logging: 0 metadata only ... 3 everything.") \
X(log_requests_format, CHOICE, "--log-requests-format", "text", "text|json", LOGGING, SUPPORTED, "Format for request logging.") \
X(crash_dump_folder, STR, "--crash-dump-folder", NULL, NULL, LOGGING, NOT_YET, "Folder to dump requests from the last minutes before a crash.") \
X(show_time_cost, BOOL, "--show-time-cost", "false", NULL, LOGGING, NOT_YET, "Show time cost of custom marks.") \
X(enable_metrics, BOOL, "--enable-metrics", "false", NULL, LOGGING, SUPPORTED, "Enable Prometheus metrics at /metrics.") \
X(enable_metrics_for_all_schedulers, BOOL, "--enable-metrics-for-all-schedulers", "false", NULL, LOGGING, NOT_YET, "Record metrics on all TP ranks.") \
X(tokenizer_metrics_custom_labels_header, STR, "--tokenizer-metrics-custom-labels-header", "x-custom-labels", NULL, LOGGING, NOT_YET, "HTTP header carrying custom metric labels.") \
X(tokenizer_metrics_allowed_custom_labels, LIST_STR, "--tokenizer-metrics-allowed-custom-labels", NULL, NULL, LOGGING, NOT_YET, "The custom labels allowed for tokenizer metrics.") \
X(extra_metric_labels, JSON, "--extra-metric-labels", NULL, NULL, LOGGING, SUPPORTED, "Extra constant labels for all /metrics series (JSON object of string values), with --enable-metrics.") \
X(bucket_time_to_first_token, LIST_FLOAT, "--bucket-time-to-first-token", NULL, NULL, LOGGING, SUPPORTED, "Buckets of the time-to-first-token histogram.") \
X(bucket_inter_token_latency, LIST_FLOAT, "--bucket-inter-token-latency", NULL, NULL, LOGGING, SUPPORTED, "Buckets of the inter-token latency histogram.") \
X(bucket_e2e_request_latency, LIST_FLOAT, "--bucket-e2e-request-latency", NULL, NULL, LOGGING, SUPPORTED, "Buckets of the end-to-end request latency histogram.") \
X(collect_tokens_histogram, BOOL, "--collect-tokens-histogram", "false", NULL, LOGGING, SUPPORTED, "Collect prompt/generation tokens histograms.") \
X(prompt_tokens_buckets, LIST_STR, "--prompt-tokens-buckets", NULL, NULL, LOGGING, SUPPORTED, "Buckets rule of the prompt tokens histogram.") \
X(generation_tokens_buckets, LIST_STR, "--generation-tokens-buckets", NULL, NULL, LOGGING, SUPPORTED, "Buckets rule of the generation tokens histogram.") \
X(gc_warning_threshold_secs, FLOAT, "--gc-warning-threshold-secs", "0.0", NULL, LOGGING, NOT_YET, "Threshold for long garbage-collection warnings (Python only).") \
X(decode_log_interval, INT, "--decode-log-interval", "40", NULL, LOGGING, SUPPORTED, "Log a 'Decode batch.' stats line every N decode steps ('Prefill batch.' lines are logged for every prefill batch).") \
X(enable_request_time_stats_logging, BOOL, "--enable-request-time-stats-logging", "false", NULL, LOGGING, SUPPORTED, "Log 'Req Time Stats(rid=..., input len=..., output len=..., type=unified): queue_duration=..., forward_duration=..., entry_time=...' when a request finishes.") \
X(kv_events_config, STR, "--kv-events-config", NULL, NULL, LOGGING, NOT_YET, "Config in JSON for KV cache event publishing.") \
X(enable_trace, BOOL, "--enable-trace", "false", NULL, LOGGING, NOT_YET, "Enable OpenTelemetry tracing.") \
X(otlp_traces_endpoint, STR, "--otlp-traces-endpoint --oltp-traces-endpoint", "localhost:4317", NULL, LOGGING, NOT_YET, "OpenTelemetry collector endpoint (host:port).") \
X(log_requests_target, LIST_STR, "--log-requests-target", NULL, NULL, LOGGING, SUPPORTED, "Where request logs go (stdout or a folder).") \
X(uvicorn_access_log_exclude_prefixes, LIST_STR, "--uvicorn-access-log-exclude-prefixes", "[]", NULL, LOGGING, SUPPORTED, "Path prefixes excluded from the HTTP access log.") \
/* ---- RequestMetricsExporter configuration ---- */ \
X(export_metrics_to_file, BOOL, "--export-metrics-to-file", "false", NULL, METRICS_EXPORT, SUPPORTED, "Export per-request performance metrics (request parameters + meta_info, one JSON line per request) to hourly files sglang-request-metrics-YYYYmmdd_HH.log.") \
X(export_metrics_to_file_dir, STR, "--export-metrics-to-file-dir", NULL, NULL, METRICS_EXPORT, SUPPORTED, "Folder for the exported request metrics files (created; required with --export-metrics-to-file).") \
/* ---- API related ---- */ \
X(api_key, STR, "--api-key", NULL, NULL, API, SUPPORTED, "API key the server requires (Authorization: Bearer).") \
X(admin_api_key, STR, "--admin-api-key", NULL, NULL, API, SUPPORTED, "API key for admin/control endpoints.") \
X(served_model_name, STR, "--served-model-name", NULL, NULL, API, SUPPORTED, "The model name returned by the v1/models endpoint (defaults to --model-path).") \
X(weight_version, STR, "--weight-version", "default", NULL, API, SUPPORTED, "Version identifier for the model weights.") \
X(chat_template, STR, "--chat-template", NULL, NULL, API, SUPPORTED, "The builtin chat template name or the path of a chat template file (default: the tokenizer's).") \
X(hf_chat_template_name, STR, "--hf-chat-template-name", NULL, NULL, API, SUPPORTED, "Name of the chat template to pick when the tokenizer has several.") \
X(completion_template, STR, "--completion-template", NULL, NULL, API, SUPPORTED, "The builtin completion template name or a file path (code completion).") \
X(file_storage_path, STR, "--file-storage-path", "sglang_storage", NULL, API, NOT_YET, "The path of the file storage in the backend.") \
X(enable_cache_report, BOOL, "--enable-cache-report", "false", NULL, API, SUPPORTED, "Return the number of cached prompt tokens in usage.prompt_tokens_details.") \
X(reasoning_parser, CHOICE, "--reasoning-parser", NULL, "deepseek-r1|deepseek-v3|glm45|gpt-oss|kimi|qwen3|qwen3-thinking|step3", API, SUPPORTED, "The reasoning parser of the model: reasoning_content in chat answers, /separate_reasoning.") \
X(tool_call_parser, CHOICE, "--tool-call-parser", NULL, "llama3|pythonic|qwen|qwen25|qwen3_coder|mistral|hermes|deepseekv3|deepseekv31|gpt-oss|kimi_k2|glm45", API, SUPPORTED, "The tool-call parser of the model: tool_calls in chat answers, /parse_function_call.") \
X(sampling_defaults, CHOICE, "--sampling-defaults", "model", "openai|model", API, SUPPORTED, "Where default sampling parameters come from: generation_config.json (model) or OpenAI's defaults.") \
/* ---- Data parallelism ---- */ \
X(dp_size, INT, "--dp-size --data-parallel-size", "1", NULL, DP, SUPPORTED, "The data parallelism size: replicas of the scheduler in one process over one copy of the weights, the threads split between them (serve, generate --requests, bench-offline). With --tp-size or --pp-size > 1: each replica is its own group of ranks, rank r of every replica in one process over one copy of its shard (a thread per replica), --threads split over all dp x tp ranks; under mpirun use -np tp x pp.") \
X(load_balance_method, CHOICE, "--load-balance-method", "auto", "auto|round_robin|follow_bootstrap_room|total_requests|total_tokens|cache_aware", DP, SUPPORTED, "The load balancing strategy for data parallelism (auto = round_robin; cache_aware, sglc's: the replica holding the longest cached prefix).") \
/* ---- Multi-node distributed serving ---- */ \
X(dist_init_addr, STR, "--dist-init-addr --nccl-init-addr", NULL, NULL, MULTINODE, SUPPORTED, "The host:port of node 0 for joining the nodes of --nnodes > 1 (the same command on every node, --node-rank 0..nnodes-1): node 0 listens there, every rank joins within --dist-timeout, then the ranks talk over gloo's TCP collectives (every rank, also within a node). Ignored with --nnodes 1 (shared memory on one machine).") \
X(nnodes, INT, "--nnodes", "1", NULL, MULTINODE, SUPPORTED, "The number of nodes.") \
X(node_rank, INT, "--node-rank", "0", NULL, MULTINODE, SUPPORTED, "The node rank.") \
/* ---- Model override args ---- */ \
X(json_model_override_args, JSON, "--json-model-override-args", "{}", NULL, OVERRIDE, SUPPORTED, "A JSON object overriding fields of the model's config.json.") \
X(preferred_sampling_params, JSON, "--preferred-sampling-params", NULL, NULL, OVERRIDE, SUPPORTED, "JSON object of default sampling parameters.") \
/* ---- LoRA ---- */ \
X(enable_lora, BOOL, "--enable-lora", "false", NULL, LORA, SUPPORTED, "Enable LoRA support (also on with --lora-paths).") \
X(enable_lora_overlap_loading, BOOL, "--enable-lora-overlap-loading", "false", NULL, LORA, SUPPORTED, "Overlap LoRA weight loading with compute: always so in sglc (adapters load on the HTTP worker of /load_lora_adapter while the scheduler keeps running), with or without this flag.") \
X(max_lora_rank, INT, "--max-lora-rank", NULL, NULL, LORA, SUPPORTED, "The maximum rank of LoRA adapters.") \
X(lora_target_modules, LIST_STR, "--lora-target-modules", NULL, NULL, LORA, SUPPORTED, "The modules adapters may target (q_proj k_proj v_proj o_proj gate_proj up_proj down_proj qkv_proj gate_up_proj lm_head, or 'all'); unset: any supported module. A limit on CPU (nothing to preallocate).") \
X(lora_paths, LIST_STR, "--lora-paths", NULL, NULL, LORA, SUPPORTED, "LoRA adapters (PEFT folders) to load at start-up: PATH, NAME=PATH, or JSON {\"lora_name\":str,\"lora_path\":str,\"pinned\":bool}.") \
X(max_loras_per_batch, INT, "--max-loras-per-batch", "8", NULL, LORA, SUPPORTED, "Maximum number of distinct adapters in a running batch (the base model counts as one, as SGLang).") \
X(max_loaded_loras, INT, "--max-loaded-loras", NULL, NULL, LORA, SUPPORTED, "Maximum number of adapters loaded at once; a load beyond it evicts an unpinned adapter (--lora-eviction-policy). Must be >= --max-loras-per-batch.") \
X(lora_eviction_policy, CHOICE, "--lora-eviction-policy", "lru", "lru|fifo", LORA, SUPPORTED, "Which unpinned adapter a load beyond --max-loaded-loras evicts: lru (least recently used) or fifo (oldest load).") \
X(lora_backend, CHOICE, "--lora-backend", "csgmv", "triton|csgmv|ascend|torch_native", LORA, SUPPORTED, "Accepted for compatibility: sglc runs one CPU kernel (grouped shrink/expand, AVX2 or scalar) whatever the name.") \
X(max_lora_chunk_size, INT, "--max-lora-chunk-size", "16", "16|32|64|128", LORA, IGNORED, "Chunk size of the chunked SGMV GPU backend (no effect on CPU: the adapter kernel groups rows by adapter, no chunking).") \
/* ---- Kernel backends ---- */ \
X(attention_backend, CHOICE, "--attention-backend", NULL, "triton|torch_native|flex_attention|dsa|nsa|dsv4|compressed|cutlass_mla|fa3|fa4|flashinfer|flashmla|trtllm_mla|cutedsl_mla|tokenspeed_mla|trtllm_mha|dual_chunk_flash_attn|hpc_ops|minicpm_flashattn|minicpm_flashinfer|aiter|wave|intel_amx|ascend|intel_xpu", KERNEL, IGNORED, "The attention kernel backend. (no effect on CPU: sglc has one attention implementation, its own SIMD kernels for this CPU)") \
X(prefill_attention_backend, CHOICE, "--prefill-attention-backend", NULL, "triton|torch_native|flex_attention|dsa|nsa|dsv4|compressed|cutlass_mla|fa3|fa4|flashinfer|flashmla|trtllm_mla|cutedsl_mla|tokenspeed_mla|trtllm_mha|dual_chunk_flash_attn|hpc_ops|minicpm_flashattn|minicpm_flashinfer|aiter|wave|intel_amx|ascend|intel_xpu", KERNEL, IGNORED, "The attention backend for prefill. (no effect on CPU: sglc has one attention implementation, its own SIMD kernels for this CPU)") \
X(decode_attention_backend, CHOICE, "--decode-attention-backend", NULL, "triton|torch_native|flex_attention|dsa|nsa|dsv4|compressed|cutlass_mla|fa3|fa4|flashinfer|flashmla|trtllm_mla|cutedsl_mla|tokenspeed_mla|trtllm_mha|dual_chunk_flash_attn|hpc_ops|minicpm_flashattn|minicpm_flashinfer|aiter|wave|intel_amx|ascend|intel_xpu", KERNEL, IGNORED, "The attention backend for decode. (no effect on CPU: sglc has one attention implementation, its own SIMD kernels for this CPU)") \
X(sampling_backend, CHOICE, "--sampling-backend", NULL, "flashinfer|pytorch|ascend", KERNEL, IGNORED, "The sampling kernel backend. (no effect on CPU: sglc samples with its own code)") \
X(grammar_backend, CHOICE, "--grammar-backend", "xgrammar", "xgrammar|outlines|llguidance|none", KERNEL, SUPPORTED, "The grammar backend for constrained decoding. xgrammar, outlines and llguidance all select sglc's own grammar engine (the names are kept so SGLang launch commands work); none turns constrained decoding off (json_schema / regex / ebnf / structural_tag requests get a 400).") \
X(mm_attention_backend, STR, "--mm-attention-backend", NULL, NULL, KERNEL, IGNORED, "The attention backend of multimodal encoders. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(nsa_prefill_backend, STR, "--nsa-prefill-backend --dsa-prefill-backend", "flashmla_sparse", NULL, KERNEL, IGNORED, "The NSA prefill backend. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(nsa_decode_backend, STR, "--nsa-decode-backend --dsa-decode-backend", "fa3", NULL, KERNEL, IGNORED, "The NSA decode backend. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(fp8_gemm_runner_backend, STR, "--fp8-gemm-backend", "auto", NULL, KERNEL, IGNORED, "The FP8 GEMM backend. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(fp4_gemm_runner_backend, STR, "--fp4-gemm-backend", "auto", NULL, KERNEL, IGNORED, "The FP4 GEMM backend. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(mamba_backend, STR, "--mamba-backend", "triton", NULL, KERNEL, IGNORED, "The kernel backend of mamba layers. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(linear_attn_backend, STR, "--linear-attn-backend", "triton", NULL, KERNEL, IGNORED, "The kernel backend of linear attention layers. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(linear_attn_decode_backend, STR, "--linear-attn-decode-backend", NULL, NULL, KERNEL, IGNORED, "The linear attention backend for decode. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(linear_attn_prefill_backend, STR, "--linear-attn-prefill-backend", NULL, NULL, KERNEL, IGNORED, "The linear attention backend for prefill. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(disable_flashinfer_autotune, BOOL, "--disable-flashinfer-autotune", "false", NULL, KERNEL, IGNORED, "Disable FlashInfer autotuning. (no effect on CPU: there are no FlashInfer kernels on a CPU)") \
/* ---- Speculative decoding ---- */ \
X(speculative_algorithm, CHOICE, "--speculative-algorithm", NULL, "EAGLE|EAGLE3|NEXTN|STANDALONE|NGRAM", SPEC, SUPPORTED, "The speculative decoding algorithm.") \
X(speculative_draft_model_path, STR, "--speculative-draft-model-path --speculative-draft-model", NULL, NULL, SPEC, SUPPORTED, "The path of the draft model weights.") \
X(speculative_draft_model_revision, STR, "--speculative-draft-model-revision", NULL, NULL, SPEC, SUPPORTED, "The draft model version: branch, tag or commit id (resolved through the hub cache like --revision).") \
X(speculative_draft_load_format, CHOICE, "--speculative-draft-load-format", "auto", "auto|dummy", SPEC, SUPPORTED, "The format of the draft model weights.") \
X(speculative_num_steps, INT, "--speculative-num-steps", NULL, NULL, SPEC, SUPPORTED, "The number of steps sampled from the draft model.") \
X(speculative_eagle_topk, INT, "--speculative-eagle-topk", NULL, NULL, SPEC, SUPPORTED, "The number of tokens sampled from the draft model per step. (sglc: 1 = a chain; 2-16 = an EAGLE draft tree: each of --speculative-num-steps steps expands the topk best nodes, the best --speculative-num-draft-tokens - 1 are verified in one tree-masked forward; none of the three given = SGLang's choice by the target, LlamaForCausalLM 5 / 4 / 8, others 3 / 1 / 4)") \
X(speculative_num_draft_tokens, INT, "--speculative-num-draft-tokens", NULL, NULL, SPEC, SUPPORTED, "The number of tokens verified per step, the sampled one included (NGRAM default: the max match window).") \
X(speculative_accept_threshold_single, FLOAT, "--speculative-accept-threshold-single", "1.0", NULL, SPEC, SUPPORTED, "Accept a draft token if its target probability is at least this, in (0, 1]. (sglc, as SGLang: only for sampled requests, temperature > 0; greedy ones are unchanged. At 1.0 with -acc 1.0 drafts are verified exactly and the output is identical with or without drafts; below 1 more drafts are accepted, trading the exactness of the output distribution for longer accepts)") \
X(speculative_accept_threshold_acc, FLOAT, "--speculative-accept-threshold-acc", "1.0", NULL, SPEC, SUPPORTED, "The accept probability of a draft token is raised from its target probability p to min(1, p / threshold_acc), in (0, 1]. (sglc, as SGLang: only for sampled requests, temperature > 0; below 1 it trades the exactness of the output distribution for longer accepts)") \
X(speculative_token_map, STR, "--speculative-token-map", NULL, NULL, SPEC, SUPPORTED, "The path of the draft model's small vocab table: a torch.save'd 1-D int64 / int32 tensor (or list) of hot target token ids; EAGLE / NEXTN drafts are restricted to them, the draft's LM head cut to their rows (sglc: a local file, read without Python). Ignored with a warning for EAGLE3 (its heads carry d2t), as SGLang; refused with STANDALONE and NGRAM.") \
X(speculative_attention_mode, CHOICE, "--speculative-attention-mode", "prefill", "prefill|decode", SPEC, IGNORED, "Attention backend mode for speculative verification. (no effect on CPU: the verify forward runs the one CPU attention kernel, causal over the drafted rows)") \
X(speculative_moe_runner_backend, STR, "--speculative-moe-runner-backend", NULL, NULL, SPEC, IGNORED, "MoE runner backend for the draft model. (no effect on CPU: the draft model runs sglc's own MoE kernels for this CPU; the backend name only picks GPU kernels)") \
X(speculative_moe_a2a_backend, STR, "--speculative-moe-a2a-backend", NULL, NULL, SPEC, IGNORED, "MoE all-to-all backend for the draft model. (no effect on CPU: the draft model runs in one process with all its experts, no all-to-all; the backend name only picks GPU communication kernels)") \
X(speculative_draft_attention_backend, STR, "--speculative-draft-attention-backend", NULL, NULL, SPEC, IGNORED, "Attention backend for the draft model. (no effect on CPU: the draft model runs the one CPU attention kernel)") \
X(speculative_draft_model_quantization, STR, "--speculative-draft-model-quantization", NULL, NULL, SPEC, SUPPORTED, "Quantization method of the draft model.") \
X(enable_multi_layer_eagle, BOOL, "--enable-multi-layer-eagle", "false", NULL, SPEC, NOT_YET, "Enable multi-layer EAGLE drafts.") \
/* ---- Ngram speculative decoding ---- */ \
X(speculative_ngram_min_match_window_size, INT, "--speculative-ngram-min-match-window-size", "1", NULL, NGRAM, SUPPORTED, "Minimum window size for pattern matching.") \
X(speculative_ngram_max_match_window_size, INT, "--speculative-ngram-max-match-window-size", "12", NULL, NGRAM, SUPPORTED, "Maximum window size for pattern matching.") \
X(speculative_ngram_min_bfs_breadth, INT, "--speculative-ngram-min-bfs-breadth", "1", NULL, NGRAM, SUPPORTED, "Minimum BFS breadth.") \
X(speculative_ngram_max_bfs_breadth, INT, "--speculative-ngram-max-bfs-breadth", "10", NULL, NGRAM, SUPPORTED, "Maximum BFS breadth.") \
X(speculative_ngram_match_type, CHOICE, "--speculative-ngram-match-type", "BFS", "BFS|PROB", NGRAM, SUPPORTED, "BFS uses recency-based expansion; PROB uses frequency-based expansion.") \
X(speculative_ngram_max_trie_depth, INT, "--speculative-ngram-max-trie-depth --speculative-ngram-branch-length", "18", NULL, NGRAM, SUPPORTED, "Maximum depth of the n-gram trie.") \
X(speculative_ngram_capacity, INT, "--speculative-ngram-capacity", "10000000", NULL, NGRAM, SUPPORTED, "Cache capacity of the n-gram trie.") \
/* ---- Expert parallelism ---- */ \
X(ep_size, INT, "--ep-size --expert-parallel-size --ep", "1", NULL, EP, SUPPORTED, "The expert parallelism size.") \
X(moe_a2a_backend, CHOICE, "--moe-a2a-backend", "none", "none|deepep|ascend_fuseep", EP, SUPPORTED, "The backend for MoE all-to-all communication (sglc: none, the all-reduce combines the experts' outputs; deepep / ascend_fuseep are GPU/NPU libraries and refused).") \
X(moe_runner_backend, CHOICE, "--moe-runner-backend", "auto", "auto|deep_gemm|triton|triton_kernel|flashinfer_trtllm|experimental_sgl_trtllm|flashinfer_trtllm_routed|flashinfer_cutlass|flashinfer_mxfp4|flashinfer_cutedsl|cutlass|aiter|marlin|humming|experimental_sgl_marlin|hpc_ops|megamoe", EP, IGNORED, "The runner backend for MoE. (no effect on CPU: sglc runs its own kernels for this CPU; the backend name only picks GPU kernels)") \
X(flashinfer_mxfp4_moe_precision, CHOICE, "--flashinfer-mxfp4-moe-precision", "default", "default|bf16", EP, IGNORED, "Computation precision of the FlashInfer MXFP4 MoE. (no effect on CPU: there are no FlashInfer kernels on a CPU)") \
X(enable_flashinfer_allreduce_fusion, BOOL, "--enable-flashinfer-allreduce-fusion", "false", NULL, EP, IGNORED, "Fuse allreduce with residual RMSNorm. (no effect on CPU: there are no FlashInfer kernels on a CPU)") \
X(enable_aiter_allreduce_fusion, BOOL, "--enable-aiter-allreduce-fusion", "false", NULL, EP, IGNORED, "Fuse allreduce with residual RMSNorm on AMD (aiter). (no effect on CPU: aiter is an AMD GPU kernel library)") \
X(deepep_mode, CHOICE, "--deepep-mode", "auto", "normal|low_latency|auto", EP, NOT_YET, "The DeepEP mode.") \
X(deepep_config, STR, "--deepep-config", NULL, NULL, EP, NOT_YET, "Tuned DeepEP config (JSON string or file).") \
X(ep_num_redundant_experts, INT, "--ep-num-redundant-experts", "0", NULL, EP, SUPPORTED, "Allocate this number of redundant experts.") \
X(ep_dispatch_algorithm, CHOICE, "--ep-dispatch-algorithm", NULL, "static|dynamic|fake", EP, SUPPORTED, "The algorithm choosing ranks for redundant experts (sglc: static, a fixed split of each expert's rows between its copies; dynamic / fake refused).") \
X(init_expert_location, STR, "--init-expert-location", "trivial", NULL, EP, SUPPORTED, "Initial location of EP experts: trivial, or a JSON file / text with physical_to_logical_map (layers x physical experts) or logical_count (layers x experts).") \
X(enable_eplb, BOOL, "--enable-eplb", "false", NULL, EP, SUPPORTED, "Enable the EPLB algorithm.") \
X(eplb_algorithm, CHOICE, "--eplb-algorithm", "auto", "auto|deepseek", EP, SUPPORTED, "The EPLB algorithm.") \
X(eplb_rebalance_num_iterations, INT, "--eplb-rebalance-num-iterations", "1000", NULL, EP, SUPPORTED, "Forward passes between automatic EPLB rebalances.") \
X(eplb_rebalance_layers_per_chunk, INT, "--eplb-rebalance-layers-per-chunk", NULL, NULL, EP, SUPPORTED, "Layers to rebalance per forward pass.") \
X(eplb_min_rebalancing_utilization_threshold, FLOAT, "--eplb-min-rebalancing-utilization-threshold", "1.0", NULL, EP, SUPPORTED, "Rebalance only when the average balancedness (mean / max rank load per MoE layer) is at most this.") \
X(expert_distribution_recorder_mode, CHOICE, "--expert-distribution-recorder-mode", NULL, "stat|stat_approx|per_pass|per_token", EP, SUPPORTED, "Mode of the expert distribution recorder.") \
X(expert_distribution_recorder_buffer_size, INT, "--expert-distribution-recorder-buffer-size", NULL, NULL, EP, SUPPORTED, "Circular buffer size of the expert distribution recorder.") \
X(enable_expert_distribution_metrics, BOOL, "--enable-expert-distribution-metrics", "false", NULL, EP, SUPPORTED, "Enable logging metrics for expert balancedness.") \
X(moe_dense_tp_size, INT, "--moe-dense-tp-size", NULL, NULL, EP, NOT_YET, "TP size for MoE dense MLP layers.") \
X(elastic_ep_backend, CHOICE, "--elastic-ep-backend", NULL, "none|mooncake", EP, NOT_YET, "Collective communication backend for elastic EP.") \
X(enable_elastic_expert_backup, BOOL, "--enable-elastic-expert-backup", "false", NULL, EP, NOT_YET, "Keep expert weight backups for elastic EP.") \
X(mooncake_ib_device, STR, "--mooncake-ib-device", NULL, NULL, EP, NOT_YET, "InfiniBand devices for the Mooncake backend.") \
/* ---- Mamba cache ---- */ \
X(max_mamba_cache_size, INT, "--max-mamba-cache-size", NULL, NULL, MAMBA, SUPPORTED, "The maximum size of the mamba cache.") \
X(mamba_ssm_dtype, CHOICE, "--mamba-ssm-dtype", "float32", "float32|bfloat16|float16", MAMBA, SUPPORTED, "The data type of the SSM states in the mamba cache.") \
X(mamba_full_memory_ratio, FLOAT, "--mamba-full-memory-ratio", "0.9", NULL, MAMBA, SUPPORTED, "Ratio of mamba state memory to full KV cache memory.") \
X(mamba_scheduler_strategy, CHOICE, "--mamba-scheduler-strategy", "auto", "auto|no_buffer|extra_buffer", MAMBA, SUPPORTED, "The mamba scheduler strategy. (extra_buffer: the radix cache keeps Mamba state checkpoints every --mamba-track-interval tokens and a request resumes the deepest one its prompt matches; no_buffer: the radix cache is off for Mamba models; auto = extra_buffer unless --disable-radix-cache or the interval is not a multiple of --page-size; unlike SGLang, whose auto is no_buffer, because sglc's no_buffer caches nothing)") \
X(mamba_track_interval, INT, "--mamba-track-interval", "256", NULL, MAMBA, SUPPORTED, "Interval (tokens) to track the mamba state during decode. (extra_buffer: a state checkpoint at every multiple of it, in prefill and decode; a multiple of --page-size; a multiple of SGLC_MAMBA_SSD_CHUNK, 64, keeps the chunked scan's chunks unchanged)") \
/* ---- Hierarchical cache ---- */ \
X(enable_hierarchical_cache, BOOL, "--enable-hierarchical-cache", "false", NULL, HICACHE, NOT_YET, "Enable the hierarchical (host memory) KV cache.") \
X(hicache_ratio, FLOAT, "--hicache-ratio", "2.0", NULL, HICACHE, NOT_YET, "Ratio of the host KV cache pool size to the device pool size.") \
X(hicache_size, INT, "--hicache-size", "0", NULL, HICACHE, NOT_YET, "Size of the host KV cache pool in GB (overrides --hicache-ratio).") \
X(hicache_write_policy, CHOICE, "--hicache-write-policy", "write_through", "write_back|write_through|write_through_selective", HICACHE, NOT_YET, "The write policy of the hierarchical cache.") \
X(hicache_io_backend, STR, "--hicache-io-backend", "kernel", NULL, HICACHE, NOT_YET, "The IO backend for KV cache transfer between tiers.") \
X(hicache_mem_layout, STR, "--hicache-mem-layout", "layer_first", NULL, HICACHE, NOT_YET, "The layout of the host memory pool.") \
X(hicache_storage_backend, STR, "--hicache-storage-backend", NULL, NULL, HICACHE, NOT_YET, "The storage backend of the hierarchical cache.") \
X(hicache_storage_prefetch_policy, CHOICE, "--hicache-storage-prefetch-policy", "best_effort", "best_effort|wait_complete|timeout", HICACHE, NOT_YET, "Control when prefetching from storage stops.") \
X(hicache_storage_backend_extra_config, STR, "--hicache-storage-backend-extra-config", NULL, NULL, HICACHE, NOT_YET, "Extra config of the storage backend (JSON).") \
X(disable_hicache_numa_detect, BOOL, "--disable-hicache-numa-detect", "false", NULL, HICACHE, NOT_YET, "Disable NUMA detection for the host KV cache.") \
X(hierarchical_sparse_attention_extra_config, STR, "--hierarchical-sparse-attention-extra-config", NULL, NULL, HICACHE, NOT_YET, "Extra config of hierarchical sparse attention (JSON).") \
/* ---- LMCache ---- */ \
X(enable_lmcache, BOOL, "--enable-lmcache", "false", NULL, LMCACHE, NOT_YET, "Use LMCache as an alternative hierarchical cache.") \
/* ---- Offloading ---- */ \
X(cpu_offload_gb, INT, "--cpu-offload-gb", "0", NULL, OFFLOAD, NOT_YET, "How many GB of weights to offload to CPU memory.") \
X(offload_group_size, INT, "--offload-group-size", "-1", NULL, OFFLOAD, NOT_YET, "Number of layers per offload group.") \
X(offload_num_in_group, INT, "--offload-num-in-group", "1", NULL, OFFLOAD, NOT_YET, "Number of layers offloaded within a group.") \
X(offload_prefetch_step, INT, "--offload-prefetch-step", "1", NULL, OFFLOAD, NOT_YET, "Steps to prefetch in offloading.") \
X(offload_mode, CHOICE, "--offload-mode", "cpu", "cpu|meta|sharded_gpu", OFFLOAD, NOT_YET, "Mode of offloading.") \
/* ---- Args for multi-item scoring ---- */ \
X(multi_item_scoring_delimiter, INT, "--multi-item-scoring-delimiter", NULL, NULL, SCORING, SUPPORTED, "Delimiter token id for multi-item scoring: /v1/score scores many items in one pass (query<d>item1<d>...<d>itemN<d>, each item attending to the query and itself); turns the radix cache and chunked prefill off.") \
/* ---- Optimization/debug options ---- */ \
X(disable_radix_cache, BOOL, "--disable-radix-cache", "false", NULL, OPT, SUPPORTED, "Disable the radix prefix cache.") \
X(cuda_graph_max_bs, INT, "--cuda-graph-max-bs", NULL, NULL, OPT, IGNORED, "The maximum batch size for CUDA graphs. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(cuda_graph_bs, LIST_INT, "--cuda-graph-bs", NULL, NULL, OPT, IGNORED, "The batch sizes to capture CUDA graphs for. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(disable_cuda_graph, BOOL, "--disable-cuda-graph", "false", NULL, OPT, IGNORED, "Disable CUDA graph. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(disable_cuda_graph_padding, BOOL, "--disable-cuda-graph-padding", "false", NULL, OPT, IGNORED, "Disable CUDA graph when padding is needed. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(enable_profile_cuda_graph, BOOL, "--enable-profile-cuda-graph", "false", NULL, OPT, IGNORED, "Profile CUDA graph capture. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(enable_cudagraph_gc, BOOL, "--enable-cudagraph-gc", "false", NULL, OPT, IGNORED, "Enable garbage collection during CUDA graph capture. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(enable_nccl_nvls, BOOL, "--enable-nccl-nvls", "false", NULL, OPT, IGNORED, "Enable NCCL NVLS for prefill-heavy requests. (no effect on CPU: there is no NCCL on a CPU (NVLS is an NVLink switch feature))") \
X(enable_symm_mem, BOOL, "--enable-symm-mem", "false", NULL, OPT, IGNORED, "Enable NCCL symmetric memory. (no effect on CPU: there is no NCCL on a CPU)") \
X(disable_flashinfer_cutlass_moe_fp4_allgather, BOOL, "--disable-flashinfer-cutlass-moe-fp4-allgather", "false", NULL, OPT, IGNORED, "Disable quantize-before-all-gather for FlashInfer CUTLASS MoE. (no effect on CPU: there are no FlashInfer kernels on a CPU)") \
X(enable_tokenizer_batch_encode, BOOL, "--enable-tokenizer-batch-encode", "false", NULL, OPT, SUPPORTED, "Enable batch tokenization for improved performance when processing multiple text inputs. Do not use with image inputs, pre-tokenized input_ids, or input_embeds. sglc: the texts of a batch request with n = 1 are tokenized in one batch call, spread over the idle tokenizer workers; a text batch with image data is refused (400).") \
X(disable_tokenizer_batch_decode, BOOL, "--disable-tokenizer-batch-decode", "false", NULL, OPT, NOT_YET, "Disable batch decoding of tokens.") \
X(disable_custom_all_reduce, BOOL, "--disable-custom-all-reduce", "false", NULL, OPT, IGNORED, "Disable the custom all-reduce kernel (fall back to NCCL). (no effect on CPU: there is no NCCL on a CPU; sglc's collectives have one implementation)") \
X(enable_mscclpp, BOOL, "--enable-mscclpp", "false", NULL, OPT, IGNORED, "Enable MSCCL++ for small-message all-reduce. (no effect on CPU: there is no NCCL on a CPU; sglc's collectives have one implementation)") \
X(enable_torch_symm_mem, BOOL, "--enable-torch-symm-mem", "false", NULL, OPT, IGNORED, "Enable torch symmetric memory all-reduce. (no effect on CPU: there is no NCCL on a CPU; sglc's collectives have one implementation)") \
X(disable_overlap_schedule, BOOL, "--disable-overlap-schedule", "false", NULL, OPT, SUPPORTED, "Disable the overlap scheduler (CPU scheduling overlapped with the forward pass). sglc has no overlap scheduler: each step is scheduled, then run, so this is what it always does.") \
X(enable_mixed_chunk, BOOL, "--enable-mixed-chunk", "false", NULL, OPT, SUPPORTED, "Mix prefill and decode in a batch when using chunked prefill.") \
X(enable_dp_attention, BOOL, "--enable-dp-attention", "false", NULL, OPT, NOT_YET, "Data parallelism for attention and tensor parallelism for FFN.") \
X(enable_dp_lm_head, BOOL, "--enable-dp-lm-head", "false", NULL, OPT, NOT_YET, "Vocabulary parallel across the attention TP group.") \
X(enable_two_batch_overlap, BOOL, "--enable-two-batch-overlap", "false", NULL, OPT, NOT_YET, "Enable two micro-batches to overlap.") \
X(enable_single_batch_overlap, BOOL, "--enable-single-batch-overlap", "false", NULL, OPT, NOT_YET, "Overlap computation and communication within one micro-batch.") \
X(tbo_token_distribution_threshold, FLOAT, "--tbo-token-distribution-threshold", "0.48", NULL, OPT, NOT_YET, "Token distribution threshold between two batches in two-batch overlap.") \
X(enable_torch_compile, BOOL, "--enable-torch-compile", "false", NULL, OPT, IGNORED, "Optimize the model with torch.compile. (no effect on CPU: sglc is compiled C, there is no torch.compile; its kernels are built for this CPU ahead of time)") \
X(enable_torch_compile_debug_mode, BOOL, "--enable-torch-compile-debug-mode", "false", NULL, OPT, IGNORED, "Enable debug mode for torch compile. (no effect on CPU: sglc is compiled C, there is no torch.compile; its kernels are built for this CPU ahead of time)") \
X(enforce_piecewise_cuda_graph, BOOL, "--enforce-piecewise-cuda-graph", "false", NULL, OPT, IGNORED, "Enforce piecewise CUDA graph. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(piecewise_cuda_graph_tokens, JSON, "--piecewise-cuda-graph-tokens", NULL, NULL, OPT, IGNORED, "Token counts for piecewise CUDA graph capture (JSON list). (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(piecewise_cuda_graph_compiler, CHOICE, "--piecewise-cuda-graph-compiler", "eager", "eager|inductor", OPT, IGNORED, "Compiler for piecewise CUDA graph. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(torch_compile_max_bs, INT, "--torch-compile-max-bs", "32", NULL, OPT, IGNORED, "The maximum batch size when using torch compile. (no effect on CPU: sglc is compiled C, there is no torch.compile; its kernels are built for this CPU ahead of time)") \
X(piecewise_cuda_graph_max_tokens, INT, "--piecewise-cuda-graph-max-tokens", NULL, NULL, OPT, IGNORED, "The maximum number of tokens for piecewise CUDA graph. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(torchao_config, STR, "--torchao-config", "", NULL, OPT, NOT_YET, "Optimize the model with torchao.") \
X(enable_nan_detection, BOOL, "--enable-nan-detection", "false", NULL, OPT, NOT_YET, "Enable NaN detection for debugging.") \
X(enable_p2p_check, BOOL, "--enable-p2p-check", "false", NULL, OPT, IGNORED, "Enable P2P check for GPU access. (no effect on CPU: there is no peer-to-peer GPU access to check)") \
X(triton_attention_reduce_in_fp32, BOOL, "--triton-attention-reduce-in-fp32", "false", NULL, OPT, IGNORED, "Cast the intermediate attention results to fp32. (no effect on CPU: there are no Triton kernels on a CPU; sglc's attention accumulates in f32 anyway)") \
X(triton_attention_num_kv_splits, INT, "--triton-attention-num-kv-splits", "8", NULL, OPT, IGNORED, "The number of KV splits in flash decoding Triton kernel. (no effect on CPU: there are no Triton kernels on a CPU)") \
X(triton_attention_split_tile_size, INT, "--triton-attention-split-tile-size", NULL, NULL, OPT, IGNORED, "The size of split KV tiles in flash decoding Triton kernel. (no effect on CPU: there are no Triton kernels on a CPU)") \
X(delete_ckpt_after_loading, BOOL, "--delete-ckpt-after-loading", "false", NULL, OPT, NOT_YET, "Delete the model checkpoint after loading the model.") \
X(enable_memory_saver, BOOL, "--enable-memory-saver", "false", NULL, OPT, NOT_YET, "Allow saving memory using release_memory_occupation and resume_memory_occupation.") \
X(enable_weights_cpu_backup, BOOL, "--enable-weights-cpu-backup", "false", NULL, OPT, NOT_YET, "Save model weights to CPU memory during release_weights_occupation.") \
X(enable_draft_weights_cpu_backup, BOOL, "--enable-draft-weights-cpu-backup", "false", NULL, OPT, NOT_YET, "Save draft model weights to CPU memory during release.") \
X(allow_auto_truncate, BOOL, "--allow-auto-truncate", "false", NULL, OPT, SUPPORTED, "Truncate requests that exceed the maximum input length instead of returning an error.") \
X(enable_custom_logit_processor, BOOL, "--enable-custom-logit-processor", "false", NULL, OPT, NOT_YET, "Enable users to pass custom logit processors (disabled by default for security).") \
X(flashinfer_mla_disable_ragged, BOOL, "--flashinfer-mla-disable-ragged", "false", NULL, OPT, IGNORED, "Do not use ragged prefill wrapper with FlashInfer MLA. (no effect on CPU: there are no FlashInfer kernels on a CPU)") \
X(disable_shared_experts_fusion, BOOL, "--disable-shared-experts-fusion", "false", NULL, OPT, IGNORED, "Disable shared experts fusion optimization for DeepSeek models. (no effect on CPU: the fusion is a GPU MoE-kernel layout; sglc computes shared experts apart, the unfused way)") \
X(disable_chunked_prefix_cache, BOOL, "--disable-chunked-prefix-cache", "false", NULL, OPT, IGNORED, "Disable chunked prefix cache for DeepSeek models. (no effect on CPU: a prefill path of the GPU MLA attention backends; sglc has one MLA attention)") \
X(disable_fast_image_processor, BOOL, "--disable-fast-image-processor", "false", NULL, OPT, NOT_YET, "Use the base image processor instead of the fast one.") \
X(keep_mm_feature_on_device, BOOL, "--keep-mm-feature-on-device", "false", NULL, OPT, IGNORED, "Keep multimodal feature tensors on device after processing. (no effect on CPU: there is no device memory apart from host memory)") \
X(enable_return_hidden_states, BOOL, "--enable-return-hidden-states", "false", NULL, OPT, NOT_YET, "Enable returning hidden states with responses.") \
X(enable_return_routed_experts, BOOL, "--enable-return-routed-experts", "false", NULL, OPT, NOT_YET, "Enable returning routed experts of each layer with responses.") \
X(scheduler_recv_interval, INT, "--scheduler-recv-interval", "1", NULL, OPT, NOT_YET, "The interval to poll requests in the scheduler.") \
X(numa_node, LIST_INT, "--numa-node", NULL, NULL, OPT, SUPPORTED, "The NUMA node of each TP rank. (CPU: rank r runs on the cores of node numa_node[r])") \
X(enable_deterministic_inference, BOOL, "--enable-deterministic-inference", "false", NULL, OPT, NOT_YET, "Enable deterministic inference mode with batch invariant ops.") \
X(rl_on_policy_target, CHOICE, "--rl-on-policy-target", NULL, "fsdp", OPT, NOT_YET, "The training system the RL rollout must match on-policy.") \
X(enable_layerwise_nvtx_marker, BOOL, "--enable-layerwise-nvtx-marker", "false", NULL, OPT, IGNORED, "Enable layerwise NVTX profiling annotations. (no effect on CPU: NVTX markers are for NVIDIA Nsight)") \
X(enable_attn_tp_input_scattered, BOOL, "--enable-attn-tp-input-scattered", "false", NULL, OPT, NOT_YET, "Allow input of attention to be scattered across TP ranks.") \
X(enable_nsa_prefill_context_parallel, BOOL, "--enable-nsa-prefill-context-parallel", "false", NULL, OPT, NOT_YET, "Context parallel for NSA prefill.") \
X(enable_fused_qk_norm_rope, BOOL, "--enable-fused-qk-norm-rope", "false", NULL, OPT, IGNORED, "Fuse QK norm and RoPE. (no effect on CPU: a GPU kernel fusion; the results are the same)") \
X(disable_outlines_disk_cache, BOOL, "--disable-outlines-disk-cache", "false", NULL, OPT, NOT_YET, "Disable the disk cache of the outlines grammar backend.") \
X(pre_warm_nccl, BOOL, "--pre-warm-nccl", "false", NULL, OPT, IGNORED, "Pre-warm NCCL communicators at start-up. (no effect on CPU: there is no NCCL on a CPU)") \
X(disable_piecewise_cuda_graph, BOOL, "--disable-piecewise-cuda-graph", "false", NULL, OPT, IGNORED, "Disable piecewise CUDA graph. (no effect on CPU: sglc captures no CUDA graphs: every batch size runs the same CPU kernels)") \
X(num_continuous_decode_steps, INT, "--num-continuous-decode-steps", "1", NULL, OPT, NOT_YET, "Number of decode steps run back to back before checking the queue.") \
X(nsa_prefill_cp_mode, STR, "--nsa-prefill-cp-mode", "round-robin-split", NULL, OPT, NOT_YET, "Token split mode of NSA prefill context parallelism.") \
X(enable_precise_embedding_interpolation, BOOL, "--enable-precise-embedding-interpolation", "false", NULL, OPT, NOT_YET, "Precise position embedding interpolation for vision encoders.") \
X(enable_fused_moe_sum_all_reduce, BOOL, "--enable-fused-moe-sum-all-reduce", "false", NULL, OPT, IGNORED, "Fuse the MoE output sum with all-reduce. (no effect on CPU: a GPU kernel fusion; the results are the same)") \
X(enable_double_sparsity, BOOL, "--enable-double-sparsity", "false", NULL, OPT, NOT_YET, "Enable double sparsity attention.") \
X(ds_channel_config_path, STR, "--ds-channel-config-path", NULL, NULL, OPT, NOT_YET, "Double sparsity channel config path.") \
X(ds_heavy_channel_num, INT, "--ds-heavy-channel-num", "32", NULL, OPT, NOT_YET, "Double sparsity: number of heavy channels.") \
X(ds_heavy_token_num, INT, "--ds-heavy-token-num", "256", NULL, OPT, NOT_YET, "Double sparsity: number of heavy tokens.") \
X(ds_heavy_channel_type, STR, "--ds-heavy-channel-type", "qk", NULL, OPT, NOT_YET, "Double sparsity: type of heavy channels.") \
X(ds_sparse_decode_threshold, INT, "--ds-sparse-decode-threshold", "4096", NULL, OPT, NOT_YET, "Double sparsity: minimum length for sparse decode.") \
X(dllm_algorithm, STR, "--dllm-algorithm", NULL, NULL, OPT, NOT_YET, "Diffusion LLM decoding algorithm.") \
X(dllm_algorithm_config, STR, "--dllm-algorithm-config", NULL, NULL, OPT, NOT_YET, "Diffusion LLM algorithm config file.") \
/* ---- Dynamic batch tokenizer ---- */ \
X(enable_dynamic_batch_tokenizer, BOOL, "--enable-dynamic-batch-tokenizer", "false", NULL, DYNTOK, NOT_YET, "Enable the async dynamic batch tokenizer.") \
X(dynamic_batch_tokenizer_batch_size, INT, "--dynamic-batch-tokenizer-batch-size", "32", NULL, DYNTOK, NOT_YET, "Maximum batch size of the dynamic batch tokenizer.") \
X(dynamic_batch_tokenizer_batch_timeout, FLOAT, "--dynamic-batch-tokenizer-batch-timeout", "0.002", NULL, DYNTOK, NOT_YET, "Timeout in seconds for batching tokenization requests.") \
/* ---- Debug tensor dumps ---- */ \
X(debug_tensor_dump_output_folder, STR, "--debug-tensor-dump-output-folder", NULL, NULL, DUMP, NOT_YET, "The output folder for dumping tensors.") \
X(debug_tensor_dump_layers, LIST_INT, "--debug-tensor-dump-layers", NULL, NULL, DUMP, NOT_YET, "The layer ids to dump.") \
X(debug_tensor_dump_input_file, STR, "--debug-tensor-dump-input-file", NULL, NULL, DUMP, NOT_YET, "The input filename for dumping tensors.") \
X(debug_tensor_dump_inject, BOOL, "--debug-tensor-dump-inject", "false", NULL, DUMP, NOT_YET, "Inject dumped tensors as inputs.") \
/* ---- PD disaggregation ---- */ \
X(disaggregation_mode, CHOICE, "--disaggregation-mode", "null", "null|prefill|decode", PD, NOT_YET, "Only used for PD disaggregation: prefill server, decode server, or neither (null).") \
X(disaggregation_transfer_backend, CHOICE, "--disaggregation-transfer-backend", "mooncake", "mooncake|nixl|ascend|fake", PD, NOT_YET, "The backend for disaggregation KV transfer.") \
X(disaggregation_bootstrap_port, INT, "--disaggregation-bootstrap-port", "8998", NULL, PD, NOT_YET, "Bootstrap server port on the prefill server.") \
X(disaggregation_ib_device, STR, "--disaggregation-ib-device", NULL, NULL, PD, NOT_YET, "The InfiniBand devices for disaggregation transfer.") \
X(disaggregation_decode_enable_offload_kvcache, BOOL, "--disaggregation-decode-enable-offload-kvcache", "false", NULL, PD, NOT_YET, "Offload the KV cache of the decode server to host memory.") \
X(num_reserved_decode_tokens, INT, "--num-reserved-decode-tokens", "512", NULL, PD, NOT_YET, "Tokens reserved for each new request added to the running decode batch.") \
X(disaggregation_decode_polling_interval, INT, "--disaggregation-decode-polling-interval", "1", NULL, PD, NOT_YET, "The interval to poll requests in the decode server.") \
/* ---- Encode prefill disaggregation ---- */ \
X(enable_adaptive_dispatch_to_encoder, BOOL, "--enable-adaptive-dispatch-to-encoder", "false", NULL, EPD, NOT_YET, "Adaptively dispatch multimodal inputs to the encoder.") \
X(encoder_only, BOOL, "--encoder-only", "false", NULL, EPD, NOT_YET, "Launch an encoder-only server.") \
X(language_only, BOOL, "--language-only", "false", NULL, EPD, NOT_YET, "Load weights for the language model only.") \
X(encoder_transfer_backend, CHOICE, "--encoder-transfer-backend", "zmq_to_scheduler", "zmq_to_scheduler|zmq_to_tokenizer|mooncake", EPD, NOT_YET, "The backend for encoder output transfer.") \
X(encoder_urls, LIST_STR, "--encoder-urls", "[]", NULL, EPD, NOT_YET, "List of encoder server URLs.") \
/* ---- Custom weight loader ---- */ \
X(custom_weight_loader, LIST_STR, "--custom-weight-loader", "[]", NULL, WLOADER, NOT_YET, "Custom functions for updating weights (module paths).") \
X(weight_loader_disable_mmap, BOOL, "--weight-loader-disable-mmap", "false", NULL, WLOADER, NOT_YET, "Disable mmap while loading weights with safetensors.") \
X(remote_instance_weight_loader_seed_instance_ip, STR, "--remote-instance-weight-loader-seed-instance-ip", NULL, NULL, WLOADER, NOT_YET, "The IP of the seed instance for remote weight loading.") \
X(remote_instance_weight_loader_seed_instance_service_port, INT, "--remote-instance-weight-loader-seed-instance-service-port", NULL, NULL, WLOADER, NOT_YET, "The service port of the seed instance.") \
X(remote_instance_weight_loader_send_weights_group_ports, JSON, "--remote-instance-weight-loader-send-weights-group-ports", NULL, NULL, WLOADER, NOT_YET, "The communication group ports (JSON list).") \
X(remote_instance_weight_loader_backend, CHOICE, "--remote-instance-weight-loader-backend", "nccl", "transfer_engine|nccl", WLOADER, NOT_YET, "The backend for remote instance weight loading.") \
X(remote_instance_weight_loader_start_seed_via_transfer_engine, BOOL, "--remote-instance-weight-loader-start-seed-via-transfer-engine", "false", NULL, WLOADER, NOT_YET, "Start the seed instance with the transfer engine.") \
X(modelexpress_config, STR, "--modelexpress-config", NULL, NULL, WLOADER, NOT_YET, "ModelExpress weight-loading config (JSON).") \
/* ---- For PD-Multiplexing ---- */ \
X(enable_pdmux, BOOL, "--enable-pdmux", "false", NULL, PDMUX, NOT_YET, "Enable PD-Multiplexing.") \
X(pdmux_config_path, STR, "--pdmux-config-path", NULL, NULL, PDMUX, NOT_YET, "The path of the PD-Multiplexing config file.") \
X(sm_group_num, INT, "--sm-group-num", "8", NULL, PDMUX, NOT_YET, "Number of SM partition groups.") \
/* ---- For multi-modal ---- */ \
X(enable_broadcast_mm_inputs_process, BOOL, "--enable-broadcast-mm-inputs-process", "false", NULL, MM, NOT_YET, "Broadcast multimodal input processing results across ranks.") \
X(mm_process_config, JSON, "--mm-process-config", NULL, NULL, MM, NOT_YET, "Multimodal preprocessing config (JSON object).") \
X(mm_enable_dp_encoder, BOOL, "--mm-enable-dp-encoder", "false", NULL, MM, NOT_YET, "Data parallelism for the multimodal encoder.") \
X(limit_mm_data_per_request, JSON, "--limit-mm-data-per-request", NULL, NULL, MM, NOT_YET, "Limit the number of multimodal inputs per request (JSON object).") \
X(mm_max_concurrent_calls, INT, "--mm-max-concurrent-calls", "32", NULL, MM, NOT_YET, "Maximum concurrent multimodal processing calls.") \
X(mm_per_request_timeout, FLOAT, "--mm-per-request-timeout", "10.0", NULL, MM, NOT_YET, "Timeout in seconds for processing one request's multimodal data.") \
X(enable_mm_global_cache, BOOL, "--enable-mm-global-cache", "false", NULL, MM, NOT_YET, "Enable the global multimodal embedding cache.") \
/* ---- For checkpoint decryption ---- */ \
X(decrypted_config_file, STR, "--decrypted-config-file", NULL, NULL, DECRYPT, NOT_YET, "The path of the decrypted config file.") \
X(decrypted_draft_config_file, STR, "--decrypted-draft-config-file", NULL, NULL, DECRYPT, NOT_YET, "The path of the decrypted draft config file.") \
X(enable_prefix_mm_cache, BOOL, "--enable-prefix-mm-cache", "false", NULL, DECRYPT, NOT_YET, "Enable the prefix multimodal cache.") \
/* ---- Forward hooks ---- */ \
X(forward_hooks, JSON, "--forward-hooks", NULL, NULL, HOOKS, NOT_YET, "Forward hooks to register (JSON list).") \
/* ---- Configuration file support ---- */ \
X(config, STR, "--config", NULL, NULL, CONFIG, SUPPORTED, "Read arguments from a YAML file (keys with dashes or underscores); the command line wins over the file.") \
/* ---- Other ---- */ \
X(checkpoint_engine_wait_weights_before_ready, BOOL, "--checkpoint-engine-wait-weights-before-ready", "false", NULL, OTHER, NOT_YET, "Wait for the checkpoint engine's initial weights before serving.") \
X(kt_weight_path, STR, "--kt-weight-path", NULL, NULL, OTHER, NOT_YET, "KTransformers: path of the quantized expert weights.") \
X(kt_method, STR, "--kt-method", "AMXINT4", NULL, OTHER, NOT_YET, "KTransformers: quantization method of the CPU experts.") \
X(kt_cpuinfer, INT, "--kt-cpuinfer", NULL, NULL, OTHER, NOT_YET, "KTransformers: number of CPU inference threads.") \
X(kt_threadpool_count, INT, "--kt-threadpool-count", "2", NULL, OTHER, NOT_YET, "KTransformers: number of thread pools.") \
X(kt_num_gpu_experts, INT, "--kt-num-gpu-experts", NULL, NULL, OTHER, NOT_YET, "KTransformers: number of experts kept on the GPU.") \
X(kt_max_deferred_experts_per_token, INT, "--kt-max-deferred-experts-per-token", NULL, NULL, OTHER, NOT_YET, "KTransformers: maximum deferred experts per token.") \
X(tool_server, STR, "--tool-server", NULL, NULL, OTHER, NOT_YET, "Tool server URLs, or 'demo'.")
/* clang-format on */

#endif
