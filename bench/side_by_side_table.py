#!/usr/bin/python3
"""Prints the markdown table of a bench/side_by_side_llamacpp.sh run.

DESIGN
  Reads the raw files the shell script left in OUT:
    llama-bench.jsonl       one line per llama-bench test (n_prompt, n_gen,
                            n_depth, samples_ts = tokens/s of each repetition)
    sglc-one-batch.jsonl    one line per `sglc bench-one-batch` run
                            (prefill_throughput, median_decode_throughput)
    serve-<tag>-<engine>-c<C>.jsonl
                            one line per `sglc bench-serving` run (SGLang keys)
    quant-llama-bench.jsonl, quant-sglc.jsonl
                            the one-batch runs per GGUF type (llama-quantize files;
                            sglc lines carry the type as run_name)
    batch-llama.jsonl, batch-sglc.jsonl
                            llama-batched-bench lines (after a {"type":..}
                            marker line) and sglc bench-one-batch at batch B
    logs/agree-*-ppl-*.log, agree-sglc-ppl.jsonl, agree-*-gen-*.txt
                            perplexity and greedy text of both engines per file
  and prints medians over the repetitions with the ratio sglc / llama.cpp
  for throughputs and llama.cpp / sglc for latencies (so > 1 always means
  sglc is better).  A missing file leaves its rows out; a run with failed
  requests is flagged in the table.

Usage: side_by_side_table.py OUT_DIR
"""
import glob
import json
import os
import re
import statistics
import sys


