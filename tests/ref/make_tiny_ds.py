#!/usr/bin/python3
"""Tiny random-weight Qwen2-MoE and DeepSeek V2 / V3 model folders.

DESIGN
  Each tiny model starts from a REAL config.json written into
  tests/ref/configs/ (their sources are named inside, "_source") and keeps
  every feature while shrinking sizes: MLA ranks (q_lora_rank where set,
  kv_lora_rank, nope / rope / v head dims), YaRN with the real factor and
  mscale values (original context 32 so a 64-token prompt goes past it),
  routed + shared experts, first_k_dense_replace dense first layers,
  grouped top-k with the real n_group / topk_group shape, sigmoid scoring
  with a correction bias, routed_scaling_factor, norm_topk_prob, Qwen2-MoE's
  shared expert gate, decoder_sparse_step / mlp_only_layers.
  Weights as make_tiny_model.py (seeded by crc32(name); linear N(0,
  1/fan_in), norms 1 + 0.2 N, routers 3x, biases 0.05 N); V3's
  e_score_correction_bias is 0.2 N so that it moves choices.
  Output OUT/<name>/{f32,bf16}/ with a stamp (rebuilt when spec or this
  file changes); OUT defaults to build/tiny-models (never committed).

Usage: make_tiny_ds.py [--out DIR] [--only NAME,...] [--list]
"""
import argparse
import copy
import hashlib
import json
import os
import shutil
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import safetensors_np  # noqa: E402

VOCAB = 512
CONFIGS = os.path.join(HERE, "configs")

_MLA = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
            kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
            num_hidden_layers=3, max_position_embeddings=40 * 32)

# name -> (base config in tests/ref/configs, overrides, rope orig override, note)
SPECS = {
    "qwen2-moe": ("Qwen__Qwen1.5-MoE-A2.7B.json",
                  dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                       intermediate_size=96, num_experts=16, moe_intermediate_size=16,
                       shared_expert_intermediate_size=64, num_hidden_layers=2),
                  "16 experts top-4 (kept), shared expert with sigmoid gate, q/k/v bias"),
    "qwen2-moe-sparse2": ("Qwen__Qwen1.5-MoE-A2.7B.json",
                          dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                               intermediate_size=96, num_experts=16, moe_intermediate_size=16,
                               shared_expert_intermediate_size=48, num_hidden_layers=4,
                               decoder_sparse_step=2, mlp_only_layers=[3], norm_topk_prob=True),
                          "decoder_sparse_step 2 + mlp_only_layers [3]: only layer 1 sparse; "
                          "norm_topk_prob, GQA 2:1"),
    "deepseek-v2-lite": ("deepseek-ai__DeepSeek-V2-Lite.json",
                         dict(_MLA, n_routed_experts=16, moe_intermediate_size=16),
                         "MLA q_proj (q_lora_rank null), yarn 40 mscale 0.707, 16 experts top-6, "
                         "2 shared, first layer dense"),
    "deepseek-v2": ("deepseek-ai__DeepSeek-V2.json",
                    dict(_MLA, q_lora_rank=24, n_routed_experts=16, moe_intermediate_size=16,
                         n_group=4, topk_group=2),
                    "q_lora_rank, group_limited_greedy 4 groups top-2 groups, top-6, "
                    "routed_scaling_factor 16 (unnormalized)"),
    "deepseek-v3": ("deepseek-ai__DeepSeek-V3.json",
                    dict(_MLA, q_lora_rank=24, n_routed_experts=64, moe_intermediate_size=8,
                         first_k_dense_replace=1),
                    "sigmoid + e_score_correction_bias, noaux_tc 8 groups top-4, top-8, "
                    "norm + routed_scaling_factor 2.5, q_lora_rank"),
}


# models that keep the real vocabulary and carry the real tokenizer
# (../shared/models/tokenizers/<dir>): name -> (spec it copies, tokenizer dir);
# f32 folder only
TOKENIZED = {"deepseek-v3-tok": ("deepseek-v3", "deepseek_v3")}


def tiny_config(name):
    if name in TOKENIZED:
        cfg = tiny_config(TOKENIZED[name][0])
        with open(os.path.join(CONFIGS, SPECS[TOKENIZED[name][0]][0])) as f:
            base = json.load(f)
        for k in ("vocab_size", "bos_token_id", "eos_token_id"):
            cfg[k] = base[k]
        return cfg
    base_file, overrides, _ = SPECS[name]
    with open(os.path.join(CONFIGS, base_file)) as f:
        base = json.load(f)
    cfg = copy.deepcopy(base)
    cfg.pop("_source", None)
    cfg.pop("quantization_config", None)  # the tiny weights are plain f32 / bf16
    cfg.update(copy.deepcopy(overrides))
    cfg["vocab_size"] = VOCAB
    cfg["bos_token_id"] = 1
    cfg["eos_token_id"] = 2
    if cfg.get("rope_scaling"):
        rs = dict(cfg["rope_scaling"])
        rs["original_max_position_embeddings"] = 32
        cfg["rope_scaling"] = rs
    if "max_window_layers" in cfg:
        cfg["max_window_layers"] = min(cfg["max_window_layers"], cfg["num_hidden_layers"])
    return cfg


