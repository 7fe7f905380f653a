#!/usr/bin/env bash
# sglc grammar-check: byte walks and token walks (with a real tokenizer when
# ../shared has one) against EBNF and regex grammars, the exit status for a
# grammar that does not compile, and argument errors.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
[ -x "$BIN" ] || { echo "no $BIN"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1"; echo " expected: $2"; echo " actual:   $3"; fail=1; else echo "ok   $1"; fi
}
cat >"$tmp/g.ebnf" <<'G'
# a tiny JSON-ish object
root ::= "{" ws "\"n\"" ws ":" ws num ws "}"
num  ::= "-"? [0-9]+
ws   ::= [ \t\n]*
G
inputs='"{\"n\": 12}"
"{\"n\":-3 }"
"{\"n\": }"
"{\"n\": 1"
"{ \"n\" : 7}"'
want='{"accepted":true}
{"accepted":true}
{"accepted":false}
{"accepted":false}
{"accepted":true}'
check "ebnf bytes" "$want" "$(printf '%s\n' "$inputs" | "$BIN" grammar-check --ebnf "$tmp/g.ebnf")"
check "regex bytes" '{"accepted":true}
{"accepted":false}
{"accepted":true}' "$(printf '"2024-01-31"\n"2024-1-31"\n"1999-12-01"\n' | "$BIN" grammar-check --regex '\d{4}-\d{2}-\d{2}')"
check "utf-8" '{"accepted":true}
{"accepted":false}' "$(printf '"h\\u00e9llo \\u65e5"\n"h\\u00e9llo!"\n' | "$BIN" grammar-check --regex '[^!]+')"
check "not a string" '{"accepted":false,"error":"each line must be a JSON string"}' \
  "$(printf '{"a":1}\n' | "$BIN" grammar-check --regex 'a')"
# a grammar that does not compile: exit 3, reason on stderr
printf 'root ::= root "a" | "b"\n' >"$tmp/bad.ebnf"
"$BIN" grammar-check --ebnf "$tmp/bad.ebnf" </dev/null >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bad grammar exit" 3 "$rc"
grep -q "left recursion" "$tmp/err" && echo "ok   bad grammar reason" || { echo "FAIL bad grammar reason: $(cat "$tmp/err")"; fail=1; }
"$BIN" grammar-check --regex '(a' </dev/null >/dev/null 2>"$tmp/err"; rc=$?
check "bad regex exit" 3 "$rc"
"$BIN" grammar-check </dev/null >/dev/null 2>&1; rc=$?
check "no grammar exit" 2 "$rc"
"$BIN" grammar-check --regex a --ebnf "$tmp/g.ebnf" </dev/null >/dev/null 2>&1; rc=$?
check "two grammars exit" 2 "$rc"
# with a tokenizer: each token checked against the mask
for tk in llama3_1 qwen3; do
  dir="$SHARED/models/tokenizers/$tk"
  [ -d "$dir" ] || { echo "skip $tk (no $dir)"; continue; }
  check "tokens $tk" "$want" "$(printf '%s\n' "$inputs" | "$BIN" grammar-check --ebnf "$tmp/g.ebnf" --tokenizer-path "$dir")"
done
exit $fail
