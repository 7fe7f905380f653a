#!/usr/bin/python3
"""Independent PyTorch reference for Gemma 2 and Gemma 3 (text), and their
tiny random-weight test models.

DESIGN
  Written from the architecture as transformers' modeling_gemma2.py /
  modeling_gemma3.py define it (read, not copied; no transformers package
  here), in the style of torch_ref.py (whose safetensors loading and rope
  parameter code it reuses): plain functions, one forward over a chunk of
  tokens with an explicit KV cache, prefill then one token per step.

  Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration
  (text part only: config.json nests "text_config", keys it omits take
  Gemma3TextConfig's defaults; weights under "language_model.model."):
    x = embed[ids] * normalizer, normalizer = sqrt(hidden) rounded to the
        weights' dtype (bf16 emulation: rounded to bf16, as HF casts it)
    per layer: x += post_attn_norm(attn(input_norm(x)))
               x += post_ffn_norm(mlp(pre_ffn_norm(x)))
    logits = norm(x) @ embed.T (tied unless tie_word_embeddings false),
             then cap * tanh(logits / cap) if final_logit_softcapping
  RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w).
  MLP: down(gelu_tanh(gate(x)) * up(x)).
  Attention: GQA, head_dim from config, q/k/v/o bias if attention_bias;
    Gemma 3: q_norm / k_norm (the same RMSNorm over head_dim) before rope;
    scores = q.k * query_pre_attn_scalar^-0.5;
    Gemma 2 only: scores = cap * tanh(scores / cap) (attn_logit_softcapping;
    transformers' Gemma 3 attention does not pass it on);
    sliding layers (layer_types, else (i+1) % pattern != 0 with pattern 2
    for Gemma 2, sliding_window_pattern (6) for Gemma 3) see keys j with
    i - W < j <= i.
  RoPE: rotate_half (HF).  Gemma 3: sliding layers use the default rope of
    base rope_local_base_freq (unscaled); full layers rope_theta with
    rope_scaling.  Gemma 2: rope_theta everywhere.

  Precision as torch_ref.py: weights f32 (or rounded to bf16 with
  --dtype bfloat16), compute f32.

  ABLATIONS maps each feature to a way of switching it off (or doing it the
  wrong way) in this reference; golden.py's `gemma` command checks that each
  one moves the logits far beyond the tolerance, so the comparison with
  sglc can fail when sglc ignores the feature.

TINY MODELS (SPECS, build())
  Each starts from a real config.json in tests/ref/configs (sources in
  SOURCES.tsv) and shrinks widths, depth and vocab while keeping every
  feature: sliding + full layers in the real pattern, soft-caps, qk-norm,
  head_dim != hidden / heads, query_pre_attn_scalar != head_dim (as in
  Gemma 2 27B / Gemma 3 27B), the two rope bases, rope_scaling on global
  layers only (4B).  Window 16 < the 64-token prompt.  The soft-caps are
  the real ones divided by 10 so that tanh bends at the tiny model's
  magnitudes (the real caps only bite on trained weights).  Weights seeded
  by crc32(name): embeddings N(0, 0.1^2), linears N(0, 1/fan_in), norm
  weights 0.2 N(0, 1) (centred on 0: the model applies 1 + w).

CLI
  gemma_ref.py --model-path DIR --input-ids 1,2,3 [--max-new-tokens N]
               [--dtype float32|bfloat16] [--dump-logits FILE] [--json]
  gemma_ref.py --build NAME[,NAME] [--out DIR]     (writes tiny models)
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
import safetensors_np  # noqa: E402
import torch_ref  # noqa: E402
from torch_ref import RefError  # noqa: E402

ARCHS = {"Gemma2ForCausalLM": 2, "Gemma3ForCausalLM": 3, "Gemma3ForConditionalGeneration": 3}

# transformers' Gemma3TextConfig defaults (the keys gemma-3-4b-it omits)
GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
    "rope_theta": 1e6, "attention_bias": False, "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "rope_scaling": None, "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
}


class GemmaConfig:
    """The config.json fields the forward needs, with the class defaults."""

    def __init__(self, d):
        archs = d.get("architectures") or []
        arch = archs[0] if archs else ""
        if arch not in ARCHS:
            raise RefError(f"not a Gemma 2/3 architecture: {arch!r}")
        self.version = ARCHS[arch]
        self.prefix = "model."
        self.head_name = "lm_head.weight"
        if arch == "Gemma3ForConditionalGeneration":
            t = dict(d.get("text_config") or d)
            for k in ("eos_token_id", "bos_token_id"):
                if k in d and k not in t:
                    t[k] = d[k]
            for k, v in GEMMA3_TEXT_DEFAULTS.items():
                t.setdefault(k, v)
            d = t
            self.prefix = "language_model.model."
            self.head_name = "language_model.lm_head.weight"
        g = d.get
        self.raw = d
        self.hidden = int(g("hidden_size"))
        self.n_layers = int(g("num_hidden_layers"))
        self.n_heads = int(g("num_attention_heads"))
        self.n_kv = int(g("num_key_value_heads") or self.n_heads)
        self.head_dim = int(g("head_dim") or self.hidden // self.n_heads)
        self.inter = int(g("intermediate_size"))
        self.vocab = int(g("vocab_size"))
        self.eps = float(g("rms_norm_eps", 1e-6))
        self.max_pos = int(g("max_position_embeddings", 8192))
        self.tie = bool(g("tie_word_embeddings", True))
        self.bias = bool(g("attention_bias", False))
        act = g("hidden_activation", "gelu_pytorch_tanh")
        if act != "gelu_pytorch_tanh":
            raise RefError(f"unsupported hidden_activation {act!r}")
        self.qk_norm = self.version == 3
        self.scale = float(g("query_pre_attn_scalar", 256)) ** -0.5
        if self.version == 2:
            self.attn_cap = g("attn_logit_softcapping", 50.0) if "attn_logit_softcapping" in d else 50.0
            self.final_cap = g("final_logit_softcapping", 30.0) if "final_logit_softcapping" in d else 30.0
        else:
            self.attn_cap = None  # stored by Gemma3TextConfig, unused by its attention
            self.final_cap = g("final_logit_softcapping")
        self.embed_scale = True
        lt = g("layer_types")
        if lt is None:
            pat = int(g("sliding_window_pattern", g("_sliding_window_pattern", 2 if self.version == 2 else 6)))
            lt = ["sliding_attention" if (i + 1) % pat else "full_attention"
                  for i in range(self.n_layers)]
        if len(lt) != self.n_layers:
            raise RefError("layer_types length != num_hidden_layers")
        sw = g("sliding_window")
        self.sliding = [t == "sliding_attention" for t in lt]
        self.windows = [int(sw) if (s and sw) else None for s in self.sliding]
        self.rope_theta = float(g("rope_theta", 10000.0 if self.version == 2 else 1e6))
        rs = g("rope_scaling")
        if rs is not None:
            rs = dict(rs)
            rs["rope_type"] = rs.get("rope_type", rs.get("type", "default"))
        self.rope_scaling = rs
        self.local_theta = float(g("rope_local_base_freq", 10000.0)) if self.version == 3 else None
        self.rope_scaling_local = False   # ablation: scale the local rope too
        self.dynamic_mode = "hf"
        eos = g("eos_token_id")
        self.eos = set(eos if isinstance(eos, list) else ([eos] if eos is not None else []))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class Model:
    """Weights (optionally rounded to bf16) plus the forward pass."""

    def __init__(self, model_dir, dtype="float32", config_override=None, text_override=None):
        """config_override: merged into config.json's top level;
        text_override: into text_config (nested form) or the top level."""
        with open(os.path.join(model_dir, "config.json")) as f:
            raw = json.load(f)
        raw.update(config_override or {})
        if text_override:
            (raw["text_config"] if "text_config" in raw else raw).update(text_override)
        self.cfg = cfg = GemmaConfig(raw)
        self.dtype = dtype
        st = torch_ref.load_state(model_dir)
        if cfg.prefix == "language_model.model." and cfg.prefix + "embed_tokens.weight" not in st \
                and "model.language_model.embed_tokens.weight" in st:
            # saved by transformers >= 4.52 (its _checkpoint_conversion_mapping)
            cfg.prefix, cfg.head_name = "model.language_model.", "lm_head.weight"
        P = cfg.prefix
        emb = P + "embed_tokens.weight"
        used = set()

        def take(name, shape):
            if name not in st:
                raise RefError(f"missing tensor {name}")
            t = st[name]
            if list(t.shape) != list(shape):
                raise RefError(f"{name}: shape {list(t.shape)} != expected {list(shape)}")
            used.add(name)
            if dtype == "bfloat16":
                t = t.to(torch.bfloat16).to(torch.float32)
            return t.float()

        H, D, NH, KV, I = cfg.hidden, cfg.head_dim, cfg.n_heads, cfg.n_kv, cfg.inter
        self.embed = take(emb, (cfg.vocab, H))
        self.lm_head = self.embed if cfg.tie else take(cfg.head_name, (cfg.vocab, H))
        self.norm = take(P + "norm.weight", (H,))
        self.layers = []
        for i in range(cfg.n_layers):
            p = f"{P}layers.{i}."
            L = {n: take(p + n + ".weight", (H,)) for n in (
                "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                "post_feedforward_layernorm")}
            L["wq"] = take(p + "self_attn.q_proj.weight", (NH * D, H))
            L["wk"] = take(p + "self_attn.k_proj.weight", (KV * D, H))
            L["wv"] = take(p + "self_attn.v_proj.weight", (KV * D, H))
            L["wo"] = take(p + "self_attn.o_proj.weight", (H, NH * D))
            if cfg.bias:
                for k, n in (("bq", NH * D), ("bk", KV * D), ("bv", KV * D), ("bo", H)):
                    L[k] = take(p + f"self_attn.{k[1]}_proj.bias", (n,))
            L["gate"] = take(p + "mlp.gate_proj.weight", (I, H))
            L["up"] = take(p + "mlp.up_proj.weight", (I, H))
            L["down"] = take(p + "mlp.down_proj.weight", (H, I))
            if cfg.qk_norm:
                L["q_norm"] = take(p + "self_attn.q_norm.weight", (D,))
                L["k_norm"] = take(p + "self_attn.k_norm.weight", (D,))
            self.layers.append(L)
        extra = [k for k in st if k not in used and not k.endswith("rotary_emb.inv_freq")
                 and not (k.startswith("vision_tower.") or k.startswith("multi_modal_projector."))]
        if extra:
            raise RefError(f"unused tensors in checkpoint: {sorted(extra)[:8]}")
        # switches the ablations flip (all on = the architecture)
        self.norm_offset = 1.0
        self.post_norms = True
        self.use_local_rope = True
        self.reset()

    def reset(self):
        self.k_cache = [None] * self.cfg.n_layers
        self.v_cache = [None] * self.cfg.n_layers
        self.n_cached = 0

    def rmsnorm(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.cfg.eps) * (self.norm_offset + w)

    def rope(self, positions, local):
        cfg = self.cfg
        if local and self.use_local_rope and cfg.local_theta is not None:
            inv = torch_ref._default_inv_freq(cfg.local_theta, cfg.head_dim)
            if cfg.rope_scaling_local and cfg.rope_scaling:
                inv = inv / float(cfg.rope_scaling.get("factor", 1.0))
            attn = 1.0
        else:
            inv, attn = torch_ref.rope_parameters(cfg, int(positions[-1]) + 1)
        freqs = positions.float()[:, None] * inv.float()[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return (emb.cos() * attn)[:, None, :], (emb.sin() * attn)[:, None, :]

    def normalizer(self):
        s = torch.tensor(math.sqrt(self.cfg.hidden), dtype=torch.float32)
        if self.dtype == "bfloat16":
            s = s.to(torch.bfloat16).float()
        return s if self.cfg.embed_scale else torch.tensor(1.0)

    @torch.no_grad()
    def forward(self, ids):
        cfg = self.cfg
        n = len(ids)
        start = self.n_cached
        pos = torch.arange(start, start + n)
        kpos = torch.arange(0, start + n)
        H, D, NH, KV = cfg.hidden, cfg.head_dim, cfg.n_heads, cfg.n_kv
        x = self.embed[torch.tensor(ids, dtype=torch.long)] * self.normalizer()
        for li, L in enumerate(self.layers):
            h = self.rmsnorm(x, L["input_layernorm"])
            q, k, v = h @ L["wq"].T, h @ L["wk"].T, h @ L["wv"].T
            if cfg.bias:
                q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
            q, k, v = q.view(n, NH, D), k.view(n, KV, D), v.view(n, KV, D)
            if cfg.qk_norm:
                q = self.rmsnorm(q, L["q_norm"])
                k = self.rmsnorm(k, L["k_norm"])
            cos, sin = self.rope(pos, cfg.sliding[li])
            q = q * cos + torch_ref.rotate_half(q) * sin
            k = k * cos + torch_ref.rotate_half(k) * sin
            if self.k_cache[li] is None:
                self.k_cache[li], self.v_cache[li] = k, v
            else:
                self.k_cache[li] = torch.cat([self.k_cache[li], k], 0)
                self.v_cache[li] = torch.cat([self.v_cache[li], v], 0)
            Kc = self.k_cache[li].repeat_interleave(NH // KV, dim=1)
            Vc = self.v_cache[li].repeat_interleave(NH // KV, dim=1)
            s = torch.einsum("qhd,khd->hqk", q, Kc) * cfg.scale
            if cfg.attn_cap:
                s = cfg.attn_cap * torch.tanh(s / cfg.attn_cap)
            allowed = kpos[None, :] <= pos[:, None]
            w = cfg.windows[li]
            if w:
                allowed &= kpos[None, :] > pos[:, None] - w
            s = s.masked_fill(~allowed[None], float("-inf"))
            att = torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), Vc).reshape(n, NH * D)
            o = att @ L["wo"].T
            if cfg.bias:
                o = o + L["bo"]
            if self.post_norms:
                o = self.rmsnorm(o, L["post_attention_layernorm"])
            x = x + o
            h = self.rmsnorm(x, L["pre_feedforward_layernorm"])
            m = (gelu_tanh(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
            if self.post_norms:
                m = self.rmsnorm(m, L["post_feedforward_layernorm"])
            x = x + m
        self.n_cached += n
        logits = self.rmsnorm(x, self.norm) @ self.lm_head.T
        if cfg.final_cap:
            logits = cfg.final_cap * torch.tanh(logits / cfg.final_cap)
        return logits

    def generate(self, prompt, max_new_tokens):
        """Greedy.  Returns (prefill logits (n, vocab) float32 numpy, ids)."""
        self.reset()
        logits = self.forward(list(prompt))
        prefill = logits.numpy().astype(np.float32)
        out, last = [], logits[-1]
        for i in range(max_new_tokens):
            tok = int(torch.argmax(last))
            out.append(tok)
            if i + 1 < max_new_tokens:
                last = self.forward([tok])[-1]
        return prefill, out


# ----------------------------------------------------------------------------
# Ablations: (feature, config override, text override, function on Model)


def _set(attr, value):
    def f(m):
        setattr(m, attr, value)
    return f


def _cfg(attr, value):
    def f(m):
        setattr(m.cfg, attr, value)
    return f


def _head_dim_scale(m):
    m.cfg.scale = m.cfg.head_dim ** -0.5


def _all_full(m):
    m.cfg.windows = [None] * m.cfg.n_layers


def _window_every_layer(m):
    sw = int(m.cfg.raw["sliding_window"])
    m.cfg.windows = [sw] * m.cfg.n_layers


def _no_embed_scale(m):
    m.cfg.embed_scale = False


COMMON = [
    ("with w instead of (1 + w) in RMSNorm", None, None, _set("norm_offset", 0.0)),
    ("without the post-attention / post-feedforward norms", None, None, _set("post_norms", False)),
    ("without the sqrt(hidden) embedding scale", None, None, _no_embed_scale),
    ("with 1/sqrt(head_dim) instead of query_pre_attn_scalar", None, None, _head_dim_scale),
    ("without sliding windows", None, None, _all_full),
    ("with the window on every layer", None, None, _window_every_layer),
]
ABLATIONS = {
    "gemma2": COMMON + [
        ("without attention soft-capping", None, None, _cfg("attn_cap", None)),
        ("without final logit soft-capping", None, None, _cfg("final_cap", None)),
    ],
    "gemma3": COMMON + [
        ("without q/k norm", None, None, _cfg("qk_norm", False)),
        ("with rope_theta on sliding layers too", None, None, _set("use_local_rope", False)),
    ],
    "gemma3-mm": COMMON + [
        ("without q/k norm", None, None, _cfg("qk_norm", False)),
        ("with rope_theta on sliding layers too", None, None, _set("use_local_rope", False)),
        ("without rope_scaling (global layers)", None, {"rope_scaling": None}, None),
        ("with rope_scaling on the local layers too", None, None, _cfg("rope_scaling_local", True)),
    ],
}
# the same model in the other checkpoint layout: the loader must find it
ABLATIONS["gemma3-mm-v2"] = ABLATIONS["gemma3-mm"][-4:]


# ----------------------------------------------------------------------------
# Tiny models

VOCAB = 512
GENERATOR_VERSION = 1
CONFIGS = os.path.join(HERE, "configs")

# name -> (config folder in tests/ref/configs, overrides (into text_config when nested), note)
SPECS = {
    # gemma-2-2b-it: GQA 2:1, head_dim 32 with hidden 96 (q dim 128 != 96),
    # layer 0 sliding / layer 1 full (the default every-other pattern)
    "gemma2": ("google__gemma-2-2b-it",
               dict(hidden_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                    intermediate_size=288, num_hidden_layers=2, sliding_window=16,
                    query_pre_attn_scalar=48, attn_logit_softcapping=5.0,
                    final_logit_softcapping=3.0),
               "soft-caps (real/10), post-norms, sliding layer 0 / full layer 1"),
    # gemma-3-1b-it: MQA (4 heads, 1 KV head), qk-norm, 6 layers = 5 sliding
    # (local rope base 1e4) + 1 full (rope_theta 1e6), sliding_window_pattern 6
    "gemma3": ("google__gemma-3-1b-it",
               dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                    intermediate_size=192, num_hidden_layers=6, sliding_window=16,
                    query_pre_attn_scalar=48),
               "qk-norm, 5 sliding + 1 full, local/global rope bases"),
    # gemma-3-4b-it (Gemma3ForConditionalGeneration, nested text_config):
    # GQA 2:1, linear rope_scaling 8 on the full layer only
    "gemma3-mm": ("google__gemma-3-4b-it",
                  dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       intermediate_size=192, num_hidden_layers=6, sliding_window=16,
                       query_pre_attn_scalar=48),
                  "nested text_config, rope_scaling linear 8 on global layers"),
}
# gemma3-mm's weights under transformers >= 4.52's names (model.language_model.*)
SPECS["gemma3-mm-v2"] = SPECS["gemma3-mm"][:2] + ("gemma3-mm saved as model.language_model.*",)
NEW_LAYOUT = {"gemma3-mm-v2"}


def tiny_config(base, overrides):
    cfg = copy.deepcopy(base)
    text = cfg["text_config"] if "text_config" in cfg else cfg
    text.update(copy.deepcopy(overrides))
    text["vocab_size"] = VOCAB
    for d in (cfg, text):
        if "bos_token_id" in d or d is text:
            d["bos_token_id"] = 1
        if "eos_token_id" in d or d is text:
            d["eos_token_id"] = 2
    cfg.pop("vision_config", None)  # no vision tower in the tiny checkpoint
    return cfg


def make_weights(name, cfg):
    rng = np.random.RandomState(zlib.crc32(name.encode()) & 0x7FFFFFFF)
    c = GemmaConfig(cfg)
    H, NH, KV, D, I, V = c.hidden, c.n_heads, c.n_kv, c.head_dim, c.inter, c.vocab

    def lin(o, i):
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

    def norm(n):
        return (0.2 * rng.standard_normal(n)).astype(np.float32)

    P = c.prefix
    t = {P + "embed_tokens.weight": (0.1 * rng.standard_normal((V, H))).astype(np.float32)}
    for i in range(c.n_layers):
        p = f"{P}layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            t[p + n + ".weight"] = norm(H)
        t[p + "self_attn.q_proj.weight"] = lin(NH * D, H)
        t[p + "self_attn.k_proj.weight"] = lin(KV * D, H)
        t[p + "self_attn.v_proj.weight"] = lin(KV * D, H)
        t[p + "self_attn.o_proj.weight"] = lin(H, NH * D)
        t[p + "mlp.gate_proj.weight"] = lin(I, H)
        t[p + "mlp.up_proj.weight"] = lin(I, H)
        t[p + "mlp.down_proj.weight"] = lin(H, I)
        if c.qk_norm:
            t[p + "self_attn.q_norm.weight"] = norm(D)
            t[p + "self_attn.k_norm.weight"] = norm(D)
    t[P + "norm.weight"] = norm(H)
    if not c.tie:
        t[c.head_name] = lin(V, H)
    if name in NEW_LAYOUT:
        t = {("model.language_model." + k[len(P):] if k.startswith(P) else
              "lm_head.weight" if k == c.head_name else k): v for k, v in t.items()}
    return t


def build(name, out_root):
    """Writes OUT/name/{f32,bf16}/ (config.json + model.safetensors) unless
    the stamp (hash of the spec and of this file) is current.  Returns
    (folder, made)."""
    folder, overrides, note = SPECS[name]
    with open(os.path.join(CONFIGS, folder, "config.json")) as f:
        base = json.load(f)
    cfg = tiny_config(base, overrides)
    with open(os.path.abspath(__file__), "rb") as f:
        me = hashlib.sha256(f.read()).hexdigest()
    stamp = hashlib.sha256(json.dumps([GENERATOR_VERSION, me, name, cfg], sort_keys=True)
                           .encode()).hexdigest()
    d = os.path.join(out_root, name)
    sp = os.path.join(d, "stamp")
    if os.path.exists(sp) and open(sp).read().strip() == stamp:
        return d, False
    os.makedirs(d, exist_ok=True)
    weights = make_weights(name, cfg)
    for sub, tag, tdt in (("f32", "F32", "float32"), ("bf16", "BF16", "bfloat16")):
        sd = os.path.join(d, sub)
        shutil.rmtree(sd, ignore_errors=True)
        os.makedirs(sd)
        c = copy.deepcopy(cfg)
        c["torch_dtype"] = tdt
        if "text_config" in c:
            c["text_config"]["torch_dtype"] = tdt
        c["_sglc_tiny_model"] = {"name": name, "base": "tests/ref/configs/" + folder, "note": note}
        with open(os.path.join(sd, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        safetensors_np.write(os.path.join(sd, "model.safetensors"), weights, dtype=tag,
                             metadata={"format": "pt"})
    with open(sp, "w") as f:
        f.write(stamp + "\n")
    return d, True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-path")
    ap.add_argument("--input-ids")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--dump-logits")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--build", help="comma-separated tiny model names (see SPECS)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tiny-models"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    try:
        if a.build:
            for n in a.build.split(","):
                if n not in SPECS:
                    raise RefError(f"unknown tiny model {n!r} (have {', '.join(SPECS)})")
                d, made = build(n, a.out)
                print(f"{'wrote' if made else 'cached'} {d}")
            return 0
        if not a.model_path or not a.input_ids:
            raise RefError("--model-path and --input-ids are required (or --build)")
        ids = torch_ref.parse_ids(a.input_ids)
        m = Model(a.model_path, a.dtype)
        prefill, out = m.generate(ids, a.max_new_tokens)
        if a.dump_logits:
            prefill.astype("<f4").tofile(a.dump_logits)
        print(json.dumps({"output_ids": out, "prompt_len": len(ids)}) if a.json
              else " ".join(map(str, out)))
    except (RefError, safetensors_np.SafetensorsError, OSError, json.JSONDecodeError) as e:
        print(f"gemma_ref: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
