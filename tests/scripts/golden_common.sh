# Sourced by the golden tests (tests/scripts/test_*.sh) that compare
# `sglc generate` with the PyTorch reference in tests/ref.  Sets ROOT,
# SHARED, BIN, PY and exits 77 (skip, reason on the last line) when
# something they need is missing.
ROOT=${SGLC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
PY=/usr/bin/python3
export SGLC_ROOT=$ROOT SGLC_SHARED=$SHARED SGLC_BIN=$BIN

golden_skip() { echo "skip: $*"; exit 77; }

golden_require() {  # golden_require PATH...: shared files the test reads
    [ -x "$PY" ] || golden_skip "$PY not found"
    "$PY" -c 'import torch, numpy' 2>/dev/null || golden_skip "torch/numpy missing in $PY"
    for f in "$@"; do
        [ -e "$SHARED/$f" ] || golden_skip "$SHARED/$f not found"
    done
    [ -x "$BIN" ] || golden_skip "$BIN not built"
    "$BIN" help 2>/dev/null | grep -qE '^[[:space:]]+generate([[:space:]]|$)' ||
        golden_skip "$BIN has no 'generate' command yet"
}
