#!/usr/bin/env bash
# Golden: LoRA adapters over a quantized base (tests/ref/lora_ref.py
# --family quant).  `sglc quantize --type Q8_0` of a 256-wide random llama
# (make_kquant_model.py) and of TinyStories-656K; the reference base is the
# file's values decoded independently (gguf_np.py dequant-hf), the adapter
# merged into it in float64 and run by torch_ref.py.  Dequantized at load
# (SGLC_GGUF_DEQUANT=1): prompt logits with the adapter within 1e-4 of the
# merged reference, 8 greedy ids identical.  In place (int8 kernels): the
# adapter's effect logits(q + ad) - logits(q) within 2x the base's own
# in-place error of the reference's effect (and an ignored adapter shown to
# be far outside that), >= 80% of prompt argmaxes equal.  ~30 s.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json
"$BIN" help 2>/dev/null | grep -qE '^[[:space:]]+quantize([[:space:]]|$)' || golden_skip "$BIN has no quantize command"
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/ref/lora_ref.py" --family quant --cache "$ROOT/build/tiny-models" --shared "$SHARED"
