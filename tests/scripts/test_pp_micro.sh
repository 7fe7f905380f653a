#!/usr/bin/env bash
# Pipeline micro-batches (issue 12, --pp-max-micro-batch-size): a step's
# sequences split into micro-batches of at most M, pipelined through the
# stages (stage p runs micro-batch i while stage p + 1 runs i - 1).
#  1. `generate --requests` (the scheduler, offline): 7 greedy requests of
#     3 to 70 prompt tokens and 5 to 24 new ones (the batch shrinks as they
#     finish), --chunked-prefill-size 16 (long prompts span steps, mixed
#     with decodes), --max-running-requests 5 (later ones wait, then join):
#     output_ids identical to one process for --pp-size 2 (TinyStories-656K)
#     with M = 1, 2, 3 and the default, --pp-size 3 (a dummy 3-layer
#     Llama-3.2-1B) with M = 1, 2, 3, and --tp-size 2 --pp-size 2 with M = 2;
#     the leak check ran and found nothing; the log's "N forwards ran as K
#     micro-batches" shows K > N (pipelined), none with M = 8 (one
#     micro-batch per step);
#  2. `serve --pp-size 2 --pp-max-micro-batch-size 2`: 4 concurrent greedy
#     requests = a one-process server, while a streaming request is cut
#     mid-stream (client gone) and another aborted by /abort_request; then
#     the 4 again (same answers), a clean exit (rc 0), no leak logged;
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
                                                                  "ignore_eos": True}}) + "\n")
PYEOF
ids_of() { "$PY" -c 'import json,sys; print([json.loads(l)["output_ids"] for l in open(sys.argv[1])])' "$1"; }
# run NAME MODEL-ARGS... : generate --requests into $T/NAME.{out,err}; 0 when it ran
run() {
    local name=$1; shift
    timeout 240 "$BIN" generate --requests "$T/req.jsonl" --chunked-prefill-size 16 --max-running-requests 5 \
        --dtype float32 "$@" >"$T/$name.out" 2>"$T/$name.err"
}
# check NAME LABEL REF WANT: ids = REF's, leak check ran clean, micro-batches WANT (yes / no)
check() {
    local name=$1 label=$2 ref=$3 want=$4 line nf nm
    if [ "$(ids_of "$T/$name.out")" != "$(ids_of "$T/$ref.out")" ]; then
        bad "$label: output_ids differ from one process"; return
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
    ok "$label: 7 requests' output_ids = one process, $line${line:+, }leak checks clean"
}

# 1. offline through the scheduler
TSA=(--model-path "$TS")
DUM=(--model-path "$LD" --load-format dummy --json-model-override-args "$SMALL")
run ts-one "${TSA[@]}" --threads 1 || { bad "one process failed"; tail -5 "$T/ts-one.err"; }
for M in 1 2 3 default 8; do
    mb=(--pp-max-micro-batch-size "$M"); [ "$M" = default ] && mb=()
    want=yes; [ "$M" = 8 ] && want=no
    run "ts-pp2-m$M" "${TSA[@]}" --threads 2 --pp-size 2 "${mb[@]}" &&
        check "ts-pp2-m$M" "pp=2 M=$M" ts-one $want || { bad "pp=2 M=$M failed"; tail -5 "$T/ts-pp2-m$M.err"; }
done
run ts-tp2pp2 "${TSA[@]}" --threads 4 --tp-size 2 --pp-size 2 --pp-max-micro-batch-size 2 &&
    check ts-tp2pp2 "tp=2 x pp=2 M=2" ts-one yes || { bad "tp=2 x pp=2 failed"; tail -5 "$T/ts-tp2pp2.err"; }
run d-one "${DUM[@]}" --threads 1 || { bad "dummy one process failed"; tail -5 "$T/d-one.err"; }
for M in 1 2 3; do
    run "d-pp3-m$M" "${DUM[@]}" --threads 3 --pp-size 3 --pp-max-micro-batch-size "$M" &&
        check "d-pp3-m$M" "pp=3 M=$M (3-layer dummy)" d-one yes || { bad "pp=3 M=$M failed"; tail -5 "$T/d-pp3-m$M.err"; }
done
