#!/usr/bin/env bash
# --dp-size in the offline commands (TinyStories-656K, --threads 2):
#  - generate --requests --dp-size 2: the same greedy responses, in input
#    order, as --dp-size 1, for every --load-balance-method (a line's
#    data_parallel_rank pins it; its output unchanged); the log says 2
#    replicas and the method; an out-of-range data_parallel_rank is that
#    line's error; --dp-size above the threads, --dp-size 0 and an unknown
#    method are refused with their messages;
#  - bench-offline --dp-size 2: its result JSON has every request done,
#    dp_size 2, throughput > 0, both replicas' pools in
#    max_total_num_tokens (twice --max-total-tokens);
#  - bench-one-batch --dp-size 2: refused, saying why.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
[ -f "$M/model.safetensors" ] || { echo "skip: no $M"; exit 77; }
[ -x "$BIN" ] || { echo "skip: no $BIN"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
# 12 requests: varied prompts and lengths, one with n=2, one pinned to rank 1
# (req1.jsonl: the same without data_parallel_rank, for --dp-size 1)
$PY - "$T/req.jsonl" "$T/req1.jsonl" <<'PY'
import json, sys
prompts = ["Once upon a time", "The little dog", "Lily liked to", "One day a bird", "Tom was sad because",
           "The sun was", "A big red ball", "Mom said", "The cat and the mouse", "In the garden", "Ben had a toy",
           "The sky"]
with open(sys.argv[1], "w") as f, open(sys.argv[2], "w") as f1:
    for i, p in enumerate(prompts):
        r = {"text": p, "sampling_params": {"temperature": 0, "max_new_tokens": 8 + 3 * i}}
        if i == 4: r["sampling_params"]["n"] = 2
        f1.write(json.dumps(r) + "\n")
        if i == 7: r["data_parallel_rank"] = 1
        f.write(json.dumps(r) + "\n")
PY
gen() { # gen OUT ARGS...
    local out=$1; shift
    "$BIN" generate --model-path "$M" --threads 2 --max-total-tokens 4096 --requests "$T/${REQ:-req}.jsonl" \
        --output "$T/$out.jsonl" "$@" >"$T/$out.log" 2>&1
}
texts() { $PY -c '
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    for x in (o if isinstance(o, list) else [o]): print(json.dumps([x["output_ids"], x["meta_info"]["finish_reason"]]))
' "$1"; }
REQ=req1 gen dp1; rc=$?
check "generate --dp-size 1: exit 0 (exit $rc)" "[ $rc = 0 ]"
texts "$T/dp1.jsonl" >"$T/dp1.txt"
check "dp 1: 13 results" "[ \$(wc -l <$T/dp1.txt) = 13 ]"
for meth in auto round_robin total_requests total_tokens follow_bootstrap_room cache_aware; do
    gen "dp2_$meth" --dp-size 2 --load-balance-method $meth; rc=$?
    texts "$T/dp2_$meth.jsonl" >"$T/dp2_$meth.txt" 2>/dev/null
    check "generate --dp-size 2 --load-balance-method $meth: exit 0 (exit $rc), outputs identical to dp 1, in order" \
        "[ $rc = 0 ] && cmp -s $T/dp1.txt $T/dp2_$meth.txt"
done
for meth in round_robin total_requests total_tokens cache_aware; do
    check "dp 2 $meth: both replicas finished requests (13 in all)" "$PY -c '
import re, sys
n = {int(r): int(k) for r, k in re.findall(r\"dp_rank (\\d): (\\d+) requests finished\", open(sys.argv[1]).read())}
assert len(n) == 2 and min(n.values()) >= 1 and sum(n.values()) == 13, n
' $T/dp2_$meth.log"
done
sed 's/}$/, "data_parallel_rank": 1}/' "$T/req1.jsonl" >"$T/pin.jsonl"
REQ=pin gen pin --dp-size 2; rc=$?
texts "$T/pin.jsonl" >"$T/pin.txt" 2>/dev/null
check "every line pinned to data_parallel_rank 1: replica 0 idle, outputs as dp 1" \
    "[ $rc = 0 ] && grep -q 'dp_rank 0: 0 requests finished' $T/pin.log && grep -q 'dp_rank 1: 13 requests finished' $T/pin.log && cmp -s $T/dp1.txt $T/pin.txt"
check "dp 2 log: 2 replicas, the method named" "grep -q 'dp: 2 replicas (total_tokens)' $T/dp2_total_tokens.log"
check "dp 2 log: both replicas made" "grep -q 'dp_rank 1' $T/dp2_round_robin.log"
printf '%s\n' '{"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":2},"data_parallel_rank":2}' \
    '{"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":2},"data_parallel_rank":0}' >"$T/bad.jsonl"
"$BIN" generate --model-path "$M" --threads 2 --requests "$T/bad.jsonl" --dp-size 2 >"$T/bad.out" 2>"$T/bad.log"; rc=$?
check "data_parallel_rank 2 with --dp-size 2: that line's error, the other served" \
    "head -1 $T/bad.out | grep -q 'data_parallel_rank 2 is out of range: --dp-size is 2 (ranks 0 to 1)' && sed -n 2p $T/bad.out | grep -q output_ids"
gen big --dp-size 3; rc=$?
check "--dp-size 3 with 2 threads: refused (exit $rc)" "[ $rc != 0 ] && grep -q 'dp-size 3 needs at least 3 compute threads' $T/big.log"
gen zero --dp-size 0; rc=$?
check "--dp-size 0: refused (exit $rc)" "[ $rc = 2 ] && grep -q 'dp-size must be at least 1, got 0' $T/zero.log"
gen meth --dp-size 2 --load-balance-method fastest; rc=$?
check "unknown --load-balance-method: exit 2 naming the choices" "[ $rc = 2 ] && grep -q 'invalid choice' $T/meth.log && grep -q cache_aware $T/meth.log"
"$BIN" bench-offline --model-path "$M" --threads 2 --max-total-tokens 2048 --dp-size 2 --num-prompts 16 \
    --random-input-len 64 --random-output-len 16 --result-filename "$T/bo.json" >"$T/bo.log" 2>&1; rc=$?
check "bench-offline --dp-size 2: exit 0 (exit $rc)" "[ $rc = 0 ]"
check "bench-offline --dp-size 2: JSON with 16 requests, dp_size 2, throughput > 0, both pools" "$PY -c '
import json, sys
o = json.loads(open(sys.argv[1]).readline())
assert o[\"successful_requests\"] == 16 and o[\"dp_size\"] == 2, o
assert o[\"output_throughput\"] > 0 and o[\"total_output_tokens\"] > 0, o
assert o[\"max_total_num_tokens\"] == 4096, o
' $T/bo.json"
check "bench-offline --dp-size 2: the replicas line" "grep -q 'Data parallel replicas: *2 (round_robin)' $T/bo.log"
"$BIN" bench-one-batch --model-path "$M" --dp-size 2 --batch-size 2 --input-len 8 --output-len 4 >"$T/bob.log" 2>&1; rc=$?
check "bench-one-batch --dp-size 2: exit 2, saying why" "[ $rc = 2 ] && grep -q 'one static batch' $T/bob.log"
[ $fails = 0 ] && echo "all passed" || echo "$fails failed"
[ $fails = 0 ]
