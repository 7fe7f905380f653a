#!/usr/bin/env bash
# --speculative-accept-threshold-single / -acc (SGLang's relaxed draft
# acceptance, issue 13) through the commands, NGRAM on TinyStories-656K:
# - at 1.0 / 1.0 (given or left out) output_ids and logprobs are those of
#   plain decoding, greedy and seeded sampled requests alike;
# - below 1: greedy requests are unchanged; sampled ones accept more of
#   the drafts than at 1.0 (same prompts, seeds and drafter), the spec
#   counters stay consistent, and a seed still replays;
# - serve takes the flags: a seeded sampled /generate gives the ids of
#   `generate --requests` of that request alone with the same thresholds
#   (below 1 the output depends on the drafts, so on what else is in the
#   n-gram trie);
# - values outside (0, 1] are usage errors (exit 2) naming the range, in
#   generate, serve and bench-offline; --help lists the rows as supported.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$M/model.safetensors" ] || { echo "skip: $M not found"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
. "$ROOT/tests/scripts/lib_server.sh"
T=$(mktemp -d); trap server_cleanup EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

# requests: text that repeats (drafts come) and a free story, sampled
# (seeded) and greedy; logprobs on two of them
"$PY" - "$T" <<'PYEOF'
import json, sys
t = sys.argv[1]
rep = "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log. The cat sat on the mat."
free = "Once upon a time, there was a little girl named Lily. She liked to play with her ball."
cases = [(rep, 0.8, 3), (free, 0.8, 4), (rep, 1.0, 5), (free, 1.0, 6), (rep, 0.0, 0), (free, 0.0, 0)]
with open(t + "/req.jsonl", "w") as f:
    for i, (text, temp, seed) in enumerate(cases):
        sp = {"temperature": temp, "max_new_tokens": 160, "ignore_eos": True}
        if seed:
            sp["sampling_seed"] = seed
        f.write(json.dumps({"text": text, "rid": "r%d" % i, "sampling_params": sp, "return_logprob": i in (0, 4)}) + "\n")
PYEOF
gen() {  # gen OUT [args...]
    local out=$1
    shift
    "$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$out" --threads 1 --log-level warning \
        "$@" 2>>"$T/err"
}
gen "$T/plain.jsonl"
gen "$T/def.jsonl" --speculative-algorithm NGRAM
gen "$T/one.jsonl" --speculative-algorithm NGRAM --speculative-accept-threshold-single 1.0 \
    --speculative-accept-threshold-acc 1
gen "$T/s01.jsonl" --speculative-algorithm NGRAM --speculative-accept-threshold-single 0.01
gen "$T/s01b.jsonl" --speculative-algorithm NGRAM --speculative-accept-threshold-single 0.01
gen "$T/a05.jsonl" --speculative-algorithm NGRAM --speculative-accept-threshold-acc 0.5

# stats A B [mode]: same = every request identical (ids, logprobs);
# greedy = the greedy ones identical; more = B's sampled requests accept
# more drafts (count and rate) than A's; prints the totals
cmp_py='
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
mode = sys.argv[3]
assert len(a) == len(b) == 6, (len(a), len(b))
greedy = [4, 5]
def tot(rows, key):
    return sum(rows[i]["meta_info"].get(key, 0) for i in range(4))
for i, (x, y) in enumerate(zip(a, b)):
    n = len(y["output_ids"])
    assert n == 160, n
    m = y["meta_info"]
    if "spec_verify_ct" in m:
        assert m["spec_verify_ct"] + m["spec_accept_token_num"] == n - 1, m
        assert m["spec_accept_token_num"] <= m["spec_draft_token_num"], m
    if mode == "same" or i in greedy:
        assert x["output_ids"] == y["output_ids"], (i, x["output_ids"][:20], y["output_ids"][:20])
        for p, q in zip(x["meta_info"].get("output_token_logprobs") or [], m.get("output_token_logprobs") or []):
            assert p[1] == q[1] and abs(p[0] - q[0]) < 1e-4, (i, p, q)
if mode == "more":
    acc_a, acc_b = tot(a, "spec_accept_token_num"), tot(b, "spec_accept_token_num")
    dr_a, dr_b = tot(a, "spec_draft_token_num"), tot(b, "spec_draft_token_num")
    print("    sampled requests: accepted %d / %d drafts at 1.0, %d / %d here" % (acc_a, dr_a, acc_b, dr_b))
    assert acc_b > acc_a and acc_b / max(dr_b, 1) > acc_a / max(dr_a, 1), (acc_a, dr_a, acc_b, dr_b)
    assert any(x["output_ids"] != y["output_ids"] for x, y in list(zip(a, b))[:4]), "sampled outputs unchanged"