def lines(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for ln in f:
            ln = ln.strip()
            if ln.startswith("{"):
                try:
                    out.append(json.loads(ln))
                except json.JSONDecodeError:
                    pass
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    if x is None:
        return "—"
    return f"{x:,.{nd}f}"


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "—"


def one_batch(out):
    lb = lines(os.path.join(out, "llama-bench.jsonl"))
    sg = lines(os.path.join(out, "sglc-one-batch.jsonl"))
    if not lb and not sg:
        return []

    def lbt(pred):
        """median over all repetitions of the matching llama-bench lines"""
        ts, first = [], None
        for t in lb:
            if pred(t):
                ts += t.get("samples_ts") or [t.get("avg_ts")]
                first = first or t
        return med(ts), len(ts), first or {}

    pp, npp, tpp = lbt(lambda t: t.get("n_prompt", 0) > 0 and t.get("n_gen") == 0)
    tg0, ntg0, t0 = lbt(lambda t: t.get("n_gen", 0) > 0 and t.get("n_prompt") == 0 and not t.get("n_depth"))
    tgd, ntgd, td = lbt(lambda t: t.get("n_gen", 0) > 0 and t.get("n_prompt") == 0 and t.get("n_depth"))
    spp = med([r.get("prefill_throughput") for r in sg])
    stg = med([r.get("median_decode_throughput") for r in sg])
    n_in = sg[0]["input_len"] if sg else tpp.get("n_prompt")
    n_out = sg[0]["output_len"] if sg else t0.get("n_gen")
    rows = ["## One batch: Llama-3.2-1B shapes, random BF16 weights (same bits), batch 1",
            "",
            "| test | llama.cpp tok/s (llama-bench) | sglc tok/s (bench-one-batch) | sglc / llama.cpp |",
            "|---|---|---|---|",
            f"| prefill {n_in} tokens (llama: pp{tpp.get('n_prompt', '?')}) | {fmt(pp)} (n={npp}) | "
            f"{fmt(spp)} (n={len(sg)}) | {ratio(spp, pp)} |",
            f"| decode after {n_in} tokens (llama: tg{td.get('n_gen', '?')} @ d{td.get('n_depth', '?')}; "
            f"sglc: median step of {n_out}) | {fmt(tgd, 2)} (n={ntgd}) | {fmt(stg, 2)} | {ratio(stg, tgd)} |",
            f"| decode from empty context (llama: tg{t0.get('n_gen', '?')}) | {fmt(tg0, 2)} (n={ntg0}) | "
            f"(sglc row above) | {ratio(stg, tg0)} |",
            ""]
    return rows


def serving(out):
    rows = []
    files = sorted(glob.glob(os.path.join(out, "serve-*-c*.jsonl")))
    keys = {}
    for f in files:
        m = re.match(r"serve-(.+)-(sglc|llama\.cpp)-c(\d+)\.jsonl$", os.path.basename(f))
        if m:
            keys.setdefault((m.group(1), int(m.group(3))), {})[m.group(2)] = lines(f)
    if not keys:
        return rows
    rows += ["## Serving: `sglc bench-serving --backend sglang-oai --dataset-name random-ids`", "",
             "| model | C | engine | runs | prompts | in / out per req | failed | out tok/s | total tok/s | "
             "TTFT mean ms | TPOT median ms | E2E mean ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for (tag, c) in sorted(keys, key=lambda k: (k[0] != "tiny", k[0], k[1])):
        got = {}
        for eng in ("llama.cpp", "sglc"):
            rs = keys[(tag, c)].get(eng, [])
            if not rs:
                continue
            v = {k: med([r.get(k) for r in rs]) for k in
                 ("output_throughput", "total_throughput", "mean_ttft_ms", "median_tpot_ms",
                  "mean_e2e_latency_ms")}
            failed = sum(int(r.get("failed") or 0) for r in rs)
            n = rs[0].get("completed") or 0
            io = (f"{rs[0].get('total_input_tokens', 0) // n} / {rs[0].get('total_output_tokens', 0) // n}"
                  if n else "—")
            got[eng] = v
            rows.append(f"| {tag} | {c} | {eng} | {len(rs)} | {n + int(rs[0].get('failed') or 0)} | {io} | "
                        f"{failed} | {fmt(v['output_throughput'])} | "
                        f"{fmt(v['total_throughput'])} | {fmt(v['mean_ttft_ms'], 2)} | "
                        f"{fmt(v['median_tpot_ms'], 2)} | {fmt(v['mean_e2e_latency_ms'], 1)} |")
        if len(got) == 2:
            s, l = got["sglc"], got["llama.cpp"]
            ratios.append(f"| {tag} | {c} | {ratio(s['output_throughput'], l['output_throughput'])} | "
                          f"{ratio(l['mean_ttft_ms'], s['mean_ttft_ms'])} | "
                          f"{ratio(l['median_tpot_ms'], s['median_tpot_ms'])} | "
                          f"{ratio(l['mean_e2e_latency_ms'], s['mean_e2e_latency_ms'])} |")
    if ratios:
        rows += ["", "| model | C | out tok/s sglc/llama | TTFT llama/sglc | TPOT llama/sglc | "
                 "E2E llama/sglc |", "|---|---|---|---|---|---|"] + ratios
    rows.append("")
    return rows


def quant(out):
    lb = lines(os.path.join(out, "quant-llama-bench.jsonl"))
    sg = lines(os.path.join(out, "quant-sglc.jsonl"))
    if not lb and not sg:
        return []
    types = []
    for r in sg:
        if r.get("run_name") not in types:
            types.append(r.get("run_name"))
    rows = ["## One batch on llama.cpp-written GGUF files (llama-quantize of the 1B BF16 file), batch 1",
            "",
            "| type | llama.cpp pp tok/s | sglc prefill tok/s | ratio | llama.cpp tg @ depth tok/s | "
            "sglc decode tok/s | ratio | sglc weight GB/s |",
            "|---|---|---|---|---|---|---|---|"]
    for ty in types:
        key = ty.lower()

        def mine(t):
            fn = os.path.basename(t.get("model_filename", "")).lower()
            return fn.endswith("-" + key + ".gguf")
        pp = med([x for t in lb if mine(t) and t.get("n_gen") == 0 for x in (t.get("samples_ts") or [])])
        tg = med([x for t in lb if mine(t) and t.get("n_prompt") == 0 and t.get("n_depth")
                  for x in (t.get("samples_ts") or [])])
        rs = [r for r in sg if r.get("run_name") == ty]
        spp = med([r.get("prefill_throughput") for r in rs])
        stg = med([r.get("median_decode_throughput") for r in rs])
        gbs = med([r.get("decode_weight_gbps") for r in rs])
        rows.append(f"| {ty} | {fmt(pp)} | {fmt(spp)} (n={len(rs)}) | {ratio(spp, pp)} | {fmt(tg, 2)} | "
                    f"{fmt(stg, 2)} | {ratio(stg, tg)} | {fmt(gbs, 2)} |")
    rows.append("")
    return rows


def batch(out):
    path = os.path.join(out, "batch-llama.jsonl")
    lb, cur = {}, None
    for r in lines(path):
        if "type" in r and "run" in r and len(r) == 2:
            cur = r["type"]
        elif cur is not None:
            lb.setdefault(cur, []).append(r)
    sg = lines(os.path.join(out, "batch-sglc.jsonl"))
    if not lb and not sg:
        return []
    types = []
    for r in sg:
        if r.get("run_name") not in types:
            types.append(r.get("run_name"))
    b = sg[0].get("batch_size") if sg else "?"
    rows = [f"## Batch {b} decode (aggregate tok/s): llama-batched-bench vs sglc bench-one-batch", "",
            "| type | llama.cpp S_TG tok/s | sglc decode tok/s | ratio | llama.cpp S_PP tok/s | "
            "sglc prefill tok/s | ratio |",
            "|---|---|---|---|---|---|---|"]
    for ty in types:
        rs = [r for r in sg if r.get("run_name") == ty]
        ls = lb.get(ty, [])
        tg = med([r.get("speed_tg") for r in ls])
        pp = med([r.get("speed_pp") for r in ls])
        stg = med([r.get("median_decode_throughput") for r in rs])
        spp = med([r.get("prefill_throughput") for r in rs])
        rows.append(f"| {ty} | {fmt(tg)} (n={len(ls)}) | {fmt(stg)} (n={len(rs)}) | {ratio(stg, tg)} | "
                    f"{fmt(pp)} | {fmt(spp)} | {ratio(spp, pp)} |")
    rows.append("")
    return rows


def agree(out):
    sg = {r.get("run_name"): r for r in lines(os.path.join(out, "agree-sglc-ppl.jsonl"))}
    if not sg:
        return []
    rows = ["## Same file, same numbers: perplexity (tests/data/ppl_stories.txt, ctx 256) and greedy text",
            "",
            "| file | llama.cpp windows | llama.cpp PPL | sglc windows | sglc PPL | sglc / llama.cpp - 1 | "
            "greedy text |",
            "|---|---|---|---|---|---|---|"]
    for name, r in sg.items():
        lp, lw, name_note = None, None, ""
        lg = os.path.join(out, "logs", f"agree-llama-ppl-{name}.log")
        if os.path.exists(lg):
            txt = open(lg, errors="replace").read()
            m = re.search(r"Final estimate: PPL = ([0-9.]+)", txt)
            lp = float(m.group(1)) if m else None
            runs = re.findall(r"\[(\d+)\]([0-9.]+),", txt)
            if lp is None and runs:
                # llama.cpp's log thread can drop the last lines at exit: take the
                # running value after the last window printed (its index is shown)
                lp = float(runs[-1][1])
                name_note = f" (running value after window {runs[-1][0]})"
            else:
                name_note = ""
            m = re.search(r"calculating perplexity over (\d+) chunks", txt)
            lw = int(m.group(1)) if m else None
        gen = "—"
        a = os.path.join(out, f"agree-llama-gen-{name}.txt")
        c = os.path.join(out, f"agree-sglc-gen-{name}.txt")
        if os.path.exists(a) and os.path.exists(c):
            ta = " ".join(open(a, errors="replace").read().split())
            tc = " ".join(open(c, errors="replace").read().split())
            if ta == tc:
                gen = f"identical ({len(tc.split())} words)"
            else:
                n = 0
                wa, wc = ta.split(), tc.split()
                while n < min(len(wa), len(wc)) and wa[n] == wc[n]:
                    n += 1
                gen = f"first {n} of {len(wc)} words equal"
        sp = r.get("ppl")
        if name_note:  # compare at the same window: sglc's running value from its log
            sl = os.path.join(out, "logs", f"agree-sglc-ppl-{name}.log")
            sr = dict(re.findall(r"\[(\d+)\]([0-9.]+),", open(sl, errors="replace").read())) \
                if os.path.exists(sl) else {}
            k = re.search(r"window (\d+)", name_note).group(1)
            sp = float(sr[k]) if k in sr else None
        d = f"{sp / lp - 1:+.2e}" if sp and lp else "—"
        rows.append(f"| {name} | {lw if lw is not None else '—'} | {fmt(lp, 4)}{name_note} | {r.get('chunks', '—')} | "
                    f"{fmt(sp, 4)} | {d} | {gen} |")
    rows.append("")
    return rows


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: side_by_side_table.py OUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    rows = []
    for name in ("machine.txt", "loadavg.txt"):
        p = os.path.join(out, name)
        if os.path.exists(p):
            with open(p) as f:
                rows += ["    " + ln.rstrip() for ln in f]
            rows.append("")
    rows += one_batch(out) + quant(out) + batch(out) + agree(out) + serving(out)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
