#!/usr/bin/python3
"""Converts a Hugging Face Llama folder to GGUF for the llama.cpp side-by-side.

DESIGN
  llama.cpp's own convert_hf_to_gguf.py needs the `transformers` package to
  read tokenizers, which is not installable here (no Debian package, no PyPI).
  This is a small converter for exactly what bench/side_by_side_llamacpp.sh
  needs: LlamaForCausalLM without biases, F32 or BF16 safetensors (one file
  or an index of shards), a tokenizer.json that is either
    - byte-level BPE (Llama 3: pre-tokenizer ByteLevel)  -> GGUF "gpt2"
      tokenizer with merges, pre-tokenizer "llama-bpe";
    - SentencePiece-style BPE (Prepend "▁" normalizer, byte fallback, e.g.
      TinyStories-656K)                                 -> GGUF "llama"
      tokenizer; scores = -(rank of the merge that makes the token), so
      llama.cpp's score-driven SPM merging follows the BPE merge order.
  It uses llama.cpp's gguf-py (GGUFWriter), found in $LLAMA_CPP_DIR/gguf-py
  or --gguf-py; nothing of llama.cpp is copied here.

  What it writes mirrors convert_hf_to_gguf.py for llama (general.architecture
  "llama"): hyper-parameters (block_count, context_length, embedding_length,
  feed_forward_length, head_count, head_count_kv, rope freq_base,
  rope dimension_count, layer_norm_rms_epsilon, vocab_size, file_type), and
  tensors token_embd / output_norm / output (absent when tied) /
  blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
  ffn_up, ffn_down}, plus rope_freqs for rope_type "llama3" (per-dimension
  frequency divisors computed from rope_scaling as the upstream converter
  does).  attn_q / attn_k rows are permuted from HF's rotate-half layout to
  GGML's interleaved-pair rope layout (per head: rows (i, i + d/2) ->
  (2i, 2i + 1)).  1-D tensors (norms) stay F32; 2-D weights keep the
  checkpoint's dtype (--outtype auto) or become F32 / BF16.  BF16 bits are
  passed through unchanged, so sglc and llama.cpp compute with the same
  weights.

Usage: hf_to_gguf.py MODEL_DIR OUT.gguf [--outtype auto|f32|bf16] [--gguf-py DIR]
"""
import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_np  # noqa: E402


