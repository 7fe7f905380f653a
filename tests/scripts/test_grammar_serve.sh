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
# The offline commands: generate --requests with grammar lines,
# bench-offline --regex / --json-schema.
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

# 1b. the same structured-output clients on a second family: a 1-layer
# random Llama 3.1 (--load-format dummy) with its real tokenizer and template
L31=$SHARED/models/configs/meta-llama__Llama-3.1-8B-Instruct/config.json
if [ -f "$L31" ] && [ -f "$ROOT/tests/js/node_modules/zod/package.json" ] && command -v node >/dev/null; then
    mkdir -p "$T/l31"
    "$PY" - "$L31" "$T/l31/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
         num_key_value_heads=1, head_dim=32, max_position_embeddings=4096)
json.dump(c, open(sys.argv[2], "w"))
PYEOF
    server_start "$T/llog" --model-path "$T/l31" --tokenizer-path "$SHARED/models/tokenizers/llama3_1" \
        --load-format dummy --threads 1 --served-model-name tiny --max-total-tokens 20000 \
        --constrained-json-disable-any-whitespace --skip-server-warmup || server_fail "$T/llog"
    if SGLC_URL=$SERVER_URL node --test "$ROOT/tests/js/grammar.test.mjs" >"$T/lnode" 2>&1; then
        echo "ok   JS clients on Llama 3.1: structured output ($(grep -c '^ok' "$T/lnode") passed)"
    else
        echo "FAIL JS clients on Llama 3.1: structured output"; cat "$T/lnode"; fails=$((fails + 1))
    fi
    server_stop
fi

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

# 4. offline: generate --requests (grammar lines) and bench-offline --regex / --json-schema
printf '%s\n' '{"text": "Hello", "sampling_params": {"json_schema": "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"],\"additionalProperties\":false}", "max_new_tokens": 30, "sampling_seed": 1}}' \
    '{"text": "Hi", "sampling_params": {"regex": "(", "max_new_tokens": 5}}' >"$T/req.jsonl"
"$BIN" generate --model-path "$Q" --requests "$T/req.jsonl" --threads 1 --constrained-json-disable-any-whitespace \
    >"$T/gen.out" 2>"$T/gen.err"
"$PY" - "$T/gen.out" <<'PYEOF' && echo "ok   generate --requests: json_schema line valid, bad regex line 400" || { echo "FAIL generate --requests grammar"; cat "$T/gen.out" "$T/gen.err"; fails=$((fails + 1)); }
import json, sys
a, b = [json.loads(l) for l in open(sys.argv[1])]
assert json.loads(a["text"]) in ({"a": True}, {"a": False}), a
assert a["meta_info"]["finish_reason"]["type"] == "stop", a
fr = b["meta_info"]["finish_reason"]
assert fr["status_code"] == 400 and fr["message"].startswith("Failed to compile regex grammar: "), b
PYEOF
echo '{"type":"object","properties":{"w":{"type":"array","items":{"enum":["ab","cd"]},"minItems":2,"maxItems":4}},"required":["w"],"additionalProperties":false}' >"$T/s.json"
for c in "--regex [a-z]{2,5}(,[a-z]{2,5}){3}" "--json-schema $T/s.json"; do
    "$BIN" bench-offline --model-path "$Q" --num-prompts 3 --random-input-len 8 --random-output-len 40 --threads 1 \
        --constrained-json-disable-any-whitespace $c --result-filename "$T/bo.jsonl" >"$T/bo.out" 2>&1 &&
        grep -q "Successful requests: *3" "$T/bo.out" && echo "ok   bench-offline ${c%% *}" ||
        { echo "FAIL bench-offline $c"; cat "$T/bo.out"; fails=$((fails + 1)); }
done
"$PY" -c "import json,sys; L=[json.loads(l) for l in open('$T/bo.jsonl')]; assert 'regex' in L[0]['constraint'] and 'json_schema' in L[1]['constraint']" &&
    echo "ok   bench-offline result lines name the constraint" || { echo "FAIL bench-offline constraint field"; fails=$((fails + 1)); }

# 5. --help says what the backend names mean
"$BIN" serve --help 2>&1 | grep -A3 -- '--grammar-backend' | grep -q "sglc's own grammar engine" &&
    echo "ok   --help: grammar backend names explained" || { echo "FAIL --help grammar backend"; fails=$((fails + 1)); }
"$BIN" serve --model-path "$M" --grammar-backend bogus >"$T/bad" 2>&1
[ $? = 2 ] && grep -q "grammar-backend" "$T/bad" && echo "ok   --grammar-backend bogus: exit 2" ||
    { echo "FAIL --grammar-backend bogus"; cat "$T/bad"; fails=$((fails + 1)); }

[ $fails = 0 ] && echo "PASS test_grammar_serve" || echo "FAIL test_grammar_serve ($fails)"
[ $fails = 0 ]
