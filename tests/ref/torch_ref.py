#!/usr/bin/python3
"""Independent PyTorch reference for the decoder-only models sglc runs.

DESIGN
  Written from the architecture definitions, not from transformers code (no
  transformers package here): one plain function per piece (RMSNorm, RoPE
  tables, attention, SwiGLU MLP) and one forward over a chunk of tokens with
  an explicit KV cache, so prefill and greedy decode follow the same path as
  Hugging Face `generate` (prefill once, then one token per step).

  Architectures (config.json "architectures"[0] / "model_type"):
    LlamaForCausalLM    attention_bias -> q,k,v,o bias; mlp_bias -> MLP bias
    MistralForCausalLM  no bias; sliding_window on every layer
    Qwen2ForCausalLM    q,k,v bias (o none); sliding window only when
                        use_sliding_window and layer >= max_window_layers
    Qwen3ForCausalLM    q_norm/k_norm (RMSNorm over head_dim, per head, before
                        RoPE); explicit head_dim; attention_bias as Llama;
                        sliding window as Qwen2
    Qwen3MoeForCausalLM Qwen3 attention; MLP = sparse MoE (router mlp.gate,
                        softmax over all experts in f32, top
                        num_experts_per_tok, renormalized if norm_topk_prob,
                        experts mlp.experts.E.{gate,up,down}_proj of
                        moe_intermediate_size) except layers in
                        mlp_only_layers or with (i+1) % decoder_sparse_step
                        != 0, which keep the dense MLP
    MixtralForCausalLM  Mistral attention; every MLP sparse:
                        block_sparse_moe.gate, experts.E.{w1,w3,w2}
                        (gate, up, down) of intermediate_size, top-k always
                        renormalized
    GraniteMoeForCausalLM Mixtral-style MoE with experts packed per layer:
                        block_sparse_moe.input_linear (E, 2I, H) = gate rows
                        then up rows, output_linear (E, H, I), router
                        block_sparse_moe.router.layer; embeddings *
                        embedding_multiplier, softmax scale
                        attention_multiplier, block outputs *
                        residual_multiplier, logits / logits_scaling
  Sliding window W: query at position i sees keys j with i - W < j <= i
  (W keys including itself), which is HF's eager mask and SGLang's
  window_left = W - 1.

  RoPE (rope_scaling: none / linear / dynamic / llama3 / yarn) computes
  inv_freq and the attention factor the way transformers'
  modeling_rope_utils.py does (>= 4.48 semantics, see rope_parameters()).
  HF rotates halves: x' = x*cos + rotate_half(x)*sin with cos = cat(f, f);
  cos/sin are multiplied by the attention factor (yarn), which scales q.k
  by factor^2.  "dynamic" follows HF's dynamic_rope_update: every forward
  call recomputes inv_freq from seq_len = max(position)+1 when that exceeds
  max_position_embeddings; keys already in the cache keep the rotation they
  got when they were computed (that is what HF generate does with a cache).

  Precision: weights are f32 (BF16/F16 files widened exactly).  --dtype
  bfloat16 EMULATES bf16 weights: every weight is rounded to bf16
  (round-to-nearest-even) and all compute stays in f32 (or f64 with
  --compute float64).  Activations are never rounded to bf16.

  Tied embeddings: if lm_head.weight is missing the embedding is used, and
  if model.embed_tokens.weight is missing lm_head.weight is used
  (TinyStories-656K stores only lm_head.weight); safetensors "__metadata__"
  aliases {"model.embed_tokens.weight": "lm_head.weight"} are honoured too.

CLI
  torch_ref.py --model-path DIR --input-ids 1,2,3 [--max-new-tokens N]
               [--dtype float32|bfloat16] [--dump-logits FILE] [--json]
               [--ignore-eos]
  --dump-logits writes the prefill logits of every prompt position as raw
  little-endian f32, shape (n_prompt, vocab), no header.
  --json prints {"output_ids": [...], "prompt_len": n, "text": ...}.
"""
import argparse
import glob
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import safetensors_np  # noqa: E402


class RefError(Exception):
    pass


