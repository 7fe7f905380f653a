#!/usr/bin/env bash
# `sglc bench-serving` against `sglc serve` on TinyStories-656K: each
# backend (native /generate, /v1/completions, /v1/chat/completions) runs a
# few streamed requests; the result table is printed, every request
# succeeds, the generated token count is exactly what was asked for
# (ignore_eos, --random-range-ratio 1), ITL/TPOT are consistent, the
# --output-file line has SGLang's keys.  Also: ids datasets, shared prefix,
# ShareGPT, Poisson rate, and a server that is not there (failures counted,
# clear message, non-zero exit, no crash).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

KEY=sk-bench
server_start "$T/log" --model-path "$M" --threads 1 --api-key $KEY \
    --served-model-name tiny --chat-template chatml --max-total-tokens 20000 || server_fail "$T/log"
PORT=$SERVER_PORT

COMMON=(--port "$PORT" --api-key $KEY --tokenizer "$M" --num-prompts 8 --random-input-len 32 --random-output-len 8
        --random-range-ratio 1 --max-concurrency 4)
# field NAME FILE -> the value printed in the table
field() { grep -F "$1" "$2" | head -1 | awk -F: '{gsub(/ /, "", $2); print $2}'; }
# verify the JSON line: keys, counts, metric consistency
jcheck() {
    $PY - "$1" "$2" "$3" <<'PYEOF'
import json, sys
line = open(sys.argv[1]).read().splitlines()[-1]
d = json.loads(line)
n, out = int(sys.argv[2]), int(sys.argv[3])
keys = ["backend", "dataset_name", "request_rate", "max_concurrency", "duration", "completed", "failed",
        "total_input_tokens", "total_output_tokens", "total_output_tokens_retokenized", "request_throughput",
        "input_throughput", "output_throughput", "total_throughput", "concurrency",
        "mean_e2e_latency_ms", "median_e2e_latency_ms", "p99_e2e_latency_ms",
        "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
        "mean_itl_ms", "median_itl_ms", "p95_itl_ms", "p99_itl_ms", "max_itl_ms"]
miss = [k for k in keys if k not in d]
assert not miss, miss
assert d["completed"] == n and d["failed"] == 0, d
assert d["total_output_tokens"] == out, d
assert 0 < d["mean_ttft_ms"] <= d["mean_e2e_latency_ms"], d
assert d["median_ttft_ms"] <= d["p99_ttft_ms"] <= d["mean_e2e_latency_ms"] * n, d
assert d["mean_itl_ms"] <= d["max_itl_ms"] and d["mean_tpot_ms"] > 0, d
assert abs(d["output_throughput"] * d["duration"] - out) < 1e-6 * out + 1e-9, d
assert 0 < d["concurrency"] <= (d["max_concurrency"] or n) + 1e-6, d
PYEOF
}
for b in sglang sglang-oai sglang-oai-chat; do
    "$BIN" bench-serving --backend $b "${COMMON[@]}" --output-file "$T/res.jsonl" >"$T/$b.out" 2>"$T/$b.err"
    rc=$?
    check "$b: exit 0" "[ $rc = 0 ] || { cat $T/$b.err; false; }"
    check "$b: table printed" "grep -q '^============ Serving Benchmark Result ============' $T/$b.out && grep -q '^P99 ITL (ms):' $T/$b.out && [ \"\$(field 'Backend:' $T/$b.out)\" = $b ]"
    check "$b: successful requests = 8" "[ \"\$(field 'Successful requests:' $T/$b.out)\" = 8 ]"
    check "$b: total generated tokens = 64" "[ \"\$(field 'Total generated tokens:' $T/$b.out)\" = 64 ]"
    check "$b: max concurrency 4, rate inf" "[ \"\$(field 'Max request concurrency:' $T/$b.out)\" = 4 ] && [ \"\$(field 'Traffic request rate:' $T/$b.out)\" = inf ]"
    check "$b: JSON line keys and values" "jcheck $T/res.jsonl 8 64"
done
check "three JSON lines appended" "[ \$(wc -l <$T/res.jsonl) = 3 ]"

