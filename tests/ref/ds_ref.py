#!/usr/bin/python3
"""Independent PyTorch reference for Qwen2-MoE and DeepSeek V2 / V3 (MLA).

DESIGN
  Written from the architecture definitions (the hub repos'
  modeling_deepseek.py and transformers' Qwen2MoeSparseMoeBlock semantics,
  read, not copied; no transformers package here), next to torch_ref.py
  (which it reuses for safetensors loading and the rope_scaling inv_freq /
  attention factor).  One forward over a chunk of tokens with an explicit
  cache, so prefill + greedy decode follow HF generate.

  Qwen2MoeForCausalLM  Qwen2 attention (q/k/v bias, window rule as Qwen2);
                       MoE: softmax over all router logits (f32), top-k,
                       renormalized if norm_topk_prob; + the shared expert
                       (shared_expert_intermediate_size) scaled by
                       sigmoid(x . shared_expert_gate); dense layers where
                       mlp_only_layers / decoder_sparse_step say.
  DeepseekV2/V3ForCausalLM
    attention (MLA): q = q_proj(x) | q_b_proj(norm(q_a_proj(x))), split
      per head into q_nope (qk_nope_head_dim) and q_pe (qk_rope_head_dim);
      kv_a_proj_with_mqa(x) = [c_kv (kv_lora_rank) | k_pe (rope)];
      kv_b_proj(kv_a_layernorm(c_kv)) = per head [k_nope | v];
      rope on q_pe and k_pe the DeepSeek way: de-interleave (x0 x2 x4 ..
      x1 x3 ..) then rotate halves; keys k = [k_nope | k_pe] (k_pe shared
      by all heads); softmax scale (nope+rope)^-0.5 * mscale^2 with
      mscale = 0.1 * mscale_all_dim * ln(factor) + 1 when rope_scaling has
      mscale_all_dim.  Two cache formulations (mla_mode):
        "expanded"  HF's: per layer full K (n, nh, nope+rope) and V
                    (n, nh, v) are cached;
        "latent"    the compressed cache: per layer only c_kv (normed) and
                    the rotated k_pe are kept; each forward re-expands K/V
                    from them through kv_b_proj.
      Both must give the same logits (golden_ds.py checks this), which is
      the claim the C engine's compressed cache rests on.
    MoE (DeepSeekMoE): dense MLP on layers < first_k_dense_replace or with
      layer % moe_layer_freq != 0; else gate logits in f32, scores softmax
      (V2) or sigmoid (V3); topk_method greedy / group_limited_greedy
      (groups ranked by their max score, others masked to 0) / noaux_tc
      (choice = score + e_score_correction_bias, groups ranked by the sum of
      their top-2 choice values, others masked to -inf; weights gathered
      from the unbiased scores); if top_k > 1 and norm_topk_prob the
      weights are divided by (sum + 1e-20); routed_scaling_factor
      multiplies them (V2: only when not normalized; V3: always); + shared
      experts (n_shared_experts * moe_intermediate_size), unscaled.
  Precision: as torch_ref (f32 compute; --dtype bfloat16 rounds weights).
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402
from torch_ref import RefError  # noqa: E402


class DSConfig:
    def __init__(self, d):
        self.raw = d
        arch = (d.get("architectures") or [""])[0]
        table = {"Qwen2MoeForCausalLM": "qwen2_moe", "DeepseekV2ForCausalLM": "deepseek_v2",
                 "DeepseekV3ForCausalLM": "deepseek_v3"}
        if arch not in table:
            raise RefError(f"ds_ref: unsupported architecture {arch!r}")
        self.arch = a = table[arch]
        g = d.get
        self.hidden = int(g("hidden_size"))
        self.n_layers = int(g("num_hidden_layers"))
        self.n_heads = int(g("num_attention_heads"))
        self.n_kv = int(g("num_key_value_heads") or self.n_heads)
        self.inter = int(g("intermediate_size"))
        self.vocab = int(g("vocab_size"))
        self.eps = float(g("rms_norm_eps", 1e-6))
        self.rope_theta = float(g("rope_theta", 10000.0))
        self.max_pos = int(g("max_position_embeddings", 2048))
        self.tie = bool(g("tie_word_embeddings", False))
        rs = g("rope_scaling")
        if rs is not None:
            rs = dict(rs)
            rs["rope_type"] = rs.get("rope_type", rs.get("type", "default"))
        self.rope_scaling = rs
        self.dynamic_mode = "hf"
        self.rope_interleave = True      # DeepSeek's layout (ablation: False)
        self.mla = a != "qwen2_moe"
        self.shared_sigmoid = a == "qwen2_moe"
        self.use_shared = True           # ablation switch
        self.bias_off = False            # ablation: V3 correction bias ignored
        self.mscale_off = False          # ablation: plain (nope+rope)^-0.5
        eos = g("eos_token_id")
        self.eos = set(eos if isinstance(eos, list) else ([eos] if eos is not None else []))
        if a == "qwen2_moe":
            hd = g("head_dim")
            self.head_dim = int(hd) if hd else self.hidden // self.n_heads
            self.n_experts = int(g("num_experts", 60))
            self.top_k = int(g("num_experts_per_tok", 4))
            self.moe_inter = int(g("moe_intermediate_size", 1408))
            self.shared_inter = int(g("shared_expert_intermediate_size", 5632))
            self.norm_topk = bool(g("norm_topk_prob", False))
            step = int(g("decoder_sparse_step", 1))
            only = set(g("mlp_only_layers") or [])
            self.moe_layers = [i not in only and self.n_experts > 0 and (i + 1) % step == 0
                               for i in range(self.n_layers)]
            sw = g("sliding_window")
            use = bool(g("use_sliding_window", False)) and sw
            mwl = int(g("max_window_layers", self.n_layers) or 0)
            self.windows = [int(sw) if use and i >= mwl else None for i in range(self.n_layers)]
            self.score, self.method, self.n_group, self.topk_group = "softmax", "greedy", 1, 1
            self.rsf, self.scale_always = 1.0, False
            return
        v3 = a == "deepseek_v3"
        self.q_lora = g("q_lora_rank", 1536 if v3 else None) or 0
        self.kv_lora = int(g("kv_lora_rank", 512))
        self.nope = int(g("qk_nope_head_dim", 128))
        self.rope = int(g("qk_rope_head_dim", 64))
        self.v_dim = int(g("v_head_dim", 128))
        self.head_dim = self.rope  # what rope_parameters works on
        self.n_experts = int(g("n_routed_experts", 256 if v3 else 0) or 0)
        self.top_k = int(g("num_experts_per_tok", 8 if v3 else 0) or 0)
        self.moe_inter = int(g("moe_intermediate_size", 2048 if v3 else 1407))
        self.shared_inter = int(g("n_shared_experts", 1 if v3 else 0) or 0) * self.moe_inter
        fk = int(g("first_k_dense_replace", 3 if v3 else 0))
        freq = int(g("moe_layer_freq", 1))
        self.moe_layers = [self.n_experts > 0 and i >= fk and i % freq == 0
                           for i in range(self.n_layers)]
        self.norm_topk = bool(g("norm_topk_prob", v3))
        self.score = g("scoring_func", "sigmoid" if v3 else "softmax")
        self.method = g("topk_method", "noaux_tc" if v3 else "greedy")
        self.n_group = int(g("n_group", 8 if v3 else 1) or 1)
        self.topk_group = int(g("topk_group", 4 if v3 else 1) or 1)
        self.rsf = float(g("routed_scaling_factor", 2.5 if v3 else 1.0))
        self.scale_always = v3
        self.windows = [None] * self.n_layers


class DSModel:
    def __init__(self, model_dir, dtype="float32", config_override=None, mla_mode="expanded",
                 kv_bf16=False, kv_int8=False):
        """kv_bf16: cached values are rounded to bf16 (what a bf16 KV cache
        stores: K / V, or for mla_mode "latent" the latent + rope key).
        kv_int8 (mla_mode "latent" only): the latent row [c_kv | k_pe] is
        rounded as sglc's --kv-cache-dtype int8 stores it, one head with one
        scale per token (torch_ref.kv_int8_round)."""
        with open(os.path.join(model_dir, "config.json")) as f:
            raw = json.load(f)
        raw.update(config_override or {})
        self.cfg = cfg = DSConfig(raw)
        self.mla_mode = mla_mode
        self.kv_int8 = kv_int8
        if kv_int8 and mla_mode != "latent":
            raise RefError("kv_int8 is for mla_mode latent")
        self.kv_round = ((lambda t: t.to(torch.bfloat16).to(torch.float32)) if kv_bf16
                         else (lambda t: t))
        st = torch_ref.load_state(model_dir)
        used = set()

        def take(name, shape):
            if name not in st:
                raise RefError(f"missing tensor {name}")
            t = st[name]
            if list(t.shape) != list(shape):
                raise RefError(f"{name}: shape {list(t.shape)} != expected {list(shape)}")
            used.add(name)
            if dtype == "bfloat16" and not name.endswith("e_score_correction_bias"):
                t = t.to(torch.bfloat16).to(torch.float32)  # (the bias stays f32, as sglc keeps it)
            return t

        H, NH = cfg.hidden, cfg.n_heads
        self.embed = take("model.embed_tokens.weight", (cfg.vocab, H))
        self.lm_head = (take("lm_head.weight", (cfg.vocab, H)) if "lm_head.weight" in st
                        else self.embed)
        self.norm = take("model.norm.weight", (H,))
        self.layers = []
        for i in range(cfg.n_layers):
            p = f"model.layers.{i}."
            L = {"in_norm": take(p + "input_layernorm.weight", (H,)),
                 "post_norm": take(p + "post_attention_layernorm.weight", (H,))}
            a = p + "self_attn."
            if cfg.mla:
                qhd = cfg.nope + cfg.rope
                if cfg.q_lora:
                    L["q_a"] = take(a + "q_a_proj.weight", (cfg.q_lora, H))
                    L["q_a_norm"] = take(a + "q_a_layernorm.weight", (cfg.q_lora,))
                    L["q_b"] = take(a + "q_b_proj.weight", (NH * qhd, cfg.q_lora))
                else:
                    L["wq"] = take(a + "q_proj.weight", (NH * qhd, H))
                L["kv_a"] = take(a + "kv_a_proj_with_mqa.weight", (cfg.kv_lora + cfg.rope, H))
                L["kv_a_norm"] = take(a + "kv_a_layernorm.weight", (cfg.kv_lora,))
                L["kv_b"] = take(a + "kv_b_proj.weight", (NH * (cfg.nope + cfg.v_dim), cfg.kv_lora))
                L["wo"] = take(a + "o_proj.weight", (H, NH * cfg.v_dim))
            else:
                D, KV = cfg.head_dim, cfg.n_kv
                L["wq"] = take(a + "q_proj.weight", (NH * D, H))
                L["wk"] = take(a + "k_proj.weight", (KV * D, H))
                L["wv"] = take(a + "v_proj.weight", (KV * D, H))
                L["bq"] = take(a + "q_proj.bias", (NH * D,))
                L["bk"] = take(a + "k_proj.bias", (KV * D,))
                L["bv"] = take(a + "v_proj.bias", (KV * D,))
                L["wo"] = take(a + "o_proj.weight", (H, NH * D))
            mp = p + "mlp."
            if cfg.moe_layers[i]:
                E, Ie = cfg.n_experts, cfg.moe_inter
                L["router"] = take(mp + "gate.weight", (E, H))
                if cfg.method == "noaux_tc":
                    L["bias"] = take(mp + "gate.e_score_correction_bias", (E,))
                L["experts"] = [(take(f"{mp}experts.{e}.gate_proj.weight", (Ie, H)),
                                 take(f"{mp}experts.{e}.up_proj.weight", (Ie, H)),
                                 take(f"{mp}experts.{e}.down_proj.weight", (H, Ie)))
                                for e in range(E)]
                if cfg.shared_inter:
                    sp = mp + ("shared_expert." if cfg.arch == "qwen2_moe" else "shared_experts.")
                    Is = cfg.shared_inter
                    L["shared"] = (take(sp + "gate_proj.weight", (Is, H)),
                                   take(sp + "up_proj.weight", (Is, H)),
                                   take(sp + "down_proj.weight", (H, Is)))
                    if cfg.shared_sigmoid:
                        L["shared_gate"] = take(mp + "shared_expert_gate.weight", (1, H))
            else:
                L["gate"] = take(mp + "gate_proj.weight", (cfg.inter, H))
                L["up"] = take(mp + "up_proj.weight", (cfg.inter, H))
                L["down"] = take(mp + "down_proj.weight", (H, cfg.inter))
            self.layers.append(L)
        extra = [k for k in st if k not in used and k != "lm_head.weight"]
        if extra:
            raise RefError(f"unused tensors in checkpoint: {sorted(extra)[:8]}")
        self.reset()

    def reset(self):
        n = self.cfg.n_layers
        self.cache = [None] * n   # per layer: tuple of cached tensors
        self.n_cached = 0

    def rmsnorm(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + self.cfg.eps))

    @staticmethod
    def swiglu(x, g, u, d):
        return (torch.nn.functional.silu(x @ g.T) * (x @ u.T)) @ d.T

    # -- routing ---------------------------------------------------------
    def route(self, h, L):
        cfg = self.cfg
        n, E, K = h.shape[0], cfg.n_experts, cfg.top_k
        logits = h.float() @ L["router"].float().T
        scores = logits.softmax(-1) if cfg.score == "softmax" else logits.sigmoid()
        if cfg.method == "greedy":
            w, idx = torch.topk(scores, K, dim=-1)
        else:
            G = cfg.n_group
            if cfg.method == "group_limited_greedy":
                choice = scores
                gsc = scores.view(n, G, -1).max(dim=-1).values
            else:
                bias = L["bias"] * (0.0 if cfg.bias_off else 1.0)
                choice = scores + bias[None, :]
                gsc = choice.view(n, G, -1).topk(2, dim=-1)[0].sum(dim=-1)
            gidx = torch.topk(gsc, cfg.topk_group, dim=-1)[1]
            gmask = torch.zeros_like(gsc).scatter_(1, gidx, 1).bool()
            emask = gmask[:, :, None].expand(n, G, E // G).reshape(n, E)
            fill = 0.0 if cfg.method == "group_limited_greedy" else float("-inf")
            _, idx = torch.topk(choice.masked_fill(~emask, fill), K, dim=-1)
            w = scores.gather(1, idx)
        if cfg.arch == "qwen2_moe":
            if cfg.norm_topk:
                w = w / w.sum(-1, keepdim=True)
        else:
            norm = K > 1 and cfg.norm_topk
            if norm:
                w = w / (w.sum(-1, keepdim=True) + 1e-20)
            if cfg.scale_always or not norm:
                w = w * cfg.rsf
        return w, idx

    def moe(self, h, L):
        w, sel = self.route(h, L)
        out = torch.zeros_like(h)
        for e, (g, u, d) in enumerate(L["experts"]):
            hit = sel == e
            rows = hit.any(dim=-1)
            if not bool(rows.any()):
                continue
            out[rows] += (w * hit).sum(dim=-1)[rows][:, None] * self.swiglu(h[rows], g, u, d)
        if "shared" in L and self.cfg.use_shared:
            s = self.swiglu(h, *L["shared"])
            if "shared_gate" in L and self.cfg.shared_sigmoid:
                s = torch.sigmoid(h @ L["shared_gate"].T) * s
            out = out + s
        return out

    # -- attention -------------------------------------------------------
    def rope_tables(self, pos, seq_len):
        inv, attn = torch_ref.rope_parameters(self.cfg, seq_len)
        freqs = pos.float()[:, None] * inv.float()[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos() * attn, emb.sin() * attn

    def rope_ds(self, x, cos, sin):
        """x (n, heads, d): DeepSeek's layout (de-interleave, then halves)."""
        n, hh, d = x.shape
        if self.cfg.rope_interleave:
            x = x.view(n, hh, d // 2, 2).transpose(3, 2).reshape(n, hh, d)
        return x * cos[:, None, :] + torch_ref.rotate_half(x) * sin[:, None, :]

    def softmax_scale(self):
        cfg = self.cfg
        s = (cfg.nope + cfg.rope) ** -0.5
        rs = cfg.rope_scaling
        if rs is not None and not cfg.mscale_off:
            ma = rs.get("mscale_all_dim", 0)
            if ma:
                f = float(rs["factor"])
                m = 1.0 if f <= 1 else 0.1 * ma * math.log(f) + 1.0
                s = s * m * m
        return s

    def attend(self, q, K, V, li, pos, kpos, scale):
        allowed = kpos[None, :] <= pos[:, None]
        w = self.cfg.windows[li]
        if w:
            allowed &= kpos[None, :] > pos[:, None] - w
        sc = torch.einsum("qhd,khd->hqk", q, K) * scale
        sc = sc.masked_fill(~allowed[None], float("-inf"))
        return torch.einsum("hqk,khd->qhd", torch.softmax(sc, dim=-1), V)

    def mla(self, h, L, li, pos, kpos, cos, sin):
        cfg = self.cfg
        n, NH, nope, rope, vd = h.shape[0], cfg.n_heads, cfg.nope, cfg.rope, cfg.v_dim
        if cfg.q_lora:
            q = self.rmsnorm(h @ L["q_a"].T, L["q_a_norm"]) @ L["q_b"].T
        else:
            q = h @ L["wq"].T
        q = q.view(n, NH, nope + rope)
        q_nope, q_pe = q[..., :nope], self.rope_ds(q[..., nope:], cos, sin)
        kva = h @ L["kv_a"].T
        c_kv = self.rmsnorm(kva[:, :cfg.kv_lora], L["kv_a_norm"])
        k_pe = self.rope_ds(kva[:, None, cfg.kv_lora:], cos, sin)       # (n, 1, rope)

        def expand(c):
            kv = (c @ L["kv_b"].T).view(c.shape[0], NH, nope + vd)
            return kv[..., :nope], kv[..., nope:]

        if self.mla_mode == "latent":
            # compressed cache + kv_b_proj absorbed into the query and the
            # output: q_lat[h] = Wk[h]^T q_nope[h]; scores over [c | k_pe];
            # out[h] = Wv[h] (sum_j p_j c_j).  Never forms K or V.
            old = self.cache[li]
            c_kv, k_pe = self.kv_round(c_kv), self.kv_round(k_pe)
            if self.kv_int8:
                row = torch_ref.kv_int8_round(torch.cat([c_kv, k_pe[:, 0]], -1)[:, None, :])[:, 0]
                c_kv, k_pe = row[:, :cfg.kv_lora], row[:, None, cfg.kv_lora:]
            C = c_kv if old is None else torch.cat([old[0], c_kv], 0)
            P = k_pe[:, 0] if old is None else torch.cat([old[1], k_pe[:, 0]], 0)
            self.cache[li] = (C, P)
            kvb = L["kv_b"].view(NH, nope + vd, cfg.kv_lora)
            wk, wv = kvb[:, :nope], kvb[:, nope:]                       # (NH, nope|v, kvr)
            q_lat = torch.einsum("qhd,hdr->qhr", q_nope, wk)            # (n, NH, kvr)
            sc = (torch.einsum("qhr,kr->hqk", q_lat, C) +
                  torch.einsum("qhd,kd->hqk", q_pe, P)) * self.softmax_scale()
            allowed = kpos[None, :] <= pos[:, None]
            sc = sc.masked_fill(~allowed[None], float("-inf"))
            o_lat = torch.einsum("hqk,kr->qhr", torch.softmax(sc, dim=-1), C)
            att = torch.einsum("qhr,hvr->qhv", o_lat, wv)
            return att.reshape(n, NH * vd) @ L["wo"].T
        else:
            k_nope, v = expand(c_kv)
            k = self.kv_round(torch.cat([k_nope, k_pe.expand(-1, NH, -1)], dim=-1))
            v = self.kv_round(v)
            old = self.cache[li]
            K = k if old is None else torch.cat([old[0], k], 0)
            V = v if old is None else torch.cat([old[1], v], 0)
            self.cache[li] = (K, V)
        qf = torch.cat([q_nope, q_pe], dim=-1)
        att = self.attend(qf, K, V, li, pos, kpos, self.softmax_scale())
        return att.reshape(n, NH * vd) @ L["wo"].T

    def mha(self, h, L, li, pos, kpos, cos, sin):
        cfg = self.cfg
        n, NH, KV, D = h.shape[0], cfg.n_heads, cfg.n_kv, cfg.head_dim
        q = (h @ L["wq"].T + L["bq"]).view(n, NH, D)
        k = (h @ L["wk"].T + L["bk"]).view(n, KV, D)
        v = (h @ L["wv"].T + L["bv"]).view(n, KV, D)
        q = q * cos[:, None, :] + torch_ref.rotate_half(q) * sin[:, None, :]
        k = self.kv_round(k * cos[:, None, :] + torch_ref.rotate_half(k) * sin[:, None, :])
        v = self.kv_round(v)
        old = self.cache[li]
        K = k if old is None else torch.cat([old[0], k], 0)
        V = v if old is None else torch.cat([old[1], v], 0)
        self.cache[li] = (K, V)
        att = self.attend(q, K.repeat_interleave(NH // KV, 1), V.repeat_interleave(NH // KV, 1),
                          li, pos, kpos, 1.0 / math.sqrt(D))
        return att.reshape(n, NH * D) @ L["wo"].T

    @torch.no_grad()
    def forward(self, ids):
        cfg = self.cfg
        n, start = len(ids), self.n_cached
        pos = torch.arange(start, start + n)
        kpos = torch.arange(0, start + n)
        cos, sin = self.rope_tables(pos, start + n)
        x = self.embed[torch.tensor(ids, dtype=torch.long)]
        for li, L in enumerate(self.layers):
            h = self.rmsnorm(x, L["in_norm"])
            att = self.mla if cfg.mla else self.mha
            x = x + att(h, L, li, pos, kpos, cos, sin)
            h = self.rmsnorm(x, L["post_norm"])
            if "experts" in L:
                x = x + self.moe(h, L)
            else:
                x = x + self.swiglu(h, L["gate"], L["up"], L["down"])
        self.n_cached += n
        return self.rmsnorm(x, self.norm) @ self.lm_head.T

    def generate(self, prompt, max_new_tokens, ignore_eos=True):
        self.reset()
        logits = self.forward(list(prompt))
        prefill = logits.float().numpy()
        out, last = [], logits[-1]
        for i in range(max_new_tokens):
            tok = int(torch.argmax(last))
            out.append(tok)
            if not ignore_eos and tok in self.cfg.eos:
                break
            if i + 1 < max_new_tokens:
                last = self.forward([tok])[-1]
        return prefill, out
