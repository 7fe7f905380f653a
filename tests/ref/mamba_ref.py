#!/usr/bin/python3
"""NemotronHForCausalLM (hybrid Mamba2): a tiny random-weight model, a naive
PyTorch reference written for this test, and the checks against sglc.

DESIGN
  The reference follows the architecture as transformers' modeling_nemotron_h
  (NemotronHBlock, Zamba2's Mamba2 mixer torch_forward, Zamba2RMSNormGated,
  Jamba attention) defines it, written here from scratch in float64 and
  deliberately naive -- the Mamba2 recurrence runs token by token over the
  whole sequence, with no chunking of any kind, so it shares nothing with
  sglc's C scan but the math:
    block:   x = x + mixer(rmsnorm(x))                  (backbone.layers.i.norm)
    'M':     zxbcdt = h in_proj^T = [z (di) | xBC (di + 2GN) | dt (nh)]
             xBC = silu(causal depthwise conv1d(xBC) + bias)   (kernel K, left zero pad)
             x, B, C = split(xBC, [di, GN, GN]); head h uses group h // (nh / G)
             dt = clamp(softplus(dt + dt_bias), time_step_limit); A = -exp(A_log)
             S_t = S_{t-1} exp(dt A) + dt x_t B_t^T ;  y_t = S_t C_t + D x_t
             y = rmsnorm_groups(y * silu(z)) * norm.weight   (groups of di / G)
             out = y out_proj^T
    '*':     causal GQA attention, no positional encoding, scale 1/sqrt(head_dim)
    '-':     down(relu(up(h))^2)
    final:   rmsnorm(norm_f) -> lm_head
  The tiny config keeps the field names and kinds of the real
  nvidia/Nemotron-H-8B-Base-8K config.json (tests/data/configs, source named
  inside) and shrinks the sizes; it has all three block kinds, several Mamba
  heads per group (G = 2), a conv kernel of 4 and a state size of 16.

  The check (`check`): each entry of ABLATIONS (a feature switched off in
  the reference) moves the prompt logits by more than 1e-2, 100x the
  tolerance; `sglc generate` prompt logits within 1e-4 relative
  and 8 greedy ids identical; through the scheduler (`generate --requests`,
  two requests of 24 and 13 tokens together) the prompt logprobs and the
  output ids equal the reference with the prompt in one chunk, in chunks of
  5 and token by token (--chunked-prefill-size 1), and with a single state
  slot (--max-mamba-cache-size 1: the second request waits for the first
  one's slot, which must come back clean); bf16 SSM states stay within
  2e-2 (token by token, so each step's state is stored rounded) and must
  differ from f32 ones.

  LoRA (`lora`): random PEFT adapters in NemotronH's module names
  (base_model.model.backbone.layers.N.mixer.{q,k,v,o,up,down}_proj,
  backbone.embeddings, lm_head), the reference on the merged weights
  (W + scale B A; the embedding E + scale (B A)^T): `generate --lora-path`
  prompt logits within 1e-4 relative and greedy ids equal per adapter; one
  `generate --requests` batch of three adapters + the base equal to the
  reference and to each request alone; adapters on a Mamba2 mixer
  (in_proj, out_proj) or a q_proj on a Mamba2 layer refused at start-up
  and by /load_lora_adapter (400) naming the tensor and the layer, the
  server serving on afterwards.

Usage: mamba_ref.py build DIR                 write the tiny model into DIR
       mamba_ref.py ref DIR IDS N OUT.json [ADAPTER_DIR]
                                               reference: prompt logits
                                               (log-softmax) and N greedy ids
                                               (on the merged weights of ADAPTER_DIR)
       mamba_ref.py lora SGLC CACHE_DIR         the LoRA check above
       mamba_ref.py check SGLC CACHE_DIR [--quick]
                                               the golden check above (--quick:
                                               generate, one chunk, token by token)
"""
import subprocess
import tempfile
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import safetensors_np  # noqa: E402

BASE = os.path.join(ROOT, "tests", "data", "configs", "nvidia__Nemotron-H-8B-Base-8K.json")
VOCAB = 384


