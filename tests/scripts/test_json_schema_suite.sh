#!/usr/bin/env bash
# JSON-Schema-Test-Suite (../shared/datasets) through `sglc grammar-check
# --json-schema`: for every group whose schema compiles, each valid
# instance accepted and each invalid one rejected, compact and pretty
# serializations both; a table per keyword.  Passes at >= 95% right over
# the keywords in scope (the out-of-scope list is OUT_OF_SCOPE in
# json_schema_suite.py; the reasons are in docs/notes/schema.md).
# Drafts: 2020-12 here; JSON_SCHEMA_SUITE_DRAFTS=all adds 2019-09, 7, 6, 4.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SUITE=${SGLC_SHARED:-$ROOT/../shared}/datasets/JSON-Schema-Test-Suite/tests
[ -d "$SUITE" ] || { echo "no JSON-Schema-Test-Suite at $SUITE"; exit 77; }
[ -x "$BIN" ] || { echo "no $BIN"; exit 77; }
# grammar-check comes with the grammar engine: until it is linked in, skip
echo '' | "$BIN" grammar-check --regex a >/dev/null 2>&1 || { echo "sglc grammar-check is not available"; exit 77; }
exec python3 "$ROOT/tests/scripts/json_schema_suite.py" --suite "$SUITE" --checker "$BIN grammar-check" \
  --drafts "${JSON_SCHEMA_SUITE_DRAFTS:-draft2020-12}" --list-wrong
