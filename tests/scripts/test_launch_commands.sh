#!/usr/bin/env bash
# test_launch_commands — SGLang's own launch commands, run unchanged by
# `sglc serve`: each one starts and answers /health, or stops (exit 2)
# with a message naming exactly what sglc does not support.
#
# Every case keeps the command as SGLang's documentation writes it, with
# its source (file of github.com/sgl-project/sglang, section), and three
# changes only: `python3 -m sglang.launch_server` becomes `sglc serve`,
# the model (a hub id in the docs) becomes the local TinyStories-656K
# ($M), and `--host 127.0.0.1 --port P --threads 1` is appended (argparse:
# the last value wins) so the test listens on loopback, on a free port,
# with one compute thread on this shared machine.
#
# Parallelism is being built: --tp N runs N ranks now (docs/notes/tp.md),
# --dp N runs N replicas (docs/notes/dp.md; with --tp each replica is a TP group,
# docs/notes/dpxtp.md),
# --dist-init-addr joins nodes over gloo (docs/notes/tp.md).  Each case's expectation is
# on its own `launch` line (or in the variables below), so a feature that
# lands changes that line only (to `start`, or to the new message).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$ROOT/../shared/models/TinyStories-656K
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
T=$(mktemp -d /tmp/sglc_launch.XXXXXX)
trap server_cleanup EXIT

DP_EXPECT=start
# the page's host sgl-dev-0 does not resolve here: refused with that (tests/scripts/test_tp_multinode.sh runs it)
MULTINODE_EXPECT="fail:--dist-init-addr sgl-dev-0:50000: cannot resolve sgl-dev-0"
# TinyStories-656K has 8 attention heads: --tp 6 does not divide them
TP6_EXPECT="fail:--tp-size 6: num_attention_heads (8) is not divisible by it"

fails=0
n_start=0
n_cases=0

# launch SOURCE EXPECT ARGS...: EXPECT is `start`, `refuse:MESSAGE`
# (exit 2, an argument error, and MESSAGE on stderr), `fail:MESSAGE` (a
# non-zero exit and MESSAGE: refused once the model is known), or
# `start+warn:TEXT` (starts, and the log holds TEXT, e.g. the no-effect
# warning line).
launch() {
  local src=$1 expect=$2
  shift 2
  n_cases=$((n_cases + 1))
  local log=$T/case$n_cases.log
  case "$expect" in
    refuse:* | fail:*)
      local msg=${expect#*:} want=2
      [ "${expect%%:*}" = fail ] && want=any
      timeout 20 "$BIN" serve "$@" --host 127.0.0.1 --port "$(freeport)" --threads 1 >"$log" 2>&1
      local rc=$?
      if { [ "$rc" -eq 2 ] || { [ $want = any ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; }; } &&
         grep -qF -- "$msg" "$log"; then
        echo "ok   [$src] refused: $msg"
      else
        echo "FAIL [$src] expected exit ${want/any/non-zero} with '$msg', got rc=$rc: $(head -c 400 "$log")"
        fails=$((fails + 1))
      fi
      ;;
    start*)
      local warn=
      case "$expect" in start+warn:*) warn=${expect#start+warn:};; esac
      local port
      port=$(freeport)
      "$BIN" serve "$@" --host 127.0.0.1 --port "$port" --threads 1 >"$log" 2>&1 &
      SERVER_PID=$!
      if wait_http "http://127.0.0.1:$port/health" "$SERVER_PID" 30 &&
         [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] &&
         { [ -z "$warn" ] || grep -qF -- "$warn" "$log"; }; then
        echo "ok   [$src] started, /health 200"
        n_start=$((n_start + 1))
      else
        echo "FAIL [$src] did not start (or no '$warn' in the log): $(tail -c 600 "$log")"
        fails=$((fails + 1))
      fi
      server_stop TERM
      ;;
  esac
}

W="accepted with no effect on this CPU build (see --help for why):"

# ---- docs/advanced_features/attention_backend.md, "Launch command for different attention backends"
launch "attention_backend.md: FlashInfer" "start+warn:$W --attention-backend" \
  --model "$M" --attention-backend flashinfer
launch "attention_backend.md: FlashInfer, DeepSeek-V3" start \
  --tp 8 --model "$M" --attention-backend flashinfer --trust-remote-code
launch "attention_backend.md: FlashAttention 3" start \
  --model "$M" --attention-backend fa3
launch "attention_backend.md: Triton" start \
  --model "$M" --attention-backend triton
launch "attention_backend.md: Torch Native" start \
  --model "$M" --attention-backend torch_native
launch "attention_backend.md: Ascend" start \
  --model "$M" --attention-backend ascend
launch "attention_backend.md: Wave" start \
  --model "$M" --attention-backend wave
launch "attention_backend.md: FlashMLA with FP8 KV cache" start \
  --tp 8 --model "$M" --attention-backend flashmla --kv-cache-dtype fp8_e4m3 --trust-remote-code
