#!/usr/bin/env python3
"""PyTorch reference dequantization of Hugging Face quantized weight formats.

Written from the formats as AutoAWQ, AutoGPTQ / GPTQModel, compressed-tensors
and the DeepSeek-V3 / Qwen3-FP8 checkpoints define them (not from sglc's C):
unpacking with tensor shifts and reshapes, group scales with
repeat_interleave / gather.  Products are f32 (integer difference or fp8
value, times the scale widened to f32), so sglc's src/model/hfquant.c must
agree bit for bit.

    python3 hf_quants_ref.py CASE_DIR

CASE_DIR/case.txt holds `key value` lines: format (awq | gptq | int8 | packed
| fp8), out, in, and per format group / bits / zeros_v2 / block_out /
block_in / scale_dtype (f32 | f16 | bf16), and names of raw little-endian
files in CASE_DIR (qweight, qzeros, scales, g_idx, zero_point).  Writes
CASE_DIR/ref.f32: the (out, in) f32 matrix.
"""
import os
import sys

import numpy as np
import torch

AWQ_PACK_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble p of a word holds column 8c + AWQ_PACK_ORDER[p]


def load(d, spec, key, dtype, shape):
    """A raw file as a torch tensor; bf16 via its bit pattern."""
    path = os.path.join(d, spec[key])
    if dtype == "bf16":
        raw = np.fromfile(path, dtype="<u2").astype(np.int32) << 16
        return torch.from_numpy(raw.view(np.float32).reshape(shape).copy())
    npdt = {"f32": "<f4", "f16": "<f2", "i32": "<i4", "i8": "i1", "u8": "u1"}[dtype]
    a = np.fromfile(path, dtype=npdt).reshape(shape)
    t = torch.from_numpy(a.astype(np.float32) if dtype == "f16" else a.copy())
    return t


def unpack_cols(packed, bits):
    """(r, c) int32 -> (r, c * 32/bits): code j of each word, j-th column of its group."""
    pf = 32 // bits
    shifts = torch.arange(0, 32, bits, dtype=torch.int32)
    v = torch.bitwise_right_shift(packed.unsqueeze(-1), shifts) & ((1 << bits) - 1)
    return v.reshape(packed.shape[0], packed.shape[1] * pf)


def unpack_rows(packed, bits):
    """(r, c) int32 -> (r * 32/bits, c): code j of each word in row r*pf + j."""
    pf = 32 // bits
    shifts = torch.arange(0, 32, bits, dtype=torch.int32).view(1, pf, 1)
    v = torch.bitwise_right_shift(packed.unsqueeze(1), shifts) & ((1 << bits) - 1)
    return v.reshape(packed.shape[0] * pf, packed.shape[1])


def expand_grid(s, bo, bi, out, inn):
    """Scale grid (ceil(out/bo), ceil(in/bi)) -> (out, in)."""
    return s.repeat_interleave(bo, dim=0)[:out].repeat_interleave(bi, dim=1)[:, :inn]


