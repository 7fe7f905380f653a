#!/usr/bin/env bash
# test_gateway_routes — the worker routes SGLang's Model Gateway
# (sgl-model-gateway, formerly sgl-router) polls answer in the shapes it
# parses.  The checker mirrors the gateway's Rust types, as serde reads
# them (an Option<usize> takes an integer >= 0 or null, nothing else; a
# field of the wrong type fails the whole struct):
#   - core/steps/worker/local/discover_metadata.rs: ServerInfo from
#     GET /server_info {model_id|model, model_path, served_model_name:
#     Option<String>, dp_size, max_batch_size, max_total_tokens,
#     max_prefill_tokens, max_running_requests, max_num_reqs:
#     Option<usize>, version: Option<String>}; ModelInfo from
#     GET /model_info {model_path, tokenizer_path, model_type:
#     Option<String>, is_generation: Option<bool>, architectures:
#     Option<Vec<String>>}
#   - discover_dp.rs get_dp_info: dp_size must be there; the model id is
#     model_id, else served_model_name, else the last part of model_path
#   - worker_manager.rs get_worker_load: GET /get_load is an array, the
#     load is the sum of each entry's integer num_tokens
#   - health checks: GET /health answers 2xx
# The same for SGLang's older names (/get_server_info, /get_model_info),
# with --api-key as the gateway sends it (Authorization: Bearer).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$ROOT/../shared/models/TinyStories-656K
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
T=$(mktemp -d /tmp/sglc_gw.XXXXXX)
trap server_cleanup EXIT

server_start "$T/log" --model-path "$M" --threads 1 --served-model-name tiny-gw --api-key K \
    --max-total-tokens 4096 || server_fail "$T/log"
fails=0
for route in /health /server_info /get_server_info /model_info /get_model_info /get_load; do
  code=$(curl -s -o "$T/${route#/}.json" -w '%{http_code}' -H 'Authorization: Bearer K' "$SERVER_URL$route")
  [ "$code" = 200 ] || { echo "FAIL $route: HTTP $code"; fails=$((fails + 1)); }
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$SERVER_URL/server_info")
[ "$code" = 401 ] || { echo "FAIL /server_info without the key: HTTP $code"; fails=$((fails + 1)); }
# a request in flight shows in /get_load's num_tokens
curl -s -H 'Authorization: Bearer K' "$SERVER_URL/generate" \
    -d '{"text":"Once upon a time","sampling_params":{"max_new_tokens":64,"ignore_eos":true}}' >/dev/null

"$PY" - "$T" "$M" <<'PYEOF' || fails=$((fails + 1))
import json, sys, os
T, M = sys.argv[1], sys.argv[2]
def load(n): return json.load(open(os.path.join(T, n)))
bad = []
def usize(d, k):
    v = d.get(k)
    if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
        bad.append('%s: not an Option<usize>: %r' % (k, v))
def ostr(d, k):
    v = d.get(k)
    if v is not None and not isinstance(v, str): bad.append('%s: not an Option<String>: %r' % (k, v))
for name in ('server_info.json', 'get_server_info.json'):
    si = load(name)
    for k in ('model_id', 'model', 'model_path', 'served_model_name', 'version'): ostr(si, k)
    for k in ('dp_size', 'max_batch_size', 'max_total_tokens', 'max_prefill_tokens', 'max_running_requests',
              'max_num_reqs'): usize(si, k)
    # get_dp_info: dp_size required; the model id from served_model_name here
    if si.get('dp_size') is None: bad.append('dp_size missing (DP-aware discovery fails)')
    mid = si.get('model_id') or si.get('model') or si.get('served_model_name') or \
        (si.get('model_path') or '').split('/')[-1]
    if mid != 'tiny-gw': bad.append('gateway model id %r' % mid)
    if si.get('model_path') != M: bad.append('model_path %r' % si.get('model_path'))
    if si.get('max_total_tokens') != 4096: bad.append('max_total_tokens %r' % si.get('max_total_tokens'))
    # SGLang's scheduler info and per-DP internal states
    if si.get('status') != 'ready': bad.append('status %r' % si.get('status'))
    for k in ('max_total_num_tokens', 'max_req_input_len'): usize(si, k)
    if not (isinstance(si.get('max_req_input_len'), int) and 0 < si['max_req_input_len'] < si['max_total_num_tokens']):
        bad.append('max_req_input_len %r' % si.get('max_req_input_len'))
    ist = si.get('internal_states')
    if not (isinstance(ist, list) and len(ist) == si['dp_size'] and all(isinstance(x, dict) for x in ist)):
        bad.append('internal_states %r' % ist)
    if si.get('admin_api_key') not in (None, '<redacted>'): bad.append('admin key leaked')
for name in ('model_info.json', 'get_model_info.json'):
    mi = load(name)
    for k in ('model_path', 'tokenizer_path', 'model_type'): ostr(mi, k)
    if not isinstance(mi.get('is_generation'), bool): bad.append('is_generation %r' % mi.get('is_generation'))
    a = mi.get('architectures')
    if not (isinstance(a, list) and a and all(isinstance(x, str) for x in a)): bad.append('architectures %r' % a)
    cfg = json.load(open(os.path.join(M, 'config.json')))
    if mi.get('model_type') != cfg.get('model_type'): bad.append('model_type %r, config.json %r' % (mi.get('model_type'), cfg.get('model_type')))
    if a != cfg.get('architectures'): bad.append('architectures %r, config.json %r' % (a, cfg.get('architectures')))
gl = load('get_load.json')
if not isinstance(gl, list) or not gl: bad.append('get_load: not a non-empty array: %r' % gl)
else:
    for e in gl:
        for k in ('dp_rank', 'num_reqs', 'num_waiting_reqs', 'num_tokens'):
            if not isinstance(e.get(k), int): bad.append('get_load entry %s: %r' % (k, e.get(k)))
    if sorted(e['dp_rank'] for e in gl) != list(range(len(gl))): bad.append('dp_rank values %r' % gl)
if open(os.path.join(T, 'health.json')).read() not in ('',):
    pass  # SGLang answers 200 with an empty body; any body is fine for the gateway
if bad:
    print('FAIL ' + '; '.join(bad)); sys.exit(1)
print('ok   server_info, model_info, get_load parse as the gateway parses them')
PYEOF

# load under way: the sum of num_tokens grows while a request runs
# (several requests, polled with curl alone: one 400-token request on this
# model can end before a poll that starts a Python interpreter comes back)
for k in 1 2 3 4 5 6; do
  (curl -s -H 'Authorization: Bearer K' "$SERVER_URL/generate" \
      -d '{"text":"Once upon a time '"$k"'","sampling_params":{"max_new_tokens":400,"ignore_eos":true}}' >/dev/null) &
  bg_track $!
done
seen=0
for i in $(seq 1 200); do
  s=$(curl -s -H 'Authorization: Bearer K' "$SERVER_URL/get_load" |
      grep -o '"num_tokens": *[0-9]*' | grep -o '[0-9]*$' | awk '{t += $1} END {print t + 0}')
  [ "${s:-0}" -gt 0 ] && { seen=1; break; }
done
if [ $seen = 1 ]; then echo "ok   /get_load num_tokens counts a running request ($s)"; else
  echo "FAIL /get_load num_tokens stayed 0 while a request ran"; fails=$((fails + 1)); fi

server_stop TERM
if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all gateway route checks passed"
