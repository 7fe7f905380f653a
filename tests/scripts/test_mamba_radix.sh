#!/usr/bin/env bash
# The radix cache of a hybrid Mamba2 model with state checkpoints
# (--mamba-scheduler-strategy extra_buffer) on the tiny NemotronH of
# tests/ref/mamba_ref.py: a request served from a cached prefix that ends
# before, at and after a checkpoint (and inside a previous output) equals the
# same request in a fresh process and the float64 reference, cached_tokens is
# the checkpoint it resumed from, eviction under a small state pool, no leak,
# retraction, no_buffer and the refusal of a bad interval
# (tests/ref/mamba_radix_check.py has the details).
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require
mkdir -p "$ROOT/build/tiny-models"
"$PY" "$ROOT/tests/ref/mamba_radix_check.py" "$BIN" "$ROOT/build/tiny-models"
