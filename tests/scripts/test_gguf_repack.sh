#!/usr/bin/env bash
# GGUF tensors repacked at load (docs/notes/qkern.md, 8-row layouts): a file
# whose Q4_0 / Q4_K / Q5_K / Q6_K / Q8_0 matrices the loader copies into the x8
# layouts must give the logits and greedy ids of the same file read in its
# own layout (SGLC_QUANT_REPACK=0: every tensor borrowed from the mapping).
# Models (tests/ref/make_kquant_model.py, 256 wide): kq-llama (untied,
# output Q6_K), kq-moe (tied: token_embd is the LM head, repacked while the
# lookups read the mapped rows; experts sliced from 3-D tensors), kq-odd
# (vocab 517, intermediate 516: rows not a multiple of 8 stay in place next
# to repacked ones).  Presets Q4_K_M (Q4_K + Q6_K), Q5_K_M (Q5_K + Q6_K), Q4_0,
# Q8_0, Q6_K.
# Bound: both loads compute exact int8 dot products per block; only the
# order of the f32 sums differs (8 rows per vector vs one row's horizontal
# sum: ~1e-7 relative, checked per kernel by test_quant_kernels).  Such a
# difference can flip the int8 rounding of one activation of the next
# layer (a step of 1/127 of its block's largest value), which moves the
# rows that attend to it by ~1e-2 of their range (measured: positions
# differ by 1e-7 until a flip, then 1e-2 where the flipped row is attended
# to), and an MoE router's top-k can flip too.  So, as for test_gguf.sh's
# in-place check: per position max|d| / max|logit| <= 0.15 (dense), median
# <= 0.05, some position within 1e-5 (before any flip the kernels agree;
# a wrong layout is off everywhere),
# prompt argmax >= 85% equal; TinyStories (trained: flips are rare): 16
# greedy ids identical.
# Also: the load log counts the repacked matrices (none with the switch;
# kq-odd keeps its odd-row matrices in place), and --threads 2 gives the
# one-thread logits of the repacked load bit for bit.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require
"$BIN" help 2>/dev/null | grep -qE '^[[:space:]]+quantize([[:space:]]|$)' || golden_skip "$BIN has no quantize command"
"$PY" -c 'import numpy' 2>/dev/null || golden_skip "numpy missing"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
IDS=$(seq -s, 3 66) # 64 prompt tokens
"$PY" "$ROOT/tests/ref/make_kquant_model.py" "$T/kq" || { echo "FAIL make_kquant_model.py"; exit 1; }

# gen GGUF OUT THREADS: prompt logits OUT.f32, greedy ids OUT.ids, log OUT.err
gen() {
    "$BIN" generate --model-path "$1" --input-ids "$IDS" --max-new-tokens 16 --temperature 0 \
        --ignore-eos --json --threads "$3" --dump-logits "$2.f32" >"$2.json" 2>"$2.err" &&
        "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_ids"])' "$2.json" >"$2.ids"
}
# repacked / in place counts from the load log: "N in place, M repacked"
counts() { sed -n 's/.*matrices: \([0-9]*\) in place, \([0-9]*\) repacked.*/\1 \2/p' "$1" | tail -1; }
close() { # close A B DENSE
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import sys, numpy as n
a = n.fromfile(sys.argv[1], "<f4").reshape(64, -1); b = n.fromfile(sys.argv[2], "<f4").reshape(64, -1)
dense = sys.argv[3] == "1"
e = abs(a - b).max(1) / abs(a).max(1)
same = (e <= 1e-5).mean(); agree = (a.argmax(1) == b.argmax(1)).mean()
print("max %.1e median %.1e, %.0f%% of positions within 1e-5, argmax %.0f%% equal" % (e.max(), n.median(e), 100 * same, 100 * agree))
sys.exit(0 if (not dense or e.max() <= 0.15) and n.median(e) <= 0.05 and e.min() <= 1e-5 and agree >= 0.85 else 1)
PYEOF
}
TS="$SHARED/models/TinyStories-656K"

for ty in Q4_K_M Q5_K_M Q4_0 Q8_0 Q6_K; do
    for name in kq-llama kq-moe kq-odd TinyStories; do
        tag="$ty $name" md="$T/kq/$name"
        [ $name = TinyStories ] && md=$TS
        [ $name = TinyStories ] && [ ! -f "$TS/config.json" ] && continue
        [ $name = TinyStories ] && case $ty in Q4_K_M | Q5_K_M | Q6_K) continue ;; esac # 128 wide: no K-quant rows
        if ! "$BIN" quantize --model-path "$md" --output "$T/q.gguf" --type $ty 2>"$T/q.err"; then
            bad "$tag: quantize: $(tail -1 "$T/q.err")"; continue
        fi
        if ! SGLC_QUANT_REPACK=0 gen "$T/q.gguf" "$T/a" 1 || ! gen "$T/q.gguf" "$T/b" 1 || ! gen "$T/q.gguf" "$T/c" 2; then
            bad "$tag: generate failed: $(tail -1 "$T/a.err" "$T/b.err" "$T/c.err" | tr '\n' ' ')"; continue
        fi
        read -r ia ra <<<"$(counts "$T/a.err")"
        read -r ib rb <<<"$(counts "$T/b.err")"
        if [ -z "${ra:-}" ] || [ -z "${rb:-}" ] || [ "$ra" != 0 ] || [ "$rb" -eq 0 ] || [ $((ia + ra)) != $((ib + rb)) ]; then
            bad "$tag: load log counts: switch '$ia in place, $ra repacked', default '$ib in place, $rb repacked'"
            continue
        fi
        # the odd-row matrices (output 517 rows, gate / up 516) cannot be repacked
        if [ "$name" = kq-odd ] && [ "$ib" -lt 5 ]; then bad "$tag: only $ib matrices in place"; continue; fi
        if [ $name = TinyStories ] && [ "$(cat "$T/a.ids")" != "$(cat "$T/b.ids")" ]; then
            bad "$tag: greedy ids differ: $(cat "$T/a.ids") vs $(cat "$T/b.ids")"; continue
        fi
        if ! cmp -s "$T/b.f32" "$T/c.f32"; then bad "$tag: 2 threads differ from 1"; continue; fi
        case $name in kq-moe) dense=0 ;; *) dense=1 ;; esac
        if res=$(close "$T/a.f32" "$T/b.f32" $dense); then
            ok "$tag: $rb of $((ib + rb)) matrices repacked; vs in place: $res; 2 threads identical"
        else
            bad "$tag: repacked vs in place: $res"
        fi
    done
done
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all GGUF repack checks passed"
