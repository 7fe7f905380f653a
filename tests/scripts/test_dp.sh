#!/usr/bin/env bash
# `sglc serve --dp-size 2` (data parallelism: two scheduler replicas over
# one copy of TinyStories-656K's weights), raw HTTP with curl:
#  - the same greedy outputs as --dp-size 1 with the same threads;
#  - requests spread per method, read from /get_load while generation is
#    paused in place (held requests count on the replica they were sent
#    to): round_robin 2/2 and 3/1 with two pinned by data_parallel_rank
#    (pinned requests do not move the counter), total_requests 2/2 after
#    the same two pinned, total_tokens 1/3 for one long prompt and three
#    short ones, follow_bootstrap_room room % 2, cache_aware: a repeated
#    prompt always hits the replica that cached it (meta_info
#    cached_tokens > 0 every time) where round_robin misses;
#  - data_parallel_rank out of range or not an integer: 400;
#  - /abort_request abort_all reaches held requests on both replicas;
#    /flush_cache empties both radix caches (a prompt cached on each
#    replica is a miss on each afterwards); /metrics has each scheduler
#    gauge per dp_rank;
#  - at the end /get_load num_tokens 0 on both and the shutdown log has
#    each replica's leak checks (>= 1) with 0 leaks;
#  - --dp-size above the threads, and --dp-size in an offline command,
#    are refused with a clear message.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0
COMMON=(--model-path "$M" --threads 2 --max-total-tokens 4096)
. "$ROOT/tests/scripts/lib_dp.sh"
t0=$(date +%s)

# ------------------------------------------------------------ the reference: --dp-size 1
PROMPTS=("Once upon a time" "The little dog" "Lily and Tom went to the park" "One day, a bird" "The sun was" "Sam had a red ball")
start dp1 --dp-size 1
for i in "${!PROMPTS[@]}"; do
    gen_bg "$T/ref$i" "{\"text\":\"${PROMPTS[$i]}\",\"sampling_params\":{\"max_new_tokens\":32,\"temperature\":0}}"
done
waitgen
req GET /get_load >/dev/null
check "dp-size 1: /get_load has one entry, dp_rank 0" "[ \"\$(jq_ 'len(d) == 1 and d[0][\"dp_rank\"] == 0')\" = True ]"
stop

