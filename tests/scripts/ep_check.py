"""Expert parallelism, EPLB and the expert distribution recorder
(tests/scripts/test_ep.sh).

1. `generate --tp-size T --ep-size E` (each EP rank holds whole experts,
   every rank routes every token, the all-reduce combines) against the
   one-process run on the tiny MoE models (tests/ref/make_tiny_model.py,
   make_tiny_ds.py): prompt logits within 1e-5 relative (f32) and 16
   greedy ids identical; with redundant experts, a given placement
   (--init-expert-location) and EPLB rebalancing every 3 forwards (ids
   after the moves must still match).  Each rank must say it holds its
   share of the experts, not all of them.
2. Refusals with their messages.
3. `serve` with the recorder: /start, one /generate, /stop, /dump: every
   MoE layer's counts sum to tokens x top_k (stat / per_pass / per_token),
   the same under --tp-size 2 --ep-size 2, and /metrics' expert counters.
"""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = os.environ["SGLC_ROOT"]
BIN = os.environ["SGLC_BIN"]
TOL = 1e-5
fails = 0


def report(ok, msg):
    global fails
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        fails += 1


def run(model, ids, n_new, tp, extra=(), mpi=None):
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "logits.f32")
        cmd = [BIN, "generate", "--model-path", model, "--input-ids", ",".join(map(str, ids)),
               "--max-new-tokens", str(n_new), "--temperature", "0", "--json", "--ignore-eos",
               "--dtype", "float32", "--dump-logits", path, "--tp-size", str(tp),
               "--threads", str(max(tp, 1)), "--dist-timeout", "60", *extra]
        p = subprocess.run((mpi or []) + cmd, capture_output=True, text=True, timeout=180)
        if p.returncode != 0:
            return None, None, p.stderr
        obj = json.loads(p.stdout.strip().splitlines()[-1])
        return [int(x) for x in obj["output_ids"]], np.fromfile(path, dtype="<f4"), p.stderr


