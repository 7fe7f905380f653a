#!/usr/bin/env bash
# SGLang's multi-node launch without mpirun (issue 12): the same command on
# every "node" with --nnodes 2 --node-rank 0/1 --dist-init-addr
# 127.0.0.1:PORT, the gloo backend (src/dist/dist_gloo.cc) between them,
# TinyStories-656K:
#  1. generate --tp-size 2 (one rank per node), --tp-size 4 (two per node,
#     each node's command starts its second rank), --pp-size 2 (a stage per
#     node), --tp-size 2 --pp-size 2: prompt logits within 1e-5 of one
#     process and the same 16 greedy ids; node 1 started before node 0;
#  2. a node that never starts: node 0 alone exits within --dist-timeout
#     naming "node 1 (rank 1)"; node 1 alone names node 0;
#  3. bad launches: mismatched --tp-size (refused on both sides), two nodes
#     with --node-rank 0, --node-rank 2 of --nnodes 2, --nnodes 2 without
#     --dist-init-addr;
#  4. serve across the nodes: a /generate request = one process; node 1
#     hung (SIGSTOP) mid-request -> 503 within --dist-timeout naming rank 1,
#     both nodes exit; node 1 killed (SIGKILL) mid-request -> 503 at once,
#     both exit;
#  5. across two network namespaces (root, ip netns; else that part skips):
#     node 1 in its own namespace reaches node 0 over a veth pair;
#     generate --tp-size 2 = one process.
# Skips (77) when sglc was built without gloo.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
PY=/usr/bin/python3
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
skip() { echo "skip: $*"; exit 77; }
[ -x "$BIN" ] || skip "$BIN not built"
[ -e "$M/model.safetensors" ] || skip "$M not found"
ldd "$BIN" | grep -q libgloo || skip "$BIN built without gloo (libgloo-dev)"
T=$(mktemp -d)
PIDS=()
NSA= NSB=
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    if [ -n "$NSA" ]; then
        for p in $(ip netns pids "$NSB" 2>/dev/null) $(ip netns pids "$NSA" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$NSA" 2>/dev/null; ip netns del "$NSB" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
freeport() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export SGLC_TP_PIN=0 # two "nodes" share this machine's cores
IDS=$("$PY" -c "print(','.join(str((i * 37) % 500 + 3) for i in range(40)))")
G=(generate --model-path "$M" --input-ids "$IDS" --max-new-tokens 16 --temperature 0 --json --ignore-eos --dtype float32)
"$BIN" "${G[@]}" --threads 1 --dump-logits "$T/ref.f32" >"$T/ref.json" 2>"$T/ref.err" || { echo "FAIL one process"; cat "$T/ref.err"; exit 1; }

compare() { # NAME: got.f32/got.json vs ref
    "$PY" - "$T" "$1" <<'PYEOF'
import json, sys
import numpy as np
t, n = sys.argv[1], sys.argv[2]
a = np.fromfile(t + "/ref.f32", "<f4"); b = np.fromfile(t + "/got.f32", "<f4")
e = float(np.max(np.abs(a.astype(np.float64) - b)) / np.max(np.abs(a))) if a.size == b.size and a.size else 1.0
ia = json.loads(open(t + "/ref.json").read().strip().splitlines()[-1])["output_ids"]
ib = json.loads(open(t + "/got.json").read().strip().splitlines()[-1])["output_ids"]
ok = e <= 1e-5 and ia == ib
print(("ok   " if ok else "FAIL ") + f"{n}: logits max|d|/max|ref| = {e:.3g}, greedy ids {'identical' if ia == ib else 'differ'}")
sys.exit(0 if ok else 1)
PYEOF
}

# 1. two nodes on loopback; node 1 first (it waits for node 0's store)
two_nodes() { # NAME ARGS...
    local name=$1; shift
    local port; port=$(freeport)
    rm -f "$T/got.f32" "$T/got.json"
    timeout 120 "$BIN" "${G[@]}" --threads 1 "$@" --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$port" \
        --dist-timeout 30 >"$T/n1.out" 2>"$T/n1.err" &
    local p1=$!
    sleep 0.3
    timeout 120 "$BIN" "${G[@]}" --threads 1 "$@" --nnodes 2 --node-rank 0 --dist-init-addr "127.0.0.1:$port" \
        --dist-timeout 30 --dump-logits "$T/got.f32" >"$T/got.json" 2>"$T/n0.err"
    local rc0=$? rc1
    wait "$p1"; rc1=$?
    if [ $rc0 != 0 ] || [ $rc1 != 0 ]; then
        bad "$name: node 0 exit $rc0, node 1 exit $rc1"; tail -5 "$T/n0.err" "$T/n1.err"; return
    fi
    compare "$name" || fails=$((fails + 1))
}
two_nodes "--nnodes 2 --tp-size 2 (a rank per node)" --tp-size 2
grep -q "rank 1 of 2 on node 1 of 2 (1 per node) over gloo" "$T/n1.err" && grep -q "ready (gloo backend)" "$T/n1.err" &&
    ok "node 1's command is rank 1, a gloo worker" || bad "node 1 log: $(tail -3 "$T/n1.err")"
two_nodes "--nnodes 2 --tp-size 4 (two ranks per node)" --tp-size 4
n=$(grep -c "ready (gloo backend)" "$T/n1.err")
[ "$n" = 2 ] && ok "node 1 ran ranks 2 and 3" || bad "node 1 ran $n ranks: $(grep -h 'over gloo' "$T/n1.err")"
two_nodes "--nnodes 2 --pp-size 2 (a stage per node)" --pp-size 2
two_nodes "--nnodes 2 --tp-size 2 --pp-size 2" --tp-size 2 --pp-size 2
grep -q "pipeline stage 1 of 2, tensor-parallel rank 1 of 2 (ranks 2-3, gloo)" "$T/n1.err" &&
    ok "TP x PP: node 1 holds stage 1's gloo sub-group" || bad "no stage-1 sub-group line on node 1"

# 2. a node that never comes
port=$(freeport)
t0=$(date +%s.%N)
timeout 30 "$BIN" "${G[@]}" --threads 1 --tp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr "127.0.0.1:$port" \
    --dist-timeout 2 >/dev/null 2>"$T/miss.err"
rc=$?
dt=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
grep -q "node 1 (rank 1) did not join at --dist-init-addr 127.0.0.1:$port within 2.0 s" "$T/miss.err" && [ $rc != 0 ] && [ $rc != 124 ] &&
    ok "node 1 never started: node 0 exits $rc after ${dt}s: $(grep -o 'node 1 (rank 1) did not join.*' "$T/miss.err" | head -1)" ||
    bad "missing node 1: rc $rc after ${dt}s: $(tail -2 "$T/miss.err")"
timeout 30 "$BIN" "${G[@]}" --threads 1 --tp-size 4 --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$port" \
    --dist-timeout 2 >/dev/null 2>"$T/miss0.err"
rc=$?
grep -q "nobody listens at --dist-init-addr 127.0.0.1:$port after 2.0 s.*node 0 (--node-rank 0) did not start" "$T/miss0.err" && [ $rc != 0 ] && [ $rc != 124 ] &&
    ok "node 0 never started: node 1 exits $rc naming node 0" || bad "missing node 0: rc $rc: $(tail -2 "$T/miss0.err")"

# 3. bad launches
port=$(freeport)
timeout 30 "$BIN" "${G[@]}" --threads 1 --tp-size 2 --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$port" \
    --dist-timeout 10 >/dev/null 2>"$T/mm1.err" &
p1=$!
timeout 30 "$BIN" "${G[@]}" --threads 1 --tp-size 4 --nnodes 2 --node-rank 0 --dist-init-addr "127.0.0.1:$port" \
    --dist-timeout 10 >/dev/null 2>"$T/mm0.err"
rc0=$?
wait $p1; rc1=$?
grep -q "was started with '--tp-size 2 --pp-size 1 --nnodes 2' but node 0 with '--tp-size 4 --pp-size 1 --nnodes 2'" "$T/mm1.err" &&
    grep -q "a node was refused" "$T/mm0.err" && [ $rc0 != 0 ] && [ $rc1 != 0 ] && [ $rc0 != 124 ] && [ $rc1 != 124 ] &&
    ok "mismatched --tp-size: both nodes exit ($rc0, $rc1): $(grep -o 'rank 1 .*was started with.*' "$T/mm1.err" | head -1 | cut -c1-150)" ||
    { bad "mismatched sizes: rc $rc0 / $rc1"; tail -2 "$T/mm0.err" "$T/mm1.err"; }
port=$(freeport)
timeout 30 "$BIN" "${G[@]}" --threads 1 --tp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr "127.0.0.1:$port" \
    --dist-timeout 3 >/dev/null 2>"$T/dup0.err" &
p0=$!
sleep 0.5
timeout 30 "$BIN" "${G[@]}" --threads 1 --tp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr "127.0.0.1:$port" \
    --dist-timeout 3 >/dev/null 2>"$T/dup.err"
rc=$?
wait $p0
grep -q "cannot listen at --dist-init-addr 127.0.0.1:$port: Address already in use (.*second node started with --node-rank 0" "$T/dup.err" && [ $rc != 0 ] &&
    ok "a second --node-rank 0: refused (Address already in use)" || bad "duplicate node rank 0: rc $rc: $(tail -2 "$T/dup.err")"
timeout 30 "$BIN" "${G[@]}" --tp-size 2 --nnodes 2 --node-rank 2 --dist-init-addr "127.0.0.1:$port" >/dev/null 2>"$T/nr.err"
grep -q "\-\-node-rank 2: must be between 0 and --nnodes - 1 = 1" "$T/nr.err" && ok "--node-rank 2 of --nnodes 2 refused" || bad "node rank 2: $(tail -1 "$T/nr.err")"
timeout 30 "$BIN" "${G[@]}" --tp-size 2 --nnodes 2 --node-rank 1 >/dev/null 2>"$T/na.err"
grep -q "give node 0's address with --dist-init-addr HOST:PORT" "$T/na.err" && ok "--nnodes 2 without --dist-init-addr refused" || bad "no init addr: $(tail -1 "$T/na.err")"

# 4. serve across the nodes; failures mid-request
REQ='{"input_ids":[1,147,201,300],"sampling_params":{"max_new_tokens":16,"temperature":0,"ignore_eos":true}}'
REF=$("$BIN" generate --model-path "$M" --input-ids 1,147,201,300 --max-new-tokens 16 --temperature 0 \
      --ignore-eos --json --threads 1 2>/dev/null | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["output_ids"])')
serve_nodes() { # MODE: start node 0 (HTTP) and node 1; S0 S1 pids
    local iport; iport=$(freeport); HP=$(freeport)
    "$BIN" serve --model-path "$M" --host 127.0.0.1 --port "$HP" --threads 1 --tp-size 2 --nnodes 2 --node-rank 1 \
        --dist-init-addr "127.0.0.1:$iport" --dist-timeout 3 >"$T/s1.log" 2>&1 &
    S1=$!
    "$BIN" serve --model-path "$M" --host 127.0.0.1 --port "$HP" --threads 1 --tp-size 2 --nnodes 2 --node-rank 0 \
        --dist-init-addr "127.0.0.1:$iport" --dist-timeout 3 >"$T/s0.log" 2>&1 &
    S0=$!
    PIDS+=("$S0" "$S1")
    for i in $(seq 1 150); do curl -sf -o /dev/null "http://127.0.0.1:$HP/health" && return 0; kill -0 "$S0" 2>/dev/null || break; sleep 0.2; done
    return 1
}
for mode in hang kill; do
    if ! serve_nodes; then bad "$mode: the two-node server did not come up"; tail -5 "$T/s0.log" "$T/s1.log"; continue; fi
    if [ $mode = hang ]; then
        GOT=$(curl -s -m 30 "http://127.0.0.1:$HP/generate" -H 'content-type: application/json' -d "$REQ" |
              "$PY" -c 'import json,sys; print(json.load(sys.stdin)["output_ids"])' 2>/dev/null)
        [ -n "$REF" ] && [ "$GOT" = "$REF" ] && ok "serve on two nodes: output_ids = one process" || bad "serve output_ids '$GOT' != '$REF'"
    fi
    kill -STOP "$S1"
    t0=$(date +%s.%N)
    curl -s -m 30 -o "$T/$mode.body" -w '%{http_code}' "http://127.0.0.1:$HP/generate" -H 'content-type: application/json' -d "$REQ" >"$T/$mode.code" &
    CP=$!
    if [ $mode = kill ]; then sleep 0.5; kill -KILL "$S1"; fi
    wait "$CP"
    dt=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
    [ "$(cat "$T/$mode.code")" = 503 ] && ok "$mode: node 1's rank $mode mid-request -> 503 after ${dt}s" || bad "$mode: HTTP $(cat "$T/$mode.code") after ${dt}s"
    for i in $(seq 1 100); do kill -0 "$S0" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$S0" 2>/dev/null; then bad "$mode: node 0 still running"; else wait "$S0"; rc=$?; [ $rc = 1 ] && ok "$mode: node 0 exited 1" || bad "$mode: node 0 exit $rc"; fi
    want="rank 1 (pid $S1 on node 1) did not reach all-reduce"
    [ $mode = kill ] && want="rank 1 (pid $S1 on node 1, .*) is gone (its connection closed)"
    line=$(grep -h "tensor parallelism failed: .*$want" "$T/s0.log" | head -1 | cut -c1-200)
    [ -n "$line" ] && ok "$mode: node 0 says: ${line#*INFO }" || { bad "$mode: no failure line naming rank 1"; tail -4 "$T/s0.log"; }
    if [ $mode = hang ]; then
        kill -CONT "$S1"
        for i in $(seq 1 60); do kill -0 "$S1" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$S1" 2>/dev/null && bad "hang: node 1 still running after node 0 exited" || ok "hang: node 1 exited after SIGCONT (node 0 gone)"
    fi
    kill -KILL "$S0" "$S1" 2>/dev/null
done

# 5. across network namespaces
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add "sglcMA$$" 2>/dev/null; then
    NSA=sglcMA$$ NSB=sglcMB$$ NET=10.214.$(( $$ % 200 + 20 ))
    ip netns add "$NSB" && ip link add "v$NSA" type veth peer name "v$NSB" &&
    ip link set "v$NSA" netns "$NSA" && ip link set "v$NSB" netns "$NSB" &&
    ip -n "$NSA" addr add "$NET.1/24" dev "v$NSA" && ip -n "$NSB" addr add "$NET.2/24" dev "v$NSB" &&
    ip -n "$NSA" link set lo up && ip -n "$NSB" link set lo up &&
    ip -n "$NSA" link set "v$NSA" up && ip -n "$NSB" link set "v$NSB" up || bad "netns setup"
    port=$(freeport)
    rm -f "$T/got.f32" "$T/got.json"
    ip netns exec "$NSB" timeout 120 "$BIN" "${G[@]}" --threads 1 --tp-size 2 --nnodes 2 --node-rank 1 \
        --dist-init-addr "$NET.1:$port" --dist-timeout 30 >"$T/b.out" 2>"$T/b.err" &
    pb=$!
    ip netns exec "$NSA" timeout 120 "$BIN" "${G[@]}" --threads 1 --tp-size 2 --nnodes 2 --node-rank 0 \
        --dist-init-addr "$NET.1:$port" --dist-timeout 30 --dump-logits "$T/got.f32" >"$T/got.json" 2>"$T/a.err"
    ra=$?; wait $pb; rb=$?
    if [ $ra = 0 ] && [ $rb = 0 ]; then compare "two network namespaces, --tp-size 2 over veth" || fails=$((fails + 1))
    else bad "netns: node 0 exit $ra, node 1 exit $rb"; tail -3 "$T/a.err" "$T/b.err"; fi
    ip netns exec "$NSB" timeout 60 "$BIN" bench-allreduce --ranks 1 --nnodes 2 --node-rank 1 --dist-init-addr "$NET.1:$port" \
        --iters 300 --warmup 30 >/dev/null 2>"$T/bb.err" &
    pb=$!
    ip netns exec "$NSA" timeout 60 "$BIN" bench-allreduce --ranks 1 --nnodes 2 --node-rank 0 --dist-init-addr "$NET.1:$port" \
        --iters 300 --warmup 30 >"$T/bar" 2>"$T/ba.err" && wait $pb &&
        ok "namespace-to-namespace all-reduce (gloo TCP): $(grep allreduce_f32 "$T/bar" | tr -s ' ')" ||
        { bad "bench-allreduce across namespaces"; tail -3 "$T/ba.err" "$T/bb.err"; }
else
    echo "skip network namespaces (needs root and ip netns)"
fi
echo "$fails failure(s)"
[ $fails = 0 ]
