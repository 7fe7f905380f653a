# lib_dp.sh — the helpers the data-parallel server tests share (test_dp.sh,
# test_dp_tp.sh).  Source after lib_server.sh, with T (a temporary folder),
# PY and COMMON (the server arguments every start adds) set.
#   check WHAT CMD     eval CMD: "ok WHAT" or "FAIL WHAT" (counts fails)
#   start NAME ARGS    a server logging to $T/NAME.log, its URL in URL
#   stop               SIGTERM: exit 0 (a sanitizer report fails it), no KV leak logged
#   req METHOD PATH [BODY]   -> $T/body, prints the HTTP status
#   jq_ EXPR           a Python expression over the last body (d)
#   post_bg OUT PATH BODY / gen_bg OUT BODY, waitgen: requests in the background
#   loads, sum, wait_sum N: num_reqs per dp_rank ("a b"), their sum, wait for it
#   pause, cont        /pause_generation in place, /continue_generation
#   ids SEED LEN, body SEED LEN MAXNEW [EXTRA]: a greedy /generate body over input ids
fails=${fails:-0}
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
start() { # start NAME ARGS...
    NAME=$1; shift
    server_start "$T/$NAME.log" "${COMMON[@]}" "$@" || server_fail "$T/$NAME.log"
    URL=$SERVER_URL
}
stop() {
    server_stop
    check "$NAME: exit 0 after SIGTERM, no KV leak logged" "[ '$SERVER_RC' = 0 ] && ! grep -qi 'leak detected' $T/$NAME.log" ||
        tail -20 "$T/$NAME.log"
}
req() {
    if [ $# -ge 3 ]; then curl -s -m 60 -o "$T/body" -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' --data-binary "$3" "$URL$2"
    else curl -s -m 60 -o "$T/body" -w '%{http_code}' -X "$1" "$URL$2"; fi
}
jq_() { $PY -c "import json,sys; d=json.load(open('$T/body')); print($1)"; }
GEN_PIDS=()
post_bg() {
    curl -s -m 60 -X POST -H 'Content-Type: application/json' --data-binary "$3" "$URL$2" >"$1" &
    GEN_PIDS+=($!)
}
gen_bg() { post_bg "$1" /generate "$2"; }
waitgen() { local p; for p in ${GEN_PIDS[@]+"${GEN_PIDS[@]}"}; do wait "$p"; done; GEN_PIDS=(); }
loads() { req GET /get_load >/dev/null; jq_ '" ".join(str(e["num_reqs"]) for e in sorted(d, key=lambda e: e["dp_rank"]))'; }
sum() { $PY -c "import sys; print(sum(int(x) for x in sys.argv[1:]))" $1; }
wait_sum() { for _ in $(seq 1 100); do [ "$(sum "$(loads)")" = "$1" ] && return 0; sleep 0.05; done; return 1; }
pause() { req POST /pause_generation '{"mode":"in_place"}' >/dev/null; }
cont() { req POST /continue_generation '{}' >/dev/null; }
ids() { $PY -c "import sys; print(','.join(str(1 + (int(sys.argv[1]) * 37 + i * 11) % 2000) for i in range(int(sys.argv[2]))))" "$1" "$2"; }
body() { echo "{\"input_ids\":[$(ids "$1" "$2")],\"sampling_params\":{\"max_new_tokens\":$3,\"temperature\":0}${4:+,$4}}"; }
