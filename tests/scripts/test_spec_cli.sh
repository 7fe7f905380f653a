#!/usr/bin/env bash
# NGRAM speculative decoding through the commands (issue 13):
# - `sglc generate --requests` greedy output_ids identical with and without
#   --speculative-algorithm NGRAM on TinyStories-656K and on every tiny
#   architecture model (tests/ref/make_tiny_model.py, build/tiny-models),
#   a batch of prompts that repeat text; meta_info carries SGLang's
#   spec_verify_ct / spec_accept_length / spec_accept_rate /
#   spec_accept_token_num / spec_draft_token_num only with NGRAM, and on
#   TinyStories drafts are accepted (accept length > 1);
# - `sglc bench-offline` prints the accept length and writes it in its JSON;
# - `sglc serve` with NGRAM: /generate meta_info and /metrics
#   sglang:spec_accept_length;
# - STANDALONE: the target as its own draft and a dummy draft of the same
#   vocabulary give identical ids; another vocabulary or a missing path
#   is a clear start-up error;
# - a regex-constrained request and --tp-size 2: identical with NGRAM;
# - longrope (phi3.5) and dynamic NTK: a self-draft crossing the length at
#   which the rope tables switch keeps plain decoding's ids;
# - bad arguments are usage errors (exit 2) with a clear message.
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

# requests: repeating id patterns (ids below 250: every tiny vocabulary has them)
"$PY" - "$T" <<'PYEOF'
import json, sys
t = sys.argv[1]
lines = []
for i, (period, n_in, max_new) in enumerate([(7, 40, 64), (11, 50, 48), (5, 23, 40), (13, 30, 1)]):
    ids = [1] + [((k % period) * 37 + 11 * i) % 240 + 3 for k in range(n_in - 1)]
    lines.append(json.dumps({"input_ids": ids, "rid": "r%d" % i,
                             "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True},
                             "return_logprob": i == 0}))
open(t + "/req.jsonl", "w").write("\n".join(lines) + "\n")
PYEOF

# compare PLAIN SPEC [need_accept]: same output_ids per line; spec fields only in SPEC
cmp_py='
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
need = len(sys.argv) > 3
assert len(a) == len(b) == 4, (len(a), len(b))
acc = 0
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
    if x["meta_info"].get("output_token_logprobs"):
        for p, q in zip(x["meta_info"]["output_token_logprobs"], y["meta_info"]["output_token_logprobs"]):
            assert p[1] == q[1] and abs(p[0] - q[0]) < 1e-4, (p, q)
    acc += m["spec_accept_token_num"]
if need:
    assert acc > 0, "no draft accepted"
    assert b[0]["meta_info"]["spec_accept_length"] > 1.0, b[0]["meta_info"]
'
gen() {  # gen MODEL OUT [args...]
    local m=$1 out=$2
    shift 2
    "$BIN" generate --model-path "$m" --requests "$T/req.jsonl" --output "$out" --threads 1 --skip-tokenizer-init \
        --log-level warning "$@" 2>>"$T/err"
}
gen "$M" "$T/p.jsonl"
gen "$M" "$T/s.jsonl" --speculative-algorithm NGRAM
check "TinyStories: greedy ids identical with NGRAM (BFS), drafts accepted, spec_* meta_info" \
    "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/s.jsonl' need"
gen "$M" "$T/s2.jsonl" --speculative-algorithm NGRAM --speculative-ngram-match-type PROB \
    --speculative-num-draft-tokens 5 --speculative-ngram-max-bfs-breadth 3 --page-size 16
gen "$M" "$T/p2.jsonl" --page-size 16
check "TinyStories: identical with PROB, 4 drafts, breadth 3, page 16" "'$PY' -c '$cmp_py' '$T/p2.jsonl' '$T/s2.jsonl' need"

# a grammar (regex) with drafts: the mask trims drafts the grammar forbids
printf '%s\n' '{"text": "the cat the cat the cat the cat", "sampling_params": {"temperature": 0, "max_new_tokens": 40, "regex": "( the cat){2,12}\\."}}' >"$T/gram.jsonl"
"$BIN" generate --model-path "$M" --requests "$T/gram.jsonl" --output "$T/g0.jsonl" --threads 1 --log-level warning 2>>"$T/err"
"$BIN" generate --model-path "$M" --requests "$T/gram.jsonl" --output "$T/g1.jsonl" --threads 1 --log-level warning \
    --speculative-algorithm NGRAM 2>>"$T/err"