def compare(name, ref, ref_ids, got, got_ids, err):
    if got is None:
        report(False, f"{name}: failed: {err[-800:]}")
        return False
    e = float(np.max(np.abs(got.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
    ok = got.size == ref.size and e <= TOL and got_ids == ref_ids
    report(ok, f"{name}: prompt logits max|d|/max|ref| = {e:.3g} (tol {TOL:g}), 16 greedy ids "
               f"{'identical' if got_ids == ref_ids else 'DIFFER'}")
    return ok


def held(err):
    """Experts each rank says it holds: {rank: n}."""
    return {int(r): int(n) for r, n in re.findall(r"rank (\d+) \(EP rank \d+\) holds (\d+) of", err)}


def check_model(name, model, cfg, tps=((2, 2),), extra_cases=True):
    E = cfg.get("num_experts", cfg.get("num_local_experts", cfg.get("n_routed_experts")))
    ids = [(i * 37) % (cfg["vocab_size"] - 3) + 3 for i in range(40)]
    ref_ids, ref, err = run(model, ids, 16, 1)
    if ref is None:
        report(False, f"{name}: one-process run failed: {err[-400:]}")
        return
    for tp, ep in tps:
        got_ids, got, err = run(model, ids, 16, tp, ("--ep-size", str(ep)))
        if compare(f"{name} tp={tp} ep={ep}", ref, ref_ids, got, got_ids, err):
            h = held(err)
            want = {r: E // ep for r in range(tp)}
            report(h == want, f"{name} tp={tp} ep={ep}: experts held per rank {h} (want {want})")
    if not extra_cases:
        return
    red = 2
    got_ids, got, err = run(model, ids, 16, 2, ("--ep-size", "2", "--ep-num-redundant-experts", str(red),
                                                "--ep-dispatch-algorithm", "static"))
    compare(f"{name} ep=2 + {red} redundant experts", ref, ref_ids, got, got_ids, err)
    # a given placement: experts in reverse order over the ranks
    L = cfg["num_hidden_layers"]
    rev = {"physical_to_logical_map": [list(range(E - 1, -1, -1)) for _ in range(L)]}
    got_ids, got, err = run(model, ids, 16, 2, ("--ep-size", "2", "--init-expert-location", json.dumps(rev)))
    compare(f"{name} ep=2 --init-expert-location (reversed)", ref, ref_ids, got, got_ids, err)
    # EPLB: rebalance every 3 forwards (17 forwards: 5 rebalances), with and
    # without redundant slots; the greedy ids after the moves must match
    for r in (0, red):
        got_ids, got, err = run(model, ids, 16, 2, ("--ep-size", "2", "--enable-eplb",
                                                    "--eplb-rebalance-num-iterations", "3",
                                                    "--ep-num-redundant-experts", str(r)))
        n_reb = len(re.findall(r"EPLB: rebalance \d+ on rank 0", err))
        moved = sum(int(x) for x in re.findall(r"EPLB: rebalance \d+ on rank \d+: (\d+) experts", err))
        if compare(f"{name} ep=2 EPLB every 3 forwards, {r} redundant", ref, ref_ids, got, got_ids, err):
            report(n_reb == 5 and moved > 0, f"{name} EPLB: {n_reb} rebalances on rank 0 (want 5), "
                                             f"{moved} expert loads over the ranks (want > 0)")
    # one MoE layer per forward (--eplb-rebalance-layers-per-chunk 1): each
    # rebalance takes as many forwards as the model has MoE layers
    n_moe = sum(1 for il in range(L) if il not in cfg.get("mlp_only_layers", [])
                and il >= cfg.get("first_k_dense_replace", 0))
    got_ids, got, err = run(model, ids, 16, 2, ("--ep-size", "2", "--enable-eplb", "--eplb-rebalance-num-iterations", "3",
                                                "--eplb-rebalance-layers-per-chunk", "1"))
    if compare(f"{name} ep=2 EPLB 1 layer per forward", ref, ref_ids, got, got_ids, err):
        steps = re.findall(r"EPLB: rebalance \d+ on rank 0: \d+ experts loaded here, in (\d+) step", err)
        report(len(steps) == 5 and all(int(x) == n_moe for x in steps),
               f"{name} EPLB 1 layer per forward: {len(steps)} rebalances (want 5) in {steps} steps (want {n_moe} each)")
    # threshold 0: any routed placement is above it, every rebalance is skipped
    got_ids, got, err = run(model, ids, 16, 2, ("--ep-size", "2", "--enable-eplb", "--eplb-rebalance-num-iterations", "3",
                                                "--eplb-min-rebalancing-utilization-threshold", "0"))
    if compare(f"{name} ep=2 EPLB threshold 0", ref, ref_ids, got, got_ids, err):
        n_skip = len(re.findall(r"EPLB: skipped rebalancing: balancedness", err))
        n_reb = len(re.findall(r"EPLB: rebalance \d+ on rank", err))
        report(n_skip == 5 and n_reb == 0, f"{name} EPLB threshold 0: {n_skip} skipped (want 5), {n_reb} done (want 0)")


def refuse(name, msg, args, model):
    p = subprocess.run([BIN, "generate", "--model-path", model, "--input-ids", "1,2", "--max-new-tokens", "1",
                        "--threads", "2", *args], capture_output=True, text=True, timeout=60)
    ok = p.returncode != 0 and msg in p.stderr
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    report(ok, f"refused: {name}: {last}")


# ---- the recorder behind serve -------------------------------------------

def freeport():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def http(url, body=None, method=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data else "GET"),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


class Server:
    def __init__(self, model, log, *args):
        self.port = freeport()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "w")
        self.logpath = log
        self.p = subprocess.Popen([BIN, "serve", "--model-path", model, "--host", "127.0.0.1", "--port",
                                   str(self.port), "--skip-tokenizer-init", "--dtype", "float32",
                                   "--disable-radix-cache", *args],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                if http(self.url + "/health")[0] == 200:
                    return
            except OSError:
                pass
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("server did not start: " + open(log).read()[-1500:])

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.log.close()


def record(model, td, tag, mode, n_prompt, n_new, *args):
    """One request between start and stop; the dump's JSON and the
    /metrics text."""
    s = Server(model, os.path.join(td, tag + ".log"), "--expert-distribution-recorder-mode", mode,
               "--enable-metrics", "--enable-expert-distribution-metrics", *args)
    try:
        _, metrics0, _ = http(s.url + "/metrics")  # the warm-up request routed tokens already
        st, body, _ = http(s.url + "/start_expert_distribution_record", {})
        assert st == 200 and "Start recording" in body, (st, body)
        ids = [(i * 29) % 500 + 3 for i in range(n_prompt)]
        st, body, _ = http(s.url + "/generate", {"input_ids": ids, "sampling_params": {
            "max_new_tokens": n_new, "temperature": 0, "ignore_eos": True}})
        assert st == 200, (st, body)
        out_ids = json.loads(body)["output_ids"]
        st, body, _ = http(s.url + "/stop_expert_distribution_record", method="GET")
        assert st == 200 and "Stop recording" in body, (st, body)
        st, body, hdr = http(s.url + "/dump_expert_distribution_record", {})
        assert st == 200 and "Dump expert distribution record" in body, (st, body)
        path = hdr.get("X-Sglc-Dump-Path")
        dump = json.load(open(path))
        _, metrics, _ = http(s.url + "/metrics")
        return dump, (metrics0, metrics), out_ids, path
    finally:
        s.stop()


def check_serve_batch(model, td):
    """4 concurrent greedy requests (batched decode) under --tp-size 2
    --ep-size 2 with EPLB every 5 forwards = a one-process server."""
    import concurrent.futures
    outs = []
    for tag, args in (("tp1", ("--threads", "1")),
                      ("ep2", ("--threads", "2", "--tp-size", "2", "--ep-size", "2", "--enable-eplb",
                               "--eplb-rebalance-num-iterations", "5", "--ep-num-redundant-experts", "2"))):
        s = Server(model, os.path.join(td, tag + ".log"), *args)
        try:
            def one(i):
                ids = [1, 100 + i * 37, 200 + i, 300 + i * 3]
                st, body, _ = http(s.url + "/generate", {"input_ids": ids, "sampling_params": {
                    "max_new_tokens": 24, "temperature": 0, "ignore_eos": True}})
                return json.loads(body)["output_ids"] if st == 200 else body
            with concurrent.futures.ThreadPoolExecutor(4) as ex:
                outs.append(list(ex.map(one, range(4))))
        finally:
            s.stop()
    reb = len(re.findall(r"EPLB: rebalance \d+ on rank 0", open(os.path.join(td, "ep2.log")).read()))
    report(outs[0] == outs[1] and reb > 0,
           f"serve tp=2 ep=2 + EPLB ({reb} rebalances): 4 concurrent greedy requests = tp=1")


def check_recorder(model, cfg):
    E = cfg.get("num_experts", cfg.get("num_local_experts"))
    K = cfg["num_experts_per_tok"]
    L = cfg["num_hidden_layers"]
    n_prompt, n_new = 12, 6
    tokens = n_prompt + n_new - 1  # the last sampled token is never run
    td = tempfile.mkdtemp()
    os.environ["SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR"] = td
    try:
        for mode in ("stat", "per_pass", "per_token"):
            dump, metrics, out_ids, path = record(model, td, mode, mode, n_prompt, n_new, "--threads", "1")
            report(os.path.dirname(path) == td and os.path.basename(path).startswith("expert_distribution_recorder_"),
                   f"recorder {mode}: dump written to $SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR ({os.path.basename(path)})")
            if mode == "stat":
                cnt = np.array(dump["logical_count"])
                stat_ref = cnt
            else:
                recs = dump["records"]
                if mode == "per_pass":
                    cnt = sum(np.array(r["logical_count"]) for r in recs)
                else:
                    cnt = np.zeros((L, E), dtype=np.int64)
                    for r in recs:
                        for il, toks in enumerate(r["topk_ids"]):
                            for k in toks:
                                report_k = len(k) == K and len(set(k)) == K
                                if not report_k:
                                    report(False, f"per_token: a token with top-k {k}")
                                for e in k:
                                    cnt[il, e] += 1
                report(len(recs) == n_new and sum(r["num_tokens"] for r in recs) == tokens,
                       f"recorder {mode}: {len(recs)} passes (want {n_new}: prefill + {n_new - 1} decodes), "
                       f"{sum(r['num_tokens'] for r in recs)} tokens (want {tokens})")
            sums = cnt.sum(axis=1).tolist()
            report(cnt.shape == (L, E) and sums == [tokens * K] * L,
                   f"recorder {mode}: counts per layer sum to {sums} (want {tokens} tokens x top-{K} = {tokens * K})")
            if mode != "stat":
                report(np.array_equal(cnt, stat_ref), f"recorder {mode}: the same counts as stat")
            tot = [sum(int(v) for v in re.findall(r'^sglc:expert_routed_tokens_total\{[^}]*\} (\d+)$', t, re.M))
                   for t in metrics]
            report(tot[1] - tot[0] == tokens * K * L and "sglc:expert_balancedness{layer=" in metrics[1],
                   f"recorder {mode}: /metrics expert counters grew by {tot[1] - tot[0]} over the request "
                   f"(want {tokens * K * L}; {tot[0]} from the warm-up before), balancedness gauges present")
        # the ring: --expert-distribution-recorder-buffer-size 2 keeps the last 2 passes, -1 every pass
        for size, want in (("2", 2), ("-1", n_new)):
            dump, _, _, _ = record(model, td, "ring" + size, "per_pass", n_prompt, n_new, "--threads", "1",
                                   "--expert-distribution-recorder-buffer-size", size)
            recs = dump["records"]
            ids = [r["forward_pass_id"] for r in recs]
            report(len(recs) == want and ids == sorted(ids) and all(r["num_tokens"] == 1 for r in recs[-2:]),
                   f"recorder buffer size {size}: {len(recs)} passes kept (want {want}), ids {ids}")
        # expert parallelism: the same counts (routing is the same on every rank)
        dump, _, _, _ = record(model, td, "ep", "stat", n_prompt, n_new, "--threads", "2", "--tp-size", "2",
                               "--ep-size", "2")
        report(np.array_equal(np.array(dump["logical_count"]), stat_ref),
               "recorder under --tp-size 2 --ep-size 2: the counts of one process")
        check_serve_batch(model, td)
        # recorder off: the routes say how to turn it on
        s = Server(model, os.path.join(td, "off.log"), "--threads", "1")
        try:
            st, body, _ = http(s.url + "/start_expert_distribution_record", {})
            report(st == 400 and "--expert-distribution-recorder-mode" in body, f"recorder off: 400 {body.strip()[:120]}")
        finally:
            s.stop()
    except Exception as e:  # a failed step: report it, do not stop the other checks
        report(False, f"recorder: {e}")
    finally:
        shutil.rmtree(td, ignore_errors=True)


def main():
    cache = os.path.join(ROOT, "build", "tiny-models")
    names = ["qwen3-moe", "mixtral", "granitemoe", "llama3"]
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ref", "make_tiny_model.py"), "--out", cache,
                        "--only", ",".join(names)], capture_output=True, text=True)
    q = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ref", "make_tiny_ds.py"), "--out", cache,
                        "--only", "qwen2-moe,qwen2-moe-sparse2,deepseek-v2-lite,deepseek-v2,deepseek-v3"], capture_output=True, text=True)
    if p.returncode or q.returncode:
        print(p.stderr[-2000:], q.stderr[-2000:])
        report(False, "tiny models could not be made")
        return 1
    d = lambda n: os.path.join(cache, n, "f32")
    conf = lambda n: json.load(open(os.path.join(d(n), "config.json")))
    only = os.environ.get("SGLC_EP_PARTS", "gen,gguf,refuse,mpi,rec").split(",")
    if "gen" in only:
        # qwen3-moe: 64 experts top-8 (1 KV head); also 4 ranks: EP 2 x 2 ranks per expert, and EP 4
        check_model("qwen3-moe", d("qwen3-moe"), conf("qwen3-moe"), tps=((2, 2), (4, 2), (4, 4)))
        check_model("mixtral", d("mixtral"), conf("mixtral"))
        # EPLB with 2 ranks per expert group (tp=4 ep=2): both ranks of a group load their slices
        mx = d("mixtral")
        ids = [(i * 37) % 500 + 3 for i in range(40)]
        ref_ids, ref, _ = run(mx, ids, 16, 1)
        got_ids, got, err = run(mx, ids, 16, 4, ("--ep-size", "2", "--enable-eplb", "--eplb-rebalance-num-iterations",
                                                 "3", "--ep-num-redundant-experts", "2"))
        if compare("mixtral tp=4 ep=2 EPLB every 3 forwards, 2 redundant", ref, ref_ids, got, got_ids, err):
            ranks = set(re.findall(r"EPLB: rebalance 5 on rank (\d+)", err))
            report(ranks == {"0", "1", "2", "3"}, f"mixtral tp=4 ep=2: rebalance 5 ran on ranks {sorted(ranks)}")
        check_model("granitemoe (packed experts)", d("granitemoe"), conf("granitemoe"), extra_cases=False)
        check_model("qwen2-moe (shared expert)", d("qwen2-moe"), conf("qwen2-moe"), extra_cases=False)
        check_model("qwen2-moe-sparse2 (dense + MoE layers)", d("qwen2-moe-sparse2"), conf("qwen2-moe-sparse2"),
                    extra_cases=False)
        # DeepSeek (MLA attention split by heads, DeepSeekMoE: shared experts,
        # dense first layer; V2 group-limited routing, V3 sigmoid + bias):
        # V2-Lite also with redundant experts, a placement and EPLB
        check_model("deepseek-v2-lite (MLA, shared experts)", d("deepseek-v2-lite"), conf("deepseek-v2-lite"))
        check_model("deepseek-v2 (q_lora_rank, group-limited)", d("deepseek-v2"), conf("deepseek-v2"),
                    tps=((2, 2), (4, 2)), extra_cases=False)
        check_model("deepseek-v3 (noaux_tc, 64 experts)", d("deepseek-v3"), conf("deepseek-v3"),
                    tps=((2, 2), (4, 4)), extra_cases=False)
    if "gguf" in only:
        # a GGUF file (sglc quantize: experts packed per layer, read as views),
        # F32 and Q8_0 blocks: EP and EPLB reloading experts from the file
        with tempfile.TemporaryDirectory() as td:
            for typ in ("F32", "Q8_0"):
                g = os.path.join(td, f"qwen2-moe-{typ}.gguf")
                q = subprocess.run([BIN, "quantize", "--model-path", d("qwen2-moe"), "--output", g, "--type", typ],
                                   capture_output=True, text=True)
                if q.returncode:
                    report(False, f"quantize {typ}: {q.stderr[-300:]}")
                    continue
                ids = [(i * 37) % 500 + 3 for i in range(40)]
                ref_ids, ref, err = run(g, ids, 16, 1)
                if ref is None:
                    report(False, f"gguf {typ} one process: {err[-300:]}")
                    continue
                got_ids, got, err = run(g, ids, 16, 2, ("--ep-size", "2"))
                compare(f"qwen2-moe GGUF {typ} tp=2 ep=2", ref, ref_ids, got, got_ids, err)
                got_ids, got, err = run(g, ids, 16, 2, ("--ep-size", "2", "--enable-eplb", "--eplb-rebalance-num-iterations",
                                                        "2", "--ep-num-redundant-experts", "2"))
                if compare(f"qwen2-moe GGUF {typ} EPLB every 2 forwards, 2 redundant", ref, ref_ids, got, got_ids, err):
                    n_reb = len(re.findall(r"EPLB: rebalance \d+ on rank 0", err))
                    report(n_reb == 8, f"qwen2-moe GGUF {typ}: {n_reb} rebalances on rank 0 (want 8 of 17 forwards)")
    if "refuse" in only:
        q3 = d("qwen3-moe")
        refuse("--ep-size 2 without --tp-size", "--ep-size 2 must divide --tp-size 1", ["--ep-size", "2"], q3)
        refuse("--ep-size 3 with --tp-size 4", "--ep-size 3 must divide --tp-size 4",
               ["--tp-size", "4", "--ep-size", "3"], q3)
        refuse("--ep-size 2 on a dense model", "has no experts (expert parallelism needs a MoE model)",
               ["--tp-size", "2", "--ep-size", "2"], d("llama3"))
        refuse("64 + 1 redundant experts over 2 ranks", "65 experts (with the redundant ones) do not divide evenly",
               ["--tp-size", "2", "--ep-size", "2", "--ep-num-redundant-experts", "1"], q3)
        refuse("7 experts over 2 ranks", "7 experts do not divide evenly over the 2 expert-parallel ranks",
               ["--tp-size", "2", "--ep-size", "2", "--load-format", "dummy",
                "--json-model-override-args", '{"num_local_experts": 7}'], d("mixtral"))
        refuse("--moe-a2a-backend deepep", "--moe-a2a-backend deepep is not supported",
               ["--tp-size", "2", "--ep-size", "2", "--moe-a2a-backend", "deepep"], q3)
        refuse("--ep-dispatch-algorithm dynamic", "--ep-dispatch-algorithm dynamic is not supported yet",
               ["--tp-size", "2", "--ep-size", "2", "--ep-dispatch-algorithm", "dynamic"], q3)
        refuse("--enable-eplb without --ep-size", "--enable-eplb needs --ep-size > 1", ["--enable-eplb"], q3)
        refuse("--enable-eplb with dummy weights", "--load-format dummy has none",
               ["--tp-size", "2", "--ep-size", "2", "--enable-eplb", "--load-format", "dummy"], q3)
        refuse("--ep-num-redundant-experts without EP", "--ep-num-redundant-experts 2 needs --ep-size > 1",
               ["--ep-num-redundant-experts", "2"], q3)
        bad = {"physical_to_logical_map": [[0] * 64, list(range(64))]}
        refuse("a placement that drops experts", "places expert 1 nowhere",
               ["--tp-size", "2", "--ep-size", "2", "--init-expert-location", json.dumps(bad)], q3)
        # an expert width (18) that 4 ranks cannot slice but 2 can: refused at
        # tp=4, served at tp=4 ep=2 (dummy weights: the same values as one process)
        ov = ("--load-format", "dummy", "--json-model-override-args", '{"moe_intermediate_size": 18}')
        refuse("expert width 18 over --tp-size 4", "--tp-size 4: the expert width (18) is not divisible by it",
               ["--tp-size", "4", *ov], q3)
        ids = [(i * 37) % 500 + 3 for i in range(40)]
        ref_ids, ref, _ = run(q3, ids, 16, 1, ov)
        got_ids, got, err = run(q3, ids, 16, 4, ("--ep-size", "2", *ov))
        compare("qwen3-moe (dummy, expert width 18) tp=4 ep=2 accepted and runs (dummy values: a weak check)", ref, ref_ids, got,
                got_ids, err)
        refuse("a recorder mode SGLang does not have", "--expert-distribution-recorder-mode",
               ["--expert-distribution-recorder-mode", "per_layer"], q3)
    if "mpi" in only:
        mpirun = shutil.which("mpirun")
        linked = subprocess.run(["ldd", BIN], capture_output=True, text=True).stdout
        if mpirun and "libmpi" in linked:
            mpi = [mpirun, "--oversubscribe", "-np", "2"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])
            m = d("qwen3-moe")
            ids = [(i * 37) % 500 + 3 for i in range(40)]
            ref_ids, ref, _ = run(m, ids, 16, 1)
            got_ids, got, err = run(m, ids, 16, 2, ("--ep-size", "2"), mpi=mpi)
            compare("qwen3-moe mpirun -np 2 --tp-size 2 --ep-size 2", ref, ref_ids, got, got_ids, err)
        else:
            print("skip mpi: mpirun or an Open MPI build missing")
    if "rec" in only:
        check_recorder(d("qwen3-moe"), conf("qwen3-moe"))
    print(f"{fails} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
