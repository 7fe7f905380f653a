#!/usr/bin/env bash
# test_quantize_ct.sh — `sglc quantize --type W8A8 | W4A16`: Hugging Face
# folders to compressed-tensors folders (docs/notes/hfq.md, "Writing").
#
# DESIGN
#   1. tiny random models (tests/ref/make_tiny_model.py: llama3 f32 / bf16,
#      llama-bias (96 inputs: W4A16 group 128 keeps 12 of 14 layers),
#      mistral-sw (two source shards; the output split with
#      --max-shard-size), qwen3-moe (routers, 128 experts' weights)) and
#      TinyStories-656K, each type (W4A16 also --group-size 32 and -1):
#      tests/ref/ct_check.py reads the folder with numpy alone: config.json
#      = the source's keys + quantization_config's fields; codes and scales
#      bit-identical to a numpy round-to-nearest of the source; other
#      tensors byte for byte; tokenizer files copied;
#   2. `sglc generate --dump-logits` on the written folder through the
#      compressed-tensors loader: against torch_ref on the dequantized
#      weights within 3e-2 (hfq.md's block-quantized bound), position 0
#      against the emulation of sglc's int8-activation arithmetic within
#      1e-5, and against sglc on the source folder per position within
#      0.15 (W8A8) / 0.5 (W4A16) of max|logit| (MoE: the median);
#   3. TinyStories-656K perplexity (tests/data/ppl_stories.txt, as
#      test_ppl_quant.sh) within a margin of f32: W8A8 0.005 (measured
#      +0.0023), W4A16 0.15 (+0.0729), W4A16 --group-size 32 0.13
#      (+0.0622); W4A16's delta is larger than W8A8's margin (the check
#      tells the types apart);
#   4. bad input: a missing folder, an unknown type, an output that is a
#      file, a non-empty output folder, an already quantized source, bad
#      --group-size / --max-shard-size, --plain with W8A8: exit != 0 with
#      the message, nothing written.
# About 30 s.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/model.safetensors models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json
TM=$ROOT/build/tiny-models
"$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$TM" --shared "$SHARED" --only llama3,llama-bias,mistral-sw,qwen3-moe >/dev/null ||
    { echo "FAIL make_tiny_model.py"; exit 1; }
TS=$SHARED/models/TinyStories-656K
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

# name source type group-size(0: none) ct_check flags
CASES="
ts-w8a8      $TS                  W8A8  0   --logits
ts-w4a16     $TS                  W4A16 128 --logits --src-bound=0.5
ts-w4a16-g32 $TS                  W4A16 32  --logits --src-bound=0.5
l3-w8a8      $TM/llama3/f32       W8A8  0   --logits
l3b-w8a8     $TM/llama3/bf16      w8a8_int8 0 --logits
l3-w4a16     $TM/llama3/f32       w4a16 128 --logits --src-bound=0.5
l3b-w4-g32   $TM/llama3/bf16      W4A16 32  --logits --src-bound=0.5
l3-w4-ch     $TM/llama3/f32       W4A16 -1  --logits --src-bound=0.5
bias-w4a16   $TM/llama-bias/f32   W4A16 128 --logits --src-bound=0.5
msw-w8a8     $TM/mistral-sw/f32   W8A8  0   --logits --shards
moe-w8a8     $TM/qwen3-moe/f32    W8A8  0   --logits --moe
moe-w4-g32   $TM/qwen3-moe/bf16   W4A16 32  --logits --moe --src-bound=0.5
"
while read -r name src ty g flags; do
    [ -n "$name" ] || continue
    args=(--model-path "$src" --output "$T/$name" --type "$ty")
    [ "$g" != 0 ] && args+=(--group-size "$g")
    [ "$name" = msw-w8a8 ] && args+=(--max-shard-size 200KB)
    if ! "$BIN" quantize "${args[@]}" >"$T/$name.log" 2>&1; then
        echo "FAIL quantize $name: $(tail -2 "$T/$name.log")"
        fails=$((fails + 1))
        continue
    fi
    echo "-- $name: $(tail -1 "$T/$name.log" | sed 's/^sglc quantize: //')"
    case $ty in [wW]8*) uty=W8A8 ;; *) uty=W4A16 ;; esac
    # shellcheck disable=SC2086
    "$PY" "$ROOT/tests/ref/ct_check.py" "$BIN" "$src" "$T/$name" "$uty" "$g" "$T/work-$name" $flags >"$T/$name.check" 2>&1
    rc=$?
    sed "s/^\(ok  \|FAIL\) /\1 $name: /" "$T/$name.check" | cut -c1-400
    [ $rc = 0 ] || fails=$((fails + 1))
done <<<"$CASES"

# 3. perplexity
TXT=$ROOT/tests/data/ppl_stories.txt
ppl() { "$BIN" perplexity --file "$TXT" --threads 1 --quiet --model-path "$1" 2>/dev/null |
    sed -n 's/.*PPL = \([0-9.]*\).*over \([0-9]*\) tokens.*/\1 \2/p'; }
