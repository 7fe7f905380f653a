#!/usr/bin/env bash
# Tensor parallelism across two "machines" (issue 12): two network
# namespaces joined by a veth pair (made and removed by this test, needs
# root), one rank in each, started by mpirun (its remote agent enters the
# other namespace: no sshd needed), Open MPI's TCP transport between them.
#  1. `serve --tp-size 2` answers on host A's address; a /generate request
#     from host B gives the output_ids of a one-process run;
#  2. the rank on host B hangs (SIGSTOP) mid-request: the request is
#     answered 503 within --dist-timeout, rank 0 logs which rank failed and
#     the job exits non-zero;
#  3. the rank on host B is killed mid-request: the request is answered 503
#     within --dist-timeout and rank 0 logs the failure and exits (mpirun
#     --enable-recovery here: without it mpirun itself kills rank 0 as soon
#     as a rank dies, before it can answer; with it mpirun's own status is
#     0, so the test reads rank 0's "exiting" line instead).
# Also measures the namespace-to-namespace all-reduce (bench-allreduce).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SGLC_BIN:-$ROOT/build/sglc}
PY=/usr/bin/python3
M=${SGLC_SHARED:-$ROOT/../shared}/models/TinyStories-656K
skip() { echo "skip: $*"; exit 77; }
[ -x "$BIN" ] || skip "$BIN not built"
[ -e "$M/model.safetensors" ] || skip "$M not found"
[ "$(id -u)" = 0 ] || skip "needs root (ip netns)"
command -v mpirun >/dev/null || skip "mpirun not installed"
command -v ip >/dev/null || skip "ip (iproute2) not installed"
ldd "$BIN" | grep -q libmpi || skip "$BIN built without Open MPI"
A=sglcA$$ B=sglcB$$ NET=10.213.$(( $$ % 200 + 20 )) T=$(mktemp -d)
cleanup() {
    [ -n "${MP:-}" ] && kill -KILL "$MP" 2>/dev/null
    for p in $(ip netns pids "$B" 2>/dev/null) $(ip netns pids "$A" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
ip netns add "$A" && ip netns add "$B" || skip "cannot create network namespaces"
ip link add "v$A" type veth peer name "v$B" || skip "cannot create a veth pair"
ip link set "v$A" netns "$A"; ip link set "v$B" netns "$B"
ip -n "$A" addr add "$NET.1/24" dev "v$A"; ip -n "$B" addr add "$NET.2/24" dev "v$B"
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set "v$A" up; ip -n "$B" link set "v$B" up
cat >"$T/rsh" <<RSH
#!/bin/sh
host=\$1; shift
case \$host in $NET.1) ns=$A;; $NET.2) ns=$B;; *) echo "unknown host \$host" >&2; exit 1;; esac
exec ip netns exec \$ns sh -c "\$*"
RSH
chmod +x "$T/rsh"
MPI=(ip netns exec "$A" mpirun --allow-run-as-root --bind-to none --mca plm_rsh_agent "$T/rsh"
     -H "$NET.1,$NET.2" -np 2 --mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24"
     --mca oob_tcp_if_include "$NET.0/24")
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

timeout 60 "${MPI[@]}" "$BIN" bench-allreduce --iters 500 --warmup 50 >"$T/bar" 2>&1 &&
    ok "namespace-to-namespace all-reduce (Open MPI TCP): $(grep allreduce_f32 "$T/bar" | tr -s ' ')" ||
    { bad "bench-allreduce across namespaces"; tail -5 "$T/bar"; }

REQ='{"input_ids":[1,147,201,300],"sampling_params":{"max_new_tokens":16,"temperature":0,"ignore_eos":true}}'
REF=$("$BIN" generate --model-path "$M" --input-ids 1,147,201,300 --max-new-tokens 16 --temperature 0 \
      --ignore-eos --json --threads 1 2>/dev/null | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["output_ids"])')
PORT=$(( 20000 + $$ % 20000 ))
RECOVER=
URL=http://$NET.1:$PORT
b_curl() { ip netns exec "$B" curl "$@"; }
start() {  # start LOG: the server under mpirun, ranks in A and B
    "${MPI[@]}" $RECOVER "$BIN" serve --model-path "$M" --host "$NET.1" --port "$PORT" \
        --threads 2 --tp-size 2 --nnodes 2 --dist-timeout 4 >"$1" 2>&1 &
    MP=$!
    for i in $(seq 1 150); do b_curl -sf -o /dev/null "$URL/health" && return 0; kill -0 "$MP" 2>/dev/null || break; sleep 0.2; done
    return 1
}
rank_b() { for p in $(ip netns pids "$B"); do [ "$(cat /proc/$p/comm 2>/dev/null)" = sglc ] && echo "$p"; done | head -1; }

if start "$T/s1.log"; then
    GOT=$(b_curl -s -m 30 "$URL/generate" -H 'content-type: application/json' -d "$REQ" |
          "$PY" -c 'import json,sys; print(json.load(sys.stdin)["output_ids"])' 2>/dev/null)
    [ -n "$REF" ] && [ "$GOT" = "$REF" ] && ok "request from host B to host A's server: output_ids = one process" ||
        bad "output_ids '$GOT' != '$REF'"
    grep -q "rank 1 of 2 ready (mpi backend)" "$T/s1.log" && ok "rank 1 ran in the other namespace over MPI" || bad "no MPI worker rank in the log"
    for mode in hang kill; do
        W=$(rank_b)
        [ -n "$W" ] || { bad "$mode: no rank in $B"; break; }
        kill -STOP "$W"
        t0=$(date +%s.%N)
        b_curl -s -m 30 -o "$T/$mode.body" -w '%{http_code}' "$URL/generate" -H 'content-type: application/json' -d "$REQ" >"$T/$mode.code" &
        CP=$!
        if [ $mode = kill ]; then sleep 0.5; kill -KILL "$W"; fi
        wait "$CP"
        dt=$("$PY" -c "import time; print(round(time.time() - $t0, 1))")
        [ "$(cat "$T/$mode.code")" = 503 ] && ok "$mode: the request got 503 after ${dt}s" || bad "$mode: HTTP $(cat "$T/$mode.code") after ${dt}s"
        for i in $(seq 1 100); do kill -0 "$MP" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$MP" 2>/dev/null; then bad "$mode: mpirun still running"; kill -KILL "$MP"; wait "$MP"
        else
            wait "$MP"; rc=$?
            if [ $mode = hang ]; then [ $rc != 0 ] && ok "$mode: the job exited non-zero ($rc)" || bad "$mode: exit 0"
            else grep -q "tensor parallelism failed: .*; exiting" "$T/s1.log" && ok "$mode: rank 0 exited on the failure (job ended, mpirun status $rc)" || bad "$mode: no exit line"; fi
        fi
        MP=
        line=$(grep -h "with rank 1 did not complete within 4.0 s" "$T/s1.log" | head -1 | cut -c1-170)
        [ -n "$line" ] && ok "$mode: rank 0 says: $line" || { bad "$mode: no failure line"; tail -8 "$T/s1.log"; }
        kill -KILL "$W" 2>/dev/null
        [ $mode = hang ] && { : >"$T/s1.log"; RECOVER=--enable-recovery; start "$T/s1.log" || { bad "restart failed"; break; }; }
    done
else
    bad "the server did not come up across namespaces"; tail -20 "$T/s1.log"
fi
echo "$fails failure(s)"
[ $fails = 0 ]
