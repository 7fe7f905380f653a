#!/usr/bin/python3
"""Golden comparisons of `sglc generate` against ds_ref.py (Qwen2-MoE,
DeepSeek V2 / V3) on the tiny models of make_tiny_ds.py.

DESIGN
  Per model (as golden.py arch): 64-token prompt logits within 1e-4 (f32;
  bf16 weights with f32 compute) and 2e-2 (bf16), 32 greedy ids identical
  (f32).  Before that, each feature is switched off (or done the wrong
  way) in the reference and must move the logits by more than 100x the f32
  tolerance, so the comparison would notice an engine that ignores it.
  MLA models also run the reference with the compressed ("latent") cache
  and must match the expanded one within 1e-5: sglc's cache holds only the
  latent + rope key, and its logits are compared with the expanded
  (Hugging Face) formulation.  The bf16 check compares with the reference
  that rounds what it caches to bf16 (what sglc's bf16 cache stores: the
  latent row, or K/V); bf16 weights with f32 compute and cache are checked
  at 1e-4 against the plain reference.  Prints ok / FAIL lines; exit 1 on a failure.

Usage: golden_ds.py [--only a,b] [--sglc BIN] [--cache DIR] [--ref-only]
"""
import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import ds_ref  # noqa: E402
import golden  # noqa: E402
import make_tiny_ds  # noqa: E402
import torch_ref  # noqa: E402

F32_TOL, BF16_TOL = golden.F32_TOL, golden.BF16_TOL


def _set(attr, value):
    def f(m):
        setattr(m.cfg, attr, value)
    return f


# name -> [(feature, config override, function on the model)]
ABLATE = {
    "qwen2-moe": [("without the shared expert's sigmoid gate", None, _set("shared_sigmoid", False)),
                  ("without the shared expert", None, _set("use_shared", False)),
                  ("with top-1 routing", {"num_experts_per_tok": 1}, None),
                  ("with top-k renormalization", {"norm_topk_prob": True}, None)],
    "qwen2-moe-sparse2": [("without top-k renormalization", {"norm_topk_prob": False}, None),
                          ("without the shared expert", None, _set("use_shared", False))],
    "deepseek-v2-lite": [("without rope_scaling", {"rope_scaling": None}, None),
                         ("without the mscale in the softmax scale", None, _set("mscale_off", True)),
                         ("with rotate-half rope instead of DeepSeek's interleaved pairs", None,
                          _set("rope_interleave", False)),
                         ("without the shared experts", None, _set("use_shared", False)),
                         ("with top-k renormalization", {"norm_topk_prob": True}, None)],
    "deepseek-v2": [("with greedy instead of group_limited_greedy", {"topk_method": "greedy"}, None),
                    ("without routed_scaling_factor", {"routed_scaling_factor": 1.0}, None),
                    ("with top-k renormalization (scale then unused)", {"norm_topk_prob": True}, None)],
    "deepseek-v3": [("without e_score_correction_bias", None, _set("bias_off", True)),
                    ("with topk_group = n_group (no group limit)", {"topk_group": 8}, None),
                    ("without routed_scaling_factor", {"routed_scaling_factor": 1.0}, None),
                    ("without top-k renormalization", {"norm_topk_prob": False}, None),
                    ("with softmax instead of sigmoid scores", {"scoring_func": "softmax"}, None)],
}


def check_batched(sglc, name, model_dir, m):
    """4 prompts of different lengths in one `generate --requests` run (the
    scheduler batches their prefills and decodes them as 4 rows a step):
    16 greedy ids each == the reference run alone."""
    import json
    import subprocess
    import tempfile
    rng = np.random.RandomState(77)
    prompts = [[int(x) for x in rng.randint(3, make_tiny_ds.VOCAB, size=n)] for n in (5, 23, 40, 11)]
    prompts.append(prompts[2][:30] + [7, 8, 9])  # shares a 30-token prefix with the third
    n_new = 16
    want = [m.generate(pr, n_new)[1] for pr in prompts]
    for extra, what in (([], "batched by the scheduler"),
                        (["--chunked-prefill-size", "8"], "in 8-token prefill chunks")):
        with tempfile.TemporaryDirectory() as td:
            req = os.path.join(td, "req.jsonl")
            with open(req, "w") as f:
                for p in prompts:
                    f.write(json.dumps({"input_ids": p, "sampling_params": {
                        "max_new_tokens": n_new, "temperature": 0, "ignore_eos": True}}) + "\n")
            cmd = [sglc, "generate", "--model-path", model_dir, "--requests", req,
                   "--dtype", "float32", "--threads", "2"] + extra
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if p.returncode:
                raise golden.SglcError(f"exit {p.returncode}: {p.stderr.strip()[-600:]}")
            outs = [json.loads(x) for x in p.stdout.splitlines() if x.strip().startswith("{")]
        got = [[int(t) for t in o.get("output_ids", [])] for o in outs]
        golden.report(got == want, f"{name}: {len(prompts)} requests {what}: greedy ids "
                                   f"{'identical to each alone' if got == want else f'differ: {got} vs {want}'}")


