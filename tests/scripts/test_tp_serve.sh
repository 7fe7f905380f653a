#!/usr/bin/env bash
# Tensor parallelism behind the HTTP front (issue 12), TinyStories-656K:
#  1. `serve --tp-size 2` (and `--pp-size 2`): 4 concurrent greedy
#     /generate requests (batched decode across ranks) give the output_ids
#     of a `--tp-size 1` server;
#  2. a rank that hangs (SIGSTOP) mid-request: the request is answered 503
#     and the server exits non-zero within --dist-timeout, naming rank 1;
#  3. a rank killed (SIGKILL) mid-request: 503 at once, exit non-zero,
#     "rank 1 (pid N) was killed by signal 9" in the log;
#  4. rank 0 killed: the worker rank exits by itself;
#  5. an embedding model (tiny qwen3-embed, --is-embedding): /v1/embeddings
#     under --tp-size 2 within 1e-5 of --tp-size 1;
#  6. placement: ranks pinned to core groups --base-gpu-id + r *
#     --gpu-id-step (of threads-per-rank cores) or to --numa-node's nodes.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
T=$(mktemp -d); trap server_cleanup EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

worker_of() { pgrep -P "$1" -x sglc | head -1; }
[ -n "$(command -v pgrep)" ] || { echo "skip: pgrep missing"; exit 77; }

# 1. equality through the scheduler
server_start "$T/tp1.log" --model-path "$M" --threads 1 --tp-size 1 || server_fail "$T/tp1.log"
server_gen4 "$T/ref"; server_stop
server_start "$T/tp2.log" --model-path "$M" --threads 2 --tp-size 2 || server_fail "$T/tp2.log"
server_gen4 "$T/got"
if cmp -s "$T/ref" "$T/got" && ! grep -q bad "$T/got"; then ok "tp=2 serve: 4 concurrent greedy requests = tp=1"; else bad "tp=2 outputs differ"; diff "$T/ref" "$T/got"; fi
W=$(worker_of "$SERVER_PID")
server_stop TERM
[ "$SERVER_RC" = 0 ] && ok "tp=2 serve stops cleanly (rc 0)" || bad "tp=2 serve exit $SERVER_RC"
# pipeline parallelism through the scheduler: the same outputs
server_start "$T/pp2.log" --model-path "$M" --threads 2 --pp-size 2 || server_fail "$T/pp2.log"
server_gen4 "$T/gotpp"
if cmp -s "$T/ref" "$T/gotpp" && ! grep -q bad "$T/gotpp"; then ok "pp=2 serve: 4 concurrent greedy requests = tp=1"; else bad "pp=2 outputs differ"; diff "$T/ref" "$T/gotpp"; fi
server_stop TERM
sleep 0.3
[ -n "$W" ] && ! kill -0 "$W" 2>/dev/null && ok "worker rank exited with the server" || bad "worker $W still running"

# 2./3. a hung or killed rank mid-request
for mode in hang kill; do
    server_start "$T/$mode.log" --model-path "$M" --threads 2 --tp-size 2 --dist-timeout 3 || server_fail "$T/$mode.log"
    W=$(worker_of "$SERVER_PID")
    kill -STOP "$W"
    t0=$(date +%s.%N)
    curl -s -m 30 -o "$T/$mode.body" -w '%{http_code}' "$SERVER_URL/generate" -H 'content-type: application/json' \
        -d '{"input_ids":[1,147,201],"sampling_params":{"max_new_tokens":16,"temperature":0}}' >"$T/$mode.code" &
    CP=$!
    if [ $mode = kill ]; then sleep 0.5; kill -KILL "$W"; fi
    wait "$CP"
    dt=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
    code=$(cat "$T/$mode.code")
    [ "$code" = 503 ] && ok "$mode: the request got 503 after ${dt}s" || { bad "$mode: HTTP $code after ${dt}s"; cat "$T/$mode.body"; }
    for i in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SERVER_PID" 2>/dev/null; then bad "$mode: server still running"; server_stop KILL; else wait "$SERVER_PID"; SERVER_RC=$?; SERVER_PID=; fi
    [ "${SERVER_RC:-0}" != 0 ] && ok "$mode: server exited non-zero ($SERVER_RC)" || bad "$mode: server exit ${SERVER_RC:-?}"
    want="did not reach"; [ $mode = kill ] && want="rank 1 (pid $W) was killed by signal 9"
    grep -qF "$want" "$T/$mode.log" && ok "$mode: log names the rank: $(grep -F "$want" "$T/$mode.log" | head -1 | cut -c1-160)" ||
        { bad "$mode: no '$want' in the log"; tail -5 "$T/$mode.log"; }
    kill -KILL "$W" 2>/dev/null
