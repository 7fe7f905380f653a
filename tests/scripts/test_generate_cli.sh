#!/usr/bin/env bash
# CLI contract of `sglc generate` and `sglc bench-one-batch` on
# TinyStories-656K: argument errors exit 2 with a message, --json shape,
# --dump-logits size (n_prompt x vocab f32), EOS stop, sampling
# reproducibility with --seed, bench JSON lines.
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

expect_rc() {  # expect_rc NAME RC NEEDLE ARGS...
    local name=$1 want=$2 needle=$3; shift 3
    "$BIN" "$@" >"$T/out" 2>"$T/err"; local rc=$?
    check "$name: exit $want" "[ $rc -eq $want ]"
    check "$name: message mentions '$needle'" "grep -q -- \"$needle\" \"$T/err\""
}

expect_rc "no model path" 2 "--model-path" generate --input-ids 1
expect_rc "unknown flag" 2 "--bogus" generate --model-path "$M" --bogus
expect_rc "bad ids" 2 "--input-ids" generate --model-path "$M" --input-ids 1,x
expect_rc "id outside vocab" 2 "token id" generate --model-path "$M" --input-ids 1,99999
expect_rc "prompt without tokenizer" 2 "needs the tokenizer" generate --model-path "$M" --prompt hi --skip-tokenizer-init
expect_rc "bad tokenizer path" 1 "tokenizer" generate --model-path "$M" --prompt hi --tokenizer-path "$T"
expect_rc "bad dtype" 2 "--dtype" generate --model-path "$M" --dtype int8
expect_rc "bad temperature" 2 "--temperature" generate --model-path "$M" --temperature -1
expect_rc "missing value" 2 "--max-new-tokens expects a value" generate --model-path "$M" --max-new-tokens
expect_rc "missing model dir" 1 "does not exist" generate --model-path "$T/nope" --input-ids 1
mkdir -p "$T/empty"
expect_rc "folder without config" 1 "config.json" generate --model-path "$T/empty" --input-ids 1
expect_rc "bench no batch value" 2 "--batch-size" bench-one-batch --model-path "$M" --batch-size x

# --json shape, greedy from BOS, logits dump
"$BIN" generate --model-path "$M" --input-ids 1,147,201 --max-new-tokens 8 --temperature 0 \
    --json --ignore-eos --dump-logits "$T/l.f32" --threads 2 >"$T/g.json" 2>"$T/err"