# ------------------------------------------------------------ round_robin (+ the shared checks)
start rr --dp-size 2 --load-balance-method round_robin --enable-metrics
if [ "$(nproc)" -ge 2 ]; then
    aff=$(for t in /proc/$SERVER_PID/task/*; do [ "$(cat "$t/comm")" = sglc-sched ] && grep Cpus_allowed_list "$t/status" | cut -f2; done | sort | tr '\n' ' ')
    check "each replica's scheduler thread pinned to a CPU of its own ($aff)" "[ \$(echo $aff | wc -w) = 2 ] && echo '$aff' | grep -Eq '^[0-9]+ [0-9]+ \$' && [ \"\$(echo $aff | tr ' ' '\\n' | sort -u | wc -l)\" = 2 ]"
fi
for i in "${!PROMPTS[@]}"; do
    gen_bg "$T/out$i" "{\"text\":\"${PROMPTS[$i]}\",\"sampling_params\":{\"max_new_tokens\":32,\"temperature\":0}}"
done
waitgen
same=1
for i in "${!PROMPTS[@]}"; do
    a=$($PY -c "import json; print(json.load(open('$T/ref$i'))['text'])" 2>/dev/null)
    b=$($PY -c "import json; print(json.load(open('$T/out$i'))['text'])" 2>/dev/null)
    [ -n "$a" ] && [ "$a" = "$b" ] || same=0
done
check "dp-size 2: the same greedy texts as dp-size 1 (6 concurrent prompts)" "[ $same = 1 ]"
req GET /get_server_info >/dev/null
check "/get_server_info: dp_size 2, internal_states one per replica (the Gateway's DP discovery)" "[ \"\$(jq_ 'd[\"dp_size\"] == 2 and len(d[\"internal_states\"]) == 2')\" = True ]"
req GET /get_load >/dev/null
check "/get_load: one entry per dp_rank (0, 1) with SGLang's fields" "[ \"\$(jq_ 'sorted(e[\"dp_rank\"] for e in d) == [0, 1] and all(set([\"num_reqs\",\"num_waiting_reqs\",\"num_tokens\"]) <= set(e) for e in d)')\" = True ]"
pause
for k in 1 2 3 4; do gen_bg "$T/h$k" "$(body $k 8 4)"; done
wait_sum 4
check "round_robin: 4 requests -> 2 on each replica" "[ \"\$(loads)\" = '2 2' ]"
cont; waitgen
pause
gen_bg "$T/p1" "$(body 11 8 4 '"data_parallel_rank":0')"
gen_bg "$T/p2" "$(body 12 8 4 '"data_parallel_rank":0')"
wait_sum 2
gen_bg "$T/p3" "$(body 13 8 4)"; gen_bg "$T/p4" "$(body 14 8 4)"
wait_sum 4
check "round_robin: 2 pinned to rank 0 + 2 more -> 3/1 (pinning leaves the counter)" "[ \"\$(loads)\" = '3 1' ]"
cont; waitgen
check "data_parallel_rank 2 on dp-size 2: 400 naming the range" "[ \$(req POST /generate \"\$(body 1 4 2 '\"data_parallel_rank\":2')\") = 400 ] && grep -q 'data_parallel_rank 2 is out of range' $T/body"
check "data_parallel_rank \"x\": 400" "[ \$(req POST /generate \"\$(body 1 4 2 '\"data_parallel_rank\":\"x\"')\") = 400 ]"
check "data_parallel_rank on /v1/completions: 400 when out of range" "[ \$(req POST /v1/completions '{\"prompt\":\"Once\",\"max_tokens\":2,\"data_parallel_rank\":-1}') = 400 ]"
check "data_parallel_rank 1 on /v1/completions: served" "[ \$(req POST /v1/completions '{\"prompt\":\"Once\",\"max_tokens\":2,\"data_parallel_rank\":1}') = 200 ]"
# aborts reach both replicas: held requests on each, then abort_all
pause
gen_bg "$T/a0" "$(body 21 8 8 '"data_parallel_rank":0')"
gen_bg "$T/a1" "$(body 22 8 8 '"data_parallel_rank":1')"
wait_sum 2
check "held: one on each replica" "[ \"\$(loads)\" = '1 1' ]"
req POST /abort_request '{"abort_all":true}' >/dev/null
waitgen
check "abort_all: both replicas' requests end with abort" "grep -q '\"abort\"' $T/a0 && grep -q '\"abort\"' $T/a1"
check "abort_all: nothing left on either replica" "wait_sum 0 && [ \"\$(loads)\" = '0 0' ]"
cont
# cache-aware behaviour is absent here: the same prompt alternates replicas
LONG=$(body 31 96 2)
c=""
for k in 1 2 3; do req POST /generate "$LONG" >/dev/null; c="$c $(jq_ 'd["meta_info"]["cached_tokens"]')"; done
check "round_robin: a repeated prompt misses on the other replica (cached:$c)" "echo '$c' | grep -qw 0 && [ \"\$(echo $c | cut -d' ' -f2)\" = 0 ]"
# flush reaches both: a prompt cached on each replica misses on each afterwards
F0=$(body 41 64 2 '"data_parallel_rank":0'); F1=$(body 41 64 2 '"data_parallel_rank":1')
req POST /generate "$F0" >/dev/null; req POST /generate "$F1" >/dev/null
req POST /generate "$F0" >/dev/null; h0=$(jq_ 'd["meta_info"]["cached_tokens"]')
req POST /generate "$F1" >/dev/null; h1=$(jq_ 'd["meta_info"]["cached_tokens"]')
check "before /flush_cache: the prompt is cached on both replicas ($h0, $h1)" "[ $h0 -gt 0 ] && [ $h1 -gt 0 ]"
check "/flush_cache: 200" "[ \$(req POST /flush_cache) = 200 ]"
req POST /generate "$F0" >/dev/null; m0=$(jq_ 'd["meta_info"]["cached_tokens"]')
req POST /generate "$F1" >/dev/null; m1=$(jq_ 'd["meta_info"]["cached_tokens"]')
check "after /flush_cache: a miss on both replicas ($m0, $m1)" "[ $m0 = 0 ] && [ $m1 = 0 ]"
req GET /metrics >/dev/null
check "/metrics: scheduler gauges per dp_rank" "grep -q '^sglang:num_running_reqs{dp_rank=\"0\",' $T/body && grep -q '^sglang:num_running_reqs{dp_rank=\"1\",' $T/body && grep -Eq '^sglang:max_total_num_tokens\{dp_rank=\"1\",.*\} 4096(\.0)?$' $T/body"
# a weight update reaches both replicas (one load, shared): same outputs on each
W0=$(body 81 12 8 '"data_parallel_rank":0'); W1=$(body 81 12 8 '"data_parallel_rank":1')
req POST /generate "$W0" >/dev/null; w_before=$(jq_ 'd["output_ids"]')
check "/update_weights_from_disk (the same folder) with dp-size 2: 200" "[ \$(req POST /update_weights_from_disk '{\"model_path\":\"$M\"}') = 200 ] && [ \"\$(jq_ 'd[\"success\"]')\" = True ]"
req POST /generate "$W0" >/dev/null; w0=$(jq_ 'd["output_ids"]')
req POST /generate "$W1" >/dev/null; w1=$(jq_ 'd["output_ids"]')
check "after the update: both replicas give the same greedy ids as before" "[ '$w_before' = '$w0' ] && [ '$w0' = '$w1' ] && [ -n '$w0' ]"
check "idle: no KV token in use on either replica" "req GET /get_load >/dev/null && [ \"\$(jq_ '[e[\"num_tokens\"] for e in sorted(d, key=lambda e: e[\"dp_rank\"])]')\" = '[0, 0]' ]"
stop
check "shutdown log: each replica ran its leak check, no leak" "grep -Eq 'dp_rank 0: [0-9]+ requests finished, [1-9][0-9]* leak checks, 0 leaks' $T/rr.log && grep -Eq 'dp_rank 1: [0-9]+ requests finished, [1-9][0-9]* leak checks, 0 leaks' $T/rr.log && ! grep -qi 'leak detected' $T/rr.log"
check "start log: the KV budget and the threads split per replica" "grep -q 'dp_rank 1: 1 compute threads' $T/rr.log"

# ------------------------------------------------------------ total_requests
start treq --dp-size 2 --load-balance-method total_requests
pause
gen_bg "$T/q1" "$(body 51 8 4 '"data_parallel_rank":0')"
gen_bg "$T/q2" "$(body 52 8 4 '"data_parallel_rank":0')"
wait_sum 2
gen_bg "$T/q3" "$(body 53 8 4)"; gen_bg "$T/q4" "$(body 54 8 4)"
wait_sum 4
check "total_requests: 2 pinned to rank 0 + 2 more -> 2/2" "[ \"\$(loads)\" = '2 2' ]"
cont; waitgen
stop

# ------------------------------------------------------------ total_tokens
start ttok --dp-size 2 --load-balance-method total_tokens
pause
gen_bg "$T/t1" "$(body 61 300 2)"
wait_sum 1
for k in 2 3 4; do gen_bg "$T/t$k" "$(body 6$k 5 2)"; done
wait_sum 4
l=$(loads)
check "total_tokens: one 300-token prompt + three short ones -> 1/3 ($l)" "[ '$l' = '1 3' ] || [ '$l' = '3 1' ]"
cont; waitgen
stop

# ------------------------------------------------------------ follow_bootstrap_room
start room --dp-size 2 --load-balance-method follow_bootstrap_room
pause
for k in 1 3 5; do gen_bg "$T/r$k" "$(body 7$k 8 2 "\"bootstrap_room\":$k")"; done
wait_sum 3
check "follow_bootstrap_room: rooms 1, 3, 5 -> all on rank 1" "[ \"\$(loads)\" = '0 3' ]"
cont; waitgen
stop

# ------------------------------------------------------------ cache_aware
start cache --dp-size 2 --load-balance-method cache_aware
c=""
for k in 1 2 3 4; do req POST /generate "$LONG" >/dev/null; c="$c $(jq_ 'd["meta_info"]["cached_tokens"]')"; done
check "cache_aware: the repeated prompt hits its replica every time (cached:$c)" "[ \"\$(echo $c | cut -d' ' -f1)\" = 0 ] && ! echo '$c' | cut -d' ' -f3- | grep -qw 0"
OTHER=$(body 99 96 2)
req POST /generate "$OTHER" >/dev/null
check "cache_aware: a new prompt is a miss (cached $(jq_ 'd["meta_info"]["cached_tokens"]'))" "[ \"\$(jq_ 'd[\"meta_info\"][\"cached_tokens\"]')\" = 0 ]"
stop

# ------------------------------------------------------------ refusals
"$BIN" serve --model-path "$M" --dp-size 3 --threads 2 --port "$(freeport)" >"$T/big.log" 2>&1
rc=$?
check "--dp-size 3 with 2 threads: refused (exit $rc) naming why" "[ $rc != 0 ] && grep -q 'dp-size 3 needs at least 3 compute threads' $T/big.log"
"$BIN" serve --model-path "$M" --dp-size 0 --threads 2 --port "$(freeport)" >"$T/zero.log" 2>&1
rc=$?
check "--dp-size 0: refused (exit $rc)" "[ $rc != 0 ] && grep -q 'dp-size must be at least 1, got 0' $T/zero.log"
"$BIN" generate --model-path "$M" --dp-size 2 --prompt hi >"$T/gen.log" 2>&1
rc=$?
check "generate --dp-size 2: exit 2, pointing to sglc serve" "[ $rc = 2 ] && grep -q 'dp-size' $T/gen.log && grep -q 'sglc serve' $T/gen.log"
check "--load-balance-method bogus: exit 2" "! \"$BIN\" server-args --model-path \"$M\" --load-balance-method bogus >/dev/null 2>&1"

echo "test_dp: $(( $(date +%s) - t0 )) s"
[ $fails = 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
