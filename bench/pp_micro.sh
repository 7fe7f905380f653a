#!/usr/bin/env bash
# Pipeline micro-batches (--pp-max-micro-batch-size), A/B alternated:
# `sglc bench-one-batch --pp-size 2 --threads 2` (one thread per stage) at
# batch 8 with M = 8 (one micro-batch: the stages take turns) against
# M = 4 and M = 2 (the stages overlap), on a dummy Llama-3.2-1B config cut
# to LAYERS layers (bf16).  Prints each run's prefill and decode
# throughput, then the medians and the ratios to M = 8, and the load
# average before and after.  Usage: bench/pp_micro.sh [ROUNDS] [LAYERS]
# [INPUT_LEN] [OUTPUT_LEN]  (defaults 5, 8, 128, 16); VOCAB=N in the
# environment also cuts the vocabulary (a lighter LM head on the last
# stage: more even stages).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
R=${1:-5} LAYERS=${2:-8} IN=${3:-128} OUT=${4:-16}
LD=$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$R"); do
    for M in 8 4 2; do
        nice "$BIN" bench-one-batch --model-path "$LD" --load-format dummy --dtype bfloat16 \
            --json-model-override-args "{\"num_hidden_layers\": $LAYERS${VOCAB:+, \"vocab_size\": $VOCAB}}" --pp-size 2 --threads 2 \
            --pp-max-micro-batch-size "$M" --batch-size 8 --input-len "$IN" --output-len "$OUT" \
            --result-filename "$T/m$M.jsonl" >/dev/null 2>"$T/err" || { tail -5 "$T/err"; exit 1; }
        tail -1 "$T/m$M.jsonl" | /usr/bin/python3 -c 'import json, sys
d = json.loads(sys.stdin.read())
print("round %s M=%s: prefill %.0f tok/s, decode %.1f tok/s" % (sys.argv[1], sys.argv[2], d["prefill_throughput"], d["median_decode_throughput"]))' "$r" "$M"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$T" <<'PYEOF'
import json, statistics, sys
med = {}
for M in (8, 4, 2):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/m{M}.jsonl")]
    med[M] = (statistics.median(r["prefill_throughput"] for r in rows),
              statistics.median(r["median_decode_throughput"] for r in rows))
for M in (8, 4, 2):
    p, d = med[M]
    print(f"M={M}: median prefill {p:.0f} tok/s ({p / med[8][0]:.2f}x M=8), decode {d:.1f} tok/s ({d / med[8][1]:.2f}x)")
PYEOF
