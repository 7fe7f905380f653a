#!/usr/bin/env bash
# test_kv_int8.sh — sglc's own --kv-cache-dtype int8 (a byte per value, an
# f32 scale per token and KV head) on TinyStories-656K, end to end, on
# every kernel path this CPU runs (SGLC_KERNELS=scalar / avx2 / avx512).
#
# DESIGN: the real correctness test is against an independent PyTorch
# reference (tests/ref/torch_ref.py --kv-int8) that applies the same
# per-token-head rounding to K and V (absmax / 127, round half to even):
# the prompt's logits must match to 1e-4 relative (Frobenius norm of the
# difference over all positions; measured ~5e-7, the f32 rounding noise of
# the two implementations) and the greedy decode (48 tokens, decode
# attention over the int8 cache) must give the same ids.  To show the
# check can fail, the same logits differ from the unrounded f32
# reference by > 1e-3 (measured 5.2e-3).  Against sglc's own f32 cache:
# every K/V element moves by at most scale / 2 = absmax / 254 (0.39% of
# its head's largest value; RMS 0.23% for uniform rounding), so the
# logits move by that order: bound 2e-2 relative (measured 5.2e-3) and
# mean KL < 0.01.  Greedy output against bf16 KV over 6 prompts x 64
# tokens (--ignore-eos): agreement = tokens before the first divergence /
# all tokens, >= 0.6 (measured 0.79: 303 of 384).  Then: --help names
# int8 as sglc's own, a scales file is refused for int8, and `serve` with
# an int8 cache answers and logs the dtype.  MLA: the tiny DeepSeek-V2-Lite
# (tests/ref/make_tiny_ds.py) with its latent row as one int8 head against
# tests/ref/ds_ref.py rounding that row the same way (1e-4, 16 greedy ids).
# --tp-size 2 (KV heads split over ranks) gives one rank's greedy ids.
# The checks against the references run the exact kernels
# (SGLC_KV_INT8_QDOT=0); the AVX-512 kernel's default int8-q scores (q
# rounded to int8 per head, integer dots: kern_ref_attention_i8q) add q's
# rounding, absmax / 254 per element like K's, so "avx512 int8-q" is held
# to the int8-vs-f32 bound (rel < 2e-2, KL < 0.01) against PyTorch's int8
# reference, must differ from it by more than the exact path's 1e-4 (the
# switch is on), and its greedy agreement with bf16 KV and with the exact
# int8 path over the 6 prompts must be >= 0.6 like int8's with bf16.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
[ -f "$M/model.safetensors" ] || { echo "skip: no $M"; exit 77; }
$PY -c 'import numpy, torch' 2>/dev/null || { echo "skip: numpy/torch missing for $PY"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"; [ -n "${SP:-}" ] && kill $SP 2>/dev/null' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
ids_of() { echo "{\"text\": \"$1\"}" | "$BIN" tokenize --tokenizer-path "$M" 2>/dev/null |
    $PY -c "import json,sys; print(','.join(map(str, json.load(sys.stdin)['ids'])))"; }
P="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball under a tree and"
IDS=$(ids_of "$P")
[ -n "$IDS" ] || { echo "FAIL tokenize the prompt"; exit 1; }
# the references: PyTorch with and without the int8 rounding of K/V
$PY "$ROOT/tests/ref/torch_ref.py" --model-path "$M" --input-ids "$IDS" --max-new-tokens 48 --ignore-eos --temperature 0 \
    --kv-int8 --dump-logits "$T/ref_i8.bin" --json >"$T/ref_i8.json" || { echo "FAIL torch_ref --kv-int8"; exit 1; }
$PY "$ROOT/tests/ref/torch_ref.py" --model-path "$M" --input-ids "$IDS" --max-new-tokens 1 \
    --dump-logits "$T/ref_f32.bin" >/dev/null || { echo "FAIL torch_ref"; exit 1; }
cat >"$T/cmp.py" <<'PYEOF'
import json, sys, numpy as np
d, kind = sys.argv[1], sys.argv[2]
V = 2048
def load(n): return np.fromfile(d + '/' + n + '.bin', dtype=np.float32).reshape(-1, V)
def rel(a, b): return float(np.linalg.norm(a - b) / np.linalg.norm(b))
def lsm(a):
    a = a - a.max(1, keepdims=True)
    return a - np.log(np.exp(a).sum(1, keepdims=True))
if kind == 'logits':
    isa = sys.argv[3]
    x, f = load('i8_' + isa), load('f32_' + isa)
    lr = lsm(f)
    kl = float((np.exp(lr) * (lr - lsm(x))).sum(1).mean())
    ids = json.load(open(d + '/ref_i8.json'))['output_ids']
    got = json.load(open(d + '/gen_i8_' + isa + '.json'))['output_ids']
    print('%.3g %.3g %.3g %.6f %d' % (rel(x, load('ref_i8')), rel(x, load('ref_f32')), rel(x, f), kl, int(ids == got)))
else:  # agreement of greedy outputs, int8 against bf16
    n = same = 0
    for line in open(d + '/pairs'):
        a, b = line.split()
        ia = json.load(open(a))['output_ids']; ib = json.load(open(b))['output_ids']
        k = 0
        while k < min(len(ia), len(ib)) and ia[k] == ib[k]: k += 1
        n += len(ib); same += k
    print('%.4f' % (same / n))
PYEOF
n_isa=0
for isa in scalar avx2 avx512; do
    if ! SGLC_KERNELS=$isa "$BIN" generate --model-path "$M" --threads 1 --input-ids 1 --max-new-tokens 1 >/dev/null 2>"$T/e"; then
        grep -q 'kernel selection failed' "$T/e" && { echo "skip $isa: not supported on this CPU"; continue; }
        echo "FAIL $isa: generate failed"; cat "$T/e"; fails=$((fails + 1)); continue
    fi
    n_isa=$((n_isa + 1))
    for kv in float32 int8; do
        n=$([ $kv = int8 ] && echo i8 || echo f32)
        SGLC_KV_INT8_QDOT=0 SGLC_KERNELS=$isa "$BIN" generate --model-path "$M" --threads 2 --input-ids "$IDS" --max-new-tokens 1 \
            --kv-cache-dtype $kv --dump-logits "$T/${n}_$isa.bin" >/dev/null 2>"$T/e" || cat "$T/e"
    done
    SGLC_KV_INT8_QDOT=0 SGLC_KERNELS=$isa "$BIN" generate --model-path "$M" --threads 2 --input-ids "$IDS" --max-new-tokens 48 --ignore-eos --temperature 0 \
        --kv-cache-dtype int8 --json >"$T/gen_i8_$isa.json" 2>"$T/e" || cat "$T/e"
    r=$($PY "$T/cmp.py" "$T" logits $isa 2>&1)
    echo "$isa: rel to torch int8, rel to torch f32, rel to sglc f32 cache, KL to f32 cache, greedy ids equal: $r"
    set -- $r
    check "$isa: int8 logits = PyTorch with the same int8 rounding (rel < 1e-4)" "awk 'BEGIN{exit !(${1:-1} < 1e-4)}'"
    check "$isa: greedy decode over the int8 cache = PyTorch's (48 tokens)" "[ '${5:-0}' = 1 ]"
    check "$isa: and the rounding is really applied (rel to unrounded PyTorch > 1e-3)" "awk 'BEGIN{exit !(${2:-0} > 1e-3)}'"
    check "$isa: int8 vs f32 cache within the quantization bound (rel < 2e-2, KL < 0.01)" \
        "awk 'BEGIN{exit !(${3:-1} < 2e-2 && ${4:-1} < 0.01)}'"
done
check "at least one kernel path ran" "[ $n_isa -ge 1 ]"
# the AVX-512 kernel's int8-q scores (default there)
QD=0
if SGLC_KERNELS=avx512 "$BIN" generate --model-path "$M" --threads 1 --input-ids 1 --max-new-tokens 1 >/dev/null 2>&1; then
    QD=1
    cp "$T/f32_avx512.bin" "$T/f32_avx512q.bin"
    SGLC_KERNELS=avx512 "$BIN" generate --model-path "$M" --threads 2 --input-ids "$IDS" --max-new-tokens 1 \
        --kv-cache-dtype int8 --dump-logits "$T/i8_avx512q.bin" >/dev/null 2>"$T/e" || cat "$T/e"
    SGLC_KERNELS=avx512 "$BIN" generate --model-path "$M" --threads 2 --input-ids "$IDS" --max-new-tokens 48 --ignore-eos \
        --temperature 0 --kv-cache-dtype int8 --json >"$T/gen_i8_avx512q.json" 2>"$T/e" || cat "$T/e"
    r=$($PY "$T/cmp.py" "$T" logits avx512q 2>&1)
    echo "avx512 int8-q: rel to torch int8, rel to torch f32, rel to sglc f32 cache, KL to f32 cache, greedy ids equal: $r"
    set -- $r
    check "avx512 int8-q: logits within the int8 bound of PyTorch's int8 reference (rel < 2e-2)" "awk 'BEGIN{exit !(${1:-1} < 2e-2)}'"
    check "avx512 int8-q: the q rounding is really applied (rel to PyTorch int8 > 1e-4)" "awk 'BEGIN{exit !(${1:-0} > 1e-4)}'"
    check "avx512 int8-q vs f32 cache within the bound (rel < 2e-2, KL < 0.01)" "awk 'BEGIN{exit !(${3:-1} < 2e-2 && ${4:-1} < 0.01)}'"
else
    echo "skip avx512 int8-q: no AVX-512 kernels here"
fi
# MLA (DeepSeek-V2-Lite, tiny random weights): the latent row is one head with one scale per
# token; tests/ref/ds_ref.py (latent cache, kv_int8) rounds it the same way
cat >"$T/ds.py" <<'PYEOF'
import json, os, sys, numpy as np
root, t = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, 'tests', 'ref'))
import make_tiny_ds, ds_ref, torch
torch.set_num_threads(1)
d, _ = make_tiny_ds.build('deepseek-v2-lite', os.path.join(root, 'build', 'tiny-models'))
f32 = os.path.join(d, 'f32')
if sys.argv[3] == 'build':
    rng = np.random.RandomState(7)
    print(f32, ','.join(str(int(x)) for x in rng.randint(3, make_tiny_ds.VOCAB, size=40)))
    sys.exit(0)
