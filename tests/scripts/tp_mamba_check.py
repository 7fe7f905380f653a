"""NemotronH (hybrid Mamba2) under tensor and pipeline parallelism against
one process (tests/scripts/test_tp_mamba.sh).

The tiny NemotronH of tests/ref/mamba_ref.py (pattern M*-M-*M: 8 Mamba heads
of 8 in 2 groups, 4 attention heads over 2 KV heads, MLP 96) runs as
`--tp-size 2` (a Mamba group and 4 heads per rank, one KV head each),
`--tp-size 4` (2 Mamba heads per rank, the 2 groups replicated over 2 ranks
each, so the gated RMSNorm's sums go through the all-reduce; the 2 KV heads
replicated), `--pp-size 2` (layers 0-2 | 3-6, each stage with its own Mamba
states) and `--tp-size 2 --pp-size 2`.  Each must give, in f32:
- `generate`: the prompt logits of one process within 1e-5 relative
  (max|d| / max|ref|) and 16 identical greedy ids;
- the scheduler (`generate --requests`, `--chunked-prefill-size 5`): two
  concurrent requests, their prompt and output logprobs within 1e-5 of one
  process and the same output ids; its state pool of --max-mamba-cache-size
  8 states holds this rank's slice (bytes per state as logged = the rank's
  heads' conv + SSM state for its stage's Mamba layers, or the most any
  stage holds); and with the radix cache's Mamba
  checkpoints every 8 tokens (extra_buffer) and a third request sharing a
  16-token prefix with the first, submitted after the first two finished:
  it resumes from the first one's checkpoint (cached_tokens 16, the state
  copy reaching every rank) and answers as one process does;
- LoRA adapters on the attention blocks (q/k/v/o) and on the MLP blocks,
  lm_head and embeddings: `generate --lora-path` at TP 2, TP 4 and TP 2 x
  PP 2 = one process with the adapter (which moves the logits > 1e-2).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.environ["SGLC_ROOT"]
BIN = os.environ["SGLC_BIN"]
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
import mamba_ref  # noqa: E402

TOL = 1e-5
CONFIGS = [(2, 1), (4, 1), (1, 2), (2, 2)]
fails = 0


def report(ok, msg):
    global fails
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    fails += not ok


def par(tp, pp):
    return ["--tp-size", str(tp), "--pp-size", str(pp), "--threads", str(max(tp * pp, 2)),
            "--dist-timeout", "60"]


def gen(model, ids, tp, pp, td, extra=()):
    path = os.path.join(td, f"lg{tp}{pp}.f32")
    p = subprocess.run([BIN, "generate", "--model-path", model, "--input-ids", ",".join(map(str, ids)),
                        "--max-new-tokens", "16", "--temperature", "0", "--json", "--ignore-eos",
                        "--dtype", "float32", "--dump-logits", path] + par(tp, pp) + list(extra),
                       capture_output=True, text=True, timeout=180)
    if p.returncode:
        return None, None, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out["output_ids"], np.fromfile(path, dtype="<f4"), p.stderr


def req(ids, n_new, lp_start=0):
    return json.dumps({"input_ids": ids, "return_logprob": True, "logprob_start_len": lp_start,
                       "sampling_params": {"temperature": 0, "max_new_tokens": n_new, "ignore_eos": True}})


def sched(model, path, tp, pp, extra):
    p = subprocess.run([BIN, "generate", "--model-path", model, "--requests", path, "--skip-tokenizer-init",
                        "--dtype", "float32", "--max-total-tokens", "512", "--chunked-prefill-size", "5"]
                       + par(tp, pp) + extra, capture_output=True, text=True, timeout=180)
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return (rows if p.returncode == 0 else None), p.stderr


def state_bytes(cfg, tp, pp):
    """One rank's Mamba state: its heads' conv window and SSM state, for the
    Mamba layers of the stage that holds the most (model_mamba_state_bytes)."""
    nh, P, N, G, K = (cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["ssm_state_size"], cfg["n_groups"],
                      cfg["conv_kernel"])
    L, pat = cfg["num_hidden_layers"], cfg["hybrid_override_pattern"]
    nl = max(pat[L * s // pp:L * (s + 1) // pp].count("M") for s in range(pp))
    nhl, ngl = nh // tp, (G // tp if G % tp == 0 else 1)
    cd = nhl * P + 2 * ngl * N
    return nl * ((K - 1) * cd * 4 + nhl * P * N * 4) + 4


def logged_states(err):
    """(states, bytes) of the scheduler's "Mamba cache: N states x M MiB (B bytes" line."""
    m = re.search(r"Mamba cache: (\d+) states x [0-9.]+ MiB \((\d+) bytes", err)
    return (int(m.group(1)), int(m.group(2))) if m else None


def lps(row):
    mi = row["meta_info"]
    return np.array([e[0] for e in mi["input_token_logprobs"] if e[0] is not None] +
                    [e[0] for e in mi["output_token_logprobs"]], dtype=np.float64)


