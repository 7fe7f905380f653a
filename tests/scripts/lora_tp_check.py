"""LoRA under tensor / pipeline parallelism, offline (tests/scripts/test_lora_tp.sh).

Random PEFT adapters (tests/ref/lora_ref.py's make_adapter and variants) on
tiny models: llama3 (GQA, 8 heads / 2 KV heads, tied embeddings: the four
variants — all seven projections F32, q/v/down BF16 rsLoRA, k/o/up/gate +
lm_head F16, embed_tokens + v BF16), qwen2-moe (shared experts: attention
only, as lora_ref does for MoE) and phi3-mini-4k (fused qkv_proj /
gate_up_proj adapters, PHI3_VARIANTS).  For each adapter:

  - `generate --lora-path` at --tp-size 1 must move the prompt logits
    (max |d| > 1e-2 against the base: the adapter is not ignored);
  - --tp-size 2 and --pp-size 2 (and, for llama3, `mpirun -np 2 ...
    --tp-size 2` when mpirun and an Open MPI build are there) give the
    prompt logits of --tp-size 1
    within TOL relative (max|d| / max|ref|; measured ~1e-6: the shards sum
    in another order) and identical greedy ids.

llama3's first adapter also at --tp-size 4 (2 KV heads: replicated).
Then a mixed batch (`generate --requests`, llama3: the four adapters and
the base, return_logprob) at --tp-size 2 (also with the prompts cut into
chunks of 8 by --chunked-prefill-size) and --pp-size 2: every line's ids
equal the same line run alone at --tp-size 1, and its output logprobs
within LP_TOL.  With --write DIR, the llama3 adapters stay in DIR (a0..a3)
with a "bad" one (layer 1's q_proj B one row short: only the rank holding
layer 1 refuses it) for the server part.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.environ["SGLC_ROOT"]
BIN = os.environ["SGLC_BIN"]
SHARED = os.environ["SGLC_SHARED"]
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import lora_ref  # noqa: E402
import make_tiny_model  # noqa: E402
import safetensors_np  # noqa: E402
import torch_ref  # noqa: E402

TOL = 1e-5
LP_TOL = 1e-4
fails = 0


def report(ok, msg):
    global fails
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        fails += 1


def mpi_cmd():
    """mpirun -np 2 when mpirun exists and the binary links Open MPI, else None."""
    if not shutil.which("mpirun"):
        return None
    p = subprocess.run(["ldd", BIN], capture_output=True, text=True)
    if "libmpi" not in p.stdout:
        return None
    return ["mpirun", "--oversubscribe", "-np", "2"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])


MPI = mpi_cmd()


def run(model, ids, lora, tp=1, pp=1, n_new=8, mpi=False):
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "logits.f32")
        cmd = (MPI if mpi else []) + [BIN, "generate", "--model-path", model, "--input-ids", ",".join(map(str, ids)),
               "--max-new-tokens", str(n_new), "--temperature", "0", "--json", "--ignore-eos",
               "--dtype", "float32", "--dump-logits", path, "--tp-size", str(tp), "--pp-size", str(pp),
               "--threads", "2", "--dist-timeout", "60"]
        if lora:
            cmd += ["--lora-path", lora]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            return None, None, p.stderr
        obj = json.loads(p.stdout.strip().splitlines()[-1])
        return [int(x) for x in obj["output_ids"]], np.fromfile(path, dtype="<f4").astype(np.float64), p.stderr


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def adapters_for(name, f32_dir, out, variants, n=None):
    cfg = json.load(open(os.path.join(f32_dir, "config.json")))
    state = torch_ref.load_state(f32_dir)
    if "lm_head.weight" not in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    # an MoE model (experts cannot be sliced across ranks: refused under TP / PP)
    moe = any(cfg.get(x, 0) for x in ("num_experts", "num_local_experts", "n_routed_experts"))
    dirs = []
    for i, (r, alpha, rslora, tag, targets) in enumerate(variants[:n] if n else variants):
        if moe:  # attention (and lm_head / embed) only
            targets = [t for t in targets if t not in lora_ref.MLP]
        d = os.path.join(out, f"{name}-a{i}")
        lora_ref.make_adapter(d, state, cfg, 9100 + i, r + i, alpha, rslora, tag, targets)
        dirs.append(d)
    return cfg, dirs


def check_model(name, f32_dir, dirs, vocab, mpi=False, tp4=False):
    ids = [(i * 37) % (vocab - 3) + 3 for i in range(24)]
    _, base, err = run(f32_dir, ids, None)
    if base is None:
        report(False, f"{name}: base run failed: {err[-400:]}")
        return
    for d in dirs:
        tag = f"{name} {os.path.basename(d)}"
        ref_ids, ref, err = run(f32_dir, ids, d)
        if ref is None:
            report(False, f"{tag} tp=1: failed: {err[-400:]}")
            continue
        moved = float(np.max(np.abs(ref - base)))
        report(moved > 1e-2, f"{tag} tp=1: the adapter moves the logits by {moved:.3g}")
        runs = ((2, 1, False), (1, 2, False)) + (((2, 1, True),) if mpi and MPI else ())
        if tp4 and d == dirs[0]:
            runs += ((4, 1, False),)  # fewer KV heads than ranks: k/v (and their B rows) replicated
        for tp, pp, over_mpi in runs:
            got_ids, got, err = run(f32_dir, ids, d, tp=tp, pp=pp, mpi=over_mpi)
            what = (f"tp={tp}" if tp > 1 else f"pp={pp}") + (" (mpirun)" if over_mpi else "")
            if got is None:
                report(False, f"{tag} {what}: failed: {err[-500:]}")
                continue
            e = rel(got, ref) if got.size == ref.size else float("inf")
            report(e <= TOL and got_ids == ref_ids,
                   f"{tag} {what}: prompt logits max|d|/max|ref| = {e:.3g} (tol {TOL:g}), greedy ids "
                   f"{'identical' if got_ids == ref_ids else 'DIFFER'}")


def requests(model, lines, path, tp=1, pp=1, lora_paths=(), extra=()):
    with open(path, "w") as f:
        for o in lines:
            f.write(json.dumps(o) + "\n")
    cmd = [BIN, "generate", "--model-path", model, "--requests", path, "--skip-tokenizer-init",
           "--dtype", "float32", "--threads", "2", "--tp-size", str(tp), "--pp-size", str(pp),
           "--dist-timeout", "60"]
    if lora_paths:
        cmd += ["--lora-paths", *lora_paths, "--max-loras-per-batch", "8"]
    cmd += list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return None, p.stderr
    return [json.loads(x) for x in p.stdout.strip().splitlines()], p.stderr


def lps(o):
    return [float(x[0]) for x in o["meta_info"]["output_token_logprobs"]]


def check_mixed(f32_dir, dirs, td):
    names = [f"a{i}" for i in range(len(dirs))]
    paths = [f"{n}={d}" for n, d in zip(names, dirs)]
    lines = []
    for i in range(len(names) + 2):  # every adapter, the base twice
        o = {"input_ids": [(i * 53 + j * 11) % 500 + 3 for j in range(6 + 3 * i)],
             "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True},
             "return_logprob": True}
        if i < len(names):
            o["lora_path"] = names[(i * 3) % len(names)]
        lines.append(o)
    alone = []
    for i, o in enumerate(lines):
        r, err = requests(f32_dir, [o], os.path.join(td, f"one{i}.jsonl"), lora_paths=paths)
        alone.append(r[0] if r else None)
        if not r:
            report(False, f"line {i} alone at tp=1 failed: {err[-300:]}")
    # the third run: prompts cut into chunks of 8 tokens by the scheduler
    for tp, pp, ex in ((2, 1, ()), (1, 2, ()), (2, 1, ("--chunked-prefill-size", "8"))):
        what = (f"tp={tp}" if tp > 1 else f"pp={pp}") + (" chunked 8" if ex else "")
        got, err = requests(f32_dir, lines, os.path.join(td, "mixed.jsonl"), tp=tp, pp=pp, lora_paths=paths,
                            extra=ex)
        if got is None:
            report(False, f"mixed batch {what}: failed: {err[-500:]}")
            continue
        for i, (g, a) in enumerate(zip(got, alone)):
            if a is None:
                continue
            who = lines[i].get("lora_path", "base")
            same = g.get("output_ids") == a["output_ids"]
            e = float(np.max(np.abs(np.array(lps(g)) - np.array(lps(a))))) if same else float("inf")
            report(same and e <= LP_TOL, f"mixed batch {what} line {i} ({who}): ids "
                   f"{'==' if same else '!='} alone at tp=1, logprobs max|d| = {e:.3g} (tol {LP_TOL:g})")


def check_expert_refused(model, cfg, td):
    """An adapter on an MoE expert is refused under --tp-size 2 / --pp-size 2
    with a message naming the tensor (experts are not sliced), not run whole."""
    d = os.path.join(td, "expert")
    os.makedirs(d, exist_ok=True)
    H, inter = cfg["hidden_size"], cfg["moe_intermediate_size"]
    rng = np.random.RandomState(3)
    pre = "base_model.model.model.layers.0.mlp.experts.0.gate_proj"
    safetensors_np.write(os.path.join(d, "adapter_model.safetensors"),
                         {pre + ".lora_A.weight": rng.standard_normal((2, H)).astype(np.float32),
                          pre + ".lora_B.weight": rng.standard_normal((inter, 2)).astype(np.float32)},
                         metadata={"format": "pt"})
    json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["gate_proj"]},
              open(os.path.join(d, "adapter_config.json"), "w"))
    for tp, pp in ((2, 1), (1, 2)):
        what = f"tp={tp}" if tp > 1 else f"pp={pp}"
        _, got, err = run(model, [5, 6, 7], d, tp=tp, pp=pp, n_new=1)
        last = err.strip().splitlines()[-1] if err.strip() else ""
        report(got is None and "mlp.experts.0.gate_proj" in err and "does not shard" in err,
               f"qwen2-moe expert adapter {what}: refused: {last[-160:]}")


def main():
    cache = os.path.join(ROOT, "build", "tiny-models")
    write = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--write" else None
    td = tempfile.mkdtemp(prefix="sglc-lora-tp-")
    try:
        d, _ = make_tiny_model.build("llama3", cache, SHARED)
        llama = os.path.join(d, "f32")
        cfg, ldirs = adapters_for("llama3", llama, write or td, lora_ref.VARIANTS)
        if write:  # the server part's folders: a0..a3 and one a worker rank refuses
            for i, x in enumerate(ldirs):
                os.symlink(x, os.path.join(write, f"a{i}"))
            bad = os.path.join(write, "bad")
            os.makedirs(bad)
            t, meta = safetensors_np.read(os.path.join(ldirs[0], "adapter_model.safetensors"))
            k = "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight"
            t[k] = t[k][:-1]
            safetensors_np.write(os.path.join(bad, "adapter_model.safetensors"), t, metadata=meta)
            with open(os.path.join(ldirs[0], "adapter_config.json")) as f, \
                    open(os.path.join(bad, "adapter_config.json"), "w") as g:
                g.write(f.read())
        if not MPI:
            print("note: no mpirun / Open MPI build: the mpirun runs are skipped")
        check_model("llama3", llama, ldirs, cfg["vocab_size"], mpi=True, tp4=True)
        check_mixed(llama, ldirs, td)
        import make_tiny_ds
        q, _ = make_tiny_ds.build("qwen2-moe", cache, SHARED)
        qdir = os.path.join(q, "f32")
        qcfg, qdirs = adapters_for("qwen2-moe", qdir, td, lora_ref.VARIANTS, n=2)
        check_model("qwen2-moe", qdir, qdirs, qcfg["vocab_size"])
        check_expert_refused(qdir, qcfg, td)
        import phi3_ref
        pdir = os.path.join(phi3_ref.build("phi3-mini-4k", cache, SHARED), "f32")
        pcfg, pdirs = adapters_for("phi3", pdir, td, lora_ref.PHI3_VARIANTS)
        check_model("phi3-mini-4k", pdir, pdirs, pcfg["vocab_size"])
    finally:
        subprocess.run(["rm", "-rf", td])
    print(f"{fails} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
