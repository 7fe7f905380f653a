#!/usr/bin/env bash
# test_gguf_arch.sh — GGUF for the architectures of issue 15: gemma2,
# gemma3, phi3 (plain and longrope), qwen2moe, in both directions.
#
# DESIGN: each tiny random model of the golden scripts (gemma_ref.py,
# phi3_ref.py, make_tiny_ds.py build them into build/tiny-models) is
# written by `sglc quantize`, then:
#   - F32 with sglc.hf_config, and --plain (config rebuilt from llama.cpp's
#     metadata keys alone): the 64 prompt positions' logits of the GGUF load
#     equal the safetensors load within 1e-5 * max(1, max|logit|), and 32
#     greedy ids are identical;
#   - Q8_0: the file loads and runs; per position max|d| <= 0.15 max|logit|
#     against the F32 logits (test_gguf.sh's in-place bound);
#   - the file's names and keys as llama.cpp writes them (an independent
#     numpy reader, tests/ref/gguf_np.py): Gemma norms stored as w + 1,
#     post_attention_norm / post_ffw_norm, Phi-3 attn_qkv and fused ffn_up,
#     rope_factors_long/short, Qwen2-MoE *_shexp and ffn_gate_inp_shexp;
#   - with llama.cpp's gguf-py ($LLAMA_CPP_DIR, default /work/llama.cpp):
#     a file its GGUFWriter writes as convert_hf_to_gguf.py would
#     (tests/ref/gguf_arch_write.py: no sglc keys) loads to the HF logits
#     within 1e-5 (Gemma with query_pre_attn_scalar = head_dim, which is
#     what llama.cpp assumes);
#   - an architecture without a GGUF mapping (GraniteMoE) is refused by
#     quantize naming it (DeepSeek V2 / V3: test_gguf_deepseek.sh).
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/configs/microsoft__Phi-3-mini-4k-instruct/config.json
[ -x "$BIN" ] || golden_skip "$BIN not built"
TINY="$ROOT/build/tiny-models"
"$PY" - "$ROOT/tests/ref" "$TINY" "$SHARED" <<'PYEOF' >/dev/null || { echo "FAIL: building the tiny models"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1])
import gemma_ref, phi3_ref, make_tiny_ds, make_tiny_model
for n in ("gemma2", "gemma3"):
    gemma_ref.build(n, sys.argv[2])
for n in ("phi3-mini-4k", "phi3.5-long"):
    phi3_ref.build(n, sys.argv[2], sys.argv[3])
make_tiny_ds.build("qwen2-moe", sys.argv[2], sys.argv[3])
make_tiny_model.build("granitemoe", sys.argv[2], sys.argv[3])
PYEOF
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
IDS=$(seq -s, 3 66)

gen() {   # MODEL OUT [EXTRA ARGS...]
    local m=$1 o=$2
    shift 2
    "$BIN" generate --model-path "$m" --input-ids "$IDS" --max-new-tokens 32 --temperature 0 \
        --ignore-eos --json --dtype float32 --threads 1 --dump-logits "$o.f32" "$@" >"$o.json" 2>"$o.err"
}

# cmp_logits A B TOL_KIND: exact (1e-5 relative to max(1, max|logit|)) or q (0.15 per position)
cmp_logits() {
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import json, sys
import numpy as np
a, b, kind = sys.argv[1:4]
x, y = np.fromfile(a + ".f32", np.float32), np.fromfile(b + ".f32", np.float32)
ia, ib = json.load(open(a + ".json"))["output_ids"], json.load(open(b + ".json"))["output_ids"]
if x.size == 0 or x.size != y.size or x.size % 64:
    print(f"logit sizes {x.size} {y.size}"); sys.exit(1)
x, y = x.reshape(64, -1), y.reshape(64, -1)
if not np.all(np.isfinite(y)):
    print("non-finite logits"); sys.exit(1)
d = np.abs(x - y).max(axis=1)
if kind == "exact":
    tol = 1e-5 * max(1.0, float(np.abs(x).max()))
    if d.max() > tol or ia != ib or len(ia) != 32:
        print(f"max|d| {d.max():.3g} (tol {tol:.3g}), ids equal {ia == ib} ({len(ia)})"); sys.exit(1)
    print(f"max|d| {d.max():.3g}, 32 greedy ids identical")
else:
    r = (d / np.abs(x).max(axis=1)).max()
    if r > 0.15:
        print(f"per-position max|d|/max|logit| {r:.3g} > 0.15"); sys.exit(1)
    print(f"per-position max|d|/max|logit| <= {r:.3g}")
PYEOF
}