def tiny_config():
    with open(BASE) as f:
        cfg = json.load(f)
    cfg.pop("_sglc_source", None)
    cfg.update(hidden_size=64, hybrid_override_pattern="M*-M-*M", num_hidden_layers=7,
               num_attention_heads=4, num_key_value_heads=2, attention_head_dim=16,
               intermediate_size=96, mamba_num_heads=8, mamba_head_dim=8, n_groups=2,
               ssm_state_size=16, conv_kernel=4, chunk_size=8, vocab_size=VOCAB,
               max_position_embeddings=1024, torch_dtype="float32")
    return cfg


def build(d):
    cfg = tiny_config()
    os.makedirs(d, exist_ok=True)
    rng = np.random.RandomState(1234)
    H, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    nh, P, G, N, K = (cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["n_groups"],
                      cfg["ssm_state_size"], cfg["conv_kernel"])
    di, cd = nh * P, nh * P + 2 * G * N
    NA, NKV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["attention_head_dim"]

    def lin(o, i):
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    t = {"backbone.embeddings.weight": rng.standard_normal((V, H)).astype(np.float32)}
    for i, k in enumerate(cfg["hybrid_override_pattern"]):
        p = f"backbone.layers.{i}."
        t[p + "norm.weight"] = norm(H)
        m = p + "mixer."
        if k == "M":
            t[m + "in_proj.weight"] = lin(di + cd + nh, H)
            t[m + "conv1d.weight"] = (0.5 * rng.standard_normal((cd, 1, K))).astype(np.float32)
            t[m + "conv1d.bias"] = (0.1 * rng.standard_normal(cd)).astype(np.float32)
            t[m + "A_log"] = np.log(rng.uniform(1, 16, nh)).astype(np.float32)
            dt = np.exp(rng.uniform(np.log(1e-3), np.log(0.1), nh))
            t[m + "dt_bias"] = (dt + np.log(-np.expm1(-dt))).astype(np.float32)  # inverse softplus
            t[m + "D"] = norm(nh)
            t[m + "norm.weight"] = norm(di)
            t[m + "out_proj.weight"] = lin(H, di)
        elif k == "*":
            t[m + "q_proj.weight"] = lin(NA * D, H)
            t[m + "k_proj.weight"] = lin(NKV * D, H)
            t[m + "v_proj.weight"] = lin(NKV * D, H)
            t[m + "o_proj.weight"] = lin(H, NA * D)
        else:
            t[m + "up_proj.weight"] = lin(I, H)
            t[m + "down_proj.weight"] = lin(H, I)
    t["backbone.norm_f.weight"] = norm(H)
    t["lm_head.weight"] = lin(V, H)
    safetensors_np.write(os.path.join(d, "model.safetensors"), t)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


# Ablations: each switches one feature off (or does it the wrong way) in the
# reference; `check` shows each moves the prompt logits far beyond the
# tolerance, so the comparison with sglc fails if sglc ignores the feature.
ABLATIONS = {
    "conv1d": "the depthwise causal conv1d skipped (xBC passed through)",
    "conv_bias": "the conv1d bias left out",
    "conv_silu": "no SiLU after the conv1d",
    "dt_bias": "dt_bias left out of softplus(dt + dt_bias)",
    "softplus": "dt used without softplus (relu instead)",
    "A_decay": "no state decay (A = 0)",
    "D_skip": "the D x_t skip left out",
    "z_gate": "no y * silu(z) gate",
    "group_norm": "one RMSNorm over d_inner instead of n_groups groups",
    "group_map": "head h reads group h % G instead of h // (nh / G)",
    "relu2": "relu instead of relu^2 in the MLP blocks",
    "gqa_map": "KV head of query head h taken as h % nkv instead of h // (nh / nkv)",
    "norm_f": "the final norm_f left out",
}


