#!/usr/bin/env bash
# test_gguf_deepseek.sh — GGUF for DeepSeek V2 / V3 (llama.cpp's deepseek2;
# issues 11 and 15), in both directions, on the tiny models of
# tests/ref/make_tiny_ds.py (deepseek-v2-lite, deepseek-v2, deepseek-v3;
# deepseek-v3-tok for the real vocabulary and tokenizer).
#
# DESIGN (tests/ref/gguf_ds.py runs it): per model, `sglc quantize`
#   - F32 (with sglc.hf_config) and F32 --plain (config from llama.cpp's
#     keys alone): 64 prompt positions' logits within 1e-4 of the
#     safetensors run and of the PyTorch reference (ds_ref.py), 32 greedy
#     ids identical;
#   - the plain file read independently (names, shapes, values, keys and
#     their GGUF types as llama.cpp's converter writes them: attn_k_b /
#     attn_v_b halves of kv_b_proj, exp_probs_b.bias, *_shexp, *_mla keys,
#     yarn_log_multiplier ...);
#   - the same weights in the older attn_kv_b form (no *_mla keys) load to
#     the same logits;
#   - BF16, Q8_0, Q4_K_M: sglc's logits from the file (dequantizing path)
#     == sglc's from an F32 folder of the file's values decoded
#     independently (gguf_quants.py) == the PyTorch reference on that
#     folder (1e-4); in place within test_gguf.sh's MoE bound;
#   - a file without blk.1.attn_kv_a_mqa.weight, or with attn_k_b but no
#     attn_v_b: refused, naming the tensor;
#   - deepseek-v3-tok Q8_0: the file's tokenizer.ggml.* encodes as the
#     folder's tokenizer.json, and the file alone generates from a prompt.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/tokenizers/deepseek_v3/tokenizer.json
[ -f "$ROOT/tests/ref/gguf_quants.py" ] || golden_skip "tests/ref/gguf_quants.py missing"
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/ref/gguf_ds.py" run --cache "$ROOT/build/tiny-models" "$@"
