#!/usr/bin/env bash
# NemotronH (hybrid Mamba2) under tensor and pipeline parallelism (issues 12,
# 15): --tp-size 2 and 4, --pp-size 2 and --tp-size 2 --pp-size 2 against one
# process on the tiny model of tests/ref/mamba_ref.py — prompt logits within
# 1e-5 relative (f32), 16 greedy ids identical, and through the scheduler
# (chunked prefill of 5, two concurrent requests; extra_buffer checkpoints
# and a resume from one) logprobs within 1e-5 and the same ids
# (tests/scripts/tp_mamba_check.py).
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require
mkdir -p "$ROOT/build/tiny-models"
"$PY" "$ROOT/tests/scripts/tp_mamba_check.py" "$ROOT/build/tiny-models"
