#!/usr/bin/env bash
# EAGLE / EAGLE3 / NEXTN speculative decoding through the commands (issue 13),
# with random heads for TinyStories-656K (tests/ref/eagle_ref.py make):
# - `sglc generate --requests`: greedy output_ids identical with and without
#   EAGLE, EAGLE3 and NEXTN (= EAGLE), a batch of 4; with chunked prefill
#   (16) and mixed chunks; page 16; 5 steps; --dp-size 2; meta_info carries
#   spec_verify_ct / spec_accept_length / ... consistent with the output;
# - a text prompt with a stop string: the same text and finish reason;
# - `sglc serve` with EAGLE3: /generate meta_info spec fields; bench-offline;
# - start-up errors: a head of the wrong hidden size, a folder without
#   weights, the other EAGLE version; usage errors (exit 2): topk 2,
#   no head path (--speculative-token-map: test_spec_tokmap.sh).
# The heads are random: drafts are almost never right (accept length ~1).
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$M/model.safetensors" ] || { echo "skip: $M not found"; exit 77; }
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "skip: $PY with torch and numpy not found"; exit 77; }
. "$ROOT/tests/scripts/lib_server.sh"
T=$(mktemp -d); trap server_cleanup EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

"$PY" "$ROOT/tests/ref/eagle_ref.py" make "$T/h" "$M" || { echo "FAIL making the heads"; exit 1; }
H1=$T/h/eagle1 H3=$T/h/eagle3

