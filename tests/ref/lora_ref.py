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
  On MoE models the MLP targets adapt every expert (PEFT's names:
  mlp.experts.E.gate_proj, Mixtral's block_sparse_moe.experts.E.w1 / w3 /
  w2) and the shared experts (mlp.shared_expert(s).*), as PEFT does when
  target_modules names gate_proj / up_proj / down_proj (w1 / w3 / w2).
  --family ds: make_tiny_ds.py's Qwen2-MoE and DeepSeek V2 / V3 models
  (reference ds_ref.DSModel, expanded MLA) with adapters on the MLA
  projections (q_proj or q_a_proj / q_b_proj, kv_a_proj_with_mqa,
  kv_b_proj, o_proj) and on routed + shared experts.
  --family gemma / phi3: the same check on gemma_ref.py's Gemma 2 / 3
  models (reference gemma_ref.Model; the multimodal ones under their
  language_model.* names) and phi3_ref.py's (reference phi3_ref.Phi3),
  whose fused qkv_proj / gate_up_proj get fused adapters (one A, B over
  all the fused rows) as PEFT writes them.  --family quant: check_quant
  (adapters over a Q8_0 GGUF / w8a8_int8 base).  Exit 1 when a check
  fails.
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

ATTN = ["q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj"]
MLP = ["gate_proj", "up_proj", "down_proj", "gate_up_proj"]
MLA = ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"]
# PEFT matches target_modules by a module's last name: Mixtral's experts are w1 / w3 / w2
LEAF = {"gate_proj": ("gate_proj", "w1"), "up_proj": ("up_proj", "w3"), "down_proj": ("down_proj", "w2")}
# (rank, alpha, rslora, storage dtype, targets) per adapter variant; MoE
# models drop the MLP targets
VARIANTS = [
    (8, 16, False, "F32", ATTN[:4] + MLP[:3]),
    (3, 5, True, "BF16", ["q_proj", "v_proj", "down_proj"]),
    (16, 8, False, "F16", ["k_proj", "o_proj", "up_proj", "gate_proj", "lm_head"]),
    (4, 12, False, "BF16", ["embed_tokens", "v_proj"]),
]
# DeepSeek (MLA + routed / shared experts, dense first layers) and Qwen2-MoE
DS_VARIANTS = [
    (8, 16, False, "F32", ATTN[:4] + MLA + MLP[:3]),
    (3, 5, True, "BF16", ["kv_b_proj"]),
    (6, 8, False, "F16", ["q_proj", "q_b_proj", "o_proj", "gate_proj", "lm_head"]),
    (4, 12, False, "BF16", ["kv_a_proj_with_mqa", "up_proj", "down_proj", "embed_tokens"]),
]
# Phi-3's checkpoint fuses q/k/v and gate/up, and so do PEFT adapters of it
# (one A, B rows = the q, k, v rows / the gate, up rows)
PHI3_VARIANTS = [
    (8, 16, False, "F32", ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]),
    (5, 7, True, "BF16", ["qkv_proj", "down_proj", "lm_head"]),
    (4, 12, False, "F16", ["gate_up_proj", "embed_tokens"]),
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


