#!/usr/bin/env bash
# EAGLE / EAGLE3 on TinyStories-656K, batch 1, greedy: accept length and
# decode rate against plain decoding in the same script (the setup of
# bench/spec_tinystories.sh: `sglc generate --requests --threads 1`, the
# scheduler's "requests in X s").  Runs interleaved (every configuration
# once, repeated REPS times); medians and the ratio to the off median.
#   EAGLE / EAGLE3   RANDOM heads (tests/ref/eagle_ref.py make): almost never
#                    right, so these measure the cost of drafting;
#   fit chain/tree   an EAGLE-1 head fitted (eagle_ref.py fit) to the plain
#                    greedy outputs of the bench prompt (FIT=self, default) or
#                    of six other story openings (FIT=other): the chain
#                    (5 steps, topk 1) against trees of 7 nodes (5 steps,
#                    topk 2 and topk 4 = SGLang's Llama default).  A
#                    self-fitted head's accept lengths are optimistic.
#   PAGES="1 16" runs every configuration at each --page-size (interleaved;
#                    trees at page > 1 copy the accepted nodes' KV into place);
#                    ratios are to the off run of the same page size.
#   SEQ=1            every run serves the bench prompt and the six other
#                    openings one after another (--max-running-requests 1:
#                    still batch 1), so a run lasts 7x longer against the
#                    1 ms timer; FIT=self then fits the head to all seven.
#   bench/spec_eagle_tinystories.sh [REPS] [MAX_NEW]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
H=$(mktemp -d); trap 'rm -rf "$H"' EXIT
/usr/bin/python3 "$ROOT/tests/ref/eagle_ref.py" make "$H" "$M" || exit 1
exec /usr/bin/python3 - "$BIN" "$M" "$H" "${1:-5}" "${2:-300}" "${FIT:-self}" "$ROOT" "${PAGES:-1}" "${SEQ:-0}" <<'PYEOF'
import json, os, re, statistics, subprocess, sys, tempfile
binp, model, heads, reps, maxnew, fit, root, pages, seq = sys.argv[1:10]
seq = seq == "1"
pages = [int(x) for x in pages.split()]
reps, maxnew = int(reps), int(maxnew)
text = "Once upon a time, there was a little girl named Lily. She liked to play with her ball."
others = ["One day, a boy named Tom went to the park.", "Once upon a time, there was a big dog.",
          "Sam and Mia were best friends.", "The sun was shining and the birds were singing.",
          "Once upon a time, in a small town, there lived a kind old man.", "Tim had a red ball."]
tmp = tempfile.mkdtemp()
tok = subprocess.run([binp, "tokenize", "--tokenizer-path", model], capture_output=True, text=True, check=True,
                     input="".join(json.dumps({"text": t}) + "\n" for t in [text] + others)).stdout.splitlines()
ids = [json.loads(l)["ids"] for l in tok]
def reqfile(name, prompts):
    p = os.path.join(tmp, name)
    with open(p, "w") as f:
        for x in prompts:
            f.write(json.dumps({"input_ids": x, "sampling_params": {"temperature": 0, "max_new_tokens": maxnew,
                                "ignore_eos": True}}) + "\n")
    return p
req = reqfile("r.jsonl", ids if seq else ids[:1])
tprompts = (ids if seq else ids[:1]) if fit == "self" else ids[1:]
out = subprocess.run([binp, "generate", "--model-path", model, "--requests", reqfile("train.jsonl", tprompts),
                      "--threads", "1", "--skip-tokenizer-init", "--log-level", "warning"], capture_output=True,
                     text=True, check=True).stdout.splitlines()
json.dump([x + json.loads(l)["output_ids"] for x, l in zip(tprompts, out)], open(os.path.join(tmp, "seqs.json"), "w"))
subprocess.run(["/usr/bin/python3", os.path.join(root, "tests/ref/eagle_ref.py"), "fit", heads + "/fit", model,
                os.path.join(tmp, "seqs.json")], check=True)
E = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path"]
confs = [("off", []),
         ("EAGLE", E + [heads + "/eagle1", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]),
         ("EAGLE3", ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", heads + "/eagle3",
                     "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]),
         ("fit chain", E + [heads + "/fit", "--speculative-num-steps", "5", "--speculative-eagle-topk", "1"]),
         ("fit tree k2", E + [heads + "/fit", "--speculative-num-steps", "5", "--speculative-eagle-topk", "2",
                              "--speculative-num-draft-tokens", "8"]),
         ("fit tree k4", E + [heads + "/fit"])]  # SGLang's default for a Llama target: 5, 4, 8
if len(pages) > 1 or pages[0] != 1:
    confs = [(n if pg == 1 else "%s p%d" % (n, pg), x + ["--page-size", str(pg)])
             for pg in pages for n, x in confs if n not in ("EAGLE", "EAGLE3")]
res = {c: [] for c, _ in confs}
acc, trees = {}, {}
for _ in range(reps):
    for name, extra in confs:
        p = subprocess.run(["nice", binp, "generate", "--model-path", model, "--requests", req, "--threads", "1",
                            "--skip-tokenizer-init"] + (["--max-running-requests", "1"] if seq else []) + extra,
                           capture_output=True, text=True, check=True)
        wall = float(re.search(r"requests in ([0-9.]+) s", p.stderr).group(1))
        outs = [json.loads(l) for l in p.stdout.splitlines()]
        o = outs[0]
        ntok = sum(len(x["output_ids"]) for x in outs)
        res[name].append(ntok / wall)
        vct = sum(x["meta_info"].get("spec_verify_ct", 0) for x in outs)
        acc[name] = ntok / vct if vct else 1.0
        m = re.search(r"speculative: .* ([0-9]+) tree verifies", p.stderr)
        trees[name] = m.group(1) if m else "-"
print("fit on: %s" % (("all seven prompts' own outputs" if seq else "the bench prompt's own output") if fit == "self"
                      else "six other story openings"))
print("%-16s %12s %8s %7s %6s" % ("spec", "median tok/s", "vs off", "accept", "trees"))
for name, extra in confs:
    pg = extra[-1] if "--page-size" in extra else "1"
    off = statistics.median(res["off" if pg == "1" else "off p" + pg])
    m = statistics.median(res[name])
    print("%-16s %12.1f %8.2f %7.3f %6s" % (name, m, m / off, acc[name], trees[name]))
PYEOF
