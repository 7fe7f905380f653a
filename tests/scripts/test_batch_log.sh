#!/usr/bin/env bash
# test_batch_log — SGLang's scheduler log lines on TinyStories-656K:
# "Prefill batch. #new-seq: .., #new-token: .., #cached-token: .., token
# usage: .., #running-req: .., #queue-req: ..," once per prefill batch and
# "Decode batch. #running-req: .., #token: .., token usage: .., cuda graph:
# False, gen throughput (token/s): .., #queue-req: ..," every
# --decode-log-interval decode forwards (default 40).  Two requests of 6
# and 7 prompt tokens, 9 new tokens each: one prefill, 8 decode forwards.
# Also --enable-request-time-stats-logging ("Req Time Stats(...)" lines).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$M/model.safetensors" ] || { echo "skip: $M not found"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
printf '%s\n' '{"input_ids":[1,5,6,7,8,9],"sampling_params":{"max_new_tokens":9,"ignore_eos":true}}' \
  '{"input_ids":[1,15,16,17,18,19,20],"sampling_params":{"max_new_tokens":9,"ignore_eos":true}}' >"$T/req.jsonl"
gen() { "$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/out.jsonl" --threads 1 \
  --skip-tokenizer-init "$@" 2>"$T/err"; }

gen --decode-log-interval 3
check "interval 3: exit 0" '[ $? -eq 0 ]'
check "one Prefill line, SGLang's fields" \
  '[ "$(grep -c "Prefill batch\. #new-seq: 2, #new-token: 13, #cached-token: 0, token usage: 0\.00, #running-req: 0, #queue-req: 0,$" "$T/err")" = 1 ]'
check "two Decode lines (forwards 3 and 6 of 8)" '[ "$(grep -c "Decode batch\. " "$T/err")" = 2 ]'
check "decode 3: 2 running, 12 + 2x3 tokens (the BOS is shared in the radix tree)" \
  'grep -qE "Decode batch\. #running-req: 2, #token: 18, token usage: 0\.00, cuda graph: False, gen throughput \(token/s\): [0-9]+\.[0-9]{2}, #queue-req: 0,$" "$T/err"'
check "decode 6: 12 + 2x6 tokens" 'grep -q "Decode batch\. #running-req: 2, #token: 24, " "$T/err"'

gen
check "default interval 40: no Decode line, no time stats" '[ "$(grep -c "Decode batch" "$T/err")" = 0 ] && grep -q "Prefill batch" "$T/err" && ! grep -q "Req Time Stats" "$T/err"'
gen --decode-log-interval 1
check "interval 1: a line per decode forward" '[ "$(grep -c "Decode batch" "$T/err")" = 8 ]'
gen --decode-log-interval 1 --log-level warning
check "log level warning: no batch lines" '! grep -q "batch\." "$T/err"'
gen --enable-request-time-stats-logging
check "time stats: a line per request" '[ "$(grep -c "Req Time Stats(" "$T/err")" = 2 ]'
check "time stats: SGLang's fields" \
  'grep -qE "Req Time Stats\(rid=[^,]+, input len=7, output len=9, type=unified\): queue_duration=[0-9]+\.[0-9]{2}ms, forward_duration=[0-9]+\.[0-9]{2}ms, entry_time=[0-9]{10}\.[0-9]{3}$" "$T/err"'
gen --decode-log-interval 0
check "interval 0: usage error" '[ $? -eq 2 ] && grep -q "decode-log-interval must be at least 1" "$T/err"'

[ "$fails" -eq 0 ] && echo "all batch-log checks passed" || { echo "$fails batch-log check(s) failed"; exit 1; }
