#!/usr/bin/env bash
# `sglc serve` operations on TinyStories-656K (context 512): SGLang's
# --api-key / --admin-api-key matrix, request logging (levels 0-3, text and
# json, stdout and a folder, /configure_logging at run time), the HTTP
# access log and its level / exclusions, context-length errors vs
# --allow-auto-truncate, --warmups, and /metrics counters.
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

# start NAME ARGS...: a server on a free port (lib_server.sh), output in
# $T/NAME.log; sets URL, PORT, PID, LOG
start() {
    LOG=$T/$1.log
    shift
    server_start "$LOG" --model-path "$M" --threads 1 "$@" || server_fail "$LOG"
    URL=$SERVER_URL PORT=$SERVER_PORT PID=$SERVER_PID
}
stop() { server_stop TERM; PID=; }
# code METHOD PATH [HEADER] -> status
code() { curl -s -m 30 -o "$T/body" -w '%{http_code}' -X "$1" ${3:+-H "$3"} "$URL$2"; }
# post PATH BODY [HEADER] -> status, body in $T/body
post() { curl -s -m 60 -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' ${3:+-H "$3"} --data-binary "$2" "$URL$1"; }
jq_() { $PY -c "import json,sys; d=json.load(open('$T/body')); print($1)"; }
# wait until FILE has a line matching the fixed string
waitfor() { for _ in $(seq 1 50); do grep -qF -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# --- --api-key + --admin-api-key (SGLang's decide_request_auth)
start both --api-key K --admin-api-key AK --enable-metrics
B="Authorization: Bearer"
check "both keys: normal route, no key -> 401 Unauthorized" "[ \$(code GET /get_model_info) = 401 ] && grep -q '\"error\":\"Unauthorized\"' $T/body"
check "both keys: normal route, api key -> 200" "[ \$(code GET /get_model_info \"$B K\") = 200 ]"
check "both keys: normal route, admin key -> 401 (admin key does not open normal routes)" "[ \$(code GET /get_model_info \"$B AK\") = 401 ]"
check "both keys: admin route /flush_cache, no key -> 401" "[ \$(code POST /flush_cache) = 401 ]"
check "both keys: admin route, api key -> 401" "[ \$(code POST /flush_cache \"$B K\") = 401 ]"
check "both keys: admin route, admin key -> 200" "[ \$(code POST /flush_cache \"$B AK\") = 200 ]"
check "both keys: x-api-key header and lower-case bearer accepted" "[ \$(code POST /flush_cache 'x-api-key: AK') = 200 ] && [ \$(code GET /get_model_info 'authorization: bearer K') = 200 ]"
check "both keys: /abort_request and /configure_logging are admin routes" "[ \$(post /abort_request '{}' \"$B K\") = 401 ] && [ \$(post /abort_request '{}' \"$B AK\") = 200 ] && [ \$(post /configure_logging '{}' \"$B K\") = 401 ]"
check "both keys: routes another module adds (/pause_generation, /update_weights_from_disk) are guarded by path" "[ \$(post /pause_generation '{}' \"$B K\") = 401 ] && [ \$(post /update_weights_from_disk '{}') = 401 ] && [ \$(post /continue_generation '{}' \"$B AK\") != 401 ]"
check "both keys: GET /abort_request is not the admin route (normal level: api key passes auth)" "[ \$(code GET /abort_request \"$B K\") != 401 ]"
check "both keys: /health, /health_generate and /metrics need no key" "[ \$(code GET /health) = 200 ] && [ \$(code GET /health_generate) = 200 ] && [ \$(code GET /metrics) = 200 ]"
check "both keys: /get_server_info does not show the admin key" "[ \$(code GET /get_server_info \"$B K\") = 200 ] && ! grep -q AK $T/body && grep -q '\"admin_api_key\":\"<redacted>\"' $T/body"
check "both keys: /generate with the api key" "[ \$(post /generate '{\"input_ids\":[1,2],\"sampling_params\":{\"max_new_tokens\":2}}' \"$B K\") = 200 ]"
stop
start adminonly --admin-api-key AK
check "admin key only: normal route open" "[ \$(code GET /get_model_info) = 200 ]"
check "admin key only: admin route needs it" "[ \$(code POST /flush_cache) = 401 ] && [ \$(code POST /flush_cache \"$B wrong\") = 401 ] && [ \$(code POST /flush_cache \"$B AK\") = 200 ]"
stop
start apionly --api-key K
check "api key only: admin route takes the api key" "[ \$(code POST /flush_cache) = 401 ] && [ \$(code POST /flush_cache \"$B K\") = 200 ]"
check "api key only: /metrics without --enable-metrics -> 404" "[ \$(code GET /metrics) = 404 ]"
stop

# --- request logging: text, level 2, stdout + a folder
SGLANG_LOG_REQUEST_HEADERS="X-Test-Header, X-Other" start rl --log-requests --log-requests-level 2 --log-requests-target stdout "$T/rl" --allow-auto-truncate
check "text level 2: Receive line with the prompt" "[ \$(post /generate '{\"text\":\"Once upon a time\",\"sampling_params\":{\"max_new_tokens\":3,\"temperature\":0},\"rid\":\"r-one\"}' 'x-smg-routing-key: rk-7') = 200 ] && waitfor $LOG \"Receive: obj=GenerateReqInput(text='Once upon a time', input_ids=[\""
check "text level 2: Finish line with sampling params, rid, output and the routing-key header" "waitfor $LOG \"Finish: obj=GenerateReqInput(text='Once upon a time'\" && grep 'Finish: obj=' $LOG | grep \"rid='r-one'\" | grep \"sampling_params={'max_new_tokens': 3, 'temperature': 0}\" | grep \"headers={'x-smg-routing-key': 'rk-7'}\" | grep -q \"out={'text': \""
check "\$SGLANG_LOG_REQUEST_HEADERS adds headers to the whitelist (lower-cased)" "[ \$(post /generate '{\"input_ids\":[1,2],\"sampling_params\":{\"max_new_tokens\":1},\"rid\":\"r-hdr\"}' 'X-Test-Header: tv-1') = 200 ] && waitfor $LOG \"headers={'x-test-header': 'tv-1'}\""
check "folder target: <host>_0.log has the same lines" "f=\$(ls $T/rl/*_0.log) && grep -q \"Receive: obj=GenerateReqInput(text='Once upon a time'\" \$f && grep -q 'Finish: obj=' \$f"
check "level 2: input_ids-only request logs None on receive, the decoded text on finish" "[ \$(post /generate '{\"input_ids\":[1,80,147],\"sampling_params\":{\"max_new_tokens\":2},\"rid\":\"r-ids\"}') = 200 ] && waitfor $LOG \"rid='r-ids'\" && grep 'Receive:' $LOG | grep \"rid='r-ids'\" | grep -q 'text=None' && grep 'Finish:' $LOG | grep \"rid='r-ids'\" | grep -qv 'text=None'"
check "text level 2: OpenAI body logged raw (Receive OpenAI:) and as GenerateReqInput" "[ \$(post /v1/completions '{\"model\":\"m\",\"prompt\":\"Hello there\",\"max_tokens\":2,\"rid\":\"r-oai-t\"}' 'x-smg-routing-key: rk-9') = 200 ] && waitfor $LOG \"Receive OpenAI: obj={'model': 'm', 'prompt': 'Hello there', 'max_tokens': 2, 'rid': 'r-oai-t'}, headers={'x-smg-routing-key': 'rk-9'}\" && waitfor $LOG \"Finish: obj=GenerateReqInput(text='Hello there', input_ids=[\""
check "text level 2: health checks are logged (rid HEALTH_CHECK_...), as SGLang" "[ \$(code GET /health_generate) = 200 ] && waitfor $LOG \"Finish: obj=GenerateReqInput(text=\" && grep -q \"rid='HEALTH_CHECK_\" $LOG"
LONG=$($PY -c "print('a'*1500 + 'b'*1500)")
A1024=$($PY -c "print('a'*1024)"); B1024=$($PY -c "print('b'*1024)")
check "level 2: a 3000-char prompt logs its first and last 1024 chars" "[ \$(post /generate '{\"text\":\"$LONG\",\"sampling_params\":{\"max_new_tokens\":1},\"rid\":\"r-long\"}') = 200 ] && waitfor $LOG \"rid='r-long'\" && grep 'Receive:' $LOG | grep \"rid='r-long'\" | grep -q \"text='$A1024' ... '$B1024'\" && ! grep 'Receive:' $LOG | grep \"rid='r-long'\" | grep -q 'aaaaa'\"$A1024\""
check "/configure_logging: level 0 -> metadata only (no text, ids, sampling params)" "[ \$(post /configure_logging '{\"log_requests_level\":0}') = 200 ] && [ ! -s $T/body ] && [ \$(post /generate '{\"text\":\"The cat\",\"sampling_params\":{\"max_new_tokens\":2},\"rid\":\"r-l0\"}') = 200 ] && waitfor $LOG \"Finish: obj=GenerateReqInput(rid='r-l0'\" && grep \"rid='r-l0'\" $LOG | grep -v 'text=' | grep -v 'input_ids=' | grep -v 'sampling_params=' | grep -v \"'output_ids'\" | grep -q \"out={'meta_info'\""
check "/configure_logging: level 1 adds sampling params, still no text" "[ \$(post /configure_logging '{\"log_requests_level\":1}') = 200 ] && [ \$(post /generate '{\"text\":\"The dog\",\"sampling_params\":{\"max_new_tokens\":2},\"rid\":\"r-l1\"}') = 200 ] && waitfor $LOG \"Finish: obj=GenerateReqInput(sampling_params={'max_new_tokens': 2}, rid='r-l1'\" && ! grep \"rid='r-l1'\" $LOG | grep -q 'text='"
check "/configure_logging: json level 3 -> request.received / request.finished events, the long prompt whole" "[ \$(post /configure_logging '{\"log_requests_format\":\"json\",\"log_requests_level\":3}') = 200 ] && [ \$(post /generate '{\"text\":\"$LONG\",\"sampling_params\":{\"max_new_tokens\":1},\"rid\":\"r-json\"}') = 200 ] && waitfor $LOG '\"event\": \"request.finished\"' && $PY -c \"
import json
ev = [json.loads(l) for l in open('$LOG') if l.startswith('{')]
ev = [e for e in ev if e.get('rid') == 'r-json']
assert [e['event'] for e in ev] == ['request.received', 'request.finished'], ev
assert ev[0]['obj']['text'] == 'a'*1500 + 'b'*1500 and 'T' in ev[0]['timestamp']
assert ev[1]['out']['meta_info']['prompt_tokens'] == 506  # cut to max_req_input_len
\""
check "/configure_logging: json level 2 cuts the prompt as SGLang (1024 + ... + 1024)" "[ \$(post /configure_logging '{\"log_requests_level\":2}') = 200 ] && [ \$(post /generate '{\"text\":\"$LONG\",\"sampling_params\":{\"max_new_tokens\":1},\"rid\":\"r-json2\"}') = 200 ] && waitfor $LOG '\"rid\": \"r-json2\", \"obj\"' && $PY -c \"
import json
ev = [json.loads(l) for l in open('$LOG') if l.startswith('{')]
ev = [e for e in ev if e.get('rid') == 'r-json2' and e['event'] == 'request.received']
assert ev[0]['obj']['text'] == 'a'*1024 + '...' + 'b'*1024, ev[0]['obj']['text'][:50]
\""
check "json: OpenAI request -> request.received.openai (raw body) then received / finished" "[ \$(post /v1/completions '{\"model\":\"m\",\"prompt\":\"Hello there\",\"max_tokens\":2,\"rid\":\"r-oai\"}') = 200 ] && waitfor $LOG '\"rid\": \"r-oai\", \"obj\"' && grep -q '\"event\": \"request.received.openai\", \"obj\": {\"model\": \"m\", \"prompt\": \"Hello there\", \"max_tokens\": 2, \"rid\": \"r-oai\"}' $LOG"
check "/configure_logging: bad level -> 400, nothing changed" "[ \$(post /configure_logging '{\"log_requests_level\":7,\"log_requests\":false}') = 400 ] && [ \$(post /generate '{\"text\":\"A bird\",\"sampling_params\":{\"max_new_tokens\":1},\"rid\":\"r-still\"}') = 200 ] && waitfor $LOG '\"rid\": \"r-still\"'"
check "/configure_logging: log_requests false stops the lines" "[ \$(post /configure_logging '{\"log_requests\":false}') = 200 ] && [ \$(post /generate '{\"text\":\"A fish\",\"sampling_params\":{\"max_new_tokens\":1},\"rid\":\"r-off\"}') = 200 ] && sleep 0.3 && ! grep -q 'r-off' $LOG && grep -q 'Config logging: obj=ConfigureLoggingReq(log_requests=False' $LOG"
check "/configure_logging: unsupported dump folder -> 400" "[ \$(post /configure_logging '{\"dump_requests_folder\":\"/tmp/x\"}') = 400 ] && grep -q 'not supported' $T/body"
check "/configure_logging: no body -> 400" "[ \$(code POST /configure_logging) = 400 ]"
# the log changes while requests are in flight: 8 concurrent streams, level toggled under them
post /configure_logging '{"log_requests":true,"log_requests_format":"text"}' >/dev/null
for i in 1 2 3 4 5 6 7 8; do curl -s -m 30 -o "$T/c$i" "$URL/generate" -d "{\"input_ids\":[1,2,3],\"stream\":true,\"sampling_params\":{\"max_new_tokens\":200,\"ignore_eos\":true},\"rid\":\"conc-$i\"}" & done
for l in 0 3 1 2 0 3; do post /configure_logging "{\"log_requests_level\":$l,\"log_requests_format\":\"$([ $l = 3 ] && echo json || echo text)\"}" >/dev/null; done
wait $(jobs -p | grep -v "^$PID$") 2>/dev/null
check "configure while 8 streams run: every stream ends with [DONE], one whole finish line each" "for i in 1 2 3 4 5 6 7 8; do tail -c 20 $T/c\$i | grep -q 'DONE' || exit 1; done; [ \$(grep -c 'conc-' $LOG) -ge 16 ] && ! grep 'conc-' $LOG | grep -v '^Receive: obj=\|^Finish: obj=\|^{\"timestamp\"' | grep -q ."
stop

# --- access log (uvicorn format), --log-level-http, exclusions
start acc
code GET /get_model_info >/dev/null; code GET /nope >/dev/null
check "access log: uvicorn-style lines with client, request line and status" "waitfor $LOG '\"GET /get_model_info HTTP/1.1\" 200 OK' && grep -q '^\[....-..-.. ..:..:..\] INFO:     127.0.0.1:[0-9]* - \"GET /nope HTTP/1.1\" 404 Not Found' $LOG"
stop
start accwarn --log-level-http warning
code GET /get_model_info >/dev/null
check "--log-level-http warning: no access lines" "sleep 0.3; ! grep -q 'GET /get_model_info' $LOG"
stop
start accinfo --log-level warning --log-level-http info --uvicorn-access-log-exclude-prefixes /health /get_load
code GET /get_model_info >/dev/null; code GET /get_load >/dev/null
check "--log-level-http info under --log-level warning; excluded prefixes dropped" "waitfor $LOG 'GET /get_model_info' && ! grep -q 'GET /health' $LOG && ! grep -q 'GET /get_load' $LOG"
stop
check "--uvicorn-access-log-exclude-prefixes takes zero values (nargs=*)" "\"$BIN\" server-args --model-path m --uvicorn-access-log-exclude-prefixes --port 5 | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"uvicorn_access_log_exclude_prefixes\"] == [] and d[\"port\"] == 5'"
check "--log-level-http bogus -> exit 2" "\"$BIN\" serve --model-path \"$M\" --log-level-http loud --port 1 >/dev/null 2>\"$T/lh.err\"; [ \$? -eq 2 ] && grep -q log-level-http \"$T/lh.err\""

# --- context length: 400 without --allow-auto-truncate, truncation with it
IDS600=$($PY -c "print(list(range(3, 603)))")
IDS508=$($PY -c "print(list(range(3, 511)))")
start notrunc
check "input >= context (600 ids) -> 400 SGLang message" "[ \$(post /generate '{\"input_ids\":$IDS600}') = 400 ] && grep -q \"The input (600 tokens) is longer than the model's context length (512 tokens).\" $T/body"
check "input + max_new_tokens > context -> 400 SGLang message" "[ \$(post /generate '{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":600}}') = 400 ] && grep -q 'Requested token count exceeds the model.s maximum context length of 512 tokens. You requested a total of 603 tokens: 3 tokens from the input messages and 600 tokens for the completion.' $T/body"
check "input >= max_req_input_len (508 >= 506) -> 400 'enable --allow-auto-truncate'" "[ \$(post /generate '{\"input_ids\":$IDS508}') = 400 ] && grep -q 'Input length (508 tokens) exceeds the maximum allowed length (506 tokens). Use a shorter input or enable --allow-auto-truncate.' $T/body"
check "OpenAI route: the same 400 in the OpenAI error shape" "[ \$(post /v1/completions '{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":1000}') = 400 ] && [ \"\$(jq_ 'd[\"object\"], d[\"code\"]')\" = 'error 400' ]"
check "max_new_tokens that fits is untouched" "[ \$(post /generate '{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":5,\"ignore_eos\":true}}') = 200 ] && [ \"\$(jq_ 'd[\"meta_info\"][\"completion_tokens\"]')\" = 5 ]"
stop
start trunc --allow-auto-truncate
# SGLang's order: the input is first cut to context_len (512), so an explicit
# max_new_tokens then has no room left (lowered to 0); the scheduler then
# cuts the input to max_req_input_len (506)
check "--allow-auto-truncate: 600 ids -> 200, prompt cut to 506, explicit max_new_tokens lowered to 0" "[ \$(post /generate '{\"input_ids\":$IDS600,\"sampling_params\":{\"max_new_tokens\":2}}') = 200 ] && [ \"\$(jq_ 'd[\"meta_info\"][\"prompt_tokens\"], d[\"meta_info\"][\"completion_tokens\"]')\" = '506 0' ] && grep -q 'The input (600 tokens) is longer than the model.s context length (512 tokens). Truncating the input.' $LOG && grep -q 'Request length is longer than the KV cache pool size or the max context length. Truncated.' $LOG"
check "--allow-auto-truncate: max_new_tokens 600 on 3 ids -> as if 509 (context - input) was asked" "[ \$(post /generate '{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":509,\"ignore_eos\":true}}') = 200 ] && C=\$(jq_ 'd[\"meta_info\"][\"completion_tokens\"]') && [ \$(post /generate '{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":600,\"ignore_eos\":true}}') = 200 ] && [ \"\$(jq_ 'd[\"meta_info\"][\"completion_tokens\"]')\" = \"\$C\" ] && [ \$C -ge 500 ] && grep -q 'Requested token count (3 input + 600 new) exceeds the model.s context length (512 tokens). Truncating max_new_tokens.' $LOG"
check "--allow-auto-truncate: the output ids equal those of the input cut by hand" "[ \$(post /generate '{\"input_ids\":$IDS600,\"sampling_params\":{\"temperature\":0}}') = 200 ] && A=\$(jq_ 'd[\"output_ids\"]') && [ \"\$A\" != '[]' ] && [ \$(post /generate \"{\\\"input_ids\\\":\$($PY -c 'print(list(range(3, 509)))'),\\\"sampling_params\\\":{\\\"temperature\\\":0}}\") = 200 ] && [ \"\$(jq_ 'd[\"output_ids\"]')\" = \"\$A\" ]"
stop

# --- --warmups
check "--warmups unknown -> exit 2 listing the known ones" "\"$BIN\" serve --model-path \"$M\" --warmups prefill_shapes,nope --port 1 >/dev/null 2>\"$T/wu.err\"; [ \$? -eq 2 ] && grep -q \"unknown warmup 'nope' (known: voice_chat, prefill_shapes)\" \"$T/wu.err\""
start wu --warmups prefill_shapes,voice_chat --skip-server-warmup
check "--warmups run before the server is ready" "waitfor $LOG 'fired up' && $PY -c \"
log = open('$LOG').read()
a, b, c, d = log.find('Running warmup prefill_shapes'), log.find('warmup prefill_shapes: 6 sizes'), log.find('warmup voice_chat: 126 requests'), log.find('fired up')
assert 0 <= a < b < c < d, (a, b, c, d)
\""
stop

# --- /metrics
start met --enable-metrics --served-model-name tiny --bucket-time-to-first-token 0.5 1 100 \
    --collect-tokens-histogram --prompt-tokens-buckets custom 3 5 --generation-tokens-buckets tse 8 2 2
metric() { curl -s "$URL/metrics" | $PY -c "import sys; print(sum(float(l.split()[-1]) for l in sys.stdin if l.startswith('$1{') or l.startswith('$1 ')))"; }
P0=$(metric sglang:prompt_tokens_total); G0=$(metric sglang:generation_tokens_total); N0=$(metric sglang:num_requests_total)
T0=$(metric sglang:time_to_first_token_seconds_count); I0=$(metric sglang:inter_token_latency_seconds_count); E0=$(metric sglang:e2e_request_latency_seconds_count)
curl -s "$URL/generate" -d '{"input_ids":[1,2,3,4],"stream":true,"sampling_params":{"max_new_tokens":8,"ignore_eos":true}}' >/dev/null
curl -s "$URL/generate" -d '{"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":5,"ignore_eos":true}}' >/dev/null
curl -s "$URL/health_generate" >/dev/null
sleep 0.2
check "metrics: prompt / generation tokens and requests counted (health checks not)" "[ \$(metric sglang:prompt_tokens_total) = \$($PY -c \"print($P0 + 7)\") ] && [ \$(metric sglang:generation_tokens_total) = \$($PY -c \"print($G0 + 13)\") ] && [ \$(metric sglang:num_requests_total) = \$($PY -c \"print($N0 + 2)\") ]"
check "metrics: ttft and e2e histograms +2, inter-token latency counts the streamed tokens after the first" "[ \$(metric sglang:time_to_first_token_seconds_count) = \$($PY -c \"print($T0 + 2)\") ] && [ \$(metric sglang:e2e_request_latency_seconds_count) = \$($PY -c \"print($E0 + 2)\") ] && [ \$($PY -c \"print(\$(metric sglang:inter_token_latency_seconds_count) - $I0 >= 7)\") = True ]"
check "metrics: SGLang names, labels, custom ttft buckets, default e2e buckets" "curl -s $URL/metrics >$T/m && grep -q '^sglang:num_running_reqs{engine_type=\"unified\",model_name=\"tiny\",pp_rank=\"0\",tp_rank=\"0\"} 0.0' $T/m && grep -q '^sglang:num_queue_reqs{' $T/m && grep -q '^sglang:token_usage{' $T/m && grep -q '^sglang:cache_hit_rate{' $T/m && grep -q '^sglang:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.5\"}' $T/m && grep -q 'time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"100.0\"}' $T/m && grep -q 'e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"2400.0\"}' $T/m && grep -q '^# TYPE sglang:generation_tokens_total counter' $T/m"
check "metrics: --collect-tokens-histogram with custom / tse bucket rules" "grep -q '^sglang:prompt_tokens_histogram_bucket{model_name=\"tiny\",le=\"3.0\"} 1.0' $T/m && grep -q '^sglang:prompt_tokens_histogram_bucket{model_name=\"tiny\",le=\"5.0\"} 2.0' $T/m && grep -q '^sglang:generation_tokens_histogram_bucket{model_name=\"tiny\",le=\"6.0\"} 1.0' $T/m && grep -q '^sglang:generation_tokens_histogram_bucket{model_name=\"tiny\",le=\"8.0\"} 2.0' $T/m && grep -q '^sglang:generation_tokens_histogram_bucket{model_name=\"tiny\",le=\"10.0\"} 2.0' $T/m"
stop
check "--bucket-time-to-first-token not increasing -> exit 2" "\"$BIN\" serve --model-path \"$M\" --enable-metrics --bucket-time-to-first-token 2 1 --port 1 >/dev/null 2>\"$T/bk.err\"; [ \$? -eq 2 ] && grep -q increasing \"$T/bk.err\""

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all server ops checks passed"
