#!/usr/bin/env bash
# test_ppl_quant.sh — quantization quality on the one trained model at hand
# (issue 11 §3): TinyStories-656K's perplexity on tests/data/ppl_stories.txt
# (7,225 tokens of stories written for these tests), with `sglc perplexity`
# (llama.cpp's method: windows of 256 tokens, each starting with BOS, the
# second half scored: 28 windows, 3,556 tokens).
#
# DESIGN
#   1. the f32 folder's perplexity equals an independent PyTorch
#      computation of the same windows (tests/ref/ppl_ref.py on
#      tests/ref/torch_ref.py's forward, float64, from the ids
#      `sglc tokenize` gives) within 1e-4 relative, same token counts;
#   2. the model written by `sglc quantize --type T` for every type the
#      command accepts, loaded from the .gguf (tokenizer from the file:
#      same token count) or the compressed-tensors folder (W8A8, W4A16), and the f32 folder loaded with
#      --kv-cache-dtype fp8_e4m3 / fp8_e5m2, --quantization w8a8_int8 /
#      fp8 and --dtype bfloat16 (and a folder holding the Q8_0 file with
#      --load-format gguf, equal to the file): |ppl / ppl_f32 - 1| within the margin of
#      its row below.  Margins are the measured deltas (docs/notes/ppl.md)
#      with headroom: about 2x (at least +0.5%) for the weight types, 3x
#      for the KV formats; F32 / F16 / BF16 files must be exact (the
#      checkpoint's values are all bf16- and f16-representable);
#   3. the margins can tell the types apart: Q4_0's delta is larger than
#      the Q8_0 margin, e5m2's larger than e4m3's measured delta;
#   4. errors: a text shorter than two windows, and no --file.
# TinyStories-656K's rows are 128 and 384 long, not whole 256-blocks, so
# the K-quant presets fall back as llama.cpp does (Q6_K -> Q8_0, Q5_K ->
# Q5_1, Q4_K -> Q5_0, IQ4_XS -> IQ4_NL): those rows check the presets'
# fallbacks, not the K-quant blocks (tests/unit/test_quant_* cover those).
# About 40 s of one core.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/model.safetensors
"$BIN" help 2>/dev/null | grep -qE '^[[:space:]]+perplexity([[:space:]]|$)' || golden_skip "$BIN has no perplexity command"
M=$SHARED/models/TinyStories-656K
TXT=$ROOT/tests/data/ppl_stories.txt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
R=$T/res.jsonl
ppl() {  # ppl NAME ARGS...: one run, JSON line appended to $R
    local name=$1; shift
    if ! "$BIN" perplexity --file "$TXT" --threads 1 --quiet --result-filename "$R" --run-name "$name" "$@" \
        >"$T/$name.out" 2>"$T/$name.err"; then
        echo "FAIL perplexity $name: $(tail -2 "$T/$name.err")"
        fails=$((fails + 1))
    fi
}
field() {  # field NAME KEY
    "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["run_name"] == sys.argv[2]: print(d[sys.argv[3]])' "$R" "$1" "$2"
}

# 1. f32 against the PyTorch reference
ppl f32 --model-path "$M"
"$PY" -c 'import json,sys; print(json.dumps({"text": open(sys.argv[1]).read()}))' "$TXT" |
    "$BIN" tokenize --tokenizer-path "$M" >"$T/ids.json"
"$PY" "$ROOT/tests/ref/ppl_ref.py" --model-path "$M" --ids "$T/ids.json" --ctx-size 256 >"$T/ref.json" ||
    { echo "FAIL ppl_ref.py"; fails=$((fails + 1)); }
F32=$(field f32 ppl)
check "f32 ppl $F32: >= 5000 tokens, same windows as the reference, within 1e-4 of it ($(cat "$T/ref.json"))" \
    '"$PY" -c "import json,sys
