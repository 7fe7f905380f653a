#!/usr/bin/env bash
# Tokenizer exactness against Hugging Face (transformers.js' tokenizer engine,
# @huggingface/tokenizers, pinned in tests/js/package-lock.json).
#  1. generate the expected ids/texts for the >= 5,000-string corpus and every
#     tokenizer in ../shared/models plus four synthetic ones that exercise
#     WordPiece, Unigram, GPT-2 ByteLevel and the Bert/Sequence components
#     (tests/js/make_synthetic_tokenizers.mjs) into build/tok-fixtures
#     (regenerated when the generators or the corpus change);
#  2. build/tests/test_tokenizer compares encode (with and without special
#     tokens), decode (skip_special_tokens both ways) and id-by-id streaming;
#  3. `sglc tokenize` / `sglc detokenize` agree with the fixtures on a sample
#     and answer bad lines with {"error": ...} without stopping.
# Exit 77 (skip) when node, the npm packages or the shared models are missing.
set -euo pipefail
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BUILD=${BUILD:-build}
cd "$ROOT"
command -v node >/dev/null || { echo "skip: node is not installed"; exit 77; }
[ -d tests/js/node_modules/@huggingface/tokenizers ] || { echo "skip: run 'npm ci --ignore-scripts' in tests/js first"; exit 77; }
[ -f "$SHARED/models/tokenizers/qwen3/tokenizer.json" ] || { echo "skip: no tokenizers under $SHARED/models"; exit 77; }
[ -x "$BUILD/tests/test_tokenizer" ] && [ -x "$BUILD/sglc" ] || { echo "skip: build first (make)"; exit 77; }

FIX="$ROOT/$BUILD/tok-fixtures"
SYN="$ROOT/$BUILD/tok-synthetic"
models=("$SHARED"/models/tokenizers/*/ "$SHARED/models/TinyStories-656K/")
stamp="$FIX/.stamp"
if [ ! -f "$stamp" ] || [ tests/js/gen_tokenizer_fixtures.mjs -nt "$stamp" ] || [ tests/js/corpus.mjs -nt "$stamp" ] \
   || [ tests/js/make_synthetic_tokenizers.mjs -nt "$stamp" ] || [ tests/js/package-lock.json -nt "$stamp" ]; then
  rm -rf "$FIX" "$SYN"; mkdir -p "$FIX"
  (cd tests/js && node make_synthetic_tokenizers.mjs "$SYN" && node gen_tokenizer_fixtures.mjs "$FIX" "${models[@]%/}" "$SYN"/*)
  touch "$stamp"
fi

SGLC_TOK_FIXTURES="$FIX" SGLC_TOK_EXTRA="$SYN" SGLC_SHARED="$SHARED" "$BUILD/tests/test_tokenizer"

# CLI: sample lines of each fixture through sglc tokenize / detokenize.
for m in "${models[@]%/}"; do
  name=$(basename "$m")
  /usr/bin/python3 - "$FIX/$name.jsonl" "$BUILD/sglc" "$m" <<'PY'
import json, subprocess, sys
fix, sglc, model = sys.argv[1:4]
rows = [json.loads(l) for l in open(fix, encoding="utf-8")][::37]
reqs = []
for r in rows:
    text = bytes.fromhex(r["hex"]).decode("utf-8", errors="replace")
    reqs.append(json.dumps({"text": text, "add_special_tokens": True}))
    reqs.append(json.dumps({"text": text, "add_special_tokens": False}))
reqs.insert(3, "this is not json")
reqs.insert(5, json.dumps({"text": 42}))
out = subprocess.run([sglc, "tokenize", "--tokenizer-path", model], input="\n".join(reqs) + "\n",
                     capture_output=True, text=True, check=True).stdout.splitlines()
assert len(out) == len(reqs), (len(out), len(reqs))
assert "error" in json.loads(out[3]) and "error" in json.loads(out[5]), (out[3], out[5])
del out[5]; del out[3]
for i, r in enumerate(rows):
    assert json.loads(out[2 * i])["ids"] == r["ids"], (model, r["hex"][:80])
    assert json.loads(out[2 * i + 1])["ids"] == r["ids0"], (model, r["hex"][:80])
dreqs = [json.dumps({"ids": r["ids"], "skip_special_tokens": s}) for r in rows for s in (False, True)]
dreqs.append(json.dumps({"ids": [-5]}))
out = subprocess.run([sglc, "detokenize", "--tokenizer-path", model], input="\n".join(dreqs) + "\n",
                     capture_output=True, text=True, check=True).stdout.splitlines()
assert len(out) == len(dreqs)
assert "error" in json.loads(out[-1])
for i, r in enumerate(rows):
    assert json.loads(out[2 * i])["text"] == r["dec"], (model, r["hex"][:80])
    assert json.loads(out[2 * i + 1])["text"] == r["dec_skip"], (model, r["hex"][:80])
print(f"cli {model}: {len(rows)} strings ok")
PY
done
echo "tokenizer exactness: all tokenizers match Hugging Face"