"$PY" - "$T" <<'PYEOF'
import json, sys
t = sys.argv[1]
lines = []
for i, (period, n_in, max_new) in enumerate([(7, 40, 64), (11, 50, 48), (5, 23, 40), (13, 30, 1)]):
    ids = [1] + [((k % period) * 37 + 11 * i) % 2000 + 3 for k in range(n_in - 1)]
    lines.append(json.dumps({"input_ids": ids, "rid": "r%d" % i,
                             "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}}))
open(t + "/req.jsonl", "w").write("\n".join(lines) + "\n")
PYEOF

cmp_py='
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 4, (len(a), len(b))
drafted = 0
for x, y in zip(a, b):
    assert x["output_ids"] == y["output_ids"], (x["output_ids"], y["output_ids"])
    assert "spec_verify_ct" not in x["meta_info"]
    m = y["meta_info"]
    for k in ("spec_verify_ct", "spec_accept_length", "spec_accept_rate", "spec_accept_token_num", "spec_draft_token_num"):
        assert k in m, k
    n = len(y["output_ids"])
    assert m["spec_verify_ct"] + m["spec_accept_token_num"] == n - 1, m
    if m["spec_verify_ct"]:
        assert abs(m["spec_accept_length"] - n / m["spec_verify_ct"]) < 1e-6
    drafted += m["spec_draft_token_num"]
assert drafted > 0, "no drafts verified"
'
gen() {  # gen OUT [args...]
    local out=$1
    shift
    "$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$out" --threads 1 --skip-tokenizer-init \
        --log-level warning "$@" 2>>"$T/err"
}
gen "$T/p.jsonl"
gen "$T/e1.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1"
check "EAGLE: greedy ids identical, spec_* meta_info consistent" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/e1.jsonl'"
gen "$T/e3.jsonl" --speculative-algorithm EAGLE3 --speculative-draft-model-path "$H3"
check "EAGLE3: greedy ids identical, spec_* meta_info consistent" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/e3.jsonl'"
gen "$T/nx.jsonl" --speculative-algorithm NEXTN --speculative-draft-model-path "$H1" --speculative-num-steps 5 \
    --speculative-eagle-topk 1 --speculative-num-draft-tokens 6
check "NEXTN (= EAGLE), 5 steps, topk 1: identical" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/nx.jsonl'"
gen "$T/eb.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$T/h/eagle1_bf16"
check "EAGLE with a BF16-stored head (bf16 matrices): identical" \
    "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/eb.jsonl'"
gen "$T/pc.jsonl" --chunked-prefill-size 16 --enable-mixed-chunk
gen "$T/ec.jsonl" --chunked-prefill-size 16 --enable-mixed-chunk --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path "$H3"
check "EAGLE3 with chunked prefill 16 + mixed chunks: identical" "'$PY' -c '$cmp_py' '$T/pc.jsonl' '$T/ec.jsonl'"
gen "$T/pp.jsonl" --page-size 16
gen "$T/ep.jsonl" --page-size 16 --speculative-algorithm EAGLE --speculative-draft-model-path "$H1"
check "EAGLE with page 16: identical" "'$PY' -c '$cmp_py' '$T/pp.jsonl' '$T/ep.jsonl'"

gen "$T/dp.jsonl" --threads 2 --dp-size 2 --speculative-algorithm EAGLE --speculative-draft-model-path "$H1"
check "EAGLE under --dp-size 2 (a capture per replica): identical" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/dp.jsonl'"
"$BIN" bench-offline --model-path "$M" --num-prompts 4 --random-input-len 16 --random-output-len 32 --threads 1 \
    --speculative-algorithm EAGLE3 --speculative-draft-model-path "$H3" --log-level warning >"$T/bench.txt" 2>>"$T/err"
check "bench-offline EAGLE3: accept length printed" "grep -q '^Accept length:' '$T/bench.txt'"

# a stop string: text prompt, the stop taken from the plain output's middle
printf '%s\n' '{"text": "Once upon a time", "sampling_params": {"temperature": 0, "max_new_tokens": 60}}' >"$T/t.jsonl"
"$BIN" generate --model-path "$M" --requests "$T/t.jsonl" --output "$T/t0.jsonl" --threads 1 --log-level warning 2>>"$T/err"
"$PY" - "$T" <<'PYEOF'
import json, sys
t = sys.argv[1]
text = json.loads(open(t + "/t0.jsonl").readline())["text"]
words = text.split()
stop = " ".join(words[len(words) // 2:len(words) // 2 + 2])
open(t + "/ts.jsonl", "w").write(json.dumps({"text": "Once upon a time", "sampling_params": {
    "temperature": 0, "max_new_tokens": 60, "stop": [stop]}}) + "\n")
PYEOF
for alg in "EAGLE $H1" "EAGLE3 $H3"; do
    set -- $alg
    "$BIN" generate --model-path "$M" --requests "$T/ts.jsonl" --output "$T/s0.jsonl" --threads 1 --log-level warning 2>>"$T/err"
    "$BIN" generate --model-path "$M" --requests "$T/ts.jsonl" --output "$T/s1.jsonl" --threads 1 --log-level warning \
        --speculative-algorithm "$1" --speculative-draft-model-path "$2" 2>>"$T/err"
    check "$1: stop string: same text and finish reason" \
        "'$PY' -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a[\"text\"]==b[\"text\"] and a[\"meta_info\"][\"finish_reason\"]==b[\"meta_info\"][\"finish_reason\"] and a[\"meta_info\"][\"finish_reason\"][\"type\"]==\"stop\", (a, b); assert \"spec_verify_ct\" in b[\"meta_info\"]' '$T/s0.jsonl' '$T/s1.jsonl'"
done

# serve: /generate meta_info
if server_start "$T/serve.log" --model-path "$M" --threads 1 --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path "$H3"; then
    curl -s "$SERVER_URL/generate" -d '{"text": "Once upon a time", "sampling_params": {"temperature": 0, "max_new_tokens": 24}}' >"$T/g.json"
    check "serve EAGLE3: /generate meta_info spec_verify_ct and spec_accept_length" \
        "'$PY' -c 'import json,sys; m=json.load(open(sys.argv[1]))[\"meta_info\"]; assert m[\"spec_verify_ct\"]>0 and m[\"spec_accept_length\"]>=1.0, m' '$T/g.json'"
else
    echo "FAIL serve EAGLE3 did not start"; cat "$T/serve.log"; fails=$((fails + 1))
fi
server_stop

# start-up errors (after the model loads) and usage errors (exit 2)
startup() {  # startup NAME PATTERN ARGS...
    local name=$1 pat=$2
    shift 2
    gen "$T/bad.jsonl" "$@" 2>"$T/bad.out"
    local rc=$?
    cat "$T/err" >>"$T/bad.out"; : >"$T/err"
    check "$name (exit $rc, message)" "[ $rc -ne 0 ] && grep -q -- '$pat' '$T/bad.out'"
}
: >"$T/err"
startup "head of hidden size 64" "hidden size (64) differs from the target model" \
    --speculative-algorithm EAGLE --speculative-draft-model-path "$T/h/wrong_h"
startup "head folder without weights" "model.safetensors" --speculative-algorithm EAGLE --speculative-draft-model-path "$T/h/nofile"
startup "EAGLE3 with an EAGLE-1 head" "is EAGLE3" --speculative-algorithm EAGLE3 --speculative-draft-model-path "$H1"
usage() {  # usage NAME PATTERN ARGS...
    local name=$1 pat=$2
    shift 2
    gen "$T/bad.jsonl" "$@"
    local rc=$?
    check "$name (exit 2, message)" "[ $rc -eq 2 ] && grep -q -- '$pat' '$T/err'"
    : >"$T/err"
}
usage "topk 2" "speculative-eagle-topk 2 is not supported by sglc yet" --speculative-algorithm EAGLE \
    --speculative-draft-model-path "$H1" --speculative-eagle-topk 2
usage "missing head path" "no such file or directory" --speculative-algorithm EAGLE3 --speculative-draft-model-path /nonexistent/head

[ "$fails" -eq 0 ] && echo "test_spec_eagle: all passed" || echo "test_spec_eagle: $fails failed"
[ "$fails" -eq 0 ]
