#!/usr/bin/env bash
# Embedding models (`sglc serve --is-embedding`).
#  golden: tiny random-weight qwen3-embed (from the Qwen3-Embedding-0.6B
#    config) and llama3 (tests/ref/make_tiny_model.py), prompts of 1..40
#    tokens in ONE /v1/embeddings request (batched by the scheduler) vs
#    tests/ref/torch_ref.py --embed (independent PyTorch: last token's
#    final-normed hidden state, L2-normalized): cosine > 0.9999, max abs
#    error < 1e-4, norm 1; /encode gives the same vectors; a repeated
#    request (radix prefix hits) too; Matryoshka `dimensions` (config
#    override is_matryoshka / matryoshka_dimensions) vs torch_ref
#    --dimensions and SGLang's messages.
#  API: TinyStories-656K with its tokenizer: /encode text / list shapes,
#    error cases (generation routes, dimensions, empty / blank / too long
#    input, bad token ids), /get_model_info; then the official OpenAI npm
#    client (tests/js/embed.test.mjs) when tests/js/node_modules has it.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$SHARED/models/configs/Qwen__Qwen3-Embedding-0.6B/config.json" \
    "$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json" \
    "$SHARED/models/TinyStories-656K/model.safetensors"
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "skip: $PY has no torch/numpy"; exit 77; }
T=$(mktemp -d)
trap server_cleanup EXIT
FAIL=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; FAIL=1; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

mkdir -p "$ROOT/build/tiny-models"
SGLC_SHARED=$SHARED "$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$ROOT/build/tiny-models" \
    --shared "$SHARED" --only qwen3-embed,llama3 >"$T/mk" 2>&1 || { cat "$T/mk"; echo "FAIL make_tiny_model"; exit 1; }

# prompts: lengths 1, 5, 17, 40 (ids < 512); the last two share a prefix
PROMPTS="7;11,12,13,14,15;$(seq -s, 100 116);$(seq -s, 100 139)"
JSON_PROMPTS="[[${PROMPTS//;/],[}]]"

post() { curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' "$SERVER_URL$1" -d "$2"; }

# compare.py REF OUT [key]: every vector of OUT (an /v1/embeddings answer,
# or a list of /encode answers) against REF's embeddings
cat >"$T/compare.py" <<'EOF'
import json, sys
import numpy as np
ref = json.load(open(sys.argv[1]))["embeddings"]
out = json.load(open(sys.argv[2]))
vecs = [d["embedding"] for d in out["data"]] if isinstance(out, dict) else [d["embedding"] for d in out]
assert len(vecs) == len(ref), (len(vecs), len(ref))
worst = 1.0
for r, v in zip(ref, vecs):
    r, v = np.array(r), np.array(v, dtype=np.float64)
    assert r.shape == v.shape, (r.shape, v.shape)
    cos = float(r @ v / np.linalg.norm(r) / np.linalg.norm(v))
    err = float(np.abs(r - v).max())
    assert cos > 0.9999 and err < 1e-4, (cos, err)
    assert abs(np.linalg.norm(v) - 1) < 1e-5, np.linalg.norm(v)
    worst = min(worst, cos)
print(f"{len(vecs)} vectors, min cosine {worst:.7f}")
EOF

for NAME in qwen3-embed llama3; do
    M=$ROOT/build/tiny-models/$NAME/f32
    "$PY" "$ROOT/tests/ref/torch_ref.py" --model-path "$M" --embed --input-ids "$PROMPTS" >"$T/ref.json" ||
        { bad "$NAME torch_ref"; continue; }
    server_start "$T/log" --model-path "$M" --is-embedding --skip-tokenizer-init --threads 1 || server_fail "$T/log"
    check "$NAME /v1/embeddings batch of 4 (1..40 tokens) vs torch_ref" \
        "[ \$(post /v1/embeddings '{\"model\": \"m\", \"input\": $JSON_PROMPTS}') = 200 ] && \"$PY\" \"$T/compare.py\" \"$T/ref.json\" \"$T/out\""
    cp "$T/out" "$T/first"
    check "$NAME usage.prompt_tokens = 63" \
        "\"$PY\" -c 'import json,sys; u=json.load(open(sys.argv[1]))[\"usage\"]; assert u[\"prompt_tokens\"]==63 and u[\"total_tokens\"]==63, u' \"$T/first\""
    check "$NAME /encode list of id lists == /v1/embeddings" \
        "[ \$(post /encode '{\"input_ids\": $JSON_PROMPTS}') = 200 ] && \"$PY\" \"$T/compare.py\" \"$T/ref.json\" \"$T/out\""
    check "$NAME repeated request (radix prefix hits) still matches" \
        "[ \$(post /v1/embeddings '{\"input\": $JSON_PROMPTS}') = 200 ] && \"$PY\" \"$T/compare.py\" \"$T/ref.json\" \"$T/out\""
    server_stop
done

# Matryoshka: any size with is_matryoshka, a fixed list with matryoshka_dimensions
M=$ROOT/build/tiny-models/qwen3-embed/f32
"$PY" "$ROOT/tests/ref/torch_ref.py" --model-path "$M" --embed --input-ids "$PROMPTS" --dimensions 16 >"$T/ref16.json"
server_start "$T/log" --model-path "$M" --is-embedding --skip-tokenizer-init --threads 1 \
    --json-model-override-args '{"is_matryoshka": true}' || server_fail "$T/log"
check "dimensions 16 vs torch_ref --dimensions 16" \
    "[ \$(post /v1/embeddings '{\"input\": $JSON_PROMPTS, \"dimensions\": 16}') = 200 ] && \"$PY\" \"$T/compare.py\" \"$T/ref16.json\" \"$T/out\""
check "dimensions 0 -> 400 greater than 0" \
    "[ \$(post /v1/embeddings '{\"input\": [1,2], \"dimensions\": 0}') = 400 ] && grep -q 'Requested dimensions must be greater than 0' \"$T/out\""
check "dimensions 65 -> 400 max embedding dimension 64" \
    "[ \$(post /v1/embeddings '{\"input\": [1,2], \"dimensions\": 65}') = 400 ] && grep -q 'Provided dimensions are greater than max embedding dimension: 64' \"$T/out\""
server_stop
server_start "$T/log" --model-path "$M" --is-embedding --skip-tokenizer-init --threads 1 \
    --json-model-override-args '{"matryoshka_dimensions": [16, 32]}' || server_fail "$T/log"
check "matryoshka_dimensions [16, 32]: 8 -> 400, 16 ok" \
    "[ \$(post /v1/embeddings '{\"input\": [1,2], \"dimensions\": 8}') = 400 ] && grep -q 'only supports \[16, 32\] matryoshka dimensions' \"$T/out\" && [ \$(post /encode '{\"input_ids\": [[7],[11,12,13,14,15]], \"dimensions\": 16}') = 200 ] && \"$PY\" -c 'import json,sys; o=json.load(open(sys.argv[1])); assert [len(x[\"embedding\"]) for x in o]==[16,16]' \"$T/out\""
server_stop

# API contract on TinyStories-656K (a Llama model used as an embedding model, with its tokenizer)
TS=$SHARED/models/TinyStories-656K
server_start "$T/log" --model-path "$TS" --is-embedding --threads 1 --context-length 64 || server_fail "$T/log"
jq_() { "$PY" -c "import json,sys; d=json.load(open('$T/out')); print($1)"; }
check "/get_model_info is_generation false" "[ \$(curl -s -o $T/out -w '%{http_code}' $SERVER_URL/get_model_info) = 200 ] && [ \"\$(jq_ 'd[\"is_generation\"]')\" = False ]"
check "/encode text -> {embedding, meta_info}" \
    "[ \$(post /encode '{\"text\": \"Once upon a time\", \"rid\": \"e1\"}') = 200 ] && [ \"\$(jq_ 'len(d[\"embedding\"]) == 128 and d[\"meta_info\"][\"id\"] == \"e1\" and d[\"meta_info\"][\"finish_reason\"] == {\"type\": \"length\", \"length\": 0} and d[\"meta_info\"][\"prompt_tokens\"] > 0')\" = True ]"
check "/encode text list -> list of 2" \
    "[ \$(post /encode '{\"text\": [\"a cat\", \"a dog sat\"]}') = 200 ] && [ \"\$(jq_ 'len(d)')\" = 2 ]"
check "/generate on an embedding server -> 400" \
    "[ \$(post /generate '{\"text\": \"hi\"}') = 400 ] && grep -q 'not appear to be a generation model' $T/out"
check "/v1/completions on an embedding server -> 400" \
    "[ \$(post /v1/completions '{\"model\": \"m\", \"prompt\": \"hi\"}') = 400 ] && grep -q 'is-embedding' $T/out"
check "/v1/chat/completions on an embedding server -> 400" \
    "[ \$(post /v1/chat/completions '{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}') = 400 ]"
check "dimensions on a non-Matryoshka model -> 400 SGLang message" \
    "[ \$(post /v1/embeddings '{\"input\": \"hi\", \"dimensions\": 8}') = 400 ] && grep -q \"does not support matryoshka representation, changing output dimensions will lead to poor results.\" $T/out"
check "empty input -> 400 Input cannot be empty" \
    "[ \$(post /v1/embeddings '{\"input\": \"\"}') = 400 ] && grep -q 'Input cannot be empty' $T/out && [ \$(post /v1/embeddings '{\"input\": []}') = 400 ]"
check "blank list item -> 400 index 1" \
    "[ \$(post /v1/embeddings '{\"input\": [\"a\", \"  \"]}') = 400 ] && grep -q 'Input at index 1 cannot be empty or whitespace only' $T/out"
check "empty id list -> 400" \
    "[ \$(post /v1/embeddings '{\"input\": [[1], []]}') = 400 ] && grep -q 'Input at index 1 cannot be empty' $T/out"
check "negative token id -> 400" \
    "[ \$(post /v1/embeddings '{\"input\": [1, -2]}') = 400 ] && grep -q 'Token ID at index 1 must be non-negative' $T/out"
check "token id outside the vocabulary -> 400" \
    "[ \$(post /encode '{\"input_ids\": [1, 99999]}') = 400 ] && grep -q 'out of range' $T/out"
LONG=$("$PY" -c 'print(" ".join(["Once upon a time there was a cat."] * 30))')
check "too long input -> 400 context length" \
    "[ \$(post /v1/embeddings \"{\\\"input\\\": \\\"$LONG\\\"}\") = 400 ] && grep -q 'context length' $T/out"
check "encoding_format bad -> 400" \
    "[ \$(post /v1/embeddings '{\"input\": \"a\", \"encoding_format\": \"int8\"}') = 400 ]"
check "/encode with both text and input_ids -> 400" \
    "[ \$(post /encode '{\"text\": \"a\", \"input_ids\": [1]}') = 400 ]"
if [ -f "$ROOT/tests/js/node_modules/openai/package.json" ] && command -v node >/dev/null; then
    if SGLC_URL=$SERVER_URL node --test "$ROOT/tests/js/embed.test.mjs" >"$T/node" 2>&1; then
        ok "openai client embedding tests ($(grep -c '^ok' "$T/node") passed)"
    else
        cat "$T/node"
        bad "openai client embedding tests"
    fi
else
    echo "note: tests/js/node_modules/openai missing: OpenAI client part not run (npm ci in tests/js)"
fi
server_stop
[ "$SERVER_RC" = 0 ] || bad "server exit status $SERVER_RC"
exit $FAIL