def forward(W, cfg, ids, ablate=None):
    """Logits (T, V) of the prompt ids, float64, everything token by token.
    ablate: None or one key of ABLATIONS."""
    ab = ablate or ""
    eps = cfg["layer_norm_epsilon"]
    nh, P, G, N, K = (cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["n_groups"],
                      cfg["ssm_state_size"], cfg["conv_kernel"])
    di, GN = nh * P, G * N
    NA, NKV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["attention_head_dim"]
    lo, hi = 0.0, math.inf
    T = len(ids)
    x = W["backbone.embeddings.weight"][torch.tensor(ids)]
    for i, k in enumerate(cfg["hybrid_override_pattern"]):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        h = rmsnorm(x, W[p + "norm.weight"], eps)
        if k == "M":
            zx = h @ W[m + "in_proj.weight"].T
            z, xbc, dt = zx[:, :di], zx[:, di:di + di + 2 * GN], zx[:, di + di + 2 * GN:]
            w = W[m + "conv1d.weight"][:, 0, :]  # (cd, K)
            pad = torch.cat([torch.zeros(K - 1, xbc.shape[1], dtype=xbc.dtype), xbc], 0)
            conv = torch.stack([(pad[t:t + K].T * w).sum(-1) for t in range(T)], 0)
            if ab == "conv1d":
                conv = xbc
            if ab != "conv_bias":
                conv = conv + W[m + "conv1d.bias"]
            if ab != "conv_silu":
                conv = conv * torch.sigmoid(conv)
            xs, B, C = conv[:, :di], conv[:, di:di + GN], conv[:, di + GN:]
            A = -torch.exp(W[m + "A_log"]) * (0.0 if ab == "A_decay" else 1.0)
            gsel = (torch.arange(nh) % G) if ab == "group_map" else torch.arange(nh) // (nh // G)
            S = torch.zeros(nh, P, N, dtype=torch.float64)
            ys = []
            for t in range(T):
                dpre = dt[t] + (0.0 if ab == "dt_bias" else W[m + "dt_bias"])
                sp = torch.relu(dpre) if ab == "softplus" else torch.nn.functional.softplus(dpre)
                d = sp.clamp(lo, hi)  # (nh)
                xt = xs[t].view(nh, P)
                Bt = B[t].view(G, N)[gsel]  # (nh, N)
                Ct = C[t].view(G, N)[gsel]
                S = S * torch.exp(d * A)[:, None, None] + (d[:, None] * xt)[:, :, None] * Bt[:, None, :]
                skip = 0.0 if ab == "D_skip" else W[m + "D"][:, None] * xt
                ys.append(((S * Ct[:, None, :]).sum(-1) + skip).reshape(di))
            y = torch.stack(ys, 0)
            if ab != "z_gate":
                y = y * (z * torch.sigmoid(z))
            yg = y.view(T, 1, di) if ab == "group_norm" else y.view(T, G, di // G)
            yg = yg * torch.rsqrt((yg * yg).mean(-1, keepdim=True) + eps)
            out = (yg.reshape(T, di) * W[m + "norm.weight"]) @ W[m + "out_proj.weight"].T
        elif k == "*":
            q = (h @ W[m + "q_proj.weight"].T).view(T, NA, D)
            kv_of = (torch.arange(NA) % NKV) if ab == "gqa_map" else torch.arange(NA) // (NA // NKV)
            kk = (h @ W[m + "k_proj.weight"].T).view(T, NKV, D)[:, kv_of]
            v = (h @ W[m + "v_proj.weight"].T).view(T, NKV, D)[:, kv_of]
            s = torch.einsum("qhd,khd->hqk", q, kk) / math.sqrt(D)
            s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -math.inf)
            att = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v).reshape(T, NA * D)
            out = att @ W[m + "o_proj.weight"].T
        else:
            u = torch.relu(h @ W[m + "up_proj.weight"].T)
            out = (u if ab == "relu2" else u * u) @ W[m + "down_proj.weight"].T
        x = x + out
    if ab == "norm_f":
        return x @ W["lm_head.weight"].T
    return rmsnorm(x, W["backbone.norm_f.weight"], eps) @ W["lm_head.weight"].T


LORA_PRE = "base_model.model."


