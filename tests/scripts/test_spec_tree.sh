#!/usr/bin/env bash
# NGRAM tree verification through `sglc generate --requests` (issue 13):
# - TinyStories-656K, real text prompts (a repeating phrase, a story the
#   model loops on) plus seeded sampled requests: output_ids and logprobs
#   identical for plain decoding, tree verification (the default) and
#   chain verification (SGLC_SPEC_TREE=0), each request alone and all in one
#   batch; trees were verified (the "speculative:" log line), the tree's
#   accept length on the repeating prompt >= the chain's;
# - the same batch with chunked prefill 16 + mixed chunks, and a 400-token
#   pool that retracts: identical, no KV leak (leak checks 0 failed);
# - page size 16 (alone, and with a 400-token pool + chunked 32 + mixed):
#   trees verified (accepted nodes' KV copied into the pages), identical, no leak;
# - tiny MLA (deepseek-v2) and sliding-window (mistral-sw, gemma2) models
#   verify trees and keep plain decoding's ids.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
TINY=$ROOT/build/tiny-models
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$M/model.safetensors" ] || { echo "skip: $M not found"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

REP="The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log. The cat sat on the mat."
STORY="Once upon a time, there was a little girl named Lily. She liked to play with her ball."
"$PY" - "$T" "$REP" "$STORY" <<'PYEOF'
import json, sys
t, rep, story = sys.argv[1:4]
reqs = [(rep, 0.0, 300), (story, 0.0, 300), (rep, 1.0, 120), (story, 0.8, 120)]
lines = [json.dumps({"text": x, "rid": "r%d" % i, "return_logprob": True,
                     "sampling_params": {"temperature": tp, "max_new_tokens": n, "ignore_eos": True, "sampling_seed": 5 + i}})
         for i, (x, tp, n) in enumerate(reqs)]
open(t + "/batch.jsonl", "w").write("\n".join(lines) + "\n")
for i, l in enumerate(lines):
    open(t + "/one%d.jsonl" % i, "w").write(l + "\n")
# ids for the tiny models (vocabularies of 512): repeating id patterns
tl = []
for i, (period, n_in, mx) in enumerate([(7, 40, 64), (11, 50, 48), (5, 23, 40)]):
    ids = [1] + [((k % period) * 37 + 11 * i) % 240 + 3 for k in range(n_in - 1)]
    tl.append(json.dumps({"input_ids": ids, "sampling_params": {"max_new_tokens": mx, "temperature": 0, "ignore_eos": True}}))
open(t + "/tiny.jsonl", "w").write("\n".join(tl) + "\n")
PYEOF

# gen NAME REQ [args...]: env TREE=0|1|plain
gen() {
    local name=$1 req=$2; shift 2
    local spec=(--speculative-algorithm NGRAM)
    [ "$TREE" = plain ] && spec=()
    SGLC_SPEC_TREE=${TREE/plain/1} "$BIN" generate --model-path "${MODEL:-$M}" --requests "$req" --threads 1 \
        "${spec[@]}" "$@" > "$T/$name.out" 2> "$T/$name.err"
}
same='
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) > 0
for x, y in zip(a, b):
    assert x["output_ids"] == y["output_ids"], "ids differ"
    la, lb = x["meta_info"].get("output_token_logprobs"), y["meta_info"].get("output_token_logprobs")
    if la is not None:
        assert all(abs(p[0] - q[0]) < 1e-4 for p, q in zip(la, lb)), "logprobs differ"
'
trees() { sed -n 's/.*speculative: .* \([0-9][0-9]*\) tree verifies.*/\1/p' "$T/$1.err" | tail -1; }
noleak() { grep -q "(0 failed)" "$T/$1.err" && ! grep -qi "leak detected" "$T/$1.err"; }

