#!/usr/bin/env bash
# Tensor x pipeline parallelism (issue 12): `--tp-size 2 --pp-size 2` runs
# 4 ranks, stage p = ranks 2p and 2p+1 (each a TP shard of the stage's
# layers; all-reduce within the stage, rows passed stage to stage):
#  1. `generate` = one process (16 greedy ids identical, prompt logits
#     within 1e-5 relative) on TinyStories-656K (8 heads, 4 KV heads), the
#     tiny llama3 (GQA 4:1: one KV head per rank), the tiny qwen3-moe (one
#     KV head, replicated; MoE all-reduce) and a dummy Llama-3.2-1B shrunk
#     to 3 layers (uneven split 1 + 2) with a vocabulary of 1,001 (the last
#     stage's vocabulary slices unequal); every rank logs its stage and TP
#     rank; also --tp-size 4 --pp-size 2 on llama3 (KV heads replicated)
#     and --tp-size 2 --pp-size 3 on the 3-layer dummy (a middle stage);
#     LoRA adapters on llama3 (lora_tp_check.py's four) = one process;
#  2. `serve` (TinyStories): 4 concurrent greedy /generate requests = a
#     one-process server; a rank of the second stage that hangs (SIGSTOP)
#     or dies (SIGKILL) mid-request: 503, the server exits non-zero, the
#     log names rank 3;
#  3. Open MPI (when mpirun is there and sglc links libmpi): `mpirun -np 4
#     generate --tp-size 2 --pp-size 2` = one process on TinyStories and
#     llama3; -np 2 is refused with the rank count.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json
. "$ROOT/tests/scripts/lib_server.sh"
command -v curl >/dev/null || golden_skip "curl not installed"
command -v pgrep >/dev/null || golden_skip "pgrep missing"
T=$(mktemp -d); trap server_cleanup EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
"$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$ROOT/build/tiny-models" --only llama3,qwen3-moe >/dev/null ||
    { echo "FAIL make_tiny_model.py"; exit 1; }
TS=$SHARED/models/TinyStories-656K
L3=$ROOT/build/tiny-models/llama3/f32
QM=$ROOT/build/tiny-models/qwen3-moe/f32
LD=$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct
SMALL='{"num_hidden_layers": 3, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1001, "head_dim": 32}'

compare() {  # compare NAME DIR: ref.{json,f32} vs got.{json,f32}
    "$PY" - "$2" "$1" <<'PYEOF' || fails=$((fails + 1))
import json, sys
import numpy as np
t, n = sys.argv[1], sys.argv[2]
a = np.fromfile(t + "/ref.f32", "<f4"); b = np.fromfile(t + "/got.f32", "<f4")
e = float(np.max(np.abs(a.astype(np.float64) - b)) / max(float(np.max(np.abs(a))), 1e-30)) if a.size == b.size and a.size else 1.0
ia = json.loads(open(t + "/ref.json").read().strip().splitlines()[-1])["output_ids"]
ib = json.loads(open(t + "/got.json").read().strip().splitlines()[-1])["output_ids"]
ok = e <= 1e-5 and ia == ib and len(ia) == 16
print(("ok   " if ok else "FAIL ") + f"{n}: prompt logits max|d|/max|ref| = {e:.3g}, 16 greedy ids {'identical' if ia == ib else 'DIFFER'}")
sys.exit(0 if ok else 1)
PYEOF
}
stages_logged() {  # stages_logged LOG BACKEND: every rank logged its place
    local r want
    for r in 1 2 3; do
        want="rank $r of 4 ready ($2 backend): pipeline stage $((r / 2)) of 2"
        grep -qF "$want" "$1" || { bad "no '$want' in the log"; return; }
    done
    ok "ranks 1-3 report stage / TP rank ($2)"
}

# 1. generate, shared-memory backend
for spec in "TinyStories-656K|$TS|" "llama3 (GQA 4:1)|$L3|" "qwen3-moe (1 KV head, MoE)|$QM|" \
            "Llama-3.2-1B dummy, 3 layers, vocab 1001|$LD|dummy"; do
    IFS='|' read -r name M dummy <<<"$spec"
    V=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$M/config.json")
    [ -n "$dummy" ] && V=1001
    IDS=$("$PY" -c "print(','.join(str((i * 37) % ($V - 3) + 3) for i in range(40)))")
    G=(generate --model-path "$M" --input-ids "$IDS" --max-new-tokens 16 --temperature 0 --json --ignore-eos --dtype float32)
    [ -n "$dummy" ] && G+=(--load-format dummy --json-model-override-args "$SMALL")
    "$BIN" "${G[@]}" --threads 1 --dump-logits "$T/ref.f32" >"$T/ref.json" 2>"$T/ref.err" ||
        { bad "$name: one process failed"; tail -5 "$T/ref.err"; continue; }
    if ! timeout 180 "$BIN" "${G[@]}" --threads 4 --tp-size 2 --pp-size 2 --dist-timeout 60 \
            --dump-logits "$T/got.f32" >"$T/got.json" 2>"$T/got.err"; then
        bad "$name: --tp-size 2 --pp-size 2 failed"; tail -10 "$T/got.err"; continue
    fi
    compare "$name tp=2 x pp=2" "$T"
    [ "$name" = "TinyStories-656K" ] && stages_logged "$T/got.err" shm
    if [ -n "$dummy" ]; then  # the uneven split: stage 1 holds layers 1-2
        grep -qF "pipeline stage 1 of 2 (layers 1-2), tensor-parallel rank 1 of 2" "$T/got.err" &&
            ok "3 layers: stage 1 holds layers 1-2" || bad "3 layers: no 'stage 1 of 2 (layers 1-2)' line"
    fi