# ----------------------------------------------------------------------------
# Configuration


class Config:
    """The fields of config.json the forward pass needs, with HF defaults."""

    def __init__(self, d):
        self.raw = d
        archs = d.get("architectures") or []
        arch = archs[0] if archs else ""
        mt = d.get("model_type", "")
        table = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                 "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
                 "Qwen3MoeForCausalLM": "qwen3_moe", "MixtralForCausalLM": "mixtral",
                 "GraniteMoeForCausalLM": "granitemoe"}
        self.arch = table.get(arch) or (mt if mt in table.values() else None)
        if self.arch is None:
            raise RefError(f"unsupported architecture {arch!r} / model_type {mt!r}")
        g = d.get
        self.hidden = int(g("hidden_size"))
        self.n_layers = int(g("num_hidden_layers"))
        self.n_heads = int(g("num_attention_heads"))
        self.n_kv = int(g("num_key_value_heads") or self.n_heads)
        hd = g("head_dim")
        self.head_dim = int(hd) if hd else self.hidden // self.n_heads
        self.inter = int(g("intermediate_size"))
        self.vocab = int(g("vocab_size"))
        self.eps = float(g("rms_norm_eps", 1e-6))
        self.rope_theta = float(g("rope_theta", 10000.0))
        self.max_pos = int(g("max_position_embeddings", 2048))
        self.tie = bool(g("tie_word_embeddings", False))
        if g("hidden_act", "silu") not in ("silu", "swish"):
            raise RefError(f"unsupported hidden_act {g('hidden_act')!r}")
        if float(g("partial_rotary_factor", 1.0)) != 1.0:
            raise RefError("partial_rotary_factor != 1 is not supported")
        if self.n_heads % self.n_kv:
            raise RefError("num_attention_heads must be a multiple of num_key_value_heads")
        rs = g("rope_scaling")
        if rs is not None:
            rs = dict(rs)
            rs["rope_type"] = rs.get("rope_type", rs.get("type", "default"))
        self.rope_scaling = rs
        self.dynamic_mode = "hf"  # or "static" (vLLM/SGLang), see rope_parameters

        a = self.arch
        ab = bool(g("attention_bias", False))
        ab_archs = ("llama", "qwen3", "qwen3_moe", "granitemoe")
        self.qkv_bias = True if a == "qwen2" else (ab if a in ab_archs else False)
        self.o_bias = ab if a in ab_archs else False
        # Granite scalars (GraniteMoeConfig defaults 1.0); attention_multiplier
        # replaces 1/sqrt(head_dim) as the softmax scale
        gr = a == "granitemoe"
        self.embed_mult = float(g("embedding_multiplier", 1.0)) if gr else 1.0
        self.attn_scale = float(g("attention_multiplier", 1.0)) if gr else None
        self.resid_mult = float(g("residual_multiplier", 1.0)) if gr else 1.0
        self.logits_scaling = float(g("logits_scaling", 1.0)) if gr else 1.0
        self.mlp_bias = bool(g("mlp_bias", False)) if a == "llama" else False
        self.qk_norm = a in ("qwen3", "qwen3_moe")
        # mixture of experts: which layers are sparse, experts, top-k
        self.moe_layers = [False] * self.n_layers
        if a == "qwen3_moe":
            self.n_experts = int(g("num_experts", 128))
            self.top_k = int(g("num_experts_per_tok", 8))
            self.moe_inter = int(g("moe_intermediate_size", 768))
            self.norm_topk = bool(g("norm_topk_prob", False))
            step = int(g("decoder_sparse_step", 1))
            only = set(g("mlp_only_layers") or [])
            self.moe_layers = [i not in only and self.n_experts > 0 and (i + 1) % step == 0
                               for i in range(self.n_layers)]
        elif a in ("mixtral", "granitemoe"):
            self.n_experts = int(g("num_local_experts", 8))
            self.top_k = int(g("num_experts_per_tok", 2))
            self.moe_inter = self.inter
            self.norm_topk = True
            self.moe_layers = [True] * self.n_layers
        # per-layer sliding window (None = full attention)
        sw = g("sliding_window")
        if a in ("mistral", "mixtral"):
            self.windows = [int(sw) if sw else None] * self.n_layers
        elif a in ("qwen2", "qwen3", "qwen3_moe"):
            use = bool(g("use_sliding_window", False)) and sw
            mwl = int(g("max_window_layers", self.n_layers) or 0)
            self.windows = [int(sw) if use and i >= mwl else None for i in range(self.n_layers)]
        else:
            self.windows = [None] * self.n_layers
        eos = g("eos_token_id")
        self.eos = set(eos if isinstance(eos, list) else ([eos] if eos is not None else []))


