#!/usr/bin/env bash
# A/B two sglc builds on the same machine, alternating run by run, and
# print medians and ratios (new / base).  For refactors that must not
# change speed (issue 9): one-batch prefill/decode on a dummy
# Llama-3.2-1B bf16, and serving TinyStories-656K through the HTTP path.
#
#   bench/ab_builds.sh BASE_SGLC NEW_SGLC [REPS]
#
# Knobs: SHARED (../shared), THREADS (2), OB_IN (128), OB_OUT (16),
# SV_PROMPTS (32), SV_CONC (8), PARTS ("one-batch serve").
set -euo pipefail
BASE=$1; NEW=$2; REPS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
THREADS=${THREADS:-2}; OB_IN=${OB_IN:-128}; OB_OUT=${OB_OUT:-16}
SV_PROMPTS=${SV_PROMPTS:-32}; SV_CONC=${SV_CONC:-8}
PARTS=${PARTS:-"one-batch serve"}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"; [ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null || true' EXIT
L1B=$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct
TINY=$SHARED/models/TinyStories-656K

one_batch() { # bin tag
  "$1" bench-one-batch --model-path "$L1B" --load-format dummy --dtype bfloat16 --batch-size 1 \
    --input-len "$OB_IN" --output-len "$OB_OUT" --threads "$THREADS" --result-filename "$OUT/ob_$2.jsonl" >/dev/null 2>&1
}
serve_run() { # bin tag
  local port=$((31000 + RANDOM % 2000))
  "$1" serve --model-path "$TINY" --port "$port" --threads 1 --skip-server-warmup >"$OUT/srv.log" 2>&1 &
  SPID=$!
  for _ in $(seq 200); do curl -sf "localhost:$port/health" >/dev/null 2>&1 && break; sleep 0.05; done
  "$NEW" bench-serving --backend sglang --port "$port" --dataset-name random --num-prompts "$SV_PROMPTS" \
    --random-input-len 256 --random-output-len 128 --random-range-ratio 1 --max-concurrency "$SV_CONC" \
    --tokenizer "$TINY" --output-file "$OUT/sv_$2.jsonl" >/dev/null 2>&1 || echo "bench-serving failed ($2)" >&2
  kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=
}
for r in $(seq "$REPS"); do
  for tag in base new; do
    bin=$BASE; [ $tag = new ] && bin=$NEW
    case " $PARTS " in *" one-batch "*) one_batch "$bin" $tag;; esac
    case " $PARTS " in *" serve "*) serve_run "$bin" $tag;; esac
  done
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
def load(f):
    p = os.path.join(d, f)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
def med(rows, key):
    v = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(v) if v else float('nan')
for kind, keys in (("ob", ("prefill_throughput", "median_decode_throughput", "overall_throughput")),
                   ("sv", ("output_throughput", "mean_ttft_ms", "median_tpot_ms", "median_itl_ms"))):
    b, n = load(f"{kind}_base.jsonl"), load(f"{kind}_new.jsonl")
    if not b: continue
    print(f"{'one-batch' if kind == 'ob' else 'serving'} ({len(b)} + {len(n)} runs, medians)")
    for k in keys:
        mb, mn = med(b, k), med(n, k)
        print(f"  {k:28s} base {mb:10.2f}  new {mn:10.2f}  new/base {mn / mb if mb else float('nan'):.3f}")
PY