def write_adapter(d, out, targets, layers, r, alpha, seed, rslora=False):
    """A random PEFT folder adapting `targets` (mixer module names, "lm_head",
    "embeddings") on `layers` of the tiny model in d (a dict: per target)."""
    W = safetensors_np.read(os.path.join(d, "model.safetensors"))[0]
    rng = np.random.RandomState(seed)
    os.makedirs(out, exist_ok=True)
    t = {}
    for mod in targets:
        if mod == "embeddings":
            V, H = W["backbone.embeddings.weight"].shape
            t[LORA_PRE + "backbone.embeddings.lora_embedding_A"] = rng.standard_normal((r, V)).astype(np.float32) * 0.3
            t[LORA_PRE + "backbone.embeddings.lora_embedding_B"] = rng.standard_normal((H, r)).astype(np.float32) * 0.3
            continue
        ls = layers[mod] if isinstance(layers, dict) else layers
        names = ["lm_head"] if mod == "lm_head" else [f"backbone.layers.{i}.mixer.{mod}" for i in ls]
        for nm in names:
            w = W.get(nm + ".weight")
            n, k = w.shape if w is not None else (8, 8)  # a module the layer lacks: any shape
            t[LORA_PRE + nm + ".lora_A.weight"] = (rng.standard_normal((r, k)) / np.sqrt(k)).astype(np.float32)
            t[LORA_PRE + nm + ".lora_B.weight"] = (0.3 * rng.standard_normal((n, r))).astype(np.float32)
    with open(os.path.join(out, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": r, "lora_alpha": alpha, "use_rslora": rslora,
                   "target_modules": sorted(set(targets)), "bias": "none"}, f)
    safetensors_np.write(os.path.join(out, "adapter_model.safetensors"), t)


def merge(W, adir):
    """W with the adapter of adir merged in (float64)."""
    with open(os.path.join(adir, "adapter_config.json")) as f:
        ac = json.load(f)
    r = ac["r"]
    scale = ac["lora_alpha"] / (math.sqrt(r) if ac.get("use_rslora") else r)
    T = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in safetensors_np.read(os.path.join(adir, "adapter_model.safetensors"))[0].items()}
    W = dict(W)
    for k, a in T.items():
        if k.endswith(".lora_A.weight"):
            base = k[len(LORA_PRE):-len(".lora_A.weight")] + ".weight"
            W[base] = W[base] + scale * (T[k.replace("lora_A", "lora_B")] @ a)
        elif k.endswith("lora_embedding_A"):
            W["backbone.embeddings.weight"] = W["backbone.embeddings.weight"] + \
                scale * (T[k.replace("_A", "_B")] @ a).T
    return W


def ref(d, ids, n_new, out_path, adir=None):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    W = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in safetensors_np.read(os.path.join(d, "model.safetensors"))[0].items()}
    if adir:
        W = merge(W, adir)
    with torch.no_grad():
        lg = forward(W, cfg, ids)
        prompt_lp = torch.log_softmax(lg, -1)
        seq, gen, gen_lp = list(ids), [], []
        last = lg[-1]
        for _ in range(n_new):
            lp = torch.log_softmax(last, -1)
            nxt = int(torch.argmax(last))
            gen.append(nxt)
            gen_lp.append(float(lp[nxt]))
            seq.append(nxt)
            last = forward(W, cfg, seq)[-1]
    with open(out_path, "w") as f:
        json.dump({"logits": lg.numpy().astype(np.float32).tolist(),
                   "prompt_logprobs": prompt_lp.numpy().tolist(),
                   "output_ids": gen, "output_logprobs": gen_lp}, f)


def reference(d, ids, n_new, adir=None):
    with tempfile.TemporaryDirectory() as td:
        ref(d, ids, n_new, os.path.join(td, "r.json"), adir)
        with open(os.path.join(td, "r.json")) as f:
            return json.load(f)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd[:4])} ...: {p.stderr.strip()[-600:]}")
    return p


