#!/usr/bin/env bash
# LoRA through the scheduler (`generate --requests`): 8 random adapters
# (tests/ref/lora_ref.py --write-adapters, tiny llama3) and the base model in
# one batch; every request's greedy ids equal the same request run alone
# (`generate --lora-path`), with --max-loras-per-batch 9 (one prefill of all)
# and 3 (admission holds requests back: no prefill batch takes more than 3
# adapters, the base counting as one) alike.  An unknown adapter is that
# line's error with SGLang's message; a bad --lora-paths entry (DoRA, rank
# above --max-lora-rank) stops start-up; an MLP adapter on an MoE layer is
# refused; on DeepSeek (tiny deepseek-v2-lite) adapters of q_proj / o_proj
# (MLA layers), kv_a_proj_with_mqa (config), kv_b_proj and an expert's
# gate_proj (tensor names) each stop start-up with a message naming the
# module; a Phi-3 fused qkv_proj B of the wrong size, or fused + separate
# q_proj pairs, are refused.
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
elif grep -q "tensor base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight targets gate_proj of layer 1, whose MLP is mixture-of-experts: sglc cannot adapt experts" "$TMP/errm"; then
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
H, r = cfg["hidden_size"], 4
for tag, targets, mod in (("q", ["q_proj"], "0.self_attn.q_proj"),
                          ("o", ["o_proj"], "0.self_attn.o_proj"),
                          ("kva", ["kv_a_proj_with_mqa"], "0.self_attn.kv_a_proj_with_mqa"),
                          ("kvb", ["q_proj"], "0.self_attn.kv_b_proj"),
                          ("exp", ["gate_proj"], "1.mlp.experts.0.gate_proj")):
    ad = os.path.join(sys.argv[2], "ds-" + tag)
    os.makedirs(ad)
    json.dump({"r": r, "lora_alpha": 8, "target_modules": targets}, open(ad + "/adapter_config.json", "w"))
    p = f"base_model.model.model.layers.{mod}."
    safetensors_np.write(ad + "/adapter_model.safetensors",
                         {p + "lora_A.weight": np.zeros((r, H), np.float32), p + "lora_B.weight": np.zeros((8, r), np.float32)})
print(os.path.join(d, "f32"))
PY
)
ds_case() { # TAG MESSAGE
    if "$BIN" generate --model-path "$DS" --input-ids 1,2,3 --max-new-tokens 1 --lora-path "$TMP/ds-$1" \
        >/dev/null 2>"$TMP/err-ds"; then echo "FAIL DeepSeek $1: the adapter loaded"; fail=1
    elif grep -qF "$2" "$TMP/err-ds"; then echo "ok   DeepSeek $1 refused: $(grep -F "$2" "$TMP/err-ds" | head -1 | cut -c1-160)"
    else echo "FAIL DeepSeek $1 message: $(cat "$TMP/err-ds")"; fail=1; fi
}
ds_case q "targets q_proj of layer 0, which uses multi-head latent attention (DeepSeek): sglc cannot adapt MLA projections"
ds_case o "targets o_proj of layer 0, which uses multi-head latent attention (DeepSeek): sglc cannot adapt MLA projections"
ds_case kva 'target module "kv_a_proj_with_mqa" is not a module sglc can adapt'
ds_case kvb "tensor base_model.model.model.layers.0.self_attn.kv_b_proj.lora_A.weight is not a LoRA weight of a module sglc can adapt"
ds_case exp "tensor base_model.model.model.layers.1.mlp.experts.0.gate_proj.lora_A.weight is not a LoRA weight of a module sglc can adapt"
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
