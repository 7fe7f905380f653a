#!/usr/bin/env bash
# CLI contract of `sglc generate --requests` and `sglc bench-offline` on
# TinyStories-656K: every response line equals the single-request path
# (`sglc generate --input-ids`, no scheduler) in order; per-line errors;
# n > 1 lists; SGLang's meta_info shape; bench JSON line and cache hit rate
# of a shared-prefix workload; argument errors exit 2.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$M/model.safetensors" ] || { echo "skip: $M not found"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

# 12 requests sharing a 40-token prefix, plus a bad line and an n=3 line
"$PY" - "$T" <<'PYEOF'
import json, random, sys
random.seed(3)
t = sys.argv[1]
pre = [1] + [random.randint(3, 2000) for _ in range(39)]
lines, plain = [], []
for i in range(12):
    ids = pre + [random.randint(3, 2000) for _ in range(random.randint(1, 20))]
    n = random.randint(3, 12)
    lines.append(json.dumps({"input_ids": ids, "rid": "r%d" % i,
                             "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}}))
    plain.append((ids, n))
lines.insert(5, json.dumps({"text": "Once upon a time"}))
lines.append(json.dumps({"input_ids": pre, "sampling_params": {"max_new_tokens": 4, "temperature": 1.0, "n": 3}}))
open(t + "/req.jsonl", "w").write("\n".join(lines) + "\n")
with open(t + "/plain.txt", "w") as f:
    for ids, n in plain:
        f.write("%s %d\n" % (",".join(map(str, ids)), n))
PYEOF
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/out.jsonl" --threads 2 --skip-tokenizer-init \
    --max-total-tokens 8192 --chunked-prefill-size 32 2>"$T/err"
check "generate --requests exit 0" "[ $? -eq 0 ]"
check "one line per request" "[ \$(wc -l < \"$T/out.jsonl\") -eq 14 ]"
i=0
while read -r ids n; do
    "$BIN" generate --model-path "$M" --input-ids "$ids" --max-new-tokens "$n" --temperature 0 --ignore-eos --skip-tokenizer-init \
        --threads 2 2>/dev/null >>"$T/single.txt"
    i=$((i + 1))
done <"$T/plain.txt"
"$PY" - "$T" <<'PYEOF' >"$T/verdict" 2>&1 || echo "FAIL the verdict script itself failed" >>"$T/verdict"
import json, sys
t = sys.argv[1]
out = [json.loads(l) for l in open(t + "/out.jsonl")]
single = [list(map(int, l.split())) for l in open(t + "/single.txt")]
ok = []
k = 0
for j, o in enumerate(out):
    if j == 5:
        ok.append(("bad line -> error", "error" in o and "tokenizer" in o["error"]["message"] and o["error"]["line"] == 6))
        continue
    if j == 13:
        ok.append(("n=3 -> list of 3", isinstance(o, list) and len(o) == 3 and all(len(x["output_ids"]) == 4 for x in o)))
        ok.append(("n=3 siblings reuse the prompt", all(x["meta_info"]["cached_tokens"] == 39 for x in o)))
        continue
    m = o["meta_info"]
    ok.append(("line %d ids == single-request path" % j, o["output_ids"] == single[k]))
    ok.append(("line %d meta_info" % j, m["id"] == "r%d" % k and m["completion_tokens"] == len(single[k])
               and m["finish_reason"] == {"type": "length", "length": len(single[k])}
               and m["num_retractions"] == 0 and o["text"] == "" and m["e2e_latency"] > 0))
    k += 1
cached = sum(o["meta_info"]["cached_tokens"] for j, o in enumerate(out) if j not in (5, 13))
ok.append(("shared prefix cached (%d tokens)" % cached, cached >= 11 * 32))
for name, good in ok:
    print(("ok   " if good else "FAIL ") + name)
PYEOF
cat "$T/verdict"
fails=$((fails + $(grep -c '^FAIL' "$T/verdict")))

# bench-offline: JSON line, hit rate of generated-shared-prefix
"$BIN" bench-offline --model-path "$M" --dataset-name generated-shared-prefix --gsp-num-groups 2 \
    --gsp-prompts-per-group 4 --gsp-system-prompt-len 64 --gsp-question-len 8 --gsp-output-len 4 \
    --max-total-tokens 8192 --threads 2 --result-filename "$T/bench.jsonl" >"$T/bench.txt" 2>"$T/err"
check "bench-offline exit 0" "[ $? -eq 0 ]"
check "bench prints throughput" "grep -q 'Output token throughput' \"$T/bench.txt\""
"$PY" -c "
import json,sys
r=[json.loads(l) for l in open('$T/bench.jsonl')]
ideal=(8-2)*64/(8*72)
sys.exit(0 if len(r)==1 and r[0]['successful_requests']==8 and abs(r[0]['cache_hit_rate']-ideal)<1e-9 else 1)"
check "bench JSON line, hit rate = ideal 6*64/(8*72)" "[ $? -eq 0 ]"

expect_rc() {  # expect_rc NAME RC NEEDLE ARGS...
    local name=$1 want=$2 needle=$3; shift 3
    "$BIN" "$@" >"$T/out" 2>"$T/err"; local rc=$?
    check "$name: exit $want" "[ $rc -eq $want ]"
    check "$name: message mentions '$needle'" "grep -q -- \"$needle\" \"$T/err\""
}
expect_rc "bad policy" 2 "--schedule-policy" generate --model-path "$M" --requests "$T/req.jsonl" --schedule-policy xyz
expect_rc "bad chunk" 2 "--chunked-prefill-size" generate --model-path "$M" --requests "$T/req.jsonl" --chunked-prefill-size 0
expect_rc "missing requests file" 2 "cannot open" generate --model-path "$M" --requests "$T/nope.jsonl"
expect_rc "chunk not whole pages" 1 "multiple of page_size" generate --model-path "$M" --requests "$T/req.jsonl" --page-size 16 --chunked-prefill-size 40
expect_rc "bench bad dataset" 2 "--dataset-name" bench-offline --model-path "$M" --dataset-name sharegpt

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
exit 0