for m in gemma2 gemma3 phi3-mini-4k phi3.5-long qwen2-moe; do
    hf="$TINY/$m/f32"
    gen "$hf" "$T/$m.hf" || { bad "$m: HF generate: $(tail -2 "$T/$m.hf.err")"; continue; }
    for v in f32 plain q8_0; do
        case $v in f32) args="--type F32" ;; plain) args="--type F32 --plain" ;; q8_0) args="--type Q8_0" ;; esac
        g="$T/$m-$v.gguf"
        if ! "$BIN" quantize --model-path "$hf" --output "$g" $args >"$T/q.log" 2>&1; then
            bad "$m $v: quantize: $(tail -2 "$T/q.log")"; continue
        fi
        if ! gen "$g" "$T/$m.$v"; then bad "$m $v: generate: $(tail -2 "$T/$m.$v.err")"; continue; fi
        kind=exact; [ $v = q8_0 ] && kind=q
        if msg=$(cmp_logits "$T/$m.hf" "$T/$m.$v" $kind); then ok "$m $v: $msg"; else bad "$m $v: $msg"; fi
    done
    # a file written by llama.cpp's gguf-py as its converter would (no
    # sglc keys): Gemma's query scale is then llama.cpp's (head_dim), so
    # the HF side runs with that override
    if "$PY" "$ROOT/tests/ref/gguf_arch_write.py" "$hf" "$T/$m-ggufpy.gguf" >"$T/w.log" 2>&1; then
        ov=()
        case $m in gemma*) ov=(--json-model-override-args "{\"query_pre_attn_scalar\": $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["head_dim"])' "$hf/config.json")}") ;; esac
        if gen "$hf" "$T/$m.hfo" "${ov[@]}" && gen "$T/$m-ggufpy.gguf" "$T/$m.gp"; then
            if msg=$(cmp_logits "$T/$m.hfo" "$T/$m.gp" exact); then ok "$m gguf-py-written: $msg"; else bad "$m gguf-py-written: $msg"; fi
        else
            bad "$m gguf-py-written: generate: $(tail -2 "$T/$m.gp.err")"
        fi
    elif grep -q "no gguf-py" "$T/w.log"; then
        echo "note $m: no llama.cpp gguf-py, gguf-py-written file not checked"
    else
        bad "$m: gguf_arch_write.py: $(tail -2 "$T/w.log")"
    fi
    # names, shapes and keys as llama.cpp writes them, read independently
    if msg=$("$PY" "$ROOT/tests/ref/gguf_arch_check.py" "$hf" "$T/$m-plain.gguf" 2>&1); then
        ok "$m: $msg"
    else
        bad "$m: GGUF layout: $msg"
    fi
done

# no mapping: a clear error naming the architecture
if "$BIN" quantize --model-path "$TINY/granitemoe/f32" --output "$T/gm.gguf" --type F32 >"$T/gm.log" 2>&1; then
    bad "granitemoe: quantize succeeded without a mapping"
elif grep -q "GraniteMoeForCausalLM" "$T/gm.log" && [ ! -e "$T/gm.gguf" ]; then
    ok "granitemoe: refused naming the architecture"
else
    bad "granitemoe: unclear error: $(tail -1 "$T/gm.log")"
fi
[ $fails -eq 0 ] && echo "PASS: gguf_arch" || { echo "FAIL: gguf_arch ($fails)"; exit 1; }
