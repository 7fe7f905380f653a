#!/usr/bin/env bash
# The scoring routes against tests/ref/score_ref.py (PyTorch reference):
#  - /v1/score on TinyStories-656K (real weights + tokenizer): token ids
#    and text, apply_softmax, item_first, SGLang's 400 messages, empty
#    items; /v1/rerank and /v1/classify refuse a generation model;
#  - --multi-item-scoring-delimiter: all items in one request, each scored
#    as query+D+item alone (the reference first shows a plain causal pass
#    would differ), an item holding D refused;
#  - tiny Qwen3ForSequenceClassification (3 named labels) and
#    LlamaForSequenceClassification (1 label, a reranker): /v1/classify
#    and /classify probs + labels, /v1/rerank scores / order / top_n /
#    return_documents, the 400 messages, /v1/score refused (embedding mode).
# The decoder-only reranker is test_rerank_decoder.sh.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
. "$ROOT/tests/scripts/lib_server.sh"
TS=$SHARED/models/TinyStories-656K
server_require "$TS/model.safetensors" "$SHARED/models/configs/Qwen__Qwen3-0.6B/config.json" \
    "$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json"
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "skip: $PY has no torch/numpy"; exit 77; }
T=$(mktemp -d)
trap server_cleanup EXIT
FAIL=0
REF="$PY $ROOT/tests/ref/score_ref.py"
OUT=$ROOT/build/tiny-models/score
mkdir -p "$OUT"
$REF build "$OUT" "$SHARED" >"$T/mk" 2>&1 || { cat "$T/mk"; echo "FAIL building the classifiers"; exit 1; }

run() { # run LOG ARGS... -- REFARGS...: a server, then the reference checks
    local log=$1 args=() ; shift
    while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
    server_start "$T/$log" --threads 2 "${args[@]}" || server_fail "$T/$log"
    $REF "$1" "$SERVER_URL" "${@:2}" || FAIL=1
    server_stop
}
run gen.log --model-path "$TS" -- score "$TS"
run mi.log --model-path "$TS" --multi-item-scoring-delimiter 3 -- score "$TS" --multi 3
grep -q "Radix cache is disabled because --multi-item-scoring-delimiter" "$T/mi.log" &&
    echo "ok   multi-item: radix cache and chunked prefill turned off (logged)" ||
    { echo "FAIL multi-item: no log line about the radix cache"; FAIL=1; }
run qwen.log --model-path "$OUT/qwen3-cls" -- classify "$OUT/qwen3-cls"
grep -q "sequence-classification model (3 labels): serving it as --is-embedding" "$T/qwen.log" &&
    echo "ok   classifier served as an embedding model (logged)" ||
    { echo "FAIL classifier: no log line"; FAIL=1; }
run llama.log --model-path "$OUT/llama-rerank" -- classify "$OUT/llama-rerank"
# tensor / pipeline parallelism (issue 12): the score head whole on every
# rank, after the last stage's final norm: the reference checks, and the raw
# scores of one process within 1e-5 relative
for M in qwen3-cls llama-rerank; do
    run "$M-1.log" --model-path "$OUT/$M" -- same "$T/$M.json" "$M tp=1"
    for par in "--tp-size 2" "--pp-size 2" "--tp-size 2 --pp-size 2"; do
        # shellcheck disable=SC2086
        run "$M-par.log" --model-path "$OUT/$M" $par -- same "$T/$M.json" "$M $par"
    done
done
run qwen-tp.log --model-path "$OUT/qwen3-cls" --tp-size 2 -- classify "$OUT/qwen3-cls"
[ $FAIL = 0 ] && echo "all checks passed"
exit $FAIL
