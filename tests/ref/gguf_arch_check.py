#!/usr/bin/env python3
"""gguf_arch_check.py MODEL_DIR FILE.gguf — an F32 GGUF written by `sglc
quantize` for gemma2 / gemma3 / phi3 / qwen2moe holds every HF tensor under
llama.cpp's name (written out here per architecture, independently of
sglc's table), with its values (Gemma norms as w + 1, as llama.cpp's
converter stores them; experts stacked), plus the architecture's keys
(soft-caps, window, shared expert width, longrope factor tensors).
Prints one line; exit 1 on the first difference."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import safetensors_np  # noqa: E402
from gguf_np import Reader  # noqa: E402

COMMON = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
          "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate",
          "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "self_attn.q_norm": "attn_q_norm",
          "self_attn.k_norm": "attn_k_norm"}
PER_ARCH = {
    "gemma2": {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
               "post_feedforward_layernorm": "post_ffw_norm"},
    "phi3": {"post_attention_layernorm": "ffn_norm", "self_attn.qkv_proj": "attn_qkv",
             "mlp.gate_up_proj": "ffn_up"},
    "qwen2moe": {"post_attention_layernorm": "ffn_norm", "mlp.gate": "ffn_gate_inp",
                 "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
                 "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp"},
}
PER_ARCH["gemma3"] = PER_ARCH["gemma2"]
HF_ARCH = {"Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3", "Phi3ForCausalLM": "phi3",
           "Qwen2MoeForCausalLM": "qwen2moe"}


def main(model_dir, path):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    hf, _ = safetensors_np.read(os.path.join(model_dir, "model.safetensors"))
    g = Reader(path)
    arch = g.kv["general.architecture"]
    if arch != HF_ARCH[cfg["architectures"][0]]:
        return f"general.architecture {arch!r}"
    names = dict(COMMON, **PER_ARCH[arch])
    want, stacks = {}, {}
    for n, w in hf.items():
        w = np.asarray(w, np.float32)
        if n == "model.embed_tokens.weight":
            want["token_embd.weight"] = w
            continue
        if n == "lm_head.weight":
            if not cfg.get("tie_word_embeddings", arch.startswith("gemma")):
                want["output.weight"] = w
            continue
        if n == "model.norm.weight":
            want["output_norm.weight"] = w + 1 if arch.startswith("gemma") else w
            continue
        parts = n.split(".")
        il, rest, kind = int(parts[2]), ".".join(parts[3:-1]), parts[-1]
        if rest.startswith("mlp.experts."):
            e, proj = int(parts[5]), parts[6]
            stacks.setdefault(f"blk.{il}.ffn_{proj.split('_')[0]}_exps.weight", {})[e] = w
            continue
        gn = f"blk.{il}.{names[rest]}.{kind}"
        if arch.startswith("gemma") and gn.endswith("norm.weight"):
            w = w + 1  # llama.cpp's Gemma converter: (1 + w) stored
        want[gn] = w
    for gn, d in stacks.items():
        want[gn] = np.stack([d[e] for e in range(len(d))])
    rs = cfg.get("rope_scaling") or {}
    if rs.get("type", rs.get("rope_type")) in ("longrope", "su"):
        want["rope_factors_long.weight"] = np.asarray(rs["long_factor"], np.float32)
        want["rope_factors_short.weight"] = np.asarray(rs["short_factor"], np.float32)
    if set(want) != set(g.tensors):
        return f"tensor names differ: {sorted(set(want) ^ set(g.tensors))[:6]}"
    for gn, w in want.items():
        got = g.f32(gn)
        if list(got.shape) != list(w.shape) and not (got.size == w.size and gn.endswith("_shexp.weight")):
            return f"{gn}: shape {list(got.shape)} vs {list(w.shape)}"
        if not np.array_equal(got.reshape(w.shape), w):
            return f"{gn}: values differ (max |d| {np.abs(got.reshape(w.shape) - w).max():.3g})"
    keys = {"embedding_length": cfg["hidden_size"], "block_count": cfg["num_hidden_layers"],
            "attention.head_count": cfg["num_attention_heads"]}
    if arch.startswith("gemma") and cfg.get("sliding_window"):
        keys["attention.sliding_window"] = cfg["sliding_window"]
    if arch == "gemma2":
        keys["attn_logit_softcapping"] = cfg["attn_logit_softcapping"]
        keys["final_logit_softcapping"] = cfg["final_logit_softcapping"]
    if arch == "qwen2moe":
        keys["expert_count"] = cfg["num_experts"]
        keys["expert_used_count"] = cfg["num_experts_per_tok"]
        keys["expert_feed_forward_length"] = cfg["moe_intermediate_size"]
        keys["expert_shared_feed_forward_length"] = cfg["shared_expert_intermediate_size"]
    if arch == "phi3" and cfg.get("sliding_window"):
        keys["attention.sliding_window"] = cfg["sliding_window"]
    for k, v in keys.items():
        got = g.kv.get(f"{arch}.{k}")
        if got is None or abs(got - v) > 1e-6 * abs(v):
            return f"{arch}.{k} = {got!r}, config.json says {v}"
    err, extra = gguf_py_check(g, hf, arch, path)
    if err:
        return "llama.cpp's gguf-py: " + err
    print(f"{len(want)} tensors under llama.cpp's names with their values, {len(keys)} {arch} keys"
          + (f"; {extra}" if extra else ""))
    return None


def gguf_py_check(g, hf, arch, path):
    """With llama.cpp's gguf-py ($LLAMA_CPP_DIR/gguf-py): each tensor is
    where its TensorNameMap puts the HF name and is one of the
    architecture's MODEL_TENSORS; every {arch}.* key is one gguf.Keys
    defines; GGUFReader reads the file.  Returns (error or None, note)."""
    d = os.path.join(os.environ.get("LLAMA_CPP_DIR", "/work/llama.cpp"), "gguf-py")
    if not os.path.isdir(os.path.join(d, "gguf")):
        return None, "no gguf-py: llama.cpp cross-check skipped"
    sys.path.insert(0, d)
    import gguf
    ma = {"gemma2": gguf.MODEL_ARCH.GEMMA2, "gemma3": gguf.MODEL_ARCH.GEMMA3, "phi3": gguf.MODEL_ARCH.PHI3,
          "qwen2moe": gguf.MODEL_ARCH.QWEN2MOE}[arch]
    nl = g.kv[f"{arch}.block_count"]
    tm = gguf.get_tensor_name_map(ma, nl)
    allowed = set()
    for t in gguf.MODEL_TENSORS[ma]:
        name = gguf.TENSOR_NAMES[t]
        allowed.update({name.format(bid=i) + ".weight" for i in range(nl)} if "{bid}" in name else {name + ".weight"})
        allowed.update({name.format(bid=i) + ".bias" for i in range(nl)} if "{bid}" in name else set())
    for n in hf:
        if ".experts." in n or n == "lm_head.weight" and "output.weight" not in g.tensors:
            continue
        want = tm.get_name(n, try_suffixes=(".weight", ".bias"))
        if want not in g.tensors:
            return f"{n}: gguf-py names it {want}, not in the file", None
    for n in g.tensors:
        if n not in allowed:
            return f"{n} is not one of llama.cpp's {arch} tensors", None
    known = set()
    for cls in vars(gguf.Keys).values():
        if isinstance(cls, type):
            known.update(v.replace("{arch}", arch) for k, v in vars(cls).items() if isinstance(v, str) and not k.startswith("_"))
    for k in g.kv:
        if k.startswith(arch + ".") and k not in known:
            return f"key {k} is not one gguf-py defines", None
    r = gguf.GGUFReader(path)
    if len(r.tensors) != len(g.tensors):
        return "GGUFReader sees a different tensor count", None
    return None, "gguf-py agrees (names, keys, reader)"


if __name__ == "__main__":
    err = main(sys.argv[1], sys.argv[2])
    if err:
        print(err)
        sys.exit(1)