def check_tokenizer(sglc, cache, shared):
    """deepseek-v3-tok: the deepseek-v3 tiny model with the real vocabulary
    (129,280) and DeepSeek V3's tokenizer.json / chat template: sglc renders
    a conversation, encodes it, generates 12 greedy tokens; the reference
    run on the same ids gives the same ids."""
    import json
    import subprocess
    d, _ = make_tiny_ds.build("deepseek-v3-tok", cache, shared)
    md = os.path.join(d, "f32")
    conv = {"messages": [{"role": "system", "content": "You are terse."},
                         {"role": "user", "content": "What does MLA cache per token?"}],
            "add_generation_prompt": True}

    def run(args, stdin=None):
        p = subprocess.run([sglc] + args, input=stdin, capture_output=True, text=True, timeout=300)
        if p.returncode:
            raise golden.SglcError(f"{args[0]} exit {p.returncode}: {p.stderr.strip()[-400:]}")
        return p.stdout

    prompt = json.loads(run(["chat-template", "--tokenizer-path", md], json.dumps(conv) + "\n"))["prompt"]
    ok = prompt.startswith("<\uff5cbegin\u2581of\u2581sentence\uff5c>You are terse.") and \
        prompt.endswith("<\uff5cAssistant\uff5c>")
    golden.report(ok, f"deepseek-v3 chat template renders {prompt!r}")
    ids = json.loads(run(["tokenize", "--tokenizer-path", md],
                         json.dumps({"text": prompt, "add_special_tokens": True}) + "\n"))["ids"]
    out = json.loads(run(["generate", "--model-path", md, "--prompt", prompt, "--max-new-tokens", "12",
                          "--temperature", "0", "--json", "--ignore-eos", "--dtype", "float32"]).strip().splitlines()[-1])
    want = ds_ref.DSModel(md, "float32").generate(ids, 12)[1]
    got = [int(x) for x in out["output_ids"]]
    golden.report(got == want and isinstance(out.get("text"), str),
                  f"deepseek-v3-tok: {len(ids)}-token chat prompt (vocab 129280, DeepSeek V3 "
                  f"tokenizer): 12 greedy ids {'identical' if got == want else f'differ {got} vs {want}'}, "
                  f"text {out.get('text', '')[:40]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglc", default=os.environ.get("SGLC_BIN", os.path.join(ROOT, "build", "sglc")))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--only")
    ap.add_argument("--ref-only", action="store_true")
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    a = ap.parse_args()
    torch.set_num_threads(1)
    report, rel_err = golden.report, golden.rel_err
    names = [n for n in a.only.split(",") if n in make_tiny_ds.SPECS] if a.only else list(make_tiny_ds.SPECS)
    n_prompt, n_new = 64, 32
    for name in names:
        d, _ = make_tiny_ds.build(name, a.cache)
        f32_dir, bf16_dir = os.path.join(d, "f32"), os.path.join(d, "bf16")
        rng = np.random.RandomState(1234)
        prompt = [int(x) for x in rng.randint(3, make_tiny_ds.VOCAB, size=n_prompt)]
        try:
            m = ds_ref.DSModel(f32_dir, "float32")
            ref_logits, ref_ids = m.generate(prompt, n_new)
            # sglc --dtype bfloat16 keeps a bf16 KV cache (MLA: the latent
            # row): the bf16 reference rounds what it caches the same way
            # (bf16 weights with an f32 cache: "bf16-file f32-compute"
            # below).  Without that the rounding flips expert choices near
            # ties (0.25 on deepseek-v3, 0.035 on deepseek-v2, 0.015 on
            # qwen2-moe-sparse2).
            ref_bf16, _ = ds_ref.DSModel(bf16_dir, "bfloat16", mla_mode="latent" if m.cfg.mla else "expanded",
                                         kv_bf16=True).generate(prompt, 1)
            ref_bf16_f32kv = ds_ref.DSModel(bf16_dir, "bfloat16").generate(prompt, 1)[0]
            if m.cfg.mla:
                lat_logits, lat_ids = ds_ref.DSModel(f32_dir, "float32", mla_mode="latent").generate(prompt, n_new)
                e = rel_err(lat_logits, ref_logits)
                report(e <= 1e-5 and lat_ids == ref_ids,
                       f"{name}: reference with the compressed latent cache == expanded K/V "
                       f"({e:.3g}, greedy ids {'identical' if lat_ids == ref_ids else 'differ'})")
            for feat, override, fn in ABLATE.get(name, []):
                am = ds_ref.DSModel(f32_dir, "float32", config_override=override)
                if fn:
                    fn(am)
                abl, _ = am.generate(prompt, 1)
                e = rel_err(abl, ref_logits)
                report(e > 100 * F32_TOL, f"{name}: reference {feat} differs by {e:.3g} "
                                          f"(> {100 * F32_TOL:g} needed for the test to bite)")
        except torch_ref.RefError as e:
            report(False, f"{name}: reference failed: {e}")
            continue
        if a.ref_only:
            print(f"     {name}: ref ids {ref_ids[:12]}...")
            continue

        def go():
            ids, lg = golden.run_sglc(a.sglc, f32_dir, prompt, n_new, "float32")
            golden.check_logits(f"{name} f32", lg, ref_logits, F32_TOL)
            golden.check_ids(f"{name} f32", ids, ref_ids)
            _, lg = golden.run_sglc(a.sglc, bf16_dir, prompt, 1, "float32")
            golden.check_logits(f"{name} bf16-file f32-compute", lg, ref_bf16_f32kv, F32_TOL)
            golden.check_bf16_logits(a.sglc, f"{name} bf16", bf16_dir, prompt, ref_bf16, BF16_TOL,
                                     golden.is_moe(bf16_dir))
        golden.guard(name, go)
        golden.guard(name, lambda: check_batched(a.sglc, name, f32_dir, m))
    if not a.ref_only and (not a.only or "deepseek-v3-tok" in a.only.split(",")):
        if os.path.exists(os.path.join(a.shared, "models", "tokenizers", "deepseek_v3", "tokenizer.json")):
            golden.guard("deepseek-v3-tok", lambda: check_tokenizer(a.sglc, a.cache, a.shared))
        else:
            print("skip deepseek-v3-tok: no ../shared/models/tokenizers/deepseek_v3")
    if golden.failures:
        print(f"{len(golden.failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