done

# other shapes: three stages (a middle stage between two others), and 4 TP
# ranks per stage on llama3's 2 KV heads (replicated: 2 ranks per head)
for spec in "llama3|$L3|4|2|" "Llama-3.2-1B dummy, 3 layers|$LD|2|3|dummy"; do
    IFS='|' read -r name M tp pp dummy <<<"$spec"
    IDS=$("$PY" -c "print(','.join(str((i * 37) % 500 + 3) for i in range(40)))")
    G=(generate --model-path "$M" --input-ids "$IDS" --max-new-tokens 16 --temperature 0 --json --ignore-eos --dtype float32)
    [ -n "$dummy" ] && G+=(--load-format dummy --json-model-override-args "$SMALL")
    "$BIN" "${G[@]}" --threads 1 --dump-logits "$T/ref.f32" >"$T/ref.json" 2>"$T/ref.err" ||
        { bad "$name: one process failed"; tail -5 "$T/ref.err"; continue; }
    if ! timeout 180 "$BIN" "${G[@]}" --threads $((tp * pp)) --tp-size $tp --pp-size $pp --dist-timeout 60 \
            --dump-logits "$T/got.f32" >"$T/got.json" 2>"$T/got.err"; then
        bad "$name: --tp-size $tp --pp-size $pp failed"; tail -10 "$T/got.err"; continue
    fi
    compare "$name tp=$tp x pp=$pp" "$T"
done

# LoRA (tests/scripts/lora_tp_check.py's adapters on llama3: all seven
# projections; q/v/down bf16 rsLoRA; k/o/up/gate + lm_head f16;
# embed_tokens + v bf16): each rank its slice of its stage's layers
"$PY" - "$L3" <<'PYEOF' || fails=$((fails + 1))
import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.environ["SGLC_ROOT"], "tests", "scripts"))
import lora_tp_check as L
llama = sys.argv[1]
td = tempfile.mkdtemp(prefix="sglc-tpp-lora-")
try:
    cfg, dirs = L.adapters_for("llama3", llama, td, L.lora_ref.VARIANTS)
    ids = [(i * 37) % (cfg["vocab_size"] - 3) + 3 for i in range(24)]
    _, base, err = L.run(llama, ids, None)
    for d in dirs:
        tag = "llama3 LoRA " + os.path.basename(d)
        ref_ids, ref, err = L.run(llama, ids, d)
        if ref is None or base is None:
            L.report(False, f"{tag} one process failed: {err[-300:]}")
            continue
        got_ids, got, err = L.run(llama, ids, d, tp=2, pp=2)
        if got is None:
            L.report(False, f"{tag} tp=2 x pp=2 failed: {err[-500:]}")
            continue
        moved = float(abs(ref - base).max())
        e = L.rel(got, ref) if got.size == ref.size else float("inf")
        L.report(moved > 1e-2 and e <= L.TOL and got_ids == ref_ids,
                 f"{tag} tp=2 x pp=2: the adapter moves the logits by {moved:.3g}; logits of one process "
                 f"within {e:.3g} (tol {L.TOL:g}), greedy ids {'identical' if got_ids == ref_ids else 'DIFFER'}")
finally:
    subprocess.run(["rm", "-rf", td])
sys.exit(1 if L.fails else 0)
PYEOF

