#!/usr/bin/env bash
# Golden: NemotronHForCausalLM, the hybrid Mamba2 model (tests/ref/mamba_ref.py:
# a tiny random-weight model shrunk from nvidia/Nemotron-H-8B-Base-8K's
# config, tests/data/configs; a naive token-by-token PyTorch reference).
# Each feature shown to matter (13 ablations of the reference move the logits
# by > 1e-2); `generate` prompt logits within 1e-4 and greedy ids; through the scheduler
# two concurrent requests, each equal to the reference alone, with the prompt
# in one chunk, in chunks of 5, token by token, and with one state slot
# shared in turn; bf16 SSM states within 2e-2; again with SGLC_KERNELS=scalar
# (the scalar scan step).  Then the refusals: float16 SSM states, --tp-size
# with Mamba heads / groups that do not split, speculative decoding (a recurrent state cannot be rolled back to
# the accepted drafts); the default strategy (auto = extra_buffer, logged).  The
# radix cache with state checkpoints is tests/scripts/test_mamba_radix.sh.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require
mkdir -p "$ROOT/build/tiny-models"
"$PY" "$ROOT/tests/ref/mamba_ref.py" check "$BIN" "$ROOT/build/tiny-models" || exit 1
# the scalar scan step too (the default above is mamba2_avx2.c's where the CPU has AVX2)
SGLC_KERNELS=scalar "$PY" "$ROOT/tests/ref/mamba_ref.py" check "$BIN" "$ROOT/build/tiny-models" --quick || exit 1
M=$ROOT/build/tiny-models/nemotron_h
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo '{"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 2}}' > "$T/req.jsonl"
fail=0
refuse() {  # refuse PATTERN ARGS...: the command must fail naming PATTERN
    local pat=$1; shift
    if timeout 60 "$BIN" generate --model-path "$M" "$@" >"$T/out" 2>&1; then
        echo "FAIL accepted: $*"; fail=1
    elif ! grep -q -- "$pat" "$T/out"; then
        echo "FAIL no '$pat' in the message for: $*"; tail -3 "$T/out"; fail=1
    else
        echo "ok   refused: $*"
    fi
}
refuse "float32 and bfloat16" --requests "$T/req.jsonl" --skip-tokenizer-init --mamba-ssm-dtype float16
# TP / PP run (tests/scripts/test_tp_mamba.sh); Mamba heads or groups that do not split are refused
refuse "mamba_num_heads (6) is not divisible" --input-ids 5,6,7 --max-new-tokens 1 --tp-size 4 \
    --json-model-override-args '{"mamba_num_heads": 6}'
refuse "n_groups (3) neither divides it nor is divisible by it" --input-ids 5,6,7 --max-new-tokens 1 --tp-size 2 \
    --json-model-override-args '{"mamba_num_heads": 12, "n_groups": 3}'
refuse "rolled back" --requests "$T/req.jsonl" --skip-tokenizer-init --speculative-algorithm NGRAM
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --skip-tokenizer-init 2>"$T/log" >/dev/null || fail=1
grep -q "radix cache for NemotronHForCausalLM with Mamba state checkpoints every 256 tokens" "$T/log" &&
    echo "ok   auto: radix cache with checkpoints every 256 tokens, logged" ||
    { echo "FAIL no radix-cache line"; fail=1; }
exit $fail
