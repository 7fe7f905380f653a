#!/usr/bin/env bash
# test_server_export — --export-metrics-to-file on TinyStories-656K: one
# JSON line per finished request in DIR/sglang-request-metrics-<hour>.log
# (SGLang's FileRequestMetricsExporter): request_parameters (the request's
# non-null fields as a JSON string) plus the meta_info keys; health checks
# are not exported; the folder is created; no dir = usage error.
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
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

"$BIN" server-args --model-path "$M" --export-metrics-to-file >/dev/null 2>"$T/err"
check "no dir: exit 2" '[ $? = 2 ] && grep -q -- "--export-metrics-to-file-dir is required" "$T/err"'

server_start "$T/log" --model-path "$M" --threads 1 --export-metrics-to-file --export-metrics-to-file-dir "$T/m/x" ||
    server_fail "$T/log"
post() { curl -s -H 'Content-Type: application/json' -d "$2" "$SERVER_URL$1" >/dev/null; }
post /generate '{"text":"Once upon a time","sampling_params":{"max_new_tokens":3,"temperature":0},"rid":"a1"}'
post /generate '{"input_ids":[1,5,6],"sampling_params":{"max_new_tokens":2,"temperature":0},"rid":"a2"}'
post /v1/completions '{"model":"x","prompt":"Hello","max_tokens":4,"temperature":0}'
curl -s -o /dev/null "$SERVER_URL/health_generate"
server_stop TERM
f=$(ls "$T"/m/x/sglang-request-metrics-*.log 2>/dev/null | head -1)
check "hourly file in the created folder" '[ -n "$f" ] && [[ "$(basename "$f")" =~ ^sglang-request-metrics-[0-9]{8}_[0-9]{2}\.log$ ]]'
check "three records (health check left out)" '[ "$(wc -l <"$f")" = 3 ]'
"$PY" - "$f" <<'PYEOF' >"$T/py.out" 2>&1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in recs:
    p = json.loads(r["request_parameters"])
    assert None not in p.values(), p
    by[p.get("rid")] = (p, r)
p, r = by["a1"]
assert p["text"] == "Once upon a time" and p["sampling_params"]["max_new_tokens"] == 3, p
assert r["completion_tokens"] == 3 and r["prompt_tokens"] > 0 and r["e2e_latency"] > 0, r
assert r["finish_reason"]["type"] == "length", r
p, r = by["a2"]
assert p["input_ids"] == [1, 5, 6] and r["prompt_tokens"] == 3 and r["completion_tokens"] == 2, (p, r)
others = [v for k, v in by.items() if k not in ("a1", "a2")]
assert len(others) == 1 and others[0][1]["completion_tokens"] == 4, others
print("records ok")
PYEOF
check "record contents (SGLang's keys)" 'grep -q "records ok" "$T/py.out" || { cat "$T/py.out"; false; }'

[ "$fails" -eq 0 ] && echo "all export checks passed" || { echo "$fails export check(s) failed"; exit 1; }