launch "attention_backend.md: hybrid attention (FA4 prefill, TRTLLM MLA decode)" \
  "refuse:--quantization modelopt_fp4 is not supported by sglc" \
  --model-path "$M" --tp 8 --attention-backend trtllm_mla --moe-runner-backend flashinfer_trtllm \
  --quantization modelopt_fp4 --prefill-attention-backend fa4

# ---- docs/advanced_features/server_arguments.md, "Common launch commands"
cat >"$T/config.yaml" <<EOF
model-path: $M
host: 0.0.0.0
port: 30000
tensor-parallel-size: 2
enable-metrics: true
log-requests: true
EOF
launch "server_arguments.md: configuration file" start \
  --config "$T/config.yaml"
launch "server_arguments.md: multi-GPU tensor parallelism" start \
  --model-path "$M" --tp 2
launch "server_arguments.md: data parallelism (sglang_router.launch_server's server arguments)" "$DP_EXPECT" \
  --model-path "$M" --dp 2 --tp 2
launch "server_arguments.md: smaller KV cache pool" start \
  --model-path "$M" --mem-fraction-static 0.7
launch "server_arguments.md: smaller chunked prefill" start \
  --model-path "$M" --chunked-prefill-size 4096
launch "server_arguments.md: multi-node tensor parallelism, node 0" "$MULTINODE_EXPECT" \
  --model-path "$M" --tp 4 --dist-init-addr sgl-dev-0:50000 --nnodes 2 --node-rank 0
launch "server_arguments.md: multi-node tensor parallelism, node 1" "$MULTINODE_EXPECT" \
  --model-path "$M" --tp 4 --dist-init-addr sgl-dev-0:50000 --nnodes 2 --node-rank 1
# the same page's one-flag tips ("add --quantization fp8", "add --kv-cache-dtype fp8_e4m3",
# "add --enable-deterministic-inference", "add --enable-torch-compile", "add --disable-cuda-graph")
launch "server_arguments.md: fp8 weight quantization" start \
  --model-path "$M" --quantization fp8
launch "server_arguments.md: fp8 KV cache" start \
  --model-path "$M" --kv-cache-dtype fp8_e4m3
launch "server_arguments.md: deterministic inference" \
  "refuse:--enable-deterministic-inference is not supported by sglc yet" \
  --model-path "$M" --enable-deterministic-inference
launch "server_arguments.md: torch.compile" "start+warn:$W --enable-torch-compile" \
  --model-path "$M" --enable-torch-compile
launch "server_arguments.md: multi-node deadlock tip" "start+warn:$W --disable-cuda-graph" \
  --model-path "$M" --disable-cuda-graph

# ---- docs/advanced_features/hyperparameter_tuning.md
launch "hyperparameter_tuning.md: shared prefixes" start \
  --model-path "$M" --schedule-policy lpm --schedule-conservativeness 0.3
launch "hyperparameter_tuning.md: CUDA graph batch size" "start+warn:$W --cuda-graph-max-bs" \
  --model-path "$M" --cuda-graph-max-bs 512 --mem-fraction-static 0.8
launch "hyperparameter_tuning.md: DP attention for DeepSeek" \
  "refuse:--enable-dp-attention is not supported by sglc yet" \
  --model-path "$M" --enable-dp-attention --dp-size 8

# ---- docs/platforms/cpu_server.md
launch "cpu_server.md: Launch of the Serving Engine" "$TP6_EXPECT" \
  --model "$M" --trust-remote-code --disable-overlap-schedule --device cpu --host 0.0.0.0 --tp 6
launch "cpu_server.md: DeepSeek-V3.1-Terminus W8A8_INT8" "$TP6_EXPECT" \
  --model "$M" --trust-remote-code --disable-overlap-schedule --device cpu --quantization w8a8_int8 \
  --host 0.0.0.0 --enable-torch-compile --torch-compile-max-bs 4 --tp 6
launch "cpu_server.md: Llama-3.2-3B BF16" "start+warn:$W --trust-remote-code, --enable-torch-compile, --torch-compile-max-bs" \
  --model "$M" --trust-remote-code --disable-overlap-schedule --device cpu --host 0.0.0.0 \
  --enable-torch-compile --torch-compile-max-bs 16 --tp 2
# the same command on a GPU box says so
launch "cpu_server.md command with --device cuda" "refuse:--device cuda: this build of sglc serves CPUs only" \
  --model "$M" --trust-remote-code --disable-overlap-schedule --device cuda --host 0.0.0.0

echo "$n_cases launch commands, $n_start started"
[ "$n_cases" -ge 20 ] || { echo "FAIL: fewer than 20 commands"; fails=$((fails + 1)); }
[ "$n_start" -ge 10 ] || { echo "FAIL: fewer than 10 commands started"; fails=$((fails + 1)); }
if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all launch commands behave as expected"
