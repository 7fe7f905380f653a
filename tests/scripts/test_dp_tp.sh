#!/usr/bin/env bash
# `sglc serve --dp-size 2 --tp-size 2` (issue 12, DP x TP): two
# data-parallel replicas, each a tensor-parallel group of two ranks (the
# serve process is rank 0 of both groups, one worker process per group,
# one shm segment each), behind the one HTTP front and DP controller.
# TinyStories-656K, --threads 1 (one thread per rank: 4 ranks on the
# shared cores).  Checks:
#  - greedy /generate texts and output_ids and /v1/completions texts
#    identical to a plain one-process server (5 + 3 prompts, concurrent);
#  - two worker processes, one per replica (SGLC_DP_RANK 0 and 1 in their
#    environments), each pid listed once; both exit with the server;
#  - spread: round_robin 2/2 of 4 held requests in /get_load (generation
#    paused in place), total_requests 2/2 after two pinned to rank 0,
#    cache_aware: a repeated 96-token prompt hits its replica every time;
#    both replicas finished requests (the shutdown log's per-dp_rank
#    counters);
#  - placement with >= 4 allowed cores (--threads 4): replica k's
#    scheduler thread on core slot 2k, its worker on 2k + 1 (else the
#    "not pinned" log lines);
#  - --dp-size 2 --pp-size 2 (falls out: replicas of two pipeline stages)
#    gives the same texts;
#  - --dp-size 2 --tp-size 2 --pp-size 2 (where TP x PP is built): the same
#    texts, 6 workers;
#  - a killed worker of replica 1: a request pinned there answers 503,
#    the server exits 1 within 5 s naming "dp_rank 1" and the rank's pid,
#    the other worker is gone too;
#  - /update_weights_from_disk refused (400, the --tp-size message);
#  - generate --requests (8 lines, total_tokens, one pinned to rank 1):
#    output_ids identical to one process; bench-offline: its JSON line;
#  - refusals: bench-one-batch (--dp-size), LoRA, --ep-size, --numa-node,
#    mpirun (its environment), --tp-size 3 (8 heads).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
command -v pgrep >/dev/null || { echo "skip: pgrep missing"; exit 77; }
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0
COMMON=(--model-path "$M" --threads 1 --max-total-tokens 4096)
. "$ROOT/tests/scripts/lib_dp.sh"
gone() { local st; st=$(awk '{print $3}' /proc/$1/stat 2>/dev/null); [ -z "$st" ] || [ "$st" = Z ]; } # a zombie: its parent is gone
# workers of the server: "PID RANK GROUPS" per line (SGLC_DIST_RANK, SGLC_DIST_GROUPS)
workers() {
    local c
    for c in $(pgrep -P "$SERVER_PID" -x sglc); do
        echo "$c $(tr '\0' '\n' </proc/$c/environ 2>/dev/null | sed -n 's/^SGLC_DIST_RANK=//p')" \
            "$(tr '\0' '\n' </proc/$c/environ 2>/dev/null | sed -n 's/^SGLC_DIST_GROUPS=//p')"
    done
}
PROMPTS=("Once upon a time" "The little dog" "Lily and Tom went to the park" "One day, a bird" "Sam had a red ball")
CPROMPTS=("The cat" "Tim was sad because" "Mom said")
send_all() { # send_all PREFIX: every prompt, concurrently, native and OpenAI
    local i
    for i in "${!PROMPTS[@]}"; do
        post_bg "$T/$1.g$i" /generate "{\"text\":\"${PROMPTS[$i]}\",\"sampling_params\":{\"max_new_tokens\":24,\"temperature\":0}}"
    done
    for i in "${!CPROMPTS[@]}"; do
        post_bg "$T/$1.c$i" /v1/completions "{\"prompt\":\"${CPROMPTS[$i]}\",\"max_tokens\":16,\"temperature\":0}"
    done
    waitgen
}
same_as_ref() { # same_as_ref PREFIX: 0 when every answer equals the reference's
    local i a b
    for i in "${!PROMPTS[@]}"; do
        a=$($PY -c "import json; d=json.load(open('$T/ref.g$i')); print(d['text'], d['output_ids'])" 2>/dev/null)
        b=$($PY -c "import json; d=json.load(open('$T/$1.g$i')); print(d['text'], d['output_ids'])" 2>/dev/null)
        [ -n "$a" ] && [ "$a" = "$b" ] || { echo "  /generate '${PROMPTS[$i]}': '$a' vs '$b'"; return 1; }
    done
    for i in "${!CPROMPTS[@]}"; do
        a=$($PY -c "import json; print(json.load(open('$T/ref.c$i'))['choices'][0]['text'])" 2>/dev/null)
        b=$($PY -c "import json; print(json.load(open('$T/$1.c$i'))['choices'][0]['text'])" 2>/dev/null)
        [ -n "$a" ] && [ "$a" = "$b" ] || { echo "  /v1/completions '${CPROMPTS[$i]}': '$a' vs '$b'"; return 1; }
    done
}

