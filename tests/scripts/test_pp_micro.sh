#!/usr/bin/env bash
# Pipeline micro-batches (issue 12, --pp-max-micro-batch-size): a step's
# sequences split into micro-batches of at most M, pipelined through the
# stages (stage p runs micro-batch i while stage p + 1 runs i - 1).
#  1. `generate --requests` (the scheduler, offline): 7 greedy requests of
#     3 to 70 prompt tokens and 5 to 24 new ones (the batch shrinks as they
#     finish), --chunked-prefill-size 16 (long prompts span steps, mixed
#     with decodes), --max-running-requests 5 (later ones wait, then join):
#     output_ids and logprobs bitwise equal to one process for --pp-size 2
#     (TinyStories-656K) with M = 1, 2, 3, 8 and the default (SGLang's
#     max_running_requests / pp_size = 2 here) and --pp-size 3 (a dummy
#     3-layer Llama-3.2-1B) with M = 1, 2, 3; --tp-size 2 --pp-size 2 with
#     M = 2: ids = one process, bitwise the M = 8 run of the same layout;
#     likewise --tp-size 2 --pp-size 3 (a middle stage, 6 ranks);
#     the leak check ran and found nothing; the log's "N forwards ran as K
#     micro-batches" shows K > N (pipelined), none with M = 8 (one
#     micro-batch per step); --pp-size 2 M = 2 with a stage per "node"
#     (two commands, --nnodes 2, gloo over 127.0.0.1): bitwise too;
#  2. `serve --pp-size 2 --pp-max-micro-batch-size 2` on a 2-layer dummy
#     Llama-3.2-1B (f32, seeded; slow enough that the streams below are still
#     running when they are cut): 4 concurrent greedy requests = the same
#     server with one micro-batch (M = 8), while a streaming request is cut
#     mid-stream (client gone) and another aborted by /abort_request; then
#     the 4 again (same answers), a clean exit (rc 0), no leak logged;
#     stage 1 SIGSTOPped while 3 requests run in pipelined steps (M = 1):
#     all 3 answer 503 within --dist-timeout 3, the server exits non-zero
#     naming rank 1;
#  3. --pp-max-micro-batch-size 0 and --pp-async-batch-depth -1 refused;
#     --pp-async-batch-depth 1 accepted with its "no effect" warning.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
PY=/usr/bin/python3
. "$ROOT/tests/scripts/lib_server.sh"
TS=$SHARED/models/TinyStories-656K
LD=$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct
server_require "$TS/model.safetensors"
[ -e "$LD/config.json" ] || { echo "skip: $LD not found"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
T=$(mktemp -d); trap server_cleanup EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
SMALL='{"num_hidden_layers": 3, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1001, "head_dim": 32}'

"$PY" - "$T/req.jsonl" <<'PYEOF'
import json, sys
lens = [(3, 24), (70, 8), (17, 16), (5, 5), (41, 20), (9, 12), (33, 6)]
with open(sys.argv[1], "w") as f:
    for k, (n, new) in enumerate(lens):
        ids = [1] + [(k * 131 + i * 37) % 997 + 3 for i in range(n - 1)]
        f.write(json.dumps({"input_ids": ids, "sampling_params": {"max_new_tokens": new, "temperature": 0,
                                                                  "ignore_eos": True}, "return_logprob": True}) + "\n")
PYEOF
# same_out A B: output_ids identical, output logprobs within 1e-5 (prints the largest difference)
same_out() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
if len(a) != len(b) or any(x["output_ids"] != y["output_ids"] for x, y in zip(a, b)): sys.exit(1)
d = max(abs(p[0] - q[0]) for x, y in zip(a, b)
        for p, q in zip(x["meta_info"]["output_token_logprobs"], y["meta_info"]["output_token_logprobs"]))
print(f"{d:.2g}")
if len(sys.argv) > 3 and d: sys.exit(1)
sys.exit(0 if d <= 1e-5 else 1)
PYEOF
}
# run NAME MODEL-ARGS... : generate --requests into $T/NAME.{out,err}; 0 when it ran
run() {
    local name=$1; shift
    timeout 240 "$BIN" generate --requests "$T/req.jsonl" --chunked-prefill-size 16 --max-running-requests 5 \
        --dtype float32 "$@" >"$T/$name.out" 2>"$T/$name.err"
}
# check NAME LABEL REF WANT [exact]: ids = REF's (exact: logprobs bitwise too), leak check ran
# clean, micro-batches WANT (yes / no)
check() {
    local name=$1 label=$2 ref=$3 want=$4 line nf nm
    local d
    if ! d=$(same_out "$T/$name.out" "$T/$ref.out" ${5:-}); then
        bad "$label: output_ids or logprobs differ from $ref ($d)"; return
    fi
    line=$(grep -o 'leak checks [0-9]* ([0-9]* failed)' "$T/$name.err" | tail -1)
    if ! echo "$line" | grep -Eq '^leak checks [1-9][0-9]* \(0 failed\)$'; then
        bad "$label: leak check '$line'"; return
    fi
    line=$(grep -o 'pipeline parallelism: [0-9]* forwards ran as [0-9]* micro-batches' "$T/$name.err" | tail -1)
    nf=$(echo "$line" | awk '{print $3}'); nm=$(echo "$line" | awk '{print $7}')
    if [ "$want" = yes ] && ! [ "${nm:-0}" -gt "${nf:-0}" ] 2>/dev/null; then
        bad "$label: not pipelined ('$line')"; return
    fi
    if [ "$want" = no ] && [ -n "$line" ]; then bad "$label: pipelined with one micro-batch ('$line')"; return; fi
    ok "$label: 7 requests' output_ids = $ref's (logprobs max |d| $d), $line${line:+, }leak checks clean"
}

