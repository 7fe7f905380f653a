#!/usr/bin/env bash
# Constrained decoding through `sglc serve` on a tiny random-weight Qwen3
# with the real Qwen3 tokenizer (tests/scripts/make_tiny_tok_model.py;
# TinyStories' vocabulary has no '{'): native
# sampling_params regex / ebnf / json_schema, OpenAI response_format
# (json_schema, json_object, structural_tag) and the regex / ebnf extras,
# logprobs of the masked distribution, compile errors as 400s while a
# concurrent request completes untouched, a constrained and an
# unconstrained request in one batch, n > 1, streaming, /metrics; then
# TinyStories-656K (SentencePiece vocabulary) with regex / EBNF, and
# --grammar-backend none.  Outputs are checked by independent references
# (python re, python3-jsonschema): tests/scripts/grammar_serve_check.py.
# Then the JS clients (tests/js/grammar.test.mjs): OpenAI
# chat.completions.parse with zod, LangChain withStructuredOutput, AI SDK
# generateObject / streamObject.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
"$PY" -c 'import jsonschema' 2>/dev/null || { echo "skip: python3-jsonschema not installed"; exit 77; }
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0

Q=$("$PY" "$ROOT/tests/scripts/make_tiny_tok_model.py" "$ROOT/build/tiny-models" "$SHARED") ||
    { echo "FAIL make_tiny_tok_model"; exit 1; }

# 1. the engine on (SGLang's default backend name), compact JSON so a weak model ends its objects
server_start "$T/log" --model-path "$Q" --threads 1 --served-model-name tiny \
    --max-total-tokens 20000 --grammar-backend xgrammar --constrained-json-disable-any-whitespace --enable-metrics ||
    server_fail "$T/log"
if ! "$PY" "$ROOT/tests/scripts/grammar_serve_check.py" "$SERVER_URL" main; then
    fails=$((fails + 1))
    tail -20 "$T/log"
fi
if [ -f "$ROOT/tests/js/node_modules/zod/package.json" ] && command -v node >/dev/null; then
    if SGLC_URL=$SERVER_URL node --test "$ROOT/tests/js/grammar.test.mjs" >"$T/node" 2>&1; then
        echo "ok   JS clients: structured output ($(grep -c '^ok' "$T/node") passed)"
    else
        echo "FAIL JS clients: structured output"; cat "$T/node"; fails=$((fails + 1))
    fi
else
    echo "skip JS clients (tests/js/node_modules or node missing)"
fi
server_stop TERM
[ "$SERVER_RC" = 0 ] || { echo "FAIL server exit status $SERVER_RC"; fails=$((fails + 1)); }

# 2. a SentencePiece vocabulary (TinyStories), another backend name
server_start "$T/log3" --model-path "$M" --threads 1 --served-model-name tiny --chat-template chatml \
    --max-total-tokens 20000 --grammar-backend llguidance || server_fail "$T/log3"
"$PY" "$ROOT/tests/scripts/grammar_serve_check.py" "$SERVER_URL" sp || fails=$((fails + 1))
server_stop TERM

# 3. --grammar-backend none
server_start "$T/log2" --model-path "$M" --threads 1 --served-model-name tiny --chat-template chatml \
    --max-total-tokens 20000 --grammar-backend none || server_fail "$T/log2"
"$PY" "$ROOT/tests/scripts/grammar_serve_check.py" "$SERVER_URL" none || fails=$((fails + 1))
server_stop TERM

# 4. --help says what the backend names mean
"$BIN" serve --help 2>&1 | grep -A3 -- '--grammar-backend' | grep -q "sglc's own grammar engine" &&
    echo "ok   --help: grammar backend names explained" || { echo "FAIL --help grammar backend"; fails=$((fails + 1)); }
"$BIN" serve --model-path "$M" --grammar-backend bogus >"$T/bad" 2>&1
[ $? = 2 ] && grep -q "grammar-backend" "$T/bad" && echo "ok   --grammar-backend bogus: exit 2" ||
    { echo "FAIL --grammar-backend bogus"; cat "$T/bad"; fails=$((fails + 1)); }

[ $fails = 0 ] && echo "PASS test_grammar_serve" || echo "FAIL test_grammar_serve ($fails)"
[ $fails = 0 ]
