#!/usr/bin/env bash
# Accept length and decode tok/s with and without --speculative-algorithm
# NGRAM at batch 1 on TinyStories-656K (docs/notes/spec.md, docs/PERF.md):
# a prompt that repeats a phrase (greedy), a free story prompt (greedy),
# and the free prompt sampled (temperature 0.8, seeded).  Each request runs
# alone through `sglc generate --requests`; the time is the scheduler's
# ("N requests in X s"), best of REPS runs (the machine is shared).
#   bench/spec_tinystories.sh [REPS] [MAX_NEW]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
REPS=${1:-5}
MAXNEW=${2:-400}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
rep="The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log. The cat sat on the mat."
free="Once upon a time, there was a little girl named Lily. She liked to play with her ball."
mk() { printf '{"text": "%s", "sampling_params": {"temperature": %s, "max_new_tokens": %d, "ignore_eos": true, "sampling_seed": 3}}\n' "$1" "$2" "$MAXNEW" >"$3"; }
mk "$rep" 0 "$T/rep.jsonl"
mk "$free" 0 "$T/free.jsonl"
mk "$free" 0.8 "$T/sample.jsonl"
printf '%-8s %-6s %8s %10s %8s\n' case spec tokens 'tok/s' accept
for c in rep free sample; do
    for spec in off NGRAM; do
        args=""
        [ "$spec" = NGRAM ] && args="--speculative-algorithm NGRAM"
        best=0
        for r in $(seq 1 "$REPS"); do
            nice "$BIN" generate --model-path "$M" --requests "$T/$c.jsonl" --output "$T/o.jsonl" --threads 1 $args \
                2>"$T/log" || exit 1
            s=$(sed -n 's/.* requests in \([0-9.]*\) s:.*/\1/p' "$T/log")
            best=$(awk -v a="$best" -v b="$s" 'BEGIN {print (a == 0 || b < a) ? b : a}')
        done
        read -r n acc < <(/usr/bin/python3 -c 'import json,sys; o=json.loads(open(sys.argv[1]).readline()); print(len(o["output_ids"]), o["meta_info"].get("spec_accept_length", 1.0))' "$T/o.jsonl")
        printf '%-8s %-6s %8d %10.1f %8.2f\n' "$c" "$spec" "$n" "$(awk -v n="$n" -v s="$best" 'BEGIN {print n / s}')" "$acc"
    done
done
