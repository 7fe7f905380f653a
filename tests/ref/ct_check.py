#!/usr/bin/python3
"""Checks a compressed-tensors folder written by `sglc quantize --type
W8A8 | W4A16` against its source folder, independently of sglc's C code.

    ct_check.py SGLC SRC OUT TYPE GROUP WORK [--logits] [--moe]

DESIGN
  1. Reader (numpy only, written from compressed-tensors' description:
     pack_to_int32 / calculate_qparams / _quantize): config.json is the
     source config plus a quantization_config with the fields RedHatAI's
     *-quantized.w8a8 / .w4a16 checkpoints carry; every Linear weight of
     the source (2-D "X.weight", not an embedding, lm_head or MoE router)
     is recomputed here by round-to-nearest: s = amax / 127.5 (int8) or
     amax / 7.5 (int4) per output channel / per group in float32, rounded
     to the weight's dtype (bf16 round-to-nearest-even, f16, f32), 0 ->
     that dtype's eps; code = rint(clip(x / s, qmin, qmax)).  The written
     codes (int8, or unpacked from the int32 words: code j of a word at
     bits 4j, stored + 8) and scales must equal these bit for bit, and
     weight_shape the source shape; W4A16 layers whose input is not whole
     groups must be copied unchanged and named in ignore; routers must be
     copied and matched by an ignore pattern; every other tensor must be
     byte-identical, and no other tensor written; the tokenizer files
     identical.  Writes WORK/deq (the dequantized weights q * s as f32,
     the source config) and WORK/blk (q * f16(s): the block weights sglc
     keeps, Q8_0 / Q4_0 with an f16 d).
  2. --logits: `sglc generate --dump-logits` on OUT (64-token prompt)
     against torch_ref on WORK/deq within 3e-2 of max|ref| (hfq.md's bound
     for block-quantized formats: sglc's int8 activations per 32), against
     the emulation of sglc's arithmetic (WORK/blk weights, activations
     quantized per 32 as hfq_check.ActQ8) at position 0 within 1e-5, and
     sglc on the source folder within 0.15 max|logit| per position (the
     GGUF Q8_0 bound of gguf.md; printed, with the distance of the
     quantized reference from the unquantized one so the check can fail).
     --moe: the per-position comparison is held to the median (top-k
     routing flips, as hfq_check's MoE rows); no emulation.
Exit 1 on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import safetensors_np  # noqa: E402

failures = []
EPS = {"F32": np.float32(2.0 ** -23), "BF16": np.float32(2.0 ** -7), "F16": np.float32(2.0 ** -10)}
TOK_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")
BLOCK = 3e-2
ROUTERS = ("mlp.gate", "block_sparse_moe.gate", "shared_expert_gate", "router")


def report(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        failures.append(msg)


def read_folder(d):
    """{name: (tag, array)} over model.safetensors or the index's shards, {name: file}"""
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out, where = {}, {}
    for f in files:
        raw, _ = safetensors_np.read_raw(os.path.join(d, f))
        for k, v in raw.items():
            out[k] = v
            where[k] = f
    return out, where, files


def to_f32(tag, a):
    if tag == "BF16":
        return safetensors_np.bf16_bits_to_f32(a)
    return a.astype(np.float32)


def round_to(tag, s):
    s = s.astype(np.float32)
    if tag == "BF16":
        return safetensors_np.bf16_bits_to_f32(safetensors_np.f32_to_bf16_bits(s))
    if tag == "F16":
        return s.astype(np.float16).astype(np.float32)
    return s


def scale_bits(tag, s):
    if tag == "BF16":
        return safetensors_np.f32_to_bf16_bits(s)
    if tag == "F16":
        return s.astype(np.float16)
    return s.astype(np.float32)


def is_linear(name, tag, a):
    if a.ndim != 2 or not name.endswith(".weight") or tag not in ("F32", "F16", "BF16"):
        return False
    base = name[:-len(".weight")]
    parts = base.split(".")
    if any("embed" in p for p in parts) or parts[-1] in ("wte", "wpe", "lm_head"):
        return False
    return True