r = json.load(open(sys.argv[1])); t = int(sys.argv[3]); s = int(sys.argv[4]); p = float(sys.argv[2])
sys.exit(not (t >= 5000 and r[\"tokens\"] == t and r[\"tokens_scored\"] == s and abs(p / r[\"ppl\"] - 1) <= 1e-4))" \
        "$T/ref.json" "$F32" "$(field f32 tokens)" "$(field f32 tokens_scored)"'

# 2. every type within its margin (relative, both directions)
#   name       how                                        margin   measured
ROWS="
F32        gguf:F32                                   0.000001 0
F16        gguf:F16                                   0.000001 0
BF16       gguf:BF16                                  0.000001 0
Q8_0       gguf:Q8_0                                  0.005    -0.0003
Q6_K       gguf:Q6_K                                  0.005    -0.0003
Q5_K_M     gguf:Q5_K_M                                0.015    +0.0071
Q5_1       gguf:Q5_1                                  0.03     +0.0150
Q5_0       gguf:Q5_0                                  0.015    +0.0057
Q4_K_M     gguf:Q4_K_M                                0.012    +0.0049
Q4_1       gguf:Q4_1                                  0.10     +0.0491
Q4_0       gguf:Q4_0                                  0.10     +0.0488
IQ4_XS     gguf:IQ4_XS                                0.115    +0.0573
W8A8       ct:W8A8                                    0.005    +0.0023
W4A16      ct:W4A16                                   0.15     +0.0729
kv_e4m3    --kv-cache-dtype=fp8_e4m3                  0.01     +0.0033
kv_e5m2    --kv-cache-dtype=fp8_e5m2                  0.06     +0.0193
w8a8_int8  --quantization=w8a8_int8                   0.005    -0.0002
fp8        --quantization=fp8                         0.005    -0.0011
bf16       --dtype=bfloat16                           0.005    +0.0002
"
ACCEPTED=$("$BIN" quantize --model-path "$M" --output "$T/x.gguf" --type NOPE 2>&1 | sed -n 's/.*(\(.*\)).*/\1/p')
echo "quantize accepts: $ACCEPTED"
for t in $ACCEPTED; do
    echo "$ROWS" | grep -qE "(gguf|ct):$t " || { echo "FAIL no margin row for quantize type $t"; fails=$((fails + 1)); }
done
echo "$ROWS" | while read -r name how margin measured; do
    [ -n "$name" ] || continue
    echo "$name $how $margin"
done >"$T/rows"
while read -r name how margin; do
    case $how in
    gguf:*)
        ty=${how#gguf:}
        if ! "$BIN" quantize --model-path "$M" --output "$T/$ty.gguf" --type "$ty" >"$T/q_$ty.log" 2>&1; then
            echo "FAIL quantize --type $ty: $(tail -1 "$T/q_$ty.log")"
            fails=$((fails + 1))
            continue
        fi
        ppl "$name" --model-path "$T/$ty.gguf" ;;
    ct:*)
        # a compressed-tensors folder (test_quantize_ct.sh checks its contents)
        ty=${how#ct:}
        if ! "$BIN" quantize --model-path "$M" --output "$T/ct_$ty" --type "$ty" >"$T/q_$ty.log" 2>&1; then
            echo "FAIL quantize --type $ty: $(tail -1 "$T/q_$ty.log")"
            fails=$((fails + 1))
            continue
        fi
        ppl "$name" --model-path "$T/ct_$ty" ;;
    *) ppl "$name" --model-path "$M" ${how//=/ } ;;
    esac
    p=$(field "$name" ppl)
    [ -n "$p" ] || continue
    check "$name ppl $p vs f32 $F32: within ${margin} (delta $("$PY" -c "import sys; print('%+.4f' % (float(sys.argv[1]) / float(sys.argv[2]) - 1))" "$p" "$F32")), $(field "$name" tokens) tokens" \
        '"$PY" -c "import sys; sys.exit(not abs(float(sys.argv[1]) / float(sys.argv[2]) - 1) <= float(sys.argv[3]))" "$p" "$F32" "$margin" &&
         [ "$(field "$name" tokens_scored)" = "$(field f32 tokens_scored)" ]'
done <"$T/rows"

# a folder holding the Q8_0 file, named by --load-format gguf: the same figure
mkdir -p "$T/ggdir" && cp "$T/Q8_0.gguf" "$T/ggdir/"
ppl q8_dir --model-path "$T/ggdir" --load-format gguf
check "--load-format gguf on a folder holding the Q8_0 file: the same ppl" '[ "$(field q8_dir ppl)" = "$(field Q8_0 ppl)" ]'

# 3. the check tells 8-bit from 4-bit weights and e4m3 from e5m2 caches
Q8M=$(awk '$1 == "Q8_0" {print $3}' "$T/rows")
check "Q4_0's delta exceeds the Q8_0 margin ($Q8M)" \
    '"$PY" -c "import sys; sys.exit(not float(sys.argv[1]) / float(sys.argv[2]) - 1 > float(sys.argv[3]))" "$(field Q4_0 ppl)" "$F32" "$Q8M"'
check "kv e5m2 is further from f32 than e4m3" \
    '"$PY" -c "import sys; a, b, f = map(float, sys.argv[1:]); sys.exit(not abs(b / f - 1) > abs(a / f - 1))" "$(field kv_e4m3 ppl)" "$(field kv_e5m2 ppl)" "$F32"'

# 4. errors
head -c 600 "$TXT" >"$T/short.txt"
"$BIN" perplexity --model-path "$M" --file "$T/short.txt" >"$T/short.out" 2>"$T/short.err"
rc=$?
check "a text shorter than two windows: exit 2 with the token count" '[ $rc = 2 ] && grep -q "needs at least 512" "$T/short.err"'
"$BIN" perplexity --model-path "$M" >/dev/null 2>"$T/nofile.err"
rc=$?
check "no --file: exit 2" '[ $rc = 2 ] && grep -q -- "--file is required" "$T/nofile.err"'

[ $fails = 0 ] && echo "PASS test_ppl_quant" || { echo "FAILED $fails"; exit 1; }
