#!/usr/bin/env bash
# LoRA while serving (TinyStories-656K + random PEFT adapters written by
# tests/ref/lora_ref.py --write-adapters): /generate lora_path (single and
# batch lists) equals `generate --lora-path` offline; the OpenAI route picks
# the adapter through "model": "BASE:ADAPTER" or lora_path (/v1/completions:
# a list with one entry per prompt; chat: a string or a one-entry list);
# unknown adapters are a 400 with SGLang's message; /v1/models lists the adapters; /load_lora_adapter and
# /unload_lora_adapter (admin key) with --max-loaded-loras eviction (pinned
# stays); the radix cache never shares a prefix across adapters; loading and
# unloading while requests run loses none of them.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
M=$SHARED/models/TinyStories-656K
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "skip: torch/numpy missing in $PY"; exit 77; }
T=$(mktemp -d)
trap server_cleanup EXIT
"$PY" "$ROOT/tests/ref/lora_ref.py" --write-adapters "$T" --n 4 --model-dir "$M" >/dev/null ||
    { echo "FAIL writing adapters"; exit 1; }
# offline references: the same prompts through `generate --lora-path`
offline() { # offline ADAPTER_DIR|- PROMPT
    local extra=()
    [ "$1" != - ] && extra=(--lora-path "$1")
    "$BIN" generate --model-path "$M" --prompt "$2" --max-new-tokens 12 --temperature 0 --ignore-eos \
        --json "${extra[@]}" 2>/dev/null
}
offline "$T/a0" "Once upon a time" >"$T/ref_a0" && offline - "Once upon a time" >"$T/ref_base" &&
    offline "$T/a1" "The cat sat" >"$T/ref_a1" || { echo "FAIL offline references"; exit 1; }
server_start "$T/log" --model-path "$M" --threads 2 --admin-api-key sekret \
    --lora-paths "a0=$T/a0" "{\"lora_name\":\"a1\",\"lora_path\":\"$T/a1\",\"pinned\":true}" \
    --max-loaded-loras 3 --max-loras-per-batch 3 --enable-lora-overlap-loading \
    --lora-backend triton --skip-server-warmup --chat-template chatml || server_fail "$T/log"
"$PY" - "$SERVER_URL" "$T" <<'PY'
import json, sys, threading, urllib.request, urllib.error
url, tmp = sys.argv[1], sys.argv[2]
fails = []

def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        fails.append(msg)

def post(path, body, key=None):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")

def get(path):
    with urllib.request.urlopen(url + path, timeout=30) as r:
        return json.loads(r.read())

