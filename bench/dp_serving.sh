#!/usr/bin/env bash
# bench/dp_serving.sh — data parallelism (issue 12): serving throughput of
# `sglc serve --dp-size 2` against `--dp-size 1` with the same total
# threads, measured with `sglc bench-serving` (random prompts, concurrency
# C, all at once), medians of RUNS seeds.  Not run by the tests.
#
#   bash bench/dp_serving.sh [MODEL_DIR]
#   env: THREADS (2), C (32), PROMPTS (128), IN (256), OUT (128), RUNS (3),
#        METHOD (round_robin), DP (2), TP (1: --tp-size for both servers;
#        TP > 1 compares DP x TP replicas with one TP group, docs/notes/dpxtp.md)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${1:-$ROOT/../shared/models/TinyStories-656K}
THREADS=${THREADS:-2} C=${C:-32} PROMPTS=${PROMPTS:-128} IN=${IN:-256} OUT=${OUT:-128} RUNS=${RUNS:-3}
METHOD=${METHOD:-round_robin} DP=${DP:-2} TP=${TP:-1}
PY=/usr/bin/python3
T=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # run DP: start the server, RUNS bench runs, print the medians
    local dp=$1 p
    p=$(port)
    "$BIN" serve --model-path "$M" --host 127.0.0.1 --port "$p" --threads "$THREADS" --dp-size "$dp" --tp-size "$TP" \
        --load-balance-method "$METHOD" --max-total-tokens 65536 >"$T/serve$dp.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 150); do curl -sf -o /dev/null "http://127.0.0.1:$p/health" && break; sleep 0.2; done
    rm -f "$T/res$dp.jsonl"
    for s in $(seq 1 "$RUNS"); do
        "$BIN" bench-serving --backend sglang --port "$p" --model-path "$M" --dataset-name random \
            --num-prompts "$PROMPTS" --random-input-len "$IN" --random-output-len "$OUT" --random-range-ratio 1 \
            --max-concurrency "$C" --seed "$s" --flush-cache --output-file "$T/res$dp.jsonl" >"$T/b$dp.$s.log" 2>&1 ||
            { echo "bench-serving failed:"; cat "$T/b$dp.$s.log"; exit 1; }
    done
    kill "$PID"; wait "$PID" 2>/dev/null; PID=
    "$PY" - "$T/res$dp.jsonl" "$dp" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(k):
    v = [r[k] for r in rows if k in r]
    return statistics.median(v) if v else float("nan")
print(f"dp={sys.argv[2]} runs={len(rows)} req/s={med('request_throughput'):.1f} "
      f"out_tok/s={med('output_throughput'):.0f} total_tok/s={med('total_throughput'):.0f} "
      f"ttft_mean_ms={med('mean_ttft_ms'):.1f} tpot_mean_ms={med('mean_tpot_ms'):.2f}")
EOF
}
echo "model $M, --threads $THREADS, --tp-size $TP, C=$C, $PROMPTS prompts of $IN in / $OUT out, medians of $RUNS, method $METHOD"
a=$(run 1); echo "$a"
b=$(run "$DP"); echo "$b"
"$PY" -c "
import re,sys
def g(s,k): return float(re.search(k+r'=([0-9.]+)', s).group(1))
a, b = sys.argv[1], sys.argv[2]
print(f'dp={sys.argv[3]} / dp=1: out tok/s x{g(b,\"out_tok/s\")/g(a,\"out_tok/s\"):.2f}, req/s x{g(b,\"req/s\")/g(a,\"req/s\"):.2f}')
" "$a" "$b" "$DP"