# ------------------------------------------------------------ the reference: one process
start ref
send_all ref
stop

# ------------------------------------------------------------ round_robin
start rr --dp-size 2 --tp-size 2 --load-balance-method round_robin
W=$(workers)
check "one worker process, rank 1 of both replicas' groups (pid rank groups: $(echo $W))" \
    "[ \"\$(echo \"$W\" | awk '{print \$2, \$3}')\" = '1 2' ]"
check "the log: 2 replicas of 2 ranks, one copy of each rank's shard (both ranks load once)" \
    "grep -q '2 replicas of 2 ranks on this machine' $T/rr.log && grep -q 'over one copy of each rank' $T/rr.log &&
     grep -q \"dp_rank 1: its tensor-parallel rank 0 runs over dp_rank 0's shard\" $T/rr.log &&
     [ \$(grep -c 'model_load: loaded' $T/rr.log) = 2 ]"
send_all rr
check "dp 2 x tp 2: greedy /generate (text + output_ids) and /v1/completions identical to one process" "same_as_ref rr"
req GET /get_load >/dev/null
check "/get_load: one entry per dp_rank (0, 1)" "[ \"\$(jq_ 'sorted(e[\"dp_rank\"] for e in d) == [0, 1]')\" = True ]"
req GET /get_server_info >/dev/null
check "/get_server_info: dp_size 2, tp_size 2, internal_states one per replica" \
    "[ \"\$(jq_ 'd[\"dp_size\"] == 2 and d[\"tp_size\"] == 2 and len(d[\"internal_states\"]) == 2')\" = True ]"
pause
for k in 1 2 3 4; do post_bg "$T/h$k" /generate "$(body $k 8 4)"; done
wait_sum 4
check "round_robin: 4 requests -> 2 on each replica" "[ \"\$(loads)\" = '2 2' ]"
cont; waitgen
check "the 4 held requests finished after continue" "grep -q output_ids $T/h1 && grep -q output_ids $T/h4"
check "data_parallel_rank 1 served; 2 refused (400)" \
    "[ \$(req POST /generate \"\$(body 5 6 4 '\"data_parallel_rank\":1')\") = 200 ] && [ \$(req POST /generate \"\$(body 5 6 4 '\"data_parallel_rank\":2')\") = 400 ]"
check "/update_weights_from_disk: 400, not supported with --tp-size" \
    "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\"}') = 400 ] && grep -q 'tp-size 2 is not supported' $T/body"
stop
for r in 0 1; do
    n=$(sed -n "s/.*dp_rank $r: \([0-9]*\) requests finished.*/\1/p" "$T/rr.log")
    check "shutdown log: dp_rank $r finished ${n:-?} requests (> 0), 0 leaks" "[ \"${n:-0}\" -gt 0 ] && grep -q 'dp_rank $r: .* 0 leaks' $T/rr.log"
done
left=0; for p in $(echo "$W" | awk '{print $1}'); do gone "$p" || left=1; done # (one)
check "the worker process exited with the server" "[ $left = 0 ]"

