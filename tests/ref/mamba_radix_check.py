#!/usr/bin/python3
"""The radix cache of a hybrid Mamba2 model (NemotronH) with state
checkpoints (--mamba-scheduler-strategy extra_buffer), on the tiny model of
mamba_ref.py.

DESIGN
  A request served from a cached prefix must give what the same request
  gives on a fresh process.  An `sglc serve` (checkpoints every 16 tokens;
  chunked prefill in pieces of 7, so checkpoints fall inside chunks, then
  without, so they fall inside one forward's scan) gets a
  warm-up request (60-token prompt W + 10 greedy tokens: prefill
  checkpoints at 16, 32, 48, a decode checkpoint at 64), then queries that
  share with it a prefix ending before a checkpoint (47: resumes at 32),
  at one (48: resumes at 48), after one (40: resumes at 32), inside its
  output (W + 6 output tokens: resumes at 64 from the decode checkpoint)
  and nothing (0).  For each: meta_info.cached_tokens == the resume point,
  greedy ids equal, prompt logprobs (from logprob_start_len, past the
  resume point) and output logprobs within 1e-4 of `sglc generate
  --requests` of the query alone in a fresh process, and within 1e-4 of
  the float64 reference (mamba_ref.forward).  Then eviction: a server with
  8 state slots (2 running requests) and a 256-token KV pool gets five
  40-token prompts with distinct prefixes (two checkpoints each): the first
  one's checkpoints are evicted (cached_tokens 0 when it comes back), the
  last one's kept (32), the outputs still equal the fresh ones, and the idle
  leak checks (KV pages and Mamba states) report nothing.  Retraction: four
  requests decoding into a 200-token KV pool: one is retracted and prefilled
  again, every output equal to the request alone (the retracted request's
  checkpoints stay in the tree, but the KV pressure that retracted it
  usually evicts them before it comes back), the leak checks clean.  Last, no_buffer logs
  the radix cache off, and an interval that is not a multiple of the page
  size is refused.

Usage: mamba_radix_check.py SGLC CACHE_DIR
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mamba_ref  # noqa: E402

TRACK = ["--mamba-scheduler-strategy", "extra_buffer", "--mamba-track-interval", "16"]
COMMON = ["--skip-tokenizer-init", "--dtype", "float32", "--threads", "2"]
# tests/scripts/test_tp_mamba.sh runs it all again under --tp-size / --pp-size
COMMON += os.environ.get("SGLC_MAMBA_RADIX_ARGS", "").split()


def body(ids, n_new, lp_start):
    return {"input_ids": ids, "return_logprob": True, "logprob_start_len": lp_start,
            "sampling_params": {"temperature": 0, "max_new_tokens": n_new, "ignore_eos": True}}


class Server:
    def __init__(self, sglc, model, extra, log_path):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.p = subprocess.Popen([sglc, "serve", "--model-path", model, "--host", "127.0.0.1", "--port",
                                   str(self.port), "--skip-server-warmup"] + COMMON + extra,
                                  stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2)
                return
            except Exception:  # noqa: BLE001 -- not up yet
                if self.p.poll() is not None:
                    raise RuntimeError("sglc serve exited: " + open(log_path).read()[-600:])
                time.sleep(0.1)
        raise RuntimeError("sglc serve did not come up")

    def generate(self, b):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/generate", json.dumps(b).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)
        self.log.close()
        return open(self.log_path).read()


def fresh(sglc, model, td, b, extra=()):
    """The request alone in a new process (no cache to hit)."""
    f = os.path.join(td, "one.jsonl")
    with open(f, "w") as fh:
        fh.write(json.dumps(b) + "\n")
    p = mamba_ref.run([sglc, "generate", "--model-path", model, "--requests", f, "--max-total-tokens", "512"]
                      + COMMON + list(extra))
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")][0]


def lps(o):
    mi = o["meta_info"]
    return [e[0] for e in mi["input_token_logprobs"] if e[0] is not None], [e[0] for e in mi["output_token_logprobs"]]


def main(sglc, cache):
    d = os.path.join(cache, "nemotron_h")
    mamba_ref.build(d)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    W = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in mamba_ref.safetensors_np.read(os.path.join(d, "model.safetensors"))[0].items()}
    rng = np.random.RandomState(21)
    V = mamba_ref.VOCAB

    def toks(n):
        return [int(t) for t in rng.randint(3, V, n)]

    bad = 0

    def report(ok, msg):
        nonlocal bad
        print(("ok   " if ok else "FAIL ") + msg, flush=True)
        bad += not ok

    def ref_check(name, ids, o, lp_start):
        """o's prompt logprobs (from lp_start) and output ids / logprobs against the float64 reference."""
        seq = ids + o["output_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(mamba_ref.forward(W, cfg, seq), -1)
        want_in = [float(lp[t][seq[t + 1]]) for t in range(lp_start, len(ids) - 1)]
        want_out = [float(lp[t][seq[t + 1]]) for t in range(len(ids) - 1, len(seq) - 1)]
        greedy = all(int(torch.argmax(lp[t])) == seq[t + 1] for t in range(len(ids) - 1, len(seq) - 1))
        gi, go = lps(o)
        err = max(np.max(np.abs(np.array(gi) - want_in)), np.max(np.abs(np.array(go) - want_out)))
        report(greedy and err < 1e-4, f"{name}: greedy and logprobs within {err:.1e} of the float64 reference")

    with tempfile.TemporaryDirectory() as td:
        # ---- cached prefix == fresh process: chunked prefill in pieces of 7 (checkpoints inside
        # chunks, the recurrence), then one piece per prompt (checkpoints inside the chunked scan)
        for mode, chunk in (("chunks of 7", ["--chunked-prefill-size", "7"]), ("one chunk", [])):
            srv = Server(sglc, d, TRACK + chunk + ["--max-total-tokens", "512"], os.path.join(td, "a.log"))
            try:
                w = toks(60)
                wo = srv.generate(body(w, 10, 59))
                report(wo["meta_info"]["cached_tokens"] == 0, f"{mode}: warm-up, nothing cached yet")
                cases = [("prefix ends before a checkpoint (47)", w[:47] + toks(13), 32),
                         ("prefix ends at a checkpoint (48)", w[:48] + toks(12), 48),
                         ("prefix ends after a checkpoint (40)", w[:40] + toks(20), 32),
                         ("prefix inside the output (decode checkpoint 64)", w + wo["output_ids"][:6] + toks(5), 64),
                         ("no shared prefix", toks(30), 0)]
                for name, ids, want_cached in cases:
                    name = f"{mode}: {name}"
                    lp_start = len(ids) - 6  # the cache reaches at most logprob_start_len
                    b = body(ids, 8, lp_start)
                    got = srv.generate(b)
                    alone = fresh(sglc, d, td, b, TRACK + chunk)
                    report(got["meta_info"]["cached_tokens"] == want_cached,
                           f"{name}: cached_tokens {got['meta_info']['cached_tokens']} == {want_cached}")
                    gi, go = lps(got)
                    ai, ao = lps(alone)
                    err = max(np.max(np.abs(np.array(gi) - ai)), np.max(np.abs(np.array(go) - ao)))
                    report(got["output_ids"] == alone["output_ids"] and err < 1e-4,
                           f"{name}: ids equal a fresh process's, logprobs within {err:.1e}")
                    ref_check(name, ids, got, lp_start)
            finally:
                log = srv.stop()
            report("radix cache for NemotronHForCausalLM with Mamba state checkpoints every 16 tokens" in log,
                   f"{mode}: extra_buffer logged")
            report("leak detected" not in log, f"{mode}: no leak reported")

        # ---- eviction under a small pool
        srv = Server(sglc, d, TRACK + ["--max-mamba-cache-size", "8", "--max-total-tokens", "256"],
                     os.path.join(td, "e.log"))
        try:
            prompts = [toks(40) for _ in range(5)]
            first = [srv.generate(body(p, 4, 39)) for p in prompts]
            last_q = body(prompts[-1][:36] + toks(4), 4, 39)
            again_last = srv.generate(last_q)
            again_first = srv.generate(body(prompts[0][:36] + toks(4), 4, 39))
            report(again_last["meta_info"]["cached_tokens"] == 32,
                   f"eviction: the newest prefix still cached ({again_last['meta_info']['cached_tokens']} == 32)")
            report(again_first["meta_info"]["cached_tokens"] == 0,
                   f"eviction: the oldest prefix evicted ({again_first['meta_info']['cached_tokens']} == 0)")
            report(again_last["output_ids"] == fresh(sglc, d, td, last_q, TRACK)["output_ids"],
                   "eviction: the query resumed at 32 == a fresh process's")
            for i, (p, o) in enumerate(zip(prompts, first)):
                alone = fresh(sglc, d, td, body(p, 4, 39), TRACK)
                report(o["output_ids"] == alone["output_ids"], f"eviction: prompt {i} output == a fresh process's")
        finally:
            log = srv.stop()
        report("max_running_requests 2" in log, "8 state slots: 2 running requests (4 slots each)")
        report("leak detected" not in log, "eviction: no KV page or Mamba state leak reported")

        # ---- retraction
        reqs = [body(toks(30), 80, 29) for _ in range(4)]
        f = os.path.join(td, "r.jsonl")
        with open(f, "w") as fh:
            fh.writelines(json.dumps(b) + "\n" for b in reqs)
        p = subprocess.run([sglc, "generate", "--model-path", d, "--requests", f, "--max-total-tokens", "200",
                            "--max-mamba-cache-size", "24"] + COMMON + TRACK, capture_output=True, text=True,
                           timeout=120)
        rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        m = [l for l in p.stderr.splitlines() if "retractions" in l]
        n_ret = int(m[-1].split(" retractions")[0].split()[-1]) if m else 0
        report(p.returncode == 0 and n_ret > 0, f"retraction: {n_ret} retractions")
        report("(0 failed)" in (m[-1] if m else ""), "retraction: leak checks passed")
        for i, (b, o) in enumerate(zip(reqs, rows)):
            alone = fresh(sglc, d, td, b, TRACK)
            report(o["output_ids"] == alone["output_ids"], f"retraction: request {i} output == alone")
        report(len(rows) == 4, f"retraction: {len(rows)} answers for 4 requests")

        # ---- no_buffer and a bad interval
        one = os.path.join(td, "one.jsonl")
        with open(one, "w") as fh:
            fh.write(json.dumps(body(toks(5), 2, 4)) + "\n")
        p = subprocess.run([sglc, "generate", "--model-path", d, "--requests", one, "--mamba-scheduler-strategy",
                            "no_buffer"] + COMMON, capture_output=True, text=True, timeout=60)
        report(p.returncode == 0 and "radix cache disabled for NemotronHForCausalLM" in p.stderr,
               "no_buffer: radix cache off, logged")
        p = subprocess.run([sglc, "generate", "--model-path", d, "--requests", one, "--page-size", "4",
                            "--mamba-scheduler-strategy", "extra_buffer", "--mamba-track-interval", "6"] + COMMON,
                           capture_output=True, text=True, timeout=60)
        report(p.returncode != 0 and "multiple of --page-size" in p.stderr,
               "extra_buffer with an interval not a multiple of the page size: refused")
    return bad


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(1 if main(sys.argv[1], sys.argv[2]) else 0)
