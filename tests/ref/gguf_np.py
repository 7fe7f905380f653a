#!/usr/bin/python3
"""A small GGUF reader on numpy, independent of sglc's C reader, and a check
that `sglc quantize` wrote what llama.cpp's converter would.

DESIGN
  Format (llama.cpp's docs/gguf.md): "GGUF", u32 version, u64 n_tensors,
  u64 n_kv; n_kv x (string key, u32 type, value); n_tensors x (string name,
  u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset); data section at
  the next multiple of general.alignment (default 32).  Strings are u64
  length + bytes; arrays u32 element type + u64 count + elements.

  check MODEL_DIR FILE.gguf: every F32 tensor of the file equals the
  Hugging Face tensor it came from, with llama.cpp's q/k row permutation
  for general.architecture == "llama" (convert_hf_to_gguf.py's
  LlamaModel.permute: per head, rows (i, i + d/2) -> (2i, 2i + 1), applied
  to q with n_head and k with n_head_kv, weights and biases) and none for
  the qwen architectures; expert tensors stack the HF experts; the
  hyper-parameter keys equal config.json's.  Prints one line per check
  group and exits 1 on the first mismatch.

  dequant-hf MODEL_DIR FILE.gguf OUT_DIR: the HF folder's tensors with the
  values stored in the file, decoded independently (quantized types through
  tests/ref/gguf_quants.py), q/k rows un-permuted, experts unstacked, written
  as an F32 safetensors folder: what sglc must compute from the file.

Usage: gguf_np.py check MODEL_DIR FILE.gguf
       gguf_np.py dequant-hf MODEL_DIR FILE.gguf OUT_DIR
"""
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import safetensors_np  # noqa: E402

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.p = 0
        assert self.b[:4] == b"GGUF", "bad magic"
        self.p = 4
        self.version = self.u("<I")
        nt, nkv = self.u("<Q"), self.u("<Q")
        self.kv = {}
        for _ in range(nkv):
            k = self.s()
            self.kv[k] = self.val(self.u("<I"))
        self.tensors = {}
        for _ in range(nt):
            name = self.s()
            nd = self.u("<I")
            ne = [self.u("<Q") for _ in range(nd)]
            ty, off = self.u("<I"), self.u("<Q")
            self.tensors[name] = (ne, ty, off)
        align = self.kv.get("general.alignment", 32)
        self.data = (self.p + align - 1) // align * align

    def u(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def s(self):
        n = self.u("<Q")
        v = self.b[self.p:self.p + n].decode("utf-8")
        self.p += n
        return v

    def val(self, t):
        if t == 8:
            return self.s()
        if t == 9:
            et, n = self.u("<I"), self.u("<Q")
            return [self.val(et) for _ in range(n)]
        return self.u(_SCALAR[t])

    def f32(self, name):
        ne, ty, off = self.tensors[name]
        assert ty == 0, f"{name}: type {ty}, not F32"
        n = int(np.prod(ne))
        a = np.frombuffer(self.b, dtype="<f4", count=n, offset=self.data + off)
        return a.reshape(list(reversed(ne)))


_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
          "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
          "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
          "post_attention_layernorm": "ffn_norm", "self_attn.q_norm": "attn_q_norm",
          "self_attn.k_norm": "attn_k_norm", "mlp.gate": "ffn_gate_inp", "block_sparse_moe.gate": "ffn_gate_inp"}
_EXPERT = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up", "w2": "down"}


def gguf_name(name, g):
    """(GGUF tensor name, expert index or None) of an HF tensor; (None, None) if it has none."""
    if name.startswith("model.layers."):
        parts = name.split(".")
        il, rest, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
        if ".experts." in name:
            return f"blk.{il}.ffn_{_EXPERT[parts[6]]}_exps.weight", int(parts[5])
        return f"blk.{il}.{_NAMES[rest]}.{kind}", None
    if name == "model.embed_tokens.weight":
        return "token_embd.weight", None
    if name == "model.norm.weight":
        return "output_norm.weight", None
    if name == "lm_head.weight":
        return ("output.weight" if "output.weight" in g.tensors else "token_embd.weight"), None
    return None, None


# ggml type id -> tests/ref/gguf_quants.py name
_QNAMES = {2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_K", 11: "q3_K", 12: "q4_K",
           13: "q5_K", 14: "q6_K", 20: "iq4_nl", 23: "iq4_xs"}


