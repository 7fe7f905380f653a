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
#   weights, the other EAGLE version; usage errors (exit 2): topk 0 / 17,
#   STANDALONE topk 2, no head path (--speculative-token-map: test_spec_tokmap.sh);
# - trees (--speculative-eagle-topk > 1) with a head fitted to the target
#   (eagle_ref.py fit_head, so drafts are accepted): SGLang's defaults for
#   a Llama target, topk 2..4, page 16 (trees, same accepted count as page 1), EAGLE3 topk 3 with chunked
#   prefill, tiny llama3 / mistral-sw / qwen3 / qwen2 / qwen3-moe / mixtral /
#   granitemoe / llama-bias / deepseek-v2-lite (MLA) / qwen2-moe / gemma3 / phi4-mini (random heads): ids
#   identical, drafts accepted (fitted head), trees verified; SGLang's
#   other default (3, 1, 4) for a target that is not LlamaForCausalLM.
# The heads but eagle1_fit are random: their drafts are almost never right.
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

# trees (topk > 1) with the head fitted to the target (drafts accepted): SGLang's
# defaults for a LlamaForCausalLM target (5 steps, topk 4, 8 draft tokens), topk 2..4,
# batch, page 1 and 16 (trees verified at both), EAGLE3 topk 3; tiny models below
acc_py='
import json, sys
b = [json.loads(l) for l in open(sys.argv[1])]
acc = sum(y["meta_info"]["spec_accept_token_num"] for y in b)
assert acc > 0, "no draft accepted"
print(acc)
'
HF=$T/h/eagle1_fit  # fitted to the plain greedy outputs of req.jsonl (eagle_ref.py fit)
"$PY" -c 'import json,sys; r=[json.loads(l)["input_ids"] for l in open(sys.argv[1])]; o=[json.loads(l)["output_ids"] for l in open(sys.argv[2])]; json.dump([a+b for a,b in zip(r,o)], open(sys.argv[3],"w"))' \
    "$T/req.jsonl" "$T/p.jsonl" "$T/seqs.json" && "$PY" "$ROOT/tests/ref/eagle_ref.py" fit "$HF" "$M" "$T/seqs.json" ||
    { echo "FAIL fitting the head"; fails=$((fails + 1)); }
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/td.jsonl" --threads 1 --skip-tokenizer-init \
    --log-level info --speculative-algorithm EAGLE --speculative-draft-model-path "$HF" 2>"$T/td.err"
check "EAGLE defaults on a Llama target: SGLang's 5 steps, topk 4, 8 draft tokens (a tree)" \
    "grep -q 'draft trees of up to 7 nodes (5 steps, topk 4' '$T/td.err'"
trees() { sed -n 's/.*speculative: .* \([0-9][0-9]*\) tree verifies.*/\1/p' "$1" | tail -1; }
check "EAGLE defaults (tree): identical, $(trees "$T/td.err") tree verifies, accepted $("$PY" -c "$acc_py" "$T/td.jsonl")" \
    "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/td.jsonl' && '$PY' -c '$acc_py' '$T/td.jsonl' >/dev/null && [ \"\$(trees '$T/td.err')\" -gt 0 ]"
gen "$T/tc.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$HF" --speculative-num-steps 5 \
    --speculative-eagle-topk 1
echo "     (chain, 5 steps: accepted $("$PY" -c "$acc_py" "$T/tc.jsonl" 2>/dev/null))"
for k in 2 3 4; do
    gen "$T/t$k.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$HF" --speculative-num-steps 4 \
        --speculative-eagle-topk $k --speculative-num-draft-tokens 7
    check "EAGLE topk $k (4 steps, 7 draft tokens): identical, accepted $("$PY" -c "$acc_py" "$T/t$k.jsonl" 2>/dev/null)" \
        "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/t$k.jsonl' && '$PY' -c '$acc_py' '$T/t$k.jsonl' >/dev/null"
    gen "$T/t${k}p.jsonl" --page-size 16 --speculative-algorithm EAGLE --speculative-draft-model-path "$HF" \
        --speculative-num-steps 4 --speculative-eagle-topk $k --speculative-num-draft-tokens 7
    # page 16 verifies the same trees (KV and capture rows copied into place): the same accepted count
    a1=$("$PY" -c "$acc_py" "$T/t$k.jsonl" 2>/dev/null); a16=$("$PY" -c "$acc_py" "$T/t${k}p.jsonl" 2>/dev/null)
    check "EAGLE topk $k, page 16 (trees): identical, accepted $a16 = page 1's $a1" \
        "'$PY' -c '$cmp_py' '$T/pp.jsonl' '$T/t${k}p.jsonl' && [ -n '$a16' ] && [ '$a16' = '$a1' ]"