# 1. offline through the scheduler
TSA=(--model-path "$TS")
DUM=(--model-path "$LD" --load-format dummy --json-model-override-args "$SMALL")
run ts-one "${TSA[@]}" --threads 1 || { bad "one process failed"; tail -5 "$T/ts-one.err"; }
for M in 1 2 3 default 8; do
    mb=(--pp-max-micro-batch-size "$M"); [ "$M" = default ] && mb=()
    want=yes; [ "$M" = 8 ] && want=no
    run "ts-pp2-m$M" "${TSA[@]}" --threads 2 --pp-size 2 "${mb[@]}" &&
        check "ts-pp2-m$M" "pp=2 M=$M" ts-one $want exact || { bad "pp=2 M=$M failed"; tail -5 "$T/ts-pp2-m$M.err"; }
done
# TP x PP: ids = one process (logprobs differ by the all-reduce's summation order), bitwise the
# one-micro-batch TP x PP run
run ts-tp2pp2-m8 "${TSA[@]}" --threads 4 --tp-size 2 --pp-size 2 --pp-max-micro-batch-size 8 ||
    { bad "tp=2 x pp=2 M=8 failed"; tail -5 "$T/ts-tp2pp2-m8.err"; }
run ts-tp2pp2 "${TSA[@]}" --threads 4 --tp-size 2 --pp-size 2 --pp-max-micro-batch-size 2 &&
    check ts-tp2pp2 "tp=2 x pp=2 M=2 vs one process" ts-one yes &&
    check ts-tp2pp2 "tp=2 x pp=2 M=2 vs tp=2 x pp=2 M=8" ts-tp2pp2-m8 yes exact || { bad "tp=2 x pp=2 failed"; tail -5 "$T/ts-tp2pp2.err"; }
run d-one "${DUM[@]}" --threads 1 || { bad "dummy one process failed"; tail -5 "$T/d-one.err"; }
for M in 1 2 3; do
    run "d-pp3-m$M" "${DUM[@]}" --threads 3 --pp-size 3 --pp-max-micro-batch-size "$M" &&
        check "d-pp3-m$M" "pp=3 M=$M (3-layer dummy)" d-one yes exact || { bad "pp=3 M=$M failed"; tail -5 "$T/d-pp3-m$M.err"; }
done
# TP x PP with a middle stage (6 ranks): bitwise the one-micro-batch run of the same layout
run d-tp2pp3-m8 "${DUM[@]}" --threads 6 --tp-size 2 --pp-size 3 --pp-max-micro-batch-size 8 &&
    run d-tp2pp3 "${DUM[@]}" --threads 6 --tp-size 2 --pp-size 3 --pp-max-micro-batch-size 2 &&
    check d-tp2pp3 "tp=2 x pp=3 M=2 vs M=8 (3-layer dummy)" d-tp2pp3-m8 yes exact ||
    { bad "tp=2 x pp=3 failed"; tail -5 "$T/d-tp2pp3.err"; }
