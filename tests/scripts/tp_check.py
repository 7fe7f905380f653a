"""Tensor and pipeline parallelism against the one-process run
(tests/scripts/test_tp.sh).  Pipeline: --pp-size 2 (whole layers per
stage) must give the same logits and ids too.

For each tiny architecture model (tests/ref/make_tiny_model.py, cached in
build/tiny-models) and TinyStories-656K, `sglc generate --tp-size N` for N
in 2 and 4 (oversubscribed on a small machine: correctness only) must give
the prompt logits of `--tp-size 1` within 1e-5 relative
(max|d| / max|ref|, f32) and identical greedy ids.  A model whose heads do
not divide by N must be refused with a message saying so.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.environ["SGLC_ROOT"]
BIN = os.environ["SGLC_BIN"]
SHARED = os.environ["SGLC_SHARED"]
TOL = 1e-5
fails = 0


def report(ok, msg):
    global fails
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        fails += 1


def run(model, ids, n_new, tp, dtype="float32", extra=(), pp=1, env=None):
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "logits.f32")
        cmd = [BIN, "generate", "--model-path", model, "--input-ids", ",".join(map(str, ids)),
               "--max-new-tokens", str(n_new), "--temperature", "0", "--json", "--ignore-eos",
               "--dtype", dtype, "--dump-logits", path, "--tp-size", str(tp), "--pp-size", str(pp),
               "--threads", str(max(tp * pp, 1)), "--dist-timeout", "60", *extra]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, **env) if env else None)
        if p.returncode != 0:
            return None, None, p.stderr
        obj = json.loads(p.stdout.strip().splitlines()[-1])
        return [int(x) for x in obj["output_ids"]], np.fromfile(path, dtype="<f4"), p.stderr


def check_model(name, model, heads, vocab, extra=(), tpxpp=False, env=None):
    ids = [(i * 37) % (vocab - 3) + 3 for i in range(40)]
    ref_ids, ref, err = run(model, ids, 16, 1, extra=extra, env=env)
    if ref is None:
        report(False, f"{name}: one-process run failed: {err[-400:]}")
        return
    for tp in (2, 4):
        got_ids, got, err = run(model, ids, 16, tp, extra=extra, env=env)
        if heads % tp:
            report(got is None and "not divisible" in err,
                   f"{name} tp={tp}: refused ({heads} heads): {err.strip().splitlines()[-1] if err.strip() else ''}")
            continue
        if got is None:
            report(False, f"{name} tp={tp}: failed: {err[-600:]}")
            continue
        e = float(np.max(np.abs(got.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
        report(got.size == ref.size and e <= TOL, f"{name} tp={tp}: prompt logits max|d|/max|ref| = {e:.3g} (tol {TOL:g})")
        report(got_ids == ref_ids, f"{name} tp={tp}: 16 greedy ids identical")
        if env and "SGLC_MLA_EXPAND_MIN" in env:  # every rank took the expanded path
            n_exp = err.count("MLA: expanded attention")
            report(n_exp == tp, f"{name} tp={tp}: {n_exp} of {tp} ranks logged the expanded attention")
    # pipeline parallelism: 2 stages of whole layers
    got_ids, got, err = run(model, ids, 16, 1, extra=extra, pp=2, env=env)
    if got is None:
        report(False, f"{name} pp=2: failed: {err[-600:]}")
        return
    e = float(np.max(np.abs(got.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
    report(got.size == ref.size and e <= TOL and got_ids == ref_ids,
           f"{name} pp=2: prompt logits max|d|/max|ref| = {e:.3g}, greedy ids {'identical' if got_ids == ref_ids else 'DIFFER'}")
    if not tpxpp:
        return
    # TP x PP: 2 stages of 2 tensor-parallel ranks each
    got_ids, got, err = run(model, ids, 16, 2, extra=extra, pp=2, env=env)
    if got is None:
        report(False, f"{name} tp=2 x pp=2: failed: {err[-600:]}")
        return
    e = float(np.max(np.abs(got.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
    report(got.size == ref.size and e <= TOL and got_ids == ref_ids,
           f"{name} tp=2 x pp=2: prompt logits max|d|/max|ref| = {e:.3g}, greedy ids {'identical' if got_ids == ref_ids else 'DIFFER'}")


def check_lora(model):
    """A LoRA adapter (q_proj of layer 0) changes the logits with --tp-size 1
    and gives the same logits with --tp-size 2 (each rank holds its slice of
    B; the full checks are tests/scripts/test_lora_tp.sh)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import safetensors_np
    c = json.load(open(os.path.join(model, "config.json")))
    H = c["hidden_size"]
    qd = c["num_attention_heads"] * c.get("head_dim", H // c["num_attention_heads"])
    rng = np.random.RandomState(7)
    ids = [(i * 37) % (c["vocab_size"] - 3) + 3 for i in range(12)]
    with tempfile.TemporaryDirectory() as td:
        pre = "base_model.model.model.layers.0.self_attn.q_proj"
        t = {pre + ".lora_A.weight": rng.standard_normal((2, H)).astype(np.float32),
             pre + ".lora_B.weight": rng.standard_normal((qd, 2)).astype(np.float32)}
        safetensors_np.write(os.path.join(td, "adapter_model.safetensors"), t, metadata={"format": "pt"})
        json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"],
                   "bias": "none", "use_dora": False}, open(os.path.join(td, "adapter_config.json"), "w"))
        _, base, _ = run(model, ids, 1, 1)
        _, one, err1 = run(model, ids, 1, 1, extra=("--lora-path", td))
        report(one is not None and base is not None and one.size == base.size and
               float(np.max(np.abs(one - base))) > 1e-3,
               "lora tp=1: the adapter loads and moves the logits" + ("" if one is not None else ": " + err1[-300:]))
        _, got, err = run(model, ids, 1, 2, extra=("--lora-path", td))
        e = float(np.max(np.abs(got.astype(np.float64) - one)) / max(np.max(np.abs(one)), 1e-30)) \
            if got is not None and one is not None and got.size == one.size else float("inf")
        report(e <= TOL, f"lora tp=2: logits of tp=1 within {e:.3g} (tol {TOL:g})"
               + ("" if got is not None else ": " + err[-300:]))


