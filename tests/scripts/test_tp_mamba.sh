#!/usr/bin/env bash
# NemotronH (hybrid Mamba2) under tensor and pipeline parallelism (issues 12,
# 15): --tp-size 2 and 4, --pp-size 2 and --tp-size 2 --pp-size 2 against one
# process on the tiny model of tests/ref/mamba_ref.py — prompt logits within
# 1e-5 relative (f32), 16 greedy ids identical, and through the scheduler
# (chunked prefill of 5, two concurrent requests; extra_buffer checkpoints
# and a resume from one) logprobs within 1e-5 and the same ids
# (tests/scripts/tp_mamba_check.py); then the serve-level radix checks of
# test_mamba_radix.sh under TP 2 x PP 2 and TP 4.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require
mkdir -p "$ROOT/build/tiny-models"
"$PY" "$ROOT/tests/scripts/tp_mamba_check.py" "$ROOT/build/tiny-models"
rc=$?
# the radix cache with Mamba checkpoints through `sglc serve` (resumes at and
# between checkpoints, eviction, retraction, leak checks; against a fresh
# process and the float64 reference: tests/ref/mamba_radix_check.py), again
# with 4 ranks: 2 stages of 2 tensor-parallel ranks, and 4 tensor-parallel ranks
for a in "--tp-size 2 --pp-size 2" "--tp-size 4"; do
    echo "== mamba_radix_check.py under $a"
    SGLC_MAMBA_RADIX_ARGS="$a" "$PY" "$ROOT/tests/ref/mamba_radix_check.py" "$BIN" "$ROOT/build/tiny-models" || rc=1
done
exit $rc
