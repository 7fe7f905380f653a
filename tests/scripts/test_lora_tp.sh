#!/usr/bin/env bash
# LoRA under tensor / pipeline parallelism (issue 14; docs/notes/lora.md,
# "LoRA under TP / PP").  Offline (tests/scripts/lora_tp_check.py): random
# adapters on tiny llama3 (4 variants incl. lm_head and embed_tokens),
# qwen2-moe (attention only) and phi3-mini-4k (fused qkv_proj /
# gate_up_proj): --tp-size 2 and --pp-size 2 give the --tp-size 1 prompt
# logits within 1e-5 relative and the same greedy ids; a mixed batch of
# the four adapters + base equals each line alone (ids, logprobs).  Then a
# `serve --tp-size 2` with --lora-paths a0: /load_lora_adapter a1 at run
# time, /generate with a0, a1 and the base in one batch list = the
# one-process offline ids and logprobs, /unload_lora_adapter a1, and a
# request naming a1 gets SGLang's 400; loads / unloads while 24 requests
# run lose none; rank 1's shard has the sliced size and is freed.  A `serve --pp-size 2`: an adapter
# whose layer-1 tensor has the wrong shape passes rank 0 (layer 0) and is
# refused by rank 1: the route's 400 names rank 1, the name stays unloaded
# (400 on use) and a good adapter loads under it afterwards.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json \
    models/configs/microsoft__Phi-3-mini-4k-instruct/config.json
[ -d /dev/shm ] && [ -w /dev/shm ] || golden_skip "no writable /dev/shm (the tensor-parallel shm backend)"
. "$ROOT/tests/scripts/lib_server.sh"
server_require
T=$(mktemp -d)
trap server_cleanup EXIT
mkdir -p "$ROOT/build/tiny-models"
fail=0
"$PY" "$ROOT/tests/scripts/lora_tp_check.py" --write "$T" || fail=1
M=$ROOT/build/tiny-models/llama3/f32
[ -d "$T/a1" ] || { echo "FAIL adapters not written"; exit 1; }
# one-process references for the server (ids + logprobs)
for a in a0 a1 -; do
    extra=()
    [ "$a" != - ] && extra=(--lora-paths "$a=$T/$a")
    printf '{"input_ids": [5, 17, 99, 200, 31, 7], "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": true}, "return_logprob": true%s}\n' \
        "$([ "$a" != - ] && echo ", \"lora_path\": \"$a\"")" >"$T/req_$a.jsonl"
    "$BIN" generate --model-path "$M" --requests "$T/req_$a.jsonl" --skip-tokenizer-init --dtype float32 \
        --threads 2 "${extra[@]}" >"$T/ref_$a" 2>"$T/ref_err" || { echo "FAIL reference $a: $(tail -2 "$T/ref_err")"; exit 1; }
done
server_start "$T/log" --model-path "$M" --tp-size 2 --threads 2 --dtype float32 --skip-tokenizer-init \
    --lora-paths "a0=$T/a0" --max-loras-per-batch 3 --skip-server-warmup --dist-timeout 60 ||
    server_fail "$T/log"
