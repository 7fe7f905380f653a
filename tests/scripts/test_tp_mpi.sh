#!/usr/bin/env bash
# Tensor parallelism over Open MPI (issue 12): `mpirun -np 2 sglc generate
# --tp-size 2` on the tiny llama3 and TinyStories-656K gives the prompt
# logits of one process within 1e-5 relative and the same greedy ids; a
# world size that is not --tp-size is refused; bench-allreduce runs on the
# MPI backend.  Skips (77) without mpirun or a build without Open MPI.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json
command -v mpirun >/dev/null || golden_skip "mpirun not installed (openmpi-bin)"
ldd "$BIN" | grep -q libmpi || golden_skip "$BIN built without Open MPI"
MPI=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe -np 2)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$ROOT/build/tiny-models" --only llama3 >/dev/null || exit 1
fails=0
IDS=$("$PY" -c "print(','.join(str((i * 37) % 500 + 3) for i in range(40)))")
for M in "$ROOT/build/tiny-models/llama3/f32" "$SHARED/models/TinyStories-656K"; do
    n=$(basename "$(dirname "$M")")/$(basename "$M")
    G=(generate --model-path "$M" --input-ids "$IDS" --max-new-tokens 16 --temperature 0 --json --ignore-eos --dtype float32)
    "$BIN" "${G[@]}" --threads 1 --dump-logits "$T/ref.f32" >"$T/ref.json" 2>"$T/ref.err" || { echo "FAIL $n: one process"; cat "$T/ref.err"; exit 1; }
    timeout 120 "${MPI[@]}" "$BIN" "${G[@]}" --threads 2 --tp-size 2 --dist-timeout 30 --dump-logits "$T/got.f32" >"$T/got.json" 2>"$T/got.err"
    rc=$?
    if [ $rc != 0 ]; then echo "FAIL $n: mpirun exit $rc"; tail -20 "$T/got.err"; fails=$((fails + 1)); continue; fi
    "$PY" - "$T" "$n" <<'PYEOF' || fails=$((fails + 1))
import json, sys
import numpy as np
t, n = sys.argv[1], sys.argv[2]
a = np.fromfile(t + "/ref.f32", "<f4"); b = np.fromfile(t + "/got.f32", "<f4")
e = float(np.max(np.abs(a.astype(np.float64) - b)) / np.max(np.abs(a))) if a.size == b.size else 1.0
ia = json.loads(open(t + "/ref.json").read().strip().splitlines()[-1])["output_ids"]
ib = json.loads(open(t + "/got.json").read().strip().splitlines()[-1])["output_ids"]
ok = e <= 1e-5 and ia == ib
print(("ok   " if ok else "FAIL ") + f"{n} mpirun -np 2 --tp-size 2: logits max|d|/max|ref| = {e:.3g}, greedy ids {'identical' if ia == ib else 'differ'}")
sys.exit(0 if ok else 1)
PYEOF
done
# a world size other than --tp-size is refused with a message
timeout 60 "${MPI[@]}" "$BIN" generate --model-path "$SHARED/models/TinyStories-656K" --input-ids 1,2,3 \
    --max-new-tokens 2 --tp-size 4 >/dev/null 2>"$T/np.err"
if grep -q "mpirun started 2 processes but --tp-size x --pp-size is 4" "$T/np.err"; then echo "ok   -np 2 with --tp-size 4 refused"; else echo "FAIL no refusal"; tail -5 "$T/np.err"; fails=$((fails + 1)); fi
timeout 60 "${MPI[@]}" "$BIN" bench-allreduce --iters 300 --warmup 30 >"$T/bar.txt" 2>"$T/bar.err"
if grep -q "^mpi backend, 2 ranks" "$T/bar.txt"; then echo "ok   bench-allreduce over MPI: $(grep allreduce_f32 "$T/bar.txt")"; else echo "FAIL bench-allreduce over MPI"; cat "$T/bar.txt" "$T/bar.err" | tail -5; fails=$((fails + 1)); fi
echo "$fails failure(s)"
[ $fails = 0 ]