def dequant(g, name):
    """Any tensor of the file as f32, shape ne reversed (quantized types through gguf_quants.py)."""
    ne, ty, off = g.tensors[name]
    n = int(np.prod(ne))
    shape = list(reversed(ne))
    if ty == 0:
        return g.f32(name)
    if ty == 1:
        return np.frombuffer(g.b, dtype="<f2", count=n, offset=g.data + off).astype(np.float32).reshape(shape)
    if ty == 30:
        bits = np.frombuffer(g.b, dtype="<u2", count=n, offset=g.data + off)
        return safetensors_np.bf16_bits_to_f32(bits).reshape(shape)
    import gguf_quants  # tests/ref, the independent decoder of the block types
    qn = _QNAMES[ty]
    bs, nb = {k: (v[0], v[1]) for k, v in gguf_quants.TYPES.items()}[qn]
    raw = g.b[g.data + off:g.data + off + n // bs * nb]
    return gguf_quants.dequantize(qn, raw).reshape(shape)


def unpermute(w, n_head):
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def dequant_hf(model_dir, path, out):
    """The HF folder's tensors with the file's (dequantized) values, as F32 safetensors."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    hf, _ = safetensors_np.read(os.path.join(model_dir, "model.safetensors"))
    g = Reader(path)
    arch = g.kv["general.architecture"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    cache, res, types = {}, {}, {}
    for name in hf:
        gn, e = gguf_name(name, g)
        if gn is None:
            continue
        if gn not in cache:
            cache[gn] = dequant(g, gn)
            types[g.tensors[gn][1]] = types.get(g.tensors[gn][1], 0) + 1
        w = cache[gn] if e is None else cache[gn][e]
        if arch == "llama" and (".attn_q." in gn or ".attn_k." in gn):
            w = unpermute(w, nh if ".attn_q." in gn else nkv)
        res[name] = np.ascontiguousarray(w, dtype=np.float32)
    os.makedirs(out, exist_ok=True)
    safetensors_np.write(os.path.join(out, "model.safetensors"), res)
    cfg["torch_dtype"] = "float32"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    print("ok   dequantized", len(res), "tensors; types:",
          ", ".join(f"{_QNAMES.get(t, {0: 'f32', 1: 'f16', 30: 'bf16'}.get(t, t))} x{c}" for t, c in sorted(types.items())))
    return 0


def permute(w, n_head):
    d = w.shape[0] // n_head
    return w.reshape(n_head, 2, d // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def check(model_dir, path):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    hf, _ = safetensors_np.read(os.path.join(model_dir, "model.safetensors"))
    g = Reader(path)
    arch = g.kv["general.architecture"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    keys = {"embedding_length": cfg["hidden_size"], "block_count": cfg["num_hidden_layers"],
            "attention.head_count": nh, "attention.head_count_kv": nkv,
            "feed_forward_length": cfg["intermediate_size"]}
    for k, v in keys.items():
        if g.kv.get(f"{arch}.{k}") != v:
            print(f"FAIL {arch}.{k} = {g.kv.get(f'{arch}.{k}')!r}, config.json says {v}")
            return 1
    print(f"ok   {len(keys)} hyper-parameter keys of {arch} match config.json")
    n = 0
    n_perm = 0
    experts = {}
    for name, w in hf.items():
        gn, e = gguf_name(name, g)
        if gn is None:
            continue
        if e is not None:
            experts.setdefault(gn, {})[e] = w
            continue
        want = w.astype(np.float32)
        if arch == "llama" and (".attn_q." in gn or ".attn_k." in gn):
            want = permute(want, nh if ".attn_q." in gn else nkv)
            n_perm += 1
        got = g.f32(gn)
        if got.shape != want.shape or not np.array_equal(got, want):
            print(f"FAIL {gn} differs from {name}" + (" (permuted)" if arch == "llama" else ""))
            return 1
        n += 1
    for gn, es in experts.items():
        want = np.stack([es[e] for e in range(len(es))]).astype(np.float32)
        if not np.array_equal(g.f32(gn), want):
            print(f"FAIL {gn} is not the stacked experts")
            return 1
        n += 1
    print(f"ok   {n} tensors equal the HF ones ({n_perm} with llama.cpp's q/k row permutation)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 5 and sys.argv[1] == "dequant-hf":
        sys.path.insert(0, HERE)
        sys.exit(dequant_hf(sys.argv[2], sys.argv[3], sys.argv[4]))
    print(__doc__.strip().splitlines()[-2] + "\n" + __doc__.strip().splitlines()[-1])
    sys.exit(2)
