#!/usr/bin/python3
"""Phi3ForCausalLM (Phi-3, Phi-3.5, Phi-4-mini): tiny random-weight models,
an independent PyTorch reference, and the golden comparison with sglc.

DESIGN
  Reference written from the architecture as transformers' modeling_phi3.py
  and modeling_rope_utils.py define it (no transformers package here):
    - self_attn.qkv_proj (NH*D + 2*KV*D, H): q rows, then k, then v;
    - mlp.gate_up_proj (2I, H): gate rows then up rows, down(up * silu(gate));
    - RMSNorm, no biases, lm_head (tied in Phi-4-mini);
    - RoPE on the first rot = int(head_dim * partial_rotary_factor) dims of
      each head (rotate_half inside them), the rest passes through;
    - rope_scaling longrope ("su" is its old name):
        inv_freq = 1 / (ext * base ** (arange(0, rot, 2).float() / rot)),
        ext = long_factor when the forward's seq_len = max(position) + 1 >
        original_max_position_embeddings, else short_factor; cos and sin are
        multiplied by attention_factor or, absent, sqrt(1 + ln(s) / ln(orig))
        (1 when s <= 1), s = rope_scaling.factor or max_position_embeddings /
        orig;
    - HF generate (Phi3ForCausalLM.prepare_inputs_for_generation) drops the
      KV cache and recomputes the whole sequence at the step it first gets
      longer than orig; this reference does the same;
    - sliding_window W (every layer when set): a query at i sees keys
      j > i - W.
  Every tiny model keeps its base config's features (from the real configs:
  ../shared/models/configs for Phi-3-mini-4k, tests/data/configs for
  Phi-3.5-mini and Phi-4-mini, each naming its source) and shrinks the rest;
  real head_dim and real factor lists are kept where rope needs them.

  The golden check (`check`): per model, 64-token prompt logits within 1e-4
  (f32; bf16 weights with f32 compute) and 2e-2 (bf16), 32 greedy ids
  identical (f32), and before that each feature switched off (or done the
  wrong way) in the reference must move the logits by > 100x the f32
  tolerance, so the comparison can fail when sglc ignores it.

Usage: phi3_ref.py check [--cache DIR] [--only a,b] [--ref-only]
       phi3_ref.py build [--cache DIR]       (write the tiny models only)
"""
import argparse
import copy
import hashlib
import json
import math
import os
import shutil
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import golden  # noqa: E402  (run_sglc, check_logits, check_ids, report)
import safetensors_np  # noqa: E402
import torch_ref  # noqa: E402  (load_state, rotate_half, RefError)

VOCAB = 512
GEN_VERSION = 1
CONFIGS = os.path.join(ROOT, "tests", "data", "configs")

# name -> (base config (shared path or tests/data path), overrides, note)
SPECS = {
    # Phi-3-mini-4k: MHA 32/32, no rope scaling, sliding_window 2047 on every
    # layer; the window shrunk to 16 so that it bites on a 64-token prompt
    "phi3-mini-4k": ("shared:configs/microsoft__Phi-3-mini-4k-instruct/config.json",
                     dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=4,
                          intermediate_size=256, sliding_window=16),
                     "fused qkv/gate_up, sliding_window 16 on every layer"),
    # Phi-3.5-mini: longrope with the real 48 short/long factors (so the real
    # head_dim 96), orig 4096 -> 32 and max_position 131072 -> 1024 (the same
    # ratio 32, so the same attention factor sqrt(1 + ln 32 / ln 32)): the
    # 64-token prompt is longer than orig, the long factors apply
    "phi3.5-long": ("data:microsoft__Phi-3.5-mini-instruct/config.json",
                    dict(hidden_size=192, num_attention_heads=2, num_key_value_heads=2,
                         intermediate_size=384, original_max_position_embeddings=32,
                         max_position_embeddings=1024),
                    "longrope, prompt longer than original_max_position_embeddings"),
    # the same with orig 128 > prompt + generated tokens: the short factors
    "phi3.5-short": ("data:microsoft__Phi-3.5-mini-instruct/config.json",
                     dict(hidden_size=192, num_attention_heads=2, num_key_value_heads=2,
                          intermediate_size=384, original_max_position_embeddings=128,
                          max_position_embeddings=4096),
                     "longrope, sequence within original_max_position_embeddings"),
    # Phi-4-mini: GQA 3:1 (real 24/8), head_dim 128, partial_rotary_factor
    # 0.75 (96 rotary dims, 48 real factors), tied embeddings, longrope with
    # orig 32 / max 1024
    "phi4-mini": ("data:microsoft__Phi-4-mini-instruct/config.json",
                  dict(hidden_size=384, num_attention_heads=3, num_key_value_heads=1,
                       intermediate_size=512, original_max_position_embeddings=32,
                       max_position_embeddings=1024),
                  "partial rotary 0.75, GQA, tied, longrope (long)"),
}


