#!/usr/bin/env python3
"""gguf_arch_write.py MODEL_DIR OUT.gguf — write a tiny HF model (gemma2,
gemma3, phi3, qwen2moe) as llama.cpp's converter would, with llama.cpp's
own gguf-py writer ($LLAMA_CPP_DIR/gguf-py), independently of sglc: tensor
names from gguf-py's TensorNameMap, experts stacked, Gemma norms + 1, the
hyper-parameter keys conversion/{gemma,phi,qwen}.py write, no sglc keys.
Exit 77 without gguf-py."""
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
d = os.path.join(os.environ.get("LLAMA_CPP_DIR", "/work/llama.cpp"), "gguf-py")
if not os.path.isdir(os.path.join(d, "gguf")):
    print(f"no gguf-py at {d}")
    sys.exit(77)
sys.path.insert(0, d)
import gguf  # noqa: E402
import safetensors_np  # noqa: E402

model_dir, out = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(model_dir, "config.json")))
hf, _ = safetensors_np.read(os.path.join(model_dir, "model.safetensors"))
ma, arch = {"Gemma2ForCausalLM": (gguf.MODEL_ARCH.GEMMA2, "gemma2"),
            "Gemma3ForCausalLM": (gguf.MODEL_ARCH.GEMMA3, "gemma3"),
            "Phi3ForCausalLM": (gguf.MODEL_ARCH.PHI3, "phi3"),
            "Qwen2MoeForCausalLM": (gguf.MODEL_ARCH.QWEN2MOE, "qwen2moe")}[cfg["architectures"][0]]
L, H, nh = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
w = gguf.GGUFWriter(out, arch)
w.add_context_length(cfg["max_position_embeddings"])
w.add_embedding_length(H)
w.add_block_count(L)
w.add_feed_forward_length(cfg["intermediate_size"])
w.add_head_count(nh)
w.add_head_count_kv(cfg.get("num_key_value_heads", nh))
w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
w.add_file_type(0)
gemma = arch.startswith("gemma")
if gemma:
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    if cfg.get("sliding_window"):
        w.add_sliding_window(cfg["sliding_window"])
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    else:
        w.add_rope_freq_base(cfg["rope_theta"])
        if cfg.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
else:
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
extra = {}
if arch == "phi3":
    hd = H // nh
    rot = int(cfg.get("partial_rotary_factor", 1.0) * H) // nh
    w.add_rope_dimension_count(rot)
    w.add_sliding_window(cfg.get("sliding_window") or 0)
    orig = cfg.get("original_max_position_embeddings", cfg["max_position_embeddings"])
    w.add_rope_scaling_orig_ctx_len(orig)
    rs = cfg.get("rope_scaling") or {}
    if rs.get("long_factor"):
        s = cfg["max_position_embeddings"] / orig
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(s) / math.log(orig)) if s > 1 else 1.0)
        extra["rope_factors_long.weight"] = np.asarray(rs["long_factor"], np.float32)
        extra["rope_factors_short.weight"] = np.asarray(rs["short_factor"], np.float32)
if arch == "qwen2moe":
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
tm = gguf.get_tensor_name_map(ma, L)
tensors, stacks = dict(extra), {}
for n, t in hf.items():
    t = np.asarray(t, np.float32)
    if n == "lm_head.weight" and cfg.get("tie_word_embeddings", gemma):
        continue
    if ".mlp.experts." in n:
        p = n.split(".")
        stacks.setdefault((int(p[2]), p[6]), {})[int(p[5])] = t
        continue
    g = tm.get_name(n, try_suffixes=(".weight", ".bias"))
    if gemma and n.endswith("norm.weight"):
        t = t + 1
    tensors[g] = t
for (il, proj), d_ in stacks.items():
    tensors[f"blk.{il}.ffn_{proj.split('_')[0]}_exps.weight"] = np.stack([d_[e] for e in range(len(d_))])
for g in sorted(tensors):
    w.add_tensor(g, np.ascontiguousarray(tensors[g]))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