done
"$PY" -c 'import json,sys,torch; ids=sorted({t for l in open(sys.argv[1]) for t in json.loads(l)["output_ids"]}); torch.save(torch.tensor(ids, dtype=torch.int64), sys.argv[2])' \
    "$T/p.jsonl" "$T/hot.pt"
gen "$T/tm.jsonl" --speculative-algorithm EAGLE --speculative-draft-model-path "$HF" --speculative-num-steps 4 \
    --speculative-eagle-topk 3 --speculative-num-draft-tokens 7 --speculative-token-map "$T/hot.pt"
check "EAGLE topk 3 with --speculative-token-map (the output's tokens): identical, accepted $("$PY" -c "$acc_py" "$T/tm.jsonl" 2>/dev/null)" \
    "'$PY' -c '$cmp_py' '$T/p.jsonl' '$T/tm.jsonl' && '$PY' -c '$acc_py' '$T/tm.jsonl' >/dev/null"
gen "$T/t3e3.jsonl" --speculative-algorithm EAGLE3 --speculative-draft-model-path "$H3" --speculative-num-steps 3 \
    --speculative-eagle-topk 3 --speculative-num-draft-tokens 8 --chunked-prefill-size 16 --enable-mixed-chunk
check "EAGLE3 topk 3, chunked 16 + mixed: identical" "'$PY' -c '$cmp_py' '$T/pc.jsonl' '$T/t3e3.jsonl'"
printf '%s\n' '{"input_ids": [1, 45, 99, 12, 45, 99, 12, 45, 99, 12, 45, 99], "sampling_params": {"max_new_tokens": 40, "temperature": 0, "ignore_eos": true}}' \
    '{"input_ids": [1, 7, 300, 7, 300, 7, 300, 7, 300], "sampling_params": {"max_new_tokens": 40, "temperature": 1, "sampling_seed": 3, "ignore_eos": true}}' \
    >"$T/tiny.jsonl"
TINY=$ROOT/build/tiny-models  # tests/ref/make_tiny_model.py (cached there, as test_arch_logits.sh)
"$PY" "$ROOT/tests/ref/make_tiny_model.py" --out "$TINY" --only llama3,mistral-sw,qwen3,qwen2,qwen3-moe,mixtral,granitemoe,llama-bias >/dev/null 2>>"$T/err" ||
    echo "skip: tiny models not made"
# the other families' tiny models: DeepSeek V2-Lite (MLA) and Qwen2-MoE
# (tests/ref/make_tiny_ds.py), Gemma 3 (tests/ref/gemma_ref.py)
"$PY" "$ROOT/tests/ref/make_tiny_ds.py" --out "$TINY" --only deepseek-v2-lite,qwen2-moe >/dev/null 2>>"$T/err" ||
    echo "skip: make_tiny_ds failed"
GEMMA3=$("$PY" -c 'import sys, os; sys.path.insert(0, sys.argv[1]); import gemma_ref; print(os.path.join(gemma_ref.build("gemma3", sys.argv[2])[0], "f32"))' \
    "$ROOT/tests/ref" "$TINY" 2>>"$T/err" | tail -1)
PHI4=$("$PY" -c 'import sys, os; sys.path.insert(0, sys.argv[1]); import phi3_ref; print(os.path.join(phi3_ref.build("phi4-mini", sys.argv[2], sys.argv[3]), "f32"))' \
    "$ROOT/tests/ref" "$TINY" "$SHARED" 2>>"$T/err" | tail -1)