def base_path(spec_base, shared):
    kind, rel = spec_base.split(":", 1)
    return os.path.join(shared, "models", rel) if kind == "shared" else os.path.join(CONFIGS, rel)


def tiny_config(base, overrides):
    cfg = copy.deepcopy(base)
    cfg.pop("_sglc_source", None)
    cfg.pop("auto_map", None)
    cfg.update(copy.deepcopy(overrides))
    cfg["num_hidden_layers"] = 2
    cfg["vocab_size"] = VOCAB
    cfg["bos_token_id"] = 1
    cfg["eos_token_id"] = 2
    cfg["pad_token_id"] = 0
    return cfg


def make_weights(name, cfg):
    rng = np.random.RandomState(zlib.crc32(name.encode()) & 0x7FFFFFFF)
    H, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or NH
    D = cfg.get("head_dim") or H // NH
    I, V = cfg["intermediate_size"], cfg["vocab_size"]

    def lin(out, inp):
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": (0.1 * rng.standard_normal((V, H))).astype(np.float32)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "post_attention_layernorm.weight"] = norm(H)
        t[p + "self_attn.qkv_proj.weight"] = lin(NH * D + 2 * KV * D, H)
        t[p + "self_attn.o_proj.weight"] = lin(H, NH * D)
        t[p + "mlp.gate_up_proj.weight"] = lin(2 * I, H)
        t[p + "mlp.down_proj.weight"] = lin(H, I)
    t["model.norm.weight"] = norm(H)
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = lin(V, H)
    return t


