#!/usr/bin/env bash
# GGUF round trip: tiny random-weight HF models (tests/ref/make_tiny_model.py,
# cached in build/tiny-models) written to GGUF by `sglc quantize` and loaded
# back must give the very same prompt logits (bit for bit, f32) and greedy
# ids as the safetensors folder:
#   - every model with the default file (sglc.hf_config carried along):
#     llama (rope llama3 / linear / dynamic / yarn, q/k/v/o biases: the
#     q/k row permutation and its undoing), mistral (sliding window),
#     qwen2 (biases, use_sliding_window), qwen3 (qk-norm), qwen3-moe (3-D
#     expert tensors sliced per expert; a dense layer 0), mixtral;
#   - --plain files (only llama.cpp's keys: the config comes from the GGUF
#     metadata) for the models whose features GGUF metadata can state;
#   - the file's bytes checked by an independent numpy reader
#     (tests/ref/gguf_np.py): llama.cpp's q/k permutation, stacked experts;
#   - --type BF16 against the bf16 folder (--dtype bfloat16);
#   - TinyStories-656K (the one trained model: lm_head-only tied storage)
#     F32: identical logits and greedy output.
# Also `bench-one-batch` runs on a .gguf, a folder holding one .gguf is
# found, `serve --model-path x.gguf` answers /generate as the folder does,
# and a quantized --type the build cannot write yet is a clear error.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json \
    models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json \
    models/configs/Qwen__Qwen2.5-0.5B-Instruct/config.json \
    models/configs/Qwen__Qwen3-0.6B/config.json \
    models/configs/Qwen__Qwen3-30B-A3B/config.json \
    models/configs/mistralai__Mixtral-8x7B-Instruct-v0.1/config.json \
    models/tokenizers/mistral-chatml/config.json
"$BIN" help 2>/dev/null | grep -qE '^[[:space:]]+quantize([[:space:]]|$)' || golden_skip "$BIN has no quantize command"
TINY="$ROOT/build/tiny-models"
ALL="llama3 llama-linear llama-dynamic llama-yarn llama-bias mistral-sw qwen2 qwen2-sw qwen3 qwen3-moe qwen3-moe-dense0 mixtral"
PLAIN="llama3 llama-linear llama-yarn llama-bias qwen2 qwen3 qwen3-moe qwen3-moe-dense0 mixtral"
"$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$TINY" --shared "$SHARED" \
    --only "$(echo $ALL | tr ' ' ',')" >/dev/null || { echo "FAIL: make_tiny_model.py"; exit 1; }
. "$ROOT/tests/scripts/lib_server.sh"
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
IDS=$(seq -s, 3 66)   # 64 prompt tokens

# gen MODEL DTYPE OUT: greedy ids into OUT.ids, prompt logits into OUT.f32
gen() {
    "$BIN" generate --model-path "$1" --input-ids "$IDS" --max-new-tokens 16 --temperature 0 \
        --ignore-eos --json --dtype "$2" --threads 1 --dump-logits "$3.f32" >"$3.json" 2>"$3.err" &&
        "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_ids"])' "$3.json" >"$3.ids"
}

# same TAG HF GGUF DTYPE: quantized file and folder agree exactly
same() {
    local tag=$1 hf=$2 gg=$3 dt=$4
    if ! gen "$hf" "$dt" "$T/a" || ! gen "$gg" "$dt" "$T/b"; then
        bad "$tag: generate failed: $(tail -2 "$T/a.err" "$T/b.err" | tr '\n' ' ')"
        return
    fi
    if cmp -s "$T/a.f32" "$T/b.f32" && cmp -s "$T/a.ids" "$T/b.ids" && [ -s "$T/a.f32" ]; then
        ok "$tag: logits ($(stat -c %s "$T/a.f32") bytes) and greedy ids identical"
    else
        bad "$tag: GGUF differs from safetensors ($("$PY" -c 'import numpy as n,sys; a=n.fromfile(sys.argv[1],"<f4"); b=n.fromfile(sys.argv[2],"<f4"); print("max|d|", abs(a-b).max() if a.size==b.size else "size %d vs %d"%(a.size,b.size))' "$T/a.f32" "$T/b.f32"))"
    fi
}

for m in $ALL; do
    if "$BIN" quantize --model-path "$TINY/$m/f32" --output "$T/$m.gguf" --type F32 2>"$T/q.err"; then
        same "$m F32" "$TINY/$m/f32" "$T/$m.gguf" float32
    else
        bad "$m: quantize: $(tail -1 "$T/q.err")"
    fi
