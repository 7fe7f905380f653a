#!/usr/bin/python3
"""Writes tiny Hugging Face quantized checkpoints (and their dequantized
references) for tests/scripts/test_hfq.sh.

DESIGN
  The base is make_tiny_model.py's "llama3" model (hidden 128, GQA 4:1,
  intermediate 384, vocab 512, tied embeddings): its f32 weights are
  quantized here with PyTorch, written in each format's own tensor layout
  (written from the formats' descriptions: AutoAWQ GEMM packing, AutoGPTQ
  v1 zeros, compressed-tensors int-/pack-quantized, DeepSeek-style fp8
  blocks, SGLang's w8a8_int8 / w8a8_fp8), and dequantized again in f32 for
  the reference folder.  Per format NAME:
    OUT/NAME/q/    config.json with quantization_config + model.safetensors
    OUT/NAME/ref/  the dequantized weights (F32), the plain config
    OUT/NAME/blk/  the weights as sglc's blocks hold them (f16 d, and
                   m = f16(-s*z) for Q4_1; = ref/ where the blocks are exact)
  "atload-int8" / "atload-fp8" are the plain f32 model (q/) loaded with
  --quantization w8a8_int8 / fp8; their ref/ holds the weights rounded the
  way sglc quantizes at load (Q8_0: d = amax/127, round half away, d to
  f16; fp8: per-row scale amax/448, e4m3 round to nearest even).
  Bad checkpoints for the error tests go to OUT/bad-*/.
  Linear layers only (q/k/v/o, gate/up/down); embeddings, norms and the
  tied lm_head stay f32.  A stamp skips rebuilding.

Usage: make_hfq_models.py [--out DIR] [--shared DIR]
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_tiny_model as mtm  # noqa: E402
import safetensors_np  # noqa: E402

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "w1", "w2", "w3")
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble p holds column 8c + AWQ_ORDER[p]


def is_linear(name):
    return name.endswith(".weight") and name.split(".")[-2] in LINEAR


def pack_cols(codes, bits, order=None):
    """(r, c) codes -> (r, c*bits/32) int32, code j of a word at bits j*bits
    (AWQ: nibble p holds column 8w + order[p])."""
    pf = 32 // bits
    r, c = codes.shape
    v = codes.reshape(r, c // pf, pf).astype(np.uint32)
    if order is not None:
        v = v[:, :, order]
    out = np.zeros((r, c // pf), dtype=np.uint32)
    for j in range(pf):
        out |= v[:, :, j] << np.uint32(j * bits)
    return out.view(np.int32)


def pack_rows(codes, bits):
    """(r, c) codes -> (r*bits/32, c) int32 (GPTQ qweight: packed along in)."""
    pf = 32 // bits
    r, c = codes.shape
    v = codes.reshape(r // pf, pf, c).astype(np.uint32)
    out = np.zeros((r // pf, c), dtype=np.uint32)
    for j in range(pf):
        out |= v[:, j, :] << np.uint32(j * bits)
    return out.view(np.int32)


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def q_asym(w_in_out, bits, g):
    """w (in, out) -> codes (in, out), zeros (ng, out), scales f16 (ng, out); min/max per group."""
    inn, out = w_in_out.shape
    ng = inn // g
    wg = w_in_out.reshape(ng, g, out)
    mx, mn = wg.max(axis=1), wg.min(axis=1)
    qmax = (1 << bits) - 1
    s = f16(np.maximum(mx - mn, 1e-6) / qmax).astype(np.float32)
    z = np.clip(np.round(-mn / s), 1, qmax).astype(np.int64)  # >= 1: GPTQ v1 stores z - 1
    q = np.clip(np.round(wg / s[:, None, :]) + z[:, None, :], 0, qmax).astype(np.int64)
    return q.reshape(inn, out), z, s


def q_sym(w_in_out, bits, g):
    inn, out = w_in_out.shape
    ng = inn // g
    wg = w_in_out.reshape(ng, g, out)
    half = 1 << (bits - 1)
    s = f16(np.maximum(np.abs(wg).max(axis=1), 1e-6) / (half - 1)).astype(np.float32)
    q = np.clip(np.round(wg / s[:, None, :]) + half, 0, 2 * half - 1).astype(np.int64)
    return q.reshape(inn, out), np.full((ng, out), half, dtype=np.int64), s


def _e4m3_pos():
    """The 127 finite non-negative e4m3fn values, by code (0..126): exponent 0
    subnormal m/8 * 2^-6, else (1 + m/8) * 2^(e-7)."""
    v = []
    for c in range(127):
        e, m = c >> 3, c & 7
        v.append(m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.array(v, dtype=np.float64)


E4M3 = _e4m3_pos()


class Fp8:
    """e4m3fn codes of x rounded to nearest (ties to even), saturating at 448."""
    def __init__(self, x):
        x = np.asarray(x, dtype=np.float32).astype(np.float64)
        a = np.abs(x)
        _, e = np.frexp(np.where(a > 0, a, 1.0))
        E = np.maximum(e - 1, -6)
        ulp = np.ldexp(1.0, E - 3)
        q = np.minimum(np.rint(a / ulp) * ulp, 448.0)
        q = np.where(a > 0, q, 0.0)
        code = np.searchsorted(E4M3, q)
        assert np.all(E4M3[code] == q)
        self.codes = (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)
        self.vals = np.where(np.signbit(x), -q, q).astype(np.float32)

    def to(self, _dtype):
        return torch.from_numpy(self.vals)

    def view(self, _dtype):
        return torch.from_numpy(self.codes)


def fp8_round(x):
    return Fp8(x)


def fmt_awq(name, w):
    out, inn = w.shape
    g = 128
    q, z, s = q_asym(w.T, 4, g)
    ref = ((q - np.repeat(z, g, axis=0)) * np.repeat(s, g, axis=0)).astype(np.float32).T
    base = name[:-len(".weight")]
    return {base + ".qweight": pack_cols(q, 4, AWQ_ORDER), base + ".qzeros": pack_cols(z, 4, AWQ_ORDER),
            base + ".scales": f16(s)}, ref, q41(q, z, s, g)


def q41(q, z, s, g):
    """What a Q4_1 block holds for (q - z) * s: f16(s) * q + f16(-s * z), (out, in)."""
    se, ze = np.repeat(s, g, axis=0), np.repeat(z, g, axis=0).astype(np.float32)
    d = f16(se).astype(np.float32)
    m = f16(-se * ze).astype(np.float32)
    return (d * q.astype(np.float32) + m).astype(np.float32).T


def gptq_tensors(base, q, z, s, g, bits, gidx=None):
    inn = q.shape[0]
    t = {base + ".qweight": pack_rows(q, bits), base + ".qzeros": pack_cols(z - 1, bits),
         base + ".scales": f16(s),
         base + ".g_idx": (np.arange(inn) // g if gidx is None else gidx).astype(np.int32)}
    return t


def fmt_gptq(bits, sym, g=128, act=False):
    def f(name, w):
        out, inn = w.shape
        base = name[:-len(".weight")]
        if act:
            # act-order: input rows quantized in a permuted order, g_idx maps each row to its group
            perm = np.random.RandomState(len(name)).permutation(inn)
            wp = w.T[perm]
            q, z, s = (q_sym if sym else q_asym)(wp, bits, g)
            gidx = np.empty(inn, dtype=np.int64)
            gidx[perm] = np.arange(inn) // g
            qq = np.empty_like(q)
            qq[perm] = q
            ref = ((qq - z[gidx]) * s[gidx]).astype(np.float32).T
            return gptq_tensors(base, qq, z, s, g, bits, gidx), ref, ref
        q, z, s = (q_sym if sym else q_asym)(w.T, bits, g)
        ref = ((q - np.repeat(z, g, axis=0)) * np.repeat(s, g, axis=0)).astype(np.float32).T
        # symmetric: Q4_0 / Q8_0 with d = s (f16 already): exact
        return gptq_tensors(base, q, z, s, g, bits), ref, (ref if sym else q41(q, z, s, g))
    return f


def fmt_ct_int8(name, w):
    s = (np.abs(w).max(axis=1, keepdims=True) / 127.0).astype(np.float32)  # f32 scales: sglc rounds to f16
    q = np.clip(np.round(w / s), -127, 127).astype(np.int8)
    ref = (q.astype(np.float32) * s).astype(np.float32)
    base = name[:-len(".weight")]
    return {name: q, base + ".weight_scale": s}, ref, (q.astype(np.float32) * f16(s).astype(np.float32))


def fmt_ct_int8_small(name, w):
    """Weights 1e-3 smaller: scales ~2e-6, below f16's normal range, so
    sglc cannot keep Q8_0 blocks (d is f16) and dequantizes instead."""
    return fmt_ct_int8(name, (w * 1e-3).astype(np.float32))


def fmt_ct_w4a16(name, w):
    out, inn = w.shape
    g = 32
    wg = w.reshape(out, inn // g, g)
    s = f16(np.abs(wg).max(axis=2) / 7.0).astype(np.float32)
    c = np.clip(np.round(wg / s[:, :, None]), -8, 7).astype(np.int64)
    ref = (c * s[:, :, None]).reshape(out, inn).astype(np.float32)
    base = name[:-len(".weight")]
    return {base + ".weight_packed": pack_cols((c + 8).reshape(out, inn), 4),
            base + ".weight_scale": f16(s), base + ".weight_shape": np.array([out, inn], dtype=np.int64)}, ref, ref


def fmt_fp8_block(name, w):
    out, inn = w.shape
    b = 128
    go, gi = -(-out // b), -(-inn // b)
    s = np.zeros((go, gi), dtype=np.float32)
    for i in range(go):
        for j in range(gi):
            s[i, j] = max(np.abs(w[i * b:(i + 1) * b, j * b:(j + 1) * b]).max(), 1e-6) / 448.0
    se = np.repeat(np.repeat(s, b, axis=0), b, axis=1)[:out, :inn]
    q = fp8_round(w / se)
    ref = (q.to(torch.float32).numpy() * se).astype(np.float32)
    base = name[:-len(".weight")]
    return {name: ("F8_E4M3", q.view(torch.uint8).numpy()), base + ".weight_scale_inv": s}, ref, ref


def fmt_fp8_channel(name, w):
    s = (np.maximum(np.abs(w).max(axis=1, keepdims=True), 1e-6) / 448.0).astype(np.float32)
    q = fp8_round(w / s)
    ref = (q.to(torch.float32).numpy() * s).astype(np.float32)
    base = name[:-len(".weight")]
    return {name: ("F8_E4M3", q.view(torch.uint8).numpy()), base + ".weight_scale": s}, ref, ref


def fmt_fp8_tensor(name, w):
    """fp8 with one scale per tensor (a 0-dim weight_scale, as the first
    FP8 checkpoints of the quant_method "fp8" era ship)."""
    s = np.float32(max(np.abs(w).max(), 1e-6) / 448.0)
    q = fp8_round(w / s)
    ref = (q.to(torch.float32).numpy() * s).astype(np.float32)
    base = name[:-len(".weight")]
    return {name: ("F8_E4M3", q.view(torch.uint8).numpy()), base + ".weight_scale": np.array(s, dtype=np.float32)}, ref, ref


def fmt_w8a8_int8(name, w):
    return fmt_ct_int8(name, w)


def at_load_int8(name, w):
    """sglc's Q8_0 quantizer (ggml's reference): d = amax/127 per 32, q = roundf(x/d), d stored f16."""
    out, inn = w.shape
    wb = w.reshape(out, inn // 32, 32).astype(np.float32)
    amax = np.abs(wb).max(axis=2, keepdims=True)
    d = (amax / np.float32(127.0)).astype(np.float32)
    idv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = np.clip((wb * idv).astype(np.float32), -127, 127)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)  # round half away from zero
    ref = (q * f16(d).astype(np.float32)).astype(np.float32).reshape(out, inn)
    return {name: w}, ref, ref


def at_load_fp8(name, w):
    amax = np.abs(w).max(axis=1, keepdims=True).astype(np.float32)
    s = np.where(amax > 0, amax / np.float32(448.0), 1).astype(np.float32)
    q = fp8_round((w / s).astype(np.float32))
    ref = (q.to(torch.float32).numpy() * s).astype(np.float32)
    return {name: w}, ref, ref


def ct_config(fmt, wts, ignore=("lm_head",)):
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": wts,
                                          "input_activations": None}},
            "ignore": list(ignore)}


# name -> (tensor maker, quantization_config or None (at load))
FORMATS = {
    "awq": (fmt_awq, {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                      "version": "gemm", "modules_to_not_convert": None}),
    "gptq4": (fmt_gptq(4, True), {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                  "desc_act": False, "sym": True, "checkpoint_format": "gptq"}),
    "gptq4-asym": (fmt_gptq(4, False), {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                        "desc_act": False, "sym": False}),
    "gptq4-act": (fmt_gptq(4, True, g=32, act=True),
                  {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True, "sym": True}),
    "gptq8": (fmt_gptq(8, True), {"quant_method": "gptq", "bits": 8, "group_size": 128,
                                  "desc_act": False, "sym": True}),
    "ct-int8": (fmt_ct_int8, ct_config("int-quantized", {"num_bits": 8, "type": "int", "symmetric": True,
                                                          "strategy": "channel", "group_size": None,
                                                          "dynamic": False})),
    "ct-int8-small": (fmt_ct_int8_small, ct_config("int-quantized", {"num_bits": 8, "type": "int", "symmetric": True,
                                                                      "strategy": "channel"})),
    "ct-w4a16": (fmt_ct_w4a16, ct_config("pack-quantized", {"num_bits": 4, "type": "int", "symmetric": True,
                                                             "strategy": "group", "group_size": 32})),
    "w8a8-int8": (fmt_w8a8_int8, {"quant_method": "w8a8_int8"}),
    "fp8-block": (fmt_fp8_block, {"quant_method": "fp8", "activation_scheme": "dynamic",
                                  "fmt": "e4m3", "weight_block_size": [128, 128]}),
    # Qwen3-FP8 / DeepSeek-V3 style: a bf16 model whose linears are fp8 blocks
    "fp8-block-bf16": (fmt_fp8_block, {"quant_method": "fp8", "activation_scheme": "dynamic",
                                       "fmt": "e4m3", "weight_block_size": [128, 128]}),
    # MoE: Mixtral's experts (w1/w3/w2 per expert) quantized, the router kept
    "gptq4-act-mixtral": (fmt_gptq(4, True, g=32, act=True),
                          {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True, "sym": True}),
    "w8a8-fp8": (fmt_fp8_channel, {"quant_method": "w8a8_fp8"}),
    "fp8-tensor": (fmt_fp8_tensor, {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3"}),
    "atload-int8": (at_load_int8, None),
    "atload-fp8": (at_load_fp8, None),
}


def write_folder(d, cfg, tensors):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    safetensors_np.write(os.path.join(d, "model.safetensors"), tensors, metadata={"format": "pt"})


# formats written over another base model than llama3 (their folder also
# holds orig/: the unquantized model)
OTHER_BASE = {"gptq4-act-mixtral": "mixtral"}


def base_config(shared, name):
    base_rel, overrides, _ = mtm.SPECS[name]
    with open(os.path.join(shared, "models", base_rel)) as f:
        cfg = mtm.tiny_config(json.load(f), overrides)
    cfg["torch_dtype"] = "float32"
    return cfg


def build(out_root, shared):
    cfg = base_config(shared, "llama3")
    others = {b: base_config(shared, b) for b in set(OTHER_BASE.values())}
    h = hashlib.sha256()
    for p in (__file__, mtm.__file__, safetensors_np.__file__):
        h.update(open(p, "rb").read())
    h.update(json.dumps([cfg, others], sort_keys=True).encode())
    stamp = h.hexdigest()
    sp = os.path.join(out_root, "stamp")
    if os.path.exists(sp) and open(sp).read().strip() == stamp:
        print(f"cached {out_root}")
        return
    shutil.rmtree(out_root, ignore_errors=True)
    w0, cfg0 = mtm.make_weights("llama3", cfg), cfg
    for fname, (maker, qc) in FORMATS.items():
        cfg, w = cfg0, w0
        if fname in OTHER_BASE:
            cfg = others[OTHER_BASE[fname]]
            w = mtm.make_weights(OTHER_BASE[fname], cfg)
            write_folder(os.path.join(out_root, fname, "orig"), cfg, w)
        qt, rt, bt = {}, {}, {}
        for n, v in w.items():
            if is_linear(n):
                t, ref, blk = maker(n, v)
                qt.update(t)
                rt[n], bt[n] = ref, blk
            else:
                qt[n] = v
                rt[n] = bt[n] = v
        qcfg = dict(cfg)
        if fname.endswith("-bf16"):
            qcfg["torch_dtype"] = "bfloat16"
        if qc is not None:
            qcfg["quantization_config"] = qc
        write_folder(os.path.join(out_root, fname, "q"), qcfg, qt)
        write_folder(os.path.join(out_root, fname, "ref"), cfg, rt)
        write_folder(os.path.join(out_root, fname, "blk"), cfg, bt)
        if fname == "awq":
            awq_t = qt
        if fname == "gptq4":
            gptq_t = qt
    cfg, w = cfg0, w0
    # bad checkpoints
    def bad(name, qc, tensors):
        c = dict(cfg)
        if qc is not None:
            c["quantization_config"] = qc
        write_folder(os.path.join(out_root, "bad-" + name), c, tensors)
    t = dict(awq_t)
    del t["model.layers.1.mlp.down_proj.scales"]
    bad("awq-noscales", FORMATS["awq"][1], t)
    t = dict(gptq_t)
    t["model.layers.0.self_attn.k_proj.qweight"] = t["model.layers.0.self_attn.k_proj.qweight"][:8]
    bad("gptq-shape", FORMATS["gptq4"][1], t)
    bad("gptq-3bit", dict(FORMATS["gptq4"][1], bits=3), gptq_t)
    bad("awq-bits8", dict(FORMATS["awq"][1], bits=8), awq_t)
    bad("unknown-method", {"quant_method": "bitsandbytes"}, w)
    with open(sp, "w") as f:
        f.write(stamp + "\n")
    print(f"wrote {out_root}")


def main():
    ap = argparse.ArgumentParser(description="write tiny quantized HF checkpoints")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tiny-models", "hfq"))
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    a = ap.parse_args()
    build(a.out, a.shared)
    return 0


if __name__ == "__main__":
    sys.exit(main())