# batch and alone: plain / chain / tree
for TREE in plain 0 1; do gen "batch$TREE" "$T/batch.jsonl"; done
check "batch: tree ids + logprobs = plain" "$PY -c '$same' $T/batchplain.out $T/batch1.out"
check "batch: chain ids + logprobs = plain" "$PY -c '$same' $T/batchplain.out $T/batch0.out"
check "batch: trees verified ($(trees batch1)), chain run none ($(trees batch0))" \
    "[ \"\$(trees batch1)\" -gt 0 ] && [ \"\$(trees batch0)\" = 0 ]"
check "batch: no leak" "noleak batch1"
for i in 0 1 2 3; do
    for TREE in plain 0 1; do gen "one$i-$TREE" "$T/one$i.jsonl"; done
    check "alone r$i: tree and chain = plain" "$PY -c '$same' $T/one$i-plain.out $T/one$i-1.out && $PY -c '$same' $T/one$i-plain.out $T/one$i-0.out"
done
acc() { "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["meta_info"]["spec_accept_length"])' "$T/$1.out"; }
a_tree=$(acc one0-1); a_chain=$(acc one0-0)
check "repeating prompt: accept length tree $a_tree >= chain $a_chain" "$PY -c 'import sys; sys.exit(0 if $a_tree >= $a_chain else 1)'"

# mixed workloads: chunked prefill + mixed chunks; a small pool that retracts
TREE=plain gen mixplain "$T/batch.jsonl" --chunked-prefill-size 16 --enable-mixed-chunk
TREE=1 gen mix1 "$T/batch.jsonl" --chunked-prefill-size 16 --enable-mixed-chunk
check "chunked 16 + mixed: tree = plain, no leak" "$PY -c '$same' $T/mixplain.out $T/mix1.out && noleak mix1"
TREE=plain gen poolplain "$T/batch.jsonl" --max-total-tokens 400
TREE=1 gen pool1 "$T/batch.jsonl" --max-total-tokens 400
check "400-token pool: tree = plain, no leak" "$PY -c '$same' $T/poolplain.out $T/pool1.out && noleak pool1"
# page 16: trees too (the accepted nodes' KV copied into the pages), and with a
# 400-token pool that retracts
TREE=plain gen page16plain "$T/batch.jsonl" --page-size 16
TREE=1 gen page16 "$T/batch.jsonl" --page-size 16
check "page 16: $(trees page16) tree verifies, = plain, no leak" "[ \"\$(trees page16)\" -gt 0 ] && $PY -c '$same' $T/page16plain.out $T/page16.out && noleak page16"
TREE=plain gen page16poolplain "$T/batch.jsonl" --page-size 16 --max-total-tokens 400 --chunked-prefill-size 32 --enable-mixed-chunk
TREE=1 gen page16pool "$T/batch.jsonl" --page-size 16 --max-total-tokens 400 --chunked-prefill-size 32 --enable-mixed-chunk
check "page 16, 400-token pool, chunked 32 + mixed: $(trees page16pool) tree verifies, = plain, no leak" "[ \"\$(trees page16pool)\" -gt 0 ] && $PY -c '$same' $T/page16poolplain.out $T/page16pool.out && noleak page16pool"

# tiny models: MLA and sliding windows verify trees too
for arch in deepseek-v2 mistral-sw gemma2 llama3; do
    [ -d "$TINY/$arch/f32" ] || { echo "skip $arch (no $TINY/$arch/f32; made by test_arch_logits.sh)"; continue; }
    MODEL=$TINY/$arch/f32 TREE=plain gen "t-$arch-plain" "$T/tiny.jsonl"
    MODEL=$TINY/$arch/f32 TREE=1 gen "t-$arch" "$T/tiny.jsonl"
    check "tiny $arch: tree ids = plain ($(trees t-$arch) tree verifies)" "$PY -c '$same' $T/t-$arch-plain.out $T/t-$arch.out"
done

[ $fails -eq 0 ] && echo "all spec tree checks passed" || echo "$fails failed"
[ $fails -eq 0 ]
