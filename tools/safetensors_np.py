"""Minimal safetensors reader/writer on numpy + json (no `safetensors` package).

DESIGN
  File layout (https://github.com/huggingface/safetensors, "Format"):
    u64 little-endian N | N bytes of UTF-8 JSON header | data bytes
  Header: {"__metadata__": {str: str} (optional),
           name: {"dtype": "F32"|"BF16"|..., "shape": [..],
                  "data_offsets": [begin, end]}}   offsets relative to the
  first data byte; tensors are C-contiguous little-endian.  The writer pads
  the header with spaces to a multiple of 8 bytes (as the reference library
  does) so data stays aligned, and lays tensors out in name order.

  BF16 has no numpy dtype: it is read as uint16 and handed out either raw
  (read_raw) or widened exactly to float32 (bits << 16, read()).  Writing
  float32 as BF16 rounds to nearest-even through torch when it is present,
  else through the same bit trick in numpy.

Used by tests/ref (the PyTorch reference), tests/ref/make_tiny_model.py and
tools/llama2c_to_hf.py.  Standalone: `python3 safetensors_np.py FILE` lists
the tensors.
"""
import json
import os
import struct
import sys

import numpy as np

# safetensors dtype tag -> (numpy dtype, bytes per element)
_NP = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_, "BF16": np.uint16,
}
_TAG = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32",
        np.dtype(np.float16): "F16", np.dtype(np.int64): "I64",
        np.dtype(np.int32): "I32", np.dtype(np.int16): "I16",
        np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8",
        np.dtype(np.bool_): "BOOL"}


class SafetensorsError(ValueError):
    pass


def read_header(path):
    """Returns (header dict without __metadata__, metadata dict, data offset)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError(f"{path}: shorter than 8 bytes")
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8 or n > 100 * 1024 * 1024:
            raise SafetensorsError(f"{path}: header length {n} exceeds file")
        hdr = json.loads(f.read(n).decode("utf-8"))
    if not isinstance(hdr, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    meta = hdr.pop("__metadata__", None) or {}
    data_len = size - 8 - n
    for name, t in hdr.items():
        if t.get("dtype") not in _NP:
            raise SafetensorsError(f"{path}: {name}: unsupported dtype {t.get('dtype')}")
        b, e = t["data_offsets"]
        count = int(np.prod(t["shape"])) if t["shape"] else 1
        want = count * np.dtype(_NP[t["dtype"]]).itemsize
        if not (0 <= b <= e <= data_len) or e - b != want:
            raise SafetensorsError(f"{path}: {name}: bad data_offsets {b},{e} "
                                   f"for shape {t['shape']} {t['dtype']}")
    return hdr, meta, 8 + n


def read_raw(path):
    """Returns ({name: (dtype tag, numpy array)}, metadata); BF16 as uint16."""
    hdr, meta, base = read_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, t in hdr.items():
        b, e = t["data_offsets"]
        arr = np.frombuffer(mm[base + b: base + e].tobytes(), dtype=_NP[t["dtype"]])
        out[name] = (t["dtype"], arr.reshape(t["shape"]))
    return out, meta


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bf16 bit pattern (uint16); NaN kept NaN."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(x)
    rounded = rounded.astype(np.uint16)
    rounded[nan] = 0x7FC0
    return rounded


def read(path):
    """Returns ({name: float32/int numpy array}, metadata); BF16/F16 widened to f32."""
    raw, meta = read_raw(path)
    out = {}
    for name, (tag, arr) in raw.items():
        if tag == "BF16":
            out[name] = bf16_bits_to_f32(arr)
        elif tag == "F16":
            out[name] = arr.astype(np.float32)
        else:
            out[name] = arr
    return out, meta


def write(path, tensors, dtype=None, metadata=None):
    """Writes {name: numpy array} to path.

    dtype: None keeps each array's dtype; "F32" or "BF16" converts every
    floating array (BF16 by round-to-nearest-even).  A (tag, uint16 array)
    tuple value is written as-is (pre-rounded BF16 bits)."""
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        v = tensors[name]
        if isinstance(v, tuple):
            tag, arr = v
        else:
            arr = np.asarray(v)
            if dtype == "BF16" and arr.dtype.kind == "f":
                tag, arr = "BF16", f32_to_bf16_bits(arr.astype(np.float32))
            elif dtype == "F32" and arr.dtype.kind == "f":
                tag, arr = "F32", arr.astype(np.float32)
            else:
                tag = _TAG[arr.dtype]
        data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for d in blobs:
            f.write(d)
    os.replace(tmp, path)


def main():
    for p in sys.argv[1:]:
        hdr, meta, _ = read_header(p)
        print(f"{p}: {len(hdr)} tensors, metadata {meta}")
        for name in sorted(hdr):
            t = hdr[name]
            print(f"  {name:60s} {t['dtype']:5s} {t['shape']}")


if __name__ == "__main__":
    main()