check_server() { # MODE: tp (load / use / unload) or pp (a load one worker refuses)
    "$PY" - "$SERVER_URL" "$T" "$1" "$2" "$ROOT" <<'PY'
import json, re, sys, time, urllib.request, urllib.error
url, tmp, mode, log, root = sys.argv[1:6]
fails = []

def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        fails.append(msg)

def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")

def body(lora):
    b = {"input_ids": [5, 17, 99, 200, 31, 7], "return_logprob": True,
         "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}
    if lora is not None:
        b["lora_path"] = lora
    return b

def same(got, name, what):
    ref = json.loads(open(f"{tmp}/ref_{name}").read().splitlines()[0])
    lp = lambda o: [x[0] for x in o["meta_info"]["output_token_logprobs"]]  # noqa: E731
    ok = got.get("output_ids") == ref["output_ids"]
    e = max(abs(a - b) for a, b in zip(lp(got), lp(ref))) if ok else float("inf")
    check(ok and e <= 1e-4, f"{what}: ids {'==' if ok else '!='} one process, logprobs max|d| = {e:.3g} (tol 1e-4)")

def not_loaded(name, what):
    st, r = post("/generate", body(name))
    msg = (r or {}).get("error", {}).get("message", "") if isinstance(r, dict) else ""
    check(st == 400 and msg.startswith(f"The following requested LoRA adapters are not loaded: {name}\n"),
          f"{what}: {st} {msg[:70]!r}")

if mode == "tp":
    st, r = post("/generate", body("a0"))
    if st == 200: same(r, "a0", "tp=2 a0 (--lora-paths)")
    else: check(False, f"tp=2 a0: {st} {r}")
    st, r = post("/load_lora_adapter", {"lora_name": "a1", "lora_path": f"{tmp}/a1"})
    check(st == 200 and r.get("success") is True and set(r.get("loaded_adapters", {})) == {"a0", "a1"},
          f"tp=2 /load_lora_adapter a1: {st} {json.dumps(r)[:120]}")
    st, r = post("/generate", {"input_ids": [[5, 17, 99, 200, 31, 7]] * 3, "return_logprob": True,
                               "lora_path": ["a1", None, "a0"],
                               "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}})
    if st == 200 and isinstance(r, list) and len(r) == 3:
        for o, n in zip(r, ("a1", "-", "a0")):
            same(o, n, f"tp=2 one batch list, {n if n != '-' else 'base'}")
    else:
        check(False, f"tp=2 batch list: {st} {str(r)[:200]}")
    st, r = post("/unload_lora_adapter", {"lora_name": "a1"})
    check(st == 200 and r.get("success") is True and set(r.get("loaded_adapters", {})) == {"a0"},
          f"tp=2 /unload_lora_adapter a1: {st} {json.dumps(r)[:120]}")
    not_loaded("a1", "tp=2 a request naming the unloaded a1")
    st, r = post("/generate", body("a0"))
    if st == 200: same(r, "a0", "tp=2 a0 after the unload")
    else: check(False, f"tp=2 a0 after the unload: {st} {r}")
    # loads / unloads (HTTP threads) while requests run (the scheduler):
    # rank 0's group lock puts each load between two steps
    import threading
    res, errs = [], []
    def client(i):
        for j in range(6):
            name = "a0" if (i + j) % 2 else None
            st, r = post("/generate", body(name))
            res.append((name or "-", st, r))
    th = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for x in th: x.start()
    for j in range(4):
        st1, _ = post("/load_lora_adapter", {"lora_name": "a2", "lora_path": f"{tmp}/a2"})
        st2, _ = post("/unload_lora_adapter", {"lora_name": "a2"})
        if (st1, st2) != (200, 200): errs.append((j, st1, st2))
    for x in th: x.join()
    check(not errs, f"tp=2 4 load/unload cycles of a2 while 24 requests run: {errs or 'all 200'}")
    refs = {n: json.loads(open(f"{tmp}/ref_{n}").read().splitlines()[0])["output_ids"] for n in ("a0", "-")}
    bad = [(n, st) for n, st, r in res if st != 200 or r.get("output_ids") != refs[n]]
    check(len(res) == 24 and not bad, f"tp=2 the 24 concurrent requests = one process: {len(res) - len(bad)}/24")
    post("/generate", body(None))  # a step after the last unload: the workers free what rank 0 freed
    # rank 1 holds its slice only: column-parallel pairs A whole + half of
    # B's rows, row-parallel (o, down) half of A's columns + B whole
    sys.path.insert(0, root + "/tools")
    import safetensors_np
    hdr = safetensors_np.read_header(f"{tmp}/a0/adapter_model.safetensors")
    hdr = hdr[0] if isinstance(hdr, tuple) else hdr
    want = full = 0
    for name, t in hdr.items():
        if name == "__metadata__" or ".lora_A." not in name:
            continue
        r, k = t["shape"]
        n = hdr[name.replace(".lora_A.", ".lora_B.")]["shape"][0]
        row_par = ".o_proj." in name or ".down_proj." in name
        want += 4 * r * ((k // 2 + n) if row_par else (k + n // 2))
        full += 4 * r * (k + n)
    text = open(log).read()
    m = re.search(r"rank 1: LoRA adapter a0 \(id \d+\): this rank's shard, (\d+) bytes", text)
    got = int(m.group(1)) if m else -1
    check(got == want, f"tp=2 rank 1's shard of a0: {got} bytes (expected {want}; the whole adapter {full})")
    check(re.search(r"LoRA adapter a1 \(id \d+\) freed", text) is not None,
          "tp=2 rank 1 freed its shard of a1 after the unload")
    n_in = len(re.findall(r"rank 1: LoRA adapter a2 \(id \d+\): this rank's shard", text))
    n_out = len(re.findall(r"LoRA adapter a2 \(id \d+\) freed", text))
    check(n_in == 4 and n_out == 4, f"tp=2 rank 1 loaded a2 {n_in} times and freed it {n_out} times (4 and 4)")
else:
    st, r = post("/load_lora_adapter", {"lora_name": "x", "lora_path": f"{tmp}/bad"})
    msg = (r or {}).get("error_message", "")
    check(st == 400 and r.get("success") is False and "rank 1" in msg and "layers.1.self_attn.q_proj.lora_B" in msg,
          f"pp=2 load refused by rank 1 only: {st} {msg[:160]!r}")
    not_loaded("x", "pp=2 the refused adapter is not loaded")
    st, r = post("/load_lora_adapter", {"lora_name": "x", "lora_path": f"{tmp}/a1"})
    check(st == 200 and r.get("success") is True, f"pp=2 a good adapter loads under that name: {st}")
    st, r = post("/generate", body("x"))
    if st == 200: same(r, "a1", "pp=2 x (= a1) after the failed load")
    else: check(False, f"pp=2 x: {st} {r}")
sys.exit(1 if fails else 0)
PY
}
check_server tp "$T/log" || fail=1
server_stop TERM
server_start "$T/log2" --model-path "$M" --pp-size 2 --threads 2 --dtype float32 --skip-tokenizer-init \
    --enable-lora --max-loras-per-batch 3 --skip-server-warmup --dist-timeout 60 ||
    server_fail "$T/log2"
check_server pp "$T/log2" || fail=1
server_stop TERM
[ $fail = 0 ] && echo "all ok" || echo "FAILED"
exit $fail
