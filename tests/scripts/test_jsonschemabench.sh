#!/usr/bin/env bash
# JSONSchemaBench (../shared/datasets/jsonschemabench) quick tier: 30
# schemas evenly spaced over the 9,557, translated and compiled, and one
# random constrained output each (`sglc grammar-sample`, Qwen3's
# tokenizer: a random-weight model, 128 tokens) checked by
# python3-jsonschema.  Passes with zero invalid outputs, >= 75% compiled
# (a small sample; the full run's bar is 85%) and >= 15 schemas
# validated.  JSB_LIMIT / JSB_MIN_VALIDATED widen it.
# The full run (every schema, the numbers in docs/notes/schema.md):
#   python3 tests/scripts/jsonschemabench.py --bench ../shared/datasets/jsonschemabench \
#     --tokenizer ../shared/models/tokenizers/qwen3 --n 1 --max-tokens 128 --min-validated 2000 --show-errors 20
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BENCH=$SHARED/datasets/jsonschemabench
TOK=$SHARED/models/tokenizers/qwen3
[ -d "$BENCH" ] || { echo "no JSONSchemaBench at $BENCH"; exit 77; }
[ -d "$TOK" ] || { echo "no Qwen3 tokenizer at $TOK"; exit 77; }
[ -x "$BIN" ] || { echo "no $BIN"; exit 77; }
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || { echo "python3-jsonschema is not installed"; exit 77; }
"$BIN" grammar-sample --help >/dev/null 2>&1 || { echo "sglc grammar-sample is not available"; exit 77; }
exec /usr/bin/python3 "$ROOT/tests/scripts/jsonschemabench.py" --bench "$BENCH" --tokenizer "$TOK" --sglc "$BIN" \
  --limit "${JSB_LIMIT:-30}" --n 1 --max-tokens 128 --min-compile 0.75 --min-validated "${JSB_MIN_VALIDATED:-15}" --show-errors 5