def make_adapter(out_dir, base_state, cfg, seed, r, alpha, rslora, tag, targets, wp="model."):
    """Writes the PEFT folder; returns {weight name: merged float64 weight}.
    wp: the text model's prefix of the checkpoint's layer names (PEFT's
    names are base_model.model. + the module's path)."""
    rng = np.random.RandomState(seed)
    scale = alpha / np.sqrt(r) if rslora else alpha / r
    L = cfg["num_hidden_layers"] if "num_hidden_layers" in cfg else cfg["text_config"]["num_hidden_layers"]
    tensors, merged, used = {}, {}, set()
    # every 2-D layer weight whose module's last name is a target (as PEFT
    # matches target_modules): attention, dense MLPs, experts, shared experts;
    # a checkpoint's fused qkv_proj / gate_up_proj only when targeted so.
    # Drawn per layer in target order, experts in numeric order.
    for i in range(L):
        lp = f"{wp}layers.{i}."
        names = sorted((k for k in base_state if k.startswith(lp) and k.endswith(".weight")
                        and base_state[k].dim() == 2),
                       key=lambda k: [int(x) if x.isdigit() else x for x in k.split(".")])
        todo = [w for mod in targets for lf in LEAF.get(mod, (mod,))
                for w in names if w.split(".")[-2] == lf]
        for wname in todo:
            leaf = wname.split(".")[-2]
            W = base_state[wname].numpy().astype(np.float64)
            n, k = W.shape
            A = round_to(rng.standard_normal((r, k)) / np.sqrt(k), tag)
            # |scale B A x| ~ 0.3 |W x|: a clear change, logits stay O(1)
            B = round_to(rng.standard_normal((n, r)) * 0.3 / (np.sqrt(r) * scale), tag)
            pre = "base_model.model." + wname[:-len(".weight")]
            tensors[pre + ".lora_A.weight"] = stored(A, tag)
            tensors[pre + ".lora_B.weight"] = stored(B, tag)
            merged[wname] = W + scale * (B @ A)
            used.add(leaf)
    if "embed_tokens" in targets:
        # PEFT's Embedding LoRA: row t of the embedding gains scale * (B @ A[:, t])
        E = base_state["model.embed_tokens.weight"].numpy().astype(np.float64)
        V, H = E.shape
        A = round_to(rng.standard_normal((r, V)), tag)
        B = round_to(rng.standard_normal((H, r)) * 0.05 / (np.sqrt(r) * scale), tag)
        tensors["base_model.model.model.embed_tokens.lora_embedding_A"] = stored(A, tag)
        tensors["base_model.model.model.embed_tokens.lora_embedding_B"] = stored(B, tag)
        merged["model.embed_tokens.weight"] = E + scale * (B @ A).T
        used.add("embed_tokens")
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


def write_merged(out_dir, f32_dir, base_state, merged, tied=None):
    """tied: the base checkpoint has no lm_head.weight (the head is the
    embedding); then the head is written only when the merge unties it."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(f32_dir, "config.json")) as f:
        cfg = json.load(f)
    st = {k: v.numpy().astype(np.float32) for k, v in base_state.items()}
    for k, v in merged.items():
        st[k] = v.astype(np.float32)
    if tied is None:
        tied = bool(cfg.get("tie_word_embeddings"))
    untie = "lm_head.weight" in merged or "model.embed_tokens.weight" in merged
    if tied and untie:
        cfg["tie_word_embeddings"] = False  # head and embedding differ now (lm_head written as is)
    elif tied:
        st.pop("lm_head.weight", None)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    safetensors_np.write(os.path.join(out_dir, "model.safetensors"), st, dtype="F32",
                         metadata={"format": "pt"})


def run_sglc_lora(sglc, model_dir, lora_dir, ids, n_new, extra=()):
    """golden.run_sglc with --lora-path (none when lora_dir is None) and extra arguments."""
    orig = golden.subprocess.run

    def run(cmd, **kw):
        return orig(cmd + (["--lora-path", lora_dir] if lora_dir else []) + list(extra), **kw)
    golden.subprocess.run = run
    try:
        return golden.run_sglc(sglc, model_dir, ids, n_new, "float32")
    finally:
        golden.subprocess.run = orig


def check_family(a, family, work):
    """Gemma 2 / 3 (gemma_ref.py) and Phi-3 (phi3_ref.py, fused qkv_proj /
    gate_up_proj adapters) tiny models: the same check as main's loop, the
    reference being that family's own PyTorch model on the merged folder."""
    if family == "ds":
        import ds_ref
        import make_tiny_ds as ref
        names = [n for n in ref.SPECS]
        build = lambda n: ref.build(n, a.cache)[0]  # noqa: E731
        model = lambda d: ds_ref.DSModel(d, "float32")  # noqa: E731
        variants = DS_VARIANTS
    elif family == "gemma":
        import gemma_ref as ref
        names = list(ref.SPECS)
        build = lambda n: ref.build(n, a.cache)[0]  # noqa: E731
        model = lambda d: ref.Model(d)  # noqa: E731
        variants = VARIANTS
    else:
        import phi3_ref as ref
        names = list(ref.SPECS)
        build = lambda n: ref.build(n, a.cache, a.shared)  # noqa: E731
        model = lambda d: ref.Phi3(d)  # noqa: E731
        variants = PHI3_VARIANTS
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    n_prompt, n_new = 64, 8
    for mi, name in enumerate(names):
        f32_dir = os.path.join(build(name), "f32")
        with open(os.path.join(f32_dir, "config.json")) as f:
            cfg = json.load(f)
        state = torch_ref.load_state(f32_dir)
        # Gemma3ForConditionalGeneration: the text model under language_model.model.*
        # (model.language_model.* in the newer layout); adapters there on the layers only
        wp = next((q for q in ("language_model.model.", "model.language_model.")
                   if q + "embed_tokens.weight" in state), "model.")
        tied = "lm_head.weight" not in state
        if tied and wp == "model.":
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
        rng = np.random.RandomState(500 + mi)
        prompt = [int(x) for x in rng.randint(3, ref.VOCAB, size=n_prompt)]
        base_logits, _ = model(f32_dir).generate(prompt, 1)
        # Gemma: two variants per model, and always the embedding one (its delta is scaled by
        # sqrt(hidden) with the embedding); Phi-3: all (fused qkv / gate_up in each but one)
        vs = sorted({mi % len(variants), (mi + 1) % len(variants), 3}) if family == "gemma" \
            else range(len(variants))
        if family == "ds":  # two per model, the kv_b_proj one on every MLA model
            vs = {mi % len(variants), (mi + 2) % len(variants)}
            vs = sorted(vs | {1} if cfg.get("kv_lora_rank") else (vs - {1}) | {0})
        if wp != "model.":
            vs = (0, 1)  # layers only (the embedding / head names of the wrapper are not written here)
        for v in vs:
            r, alpha, rslora, tag, targets = variants[v]
            tag_s = f"{name} r={r} {tag}{' rslora' if rslora else ''} {'+'.join(targets)}"
            ad = os.path.join(work, f"{name}-{v}", "adapter")
            mg = os.path.join(work, f"{name}-{v}", "merged")
            merged = make_adapter(ad, state, cfg, 3000 + 100 * mi + v, r, alpha, rslora, tag,
                                  targets, wp)
            golden.report(bool(merged), f"{tag_s}: adapter written ({len(merged)} merged weights)")
            if not merged:
                continue
            write_merged(mg, f32_dir, state, merged, tied=tied)
            ref_logits, ref_ids = model(mg).generate(prompt, n_new)
            e = golden.rel_err(base_logits, ref_logits)
            golden.report(e > 100 * golden.F32_TOL,
                          f"{tag_s}: the adapter moves the reference logits by {e:.3g}")

            def go():
                ids, lg = run_sglc_lora(a.sglc, f32_dir, ad, prompt, n_new)
                golden.check_logits(tag_s, lg, ref_logits, golden.F32_TOL)
                golden.check_ids(tag_s, ids, ref_ids)
            golden.guard(tag_s, go)


