#!/usr/bin/python3
"""Writes small random-weight Hugging Face model folders for golden tests.

DESIGN
  Each tiny model starts from a REAL config.json (../shared/models/configs,
  TinyStories-656K, the Mistral tokenizer folder's config) and keeps its
  architecture features (GQA ratio, rope_scaling, biases, qk-norm with an
  explicit head_dim != hidden/heads, sliding window, tied embeddings) while
  shrinking it: 2 layers, hidden 64-128, intermediate ~3x, vocab 512.
  MoE models keep num_experts_per_tok / norm_topk_prob / mlp_only_layers
  and shrink the number of experts and their width.
  Some variants change one rope / window parameter so that the feature
  actually bites on a 64-token prompt (see SPECS).

  Weights are seeded (numpy RandomState, seed = crc32(name)), scaled so
  activations stay O(1) and logits are well separated (greedy comparisons
  are then robust to f32 rounding):
    embeddings N(0, 0.1^2) (small, or a tied model just copies its input
    token); linear weights N(0, 1/fan_in); norm weights
    1 + 0.2 N(0,1); biases N(0, 0.05^2) (larger v/q biases make every position
    predict the same token).
  Tied models store only model.embed_tokens.weight (what save_pretrained
  writes) -- TinyStories covers the other way round.

  Output: OUT/<name>/f32/ (F32 safetensors) and OUT/<name>/bf16/ (the same
  weights rounded to BF16), each with config.json.  The f32 folders of the
  models in SHARDED are split in two shards with a
  model.safetensors.index.json, as large HF checkpoints are.  A stamp file holds a
  hash of the spec and of this generator's source; folders are rebuilt only when it
  changes.  OUT is a build directory (default build/tiny-models), never
  committed.

Usage: make_tiny_model.py [--out DIR] [--shared DIR] [--only NAME,...] [--list]
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

GENERATOR_VERSION = 1
VOCAB = 512
# models whose f32 folder is written as two shards + model.safetensors.index.json
SHARDED = {"mistral-sw"}

# name -> (base config relative to $SGLC_SHARED/models, overrides, notes)
SPECS = {
    # Llama 3.2: GQA 4:1, tied, rope llama3 with the real factor 32,
    # low/high_freq_factor 1/4 and theta 5e5, but original context 64 (real:
    # 8192) so that all three wavelength bands (kept, smoothed, divided)
    # turn by whole radians within a 64-token prompt
    "llama3": ("configs/meta-llama__Llama-3.2-1B-Instruct/config.json",
               dict(hidden_size=128, num_attention_heads=8, num_key_value_heads=2,
                    head_dim=16, intermediate_size=384, max_position_embeddings=2048,
                    rope_scaling={"factor": 32.0, "high_freq_factor": 4.0,
                                  "low_freq_factor": 1.0,
                                  "original_max_position_embeddings": 64,
                                  "rope_type": "llama3"}),
               "rope_scaling llama3 (Llama-3.2-1B factors, original context 64)"),
    # TinyStories base (llama, GQA 2:1, theta 1e4) + linear scaling, old "type" key
    "llama-linear": ("TinyStories-656K/config.json",
                     dict(rope_scaling={"type": "linear", "factor": 4.0},
                          tie_word_embeddings=False),
                     "rope_scaling linear (legacy 'type' key), untied"),
    # dynamic NTK: max_position_embeddings 32 so a 64-token prompt triggers
    # it; factor 4 so that SGLang-style context length (max_position *
    # factor = 128) still fits prompt + 32 new tokens
    "llama-dynamic": ("TinyStories-656K/config.json",
                      dict(rope_scaling={"rope_type": "dynamic", "factor": 4.0},
                           max_position_embeddings=32),
                      "rope_scaling dynamic, prompt longer than max_position_embeddings"),
    # yarn: factor 4 over original 256 (max_position_embeddings = factor * orig)
    "llama-yarn": ("TinyStories-656K/config.json",
                   dict(rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                      "original_max_position_embeddings": 256},
                        max_position_embeddings=1024),
                   "rope_scaling yarn (attention factor 1+0.1 ln 4)"),
    # SmolLM2-135M (llama, GQA 3:1, tied, theta 1e5) with attention_bias:
    # HF Llama then has q, k, v AND o_proj biases
    "llama-bias": ("configs/HuggingFaceTB__SmolLM2-135M-Instruct/config.json",
                   dict(hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                        intermediate_size=256, attention_bias=True),
                   "attention_bias: q/k/v/o biases"),
    # Mistral (Minueza-32M config): GQA 3:1, untied, sliding window 16
    "mistral-sw": ("tokenizers/mistral-chatml/config.json",
                   dict(hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                        intermediate_size=288, sliding_window=16),
                   "sliding_window 16 < prompt length"),
    # Qwen2.5-0.5B: GQA 7:1, q/k/v bias, tied, theta 1e6
    "qwen2": ("configs/Qwen__Qwen2.5-0.5B-Instruct/config.json",
              dict(hidden_size=112, num_attention_heads=7, num_key_value_heads=1,
                   intermediate_size=320),
              "q/k/v bias"),
    # Qwen2.5 with use_sliding_window: layer 0 full, layer 1 windowed (16)
    "qwen2-sw": ("configs/Qwen__Qwen2.5-0.5B-Instruct/config.json",
                 dict(hidden_size=112, num_attention_heads=7, num_key_value_heads=1,
                      intermediate_size=320, use_sliding_window=True, sliding_window=16,
                      max_window_layers=1),
                 "use_sliding_window: window 16 on layers >= max_window_layers=1"),
    # Qwen3-0.6B: GQA 2:1, qk-norm, head_dim 32 with hidden 64 (q dim 128)
    "qwen3": ("configs/Qwen__Qwen3-0.6B/config.json",
              dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=32, intermediate_size=192),
              "q_norm/k_norm, explicit head_dim != hidden/heads"),
    # Qwen3-Embedding-0.6B (Qwen3ForCausalLM weights served with
    # --is-embedding): GQA 2:1, qk-norm, tied; the same shrink as qwen3
    "qwen3-embed": ("configs/Qwen__Qwen3-Embedding-0.6B/config.json",
                    dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=32, intermediate_size=192),
                    "embedding model (last-token pooling, normalized)"),
    # Qwen3-30B-A3B: GQA 8:1, qk-norm, head_dim 16 != hidden/heads, sparse
    # MoE on every layer, norm_topk_prob true, top-8 kept (experts shrunk
    # 128 -> 16, expert width 768 -> 32)
    "qwen3-moe": ("configs/Qwen__Qwen3-30B-A3B/config.json",
                  dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=1,
                       head_dim=16, intermediate_size=192, num_experts=64,
                       moe_intermediate_size=16),
                  "MoE 16 experts top-8, norm_topk_prob"),
    # the same with norm_topk_prob false (Qwen3MoeConfig's default) and
    # mlp_only_layers [0]: layer 0 dense (intermediate_size), layer 1 sparse
    "qwen3-moe-dense0": ("configs/Qwen__Qwen3-30B-A3B/config.json",
                         dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=1,
                              head_dim=16, intermediate_size=192, num_experts=64,
                              moe_intermediate_size=16, norm_topk_prob=False,
                              mlp_only_layers=[0]),
                         "MoE without top-k renormalization, layer 0 dense (mlp_only_layers)"),
    # Mixtral-8x7B: GQA 4:1, 8 experts top-2 (kept), always renormalized
    "mixtral": ("configs/mistralai__Mixtral-8x7B-Instruct-v0.1/config.json",
                dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=2,
                     intermediate_size=96),
                "MoE 8 experts top-2 (block_sparse_moe w1/w3/w2)"),
    # granite-3.0-1b-a400m: 32 experts top-8 (kept), packed 3-D expert
    # tensors, tied, embedding/attention/residual multipliers, logits_scaling
    "granitemoe": ("configs/ibm-granite__granite-3.0-1b-a400m-instruct/config.json",
                   dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=24),
                   "packed MoE experts, Granite multipliers"),
}


def tiny_config(base, overrides):
    cfg = copy.deepcopy(base)
    cfg.update(copy.deepcopy(overrides))
    cfg["num_hidden_layers"] = 2
    cfg["vocab_size"] = VOCAB
    if cfg.get("max_window_layers") is not None:
        cfg["max_window_layers"] = min(cfg["max_window_layers"], 2)
    # ids that exist in the tiny vocab (real ones are 128000+ for Llama 3 / Qwen)
    cfg["bos_token_id"] = 1
    cfg["eos_token_id"] = 2
    if "head_dim" in cfg and "head_dim" not in overrides:
        cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    return cfg


def make_weights(name, cfg):
    rng = np.random.RandomState(zlib.crc32(name.encode()) & 0x7FFFFFFF)
    H = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or NH
    D = cfg.get("head_dim") or H // NH
    I = cfg["intermediate_size"]
    V = cfg["vocab_size"]
    arch = cfg["architectures"][0]

    def lin(out, inp):
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.05 * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": (0.1 * rng.standard_normal((V, H))).astype(np.float32)}
    ab = bool(cfg.get("attention_bias", False))
    qk3 = ("LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "GraniteMoeForCausalLM")
    qkv_bias = arch == "Qwen2ForCausalLM" or (ab and arch in qk3)
    o_bias = ab and arch in qk3
    mlp_bias = bool(cfg.get("mlp_bias", False)) and arch == "LlamaForCausalLM"
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "post_attention_layernorm.weight"] = norm(H)
        t[p + "self_attn.q_proj.weight"] = lin(NH * D, H)
        t[p + "self_attn.k_proj.weight"] = lin(KV * D, H)
        t[p + "self_attn.v_proj.weight"] = lin(KV * D, H)
        t[p + "self_attn.o_proj.weight"] = lin(H, NH * D)
        if arch == "GraniteMoeForCausalLM":
            mp, E = p + "block_sparse_moe.", cfg["num_local_experts"]
            t[mp + "router.layer.weight"] = 3.0 * lin(E, H)
            t[mp + "input_linear.weight"] = np.stack([lin(2 * I, H) for _ in range(E)])
            t[mp + "output_linear.weight"] = np.stack([lin(H, I) for _ in range(E)])
        elif arch == "MixtralForCausalLM" or (
                arch == "Qwen3MoeForCausalLM" and cfg.get("num_experts", 128) > 0
                and i not in (cfg.get("mlp_only_layers") or [])
                and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0):
            # router N(0, 4/fan_in): peaked softmax, so routing weights are
            # far from uniform and top-k boundaries are rarely near-ties
            if arch == "MixtralForCausalLM":
                mp, E, Ie, nm = p + "block_sparse_moe.", cfg["num_local_experts"], I, ("w1", "w3", "w2")
            else:
                mp, E, Ie = p + "mlp.", cfg["num_experts"], cfg["moe_intermediate_size"]
                nm = ("gate_proj", "up_proj", "down_proj")
            t[mp + "gate.weight"] = 3.0 * lin(E, H)
            for e in range(E):
                t[f"{mp}experts.{e}.{nm[0]}.weight"] = lin(Ie, H)
                t[f"{mp}experts.{e}.{nm[1]}.weight"] = lin(Ie, H)
                t[f"{mp}experts.{e}.{nm[2]}.weight"] = lin(H, Ie)
        else:
            t[p + "mlp.gate_proj.weight"] = lin(I, H)
            t[p + "mlp.up_proj.weight"] = lin(I, H)
            t[p + "mlp.down_proj.weight"] = lin(H, I)
        if qkv_bias:
            t[p + "self_attn.q_proj.bias"] = bias(NH * D)
            t[p + "self_attn.k_proj.bias"] = bias(KV * D)
            t[p + "self_attn.v_proj.bias"] = bias(KV * D)
        if o_bias:
            t[p + "self_attn.o_proj.bias"] = bias(H)
        if mlp_bias:
            t[p + "mlp.gate_proj.bias"] = bias(I)
            t[p + "mlp.up_proj.bias"] = bias(I)
            t[p + "mlp.down_proj.bias"] = bias(H)
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
            t[p + "self_attn.q_norm.weight"] = norm(D)
            t[p + "self_attn.k_norm.weight"] = norm(D)
    t["model.norm.weight"] = norm(H)
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = lin(V, H)
    return t


def write_sharded(d, weights, tag):
    """Two shards (embeddings + layer 0 | the rest) and the HF index file."""
    names = sorted(weights)
    first = [n for n in names if n.startswith("model.embed_tokens") or n.startswith("model.layers.0.")]
    shards = [first, [n for n in names if n not in first]]
    weight_map, total = {}, 0
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        safetensors_np.write(os.path.join(d, fname), {n: weights[n] for n in part}, dtype=tag,
                             metadata={"format": "pt"})
        for n in part:
            weight_map[n] = fname
            total += weights[n].size * (4 if tag == "F32" else 2)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def build(name, out_root, shared):
    base_rel, overrides, _ = SPECS[name]
    base_path = os.path.join(shared, "models", base_rel)
    with open(base_path) as f:
        base = json.load(f)
    cfg = tiny_config(base, overrides)
    with open(os.path.abspath(__file__), "rb") as f:
        me = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(ROOT, "tools", "safetensors_np.py"), "rb") as f:
        me += hashlib.sha256(f.read()).hexdigest()
    stamp = hashlib.sha256(json.dumps([GENERATOR_VERSION, me, name, cfg], sort_keys=True)
                           .encode()).hexdigest()
    d = os.path.join(out_root, name)
    stamp_path = os.path.join(d, "stamp")
    if os.path.exists(stamp_path) and open(stamp_path).read().strip() == stamp:
        return d, False
    os.makedirs(d, exist_ok=True)
    weights = make_weights(name, cfg)
    for sub, tag, tdt in (("f32", "F32", "float32"), ("bf16", "BF16", "bfloat16")):
        sd = os.path.join(d, sub)
        shutil.rmtree(sd, ignore_errors=True)  # no stale shards from an older layout
        os.makedirs(sd)
        c = dict(cfg, torch_dtype=tdt)
        c["_sglc_tiny_model"] = {"name": name, "base": base_rel, "note": SPECS[name][2]}
        with open(os.path.join(sd, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        if sub == "f32" and name in SHARDED:
            write_sharded(sd, weights, tag)
        else:
            safetensors_np.write(os.path.join(sd, "model.safetensors"), weights, dtype=tag,
                                 metadata={"format": "pt"})
    with open(stamp_path, "w") as f:
        f.write(stamp + "\n")
    return d, True


def main():
    ap = argparse.ArgumentParser(description="write tiny random-weight HF models")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--only", help="comma-separated names")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for n, (b, _, note) in SPECS.items():
            print(f"{n:14s} {b}: {note}")
        return 0
    names = a.only.split(",") if a.only else list(SPECS)
    for n in names:
        if n not in SPECS:
            print(f"make_tiny_model: unknown model {n!r}", file=sys.stderr)
            return 2
        try:
            d, made = build(n, a.out, a.shared)
        except OSError as e:
            print(f"make_tiny_model: {n}: {e}", file=sys.stderr)
            return 1
        print(f"{'wrote' if made else 'cached'} {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