# ------------------------------------------------------------ placement (machines with >= 4 allowed cores)
ALLOWED=$($PY -c 'import os; print(" ".join(str(c) for c in sorted(os.sched_getaffinity(0))))')
if [ "$(echo $ALLOWED | wc -w)" -ge 4 ]; then
    set -- $ALLOWED
    server_start "$T/pin.log" --model-path "$M" --threads 4 --max-total-tokens 4096 --dp-size 2 --tp-size 2 ||
        server_fail "$T/pin.log"
    NAME=pin
    W=$(workers)
    WP=$(echo "$W" | awk '{print $1}')
    # the worker's threads: replica 0's (the main thread) on slot 1, replica 1's on slot 3
    wt=$(for t in /proc/$WP/task/*; do grep Cpus_allowed_list "$t/status" | cut -f2; done | sort -nu | tr '\n' ' ')
    sc=$(for t in /proc/$SERVER_PID/task/*; do [ "$(cat "$t/comm")" = sglc-sched ] && grep Cpus_allowed_list "$t/status" | cut -f2; done | sort -n | tr '\n' ' ')
    check "placement: replica k's rank r on core slot 2k + r (schedulers on $sc, the worker's threads on $wt)" \
        "[ '$sc' = '$1 $3 ' ] && [ '$wt' = '$2 $4 ' ]"
    check "placement: the log names each replica's worker thread pinned" \
        "grep -q 'dp_rank 0 tensor-parallel rank 1 pinned to 1 core' $T/pin.log && grep -q 'dp_rank 1 tensor-parallel rank 1 pinned to 1 core' $T/pin.log"
    stop
else
    echo "skip placement: $(echo $ALLOWED | wc -w) allowed cores (2 replicas x 2 ranks need 4); the log says why"
    check "the log: 4 ranks on fewer cores are not pinned" "grep -q 'replicas are not pinned' $T/rr.log && grep -q '4 ranks x 1 thread(s) on [0-9]* cores: not pinned' $T/rr.log"
fi

# ------------------------------------------------------------ total_requests
start tr --dp-size 2 --tp-size 2 --load-balance-method total_requests
pause
post_bg "$T/p1" /generate "$(body 11 8 4 '"data_parallel_rank":0')"
post_bg "$T/p2" /generate "$(body 12 8 4 '"data_parallel_rank":0')"
wait_sum 2
post_bg "$T/p3" /generate "$(body 13 8 4)"; post_bg "$T/p4" /generate "$(body 14 8 4)"
wait_sum 4
check "total_requests: 2 pinned to rank 0, then 2 more -> 2/2" "[ \"\$(loads)\" = '2 2' ]"
cont; waitgen
send_all tr
check "total_requests: the same greedy outputs as one process" "same_as_ref tr"
stop

# ------------------------------------------------------------ cache_aware
start ca --dp-size 2 --tp-size 2 --load-balance-method cache_aware
LONG=$(body 31 96 2)
c=""
for k in 1 2 3 4; do req POST /generate "$LONG" >/dev/null; c="$c $(jq_ 'd["meta_info"]["cached_tokens"]')"; done
check "cache_aware: a repeated prompt hits its replica's cache every time (cached:$c)" \
    "[ \"\$(echo $c | cut -d' ' -f2-)\" = '95 95 95' ]"
stop

# ------------------------------------------------------------ dp x pp falls out
start pp --dp-size 2 --pp-size 2
send_all pp
check "dp 2 x pp 2: the same greedy outputs as one process" "same_as_ref pp"
stop

# ------------------------------------------------------------ dp x (tp x pp), where TP x PP exists
NAME=tpp
if server_start "$T/tpp.log" "${COMMON[@]}" --dp-size 2 --tp-size 2 --pp-size 2; then
    URL=$SERVER_URL
    send_all tpp
    check "dp 2 x tp 2 x pp 2 (8 ranks): the same greedy outputs as one process" "same_as_ref tpp"
    check "dp 2 x tp 2 x pp 2: 3 worker processes (ranks 1-3, each of both replicas' groups)" \
        "[ \"\$(workers | awk '{print \$2, \$3}' | sort | tr '\n' ' ')\" = '1 2 2 2 3 2 ' ]"
    stop
elif grep -q 'tensor and pipeline parallelism together are not supported yet' "$T/tpp.log"; then
    wait "$SERVER_PID" 2>/dev/null; SERVER_PID=
    echo "skip dp x tp x pp: this build has no TP x PP"
else
    wait "$SERVER_PID" 2>/dev/null; SERVER_PID=
    check "dp 2 x tp 2 x pp 2: the server starts" false; tail -5 "$T/tpp.log"
fi

# ------------------------------------------------------------ a killed rank
start kill --dp-size 2 --tp-size 2
W=$(workers)
W1=$(echo "$W" | awk '$2 == 1 {print $1}')
kill -KILL "$W1"
code=$(req POST /generate "$(body 7 6 8 '"data_parallel_rank":1')")
check "killed worker (rank 1 of both replicas): a request pinned to dp_rank 1 answers 503 (got $code)" "[ '$code' = 503 ] && grep -q 'tensor-parallel rank failed' $T/body"
for i in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SERVER_PID" 2>/dev/null; then SERVER_RC=running; server_stop KILL; SERVER_RC=running; else wait "$SERVER_PID"; SERVER_RC=$?; SERVER_PID=; fi
check "the server exited non-zero within 5 s (rc $SERVER_RC)" "[ '$SERVER_RC' = 1 ]"
check "the log names a dp_rank and the killed rank's pid and signal (each group sees the same cause)" \
    "grep -Eq 'tensor parallelism failed in dp_rank [01]: rank 1 \(pid $W1\) was killed by signal 9' $T/kill.log &&
     ! grep -q 'rank 1 (pid $W1) is gone' $T/kill.log"

# ------------------------------------------------------------ one copy of each rank's shard: resident memory
# A dummy Llama-3.2-1B shrunk to 2 layers of 1024 (bf16, ~64 MiB per TP
# rank, made at load: the process's own memory).  dp 2 adds a run state
# per replica, not a shard: each process's Pss stays within 1.15x of dp 1's
# (a copy per replica, as before, made it ~1.9x).
LD=$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct
if [ -f "$LD/config.json" ]; then
    SMALL='{"num_hidden_layers": 2, "hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16, "vocab_size": 32000}'
    pss() { awk '$1 == "Pss:" {print $2}' "/proc/$1/smaps_rollup"; }
    for dp in 1 2; do
        NAME=mem$dp
        server_start "$T/mem$dp.log" --model-path "$LD" --load-format dummy --dtype bfloat16 --skip-tokenizer-init \
            --json-model-override-args "$SMALL" --threads 1 --max-total-tokens 1024 --tp-size 2 --dp-size $dp ||
            server_fail "$T/mem$dp.log"
        URL=$SERVER_URL
        req POST /generate "$(body 3 8 2)" >/dev/null
        s=$(pss $SERVER_PID) w=0
        for p in $(pgrep -P "$SERVER_PID" -x sglc); do w=$((w + $(pss "$p"))); done
        eval "PS$dp=$s PW$dp=$w"
        stop
    done
    check "dp 2 vs dp 1 at tp 2 (dummy, ~64 MiB a rank): serve Pss $PS2 vs $PS1 KiB, worker $PW2 vs $PW1 KiB, each within 1.15x" \
        "[ $PS1 -gt 60000 ] && [ $PW1 -gt 60000 ] && [ $PS2 -lt $((PS1 * 115 / 100)) ] && [ $PW2 -lt $((PW1 * 115 / 100)) ]"
else
    echo "skip memory: no $LD/config.json"
fi

# ------------------------------------------------------------ offline: generate --requests, bench-offline
$PY - "$T/req.jsonl" "$T/req1.jsonl" <<'PY'
import json, sys
prompts = ["Once upon a time", "The little dog", "Lily liked to", "One day a bird", "Tom was sad because",
           "The sun was", "A big red ball", "Mom said"]
with open(sys.argv[1], "w") as f, open(sys.argv[2], "w") as f1:
    for i, p in enumerate(prompts):
        r = {"text": p, "sampling_params": {"temperature": 0, "max_new_tokens": 8 + 3 * i}}
        f1.write(json.dumps(r) + "\n")
        if i == 5: r["data_parallel_rank"] = 1
        f.write(json.dumps(r) + "\n")
PY
outs() { $PY -c 'import json,sys; [print(json.loads(l)["output_ids"]) for l in open(sys.argv[1])]' "$1"; }
"$BIN" generate "${COMMON[@]}" --requests "$T/req1.jsonl" --output "$T/g1.jsonl" >"$T/g1.log" 2>&1; rc1=$?
"$BIN" generate "${COMMON[@]}" --requests "$T/req.jsonl" --output "$T/g2.jsonl" --dp-size 2 --tp-size 2 \
    --load-balance-method total_tokens >"$T/g2.log" 2>&1; rc2=$?
outs "$T/g1.jsonl" >"$T/g1.txt" 2>/dev/null; outs "$T/g2.jsonl" >"$T/g2.txt" 2>/dev/null
check "generate --requests --dp-size 2 --tp-size 2 (total_tokens, one line pinned to rank 1): 8 outputs identical to one process, in order" \
    "[ $rc1 = 0 ] && [ $rc2 = 0 ] && [ \$(wc -l <$T/g1.txt) = 8 ] && cmp -s $T/g1.txt $T/g2.txt" || tail -5 "$T/g2.log"
check "generate: both replicas finished requests" \
    "grep -q 'dp_rank 0: [1-9][0-9]* requests finished' $T/g2.log && grep -q 'dp_rank 1: [1-9][0-9]* requests finished' $T/g2.log"
"$BIN" bench-offline "${COMMON[@]}" --dp-size 2 --tp-size 2 --num-prompts 12 --random-input-len 48 \
    --random-output-len 12 --result-filename "$T/bo.json" >"$T/bo.log" 2>&1; rc=$?
check "bench-offline --dp-size 2 --tp-size 2: exit 0, JSON with 12 requests, dp_size 2, both pools" "[ $rc = 0 ] && $PY -c '
import json, sys
o = json.loads(open(sys.argv[1]).readline())
assert o[\"successful_requests\"] == 12 and o[\"dp_size\"] == 2, o
assert o[\"output_throughput\"] > 0 and o[\"max_total_num_tokens\"] == 8192, o
' $T/bo.json" || tail -5 "$T/bo.log"

# ------------------------------------------------------------ under mpirun: -np 2, each process rank r of both replicas
if command -v mpirun >/dev/null && ldd "$BIN" | grep -q libmpi; then
    MPI=(mpirun --oversubscribe --bind-to none -np 2)
    [ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
    "${MPI[@]}" "$BIN" generate "${COMMON[@]}" --threads 4 --requests "$T/req.jsonl" --output "$T/gm.jsonl" \
        --dp-size 2 --tp-size 2 >"$T/gm.log" 2>&1; rc=$?
    outs "$T/gm.jsonl" >"$T/gm.txt" 2>/dev/null
    check "mpirun -np 2 generate --requests --dp-size 2 --tp-size 2: 8 outputs identical to one process, both replicas used" \
        "[ $rc = 0 ] && cmp -s $T/g1.txt $T/gm.txt && grep -q 'dp_rank 1: [1-9][0-9]* requests finished' $T/gm.log &&
         grep -q '2 replicas of 2 ranks over Open MPI (one communicator per replica)' $T/gm.log" || tail -5 "$T/gm.log"
    NAME=mpi
    SERVER_PORT=$(freeport); URL=http://127.0.0.1:$SERVER_PORT
    "${MPI[@]}" "$BIN" serve "${COMMON[@]}" --threads 4 --dp-size 2 --tp-size 2 --host 127.0.0.1 \
        --port "$SERVER_PORT" >"$T/mpi.log" 2>&1 &
    SERVER_PID=$!
    if wait_http "$URL/health" "$SERVER_PID" 60; then
        check "mpirun serve: the two processes' ranks, mpi backend, one shard load each" \
            "[ \$(grep -c 'tensor-parallel rank 1 of 2 ready (mpi backend)' $T/mpi.log) = 2 ] && [ \$(grep -c 'model_load: loaded' $T/mpi.log) = 2 ]"
        send_all mpi
        check "mpirun serve: greedy /generate and /v1/completions identical to one process" "same_as_ref mpi"
        pause
        for k in 1 2 3 4; do post_bg "$T/m$k" /generate "$(body $((40 + k)) 8 64)"; done
        wait_sum 4
        check "mpirun serve: round_robin spreads 4 held requests 2/2 (/get_load per dp_rank)" "[ \"\$(loads)\" = '2 2' ]"
        req POST /abort_request '{"abort_all":true}' >/dev/null
        cont; waitgen
        check "mpirun serve: abort_all reaches both replicas (4 aborted, none left)" \
            "[ \$(grep -l '\"abort\"' $T/m1 $T/m2 $T/m3 $T/m4 | wc -l) = 4 ] && wait_sum 0 && [ \"\$(loads)\" = '0 0' ]"
        check "mpirun serve: /flush_cache 200 (both replicas flushed)" "[ \$(req POST /flush_cache) = 200 ]"
        check "mpirun serve: idle, no KV token in use on either replica" \
            "req GET /get_load >/dev/null && [ \"\$(jq_ '[e[\"num_tokens\"] for e in sorted(d, key=lambda e: e[\"dp_rank\"])]')\" = '[0, 0]' ]"
        # SIGTERM to rank 0 (mpirun's own SIGTERM ends the job at once): it
        # drains, ends both groups, the worker exits 0, so does mpirun
        R0=; for c in $(pgrep -P "$SERVER_PID"); do
            tr '\0' '\n' </proc/$c/environ 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=0$' && R0=$c
        done
        [ -n "$R0" ] && kill -TERM "$R0"
        timeout 30 tail --pid="$SERVER_PID" -f /dev/null; wait "$SERVER_PID"; SERVER_RC=$?; SERVER_PID=
        check "mpirun serve: SIGTERM to rank 0 -> mpirun exit 0 (rc $SERVER_RC), no KV leak logged" \
            "[ -n '$R0' ] && [ $SERVER_RC = 0 ] && ! grep -qi 'leak detected' $T/mpi.log"
        check "mpirun serve: each dp_rank finished requests with 0 leaks" \
            "grep -q 'dp_rank 0: [1-9][0-9]* requests finished, [1-9][0-9]* leak checks, 0 leaks' $T/mpi.log &&
             grep -q 'dp_rank 1: [1-9][0-9]* requests finished, [1-9][0-9]* leak checks, 0 leaks' $T/mpi.log"
    else
        check "mpirun -np 2 serve --dp-size 2 --tp-size 2: the server starts" false; tail -10 "$T/mpi.log"
        kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=
    fi
else
    echo "skip mpirun: no mpirun or $BIN built without Open MPI"
fi

# ------------------------------------------------------------ two "nodes" (gloo over 127.0.0.1)
# SGLang's layout: each replica's ranks spread over the nodes, every rank 0
# on node 0 (with the front and controller); each node's processes are
# rank r of every replica.  Node 1 is started first.
if ldd "$BIN" | grep -q libgloo; then
    export SGLC_TP_PIN=0 # the two "nodes" share this machine's cores
    two_gen() { # TP: generate --requests over two nodes -> $T/n0.jsonl; 0 when both exit 0
        local port; port=$(freeport)
        timeout 120 "$BIN" generate "${COMMON[@]}" --threads 4 --requests "$T/req.jsonl" --output "$T/n1.jsonl" \
            --dp-size 2 --tp-size "$1" --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$port" --dist-timeout 30 \
            >"$T/n1.log" 2>&1 &
        local p1=$!; sleep 0.3
        timeout 120 "$BIN" generate "${COMMON[@]}" --threads 4 --requests "$T/req.jsonl" --output "$T/n0.jsonl" \
            --dp-size 2 --tp-size "$1" --nnodes 2 --node-rank 0 --dist-init-addr "127.0.0.1:$port" --dist-timeout 30 \
            >"$T/n0.log" 2>&1
        local rc0=$?; wait $p1; local rc1=$?
        outs "$T/n0.jsonl" >"$T/n0.txt" 2>/dev/null
        [ $rc0 = 0 ] && [ $rc1 = 0 ]
    }
    check "two nodes, generate --requests --dp-size 2 --tp-size 2 (a rank of each replica per node): outputs identical to one process" \
        "two_gen 2 && cmp -s $T/g1.txt $T/n0.txt && grep -q 'dp_rank 1: [1-9][0-9]* requests finished' $T/n0.log &&
         grep -q 'rank 1 of each on node 1' $T/n1.log" || tail -3 "$T/n0.log" "$T/n1.log"
    check "two nodes, --dp-size 2 --tp-size 4 (two ranks of each replica per node, 4 processes): outputs identical" \
        "two_gen 4 && cmp -s $T/g1.txt $T/n0.txt && grep -q 'rank 3 of each on node 1' $T/n1.log" || tail -3 "$T/n0.log" "$T/n1.log"
    NAME=nodes
    port=$(freeport); SERVER_PORT=$(freeport); URL=http://127.0.0.1:$SERVER_PORT
    "$BIN" serve "${COMMON[@]}" --threads 4 --dp-size 2 --tp-size 2 --nnodes 2 --node-rank 1 \
        --dist-init-addr "127.0.0.1:$port" --dist-timeout 30 >"$T/nodes1.log" 2>&1 &
    N1=$!; bg_track $N1; sleep 0.3
    "$BIN" serve "${COMMON[@]}" --threads 4 --dp-size 2 --tp-size 2 --nnodes 2 --node-rank 0 \
        --dist-init-addr "127.0.0.1:$port" --dist-timeout 30 --host 127.0.0.1 --port "$SERVER_PORT" >"$T/nodes.log" 2>&1 &
    SERVER_PID=$!
    if wait_http "$URL/health" "$SERVER_PID" 60; then
        send_all nodes
        check "two nodes, serve: greedy /generate and /v1/completions identical to one process" "same_as_ref nodes"
        pause
        for k in 1 2 3 4; do post_bg "$T/q$k" /generate "$(body $((50 + k)) 8 64)"; done
        wait_sum 4
        check "two nodes, serve: round_robin 2/2 (/get_load per dp_rank)" "[ \"\$(loads)\" = '2 2' ]"
        req POST /abort_request '{"abort_all":true}' >/dev/null
        cont; waitgen
        check "two nodes, serve: abort_all reaches both replicas" \
            "[ \$(grep -l '\"abort\"' $T/q1 $T/q2 $T/q3 $T/q4 | wc -l) = 4 ] && wait_sum 0"
        check "two nodes, serve: /flush_cache 200, no KV token in use on either replica" \
            "[ \$(req POST /flush_cache) = 200 ] && req GET /get_load >/dev/null && [ \"\$(jq_ '[e[\"num_tokens\"] for e in d]')\" = '[0, 0]' ]"
        stop
        timeout 20 tail --pid=$N1 -f /dev/null; wait $N1; rc1=$?
        check "two nodes, serve: node 1 exits 0 after node 0's shutdown (rc $rc1), 0 leaks on both replicas" \
            "[ $rc1 = 0 ] && grep -q 'dp_rank 1: [1-9][0-9]* requests finished, [0-9]* leak checks, 0 leaks' $T/nodes.log"
    else
        check "two nodes: serve --dp-size 2 --tp-size 2 starts" false; tail -5 "$T/nodes.log" "$T/nodes1.log"
        kill "$SERVER_PID" $N1 2>/dev/null; wait "$SERVER_PID" $N1 2>/dev/null; SERVER_PID=
    fi
    unset SGLC_TP_PIN
else
    echo "skip two nodes: $BIN built without gloo"
fi

# ------------------------------------------------------------ refusals
refused() { # refused WHAT MESSAGE RC COMMAND...: exit RC (any: non-zero) and MESSAGE in the output
    local what=$1 msg=$2 want=$3; shift 3
    timeout 60 "$@" >"$T/ref.out" 2>&1
    local rc=$?
    check "$what: refused (exit $rc): $msg" \
        "{ [ '$want' = any ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] || [ $rc = '$want' ]; } && grep -qF -- '$msg' $T/ref.out" ||
        head -5 "$T/ref.out"
}
P=$(freeport)
refused "bench-one-batch" "--dp-size 2 with --tp-size 2 is supported by serve, generate --requests and bench-offline only" 2 \
    "$BIN" bench-one-batch --model-path "$M" --dp-size 2 --tp-size 2 --batch-size 1 --input-len 4 --output-len 2
refused "LoRA" "LoRA (--enable-lora / --lora-paths) with --dp-size 2 and --tp-size 2 is not supported yet" 2 \
    "$BIN" serve --model-path "$M" --dp-size 2 --tp-size 2 --enable-lora --port "$P"
refused "--ep-size" "--ep-size 2 with --dp-size 2 is not supported yet" 2 \
    "$BIN" serve --model-path "$M" --dp-size 2 --tp-size 2 --ep-size 2 --port "$P"
refused "--numa-node" "--numa-node / --base-gpu-id / --gpu-id-step with --dp-size 2 and --tp-size 2 are not supported yet" 2 \
    "$BIN" serve --model-path "$M" --dp-size 2 --tp-size 2 --numa-node 0 0 --port "$P"
refused "mpirun -np 4 (dp x tp processes)" "mpirun started 4 processes = --dp-size 2 x 2 ranks, but sglc runs rank r of every replica in one process" any \
    env OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=0 "$BIN" serve --model-path "$M" --dp-size 2 --tp-size 2 --threads 1 --port "$P"
refused "--tp-size 3 (8 heads)" "--tp-size 3: num_attention_heads (8) is not divisible by it" any \
    "$BIN" serve --model-path "$M" --dp-size 2 --tp-size 3 --threads 1 --port "$P" --host 127.0.0.1
sleep 0.5
check "no worker left behind by the refused starts" "! pgrep -f -- '--dp-size 2 --tp-size 3' >/dev/null"

[ $fails = 0 ] && echo "test_dp_tp: all passed" || echo "test_dp_tp: $fails failed"
[ $fails = 0 ]
