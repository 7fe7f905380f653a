#!/usr/bin/python3
"""Writes a full-size random-weight Hugging Face Llama checkpoint (BF16).

DESIGN
  For side-by-side speed runs (bench/side_by_side_llamacpp.sh) both engines
  must read the SAME weights: sglc's `--load-format dummy` fills its own
  values, which llama.cpp cannot see.  This script makes a real checkpoint
  from an upstream config.json (e.g. ../shared/models/configs/
  meta-llama__Llama-3.2-1B-Instruct) so sglc loads it as safetensors and
  tools/hf_to_gguf.py converts the very same bits to GGUF.

  Values: seeded torch normal, embeddings N(0, 0.02^2), linear weights
  N(0, 1/fan_in), norms 1.0, rounded once to BF16 (round-to-nearest-even,
  torch) and written as raw BF16 bits.  Speed of a dense forward pass does
  not depend on the values; they are kept O(1)-scaled so activations stay
  finite.  Tied models store only model.embed_tokens.weight.
  Byte-level BPE vocabularies (Llama 3) have tokens that are fragments of
  a UTF-8 sequence; a random model picks them in any order, and llama-server
  (34af94cd) runs its chat-output parser over every streamed completion and
  ends the stream with an error on such invalid text.  The embedding rows of
  those tokens (the tied lm_head rows too) are therefore zero: their logit is
  0 while the greedy winner among ~128k random logits is well above 0, so
  generated text is valid UTF-8.  Shapes and FLOPs are unchanged.
  Only LlamaForCausalLM-shaped configs (no biases, no qk-norm) are handled;
  anything else is refused.

  Output folder: config.json (torch_dtype bfloat16), model.safetensors,
  and tokenizer.json / tokenizer_config.json copied from --tokenizer.
  The folder is outside the repository (e.g. /work/bench-models/...).

Usage: make_random_hf.py --config CONFIG.json --tokenizer DIR --out DIR [--seed N]
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_np  # noqa: E402


def bf16_bits(t):
    """torch float tensor -> numpy uint16 BF16 bit pattern (rounded by torch)."""
    return t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().view(np.uint16)


def fragment_token_ids(tokenizer_json):
    """Ids of byte-level BPE tokens whose bytes are not valid UTF-8 on their own."""
    with open(tokenizer_json, encoding="utf-8") as f:
        tj = json.load(f)
    pre = json.dumps(tj.get("pre_tokenizer") or {})
    if "ByteLevel" not in pre:
        return []
    # GPT-2's byte <-> printable-character table
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    dec = {chr(c): b for b, c in zip(bs, cs)}
    out = []
    for tok, i in tj["model"]["vocab"].items():
        try:
            bytes(dec[ch] for ch in tok).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            out.append(i)
    return out


def main():
    ap = argparse.ArgumentParser(description="random-weight HF Llama checkpoint (BF16)")
    ap.add_argument("--config", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    with open(a.config) as f:
        cfg = json.load(f)
    if cfg.get("architectures", [""])[0] != "LlamaForCausalLM" or cfg.get("attention_bias") \
            or cfg.get("mlp_bias"):
        print(f"make_random_hf: {a.config}: only bias-free LlamaForCausalLM configs", file=sys.stderr)
        return 2
    H = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or NH
    D = cfg.get("head_dim") or H // NH
    I = cfg["intermediate_size"]
    V = cfg["vocab_size"]
    L = cfg["num_hidden_layers"]

    g = torch.Generator().manual_seed(a.seed)

    def lin(out, inp):
        return ("BF16", bf16_bits(torch.randn(out, inp, generator=g) / float(np.sqrt(inp))))

    def ones(n):
        return ("BF16", bf16_bits(torch.ones(n)))

    emb = torch.randn(V, H, generator=g) * 0.02
    frag = [i for i in fragment_token_ids(os.path.join(a.tokenizer, "tokenizer.json")) if i < V]
    if frag:
        emb[torch.tensor(frag)] = 0.0
        if not cfg.get("tie_word_embeddings", False):
            print("make_random_hf: untied lm_head: fragment tokens can still be generated", file=sys.stderr)
    t = {"model.embed_tokens.weight": ("BF16", bf16_bits(emb))}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = ones(H)
        t[p + "post_attention_layernorm.weight"] = ones(H)
        t[p + "self_attn.q_proj.weight"] = lin(NH * D, H)
        t[p + "self_attn.k_proj.weight"] = lin(KV * D, H)
        t[p + "self_attn.v_proj.weight"] = lin(KV * D, H)
        t[p + "self_attn.o_proj.weight"] = lin(H, NH * D)
        t[p + "mlp.gate_proj.weight"] = lin(I, H)
        t[p + "mlp.up_proj.weight"] = lin(I, H)
        t[p + "mlp.down_proj.weight"] = lin(H, I)
    t["model.norm.weight"] = ones(H)
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = lin(V, H)

    os.makedirs(a.out, exist_ok=True)
    safetensors_np.write(os.path.join(a.out, "model.safetensors"), t, metadata={"format": "pt"})
    cfg = dict(cfg, torch_dtype="bfloat16")
    cfg["_sglc_random_weights"] = {"seed": a.seed, "base": os.path.abspath(a.config)}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        for src_dir in (a.tokenizer, os.path.dirname(os.path.abspath(a.config))):
            src = os.path.join(src_dir, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(a.out, name))
                break
    if not os.path.exists(os.path.join(a.out, "tokenizer.json")):
        print(f"make_random_hf: no tokenizer.json in {a.tokenizer}", file=sys.stderr)
        return 1
    n = sum(v[1].size for v in t.values())
    print(f"wrote {a.out}: {n / 1e9:.3f} B parameters, BF16 ({len(frag)} UTF-8 fragment tokens zeroed)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"make_random_hf: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