def load_tensors(model_dir):
    """{name: (tag, array)} over model.safetensors or the sharded index."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    files = []
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fn in files:
        raw, _ = safetensors_np.read_raw(os.path.join(model_dir, fn))
        out.update(raw)
    return out


def permute_rope(w, n_head):
    """HF rotate-half rows -> GGML interleaved pairs, per head (w: [n_head*d, k])."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, 2, d // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg, head_dim):
    rs = cfg["rope_scaling"]
    base = cfg.get("rope_theta", 10000.0)
    factor = rs.get("factor", 8.0)
    lo = rs.get("low_freq_factor", 1.0)
    hi = rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / (base ** (i / head_dim))
        wl = 2 * math.pi / freq
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def set_vocab(w, gguf, model_dir, cfg):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tc = {}
    p = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(p):
        with open(p, encoding="utf-8") as f:
            tc = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"tokenizer model {model.get('type')!r}: only BPE is handled")
    n_vocab = cfg["vocab_size"]
    toks = [None] * n_vocab
    for t, i in model["vocab"].items():
        if i < n_vocab:
            toks[i] = t
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    for i, a in added.items():
        if i < n_vocab:
            toks[i] = a["content"]
    T = gguf.TokenType
    types = []
    for i in range(n_vocab):
        if toks[i] is None:
            toks[i] = f"[PAD{i}]"
            types.append(T.UNUSED)
        elif i in added:
            types.append(T.CONTROL if added[i].get("special") else T.USER_DEFINED)
        else:
            types.append(T.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    pre = tj.get("pre_tokenizer") or {}
    pres = pre.get("pretokenizers", [pre]) if pre else []
    byte_level = any(x.get("type") == "ByteLevel" for x in pres)
    if byte_level:
        w.add_tokenizer_model("gpt2")
        # the Llama 3 split regex; other byte-level vocabularies are refused
        if not any(x.get("type") == "Split" and "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                   in json.dumps(x.get("pattern", {})) for x in pres):
            raise ValueError("byte-level BPE without the Llama 3 split pattern: not handled")
        w.add_tokenizer_pre("llama-bpe")
        w.add_token_list(toks)
        w.add_token_types(types)
        w.add_token_merges(merges)
    else:
        norm = json.dumps(tj.get("normalizer") or {})
        if "Prepend" not in norm or not model.get("byte_fallback"):
            raise ValueError("BPE tokenizer is neither byte-level nor SentencePiece-style")
        # SPM: merges in rank order give the merged token a higher score
        scores = [0.0] * n_vocab
        rank_of = {}
        for r, m in enumerate(merges):
            a, b = m.split(" ", 1)
            rank_of.setdefault(a + b, r)
        for i, t in enumerate(toks):
            if t in rank_of:
                scores[i] = -float(rank_of[t])
            elif types[i] == T.NORMAL:
                scores[i] = -1e6 if len(t) > 1 else 0.0
        for i, t in enumerate(toks):
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                types[i] = T.BYTE
            if t == model.get("unk_token") or t == tc.get("unk_token"):
                types[i] = T.UNKNOWN
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_add_space_prefix(True)

    def tok_id(key):
        v = tc.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if v is None:
            return None
        for i, t in enumerate(toks):
            if t == v:
                return i
        return None

    bos = tok_id("bos_token")
    eos = tok_id("eos_token")
    if bos is None and isinstance(cfg.get("bos_token_id"), int):
        bos = cfg["bos_token_id"]
    if eos is None:
        e = cfg.get("eos_token_id")
        eos = e[0] if isinstance(e, list) else e
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    unk = tok_id("unk_token")
    if unk is not None:
        w.add_unk_token_id(unk)
    pad = tok_id("pad_token")
    if pad is not None:
        w.add_pad_token_id(pad)
    # add_bos: tokenizer_config, else the post-processor's template
    add_bos = tc.get("add_bos_token")
    if add_bos is None:
        post = json.dumps(tj.get("post_processor") or {})
        add_bos = bos is not None and json.dumps(toks[bos]) in post
    w.add_add_bos_token(bool(add_bos))
    w.add_add_eos_token(bool(tc.get("add_eos_token", False)))
    if isinstance(tc.get("chat_template"), str):
        w.add_chat_template(tc["chat_template"])


def main():
    ap = argparse.ArgumentParser(description="HF Llama folder -> GGUF (for llama.cpp)")
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", choices=["auto", "f32", "bf16"], default="auto")
    ap.add_argument("--gguf-py", default=os.path.join(os.environ.get("LLAMA_CPP_DIR", ""), "gguf-py"))
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.gguf_py, "gguf")):
        print(f"hf_to_gguf: no gguf-py at {a.gguf_py!r} (set LLAMA_CPP_DIR or --gguf-py)",
              file=sys.stderr)
        return 2
    sys.path.insert(0, a.gguf_py)
    import gguf  # noqa: E402

    with open(os.path.join(a.model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("architectures", [""])[0] != "LlamaForCausalLM" or cfg.get("attention_bias") \
            or cfg.get("mlp_bias"):
        print("hf_to_gguf: only bias-free LlamaForCausalLM is handled", file=sys.stderr)
        return 2
    H = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or NH
    D = cfg.get("head_dim") or H // NH
    L = cfg["num_hidden_layers"]

    tensors = load_tensors(a.model_dir)
    tags = {t for t, _ in tensors.values()}
    if not tags <= {"F32", "BF16"}:
        print(f"hf_to_gguf: tensor dtypes {sorted(tags)}: only F32 / BF16", file=sys.stderr)
        return 2
    outtype = a.outtype
    if outtype == "auto":
        outtype = "bf16" if "BF16" in tags else "f32"
    Q = gguf.GGMLQuantizationType

    def as_out(tag, arr, keep_f32=False):
        """(numpy array, raw_dtype) in the output type; BF16 as uint16 bits."""
        if keep_f32 or outtype == "f32":
            f = safetensors_np.bf16_bits_to_f32(arr) if tag == "BF16" else arr.astype(np.float32)
            return np.ascontiguousarray(f), None
        bits = arr if tag == "BF16" else safetensors_np.f32_to_bf16_bits(arr)
        return np.ascontiguousarray(bits), Q.BF16

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(os.path.basename(os.path.normpath(a.model_dir)))
    w.add_block_count(L)
    w.add_context_length(cfg.get("max_position_embeddings", 4096))
    w.add_embedding_length(H)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(NH)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-5)))
    w.add_vocab_size(cfg["vocab_size"])
    w.add_rope_dimension_count(D)
    if D != H // NH:
        w.add_key_length(D)
        w.add_value_length(D)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if outtype == "bf16" else gguf.LlamaFileType.ALL_F32)
    set_vocab(w, gguf, a.model_dir, cfg)

    def put(name, key, keep_f32=False, perm=None):
        tag, arr = tensors[key]
        if perm is not None:
            arr = permute_rope(arr, perm)
        data, raw = as_out(tag, arr, keep_f32)
        w.add_tensor(name, data, raw_dtype=raw)

    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(cfg, D))
    elif rs:
        print(f"hf_to_gguf: rope_scaling {rs} not handled", file=sys.stderr)
        return 2
    embed = "model.embed_tokens.weight" if "model.embed_tokens.weight" in tensors else "lm_head.weight"
    put("token_embd.weight", embed)
    for i in range(L):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        put(b + "attn_norm.weight", p + "input_layernorm.weight", keep_f32=True)
        put(b + "attn_q.weight", p + "self_attn.q_proj.weight", perm=NH)
        put(b + "attn_k.weight", p + "self_attn.k_proj.weight", perm=KV)
        put(b + "attn_v.weight", p + "self_attn.v_proj.weight")
        put(b + "attn_output.weight", p + "self_attn.o_proj.weight")
        put(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", keep_f32=True)
        put(b + "ffn_gate.weight", p + "mlp.gate_proj.weight")
        put(b + "ffn_up.weight", p + "mlp.up_proj.weight")
        put(b + "ffn_down.weight", p + "mlp.down_proj.weight")
    put("output_norm.weight", "model.norm.weight", keep_f32=True)
    if not cfg.get("tie_word_embeddings", False) and "lm_head.weight" in tensors:
        put("output.weight", "lm_head.weight")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out} ({outtype}, {L} layers, vocab {cfg['vocab_size']})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        # bad or missing input files: one clear line, no traceback
        print(f"hf_to_gguf: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