def make_weights(name, cfg):
    rng = np.random.RandomState(zlib.crc32(name.encode()) & 0x7FFFFFFF)
    H, NH, V, I = cfg["hidden_size"], cfg["num_attention_heads"], cfg["vocab_size"], cfg["intermediate_size"]
    arch = cfg["architectures"][0]
    qwen = arch == "Qwen2MoeForCausalLM"

    def lin(out, inp):
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    def bias(n, s=0.05):
        return (s * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": (0.1 * rng.standard_normal((V, H))).astype(np.float32)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "post_attention_layernorm.weight"] = norm(H)
        if qwen:
            KV = cfg["num_key_value_heads"]
            D = H // NH
            t[a + "q_proj.weight"], t[a + "q_proj.bias"] = lin(NH * D, H), bias(NH * D)
            t[a + "k_proj.weight"], t[a + "k_proj.bias"] = lin(KV * D, H), bias(KV * D)
            t[a + "v_proj.weight"], t[a + "v_proj.bias"] = lin(KV * D, H), bias(KV * D)
            t[a + "o_proj.weight"] = lin(H, NH * D)
            E, Ie, Is = cfg["num_experts"], cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"]
            moe = (i not in (cfg.get("mlp_only_layers") or []) and
                   (i + 1) % cfg.get("decoder_sparse_step", 1) == 0)
        else:
            nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
            kvr, qr = cfg["kv_lora_rank"], cfg.get("q_lora_rank")
            if qr:
                t[a + "q_a_proj.weight"] = lin(qr, H)
                t[a + "q_a_layernorm.weight"] = norm(qr)
                t[a + "q_b_proj.weight"] = lin(NH * (nope + rope), qr)
            else:
                t[a + "q_proj.weight"] = lin(NH * (nope + rope), H)
            t[a + "kv_a_proj_with_mqa.weight"] = lin(kvr + rope, H)
            t[a + "kv_a_layernorm.weight"] = norm(kvr)
            t[a + "kv_b_proj.weight"] = lin(NH * (nope + vd), kvr)
            t[a + "o_proj.weight"] = lin(H, NH * vd)
            E, Ie = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
            Is = (cfg.get("n_shared_experts") or 0) * Ie
            moe = i >= cfg.get("first_k_dense_replace", 0) and i % cfg.get("moe_layer_freq", 1) == 0
        mp = p + "mlp."
        if moe:
            t[mp + "gate.weight"] = 3.0 * lin(E, H)
            if cfg.get("topk_method") == "noaux_tc":
                t[mp + "gate.e_score_correction_bias"] = bias(E, 0.2)
            for e in range(E):
                t[f"{mp}experts.{e}.gate_proj.weight"] = lin(Ie, H)
                t[f"{mp}experts.{e}.up_proj.weight"] = lin(Ie, H)
                t[f"{mp}experts.{e}.down_proj.weight"] = lin(H, Ie)
            if Is:
                sp = mp + ("shared_expert." if qwen else "shared_experts.")
                t[sp + "gate_proj.weight"] = lin(Is, H)
                t[sp + "up_proj.weight"] = lin(Is, H)
                t[sp + "down_proj.weight"] = lin(H, Is)
                if qwen:
                    t[mp + "shared_expert_gate.weight"] = 3.0 * lin(1, H)
        else:
            t[mp + "gate_proj.weight"] = lin(I, H)
            t[mp + "up_proj.weight"] = lin(I, H)
            t[mp + "down_proj.weight"] = lin(H, I)
    t["model.norm.weight"] = norm(H)
    t["lm_head.weight"] = lin(V, H)
    return t


def build(name, out_root, shared=None):
    cfg = tiny_config(name)
    tok = None
    if name in TOKENIZED:
        shared = shared or os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared"))
        tok = os.path.join(shared, "models", "tokenizers", TOKENIZED[name][1])
    with open(os.path.abspath(__file__), "rb") as f:
        me = hashlib.sha256(f.read()).hexdigest()
    stamp = hashlib.sha256(json.dumps([me, name, cfg], sort_keys=True).encode()).hexdigest()
    d = os.path.join(out_root, name)
    sp = os.path.join(d, "stamp")
    if os.path.exists(sp) and open(sp).read().strip() == stamp:
        return d, False
    os.makedirs(d, exist_ok=True)
    weights = make_weights(name, cfg)
    subs = (("f32", "F32", "float32"), ("bf16", "BF16", "bfloat16"))
    for sub, tag, tdt in subs[:1] if tok else subs:
        sd = os.path.join(d, sub)
        shutil.rmtree(sd, ignore_errors=True)
        os.makedirs(sd)
        c = dict(cfg, torch_dtype=tdt)
        spec = SPECS[TOKENIZED[name][0]] if tok else SPECS[name]
        c["_sglc_tiny_model"] = {"name": name, "base": spec[0], "note": spec[2]}
        with open(os.path.join(sd, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        safetensors_np.write(os.path.join(sd, "model.safetensors"), weights, dtype=tag,
                             metadata={"format": "pt"})
        for fn in ("tokenizer.json", "tokenizer_config.json") if tok else ():
            shutil.copyfile(os.path.join(tok, fn), os.path.join(sd, fn))
    with open(sp, "w") as f:
        f.write(stamp + "\n")
    return d, True


def main():
    ap = argparse.ArgumentParser(description="write tiny Qwen2-MoE / DeepSeek models")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--only")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for n, (b, _, note) in SPECS.items():
            print(f"{n:18s} {b}: {note}")
        return 0
    for n in (a.only.split(",") if a.only else list(SPECS)):
        if n not in SPECS and n not in TOKENIZED:
            print(f"make_tiny_ds: unknown model {n!r}", file=sys.stderr)
            return 2
        d, made = build(n, a.out)
        print(f"{'wrote' if made else 'cached'} {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
