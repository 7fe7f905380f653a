#!/usr/bin/env bash
# LoRA through the scheduler (`generate --requests`): 8 random adapters
# (tests/ref/lora_ref.py --write-adapters, tiny llama3) and the base model in
# one batch; every request's greedy ids equal the same request run alone
# (`generate --lora-path`), with --max-loras-per-batch 9 (one prefill of all)
# and 3 (admission holds requests back: no prefill batch takes more than 3
# adapters, the base counting as one) alike.  An unknown adapter is that
# line's error with SGLang's message; a bad --lora-paths entry (DoRA, rank
# above --max-lora-rank) stops start-up; a dense MLP adapter on an MoE
# layer (tiny qwen3-moe) and an MLA module on a model without MLA are
# refused.  Batch invariance on an MoE model (tiny qwen3-moe: adapters on
# the experts) and an MLA model (tiny deepseek-v2: q_a/q_b, kv_a, kv_b on
# the absorbed path, o_proj, routed + shared experts): 4 adapters (one
# twice) + the base in one batch (5 requests: 4 adapters, one twice, + the base), every prompt and output token logprob equal to the
# same request alone within 2e-5, ids identical, each adapter moving its
# logprobs.  On DeepSeek (tiny deepseek-v2-lite) bad adapters stop
# start-up with a message naming tensor and module: an expert index beyond
# n_experts, an expert of a dense layer, a dense gate_proj of an MoE
# layer, k_proj / q_a_proj (not in that MLA layer), kv_b_proj and expert
# tensors of the wrong shape; a Phi-3 fused qkv_proj B of the wrong size,
# or fused + separate q_proj pairs, are refused.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$ROOT/build/tiny-models"
"$PY" "$ROOT/tests/ref/lora_ref.py" --cache "$ROOT/build/tiny-models" --only llama3 \
    --write-adapters "$TMP" --n 8 >"$TMP/paths" || { echo "FAIL writing adapters"; exit 1; }
