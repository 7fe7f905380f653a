#!/usr/bin/env bash
# mamba_radix_ttft — time to first token of a request that shares a long
# prefix with the one before it, on a NemotronH-shaped dummy model
# (tests/ref/configs/nemotron_h-mid, 212 MiB bf16, --load-format dummy),
# radix cache with Mamba state checkpoints (--mamba-scheduler-strategy
# extra_buffer, --mamba-track-interval 256) against no_buffer (radix off).
# One `sglc serve` per strategy; per round a new random prefix of PREFIX
# tokens: request A (prefix + 32 tokens, 1 output token) primes the cache,
# request B (prefix + 32 other tokens, 1 output token) is timed from the
# client (POST /generate to the answer: prefill + the first token).  The
# rounds alternate which server goes first; B's best first-token logprob
# must agree on both (the dummy's distribution is nearly flat, so ids tie;
# the correctness test is tests/scripts/test_mamba_radix.sh).  Prints the median B
# latency of each, the ratio, B's cached_tokens, and the median latency of
# A (a cold prompt: what the checkpoints cost when nothing is cached).
# Usage: bash bench/mamba_radix_ttft.sh [PREFIX (2048)] [ROUNDS (5)] [THREADS (2)]
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/build/sglc
PREFIX=${1:-2048}
R=${2:-5}
TH=${3:-2}
exec python3 - "$BIN" "$ROOT/tests/ref/configs/nemotron_h-mid" "$PREFIX" "$R" "$TH" <<'PY'
import json, random, socket, statistics, subprocess, sys, tempfile, time, urllib.request
binp, model, prefix, rounds, th = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def start(strategy, log):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    p = subprocess.Popen([binp, "serve", "--model-path", model, "--load-format", "dummy", "--dtype", "bfloat16",
                          "--host", "127.0.0.1", "--port", str(port), "--threads", th, "--skip-server-warmup", "--sleep-on-idle",
                          "--skip-tokenizer-init", "--max-total-tokens", "32768", "--max-mamba-cache-size", "64",
                          "--mamba-scheduler-strategy", strategy, "--mamba-track-interval", "256"],
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2); return p, port
        except Exception:
            if p.poll() is not None: raise SystemExit("server exited")
            time.sleep(0.1)
    raise SystemExit("server did not come up")

def gen(port, ids):
    body = {"input_ids": ids, "return_logprob": True, "top_logprobs_num": 2,
            "sampling_params": {"temperature": 0, "max_new_tokens": 1}}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        o = json.loads(r.read())
    return time.perf_counter() - t0, o

rng = random.Random(1)
with tempfile.TemporaryFile("w+") as log:
    srv = {st: start(st, log) for st in ("extra_buffer", "no_buffer")}
    try:
        times = {st: [] for st in srv}
        cold = {st: [] for st in srv}  # request A: a cold prompt (the checkpoints' cost with extra_buffer)
        cached = []
        for i in range(rounds + 1):  # round 0 warms both up (not timed)
            pre = [rng.randrange(3, 32000) for _ in range(prefix)]
            a = pre + [rng.randrange(3, 32000) for _ in range(32)]
            b = pre + [rng.randrange(3, 32000) for _ in range(32)]
            outs = {}
            for st in (("extra_buffer", "no_buffer") if i % 2 else ("no_buffer", "extra_buffer")):
                ta, _ = gen(srv[st][1], a)
                t, o = gen(srv[st][1], b)
                if i: cold[st].append(ta)
                outs[st] = o
                if i: times[st].append(t)
            tops = {st: o["meta_info"]["output_top_logprobs"][0] for st, o in outs.items()}
            # the dummy model's distribution is nearly flat (ties between ids), so the check is the
            # best logprob, not the id (correctness is tests/scripts/test_mamba_radix.sh's)
            if abs(tops["extra_buffer"][0][0] - tops["no_buffer"][0][0]) > 1e-4:
                raise SystemExit(f"round {i}: the strategies disagree on B's first token: {tops}")
            cached.append(outs["extra_buffer"]["meta_info"]["cached_tokens"])
        on, off = statistics.median(times["extra_buffer"]), statistics.median(times["no_buffer"])
        print(json.dumps({"prefix": prefix, "threads": int(th), "rounds": rounds, "ttft_extra_buffer_s": round(on, 4),
                          "ttft_no_buffer_s": round(off, 4), "ratio": round(off / on, 2),
                          "b_cached_tokens": cached[1:],
                          "cold_a_extra_buffer_s": round(statistics.median(cold["extra_buffer"]), 4),
                          "cold_a_no_buffer_s": round(statistics.median(cold["no_buffer"]), 4), "extra_buffer_runs": [round(x, 4) for x in times["extra_buffer"]],
                          "no_buffer_runs": [round(x, 4) for x in times["no_buffer"]]}))
    finally:
        for p, _ in srv.values():
            p.terminate(); p.wait(timeout=30)
PY
