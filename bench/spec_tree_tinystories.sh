#!/usr/bin/env bash
# NGRAM chain vs tree verification at batch 1 on TinyStories-656K
# (docs/notes/spec.md, docs/PERF.md): the prompts of bench/spec_tinystories.sh
# (a repeating phrase, a free story; greedy), each request alone through
# `sglc generate --requests --threads 1`; off, NGRAM chain (SGLC_SPEC_TREE=0:
# the first branch of the draft tree only) and NGRAM tree (the default)
# interleaved, REPS runs each.  Reports medians of the scheduler's tok/s
# ("N requests in X s") and the accept length (meta_info), and the tree
# verifies / tokens accepted off the first branch (the log line).
#   bench/spec_tree_tinystories.sh [REPS] [MAX_NEW]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
exec /usr/bin/python3 - "$BIN" "$M" "${1:-7}" "${2:-400}" <<'PYEOF'
import json, os, re, statistics, subprocess, sys, tempfile
binp, model, reps, maxnew = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rep = "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log. The cat sat on the mat."
free = "Once upon a time, there was a little girl named Lily. She liked to play with her ball."
tmp = tempfile.mkdtemp()
def run(text, mode):
    req = os.path.join(tmp, "r.jsonl")
    with open(req, "w") as f:
        f.write(json.dumps({"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": maxnew,
                            "ignore_eos": True}}) + "\n")
    cmd = ["nice", binp, "generate", "--model-path", model, "--requests", req, "--threads", "1"]
    env = dict(os.environ)
    if mode != "off":
        cmd += ["--speculative-algorithm", "NGRAM"]
        env["SGLC_SPEC_TREE"] = "1" if mode == "tree" else "0"
    p = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    wall = float(re.search(r"requests in ([0-9.]+) s", p.stderr).group(1))
    t = re.search(r"(\d+) tree verifies, (\d+) accepted off", p.stderr)
    o = json.loads(p.stdout.splitlines()[0])
    return len(o["output_ids"]) / wall, o["meta_info"].get("spec_accept_length", 1.0), \
        (int(t.group(1)), int(t.group(2))) if t else (0, 0), o["output_ids"]
print("%-5s %-6s %6s %12s %8s %14s" % ("case", "mode", "runs", "median tok/s", "accept", "tree/offbranch"))
for name, text in (("rep", rep), ("free", free)):
    res = {m: [] for m in ("off", "chain", "tree")}
    for _ in range(reps):
        for m in res:
            res[m].append(run(text, m))
    ids = res["off"][0][3]
    assert all(r[3] == ids for m in res for r in res[m]), "outputs differ"
    base = statistics.median(r[0] for r in res["off"])
    for m in res:
        tps = statistics.median(r[0] for r in res[m])
        print("%-5s %-6s %6d %12.1f %8.3f %8d/%-5d (%.2fx off)" % (name, m, reps, tps, res[m][0][1], res[m][0][2][0],
                                                                res[m][0][2][1], tps / base))
PYEOF
