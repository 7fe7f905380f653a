#!/usr/bin/env bash
# Gemma 3 through `sglc serve` end to end: the real gemma-3-1b-it config
# (tests/ref/configs) cut to 2 layers, dummy weights, the real Gemma 3
# tokenizer and chat template (../shared/models/tokenizers/gemma3).  A
# chat completion renders Gemma's turns and tokenizes them as
# test_gemma_tokenizer.sh pins (11 prompt tokens for one "Hi there" turn),
# runs the model (sliding + full layers, local rope, post-norms) and answers
# with OpenAI's shape; the server reports the Gemma architecture.  Dummy
# weights: the text is noise, only the plumbing is checked (the numbers are
# test_arch_gemma.sh's).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
TOK=$SHARED/models/tokenizers/gemma3
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$TOK/tokenizer.json" "$TOK/tokenizer_config.json"
T=$(mktemp -d); trap server_cleanup EXIT
M=$T/gemma-3-1b-it
mkdir -p "$M"
cp "$ROOT/tests/ref/configs/google__gemma-3-1b-it/config.json" "$M/"
ln -s "$TOK/tokenizer.json" "$TOK/tokenizer_config.json" "$M/"
export SGLC_SERVER_WAIT_S=${SGLC_SERVER_WAIT_S:-180}
server_start "$T/log" --model-path "$M" --load-format dummy --dtype bfloat16 \
    --json-model-override-args '{"num_hidden_layers": 2}' --threads 2 --max-total-tokens 2048 \
    || server_fail "$T/log"
curl -sf "$SERVER_URL/get_model_info" > "$T/info" || { echo "FAIL get_model_info"; exit 1; }
curl -sf "$SERVER_URL/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model": "m", "messages": [{"role": "user", "content": "Hi there"}], "max_tokens": 4, "temperature": 0}' \
    > "$T/chat" || { echo "FAIL chat completion: $(cat "$T/chat")"; tail -5 "$T/log"; exit 1; }
"$PY" - "$T/info" "$T/chat" <<'PY' || exit 1
import json, sys
info, chat = (json.load(open(p)) for p in sys.argv[1:3])
assert "Gemma3" in json.dumps(info), info
u = chat["usage"]
assert u["prompt_tokens"] == 11, u          # <bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n
assert 1 <= u["completion_tokens"] <= 4, u
msg = chat["choices"][0]["message"]
assert msg["role"] == "assistant" and isinstance(msg["content"], str), msg
print(f"ok   chat completion on Gemma 3 (dummy, 2 layers): {u}, finish {chat['choices'][0]['finish_reason']}")
PY
server_stop TERM
[ "$SERVER_RC" = 0 ] || { echo "FAIL server exit status $SERVER_RC"; exit 1; }
echo "ok   server stopped cleanly"
