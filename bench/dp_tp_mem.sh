#!/usr/bin/env bash
# dp_tp_mem.sh — resident memory of `sglc serve --tp-size 2` with
# --dp-size 1 and 2 (docs/notes/dpxtp.md): per process Rss / Pss /
# Private (smaps_rollup) of the serve process and its worker processes,
# after one greedy request, and the total Pss.  A dummy Llama-3.2-1B
# shrunk to LAYERS layers (bf16; random weights made at load, so every
# byte of a shard is the process's own memory, none of it page cache).
#
#   bench/dp_tp_mem.sh [BIN...]     (default: build/sglc)
#   LAYERS=4 THREADS=4 TP=2 DPS="1 2"
# Prints one line per (binary, dp size): the total Pss in MiB and each
# process's "role Rss/Pss/Private MiB".  Not timed (no lock needed); it
# needs ~2.5 GiB free for the dp 2 run of a binary with one copy of the
# shards per replica.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SGLC_SHARED:-$ROOT/../shared}
CFG=$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct
LAYERS=${LAYERS:-4}
THREADS=${THREADS:-4}
TP=${TP:-2}
DPS=${DPS:-"1 2"}
PY=/usr/bin/python3
[ $# -gt 0 ] || set -- "$ROOT/build/sglc"
[ -f "$CFG/config.json" ] || { echo "no $CFG/config.json"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/smaps_rollup"; }
for BIN in "$@"; do
    for DP in $DPS; do
        P=$(port)
        "$BIN" serve --model-path "$CFG" --load-format dummy --dtype bfloat16 \
            --json-model-override-args "{\"num_hidden_layers\": $LAYERS}" --tp-size "$TP" --dp-size "$DP" \
            --threads "$THREADS" --max-total-tokens 2048 --skip-tokenizer-init --host 127.0.0.1 --port "$P" >"$T/log" 2>&1 &
        S=$!
        up=0
        for _ in $(seq 1 600); do
            curl -sf -o /dev/null "http://127.0.0.1:$P/health" && { up=1; break; }
            kill -0 $S 2>/dev/null || break
            sleep 0.5
        done
        if [ $up = 0 ]; then echo "$BIN dp $DP: the server did not start"; tail -5 "$T/log"; kill $S 2>/dev/null; wait $S; continue; fi
        curl -s -o /dev/null -X POST -H 'Content-Type: application/json' \
            --data '{"input_ids":[1,2,3,4,5,6,7,8],"sampling_params":{"max_new_tokens":4,"temperature":0}}' \
            "http://127.0.0.1:$P/generate"
        line="" tot=0
        for p in $S $(cat /proc/$S/task/*/children); do
            r=$(kib $p Rss) s=$(kib $p Pss) v=$(( $(kib $p Private_Clean) + $(kib $p Private_Dirty) ))
            role=worker; [ $p = $S ] && role=serve
            tot=$((tot + s))
            line="$line  $role $((r / 1024))/$((s / 1024))/$((v / 1024))"
        done
        echo "$BIN tp $TP dp $DP: total Pss $((tot / 1024)) MiB;$line (Rss/Pss/Private MiB)"
        kill -TERM $S
        wait $S
    done
done
