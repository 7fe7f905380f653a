#!/usr/bin/env bash
# EAGLE / EAGLE3 with RANDOM heads (tests/ref/eagle_ref.py make) on
# TinyStories-656K, batch 1, greedy: accept length and decode rate against
# plain decoding in the same script (the setup of bench/spec_tinystories.sh:
# `sglc generate --requests --threads 1`, the scheduler's "requests in X s").
# Runs interleaved (off, EAGLE, EAGLE3, repeated REPS times); medians and
# the ratio to the off median.  A random head is almost never right, so
# this measures the cost of drafting, not a speed-up.
#   bench/spec_eagle_tinystories.sh [REPS] [MAX_NEW]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
H=$(mktemp -d); trap 'rm -rf "$H"' EXIT
/usr/bin/python3 "$ROOT/tests/ref/eagle_ref.py" make "$H" "$M" || exit 1
exec /usr/bin/python3 - "$BIN" "$M" "$H" "${1:-5}" "${2:-300}" <<'PYEOF'
import json, os, re, statistics, subprocess, sys, tempfile
binp, model, heads, reps, maxnew = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
text = "Once upon a time, there was a little girl named Lily. She liked to play with her ball."
req = os.path.join(tempfile.mkdtemp(), "r.jsonl")
with open(req, "w") as f:
    f.write(json.dumps({"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": maxnew,
                        "ignore_eos": True}}) + "\n")
confs = [("off", []),
         ("EAGLE", ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", heads + "/eagle1"]),
         ("EAGLE3", ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", heads + "/eagle3"])]
res = {c: [] for c, _ in confs}
acc = {}
for _ in range(reps):
    for name, extra in confs:
        p = subprocess.run(["nice", binp, "generate", "--model-path", model, "--requests", req, "--threads", "1"] + extra,
                           capture_output=True, text=True, check=True)
        wall = float(re.search(r"requests in ([0-9.]+) s", p.stderr).group(1))
        o = json.loads(p.stdout.splitlines()[0])
        res[name].append(len(o["output_ids"]) / wall)
        acc[name] = o["meta_info"].get("spec_accept_length", 1.0)
off = statistics.median(res["off"])
print("%-7s %12s %8s %7s" % ("spec", "median tok/s", "vs off", "accept"))
for name, _ in confs:
    m = statistics.median(res[name])
    print("%-7s %12.1f %8.2f %7.3f" % (name, m, m / off, acc[name]))
PYEOF
