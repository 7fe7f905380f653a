#!/usr/bin/env bash
# `sglc serve` end to end on TinyStories-656K: raw HTTP for the native
# routes, error codes and shapes, SSE streaming, client disconnect, API key;
# then the official OpenAI client (npm `openai`, node --test) when
# tests/js/node_modules has it.  References: the offline `sglc generate`
# (single-request path, no HTTP, no scheduler thread) for greedy ids, and
# `sglc tokenize` for /tokenize.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

KEY=sk-test-key
server_start "$T/log" --model-path "$M" --threads 1 --api-key $KEY \
    --served-model-name tiny --chat-template chatml --max-payload-size 100000 \
    --max-total-tokens 20000 --preferred-sampling-params '{"max_new_tokens": 5}' --enable-cache-report --fastapi-root-path /api --weight-version w1 --completion-template qwen_coder ||
    server_fail "$T/log"
PORT=$SERVER_PORT
URL=$SERVER_URL
A=(-H "Authorization: Bearer $KEY")
# req METHOD PATH [BODY] -> $T/body, prints the status
req() {
    if [ $# -ge 3 ]; then curl -s -m 60 -o "$T/body" -w '%{http_code}' -X "$1" "${A[@]}" -H 'Content-Type: application/json' --data-binary "$3" "$URL$2"
    else curl -s -m 60 -o "$T/body" -w '%{http_code}' -X "$1" "${A[@]}" "$URL$2"; fi
}
jq_() { $PY -c "import json,sys; d=json.load(open('$T/body')); print($1)"; }

# --- native routes
check "health 200 without key" "[ \$(curl -s -o /dev/null -w '%{http_code}' $URL/health) = 200 ]"
check "no key -> 401" "[ \$(curl -s -o $T/body -w '%{http_code}' $URL/get_model_info) = 401 ] && grep -q Unauthorized $T/body"
check "wrong key -> 401" "[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope' $URL/v1/models) = 401 ]"
# one error shape on /v1: SGLang's top-level fields and OpenAI's error object
OAIERR="all(k in d for k in ('object','message','type','param','code')) and sorted(d['error']) == ['code','message','param','type'] and d['error']['message']"
check "/v1 400 body: SGLang fields + error.{message,type,param,code}" "[ \$(req POST /v1/completions '{\"model\":\"tiny\",\"prompt\":\"x\",\"logprobs\":99}') = 400 ] && [ \"\$(jq_ \"$OAIERR\")\" = 'logprobs must be between 0 and 20' ]"
check "/v1 401 body: SGLang fields + error object" "[ \$(curl -s -o $T/body -w '%{http_code}' -H 'Authorization: Bearer nope' $URL/v1/models) = 401 ] && [ \"\$(jq_ \"$OAIERR\")\" = Unauthorized ]"
check "/v1 unknown route 404 body: detail + error object" "[ \$(req GET /v1/nope) = 404 ] && [ \"\$(jq_ \"d['detail'] if $OAIERR else ''\")\" = 'Not Found' ]"
head -c 100001 /dev/zero >"$T/big" # one byte over --max-payload-size
check "/v1 413 body: SGLang fields + error object" "[ \$(curl -s -m 60 -o $T/body -w '%{http_code}' \"\${A[@]}\" -H 'Content-Type: application/json' --data-binary @$T/big $URL/v1/completions) = 413 ] && [ \"\$(jq_ \"$OAIERR\")\" = 'Request body too large (limit 100000 bytes).' ]"
rm -f "$T/big"
check "/v1/score (api_score.c) 400 in the /v1 error shape" "[ \$(req POST /v1/score '{}') = 400 ] && [ \"\$(jq_ \"$OAIERR\")\" = 'label_token_ids must be provided' ]"
check "unknown stored response: 404 naming it" "[ \$(req GET /v1/responses/resp_1) = 404 ] && [ \"\$(jq_ \"$OAIERR\")\" = \"Response with id 'resp_1' not found.\" ]"
check "native route not served yet: 404 naming it" "[ \$(req POST /open_session '{}') = 404 ] && grep -q 'sessions are not implemented' $T/body"
check "/ping (SageMaker) = health" "[ \$(req GET /ping) = 200 ]"
# CORS as SGLang's CORSMiddleware: every origin; preflights answered without the key
curl -s -m 30 -o /dev/null -D "$T/h" "${A[@]}" -H 'Origin: http://app.example' "$URL/v1/models"
check "CORS: answer allows any origin" "grep -qi '^access-control-allow-origin: \*' $T/h && grep -qi '^access-control-allow-credentials: true' $T/h"
curl -s -m 30 -o "$T/body" -D "$T/h" -X OPTIONS -H 'Origin: http://app.example' -H 'Access-Control-Request-Method: POST' \
    -H 'Access-Control-Request-Headers: authorization,content-type' "$URL/v1/chat/completions"
check "CORS: preflight 200 without the key, origin and headers echoed" "head -1 $T/h | grep -q ' 200' && grep -qi '^access-control-allow-origin: http://app.example' $T/h && grep -qi '^access-control-allow-headers: authorization,content-type' $T/h && grep -qi '^access-control-allow-methods: .*POST' $T/h && [ \"\$(cat $T/body)\" = OK ]"
curl -s -m 30 -o /dev/null -D "$T/h" "${A[@]}" "$URL/v1/models"
check "CORS: no Origin, no CORS headers" "! grep -qi '^access-control-' $T/h"
check "get_model_info" "[ \$(req GET /get_model_info) = 200 ] && [ \"\$(jq_ 'd[\"is_generation\"]')\" = True ]"
check "get_server_info has the effective args" "[ \$(req GET /get_server_info) = 200 ] && [ \"\$(jq_ 'd[\"port\"], d[\"served_model_name\"]')\" = \"$PORT tiny\" ]"
check "health_generate" "[ \$(req GET /health_generate) = 200 ]"
check "get_load" "[ \$(req GET /get_load) = 200 ] && [ \"\$(jq_ 'd[0][\"num_reqs\"]')\" = 0 ]"

"$BIN" generate --model-path "$M" --input-ids 1,147,201 --max-new-tokens 8 --temperature 0 --json >"$T/ref" 2>/dev/null
REF=$($PY -c "import json; print(json.load(open('$T/ref'))['output_ids'])" 2>/dev/null)
check "reference ids from sglc generate" "[ -n \"$REF\" ]"
check "/generate input_ids greedy = offline generate" \
    "[ \$(req POST /generate '{\"input_ids\":[1,147,201],\"sampling_params\":{\"max_new_tokens\":8,\"temperature\":0}}') = 200 ] && [ \"\$(jq_ 'd[\"output_ids\"]')\" = \"$REF\" ]"
check "/generate meta_info" "[ \"\$(jq_ 'd[\"meta_info\"][\"finish_reason\"][\"type\"], d[\"meta_info\"][\"prompt_tokens\"], d[\"meta_info\"][\"completion_tokens\"]')\" = 'length 3 8' ]"
check "/generate text = detokenize(output_ids)" \
    "T1=\$(jq_ 'd[\"text\"]'); IDS=\$(jq_ 'd[\"output_ids\"]'); [ \$(req POST /detokenize \"{\\\"tokens\\\":\$IDS}\") = 200 ] && [ \"\$(jq_ 'd[\"text\"]')\" = \"\$T1\" ]"
echo '{"text":"Once upon a time"}' | "$BIN" tokenize --tokenizer-path "$M" >"$T/tokref" 2>/dev/null
TOKREF=$($PY -c "import json; print(json.loads(open('$T/tokref').readline())['ids'])" 2>/dev/null)
check "/tokenize = sglc tokenize" "[ \$(req POST /tokenize '{\"prompt\":\"Once upon a time\"}') = 200 ] && [ \"\$(jq_ 'd[\"tokens\"]')\" = \"$TOKREF\" ]"
check "--preferred-sampling-params fills /generate (max_new_tokens 5), request wins" \
    "[ \$(req POST /generate '{\"input_ids\":[1,147]}') = 200 ] && [ \"\$(jq_ 'd[\"meta_info\"][\"completion_tokens\"]')\" = 5 ] && [ \$(req POST /generate '{\"input_ids\":[1,147],\"sampling_params\":{\"max_new_tokens\":2}}') = 200 ] && [ \"\$(jq_ 'd[\"meta_info\"][\"completion_tokens\"]')\" = 2 ] && [ \$(req GET /get_model_info) = 200 ] && [ \"\$(jq_ 'd[\"preferred_sampling_params\"]')\" = \"{'max_new_tokens': 5}\" ]"
check "/generate text batch -> list of 2" \
    "[ \$(req POST /generate '{\"text\":[\"Once upon a time\",\"The cat\"],\"sampling_params\":{\"max_new_tokens\":3,\"temperature\":0}}') = 200 ] && [ \"\$(jq_ 'len(d), d[0][\"meta_info\"][\"completion_tokens\"]')\" = '2 3' ]"
check "/generate n=2 -> list of 2" \
    "[ \$(req POST /generate '{\"text\":\"Once\",\"sampling_params\":{\"max_new_tokens\":3,\"n\":2}}') = 200 ] && [ \"\$(jq_ 'len(d)')\" = 2 ]"
check "/generate return_logprob" \
    "[ \$(req POST /generate '{\"input_ids\":[1,147],\"return_logprob\":true,\"top_logprobs_num\":2,\"sampling_params\":{\"max_new_tokens\":3,\"temperature\":0}}') = 200 ] && [ \"\$(jq_ 'len(d[\"meta_info\"][\"output_token_logprobs\"]), len(d[\"meta_info\"][\"output_top_logprobs\"][0])')\" = '3 2' ]"
check "/generate return_text_in_logprobs: texts = detokenized ids" \
    "[ \$(req POST /generate '{\"input_ids\":[1,147],\"return_logprob\":true,\"return_text_in_logprobs\":true,\"top_logprobs_num\":2,\"sampling_params\":{\"max_new_tokens\":3,\"temperature\":0}}') = 200 ] && $PY -c \"
import json; d=json.load(open('$T/body')); m=d['meta_info']
assert ''.join(e[2] for e in m['output_token_logprobs']) == d['text'], (m, d['text'])
assert all(isinstance(e[2], str) for row in m['output_top_logprobs'] for e in row)
\""
check "/generate stop string" \
    "[ \$(req POST /generate '{\"input_ids\":[1,147,201],\"sampling_params\":{\"max_new_tokens\":30,\"temperature\":0,\"stop\":[\"Lily\"]}}') = 200 ] && [ \"\$(jq_ 'd[\"meta_info\"][\"finish_reason\"]')\" = \"{'type': 'stop', 'matched': 'Lily'}\" ] && ! grep -q '\"text\":\"[^\"]*Lily' $T/body"

# streaming: cumulative text, ends with [DONE], last text = non-stream text
curl -s -m 60 -N "${A[@]}" "$URL/generate" -d '{"input_ids":[1,147,201],"stream":true,"sampling_params":{"max_new_tokens":8,"temperature":0}}' >"$T/sse"
check "SSE ends with data: [DONE]" "[ \"\$(grep -v '^\$' $T/sse | tail -1)\" = 'data: [DONE]' ]"
check "SSE: >= 8 chunks, cumulative, last = full result" "$PY - <<PYEOF
import json
chunks=[json.loads(l[6:]) for l in open('$T/sse') if l.startswith('data: {')]
assert len(chunks) >= 8, len(chunks)
t=[c['text'] for c in chunks]
assert all(t[i+1].startswith(t[i]) for i in range(len(t)-1)), t
assert chunks[-1]['output_ids'] == $REF, chunks[-1]
assert chunks[-1]['meta_info']['finish_reason']['type'] == 'length'
assert all(c['meta_info']['finish_reason'] is None for c in chunks[:-1])
PYEOF"

# --- errors
check "non-JSON body -> 400 native shape" "[ \$(req POST /generate '{nope') = 400 ] && [ -n \"\$(jq_ 'd[\"error\"][\"message\"]')\" ]"
check "text and input_ids -> 400" "[ \$(req POST /generate '{\"text\":\"a\",\"input_ids\":[1]}') = 400 ] && grep -q 'not both' $T/body"
check "bad sampling param -> 400 (SGLang message)" "[ \$(req POST /generate '{\"input_ids\":[1],\"sampling_params\":{\"top_p\":2}}') = 400 ] && grep -q 'top_p must be in (0, 1]' $T/body"
check "context overflow -> 400" "[ \$(req POST /generate \"{\\\"input_ids\\\":[\$(seq -s, 1 600)]}\") = 400 ]"
check "unknown route -> 404" "[ \$(req GET /nope) = 404 ]"
check "body over --max-payload-size -> 413" "[ \$(head -c 200000 /dev/zero | tr '\\\\0' a | curl -s -o /dev/null -w '%{http_code}' \"\${A[@]}\" --data-binary @- $URL/generate) = 413 ]"
check "OpenAI error shape" "[ \$(req POST /v1/completions '{\"model\":\"tiny\",\"prompt\":\"a\",\"temperature\":-1}') = 400 ] && [ \"\$(jq_ 'd[\"object\"], d[\"code\"], d[\"type\"]')\" = 'error 400 BadRequest' ]"
# --- suffix: fill-in-the-middle through --completion-template qwen_coder
FIM='<|fim_prefix|>Once upon<|fim_suffix|> happily ever after.<|fim_middle|>'
FIMN=$(printf '%s' "$FIM" | $PY -c 'import json,sys; print(json.dumps({"text": sys.stdin.read(), "add_special_tokens": True}))' | "$BIN" tokenize --tokenizer-path "$M" 2>/dev/null | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["ids"]))')
check "suffix: prompt is the qwen_coder FIM prompt" "[ \$(req POST /v1/completions '{\"model\":\"tiny\",\"prompt\":\"Once upon\",\"suffix\":\" happily ever after.\",\"max_tokens\":2}') = 200 ] && [ \"\$(jq_ 'd[\"usage\"][\"prompt_tokens\"]')\" = \"$FIMN\" ]"
check "empty suffix leaves the prompt alone" "[ \$(req POST /v1/completions '{\"model\":\"tiny\",\"prompt\":\"Once upon\",\"suffix\":\"\",\"max_tokens\":2}') = 200 ] && [ \"\$(jq_ 'd[\"usage\"][\"prompt_tokens\"]')\" -lt \"$FIMN\" ]"
check "suffix with a list prompt -> 400" "[ \$(req POST /v1/completions '{\"model\":\"tiny\",\"prompt\":[\"a\",\"b\"],\"suffix\":\"x\"}') = 400 ]"
check "--hf-chat-template-name without such a template -> exit 2" "\"$BIN\" serve --model-path \"$M\" --hf-chat-template-name tool_use --port 1 >/dev/null 2>\"$T/hf.err\"; [ \$? -eq 2 ] && grep -q hf-chat-template-name \"$T/hf.err\""
check "bad --completion-template -> exit 2" "\"$BIN\" serve --model-path \"$M\" --completion-template nope >/dev/null 2>\"$T/ct.err\"; [ \$? -eq 2 ] && grep -q qwen_coder \"$T/ct.err\""
check "OpenAI tools accepted (issue 10; test_tools_serve.sh)" "[ \$(req POST /v1/chat/completions '{\"model\":\"tiny\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}') = 200 ]"
check "OpenAI tools not a list -> 400" "[ \$(req POST /v1/chat/completions '{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":{\"f\":1}}') = 400 ]"
check "/v1/models/{unknown} -> 404 model_not_found" "[ \$(req GET /v1/models/nope) = 404 ] && grep -q model_not_found $T/body"

# --fastapi-root-path, --weight-version, --enable-cache-report
check "root path prefix served" "[ \$(req GET /api/get_model_info) = 200 ] && [ \"\$(jq_ 'd[\"weight_version\"]')\" = w1 ]"
check "cache report in usage" "[ \$(req POST /v1/completions '{\"model\":\"tiny\",\"prompt\":\"Once upon a time\",\"max_tokens\":2}') = 200 ] && [ \"\$(jq_ 'd[\"usage\"][\"prompt_tokens_details\"][\"cached_tokens\"] >= 1')\" = True ]"

# client disconnect mid-stream aborts: the server stays healthy and idle
curl -s -m 1 -N "${A[@]}" "$URL/generate" -d '{"input_ids":[1,147],"stream":true,"sampling_params":{"max_new_tokens":null,"ignore_eos":true}}' >/dev/null 2>&1
sleep 0.5
check "after a vanished client: get_load back to 0" "for i in \$(seq 1 50); do [ \$(req GET /get_load) = 200 ] && [ \"\$(jq_ 'd[0][\"num_reqs\"]')\" = 0 ] && break; sleep 0.1; done; [ \"\$(jq_ 'd[0][\"num_reqs\"]')\" = 0 ]"
# the same for a non-streaming client (its connection is suspended: the
# dispatcher polls the socket for a hang-up)
curl -s -m 1 "${A[@]}" "$URL/generate" -d '{"input_ids":[1,147],"sampling_params":{"max_new_tokens":null,"ignore_eos":true}}' >/dev/null 2>&1
sleep 0.5
check "after a vanished non-streaming client: get_load back to 0" "for i in \$(seq 1 50); do [ \$(req GET /get_load) = 200 ] && [ \"\$(jq_ 'd[0][\"num_reqs\"]')\" = 0 ] && break; sleep 0.1; done; [ \"\$(jq_ 'd[0][\"num_reqs\"]')\" = 0 ]"
check "flush_cache when idle" "[ \$(req POST /flush_cache) = 200 ]"

# --- OpenAI client
if [ -f "$ROOT/tests/js/node_modules/openai/package.json" ] && command -v node >/dev/null; then
    if SGLC_URL=$URL SGLC_API_KEY=$KEY SGLC_CHAT=1 node --test "$ROOT/tests/js/server.test.mjs" >"$T/node" 2>&1; then
        echo "ok   openai client tests ($(grep -c '^ok' "$T/node") passed)"
    else
        echo "FAIL openai client tests"; cat "$T/node"; fails=$((fails + 1))
    fi
    if SGLC_URL=$URL SGLC_API_KEY=$KEY node --test "$ROOT/tests/js/responses.test.mjs" >"$T/node" 2>&1; then
        echo "ok   openai client Responses API tests ($(grep -c '^ok' "$T/node") passed)"
    else
        echo "FAIL openai client Responses API tests"; cat "$T/node"; fails=$((fails + 1))
    fi
else
    echo "note: openai client tests skipped (run npm ci --ignore-scripts in tests/js)"
fi

# --- SIGTERM drains and exits 0
curl -s -m 30 "${A[@]}" "$URL/generate" -d '{"input_ids":[1,147],"sampling_params":{"max_new_tokens":50,"ignore_eos":true}}' >"$T/drain" &
CP=$!
sleep 0.2
server_stop TERM
RC=$SERVER_RC
wait $CP
check "SIGTERM: exit 0" "[ $RC -eq 0 ]"
check "SIGTERM: in-flight request completed" "grep -q '\"completion_tokens\":50' $T/drain"

# --- chat with real templates: small random-weight Qwen3 / Llama 3.1 models
# (--load-format dummy) with the real tokenizers.  usage.prompt_tokens must
# equal the length of the prompt rendered by Python jinja2 the way
# transformers does it (sandboxed, trim_blocks, lstrip_blocks), tokenized
# without special tokens.
chat_model() {  # chat_model NAME CONFIG TOKDIR
    local name=$1 cfg=$2 tokdir=$3 d="$T/$1"
    mkdir -p "$d"
    $PY - "$cfg" "$d/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
         num_key_value_heads=1, head_dim=32, max_position_embeddings=4096)
c.pop("rope_scaling", None) if c.get("model_type") != "llama" else None
json.dump(c, open(sys.argv[2], "w"))
json.dump({"temperature": 0.6, "top_k": 20, "top_p": 0.95},
          open(sys.argv[2].replace("config.json", "generation_config.json"), "w"))
PYEOF
    # start-up loads a 150k-token tokenizer: seconds, minutes under ASan
    server_start "$T/$name.log" --model-path "$d" --tokenizer-path "$tokdir" --load-format dummy \
        --threads 1 --max-total-tokens 20000 --skip-server-warmup
    local port=$SERVER_PORT
    for kw in '{}' '{"enable_thinking": false}'; do
        body="{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},{\"role\":\"user\",\"content\":\"Hello, world!\"}],\"max_tokens\":4,\"temperature\":0,\"chat_template_kwargs\":$kw}"
        curl -s -m 60 -o "$T/chat.json" "http://127.0.0.1:$port/v1/chat/completions" -d "$body"
        curl -s -m 60 -N -o "$T/chat.sse" "http://127.0.0.1:$port/v1/chat/completions" -d "${body%\}},\"stream\":true}"
        $PY - "$tokdir" "$kw" "$port" "$T/chat.json" "$T/chat.sse" <<'PYEOF' >"$T/chatref" 2>&1
import json, sys, urllib.request
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
tokdir, kw, port, resp, sse = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
cfg = json.load(open(tokdir + "/tokenizer_config.json"))
def raise_exception(m): raise Exception(m)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
env.globals["raise_exception"] = raise_exception
def tokstr(v): return v if isinstance(v, str) or v is None else v.get("content")
special = {k: tokstr(cfg.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token") if k in cfg}
msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello, world!"}]
prompt = env.from_string(cfg["chat_template"]).render(messages=msgs, add_generation_prompt=True, **special, **kw)
req = urllib.request.Request(f"http://127.0.0.1:{port}/tokenize", json.dumps({"prompt": prompt, "add_special_tokens": False}).encode())
n = json.load(urllib.request.urlopen(req))["count"]
r = json.load(open(resp))
assert r["usage"]["prompt_tokens"] == n, (r["usage"], n, prompt)
assert r["usage"]["completion_tokens"] == 4 and r["choices"][0]["message"]["role"] == "assistant", r
text = ""
for line in open(sse):
    if line.startswith("data: {"):
        for ch in json.loads(line[6:])["choices"]:
            text += ch["delta"].get("content") or ""
assert text == r["choices"][0]["message"]["content"], (text, r)
print("prompt tokens", n)
PYEOF
        check "chat $name kwargs $kw: prompt = jinja2 render, stream = non-stream" "[ \$? -eq 0 ] || { cat $T/chatref; false; }"
    done
    # --sampling-defaults model (default): generation_config.json fills what
    # an OpenAI request leaves out; seeded sampling makes it observable
    local o1 o2 o3
    o1=$(curl -s "http://127.0.0.1:$port/v1/completions" -d '{"model":"m","prompt":[1,2,3],"max_tokens":8,"seed":7}')
    o2=$(curl -s "http://127.0.0.1:$port/v1/completions" -d '{"model":"m","prompt":[1,2,3],"max_tokens":8,"seed":7,"temperature":0.6,"top_k":20,"top_p":0.95}')
    o3=$(curl -s "http://127.0.0.1:$port/v1/completions" -d '{"model":"m","prompt":[1,2,3],"max_tokens":8,"seed":7,"temperature":1.0,"top_k":-1,"top_p":1.0}')
    t() { $PY -c 'import json,sys; print(json.loads(sys.argv[1])["choices"][0]["text"])' "$1"; }
    check "chat $name: generation_config defaults = explicit params, != OpenAI defaults" \
        "[ \"\$(t \"\$o1\")\" = \"\$(t \"\$o2\")\" ] && [ \"\$(t \"\$o1\")\" != \"\$(t \"\$o3\")\" ]"
    # vanishing clients on a 4096-token context (a 4000-token generation
    # takes seconds here): the requests must be aborted, not run to the end
    for st in false true; do
        curl -s -m 1 -N "http://127.0.0.1:$port/generate" -d "{\"input_ids\":[1,2,3],\"stream\":$st,\"sampling_params\":{\"max_new_tokens\":4000,\"ignore_eos\":true}}" >/dev/null 2>&1
        check "chat $name: vanished client (stream=$st) aborted within 1 s" "for i in \$(seq 1 10); do curl -s http://127.0.0.1:$port/get_load | grep -q '\"num_reqs\":0,' && break; sleep 0.1; done; curl -s http://127.0.0.1:$port/get_load | grep -q '\"num_reqs\":0,'"
    done
    server_stop
}
if $PY -c 'import jinja2' 2>/dev/null && [ -d "$SHARED/models/tokenizers/qwen3" ]; then
    chat_model qwen3 "$SHARED/models/configs/Qwen__Qwen3-0.6B/config.json" "$SHARED/models/tokenizers/qwen3"
    chat_model llama31 "$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json" "$SHARED/models/tokenizers/llama3_1"
else
    echo "note: real-template chat checks skipped (no jinja2 or no tokenizers)"
fi

if [ $fails -ne 0 ]; then echo "--- server log"; tail -20 "$T/log"; echo "$fails check(s) failed"; exit 1; fi
echo "all server checks passed"