def is_router(base):
    return any(base == r or base.endswith("." + r) for r in ROUTERS)


def rtn(w, tag, bits, g):
    """compressed-tensors' symmetric round-to-nearest: codes (out, in) int, scales (out, ng) f32 as stored"""
    out, inn = w.shape
    half, lo, hi = (np.float32(127.5), -128, 127) if bits == 8 else (np.float32(7.5), -8, 7)
    g = inn if g <= 0 else g
    wg = w.reshape(out, inn // g, g)
    amax = np.abs(wg).max(axis=2).astype(np.float32)
    s = round_to(tag, amax / half)
    s = np.where(s == 0, EPS[tag], s).astype(np.float32)
    v = (wg / s[:, :, None]).astype(np.float32)
    q = np.rint(np.clip(v, lo, hi)).astype(np.int64)
    return q.reshape(out, inn), s


def unpack4(words, inn):
    w = words.view(np.uint32)
    out = np.zeros((w.shape[0], w.shape[1] * 8), dtype=np.int64)
    for j in range(8):
        out[:, j::8] = (w >> np.uint32(4 * j)) & np.uint32(15)
    return out[:, :inn] - 8


def ignored(ign, base):
    for p in ign:
        if p.startswith("re:"):
            import re
            if re.fullmatch(p[3:], base):
                return True
        elif p == base or base.endswith("." + p):
            return True
    return False


def check_reader(src, out, typ, group, work):
    w8 = typ == "W8A8"
    bits = 8 if w8 else 4
    g = -1 if w8 else group
    scfg = json.load(open(os.path.join(src, "config.json")))
    ocfg = json.load(open(os.path.join(out, "config.json")))
    qc = ocfg.pop("quantization_config", None)
    report(ocfg == scfg, "config.json: every source key unchanged")
    report(isinstance(qc, dict), "config.json has a quantization_config")
    if not isinstance(qc, dict):
        return None
    grp = qc.get("config_groups", {}).get("group_0", {})
    wts, act = grp.get("weights") or {}, grp.get("input_activations")
    want_w = {"num_bits": bits, "type": "int", "symmetric": True, "dynamic": False,
              "strategy": "channel" if g <= 0 else "group", "group_size": None if g <= 0 else g}
    want_a = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True} if w8 else None
    okw = all(wts.get(k) == v for k, v in want_w.items())
    oka = act is None if not w8 else isinstance(act, dict) and all(act.get(k) == v for k, v in want_a.items())
    report(qc.get("quant_method") == "compressed-tensors" and
           qc.get("format") == ("int-quantized" if w8 else "pack-quantized") and
           grp.get("targets") == ["Linear"] and okw and oka and "lm_head" in qc.get("ignore", []) and
           qc.get("quantization_status") == "compressed",
           f"quantization_config: compressed-tensors {qc.get('format')}, weights {wts.get('num_bits')}-bit "
           f"{wts.get('strategy')} group_size {wts.get('group_size')}, input_activations "
           f"{'none' if act is None else act.get('strategy')}, ignore {qc.get('ignore')}")
    ign = qc.get("ignore", [])
    S, _, _ = read_folder(src)
    O, where, files = read_folder(out)
    expect = set()
    nq = nkeep = nrouter = ncopy = nblk = 0
    bad = []
    deq, blk, qset = {}, {}, set()
    for name, (tag, a) in S.items():
        base = name[:-len(".weight")] if name.endswith(".weight") else name
        if is_linear(name, tag, a) and is_router(base):
            nrouter += 1
            expect.add(name)
            if not ignored(ign, base):
                bad.append(f"router {base} not matched by ignore")
            if name not in O or O[name][0] != tag or not np.array_equal(O[name][1].view(np.uint8), a.view(np.uint8)):
                bad.append(f"router {name}: not copied byte for byte")
            deq[name] = blk[name] = to_f32(tag, a)
        elif is_linear(name, tag, a) and not (g > 0 and a.shape[1] % g):
            wf = to_f32(tag, a)
            q, s = rtn(wf, tag, bits, g)
            sn = base + ".weight_scale"
            expect.add(sn)
            ns = s.shape[1]
            if sn not in O or O[sn][0] != tag or list(O[sn][1].shape) != [a.shape[0], ns]:
                bad.append(f"{sn}: {O.get(sn, ('missing',))[0]} {list(O[sn][1].shape) if sn in O else ''}")
                continue
            if not np.array_equal(O[sn][1].view(np.uint8), np.ascontiguousarray(scale_bits(tag, s)).view(np.uint8)):
                bad.append(f"{sn}: scales differ from numpy's")
                continue
            if w8:
                expect.add(name)
                if name not in O or O[name][0] != "I8" or O[name][1].shape != a.shape:
                    bad.append(f"{name}: not I8 {list(a.shape)}")
                    continue
                qw = O[name][1].astype(np.int64)
            else:
                pn, shn = base + ".weight_packed", base + ".weight_shape"
                expect.update((pn, shn))
                if (pn not in O or O[pn][0] != "I32" or list(O[pn][1].shape) != [a.shape[0], -(-a.shape[1] // 8)] or
                        shn not in O or O[shn][0] != "I64" or list(O[shn][1]) != list(a.shape)):
                    bad.append(f"{pn} / {shn}: wrong dtype or shape")
                    continue
                qw = unpack4(O[pn][1], a.shape[1])
            nd = int(np.sum(qw != q))
            if nd:
                bad.append(f"{name}: {nd} of {q.size} codes differ from numpy's round-to-nearest")
                continue
            sg = np.repeat(s, a.shape[1] // ns, axis=1)
            deq[name] = (qw * sg).astype(np.float32)
            blk[name] = (qw * np.repeat(s.astype(np.float16).astype(np.float32), a.shape[1] // ns, axis=1)).astype(np.float32)
            qset.add(base)
            nq += 1
            # sglc keeps Q8_0 / Q4_0 blocks when the groups are whole blocks of 32 (hfq.md), else dequantizes
            nblk += a.shape[1] % 32 == 0 and (g <= 0 or g % 32 == 0)
        else:
            expect.add(name)
            kept_lin = is_linear(name, tag, a)
            if name not in O or O[name][0] != tag or not np.array_equal(O[name][1].view(np.uint8), a.view(np.uint8)):
                bad.append(f"{name}: not copied byte for byte")
                continue
            if kept_lin:
                nkeep += 1
                if not ignored(ign, base):
                    bad.append(f"{base}: kept unquantized but not in ignore")
            else:
                ncopy += 1
            deq[name] = to_f32(tag, a)
            blk[name] = deq[name]
    extra = sorted(set(O) - expect)
    report(not bad and not extra, f"tensors: {nq} Linear weights recomputed by numpy RTN with identical codes and "
           f"scales, {nkeep} kept (ignore), {nrouter} routers, {ncopy} copied byte for byte"
           + (f"; problems: {bad[:4]}" if bad else "") + (f"; unexpected: {extra[:4]}" if extra else ""))
    for f in TOK_FILES:
        if os.path.exists(os.path.join(src, f)):
            same = os.path.exists(os.path.join(out, f)) and open(os.path.join(src, f), "rb").read() == open(os.path.join(out, f), "rb").read()
            report(same, f"{f} copied")
    for sub, t in (("deq", deq), ("blk", blk)):
        d = os.path.join(work, sub)
        os.makedirs(d, exist_ok=True)
        c = dict(scfg)
        c["torch_dtype"] = "float32"
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
        safetensors_np.write(os.path.join(d, "model.safetensors"), t, metadata={"format": "pt"})
    return {"nq": nq, "nblk": nblk, "nkeep": nkeep, "files": files, "quantized": qset}


def run_sglc(sglc, d, ids):
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "logits.f32")
        cmd = [sglc, "generate", "--model-path", d, "--input-ids", ",".join(map(str, ids)), "--max-new-tokens", "1",
               "--temperature", "0", "--json", "--ignore-eos", "--dtype", "float32", "--dump-logits", path]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        lg = np.fromfile(path, dtype="<f4").astype(np.float64) if p.returncode == 0 and os.path.exists(path) else None
        return p, lg


def check_logits(sglc, src, out, work, info, moe, src_bound):
    import torch_ref
    import hfq_check
    vocab = json.load(open(os.path.join(src, "config.json")))["vocab_size"]
    ids = [int(x) for x in np.random.RandomState(11).randint(3, vocab, 64)]
    p, lg = run_sglc(sglc, out, ids)
    if lg is None:
        report(False, f"sglc generate on {out}: rc {p.returncode}: {p.stderr.strip()[-400:]}")
        return
    kept = f"{info['nblk']} weight(s) kept block-quantized, {info['nq'] - info['nblk']} dequantized"
    report(kept in p.stderr, f"load log says '{kept}'")
    ref = np.asarray(torch_ref.Model(os.path.join(work, "deq"), "float32").generate(ids, 1, ignore_eos=True)[0],
                     dtype=np.float64)
    lg = lg.reshape(ref.shape)
    scale = np.abs(ref).max()
    per = np.abs(lg - ref).max(axis=1) / scale
    e = float(per.max())
    if moe:
        report(float(np.median(per)) <= BLOCK, f"MoE: against torch_ref on the dequantized weights: per-position "
               f"median {np.median(per):.3g} (bound {BLOCK:g}), max {e:.3g} (top-k flips not bounded)")
    else:
        report(e <= BLOCK, f"against torch_ref on the dequantized weights: max|d|/max|ref| {e:.3g} (bound {BLOCK:g})")
    base = np.asarray(torch_ref.Model(src, "float32").generate(ids, 1, ignore_eos=True)[0], dtype=np.float64)
    sep = float(np.abs(base - ref).max() / scale)
    print(f"     the unquantized reference is {sep:.3g} from the dequantized one", flush=True)
    if not moe:
        m = torch_ref.Model(os.path.join(work, "blk"), "float32")
        for i, L in enumerate(m.layers):
            for k, pn in hfq_check.PROJ.items():
                if f"model.layers.{i}.{pn}" in info["quantized"]:
                    L[k] = hfq_check.ActQ8(L[k])
        emu = np.asarray(m.generate(ids, 1, ignore_eos=True)[0], dtype=np.float64)
        pe = np.abs(lg - emu).max(axis=1) / np.abs(emu).max()
        same = int(np.argmax(pe > 1e-5)) if np.any(pe > 1e-5) else len(pe)
        report(pe[0] <= 1e-5 and pe.max() <= BLOCK,
               f"against the emulation of sglc's int8-activation arithmetic: position 0 {pe[0]:.2g} (bound 1e-05), "
               f"all {pe.max():.3g} (bound {BLOCK:g}), first {same} of {len(pe)} positions within 1e-05")
        sep0 = float(np.abs(base[0] - emu[0]).max() / np.abs(emu).max())
        report(sep0 > 1e-3, f"position 0 of the unquantized model is {sep0:.3g} away (> 1e-3: the check can fail)")
    p2, ls = run_sglc(sglc, src, ids)
    if ls is None:
        report(False, f"sglc generate on {src}: rc {p2.returncode}")
        return
    ls = ls.reshape(ref.shape)
    pp = np.abs(lg - ls).max(axis=1) / np.abs(ls).max()
    stat = float(np.median(pp)) if moe else float(pp.max())
    report(stat <= src_bound, f"against sglc on the source folder: per-position max|d|/max|logit| "
           f"{'median' if moe else 'max'} {stat:.3g} (bound {src_bound:g}); greedy ids equal at "
           f"{int(np.sum(lg.argmax(axis=1) == ls.argmax(axis=1)))} of {len(pp)} positions")


def main(argv):
    sglc, src, out, typ, group, work = argv[1:7]
    flags = set(a for a in argv[7:] if not a.startswith("--src-bound="))
    src_bound = float(next((a.split("=", 1)[1] for a in argv[7:] if a.startswith("--src-bound=")), "0.15"))
    info = check_reader(src, out, typ, int(group), work)
    if info and "--logits" in flags:
        check_logits(sglc, src, out, work, info, "--moe" in flags, src_bound)
    if info and "--shards" in flags:
        report(len(info["files"]) > 1, f"output split in {len(info['files'])} shards with an index")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