for arch in llama3 mistral-sw qwen3 qwen2 qwen3-moe mixtral granitemoe llama-bias deepseek-v2-lite qwen2-moe gemma3 phi4-mini; do
    TM=$TINY/$arch/f32
    [ "$arch" = gemma3 ] && TM=$GEMMA3
    [ "$arch" = phi4-mini ] && TM=$PHI4
    [ -d "$TM" ] || { echo "skip tiny $arch (no $TM)"; continue; }
    "$PY" "$ROOT/tests/ref/eagle_ref.py" make "$T/h-$arch" "$TM" || { check "tiny $arch: heads" false; continue; }
    "$BIN" generate --model-path "$TM" --requests "$T/tiny.jsonl" --output "$T/tp-$arch.jsonl" --threads 1 \
        --skip-tokenizer-init --log-level warning 2>>"$T/err"
    "$BIN" generate --model-path "$TM" --requests "$T/tiny.jsonl" --output "$T/tt-$arch.jsonl" --threads 1 \
        --skip-tokenizer-init --speculative-algorithm EAGLE --speculative-draft-model-path "$T/h-$arch/eagle1" \
        --speculative-num-steps 4 --speculative-eagle-topk 3 --speculative-num-draft-tokens 8 2>"$T/tt-$arch.err"
    check "tiny $arch: EAGLE topk 3 ids = plain ($(trees "$T/tt-$arch.err") tree verifies)" \
        "'$PY' -c 'import json,sys; a=[json.loads(l)[\"output_ids\"] for l in open(sys.argv[1])]; b=[json.loads(l)[\"output_ids\"] for l in open(sys.argv[2])]; assert a==b and len(a)==2' '$T/tp-$arch.jsonl' '$T/tt-$arch.jsonl' && [ \"\$(trees '$T/tt-$arch.err')\" -gt 0 ]"
    "$BIN" generate --model-path "$TM" --requests "$T/tiny.jsonl" --output "$T/tt16-$arch.jsonl" --threads 1 \
        --skip-tokenizer-init --page-size 16 --speculative-algorithm EAGLE --speculative-draft-model-path "$T/h-$arch/eagle1" \
        --speculative-num-steps 4 --speculative-eagle-topk 3 --speculative-num-draft-tokens 8 2>"$T/tt16-$arch.err"
    check "tiny $arch: EAGLE topk 3, page 16: ids = plain ($(trees "$T/tt16-$arch.err") tree verifies)" \
        "'$PY' -c 'import json,sys; a=[json.loads(l)[\"output_ids\"] for l in open(sys.argv[1])]; b=[json.loads(l)[\"output_ids\"] for l in open(sys.argv[2])]; assert a==b and len(a)==2' '$T/tp-$arch.jsonl' '$T/tt16-$arch.jsonl' && [ \"\$(trees '$T/tt16-$arch.err')\" -gt 0 ]"
done
if [ -d "$TINY/qwen2/f32" ]; then  # not a LlamaForCausalLM: SGLang's other default, (3, 1, 4), a chain
    "$BIN" generate --model-path "$TINY/qwen2/f32" --requests "$T/tiny.jsonl" --output "$T/tq.jsonl" --threads 1 \
        --skip-tokenizer-init --log-level info --speculative-algorithm EAGLE \
        --speculative-draft-model-path "$T/h-qwen2/eagle1" 2>"$T/tq.err"
    check "EAGLE defaults on Qwen2ForCausalLM: 3 draft tokens, topk 1 (a chain), ids = plain" \
        "grep -q '3 draft tokens per step (chain, topk 1' '$T/tq.err' && '$PY' -c 'import json,sys; a=[json.loads(l)[\"output_ids\"] for l in open(sys.argv[1])]; b=[json.loads(l)[\"output_ids\"] for l in open(sys.argv[2])]; assert a==b' '$T/tp-qwen2.jsonl' '$T/tq.jsonl'"
fi

# 8-bit KV caches at page 16: the copied rows carry int8's per-token scales; the same accepted count as page 1
for kvd in int8 fp8_e4m3; do
    gen "$T/kp-$kvd.jsonl" --kv-cache-dtype $kvd
    for pg in 1 16; do
        gen "$T/kt$pg-$kvd.jsonl" --kv-cache-dtype $kvd --page-size $pg --speculative-algorithm EAGLE \
            --speculative-draft-model-path "$HF" --speculative-num-steps 4 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8
    done
    a1=$("$PY" -c "$acc_py" "$T/kt1-$kvd.jsonl" 2>/dev/null); a16=$("$PY" -c "$acc_py" "$T/kt16-$kvd.jsonl" 2>/dev/null)
    check "KV $kvd: EAGLE topk 4 trees at page 1 and 16 = plain, accepted $a16 = $a1" \
        "'$PY' -c '$cmp_py' '$T/kp-$kvd.jsonl' '$T/kt1-$kvd.jsonl' && '$PY' -c '$cmp_py' '$T/kp-$kvd.jsonl' '$T/kt16-$kvd.jsonl' && [ -n '$a16' ] && [ '$a16' = '$a1' ]"
done

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
usage "topk 17" "speculative-eagle-topk must be between 1 and 16 (got 17)" --speculative-algorithm EAGLE \
    --speculative-draft-model-path "$H1" --speculative-eagle-topk 17
usage "topk 0" "speculative-eagle-topk must be between 1 and 16 (got 0)" --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path "$H3" --speculative-eagle-topk 0
usage "STANDALONE topk 2" "speculative-eagle-topk 2 with STANDALONE is not supported" --speculative-algorithm STANDALONE \
    --speculative-draft-model-path "$M" --speculative-eagle-topk 2
usage "missing head path" "no such file or directory" --speculative-algorithm EAGLE3 --speculative-draft-model-path /nonexistent/head

[ "$fails" -eq 0 ] && echo "test_spec_eagle: all passed" || echo "test_spec_eagle: $fails failed"
[ "$fails" -eq 0 ]
