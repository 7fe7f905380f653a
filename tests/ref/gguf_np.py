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

Usage: gguf_np.py check MODEL_DIR FILE.gguf
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
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
             "post_attention_layernorm": "ffn_norm", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "mlp.gate": "ffn_gate_inp"}
    n = 0
    n_perm = 0
    experts = {}
    for name, w in hf.items():
        if name.startswith("model.layers."):
            parts = name.split(".")
            il, rest, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
            if ".experts." in name:
                e = int(parts[5])
                proj = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate",
                        "w3": "up", "w2": "down"}[parts[6]]
                experts.setdefault(f"blk.{il}.ffn_{proj}_exps.weight", {})[e] = w
                continue
            if rest == "block_sparse_moe.gate":
                rest = "mlp.gate"
            gn = f"blk.{il}.{names[rest]}.{kind}"
        elif name == "model.embed_tokens.weight":
            gn = "token_embd.weight"
        elif name == "model.norm.weight":
            gn = "output_norm.weight"
        elif name == "lm_head.weight":
            gn = "output.weight" if "output.weight" in g.tensors else "token_embd.weight"
        else:
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
    if len(sys.argv) != 4 or sys.argv[1] != "check":
        print(__doc__.strip().splitlines()[-1])
        sys.exit(2)
    sys.exit(check(sys.argv[2], sys.argv[3]))