# random-ids: the prompt is sent as ids, so input tokens are exact (8 x 32)
"$BIN" bench-serving --backend sglang --dataset-name random-ids "${COMMON[@]}" >"$T/ids.out" 2>&1
check "random-ids native: input tokens = 256, generated = 64" "[ \"\$(field 'Total input tokens:' $T/ids.out)\" = 256 ] && [ \"\$(field 'Total generated tokens:' $T/ids.out)\" = 64 ]"
"$BIN" bench-serving --backend sglang-oai --dataset-name random-ids "${COMMON[@]}" --request-rate 50 >"$T/ids2.out" 2>&1
check "random-ids oai at 50 req/s: input 256, generated 64" "[ \"\$(field 'Total input tokens:' $T/ids2.out)\" = 256 ] && [ \"\$(field 'Total generated tokens:' $T/ids2.out)\" = 64 ] && [ \"\$(field 'Traffic request rate:' $T/ids2.out)\" = 50.0 ]"

# no --model / --tokenizer: the model name from /v1/models, the tokenizer
# from /get_model_info (a local folder here)
"$BIN" bench-serving --backend sglang-oai --port "$PORT" --api-key $KEY --num-prompts 2 --random-input-len 8 \
    --random-output-len 3 --random-range-ratio 1 --output-file "$T/auto.jsonl" >"$T/auto.out" 2>&1
check "model and tokenizer learnt from the server" "[ \"\$(field 'Total generated tokens:' $T/auto.out)\" = 6 ] && grep -q '\"model_id\":\"tiny\"' $T/auto.jsonl"

# shared prefix: 2 groups x 3 prompts, 6 output tokens each
"$BIN" bench-serving --backend sglang --port "$PORT" --api-key $KEY --tokenizer "$M" --dataset-name generated-shared-prefix --flush-cache \
    --gsp-num-groups 2 --gsp-prompts-per-group 3 --gsp-system-prompt-len 64 --gsp-question-len 8 --gsp-output-len 6 >"$T/gsp.out" 2>&1
check "generated-shared-prefix (+ --flush-cache): 6 requests, 36 tokens" "[ \"\$(field 'Successful requests:' $T/gsp.out)\" = 6 ] && [ \"\$(field 'Total generated tokens:' $T/gsp.out)\" = 36 ]"

# ShareGPT file (one conversation too short to keep: SGLang's filter)
cat >"$T/sg.json" <<'JEOF'
[{"conversations":[{"from":"human","value":"Once upon a time there was a little girl named Lily."},{"from":"gpt","value":"She liked to play in the park with her dog."}]},
 {"conversations":[{"from":"human","value":"Tom had a red ball."},{"from":"gpt","value":"He threw it high into the sky and laughed."}]},
 {"conversations":[{"from":"human","value":"only one turn"}]},
 {"conversations":[{"from":"human","value":"The sun was"},{"from":"gpt","value":"hot."}]}]
JEOF
"$BIN" bench-serving --backend sglang-oai --port "$PORT" --api-key $KEY --tokenizer "$M" --dataset-name sharegpt \
    --dataset-path "$T/sg.json" --num-prompts 3 --sharegpt-output-len 5 >"$T/sg.out" 2>&1
check "sharegpt: 3 conversations, 15 tokens" "[ \"\$(field 'Successful requests:' $T/sg.out)\" = 3 ] && [ \"\$(field 'Total generated tokens:' $T/sg.out)\" = 15 ]"
echo '{"not":"a list"}' >"$T/bad.json"
"$BIN" bench-serving --port "$PORT" --tokenizer "$M" --dataset-name sharegpt --dataset-path "$T/bad.json" >"$T/bad.out" 2>&1
rc=$?
check "sharegpt: bad file -> clear error, exit 1" "[ $rc = 1 ] && grep -q 'ShareGPT file is a JSON array' $T/bad.out"

# wrong key: every request fails with 401, reported, no crash
"$BIN" bench-serving --backend sglang-oai --model tiny --port "$PORT" --api-key wrong --tokenizer "$M" --num-prompts 4 \
    --random-input-len 8 --random-output-len 4 --warmup-requests 0 >"$T/401.out" 2>"$T/401.err"