def check_lora_mla_refused(model):
    """A LoRA adapter on a DeepSeek (MLA) model loads in one process and is
    refused under --tp-size 2 with a message (its per-head slices are not
    cut yet)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import safetensors_np
    c = json.load(open(os.path.join(model, "config.json")))
    H = c["hidden_size"]
    qd = c["num_attention_heads"] * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
    rng = np.random.RandomState(7)
    with tempfile.TemporaryDirectory() as td:
        pre = "base_model.model.model.layers.0.self_attn.q_proj"
        t = {pre + ".lora_A.weight": rng.standard_normal((2, H)).astype(np.float32),
             pre + ".lora_B.weight": rng.standard_normal((qd, 2)).astype(np.float32)}
        safetensors_np.write(os.path.join(td, "adapter_model.safetensors"), t, metadata={"format": "pt"})
        json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"],
                   "bias": "none", "use_dora": False}, open(os.path.join(td, "adapter_config.json"), "w"))
        _, one, err1 = run(model, [5, 6, 7], 1, 1, extra=("--lora-path", td))
        report(one is not None, "deepseek lora tp=1: the adapter loads" + ("" if one is not None else ": " + err1[-300:]))
        _, got, err = run(model, [5, 6, 7], 1, 2, extra=("--lora-path", td))
        report(got is None and "does not shard across the 2 tensor-parallel ranks yet" in err,
               "deepseek lora tp=2: refused: " + (err.strip().splitlines()[-1] if err.strip() else ""))


DS_NAMES = ("qwen2-moe", "qwen2-moe-sparse2", "deepseek-v2-lite", "deepseek-v2", "deepseek-v3")
# tests/ref/gemma_ref.py: post-norms, (1 + w) norms, soft-caps, sliding /
# full layers, qk-norm, local / global rope, tied embeddings; gemma3 has one
# KV head (replicated), gemma3-mm-v2 the other checkpoint layout
GEMMA_NAMES = ("gemma2", "gemma3", "gemma3-mm", "gemma3-mm-v2")


def main():
    cache = os.path.join(ROOT, "build", "tiny-models")
    names = ["llama3", "llama-bias", "mistral-sw", "qwen2", "qwen3", "qwen3-moe", "mixtral", "granitemoe"]
    only = os.environ.get("SGLC_TP_MODELS")
    if only:
        names = [n for n in only.split(",") if n not in DS_NAMES + GEMMA_NAMES and n != "lora"]
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ref", "make_tiny_model.py"),
                        "--out", cache, "--only", ",".join(names)], capture_output=True,
                       text=True) if names else None
    if p and p.returncode != 0:
        print(p.stdout[-2000:], p.stderr[-2000:])
        report(False, "make_tiny_model.py failed")
        return 1
    for n in names:
        d = os.path.join(cache, n, "f32")
        c = json.load(open(os.path.join(d, "config.json")))
        check_model(n, d, c["num_attention_heads"], c["vocab_size"])
    # shared experts (tests/ref/make_tiny_ds.py): Qwen2-MoE's shared expert
    # sharded like the dense MLP, its sigmoid gate replicated; sparse2 mixes
    # dense and MoE layers and has 2 KV heads (replicated at tp=4).  DeepSeek
    # V2-Lite's latent attention stays refused with its message.
    ds = [n for n in DS_NAMES
          if not only or n in only.split(",")]
    if ds:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ref", "make_tiny_ds.py"),
                            "--out", cache, "--only", ",".join(ds)], capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stdout[-2000:], p.stderr[-2000:])
            report(False, "make_tiny_ds.py failed")
            return 1
    for n in ds:
        d = os.path.join(cache, n, "f32")
        c = json.load(open(os.path.join(d, "config.json")))
        if n.startswith("deepseek"):
            # MLA: heads split (q / q_b rows, kv_b per head, o columns), the
            # latent projection and cache whole on every rank; the absorbed
            # path (prefill of 40 < 64 tokens and decode), then the expanded
            # prefill (SGLC_MLA_EXPAND_MIN=8) with absorbed decode
            check_model(n, d, c["num_attention_heads"], c["vocab_size"], tpxpp=True)
            check_model(n + " (expanded prefill)", d, c["num_attention_heads"], c["vocab_size"],
                        tpxpp=True, env={"SGLC_MLA_EXPAND_MIN": "8"})
            if n == "deepseek-v2-lite":
                check_lora_mla_refused(d)
            continue
        check_model(n, d, c["num_attention_heads"], c["vocab_size"])
    sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
    import gemma_ref
    for n in GEMMA_NAMES:
        if only and n not in only.split(","):
            continue
        d = os.path.join(gemma_ref.build(n, cache)[0], "f32")
        c = json.load(open(os.path.join(d, "config.json")))
        c = c.get("text_config", c)
        check_model(n, d, c["num_attention_heads"], c["vocab_size"], tpxpp=True)
    # dummy weights of real configs, shrunk (--json-model-override-args):
    # Phi-3's fused qkv / gate_up split at load, Llama-3.2's tied dummy LM
    # head (rows made on lookup) sliced by vocabulary, a vocabulary that
    # does not divide by the ranks
    small = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512,
             "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 1001, "head_dim": 32}
    for cfg in ("microsoft__Phi-3-mini-4k-instruct", "meta-llama__Llama-3.2-1B-Instruct"):
        d = os.path.join(SHARED, "models", "configs", cfg)
        if not os.path.exists(os.path.join(d, "config.json")):
            report(False, f"{d} not found")
            continue
        check_model(cfg + " (dummy, shrunk)", d, 8, 1001,
                    extra=("--load-format", "dummy", "--json-model-override-args", json.dumps(small)))
    if not only or "lora" in only.split(","):
        check_lora(os.path.join(cache, "llama3", "f32"))
    ts = os.path.join(SHARED, "models", "TinyStories-656K")
    if os.path.exists(os.path.join(ts, "config.json")):
        c = json.load(open(os.path.join(ts, "config.json")))
        check_model("TinyStories-656K", ts, c["num_attention_heads"], c["vocab_size"])
    else:
        report(False, f"{ts} not found")
    print(f"{fails} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
