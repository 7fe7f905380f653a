#!/usr/bin/env bash
# test_fp32_lm_head — --enable-fp32-lm-head on TinyStories-656K (bf16
# weights): sglc's LM head is f32 math already (f32 hidden states, bf16
# weights widened, f32 accumulation; test_arch_logits checks logits against
# f32 references), so the flag changes no output; the one switch that would
# round the LM head's activations to bf16 (SGLC_BF16_DOT=1, AVX-512 only)
# is refused with it.
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
echo '{"input_ids":[1,5,6,7],"sampling_params":{"max_new_tokens":8,"temperature":0},"return_logprob":true,"top_logprobs_num":5}' >"$T/req.jsonl"
n=0
gen() { n=$((n + 1)); "$BIN" generate --model-path "$M" --dtype bfloat16 --requests "$T/req.jsonl" --skip-tokenizer-init \
  --output "$T/out$n.jsonl" --threads 1 "$@" && /usr/bin/python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).readline())
print(d["output_ids"], d["meta_info"]["output_token_logprobs"], d["meta_info"]["output_top_logprobs"])' "$T/out$n.jsonl"; }

gen >"$T/a" 2>"$T/a.err"
check "plain run" '[ $? = 0 ] && [ -s "$T/a" ]'
gen --enable-fp32-lm-head >"$T/b" 2>"$T/b.err"
check "flag: exit 0, same tokens and logprobs" '[ $? = 0 ] && cmp -s "$T/a" "$T/b"'
SGLC_BF16_DOT=1 gen --enable-fp32-lm-head >"$T/c" 2>"$T/c.err"
rc=$?
if grep -q "kernels: avx512" "$T/a.err"; then
  check "SGLC_BF16_DOT=1 + flag refused (avx512)" '[ $rc != 0 ] && grep -q "enable-fp32-lm-head: SGLC_BF16_DOT" "$T/c.err"'
  SGLC_BF16_DOT=1 gen >"$T/d" 2>"$T/d.err"
  check "SGLC_BF16_DOT=1 alone still runs" '[ $? = 0 ]'
else
  check "no AVX-512: SGLC_BF16_DOT has no effect, flag accepted" '[ $rc = 0 ] && cmp -s "$T/a" "$T/c"'
fi
[ "$fails" -eq 0 ] && echo "all fp32-lm-head checks passed" || { echo "$fails fp32-lm-head check(s) failed"; exit 1; }
