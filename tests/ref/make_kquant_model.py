#!/usr/bin/python3
"""Random-weight HF folders whose rows are whole 256-element K-quant blocks.

DESIGN
  tests/ref/make_tiny_model.py's models are 64-128 wide, so every K-quant
  falls back to a 32-block type; these two are 256 wide (intermediate 512,
  expert width 256) so Q4_K / Q5_K / Q6_K / IQ4_XS and the per-layer rules
  of the presets really apply:
    kq-llama  LlamaForCausalLM, 4 layers, GQA 2:1, head_dim 64, untied
              (output.weight: Q6_K in the K presets);
    kq-moe    Qwen3MoeForCausalLM, 2 layers, 4 experts top-2 (3-D expert
              tensors quantized as a whole, sliced per expert on load);
    kq-odd    LlamaForCausalLM, 2 layers, untied, vocab 517 and intermediate
              516: row counts that are not a multiple of 8 (no 8-row
              repack for output / gate / up; down falls back to F16).
  Weights: seeded numpy normal, linear N(0, 1/fan_in), embeddings N(0, 0.1^2),
  norms 1 + 0.1 N(0, 1); F32 safetensors + config.json.  The router is 8x
  larger, so top-2 choices are decisive: the int8 rounding of activations
  in the quantized kernels then rarely flips one (a flip changes a row's
  output wholesale, which would hide the error bound under test).

Usage: make_kquant_model.py OUT_DIR
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import safetensors_np  # noqa: E402

V, H, NH, NKV, HD = 512, 256, 4, 2, 64


def weights(cfg, moe, seed):
    r = np.random.RandomState(seed)
    lin = lambda o, i: (r.randn(o, i) / np.sqrt(i)).astype(np.float32)
    norm = lambda n: (1 + 0.1 * r.randn(n)).astype(np.float32)
    nv = cfg["vocab_size"]
    w = {"model.embed_tokens.weight": (0.1 * r.randn(nv, H)).astype(np.float32), "model.norm.weight": norm(H)}
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = lin(nv, H)
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = lin(NH * HD, H)
        w[p + "self_attn.k_proj.weight"] = lin(NKV * HD, H)
        w[p + "self_attn.v_proj.weight"] = lin(NKV * HD, H)
        w[p + "self_attn.o_proj.weight"] = lin(H, NH * HD)
        if moe:
            w[p + "self_attn.q_norm.weight"] = norm(HD)
            w[p + "self_attn.k_norm.weight"] = norm(HD)
            w[p + "mlp.gate.weight"] = 8 * lin(cfg["num_experts"], H)
            for e in range(cfg["num_experts"]):
                q = p + f"mlp.experts.{e}."
                I = cfg["moe_intermediate_size"]
                w[q + "gate_proj.weight"] = lin(I, H)
                w[q + "up_proj.weight"] = lin(I, H)
                w[q + "down_proj.weight"] = lin(H, I)
        else:
            I = cfg["intermediate_size"]
            w[p + "mlp.gate_proj.weight"] = lin(I, H)
            w[p + "mlp.up_proj.weight"] = lin(I, H)
            w[p + "mlp.down_proj.weight"] = lin(H, I)
    return w


def main(out):
    base = dict(hidden_size=H, num_attention_heads=NH, num_key_value_heads=NKV, head_dim=HD,
                vocab_size=V, rms_norm_eps=1e-6, max_position_embeddings=1024, torch_dtype="float32",
                bos_token_id=1, eos_token_id=2)
    specs = {
        "kq-llama": dict(base, architectures=["LlamaForCausalLM"], num_hidden_layers=4,
                         intermediate_size=512, rope_theta=10000.0, tie_word_embeddings=False),
        "kq-moe": dict(base, architectures=["Qwen3MoeForCausalLM"], num_hidden_layers=2,
                       intermediate_size=512, moe_intermediate_size=256, num_experts=4,
                       num_experts_per_tok=2, norm_topk_prob=True, rope_theta=1e6,
                       tie_word_embeddings=True),
        "kq-odd": dict(base, architectures=["LlamaForCausalLM"], num_hidden_layers=2, vocab_size=517,
                       intermediate_size=516, rope_theta=10000.0, tie_word_embeddings=False),
    }
    for i, (name, cfg) in enumerate(specs.items()):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        safetensors_np.write(os.path.join(d, "model.safetensors"), weights(cfg, "moe" in name, 100 + i))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