ids = [int(x) for x in sys.argv[4].split(',')]
ref, out = ds_ref.DSModel(f32, 'float32', mla_mode='latent', kv_int8=True).generate(ids, 16)
raw, _ = ds_ref.DSModel(f32, 'float32', mla_mode='latent').generate(ids, 1)
x = np.fromfile(t + '/ds_i8.bin', dtype=np.float32).reshape(ref.shape)
got = json.load(open(t + '/ds_i8.json'))['output_ids']
rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))
print('%.3g %.3g %d' % (rel(x, ref), rel(x, raw), int(got == out)))
PYEOF
read -r DSM DSIDS < <($PY "$T/ds.py" "$ROOT" "$T" build 2>"$T/dse")
if [ -n "${DSM:-}" ]; then
    SGLC_KV_INT8_QDOT=0 "$BIN" generate --model-path "$DSM" --threads 2 --input-ids "$DSIDS" --max-new-tokens 1 --kv-cache-dtype int8 \
        --dump-logits "$T/ds_i8.bin" >/dev/null 2>"$T/e" || cat "$T/e"
    SGLC_KV_INT8_QDOT=0 "$BIN" generate --model-path "$DSM" --threads 2 --input-ids "$DSIDS" --max-new-tokens 16 --ignore-eos --temperature 0 \
        --kv-cache-dtype int8 --json >"$T/ds_i8.json" 2>"$T/e" || cat "$T/e"
    r=$($PY "$T/ds.py" "$ROOT" "$T" cmp "$DSIDS" 2>&1 | tail -1)
    echo "MLA int8: rel to ds_ref with the same rounding, rel to unrounded, greedy ids equal: $r"
    set -- $r
    check "MLA latent cache as int8 = ds_ref with the same rounding (rel < 1e-4)" "awk 'BEGIN{exit !(${1:-1} < 1e-4)}'"
    check "MLA: 16 greedy tokens over the int8 latent cache = ds_ref's" "[ '${3:-0}' = 1 ]"
    check "MLA: the rounding is really applied (rel to unrounded > 1e-4)" "awk 'BEGIN{exit !(${2:-0} > 1e-4)}'"
    # int8-q (the default where the AVX-512 kernels run): the q rounding on top
    "$BIN" generate --model-path "$DSM" --threads 2 --input-ids "$DSIDS" --max-new-tokens 1 --kv-cache-dtype int8 \
        --dump-logits "$T/ds_i8.bin" >/dev/null 2>"$T/e" || cat "$T/e"
    r=$($PY "$T/ds.py" "$ROOT" "$T" cmp "$DSIDS" 2>&1 | tail -1)
    echo "MLA int8 (default kernels): rel to ds_ref with the same rounding, rel to unrounded, greedy ids equal (not checked): $r"
    set -- $r
    # q's rounding is of K's size (absmax / 254 per element) and K's moved these logits by
    # 2.4e-2 (one scale over the 576-wide latent + rope row): bound 5e-2 (measured 1.8e-2)
    check "MLA int8, default kernels: within the int8 bound of ds_ref's int8 (rel < 5e-2)" "awk 'BEGIN{exit !(${1:-1} < 5e-2)}'"
