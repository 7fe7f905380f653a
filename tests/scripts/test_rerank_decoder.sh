#!/usr/bin/env bash
# /v1/rerank on a decoder-only reranker (SGLang's text_decoder path,
# Qwen3-Reranker): a tiny random-weight Qwen3 with the real Qwen3
# tokenizer (tests/scripts/make_tiny_tok_model.py) served with a
# Qwen3-Reranker-style chat template (the answer can only be "yes" or
# "no"); each document's score = p(yes) / (p(yes) + p(no)) of the next
# token after the template rendered for [query, document] (+ instruct),
# against tests/ref/score_ref.py (torch_ref), the order, the documents.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$SHARED/models/tokenizers/qwen3/tokenizer.json" "$SHARED/models/configs/Qwen__Qwen3-0.6B/config.json"
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "skip: $PY has no torch/numpy"; exit 77; }
T=$(mktemp -d)
trap server_cleanup EXIT
REF="$PY $ROOT/tests/ref/score_ref.py"
Q=$("$PY" "$ROOT/tests/scripts/make_tiny_tok_model.py" "$ROOT/build/tiny-models" "$SHARED") ||
    { echo "FAIL make_tiny_tok_model"; exit 1; }
$REF template "$T/rerank.jinja"
server_start "$T/log" --model-path "$Q" --dtype float32 --threads 2 --chat-template "$T/rerank.jinja" ||
    server_fail "$T/log"
$REF rerank-decoder "$SERVER_URL" "$Q"