def check(sglc, cache, quick=False):
    d = os.path.join(cache, "nemotron_h")
    build(d)
    rng = np.random.RandomState(7)
    prompts = [[int(t) for t in rng.randint(3, VOCAB, 24)], [int(t) for t in rng.randint(3, VOCAB, 13)]]
    n_new = 8
    refs = [reference(d, p, n_new) for p in prompts]
    bad = 0

    def report(ok, msg):
        nonlocal bad
        print(("ok   " if ok else "FAIL ") + msg)
        bad += not ok

    # every feature matters: the reference with it switched off moves the
    # prompt logits by more than 100x the tolerance sglc is held to below
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    W = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in safetensors_np.read(os.path.join(d, "model.safetensors"))[0].items()}
    full = np.array(refs[0]["logits"])
    with torch.no_grad():
        for key, what in ({} if quick else ABLATIONS).items():
            abl = forward(W, cfg, prompts[0], ablate=key).numpy()
            e = float(np.abs(abl - full).max() / np.abs(full).max())
            report(e > 1e-2, f"reference with {what} differs by {e:.3g} (> 1e-2 needed for the test to bite)")

    with tempfile.TemporaryDirectory() as td:
        lg = os.path.join(td, "lg.f32")
        p = run([sglc, "generate", "--model-path", d, "--input-ids", ",".join(map(str, prompts[0])),
                 "--max-new-tokens", str(n_new), "--temperature", "0", "--json", "--ignore-eos",
                 "--dtype", "float32", "--dump-logits", lg])
        got = np.fromfile(lg, dtype="<f4").reshape(len(prompts[0]), VOCAB)
        want = np.array(refs[0]["logits"])
        rel = float(np.abs(got - want).max() / np.abs(want).max())
        report(rel < 1e-4, f"generate: prompt logits max rel err {rel:.2e} (< 1e-4)")
        ids = json.loads(p.stdout.strip().splitlines()[-1])["output_ids"]
        report(ids == refs[0]["output_ids"], f"generate: greedy ids {ids} == reference")

        req = os.path.join(td, "req.jsonl")
        with open(req, "w") as f:
            for pr in prompts:
                f.write(json.dumps({"input_ids": pr, "return_logprob": True, "logprob_start_len": 0,
                                    "sampling_params": {"temperature": 0, "max_new_tokens": n_new,
                                                        "ignore_eos": True}}) + "\n")
        modes = [("one chunk", [], 1e-4), ("chunks of 5", ["--chunked-prefill-size", "5"], 1e-4),
                 ("token by token", ["--chunked-prefill-size", "1"], 1e-4),
                 ("one state slot", ["--max-mamba-cache-size", "1", "--chunked-prefill-size", "7"], 1e-4),
                 # token by token, so every step's state is stored (rounded) in bf16
                 ("bf16 SSM states", ["--mamba-ssm-dtype", "bfloat16", "--chunked-prefill-size", "1"], 2e-2)]
        if quick:  # the other kernel path: one chunk and token by token only
            modes = [modes[0], modes[2]]
        for name, extra, tol in modes:
            p = run([sglc, "generate", "--model-path", d, "--requests", req, "--skip-tokenizer-init",
                     "--dtype", "float32", "--max-total-tokens", "512"] + extra)
            rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
            for i, (row, r) in enumerate(zip(rows, refs)):
                mi = row["meta_info"]
                lp = [e[0] for e in mi["input_token_logprobs"][1:]]
                want = [r["prompt_logprobs"][t][prompts[i][t + 1]] for t in range(len(prompts[i]) - 1)]
                err = float(np.max(np.abs(np.array(lp) - np.array(want)) / np.maximum(1.0, np.abs(want))))
                report(err < tol, f"{name}: request {i} prompt logprobs max err {err:.2e} (< {tol})")
                if tol > 1e-4:  # the rounding must show: bf16 states are really stored as bf16
                    report(err > 1e-6, f"{name}: request {i} differs from f32 states ({err:.2e} > 1e-6)")
                if tol <= 1e-4:
                    report(row["output_ids"] == r["output_ids"],
                           f"{name}: request {i} output ids == reference alone")
                olp = [e[0] for e in mi["output_token_logprobs"]]
                err = float(np.max(np.abs(np.array(olp) - np.array(r["output_logprobs"]))))
                if tol <= 1e-4:
                    report(err < 1e-3, f"{name}: request {i} output logprobs max err {err:.2e}")
            if len(rows) != len(prompts):
                report(False, f"{name}: {len(rows)} responses for {len(prompts)} requests")
    return bad


