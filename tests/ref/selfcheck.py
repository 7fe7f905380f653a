#!/usr/bin/python3
"""Self-checks of the references themselves (no sglc needed).

DESIGN
  The golden tests are only as good as tests/ref/torch_ref.py,
  tools/safetensors_np.py and tools/llama2c_to_hf.py, so these checks pin
  them to facts that do not come from our own code:
    - real trained models reproduce their documented greedy outputs
      (TinyStories-656K: ids in ../shared/models/README.md; stories260K after
      conversion: the text in llama2.c's doc/stories260K.md);
    - the safetensors reader reads a file written by the real library
      (TinyStories) and the writer round-trips, rounds to bf16 exactly like
      torch, and rejects truncated files;
    - RoPE parameter functions have the properties their definitions state;
    - prefill in one chunk == token-by-token decode through the KV cache
      (positions, masks, cache) for every tiny model without dynamic RoPE;
    - a sliding window of W with L layers makes position p blind to tokens
      older than p - L*(W-1), and only to those.
  Prints ok/FAIL lines; exit 1 on any failure.
"""
import copy
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import llama2c_to_hf  # noqa: E402
import make_tiny_model  # noqa: E402
import safetensors_np  # noqa: E402
import torch_ref  # noqa: E402

failures = []


def report(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        failures.append(msg)


def check_safetensors(shared):
    path = os.path.join(shared, "models", "TinyStories-656K", "model.safetensors")
    t, meta = safetensors_np.read(path)
    report(meta.get("model.embed_tokens.weight") == "lm_head.weight"
           and t["lm_head.weight"].shape == (2048, 128),
           "reads TinyStories safetensors (real library's file, tie alias in metadata)")
    rng = np.random.RandomState(0)
    x = (rng.standard_normal(4096) * 10.0 ** rng.uniform(-20, 20, 4096)).astype(np.float32)
    x[:4] = [0.0, -0.0, np.inf, -np.inf]
    ours = safetensors_np.f32_to_bf16_bits(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    report(np.array_equal(ours, theirs), "f32 -> bf16 rounding equals torch's (RNE)")
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "a.safetensors")
        src = {"w": x[:12].reshape(3, 4), "i": np.arange(5, dtype=np.int64)}
        safetensors_np.write(p, src, metadata={"k": "v"})
        back, meta = safetensors_np.read(p)
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
        report(np.array_equal(back["w"], src["w"]) and np.array_equal(back["i"], src["i"])
               and meta == {"k": "v"} and n % 8 == 0,
               "writer round-trips f32/i64 + metadata, header padded to 8 bytes")
        safetensors_np.write(p, src, dtype="BF16")
        back, _ = safetensors_np.read(p)
        report(np.array_equal(back["w"], torch.from_numpy(src["w"]).to(torch.bfloat16).float().numpy()),
               "BF16 write/read equals torch bf16 rounding")
        with open(p, "rb") as f:
            data = f.read()
        with open(p, "wb") as f:
            f.write(data[:-3])
        try:
            safetensors_np.read(p)
            report(False, "truncated file rejected")
        except safetensors_np.SafetensorsError:
            report(True, "truncated file rejected")


def cfg_with(**kw):
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 128, "num_hidden_layers": 1,
            "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 8,
            "vocab_size": 8, "rope_theta": 10000.0, "max_position_embeddings": 64}
    base.update(kw)
    return torch_ref.Config(base)


