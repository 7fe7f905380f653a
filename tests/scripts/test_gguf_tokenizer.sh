#!/usr/bin/env bash
# GGUF tokenizers: every real tokenizer folder under ../shared/models
# (tokenizers/* and TinyStories-656K) written to GGUF by `sglc quantize
# --vocab-only` (tokenizer.ggml.*: gpt2 BPE with merges and the pre-tokenizer
# name, or SentencePiece-style with scores), read back through the GGUF
# vocabulary loader, encodes a mixed corpus (English, code, digits, CJK,
# emoji, whitespace runs, special tokens; with and without special tokens)
# to the same ids as the folder's tokenizer.json through sglc's HF tokenizer
# (itself checked against Hugging Face by test_tokenizer_hf.sh), and decodes
# them back to the same text.  gemma3's tokenizer (a Replace normalizer, no
# Prepend) is refused by the converter, as the message says; that is checked
# too.  Skips (77) when the build cannot read a GGUF tokenizer yet.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "skip: $BIN not built"; exit 77; }
[ -f "$SHARED/models/tokenizers/qwen3/tokenizer.json" ] || { echo "skip: no tokenizers under $SHARED/models"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
TS="$SHARED/models/TinyStories-656K"
"$BIN" quantize --vocab-only --model-path "$TS" --output "$T/probe.gguf" 2>"$T/err" ||
    { echo "FAIL: quantize --vocab-only: $(tail -1 "$T/err")"; exit 1; }
if ! echo '{"text":"hi"}' | "$BIN" tokenize --tokenizer-path "$T/probe.gguf" >/dev/null 2>"$T/err"; then
    grep -q "not supported yet" "$T/err" && { echo "skip: this build reads no GGUF tokenizer ($(head -c 120 "$T/err"))"; exit 77; }
    echo "FAIL: tokenize on a GGUF: $(tail -1 "$T/err")"; exit 1
fi
"$PY" - "$T/corpus.jsonl" <<'EOF'
import json, sys
texts = [
    "Hello, world!", "Once upon a time, there was a little girl named Lily.",
    "  leading and trailing spaces  ", "tabs\tand\nnewlines\r\n\n\nend",
    "numbers 1 12 123 1234 12345 3.14159 -42 1e10", "don't you'll we've I'm they're it's",
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; i++) { a[i] += b[i]; }",
    "日本語のテキストと中文文本混合", "Ünïcödé çàfé naïve résumé", "emoji 🙂🚀👍🏽 and ⚡",
    "URL https://example.com/a?b=c&d=e#f", "   ", "a", "", "repeated !!!!!! ?????? ......",
    "MiXeD CaSe WoRdS", "<s> literal special-looking </s> <|im_start|>user<|im_end|>",
    "the quick brown fox jumps over the lazy dog " * 4, "x" * 300, "Zażółć gęślą jaźń",
    "Привет, как дела?", "مرحبا بالعالم", "สวัสดีครับ", "\u00a0nbsp\u2003emspace", "a\u0301 combining",
]
with open(sys.argv[1], "w") as f:
    for t in texts:
        for sp in (True, False):
            f.write(json.dumps({"text": t, "add_special_tokens": sp}, ensure_ascii=False) + "\n")
EOF
fails=0
n_ok=0
for d in "$SHARED"/models/tokenizers/*/ "$TS/"; do
    name=$(basename "$d")
    if ! "$BIN" quantize --vocab-only --model-path "$d" --output "$T/$name.gguf" 2>"$T/err"; then
        if [ "$name" = gemma3 ] && grep -q "neither byte-level nor SentencePiece-style" "$T/err"; then
            echo "ok   $name: refused by the converter ($(tail -1 "$T/err" | cut -c1-100)...)"
        else
            echo "FAIL $name: quantize --vocab-only: $(tail -1 "$T/err")"; fails=$((fails + 1))
        fi
        continue
    fi
    "$BIN" tokenize --tokenizer-path "$d" <"$T/corpus.jsonl" >"$T/a.ids" 2>"$T/a.err"
    if ! "$BIN" tokenize --tokenizer-path "$T/$name.gguf" <"$T/corpus.jsonl" >"$T/b.ids" 2>"$T/b.err"; then
        echo "FAIL $name: GGUF tokenizer: $(tail -1 "$T/b.err")"; fails=$((fails + 1)); continue
    fi
    if ! cmp -s "$T/a.ids" "$T/b.ids"; then
        echo "FAIL $name: ids differ on $(diff "$T/a.ids" "$T/b.ids" | grep -c '^<') of $(wc -l <"$T/a.ids") lines:"
        diff "$T/a.ids" "$T/b.ids" | head -4 | cut -c1-200
        fails=$((fails + 1)); continue
    fi
    "$PY" -c 'import json,sys
for l in open(sys.argv[1]): print(json.dumps({"ids": json.loads(l)["ids"], "skip_special_tokens": False}))' "$T/a.ids" >"$T/ids.jsonl"
    "$BIN" detokenize --tokenizer-path "$d" <"$T/ids.jsonl" >"$T/a.txt" 2>/dev/null
    "$BIN" detokenize --tokenizer-path "$T/$name.gguf" <"$T/ids.jsonl" >"$T/b.txt" 2>"$T/b.err"
    if cmp -s "$T/a.txt" "$T/b.txt" && [ -s "$T/a.txt" ]; then
        echo "ok   $name: $(wc -l <"$T/a.ids") encodes and their decodes identical through the GGUF vocabulary"
        n_ok=$((n_ok + 1))
    else
        echo "FAIL $name: decodes differ: $(diff "$T/a.txt" "$T/b.txt" | head -3 | cut -c1-160)"; fails=$((fails + 1))
    fi
done
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all GGUF tokenizer checks passed ($n_ok tokenizers)"