def lora_check(sglc, cache):
    d = os.path.join(cache, "nemotron_h")
    build(d)
    kinds = tiny_config()["hybrid_override_pattern"]
    att = [i for i, k in enumerate(kinds) if k == "*"]
    mlp = [i for i, k in enumerate(kinds) if k == "-"]
    bad = 0

    def report(ok, msg):
        nonlocal bad
        print(("ok   " if ok else "FAIL ") + msg, flush=True)
        bad += not ok

    rng = np.random.RandomState(11)
    prompts = [[int(t) for t in rng.randint(3, VOCAB, n)] for n in (19, 11, 15, 9)]
    n_new = 6
    with tempfile.TemporaryDirectory() as td:
        ads = {"a0": (["q_proj", "k_proj", "v_proj", "o_proj"], att, 4, 8, False),
               "a1": (["up_proj", "down_proj", "lm_head", "embeddings"], mlp, 8, 16, True),
               "a2": (["q_proj", "v_proj", "down_proj"], {"q_proj": att, "v_proj": att, "down_proj": mlp},
                      2, 4, False)}
        for i, (name, (tg, ls, r, al, rs)) in enumerate(ads.items()):
            write_adapter(d, os.path.join(td, name), tg, ls, r, al, 100 + i, rs)
        order = ["a0", "a1", "a2", None]
        refs = [reference(d, p, n_new, os.path.join(td, a) if a else None) for p, a in zip(prompts, order)]
        # --lora-path alone: prompt logits and greedy ids
        for a, p, rf in zip(order[:3], prompts, refs):
            lg = os.path.join(td, a + ".f32")
            out = run([sglc, "generate", "--model-path", d, "--input-ids", ",".join(map(str, p)),
                       "--max-new-tokens", str(n_new), "--temperature", "0", "--json", "--ignore-eos",
                       "--dtype", "float32", "--dump-logits", lg, "--lora-path", os.path.join(td, a)])
            got = np.fromfile(lg, dtype="<f4").reshape(len(p), VOCAB)
            want = np.array(rf["logits"])
            rel = float(np.abs(got - want).max() / np.abs(want).max())
            report(rel < 1e-4, f"{a} ({','.join(ads[a][0])}): prompt logits max rel err {rel:.2e} (< 1e-4)")
            ids = json.loads(out.stdout.strip().splitlines()[-1])["output_ids"]
            report(ids == rf["output_ids"], f"{a}: greedy ids {ids} == merged-weight reference")
        base = reference(d, prompts[0], n_new)
        report(np.abs(np.array(base["logits"]) - np.array(refs[0]["logits"])).max() > 1e-2,
               "a0 changes the logits (the reference differs from the base)")

        # one --requests batch: three adapters + the base, each == the reference and == alone
        def reqline(p, a):
            o = {"input_ids": p, "return_logprob": True, "logprob_start_len": 0,
                 "sampling_params": {"temperature": 0, "max_new_tokens": n_new, "ignore_eos": True}}
            if a:
                o["lora_path"] = a
            return json.dumps(o) + "\n"

        def batch(lines):
            f = os.path.join(td, "req.jsonl")
            with open(f, "w") as fh:
                fh.writelines(lines)
            out = run([sglc, "generate", "--model-path", d, "--requests", f, "--skip-tokenizer-init",
                       "--dtype", "float32", "--max-total-tokens", "512", "--max-loras-per-batch", "3",
                       "--lora-paths"] + [f"{a}={td}/{a}" for a in order[:3]])
            return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]

        rows = batch([reqline(p, a) for p, a in zip(prompts, order)])
        report(len(rows) == len(prompts), f"batch: {len(rows)} responses for {len(prompts)} requests")
        for i, (row, rf, a) in enumerate(zip(rows, refs, order)):
            alone = batch([reqline(prompts[i], a)])[0]
            lp = [e[0] for e in row["meta_info"]["input_token_logprobs"][1:]]
            lpa = [e[0] for e in alone["meta_info"]["input_token_logprobs"][1:]]
            want = [rf["prompt_logprobs"][t][prompts[i][t + 1]] for t in range(len(prompts[i]) - 1)]
            err = float(np.max(np.abs(np.array(lp) - np.array(want)) / np.maximum(1.0, np.abs(want))))
            erra = float(np.max(np.abs(np.array(lp) - np.array(lpa))))
            report(err < 1e-4 and row["output_ids"] == rf["output_ids"],
                   f"batch line {i} ({a or 'base'}): prompt logprobs max err {err:.2e} vs reference, ids equal")
            report(erra < 1e-5 and row["output_ids"] == alone["output_ids"],
                   f"batch line {i} ({a or 'base'}): == alone (logprobs max diff {erra:.1e}, ids equal)")

        # refusals: the Mamba2 mixer, a q_proj on a Mamba2 layer, up_proj on an attention layer
        mam = kinds.index("M")
        cases = [("mix_in", ["in_proj"], [mam], f"mixer.in_proj of layer {mam}, which is a Mamba2 layer"),
                 ("mix_out", ["out_proj"], [mam], f"mixer.out_proj of layer {mam}, which is a Mamba2 layer"),
                 ("q_on_m", ["q_proj"], [mam], f"mixer.q_proj of layer {mam}, which is a Mamba2 layer"),
                 ("up_on_att", ["up_proj"], [att[0]], f"mixer.up_proj of layer {att[0]}, which is an attention layer")]
        for tag, tg, ls, msg in cases:
            write_adapter(d, os.path.join(td, tag), tg, ls, 4, 8, 5)
            p = subprocess.run([sglc, "generate", "--model-path", d, "--input-ids", "5,6,7", "--max-new-tokens",
                                "1", "--lora-path", os.path.join(td, tag)], capture_output=True, text=True, timeout=60)
            report(p.returncode != 0 and msg in p.stderr and "tensor base_model.model.backbone.layers." in p.stderr,
                   f"start-up refuses {tag}: '{msg}'" + ("" if msg in p.stderr else f" (got: {p.stderr.strip()[-300:]})"))
        bad += serve_refusal(sglc, d, td, cases[0][3], report)
    return bad