M=$(head -1 "$TMP/paths")
LP=()
for i in 0 1 2 3 4 5 6 7; do LP+=("a$i=$TMP/a$i"); done
"$PY" - "$TMP" <<'PY'
import json, random, sys
random.seed(5)
with open(sys.argv[1] + "/reqs.jsonl", "w") as f:
    for i in range(10):
        o = {"input_ids": [random.randrange(3, 512) for _ in range(5 + 3 * i)],
             "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}
        if i < 8:
            o["lora_path"] = f"a{(i * 3) % 8}"
        if i == 9:
            o["lora_path"] = "nope"
        f.write(json.dumps(o) + "\n")
PY
fail=0
for per in 9 3; do
    if ! "$BIN" generate --model-path "$M" --requests "$TMP/reqs.jsonl" --skip-tokenizer-init \
        --lora-paths "${LP[@]}" --max-loras-per-batch "$per" --log-level info \
        >"$TMP/out$per" 2>"$TMP/err$per"; then
        echo "FAIL generate --requests (max-loras-per-batch $per): $(tail -3 "$TMP/err$per")"; exit 1
    fi
    big=$(sed -n 's/.*Prefill batch\. #new-seq: \([0-9]*\).*#running-req: \([0-9]*\).*/\1 \2/p' "$TMP/err$per" |
          awk -v p="$per" '$1 + $2 > p {print}')
    if [ -n "$big" ]; then echo "FAIL per=$per: a step ran more than $per adapters (new + running): $big"; fail=1
    else echo "ok   per=$per: no step runs more than $per requests (all adapters distinct)"; fi
done
"$PY" - "$TMP" "$BIN" "$M" <<'PY' || fail=1
import json, subprocess, sys
tmp, sglc, model = sys.argv[1:4]
reqs = [json.loads(l) for l in open(tmp + "/reqs.jsonl")]
outs = {p: [json.loads(l) for l in open(f"{tmp}/out{p}")] for p in (9, 3)}
bad = 0
for i, r in enumerate(reqs):
    if r.get("lora_path") == "nope":
        for p in (9, 3):
            msg = outs[p][i].get("error", {}).get("message", "")
            ok = msg.startswith("The following requested LoRA adapters are not loaded: nope\nLoaded adapters: odict_keys(['a0'")
            print(("ok   " if ok else "FAIL ") + f"line {i}: unknown adapter -> {msg[:80]!r}")
            bad += not ok
        continue
    cmd = [sglc, "generate", "--model-path", model, "--input-ids", ",".join(map(str, r["input_ids"])),
           "--max-new-tokens", "8", "--temperature", "0", "--ignore-eos", "--json", "--skip-tokenizer-init"]
    if "lora_path" in r:
        cmd += ["--lora-path", f"{tmp}/{r['lora_path']}"]
    alone = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["output_ids"]
    for p in (9, 3):
        got = outs[p][i].get("output_ids")
        ok = got == alone
        print(("ok   " if ok else "FAIL ") + f"line {i} ({r.get('lora_path', 'base')}, per={p}): "
              f"batched ids {'==' if ok else '!='} alone {alone}")
        bad += not ok
sys.exit(1 if bad else 0)
PY
# batch invariance on MoE (qwen3-moe: experts adapted) and MLA (deepseek-v2:
# q_a/q_b, kv_a, kv_b, o, routed + shared experts): 5 adapters + the base in
# one batch == each request alone (a one-line --requests run), every prompt
# and output token's logprob within 2e-5, ids identical
"$PY" - "$ROOT" "$TMP" "$BIN" <<'PY' || fail=1
import json, os, random, subprocess, sys
root, tmp, sglc = sys.argv[1:4]
sys.path.insert(0, os.path.join(root, "tests", "ref"))
import make_tiny_ds
cache = os.path.join(root, "build", "tiny-models")
bad = 0
for name in ("qwen3-moe", "deepseek-v2"):
    w = os.path.join(tmp, "inv-" + name)
    args = [sys.executable, os.path.join(root, "tests", "ref", "lora_ref.py"), "--cache", cache,
            "--write-adapters", w, "--n", "4"]
    if name.startswith("deepseek"):
        args += ["--model-dir", os.path.join(make_tiny_ds.build(name, cache)[0], "f32")]
    else:
        args += ["--only", name]
    paths = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    model, ads = paths[0], paths[1:]
    lp = [f"a{i}={p}" for i, p in enumerate(ads)]
    random.seed(11)
    reqs = []
    for i in range(6):  # a0..a3, the base, a1 again
        o = {"input_ids": [random.randrange(3, 512) for _ in range(6 + 5 * i)],
             "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True},
             "return_logprob": True, "logprob_start_len": 0}
        if i != 4:
            o["lora_path"] = f"a{i if i < 4 else 1}"
        reqs.append(o)

    def run(lines, tag):
        f = os.path.join(w, tag + ".jsonl")
        with open(f, "w") as fh:
            fh.writelines(json.dumps(o) + "\n" for o in lines)
        out = subprocess.run([sglc, "generate", "--model-path", model, "--requests", f,
                              "--skip-tokenizer-init", "--lora-paths", *lp, "--max-loras-per-batch", "8",
                              "--log-level", "info"], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"FAIL {name}: generate --requests: {out.stderr[-400:]}")
        if tag == "all":  # one prefill step takes every request (so the rows did share batches)
            ok = f"#new-seq: {len(lines)}," in out.stderr
            print(("ok   " if ok else "FAIL ") + f"{name}: one prefill batch of all {len(lines)} requests")
            if not ok:
                raise SystemExit(1)
        return [json.loads(l) for l in out.stdout.splitlines()]

    def lps(o):
        mi = o["meta_info"]
        return [x[0] for x in mi["input_token_logprobs"] + mi["output_token_logprobs"] if x[0] is not None]
    batched = run(reqs, "all")
    base_alone = {}
    for i, r in enumerate(reqs):
        alone = run([r], f"one{i}")[0]
        d = max(abs(a - b) for a, b in zip(lps(batched[i]), lps(alone)))
        same = batched[i]["output_ids"] == alone["output_ids"] and len(lps(batched[i])) == len(lps(alone))
        ok = same and d <= 2e-5
        print(("ok   " if ok else "FAIL ") + f"{name} line {i} ({r.get('lora_path', 'base')}): batched == alone "
              f"(ids {'equal' if same else 'differ'}, max|d logprob| {d:.2g} <= 2e-5)")
        bad += not ok
        if "lora_path" in r:  # the adapter must change this request's logprobs
            b = dict(r)
            del b["lora_path"]
            base = run([b], f"base{i}")[0]
            mv = max(abs(a - c) for a, c in zip(lps(alone), lps(base)))
            print(("ok   " if mv > 1e-2 else "FAIL ") + f"{name} line {i}: the adapter moves the logprobs by {mv:.3g}")
            bad += not mv > 1e-2
sys.exit(1 if bad else 0)
PY
# a bad adapter stops start-up with its message
mkdir -p "$TMP/dora" && cp "$TMP/a0/adapter_model.safetensors" "$TMP/dora/" &&
    echo '{"r": 8, "target_modules": ["q_proj"], "use_dora": true}' >"$TMP/dora/adapter_config.json"
if "$BIN" generate --model-path "$M" --requests "$TMP/reqs.jsonl" --skip-tokenizer-init \
    --lora-paths "d=$TMP/dora" >/dev/null 2>"$TMP/errd"; then echo "FAIL a DoRA adapter loaded"; fail=1
elif grep -q "DoRA (use_dora) adapters are not supported" "$TMP/errd"; then echo "ok   DoRA refused at start-up"
else echo "FAIL DoRA message: $(cat "$TMP/errd")"; fail=1; fi
if "$BIN" generate --model-path "$M" --requests "$TMP/reqs.jsonl" --skip-tokenizer-init \
    --lora-paths "x=$TMP/a4" --max-lora-rank 4 >/dev/null 2>"$TMP/errr"; then echo "FAIL rank above --max-lora-rank loaded"; fail=1
elif grep -q "exceeds --max-lora-rank 4" "$TMP/errr"; then echo "ok   rank above --max-lora-rank refused"
else echo "FAIL rank message: $(cat "$TMP/errr")"; fail=1; fi
# --lora-target-modules bounds the adapters; --max-loaded-loras >= --max-loras-per-batch
if "$BIN" generate --model-path "$M" --requests "$TMP/reqs.jsonl" --skip-tokenizer-init \
    --lora-paths "x=$TMP/a0" --lora-target-modules q_proj v_proj >/dev/null 2>"$TMP/errt"; then
    echo "FAIL an adapter outside --lora-target-modules loaded"; fail=1
elif grep -q "are not in --lora-target-modules (q_proj,v_proj)" "$TMP/errt"; then echo "ok   --lora-target-modules limit"
else echo "FAIL target message: $(cat "$TMP/errt")"; fail=1; fi
if "$BIN" generate --model-path "$M" --requests "$TMP/reqs.jsonl" --skip-tokenizer-init \
    --lora-paths "x=$TMP/a0" --lora-target-modules all --max-loaded-loras 2 >/dev/null 2>"$TMP/errl"; then
    echo "FAIL --max-loaded-loras 2 < --max-loras-per-batch 8 accepted"; fail=1
elif grep -q "max_loaded_loras (2) should be greater than or equal to max_loras_per_batch (8)" "$TMP/errl"; then
    echo "ok   --max-loaded-loras below --max-loras-per-batch refused"
else echo "FAIL max-loaded message: $(cat "$TMP/errl")"; fail=1; fi
# a target the model lacks: an MLP adapter on an MoE layer (experts there)
MOE=$("$PY" - "$ROOT" "$TMP" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "ref"))
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
import numpy as np, make_tiny_model, safetensors_np
d, _ = make_tiny_model.build("qwen3-moe", os.path.join(sys.argv[1], "build", "tiny-models"),
                             os.environ.get("SGLC_SHARED", os.path.join(sys.argv[1], "..", "shared")))