'
cmpr() { "$PY" -c "$cmp_py" "$@"; }
check "thresholds left out: identical to plain decoding" "cmpr '$T/plain.jsonl' '$T/def.jsonl' same"
check "thresholds 1.0 / 1: identical to plain decoding (greedy and sampled)" "cmpr '$T/plain.jsonl' '$T/one.jsonl' same"
check "single 0.01: greedy unchanged, sampled accept more drafts" "cmpr '$T/def.jsonl' '$T/s01.jsonl' more"
check "single 0.01: a seed replays" "cmpr '$T/s01.jsonl' '$T/s01b.jsonl' same"
check "acc 0.5: greedy unchanged, sampled accept more drafts" "cmpr '$T/def.jsonl' '$T/a05.jsonl' more"
check "no threshold warning at 1.0, the info line below" \
    "! grep -q 'accept thresholds' '$T/err'"

# serve: the same seeded sampled request gives generate's ids
if command -v curl >/dev/null; then
    if server_start "$T/log" --model-path "$M" --threads 1 --speculative-algorithm NGRAM \
        --speculative-accept-threshold-single 0.01; then
        # alone: below 1 the output depends on the drafts, and the trie
        # holds what else ran (the six requests of generate's batch)
        head -1 "$T/req.jsonl" >"$T/one_req.jsonl"
        "$BIN" generate --model-path "$M" --requests "$T/one_req.jsonl" --output "$T/one_s01.jsonl" --threads 1 \
            --log-level warning --speculative-algorithm NGRAM --speculative-accept-threshold-single 0.01 2>>"$T/err"
        "$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); r.pop("rid"); print(json.dumps(r))' \
            "$T/req.jsonl" >"$T/body.json"
        curl -s "$SERVER_URL/generate" -H 'Content-Type: application/json' -d @"$T/body.json" >"$T/g.json"
        check "serve single 0.01: /generate = generate's ids, spec counters" \
            "'$PY' -c 'import json,sys; g=json.load(open(sys.argv[1])); r=json.loads(open(sys.argv[2]).readline()); assert g[\"output_ids\"]==r[\"output_ids\"], (g[\"output_ids\"][:10], r[\"output_ids\"][:10]); assert g[\"meta_info\"][\"spec_accept_token_num\"]==r[\"meta_info\"][\"spec_accept_token_num\"]' '$T/g.json' '$T/one_s01.jsonl'"
        check "serve logs the thresholds" "grep -q 'accept thresholds single 0.01, acc 1' '$T/log'"
        server_stop TERM
    else
        echo "FAIL serve did not start:"; tail -5 "$T/log"; fails=$((fails + 1))
    fi
fi

# bad values: usage errors before the model loads
bad() {  # bad CMD FLAG VALUE MESSAGE
    local cmd=$1 flag=$2 v=$3 msg=$4 rc
    if [ "$cmd" = generate ]; then
        "$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/bad.jsonl" \
            --speculative-algorithm NGRAM "$flag" "$v" >"$T/bad.out" 2>&1
    else
        timeout 20 "$BIN" "$cmd" --model-path "$M" --speculative-algorithm NGRAM "$flag" "$v" >"$T/bad.out" 2>&1
    fi
    rc=$?
    check "$cmd $flag $v: exit 2, '$msg'" "[ $rc -eq 2 ] && grep -qF -- '$msg' '$T/bad.out'"
}
bad generate --speculative-accept-threshold-single 0 "--speculative-accept-threshold-single must be in (0, 1], got 0"
bad generate --speculative-accept-threshold-single -0.5 "--speculative-accept-threshold-single must be in (0, 1], got -0.5"
bad generate --speculative-accept-threshold-single 1.01 "--speculative-accept-threshold-single must be in (0, 1], got 1.01"
bad generate --speculative-accept-threshold-acc 0 "--speculative-accept-threshold-acc must be in (0, 1], got 0"
bad generate --speculative-accept-threshold-acc 2 "--speculative-accept-threshold-acc must be in (0, 1], got 2"
bad generate --speculative-accept-threshold-acc abc "--speculative-accept-threshold-acc"
bad serve --speculative-accept-threshold-single 0 "--speculative-accept-threshold-single must be in (0, 1], got 0"
bad serve --speculative-accept-threshold-acc 1.5 "--speculative-accept-threshold-acc must be in (0, 1], got 1.5"
bad bench-offline --speculative-accept-threshold-single -1 "--speculative-accept-threshold-single must be in (0, 1], got -1"

"$BIN" serve --help >"$T/help.txt" 2>&1
check "--help: the rows without (not yet), saying what below 1 trades" \
    "'$PY' -c 'import sys,re; t=open(sys.argv[1]).read(); i=t.index(\"--speculative-accept-threshold-single\"); j=t.index(\"--speculative-accept-threshold-acc\"); k=t.index(\"\n  --\", j + 1); s=t[i:k]; assert \"(not yet)\" not in s and \"not supported\" not in s, s; assert \"exactness of the output distribution\" in re.sub(r\"\\s+\", \" \", s), s' '$T/help.txt'"

[ $fails -eq 0 ] || { echo "--- stderr:"; tail -20 "$T/err"; exit 1; }
echo "all passed"
