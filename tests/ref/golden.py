#!/usr/bin/python3
"""Golden comparisons of `sglc generate` against the PyTorch reference.

DESIGN
  One Python process per test script (torch imports once), running the
  reference in-process and sglc as a subprocess through its CLI contract:
    SGLC_BIN generate --model-path DIR --input-ids 1,2,3 --max-new-tokens N
        --temperature 0 --json --ignore-eos --dtype float32|bfloat16
        --dump-logits FILE
  stdout: one JSON object {"text", "output_ids" (generated ids only),
  "meta_info"}; FILE: raw little-endian f32 prefill logits (n_prompt, vocab).

  Logit closeness is max|sglc - ref| / max|ref| over all prompt positions.
  Each check prints "ok ..." or "FAIL ..."; the exit status is 1 if any
  failed, 0 otherwise.  Exit 77 (skip) is the shell wrappers' business.

  Sub-commands (one per tests/scripts/test_*.sh):
    tinystories  TinyStories-656K (real weights): 100 greedy ids from BOS
                 and 61-token prompt logits, f32 (1e-4); the same logits
                 with --dtype bfloat16 (2e-2).
    arch         every tiny model of make_tiny_model.py (--only a,b to pick): 64-token prompt
                 logits (f32 1e-4; bf16 weights with f32 compute 1e-4; bf16
                 2e-2) and 32 greedy ids (f32).  Before comparing, checks
                 that switching the model's feature off in the reference
                 moves the logits far more than the tolerance, so the test
                 can fail when an engine ignores the feature.
    gemma        the tiny Gemma 2 / Gemma 3 models of gemma_ref.py (--only a,b
                 to pick), checked as `arch` does against gemma_ref.Model,
                 with every feature in gemma_ref.ABLATIONS shown to matter.
    stories260k  converts llama2.c stories260K with tools/llama2c_to_hf.py,
                 compares 256 greedy ids from BOS with the reference and the
                 decoded text with llama2.c's documented output.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import torch_ref  # noqa: E402

F32_TOL = 1e-4
BF16_TOL = 2e-2

failures = []


def report(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        failures.append(msg)


def rel_err(a, ref):
    return float(np.max(np.abs(a.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))


class SglcError(Exception):
    pass


def run_sglc(sglc, model_dir, ids, n_new, dtype, dump=True, timeout=300, env=None):
    """Runs sglc generate (env: extra environment variables); returns
    (output_ids, logits (n_prompt, vocab) or None)."""
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "logits.f32")
        cmd = [sglc, "generate", "--model-path", model_dir,
               "--input-ids", ",".join(map(str, ids)), "--max-new-tokens", str(n_new),
               "--temperature", "0", "--json", "--ignore-eos", "--dtype", dtype]
        if dump:
            cmd += ["--dump-logits", path]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env=dict(os.environ, **env) if env else None)
        except subprocess.TimeoutExpired:
            raise SglcError(f"timed out after {timeout}s: {' '.join(cmd[:6])} ...")
        if p.returncode != 0:
            raise SglcError(f"exit {p.returncode}: {p.stderr.strip()[-800:]}")
        obj = None
        for cand in [p.stdout] + p.stdout.strip().splitlines()[::-1]:
            try:
                obj = json.loads(cand)
                if isinstance(obj, dict):
                    break
            except ValueError:
                obj = None
        if not isinstance(obj, dict) or not isinstance(obj.get("output_ids"), list):
            raise SglcError(f"stdout is not a JSON object with output_ids: {p.stdout[:400]!r}")
        logits = None
        if dump:
            if not os.path.exists(path):
                raise SglcError("--dump-logits file was not written")
            raw = np.fromfile(path, dtype="<f4")
            logits = raw
        return [int(x) for x in obj["output_ids"]], logits


_BF16_BODY = {}


def sglc_bf16_body(sglc):
    """'dot' or 'fma': the bf16 matmul body sglc runs by default on this CPU
    (the start-up choice `sglc cpu-info` prints; fma off AVX-512)."""
    if sglc not in _BF16_BODY:
        p = subprocess.run([sglc, "cpu-info"], capture_output=True, text=True, timeout=60)
        _BF16_BODY[sglc] = "dot" if "bf16 matmul: dot" in p.stdout else "fma"
    return _BF16_BODY[sglc]


def is_moe(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    return any((c.get(k) or 0) > 0 for k in ("num_experts", "num_local_experts", "n_routed_experts"))


def check_bf16_logits(sglc, tag, model_dir, ids, ref, tol, moe):
    """The --dtype bfloat16 prompt-logits check.  Dense models: sglc's
    default bf16 matmul body, whichever it is.  MoE models: the fma body
    (SGLC_BF16_DOT=0, exact in the activations like the references): the
    dot body (vdpbf16ps, the default where it is faster, e.g. Zen 4) rounds
    every matmul's activations to bf16, and these tiny random MoE models
    route among near-tied experts, so any such rounding flips expert
    choices at a few positions (qwen3-moe 0.037, qwen2-moe-sparse2 0.030,
    deepseek-v2 0.086, deepseek-v3 0.26 max|d|/max|ref|; the same
    magnitudes golden_ds.py saw from an unemulated bf16 KV cache) -- no
    tolerance that would pass them tests anything.  The dot body's rounding
    itself is checked per kernel by test_kernels and end to end by the
    dense models; its MoE distance is printed, not checked."""
    if not moe:
        _, lg = run_sglc(sglc, model_dir, ids, 1, "bfloat16")
        check_logits(f"{tag} ({sglc_bf16_body(sglc)} body)", lg, ref, tol)
        return
    _, lg = run_sglc(sglc, model_dir, ids, 1, "bfloat16", env={"SGLC_BF16_DOT": "0"})
    check_logits(f"{tag} (fma body)", lg, ref, tol)
    if sglc_bf16_body(sglc) == "dot":
        _, lg = run_sglc(sglc, model_dir, ids, 1, "bfloat16")
        if lg is not None and lg.size == ref.size:
            g = lg.reshape(ref.shape)
            agree = int((g.argmax(-1) == ref.argmax(-1)).sum())
            print(f"     {tag} (dot body, the default here; MoE: not checked): max|d|/max|ref| = "
                  f"{rel_err(g, ref):.3g}, argmax agrees at {agree}/{ref.shape[0]} positions", flush=True)


def check_logits(tag, got, ref, tol):
    n, v = ref.shape
    if got is None or got.size != n * v:
        report(False, f"{tag}: logits file has {0 if got is None else got.size} floats, "
                      f"want {n}x{v}={n * v}")
        return
    got = got.reshape(n, v)
    if not np.all(np.isfinite(got)):
        report(False, f"{tag}: non-finite logits")
        return
    e = rel_err(got, ref)
    agree = int(np.sum(np.argmax(got, 1) == np.argmax(ref, 1)))
    report(e <= tol, f"{tag}: prompt logits max|d|/max|ref| = {e:.3g} (tol {tol:g}), "
                     f"argmax agrees at {agree}/{n} positions")


def check_ids(tag, got, ref):
    if got == ref:
        report(True, f"{tag}: {len(ref)} greedy ids identical")
        return
    first = next((i for i, (a, b) in enumerate(zip(got, ref)) if a != b), min(len(got), len(ref)))
    report(False, f"{tag}: greedy ids differ at index {first} (got {len(got)} ids, want {len(ref)}); "
                  f"sglc {got[max(0, first - 3):first + 5]} ref {ref[max(0, first - 3):first + 5]}")


def guard(tag, fn):
    try:
        fn()
    except SglcError as e:
        report(False, f"{tag}: sglc failed: {e}")
    except torch_ref.RefError as e:
        report(False, f"{tag}: reference failed: {e}")


# ----------------------------------------------------------------------------


def cmd_tinystories(a):
    d = os.path.join(a.shared, "models", "TinyStories-656K")
    m = torch_ref.Model(d, "float32")
    _, ref_ids = m.generate([1], 100, ignore_eos=True)
    doc = [147, 201, 282, 215, 286, 598]  # documented in ../shared/models/README.md
    report(ref_ids[:6] == doc, f"reference greedy from BOS begins {ref_ids[:6]} (documented {doc})")
    prompt = [1] + ref_ids[:60]
    ref_logits, _ = m.generate(prompt, 1, ignore_eos=True)
    ref_bf16, _ = torch_ref.Model(d, "bfloat16").generate(prompt, 1, ignore_eos=True)

    def go():
        ids, _ = run_sglc(a.sglc, d, [1], 100, "float32", dump=False)
        check_ids("tinystories f32 from BOS", ids, ref_ids)
        _, lg = run_sglc(a.sglc, d, prompt, 1, "float32")
        check_logits("tinystories f32 61-token prompt", lg, ref_logits, F32_TOL)
        _, lg = run_sglc(a.sglc, d, prompt, 1, "bfloat16")
        check_logits("tinystories bf16 61-token prompt", lg, ref_bf16, BF16_TOL)
    guard("tinystories", go)


def _no_qkv_bias(m):
    for L in m.layers:
        for k in ("bq", "bk", "bv"):
            L[k] = L[k] * 0


def _no_attn_bias(m):
    _no_qkv_bias(m)
    for L in m.layers:
        L["bo"] = L["bo"] * 0


def _static_dynamic_ntk(m):
    m.cfg.dynamic_mode = "static"


def _yarn_no_attention_factor(m):
    m.cfg.rope_scaling["attention_factor"] = 1.0


def _no_qk_norm(m):
    m.cfg.qk_norm = False


def _no_topk_renorm(m):
    m.cfg.norm_topk = False


def _topk_renorm(m):
    m.cfg.norm_topk = True


# variants of the reference for the sensitivity check (feature off or done
# the wrong way):
# name -> (feature, config.json override, function applied to the Model),
# or a list of such triples
ABLATE = {
    "llama3": ("without rope_scaling", {"rope_scaling": None}, None),
    "llama-linear": ("without rope_scaling", {"rope_scaling": None}, None),
    "llama-dynamic": [("without rope_scaling", {"rope_scaling": None}, None),
                      ("with a static NTK base (vLLM/SGLang) instead of HF's per-call one", None,
                       _static_dynamic_ntk)],
    "llama-yarn": [("without rope_scaling", {"rope_scaling": None}, None),
                   ("without the yarn attention factor", None, _yarn_no_attention_factor)],
    "llama-bias": ("without q/k/v/o bias", None, _no_attn_bias),
    "mistral-sw": [("without sliding_window", {"sliding_window": None}, None),
                   ("with W+1 keys in the window instead of W", {"sliding_window": 17}, None)],
    "qwen2": ("without q/k/v bias", None, _no_qkv_bias),
    "qwen2-sw": [("without use_sliding_window", {"use_sliding_window": False}, None),
                 ("with the window on every layer", {"max_window_layers": 0}, None)],
    "qwen3": ("without q/k norm", None, _no_qk_norm),
    "qwen3-moe": [("with top-1 routing", {"num_experts_per_tok": 1}, None),
                  ("without top-k renormalization", None, _no_topk_renorm)],
    "qwen3-moe-dense0": [("with top-4 routing", {"num_experts_per_tok": 4}, None),
                         ("with top-k renormalization", None, _topk_renorm)],
    "granitemoe": [("with top-1 routing", {"num_experts_per_tok": 1}, None),
                   ("without embedding_multiplier", {"embedding_multiplier": 1.0}, None),
                   ("with 1/sqrt(head_dim) instead of attention_multiplier",
                    {"attention_multiplier": 0.25}, None),
                   ("without residual_multiplier", {"residual_multiplier": 1.0}, None),
                   ("without logits_scaling", {"logits_scaling": 1.0}, None)],
    "mixtral": [("with top-1 routing", {"num_experts_per_tok": 1}, None),
                ("without top-k renormalization", None, _no_topk_renorm)],
}


def cmd_arch(a):
    import make_tiny_model
    names = a.only.split(",") if a.only else list(make_tiny_model.SPECS)
    n_prompt, n_new = 64, 32
    for name in names:
        d, _ = make_tiny_model.build(name, a.cache, a.shared)
        f32_dir, bf16_dir = os.path.join(d, "f32"), os.path.join(d, "bf16")
        rng = np.random.RandomState(1234)
        prompt = [int(x) for x in rng.randint(3, make_tiny_model.VOCAB, size=n_prompt)]
        m = torch_ref.Model(f32_dir, "float32")
        ref_logits, ref_ids = m.generate(prompt, n_new, ignore_eos=True)
        ref_bf16, _ = torch_ref.Model(bf16_dir, "bfloat16").generate(prompt, 1, ignore_eos=True)
        abl_list = ABLATE.get(name, [])
        for feat, override, fn in (abl_list if isinstance(abl_list, list) else [abl_list]):
            am = torch_ref.Model(f32_dir, "float32", config_override=override)
            if fn:
                fn(am)
            abl, _ = am.generate(prompt, 1, ignore_eos=True)
            e = rel_err(abl, ref_logits)
            report(e > 100 * F32_TOL, f"{name}: reference {feat} differs by {e:.3g} "
                                      f"(> {100 * F32_TOL:g} needed for the test to bite)")
        if a.ref_only:
            print(f"     {name}: ref ids {ref_ids[:12]}...")
            continue

        def go():
            ids, lg = run_sglc(a.sglc, f32_dir, prompt, n_new, "float32")
            check_logits(f"{name} f32", lg, ref_logits, F32_TOL)
            check_ids(f"{name} f32", ids, ref_ids)
            _, lg = run_sglc(a.sglc, bf16_dir, prompt, 1, "float32")
            check_logits(f"{name} bf16-file f32-compute", lg, ref_bf16, F32_TOL)
            check_bf16_logits(a.sglc, f"{name} bf16", bf16_dir, prompt, ref_bf16, BF16_TOL, is_moe(bf16_dir))
        guard(name, go)


def cmd_gemma(a):
    import gemma_ref
    names = a.only.split(",") if a.only else list(gemma_ref.SPECS)
    n_prompt, n_new = 64, 32
    for name in names:
        d, _ = gemma_ref.build(name, a.cache)
        f32_dir, bf16_dir = os.path.join(d, "f32"), os.path.join(d, "bf16")
        rng = np.random.RandomState(1234)
        prompt = [int(x) for x in rng.randint(3, gemma_ref.VOCAB, size=n_prompt)]
        ref_logits, ref_ids = gemma_ref.Model(f32_dir).generate(prompt, n_new)
        # bf16 weights: as --dtype bfloat16 (sqrt(hidden) rounded to bf16
        # too, as transformers casts it) and as --dtype float32 (f32 scale)
        ref_bf16, _ = gemma_ref.Model(bf16_dir, "bfloat16").generate(prompt, 1)
        ref_bf16w, _ = gemma_ref.Model(bf16_dir, "float32").generate(prompt, 1)
        e_norm = rel_err(ref_bf16, ref_bf16w)
        print(f"     {name}: bf16-rounded sqrt(hidden) moves the bf16-weight logits by {e_norm:.3g}")
        for feat, override, text_override, fn in gemma_ref.ABLATIONS.get(name, []):
            am = gemma_ref.Model(f32_dir, config_override=override, text_override=text_override)
            if fn:
                fn(am)
            abl, _ = am.generate(prompt, 1)
            e = rel_err(abl, ref_logits)
            report(e > 100 * F32_TOL, f"{name}: reference {feat} differs by {e:.3g} "
                                      f"(> {100 * F32_TOL:g} needed for the test to bite)")
        if a.ref_only:
            print(f"     {name}: ref ids {ref_ids[:12]}...")
            continue

        def go():
            ids, lg = run_sglc(a.sglc, f32_dir, prompt, n_new, "float32")
            check_logits(f"{name} f32", lg, ref_logits, F32_TOL)
            check_ids(f"{name} f32", ids, ref_ids)
            _, lg = run_sglc(a.sglc, bf16_dir, prompt, 1, "float32")
            check_logits(f"{name} bf16-file f32-compute", lg, ref_bf16w, F32_TOL)
            _, lg = run_sglc(a.sglc, bf16_dir, prompt, 1, "bfloat16")
            check_logits(f"{name} bf16", lg, ref_bf16, BF16_TOL)
            if e_norm > 0 and lg is not None and lg.size == ref_bf16.size:
                g = lg.reshape(ref_bf16.shape)
                print(f"     {name} bf16: max|d|/max|ref| {rel_err(g, ref_bf16):.3g} against the "
                      f"bf16-scale reference, {rel_err(g, ref_bf16w):.3g} against the f32-scale one")
            # several sequences at once through the scheduler, prefill in
            # chunks of 16 rows: per-row rope tables (local and global) and
            # windows with batched decode
            m = gemma_ref.Model(f32_dir)
            prompts = [prompt, prompt[:41], prompt[20:43], prompt[5:12]]
            want = [m.generate(p_, 16)[1] for p_ in prompts]
            got = run_requests(a.sglc, f32_dir, prompts, 16, ["--chunked-prefill-size", "16"])
            for i, (g_, w_) in enumerate(zip(got, want)):
                check_ids(f"{name} f32 batch of {len(prompts)}, request {i} "
                          f"({len(prompts[i])}-token prompt)", g_, w_)
        guard(name, go)


def run_requests(sglc, model_dir, prompts, n_new, extra, timeout=300):
    """sglc generate --requests (greedy, ignore_eos): output ids per prompt."""
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "req.jsonl")
        with open(path, "w") as f:
            for p in prompts:
                f.write(json.dumps({"input_ids": p, "sampling_params": {
                    "temperature": 0, "max_new_tokens": n_new, "ignore_eos": True}}) + "\n")
        cmd = [sglc, "generate", "--model-path", model_dir, "--requests", path,
               "--skip-tokenizer-init", "--dtype", "float32"] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise SglcError(f"exit {p.returncode}: {p.stderr.strip()[-800:]}")
        rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        if len(rows) != len(prompts):
            raise SglcError(f"{len(rows)} response lines for {len(prompts)} requests")
        return [[int(x) for x in r["output_ids"]] for r in rows]


def cmd_stories260k(a):
    import llama2c_to_hf
    src = os.path.join(a.shared, "models", "stories260K-llama2c")
    out = os.path.join(a.cache, "stories260K-hf")
    llama2c_to_hf.convert(os.path.join(src, "stories260K.bin"), out,
                          os.path.join(src, "tok512.model"), os.path.join(src, "tok512.bin"))
    with open(os.path.join(HERE, "data", "stories260K_greedy.txt")) as f:
        doc_text = f.read().rstrip("\n")
    pieces = torch_ref.load_pieces(out)
    m = torch_ref.Model(out, "float32")
    # llama2.c run.c -t 0.0 with its default 256 steps: 256 tokens after BOS
    _, ref_ids = m.generate([1], 256, ignore_eos=True)
    ref_text = torch_ref.decode_spm(pieces, ref_ids).lstrip(" ")
    report(ref_text == doc_text, "reference on the converted model reproduces llama2.c's "
                                 "documented greedy text (doc/stories260K.md, -t 0.0)")
    prompt = [1] + ref_ids[:63]
    ref_logits, _ = m.generate(prompt, 1, ignore_eos=True)

    def go():
        ids, _ = run_sglc(a.sglc, out, [1], 256, "float32", dump=False)
        check_ids("stories260K f32 from BOS", ids, ref_ids)
        text = torch_ref.decode_spm(pieces, ids).lstrip(" ")
        report(text == doc_text, f"stories260K sglc text == documented text "
                                 f"(sglc begins {text[:60]!r})")
        _, lg = run_sglc(a.sglc, out, prompt, 1, "float32")
        check_logits("stories260K f32 64-token prompt", lg, ref_logits, F32_TOL)
    guard("stories260K", go)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["tinystories", "arch", "gemma", "stories260k"])
    ap.add_argument("--sglc", default=os.environ.get("SGLC_BIN", os.path.join(ROOT, "build", "sglc")))
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--only", help="arch: comma-separated tiny model names")
    ap.add_argument("--ref-only", action="store_true", help="arch: only run the reference side")
    a = ap.parse_args()
    torch.set_num_threads(1)
    {"tinystories": cmd_tinystories, "arch": cmd_arch, "gemma": cmd_gemma,
     "stories260k": cmd_stories260k}[a.command](a)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