def build(name, out_root, shared):
    """Writes OUT/name/{f32,bf16}/ (config.json + model.safetensors) unless
    the stamp (spec, base config, this file) is unchanged."""
    base_rel, overrides, note = SPECS[name]
    with open(base_path(base_rel, shared)) as f:
        base = json.load(f)
    cfg = tiny_config(base, overrides)
    with open(os.path.abspath(__file__), "rb") as f:
        me = hashlib.sha256(f.read()).hexdigest()
    stamp = hashlib.sha256(json.dumps([GEN_VERSION, me, name, cfg], sort_keys=True)
                           .encode()).hexdigest()
    d = os.path.join(out_root, name)
    sp = os.path.join(d, "stamp")
    if os.path.exists(sp) and open(sp).read().strip() == stamp:
        return d
    os.makedirs(d, exist_ok=True)
    w = make_weights(name, cfg)
    for sub, tag, tdt in (("f32", "F32", "float32"), ("bf16", "BF16", "bfloat16")):
        sd = os.path.join(d, sub)
        shutil.rmtree(sd, ignore_errors=True)
        os.makedirs(sd)
        c = dict(cfg, torch_dtype=tdt)
        c["_sglc_tiny_model"] = {"name": name, "base": base_rel, "note": note}
        with open(os.path.join(sd, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        safetensors_np.write(os.path.join(sd, "model.safetensors"), w, dtype=tag,
                             metadata={"format": "pt"})
    with open(sp, "w") as f:
        f.write(stamp + "\n")
    return d


# ----------------------------------------------------------------------------
# Reference


class Phi3:
    """Weights (f32, optionally rounded to bf16) and the forward pass.

    Ablation switches (attributes, set by the sensitivity checks):
      window        per-layer sliding window or None
      rope_kind     "longrope" / "default"
      force_table   None, "short" or "long": ignore the seq_len rule
      attn_factor   cos/sin scale (longrope), 1.0 to drop it
      rot           rotary dims (head_dim * partial_rotary_factor)
      swap_gate_up  read gate_up as (up, gate) -- the wrong split
    """

    def __init__(self, model_dir, dtype="float32", override=None):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        c.update(override or {})
        self.c = c
        if (c.get("architectures") or [""])[0] != "Phi3ForCausalLM":
            raise torch_ref.RefError("not a Phi3ForCausalLM config")
        self.H, self.NH = c["hidden_size"], c["num_attention_heads"]
        self.KV = c.get("num_key_value_heads") or self.NH
        self.D = c.get("head_dim") or self.H // self.NH
        self.I, self.V, self.L = c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
        self.eps = float(c.get("rms_norm_eps", 1e-5))
        self.base = float(c.get("rope_theta", 10000.0))
        self.rot = int(self.D * float(c.get("partial_rotary_factor", 1.0)))
        self.max_pos = int(c.get("max_position_embeddings", 4096))
        self.window = c.get("sliding_window") or None
        rs = c.get("rope_scaling")
        self.rope_kind = "default"
        self.force_table = None
        self.swap_gate_up = False
        self.attn_factor = 1.0
        if rs:
            t = rs.get("rope_type", rs.get("type"))
            if t not in ("longrope", "su"):
                raise torch_ref.RefError(f"rope_scaling type {t!r} not in this reference")
            self.rope_kind = "longrope"
            self.short = torch.tensor(rs["short_factor"], dtype=torch.float32)
            self.long = torch.tensor(rs["long_factor"], dtype=torch.float32)
            self.orig = int(rs.get("original_max_position_embeddings")
                            or c.get("original_max_position_embeddings") or self.max_pos)
            factor = rs.get("factor") or self.max_pos / self.orig
            af = rs.get("attention_factor")
            if af is None:
                af = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(self.orig))
            self.attn_factor = float(af)
        st = torch_ref.load_state(model_dir)
        emb, head = "model.embed_tokens.weight", "lm_head.weight"
        if head not in st:
            st[head] = st[emb]

        def take(n, shape):
            t = st[n]
            if list(t.shape) != list(shape):
                raise torch_ref.RefError(f"{n}: shape {list(t.shape)} != {list(shape)}")
            if dtype == "bfloat16":
                t = t.to(torch.bfloat16).to(torch.float32)
            return t

        H, D, NH, KV, I = self.H, self.D, self.NH, self.KV, self.I
        self.embed = take(emb, (self.V, H))
        self.lm_head = take(head, (self.V, H))
        self.norm = take("model.norm.weight", (H,))
        self.layers = []
        for i in range(self.L):
            p = f"model.layers.{i}."
            self.layers.append({
                "in": take(p + "input_layernorm.weight", (H,)),
                "post": take(p + "post_attention_layernorm.weight", (H,)),
                "qkv": take(p + "self_attn.qkv_proj.weight", (NH * D + 2 * KV * D, H)),
                "o": take(p + "self_attn.o_proj.weight", (H, NH * D)),
                "gu": take(p + "mlp.gate_up_proj.weight", (2 * I, H)),
                "down": take(p + "mlp.down_proj.weight", (H, I)),
            })
        self.reset()

    def reset(self):
        self.k_cache = [None] * self.L
        self.v_cache = [None] * self.L
        self.n = 0

    def inv_freq(self, seq_len):
        shape = torch.arange(0, self.rot, 2, dtype=torch.int64).float() / self.rot
        if self.rope_kind != "longrope":
            return 1.0 / (self.base ** shape), 1.0
        use_long = seq_len > self.orig
        if self.force_table:
            use_long = self.force_table == "long"
        ext = self.long if use_long else self.short
        return 1.0 / (ext * self.base ** shape), self.attn_factor

    def rmsnorm(self, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rope(self, x, cos, sin):
        r = self.rot
        xr, xp = x[..., :r], x[..., r:]
        return torch.cat([xr * cos + torch_ref.rotate_half(xr) * sin, xp], dim=-1)

    @torch.no_grad()
    def forward(self, ids):
        n, start = len(ids), self.n
        pos = torch.arange(start, start + n)
        inv, af = self.inv_freq(start + n)        # HF: seq_len = max(position_ids) + 1
        fr = pos.float()[:, None] * inv[None, :]
        emb = torch.cat([fr, fr], -1)
        cos, sin = (emb.cos() * af)[:, None, :], (emb.sin() * af)[:, None, :]
        x = self.embed[torch.tensor(ids, dtype=torch.long)]
        NH, KV, D, I = self.NH, self.KV, self.D, self.I
        kpos = torch.arange(0, start + n)
        for li, Lw in enumerate(self.layers):
            h = self.rmsnorm(x, Lw["in"])
            qkv = h @ Lw["qkv"].T
            q = qkv[:, :NH * D].view(n, NH, D)
            k = qkv[:, NH * D:NH * D + KV * D].view(n, KV, D)
            v = qkv[:, NH * D + KV * D:].view(n, KV, D)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            if self.k_cache[li] is None:
                self.k_cache[li], self.v_cache[li] = k, v
            else:
                self.k_cache[li] = torch.cat([self.k_cache[li], k], 0)
                self.v_cache[li] = torch.cat([self.v_cache[li], v], 0)
            K = self.k_cache[li].repeat_interleave(NH // KV, dim=1)
            V = self.v_cache[li].repeat_interleave(NH // KV, dim=1)
            s = torch.einsum("qhd,khd->hqk", q, K) / math.sqrt(D)
            ok = kpos[None, :] <= pos[:, None]
            if self.window:
                ok &= kpos[None, :] > pos[:, None] - self.window
            s = s.masked_fill(~ok[None], float("-inf"))
            att = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), V).reshape(n, NH * D)
            x = x + att @ Lw["o"].T
            h = self.rmsnorm(x, Lw["post"])
            gu = h @ Lw["gu"].T
            gate, up = gu[:, :I], gu[:, I:]
            if self.swap_gate_up:
                gate, up = up, gate
            x = x + (up * torch.nn.functional.silu(gate)) @ Lw["down"].T
        self.n += n
        return self.rmsnorm(x, self.norm) @ self.lm_head.T

    def generate(self, prompt, n_new):
        """Greedy, as HF generate with Phi3's cache reset at the longrope
        switch.  Returns (prefill logits (n, V) numpy, new ids)."""
        self.reset()
        seq = list(prompt)
        logits = self.forward(seq)
        prefill = logits.numpy()
        last, out = logits[-1], []
        for i in range(n_new):
            tok = int(torch.argmax(last))
            out.append(tok)
            seq.append(tok)
            if i + 1 == n_new:
                break
            if (self.rope_kind == "longrope" and self.force_table is None
                    and len(seq) >= self.orig + 1 and self.n <= self.orig):
                self.reset()                       # prepare_inputs_for_generation
                last = self.forward(seq)[-1]
            else:
                last = self.forward([tok])[-1]
        return prefill, out


# ----------------------------------------------------------------------------
# Sensitivity checks: name -> [(feature, config override, fn(model))]


def _set(attr, val):
    def f(m):
        setattr(m, attr, val)
    return f


def _full_rotary(m):
    """Rotate every dim: the extra pairs get factor 1 (longrope kept)."""
    extra = (m.D - m.rot) // 2
    m.rot = m.D
    m.short = torch.cat([m.short, torch.ones(extra)])
    m.long = torch.cat([m.long, torch.ones(extra)])


ABLATE = {
    "phi3-mini-4k": [("without sliding_window", {"sliding_window": None}, None),
                     ("with W+1 keys in the window", {"sliding_window": 17}, None),
                     ("with gate_up split as (up, gate)", None, _set("swap_gate_up", True))],
    "phi3.5-long": [("without rope_scaling", {"rope_scaling": None}, None),
                    ("with the short factors", None, _set("force_table", "short")),
                    ("without the longrope attention factor", None, _set("attn_factor", 1.0))],
    "phi3.5-short": [("with the long factors", None, _set("force_table", "long")),
                     ("without the longrope attention factor", None, _set("attn_factor", 1.0))],
    "phi4-mini": [("rotating all 128 dims instead of 96", None, _full_rotary),
                  ("with the short factors", None, _set("force_table", "short")),
                  ("without the longrope attention factor", None, _set("attn_factor", 1.0))],
}


def cmd_check(a):
    names = a.only.split(",") if a.only else list(SPECS)
    n_prompt, n_new = 64, 32
    for name in names:
        d = build(name, a.cache, a.shared)
        f32, bf16 = os.path.join(d, "f32"), os.path.join(d, "bf16")
        rng = np.random.RandomState(1234)
        prompt = [int(x) for x in rng.randint(3, VOCAB, size=n_prompt)]
        ref_logits, ref_ids = Phi3(f32).generate(prompt, n_new)
        ref_bf16, _ = Phi3(bf16, "bfloat16").generate(prompt, 1)
        for feat, ov, fn in ABLATE.get(name, []):
            am = Phi3(f32, override=ov)
            if fn:
                fn(am)
            abl, _ = am.generate(prompt, 1)
            e = golden.rel_err(abl, ref_logits)
            golden.report(e > 100 * golden.F32_TOL,
                          f"{name}: reference {feat} differs by {e:.3g} "
                          f"(> {100 * golden.F32_TOL:g} needed for the test to bite)")
        if a.ref_only:
            print(f"     {name}: ref ids {ref_ids[:12]}...")
            continue

        def go():
            ids, lg = golden.run_sglc(a.sglc, f32, prompt, n_new, "float32")
            golden.check_logits(f"{name} f32", lg, ref_logits, golden.F32_TOL)
            golden.check_ids(f"{name} f32", ids, ref_ids)
            _, lg = golden.run_sglc(a.sglc, bf16, prompt, 1, "float32")
            golden.check_logits(f"{name} bf16-file f32-compute", lg, ref_bf16, golden.F32_TOL)
            _, lg = golden.run_sglc(a.sglc, bf16, prompt, 1, "bfloat16")
            golden.check_logits(f"{name} bf16", lg, ref_bf16, golden.BF16_TOL)
        golden.guard(name, go)


def cmd_chunked(a):
    """A running server (--chunked-prefill-size below the prompt and below
    original_max_position_embeddings): the prompt's input logprobs must
    be the reference's, all chunks rotated with the long factors."""
    import urllib.request
    d = os.path.join(build(a.only, a.cache, a.shared), "f32")
    rng = np.random.RandomState(1234)
    prompt = [int(x) for x in rng.randint(3, VOCAB, size=64)]
    ref, _ = Phi3(d).generate(prompt, 1)
    lsm = torch.log_softmax(torch.from_numpy(ref).double(), -1).numpy()
    body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 1, "temperature": 0},
            "return_logprob": True, "logprob_start_len": 0}
    req = urllib.request.Request(a.url + "/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        out = json.loads(r.read())
    got = out["meta_info"]["input_token_logprobs"]
    err = max(abs(got[k][0] - lsm[k - 1][prompt[k]]) for k in range(1, len(prompt)))
    golden.report(len(got) == len(prompt) and err < 1e-3,
                  f"{a.only}: chunked prefill (server), input logprobs max |d| {err:.2g} vs the reference")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["check", "build", "chunked"])
    ap.add_argument("--url")
    ap.add_argument("--sglc", default=os.environ.get("SGLC_BIN", os.path.join(ROOT, "build", "sglc")))
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--only")
    ap.add_argument("--ref-only", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.command == "build":
        for n in SPECS:
            print(build(n, a.cache, a.shared))
        return 0
    if a.command == "chunked":
        cmd_chunked(a)
    else:
        cmd_check(a)
    if golden.failures:
        print(f"{len(golden.failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
