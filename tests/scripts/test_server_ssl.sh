#!/usr/bin/env bash
# test_server_ssl — `sglc serve` over HTTPS (--ssl-certfile / --ssl-keyfile
# / --ssl-keyfile-password / --ssl-ca-certs) on TinyStories-656K with
# self-signed certificates made here by openssl: curl --cacert reaches
# /health and /generate; a client trusting another CA is refused; plain
# HTTP on the port gets no answer; an encrypted key needs its password;
# SGLang's argument checks (pairing, missing files) exit 2.
# Needs: openssl and curl (skips without them).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors"
command -v openssl >/dev/null || { echo "skip: openssl not installed"; exit 77; }
T=$(mktemp -d)
trap server_cleanup EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

mkcert() { # mkcert NAME [openssl genpkey extra args...]: $T/NAME.key, $T/NAME.pem for 127.0.0.1
    local n=$1
    shift
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 "$@" -out "$T/$n.key" 2>"$T/openssl.err" &&
        openssl req -x509 -new -key "$T/$n.key" ${PASSIN:+-passin "$PASSIN"} -days 2 -subj "/CN=127.0.0.1" \
            -addext "subjectAltName=IP:127.0.0.1" -out "$T/$n.pem" 2>>"$T/openssl.err"
}
mkcert a || { cat "$T/openssl.err"; echo "FAIL openssl could not make a certificate"; exit 1; }
mkcert other
PASSIN=pass:s3cret mkcert enc -aes-256-cbc -pass pass:s3cret

# https_start LOG ARGS...: like server_start, over https (curl trusts $T/a.pem)
https_start() {
    local log=$1
    shift
    SERVER_PORT=$(freeport)
    SERVER_URL=https://127.0.0.1:$SERVER_PORT
    "$BIN" serve --host 127.0.0.1 --port "$SERVER_PORT" --model-path "$M" --threads 1 "$@" >"$log" 2>&1 &
    SERVER_PID=$!
    CURL_CA_BUNDLE=$T/a.pem wait_http "$SERVER_URL/health" "$SERVER_PID"
}

https_start "$T/log" --ssl-certfile "$T/a.pem" --ssl-keyfile "$T/a.key" --ssl-ca-certs "$T/other.pem" ||
    server_fail "$T/log"
URL=$SERVER_URL
check "https /health with --cacert" '[ "$(curl -s -o /dev/null -w "%{http_code}" --cacert "$T/a.pem" "$URL/health")" = 200 ]'
curl -s --cacert "$T/a.pem" -H 'Content-Type: application/json' \
    -d '{"input_ids":[1,5,6,7],"sampling_params":{"max_new_tokens":4,"temperature":0}}' "$URL/generate" >"$T/gen.json"
check "https /generate answers 4 tokens" \
    '/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d[\"meta_info\"][\"completion_tokens\"]!=4)" "$T/gen.json"'
curl -s -o /dev/null --cacert "$T/other.pem" "$URL/health"
check "client trusting another CA: certificate refused (curl 60)" '[ $? -eq 60 ]'
code=$(curl -s -o /dev/null -m 5 -w "%{http_code}" "http://127.0.0.1:$SERVER_PORT/health")
check "plain http gets no HTTP answer" '[ "$code" = 000 ]'
openssl s_client -connect "127.0.0.1:$SERVER_PORT" </dev/null >"$T/sc.out" 2>&1
check "--ssl-ca-certs: the server asks for a client certificate of that CA" \
    'grep -q "Acceptable client certificate CA names" "$T/sc.out"'
check "log says https" 'grep -q "ready to roll! https://127.0.0.1:$SERVER_PORT" "$T/log"'
server_stop TERM
check "clean stop" '[ "$SERVER_RC" = 0 ]'

# encrypted key: right password serves, wrong password is a start-up error
https_start "$T/enc.log" --ssl-certfile "$T/enc.pem" --ssl-keyfile "$T/enc.key" --ssl-keyfile-password s3cret
check "encrypted key + password serves" \
    '[ "$(curl -s -o /dev/null -w "%{http_code}" --cacert "$T/enc.pem" "$SERVER_URL/health")" = 200 ]'
openssl s_client -connect "127.0.0.1:$SERVER_PORT" </dev/null >"$T/sc2.out" 2>&1
check "without --ssl-ca-certs no client certificate is asked for" \
    'grep -q "No client certificate CA names sent" "$T/sc2.out"'
server_stop TERM
"$BIN" serve --host 127.0.0.1 --port "$(freeport)" --model-path "$M" --threads 1 --ssl-certfile "$T/enc.pem" \
    --ssl-keyfile "$T/enc.key" --ssl-keyfile-password wrong >"$T/bad.log" 2>&1
rc=$?
check "wrong password: exit 1 with a message" '[ $rc = 1 ] && grep -q "cannot serve HTTPS" "$T/bad.log"'
"$BIN" serve --host 127.0.0.1 --port "$(freeport)" --model-path "$M" --threads 1 --ssl-certfile "$T/a.pem" \
    --ssl-keyfile "$T/other.key" >"$T/bad2.log" 2>&1
rc=$?
check "key not matching the certificate: exit 1" '[ $rc = 1 ] && grep -q "cannot serve HTTPS" "$T/bad2.log"'

# argument checks (SGLang's _handle_ssl_validation), before any loading
sa() { "$BIN" server-args --model-path "$M" "$@" >/dev/null 2>"$T/sa.err"; }
sa --ssl-keyfile "$T/a.key"
check "keyfile without certfile" '[ $? = 2 ] && grep -q -- "--ssl-keyfile requires --ssl-certfile" "$T/sa.err"'
sa --ssl-certfile "$T/a.pem"
check "certfile without keyfile" '[ $? = 2 ] && grep -q -- "--ssl-certfile requires --ssl-keyfile" "$T/sa.err"'
sa --ssl-keyfile-password x
check "password without the pair" '[ $? = 2 ] && grep -q -- "--ssl-keyfile-password requires" "$T/sa.err"'
sa --ssl-certfile "$T/a.pem" --ssl-keyfile "$T/none.key"
check "missing key file" '[ $? = 2 ] && grep -q "SSL key file not found" "$T/sa.err"'
sa --ssl-certfile "$T/a.pem" --ssl-keyfile "$T/a.key"
check "valid pair accepted" '[ $? = 0 ]'

[ "$fails" -eq 0 ] && echo "all ssl checks passed" || { echo "$fails ssl check(s) failed"; exit 1; }
