#!/usr/bin/env bash
# MLA prefill (issue 15): the expanded attention (per-head K/V decompressed
# from the latent cache for prefill chunks of >= SGLC_MLA_EXPAND_MIN new
# tokens, src/model/mla.c) and the absorbed one, each forced on every
# forward, against the PyTorch reference (tests/ref/mla_prefill_check.py)
# on the tiny deepseek-v2-lite / v2 / v3 models: 64-token prompt logits
# within 1e-4, greedy ids identical, a 48-token prompt in 16-token chunks
# (input logprobs within 2e-4) and a prompt whose first 48 tokens come
# from the radix cache (output logprobs within 2e-4), with the SIMD and the
# scalar kernels; expanded vs absorbed logits within 1e-4; the expanded
# run logs that it expanded; bf16 weights + cache (2e-2), int8 / fp8 latent
# caches (expanded == absorbed), the default automatic rule.  Also: a bad
# SGLC_MLA_EXPAND_MIN is refused.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require
mkdir -p "$ROOT/build/tiny-models"
"$PY" "$ROOT/tests/ref/mla_prefill_check.py" --cache "$ROOT/build/tiny-models" "$@" || exit 1
# a bad threshold: a clear refusal at load, not a crash
md="$ROOT/build/tiny-models/deepseek-v2-lite/f32"
out=$(SGLC_MLA_EXPAND_MIN=abc "$BIN" generate --model-path "$md" --input-ids 1,2,3 --max-new-tokens 1 2>&1)
rc=$?
if [ $rc -eq 0 ] || ! grep -q "SGLC_MLA_EXPAND_MIN=abc" <<<"$out"; then
    echo "FAIL SGLC_MLA_EXPAND_MIN=abc: exit $rc, output: ${out: -300}"
    exit 1
fi
echo "ok   SGLC_MLA_EXPAND_MIN=abc refused (exit $rc)"