def awq(d, sp, out, inn):
    g = int(sp.get("group", inn))
    g = inn if g <= 0 else g
    ng = (inn + g - 1) // g
    qw = load(d, sp, "qweight", "i32", (inn, out // 8))
    qz = load(d, sp, "qzeros", "i32", (ng, out // 8))
    s = load(d, sp, "scales", sp["scale_dtype"], (ng, out))
    # undo the GEMM packing order: column 8c + AWQ_PACK_ORDER[p] <- nibble p
    perm = torch.empty(8, dtype=torch.long)
    perm[torch.tensor(AWQ_PACK_ORDER)] = torch.arange(8)
    idx = (torch.arange(out // 8).view(-1, 1) * 8 + perm.view(1, 8)).reshape(-1)
    iw = unpack_cols(qw, 4)[:, idx]
    iz = unpack_cols(qz, 4)[:, idx]
    rows = torch.arange(inn) // g
    w = (iw - iz[rows]).to(torch.float32) * s[rows]
    return w.t().contiguous()


def gptq(d, sp, out, inn):
    bits = int(sp["bits"])
    pf = 32 // bits
    g = int(sp.get("group", inn))
    g = inn if g <= 0 else g
    ng = int(sp.get("n_groups", 0)) or (inn + g - 1) // g
    qw = load(d, sp, "qweight", "i32", (inn // pf, out))
    s = load(d, sp, "scales", sp["scale_dtype"], (ng, out))
    gi = load(d, sp, "g_idx", "i32", (inn,)).long() if "g_idx" in sp else torch.arange(inn) // g
    iw = unpack_rows(qw, bits)
    if "qzeros" in sp:
        z = unpack_cols(load(d, sp, "qzeros", "i32", (ng, out // pf)), bits)
        if int(sp.get("zeros_v2", 0)) == 0:
            z = z + 1  # original GPTQ checkpoints store zero - 1
    else:
        z = torch.full((ng, out), 1 << (bits - 1), dtype=torch.int32)
    w = (iw - z[gi]).to(torch.float32) * s[gi]
    return w.t().contiguous()


def grid(d, sp, out, inn):
    bo, bi = int(sp["block_out"]), int(sp["block_in"])
    gr, gc = (out + bo - 1) // bo, (inn + bi - 1) // bi
    s = load(d, sp, "scales", sp["scale_dtype"], (gr, gc))
    return bo, bi, gr, gc, expand_grid(s, bo, bi, out, inn)


def int8(d, sp, out, inn):
    bo, bi, gr, gc, s = grid(d, sp, out, inn)
    q = load(d, sp, "qweight", "i8", (out, inn)).to(torch.int32)
    if "zero_point" in sp:
        zp = expand_grid(load(d, sp, "zero_point", "i8", (gr, gc)).to(torch.int32), bo, bi, out, inn)
        q = q - zp
    return q.to(torch.float32) * s


def packed(d, sp, out, inn):
    bits = int(sp["bits"])
    pf = 32 // bits
    _, _, _, _, s = grid(d, sp, out, inn)
    words = (inn + pf - 1) // pf
    c = unpack_cols(load(d, sp, "qweight", "i32", (out, words)), bits)[:, :inn]
    return (c - (1 << (bits - 1))).to(torch.float32) * s


def fp8_table():
    """The 256 e4m3fn values: sign, 4 exponent bits (bias 7), 3 mantissa bits;
    exponent 0 is subnormal, S.1111.111 is NaN, no infinities."""
    v = torch.arange(256, dtype=torch.int32)
    sign = torch.where(v >= 128, torch.tensor(-1.0), torch.tensor(1.0))
    e = (v >> 3) & 15
    m = (v & 7).to(torch.float32)
    mag = torch.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * torch.pow(2.0, (e - 7).to(torch.float32)))
    t = (sign * mag).to(torch.float32)
    t[(e == 15) & ((v & 7) == 7)] = float("nan")
    assert t[0x7E] == 448.0 and t[0x01] == 2.0 ** -9 and t[0x08] == 2.0 ** -6 and t[0xFE] == -448.0
    return t


def fp8(d, sp, out, inn):
    _, _, _, _, s = grid(d, sp, out, inn)
    q = load(d, sp, "qweight", "u8", (out, inn)).long()
    return fp8_table()[q] * s


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    d = argv[1]
    sp = {}
    with open(os.path.join(d, "case.txt")) as f:
        for line in f:
            if line.strip():
                k, v = line.split(None, 1)
                sp[k] = v.strip()
    out, inn = int(sp["out"]), int(sp["in"])
    fn = {"awq": awq, "gptq": gptq, "int8": int8, "packed": packed, "fp8": fp8}[sp["format"]]
    w = fn(d, sp, out, inn)
    assert w.shape == (out, inn) and w.dtype == torch.float32, (w.shape, w.dtype)
    w.numpy().astype("<f4").tofile(os.path.join(d, "ref.f32"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
