#!/usr/bin/python3
"""Random EAGLE / EAGLE3 draft heads for TinyStories-656K, and an
independent PyTorch reference of their first draft step.

DESIGN
  make OUT TARGET   writes OUT/eagle1 (LlamaForCausalLMEagle: fc [H, 2H] +
                    bias over cat(embed, final-normed target hidden), one
                    Llama layer `layers.0.*` without input_layernorm, a
                    decoy embed_tokens the engine must ignore), OUT/eagle3
                    (LlamaForCausalLMEagle3: fc [H, 3H] over the residual
                    stream entering target layers (ids + 1, ascending),
                    `midlayer.*` with q/k/v over 2H = cat(input_layernorm(
                    embed), hidden_norm(hidden)), norm, lm_head over a
                    512-token draft vocabulary and d2t offsets),
                    OUT/eagle1_bf16 (eagle1 stored as BF16), OUT/wrong_h
                    (hidden_size 64) and OUT/nofile (config only).  Seeded
                    numpy weights, N(0, 1/fan_in) matrices, norms 1 + 0.1 N.
  fit OUT TARGET SEQS
                    an EAGLE-1 head fitted to the target's greedy outputs
                    SEQS (fit(): drafts that often come true there).
  check HEAD TARGET DUMP
                    DUMP (from test_spec_eagle) holds the token ids, the
                    engine's first-step logits of the last pair and its k
                    chain drafts.  The reference recomputes the target's
                    hidden states (its own Llama forward over the same
                    weights, tests/ref/torch_ref.py's loader), the head's
                    layer and the greedy chain, and exits 1 unless the
                    logits agree within 1e-4 relative (max |diff| /
                    max |ref|) and the chain ids are the same.
  Written from SGLang's llama_eagle.py / llama_eagle3.py layouts; no code
  copied.
"""
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import safetensors_np  # noqa: E402
import torch_ref  # noqa: E402

AUX_IDS = [0, -1, 0]  # EAGLE3 capture layers (+1, sorted: 0, 1, 1) for a 2-layer target


def head_config(tcfg, arch, H=None, extra=None):
    c = {
        "architectures": [arch], "model_type": "llama",
        "hidden_size": H or tcfg["hidden_size"], "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
        "vocab_size": tcfg["vocab_size"], "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "max_position_embeddings": tcfg["max_position_embeddings"], "tie_word_embeddings": False,
        "hidden_act": "silu", "torch_dtype": "float32",
    }
    c.update(extra or {})
    return c