done

# 4. rank 0 dies: the worker notices and exits
server_start "$T/r0.log" --model-path "$M" --threads 2 --tp-size 2 || server_fail "$T/r0.log"
W=$(worker_of "$SERVER_PID")
kill -KILL "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=
for i in $(seq 1 30); do kill -0 "$W" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$W" 2>/dev/null; then bad "worker $W still alive after rank 0 died"; kill -KILL "$W"; else ok "worker exited after rank 0 died"; fi
grep -q "rank 0 (pid" "$T/r0.log" && ok "worker log: $(grep "rank 0 (pid" "$T/r0.log" | head -1 | cut -c1-160)" || bad "worker did not name rank 0"
# 5. embeddings (the final-normed hidden rows come from rank 0)
E=$ROOT/build/tiny-models/qwen3-embed/f32
"$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$ROOT/build/tiny-models" --only qwen3-embed >/dev/null 2>&1
if [ -e "$E/config.json" ]; then
    for tp in 1 2; do
        server_start "$T/emb$tp.log" --model-path "$E" --is-embedding --skip-tokenizer-init --threads 2 --tp-size $tp || server_fail "$T/emb$tp.log"
        curl -s -m 30 "$SERVER_URL/v1/embeddings" -H 'content-type: application/json' \
            -d '{"input":[[1,5,9,33,70],[2,8]],"model":"x"}' >"$T/emb$tp.json"
        server_stop TERM
    done
    "$PY" - "$T" <<'PYEOF' && ok "embeddings tp=2 = tp=1 (within 1e-5)" || bad "embeddings differ"
import json, sys
t = sys.argv[1]
a, b = (json.load(open(f"{t}/emb{n}.json"))["data"] for n in (1, 2))
e = max(max(abs(x - y) for x, y in zip(p["embedding"], q["embedding"])) / max(abs(x) for x in p["embedding"])
        for p, q in zip(a, b))
print(f"     max|d|/max|ref| = {e:.3g}")
sys.exit(0 if len(a) == len(b) == 2 and e <= 1e-5 else 1)
PYEOF
else
    bad "no tiny qwen3-embed model"
fi

# 6. placement (on a machine with >= 2 allowed cores)
allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
if [ "$("$PY" -c 'import os; print(len(os.sched_getaffinity(0)))')" -ge 2 ]; then
    c0=$("$PY" -c 'import os; print(sorted(os.sched_getaffinity(0))[0])')
    c1=$("$PY" -c 'import os; print(sorted(os.sched_getaffinity(0))[1])')
    for spec in "default|$c0|$c1" "--gpu-id-step 0|$c0|$c0" "--base-gpu-id 1 --gpu-id-step 0|$c1|$c1" "--numa-node 0 0|$allowed|$allowed"; do
        IFS='|' read -r flags want0 want1 <<<"$spec"
        [ "$flags" = default ] && flags=
        [ "$flags" = "--numa-node 0 0" ] && [ ! -e /sys/devices/system/node/node0/cpulist ] && continue
        server_start "$T/pin.log" --model-path "$M" --threads 2 --tp-size 2 $flags || server_fail "$T/pin.log"
        W=$(worker_of "$SERVER_PID")
        got0=$(grep Cpus_allowed_list "/proc/$SERVER_PID/status" | cut -f2)
        got1=$(grep Cpus_allowed_list "/proc/$W/status" | cut -f2)
        if [ "$flags" = "--numa-node 0 0" ]; then  # node 0's cores within the allowed set: the same for both
            want0=$got1; want1=$got0; [ -n "$got0" ] || want0=x
        fi
        [ "$got0" = "$want0" ] && [ "$got1" = "$want1" ] && ok "placement '${flags:-default}': ranks on cores $got0 / $got1" ||
            bad "placement '${flags:-default}': cores $got0 / $got1, want $want0 / $want1"
        server_stop TERM
    done
fi
echo "$fails failure(s)"
[ $fails = 0 ]
