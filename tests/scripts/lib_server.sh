# lib_server.sh — start / wait for / stop `sglc serve` in script tests.
# Sourced, not run (tests/run_tests.sh runs only test_*.sh).
#
# Use, in a tests/scripts/test_*.sh that needs a server:
#
#   ROOT=...; BIN=${SGLC_BIN:-$ROOT/build/sglc}; M=<model folder>
#   . "$ROOT/tests/scripts/lib_server.sh"
#   server_require "$M/model.safetensors" # exit 77 (skip) without BIN, curl, python, the files
#   T=$(mktemp -d); trap server_cleanup EXIT
#   server_start "$T/log" --model-path "$M" --threads 1 ... || server_fail "$T/log"
#   curl "$SERVER_URL/health" ...        # also $SERVER_PORT, $SERVER_PID
#   server_stop TERM; echo "$SERVER_RC" # signal (default TERM), wait, exit status
#
# server_start picks a free port and adds `--host 127.0.0.1 --port P`
# itself (do not pass them); it waits for GET /health to answer, up to
# $SGLC_SERVER_WAIT_S seconds (default 30; raise it under sanitizers) or
# until the process dies, and returns 1 when the server did not come up.
# One server at a time per script: call server_stop before the next
# server_start.  Any other background process the test starts (a fake
# backend, a client) can be handed to server_cleanup with `bg_track PID`.
# server_cleanup (the EXIT trap) stops all of them and removes $T.
#
# Needs: $BIN; /usr/bin/python3 (free port); curl.

PY=${PY:-/usr/bin/python3}
SERVER_PID=
SERVER_PORT=
SERVER_URL=
SERVER_RC=
_LIB_SERVER_BG=()

# server_require [PATH...]: skip the test (exit 77) when the binary, curl,
# python or one of the PATHs is missing.
server_require() {
    [ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
    local f
    for f in "$@"; do [ -e "$f" ] || { echo "skip: $f not found"; exit 77; }; done
    [ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
    command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
}

# freeport: print a TCP port nobody listens on now.
freeport() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_http URL [PID] [SECONDS]: poll URL until it answers 2xx (0), or PID
# dies / SECONDS pass (1).  (sglc serve answers /health with 503 while it
# warms up: that is "not yet".)
wait_http() {
    local url=$1 pid=${2:-} secs=${3:-${SGLC_SERVER_WAIT_S:-30}} i
    for i in $(seq 1 $((secs * 5))); do
        curl -sf -o /dev/null "$url" && return 0
        [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && break
        sleep 0.2
    done
    curl -sf -o /dev/null "$url"
}

# server_start LOG ARGS...: `sglc serve ARGS` on a free port, output to LOG.
server_start() {
    local log=$1
    shift
    SERVER_PORT=$(freeport)
    SERVER_URL=http://127.0.0.1:$SERVER_PORT
    "$BIN" serve --host 127.0.0.1 --port "$SERVER_PORT" "$@" >"$log" 2>&1 &
    SERVER_PID=$!
    wait_http "$SERVER_URL/health" "$SERVER_PID"
}

# server_fail LOG: report a server that did not come up, then exit 1.
server_fail() {
    echo "FAIL server did not start"
    cat "$1"
    exit 1
}

# server_stop [SIGNAL]: stop the server, wait for it; exit status in SERVER_RC.
server_stop() {
    SERVER_RC=
    [ -n "$SERVER_PID" ] || return 0
    kill "-${1:-TERM}" "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID"
    SERVER_RC=$?
    SERVER_PID=
}

# bg_track PID: stop PID in server_cleanup as well.
bg_track() { _LIB_SERVER_BG+=("$1"); }

# server_cleanup: the EXIT trap.
server_cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
    local p
    for p in ${_LIB_SERVER_BG[@]+"${_LIB_SERVER_BG[@]}"}; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "${T:-}" ] && rm -rf "$T"
}

# server_gen4 OUT: four concurrent greedy /generate requests to the running
# server (fixed input ids, 24 tokens, ignore_eos), their output_ids one per
# line in OUT ("bad N" for an answer without them).  The TP / PP serving
# tests compare these between layouts.
server_gen4() {
    local i
    for i in 1 2 3 4; do
        curl -s -m 60 "$SERVER_URL/generate" -H 'content-type: application/json' \
            -d "{\"input_ids\":[1,$((100 + i * 37)),$((200 + i)),$((300 + i * 3))],\"sampling_params\":{\"max_new_tokens\":24,\"temperature\":0,\"ignore_eos\":true}}" \
            >"$1.$i" &
    done
    wait $(jobs -p | grep -v "^$SERVER_PID\$") 2>/dev/null
    for i in 1 2 3 4; do "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_ids"])' "$1.$i" || echo "bad $i"; done >"$1"
}