def make(out, target):
    with open(os.path.join(target, "config.json")) as f:
        tcfg = json.load(f)
    rs = np.random.RandomState(1234)

    def mat(n, k):
        return (rs.standard_normal((n, k)) / math.sqrt(k)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rs.standard_normal(n)).astype(np.float32)

    def layer(prefix, H, ain, cfg, with_in_norm):
        hd = H // cfg["num_attention_heads"]
        qd, kvd, inter = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd, cfg["intermediate_size"]
        t = {
            prefix + "self_attn.q_proj.weight": mat(qd, ain), prefix + "self_attn.k_proj.weight": mat(kvd, ain),
            prefix + "self_attn.v_proj.weight": mat(kvd, ain), prefix + "self_attn.o_proj.weight": mat(H, qd),
            prefix + "mlp.gate_proj.weight": mat(inter, H), prefix + "mlp.up_proj.weight": mat(inter, H),
            prefix + "mlp.down_proj.weight": mat(H, inter), prefix + "post_attention_layernorm.weight": norm(H),
        }
        if with_in_norm:
            t[prefix + "input_layernorm.weight"] = norm(H)
        return t

    def write(name, cfg, tensors):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        if tensors is not None:
            safetensors_np.write(os.path.join(d, "model.safetensors"), tensors)

    H, V = tcfg["hidden_size"], tcfg["vocab_size"]
    c1 = head_config(tcfg, "LlamaForCausalLMEagle")
    t1 = {"fc.weight": mat(H, 2 * H), "fc.bias": (0.1 * rs.standard_normal(H)).astype(np.float32),
          "embed_tokens.weight": mat(V, H)}  # a decoy: SGLang uses the target's embeddings
    t1.update(layer("layers.0.", H, H, c1, False))
    write("eagle1", c1, t1)
    d = os.path.join(out, "eagle1_bf16")  # the same head stored as BF16 (published heads are)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(c1, torch_dtype="bfloat16"), f, indent=1)
    safetensors_np.write(os.path.join(d, "model.safetensors"), t1, dtype="BF16")

    Vd = 512
    c3 = head_config(tcfg, "LlamaForCausalLMEagle3",
                     extra={"draft_vocab_size": Vd, "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX_IDS}})
    hot = np.sort(rs.choice(V, Vd, replace=False)).astype(np.int64)
    t3 = {"fc.weight": mat(H, 3 * H), "norm.weight": norm(H), "lm_head.weight": mat(Vd, H),
          "d2t": hot - np.arange(Vd, dtype=np.int64), "t2d": np.isin(np.arange(V), hot)}
    t3.update(layer("midlayer.", H, 2 * H, c3, True))
    t3["midlayer.hidden_norm.weight"] = norm(H)
    write("eagle3", c3, t3)

    cw = head_config(tcfg, "LlamaForCausalLMEagle", H=64)
    tw = {"fc.weight": mat(64, 128)}
    tw.update(layer("layers.0.", 64, 64, cw, False))
    write("wrong_h", cw, tw)
    write("nofile", c1, None)


def fit(out, target, seqs_path):
    """OUT: an EAGLE-1 head whose drafts are often right on the given
    sequences (SEQS: a JSON list of token id lists, the target's own greedy
    outputs after their prompts), so that accepted drafts and tree-vs-chain
    accept lengths mean something on this 656K-parameter target.  EAGLE's
    training target is the next hidden state: fc is the ridge regression of
    the target's final-normed h[p+1] on cat(embed(tok[p+1]), h[p]) over
    those sequences (fitted to them, not a general head: about half of the
    first drafts come true there); the layer is a random one scaled by 0.05
    (its attention and MLP still move the logits, so a wrong draft mask or
    position still shows)."""
    with open(os.path.join(target, "config.json")) as f:
        tcfg = json.load(f)
    with open(seqs_path) as f:
        seqs = json.load(f)
    tm = torch_ref.Model(target)
    H = tm.embed.shape[1]
    xs, ys = [], []
    with torch.no_grad():
        for ids in seqs:
            if len(ids) < 3:
                continue
            _, final = target_states(tm, ids)
            emb = tm.embed[torch.tensor(ids)]
            xs.append(torch.cat([emb[1:-1], final[:-2]], -1))
            ys.append(final[1:-1])
    X = torch.cat(xs).double()
    Y = torch.cat(ys).double()
    Xb = torch.cat([X, torch.ones(X.shape[0], 1, dtype=torch.float64)], -1)
    A = Xb.T @ Xb + 1e-3 * torch.eye(Xb.shape[1], dtype=torch.float64)
    W = torch.linalg.solve(A, Xb.T @ Y).T  # (H, 2H + 1)
    c1 = head_config(tcfg, "LlamaForCausalLMEagle")
    rs = np.random.RandomState(4321)

    def mat(n, k, scale=1.0):
        return (scale * rs.standard_normal((n, k)) / math.sqrt(k)).astype(np.float32)

    hd = H // c1["num_attention_heads"]
    qd, kvd, inter = c1["num_attention_heads"] * hd, c1["num_key_value_heads"] * hd, c1["intermediate_size"]
    pre = "layers.0."
    t = {"fc.weight": W[:, :2 * H].float().numpy().copy(), "fc.bias": W[:, 2 * H].float().numpy().copy(),
         pre + "self_attn.q_proj.weight": mat(qd, H), pre + "self_attn.k_proj.weight": mat(kvd, H),
         pre + "self_attn.v_proj.weight": mat(kvd, H), pre + "self_attn.o_proj.weight": mat(H, qd, 0.05),
         pre + "mlp.gate_proj.weight": mat(inter, H), pre + "mlp.up_proj.weight": mat(inter, H),
         pre + "mlp.down_proj.weight": mat(H, inter, 0.05),
         pre + "post_attention_layernorm.weight": np.ones(H, dtype=np.float32)}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c1, f, indent=1)
    safetensors_np.write(os.path.join(out, "model.safetensors"), t)


# ---------------------------------------------------------------------------
# reference


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def target_states(tm, ids):
    """The target's residual stream entering each layer and its final-normed
    output, over ids (a plain forward, no cache)."""
    cfg = tm.cfg
    n = len(ids)
    pos = torch.arange(n)
    cos, sin = torch_ref.rope_cos_sin(cfg, pos, n)
    cos, sin = cos[:, None, :], sin[:, None, :]
    x = tm.embed[torch.tensor(ids)]
    D, NH, KV = cfg.head_dim, cfg.n_heads, cfg.n_kv
    mask = pos[None, :] <= pos[:, None]
    entering = []
    for L in tm.layers:
        entering.append(x.clone())
        h = tm.rmsnorm(x, L["in_norm"])
        q, k, v = (h @ L["wq"].T).view(n, NH, D), (h @ L["wk"].T).view(n, KV, D), (h @ L["wv"].T).view(n, KV, D)
        q = q * cos + torch_ref.rotate_half(q) * sin
        k = k * cos + torch_ref.rotate_half(k) * sin
        K, Vv = k.repeat_interleave(NH // KV, 1), v.repeat_interleave(NH // KV, 1)
        s = torch.einsum("qhd,khd->hqk", q, K) / math.sqrt(D)
        p = torch.softmax(s.masked_fill(~mask[None], float("-inf")), -1)
        x = x + torch.einsum("hqk,khd->qhd", p, Vv).reshape(n, NH * D) @ L["wo"].T
        h = tm.rmsnorm(x, L["post_norm"])
        x = x + (torch.nn.functional.silu(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
    entering.append(x.clone())
    return entering, tm.rmsnorm(x, tm.norm)


class Head:
    def __init__(self, d, tm):
        with open(os.path.join(d, "config.json")) as f:
            self.raw = json.load(f)
        self.eagle3 = "Eagle3" in self.raw["architectures"][0]
        tensors, _ = safetensors_np.read(os.path.join(d, "model.safetensors"))
        self.t = {k: torch.from_numpy(np.array(v, dtype=np.float32) if np.asarray(v).dtype.kind == "f"
                                      else np.array(v)) for k, v in tensors.items()}
        raw = dict(self.raw, architectures=["LlamaForCausalLM"])
        self.cfg = torch_ref.Config(raw)
        self.tm = tm
        self.pre = "midlayer." if self.eagle3 else "layers.0."
        self.keys, self.vals = [], []

    def w(self, n):
        return self.t[self.pre + n]

    def step(self, toks, hid, pos0):
        """Rows (tokens p+1, hidden p) at positions pos0..; returns
        (logits of the last row, output rows)."""
        cfg, eps, n = self.cfg, self.raw["rms_norm_eps"], len(toks)
        emb = self.tm.embed[torch.tensor(toks)]
        if not self.eagle3:
            x = torch.cat([emb, hid], -1) @ self.t["fc.weight"].T + self.t["fc.bias"]
            a = x
        else:
            x = hid @ self.t["fc.weight"].T if hid.shape[-1] != emb.shape[-1] else hid
            a = torch.cat([rms(emb, self.w("input_layernorm.weight"), eps),
                           rms(x, self.w("hidden_norm.weight"), eps)], -1)
        D, NH, KV = cfg.head_dim, cfg.n_heads, cfg.n_kv
        pos = torch.arange(pos0, pos0 + n)
        cos, sin = torch_ref.rope_cos_sin(cfg, pos, pos0 + n)
        cos, sin = cos[:, None, :], sin[:, None, :]
        q = (a @ self.w("self_attn.q_proj.weight").T).view(n, NH, D)
        k = (a @ self.w("self_attn.k_proj.weight").T).view(n, KV, D)
        v = (a @ self.w("self_attn.v_proj.weight").T).view(n, KV, D)
        q = q * cos + torch_ref.rotate_half(q) * sin
        k = k * cos + torch_ref.rotate_half(k) * sin
        self.keys = self.keys[:pos0] + list(k)
        self.vals = self.vals[:pos0] + list(v)
        K = torch.stack(self.keys).repeat_interleave(NH // KV, 1)
        Vv = torch.stack(self.vals).repeat_interleave(NH // KV, 1)
        kpos = torch.arange(len(self.keys))
        s = torch.einsum("qhd,khd->hqk", q, K) / math.sqrt(D)
        p = torch.softmax(s.masked_fill(~(kpos[None, :] <= pos[:, None])[None], float("-inf")), -1)
        r = torch.einsum("hqk,khd->qhd", p, Vv).reshape(n, NH * D) @ self.w("self_attn.o_proj.weight").T + x
        h = rms(r, self.w("post_attention_layernorm.weight"), eps)
        y = (torch.nn.functional.silu(h @ self.w("mlp.gate_proj.weight").T) * (h @ self.w("mlp.up_proj.weight").T)) \
            @ self.w("mlp.down_proj.weight").T + r
        if not self.eagle3:
            lg = y[-1] @ self.tm.lm_head.T
        else:
            lg = rms(y[-1], self.t["norm.weight"], eps) @ self.t["lm_head.weight"].T
        return lg, y

    def to_target(self, i):
        return int(i + self.t["d2t"][i]) if self.eagle3 else int(i)


def check(head_dir, target, dump, tol=1e-4):
    with open(dump) as f:
        d = json.load(f)
    ids, got, chain = d["ids"], torch.tensor(d["logits"], dtype=torch.float32), d["chain"]
    tm = torch_ref.Model(target)
    hd = Head(head_dir, tm)
    entering, final = target_states(tm, ids[:-1])
    if hd.eagle3:
        at = sorted(i + 1 for i in hd.raw["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
        hid = torch.cat([entering[a] for a in at], -1)
    else:
        hid = final
    lg, y = hd.step(ids[1:], hid, 0)
    err = float((lg - got).abs().max() / lg.abs().max())
    ref_chain = [hd.to_target(int(torch.argmax(lg)))]
    last = y[-1:]
    pos = len(ids) - 1
    while len(ref_chain) < len(chain):
        lg2, y2 = hd.step([ref_chain[-1]], last, pos)
        ref_chain.append(hd.to_target(int(torch.argmax(lg2))))
        last, pos = y2[-1:], pos + 1
    print(f"{os.path.basename(head_dir)}: first-step logits rel err {err:.3g}, chain {chain} ref {ref_chain}")
    ok = err <= tol and chain == ref_chain
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) == 5 and sys.argv[1] == "fit":
        fit(sys.argv[2], sys.argv[3], sys.argv[4])
        sys.exit(0)
    if len(sys.argv) in (5, 6) and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]) if len(sys.argv) == 6 else 1e-4))
    print(__doc__)
    sys.exit(2)