def serve_refusal(sglc, d, td, msg, report):
    """sglc serve: /load_lora_adapter of the mixer adapter is a 400 naming it;
    a good adapter loads after it and serves (== generate --lora-path)."""
    import socket
    import time
    import urllib.error
    import urllib.request
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}"
    log = open(os.path.join(td, "serve.log"), "w")
    srv = subprocess.Popen([sglc, "serve", "--model-path", d, "--host", "127.0.0.1", "--port", str(port),
                            "--threads", "2", "--dtype", "float32", "--skip-server-warmup",
                            "--skip-tokenizer-init", "--max-loras-per-batch", "2", "--enable-lora",
                            "--max-lora-rank", "8", "--lora-target-modules", "all"],
                           stdout=log, stderr=subprocess.STDOUT)

    def post(path, body):
        req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/health", timeout=2)
                break
            except Exception:  # noqa: BLE001 -- not up yet
                if srv.poll() is not None:
                    break
                time.sleep(0.1)
        st, o = post("/load_lora_adapter", {"lora_name": "mix", "lora_path": os.path.join(td, "mix_in")})
        report(st == 400 and msg in json.dumps(o), f"/load_lora_adapter of the mixer adapter: {st}, "
               f"names it ({json.dumps(o)[:200]})")
        st, o = post("/load_lora_adapter", {"lora_name": "a0", "lora_path": os.path.join(td, "a0")})
        report(st == 200, f"/load_lora_adapter of an attention adapter after it: {st}")
        body = {"input_ids": [5, 6, 7, 8], "sampling_params": {"temperature": 0, "max_new_tokens": 4,
                                                               "ignore_eos": True}}
        st, o = post("/generate", dict(body, lora_path="a0"))
        off = run([sglc, "generate", "--model-path", d, "--input-ids", "5,6,7,8", "--max-new-tokens", "4",
                   "--temperature", "0", "--json", "--ignore-eos", "--dtype", "float32",
                   "--lora-path", os.path.join(td, "a0")])
        want = json.loads(off.stdout.strip().splitlines()[-1])["output_ids"]
        report(st == 200 and o.get("output_ids") == want, f"/generate with a0 == generate --lora-path ({st})")
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        log.close()
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "lora":
        sys.exit(1 if lora_check(sys.argv[2], sys.argv[3]) else 0)
    if len(sys.argv) in (4, 5) and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3], quick=sys.argv[4:] == ["--quick"]) else 0)
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(sys.argv[2])
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "ref":
        ref(sys.argv[2], [int(t) for t in sys.argv[3].split(",")], int(sys.argv[4]), sys.argv[5],
            sys.argv[6] if len(sys.argv) == 7 else None)
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