else
    echo "FAIL build the tiny DeepSeek model"; cat "$T/dse"; fails=$((fails + 1))
fi
# tensor parallelism: each rank holds its KV heads with their own scales, so --tp-size 2 must
# give the same ids as one rank
if "$BIN" generate --model-path "$M" --threads 2 --tp-size 2 --input-ids "$IDS" --max-new-tokens 24 --ignore-eos \
    --temperature 0 --kv-cache-dtype int8 --json >"$T/tp2.json" 2>"$T/e"; then
    "$BIN" generate --model-path "$M" --threads 2 --input-ids "$IDS" --max-new-tokens 24 --ignore-eos --temperature 0 \
        --kv-cache-dtype int8 --json >"$T/tp1.json" 2>/dev/null
    check "--tp-size 2 with int8 KV: same greedy ids as one rank" \
        "$PY -c \"import json,sys; sys.exit(json.load(open('$T/tp1.json'))['output_ids'] != json.load(open('$T/tp2.json'))['output_ids'])\""
else
    echo "skip --tp-size 2 check: $(tail -1 "$T/e")"
fi
# greedy agreement with bf16 KV
: >"$T/pairs"
i=0
for p in "Once upon a time, there was a little dog" "Tom and Sue went to the park. They saw" "Lily wanted to bake a cake for her mom, so she" \
         "The sun was hot and the cat" "One day a big bird flew over the" "Ben had a red car. He liked to"; do
    i=$((i + 1))
    for kv in bfloat16 int8; do
        "$BIN" generate --model-path "$M" --threads 2 --prompt "$p" --max-new-tokens 64 --ignore-eos --temperature 0 \
            --kv-cache-dtype $kv --json >"$T/g${i}_$kv.json" 2>/dev/null
    done
    echo "$T/g${i}_int8.json $T/g${i}_bfloat16.json" >>"$T/pairs"
    [ $QD = 1 ] && SGLC_KV_INT8_QDOT=0 "$BIN" generate --model-path "$M" --threads 2 --prompt "$p" --max-new-tokens 64 --ignore-eos \
        --temperature 0 --kv-cache-dtype int8 --json >"$T/g${i}_exact.json" 2>/dev/null &&
        echo "$T/g${i}_int8.json $T/g${i}_exact.json" >>"$T/pairs_q"
