#!/usr/bin/env bash
# test_server_args — `sglc server-args` end to end: exit statuses (0 ok,
# 2 for every argument error), the messages, --config YAML with the
# command line winning, --help grouping and markers, the JSON keys.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SGLC=${SGLC_BIN:-$ROOT/build/sglc}
[ -x "$SGLC" ] || { echo "sglc binary not built: $SGLC"; exit 1; }
TMP=$(mktemp -d /tmp/sglc_args_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi; }
run() { "$SGLC" server-args "$@" >"$TMP/out" 2>"$TMP/err"; RC=$?; }
jget() { /usr/bin/python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v))' "$TMP/out" "$1"; }

expect_err() { # expect_err MESSAGE ARGS...
  local msg=$1; shift
  run "$@"
  if [ "$RC" -ne 2 ]; then echo "  rc=$RC for $*"; return 1; fi
  grep -qF -- "$msg" "$TMP/err" || { echo "  got: $(cat "$TMP/err")"; return 1; }
}

run --model-path /m --port 8080 --disable-radix-cache --schedule-policy lpm
check "valid args exit 0" [ "$RC" -eq 0 ]
check "port in JSON" [ "$(jget port)" = 8080 ]
check "derived tokenizer_path" [ "$(jget tokenizer_path)" = '"/m"' ]
check "None is null" [ "$(jget context_length)" = null ]
check "bool flag true" [ "$(jget disable_radix_cache)" = true ]
check "random seed drawn" bash -c "[ \"\$(/usr/bin/python3 -c 'import json;print(type(json.load(open(\"$TMP/out\"))[\"random_seed\"]).__name__)')\" = int ]"

check "not-yet arg: exit 2 + message" expect_err "--enable-multimodal is not supported by sglc yet" --enable-multimodal
check "not-yet valued arg" expect_err "--attn-cp-size is not supported by sglc yet" --attn-cp-size 2
check "unknown arg + suggestion" expect_err "unrecognized argument '--max-totl-tokens'; did you mean '--max-total-tokens'?" --max-totl-tokens 5
run --max-total-token 5
check "unique prefix accepted (argparse)" [ "$RC" -eq 0 -a "$(jget max_total_tokens)" = 5 ]
check "ambiguous prefix: exit 2 + argparse's message" expect_err "ambiguous option: --enable-lo could match --enable-lora, --enable-lora-overlap-loading" --enable-lo
check "bad int" expect_err "--context-length: invalid int value 'lots'" --context-length lots
check "bad choice" expect_err "--dtype: invalid choice 'fp8'" --dtype fp8
check "missing value" expect_err "--host expects a value" --host
check "bad JSON" expect_err "--json-model-override-args: invalid JSON" --json-model-override-args '{'
check "missing config file" expect_err "--config $TMP/none.yaml: No such file or directory" --config "$TMP/none.yaml"

cat >"$TMP/c.yaml" <<'YAML'
model_path: /from/config
port: 7000
max-running-requests: 8
disable_radix_cache: true
YAML
run --config "$TMP/c.yaml" --port 7001
check "config applied" [ "$RC" -eq 0 -a "$(jget model_path)" = '"/from/config"' -a "$(jget max_running_requests)" = 8 ]
check "command line wins over config" [ "$(jget port)" = 7001 ]
printf 'enable-multimodal: true\n' >"$TMP/bad.yaml"
check "not-yet in config: exit 2" expect_err "--enable-multimodal is not supported by sglc yet (in $TMP/bad.yaml)" --config "$TMP/bad.yaml"

"$SGLC" server-args --help >"$TMP/help" 2>&1
check "--help exits 0" [ $? -eq 0 ]
check "help groups" grep -q '^Memory and scheduling:$' "$TMP/help"
check "help marks not yet" grep -q -- '--enable-multimodal  (not yet)$' "$TMP/help"
check "help marks ignored" grep -q -- '--trust-remote-code  (ignored)$' "$TMP/help"

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all server-args checks passed"