def check_quant(a, work):
    """Adapters over a Q8_0 GGUF base (`sglc quantize --type Q8_0` of
    make_kquant_model.py's kq-llama and of TinyStories-656K).  The
    reference base is the file's values decoded independently
    (gguf_np.py dequant-hf: what sglc must compute from the file); the
    adapter is merged into it in float64.  Checks:
      - SGLC_GGUF_DEQUANT=1 (blocks decoded to f32 at load): prompt logits
        with the adapter = the merged reference within 1e-4, the 8 greedy
        ids identical -- the adapter pass on a quantized base is exact;
      - in place (int8 kernels: activations rounded to int8 per 32-block
        before each product, as test_gguf.sh bounds): the adapter's effect
        d_sglc = logits(q + ad) - logits(q) vs the reference's
        d_ref = logits(deq + delta) - logits(deq):
        max|d_sglc - d_ref| <= QUANT_EFFECT_RATIO (2) x the base's own
        in-place error max|logits(q) - logits(deq)| (measured 1.1-1.4:
        the adapter adds nothing beyond the int8 activations of the two
        runs; an ignored or mis-scaled delta gives ~8), >= 80% of the 64
        prompt positions' argmax equal the merged reference's (measured
        94-100%; greedy ids are not asserted in place), and the effect
        itself > 100x the f32 tolerance."""
    import subprocess
    shared = a.shared
    kq = os.path.join(work, "kq")
    subprocess.run([sys.executable, os.path.join(HERE, "make_kquant_model.py"), kq], check=True,
                   stdout=subprocess.DEVNULL)
    # (name, folder, VARIANTS used): on the trained TinyStories the small
    # r=3 adapter moves the logits by only ~4x the in-place error, too
    # little for the bound to mean anything, so only the all-seven one
    models = [("kq-llama", os.path.join(kq, "kq-llama"), (0, 1)),
              ("TinyStories-656K", os.path.join(shared, "models", "TinyStories-656K"), (0,))]
    n_prompt, n_new = 64, 8
    for mi, (name, md, vlist) in enumerate(models):
        gg = os.path.join(work, f"{name}.q8_0.gguf")
        deq = os.path.join(work, f"{name}.deq")
        p = subprocess.run([a.sglc, "quantize", "--model-path", md, "--output", gg, "--type", "Q8_0"],
                           capture_output=True, text=True)
        if p.returncode:
            golden.report(False, f"{name}: quantize Q8_0: {p.stderr.strip()[-300:]}")
            continue
        p = subprocess.run([sys.executable, os.path.join(HERE, "gguf_np.py"), "dequant-hf", md, gg, deq],
                           capture_output=True, text=True)
        if p.returncode:
            golden.report(False, f"{name}: dequant-hf: {p.stderr.strip()[-300:]}")
            continue
        with open(os.path.join(deq, "config.json")) as f:
            cfg = json.load(f)
        state = torch_ref.load_state(deq)
        rng = np.random.RandomState(77 + mi)
        prompt = [int(x) for x in rng.randint(3, cfg["vocab_size"], size=n_prompt)]
        base_logits, _ = torch_ref.Model(deq, "float32").generate(prompt, 1)
        _, q_base = golden.run_sglc(a.sglc, gg, prompt, 1, "float32")
        for v in vlist:
            r, alpha, rslora, tag, targets = VARIANTS[v]
            tag_s = f"{name} Q8_0 r={r} {tag}{' rslora' if rslora else ''} {'+'.join(targets)}"
            ad = os.path.join(work, f"{name}-{v}", "adapter")
            mg = os.path.join(work, f"{name}-{v}", "merged")
            merged = make_adapter(ad, state, cfg, 5000 + 10 * mi + v, r, alpha, rslora, tag, targets)
            write_merged(mg, deq, state, merged, tied=False)
            ref_logits, ref_ids = torch_ref.Model(mg, "float32").generate(prompt, n_new)
            e = golden.rel_err(base_logits, ref_logits)
            golden.report(e > 100 * golden.F32_TOL,
                          f"{tag_s}: the adapter moves the reference logits by {e:.3g}")

            def deq_go():
                os.environ["SGLC_GGUF_DEQUANT"] = "1"
                try:
                    ids, lg = run_sglc_lora(a.sglc, gg, ad, prompt, n_new)
                finally:
                    del os.environ["SGLC_GGUF_DEQUANT"]
                golden.check_logits(tag_s + " dequantized", lg, ref_logits, golden.F32_TOL)
                golden.check_ids(tag_s + " dequantized", ids, ref_ids)
            golden.guard(tag_s + " dequantized", deq_go)

            golden.guard(tag_s + " in place", lambda: check_effect(
                tag_s + " in place (int8 activations)", run_sglc_lora(a.sglc, gg, ad, prompt, n_new)[1],
                q_base, ref_logits, base_logits, n_prompt))

    # --quantization w8a8_int8: the safetensors base quantized at load
    # (per-channel int8 weights, per-token int8 activations); no decoded
    # file to compare with, so the reference is the f32 base itself and
    # the base's own error is against it
    md = os.path.join(kq, "kq-llama")
    with open(os.path.join(md, "config.json")) as f:
        cfg = json.load(f)
    state = torch_ref.load_state(md)
    rng = np.random.RandomState(91)
    prompt = [int(x) for x in rng.randint(3, cfg["vocab_size"], size=n_prompt)]
    base_logits, _ = torch_ref.Model(md, "float32").generate(prompt, 1)
    w8 = ["--quantization", "w8a8_int8"]
    for v in (0, 1):
        r, alpha, rslora, tag, targets = VARIANTS[v]
        tag_s = f"kq-llama w8a8_int8 r={r} {tag}{' rslora' if rslora else ''} {'+'.join(targets)}"
        ad = os.path.join(work, f"w8-{v}", "adapter")
        mg = os.path.join(work, f"w8-{v}", "merged")
        merged = make_adapter(ad, state, cfg, 5100 + v, r, alpha, rslora, tag, targets)
        write_merged(mg, md, state, merged, tied=False)
        ref_logits, _ = torch_ref.Model(mg, "float32").generate(prompt, 1)

        def go():
            _, q_base = run_sglc_lora(a.sglc, md, None, prompt, 1, w8)
            _, lg = run_sglc_lora(a.sglc, md, ad, prompt, 1, w8)
            check_effect(tag_s, lg, q_base, ref_logits, base_logits, n_prompt)
        golden.guard(tag_s, go)