check "generate --json exit 0" "[ $? -eq 0 ]"
check "json fields and greedy ids" "$PY - \"$T/g.json\" <<'PYEOF'
import json, sys
o = json.load(open(sys.argv[1]))
m = o['meta_info']
assert o['text'].startswith('upon a time, there was') and o['output_ids'][:4] == [282, 215, 286, 598], o
assert m['prompt_tokens'] == 3 and m['completion_tokens'] == 8
assert m['finish_reason'] == {'type': 'length', 'length': 8}, m
assert m['e2e_latency'] > 0
PYEOF"
# text: greedy from BOS reads as documented in ../shared/models/README.md,
# and "text" is the detokenized output_ids.
"$BIN" generate --model-path "$M" --temperature 0 --max-new-tokens 24 --json >"$T/bos.json" 2>/dev/null
check "greedy text from BOS" "$PY -c \"import json; o=json.load(open('$T/bos.json')); assert o['text'].startswith('Once upon a time, there was a little girl named Lily. She had a toy car'), o['text']\""
"$BIN" detokenize --tokenizer-path "$M" <<<"$($PY -c "import json; print(json.dumps({'ids': json.load(open('$T/bos.json'))['output_ids']}))")" >"$T/detok.json" 2>/dev/null
check "text == detokenize(output_ids)" "$PY -c \"import json; a=json.load(open('$T/bos.json'))['text']; b=json.load(open('$T/detok.json'))['text']; assert a==b, (a,b)\""
# --prompt: encoded like `sglc tokenize`, continued greedily
"$BIN" generate --model-path "$M" --prompt "Once upon a time, there was a cat" --temperature 0 --max-new-tokens 8 --json >"$T/p.json" 2>/dev/null
echo '{"text": "Once upon a time, there was a cat", "add_special_tokens": true}' | "$BIN" tokenize --tokenizer-path "$M" >"$T/tok.json" 2>/dev/null
check "--prompt token count matches tokenize" "$PY -c \"import json; o=json.load(open('$T/p.json')); t=json.load(open('$T/tok.json')); assert o['meta_info']['prompt_tokens']==len(t['ids']) and len(o['output_ids'])==8 and o['text'], (o, t)\""
"$BIN" generate --model-path "$M" --input-ids "$($PY -c "import json; print(','.join(map(str, json.load(open('$T/tok.json'))['ids'])))")" --temperature 0 --max-new-tokens 8 --json >"$T/pi.json" 2>/dev/null
check "--prompt == --input-ids of its tokens" "$PY -c \"import json; a=json.load(open('$T/p.json')); b=json.load(open('$T/pi.json')); assert a['output_ids']==b['output_ids'] and a['text']==b['text']\""
# --requests with "text" lines: tokenized like --prompt, "text" detokenized,
# a matched stop string cut from the text
printf '%s\n' '{"text": "Once upon a time, there was a cat", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}' \
    '{"input_ids": [1, 147], "sampling_params": {"max_new_tokens": 6, "temperature": 0, "stop": ["girl"]}}' >"$T/req.jsonl"
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" >"$T/req.out" 2>/dev/null
check "--requests text line == --prompt" "$PY -c \"import json; a=json.loads(open('$T/req.out').readline()); b=json.load(open('$T/p.json')); assert a['output_ids']==b['output_ids'] and a['text']==b['text'], (a, b)\""
check "--requests stop string trimmed" "$PY -c \"import json; l=open('$T/req.out').read().splitlines(); o=json.loads(l[1]); assert o['meta_info']['finish_reason']=={'type':'stop','matched':'girl'} and 'girl' not in o['text'] and o['text'].endswith('a little '), o\""
check "dump-logits is 3 x 2048 f32" "[ \$(stat -c %s \"$T/l.f32\") -eq $((3 * 2048 * 4)) ]"
check "dump-logits argmax = next ids" "$PY - \"$T/l.f32\" <<'PYEOF'
import sys, numpy as np
l = np.fromfile(sys.argv[1], '<f4').reshape(3, 2048)
assert list(np.argmax(l, 1)) == [147, 201, 282], np.argmax(l, 1)
PYEOF"

# EOS stop: a story ends with <|end_story|> (id 2) well within 400 tokens
"$BIN" generate --model-path "$M" --max-new-tokens 400 --temperature 0 --json --threads 1 >"$T/e.json" 2>/dev/null
check "stops at EOS with matched id" "$PY -c \"import json; o=json.load(open('$T/e.json')); f=o['meta_info']['finish_reason']; assert f=={'type':'stop','matched':2}, f; assert o['output_ids'][-1]==2\""

# sampling: same seed -> same ids; different seed -> (almost surely) different
for s in 1 1 2; do
    "$BIN" generate --model-path "$M" --max-new-tokens 30 --temperature 1.0 --top-p 0.95 --top-k 40 \
        --seed $s --ignore-eos --threads 1 2>/dev/null >>"$T/s.txt"
done
check "seeded sampling is reproducible" "[ \"\$(sed -n 1p $T/s.txt)\" = \"\$(sed -n 2p $T/s.txt)\" ]"
check "another seed samples differently" "[ \"\$(sed -n 1p $T/s.txt)\" != \"\$(sed -n 3p $T/s.txt)\" ]"

# bench-one-batch: one JSON line per run with the documented keys
"$BIN" bench-one-batch --model-path "$M" --batch-size 2 --input-len 16 --output-len 4 \
    --result-filename "$T/r.jsonl" --threads 1 >"$T/b.txt" 2>&1
