#!/usr/bin/env bash
# Gemma 3's real tokenizer (../shared/models/tokenizers/gemma3) through sglc:
# its chat template renders Gemma's turn format (the system message folded
# into the first user turn, "model" as the assistant role, a trailing
# "<start_of_turn>model\n" generation prompt), and the rendered prompt
# tokenizes to Gemma's special ids (<bos> 2, <start_of_turn> 105,
# <end_of_turn> 106, "user" 2364, "model" 4368, "\n" 107 -- the ids public
# Gemma 3 ports assert) and decodes back to the same text.  The full
# byte-for-byte checks against HF (all shared tokenizers and templates) are
# test_tokenizer_hf.sh and test_chat_templates.sh; this one pins Gemma's.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SGLC=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
T=$SHARED/models/tokenizers/gemma3
[ -x "$SGLC" ] || { echo "sglc binary not built: $SGLC"; exit 1; }
[ -f "$T/tokenizer.json" ] || { echo "skip: $T not found"; exit 77; }
exec /usr/bin/python3 - "$SGLC" "$T" <<'PY'
import json, subprocess, sys
sglc, tok = sys.argv[1:3]

def run(cmd, obj):
    p = subprocess.run([sglc, cmd, "--tokenizer-path", tok], input=json.dumps(obj) + "\n",
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-500:]
    return json.loads(p.stdout)

conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Name a color."}]
got = run("chat-template", {"messages": conv, "add_generation_prompt": True})["prompt"]
want = ("<bos><start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nName a color.<end_of_turn>\n<start_of_turn>model\n")
assert got == want, f"chat template:\n{got!r}\nwant\n{want!r}"
print("ok   chat template: Gemma turns, system folded into the first user turn")
one = run("chat-template", {"messages": conv[1:2], "add_generation_prompt": True})["prompt"]
ids = run("tokenize", {"text": one, "add_special_tokens": False})["ids"]
assert ids[:4] == [2, 105, 2364, 107], ids
assert ids[-5:] == [106, 107, 105, 4368, 107], ids
print(f"ok   tokenize: {ids}")
ids = run("tokenize", {"text": got, "add_special_tokens": False})["ids"]
assert ids.count(105) == 4 and ids.count(106) == 3 and ids[0] == 2, ids
back = run("detokenize", {"ids": ids, "skip_special_tokens": False})["text"]
assert back == got, (back, got)
print(f"ok   detokenize({len(ids)} ids) gives the prompt back")
PY
