#!/usr/bin/env bash
# --speculative-token-map (SGLang's FR-Spec hot vocabulary) with EAGLE /
# NEXTN heads, through `sglc generate --requests` on TinyStories-656K with
# the random heads of tests/ref/eagle_ref.py; the map files are written
# here with torch.save (Debian's python3-torch), never committed:
# - greedy output_ids identical to plain decoding with a map of the tokens
#   the text uses (int64 tensor), the same map as an int32 tensor, as a
#   list, a view of a bigger tensor, with NEXTN, under --dp-size 2;
# - maps of the output's 1 and 4 most frequent tokens: every draft is one
#   of them, so drafts are accepted (> 0) where the text has them (the
#   random head alone, or over all 62 used tokens, gets none) — the map is
#   applied;
# - EAGLE3 (heads with d2t): ignored with a warning, output identical;
# - the log says the draft's LM head is cut to the map's rows;
# - --help lists the flag as supported;
# - usage errors before the model loads (exit 2, naming the file): a
#   missing file, a float tensor, a 2-D tensor, a dict, a legacy-format
#   file, a text file; the flag with STANDALONE / NGRAM;
# - start-up errors after it loads: an id outside the vocabulary, a
#   duplicate id.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$M/model.safetensors" ] || { echo "skip: $M not found"; exit 77; }
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "skip: $PY with torch and numpy not found"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
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

gen() {  # gen OUT [args...]
    local out=$1
    shift
    "$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$out" --threads 1 --skip-tokenizer-init \
        --log-level warning "$@" 2>>"$T/err"
}
: >"$T/err"
gen "$T/p.jsonl"

# the maps, from the plain output
"$PY" - "$T" <<'PYEOF'
import collections, json, sys, torch
t = sys.argv[1]
outs = [json.loads(l)["output_ids"] for l in open(t + "/p.jsonl")]
used = sorted({x for o in outs for x in o})
torch.save(torch.tensor(used), t + "/used.pt")                               # int64
torch.save(torch.tensor(used, dtype=torch.int32), t + "/used32.pt")
torch.save(list(reversed(used)), t + "/used_list.pt")                       # a list, another order
torch.save(torch.tensor([0] * 5 + used + [1] * 3)[5:5 + len(used)], t + "/used_view.pt")  # offset view
top = collections.Counter(x for o in outs for x in o[1:]).most_common(1)[0][0]
torch.save(torch.tensor([top]), t + "/top.pt")
top4 = [x for x, _ in collections.Counter(x for o in outs for x in o[1:]).most_common(4)]
torch.save(torch.tensor(top4), t + "/top4.pt")
# refused ones
torch.save(torch.tensor([1.0, 2.0]), t + "/float.pt")
torch.save(torch.tensor([[1, 2], [3, 4]]), t + "/twod.pt")
torch.save({"hot": torch.tensor([1, 2])}, t + "/dict.pt")
torch.save(torch.tensor([1, 2, 3]), t + "/legacy.pt", _use_new_zipfile_serialization=False)
open(t + "/text.pt", "w").write("1 2 3\n")
torch.save(torch.tensor([1, 2, 2048]), t + "/range.pt")
torch.save(torch.tensor([5, 9, 5]), t + "/dup.pt")
print("map of %d used tokens; most frequent output token %d" % (len(used), top))
PYEOF

cmp_py='
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 4, (len(a), len(b))
acc = 0
for x, y in zip(a, b):
    assert x["output_ids"] == y["output_ids"], (x["output_ids"], y["output_ids"])
    m = y["meta_info"]
    assert m["spec_verify_ct"] + m["spec_accept_token_num"] == len(y["output_ids"]) - 1, m
    acc += m["spec_accept_token_num"]
assert sum(json.loads(l)["meta_info"]["spec_draft_token_num"] for l in open(sys.argv[2])) > 0, "no drafts"
open(sys.argv[3], "w").write(str(acc))
'
same() {  # same NAME OUT: identical to the plain output; accepted drafts into OUT.acc
    check "$1" "'$PY' -c '$cmp_py' '$T/p.jsonl' '$2' '$2.acc'"
}
gen "$T/e0.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1"
same "EAGLE without a map: identical" "$T/e0.jsonl"
gen "$T/e1.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" --speculative-token-map "$T/used.pt"
same "EAGLE + map of the used tokens (int64): identical" "$T/e1.jsonl"
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/e1i.jsonl" --threads 1 --skip-tokenizer-init \
    --log-level info --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" --speculative-token-map "$T/used.pt" \
    2>"$T/info.log"