# 2. serve: equality through the scheduler, then a failing rank of stage 1
running() { [ -r "/proc/$1/stat" ] && ! grep -qE '^[0-9]+ \(.*\) [ZX] ' "/proc/$1/stat" 2>/dev/null; }  # zombies do not count
rank_pid() {  # rank_pid SERVER R: the forked worker of rank R
    local p
    for p in $(pgrep -P "$1" -x sglc); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SGLC_DIST_RANK=$2" && { echo "$p"; return; }
    done
}
server_start "$T/one.log" --model-path "$TS" --threads 1 || server_fail "$T/one.log"
server_gen4 "$T/sref"; server_stop
server_start "$T/tpp.log" --model-path "$TS" --threads 4 --tp-size 2 --pp-size 2 || server_fail "$T/tpp.log"
server_gen4 "$T/sgot"
if cmp -s "$T/sref" "$T/sgot" && ! grep -q bad "$T/sgot"; then ok "serve tp=2 x pp=2: 4 concurrent greedy requests = one process"; else bad "serve tp=2 x pp=2 outputs differ"; diff "$T/sref" "$T/sgot"; fi
n=$(pgrep -P "$SERVER_PID" -x sglc | wc -l)
[ "$n" = 3 ] && ok "serve tp=2 x pp=2: 3 worker ranks" || bad "serve: $n worker ranks, want 3"
server_stop TERM
[ "$SERVER_RC" = 0 ] && ok "serve tp=2 x pp=2 stops cleanly (rc 0)" || bad "serve tp=2 x pp=2 exit $SERVER_RC"
for mode in hang kill; do
    server_start "$T/$mode.log" --model-path "$TS" --threads 4 --tp-size 2 --pp-size 2 --dist-timeout 3 || server_fail "$T/$mode.log"
    W=$(rank_pid "$SERVER_PID" 3)
    WS=$(pgrep -P "$SERVER_PID" -x sglc)
    [ -n "$W" ] || { bad "$mode: no rank 3 process"; server_stop KILL; continue; }
    kill -STOP "$W" # (kill: stopped first, so the request is mid-step when it dies)
    t0=$(date +%s.%N)
    curl -s -m 30 -o "$T/$mode.body" -w '%{http_code}' "$SERVER_URL/generate" -H 'content-type: application/json' \
        -d '{"input_ids":[1,147,201],"sampling_params":{"max_new_tokens":64,"temperature":0,"ignore_eos":true}}' >"$T/$mode.code" &
    CP=$!
    if [ $mode = kill ]; then sleep 0.5; kill -KILL "$W"; fi
    wait "$CP"
    dt=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
    code=$(cat "$T/$mode.code")
    [ "$code" = 503 ] && ok "$mode rank 3: the request got 503 after ${dt}s" || { bad "$mode rank 3: HTTP $code after ${dt}s"; cat "$T/$mode.body"; }
    for i in $(seq 1 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SERVER_PID" 2>/dev/null; then bad "$mode: server still running"; server_stop KILL; else wait "$SERVER_PID"; SERVER_RC=$?; SERVER_PID=; fi
    [ "${SERVER_RC:-0}" != 0 ] && ok "$mode: server exited non-zero ($SERVER_RC)" || bad "$mode: server exit ${SERVER_RC:-?}"
    want="rank 3 (pid $W) did not reach all-reduce"; [ $mode = kill ] && want="rank 3 (pid $W)"
    grep -qF "$want" "$T/$mode.log" && ok "$mode: log names the rank: $(grep -F "$want" "$T/$mode.log" | head -1 | cut -c1-170)" ||
        { bad "$mode: no '$want' in the log"; tail -8 "$T/$mode.log"; }
    kill -KILL "$W" 2>/dev/null
    sleep 0.5
    alive=; for p in $WS; do [ "$p" != "$W" ] && running "$p" && alive="$alive $p"; done
    [ -z "$alive" ] && ok "$mode: no worker rank left running" || { bad "$mode: workers$alive still running"; kill -KILL $alive; }
done

# 3. Open MPI
if ! command -v mpirun >/dev/null; then
    echo "skip mpirun not installed (openmpi-bin): the MPI part"
elif ! ldd "$BIN" | grep -q libmpi; then
    echo "skip $BIN built without Open MPI: the MPI part"
else
    MPI=(mpirun --oversubscribe)
    [ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe)
    for M in "$TS" "$L3"; do
        n=$(basename "$(dirname "$M")")/$(basename "$M")
        IDS=$("$PY" -c "print(','.join(str((i * 37) % 500 + 3) for i in range(40)))")
        G=(generate --model-path "$M" --input-ids "$IDS" --max-new-tokens 16 --temperature 0 --json --ignore-eos --dtype float32)
        "$BIN" "${G[@]}" --threads 1 --dump-logits "$T/ref.f32" >"$T/ref.json" 2>"$T/ref.err" || { bad "$n: one process"; continue; }
        if ! timeout 180 "${MPI[@]}" -np 4 "$BIN" "${G[@]}" --threads 4 --tp-size 2 --pp-size 2 --dist-timeout 60 \
                --dump-logits "$T/got.f32" >"$T/got.json" 2>"$T/got.err"; then
            bad "$n: mpirun -np 4 failed"; tail -15 "$T/got.err"; continue
        fi
        compare "$n mpirun -np 4 --tp-size 2 --pp-size 2" "$T"
        [ "$M" = "$TS" ] && stages_logged "$T/got.err" mpi
    done
    timeout 60 "${MPI[@]}" -np 2 "$BIN" generate --model-path "$TS" --input-ids 1,2,3 --max-new-tokens 2 \
        --tp-size 2 --pp-size 2 >/dev/null 2>"$T/np.err"
    grep -q "mpirun started 2 processes but --tp-size x --pp-size is 4" "$T/np.err" &&
        ok "mpirun -np 2 with --tp-size 2 --pp-size 2 refused" || { bad "-np 2: no refusal"; tail -5 "$T/np.err"; }
fi
echo "$fails failure(s)"
[ $fails = 0 ]