done
for m in $PLAIN; do
    if "$BIN" quantize --plain --model-path "$TINY/$m/f32" --output "$T/$m.plain.gguf" --type F32 2>"$T/q.err"; then
        if grep -q sglc.hf_config "$T/$m.plain.gguf"; then bad "$m --plain still carries sglc.hf_config"; fi
        same "$m F32 --plain (config from GGUF metadata)" "$TINY/$m/f32" "$T/$m.plain.gguf" float32
    else
        bad "$m --plain: quantize: $(tail -1 "$T/q.err")"
    fi
done
# the bytes themselves, read by an independent numpy reader: llama.cpp's
# q/k row permutation for llama, none for qwen, experts stacked, keys
for m in llama-bias mixtral qwen2 qwen3-moe; do
    if out=$("$PY" "$ROOT/tests/ref/gguf_np.py" check "$TINY/$m/f32" "$T/$m.plain.gguf" 2>&1); then
        ok "$m file layout: $(echo "$out" | tail -1 | cut -c6-)"
    else
        bad "$m file layout: $(echo "$out" | tail -2 | tr '\n' ' ')"
    fi
done
for m in llama3 qwen3 qwen3-moe; do
    if "$BIN" quantize --model-path "$TINY/$m/bf16" --output "$T/$m.bf16.gguf" --type BF16 2>"$T/q.err"; then
        same "$m BF16" "$TINY/$m/bf16" "$T/$m.bf16.gguf" bfloat16
    else
        bad "$m BF16: quantize: $(tail -1 "$T/q.err")"
    fi
done

# TinyStories-656K: the trained model, tied through lm_head.weight only
TS="$SHARED/models/TinyStories-656K"
if "$BIN" quantize --model-path "$TS" --output "$T/ts.gguf" --type F32 2>"$T/q.err"; then
    same "TinyStories-656K F32" "$TS" "$T/ts.gguf" float32
    mkdir -p "$T/tsdir" && ln -s "$T/ts.gguf" "$T/tsdir/model.gguf"
    same "TinyStories-656K: a folder holding one .gguf" "$TS" "$T/tsdir" float32
    if "$BIN" bench-one-batch --model-path "$T/ts.gguf" --batch-size 2 --input-len 16 --output-len 4 \
        --threads 1 >"$T/bench.out" 2>&1; then
        ok "bench-one-batch --model-path ts.gguf"
    else
        bad "bench-one-batch on GGUF: $(tail -2 "$T/bench.out")"
    fi
else
    bad "TinyStories quantize: $(tail -1 "$T/q.err")"
fi

# serve: a .gguf model with a Hugging Face tokenizer folder answers /generate
# with the text `generate` gives for the safetensors folder
if [ -s "$T/ts.gguf" ] && command -v curl >/dev/null; then
    want=$("$BIN" generate --model-path "$TS" --prompt "Once upon a time" --max-new-tokens 12 \
        --temperature 0 --json --threads 1 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["text"])')
    if server_start "$T/srv.log" --model-path "$T/ts.gguf" --tokenizer-path "$TS" --threads 1; then
        got=$(curl -s "$SERVER_URL/generate" -H 'content-type: application/json' \
            -d '{"text":"Once upon a time","sampling_params":{"temperature":0,"max_new_tokens":12}}' |
            "$PY" -c 'import json,sys; print(json.load(sys.stdin)["text"])')
        server_stop TERM
        if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "serve ts.gguf: /generate text = generate on the folder ('$got')"
        else bad "serve ts.gguf: '$got' vs '$want'"; fi
    else
        bad "serve ts.gguf did not start: $(tail -3 "$T/srv.log")"
    fi
fi

# a type the build cannot write yet (no row_from_f32) is refused by name,
# and nothing is left behind
for ty in Q8_0 Q4_K_M; do
    if "$BIN" quantize --model-path "$TINY/qwen3/f32" --output "$T/q.gguf" --type $ty 2>"$T/q.err"; then
        if "$BIN" generate --model-path "$T/q.gguf" --input-ids 1,2,3 --max-new-tokens 4 --json \
            --temperature 0 --threads 1 >/dev/null 2>"$T/g.err"; then
            ok "$ty: quantized and generated"
        else
            bad "$ty: written but does not load: $(tail -1 "$T/g.err")"
        fi
        rm -f "$T/q.gguf"
    elif grep -q "sglc cannot write this type yet" "$T/q.err" && [ ! -e "$T/q.gguf" ]; then
        ok "$ty: refused clearly ($(tail -1 "$T/q.err" | cut -c1-90))"
    else
        bad "$ty: $(tail -1 "$T/q.err")"
    fi
done

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all GGUF round-trip checks passed"