check "regex-constrained output identical with NGRAM, drafts accepted" \
    "'$PY' -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a[\"output_ids\"]==b[\"output_ids\"] and a[\"text\"].endswith(\".\"), (a, b); assert b[\"meta_info\"][\"spec_accept_token_num\"]>0, b' '$T/g0.jsonl' '$T/g1.jsonl'"

# tensor parallelism: the verify forwards run on both ranks
gen "$M" "$T/tp.jsonl" --speculative-algorithm NGRAM --tp-size 2
check "TinyStories --tp-size 2: identical with NGRAM, drafts accepted" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/tp.jsonl' need"

# STANDALONE: the target as its own draft (drafts right), a dummy-weight
# draft of the same vocabulary (mostly wrong): identical ids either way
gen "$M" "$T/sa.jsonl" --speculative-algorithm STANDALONE --speculative-draft-model-path "$M"
check "STANDALONE (self draft): identical, accept length > 1" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/sa.jsonl' need"
gen "$M" "$T/sd.jsonl" --speculative-algorithm STANDALONE --speculative-draft-model-path "$M" \
    --speculative-draft-load-format dummy --speculative-num-steps 5
check "STANDALONE (dummy draft, 5 steps): identical" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/sd.jsonl'"

gen "$M" "$T/sq.jsonl" --speculative-algorithm STANDALONE --speculative-draft-model-path "$M" \
    --speculative-draft-model-quantization w8a8_int8
check "STANDALONE (the target quantized w8a8_int8 at load: self-speculation): identical, accept length > 1" \
    "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/sq.jsonl' need"

# the tiny architecture models
if "$PY" -c 'import torch, numpy' 2>/dev/null; then
    TM=$ROOT/build/tiny-models
    mkdir -p "$TM"
    names=$("$PY" "$ROOT/tests/ref/make_tiny_model.py" --list | awk '{print $1}' | grep -vE 'embed|tok|hfq|stories')
    for n in $names; do
        "$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$TM" --only "$n" >/dev/null 2>>"$T/err"
    done
    # the architectures with their own builders (Phi-3 longrope, DeepSeek MLA, Qwen2-MoE, Gemma 2/3), when present
    [ -f "$ROOT/tests/ref/phi3_ref.py" ] && "$PY" "$ROOT/tests/ref/phi3_ref.py" build --cache "$TM" >/dev/null 2>>"$T/err"
    [ -f "$ROOT/tests/ref/make_tiny_ds.py" ] && "$PY" "$ROOT/tests/ref/make_tiny_ds.py" --out "$TM" >/dev/null 2>>"$T/err"
    [ -f "$ROOT/tests/ref/gemma_ref.py" ] && "$PY" "$ROOT/tests/ref/gemma_ref.py" --build gemma2,gemma3 --out "$TM" >/dev/null 2>>"$T/err"
    for d in "$TM"/*/f32 "$TM"/*/; do
        [ -f "$d/config.json" ] || continue
        n=$(basename "${d%/f32}")
        case $n in *embed*|*tok*|hfq*|stories*) continue ;; esac
        d=${d%/}
        gen "$d" "$T/tp.jsonl" || { echo "FAIL $n: plain run"; fails=$((fails + 1)); continue; }
        if grep -q '"NemotronHForCausalLM"' "$d/config.json"; then
            # Mamba2 states cannot be rolled back to the accepted drafts: a start-up refusal naming why
            "$BIN" generate --model-path "$d" --requests "$T/req.jsonl" --output "$T/ts.jsonl" --threads 1 \
                --skip-tokenizer-init --log-level warning --speculative-algorithm NGRAM >"$T/hy.out" 2>&1
            rc=$?
            check "tiny $n: NGRAM refused for a hybrid Mamba model (exit $rc, message)" \
                "[ $rc -ne 0 ] && grep -q 'cannot be rolled back' '$T/hy.out'"
            continue
        fi
        gen "$d" "$T/ts.jsonl" --speculative-algorithm NGRAM
        check "tiny $n: greedy ids identical with NGRAM" "'$PY' -c '$cmp_py' '$T/tp.jsonl' '$T/ts.jsonl'"
    done
    # ropes whose tables follow the forward's length: drafts that would cross
    # the switch are held back (a self-draft always drafts, so it would cross)
    for spec in "phi3.5-short 110 48" "llama-dynamic 20 40"; do
        set -- $spec
        d=$TM/$1/f32
        [ -d "$d" ] || continue
        "$PY" -c 'import json,sys; print(json.dumps({"input_ids": [1] + [((k % 7) * 37) % 240 + 3 for k in range(int(sys.argv[1]))], "sampling_params": {"max_new_tokens": int(sys.argv[2]), "temperature": 0, "ignore_eos": True}}))' "$2" "$3" >"$T/cross.jsonl"
        for sp in "" "--speculative-algorithm STANDALONE --speculative-draft-model-path $d"; do
            "$BIN" generate --model-path "$d" --requests "$T/cross.jsonl" --skip-tokenizer-init --threads 1 --log-level warning \
                $sp >"$T/cross$([ -n "$sp" ] && echo 1 || echo 0).json" 2>>"$T/err"
        done
        check "tiny $1: a self-draft across the rope switch length keeps plain decoding's ids" \
            "'$PY' -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a[\"output_ids\"]==b[\"output_ids\"]; assert b[\"meta_info\"][\"spec_accept_token_num\"]>0' '$T/cross0.json' '$T/cross1.json'"
    done