cfg = json.load(open(os.path.join(d, "f32", "config.json")))
H, r, ad = cfg["hidden_size"], 4, os.path.join(sys.argv[2], "moe")
os.makedirs(ad)
json.dump({"r": r, "lora_alpha": 8, "target_modules": ["gate_proj"]}, open(ad + "/adapter_config.json", "w"))
p = "base_model.model.model.layers.1.mlp.gate_proj."
safetensors_np.write(ad + "/adapter_model.safetensors",
                     {p + "lora_A.weight": np.zeros((r, H), np.float32), p + "lora_B.weight": np.zeros((16, r), np.float32)})
print(os.path.join(d, "f32"))
PY
)
if "$BIN" generate --model-path "$MOE" --input-ids 1,2,3 --max-new-tokens 1 --lora-path "$TMP/moe" \
    >/dev/null 2>"$TMP/errm"; then echo "FAIL an MLP adapter loaded on an MoE layer"; fail=1
elif grep -q "tensor base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight targets mlp.gate_proj of layer 1, whose MLP is mixture-of-experts (adapt its experts: mlp.experts.E.gate_proj)" "$TMP/errm"; then
    echo "ok   MLP adapter on an MoE layer refused"
else echo "FAIL MoE message: $(cat "$TMP/errm")"; fail=1; fi
# DeepSeek (tiny deepseek-v2-lite: MLA with q_proj, experts from layer 1):
# each adapter is refused at start-up by a message naming the module it
# targets.  TAG|target_modules|tensor module (layer.module)|expected message
DS=$("$PY" - "$ROOT" "$TMP" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "ref"))
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
import numpy as np, make_tiny_ds, safetensors_np
d, _ = make_tiny_ds.build("deepseek-v2-lite", os.path.join(sys.argv[1], "build", "tiny-models"))
cfg = json.load(open(os.path.join(d, "f32", "config.json")))
H, r, kvr, Ie = cfg["hidden_size"], 4, cfg["kv_lora_rank"], cfg["moe_intermediate_size"]
nb = cfg["num_attention_heads"] * (cfg["qk_nope_head_dim"] + cfg["v_head_dim"])
for tag, targets, mod, ak, bn in (
        ("e99", ["gate_proj"], "1.mlp.experts.99.gate_proj", H, Ie),
        ("edense", ["gate_proj"], "0.mlp.experts.0.gate_proj", H, Ie),
        ("dense", ["up_proj"], "1.mlp.up_proj", H, Ie),
        ("k", ["k_proj"], "0.self_attn.k_proj", H, 8),
        ("qa", ["q_a_proj"], "0.self_attn.q_a_proj", H, 8),
        ("kvb", ["kv_b_proj"], "0.self_attn.kv_b_proj", kvr, nb - 1),
        ("eshape", ["down_proj"], "1.mlp.experts.3.down_proj", H, H),
        ("sshape", ["down_proj"], "1.mlp.shared_experts.down_proj", Ie, H)):
    ad = os.path.join(sys.argv[2], "ds-" + tag)
    os.makedirs(ad)
    json.dump({"r": r, "lora_alpha": 8, "target_modules": targets}, open(ad + "/adapter_config.json", "w"))
    p = f"base_model.model.model.layers.{mod}."
    safetensors_np.write(ad + "/adapter_model.safetensors",
                         {p + "lora_A.weight": np.zeros((r, ak), np.float32), p + "lora_B.weight": np.zeros((bn, r), np.float32)})
