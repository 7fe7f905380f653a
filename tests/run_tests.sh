#!/usr/bin/env bash
# Quick tier runner: every unit-test binary in BUILD/tests, then every
# script test tests/scripts/test_*.sh (exit 0 = pass, 77 = skip).
# Prints per-binary results and closes with "N passed, N failed[, N skipped]".
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export SGLC_BIN="$ROOT/$BUILD/sglc"
export SGLC_ROOT="$ROOT"
export SGLC_SHARED="${SGLC_SHARED:-$ROOT/../shared}"
pass=0; fail=0; skip=0; failed_names=()
log_dir="$ROOT/$BUILD/test-logs"; mkdir -p "$log_dir"

for t in "$ROOT/$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  out="$log_dir/$name.log"
  if (cd "$ROOT" && timeout 900 "$t") >"$out" 2>&1; then rc=0; else rc=$?; fi
  p=$(grep -oE '^\[  PASSED  \] [0-9]+' "$out" | awk '{s+=$NF} END {print s+0}')
  f=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$out" | awk '{s+=$(NF-1)} END {print s+0}')
  s=$(grep -oE '^\[  SKIPPED \] [0-9]+' "$out" | awk '{s+=$NF} END {print s+0}')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  if [ "$f" -gt 0 ]; then
    failed_names+=("$name"); echo "FAIL $name ($p passed, $f failed) — log: $out"; tail -30 "$out"
  else
    echo "ok   $name ($p passed${s:+, $s skipped})"
  fi
done

if [ -z "${SGLC_SANITIZED:-}" ]; then
  for t in "$ROOT"/tests/scripts/test_*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    out="$log_dir/$name.log"
    if (cd "$ROOT" && timeout 1200 bash "$t") >"$out" 2>&1; then rc=0; else rc=$?; fi
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); echo "ok   $name"
    elif [ "$rc" -eq 77 ]; then skip=$((skip + 1)); echo "skip $name: $(tail -1 "$out")"
    else
      fail=$((fail + 1)); failed_names+=("$name"); echo "FAIL $name (rc=$rc) — log: $out"
      # the failing checks first (CI shows only this output), then the end of the log
      if grep -q '^FAIL\|Traceback' "$out"; then
        echo "  -- failing checks:"; grep -n -A6 '^FAIL\|Traceback' "$out" | head -80 | cut -c1-400
        echo "  -- end of the log:"
      fi
      tail -30 "$out"
    fi
  done
fi

echo
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