else
    echo "skip tiny architecture models: no torch in $PY"
fi

# bench-offline
"$BIN" bench-offline --model-path "$M" --num-prompts 4 --random-input-len 16 --random-output-len 48 --threads 1 \
    --speculative-algorithm NGRAM --result-filename "$T/bench.jsonl" --log-level warning >"$T/bench.txt" 2>>"$T/err"
check "bench-offline: accept length printed and in the JSON line" \
    "grep -q '^Accept length:' '$T/bench.txt' && '$PY' -c 'import json,sys; o=json.loads(open(sys.argv[1]).readline()); assert o[\"speculative_algorithm\"]==\"NGRAM\" and o[\"accept_length\"]>=1.0, o' '$T/bench.jsonl'"

# bad arguments: exit 2 with the reason
bad() {  # bad NAME PATTERN ARGS...
    local name=$1 pat=$2
    shift 2
    "$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/bad.jsonl" "$@" >"$T/bad.out" 2>&1
    local rc=$?
    check "bad args: $name (exit 2, message)" "[ $rc -eq 2 ] && grep -q -- '$pat' '$T/bad.out'"
}
bad "EAGLE without a head" "speculative-algorithm EAGLE needs --speculative-draft-model-path" --speculative-algorithm EAGLE
bad "EAGLE3 without a head" "speculative-algorithm EAGLE3 needs --speculative-draft-model-path" --speculative-algorithm EAGLE3
bad "unknown algorithm" "speculative-algorithm" --speculative-algorithm FOO
bad "min window > max window" "min-match-window-size (13) must be less than or equal" \
    --speculative-algorithm NGRAM --speculative-ngram-min-match-window-size 13
bad "max window >= trie depth" "must be less than --speculative-ngram-max-trie-depth (8)" \
    --speculative-algorithm NGRAM --speculative-ngram-max-trie-depth 8
bad "num draft tokens 0" "num-draft-tokens must be between 1 and 64" \
    --speculative-algorithm NGRAM --speculative-num-draft-tokens 0
bad "min breadth 0" "min-bfs-breadth must be greater than 0" \
    --speculative-algorithm NGRAM --speculative-ngram-min-bfs-breadth 0
bad "match type" "match-type" --speculative-algorithm NGRAM --speculative-ngram-match-type DFS
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/bad.jsonl" --speculative-algorithm STANDALONE \
    --speculative-draft-model-path "$ROOT/build/tiny-models/llama3/f32" >"$T/bad.out" 2>&1
rc=$?
if [ -d "$ROOT/build/tiny-models/llama3/f32" ]; then
    check "bad args: STANDALONE draft of another vocabulary (start-up error)" \
        "[ $rc -ne 0 ] && grep -q 'vocabulary (512 tokens) differs from the target' '$T/bad.out'"
fi
bad "STANDALONE without a draft path" "STANDALONE needs --speculative-draft-model-path" --speculative-algorithm STANDALONE
bad "STANDALONE missing draft path" "no such file or directory" --speculative-algorithm STANDALONE \
    --speculative-draft-model-path /nonexistent/draft
bad "STANDALONE with --tp-size 2" "STANDALONE with --tp-size > 1 is not supported" --speculative-algorithm STANDALONE \
    --speculative-draft-model-path "$M" --tp-size 2
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/bad.jsonl" --speculative-algorithm STANDALONE \
    --speculative-draft-model-path "$M" --speculative-draft-model-quantization bogus >"$T/bad.out" 2>&1
rc=$?
check "bad args: unknown draft quantization (start-up error)" \
    "[ $rc -ne 0 ] && grep -q 'the draft model did not load' '$T/bad.out'"
