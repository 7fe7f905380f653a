#!/usr/bin/env bash
# NGRAM accept length at --speculative-accept-threshold-single / -acc
# below 1 vs the exact 1.0 (docs/notes/spec.md, docs/PERF.md), TinyStories-656K,
# sampled requests (temperature 0.8 and 1.0), the same prompts and seeds at
# every setting.  One `sglc generate --requests` per setting and rep, the
# requests one at a time (--max-running-requests 1, batch 1; the n-gram
# trie fills from request to request as in a server).  Per setting:
#   accept len  sum(completion tokens) / sum(spec_verify_ct) (SGLang's formula)
#   accept rate accepted / verified drafts
#   drafts/step drafted tokens per verify forward
#   mean lp     mean target logprob of the output tokens (temperature-scaled
#               distribution): exact sampling keeps it at minus the entropy;
#               a relaxed threshold that takes unlikely drafts lowers it
#   tok/s       output tokens / the scheduler's time, median of REPS
#               (the accept columns are the same in every rep: seeded)
#   bench/spec_threshold.sh [REPS] [MAX_NEW]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
exec /usr/bin/python3 - "$BIN" "$M" "${1:-3}" "${2:-200}" <<'PYEOF'
import json, os, re, statistics, subprocess, sys, tempfile
binp, model, reps, maxnew = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
prompts = [
    "Once upon a time, there was a little girl named Lily. She liked to play with her ball.",
    "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log.",
    "Tom had a red car. He liked to drive his car in the park. One day,",
    "Sara and Ben went to the beach. They saw a big shell. Sara said,",
    "There was a big tree in the garden. A bird lived in the tree. The bird",
    "Mom said, \"Time for bed.\" Tim did not want to go to bed. He wanted to",
]
settings = [("exact (1.0, 1.0)", []),
            ("single 0.5", ["--speculative-accept-threshold-single", "0.5"]),
            ("single 0.1", ["--speculative-accept-threshold-single", "0.1"]),
            ("single 0.01", ["--speculative-accept-threshold-single", "0.01"]),
            ("acc 0.5", ["--speculative-accept-threshold-acc", "0.5"]),
            ("acc 0.2", ["--speculative-accept-threshold-acc", "0.2"])]
tmp = tempfile.mkdtemp()
req = os.path.join(tmp, "r.jsonl")
with open(req, "w") as f:
    for i, p in enumerate(prompts):
        for temp in (0.8, 1.0):
            for seed in (1, 2):
                f.write(json.dumps({"text": p, "rid": "p%d-t%g-s%d" % (i, temp, seed), "return_logprob": True,
                                    "sampling_params": {"temperature": temp, "max_new_tokens": maxnew,
                                                        "ignore_eos": True, "sampling_seed": 100 * i + seed}}) + "\n")
def run(extra, spec=True):
    cmd = ["nice", binp, "generate", "--model-path", model, "--requests", req, "--threads", "1",
           "--max-running-requests", "1"]
    if spec:
        cmd += ["--speculative-algorithm", "NGRAM"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = float(re.search(r"requests in ([0-9.]+) s", p.stderr).group(1))
    return wall, [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
print("TinyStories-656K, %d sampled requests x %d tokens, NGRAM defaults, batch 1, %d reps" % (
    len(prompts) * 4, maxnew, reps))
print("%-18s %10s %11s %11s %8s %8s %9s" % ("setting", "accept len", "accept rate", "drafts/step", "mean lp",
                                           "tok/s", "vs exact"))
rows = [("off (no spec)", None)] + settings
base = None
walls = {name: [] for name, _ in rows}
outs = {}
for _ in range(reps):  # settings interleaved, so all see the same load
    for name, extra in rows:
        w, o = run(extra or [], spec=extra is not None)
        walls[name].append(w)
        outs[name] = o
for name, extra in rows:
    o = outs[name]
    ntok = sum(len(r["output_ids"]) for r in o)
    lps = [lp[0] for r in o for lp in r["meta_info"]["output_token_logprobs"]]
    mlp = sum(lps) / len(lps)
    tps = ntok / statistics.median(walls[name])
    if extra is None:
        print("%-18s %10s %11s %11s %8.3f %8.0f %9s" % (name, "1.000", "-", "-", mlp, tps, "-"))
        continue
    vct = sum(r["meta_info"]["spec_verify_ct"] for r in o)
    acc = sum(r["meta_info"]["spec_accept_token_num"] for r in o)
    dr = sum(r["meta_info"]["spec_draft_token_num"] for r in o)
    if base is None:
        base = tps
    print("%-18s %10.3f %11.3f %11.3f %8.3f %8.0f %8.2fx" % (name, ntok / vct, acc / max(dr, 1), dr / vct, mlp, tps,
                                                              tps / base))
PYEOF
