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

  The check (`check`): `sglc generate` prompt logits within 1e-4 relative
  and 8 greedy ids identical; through the scheduler (`generate --requests`,
  two requests of 24 and 13 tokens together) the prompt logprobs and the
  output ids equal the reference with the prompt in one chunk, in chunks of
  5 and token by token (--chunked-prefill-size 1), and with a single state
  slot (--max-mamba-cache-size 1: the second request waits for the first
  one's slot, which must come back clean); bf16 SSM states stay within
  2e-2 (token by token, so each step's state is stored rounded) and must
  differ from f32 ones.

Usage: mamba_ref.py build DIR                 write the tiny model into DIR
       mamba_ref.py ref DIR IDS N OUT.json     reference: prompt logits
                                               (log-softmax) and N greedy ids
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


def forward(W, cfg, ids):
    """Logits (T, V) of the prompt ids, float64, everything token by token."""
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
            conv = conv + W[m + "conv1d.bias"]
            conv = conv * torch.sigmoid(conv)
            xs, B, C = conv[:, :di], conv[:, di:di + GN], conv[:, di + GN:]
            A = -torch.exp(W[m + "A_log"])
            S = torch.zeros(nh, P, N, dtype=torch.float64)
            ys = []
            for t in range(T):
                d = torch.nn.functional.softplus(dt[t] + W[m + "dt_bias"]).clamp(lo, hi)  # (nh)
                xt = xs[t].view(nh, P)
                Bt = B[t].view(G, N).repeat_interleave(nh // G, 0)  # (nh, N)
                Ct = C[t].view(G, N).repeat_interleave(nh // G, 0)
                S = S * torch.exp(d * A)[:, None, None] + (d[:, None] * xt)[:, :, None] * Bt[:, None, :]
                ys.append(((S * Ct[:, None, :]).sum(-1) + W[m + "D"][:, None] * xt).reshape(di))
            y = torch.stack(ys, 0) * (z * torch.sigmoid(z))
            yg = y.view(T, G, di // G)
            yg = yg * torch.rsqrt((yg * yg).mean(-1, keepdim=True) + eps)
            out = (yg.reshape(T, di) * W[m + "norm.weight"]) @ W[m + "out_proj.weight"].T
        elif k == "*":
            q = (h @ W[m + "q_proj.weight"].T).view(T, NA, D)
            kk = (h @ W[m + "k_proj.weight"].T).view(T, NKV, D).repeat_interleave(NA // NKV, 1)
            v = (h @ W[m + "v_proj.weight"].T).view(T, NKV, D).repeat_interleave(NA // NKV, 1)
            s = torch.einsum("qhd,khd->hqk", q, kk) / math.sqrt(D)
            s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -math.inf)
            att = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v).reshape(T, NA * D)
            out = att @ W[m + "o_proj.weight"].T
        else:
            u = torch.relu(h @ W[m + "up_proj.weight"].T)
            out = (u * u) @ W[m + "down_proj.weight"].T
        x = x + out
    return rmsnorm(x, W["backbone.norm_f.weight"], eps) @ W["lm_head.weight"].T


def ref(d, ids, n_new, out_path):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    W = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in safetensors_np.read(os.path.join(d, "model.safetensors"))[0].items()}
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


def reference(d, ids, n_new):
    with tempfile.TemporaryDirectory() as td:
        ref(d, ids, n_new, os.path.join(td, "r.json"))
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


def main():
    if len(sys.argv) in (4, 5) and sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], sys.argv[3], quick=sys.argv[4:] == ["--quick"]) else 0)
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "ref":
        ref(sys.argv[2], [int(t) for t in sys.argv[3].split(",")], int(sys.argv[4]), sys.argv[5])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
