#!/usr/bin/env bash
# NGRAM chain vs tree verification at batch 1 on TinyStories-656K
# (docs/notes/spec.md, docs/PERF.md): the prompts of bench/spec_tinystories.sh
# (a repeating phrase, a free story; greedy), each request alone through
# `sglc generate --requests --threads 1`; off, NGRAM chain (SGLC_SPEC_TREE=0:
# the first branch of the draft tree only) and NGRAM tree (the default)
# interleaved, REPS runs each.  Reports medians of the scheduler's tok/s
# ("N requests in X s") and the accept length (meta_info), and the tree
# verifies / tokens accepted off the first branch (the log line).
# PAGES="1 16": every mode at each --page-size, interleaved (trees at page
# > 1 copy the accepted nodes' KV into place); ratios to the same page's off.
# SEQ=1: one more case, "all": both prompts and six other story openings
# served one after another in each run (--max-running-requests 1: batch 1),
# a run 8x longer against the 1 ms timer (the trie is shared between them).
#   bench/spec_tree_tinystories.sh [REPS] [MAX_NEW]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
exec /usr/bin/python3 - "$BIN" "$M" "${1:-7}" "${2:-400}" "${PAGES:-1}" "${SEQ:-0}" <<'PYEOF'
import json, os, re, statistics, subprocess, sys, tempfile
binp, model, reps, maxnew = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pages = sys.argv[5].split()
seq = sys.argv[6] == "1"
others = ["One day, a boy named Tom went to the park.", "Once upon a time, there was a big dog.",
          "Sam and Mia were best friends.", "The sun was shining and the birds were singing.",
          "Once upon a time, in a small town, there lived a kind old man.", "Tim had a red ball."]
rep = "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log. The cat sat on the mat."
free = "Once upon a time, there was a little girl named Lily. She liked to play with her ball."
tmp = tempfile.mkdtemp()
def run(text, mode, page):
    req = os.path.join(tmp, "r.jsonl")
    with open(req, "w") as f:
        for t in (text if isinstance(text, list) else [text]):
            f.write(json.dumps({"text": t, "sampling_params": {"temperature": 0, "max_new_tokens": maxnew,
                                "ignore_eos": True}}) + "\n")
    cmd = ["nice", binp, "generate", "--model-path", model, "--requests", req, "--threads", "1", "--page-size", page,
           "--max-running-requests", "1"]
    env = dict(os.environ)
    if mode != "off":
        cmd += ["--speculative-algorithm", "NGRAM"]
        env["SGLC_SPEC_TREE"] = "1" if mode == "tree" else "0"
    p = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    wall = float(re.search(r"requests in ([0-9.]+) s", p.stderr).group(1))
    t = re.search(r"(\d+) tree verifies, (\d+) accepted off", p.stderr)
    outs = [json.loads(l) for l in p.stdout.splitlines()]
    ntok = sum(len(o["output_ids"]) for o in outs)
    vct = sum(o["meta_info"].get("spec_verify_ct", 0) for o in outs)
    return ntok / wall, ntok / vct if vct else 1.0, \
        (int(t.group(1)), int(t.group(2))) if t else (0, 0), [o["output_ids"] for o in outs]
print("%-5s %-6s %6s %12s %8s %14s" % ("case", "mode", "runs", "median tok/s", "accept", "tree/offbranch"))
for name, text in (("rep", rep), ("free", free)) + ((("all", [rep, free] + others),) if seq else ()):
    res = {(m, pg): [] for pg in pages for m in ("off", "chain", "tree")}
    for _ in range(reps):
        for m, pg in res:
            res[(m, pg)].append(run(text, m, pg))
    ids = res[("off", pages[0])][0][3]
    assert all(r[3] == ids for k in res for r in res[k]), "outputs differ"
    for m, pg in res:
        base = statistics.median(r[0] for r in res[("off", pg)])
        tps = statistics.median(r[0] for r in res[(m, pg)])
        r0 = res[(m, pg)][0]
        print("%-5s %-6s %6d %12.1f %8.3f %8d/%-5d (%.2fx off)" % (name, m if pg == "1" else m + " p" + pg, reps, tps,
                                                                r0[1], r0[2][0], r0[2][1], tps / base))
PYEOF
