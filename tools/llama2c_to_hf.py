#!/usr/bin/python3
"""Converts a llama2.c checkpoint + SentencePiece tokenizer to a Hugging Face folder.

DESIGN
  Input: a llama2.c "legacy" (version 0) checkpoint, as written by llama2.c's
  export.py legacy_export / read by run.c:
    header  7 x int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads,
            vocab_size (negative = classifier not shared with the
            embedding), seq_len
    then f32 arrays, each PyTorch (out, in) row-major:
      tok_embeddings (vocab, dim)
      attention_norm (L, dim)
      wq (L, n_heads*hs, dim) wk (L, n_kv*hs, dim) wv (L, n_kv*hs, dim)
      wo (L, dim, n_heads*hs)
      ffn_norm (L, dim)
      w1 (L, hidden, dim) w2 (L, dim, hidden) w3 (L, hidden, dim)
      norm (dim)
      freq_cis_real (seq_len, hs/2), freq_cis_imag (seq_len, hs/2)  (skipped)
      [output (vocab, dim) when vocab_size < 0]
  plus the SentencePiece model (tok512.model, protobuf) or, without it, the
  llama2.c tokenizer file (tok512.bin: int32 max_token_length, then per
  token f32 score, int32 len, bytes).

  RoPE layout: llama2.c rotates interleaved pairs (2i, 2i+1) of each head;
  HF Llama rotates halves (i, i + hs/2).  Both use frequency
  theta^(-2i/hs) for pair i, so permuting the rows of wq and wk per head,
  new row h*hs + half*hs/2 + i = old row h*hs + 2i + half, makes the HF
  model compute the same function (the permutation HF's
  convert_llama_weights_to_hf.py applies to Meta checkpoints).  wv/wo are
  untouched (attention is invariant to that per-head reordering of q/k).

  Output folder: config.json (LlamaForCausalLM, rms_norm_eps 1e-5 and
  rope_theta 1e4 as run.c), generation_config.json, model.safetensors (F32;
  with a shared classifier only model.embed_tokens.weight is stored and
  tie_word_embeddings is true), tokenizer.json (Llama-2 kind:
  SentencePiece-BPE with byte fallback; merges derived from the piece
  scores as HF's SentencePieceExtractor does) and tokenizer_config.json.

Usage: llama2c_to_hf.py --checkpoint stories260K.bin --tokenizer tok512.model
                        [--tokenizer-bin tok512.bin] --out DIR
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402


class ConvertError(Exception):
    pass


# ----------------------------------------------------------------------------
# Checkpoint


def read_llama2c(path):
    """Returns (hparams dict, {hf name: f32 array}) with q/k rows permuted."""
    data = np.fromfile(path, dtype="<f4")
    if data.size < 7:
        raise ConvertError(f"{path}: too short for a llama2.c header")
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", data[:7].tobytes())
    shared = vocab > 0
    vocab = abs(vocab)
    if min(dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len) <= 0 or dim % n_heads \
            or n_heads % n_kv or (dim // n_heads) % 2:
        raise ConvertError(f"{path}: implausible header {dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len}")
    hs = dim // n_heads
    kv_dim = n_kv * hs
    off = 7

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        if off + n > data.size:
            raise ConvertError(f"{path}: truncated (need {off + n} floats, have {data.size})")
        a = data[off: off + n].reshape(shape).copy()
        off += n
        return a

    emb = take(vocab, dim)
    att_norm = take(n_layers, dim)
    wq = take(n_layers, dim, dim)
    wk = take(n_layers, kv_dim, dim)
    wv = take(n_layers, kv_dim, dim)
    wo = take(n_layers, dim, dim)
    ffn_norm = take(n_layers, dim)
    w1 = take(n_layers, hidden, dim)
    w2 = take(n_layers, dim, hidden)
    w3 = take(n_layers, hidden, dim)
    norm = take(dim)
    take(seq_len, hs // 2)  # freq_cis_real (run.c ignores it too)
    take(seq_len, hs // 2)  # freq_cis_imag
    wcls = None if shared else take(vocab, dim)
    if off != data.size:
        raise ConvertError(f"{path}: {data.size - off} trailing floats; not a legacy llama2.c checkpoint?")

    def permute(w, heads):
        rows, cols = w.shape
        return w.reshape(heads, rows // heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)

    t = {"model.embed_tokens.weight": emb, "model.norm.weight": norm}
    if wcls is not None:
        t["lm_head.weight"] = wcls
    for i in range(n_layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = att_norm[i]
        t[p + "post_attention_layernorm.weight"] = ffn_norm[i]
        t[p + "self_attn.q_proj.weight"] = permute(wq[i], n_heads)
        t[p + "self_attn.k_proj.weight"] = permute(wk[i], n_kv)
        t[p + "self_attn.v_proj.weight"] = wv[i]
        t[p + "self_attn.o_proj.weight"] = wo[i]
        t[p + "mlp.gate_proj.weight"] = w1[i]
        t[p + "mlp.down_proj.weight"] = w2[i]
        t[p + "mlp.up_proj.weight"] = w3[i]
    hp = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv,
              vocab=vocab, seq_len=seq_len, shared=shared)
    return hp, t


# ----------------------------------------------------------------------------
# Tokenizer


NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def _varint(buf, i):
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ConvertError("truncated protobuf varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ConvertError("protobuf varint too long")


def _fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        fno, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i: i + 8], i + 8
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i: i + n], i + n
        elif wt == 5:
            v, i = buf[i: i + 4], i + 4
        else:
            raise ConvertError(f"unsupported protobuf wire type {wt}")
        if i > len(buf):
            raise ConvertError("truncated protobuf field")
        yield fno, wt, v


def read_spm_model(path):
    """Pieces of a SentencePiece ModelProto: list of (piece, score, type)."""
    with open(path, "rb") as f:
        buf = f.read()
    pieces = []
    for fno, wt, v in _fields(buf):
        if fno == 1 and wt == 2:  # repeated SentencePiece pieces = 1
            piece, score, typ = None, 0.0, NORMAL
            for f2, w2, v2 in _fields(v):
                if f2 == 1 and w2 == 2:
                    piece = v2.decode("utf-8")
                elif f2 == 2 and w2 == 5:
                    (score,) = struct.unpack("<f", v2)
                elif f2 == 3 and w2 == 0:
                    typ = v2
            if piece is None:
                raise ConvertError(f"{path}: piece without text")
            pieces.append((piece, score, typ))
    if not pieces:
        raise ConvertError(f"{path}: no pieces; not a SentencePiece model?")
    return pieces


def read_llama2c_tokenizer(path, vocab):
    """tok*.bin -> list of (piece, score, type), pieces with '▁' restored."""
    with open(path, "rb") as f:
        buf = f.read()
    (maxlen,) = struct.unpack_from("<i", buf, 0)
    off = 4
    out = []
    for i in range(vocab):
        if off + 8 > len(buf):
            raise ConvertError(f"{path}: truncated at token {i}")
        score, n = struct.unpack_from("<fi", buf, off)
        off += 8
        if n < 0 or n > maxlen or off + n > len(buf):
            raise ConvertError(f"{path}: bad token length {n} at token {i}")
        b = buf[off: off + n]
        off += n
        s = b.decode("utf-8", errors="replace")
        if i == 0:
            out.append(("<unk>", score, UNKNOWN))
        elif i == 1:
            out.append(("<s>", score, CONTROL))
        elif i == 2:
            out.append(("</s>", score, CONTROL))
        elif len(s) == 6 and s.startswith("<0x") and s.endswith(">"):
            out.append((s, score, BYTE))
        else:
            out.append((s.replace(" ", "\u2581"), score, NORMAL))
    return out


def build_tokenizer_json(pieces):
    vocab = {p: i for i, (p, _, _) in enumerate(pieces)}
    if len(vocab) != len(pieces):
        raise ConvertError("duplicate pieces in vocabulary")
    # merges: every split of a NORMAL piece into two pieces in the vocab,
    # ordered by the merged piece's score (desc), then by the ids of the parts
    merges = []
    for p, score, typ in pieces:
        if typ != NORMAL or len(p) < 2:
            continue
        local = []
        for k in range(1, len(p)):
            left, right = p[:k], p[k:]
            if left in vocab and right in vocab:
                local.append((left, right, score))
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda x: x[2], reverse=True)
    special = [i for i, (_, _, t) in enumerate(pieces) if t in (UNKNOWN, CONTROL)]
    added = [{"id": i, "content": pieces[i][0], "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True} for i in special]
    bos = next((p for p, _, t in pieces if p == "<s>"), None)
    unk = next((p for p, _, t in pieces if t == UNKNOWN), None)
    post = None
    if bos is not None:
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}}}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": post,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": unk,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b, _ in merges]},
    }


def build_tokenizer_config(pieces):
    dec = {}
    for i, (p, _, t) in enumerate(pieces):
        if t in (UNKNOWN, CONTROL):
            dec[str(i)] = {"content": p, "lstrip": False, "normalized": False,
                           "rstrip": False, "single_word": False, "special": True}
    return {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": dec,
            "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
            "clean_up_tokenization_spaces": False, "legacy": True,
            "model_max_length": 1000000000000000019884624838656,
            "sp_model_kwargs": {}, "spaces_between_special_tokens": False,
            "tokenizer_class": "LlamaTokenizer"}


# ----------------------------------------------------------------------------


def convert(checkpoint, out, spm_model=None, tok_bin=None):
    hp, tensors = read_llama2c(checkpoint)
    pieces = None
    if spm_model:
        pieces = read_spm_model(spm_model)
    if tok_bin:
        from_bin = read_llama2c_tokenizer(tok_bin, hp["vocab"])
        if pieces is None:
            pieces = from_bin
        else:  # cross-check the two files describe the same vocabulary
            for i, ((p, s, t), (pb, sb, tb)) in enumerate(zip(pieces, from_bin)):
                if t == NORMAL and (p != pb or abs(s - sb) > 1e-6):
                    raise ConvertError(f"token {i}: {spm_model} has {p!r} {s}, {tok_bin} has {pb!r} {sb}")
    if pieces is not None and len(pieces) != hp["vocab"]:
        raise ConvertError(f"tokenizer has {len(pieces)} pieces, checkpoint vocab is {hp['vocab']}")
    os.makedirs(out, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hp["dim"], "intermediate_size": hp["hidden"],
        "num_hidden_layers": hp["n_layers"], "num_attention_heads": hp["n_heads"],
        "num_key_value_heads": hp["n_kv"], "vocab_size": hp["vocab"],
        "max_position_embeddings": hp["seq_len"], "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "rope_scaling": None, "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "attention_dropout": 0.0,
        "tie_word_embeddings": hp["shared"], "bos_token_id": 1, "eos_token_id": 2,
        "initializer_range": 0.02, "pretraining_tp": 1, "use_cache": True,
        "torch_dtype": "float32",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f, indent=2)
    safetensors_np.write(os.path.join(out, "model.safetensors"), tensors, dtype="F32",
                         metadata={"format": "pt"})
    if pieces is not None:
        with open(os.path.join(out, "tokenizer.json"), "w") as f:
            json.dump(build_tokenizer_json(pieces), f, ensure_ascii=False, indent=1)
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump(build_tokenizer_config(pieces), f, indent=2)
    return hp


def main():
    ap = argparse.ArgumentParser(description="llama2.c checkpoint -> Hugging Face folder")
    ap.add_argument("--checkpoint", required=True, help="llama2.c .bin (legacy header)")
    ap.add_argument("--tokenizer", help="SentencePiece .model")
    ap.add_argument("--tokenizer-bin", help="llama2.c tokenizer .bin (fallback / cross-check)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        hp = convert(a.checkpoint, a.out, a.tokenizer, a.tokenizer_bin)
    except (ConvertError, OSError, UnicodeDecodeError) as e:
        print(f"llama2c_to_hf: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out}: {hp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
