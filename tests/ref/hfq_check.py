#!/usr/bin/python3
"""sglc on tiny Hugging Face quantized checkpoints against the PyTorch
reference on the dequantized weights (folders from make_hfq_models.py).

    hfq_check.py SGLC_BIN DIR

Per format: 64-token prompt logits of `sglc generate` on DIR/NAME/q (with
--quantization for the at-load cases) against torch_ref on DIR/NAME/ref,
max|d| / max|ref| within the format's bound (BOUNDS, justified in
docs/notes/hfq.md); each bound is also checked to be far below the
distance between the quantized model and the unquantized f32 one, so a
loader that ignored the quantization fails.  Then the bad checkpoints and
flags must fail with their message.  Block-quantized formats are also
compared with an emulation of what sglc computes (the block weights of
NAME/blk with their f16 scales, activations quantized to int8 per 32 as
the kernels do), within EMUL.  Exit 1 on any failure.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_ref  # noqa: E402

# format -> (extra sglc args, bound, what sglc stores)
EXACT = 1e-4    # dequantized f32 weights, f32 compute: the f32 reference tolerance
BLOCK = 3e-2    # int8 activations per 32 (Q8_0 / Q8_1) + f16 scales: 1.3x the largest measured (notes)
BF16 = 2e-2     # bf16 model (torch_dtype bfloat16, --dtype auto) against the reference in bf16: golden.py's BF16_TOL
FORMATS = {
    "awq": ([], BLOCK, "Q4_1"),
    "gptq4": ([], BLOCK, "Q4_0"),
    "gptq4-asym": ([], BLOCK, "Q4_1"),
    "gptq4-act": ([], BLOCK, "Q4_0 over the columns sorted by group (act-order, x gathered)"),
    "gptq8": ([], BLOCK, "Q8_0"),
    "ct-int8": ([], BLOCK, "Q8_0"),
    "ct-int8-small": ([], EXACT, "f32 (scales below f16's range: dequantized)"),
    "ct-w4a16": ([], BLOCK, "Q4_0"),
    "w8a8-int8": ([], BLOCK, "Q8_0"),
    "fp8-block": ([], EXACT, "f8_e4m3_b128 (fp8 kept, 128x128 block scales, weight-only f32)"),
    "fp8-block-bf16": ([], BF16, "f8_e4m3_b128 (fp8 kept, weight-only; bf16 model)"),
    "fp8-tensor": ([], EXACT, "f8_e4m3_b128 (fp8 kept, per-tensor scale, weight-only f32)"),
    "gptq4-act-mixtral": ([], BLOCK, "Q4_0 act-order MoE experts (router kept f32)"),
    "w8a8-fp8": ([], EXACT, "f8_e4m3_b128 (fp8 kept, per-channel scales, weight-only f32)"),
    "atload-int8": (["--quantization", "w8a8_int8"], BLOCK, "Q8_0 at load"),
    "atload-fp8": (["--quantization", "fp8"], EXACT, "f8_e4m3_b128 at load (per-row scales)"),
}

# formats sglc keeps as fp8 bytes (KERN_TYPE_F8_B128, kernels/quant_fp8.h)
# (and, for the byte bound and the kernel paths, gptq4-act's permuted blocks):
# the load log counts them as block-quantized, their bytes must be <= 1.1x
# the checkpoint's (codes + scales; 1 byte per weight for the at-load
# case), and each kernel path (SGLC_KERNELS=scalar / avx2) is run against
# the same reference and bound
FP8_KEPT = {"fp8-block", "fp8-block-bf16", "fp8-tensor", "w8a8-fp8", "atload-fp8"}
MEM_BOUND = 1.1


def cpu_has_avx2():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return all(f in flags.split() for f in ("avx2", "fma", "f16c"))

# bad checkpoint / flag -> (folder, extra args, message substring)
BAD = [
    ("missing scales", "bad-awq-noscales", [], "model.layers.1.mlp.down_proj.scales"),
    ("wrong qweight shape", "bad-gptq-shape", [], "k_proj.qweight"),
    ("3-bit gptq", "bad-gptq-3bit", [], "3-bit weights are not supported"),
    ("8-bit awq", "bad-awq-bits8", [], "8-bit weights are not supported"),
    ("unsupported method", "bad-unknown-method", [], "'bitsandbytes' is not supported"),
    ("flag/checkpoint mismatch", "gptq4/q", ["--quantization", "awq"],
     "does not match the quantization method specified in the `quantization` argument (awq)"),
    ("refused method", "gptq4/q", ["--quantization", "marlin"], "--quantization marlin is not supported"),
    ("awq flag on plain model", "atload-int8/q", ["--quantization", "awq"], "has no quantization_config"),
]

MOE_BLOCK = 6.5e-2  # MoE block formats, per position (see below)
MOE_FLIPS = 2  # MoE block formats: positions allowed over the bound (top-k flips; see below)
EMUL = BLOCK   # all positions against the emulation: one activation rounding flip carries ~5e-3 (see below)

failures = []


class ActQ8:
    """A weight W whose `x @ W.T` quantizes x as sglc's int8 kernels do
    (kernels/quant_dot.c): per 32 values d = amax / 127, q = round-half-even
    (x * 127 / amax) clamped to +-127, d stored as f16; then f32 x_q @ W^T.
    perm (act-order GPTQ): sglc stores the columns sorted by group and
    quantizes x[perm] per 32, so the groups of 32 are those of x[perm]."""
    def __init__(self, w, perm=None):
        self.w = w if perm is None else w[:, perm]
        self.perm = perm

    @property
    def T(self):
        return self

    def __rmatmul__(self, x):
        if self.perm is not None:
            x = x[..., self.perm]
        sh = x.shape
        xb = x.reshape(-1, sh[-1] // 32, 32).to(torch.float32)
        amax = xb.abs().amax(dim=-1, keepdim=True)
        idv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
        q = torch.clamp(torch.round(xb * idv), -127, 127)
        d = (amax / 127.0).to(torch.float16).to(torch.float32)
        return (q * d).reshape(sh) @ self.w.T


def load_linear(d):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
    import safetensors_np
    t = safetensors_np.read(os.path.join(d, "model.safetensors"))
    t = t[0] if isinstance(t, tuple) else t
    return {k: np.asarray(v, dtype=np.float64) for k, v in t.items() if k.endswith("_proj.weight")}


PROJ = {"wq": "self_attn.q_proj", "wk": "self_attn.k_proj", "wv": "self_attn.v_proj", "wo": "self_attn.o_proj",
        "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def act_perms(qdir):
    """(layer, key) -> the column order sglc stores an act-order weight in:
    g_idx sorted stably (wsource_hfq.c's act_order_perm)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
    import safetensors_np
    t = safetensors_np.read(os.path.join(qdir, "model.safetensors"))
    t = t[0] if isinstance(t, tuple) else t
    out = {}
    for name, v in t.items():
        v = v[1] if isinstance(v, tuple) else v
        if not name.endswith(".g_idx"):
            continue
        perm = np.argsort(np.asarray(v).astype(np.int64), kind="stable")
        if np.any(perm != np.arange(perm.size)):
            parts = name.split(".")
            mod = ".".join(parts[3:-1])
            for k, pn in PROJ.items():
                if pn == mod:
                    out[(int(parts[2]), k)] = torch.from_numpy(perm)
    return out


def emulated(d, perms=None):
    m = torch_ref.Model(d, "float32")
    for i, L in enumerate(m.layers):
        for k in ("wq", "wk", "wv", "wo", "gate", "up", "down"):
            L[k] = ActQ8(L[k], (perms or {}).get((i, k)))
    return m


def report(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        failures.append(msg)


def run(sglc, d, ids, extra, dtype="float32", kernels=None):
    env = dict(os.environ)
    if kernels:
        env["SGLC_KERNELS"] = kernels
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "logits.f32")
        cmd = [sglc, "generate", "--model-path", d, "--input-ids", ",".join(map(str, ids)),
               "--max-new-tokens", "1", "--temperature", "0", "--json", "--ignore-eos",
               "--dtype", dtype, "--dump-logits", path] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        lg = np.fromfile(path, dtype="<f4") if p.returncode == 0 and os.path.exists(path) else None
        return p, lg


def rel(a, ref):
    return float(np.max(np.abs(a.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))


def main(argv):
    sglc, root = argv[1], argv[2]
    ids = [int(x) for x in np.random.RandomState(11).randint(3, 512, 64)]
    base = torch_ref.Model(os.path.join(root, "atload-int8", "q"), "float32")
    base_logits, _ = base.generate(ids, 1, ignore_eos=True)
    for name, (extra, tol, stores) in FORMATS.items():
        rdt = "bfloat16" if tol == BF16 else "float32"
        ref_logits, _ = torch_ref.Model(os.path.join(root, name, "ref"), rdt).generate(ids, 1, ignore_eos=True)
        ref_logits = np.asarray(ref_logits, dtype=np.float64)
        p, lg = run(sglc, os.path.join(root, name, "q"), ids, extra, "auto" if tol == BF16 else "float32")
        if lg is None or lg.size != ref_logits.size:
            report(False, f"{name}: sglc failed (rc {p.returncode}): {p.stderr.strip()[-400:]}")
            continue
        nproj = 2 * (4 + 8 * 3) if "mixtral" in name else 14  # 2 layers x (attention + MLP / 8 experts)
        nblk = nproj if name in FP8_KEPT else 0 if tol in (EXACT, BF16) else nproj
        kept = f"{nblk} weight(s) kept block-quantized, {nproj - nblk} dequantized to {'bfloat16' if tol == BF16 else 'float32'}"
        report(kept in p.stderr, f"{name}: load log says '{kept}'")
        e = rel(lg.reshape(ref_logits.shape), ref_logits)
        if name in FP8_KEPT or name == "gptq4-act":
            m = re.search(r"block-quantized: (\d+) bytes from (\d+) bytes of checkpoint tensors", p.stderr)
            nw = sum(v.size for v in load_linear(os.path.join(root, name, "ref")).values())
            ck = nw if name.startswith("atload") else int(m.group(2)) if m else 0
            report(m is not None and int(m.group(1)) <= MEM_BOUND * ck,
                   f"{name}: kept {'fp8' if name in FP8_KEPT else 'block'} weights {m.group(1) if m else '?'} bytes <= {MEM_BOUND} x the checkpoint's "
                   f"{ck} ({nw} weights)")
            for kn in ("scalar", "avx2"):
                if kn == "avx2" and not cpu_has_avx2():
                    print(f"skip {name}: SGLC_KERNELS=avx2 (no AVX2 + FMA + F16C here)")
                    continue
                pk, lk = run(sglc, os.path.join(root, name, "q"), ids, extra, "auto" if tol == BF16 else "float32", kn)
                ek = rel(lk.reshape(ref_logits.shape), ref_logits) if lk is not None and lk.size == ref_logits.size else 1e30
                report(ek <= tol and kept in pk.stderr,
                       f"{name}: SGLC_KERNELS={kn}: prompt logits max|d|/max|ref| = {ek:.3g} (bound {tol:g})")
        orig = os.path.join(root, name, "orig")
        base_l = (torch_ref.Model(orig, "float32").generate(ids, 1, ignore_eos=True)[0]
                  if os.path.isdir(orig) else base_logits)
        sep = rel(np.asarray(base_l, dtype=np.float64), ref_logits)
        if "mixtral" in name:
            # MoE with int8 activations: a top-k choice near a tie can flip on
            # the activation rounding, which moves that one position by O(1)
            # (measured: 1 of 64, 0.82); the others sit at 1-5e-2 (int8
            # activations through two MLPs per token: median 2.0e-2, largest
            # 4.9e-2).  Held to: median within BLOCK, at most MOE_FLIPS
            # positions over MOE_BLOCK (1.3x the largest non-flip position).
            ref2 = ref_logits.reshape(len(ids), -1)
            per = np.abs(lg.reshape(ref2.shape) - ref2).max(axis=1) / np.abs(ref2).max()
            over = int(np.sum(per > MOE_BLOCK))
            report(over <= MOE_FLIPS and float(np.median(per)) <= tol,
                   f"{name} ({stores}): per-position max|d|/max|ref| median {np.median(per):.3g} (bound {tol:g}), "
                   f"{over} of {len(per)} positions over {MOE_BLOCK:g} (at most {MOE_FLIPS}: routing flips)")
        else:
            report(e <= tol, f"{name} ({stores}): prompt logits max|d|/max|ref| = {e:.3g} (bound {tol:g})")
        if tol != BLOCK:
            report(sep > 4 * tol, f"{name}: quantized vs unquantized reference differ by {sep:.3g} "
                   "(> 4x the bound: the test can fail)")
            continue
        # The same arithmetic as sglc: the block weights (f16 scales) of
        # NAME/blk and int8 activations.  Before the first activation code
        # that rounds the other way (float summation order) the two agree to
        # f32 rounding; one flip moves later positions by ~5e-3 (attention
        # carries it), so position 0 is held to 1e-5 and the rest to EMUL.
        if "mixtral" in name:
            # MoE: no expert emulation (int8 activation rounding can flip a
            # top-k choice); the exact-reference bound above is the check
            report(sep > 4 * tol, f"{name}: quantized vs unquantized reference differ by {sep:.3g} "
                   "(> 4x the bound: the test can fail)")
            continue
        perms = act_perms(os.path.join(root, name, "q")) if "act" in name else None
        if "act" in name:
            report(len(perms) == 14, f"{name}: {len(perms)} act-order projections emulated with their permutation")
        emu = np.asarray(emulated(os.path.join(root, name, "blk"), perms).generate(ids, 1, ignore_eos=True)[0],
                         dtype=np.float64)
        g = lg.reshape(emu.shape)
        scale = np.abs(emu).max()
        per = np.abs(g - emu).max(axis=1) / scale
        same = int(np.argmax(per > 1e-5)) if np.any(per > 1e-5) else len(per)
        report(per[0] <= 1e-5 and per.max() <= EMUL,
               f"{name}: against the emulated int8-activation reference: position 0 {per[0]:.2g} (bound 1e-05), "
               f"all {per.max():.3g} (bound {EMUL:g}), first {same} of {len(per)} positions within 1e-05")
        emu_base = np.asarray(emulated(os.path.join(root, "atload-int8", "q")).generate(ids[:1], 1, ignore_eos=True)[0],
                              dtype=np.float64)
        sep0 = float(np.abs(emu_base[0] - emu[0]).max() / scale)
        report(sep0 > 100 * 1e-5, f"{name}: position 0 of the unquantized model is {sep0:.3g} away (> 1e-3: the test can fail)")
        blk = np.asarray(torch_ref.Model(os.path.join(root, name, "blk"), "float32").generate(ids, 1, ignore_eos=True)[0],
                         dtype=np.float64)
        wb, wr = load_linear(os.path.join(root, name, "blk")), load_linear(os.path.join(root, name, "ref"))
        werr = max(float(np.abs(wb[k] - wr[k]).max() / np.abs(wr[k]).max()) for k in wr)
        print(f"     {name}: f16 block scales: weights max|d|/max|w| {werr:.3g} (worst projection); "
              f"logits (f32 activations) {rel(blk, ref_logits):.3g}", flush=True)
    # dummy weights (bench-one-batch --load-format dummy) quantized at load:
    # the same at-load path, fp8 kept as bytes
    p, lg = run(sglc, os.path.join(root, "atload-fp8", "q"), ids[:4], ["--load-format", "dummy", "--quantization", "fp8"])
    report(p.returncode == 0 and lg is not None and "14 weight(s) kept block-quantized" in p.stderr,
           f"dummy weights --quantization fp8: rc {p.returncode}, fp8 kept: {'14 weight(s) kept' in p.stderr}")
    for what, folder, extra, msg in BAD:
        p, _ = run(sglc, os.path.join(root, folder), ids[:4], extra)
        out = p.stdout + p.stderr
        report(p.returncode != 0 and msg in out,
               f"{what}: rc {p.returncode}, message {'has' if msg in out else 'lacks'} {msg!r}"
               + ("" if msg in out else f": {out.strip()[-300:]}"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
