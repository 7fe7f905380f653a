#!/usr/bin/env bash
# test_chat_continue — the OpenAI chat route and `sglc chat-template` build
# the same prompt from one conversation (issue 9 §2: one
# continue_final_message implementation, tmpl_chat_prompt).
#
# A random-weight Qwen3 (--load-format dummy) with the real qwen3 tokenizer
# is served twice: with its own template (end-of-turn right after the
# content, think blocks) and with a small openai-content template that also
# trims string content.  For each conversation (string and list content,
# with and without continue_final_message, a trailing-space final message,
# a cut that must fail, the add_generation_prompt refusal) the route's
# prompt ids (request log, level 3, json) must equal the ids of the prompt
# `sglc chat-template` prints, tokenized by the same server without special
# tokens; errors must carry the same message.  (List content goes only to
# the openai-content template: for a string template the route flattens it
# first, as SGLang does, while the command passes it as transformers does.)  The route renders with
# add_generation_prompt = not continue_final_message (SGLang's route adds
# the generation prompt; the command's default is transformers' False).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
TOK=$SHARED/models/tokenizers/qwen3
CFG=$SHARED/models/configs/Qwen__Qwen3-0.6B/config.json
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$TOK/tokenizer.json" "$CFG"
T=$(mktemp -d)
trap server_cleanup EXIT

mkdir -p "$T/m"
$PY - "$CFG" "$T/m/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
         num_key_value_heads=1, head_dim=32, max_position_embeddings=4096)
json.dump(c, open(sys.argv[2], "w"))
PYEOF
# list content (openai format: the template loops over message['content'])
# and trimmed string content
cat >"$T/openai.jinja" <<'EOF'
{%- for message in messages -%}
<|im_start|>{{ message['role'] }}
{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}
EOF

# conversations: one JSON line each, {"messages", "continue_final_message"?, "add_generation_prompt"?}
cat >"$T/convs" <<'EOF'
{"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]}
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is"}], "continue_final_message": true}
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Well,  "}], "continue_final_message": true}
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is"}]}
{"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}, {"role": "assistant", "content": [{"type": "text", "text": "So"}]}], "continue_final_message": true}
{"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is"}], "continue_final_message": true, "add_generation_prompt": true}
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "continue_final_message": true}
EOF

fails=0
run_template() {  # run_template NAME LISTS [--chat-template FILE]
    local name=$1 lists=$2
    shift 2
    # a string-content template gets list content flattened by the route
    # (SGLang's preprocessing) and as given by the command (transformers):
    # list-content conversations only go to the openai-content template
    $PY - "$lists" "$T/convs" >"$T/$name.convs" <<'PYEOF'
import json, sys
for line in open(sys.argv[2]):
    c = json.loads(line)
    if sys.argv[1] == "1" or all(isinstance(m["content"], str) for m in c["messages"]):
        print(line, end="")
PYEOF
    server_start "$T/$name.log" --model-path "$T/m" --tokenizer-path "$TOK" --load-format dummy --threads 1 \
        --max-total-tokens 4096 --skip-server-warmup --log-requests --log-requests-level 3 \
        --log-requests-format json --log-requests-target stdout "$@" || server_fail "$T/$name.log"
    # what the command prints for the route's arguments
    $PY - "$T/$name.convs" >"$T/$name.cmdin" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    cont = bool(c.get("continue_final_message"))
    print(json.dumps({"messages": c["messages"], "continue_final_message": cont,
                      "add_generation_prompt": c.get("add_generation_prompt", not cont)}))
PYEOF
    "$BIN" chat-template --tokenizer-path "$TOK" "$@" <"$T/$name.cmdin" >"$T/$name.cmdout"
    if $PY - "$T/$name.convs" "$T/$name.cmdout" "$SERVER_URL" "$T/$name.log" "$name" <<'PYEOF'; then
import json, sys, time, urllib.request, urllib.error
convs, cmdout, url, log, name = sys.argv[1:6]
def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
outs = [json.loads(l) for l in open(cmdout)]
bad = 0 if outs else 1
for i, line in enumerate(open(convs)):
    c = json.loads(line)
    body = {"model": "m", "max_tokens": 1, "temperature": 0, "rid": f"{name}-{i}", **c}
    code, resp = post("/v1/chat/completions", body)
    cmd = outs[i]
    if "error" in cmd:
        msg = resp.get("message") or resp.get("error", {}).get("message", "")
        ok = code == 400 and msg.endswith(cmd["error"])
        what = f"both refuse: {cmd['error'][:60]}..."
    else:
        ids = None
        for _ in range(100):
            for l in open(log):
                if l.startswith("{"):
                    try:
                        e = json.loads(l)
                    except ValueError:
                        continue  # a line still being written
                    if e.get("event") == "request.received" and e.get("rid") == body["rid"]:
                        ids = e["obj"]["input_ids"]
            if ids is not None:
                break
            time.sleep(0.05)
        _, tk = post("/tokenize", {"prompt": cmd["prompt"], "add_special_tokens": False})
        ok = code == 200 and ids == tk["tokens"]
        what = f"same prompt ({len(tk['tokens'])} tokens): {cmd['prompt'][-40:]!r}"
    print(("ok   " if ok else "FAIL ") + f"{name} #{i}: {what}")
    if not ok:
        print("  route:", code, json.dumps(resp)[:300], "\n  command:", json.dumps(cmd)[:300])
        bad += 1
sys.exit(1 if bad else 0)
PYEOF
        :
    else
        fails=$((fails + 1))
    fi
    server_stop
}

run_template qwen3 0
if [ "$("$BIN" chat-template --tokenizer-path "$TOK" --chat-template "$T/openai.jinja" --content-format)" = openai ]; then
    run_template openai 1 --chat-template "$T/openai.jinja"
else
    echo "FAIL the list-content template is not detected as openai"; fails=$((fails + 1))
fi
if [ $fails -ne 0 ]; then echo "$fails template(s) failed"; exit 1; fi
echo "route and sglc chat-template agree"