def check_effect(tag_s, lg, q_base, ref_logits, base_logits, n_prompt):
    """The in-place bound of check_quant: sglc's adapter effect (lg - q_base)
    against the reference's (ref_logits - base_logits)."""
    V = ref_logits.shape[-1]
    if lg is None or q_base is None or lg.size != n_prompt * V or q_base.size != n_prompt * V:
        golden.report(False, f"{tag_s}: logits missing or of the wrong size")
        return
    got = lg.reshape(n_prompt, V)
    ref = np.asarray(ref_logits).reshape(n_prompt, V)
    base = np.asarray(base_logits).reshape(n_prompt, V)
    d_s = got - q_base.reshape(n_prompt, V)
    d_r = ref - base
    # the base's own quantized error against its reference
    qerr = np.abs(q_base.reshape(n_prompt, V) - base).max()
    golden.report(np.abs(d_r).max() / qerr > 2 * QUANT_EFFECT_RATIO,
                  f"{tag_s}: an ignored adapter would be {np.abs(d_r).max() / qerr:.3g} x "
                  f"the base's quantized error (> 2 x {QUANT_EFFECT_RATIO}: the bound can fail)")
    ratio = np.abs(d_s - d_r).max() / qerr
    moved = np.abs(d_s).max() / np.abs(ref).max()
    agree = (got.argmax(1) == ref.argmax(1)).mean()
    golden.report(moved > 100 * golden.F32_TOL and ratio <= QUANT_EFFECT_RATIO and agree >= 0.8,
                  f"{tag_s}: max|effect - reference effect| = {ratio:.3g} x the base's own "
                  f"quantized error {qerr:.3g} (<= {QUANT_EFFECT_RATIO}), effect {moved:.3g} of "
                  f"max|logit|, argmax agree {100 * agree:.0f}% (>= 80%)")