def check_rope():
    d = 16
    default, a0 = torch_ref.rope_parameters(cfg_with())
    want = torch.tensor([10000.0 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float32)
    report(a0 == 1.0 and torch.allclose(default, want, rtol=1e-6), "default inv_freq = theta^(-2i/d)")
    lin, _ = torch_ref.rope_parameters(cfg_with(rope_scaling={"type": "linear", "factor": 4.0}))
    report(torch.allclose(lin, default / 4), "linear: inv_freq / factor (legacy 'type' key)")
    dyn_cfg = cfg_with(rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    d_short, _ = torch_ref.rope_parameters(dyn_cfg, seq_len=40)
    d_long, _ = torch_ref.rope_parameters(dyn_cfg, seq_len=128)
    base2 = 10000.0 * (2.0 * 128 / 64 - 1.0) ** (d / (d - 2))
    want = torch.tensor([base2 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float32)
    report(torch.allclose(d_short, default) and torch.allclose(d_long, want, rtol=1e-5),
           "dynamic: default up to max_position_embeddings, NTK base beyond")
    l3 = cfg_with(rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})
    inv, _ = torch_ref.rope_parameters(l3)
    base, _ = torch_ref.rope_parameters(cfg_with(rope_theta=500000.0))
    wl = 2 * math.pi / base
    hi, lo = wl < 16, wl > 64
    mid = ~hi & ~lo
    ok = torch.allclose(inv[hi], base[hi]) and torch.allclose(inv[lo], base[lo] / 32)
    ok = ok and bool(torch.all((inv[mid] < base[mid]) & (inv[mid] > base[mid] / 32)))
    report(ok and hi.any() and lo.any() and mid.any(),
           "llama3: short wavelengths kept, long ones / factor, middle band in between")
    y = cfg_with(max_position_embeddings=1024, rope_scaling={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256})
    yi, ya = torch_ref.rope_parameters(y)
    report(abs(ya - (0.1 * math.log(4.0) + 1.0)) < 1e-12 and torch.allclose(yi[0], default[0])
           and torch.allclose(yi[-1], default[-1] / 4),
           "yarn: attention factor 0.1 ln(f)+1, fastest dim extrapolated, slowest interpolated")
    y2 = copy.deepcopy(y)
    y2.rope_scaling.update(mscale=1.0, mscale_all_dim=1.0)
    report(torch_ref.rope_parameters(y2)[1] == 1.0, "yarn: mscale == mscale_all_dim gives factor 1")


def check_cache_and_window(cache_dir, shared):
    rng = np.random.RandomState(7)
    prompt = [int(x) for x in rng.randint(3, make_tiny_model.VOCAB, size=40)]
    for name in make_tiny_model.SPECS:
        d, _ = make_tiny_model.build(name, cache_dir, shared)
        m = torch_ref.Model(os.path.join(d, "f32"))
        if m.cfg.rope_scaling and m.cfg.rope_scaling["rope_type"] == "dynamic":
            continue  # HF dynamic RoPE depends on the chunking by definition
        full, _ = m.generate(prompt, 1)
        m.reset()
        steps = np.stack([m.forward([t])[-1].numpy() for t in prompt])
        e = float(np.abs(steps - full).max() / np.abs(full).max())
        report(e < 1e-5, f"{name}: one-chunk prefill == token-by-token decode (rel {e:.2g})")
    d, _ = make_tiny_model.build("mistral-sw", cache_dir, shared)
    m = torch_ref.Model(os.path.join(d, "f32"))
    W, L = m.cfg.windows[0], m.cfg.n_layers
    reach = L * (W - 1)  # p sees back to p - reach through L windowed layers
    a, _ = m.generate(prompt, 1)
    changed = list(prompt)
    changed[0] = 3 if prompt[0] != 3 else 4
    b, _ = m.generate(changed, 1)
    diff = np.abs(a - b).max(axis=1)
    ok = np.all(diff[reach + 1:] == 0) and np.all(diff[: reach + 1] > 0)
    report(bool(ok), f"mistral-sw: token 0 changes logits at positions 0..{reach} only "
                     f"(window {W}, {L} layers)")


def check_real_models(shared, cache_dir):
    m = torch_ref.Model(os.path.join(shared, "models", "TinyStories-656K"))
    _, ids = m.generate([1], 6)
    report(ids == [147, 201, 282, 215, 286, 598],
           f"TinyStories-656K greedy from BOS {ids} (documented 147 201 282 215 286 598)")
    src = os.path.join(shared, "models", "stories260K-llama2c")
    out = os.path.join(cache_dir, "stories260K-hf")
    llama2c_to_hf.convert(os.path.join(src, "stories260K.bin"), out,
                          os.path.join(src, "tok512.model"), os.path.join(src, "tok512.bin"))
    m = torch_ref.Model(out)
    _, ids = m.generate([1], 256)
    text = torch_ref.decode_spm(torch_ref.load_pieces(out), ids).lstrip(" ")
    with open(os.path.join(HERE, "data", "stories260K_greedy.txt")) as f:
        doc = f.read().rstrip("\n")
    report(text == doc, "stories260K converted: 256 greedy tokens decode to llama2.c's documented text")
    with open(os.path.join(out, "tokenizer.json")) as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]
    merges = tj["model"]["merges"]
    ok = len(vocab) == 512 and vocab["<0x0A>"] == 13 and all("".join(mg) in vocab for mg in merges)
    report(ok, f"stories260K tokenizer.json: 512 pieces, byte pieces at 3.., {len(merges)} merges "
               f"all forming vocab pieces")
    check_tokenizer_json(out, doc)


def encode_llama2c(pieces, scores, text):
    """llama2.c run.c encode(): dummy prefix, code points (byte fallback +3),
    then repeatedly merge the adjacent pair whose concatenation has the best
    score (leftmost on ties)."""
    lookup = {p: i for i, p in enumerate(pieces)}
    ids = [lookup["\u2581"]] if text else []
    for ch in text.replace(" ", "\u2581"):
        if ch in lookup:
            ids.append(lookup[ch])
        else:
            ids.extend(b + 3 for b in ch.encode("utf-8"))
    while True:
        best, best_i = None, -1
        for i in range(len(ids) - 1):
            j = lookup.get(pieces[ids[i]] + pieces[ids[i + 1]])
            if j is not None and (best is None or scores[j] > scores[best]):
                best, best_i = j, i
        if best is None:
            return ids
        ids[best_i: best_i + 2] = [best]


def encode_hf_bpe(tj, text):
    """HF BPE on one word (no pre-tokenizer): Prepend+Replace normalizer,
    characters (byte fallback <0xXX>), then merges by rank, leftmost first."""
    vocab = tj["model"]["vocab"]
    rank = {tuple(m): r for r, m in enumerate(tj["model"]["merges"])}
    word = "\u2581" + text.replace(" ", "\u2581")
    syms = []
    for ch in word:
        syms.extend([ch] if ch in vocab else [f"<0x{b:02X}>" for b in ch.encode("utf-8")])
    while True:
        cands = [(rank[(a, b)], i) for i, (a, b) in enumerate(zip(syms, syms[1:])) if (a, b) in rank]
        if not cands:
            return [vocab[x] for x in syms]
        _, i = min(cands)
        syms[i: i + 2] = [syms[i] + syms[i + 1]]


def check_tokenizer_json(out, doc):
    with open(os.path.join(out, "tokenizer.json")) as f:
        tj = json.load(f)
    src = os.path.join(os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")),
                       "models", "stories260K-llama2c", "tok512.bin")
    toks = llama2c_to_hf.read_llama2c_tokenizer(src, 512)
    pieces = [p for p, _, _ in toks]
    scores = [s for _, s, _ in toks]
    texts = [doc, "Hello world!", "naïve café \u2603 ok", "  two  spaces\nnew line"]
    bad = [t for t in texts if encode_hf_bpe(tj, t) != encode_llama2c(pieces, scores, t)]
    report(not bad, "stories260K tokenizer.json (BPE merges by rank) encodes like llama2.c's "
                    f"score-greedy encoder from tok512.bin ({len(texts)} texts)"
                    + (f"; differs on {bad[0][:30]!r}" if bad else ""))


def main():
    shared = os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared"))
    cache = os.path.join(ROOT, "build", "tiny-models")
    os.makedirs(cache, exist_ok=True)
    torch.set_num_threads(1)
    check_safetensors(shared)
    check_rope()
    check_cache_and_window(cache, shared)
    check_real_models(shared, cache)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
