#!/usr/bin/env bash
# `sglc serve` scheduler control, raw HTTP with curl:
#  - /pause_generation (in_place, retract, abort) and /continue_generation
#    around a running streaming request: no tokens while paused, the stream
#    resumes to the same ids as an uninterrupted run (in_place, retract),
#    ends with abort (abort); a request sent while paused waits; /ready 503
#    and /health 200 while paused; flush_cache works after retract;
#  - /update_weights_from_disk: same model (same outputs), a second model
#    folder written here (a seeded perturbation of TinyStories: outputs
#    change), an incompatible config (refused, old weights keep serving),
#    bad requests (400), weight_version;
#  - --watchdog-timeout with a tiny timeout ends the server (exit 1, SGLang's
#    log line) on a long prompt, --soft-watchdog-timeout only logs.
# The pause tests run on a 2-layer random-weight SmolLM2-135M config (about
# 10 ms per token, so a 100-token stream lasts long enough to be paused);
# the weight tests on TinyStories-656K.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
SMOL=$SHARED/models/configs/HuggingFaceTB__SmolLM2-135M-Instruct
PY=/usr/bin/python3
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors" "$SMOL/config.json"
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
# start NAME ARGS... : server in the background (lib_server.sh), waits for
# /health; sets URL, PID (tracked for the cleanup: several may run)
start() {
    local name=$1; shift
    server_start "$T/$name.log" --threads 1 "$@" || server_fail "$T/$name.log"
    URL=$SERVER_URL PID=$SERVER_PID
    bg_track "$PID"
    SERVER_PID=
}
# req METHOD PATH [BODY] -> $T/body, prints the status
req() {
    if [ $# -ge 3 ]; then curl -s -m 60 -o "$T/body" -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' --data-binary "$3" "$URL$2"
    else curl -s -m 60 -o "$T/body" -w '%{http_code}' -X "$1" "$URL$2"; fi
}
jq_() { $PY -c "import json,sys; d=json.load(open('$T/body')); print($1)"; }
# the output_ids of the last SSE chunk of a stream file
last_ids() { $PY -c "
import json,sys
last=None
for l in open('$1'):
    l=l.strip()
    if l.startswith('data: {'): last=json.loads(l[6:])
print(last['output_ids'] if last and 'output_ids' in last else None, last['meta_info']['finish_reason']['type'] if last else None)"; }
chunks() { grep -c '^data: {' "$1" 2>/dev/null || echo 0; }
wait_chunks() { for _ in $(seq 1 200); do [ "$(chunks "$1")" -ge "$2" ] && return 0; sleep 0.02; done; return 1; }

# ---------------------------------------------------------------- pause / continue
start smol --model-path "$SMOL" --load-format dummy --skip-tokenizer-init --random-seed 5 \
    --json-model-override-args '{"num_hidden_layers": 2}' --max-total-tokens 4096 --weight-version w0
GEN='{"input_ids":[1,17,29,401,77],"sampling_params":{"max_new_tokens":100,"temperature":0,"ignore_eos":true}'
req POST /generate "$GEN}" >"$T/code"; jq_ 'd["output_ids"]' >"$T/ref" 2>/dev/null
check "uninterrupted reference" "[ \$(cat $T/code) = 200 ] && [ \$(wc -c <$T/ref) -gt 100 ]"
REF=$(cat "$T/ref")
gen_is_ref() { [ "$(req POST /generate "$GEN}")" = 200 ] && [ "$(jq_ 'd["output_ids"]')" = "$REF" ]; }
check "pause: bad mode -> 400" "[ \$(req POST /pause_generation '{\"mode\":\"sideways\"}') = 400 ] && grep -q 'Invalid mode' $T/body"
check "pause/continue: GET -> 405" "[ \$(req GET /pause_generation) = 405 ] && [ \$(req GET /continue_generation) = 405 ]"

for mode in in_place retract; do
    curl -s -N -m 60 -X POST "$URL/generate" -d "${GEN},\"stream\":true}" >"$T/sse_$mode" &
    CP=$!
    wait_chunks "$T/sse_$mode" 3
    check "$mode: pause answers SGLang's body" "[ \$(req POST /pause_generation '{\"mode\":\"$mode\"}') = 200 ] && [ \"\$(jq_ 'd[\"message\"], d[\"status\"]')\" = 'Generation paused successfully. ok' ]"
    sleep 0.3 # chunks of the steps before the pause may still be on their way
    n0=$(chunks "$T/sse_$mode")
    curl -s -m 60 -X POST "$URL/generate" -d '{"input_ids":[1,5,6],"sampling_params":{"max_new_tokens":3,"temperature":0}}' -o "$T/held_$mode" -w '%{http_code}' >"$T/held_code_$mode" &
    HP=$!
    sleep 0.6
    check "$mode: no tokens while paused (stream mid-way: $n0 chunks)" "[ $n0 -lt 100 ] && [ \$(chunks $T/sse_$mode) -eq $n0 ]"
    check "$mode: a request sent while paused waits" "kill -0 $HP 2>/dev/null && [ ! -s $T/held_$mode ]"
    check "$mode: /health 200, /ready 503, /health_generate 503 while paused" \
        "[ \$(req GET /health) = 200 ] && [ \$(req GET /ready) = 503 ] && [ \$(req GET /health_generate) = 503 ]"
    if [ $mode = in_place ]; then
        check "in_place: get_load shows the request still running" "[ \$(req GET /get_load) = 200 ] && [ \"\$(jq_ 'd[0][\"num_running_reqs\"]')\" = 1 ]"
        check "in_place: flush_cache refused (the paused request holds KV)" "[ \$(req POST /flush_cache) = 400 ]"
    else
        check "retract: nothing running, flush_cache allowed" "[ \$(req GET /get_load) = 200 ] && [ \"\$(jq_ 'd[0][\"num_running_reqs\"]')\" = 0 ] && [ \$(req POST /flush_cache) = 200 ]"
    fi
    check "$mode: continue answers SGLang's body" "[ \$(req POST /continue_generation) = 200 ] && [ \"\$(jq_ 'd[\"message\"], d[\"status\"]')\" = 'Generation continued successfully. ok' ] && [ \$(req GET /ready) = 200 ]"
    wait $CP $HP
    check "$mode: the stream resumes to the uninterrupted ids" "[ \"\$(last_ids $T/sse_$mode)\" = \"$REF length\" ]"
    check "$mode: the held request ran after continue" "[ \$(cat $T/held_code_$mode) = 200 ] && grep -q '\"completion_tokens\":3' $T/held_$mode"
done
# abort: the running request ends with an abort, the server goes on
curl -s -N -m 60 -X POST "$URL/generate" -d "${GEN},\"stream\":true}" >"$T/sse_abort" &
CP=$!
wait_chunks "$T/sse_abort" 3
check "abort: pause (default mode) 200" "[ \$(req POST /pause_generation '{}') = 200 ]"
wait $CP
check "abort: the running stream finished with abort" "last_ids $T/sse_abort | grep -q ' abort\$'"
check "abort: continue, then generation works" "[ \$(req POST /continue_generation '{}') = 200 ] && gen_is_ref"
# a weight update while a request runs (not paused) waits for it
curl -s -N -m 60 -X POST "$URL/generate" -d "${GEN},\"stream\":true}" >"$T/sse_upd" &
CP=$!
wait_chunks "$T/sse_upd" 3
req POST /update_weights_from_disk "{\"model_path\":\"$SMOL\",\"load_format\":\"dummy\",\"weight_version\":\"w1\"}" >"$T/upd_code" &
UP=$!
sleep 0.1
check "/health answers while weights load and the swap waits" "[ \$(curl -s -m 1 -o /dev/null -w '%{http_code}' $URL/health) = 200 ]"
wait $CP $UP
check "update while running: the running request finished first, with its old-weight ids" "[ \"\$(last_ids $T/sse_upd)\" = \"$REF length\" ] && [ \$(cat $T/upd_code) = 200 ]"
check "same seed, dummy again: same outputs; weight_version w1" "gen_is_ref && [ \$(req GET /get_weight_version) = 200 ] && [ \"\$(jq_ 'd[\"weight_version\"]')\" = w1 ]"
kill "$PID"; wait "$PID" 2>/dev/null

# ---------------------------------------------------------------- weights from disk
# a second model folder: TinyStories' tensors, seeded perturbation
mkdir -p "$T/alt" "$T/bad"
$PY - "$M" "$T/alt" "$ROOT/tools" <<'EOF' || { echo "FAIL cannot write the second model"; exit 1; }
import json, os, shutil, sys
import numpy as np
src, dst, tools = sys.argv[1:4]
sys.path.insert(0, tools)
import safetensors_np
t, meta = safetensors_np.read(os.path.join(src, "model.safetensors"))
rng = np.random.RandomState(1234)
out = {k: (v + rng.normal(0, 0.5 * (float(np.std(v)) or 1.0), v.shape)).astype(np.float32) if v.dtype.kind == "f" else v
       for k, v in t.items()}
safetensors_np.write(os.path.join(dst, "model.safetensors"), out, dtype="F32")
for f in os.listdir(src):
    if f.endswith(".json"):
        shutil.copy(os.path.join(src, f), dst)
EOF
$PY -c "import json; c=json.load(open('$M/config.json')); c['num_hidden_layers']=1; json.dump(c, open('$T/bad/config.json','w'))"
start tiny --model-path "$M" --max-total-tokens 20000 --weight-version v0
G='{"input_ids":[1,147,201],"sampling_params":{"max_new_tokens":12,"temperature":0}}'
check "reference" "[ \$(req POST /generate '$G') = 200 ] && jq_ 'd[\"output_ids\"]' >$T/tref"
TREF=$(cat "$T/tref")
check "update to the same folder: success, same outputs, version unchanged" \
    "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\"}') = 200 ] && [ \"\$(jq_ 'd[\"success\"], d[\"message\"], d[\"num_paused_requests\"]')\" = 'True Succeeded to update model weights. 0' ] && [ \$(req POST /generate '$G') = 200 ] && [ \"\$(jq_ 'd[\"output_ids\"]')\" = \"$TREF\" ] && [ \$(req GET /get_weight_version) = 200 ] && [ \"\$(jq_ 'd[\"weight_version\"]')\" = v0 ]"
check "update to the second folder: outputs change, weight_version + model_path follow" \
    "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$T/alt\",\"weight_version\":\"v1\"}') = 200 ] && [ \"\$(jq_ 'd[\"message\"]')\" = 'Succeeded to update model weights. Weight version updated to v1.' ] && [ \$(req POST /generate '$G') = 200 ] && jq_ 'd[\"output_ids\"]' >$T/alt_ids && [ \"\$(cat $T/alt_ids)\" != \"$TREF\" ] && [ \$(req GET /get_model_info) = 200 ] && [ \"\$(jq_ 'd[\"weight_version\"], d[\"model_path\"]')\" = \"v1 $T/alt\" ]"
ALT=$(cat "$T/alt_ids")
check "incompatible config refused (400, success false), the old weights keep serving" \
    "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$T/bad\",\"load_format\":\"dummy\",\"weight_version\":\"v2\"}') = 400 ] && [ \"\$(jq_ 'd[\"success\"]')\" = False ] && grep -q 'not compatible' $T/body && [ \$(req POST /generate '$G') = 200 ] && [ \"\$(jq_ 'd[\"output_ids\"]')\" = \"$ALT\" ] && [ \$(req GET /get_weight_version) = 200 ] && [ \"\$(jq_ 'd[\"weight_version\"]')\" = v1 ]"
check "missing folder -> 400 success false" "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$T/nope\"}') = 400 ] && [ \"\$(jq_ 'd[\"success\"]')\" = False ]"
check "model_path required -> 400" "[ \$(req POST /update_weights_from_disk '{}') = 400 ] && grep -q model_path $T/body"
check "is_async / unknown load_format / bad types -> 400" \
    "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\",\"is_async\":true}') = 400 ] && [ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\",\"load_format\":\"gguf\"}') = 400 ] && [ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\",\"flush_cache\":\"yes\"}') = 400 ] && [ \$(req POST /update_weights_from_disk 'not json') = 400 ]"
check "back to the original folder: the original outputs" \
    "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\",\"abort_all_requests\":true}') = 200 ] && [ \$(req POST /generate '$G') = 200 ] && [ \"\$(jq_ 'd[\"output_ids\"]')\" = \"$TREF\" ]"
check "keep_pause: paused after the update until continue" \
    "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\",\"keep_pause\":true}') = 200 ] && [ \$(req GET /ready) = 503 ] && [ \$(req POST /continue_generation) = 200 ] && [ \$(req GET /ready) = 200 ]"
check "flush_cache GET and POST when idle" "[ \$(req GET /flush_cache) = 200 ] && [ \$(req POST /flush_cache) = 200 ]"
kill "$PID"; wait "$PID" 2>/dev/null

# ---------------------------------------------------------------- watchdog
LONG=$($PY -c 'print(",".join(str(3 + (i * 37) % 2000) for i in range(480)))')
start soft --model-path "$M" --skip-server-warmup --soft-watchdog-timeout 0.0005
check "soft watchdog: the request completes, the server lives, the log has soft=True" \
    "[ \$(req POST /generate '{\"input_ids\":[1,$LONG],\"sampling_params\":{\"max_new_tokens\":2}}') = 200 ] && [ \$(req GET /health) = 200 ] && grep -q 'Scheduler watchdog timeout (watchdog_timeout=0.0005, soft=True)' $T/soft.log"
kill "$PID"; wait "$PID" 2>/dev/null
start hard --model-path "$M" --skip-server-warmup --watchdog-timeout 0.0005
curl -s -m 20 -o /dev/null -X POST "$URL/generate" -d "{\"input_ids\":[1,$LONG],\"sampling_params\":{\"max_new_tokens\":2}}"
rc=0
for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
wait "$PID"; rc=$?
check "hard watchdog: a step longer than the timeout ends the server with status 1" "[ $rc = 1 ]"
check "hard watchdog: SGLang's log line" "grep -q 'Scheduler watchdog timeout (watchdog_timeout=0.0005, soft=False)' $T/hard.log"
start idle --model-path "$M" --sleep-on-idle
check "--sleep-on-idle is accepted and serves" "[ \$(req POST /generate '$G') = 200 ] && [ \"\$(jq_ 'd[\"output_ids\"]')\" = \"$TREF\" ]"

if [ $fails -ne 0 ]; then
    echo "--- logs"; tail -n 20 "$T"/*.log
    echo "$fails check(s) failed"; exit 1
fi
echo "all server control checks passed"
exit 0