QUANT_EFFECT_RATIO = 2.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglc", default=os.environ.get("SGLC_BIN", os.path.join(ROOT, "build", "sglc")))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--only")
    ap.add_argument("--family", choices=["tiny", "gemma", "phi3", "quant", "ds"], default="tiny",
                    help="tiny: make_tiny_model.py's models; gemma / phi3: gemma_ref.py's "
                         "(text) / phi3_ref.py's")
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
        vv = DS_VARIANTS if cfg.get("kv_lora_rank") else VARIANTS
        for i in range(a.n):
            r, alpha, rslora, tag, targets = vv[i % len(vv)]
            ad = os.path.join(a.write_adapters, f"a{i}")
            make_adapter(ad, state, cfg, 7000 + i, r + i, alpha, rslora, tag, targets)
            print(ad)
        return
    if a.family != "tiny":
        work = tempfile.mkdtemp(prefix="sglc-lora-")
        try:
            if a.family == "quant":
                check_quant(a, work)
            else:
                check_family(a, a.family, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        sys.exit(1 if golden.failures else 0)
    names = a.only.split(",") if a.only else [n for n in make_tiny_model.SPECS if "embed" not in n]
    n_prompt, n_new = 64, 8
    work = tempfile.mkdtemp(prefix="sglc-lora-")
    try:
        for mi, name in enumerate(names):
            d, _ = make_tiny_model.build(name, a.cache, a.shared)
            f32_dir = os.path.join(d, "f32")
            with open(os.path.join(f32_dir, "config.json")) as f:
                cfg = json.load(f)
            state = torch_ref.load_state(f32_dir)
            if "lm_head.weight" not in state:
                state["lm_head.weight"] = state["model.embed_tokens.weight"]
            base_state = {k: v for k, v in state.items()}
            rng = np.random.RandomState(99 + mi)
            prompt = [int(x) for x in rng.randint(3, make_tiny_model.VOCAB, size=n_prompt)]
            base_logits, _ = torch_ref.Model(f32_dir, "float32").generate(prompt, 1)
            vi = mi % len(VARIANTS)  # one variant per model, all variants over the models
            vs = {vi, (vi + 1) % len(VARIANTS)}
            if cfg.get("embedding_multiplier", 1.0) != 1.0:
                vs.add(3)  # the embedding delta goes through the model's embedding multiplier too
            for v in sorted(vs):
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