# two "nodes" over gloo (each command one stage): the same pipelined ticks over TCP
if ldd "$BIN" | grep -q libgloo; then
    P=$(freeport)
    run g-n1 "${TSA[@]}" --threads 1 --pp-size 2 --pp-max-micro-batch-size 2 --nnodes 2 --node-rank 1 \
        --dist-init-addr "127.0.0.1:$P" &
    n1=$!
    run g-n0 "${TSA[@]}" --threads 1 --pp-size 2 --pp-max-micro-batch-size 2 --nnodes 2 --node-rank 0 \
        --dist-init-addr "127.0.0.1:$P" && wait $n1 && check g-n0 "pp=2 M=2, a stage per node (gloo)" ts-one yes exact ||
        { bad "pp=2 over gloo failed"; tail -5 "$T/g-n0.err" "$T/g-n1.err"; }
else
    echo "skip pp=2 over gloo: $BIN built without gloo"
fi

# 2. serve: a streaming request cut by its client and one aborted mid-stream
# a model slow enough (~20 ms a token: Llama-3.2-1B's 128,256 x 2,048 LM head,
# two dummy layers) that a 400-token stream is still running when the abort
# and the stopped stage arrive; TinyStories finishes 400 tokens in ~40 ms
SV=(--model-path "$LD" --load-format dummy --dtype float32 --json-model-override-args '{"num_hidden_layers": 2}' --random-seed 1
    --tokenizer-path "$SHARED/models/tokenizers/llama3_1" --disable-radix-cache)
gen4() {  # gen4 OUT: 4 concurrent greedy requests of different lengths, output_ids one per line
    local i
    for i in 1 2 3 4; do
        curl -s -m 60 "$SERVER_URL/generate" -H 'content-type: application/json' \
            -d "{\"input_ids\":[1,$((100 + i * 37)),$((200 + i)),$((300 + i * 3))$(printf ',%d' $(seq 5 $((5 + i * 9))))],\"sampling_params\":{\"max_new_tokens\":$((8 + i * 6)),\"temperature\":0,\"ignore_eos\":true}}" \
            >"$1.$i" &
    done
    wait $(jobs -p | grep -v "^$SERVER_PID\$") 2>/dev/null
    for i in 1 2 3 4; do "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_ids"])' "$1.$i" || echo "bad $i"; done >"$1"
}
stream_body() { echo "{\"rid\":\"$1\",\"input_ids\":[1,7,8,9],\"stream\":true,\"sampling_params\":{\"max_new_tokens\":400,\"temperature\":0,\"ignore_eos\":true}}"; }
used() { curl -s "$SERVER_URL/metrics" | awk '/^sglang:num_used_tokens/ {print $NF + 0}' | head -1; }
# the reference: the same PP server with one micro-batch per forward (what
# micro-batching must not change; the offline part above compares PP with
# one process)
server_start "$T/one.log" "${SV[@]}" --threads 2 --pp-size 2 --pp-max-micro-batch-size 8 || server_fail "$T/one.log"
gen4 "$T/sref"; server_stop
server_start "$T/pp.log" "${SV[@]}" --threads 2 --pp-size 2 --pp-max-micro-batch-size 2 --enable-metrics || server_fail "$T/pp.log"
curl -s -N -m 60 "$SERVER_URL/generate" -H 'content-type: application/json' -d "$(stream_body victim)" >"$T/victim" &
bg_track $!
(curl -s -N -m 60 "$SERVER_URL/generate" -H 'content-type: application/json' -d "$(stream_body gone)" | head -n 6 >"$T/gone") &
bg_track $!
for i in $(seq 1 100); do [ "$(grep -c '^data:' "$T/victim" 2>/dev/null)" -ge 3 ] && break; sleep 0.05; done
gen4 "$T/sgot" &
g=$!
curl -s -m 10 "$SERVER_URL/abort_request" -H 'content-type: application/json' -d '{"rid":"victim"}' >/dev/null
wait $g
for i in $(seq 1 100); do grep -q '\[DONE\]' "$T/victim" && break; sleep 0.1; done
if cmp -s "$T/sref" "$T/sgot" && ! grep -q bad "$T/sgot"; then ok "serve pp=2 M=2: 4 concurrent greedy requests = pp=2 M=8 (one micro-batch), beside the aborts"
else bad "serve pp=2 M=2: outputs differ"; diff "$T/sref" "$T/sgot"; fi
n=$(grep -c '^data: {' "$T/victim")
if grep -q '"abort"' "$T/victim" && [ "$n" -lt 400 ]; then ok "the streamed request aborted mid-stream (after $n chunks)"
else bad "no mid-stream abort ($n chunks)"; tail -c 300 "$T/victim"; fi
gen4 "$T/sgot2"
cmp -s "$T/sref" "$T/sgot2" && ok "serve pp=2 M=2: the 4 again, same answers" || bad "serve: second round differs"
for i in $(seq 1 50); do [ "$(used)" = 0 ] && break; sleep 0.1; done
[ "$(used)" = 0 ] && ok "no KV token in use once idle (num_used_tokens 0)" || bad "num_used_tokens $(used) when idle"
server_stop TERM
if [ "$SERVER_RC" = 0 ] && ! grep -qi 'leak detected' "$T/pp.log" && grep -q 'forwards ran as' "$T/pp.log"; then
    ok "serve pp=2 M=2: clean exit, no leak logged, $(grep -o '[0-9]* forwards ran as [0-9]* micro-batches' "$T/pp.log" | tail -1)"
