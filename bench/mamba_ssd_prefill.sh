#!/usr/bin/env bash
# mamba_ssd_prefill — whole-prefill latency of a NemotronH-shaped dummy model
# (tests/ref/configs/nemotron_h-mid, 212 MiB bf16: 5 Mamba2 layers of 32
# heads x 64, state 128, 8 groups) with the Mamba2 scan as the token-by-token
# recurrence (SGLC_MAMBA_SSD_MIN_TOKENS=off) and as the chunked SSD scan
# (=1, SGLC_MAMBA_SSD_CHUNK as set, default 64), runs interleaved, through
# `sglc bench-one-batch`.  Prints per length the median prefill seconds of
# each and recurrence / chunked.
# Usage: bash bench/mamba_ssd_prefill.sh [LENS (256,1024,2048)] [ROUNDS (5)] [THREADS (2)]
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/build/sglc
LENS=${1:-256,1024,2048}
R=${2:-5}
TH=${3:-2}
run() {  # run MODE LEN -> prefill seconds
    SGLC_MAMBA_SSD_MIN_TOKENS=$1 "$BIN" bench-one-batch --model-path "$ROOT/tests/ref/configs/nemotron_h-mid" \
        --load-format dummy --dtype bfloat16 --batch-size 1 --input-len "$2" --output-len 2 --threads "$TH" 2>&1 |
        sed -n 's/^Prefill\. latency: *\([0-9.]*\) s.*/\1/p'
}
for L in ${LENS//,/ }; do
    off=() on=()
    for ((i = 0; i < R; i++)); do
        off+=("$(run off "$L")")
        on+=("$(run 1 "$L")")
    done
    python3 - "$L" "${off[*]}" "${on[*]}" <<'PY'
import statistics, sys
L, off, on = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
mo, mc = statistics.median(off), statistics.median(on)
print(f'{{"input_len": {L}, "recurrence_s": {mo:.4f}, "chunked_s": {mc:.4f}, "ratio": {mo/mc:.3f}, '
      f'"recurrence_runs": {off}, "chunked_runs": {on}}}')
PY
done