# ----------------------------------------------------------------------------
# RoPE parameters (inv_freq, attention factor), transformers semantics


def _default_inv_freq(base, dim):
    # HF: 1 / base ** (arange(0, dim, 2, int64).float() / dim), in float32
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rope_parameters(cfg, seq_len=None):
    """Returns (inv_freq float32 (head_dim/2,), attention_factor float).

    seq_len: the sequence length a forward call covers (max position + 1);
    only "dynamic" uses it.  Follows transformers' modeling_rope_utils:
      linear   inv_freq / factor
      dynamic  base' = base * (factor*L/M - (factor-1)) ** (d/(d-2)),
               L = max(seq_len, M), M = max_position_embeddings (HF).
               cfg.dynamic_mode "static" instead fixes L = M*factor for all
               positions, as vLLM/SGLang's DynamicNTKScalingRotaryEmbedding
               does (not what the golden tests check).
      llama3   wavelength bands with low/high_freq_factor and
               original_max_position_embeddings
      yarn     NTK-by-parts blend, beta_fast/beta_slow (32/1), truncate
               (default true) of the correction range, computed against
               rope_scaling.original_max_position_embeddings when given
               (else max_position_embeddings); factor as written in the
               config; attention factor = attention_factor if given, else
               get_mscale(factor, mscale)/get_mscale(factor, mscale_all_dim)
               when both are given, else 0.1*ln(factor)+1 (1 if factor <= 1).
    """
    dim = cfg.head_dim
    base = cfg.rope_theta
    rs = cfg.rope_scaling
    rtype = rs["rope_type"] if rs else "default"
    if rtype == "default":
        return _default_inv_freq(base, dim), 1.0
    factor = float(rs.get("factor", 1.0))
    if rtype == "linear":
        return _default_inv_freq(base, dim) / factor, 1.0
    if rtype == "dynamic":
        m = cfg.max_pos
        L = seq_len if (seq_len is not None and seq_len > m) else m
        if cfg.dynamic_mode == "static":
            L = m * factor
        base2 = base * ((factor * L / m) - (factor - 1)) ** (dim / (dim - 2))
        return _default_inv_freq(base2, dim), 1.0
    if rtype == "llama3":
        inv = _default_inv_freq(base, dim)
        low_ff = float(rs["low_freq_factor"])
        high_ff = float(rs["high_freq_factor"])
        old_ctx = float(rs["original_max_position_embeddings"])
        low_wl = old_ctx / low_ff
        high_wl = old_ctx / high_ff
        wavelen = 2 * math.pi / inv
        out = torch.where(wavelen > low_wl, inv / factor, inv)
        smooth = (old_ctx / wavelen - low_ff) / (high_ff - low_ff)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
        return torch.where(medium, smoothed, out), 1.0
    if rtype == "yarn":
        orig = rs.get("original_max_position_embeddings") or cfg.max_pos
        attn = rs.get("attention_factor")
        mscale = rs.get("mscale")
        mscale_all = rs.get("mscale_all_dim")

        def get_mscale(scale, ms=1.0):
            return 1.0 if scale <= 1 else 0.1 * ms * math.log(scale) + 1.0

        if attn is None:
            if mscale and mscale_all:
                attn = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all))
            else:
                attn = get_mscale(factor)
        beta_fast = rs.get("beta_fast") or 32
        beta_slow = rs.get("beta_slow") or 1
        truncate = rs.get("truncate", True)

        def corr_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

        low, high = corr_dim(beta_fast), corr_dim(beta_slow)
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        inv_extra = 1.0 / pos_freqs
        inv_inter = 1.0 / (factor * pos_freqs)
        extra_factor = 1 - ramp
        inv = inv_inter * (1 - extra_factor) + inv_extra * extra_factor
        return inv, float(attn)
    raise RefError(f"unsupported rope_type {rtype!r}")


