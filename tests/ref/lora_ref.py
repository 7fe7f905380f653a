#!/usr/bin/python3
"""LoRA golden test: `sglc generate --lora-path` against PyTorch with merged weights.

DESIGN
  For each tiny model of make_tiny_model.py (all of them but the embedding
  one, --only to pick) this writes random PEFT adapters by hand (no `peft`
  package): adapter_config.json + adapter_model.safetensors with
    base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight  (r, in)
    base_model.model.model.layers.N.self_attn.q_proj.lora_B.weight  (out, r)
    base_model.model.lm_head.lora_{A,B}.weight
  in F32, BF16 or F16, several ranks and target sets, rsLoRA on some.  The
  reference is an independent path: the base checkpoint with every
  targeted weight replaced by W + scale * B @ A (scale = alpha / r, or
  alpha / sqrt(r) with use_rslora), computed in float64 from the values as
  stored, written as a plain HF folder and run by tests/ref/torch_ref.py.
  sglc loads the base folder plus the adapter and must give the same
  64-token prompt logits within 1e-4 (max|d| / max|ref|, f32) and the same
  greedy ids.  Before that, the adapter must move the reference logits by
  far more than the tolerance (so the check would catch an ignored delta).
  MoE models take attention adapters only (their MLP is experts), except
  a dense layer's MLP (mlp_only_layers); modules fused in the checkpoint
  (qkv_proj / gate_up_proj) get none; MLA models are skipped.  Exit 1 when
  a check fails.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import golden  # noqa: E402
import make_tiny_model  # noqa: E402
import safetensors_np  # noqa: E402
import torch_ref  # noqa: E402

ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLP = ["gate_proj", "up_proj", "down_proj"]
# (rank, alpha, rslora, storage dtype, targets) per adapter variant; MoE
# models drop the MLP targets
VARIANTS = [
    (8, 16, False, "F32", ATTN + MLP),
    (3, 5, True, "BF16", ["q_proj", "v_proj", "down_proj"]),
    (16, 8, False, "F16", ["k_proj", "o_proj", "up_proj", "gate_proj", "lm_head"]),
]


def round_to(a, tag):
    """The values as the file stores them (float64 for the merge)."""
    a = a.astype(np.float32)
    if tag == "BF16":
        bits = safetensors_np.f32_to_bf16_bits(a)
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if tag == "F16":
        return a.astype(np.float16).astype(np.float64)
    return a.astype(np.float64)


def stored(a64, tag):
    if tag == "BF16":
        return ("BF16", safetensors_np.f32_to_bf16_bits(a64.astype(np.float32)))
    if tag == "F16":
        return a64.astype(np.float16)
    return a64.astype(np.float32)


def is_moe_layer(cfg, i):
    arch = cfg["architectures"][0]
    if arch in ("MixtralForCausalLM", "GraniteMoeForCausalLM"):
        return True
    if arch in ("Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM"):
        return (cfg.get("num_experts", 128) > 0 and i not in (cfg.get("mlp_only_layers") or [])
                and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0)
    return False


def make_adapter(out_dir, base_state, cfg, seed, r, alpha, rslora, tag, targets):
    """Writes the PEFT folder; returns {weight name: merged float64 weight}."""
    rng = np.random.RandomState(seed)
    scale = alpha / np.sqrt(r) if rslora else alpha / r
    L = cfg["num_hidden_layers"]
    tensors, merged, used = {}, {}, set()
    for i in range(L):
        for mod in targets:
            if mod == "lm_head":
                continue
            if mod in MLP and is_moe_layer(cfg, i):
                continue
            grp = "self_attn" if mod in ATTN else "mlp"
            wname = f"model.layers.{i}.{grp}.{mod}.weight"
            if wname not in base_state:
                continue  # fused in the checkpoint (qkv_proj / gate_up_proj): not a PEFT target here
            W = base_state[wname].numpy().astype(np.float64)
            n, k = W.shape
            A = round_to(rng.standard_normal((r, k)) / np.sqrt(k), tag)
            # |scale B A x| ~ 0.3 |W x|: a clear change, logits stay O(1)
            B = round_to(rng.standard_normal((n, r)) * 0.3 / (np.sqrt(r) * scale), tag)
            pre = f"base_model.model.model.layers.{i}.{grp}.{mod}"
            tensors[pre + ".lora_A.weight"] = stored(A, tag)
            tensors[pre + ".lora_B.weight"] = stored(B, tag)
            merged[wname] = W + scale * (B @ A)
            used.add(mod)
    if "lm_head" in targets:
        W = base_state["lm_head.weight"].numpy().astype(np.float64)
        n, k = W.shape
        A = round_to(rng.standard_normal((r, k)) / np.sqrt(k), tag)
        B = round_to(rng.standard_normal((n, r)) * 0.3 / (np.sqrt(r) * scale), tag)
        tensors["base_model.model.lm_head.lora_A.weight"] = stored(A, tag)
        tensors["base_model.model.lm_head.lora_B.weight"] = stored(B, tag)
        merged["lm_head.weight"] = W + scale * (B @ A)
        used.add("lm_head")
    os.makedirs(out_dir, exist_ok=True)
    conf = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": alpha,
            "use_rslora": rslora, "use_dora": False, "lora_dropout": 0.05, "bias": "none",
            "target_modules": sorted(used), "modules_to_save": None, "fan_in_fan_out": False,
            "base_model_name_or_path": "tiny", "inference_mode": True,
            "rank_pattern": {}, "alpha_pattern": {}}
    with open(os.path.join(out_dir, "adapter_config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    safetensors_np.write(os.path.join(out_dir, "adapter_model.safetensors"), tensors,
                         metadata={"format": "pt"})
    return merged


def write_merged(out_dir, f32_dir, base_state, merged):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(f32_dir, "config.json")) as f:
        cfg = json.load(f)
    st = {k: v.numpy().astype(np.float32) for k, v in base_state.items()}
    for k, v in merged.items():
        st[k] = v.astype(np.float32)
    if "lm_head.weight" in merged and cfg.get("tie_word_embeddings"):
        cfg["tie_word_embeddings"] = False  # the adapted head no longer equals the embedding
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    safetensors_np.write(os.path.join(out_dir, "model.safetensors"), st, dtype="F32",
                         metadata={"format": "pt"})


def run_sglc_lora(sglc, model_dir, lora_dir, ids, n_new):
    """golden.run_sglc with --lora-path."""
    orig = golden.subprocess.run

    def run(cmd, **kw):
        return orig(cmd + ["--lora-path", lora_dir], **kw)
    golden.subprocess.run = run
    try:
        return golden.run_sglc(sglc, model_dir, ids, n_new, "float32")
    finally:
        golden.subprocess.run = orig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglc", default=os.environ.get("SGLC_BIN", os.path.join(ROOT, "build", "sglc")))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--only")
    ap.add_argument("--write-adapters", metavar="DIR",
                    help="only write random adapters for the --only model (its f32 folder first "
                         "line of stdout, then one adapter folder per line) and exit")
    ap.add_argument("--n", type=int, default=8, help="adapters for --write-adapters")
    ap.add_argument("--model-dir", help="--write-adapters for this HF folder instead of a tiny model")
    a = ap.parse_args()
    if a.write_adapters:
        if a.model_dir:
            f32_dir = a.model_dir
        else:
            d, _ = make_tiny_model.build(a.only or "llama3", a.cache, a.shared)
            f32_dir = os.path.join(d, "f32")
        with open(os.path.join(f32_dir, "config.json")) as f:
            cfg = json.load(f)
        state = torch_ref.load_state(f32_dir)
        if "lm_head.weight" not in state:
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
        print(f32_dir)
        for i in range(a.n):
            r, alpha, rslora, tag, targets = VARIANTS[i % len(VARIANTS)]
            ad = os.path.join(a.write_adapters, f"a{i}")
            make_adapter(ad, state, cfg, 7000 + i, r + i, alpha, rslora, tag, targets)
            print(ad)
        return
    names = a.only.split(",") if a.only else [n for n in make_tiny_model.SPECS if "embed" not in n]
    n_prompt, n_new = 64, 8
    work = tempfile.mkdtemp(prefix="sglc-lora-")
    try:
        for mi, name in enumerate(names):
            d, _ = make_tiny_model.build(name, a.cache, a.shared)
            f32_dir = os.path.join(d, "f32")
            with open(os.path.join(f32_dir, "config.json")) as f:
                cfg = json.load(f)
            if cfg.get("kv_lora_rank"):
                print(f"skip {name}: multi-head latent attention (no q/k/v_proj adapters on MLA)")
                continue
            state = torch_ref.load_state(f32_dir)
            if "lm_head.weight" not in state:
                state["lm_head.weight"] = state["model.embed_tokens.weight"]
            base_state = {k: v for k, v in state.items()}
            rng = np.random.RandomState(99 + mi)
            prompt = [int(x) for x in rng.randint(3, make_tiny_model.VOCAB, size=n_prompt)]
            base_logits, _ = torch_ref.Model(f32_dir, "float32").generate(prompt, 1)
            vi = mi % len(VARIANTS)  # one variant per model, all variants over the models
            for v in sorted({vi, (vi + 1) % len(VARIANTS)}):
                r, alpha, rslora, tag, targets = VARIANTS[v]
                tag_s = f"{name} r={r} {tag}{' rslora' if rslora else ''} {'+'.join(targets)}"
                ad = os.path.join(work, f"{name}-{v}", "adapter")
                mg = os.path.join(work, f"{name}-{v}", "merged")
                merged = make_adapter(ad, base_state, cfg, 1000 * mi + v, r, alpha, rslora, tag,
                                      targets)
                if not merged:
                    continue
                write_merged(mg, f32_dir, base_state, merged)
                ref_logits, ref_ids = torch_ref.Model(mg, "float32").generate(prompt, n_new)
                e = golden.rel_err(base_logits, ref_logits)
                golden.report(e > 100 * golden.F32_TOL,
                              f"{tag_s}: the adapter moves the reference logits by {e:.3g}")

                def go():
                    ids, lg = run_sglc_lora(a.sglc, f32_dir, ad, prompt, n_new)
                    golden.check_logits(tag_s, lg, ref_logits, golden.F32_TOL)
                    golden.check_ids(tag_s, ids, ref_ids)
                golden.guard(tag_s, go)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if golden.failures else 0)


if __name__ == "__main__":
    main()
