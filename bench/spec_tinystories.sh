#!/usr/bin/env bash
# Accept length and decode speed with and without --speculative-algorithm
# NGRAM at batch 1 on TinyStories-656K (docs/notes/spec.md, docs/PERF.md):
# a prompt that repeats a phrase (greedy), a free story prompt (greedy),
# and the free prompt sampled (temperature 0.8, seeded).  Each request runs
# alone through `sglc generate --requests --threads 1`.  Two rates:
#   wall  tokens / the scheduler's time ("N requests in X s"), best of REPS
#   cpu   tokens / (CPU time of the process - CPU time of the same command
#         with max_new_tokens 1), best of REPS (off and NGRAM runs interleaved): on a shared machine the CPU
#         time does not count the time other processes held the core
#   bench/spec_tinystories.sh [REPS] [MAX_NEW]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
exec /usr/bin/python3 - "$BIN" "$M" "${1:-5}" "${2:-400}" <<'PYEOF'
import json, os, re, resource, subprocess, sys, tempfile
binp, model, reps, maxnew = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rep = "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log. The cat sat on the mat."
free = "Once upon a time, there was a little girl named Lily. She liked to play with her ball."
cases = [("rep", rep, 0.0), ("free", free, 0.0), ("sample", free, 0.8)]
tmp = tempfile.mkdtemp()
def run(text, temp, n, spec):
    req = os.path.join(tmp, "r.jsonl")
    with open(req, "w") as f:
        f.write(json.dumps({"text": text, "sampling_params": {"temperature": temp, "max_new_tokens": n,
                            "ignore_eos": True, "sampling_seed": 3}}) + "\n")
    cmd = ["nice", binp, "generate", "--model-path", model, "--requests", req, "--threads", "1"]
    if spec:
        cmd += ["--speculative-algorithm", "NGRAM"]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    wall = float(re.search(r"requests in ([0-9.]+) s", p.stderr).group(1))
    o = json.loads(p.stdout.splitlines()[0])
    return wall, cpu, len(o["output_ids"]), o["meta_info"].get("spec_accept_length", 1.0)
print("%-7s %-6s %6s %10s %10s %7s" % ("case", "spec", "tokens", "wall tok/s", "cpu tok/s", "accept"))
for name, text, temp in cases:
    # off and NGRAM runs interleaved, so both see the same load
    base = {sp: 1e9 for sp in (False, True)}
    best = {sp: [1e9, 1e9, 0, 1.0] for sp in (False, True)}
    for _ in range(reps):
        for spec in (False, True):
            base[spec] = min(base[spec], run(text, temp, 1, spec)[1])
            w, c, n, acc = run(text, temp, maxnew, spec)
            b = best[spec]
            b[0], b[1], b[2], b[3] = min(b[0], w), min(b[1], c), n, acc
    for spec in (False, True):
        w, c, n, acc = best[spec]
        print("%-7s %-6s %6d %10.1f %10.1f %7.2f" % (name, "NGRAM" if spec else "off", n, n / w,
                                                    n / max(c - base[spec], 1e-6), acc))
PYEOF