done
AG=$($PY "$T/cmp.py" "$T" agree 2>&1)
echo "greedy agreement int8 vs bf16 KV (tokens before the first divergence / all; default kernels): $AG"
check "greedy output with int8 KV mostly equals bf16 KV's (>= 0.6)" "awk 'BEGIN{exit !(${AG:-0} >= 0.6)}'"
if [ $QD = 1 ]; then
    mv "$T/pairs" "$T/pairs_bf"; mv "$T/pairs_q" "$T/pairs"
    AQ=$($PY "$T/cmp.py" "$T" agree 2>&1)
    echo "greedy agreement avx512 int8-q vs the exact int8 path: $AQ"
    check "int8-q greedy output mostly equals the exact int8 path's (>= 0.6)" "awk 'BEGIN{exit !(${AQ:-0} >= 0.6)}'"
fi
check "--help: int8 is sglc's own, not SGLang's" "$BIN serve --help 2>&1 | grep -q 'int8 are sglc.s own, not SGLang.s'"
N_LAYER=$($PY -c "import json; print(json.load(open('$M/config.json'))['num_hidden_layers'])")
$PY -c "import json; print(json.dumps({'kv_cache':{'dtype':'float8_e4m3fn','scaling_factor':{'0':{str(l):0.05 for l in range($N_LAYER)}}}}))" >"$T/scales.json"
check "int8 with a per-layer scales file: clear error" "! $BIN generate --model-path $M --prompt x --max-new-tokens 1 --kv-cache-dtype int8 --quantization-param-path $T/scales.json 2>$T/e >/dev/null && grep -q 'int8 computes its scales per token' $T/e"
PORT=$((20000 + RANDOM % 20000))
"$BIN" serve --model-path "$M" --threads 1 --port $PORT --kv-cache-dtype int8 --max-total-tokens 4000 >"$T/serve.log" 2>&1 &
SP=$!
for i in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/health" && break; sleep 0.1; done
OUT=$(curl -s -m 30 "http://127.0.0.1:$PORT/generate" -d '{"text":"Once upon a time","sampling_params":{"max_new_tokens":8,"temperature":0}}')
check "serve with int8 KV: /generate answers" "echo '$OUT' | grep -q '\"completion_tokens\":8'"
check "serve logs the KV dtype" "grep -q 'kv_cache_dtype=int8' $T/serve.log"
kill $SP 2>/dev/null; wait $SP 2>/dev/null; SP=
[ $fails -eq 0 ] && echo "all int8 KV checks passed" || { echo "$fails check(s) failed"; exit 1; }