read -r P0 N0 <<<"$(ppl "$TS")"
for row in "ts-w8a8 0.005" "ts-w4a16 0.15" "ts-w4a16-g32 0.13"; do
    read -r pn margin <<<"$row"
    read -r P N <<<"$(ppl "$T/$pn")"
    check "$pn: TinyStories perplexity ${P:-?} vs f32 ${P0:-?} within $margin (delta $("$PY" -c "import sys; print('%+.4f' % (float(sys.argv[1]) / float(sys.argv[2]) - 1))" "${P:-0}" "${P0:-1}")), ${N:-?} tokens scored" \
        '[ -n "$P" ] && [ "$N" = "$N0" ] && "$PY" -c "import sys; sys.exit(not abs(float(sys.argv[1]) / float(sys.argv[2]) - 1) <= float(sys.argv[3]))" "$P" "$P0" "$margin"'
    [ "$pn" = ts-w4a16 ] && PW4=$P
done
check "W4A16's delta is over W8A8's margin 0.005 (the margins tell the types apart)" \
    '"$PY" -c "import sys; sys.exit(not float(sys.argv[1]) / float(sys.argv[2]) - 1 > 0.005)" "${PW4:-0}" "$P0"'

# 4. bad input
touch "$T/afile"
mkdir -p "$T/full" && touch "$T/full/x"
bad() {  # bad DESC MESSAGE ARGS...
    local desc=$1 msg=$2; shift 2
    out=$("$BIN" quantize "$@" 2>&1)
    rc=$?
    check "$desc: exit $rc, says '$msg'" '[ $rc != 0 ] && grep -qF -- "$msg" <<<"$out"'
}
bad "missing folder" "cannot read model folder $T/nope" --model-path "$T/nope" --output "$T/o1" --type W8A8
bad "a file as --model-path" "is not a folder" --model-path "$TS/config.json" --output "$T/o1" --type W8A8
bad "unknown type" "unknown --type 'W3A5'" --model-path "$TS" --output "$T/o1" --type W3A5
bad "output is a file" "--output $T/afile exists and is not a folder" --model-path "$TS" --output "$T/afile" --type W4A16
bad "output folder not empty" "--output folder $T/full is not empty" --model-path "$TS" --output "$T/full" --type W8A8
bad "already quantized" "already has a quantization_config" --model-path "$T/ts-w8a8" --output "$T/o1" --type W4A16
bad "group size not a multiple of 8" "expected a positive multiple of 8" --model-path "$TS" --output "$T/o1" --type W4A16 --group-size 12
bad "group size with W8A8" "only W4A16 has groups" --model-path "$TS" --output "$T/o1" --type W8A8 --group-size 128
bad "bad shard size" "--max-shard-size 5XB" --model-path "$TS" --output "$T/o1" --type W8A8 --max-shard-size 5XB
bad "--plain with W8A8" "--plain applies to GGUF output" --model-path "$TS" --output "$T/o1" --type W8A8 --plain
bad "--group-size with a GGUF type" "applies to --type W4A16 / W8A8" --model-path "$TS" --output "$T/o1.gguf" --type Q8_0 --group-size 32
check "no output left by the failures; the file and the full folder untouched" \
    '[ ! -e "$T/o1" ] && [ ! -e "$T/o1.gguf" ] && [ -f "$T/afile" ] && [ ! -s "$T/afile" ] && [ "$(ls "$T/full")" = x ]'
# a source tensor the writer cannot quantize (NaN) leaves nothing behind
"$PY" - "$TM/llama3/f32" "$T/nan" <<'PYEOF'
import json, os, shutil, sys
sys.path.insert(0, os.path.join(os.environ["SGLC_ROOT"], "tools"))
import numpy as np, safetensors_np
src, dst = sys.argv[1:3]
os.makedirs(dst)
shutil.copy(os.path.join(src, "config.json"), dst)
t, _ = safetensors_np.read(os.path.join(src, "model.safetensors"))
w = np.array(t["model.layers.1.mlp.up_proj.weight"])
w[3, 5] = np.nan
t["model.layers.1.mlp.up_proj.weight"] = w
safetensors_np.write(os.path.join(dst, "model.safetensors"), t)
PYEOF
bad "NaN weight" "'model.layers.1.mlp.up_proj.weight' row 3 has a non-finite weight" --model-path "$T/nan" --output "$T/o2" --type W8A8
check "the failed run removed its folder" '[ ! -e "$T/o2" ]'
check "quantize --help names W8A8 / W4A16 / --group-size" \
    '"$BIN" quantize --help | grep -q W8A8 && "$BIN" quantize --help | grep -q W4A16 && "$BIN" quantize --help | grep -q -- --group-size'
[ $fails = 0 ] && echo "PASS test_quantize_ct" || echo "FAIL test_quantize_ct: $fails"
[ $fails = 0 ]
