#!/usr/bin/env bash
# Golden: LoRA adapters (random PEFT folders written by tests/ref/lora_ref.py:
# several ranks, target sets, F32/BF16/F16, rsLoRA, lm_head) on every tiny
# model; `sglc generate --lora-path` prompt logits equal PyTorch on the
# merged weights (W + scale B A) within 1e-4 (f32), greedy ids identical.
# Then the same on Gemma 2 / Gemma 3 (text; tests/ref/gemma_ref.py as the
# reference, the embedding adapter through Gemma's sqrt(hidden) scaling)
# and Phi-3 / Phi-3.5 / Phi-4-mini (tests/ref/phi3_ref.py) with PEFT's
# fused qkv_proj / gate_up_proj adapters (one A, B rows split q/k/v and
# gate/up).  MoE models' MLP targets adapt every expert (qwen3-moe,
# mixtral's w1/w3/w2); --family ds: Qwen2-MoE (experts + shared expert)
# and DeepSeek V2-Lite / V2 / V3 (MLA: q_proj or q_a/q_b_proj,
# kv_a_proj_with_mqa, kv_b_proj on the absorbed path, o_proj; routed and
# shared experts) against tests/ref/ds_ref.py.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json \
    models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json \
    models/configs/Qwen__Qwen2.5-0.5B-Instruct/config.json \
    models/configs/Qwen__Qwen3-0.6B/config.json \
    models/configs/Qwen__Qwen3-30B-A3B/config.json \
    models/configs/mistralai__Mixtral-8x7B-Instruct-v0.1/config.json \
    models/configs/ibm-granite__granite-3.0-1b-a400m-instruct/config.json \
    models/tokenizers/mistral-chatml/config.json \
    models/configs/microsoft__Phi-3-mini-4k-instruct/config.json
mkdir -p "$ROOT/build/tiny-models"
rc=0
"$PY" "$ROOT/tests/ref/lora_ref.py" --cache "$ROOT/build/tiny-models" || rc=1
"$PY" "$ROOT/tests/ref/lora_ref.py" --family gemma --cache "$ROOT/build/tiny-models" || rc=1
"$PY" "$ROOT/tests/ref/lora_ref.py" --family phi3 --cache "$ROOT/build/tiny-models" || rc=1
"$PY" "$ROOT/tests/ref/lora_ref.py" --family ds --cache "$ROOT/build/tiny-models" || rc=1
exit $rc
