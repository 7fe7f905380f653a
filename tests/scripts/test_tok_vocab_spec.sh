#!/usr/bin/env bash
# GGUF-style vocabularies (tok_vocab_spec) against tok_load_dir on the real
# tokenizers, over the shared >= 5,000-string corpus (tests/js/corpus.mjs)
# plus the generated one in build/tests/test_tok_vocab_spec.
# Exit 77 (skip) when node, the shared models or the build are missing.
set -euo pipefail
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BUILD=${BUILD:-build}
cd "$ROOT"
command -v node >/dev/null || { echo "skip: node is not installed"; exit 77; }
[ -f "$SHARED/models/tokenizers/qwen3/tokenizer.json" ] || { echo "skip: no tokenizers under $SHARED/models"; exit 77; }
[ -x "$BUILD/tests/test_tok_vocab_spec" ] || { echo "skip: build first (make)"; exit 77; }
CORPUS="$ROOT/$BUILD/tok-vocab-spec-corpus.hex"
if [ ! -f "$CORPUS" ] || [ tests/js/corpus.mjs -nt "$CORPUS" ]; then
  (cd tests/js && node --input-type=module -e "
import { generateCorpus } from './corpus.mjs';
const out = generateCorpus().map((b) => Buffer.from(b).toString('hex')).join('\n') + '\n';
process.stdout.write(out);" > "$CORPUS.tmp")
  mv "$CORPUS.tmp" "$CORPUS"
fi
n=$(wc -l < "$CORPUS")
[ "$n" -ge 5000 ] || { echo "corpus has only $n strings"; exit 1; }
SGLC_TOK_CORPUS="$CORPUS" SGLC_SHARED="$SHARED" "$BUILD/tests/test_tok_vocab_spec"
echo "tok_vocab_spec: all six tokenizers agree with tok_load_dir on $n + generated strings"