def rope_cos_sin(cfg, positions, seq_len):
    """cos, sin of shape (n, head_dim), float32, attention factor applied."""
    inv, attn = rope_parameters(cfg, seq_len)
    freqs = positions.float()[:, None] * inv.float()[None, :]   # (n, dim/2)
    emb = torch.cat([freqs, freqs], dim=-1)                      # (n, dim)
    return emb.cos() * attn, emb.sin() * attn


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


# ----------------------------------------------------------------------------
# Weights


def load_state(model_dir):
    """Reads every tensor of the model's safetensors file(s) as float32 torch."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        files = [os.path.join(model_dir, x) for x in files]
    else:
        files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        raise RefError(f"{model_dir}: no *.safetensors file")
    state, aliases = {}, {}
    for fpath in files:
        tensors, meta = safetensors_np.read(fpath)
        for k, v in tensors.items():
            if k in state:
                raise RefError(f"{k} appears in two shards")
            state[k] = torch.from_numpy(np.array(v, dtype=np.float32))
        for k, v in meta.items():
            if isinstance(v, str) and k.endswith(".weight") and v.endswith(".weight"):
                aliases[k] = v
    for k, v in aliases.items():
        if k not in state and v in state:
            state[k] = state[v]
    return state


class Model:
    """Weights in f32 (optionally rounded to bf16) plus the forward pass."""

    def __init__(self, model_dir, dtype="float32", compute="float32", config_override=None,
                 dynamic_mode="hf"):
        """config_override: dict merged into config.json (tests use it to
        switch a feature off and check that the comparison would notice)."""
        with open(os.path.join(model_dir, "config.json")) as f:
            raw = json.load(f)
        raw.update(config_override or {})
        self.cfg = cfg = Config(raw)
        cfg.dynamic_mode = dynamic_mode
        self.cdt = torch.float64 if compute == "float64" else torch.float32
        st = load_state(model_dir)
        emb, head = "model.embed_tokens.weight", "lm_head.weight"
        if head not in st and emb in st:
            st[head] = st[emb]
        if emb not in st and head in st:
            st[emb] = st[head]
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
            return t.to(self.cdt)

        H, D, KV, I = cfg.hidden, cfg.head_dim, cfg.n_kv, cfg.inter
        self.embed = take(emb, (cfg.vocab, H))
        self.lm_head = take(head, (cfg.vocab, H))
        self.norm = take("model.norm.weight", (H,))
        self.layers = []
        for i in range(cfg.n_layers):
            p = f"model.layers.{i}."
            L = {
                "in_norm": take(p + "input_layernorm.weight", (H,)),
                "post_norm": take(p + "post_attention_layernorm.weight", (H,)),
                "wq": take(p + "self_attn.q_proj.weight", (cfg.n_heads * D, H)),
                "wk": take(p + "self_attn.k_proj.weight", (KV * D, H)),
                "wv": take(p + "self_attn.v_proj.weight", (KV * D, H)),
                "wo": take(p + "self_attn.o_proj.weight", (H, cfg.n_heads * D)),
            }
            if cfg.moe_layers[i]:
                E, Ie = cfg.n_experts, cfg.moe_inter
                if cfg.arch == "granitemoe":
                    mp = p + "block_sparse_moe."
                    L["router"] = take(mp + "router.layer.weight", (E, H))
                    win = take(mp + "input_linear.weight", (E, 2 * Ie, H))
                    wout = take(mp + "output_linear.weight", (E, H, Ie))
                    L["experts"] = [(win[e, :Ie], win[e, Ie:], wout[e]) for e in range(E)]
                    self.layers.append(L)
                    continue
                if cfg.arch == "mixtral":
                    mp, names = p + "block_sparse_moe.", ("w1", "w3", "w2")
                else:
                    mp, names = p + "mlp.", ("gate_proj", "up_proj", "down_proj")
                L["router"] = take(mp + "gate.weight", (E, H))
                L["experts"] = [(take(f"{mp}experts.{e}.{names[0]}.weight", (Ie, H)),
                                 take(f"{mp}experts.{e}.{names[1]}.weight", (Ie, H)),
                                 take(f"{mp}experts.{e}.{names[2]}.weight", (H, Ie)))
                                for e in range(E)]
            else:
                L["gate"] = take(p + "mlp.gate_proj.weight", (I, H))
                L["up"] = take(p + "mlp.up_proj.weight", (I, H))
                L["down"] = take(p + "mlp.down_proj.weight", (H, I))
            if cfg.qkv_bias:
                L["bq"] = take(p + "self_attn.q_proj.bias", (cfg.n_heads * D,))
                L["bk"] = take(p + "self_attn.k_proj.bias", (KV * D,))
                L["bv"] = take(p + "self_attn.v_proj.bias", (KV * D,))
            if cfg.o_bias:
                L["bo"] = take(p + "self_attn.o_proj.bias", (H,))
            if cfg.mlp_bias:
                L["bgate"] = take(p + "mlp.gate_proj.bias", (I,))
                L["bup"] = take(p + "mlp.up_proj.bias", (I,))
                L["bdown"] = take(p + "mlp.down_proj.bias", (H,))
            if cfg.qk_norm:
                L["q_norm"] = take(p + "self_attn.q_norm.weight", (D,))
                L["k_norm"] = take(p + "self_attn.k_norm.weight", (D,))
            self.layers.append(L)
        extra = [k for k in st if k not in used and not k.endswith("rotary_emb.inv_freq")]
        if extra:
            raise RefError(f"unused tensors in checkpoint: {sorted(extra)[:8]}")
        self.reset()

    def reset(self):
        # per layer: keys/values (n_cached, n_kv, head_dim), rotated keys
        self.k_cache = [None] * self.cfg.n_layers
        self.v_cache = [None] * self.cfg.n_layers
        self.n_cached = 0

    def rmsnorm(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + self.cfg.eps))

    def moe(self, h, L):
        """Sparse MoE block on rows h (n, H): softmax over all router logits
        (f32), top-k, optional renormalization, weighted sum of the chosen
        experts' SwiGLU outputs.  Written per expert with masks."""
        cfg = self.cfg
        probs = torch.softmax((h @ L["router"].T).float(), dim=-1)      # (n, E)
        w, sel = torch.topk(probs, cfg.top_k, dim=-1)                    # (n, K)
        if cfg.norm_topk:
            w = w / w.sum(dim=-1, keepdim=True)
        w = w.to(h.dtype)
        out = torch.zeros_like(h)
        for e, (g, u, d) in enumerate(L["experts"]):
            hit = sel == e                                               # (n, K)
            rows = hit.any(dim=-1)
            if not bool(rows.any()):
                continue
            xe = h[rows]
            ye = (torch.nn.functional.silu(xe @ g.T) * (xe @ u.T)) @ d.T
            out[rows] += (w * hit).sum(dim=-1)[rows][:, None] * ye
        return out

    @torch.no_grad()
    def forward(self, ids, hidden=False):
        """Runs tokens `ids` at positions n_cached.. and appends them to the
        KV cache.  Returns logits (len(ids), vocab) in the compute dtype, or
        with hidden=True the final-normed hidden states (len(ids), H)."""
        cfg = self.cfg
        n = len(ids)
        start = self.n_cached
        pos = torch.arange(start, start + n)
        cos, sin = rope_cos_sin(cfg, pos, start + n)
        cos, sin = cos.to(self.cdt)[:, None, :], sin.to(self.cdt)[:, None, :]
        x = self.embed[torch.tensor(ids, dtype=torch.long)] * cfg.embed_mult  # (n, H)
        H, D, NH, KV = cfg.hidden, cfg.head_dim, cfg.n_heads, cfg.n_kv
        kpos = torch.arange(0, start + n)
        for li, L in enumerate(self.layers):
            h = self.rmsnorm(x, L["in_norm"])
            q = h @ L["wq"].T
            k = h @ L["wk"].T
            v = h @ L["wv"].T
            if cfg.qkv_bias:
                q, k, v = q + L["bq"], k + L["bk"], v + L["bv"]
            q = q.view(n, NH, D)
            k = k.view(n, KV, D)
            v = v.view(n, KV, D)
            if cfg.qk_norm:
                q = self.rmsnorm(q, L["q_norm"])
                k = self.rmsnorm(k, L["k_norm"])
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if getattr(self, "kv_int8", False):  # --kv-int8: what sglc's int8 cache holds
                k, v = kv_int8_round(k), kv_int8_round(v)
            if self.k_cache[li] is None:
                self.k_cache[li], self.v_cache[li] = k, v
            else:
                self.k_cache[li] = torch.cat([self.k_cache[li], k], 0)
                self.v_cache[li] = torch.cat([self.v_cache[li], v], 0)
            K = self.k_cache[li].repeat_interleave(NH // KV, dim=1)  # (T, NH, D)
            V = self.v_cache[li].repeat_interleave(NH // KV, dim=1)
            scale = cfg.attn_scale if cfg.attn_scale is not None else 1.0 / math.sqrt(D)
            scores = torch.einsum("qhd,khd->hqk", q, K) * scale          # (NH, n, T)
            allowed = kpos[None, :] <= pos[:, None]                      # (n, T)
            w = cfg.windows[li]
            if w:
                allowed &= kpos[None, :] > pos[:, None] - w
            scores = scores.masked_fill(~allowed[None], float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            att = torch.einsum("hqk,khd->qhd", probs, V).reshape(n, NH * D)
            o = att @ L["wo"].T
            if cfg.o_bias:
                o = o + L["bo"]
            x = x + o * cfg.resid_mult
            h = self.rmsnorm(x, L["post_norm"])
            if "experts" in L:
                x = x + self.moe(h, L) * cfg.resid_mult
                continue
            g = h @ L["gate"].T
            u = h @ L["up"].T
            if cfg.mlp_bias:
                g, u = g + L["bgate"], u + L["bup"]
            m = (torch.nn.functional.silu(g) * u) @ L["down"].T
            if cfg.mlp_bias:
                m = m + L["bdown"]
            x = x + m * cfg.resid_mult
        self.n_cached += n
        x = self.rmsnorm(x, self.norm)
        if hidden:
            return x
        return (x @ self.lm_head.T) / cfg.logits_scaling

    def embed_last(self, prompt, dimensions=None):
        """SGLang's embedding pooling (Pooler LAST, normalize=True): the last
        token's final-normed hidden state, first `dimensions` values, divided
        by their L2 norm.  float64 numpy vector."""
        self.reset()
        h = self.forward(list(prompt), hidden=True)[-1].double()
        if dimensions:
            h = h[:dimensions]
        return (h / torch.clamp(h.norm(), min=1e-12)).numpy()

    def generate(self, prompt, max_new_tokens, ignore_eos=True, eos=None):
        """Greedy decode.  Returns (prefill logits (n_prompt, vocab) float32
        numpy, generated ids)."""
        self.reset()
        logits = self.forward(list(prompt))
        prefill = logits.float().numpy()
        out = []
        last = logits[-1]
        stop = set(self.cfg.eos if eos is None else eos)
        for i in range(max_new_tokens):
            tok = int(torch.argmax(last))
            out.append(tok)
            if not ignore_eos and tok in stop:
                break
            if i + 1 < max_new_tokens:
                last = self.forward([tok])[-1]
        return prefill, out


# ----------------------------------------------------------------------------
# Decoding ids for humans (SentencePiece-style vocab with byte fallback)


def decode_spm(pieces, ids, skip=(0, 1, 2)):
    """Decodes ids with a piece table: '▁' -> ' ', '<0xXX>' -> byte."""
    buf = bytearray()
    for i in ids:
        if i in skip:
            continue
        p = pieces[i]
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            buf.append(int(p[3:5], 16))
        else:
            buf += p.replace("\u2581", " ").encode("utf-8")
    return buf.decode("utf-8", errors="replace")


def load_pieces(model_dir):
    """id -> piece from tokenizer.json (model.vocab + added_tokens), or None."""
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]
    n = max(list(vocab.values()) + [a["id"] for a in tj.get("added_tokens", [])]) + 1
    pieces = [""] * n
    for p, i in vocab.items():
        pieces[i] = p
    for a in tj.get("added_tokens", []):
        pieces[a["id"]] = a["content"]
    return pieces


def parse_ids(s):
    try:
        ids = [int(x) for x in s.split(",") if x.strip() != ""]
    except ValueError:
        raise RefError(f"--input-ids must be comma-separated integers, got {s!r}")
    if not ids:
        raise RefError("--input-ids is empty")
    return ids


def kv_int8_round(x):
    """sglc's --kv-cache-dtype int8 on (n, n_kv, head_dim): per token and kv head,
    scale = absmax / 127, q = round-half-even(x / scale) clamped to [-127, 127],
    stored value q * scale (a head of zeros stays zero).  f32 like sglc's store."""
    x32 = x.float()
    sc = x32.abs().amax(-1, keepdim=True) / 127.0
    safe = torch.where(sc > 0, sc, torch.ones_like(sc))
    q = torch.round(x32 / safe).clamp(-127, 127)
    return torch.where(sc > 0, q * sc, torch.zeros_like(x32)).to(x.dtype)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--input-ids", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="bfloat16 = weights rounded to bf16, compute in f32")
    ap.add_argument("--compute", choices=["float32", "float64"], default="float32")
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="only 0 (greedy) is supported")
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--dump-logits")
    ap.add_argument("--kv-int8", action="store_true",
                    help="round K/V as sglc's --kv-cache-dtype int8 stores them")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--embed", action="store_true",
                    help="embedding model: --input-ids holds ';'-separated prompts; prints "
                         "{\"embeddings\": [[...], ...]} (last token, normalized)")
    ap.add_argument("--dimensions", type=int, default=0,
                    help="--embed: keep the first N values before normalizing (Matryoshka)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dynamic-rope", choices=["hf", "static"], default="hf",
                    help="rope_scaling dynamic: per-call seq_len like transformers (default) "
                         "or fixed max_position_embeddings*factor like vLLM/SGLang")
    a = ap.parse_args(argv)
    try:
        if a.temperature != 0:
            raise RefError("only --temperature 0 (greedy) is supported")
        torch.set_num_threads(a.threads)
        if a.embed:
            m = Model(a.model_path, a.dtype, a.compute, dynamic_mode=a.dynamic_rope)
            out = []
            for part in a.input_ids.split(";"):
                ids = parse_ids(part)
                bad = [i for i in ids if not 0 <= i < m.cfg.vocab]
                if bad or not ids:
                    raise RefError(f"bad prompt {part!r} for a vocab of {m.cfg.vocab}")
                out.append([float(v) for v in m.embed_last(ids, a.dimensions or None)])
            print(json.dumps({"embeddings": out}))
            return 0
        ids = parse_ids(a.input_ids)
        m = Model(a.model_path, a.dtype, a.compute, dynamic_mode=a.dynamic_rope)
        m.kv_int8 = a.kv_int8
        bad = [i for i in ids if not 0 <= i < m.cfg.vocab]
        if bad:
            raise RefError(f"input id {bad[0]} outside vocab of {m.cfg.vocab}")
        prefill, out = m.generate(ids, a.max_new_tokens, ignore_eos=a.ignore_eos)
        if a.dump_logits:
            prefill.astype("<f4").tofile(a.dump_logits)
        pieces = load_pieces(a.model_path)
        text = decode_spm(pieces, out) if pieces else None
        if a.json:
            print(json.dumps({"output_ids": out, "prompt_len": len(ids), "text": text}))
        else:
            print(" ".join(map(str, out)))
            if text is not None:
                print(text)
    except (RefError, safetensors_np.SafetensorsError, OSError, json.JSONDecodeError) as e:
        print(f"torch_ref: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