print(os.path.join(d, "f32"))
print(nb)
PY
)
NB=$(echo "$DS" | tail -1); DS=$(echo "$DS" | head -1)
ds_case() { # TAG MESSAGE
    if "$BIN" generate --model-path "$DS" --input-ids 1,2,3 --max-new-tokens 1 --lora-path "$TMP/ds-$1" \
        >/dev/null 2>"$TMP/err-ds"; then echo "FAIL DeepSeek $1: the adapter loaded"; fail=1
    elif grep -qF "$2" "$TMP/err-ds"; then echo "ok   DeepSeek $1 refused: $(grep -F "$2" "$TMP/err-ds" | head -1 | cut -c1-160)"
    else echo "FAIL DeepSeek $1 message: $(cat "$TMP/err-ds")"; fail=1; fi
}
ds_case e99 "tensor base_model.model.model.layers.1.mlp.experts.99.gate_proj.lora_A.weight: expert 99, the model has 16 experts per MoE layer"
ds_case edense "targets mlp.experts.0.gate_proj of layer 0, which is not a mixture-of-experts layer"
ds_case dense "targets mlp.up_proj of layer 1, whose MLP is mixture-of-experts (adapt its experts: mlp.experts.E.up_proj)"
ds_case k "targets self_attn.k_proj of layer 0, which has no such projection in its multi-head latent attention (DeepSeek)"
ds_case qa "targets self_attn.q_a_proj, which layer 0 of this model does not have"
ds_case kvb "tensor base_model.model.model.layers.0.self_attn.kv_b_proj.lora_B.weight has shape [$((NB - 1)), 4], expected [$NB, 4] (out_features, r)"
ds_case eshape "tensor base_model.model.model.layers.1.mlp.experts.3.down_proj.lora_A.weight has shape [4, 64], expected [4, 16] (r, in_features)"
ds_case sshape "tensor base_model.model.model.layers.1.mlp.shared_experts.down_proj.lora_A.weight has shape [4, 16], expected [4, "
# an MLA module on a model without MLA (tiny qwen3-moe)
mkdir -p "$TMP/mla-on-moe" && "$PY" - "$ROOT" "$TMP/mla-on-moe" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
import numpy as np, safetensors_np
json.dump({"r": 4, "target_modules": ["kv_b_proj"]}, open(sys.argv[2] + "/adapter_config.json", "w"))
p = "base_model.model.model.layers.0.self_attn.kv_b_proj."
safetensors_np.write(sys.argv[2] + "/adapter_model.safetensors",
                     {p + "lora_A.weight": np.zeros((4, 32), np.float32), p + "lora_B.weight": np.zeros((64, 4), np.float32)})