def main():
    d = os.path.join(sys.argv[1], "nemotron_h")
    mamba_ref.build(d)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    V = mamba_ref.VOCAB
    rng = np.random.RandomState(12)
    ids = [int(t) for t in rng.randint(3, V, 40)]
    a, b = [int(t) for t in rng.randint(3, V, 24)], [int(t) for t in rng.randint(3, V, 13)]
    c = a[:16] + [int(t) for t in rng.randint(3, V, 9)]
    with tempfile.TemporaryDirectory() as td:
        ref_ids, ref, err = gen(d, ids, 1, 1, td)
        if ref is None:
            report(False, f"one process: {err[-600:]}")
            return 1
        two = os.path.join(td, "two.jsonl")
        with open(two, "w") as f:
            f.write(req(a, 8) + "\n" + req(b, 8) + "\n")
        # the third request after the first two: --requests admits in order
        # with at most 2 running, so it waits for a slot and finds a's checkpoints
        three = os.path.join(td, "three.jsonl")
        with open(three, "w") as f:
            f.write(req(a, 8) + "\n" + req(b, 8) + "\n" + req(c, 8, 16) + "\n")  # logprobs past the prefix
        track = ["--mamba-scheduler-strategy", "extra_buffer", "--mamba-track-interval", "8",
                 "--max-running-requests", "2"]
        modes = [("2 requests, chunks of 5", two, ["--max-mamba-cache-size", "8"]), ("extra_buffer checkpoints + resume", three, track)]
        sref = {}
        for name, path, extra in modes:
            rows, err = sched(d, path, 1, 1, extra)
            if name == modes[0][0]:
                got, want = logged_states(err), (8, state_bytes(cfg, 1, 1))
                report(got == want, f"one process: Mamba cache of (states, bytes per state) {got} == {want}")
            if rows is None:
                report(False, f"one process, {name}: {err[-600:]}")
                return 1
            sref[name] = rows
        cached = sref[modes[1][0]][2]["meta_info"].get("cached_tokens")
        report(cached == 16, f"one process: the third request resumed from a checkpoint (cached_tokens {cached} == 16)")
        for tp, pp in CONFIGS:
            tag = f"tp={tp} pp={pp}"
            got_ids, got, err = gen(d, ids, tp, pp, td)
            if got is None:
                report(False, f"{tag} generate: {err[-600:]}")
                continue
            e = float(np.max(np.abs(got.astype(np.float64) - ref)) / np.max(np.abs(ref)))
            report(got.size == ref.size and e <= TOL, f"{tag} generate: prompt logits max|d|/max|ref| = {e:.3g} (tol {TOL:g})")
            report(got_ids == ref_ids, f"{tag} generate: 16 greedy ids identical")
            for name, path, extra in modes:
                rows, err = sched(d, path, tp, pp, extra)
                if name == modes[0][0]:  # the pool: --max-mamba-cache-size states of this rank's slice each
                    want = (8, state_bytes(cfg, tp, pp))
                    got = logged_states(err)
                    report(got == want and (tp * pp == 1) != ("per rank" in err),
                           f"{tag}: Mamba cache of (states, bytes per state) {got} == {want} per rank")
                want = sref[name]
                if rows is None or len(rows) != len(want):
                    report(False, f"{tag} {name}: {err[-600:]}")
                    continue
                for i, (r, w) in enumerate(zip(rows, want)):
                    x, y = lps(r), lps(w)
                    e = float(np.max(np.abs(x - y) / np.maximum(1.0, np.abs(y)))) if x.size == y.size else 1.0
                    ok = e <= TOL and r["output_ids"] == w["output_ids"] and \
                        r["meta_info"].get("cached_tokens") == w["meta_info"].get("cached_tokens")
                    report(ok, f"{tag} {name}: request {i} logprobs max err {e:.3g}, ids "
                           f"{'identical' if r['output_ids'] == w['output_ids'] else 'DIFFER'}, cached_tokens "
                           f"{r['meta_info'].get('cached_tokens')}")
        # LoRA on the attention (q/k/v/o) and MLP (up/down + lm_head + embeddings)
        # blocks: each rank its slice of the adapter
        kinds = cfg["hybrid_override_pattern"]
        att = [i for i, k in enumerate(kinds) if k == "*"]
        mlp = [i for i, k in enumerate(kinds) if k == "-"]
        ads = {"attn": (["q_proj", "k_proj", "v_proj", "o_proj"], att, 4, 8, False),
               "mlp": (["up_proj", "down_proj", "lm_head", "embeddings"], mlp, 8, 16, True)}
        for i, (name, (tg, ls, r, al, rs)) in enumerate(ads.items()):
            ad = os.path.join(td, name)
            mamba_ref.write_adapter(d, ad, tg, ls, r, al, 100 + i, rs)
            lids, lref, err = gen(d, ids, 1, 1, td, ["--lora-path", ad])
            if lref is None:
                report(False, f"LoRA {name} one process: {err[-600:]}")
                continue
            e = float(np.max(np.abs(lref.astype(np.float64) - ref)) / np.max(np.abs(ref)))
            report(e > 1e-2, f"LoRA {name}: changes the one-process logits ({e:.3g} > 1e-2)")
            for tp, pp in ((2, 1), (4, 1), (2, 2)):
                got_ids, got, err = gen(d, ids, tp, pp, td, ["--lora-path", ad])
                if got is None:
                    report(False, f"LoRA {name} tp={tp} pp={pp}: {err[-600:]}")
                    continue
                e = float(np.max(np.abs(got.astype(np.float64) - lref)) / np.max(np.abs(lref)))
                report(got.size == lref.size and e <= TOL and got_ids == lids,
                       f"LoRA {name} tp={tp} pp={pp}: logits max|d|/max|ref| = {e:.3g}, ids "
                       f"{'identical' if got_ids == lids else 'DIFFER'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