def gen(text, lora=None, n=12, **kw):
    b = {"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}}
    if lora is not None:
        b["lora_path"] = lora
    b.update(kw)
    return post("/generate", b)

ref = {k: json.load(open(f"{tmp}/ref_{k}"))["output_ids"] for k in ("a0", "base", "a1")}
st, o = gen("Once upon a time", "a0")
check(st == 200 and o["output_ids"] == ref["a0"], f"/generate lora_path a0 == generate --lora-path ({st})")
st, o = gen("Once upon a time")
check(st == 200 and o["output_ids"] == ref["base"], "/generate without lora_path == base")
check(ref["a0"] != ref["base"], "the adapter changes the greedy output")
st, o = gen(["Once upon a time", "The cat sat", "Once upon a time"], ["a0", "a1", None])
check(st == 200 and [x["output_ids"] for x in o] == [ref["a0"], ref["a1"], ref["base"]],
      "/generate batch with lora_path list [a0, a1, None]: each as alone")
st, o = gen(["Once upon a time", "x"], ["a0"])
check(st == 400, f"/generate lora_path list of the wrong length: 400 ({st})")
st, o = gen("Once upon a time", "zz")
msg = json.dumps(o)
check(st == 400 and "The following requested LoRA adapters are not loaded: zz" in msg and
      "Loaded adapters: odict_keys(['a0', 'a1'])" in msg, f"unknown adapter: 400 + SGLang's message ({st} {msg[:160]})")

# OpenAI: model "BASE:ADAPTER"
def compl(model, **kw):
    b = {"model": model, "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}
    b.update(kw)
    return post("/v1/completions", b)
_, g = gen("Once upon a time", "a0")
st, c = compl("TinyStories-656K:a0")
check(st == 200 and c["choices"][0]["text"] == g["text"], f"/v1/completions model BASE:a0 == /generate a0 ({st})")
_, g0 = gen("Once upon a time")
st, c = compl("TinyStories-656K")
check(st == 200 and c["choices"][0]["text"] == g0["text"], "/v1/completions plain model == base")
st, c = compl("TinyStories-656K", lora_path="a0")
check(st == 200 and c["choices"][0]["text"] == g["text"], "/v1/completions explicit lora_path a0")
st, c = compl("TinyStories-656K:zz")
check(st == 400 and "not loaded: zz" in json.dumps(c), f"/v1/completions unknown adapter: 400 ({st})")
# lora_path as a list: one adapter (or null) per prompt of a prompt list
_, g1 = gen("The cat sat", "a1")
st, c = compl("TinyStories-656K", prompt=["Once upon a time", "The cat sat", "Once upon a time"],
              lora_path=["a0", "a1", None])
txt = {ch["index"]: ch["text"] for ch in c.get("choices", [])} if st == 200 else {}
check(st == 200 and [txt.get(k) for k in range(3)] == [g["text"], g1["text"], g0["text"]],
      f"/v1/completions prompt list with lora_path [a0, a1, null]: each as /generate alone ({st})")
st, c = compl("TinyStories-656K:a1", prompt=["Once upon a time", "The cat sat"], lora_path=["a0", None])
_, ga1 = gen("Once upon a time", "a1")
txt = {ch["index"]: ch["text"] for ch in c.get("choices", [])} if st == 200 else {}
check(st == 200 and [txt.get(0), txt.get(1)] == [ga1["text"], g1["text"]],
      f"/v1/completions model BASE:a1 wins over a lora_path list ({st})")
st, c = compl("TinyStories-656K", prompt=["Once upon a time", "The cat sat"], lora_path=["a0"])
check(st == 400 and "one entry per prompt" in json.dumps(c), f"/v1/completions lora_path list of the wrong length: 400 ({st} {json.dumps(c)[:120]})")
st, c = compl("TinyStories-656K", prompt=["Once upon a time", "The cat sat"], lora_path=["a0", 3])
check(st == 400 and "lora_path[1] must be a string or null" in json.dumps(c), f"/v1/completions lora_path entry not a string: 400 ({st})")
st, c = compl("TinyStories-656K", prompt=["Once upon a time", "The cat sat"], lora_path=["a0", "zz"])
msg = json.dumps(c)
check(st == 400 and "The following requested LoRA adapters are not loaded: zz" in msg and
      "Loaded adapters: odict_keys(['a0', 'a1'])" in msg, f"/v1/completions unknown adapter in the list: 400 + SGLang's message ({st})")
st, c = compl("TinyStories-656K", lora_path=7)
check(st == 400, f"/v1/completions lora_path neither string nor list: 400 ({st})")

# chat: lora_path (a string, or a one-entry list: one conversation)
def chat(model, **kw):
    b = {"model": model, "messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 40, "ignore_eos": True,
         "temperature": 0}
    b.update(kw)
    return post("/v1/chat/completions", b)
st0, ch0 = chat("TinyStories-656K")
st1, ch1 = chat("TinyStories-656K", lora_path="a0")
st2, ch2 = chat("TinyStories-656K:a0")
st3, ch3 = chat("TinyStories-656K", lora_path=["a0"])
ct = lambda c: c["choices"][0]["message"]["content"]  # noqa: E731
check(st0 == st1 == st2 == st3 == 200 and ct(ch1) == ct(ch2) == ct(ch3) != ct(ch0),
      f"/v1/chat/completions lora_path a0 == BASE:a0 == [a0] != base ({st0} {st1} {st2} {st3} {[ct(x) for x in (ch0, ch1, ch2, ch3)]})")
st, c = chat("TinyStories-656K", lora_path="zz")
check(st == 400 and "not loaded: zz" in json.dumps(c), f"/v1/chat/completions unknown adapter: 400 ({st})")
st, c = chat("TinyStories-656K", lora_path=["a0", "a1"])
check(st == 400 and "one entry per prompt" in json.dumps(c), f"/v1/chat/completions two-entry lora_path list: 400 ({st})")

models = get("/v1/models")["data"]
ids = [m["id"] for m in models]
check(len(ids) == 3 and ids[1:] == ["a0", "a1"], f"/v1/models lists the base, then the adapters {ids}")
a0 = [m for m in models if m["id"] == "a0"][0]
check(a0["parent"] == ids[0] and a0["root"].endswith("/a0"), "adapter card: parent = the served model, root = its path")
check(get("/v1/models/a1")["id"] == "a1", "/v1/models/a1")

# load / unload (admin key), eviction with --max-loaded-loras 3 (a1 pinned)
body = {"lora_name": "a2", "lora_path": f"{tmp}/a2"}
st, o = post("/load_lora_adapter", body)
check(st == 401, f"/load_lora_adapter without the admin key: 401 ({st})")
st, o = post("/load_lora_adapter", body, "sekret")
check(st == 200 and o["success"] and set(o["loaded_adapters"]) == {"a0", "a1", "a2"}, f"load a2: {st} {o}")
st, o = post("/load_lora_adapter", body, "sekret")
check(st == 400 and not o["success"] and "already been loaded" in o["error_message"], "load a2 twice: 400")
st, o = gen("Once upon a time", "a2")
check(st == 200 and o["output_ids"] != ref["base"], f"a2 serves after its load ({st} {json.dumps(o)[:300]})")
gen("Once upon a time", "a0")  # a0 used after a2: a2 is the least recently used unpinned one
st, o = post("/load_lora_adapter", {"lora_name": "a3", "lora_path": f"{tmp}/a3"}, "sekret")
check(st == 200 and set(o["loaded_adapters"]) == {"a0", "a1", "a3"}, f"load a3 evicts lru a2, pinned a1 stays: {o.get('loaded_adapters')}")
st, o = post("/load_lora_adapter", {"lora_name": "bad", "lora_path": f"{tmp}/none"}, "sekret")
check(st == 400 and "cannot read" in o["error_message"], f"load a missing folder: 400 ({o.get('error_message')})")
st, o = post("/unload_lora_adapter", {"lora_name": "a3"}, "sekret")
check(st == 200 and set(o["loaded_adapters"]) == {"a0", "a1"}, "unload a3")
st, o = gen("Once upon a time", "a3")
check(st == 400, "a3 after its unload: 400")
st, o = post("/unload_lora_adapter", {"lora_name": "a3"}, "sekret")
check(st == 400 and not o["success"], "unload a3 twice: 400")

# radix isolation: a fresh adapter "iso" (no request has run under it) on a
# prompt the base has cached; then iso reloaded under the same name and path
# (a new load: its own namespace again)
P = "Once upon a time there was a little girl named Lily who loved to play in the park with her dog. " * 2
c = lambda o: o["meta_info"]["cached_tokens"]
isob = {"lora_name": "iso", "lora_path": f"{tmp}/a2"}
gen(P, n=2)
_, b1 = gen(P, n=2)
check(c(b1) > 20, f"base twice: base prefix cached ({c(b1)})")
st, _ = post("/load_lora_adapter", isob, "sekret")
_, l1 = gen(P, "iso", n=2)
_, l2 = gen(P, "iso", n=2)
check(st == 200 and c(l1) == 0, f"iso after base on the same prompt: no cached tokens ({c(l1)})")
check(c(l2) > 20, f"iso again: its own prefix is cached ({c(l2)})")
post("/unload_lora_adapter", {"lora_name": "iso"}, "sekret")
st, _ = post("/load_lora_adapter", isob, "sekret")
_, l3 = gen(P, "iso", n=2)
check(st == 200 and c(l3) == 0, f"iso reloaded (same name and files): no cached tokens ({c(l3)})")
_, b2 = gen(P, n=2)
check(c(b2) > 20, f"base again: base prefix still cached ({c(b2)})")
post("/unload_lora_adapter", {"lora_name": "iso"}, "sekret")

# load and unload while requests run: 9 streaming requests (adapter u, a1,
# base) are each past their first token before u is unloaded and other
# adapters come and go; every request still finishes all its tokens
post("/load_lora_adapter", {"lora_name": "u", "lora_path": f"{tmp}/a2"}, "sekret")
started = threading.Barrier(10)
res = []
def worker(i):
    b = {"text": "Once upon a time " * (1 + i % 3), "stream": True, "lora_path": ["u", "a1", None][i % 3],
         "sampling_params": {"max_new_tokens": 64, "temperature": 0, "ignore_eos": True}}
    req = urllib.request.Request(url + "/generate", json.dumps(b).encode(), {"Content-Type": "application/json"})
    last, first = None, True
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            for line in r:
                line = line.strip()
                if not line.startswith(b"data:") or line == b"data: [DONE]":
                    continue
                last = json.loads(line[5:])
                if first:
                    first = False
                    started.wait(60)
    except Exception as e:  # noqa: BLE001 -- reported below
        last = {"error": str(e)}
        if first:
            started.wait(60)
    res.append(last)
th = [threading.Thread(target=worker, args=(i,)) for i in range(9)]
for t in th:
    t.start()
started.wait(60)
st_u, _ = post("/unload_lora_adapter", {"lora_name": "u"}, "sekret")
for k in range(2):
    post("/load_lora_adapter", {"lora_name": f"x{k}", "lora_path": f"{tmp}/a3"}, "sekret")
    post("/unload_lora_adapter", {"lora_name": f"x{k}"}, "sekret")
for t in th:
    t.join()
done = [r.get("meta_info", {}).get("completion_tokens") if isinstance(r, dict) else None for r in res]
check(st_u == 200 and done == [64] * 9, f"unload while 9 requests stream: all finish 64 tokens {done}")
st, o = gen("Once upon a time", "u")
check(st == 400, "u is gone after its requests finished")
sys.exit(1 if fails else 0)
PY
rc=$?
server_stop TERM
[ $rc -eq 0 ] && echo "all LoRA serving checks passed"
exit $rc