bad "capacity" "speculative-ngram-capacity must be greater" --speculative-algorithm NGRAM --speculative-ngram-capacity 3
"$BIN" serve --model-path "$M" --speculative-algorithm NEXTN >"$T/bad.out" 2>&1
rc=$?
check "serve refuses NEXTN without a head before loading (exit 2)" "[ $rc -eq 2 ] && grep -q 'NEXTN needs --speculative-draft-model-path' '$T/bad.out'"

# serve: /generate meta_info and /metrics
if command -v curl >/dev/null; then
    if server_start "$T/log" --model-path "$M" --threads 1 --speculative-algorithm NGRAM --enable-metrics; then
        body=$("$PY" -c 'import json; print(json.dumps({"input_ids": [1] + [(k % 7) * 37 + 3 for k in range(40)], "sampling_params": {"max_new_tokens": 48, "temperature": 0, "ignore_eos": True}}))')
        curl -s "$SERVER_URL/generate" -H 'Content-Type: application/json' -d "$body" >"$T/g.json"
        check "serve: /generate meta_info has spec_verify_ct and an accept length > 1" \
            "'$PY' -c 'import json,sys; m=json.load(open(sys.argv[1]))[\"meta_info\"]; assert m[\"spec_verify_ct\"]>0 and m[\"spec_accept_length\"]>1.0, m' '$T/g.json'"
        curl -s "$SERVER_URL/metrics" >"$T/m.txt"
        check "serve: /metrics sglang:spec_accept_length > 1" \
            "awk '/^sglang:spec_accept_length\\{/ {v=\$NF} END {exit !(v > 1.0)}' '$T/m.txt'"
        server_stop TERM
    else
        echo "FAIL serve did not start:"; tail -5 "$T/log"; fails=$((fails + 1))
    fi
fi

# session 5 arguments: thresholds at their default 1.0 keep the exact
# output, above 1 refused with the range; GPU-kernel rows accepted with
# the no-effect warning and identical output; bench-one-batch refuses spec
# with a pointer to bench-offline; the draft revision goes through the hub
# cache (offline): the right ref loads, another one is a start-up error
gen "$M" "$T/th.jsonl" --speculative-algorithm NGRAM --speculative-accept-threshold-single 1.0 \
    --speculative-accept-threshold-acc 1.0 --speculative-attention-mode decode --speculative-moe-runner-backend triton \
    --speculative-moe-a2a-backend deepep --speculative-draft-attention-backend fa3
check "thresholds 1.0 + GPU-only rows: identical, accept length > 1" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/th.jsonl' need"
check "GPU-only rows warned as no-effect" "grep -q 'no effect.*--speculative-moe-runner-backend' '$T/err'"
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/bad.jsonl" --speculative-algorithm NGRAM \
    --speculative-accept-threshold-acc 1.5 >/dev/null 2>"$T/e1"; rc=$?
check "threshold 1.5: exit 2 with the range (below 1: test_spec_threshold.sh)" "[ $rc -eq 2 ] && grep -q 'threshold-acc must be in (0, 1], got 1.5' '$T/e1'"
"$BIN" bench-one-batch --model-path "$M" --speculative-algorithm NGRAM >/dev/null 2>"$T/e2"; rc=$?
check "bench-one-batch NGRAM: exit 2 pointing to bench-offline" "[ $rc -eq 2 ] && grep -q 'use bench-offline --speculative-algorithm NGRAM' '$T/e2'"
S=0123456789abcdef0123456789abcdef01234567; HC=$T/hf/hub/models--t--ts
mkdir -p "$HC/refs" "$HC/snapshots/$S" && cp "$M"/* "$HC/snapshots/$S/" && printf %s $S >"$HC/refs/myrev"
for rev in myrev other; do
    env -u HF_HUB_CACHE HF_HUB_OFFLINE=1 HF_HOME="$T/hf" "$BIN" generate --model-path "$M" --requests "$T/req.jsonl" \
        --output "$T/rev.$rev.jsonl" --threads 1 --skip-tokenizer-init --log-level warning --speculative-algorithm STANDALONE \
        --speculative-draft-model-path t/ts --speculative-draft-model-revision $rev >/dev/null 2>"$T/e.$rev"; eval rc_$rev=$?
done
check "draft revision myrev from the hub cache: identical, accept length > 1" "[ $rc_myrev -eq 0 ] && '$PY' -c '$cmp_py' '$T/p.jsonl' '$T/rev.myrev.jsonl' need"
check "draft revision other: start-up error naming it" "[ $rc_other -ne 0 ] && grep -q \"revision 'other' is not in the cache\" '$T/e.other'"

[ $fails -eq 0 ] || { echo "--- stderr:"; tail -20 "$T/err"; exit 1; }
echo "all spec CLI checks passed"