rc=$?
check "wrong API key: 4 failed, exit 1, message names 401" "[ $rc = 1 ] && [ \"\$(field 'Failed requests:' $T/401.out)\" = 4 ] && grep -q 'HTTP 401' $T/401.err"

# a server that is not there
server_stop

# timing against a fake backend with known chunk times (independent of
# sglc's server): TTFT ~100 ms, ITL ~50 ms (the native 2-token chunk gives
# two 25 ms entries), TPOT = (e2e - ttft) / 3; the OpenAI requests carry
# only OpenAI fields (+ ignore_eos)
FPORT=$(freeport)
$PY "$ROOT/tests/scripts/bench_serving_fake.py" "$FPORT" "$T/bodies.jsonl" &
FPID=$!
bg_track $FPID
wait_http "http://127.0.0.1:$FPORT/health" $FPID 10
for b in sglang sglang-oai sglang-oai-chat; do
    "$BIN" bench-serving --backend $b --port "$FPORT" --tokenizer "$M" --num-prompts 2 --random-input-len 8 \
        --random-output-len 4 --random-range-ratio 1 --warmup-requests 0 --output-file "$T/fake.jsonl" >"$T/fake_$b.out" 2>&1
    rc=$?
    check "fake backend $b: timing (TTFT ~100 ms, ITL, TPOT)" "[ $rc = 0 ] && $PY - $T/fake.jsonl $b <<'PYEOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
native = sys.argv[2] == 'sglang'
assert d['completed'] == 2 and d['total_output_tokens'] == 8, d
assert 90 <= d['median_ttft_ms'] <= 180, d
if native:  # ITL entries per request: 50, 25, 25
    assert 20 <= d['median_itl_ms'] <= 40 and 40 <= d['max_itl_ms'] <= 120, d
else:
    assert 40 <= d['median_itl_ms'] <= 90, d
tpot_expect = (d['mean_e2e_latency_ms'] - d['mean_ttft_ms']) / 3
assert abs(d['mean_tpot_ms'] - tpot_expect) < 1.0 and 30 <= d['mean_tpot_ms'] <= 80, d
PYEOF"
done
check "OpenAI requests carry only OpenAI fields + ignore_eos" "$PY - $T/bodies.jsonl <<'PYEOF'
import json, sys
ok = {'model', 'prompt', 'messages', 'temperature', 'max_tokens', 'stream', 'stream_options', 'ignore_eos'}
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r['path'] == '/generate':
        assert set(r['body']) == {'text', 'sampling_params', 'stream'}, r
        continue
    n += 1
    assert set(r['body']) <= ok, r
    assert r['body']['model'] == 'fake-model' and r['body']['max_tokens'] == 4 and r['body']['stream'] is True, r
assert n == 4, n
PYEOF"
kill $FPID; wait $FPID 2>/dev/null
for w in 0 1; do
    "$BIN" bench-serving --backend sglang --port "$PORT" --tokenizer "$M" --num-prompts 4 --random-input-len 8 \
        --random-output-len 4 --warmup-requests $w >"$T/down$w.out" 2>"$T/down$w.err"
    rc=$?
    check "stopped server (warmup $w): exit 1, clear message" "[ $rc = 1 ] && grep -qi 'couldn.t connect\|connection refused' $T/down$w.err"
done
check "stopped server: failures counted in the table" "[ \"\$(field 'Successful requests:' $T/down0.out)\" = 0 ] && [ \"\$(field 'Failed requests:' $T/down0.out)\" = 4 ]"
"$BIN" bench-serving --backend sglang-oai --port "$PORT" --tokenizer "$M" --num-prompts 1 >"$T/nomodel.out" 2>&1
rc=$?
check "stopped server, no --model: clear error" "[ $rc = 1 ] && grep -q 'pass --model' $T/nomodel.out"
"$BIN" bench-serving --backend nope >"$T/arg.out" 2>&1
rc=$?
check "bad --backend: exit 2" "[ $rc = 2 ] && grep -q -- \"--backend: invalid choice 'nope'\" $T/arg.out"

if [ $fails -ne 0 ]; then echo "--- server log"; tail -20 "$T/log"; echo "$fails check(s) failed"; exit 1; fi
echo "all bench-serving checks passed"