check "the draft's LM head cut to the map's rows (log)" "grep -q 'token map: [0-9]* of 2048 ids; the draft.s LM head is cut to them' '$T/info.log'"
gen "$T/e2.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" --speculative-token-map "$T/used32.pt"
same "EAGLE + the map as int32: identical" "$T/e2.jsonl"
check "int32 map: the same accepted drafts as int64" "cmp -s '$T/e1.jsonl.acc' '$T/e2.jsonl.acc'"
gen "$T/e3.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" --speculative-token-map "$T/used_list.pt"
same "EAGLE + the map as a list (reversed): identical" "$T/e3.jsonl"
gen "$T/e4.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" --speculative-token-map "$T/used_view.pt"
same "EAGLE + the map as a view at an offset: identical" "$T/e4.jsonl"
gen "$T/top.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" --speculative-token-map "$T/top.pt"
same "EAGLE + a one-token map: identical" "$T/top.jsonl"
gen "$T/top4.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" --speculative-token-map "$T/top4.pt"
same "EAGLE + a map of the 4 most used tokens: identical" "$T/top4.jsonl"
echo "     accepted drafts: no map $(cat "$T/e0.jsonl.acc"), all used tokens $(cat "$T/e1.jsonl.acc"), 4 most used $(cat "$T/top4.jsonl.acc"), the most used $(cat "$T/top.jsonl.acc")"
check "one-token map: drafts accepted (> 0), more than without a map" \
    "[ \$(cat '$T/top.jsonl.acc') -gt 0 ] && [ \$(cat '$T/top.jsonl.acc') -gt \$(cat '$T/e0.jsonl.acc') ]"
check "4-token map: drafts accepted (> 0)" "[ \$(cat '$T/top4.jsonl.acc') -gt 0 ]"
gen "$T/nx.jsonl" --speculative-algorithm NEXTN --speculative-draft-model-path "$H1" --speculative-num-steps 5 \
    --speculative-token-map "$T/used.pt"
same "NEXTN (= EAGLE), 5 steps + map: identical" "$T/nx.jsonl"
gen "$T/dp.jsonl" --threads 2 --dp-size 2 --speculative-algorithm EAGLE --speculative-draft-model-path "$H1" \
    --speculative-token-map "$T/top.pt"
same "EAGLE + map under --dp-size 2 (a map per replica): identical" "$T/dp.jsonl"
: >"$T/err"
gen "$T/x3.jsonl" --speculative-algorithm EAGLE3 --speculative-draft-model-path "$H3" --speculative-token-map "$T/top.pt"
same "EAGLE3 + map: identical" "$T/x3.jsonl"
check "EAGLE3 + map: ignored with a warning (the head has d2t)" "grep -q 'speculative-token-map .*is ignored: EAGLE3 heads carry their own token map' '$T/err'"
"$BIN" serve --help >"$T/help.txt" 2>&1
check "--help: the flag listed with its EAGLE3 rule" \
    "grep -A8 -- '--speculative-token-map' '$T/help.txt' | tr -s ' \\n' '  ' | grep -q 'Ignored with a warning for EAGLE3'"

usage() {  # usage NAME PATTERN ARGS...: exit 2 before the model loads
    local name=$1 pat=$2
    shift 2
    : >"$T/err"
    gen "$T/bad.jsonl" "$@"
    local rc=$?
    check "$name (exit 2, message)" "[ $rc -eq 2 ] && grep -q -- \"\$pat\" '$T/err'" || cat "$T/err"
}
E1="--speculative-algorithm EAGLE --speculative-draft-model-path $H1"
usage "missing map file" "speculative-token-map $T/none.pt: No such file" $E1 --speculative-token-map "$T/none.pt"
usage "float tensor" "speculative-token-map $T/float.pt: .*FloatStorage" $E1 --speculative-token-map "$T/float.pt"
usage "2-D tensor" "speculative-token-map $T/twod.pt: the tensor has 2 dimensions" $E1 --speculative-token-map "$T/twod.pt"
usage "a dict" "speculative-token-map $T/dict.pt: the file holds a dict" $E1 --speculative-token-map "$T/dict.pt"
usage "legacy torch.save format" "speculative-token-map $T/legacy.pt: a legacy" $E1 --speculative-token-map "$T/legacy.pt"
usage "a text file" "speculative-token-map $T/text.pt: not a torch.save file" $E1 --speculative-token-map "$T/text.pt"
usage "with STANDALONE" "applies to --speculative-algorithm EAGLE / NEXTN heads, not STANDALONE" \
    --speculative-algorithm STANDALONE --speculative-draft-model-path "$M" --speculative-token-map "$T/used.pt"
usage "with NGRAM" "applies to --speculative-algorithm EAGLE / NEXTN heads, not NGRAM" \
    --speculative-algorithm NGRAM --speculative-token-map "$T/used.pt"
startup() {  # startup NAME PATTERN ARGS...: fails after the model loads
    local name=$1 pat=$2
    shift 2
    : >"$T/err"
    gen "$T/bad.jsonl" "$@"
    local rc=$?
    check "$name (exit $rc, message)" "[ $rc -ne 0 ] && grep -q -- \"\$pat\" '$T/err'" || cat "$T/err"
}
startup "id outside the vocabulary" "speculative-token-map $T/range.pt: token map entry 2 is 2048, outside the target's vocabulary of 2048" \
    $E1 --speculative-token-map "$T/range.pt"
startup "duplicate id" "speculative-token-map $T/dup.pt: token map entry 2 repeats token id 5" \
    $E1 --speculative-token-map "$T/dup.pt"

[ "$fails" -eq 0 ] && echo "test_spec_tokmap: all passed" || echo "test_spec_tokmap: $fails failed"
[ "$fails" -eq 0 ]