PY
if "$BIN" generate --model-path "$MOE" --input-ids 1,2,3 --max-new-tokens 1 --lora-path "$TMP/mla-on-moe" \
    >/dev/null 2>"$TMP/errmla"; then echo "FAIL kv_b_proj adapter loaded on a model without MLA"; fail=1
elif grep -qF "targets self_attn.kv_b_proj of layer 0, which does not use multi-head latent attention (DeepSeek)" "$TMP/errmla"; then
    echo "ok   kv_b_proj adapter on a model without MLA refused"
else echo "FAIL MLA-on-MoE message: $(cat "$TMP/errmla")"; fail=1; fi
# Phi-3 (fused qkv_proj / gate_up_proj in the checkpoint and the adapter):
# a fused B of the wrong row count, and a fused pair plus a separate q_proj
# pair adapting the same rows, are refused by name
PHI=$("$PY" - "$ROOT" "$TMP" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "ref"))
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
import numpy as np, phi3_ref, safetensors_np
d = phi3_ref.build("phi3-mini-4k", os.path.join(sys.argv[1], "build", "tiny-models"),
                   os.environ.get("SGLC_SHARED", os.path.join(sys.argv[1], "..", "shared")))
cfg = json.load(open(os.path.join(d, "f32", "config.json")))
H, r = cfg["hidden_size"], 4
z = lambda *s: np.zeros(s, np.float32)
pre = "base_model.model.model.layers.0.self_attn."
for tag, targets, t in (("rows", ["qkv_proj"], {pre + "qkv_proj.lora_A.weight": z(r, H),
                                                 pre + "qkv_proj.lora_B.weight": z(3 * H - 1, r)}),
                        ("both", ["qkv_proj"], {pre + "qkv_proj.lora_A.weight": z(r, H),
                                                 pre + "qkv_proj.lora_B.weight": z(3 * H, r),
                                                 pre + "q_proj.lora_A.weight": z(r, H),
                                                 pre + "q_proj.lora_B.weight": z(H, r)})):
    ad = os.path.join(sys.argv[2], "phi-" + tag)
    os.makedirs(ad)
    json.dump({"r": r, "lora_alpha": 8, "target_modules": targets}, open(ad + "/adapter_config.json", "w"))
    safetensors_np.write(ad + "/adapter_model.safetensors", t)
print(os.path.join(d, "f32"))
PY
)
phi_case() { # TAG MESSAGE
    if "$BIN" generate --model-path "$PHI" --input-ids 1,2,3 --max-new-tokens 1 --lora-path "$TMP/phi-$1" \
        >/dev/null 2>"$TMP/err-phi"; then echo "FAIL Phi-3 $1: the adapter loaded"; fail=1
    elif grep -qF "$2" "$TMP/err-phi"; then echo "ok   Phi-3 $1 refused: $(grep -F "$2" "$TMP/err-phi" | head -1 | cut -c1-160)"
    else echo "FAIL Phi-3 $1 message: $(cat "$TMP/err-phi")"; fail=1; fi
}
phi_case rows "self_attn.qkv_proj.lora_B.weight has shape [383, 4], expected [384, 4] (out_features of the fused module, r)"
phi_case both "both adapt self_attn.q_proj"
exit $fail
