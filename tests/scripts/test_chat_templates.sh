#!/usr/bin/env bash
# Golden test: sglc's Jinja engine against Python jinja2 set up as
# transformers does (tests/ref/jinja_ref.py), over every chat template in
# $SGLC_SHARED/models (tokenizers/* and configs/*) plus the feature
# templates in tests/ref/templates/, on a generated conversation corpus.
# Prompts must match byte for byte; errors must match (see compare_chat.py).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SGLC=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
PY=/usr/bin/python3
[ -x "$SGLC" ] || { echo "sglc binary not built: $SGLC"; exit 1; }
$PY -c 'import jinja2' 2>/dev/null || { echo "skip: /usr/bin/python3 has no jinja2 (apt-get install python3-jinja2)"; exit 77; }
[ -d "$SHARED/models" ] || { echo "skip: no shared models at $SHARED/models"; exit 77; }
export SGLC_FIXED_DATE=2024-07-26
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$PY "$ROOT/tests/ref/gen_chat_corpus.py" 400 1234 > "$tmp/corpus.jsonl"
fail=0; n=0
run_one() { # name, args...
  local name=$1; shift
  "$SGLC" chat-template "$@" < "$tmp/corpus.jsonl" > "$tmp/sglc.jsonl" 2> "$tmp/sglc.err" || {
    echo "$name: sglc failed: $(cat "$tmp/sglc.err")"; fail=1; return; }
  $PY "$ROOT/tests/ref/jinja_ref.py" "$@" < "$tmp/corpus.jsonl" > "$tmp/ref.jsonl" || {
    echo "$name: reference failed"; fail=1; return; }
  $PY "$ROOT/tests/ref/compare_chat.py" "$name" "$tmp/sglc.jsonl" "$tmp/ref.jsonl" "$tmp/corpus.jsonl" || fail=1
  n=$((n + 1))
}
for cfg in "$SHARED"/models/tokenizers/*/tokenizer_config.json "$SHARED"/models/configs/*/tokenizer_config.json; do
  [ -f "$cfg" ] || continue
  dir=$(dirname "$cfg")
  kind=$($PY -c 'import json,sys; t=json.load(open(sys.argv[1])).get("chat_template"); print("none" if t is None else "list" if isinstance(t,list) else "str")' "$cfg")
  case $kind in
    none) echo "$(basename "$dir"): no chat_template (skipped)";;
    str) run_one "$(basename "$dir")" --tokenizer-path "$dir";;
    list) for nm in $($PY -c 'import json,sys; print(" ".join(e["name"] for e in json.load(open(sys.argv[1]))["chat_template"]))' "$cfg"); do
            run_one "$(basename "$dir"):$nm" --tokenizer-path "$dir" --hf-chat-template-name "$nm"; done;;
  esac
done
for t in "$ROOT"/tests/ref/templates/*.jinja; do
  [ -f "$t" ] || continue
  run_one "$(basename "$t")" --tokenizer-path "$SHARED/models/tokenizers/llama3_1" --chat-template "$t"
done
echo "$n templates compared"
[ "$n" -gt 0 ] || { echo "no templates found"; exit 1; }
exit $fail