else bad "serve pp=2: exit $SERVER_RC or leak / no micro-batches"; tail -5 "$T/pp.log"; fi

# a stage that hangs mid-pipeline: every running request answers 503, the server exits naming it
rank_pid() {  # rank_pid SERVER R: the forked worker of rank R
    local p
    for p in $(pgrep -P "$1" -x sglc); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SGLC_DIST_RANK=$2" && { echo "$p"; return; }
    done
}
nrun() { curl -s "$SERVER_URL/metrics" | awk '/^sglang:num_running_reqs/ {print $NF + 0}' | head -1; }
server_start "$T/hang.log" "${SV[@]}" --threads 2 --pp-size 2 --pp-max-micro-batch-size 1 --dist-timeout 3 --enable-metrics ||
    server_fail "$T/hang.log"
W=$(rank_pid "$SERVER_PID" 1)
for i in 1 2 3; do
    curl -s -m 30 -o /dev/null -w '%{http_code}\n' "$SERVER_URL/generate" -H 'content-type: application/json' \
        -d "{\"input_ids\":[1,$((40 + i)),9],\"sampling_params\":{\"max_new_tokens\":500,\"temperature\":0,\"ignore_eos\":true}}" >"$T/hang.$i" &
done
for i in $(seq 1 100); do [ "$(nrun)" = 3 ] && break; sleep 0.02; done
n=$(nrun); [ -n "$W" ] && kill -STOP "$W"
t0=$(date +%s.%N)
wait $(jobs -p | grep -v "^$SERVER_PID\$") 2>/dev/null
dt=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
codes=$(cat "$T"/hang.[123] | sort | uniq -c | tr -s ' ' | tr '\n' ';')
for i in $(seq 1 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SERVER_PID" 2>/dev/null; then server_stop KILL; else wait "$SERVER_PID"; SERVER_RC=$?; SERVER_PID=; fi
if [ "$n" = 3 ] && [ "$codes" = " 3 503;" ] && [ "${SERVER_RC:-0}" != 0 ] && grep -qF "rank 1 (pid $W)" "$T/hang.log"; then
    ok "rank 1 stopped with 3 requests in pipelined steps: 3 x 503 after ${dt}s, exit $SERVER_RC, $(grep -oF "rank 1 (pid $W)" "$T/hang.log" | head -1) named"
else bad "hang: $n running, codes '$codes', exit ${SERVER_RC:-?}"; tail -5 "$T/hang.log"; fi
[ -n "$W" ] && kill -KILL "$W" 2>/dev/null

# 3. arguments
e=$("$BIN" generate --model-path "$TS" --input-ids 1,2 --pp-size 2 --pp-max-micro-batch-size 0 2>&1)
[ $? = 2 ] && echo "$e" | grep -q 'pp-max-micro-batch-size 0: at least 1' && ok "--pp-max-micro-batch-size 0 refused" ||
    bad "--pp-max-micro-batch-size 0: $e"
e=$("$BIN" generate --model-path "$TS" --input-ids 1,2 --pp-async-batch-depth -1 2>&1)
[ $? = 2 ] && echo "$e" | grep -q 'pp-async-batch-depth -1' && ok "--pp-async-batch-depth -1 refused" || bad "--pp-async-batch-depth -1: $e"
e=$("$BIN" generate --model-path "$TS" --input-ids 1,2 --max-new-tokens 2 --pp-size 2 --pp-async-batch-depth 1 2>&1)
[ $? = 0 ] && echo "$e" | grep -q 'no effect.*--pp-async-batch-depth' && ok "--pp-async-batch-depth 1: accepted, warned (no effect)" ||
    bad "--pp-async-batch-depth 1: $(echo "$e" | tail -3)"

[ "$fails" = 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" = 0 ]
