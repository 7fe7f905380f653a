#!/usr/bin/env python3
"""Independent numpy dequantization of GGUF's block-quantized types.

Written from the format's description (ggml's block layouts in
ggml-common.h and the GGUF documentation), not from sglc's C code: every
type is decoded for all blocks at once with numpy array operations.  The
arithmetic is f32 with one rounding per product, in the order the format
defines (a sub-block's scale is d * sc first; a min is subtracted last),
so the result must equal sglc's scalar reference bit for bit.

    python3 gguf_quants.py dequant TYPE IN.bin OUT.f32   # raw blocks -> f32 LE
    python3 gguf_quants.py types                          # names and geometry

TYPE is one of q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q2_K q3_K q4_K q5_K q6_K q8_K
iq4_nl iq4_xs.
"""
import sys

import numpy as np

F32 = np.float32

# the 16 values an IQ4 nibble stands for
IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=F32)


def f16(raw, off):
    """(nb, 1) f32 from the little-endian f16 at byte offset off of each block."""
    return np.ascontiguousarray(raw[:, off:off + 2]).view("<f2").astype(F32)


def i8(raw, off, n):
    return np.ascontiguousarray(raw[:, off:off + n]).view(np.int8)


def nibbles(qs):
    """(nb, 2n): low nibbles of the n bytes, then their high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)


def bit_planes(bytes_, nplanes):
    """(nb, nplanes * nbytes): bit p of byte i at index p * nbytes + i."""
    p = np.arange(nplanes, dtype=np.uint8)[None, :, None]
    return ((bytes_[:, None, :] >> p) & 1).reshape(bytes_.shape[0], -1).astype(np.int32)


def per(v, n):
    """Repeat each column of a (nb, g) array n times (one scale per n values)."""
    return np.repeat(v, n, axis=1)


def q4_0(raw):
    d = f16(raw, 0)
    return (nibbles(raw[:, 2:18]) - 8).astype(F32) * d


def q4_1(raw):
    d, m = f16(raw, 0), f16(raw, 2)
    return nibbles(raw[:, 4:20]).astype(F32) * d + m


def _q5_codes(raw, qh_off, qs_off):
    qh = np.ascontiguousarray(raw[:, qh_off:qh_off + 4]).view("<u4").astype(np.uint64)
    hi = ((qh >> np.arange(32, dtype=np.uint64)[None, :]) & 1).astype(np.int32)
    return nibbles(raw[:, qs_off:qs_off + 16]) | (hi << 4)


def q5_0(raw):
    return (_q5_codes(raw, 2, 6) - 16).astype(F32) * f16(raw, 0)


def q5_1(raw):
    return _q5_codes(raw, 4, 8).astype(F32) * f16(raw, 0) + f16(raw, 2)


def q8_0(raw):
    return i8(raw, 2, 32).astype(F32) * f16(raw, 0)


def q8_1(raw):
    return i8(raw, 4, 32).astype(F32) * f16(raw, 0)


def q8_K(raw):
    d = np.ascontiguousarray(raw[:, 0:4]).view("<f4").astype(F32)
    return d * i8(raw, 4, 256).astype(F32)


def _two_bit(qs):
    """Codes of the 64 bytes of 2-bit values: element 128h + 32g + l is
    bits 2g..2g+1 of byte 32h + l."""
    nb = qs.shape[0]
    q = qs.reshape(nb, 2, 1, 32)
    shifts = (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]
    return ((q >> shifts) & 3).reshape(nb, 256).astype(np.int32)


def q2_K(raw):
    sc = raw[:, 0:16]
    d, dmin = f16(raw, 80), f16(raw, 82)
    dl = d * (sc & 0x0F).astype(F32)
    ml = dmin * (sc >> 4).astype(F32)
    return per(dl, 16) * _two_bit(raw[:, 16:80]).astype(F32) - per(ml, 16)


def q3_K(raw):
    nb = raw.shape[0]
    hmask, s = raw[:, 0:32], raw[:, 96:108]
    d = f16(raw, 108)
    low = np.concatenate([s[:, 0:8] & 0x0F, s[:, 0:8] >> 4], axis=1)          # scale j: nibble j // 8 of byte j % 8
    shifts = (2 * np.arange(4, dtype=np.uint8))[None, :, None]
    high = ((s[:, None, 8:12] >> shifts) & 3).reshape(nb, 16)               # bits 2*(j//4) of byte 8 + j % 4
    scale = (low.astype(np.int32) | (high.astype(np.int32) << 4)) - 32
    q = _two_bit(raw[:, 32:96]) - 4 * (1 - bit_planes(hmask, 8))            # clear high bit: minus 4
    return per(d * scale.astype(F32), 16) * q.astype(F32)


def _k4_scales(s):
    """6-bit scales and mins of the 8 sub-blocks from the 12 packed bytes."""
    a, b, c = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = np.concatenate([a & 63, (c & 0x0F) | ((a >> 6) << 4)], axis=1)
    mn = np.concatenate([b & 63, (c >> 4) | ((b >> 6) << 4)], axis=1)
    return sc.astype(F32), mn.astype(F32)


def _k4_codes(qs):
    """4-bit codes: sub-block pair p uses bytes 32p..32p+31, low nibbles first."""
    nb = qs.shape[0]
    q = qs.reshape(nb, 4, 1, 32)
    return np.concatenate([q & 0x0F, q >> 4], axis=2).reshape(nb, 256).astype(np.int32)


def q4_K(raw):
    d, dmin = f16(raw, 0), f16(raw, 2)
    sc, mn = _k4_scales(raw[:, 4:16])
    return per(d * sc, 32) * _k4_codes(raw[:, 16:144]).astype(F32) - per(dmin * mn, 32)


def q5_K(raw):
    d, dmin = f16(raw, 0), f16(raw, 2)
    sc, mn = _k4_scales(raw[:, 4:16])
    codes = _k4_codes(raw[:, 48:176]) | (bit_planes(raw[:, 16:48], 8) << 4)  # bit sb of qh[l]
    return per(d * sc, 32) * codes.astype(F32) - per(dmin * mn, 32)


def q6_K(raw):
    nb = raw.shape[0]
    ql = raw[:, 0:128].reshape(nb, 2, 2, 32)
    qh = raw[:, 128:192].reshape(nb, 2, 1, 32)
    sc = i8(raw, 192, 16).astype(F32)
    d = f16(raw, 208)
    low = np.concatenate([ql & 0x0F, ql >> 4], axis=2)                      # quarters 0,1 low; 2,3 high nibbles
    high = (qh >> (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]) & 3
    codes = (low.astype(np.int32) | (high.astype(np.int32) << 4)).reshape(nb, 256) - 32
    return per(d * sc, 16) * codes.astype(F32)


def iq4_nl(raw):
    return f16(raw, 0) * IQ4NL[nibbles(raw[:, 2:18])]


def iq4_xs(raw):
    nb = raw.shape[0]
    d = f16(raw, 0)
    sh = np.ascontiguousarray(raw[:, 2:4]).view("<u2").astype(np.int32)
    sl = raw[:, 4:8]
    low = np.stack([sl & 0x0F, sl >> 4], axis=2).reshape(nb, 8).astype(np.int32)
    high = (sh >> (2 * np.arange(8))[None, :]) & 3
    dl = d * ((low | (high << 4)) - 32).astype(F32)
    q = raw[:, 8:136].reshape(nb, 8, 16)
    codes = np.concatenate([q & 0x0F, q >> 4], axis=2).reshape(nb, 256)
    return per(dl, 32) * IQ4NL[codes]


# name -> (elements per block, bytes per block, decoder)
TYPES = {
    "q4_0": (32, 18, q4_0), "q4_1": (32, 20, q4_1), "q5_0": (32, 22, q5_0), "q5_1": (32, 24, q5_1),
    "q8_0": (32, 34, q8_0), "q8_1": (32, 36, q8_1), "q2_K": (256, 84, q2_K), "q3_K": (256, 110, q3_K),
    "q4_K": (256, 144, q4_K), "q5_K": (256, 176, q5_K), "q6_K": (256, 210, q6_K), "q8_K": (256, 292, q8_K),
    "iq4_nl": (32, 18, iq4_nl), "iq4_xs": (256, 136, iq4_xs),
}


def dequantize(name, data):
    """f32 values (1-D) of the raw bytes of whole blocks of type name."""
    n, nbytes, fn = TYPES[name]
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size % nbytes:
        raise ValueError(f"{raw.size} bytes are not whole {name} blocks of {nbytes}")
    with np.errstate(over="ignore"):
        out = fn(raw.reshape(-1, nbytes))
    assert out.dtype == F32 and out.shape[1] == n, (name, out.dtype, out.shape)
    return out.reshape(-1)


def main(argv):
    if len(argv) == 2 and argv[1] == "types":
        for k, (n, b, _) in TYPES.items():
            print(k, n, b)
        return 0
    if len(argv) != 5 or argv[1] != "dequant" or argv[2] not in TYPES:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[3], "rb") as f:
        data = f.read()
    out = dequantize(argv[2], data)
    with open(argv[4], "wb") as f:
        f.write(out.astype("<f4").tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