check "bench exit 0" "[ $? -eq 0 ]"
check "bench prints prefill and median decode" "grep -q '^Prefill. latency' $T/b.txt && grep -q 'median latency' $T/b.txt && grep -q 'GB/s' $T/b.txt"
check "bench JSON line" "$PY -c \"
import json
rows=[json.loads(l) for l in open('$T/r.jsonl')]
assert len(rows)==1
r=rows[0]
for k in ['batch_size','input_len','output_len','prefill_latency','prefill_throughput','median_decode_latency','median_decode_throughput']: assert k in r, k
assert (r['batch_size'],r['input_len'],r['output_len'])==(2,16,4)
\""

# one argument table for every command: --config, help, server-arg checks
printf 'model-path: %s\nthreads_not_an_arg_here: 1\n' "$M" >"$T/bad.yaml"
printf 'model-path: %s\ndtype: float32\n' "$M" >"$T/c.yaml"
"$BIN" generate --config "$T/c.yaml" --input-ids 1,147,201 --max-new-tokens 8 --temperature 0 \
    --json --ignore-eos --threads 2 >"$T/cfg.json" 2>"$T/err"
check "generate --config FILE (model path from YAML) = command line" "$PY -c \"import json; a=json.load(open('$T/cfg.json')); b=json.load(open('$T/g.json')); assert a['output_ids']==b['output_ids']\""
expect_rc "unknown key in --config" 2 "threads_not_an_arg_here" generate --config "$T/bad.yaml" --input-ids 1
expect_rc "server arg bench-one-batch does not use (--enable-metrics)" 2 "--enable-metrics is a server argument this command does not use" bench-one-batch --model-path "$M" --enable-metrics
expect_rc "server arg an offline command has no use for: refused, not ignored" 2 "--api-key is a server argument this command does not use" generate --model-path "$M" --api-key k
expect_rc "--is-embedding is a serve-only argument" 2 "--is-embedding is a server argument this command does not use" bench-offline --model-path "$M" --is-embedding
expect_rc "bad server arg value in bench-offline" 2 "--schedule-policy: invalid choice 'xyz'" bench-offline --model-path "$M" --schedule-policy xyz
expect_rc "bench-serving takes no server args" 2 "unrecognized argument '--max-total-tokens'" bench-serving --max-total-tokens 5
expect_rc "list option bound" 2 "--batch-size must be in" bench-one-batch --model-path "$M" --batch-size 0
for c in generate bench-one-batch bench-offline; do
    "$BIN" $c --help >"$T/h" 2>&1
    check "$c --help: own options, used server args, pointer to serve --help" \
        "grep -q -- '--threads N' $T/h && grep -q -- ' --model-path, --model STR' $T/h && grep -q 'sglc serve --help' $T/h && ! grep -q -- '--enable-metrics' $T/h"
done
"$BIN" bench-offline --help >"$T/h" 2>&1
check "bench-offline --help lists the scheduler args" "grep -q -- ' --schedule-policy {fcfs,lpm,dfs-weight,lof,random}' $T/h && grep -q -- '--gsp-num-groups N' $T/h"
expect_rc "tokenize: table's check on --tokenizer-mode" 2 "--tokenizer-mode: invalid choice 'fast'" tokenize --tokenizer-path "$M" --tokenizer-mode fast
expect_rc "tokenize takes only its server args" 2 "--port is a server argument this command does not use" tokenize --tokenizer-path "$M" --port 3
expect_rc "chat-template needs a template source" 2 "give --tokenizer-path or --chat-template" chat-template --content-format

# cpu-info: every weight type's matmul path on the ISA in use (scalar forced: all scalar)
check "cpu-info names each weight type's matmul" "$BIN cpu-info | grep -q '^weight types (matmul on .*q4_K=.* q6_K=.* iq4_xs='"
check "cpu-info under SGLC_KERNELS=scalar: every type scalar" "[ \"\$(SGLC_KERNELS=scalar $BIN cpu-info | grep '^weight types' | tr ' ' '\n' | grep -c '=')\" -ge 14 ] && [ \"\$(SGLC_KERNELS=scalar $BIN cpu-info | grep '^weight types' | tr ' ' '\n' | grep '=' | grep -vc '=scalar$')\" = 0 ]"
[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
