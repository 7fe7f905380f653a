#!/usr/bin/env bash
# test_hub_download — `sglc download` against a local stand-in for the
# Hugging Face hub (tests/scripts/hf_hub_server.py, loopback only, bounded
# lifetime, killed on exit) serving shared/models/TinyStories-656K:
#   fresh download into a temp HF_HOME, byte-identical files, hub cache
#   layout (blobs/, snapshots/<commit>/ symlinks, refs/main), no decoy
#   files; resume inside one run after a cut transfer; resume across runs
#   from a .incomplete file (Range request); a second run fetches no bytes;
#   HF_HUB_OFFLINE=1 uses the cache; unreachable hub falls back to the
#   cache; 404 repo / revision and 401 private repo give clear errors;
#   HF_TOKEN is sent; --download-dir is the cache folder.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SGLC=${SGLC_BIN:-$ROOT/build/sglc}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
MODEL=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
[ -x "$SGLC" ] || { echo "sglc binary not built: $SGLC"; exit 1; }
[ -f "$MODEL/model.safetensors" ] || { echo "skip: $MODEL not found"; exit 77; }
[ -x "$PY" ] || { echo "skip: $PY not available"; exit 77; }

TMP=$(mktemp -d /tmp/sglc_hub_test.XXXXXX)
SRV_PID=
cleanup() {
  [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

fails=0
check() { # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

start_server() { # start_server EXTRA_ARGS...
  [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
  rm -f "$TMP/port"
  : >"$TMP/server.log"
  timeout 150 "$PY" "$ROOT/tests/scripts/hf_hub_server.py" --model-dir "$MODEL" \
    --port-file "$TMP/port" --log "$TMP/server.log" --lifetime 120 "$@" &
  SRV_PID=$!
  for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
  [ -s "$TMP/port" ] || { echo "server did not start"; exit 1; }
  EP="http://127.0.0.1:$(cat "$TMP/port")"
}

dl() { # dl HF_HOME ARGS... -> stdout in $TMP/out, stderr in $TMP/err, rc in $RC
  local home=$1; shift
  env -u HF_TOKEN -u HF_HUB_CACHE -u HF_HUB_OFFLINE HF_HOME="$home" HF_ENDPOINT="$EP" \
    timeout 60 "$SGLC" download "$@" >"$TMP/out" 2>"$TMP/err"
  RC=$?
}

same_files() { # same_files SNAPSHOT_DIR
  local f
  for f in config.json generation_config.json model.safetensors special_tokens_map.json \
           tokenizer.json tokenizer_config.json; do
    cmp -s "$MODEL/$f" "$1/$f" || { echo "  differs: $f"; return 1; }
  done
}

layout_ok() { # layout_ok CACHE_REPO_DIR SNAPSHOT_DIR
  local repo=$1 snap=$2 commit f t
  commit=$(basename "$snap")
  [ "$(dirname "$snap")" = "$repo/snapshots" ] || { echo "  snapshot not under $repo/snapshots"; return 1; }
  [ "$(cat "$repo/refs/main")" = "$commit" ] || { echo "  refs/main != $commit"; return 1; }
  for f in "$snap"/*; do
    [ -L "$f" ] || { echo "  not a symlink: $f"; return 1; }
    t=$(readlink "$f")
    case "$t" in ../../blobs/*) ;; *) echo "  bad link target $t"; return 1;; esac
  done
  [ "$(readlink "$snap/model.safetensors")" = "../../blobs/$(sha256sum "$MODEL/model.safetensors" | cut -d' ' -f1)" ] ||
    { echo "  weights blob is not named by its sha256"; return 1; }
  ! ls "$repo/blobs" | grep -q -e '\.incomplete$' -e '\.lock$' || { echo "  leftovers in blobs/"; return 1; }
  for f in pytorch_model.bin model.gguf README.md onnx; do
    [ ! -e "$snap/$f" ] || { echo "  decoy downloaded: $f"; return 1; }
  done
}

REPO=test/TinyStories-656K
RDIR_OF() { echo "$1/hub/models--test--TinyStories-656K"; }

# 1. fresh download; the weights transfer is cut halfway and resumed in-run
start_server --cut model.safetensors
H1=$TMP/home1
dl "$H1" "$REPO"
SNAP=$(cat "$TMP/out")
check "fresh download exits 0" [ "$RC" -eq 0 ]
[ "$RC" -eq 0 ] || cat "$TMP/err"
check "files byte-identical" same_files "$SNAP"
check "hub cache layout" layout_ok "$(RDIR_OF "$H1")" "$SNAP"
check "cut transfer resumed with Range" grep -qE '^GET /cdn/[0-9a-f]+ range=bytes=[0-9]+-' "$TMP/server.log"
check "resume logged" grep -q 'resuming' "$TMP/err"
check "no decoy requested" bash -c "! grep -qE 'pytorch_model|gguf|onnx|README' '$TMP/server.log'"
check "progress lines on non-tty stderr" grep -q '100%' "$TMP/err"

# 2. second run with a complete cache downloads no bytes
: >"$TMP/server.log"
dl "$H1" "$REPO"
check "second run same folder" [ "$RC" -eq 0 -a "$(cat "$TMP/out")" = "$SNAP" ]
check "second run fetches no file bodies" bash -c "! grep -qE '^GET /(cdn|test/TinyStories-656K/resolve)' '$TMP/server.log'"

# 3. resume across runs from a leftover .incomplete file
H2=$TMP/home2
ETAG=$(sha256sum "$MODEL/model.safetensors" | cut -d' ' -f1)
mkdir -p "$(RDIR_OF "$H2")/blobs"
head -c 1000000 "$MODEL/model.safetensors" >"$(RDIR_OF "$H2")/blobs/$ETAG.incomplete"
: >"$TMP/server.log"
dl "$H2" "$REPO"
check "resume across runs exits 0" [ "$RC" -eq 0 ]
check "resume across runs requests bytes=1000000-" grep -q "^GET /cdn/$ETAG range=bytes=1000000-" "$TMP/server.log"
check "resumed files byte-identical" same_files "$(cat "$TMP/out")"

# 3b. two downloads at once into one cache: both succeed, same files
H3=$TMP/home3
PIDS=()
for k in 1 2; do
  env -u HF_TOKEN -u HF_HUB_CACHE -u HF_HUB_OFFLINE HF_HOME="$H3" HF_ENDPOINT="$EP" \
    timeout 60 "$SGLC" download "$REPO" >"$TMP/out$k" 2>"$TMP/err$k" &
  PIDS+=($!)
done
wait "${PIDS[0]}"; RC1=$?; wait "${PIDS[1]}"; RC2=$?
check "concurrent downloads both succeed" [ "$RC1" -eq 0 -a "$RC2" -eq 0 ]
check "concurrent download files byte-identical" same_files "$(cat "$TMP/out1")"
check "concurrent download cache layout" layout_ok "$(RDIR_OF "$H3")" "$(cat "$TMP/out2")"

# 4. offline: cache only, no network (endpoint pointed at a closed port)
EP_SAVE=$EP
DEAD_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
EP=http://127.0.0.1:$DEAD_PORT
env -u HF_TOKEN HF_HUB_OFFLINE=1 HF_HOME="$H1" HF_ENDPOINT="$EP" timeout 30 "$SGLC" download "$REPO" >"$TMP/out" 2>"$TMP/err"
check "HF_HUB_OFFLINE=1 uses the cache" [ $? -eq 0 -a "$(cat "$TMP/out")" = "$SNAP" ]
env -u HF_TOKEN HF_HUB_OFFLINE=1 HF_HOME="$TMP/empty" HF_ENDPOINT="$EP" timeout 30 "$SGLC" download "$REPO" >"$TMP/out" 2>"$TMP/err"
check "offline without cache fails with exit 1" [ $? -eq 1 ]
check "offline error names the repo" grep -q "repo '$REPO' revision 'main' is not in the cache" "$TMP/err"
# unreachable hub: fall back to the cache with a warning, or fail clearly
dl "$H1" "$REPO"
check "unreachable hub falls back to the cache" [ "$RC" -eq 0 -a "$(cat "$TMP/out")" = "$SNAP" ]
dl "$TMP/empty" "$REPO"
check "unreachable hub without cache fails" [ "$RC" -eq 1 ]
check "network error names endpoint and repo" grep -q "cannot reach $EP for repo '$REPO'" "$TMP/err"
EP=$EP_SAVE

# 5. errors: missing repo, missing revision, private repo without token
dl "$TMP/h404" test/does-not-exist
check "404 repo exits 1" [ "$RC" -eq 1 ]
check "404 message names repo" grep -q "repo 'test/does-not-exist' revision 'main' not found (HTTP 404)" "$TMP/err"
dl "$TMP/h404" "$REPO" --revision no-such-branch
check "404 revision message" grep -q "revision 'no-such-branch' not found (HTTP 404)" "$TMP/err"
dl "$TMP/h401" test/private
check "401 exits 1" [ "$RC" -eq 1 ]
check "401 message suggests HF_TOKEN" grep -q "access denied (HTTP 401) to repo 'test/private'.*set HF_TOKEN" "$TMP/err"
: >"$TMP/server.log"
env -u HF_HUB_OFFLINE HF_TOKEN=secret HF_HOME="$TMP/h401" HF_ENDPOINT="$EP" timeout 60 "$SGLC" download test/private >"$TMP/out" 2>"$TMP/err"
check "HF_TOKEN opens the private repo" [ $? -eq 0 ]
check "private files byte-identical" same_files "$(cat "$TMP/out")"
check "token sent to the endpoint" grep -q '^GET /api/models/test/private/revision/main range=- auth=yes' "$TMP/server.log"
dl "$TMP/hbad" ../etc/passwd
check "bad repo id exits 2" [ "$RC" -eq 2 ]

# 6. --download-dir is the cache folder itself; --revision by commit
COMMIT=$(basename "$SNAP")
dl "$TMP/unused" "$REPO" --download-dir "$TMP/dd" --revision "$COMMIT"
check "--download-dir + commit revision" [ "$RC" -eq 0 -a "$(cat "$TMP/out")" = "$TMP/dd/models--test--TinyStories-656K/snapshots/$COMMIT" ]
check "--download-dir files byte-identical" same_files "$(cat "$TMP/out")"
# a local folder is returned as is
dl "$TMP/unused" "$MODEL"
check "local folder passes through" [ "$RC" -eq 0 -a "$(cat "$TMP/out")" = "$(cd "$MODEL" && pwd -P)" ]

if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all hub download checks passed"
